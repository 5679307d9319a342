"""The indexing pipeline, top to bottom: one ``sync`` brings the index to the folder as it is.

    scan ──> loader ──> chunker ──> extractor ×N ──> gleaner ×N ──> writer (chunks, extractions)
                                                                        │
    ┌───────────────────────────────────────────────────────────────────┘
    └─> changes (chunks that became live or dead) ──> merge ──> summarizer ×N ──> graph
          ──> communities (Leiden from the previous partition) ──> reports ×N, deepest level first
          ──> embeddings ──> publish (one transaction)

The first half streams: bounded memory streams connect the stages, so a slow stage holds back
the ones before it instead of filling memory. Its products are content-addressed and written as
soon as they exist, so an interrupted run loses nothing. The second half works on what changed:
a first index is simply the update from an empty index, which is why an index built over many
updates equals the index built at once. Nothing a query reads changes until ``publish``
replaces the published rows and bumps the version in one transaction.
"""

from __future__ import annotations

import functools
import itertools
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import msgspec

from streamrag import chunker, ids, loader, merge
from streamrag import communities as communities_module
from streamrag.communities import hierarchical_leiden, modularity, relabel
from streamrag.config import Settings
from streamrag.errors import (
    ConfigError,
    EmptyInput,
    InputError,
    LLMError,
    LLMRequestError,
    LLMUnavailableError,
    StoreError,
    StreamragError,
    user_error,
    user_errors_unwrapped,
)
from streamrag.extractor import ExtractionPrompts, extract_chunk, extract_claims, extractor_key
from streamrag.gleaner import glean
from streamrag.graph import neighbour_counts
from streamrag.prompts import load_prompt
from streamrag.records import Chunk, Claim, Community, Document, Entity, Extraction, Relationship, Report
from streamrag.reports import (
    build_context,
    changed_fraction,
    context_key,
    extractive_report,
    llm_report,
)
from streamrag.store import Store
from streamrag.summarizer import extractive_summary, summarize, summarizer_key, summary_input
from streamrag.writer import Writer

_extraction_json = msgspec.json.Encoder()
_extraction_decode = msgspec.json.Decoder(Extraction)
# Updates re-cluster from the previous partition; a fresh clustering checks it for drift once
# this share of the entities has changed since the last check (or on --recluster).
_FRESH_CHECK_SHARE = 0.05
# Published entity degrees are distinct-neighbour counts kept up to date from each run's changes
# (see _GraphState.finish_graph); an index without this mark is recounted once.
_DEGREES_VERSION = "1"
# Documents at least this long are chunked in a worker thread, off the event loop.
_CHUNK_IN_THREAD_CHARS = 200_000
# Bump when what a report context holds changes: every community's context is then rebuilt.
_CONTEXT_VERSION = 2


# --------------------------------------------------------------------------------------------
# Progress and results
# --------------------------------------------------------------------------------------------
class Progress:
    """Counters the stages bump; a display (``progress.py``) reads them. No I/O here."""

    def __init__(self) -> None:
        self.stage = "scanning"
        self.counts: dict[str, int] = defaultdict(int)
        self.totals: dict[str, int] = defaultdict(int)
        self.listeners: list[Callable[[Progress], None]] = []

    def set_stage(self, stage: str) -> None:
        self.stage = stage
        self.changed()

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] += n
        self.changed()

    def total(self, key: str, n: int) -> None:
        self.totals[key] = n
        self.changed()

    def changed(self) -> None:
        for listener in self.listeners:
            listener(self)


class SyncResult(msgspec.Struct):
    run_id: str
    version: int
    docs: int
    docs_added: int
    docs_removed: int
    docs_unchanged: int
    chunks: int
    chunks_extracted: int
    chunks_reused: int
    entities: int
    relationships: int
    claims: int
    communities: int
    reports: int
    reports_generated: int
    reports_kept: int
    reclustered: bool
    failures: int
    warnings: list[str]
    llm: dict
    wall_s: float
    offline: bool
    failed_calls: int = 0   # of ``failures``, those that running again may fix (not unreadable files)


# --------------------------------------------------------------------------------------------
# Stage 1: scan, load, chunk, extract, glean (streaming)
# --------------------------------------------------------------------------------------------
@dataclass
class _Scan:
    """What the folder holds now: path -> (doc id, size, change stamp), per-document facts."""

    files: dict[str, tuple[str, int, float]] = field(default_factory=dict)
    documents: dict[str, Document] = field(default_factory=dict)      # newly read documents
    doc_chunks: dict[str, list[Chunk]] = field(default_factory=dict)  # chunks of new documents
    warnings: list[str] = field(default_factory=list)
    failures: int = 0
    unchanged_paths: int = 0


def _covered(path: str, scope: list[str]) -> bool:
    """Whether the indexed ``path`` (``file`` or ``file#row``) lies under one of ``scope``.

    The root (".") covers what lies inside it, not files stored by absolute path: those came
    from another folder given with it (``index a b``), which ``index a`` leaves as it is."""
    real = path.split("#", 1)[0]
    inside = not (real.startswith("/") or real.startswith("../"))
    return any((s in (".", "") and inside) or real == s or real.startswith(s.rstrip("/") + "/")
               for s in scope)


def _readable(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            f.read(1)
        return True
    except OSError:
        return False


_rel = loader.stored_path  # one naming for what the loader stores and what the scan compares


class Indexer:
    """One sync of ``paths`` into the store at ``db_path``."""

    # Tests set this to check the shortcuts an update takes: communities counted as unchanged
    # have their context built anyway, and a context that did change fails the run (a report
    # left stale would otherwise go unnoticed); splits taken as unchanged are computed anyway,
    # and a partition that differs fails it.
    check_shortcuts = False

    def __init__(self, settings: Settings, db_path: Path, *, root: Path | None,
                 progress: Progress | None = None, command: str = "index", transport=None,
                 recluster: bool = False, graph_cache: GraphCache | None = None) -> None:
        self.settings = settings
        self.graph_cache = graph_cache
        self.recluster = recluster
        self.db_path = db_path
        self.root = root
        self.progress = progress or Progress()
        self.command = command
        self.transport = transport
        self.run_id = time.strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
        self.key = extractor_key(settings)
        ix = settings.index
        self.summarizer_key = summarizer_key(settings)
        self.leiden_key = ids.digest(ix.max_cluster_size, ix.leiden_seed, ix.leiden_resolution)
        self.chunker_key = ids.digest(chunker.VERSION, ix.chunk_size, ix.chunk_overlap, ix.encoding,
                                      loader.VERSION, ix.text_field, length=12)
        self.prompts = None if settings.offline else ExtractionPrompts.load(settings)
        self.failures = 0
        self.failed_calls = 0
        self.unreadable: list[str] = []  # why files could not be indexed, one line each
        self.rechunked_all = True
        self.unavailable = 0
        self.llm = None

    # -- helpers ---------------------------------------------------------------------------
    async def fail(self, writer: Writer, stage: str, item: str, message: str,
                   error: Exception | None = None) -> None:
        """Records one failed item; the run goes on, unless the endpoint is plainly down."""
        if isinstance(error, LLMRequestError) and error.status in (401, 403, 404):
            # A rejected key or an unknown model fails every call alike: stop at the first.
            raise LLMRequestError(f"{error}. Nothing was published; the index is as it was",
                                  error.status) from None
        if isinstance(error, LLMUnavailableError):
            self.unavailable += 1
            if self.unavailable >= 3 and self.progress.counts["chunks_extracted"] == 0:
                raise LLMUnavailableError(
                    f"{error}. Nothing was published; the index is as it was, and a run after the "
                    "fix reuses the finished work") from None
        self.failures += 1
        if stage != "load":  # an unreadable file stays unreadable; a failed call may go next time
            self.failed_calls += 1
        else:
            self.unreadable.append(message)
        self.progress.add("failures")
        await writer.run(lambda s: s.record_failure(self.run_id, stage, item, message))

    def _open_llm(self, store: Store, writer: Writer):
        if self.settings.offline and not self.settings.llm.embedding_model:
            return None
        if not self.settings.llm.api_base and self.settings.index.extractor == "llm":
            source = self.settings.source
            raise ConfigError(f"{source + ': ' if source not in ('', 'defaults') else ''}"
                              "index.extractor = \"llm\" needs an "
                              "endpoint: set llm.api_base (or STREAMRAG_API_BASE / --api-base), or set "
                              "index.extractor to \"auto\" to index offline without one")
        from streamrag.llm import LLMClient

        return LLMClient(self.settings.llm, self.settings.api_key, store=store, writer=writer,
                         run_id=self.run_id, transport=self.transport,
                         encoding=self.settings.index.encoding)

    # -- the run -----------------------------------------------------------------------------
    async def run(self, paths: list[Path]) -> SyncResult:
        """Brings the index to ``paths`` and publishes it."""
        return await self._session(paths, publish=True)

    async def prefetch(self, paths: list[Path]) -> int:
        """Loads, chunks and extracts ``paths`` without publishing (a later ``run`` reuses it all).

        The daemon calls this as files change, so that the sync after a quiet period only
        merges, clusters and reports. Returns the number of chunks extracted now.
        """
        return await self._session(paths, publish=False)

    async def _session(self, paths: list[Path], *, publish: bool):
        with user_errors_unwrapped():
            return await self._session_body(paths, publish=publish)

    async def _session_body(self, paths: list[Path], *, publish: bool):
        started = time.monotonic()
        store = Store(self.db_path)
        try:
            async with Writer(store) as writer:
                await writer.run(lambda s: s.start_run(self.run_id, self.command))
                status = "interrupted"
                try:
                    self.llm = self._open_llm(store, writer)
                    if self.llm is not None:
                        await self.llm.__aenter__()
                    try:
                        if publish:
                            result = await self._sync(store, writer, paths, started)
                        else:
                            await self._stream_stage(store, writer, paths)
                            result = self.progress.counts["chunks_extracted"]
                    finally:
                        if self.llm is not None:
                            with anyio.CancelScope(shield=True):
                                await self.llm.__aexit__(None, None, None)
                    status = "ok"
                    return result
                except StreamragError:
                    status = "failed"
                    raise
                except BaseExceptionGroup as group:
                    if user_error(group) is not None:
                        status = "failed"
                    raise
                finally:
                    with anyio.CancelScope(shield=True):
                        await writer.run(lambda s: s.finish_run(self.run_id, status))
        finally:
            store.close()

    async def _sync(self, store: Store, writer: Writer, paths: list[Path], started: float) -> SyncResult:
        scan = await self._stream_stage(store, writer, paths)
        worked_from = store.version
        change = self._changes(store, scan)
        self.progress.set_stage("merging")
        state = self._graph(store)
        _check_version(store, worked_from)  # the changes and the graph are of one version
        if state.entities and store.get_meta("summarizer") != self.summarizer_key:
            # Summary settings changed since the published index (or it predates the key): every
            # summary is redone (one with a single description costs nothing).
            state.retry_summaries |= set(state.entities) | set(state.relationships)
        summaries_needed = state.apply(store, change, self.settings)
        self.progress.set_stage("summarizing")
        await self._summarize(writer, state, summaries_needed)
        state.finish_graph(store, check=self.check_shortcuts)
        self.progress.set_stage("clustering")
        communities, reclustered, next_id = self._cluster(store, state)
        self.progress.set_stage("reporting")
        assignments, generated, kept = await self._reports(store, writer, state, communities)
        self.progress.set_stage("embedding")
        vectors = await self._embed(store, writer, state, change, assignments)
        self.progress.set_stage("publishing")
        version = await writer.run(_publish, scan, change, state, communities, assignments, self.key,
                                   next_id(), self.chunker_key if self.rechunked_all else None,
                                   self.summarizer_key, vectors, self.root)
        if self.graph_cache is not None:
            self.graph_cache.keep(state.published(store, communities, assignments), store.path)
        llm_stats = self.llm.stats if self.llm is not None else {}
        return SyncResult(
            run_id=self.run_id, version=version, docs=len({d for d, _s, _m in scan.files.values()}),
            docs_added=len(change.added_docs), docs_removed=len(change.removed_docs),
            docs_unchanged=len(change.kept_docs),
            chunks=len(change.live), chunks_extracted=self.progress.counts["chunks_extracted"],
            chunks_reused=self.progress.counts["chunks_reused"], entities=len(state.entities),
            relationships=len(state.relationships), claims=len(state.claims),
            communities=len(communities), reports=len(assignments), reports_generated=generated,
            reports_kept=kept, reclustered=reclustered, failures=self.failures + scan.failures,
            failed_calls=self.failed_calls,
            warnings=self.unreadable + scan.warnings,
            llm=llm_stats, wall_s=round(time.monotonic() - started, 3), offline=self.settings.offline)

    def _graph(self, store: Store) -> _GraphState:
        """The published graph: the one this process published last, if it is still the one
        in the store, else read from the store."""
        cached = self.graph_cache.take(store) if self.graph_cache is not None else None
        if cached is None:
            return _GraphState.load(store)
        if self.check_shortcuts:
            _check_cached(cached, _GraphState.load(store))
        return cached

    def _cluster(self, store: Store, state: _GraphState) -> tuple[list[Community], bool, Callable[[], int]]:
        """Leiden from the previous partition, unless it drifted from what a fresh run finds.

        Starting from the previous partition keeps untouched regions (and their reports) as
        they are. Over many updates that partition could settle in a worse optimum than a fresh
        run would find, so a fresh clustering is computed too (cheap next to any LLM call) and
        replaces it, with ids still matched to the old communities, when its modularity is
        better by more than ``index.recluster_drift`` (or always, with ``--recluster``).
        """
        ix = self.settings.index
        edges = [(r.source, r.target, r.weight) for r in state.relationships.values()]
        counter = [int(store.get_meta("next_community_id", "0") or 0)]
        for c in state.old_communities:
            digits = c.id.lstrip("C")
            if digits.isdigit():
                counter[0] = max(counter[0], int(digits) + 1)

        def new_id() -> str:
            counter[0] += 1
            return f"C{counter[0] - 1}"

        # Splits of communities no change reached are taken as they were (when the previous
        # partition was made with these settings): most of a warm run's time on a large graph.
        changed = None
        if store.get_meta("leiden") == self.leiden_key:
            changed = state.rewired | (set(state.entities) - set(state.old_degree))
            if self.check_shortcuts:
                _check_rewired(store, state, changed)

        def cluster(previous):
            out = hierarchical_leiden(sorted(state.entities), edges, max_cluster_size=ix.max_cluster_size,
                                      seed=ix.leiden_seed, resolution=ix.leiden_resolution,
                                      previous=previous, new_id=new_id, changed=changed)
            if self.check_shortcuts and previous and changed is not None:
                spare = itertools.count()
                full = communities_module.hierarchical_leiden(
                    sorted(state.entities), edges, max_cluster_size=ix.max_cluster_size, seed=ix.leiden_seed,
                    resolution=ix.leiden_resolution, previous=previous, new_id=lambda: f"X{next(spare)}")
                if {(c.level, tuple(c.members)) for c in full} != {(c.level, tuple(c.members)) for c in out}:
                    raise AssertionError("communities taken as unchanged differ from a full warm run")
            return out

        state.leiden_key = self.leiden_key  # published with the partition, whichever path made it
        if not state.old_communities:
            return cluster(None), True, lambda: counter[0]
        since_fresh = int(store.get_meta("changed_since_fresh", "0") or 0)
        state.changed_since_fresh = since_fresh
        if not self.recluster and state.same_graph() and store.get_meta("leiden") == self.leiden_key:
            # The same graph keeps its partition: running Leiden again could still move a few
            # nodes, and every report they touch would be paid for again for nothing.
            return state.old_communities, False, lambda: counter[0]
        if not self.recluster:
            kept = cluster(state.old_communities)
            # A fresh clustering to check for drift costs seconds on a large graph: it runs once
            # the updates since the last check have changed enough of the graph to matter.
            moved = since_fresh + len(state.changed_entities | state.deleted_entities)
            if moved < _FRESH_CHECK_SHARE * len(state.entities):
                state.changed_since_fresh = moved
                return kept, False, lambda: counter[0]
        state.changed_since_fresh = 0
        fresh = hierarchical_leiden(sorted(state.entities), edges, max_cluster_size=ix.max_cluster_size,
                                    seed=ix.leiden_seed, resolution=ix.leiden_resolution)
        if not self.recluster:
            drift = (modularity(fresh, edges, resolution=ix.leiden_resolution)
                     - modularity(kept, edges, resolution=ix.leiden_resolution))
            if drift <= ix.recluster_drift:
                return kept, False, lambda: counter[0]
        return relabel(fresh, state.old_communities, new_id), True, lambda: counter[0]

    async def _stream_stage(self, store: Store, writer: Writer, paths: list[Path]) -> _Scan:
        """loader -> chunker -> extractor -> gleaner, joined by bounded streams."""
        s = self.settings
        scan = _Scan()
        known = {r["path"]: (r["doc_id"], r["size"], r["stamp"])
                 for r in store.query("SELECT path, doc_id, size, stamp FROM files")}
        # Files outside the paths given this time stay as they are (`index one.txt` inside an
        # indexed folder adds or updates that file; it does not drop the others).
        scope = [_rel(p, self.root) for p in paths]
        scan.files.update({p: v for p, v in known.items() if not _covered(p, scope)})
        # A changed reader or chunker (loader version, text_field, size, overlap, encoding)
        # re-reads and re-chunks every document.
        rechunk = store.get_meta("chunker") not in (None, self.chunker_key)
        # The new chunker is recorded only once every document has been re-chunked with it:
        # `index one.txt` after a chunk_size change re-chunks that file, the next full run the rest.
        self.rechunked_all = not rechunk or all(_covered(p, scope) for p in known)
        skipped: list[str] = []  # odd names, symlinks leading out of the folder
        files = loader.scan(paths, s.index.include, root=self.root, skipped=skipped)
        scan.warnings += skipped
        if not files:
            scan.warnings.append(f"no file under {', '.join(str(p) for p in paths)} matches index.include "
                                 f"({', '.join(s.index.include)}); add such files, or widen index.include")
        self.progress.total("files", len(files))
        self.progress.set_stage("extracting")
        q = s.pipeline.queue_size
        doc_send, doc_recv = anyio.create_memory_object_stream[Document](q)
        chunk_send, chunk_recv = anyio.create_memory_object_stream[Chunk](q)
        glean_send, glean_recv = anyio.create_memory_object_stream[tuple[Chunk, Extraction]](q)
        scheduled: set[str] = set()

        by_file: dict[str, dict[str, tuple[str, int, float]]] = defaultdict(dict)
        for p, v in known.items():  # a file's rows: "file" itself, or "file#row" for .jsonl/.csv
            by_file[p][p] = v       # (a name may hold "#" itself: every prefix before one counts)
            cut = p.find("#")
            while cut != -1:
                by_file[p[:cut]][p] = v
                cut = p.find("#", cut + 1)

        async def load() -> None:
            async with doc_send:
                for path in files:
                    rel = _rel(path, self.root)
                    rows = by_file.get(rel, {})
                    try:
                        st = path.stat()
                    except OSError as e:
                        # What was indexed from it stays until the file can be read again.
                        scan.files.update(rows)
                        await self.fail(writer, "load", rel, f"{rel}: cannot read ({e.strerror})")
                        continue
                    stamp = max(st.st_mtime, st.st_ctime)
                    if rows and not rechunk and all(v[1] == st.st_size and v[2] == stamp
                                                    for v in rows.values()):
                        scan.files.update(rows)  # unchanged on disk: not even read
                        scan.unchanged_paths += 1
                        self.progress.add("files_done")
                        continue
                    try:
                        docs, warnings = loader.read_documents(path, root=self.root,
                                                               text_field=s.index.text_field)
                    except InputError as e:
                        if not _readable(path):
                            # What was indexed from it stays until the file can be read again;
                            # a file that now holds no text (empty, binary) leaves the index.
                            scan.files.update(rows)
                        if isinstance(e, EmptyInput):   # nothing failed: there is nothing to read
                            scan.warnings.append(str(e))
                        else:
                            await self.fail(writer, "load", rel, str(e))
                        self.progress.add("files_done")
                        continue
                    scan.warnings += warnings
                    for doc in docs:
                        scan.files[doc.path] = (doc.id, st.st_size, stamp)
                        if doc.id not in scan.documents:
                            scan.documents[doc.id] = doc
                            await doc_send.send(doc)
                    self.progress.add("files_done")

        async def chunk_docs() -> None:
            async with doc_recv, chunk_send:
                async for doc in doc_recv:
                    existing = store.query("SELECT idx, chunk_id FROM document_chunks WHERE doc_id = ?",
                                           (doc.id,))
                    if existing and not rechunk:  # the same text is indexed already (a rename or a copy)
                        continue
                    cut = functools.partial(chunker.chunk_document, doc, chunk_size=s.index.chunk_size,
                                            overlap=s.index.chunk_overlap, encoding=s.index.encoding)
                    if len(doc.text) < _CHUNK_IN_THREAD_CHARS:
                        chunks = cut()
                    else:  # seconds for a book-sized file: signals and other work go on meanwhile
                        chunks = await anyio.to_thread.run_sync(cut, abandon_on_cancel=True)
                    scan.doc_chunks[doc.id] = chunks
                    await writer.run(_save_chunks, chunks)
                    for c in chunks:
                        await schedule(c)
                # Chunks of documents already indexed that lack an extraction by the current
                # extractor: its settings changed, or an earlier run failed on them.
                kept = sorted({doc_id for doc_id, _s, _m in scan.files.values()} - set(scan.doc_chunks))
                for c in _backlog(store, kept, self.key):
                    await schedule(c)

        async def schedule(c: Chunk) -> None:
            if c.id in scheduled:
                return
            scheduled.add(c.id)
            self.progress.add("chunks_total")
            if store.scalar("SELECT 1 FROM extractions WHERE chunk_id = ? AND extractor = ?",
                            (c.id, self.key)):
                self.progress.add("chunks_reused")
                return
            await chunk_send.send(c)

        async def extract_worker(recv, send) -> None:
            async with recv, send:
                async for c in recv:
                    try:
                        ext = await extract_chunk(self.llm, self.prompts, c, s)
                    except LLMError as e:
                        await self.fail(writer, "extract", c.id, f"chunk {c.id} of {c.doc_id}: {e}", e)
                        continue
                    await send.send((c, ext))

        async def glean_worker(recv) -> None:
            async with recv:
                async for c, ext in recv:
                    try:
                        ext = await glean(self.llm, self.prompts, c, ext, s)
                        ext = await extract_claims(self.llm, self.prompts, c, ext, s)
                    except LLMError as e:
                        await self.fail(writer, "glean", c.id, f"chunk {c.id} of {c.doc_id}: {e}", e)
                        continue
                    await writer.run(_save_extraction, c.id, self.key, ext)
                    self.progress.add("chunks_extracted")

        workers = 1 if s.offline else s.pipeline.extract_workers
        async with anyio.create_task_group() as tg:
            tg.start_soon(load)
            tg.start_soon(chunk_docs)
            with chunk_recv, glean_send:  # workers hold clones; the originals close here
                for _ in range(workers):
                    tg.start_soon(extract_worker, chunk_recv.clone(), glean_send.clone())
            with glean_recv:
                for _ in range(workers):
                    tg.start_soon(glean_worker, glean_recv.clone())
        return scan

    # -- stage 2: what changed ---------------------------------------------------------------
    def _changes(self, store: Store, scan: _Scan) -> _Change:
        old_docs = {r["id"] for r in store.query("SELECT id FROM documents")}
        self._keep_previous_versions(store, scan, old_docs)
        new_docs = {doc_id for doc_id, _s, _m in scan.files.values()}
        doc_chunk_ids: dict[str, list[str]] = {d: [] for d in new_docs if d not in scan.doc_chunks}
        for doc_id, chunk_id in store.conn.execute(  # one query, not one per document
                "SELECT doc_id, chunk_id FROM document_chunks ORDER BY doc_id, idx"):
            if doc_id in doc_chunk_ids:
                doc_chunk_ids[doc_id].append(chunk_id)
        for doc_id in new_docs & scan.doc_chunks.keys():
            doc_chunk_ids[doc_id] = [c.id for c in scan.doc_chunks[doc_id]]
        wanted = {c for cs in doc_chunk_ids.values() for c in cs}
        extracted = _extracted(store, wanted, self.key)
        old_live = {r["chunk_id"]: r["extractor"] for r in store.query("SELECT chunk_id, extractor FROM live_chunks")}
        # A chunk counts with the current extractor's result; one that has none yet (its
        # extraction failed this time) keeps the result it was published with, so a failing
        # endpoint or a changed setting never drops what the index already holds.
        live_keys = {c: self.key for c in wanted & extracted}
        live_keys.update({c: old_live[c] for c in wanted - extracted if c in old_live})
        live = set(live_keys)
        added = {c for c, k in live_keys.items() if old_live.get(c) != k}
        removed = {c for c, k in old_live.items() if live_keys.get(c) != k}
        return _Change(
            added_docs=new_docs - old_docs, removed_docs=old_docs - new_docs, kept_docs=new_docs & old_docs,
            doc_chunks=doc_chunk_ids, live=live, added_chunks=added, removed_chunks=removed,
            extractions=_load_extractions(store, added, self.key))

    def _keep_previous_versions(self, store: Store, scan: _Scan, old_docs: set[str]) -> None:
        """A document whose new chunks are not all extracted (their calls failed) stays indexed
        as it was: publishing the half that worked would drop what the old version said.

        - An edited file keeps its old size and stamp, so the next run reads it again and retries.
        - The same text cut anew (the chunk settings changed) keeps the chunks it is indexed
          with, and the new chunker is not recorded, so the next run cuts it again.
        """
        before = {r["path"]: (r["doc_id"], r["size"], r["stamp"])
                  for r in store.query("SELECT path, doc_id, size, stamp FROM files")}
        for path, (doc_id, _size, _stamp) in sorted(scan.files.items()):
            if doc_id not in scan.doc_chunks:
                continue
            old = before.get(path)
            recut = doc_id in old_docs
            if not recut and (old is None or old[0] not in old_docs):
                continue  # a new file: nothing indexed to keep
            chunk_ids = {c.id for c in scan.doc_chunks[doc_id]}
            missing = len(chunk_ids - _extracted(store, chunk_ids, self.key))
            if not missing:
                continue
            if recut:
                del scan.doc_chunks[doc_id]
                self.rechunked_all = False
                scan.warnings.append(f"{path}: {missing} of its {len(chunk_ids)} chunks under the new chunk "
                                     "settings could not be extracted; it stays indexed as it was until they can")
            else:
                scan.files[path] = old
                scan.warnings.append(f"{path}: {missing} of its {len(chunk_ids)} changed chunks could not "
                                     "be extracted; its previous version stays indexed until they can")

    # -- stage 3: summaries ------------------------------------------------------------------
    async def _summarize(self, writer: Writer, state: _GraphState, jobs: list[tuple[str, str, list[str]]]) -> None:
        self.progress.total("summaries", len(jobs))
        send, recv = anyio.create_memory_object_stream[tuple[str, str, list[str]]](self.settings.pipeline.queue_size)

        async def worker(recv) -> None:
            async with recv:
                async for element_id, name, descriptions in recv:
                    try:
                        text = await summarize(self.llm, name, descriptions, self.settings)
                    except LLMError as e:
                        state.fallbacks.add(element_id)
                        await self.fail(writer, "summarize", element_id, f"{name}: {e}", e)
                        text = extractive_summary(descriptions, self.settings.index.summary_max_tokens,
                                                  self.settings.index.encoding)
                    state.set_description(element_id, text)
                    self.progress.add("summaries_done")

        async with anyio.create_task_group() as tg:
            with recv:
                for _ in range(1 if self.settings.offline else self.settings.pipeline.summary_workers):
                    tg.start_soon(worker, recv.clone())
            async with send:
                for job in jobs:
                    await send.send(job)

    # -- stage 4: reports, deepest level first ---------------------------------------------
    async def _reports(self, store: Store, writer: Writer, state: _GraphState,
                       communities: list[Community]) -> tuple[dict[str, tuple[str, str]], int, int]:
        """Report key per community: (context key, key of the report shown)."""
        s = self.settings
        use_llm = not s.offline and self.llm is not None
        prompt_version = load_prompt("report").version if use_llm else None
        model = s.llm.report_model if use_llm else None
        children: dict[str, list[Community]] = defaultdict(list)
        for c in communities:
            if c.parent:
                children[c.parent].append(c)
        rels_by_entity: dict[str, list[Relationship]] = defaultdict(list)
        for r in state.relationships.values():
            rels_by_entity[r.source].append(r)
        claims_by_entity: dict[str, list[Claim]] = defaultdict(list)
        for c in sorted(state.claims.values(), key=lambda c: c.id):  # a context takes them in this order
            claims_by_entity[c.subject_id].append(c)
        reports: dict[str, Report] = {}          # community id -> report (this run)
        assignments: dict[str, tuple[str, str]] = {}
        generated = kept = 0
        self.progress.total("reports", len(communities))
        old = state.old_reports
        by_level: dict[int, list[Community]] = defaultdict(list)
        for c in communities:
            by_level[c.level].append(c)

        # Communities whose context may have changed. The others keep their context and report
        # without rebuilding the context (tokenizing every community's context is most of an
        # update's time on a large index).
        state.report_settings = ids.digest(_CONTEXT_VERSION, model, prompt_version, s.index.encoding,
                                           s.index.report_max_input_tokens, s.index.report_min_members)
        dirty = _dirty_communities(state, communities,
                                   same_settings=store.get_meta("report_settings") == state.report_settings)
        old_children: dict[str, set[str]] = defaultdict(set)
        for c in state.old_communities:
            if c.parent:
                old_children[c.parent].add(c.id)

        # A kept report is read only if a parent's context needs it (most never are).
        stored = {key for (key,) in store.conn.execute("SELECT key FROM reports")}
        kept_keys: dict[str, str] = {}   # community id -> key of the report it keeps, unread

        def unchanged(c: Community) -> str | None:
            """The key of the report ``c`` keeps when nothing its context is built from changed."""
            kids = children.get(c.id, ())
            if c.id in dirty or {k.id for k in kids} != old_children.get(c.id, set()) or any(
                    assignments.get(k.id) != (state.old_contexts.get(k.id), old.get(k.id)) for k in kids):
                return None
            key = state.old_contexts.get(c.id)
            if not key or key != old.get(c.id):  # a stand-in or a kept older report: look again
                return None
            return key if key in stored else None

        def child_report(k: Community) -> Report | None:
            if k.id in reports:
                return reports[k.id]
            return _load_report(store, kept_keys[k.id]) if k.id in kept_keys else None

        async def one(c: Community) -> None:
            nonlocal generated, kept
            kept_key = unchanged(c)
            if kept_key is not None and not self.check_shortcuts:
                kept_keys[c.id] = kept_key
                assignments[c.id] = (kept_key, kept_key)
                kept += 1
                self.progress.add("reports_done")
                return
            clean = kept_key is not None
            by_llm = use_llm and len(c.members) >= s.index.report_min_members
            member_set = set(c.members)
            rels = [r for m in c.members for r in rels_by_entity.get(m, ()) if r.target in member_set]
            kids = [(k, r) for k in children.get(c.id, ()) if (r := child_report(k)) is not None]
            ctx = build_context(c, entities=state.entities, relationships=rels,
                                claims={m: claims_by_entity[m] for m in c.members if m in claims_by_entity},
                                children=kids, max_tokens=s.index.report_max_input_tokens,
                                encoding=s.index.encoding)
            built = None
            if by_llm:
                key = context_key(ctx, model=model, prompt_version=prompt_version)
            else:  # extractive: named by what it says, which draws on more than the context text
                built = extractive_report(c, ctx, entities=state.entities, relationships=rels,
                                          children=kids, encoding=s.index.encoding)
                key = built.key
            if clean and key != kept_key:
                raise AssertionError(f"community {c.id}: context changed but counted as unchanged")
            previous = old.get(c.id)
            report = _load_report(store, key)
            if report is None and by_llm and previous is not None and s.index.report_regen_threshold > 0:
                prev_report = _load_report(store, previous)
                if prev_report is not None and changed_fraction(prev_report.elements, ctx.elements) < s.index.report_regen_threshold:
                    report = prev_report
            if report is not None:
                kept += 1
            else:
                if by_llm:
                    try:
                        report = await llm_report(self.llm, ctx, model=model,
                                                  max_tokens=s.index.report_max_output_tokens,
                                                  encoding=s.index.encoding)
                    except LLMError as e:
                        await self.fail(writer, "report", c.id, f"community {c.id}: {e}; "
                                        "an extractive report stands in until the next run", e)
                if report is None:
                    report = built or extractive_report(c, ctx, entities=state.entities, relationships=rels,
                                                        children=kids, encoding=s.index.encoding)
                await writer.run(_save_report, report)
                # The stored row is the report: when a community with the same key was written
                # meanwhile by another worker, its row stands, and parents are built from it.
                report = _load_report(store, report.key) or report
                generated += 1
                self.progress.add("reports_written")
            reports[c.id] = report
            assignments[c.id] = (key, report.key)
            self.progress.add("reports_done")

        for level in sorted(by_level, reverse=True):
            send, recv = anyio.create_memory_object_stream[Community](s.pipeline.queue_size)

            async def worker(recv) -> None:
                async with recv:
                    async for c in recv:
                        await one(c)

            async with anyio.create_task_group() as tg:
                with recv:
                    for _ in range(s.pipeline.report_workers if use_llm else 1):
                        tg.start_soon(worker, recv.clone())
                async with send:
                    for c in by_level[level]:
                        await send.send(c)
        return assignments, generated, kept

    # -- stage 5: embeddings -----------------------------------------------------------------
    async def _embed(self, store: Store, writer: Writer, state: _GraphState, change: _Change,
                     assignments: dict[str, tuple[str, str]]) -> list[tuple]:
        """Vectors for what changed; written by ``publish`` with the rows they describe."""
        model = self.settings.llm.embedding_model
        if not model or self.llm is None:
            return []
        from streamrag.embeddings import embed_missing

        try:
            return await embed_missing(self.llm, store, model, state, change, assignments)
        except LLMError as e:
            await self.fail(writer, "embed", model, f"embeddings with {model}: {e}")
            return []


@dataclass
class _Change:
    added_docs: set[str]
    removed_docs: set[str]
    kept_docs: set[str]
    doc_chunks: dict[str, list[str]]
    live: set[str]
    added_chunks: set[str]
    removed_chunks: set[str]
    extractions: dict[str, Extraction]


def _extracted(store: Store, chunk_ids: set[str], key: str) -> set[str]:
    found: set[str] = set()
    ids = sorted(chunk_ids)
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        found.update(r[0] for r in store.conn.execute(
            f"SELECT chunk_id FROM extractions WHERE extractor = ? AND chunk_id IN ({','.join('?' * len(part))})",
            (key, *part)))
    return found


def _backlog(store: Store, doc_ids: list[str], key: str) -> list[Chunk]:
    """Chunks of the given documents with no extraction by ``key``."""
    out: list[Chunk] = []
    for i in range(0, len(doc_ids), 500):
        part = doc_ids[i:i + 500]
        for r in store.query(
                f"SELECT dc.doc_id, dc.idx, c.id, c.text, c.tokens FROM document_chunks dc "
                f"JOIN chunks c ON c.id = dc.chunk_id WHERE dc.doc_id IN ({','.join('?' * len(part))}) "
                f"AND NOT EXISTS (SELECT 1 FROM extractions e WHERE e.chunk_id = c.id AND e.extractor = ?) "
                f"ORDER BY dc.doc_id, dc.idx", (*part, key)):
            out.append(Chunk(id=r["id"], doc_id=r["doc_id"], idx=r["idx"], text=r["text"], tokens=r["tokens"]))
    return out


def _load_extractions(store: Store, chunk_ids: set[str], key: str) -> dict[str, Extraction]:
    out: dict[str, Extraction] = {}
    ids = sorted(chunk_ids)
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        for chunk_id, result in store.conn.execute(
                f"SELECT chunk_id, result FROM extractions WHERE extractor = ? AND chunk_id IN ({','.join('?' * len(part))})",
                (key, *part)):
            out[chunk_id] = _extraction_decode.decode(result)
    return out


def _load_report(store: Store, key: str | None) -> Report | None:
    if not key:
        return None
    rows = store.query("SELECT * FROM reports WHERE key = ?", (key,))
    if not rows:
        return None
    r = rows[0]
    return Report(key=r["key"], title=r["title"], summary=r["summary"], rating=r["rating"],
                  rating_explanation=r["rating_explanation"], findings=msgspec.json.decode(r["findings"]),
                  text=r["text"], tokens=r["tokens"], elements=msgspec.json.decode(r["elements"]),
                  extractive=bool(r["extractive"]))


# --------------------------------------------------------------------------------------------
# The graph in memory: published state plus this run's changes
# --------------------------------------------------------------------------------------------
class _GraphState:
    def __init__(self) -> None:
        self.entities: dict[str, Entity] = {}
        self.relationships: dict[str, Relationship] = {}
        self.claims: dict[str, Claim] = {}
        self.old_communities: list[Community] = []
        self.old_reports: dict[str, str] = {}    # community id -> key of the report shown
        self.old_contexts: dict[str, str] = {}   # community id -> key of its report's context
        self.old_degree: dict[str, int] = {}
        self.old_weight: dict[str, float] = {}
        self.claim_subjects_changed: set[str] = set()  # entities a claim was added to or removed from
        self.report_settings = ""                # what report contexts are built with (see _reports)
        self.changed_since_fresh = 0             # entities changed since the last drift check
        self.leiden_key = ""                     # the Leiden settings of this run's partition
        self.old_combined: dict[str, int] = {}
        self.changed_entities: set[str] = set()
        self.changed_relationships: set[str] = set()
        self.deleted_entities: set[str] = set()
        self.deleted_relationships: set[str] = set()
        self.rewired: set[str] = set()           # entities with an edge added, removed or reweighted
        self.degree_delta: Counter[str] = Counter()  # neighbours gained (lost: negative) this run
        self.counted = False                     # the published degrees were counted by this code
        self.entity_mentions_added: list[merge.EntityMention] = []
        self.relationship_mentions_added: list[merge.RelationshipMention] = []
        self.claims_added: list[Claim] = []
        self.version = 0
        self.stamp = ""                          # when that version was published
        self.retry_summaries: set[str] = set()   # fell back to extractive last time: try again
        self.fallbacks: set[str] = set()         # fell back this time

    @classmethod
    def load(cls, store: Store) -> _GraphState:
        st = cls()
        st.version = store.version
        st.stamp = store.get_meta("published_at", "") or ""
        st.retry_summaries = set(msgspec.json.decode(store.get_meta("summary_fallbacks", "[]") or "[]"))
        st.counted = store.get_meta("degrees") == _DEGREES_VERSION
        # Plain tuples for the two big tables: a dict per row was half of this load.
        for eid, name, etype, description, mentions, degree in store.conn.execute(
                "SELECT id, name, type, description, mentions, degree FROM entities"):
            st.entities[eid] = Entity(id=eid, name=name, type=etype, description=description, sources=[],
                                      mentions=mentions, degree=degree)
            st.old_degree[eid] = degree
        for rid, source, target, description, weight, mentions, combined in store.conn.execute(
                "SELECT id, source, target, description, weight, mentions, combined_degree FROM relationships"):
            st.relationships[rid] = Relationship(
                id=rid, source=source, target=target, description=description, weight=weight, sources=[],
                mentions=mentions, combined_degree=combined)
            st.old_combined[rid] = combined
            st.old_weight[rid] = weight
        for r in store.query("SELECT * FROM claims ORDER BY id"):
            st.claims[r["id"]] = Claim(**{k: r[k] for k in Claim.__struct_fields__})
        members: dict[str, list[str]] = defaultdict(list)
        for r in store.query("SELECT community_id, entity_id FROM community_members ORDER BY entity_id"):
            members[r["community_id"]].append(r["entity_id"])
        for r in store.query("SELECT id, level, parent, context_key, report_key FROM communities ORDER BY id"):
            st.old_communities.append(Community(id=r["id"], level=r["level"], parent=r["parent"],
                                                members=members.get(r["id"], [])))
            st.old_reports[r["id"]] = r["report_key"]
            st.old_contexts[r["id"]] = r["context_key"]
        return st

    def apply(self, store: Store, change: _Change, settings: Settings) -> list[tuple[str, str, list[str]]]:
        """Re-merges every element the changed chunks touch; returns the summaries to write."""
        removed = change.removed_chunks
        ent_m: list[merge.EntityMention] = []
        rel_m: list[merge.RelationshipMention] = []
        for chunk_id in sorted(change.added_chunks):
            e, r, c = merge.mentions_of(chunk_id, change.extractions[chunk_id])
            ent_m += e
            rel_m += r
            self.claims_added += c
        self.entity_mentions_added, self.relationship_mentions_added = ent_m, rel_m
        affected_e = {m.entity_id for m in ent_m} | _ids_for_chunks(store, "entity_sources", "entity_id", removed)
        affected_r = {m.relationship_id for m in rel_m} | _ids_for_chunks(
            store, "relationship_sources", "relationship_id", removed)
        retry = self.retry_summaries
        affected_e |= {i for i in retry if i.startswith("ent-") and i in self.entities}
        affected_r |= {i for i in retry if i.startswith("rel-") and i in self.relationships}
        for claim_id in [cid for cid, c in self.claims.items() if c.chunk_id in removed]:
            self.claim_subjects_changed.add(self.claims.pop(claim_id).subject_id)
        for c in self.claims_added:
            self.claims[c.id] = c
            self.claim_subjects_changed.add(c.subject_id)

        limit = settings.index.summary_max_descriptions

        def same_input(now: list[str], before: list[str]) -> bool:
            """Whether the summary would be built from the same descriptions as before."""
            return summary_input(now, limit) == summary_input(before, limit)

        old_e_sources = _sources(store, "entity_sources", "entity_id", affected_e)
        new_e = merge.group(ent_m)
        new_r = merge.group(rel_m)
        jobs: list[tuple[str, str, list[str]]] = []
        renamed: set[str] = set()
        for eid in sorted(affected_e):
            old_rows = old_e_sources.get(eid, [])
            kept = [merge.EntityMention(eid, r["chunk_id"], r["name"], r["type"], r["description"])
                    for r in old_rows if r["chunk_id"] not in removed]
            mentions = kept + new_e.get(eid, [])
            if not mentions:
                self.entities.pop(eid, None)
                self.deleted_entities.add(eid)
                continue
            ent = merge.merge_entity(eid, mentions, settings.index.entity_types)
            descriptions = merge.unique_descriptions(m.description for m in mentions)
            before = merge.unique_descriptions(r["description"] for r in old_rows)
            previous = self.entities.get(eid)
            if previous is not None and same_input(descriptions, before) and previous.name == ent.name \
                    and eid not in retry:
                ent.description = previous.description
            elif len(descriptions) > 1:
                jobs.append((eid, ent.name, descriptions))
            else:
                ent.description = descriptions[0] if descriptions else ""
            if previous is not None and previous.name != ent.name:
                renamed.add(eid)
            self.entities[eid] = ent
            self.changed_entities.add(eid)
        # A relationship's summary is written under its entities' names: when one of them is now
        # shown under another name ("VELO" outnumbering "Velo"), it is written again, as a fresh
        # index would write it.
        affected_r |= {rid for rid, r in self.relationships.items()
                       if r.source in renamed or r.target in renamed}
        old_r_sources = _sources(store, "relationship_sources", "relationship_id", affected_r)
        for rid in sorted(affected_r):
            old_rows = old_r_sources.get(rid, [])
            kept_r = [merge.RelationshipMention(rid, "", "", r["chunk_id"], r["description"], r["strength"])
                      for r in old_rows if r["chunk_id"] not in removed]
            mentions_r = new_r.get(rid, [])
            if not kept_r and not mentions_r:
                gone = self.relationships.pop(rid, None)
                if gone is not None:
                    self.rewired |= {gone.source, gone.target}
                    if gone.source != gone.target:
                        self.degree_delta.update({gone.source: -1, gone.target: -1})
                self.deleted_relationships.add(rid)
                continue
            prev = self.relationships.get(rid)
            src, dst = (mentions_r[0].source, mentions_r[0].target) if mentions_r else (prev.source, prev.target)
            kept_r = [m._replace(source=src, target=dst) for m in kept_r]
            all_m = kept_r + mentions_r
            rel = merge.merge_relationship(rid, all_m)
            descriptions = merge.unique_descriptions(m.description for m in all_m)
            before = merge.unique_descriptions(r["description"] for r in old_rows)
            if prev is not None and same_input(descriptions, before) and rid not in retry \
                    and src not in renamed and dst not in renamed:
                rel.description = prev.description
            elif len(descriptions) > 1:
                names = f"{self.entities[src].name if src in self.entities else src} and " \
                        f"{self.entities[dst].name if dst in self.entities else dst}"
                jobs.append((rid, names, descriptions))
            if prev is None or prev.weight != rel.weight or (prev.source, prev.target) != (src, dst):
                self.rewired |= {src, dst}
            if prev is None and src != dst:
                self.degree_delta.update((src, dst))
            self.relationships[rid] = rel
            self.changed_relationships.add(rid)
        return jobs

    def published(self, store: Store, communities: list[Community],
                  assignments: dict[str, tuple[str, str]]) -> _GraphState:
        """This run's graph as the next run's starting point: what ``load`` would read from
        the store once this run is published (the elements are shared, not copied)."""
        st = _GraphState()
        st.version, st.stamp = store.version, store.get_meta("published_at", "") or ""
        st.retry_summaries = set(self.fallbacks)
        st.counted = True
        for eid in self.changed_entities:  # the store keeps no sources; neither does a loaded graph
            if (e := self.entities.get(eid)) is not None:
                e.sources = []
        for rid in self.changed_relationships:
            if (r := self.relationships.get(rid)) is not None:
                r.sources = []
        st.entities, st.relationships = self.entities, self.relationships
        st.claims = self.claims  # in any order: a report context sorts them
        st.old_degree = {e.id: e.degree for e in self.entities.values()}
        st.old_combined = {r.id: r.combined_degree for r in self.relationships.values()}
        st.old_weight = {r.id: r.weight for r in self.relationships.values()}
        st.old_communities = sorted(communities, key=lambda c: c.id)
        st.old_contexts = {cid: context for cid, (context, _report) in assignments.items()}
        st.old_reports = {cid: report for cid, (_context, report) in assignments.items()}
        return st

    def set_description(self, element_id: str, text: str) -> None:
        target = self.entities if element_id.startswith("ent-") else self.relationships
        target[element_id].description = text

    def same_graph(self) -> bool:
        """Whether the entities, edges and weights are those of the published version."""
        return (set(self.entities) == set(self.old_degree)
                and {r.id: r.weight for r in self.relationships.values()} == self.old_weight)

    def finish_graph(self, store: Store, *, check: bool = False) -> None:
        """Degrees for the whole graph; elements whose degree moved count as changed.

        Counted from the published degrees and the relationships this run added or removed:
        only entities that gained or lost a neighbour, and the relationships touching them or
        changed, are visited (recounting 200,000 relationships was a second of every update).
        ``check`` (tests) recounts everything and fails if the two differ.
        """
        self.entities = {k: self.entities[k] for k in sorted(self.entities)}  # keys sort faster than items
        self.relationships = {k: self.relationships[k] for k in sorted(self.relationships)}
        if not self.counted:  # a first index, or one published before degrees were kept this way
            full = neighbour_counts(self.relationships.values())
            degree: Callable[[str], int] = lambda e: full.get(e, 0)  # noqa: E731
            entities, relationships = self.entities, self.relationships
        else:
            degree = lambda e: self.old_degree.get(e, 0) + self.degree_delta.get(e, 0)  # noqa: E731
            moved = {e for e, n in self.degree_delta.items() if n}
            entities = {e: self.entities[e] for e in sorted(moved | self.changed_entities) if e in self.entities}
            touching = self.changed_relationships | _ids_touching(store, moved)
            relationships = {r: self.relationships[r] for r in sorted(touching) if r in self.relationships}
        for e in entities.values():
            e.degree = degree(e.id)
            if self.old_degree.get(e.id) != e.degree:
                self.changed_entities.add(e.id)
        for r in relationships.values():
            r.combined_degree = degree(r.source) + degree(r.target)
            if self.old_combined.get(r.id) != r.combined_degree:
                self.changed_relationships.add(r.id)
        if check:
            full = neighbour_counts(self.relationships.values())
            wrong = [e.id for e in self.entities.values() if e.degree != full.get(e.id, 0)]
            wrong += [r.id for r in self.relationships.values()
                      if r.combined_degree != full.get(r.source, 0) + full.get(r.target, 0)]
            if wrong:
                raise AssertionError(f"degrees counted from the changes differ from a recount: {wrong[:5]}")


def _ids_touching(store: Store, entity_ids: set[str]) -> set[str]:
    """Ids of the published relationships with an end among ``entity_ids``."""
    found: set[str] = set()
    ids = sorted(entity_ids)
    for i in range(0, len(ids), 500):
        marks = ",".join("?" * len(ids[i:i + 500]))
        found.update(r for (r,) in store.conn.execute(
            f"SELECT id FROM relationships WHERE source IN ({marks}) UNION "
            f"SELECT id FROM relationships WHERE target IN ({marks})", ids[i:i + 500] * 2))
    return found


class GraphCache:
    """The graph a long-running process published last, kept for its next sync.

    Reading the graph back from the store was the largest part of a small update to a large
    index. The kept graph is used only while the store still holds the version it was published
    as (another writer, or a store replaced under the daemon, makes the next sync read the
    store), and only once: a sync takes it and, when it publishes, leaves its own.
    """

    def __init__(self) -> None:
        self._state: _GraphState | None = None
        self._db: Path | None = None

    def take(self, store: Store) -> _GraphState | None:
        state, self._state = self._state, None
        if state is None or self._db != store.path.resolve() or state.version != store.version \
                or state.stamp != (store.get_meta("published_at", "") or ""):
            return None
        return state

    def keep(self, state: _GraphState, db: Path) -> None:
        self._state, self._db = state, db.resolve()


def _check_cached(cached: _GraphState, loaded: _GraphState) -> None:
    """Tests: a kept graph equals the graph read from the store."""
    for name in ("entities", "relationships", "claims", "old_degree", "old_combined", "old_weight",
                 "old_contexts", "old_reports", "retry_summaries", "counted", "version"):
        if getattr(cached, name) != getattr(loaded, name):
            raise AssertionError(f"the kept graph's {name} differ from the store's")
    if [(c.id, c.level, c.parent, c.members) for c in cached.old_communities] != \
            [(c.id, c.level, c.parent, c.members) for c in loaded.old_communities]:
        raise AssertionError("the kept graph's communities differ from the store's")


def _check_rewired(store: Store, state: _GraphState, changed: set[str]) -> None:
    """Tests: every entity with an edge added, removed or reweighted since the published
    version (found here from the store) is among ``changed``."""
    old = {(r["source"], r["target"]): r["weight"]
           for r in store.query("SELECT source, target, weight FROM relationships")}
    new = {(r.source, r.target): r.weight for r in state.relationships.values()}
    moved = {n for pair in old.keys() ^ new.keys() for n in pair}
    moved |= {n for pair in old.keys() & new.keys() if old[pair] != new[pair] for n in pair}
    missing = (moved & set(state.entities)) - changed
    if missing:
        raise AssertionError(f"rewired entities not counted as changed: {sorted(missing)[:5]}")


def _dirty_communities(state: _GraphState, communities: list[Community], *, same_settings: bool) -> set[str]:
    """Communities whose report context may differ from the published one, not counting their
    children's reports (checked as the levels are written): new ones, those whose members
    changed, and those holding a changed entity, an internal relationship that changed, or a
    member whose claims changed. Everything when the context settings changed."""
    old = {c.id: c for c in state.old_communities}
    if not same_settings:
        return {c.id for c in communities}
    dirty: set[str] = set()
    where: dict[tuple[int, str], str] = {}
    touched = state.changed_entities | state.claim_subjects_changed
    for c in communities:
        before = old.get(c.id)
        if before is None or before.level != c.level or set(before.members) != set(c.members) \
                or any(m in touched for m in c.members):
            dirty.add(c.id)
        for m in c.members:
            where[(c.level, m)] = c.id
    levels = {c.level for c in communities}
    for rid in state.changed_relationships:
        r = state.relationships.get(rid)
        if r is None:
            continue  # a deleted relationship changed its entities' degrees: they are dirty
        for level in levels:
            home = where.get((level, r.source))
            if home is not None and home == where.get((level, r.target)):
                dirty.add(home)
    # A claim names its object, which may live elsewhere: a renamed object changes the line.
    for claim in state.claims.values():
        if claim.object_id in state.changed_entities:
            for level in levels:
                if (level, claim.subject_id) in where:
                    dirty.add(where[(level, claim.subject_id)])
    return dirty


def _ids_for_chunks(store: Store, table: str, column: str, chunk_ids: set[str]) -> set[str]:
    out: set[str] = set()
    ids = sorted(chunk_ids)
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        out.update(r[0] for r in store.conn.execute(
            f"SELECT DISTINCT {column} FROM {table} WHERE chunk_id IN ({','.join('?' * len(part))})", part))
    return out


def _sources(store: Store, table: str, column: str, element_ids: set[str]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    ids = sorted(element_ids)
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        for r in store.query(f"SELECT * FROM {table} WHERE {column} IN ({','.join('?' * len(part))})", part):
            out[r[column]].append(r)
    return out


# --------------------------------------------------------------------------------------------
# Writer operations (run inside the writer task)
# --------------------------------------------------------------------------------------------
def _save_chunks(store: Store, chunks: list[Chunk]) -> None:
    store.conn.executemany("INSERT OR IGNORE INTO chunks(id, text, tokens) VALUES (?,?,?)",
                           [(c.id, c.text, c.tokens) for c in chunks])


def _save_extraction(store: Store, chunk_id: str, key: str, ext: Extraction) -> None:
    store.conn.execute(
        "INSERT OR REPLACE INTO extractions(chunk_id, extractor, result, dropped, rounds, created_at) "
        "VALUES (?,?,?,?,?,?)",
        (chunk_id, key, _extraction_json.encode(ext).decode(), ext.dropped, ext.rounds, time.time()))


def _save_report(store: Store, r: Report) -> None:
    store.conn.execute(
        "INSERT OR IGNORE INTO reports(key, title, summary, rating, rating_explanation, findings, text, "
        "tokens, elements, extractive, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (r.key, r.title, r.summary, r.rating, r.rating_explanation, msgspec.json.encode(r.findings).decode(),
         r.text, r.tokens, msgspec.json.encode(r.elements).decode(), int(r.extractive), time.time()))


def _in(column: str, values: list) -> str:
    return f"{column} IN ({','.join('?' * len(values))})"


def _delete_in(store: Store, table: str, column: str, values: set[str]) -> None:
    vals = sorted(values)
    for i in range(0, len(vals), 500):
        part = vals[i:i + 500]
        store.conn.execute(f"DELETE FROM {table} WHERE {_in(column, part)}", part)


def _check_version(store: Store, worked_from: int) -> None:
    """Refuses to go on from a version another indexer has replaced since."""
    if store.version != worked_from:
        raise StoreError(f"{store.path}: another indexer published version {store.version} while this "
                         "run worked from an older one; nothing was published, run the command again "
                         "(finished work is reused)")


def _publish(store: Store, scan: _Scan, change: _Change, state: _GraphState,
             communities: list[Community], assignments: dict[str, tuple[str, str]], key: str,
             next_community_id: int, chunker_key: str | None, summarizer_key: str, vectors: list[tuple],
             root: Path | None = None) -> int:
    """Replaces the published index with this run's, in the writer's one transaction."""
    conn = store.conn
    _check_version(store, state.version)
    # Files and documents: only the rows that differ are written (an update of a large index
    # used to rewrite every file, document and community row).
    old_files = {p: (d, sz, mt) for p, d, sz, mt in conn.execute("SELECT path, doc_id, size, stamp FROM files")}
    _delete_in(store, "files", "path", old_files.keys() - scan.files.keys())
    conn.executemany("INSERT OR REPLACE INTO files(path, doc_id, size, stamp) VALUES (?,?,?,?)",
                     [(p, d, sz, mt) for p, (d, sz, mt) in sorted(scan.files.items())
                      if old_files.get(p) != (d, sz, mt)])
    _delete_in(store, "documents", "id", change.removed_docs)
    _delete_in(store, "document_chunks", "doc_id", change.removed_docs)
    paths_by_doc: dict[str, str] = {}
    for p, (d, _sz, _mt) in sorted(scan.files.items()):
        paths_by_doc.setdefault(d, p)
    for doc_id in sorted(change.added_docs):
        doc = scan.documents.get(doc_id)
        chunks = scan.doc_chunks.get(doc_id)
        if doc is None:
            continue
        conn.execute("INSERT OR REPLACE INTO documents(id, title, path, tokens, chars) VALUES (?,?,?,?,?)",
                     (doc_id, doc.title, paths_by_doc.get(doc_id, doc.path),
                      sum(c.tokens for c in chunks or ()), len(doc.text)))
        if chunks is not None:
            conn.execute("DELETE FROM document_chunks WHERE doc_id = ?", (doc_id,))
            conn.executemany("INSERT INTO document_chunks(doc_id, idx, chunk_id) VALUES (?,?,?)",
                             [(doc_id, c.idx, c.id) for c in chunks])
    shown = {d: (path, title) for d, path, title in conn.execute("SELECT id, path, title FROM documents")}
    for doc_id in change.kept_docs:  # renames keep the document, with its new path
        path, title = shown.get(doc_id, (None, None))
        if path != paths_by_doc[doc_id]:
            conn.execute("UPDATE documents SET path = ? WHERE id = ?", (paths_by_doc[doc_id], doc_id))
        doc = scan.documents.get(doc_id)
        if doc is not None and doc.title != title:  # read again: a title may change while the text did not
            conn.execute("UPDATE documents SET title = ? WHERE id = ?", (doc.title, doc_id))
        if doc_id in scan.doc_chunks:  # re-chunked after a chunker change
            conn.execute("UPDATE documents SET tokens = ? WHERE id = ?",
                         (sum(c.tokens for c in scan.doc_chunks[doc_id]), doc_id))
            conn.execute("DELETE FROM document_chunks WHERE doc_id = ?", (doc_id,))
            conn.executemany("INSERT INTO document_chunks(doc_id, idx, chunk_id) VALUES (?,?,?)",
                             [(doc_id, c.idx, c.id) for c in scan.doc_chunks[doc_id]])

    # Live chunks and provenance.
    _delete_in(store, "live_chunks", "chunk_id", change.removed_chunks)
    conn.executemany("INSERT OR REPLACE INTO live_chunks(chunk_id, extractor) VALUES (?,?)",
                     [(c, key) for c in sorted(change.added_chunks)])
    for table in ("entity_sources", "relationship_sources", "claims", "chunks_fts"):
        _delete_in(store, table, "id" if table == "chunks_fts" else "chunk_id", change.removed_chunks)
    conn.executemany(
        "INSERT OR IGNORE INTO entity_sources(entity_id, chunk_id, name, type, description) VALUES (?,?,?,?,?)",
        [(m.entity_id, m.chunk_id, m.name, m.type, m.description) for m in state.entity_mentions_added])
    conn.executemany(
        "INSERT OR IGNORE INTO relationship_sources(relationship_id, chunk_id, description, strength) "
        "VALUES (?,?,?,?)",
        [(m.relationship_id, m.chunk_id, m.description, m.strength) for m in state.relationship_mentions_added])
    conn.executemany(
        "INSERT OR REPLACE INTO claims(id, subject_id, object_id, type, status, start_date, end_date, "
        "description, source_text, chunk_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [(c.id, c.subject_id, c.object_id, c.type, c.status, c.start_date, c.end_date, c.description,
          c.source_text, c.chunk_id) for c in state.claims_added])
    conn.executemany(
        "INSERT INTO chunks_fts(id, text) SELECT id, text FROM chunks WHERE id = ?",
        [(c,) for c in sorted(change.added_chunks)])

    # Entities and relationships.
    gone_e = state.deleted_entities | state.changed_entities
    _delete_in(store, "entities", "id", gone_e)
    _delete_in(store, "entities_fts", "id", gone_e)
    changed = [state.entities[e] for e in sorted(state.changed_entities) if e in state.entities]
    conn.executemany("INSERT INTO entities(id, name, type, description, mentions, degree) VALUES (?,?,?,?,?,?)",
                     [(e.id, e.name, e.type, e.description, e.mentions, e.degree) for e in changed])
    conn.executemany("INSERT INTO entities_fts(id, name, description) VALUES (?,?,?)",
                     [(e.id, e.name, e.description) for e in changed])
    _delete_in(store, "relationships", "id", state.deleted_relationships | state.changed_relationships)
    conn.executemany(
        "INSERT INTO relationships(id, source, target, description, weight, mentions, combined_degree) "
        "VALUES (?,?,?,?,?,?,?)",
        [(r.id, r.source, r.target, r.description, r.weight, r.mentions, r.combined_degree)
         for rid in sorted(state.changed_relationships) if (r := state.relationships.get(rid))])

    # Communities and the reports they show.
    row = {c.id: (c.level, c.parent, len(c.members), *assignments[c.id]) for c in communities}
    old_row = {c.id: (c.level, c.parent, len(c.members), state.old_contexts.get(c.id), state.old_reports.get(c.id))
               for c in state.old_communities}
    members = {c.id: c.members for c in communities}
    old_members = {c.id: c.members for c in state.old_communities}
    _delete_in(store, "communities", "id", {i for i, r in old_row.items() if row.get(i) != r})
    conn.executemany(
        "INSERT INTO communities(id, level, parent, size, context_key, report_key) VALUES (?,?,?,?,?,?)",
        [(i, *r) for i, r in row.items() if old_row.get(i) != r])
    regrouped = {i for i in members.keys() | old_members.keys()
                 if (a := members.get(i, [])) != (b := old_members.get(i, [])) and sorted(a) != sorted(b)}
    _delete_in(store, "community_members", "community_id", regrouped)
    conn.executemany("INSERT INTO community_members(community_id, entity_id) VALUES (?,?)",
                     [(i, m) for i in sorted(regrouped) for m in members.get(i, ())])
    conn.execute("DELETE FROM reports WHERE key NOT IN (SELECT report_key FROM communities "
                 "WHERE report_key IS NOT NULL)")
    conn.execute("DELETE FROM chunks WHERE id NOT IN (SELECT chunk_id FROM document_chunks)")
    version = store.version + 1
    store.set_meta("version", str(version))
    conn.executemany("INSERT OR REPLACE INTO embeddings(kind, item_id, model, content_hash, vector) "
                     "VALUES (?,?,?,?,?)", vectors)
    # Vectors of what no longer exists would crowd out live items in similarity search.
    _delete_in(store, "embeddings", "item_id", state.deleted_entities | change.removed_chunks - change.live)
    conn.execute("DELETE FROM embeddings WHERE kind = 'report' AND item_id NOT IN "
                 "(SELECT report_key FROM communities WHERE report_key IS NOT NULL)")
    store.set_meta("extractor", key)
    if chunker_key is not None:  # None: some documents still have the previous chunker's chunks
        store.set_meta("chunker", chunker_key)
    store.set_meta("summarizer", summarizer_key)
    store.set_meta("report_settings", state.report_settings)
    store.set_meta("changed_since_fresh", str(state.changed_since_fresh))
    store.set_meta("leiden", state.leiden_key)
    store.set_meta("degrees", _DEGREES_VERSION)
    store.set_meta("summary_fallbacks", msgspec.json.encode(sorted(state.fallbacks)).decode())
    store.set_meta("next_community_id", str(next_community_id))
    store.set_meta("published_at", str(time.time()))
    if root is not None:
        store.set_meta("root", str(Path(root).resolve()))
    return version


def indexed_root(db_path: Path) -> Path | None:
    """The folder the index at ``db_path`` names its documents from, if it still exists.

    Stored paths are relative to it, so a later run on a subfolder or one file must use it
    too: `index sub` then updates ``sub/...`` instead of taking ``sub`` for the whole folder.
    An index in its folder's ``.streamrag/`` belongs to that folder, wherever it was recorded:
    a copied folder's index updates the copy, not the original it still names.
    """
    db_path = Path(db_path)
    if not db_path.is_file():
        return None
    if db_path.parent.name == ".streamrag":
        return db_path.parent.parent.resolve()
    try:
        store = Store(db_path, readonly=True)
    except StreamragError:
        return None  # the run that opens it for writing says what is wrong with it
    try:
        root = store.get_meta("root")
    finally:
        store.close()
    return Path(root) if root and Path(root).is_dir() else None


async def sync(paths: list[Path], settings: Settings, db_path: Path, *, root: Path | None = None,
               progress: Progress | None = None, command: str = "index", transport=None,
               recluster: bool = False, graph_cache: GraphCache | None = None) -> SyncResult:
    """Bring the index at ``db_path`` to the documents under ``paths`` (one published version)."""
    indexer = Indexer(settings, db_path, root=root, progress=progress, command=command,
                      transport=transport, recluster=recluster, graph_cache=graph_cache)
    return await indexer.run([Path(p) for p in paths])

