"""The streaming first half of a sync: the loader, the chunker, the extractors and the gleaners,
each an actor reading one stream (``ExtractionStage``), and the ``Scan`` they fill.

``Indexer._stream_stage`` wires them with bounded streams, so a slow stage holds back the ones
before it. Every product (chunks, extractions) is content-addressed and written through the
run's one writer as soon as it exists (offline extractions, made again in moments, a group at a
time: ``store_offline``): an interrupted run loses nothing paid for, and the next finds it.
A file unchanged on disk since it was indexed is not even read; a chunk whose extraction by the
current extractor is stored is not sent to the model again; one whose claims call gave up is
stored without its claims and published so (``claims_failed``), the next run asking its claims
call alone.

A run of the stage sees of the Indexer only what it is given (``ExtractionStageContext``), and
tells it what it found through the ``Scan``.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec

from streamrag import chunker, chunking_marks, index_rows, joins, loader, on_disk
from streamrag.config import Settings
from streamrag.errors import EmptyInput, InputError, LLMError, NoTextField, UnreadableFile
from streamrag.extractor import ExtractionPrompts, claim_faults_warning, claimless_key, extract_chunk, extract_claims
from streamrag.gleaner import YesNoCheck, glean
from streamrag.records import Chunk, Document, Extraction
from streamrag.run_progress import Progress
from streamrag.store import Store
from streamrag.writer import Writer

if TYPE_CHECKING:
    from streamrag.llm import LLMClient

# Documents at least this long are chunked in a worker thread, off the event loop; their chunks'
# spans are recorded (``records.Spans``), for a changed version to be cut again from its change
# on (a short one is cut whole in less than its rows cost).
_CHUNK_IN_THREAD_CHARS = 200_000
# Files at least this big are read in a worker thread (``ExtractionStage.read``): a 90 MB one-row
# CSV took seconds in the event loop, where a signal waited for it (SIGTERM: 6-8 s to stop). A
# smaller one is read in the event loop, in about what a hop to the thread would cost it.
_READ_IN_THREAD_BYTES = 1 << 20
# Offline extractions are stored this many at a time, in one writer transaction, not one each:
# made again in moments, and paid for by no one, they need not each be committed before the next
# is made (the 3,818 of a first index of 3,000 documents, committed one by one, took 0.43 s of
# CPU to store, 0.18 s so, and 36 MB more written). A run stopped or killed loses at most one
# group unstored, which its next run makes again.
_OFFLINE_GROUP = 64
# ... or those held, when no more has come for this many seconds: the chunks of small files
# extracted while the chunker cuts a big one in its worker thread (``cut_big``) are counted, and
# kept, when made, not once the cut is done; so are they while the loader reads a big file in its
# thread (``ExtractionStage.read``).
_OFFLINE_IDLE = 1.0


class _Abandoned(Exception):
    """Raised in the worker thread of a cut or a read whose run was cancelled (``in_thread``): it
    ends it. No one sees it: the work was abandoned, its result awaited no more."""


async def in_thread(work: Callable[..., object], what: str):
    """``work(check=check)`` in a worker thread, abandoned when the run is cancelled (Ctrl-C,
    SIGTERM, a failing run): ``check``, which it calls every few milliseconds, raises then, so
    the thread ends within them, not when its work is done (Python waits for it as it exits).
    ``what``: the file, named by the exception no one sees."""
    abandoned = threading.Event()

    def check() -> None:
        if abandoned.is_set():
            raise _Abandoned(what)

    try:
        return await anyio.to_thread.run_sync(functools.partial(work, check=check), abandon_on_cancel=True)
    finally:   # (returned, or cancelled; then the thread stops too)
        abandoned.set()


async def read_apart(path: Path, st: os.stat_result, *, root: Path | None,
                     **kwargs) -> tuple[list[Document], list[str]]:
    """``loader.read_documents(path, root=root, st=st, **kwargs)``, a file of
    ``_READ_IN_THREAD_BYTES`` or more (``st``: its stat) read in a worker thread a stop abandons
    and ends (``in_thread``); a smaller one at once."""
    read = functools.partial(loader.read_documents, path, root=root, st=st, **kwargs)
    if st.st_size < _READ_IN_THREAD_BYTES:
        return read()
    return await in_thread(read, loader.stored_path(path, root))


def chunk_shown(path: str, idx: int, chunk_id: str) -> str:
    """A chunk as a message names it: its file, and which chunk of it (``idx`` from 0)."""
    return f"{loader.shown(path)} (chunk {idx + 1}, {chunk_id})"


@dataclass
class Scan:
    """What the folder holds now: path -> (doc id, size, change stamp), per-document facts."""

    files: dict[str, tuple[str, int, float]] = field(default_factory=dict)
    # Newly read documents and the chunks of new documents, their text left out (the chunks'
    # is in the store; a first index held the whole corpus twice until it published)
    documents: dict[str, Document] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)   # path -> title, of every document read
    doc_chunks: dict[str, list[Chunk]] = field(default_factory=dict)
    chars: dict[str, int] = field(default_factory=dict)   # doc id -> characters of its text
    warnings: list[str] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)   # loader.scan's
    indexed: dict[str, tuple[str, int, float]] = field(default_factory=dict)  # the files table, as read
    scope: list[str] = field(default_factory=list)   # the paths this run looks at, as the index names them
    # Documents kept as read with the previous reading settings (a file as indexed whose rows lack
    # the index.text_field named now): not every document is read with this run's settings
    old_reading_kept: bool = False
    # Files read again only for their new change times (a touch, `cp -a`, a vault restored from a
    # backup) that hold the documents indexed: those documents' ids
    new_times: set[str] = field(default_factory=set)
    # Of ``documents``, those whose text opens with a line of code that reads as a heading in their
    # first chunk, which lost its indent ("    # Ada Lovelace": ``joins.code_heading``)
    code_headings: set[str] = field(default_factory=set)
    # Indexed paths (a file's, or its rows': ``file#n``) of files as indexed but for a new
    # status-change time (``on_disk.retimed``): unchanged files, as ``graph_state.read_again`` counts them
    retimed: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class ExtractionStageContext:
    """What the Indexer gives a run of the streaming stage (``Indexer._stream_stage``)."""

    settings: Settings
    root: Path | None                   # what stored paths are relative to
    progress: Progress                  # the counters it bumps
    llm: LLMClient | None               # the run's model client (None offline without embeddings)
    prompts: ExtractionPrompts | None   # None offline
    key: str                            # the extractor's (``extractor_key``): extractions are stored under it
    # Records a failed item, and stops the run when the endpoint is plainly down (``Indexer.fail``
    # through the run's writer): (stage, item, message, error=None, *, stamp=None, kind=None).
    fail: Callable[..., Awaitable[None]]


class ExtractionStage:
    """One run of the streaming stage: the ``Scan`` its actors fill, and one method per actor
    (loader, chunker, extractor ×N, gleaner ×N). ``Indexer._stream_stage`` wires the streams."""

    def __init__(self, given: ExtractionStageContext, store: Store, writer: Writer, scan: Scan,
                 recut_all: bool, check: YesNoCheck, *, publishing: bool = True) -> None:
        self.settings = given.settings
        self.root = given.root
        self.progress = given.progress
        self.llm = given.llm
        self.prompts = given.prompts
        self.key = given.key
        self.fail = given.fail
        self.load_failed: set[str] = set()   # this run's files it could not use (``fail_load``)
        self.store = store
        self.writer = writer
        self.scan = scan
        self.recut_all = recut_all
        self.check = check
        self.scheduled: set[str] = set()
        self.by_file: dict[str, dict[str, tuple[str, int, float]]] = defaultdict(dict)
        for p, v in scan.indexed.items():  # a file's rows: "file" itself, or "file#row" for .jsonl/.csv
            for name in on_disk.file_names(p):   # (a name may hold "#" itself)
                self.by_file[name][p] = v
        self.paths_of: dict[str, str] = {}   # doc id -> a path of it, made when a failure needs it
        # path -> (stamp, message, kind) when last tried (not a file over index.max_file_mb: a
        # stat says it again, and a higher setting reads it as it is)
        self.failed_reads = index_rows.failed_reads(store)
        # path -> (stamp, warning, said again): nothing to index when last read
        self.empty = index_rows.empty_files(store)
        self.still_empty: dict[str, tuple[str, str, bool]] = {}   # those of this run's files
        # Remembered by a run that says its warnings, not by a watch's extraction ahead (whose
        # warnings are its sync's): an export, said once, was remembered there unsaid, and the
        # sync found it remembered and unchanged, and said nothing either.
        self.remembers_empty = publishing
        # A file's stat (or why it failed) taken by ``look_at`` at the run's start, used by the
        # loader in place of its own: a file is looked at once (a stat more of each file of the
        # folder, on every sync, was the cost of naming them there). A file changed after it
        # is read as it is then, with the stamp of before: the next run reads it again.
        self.looked: dict[str, os.stat_result | OSError] = {}
        self.previous: dict[str, str] = {}   # doc id -> the id of the document its path held, changed since
        # What the claims answers got wrong, how many did, and the chunk of the first: one warning
        # says them (``claims_warning``)
        self.claim_faults: Counter[str] = Counter()
        self.faulty_claims = 0
        self.first_faulty_claims = ""
        # A chunk whose claims call failed after its entities and relationships were extracted
        # is stored under ``claimless_key`` (and published so); the next run asks its claims
        # call alone: the chunks it sends for that (``schedule``), their stored extraction read
        # by the extractor and passed on without a call, nor gleaned again.
        self.claimless = None if self.settings.offline else claimless_key(self.settings)
        self.claims_only: set[str] = set()

    async def load_files(self, files: list[Path], send) -> None:
        """The loader: reads each new or changed file and sends its new documents on."""
        scan, root = self.scan, self.root
        looked_at: set[str] = set()   # the files as the index names them
        async with send:
            for path in files:
                rel = loader.stored_path(path, root)
                looked_at.add(rel)
                rows = self.by_file.get(rel, {})
                looked = self.looked.pop(rel, None)
                try:
                    if isinstance(looked, OSError):
                        raise looked
                    st = looked or path.stat()
                except OSError as e:
                    if on_disk.deleted(path, root):   # since the scan found it: it leaves
                        self.progress.add("files_done")
                        continue
                    # What was indexed from it stays until the file can be read again.
                    scan.files.update(rows)
                    # (said as a failed read is: ``loader.read_documents``)
                    await self.fail_load(rel, loader.unreadable_line(loader.shown(rel), e.strerror or str(e),
                                                                     kept=bool(rows)),
                                         stamp=on_disk.failure_stamp(path), kind=UnreadableFile.kind)
                    continue
                stamp = on_disk.change_stamp(st)
                same = on_disk.same_on_disk(rows, st)
                if same and not self.recut_all:
                    scan.files.update(rows)  # unchanged on disk: not even read
                    self.progress.add("files_done")
                    continue
                as_is = on_disk.file_stamp(st)
                failed = self.failed_reads.get(rel)
                if failed is not None and failed[0] == as_is and not rows and not self.recut_all:
                    # Unchanged since it could not be used: named again, not read again (nothing
                    # indexed from it to keep or drop; read anew when it or the reading settings change).
                    await self.fail_load(rel, failed[1], stamp=as_is, kind=failed[2])
                    self.progress.add("files_done")
                    continue
                empty = self.empty.get(rel)
                if empty is not None and empty[0] == as_is and not rows and not self.recut_all:
                    # Unchanged since it held nothing to index: said again (not an export, said
                    # once: ``EmptyInput.again``, or when named itself), not read again.
                    self.still_empty[rel] = empty
                    if empty[2] or rel in self.scan.scope:
                        scan.warnings.append(empty[1])
                    self.progress.add("files_done")
                    continue
                try:
                    docs, warnings = await self.read(path, st)
                except InputError as e:
                    await self.not_read(path, rel, rows, same, e, as_is)
                    continue
                scan.warnings += warnings
                if rows and not same:
                    if {doc.path: doc.id for doc in docs} == {p: v[0] for p, v in rows.items()}:
                        scan.new_times.update(doc.id for doc in docs)   # the same documents
                    elif on_disk.retimed(rows, st):
                        scan.retimed.update(rows)
                for doc in docs:
                    if doc.path in rows and rows[doc.path][0] != doc.id:
                        self.previous[doc.id] = rows[doc.path][0]
                    scan.files[doc.path] = (doc.id, st.st_size, stamp)
                    scan.titles[doc.path] = doc.title
                    if doc.id not in scan.documents:
                        if joins.code_heading(doc.text):
                            scan.code_headings.add(doc.id)
                        scan.documents[doc.id] = msgspec.structs.replace(doc, text="")
                        scan.chars[doc.id] = len(doc.text)
                        await send.send(doc)
                self.progress.add("files_done")
            if self.remembers_empty:
                await self._remember_empty(looked_at)

    async def read(self, path: Path, st: os.stat_result) -> tuple[list[Document], list[str]]:
        """``loader.read_documents`` of ``path`` (``st``: its stat), a big file's in a worker thread
        (``read_apart``): the event loop goes on meanwhile (a signal is taken, the chunks of other
        files are extracted), and a stop ends the read within moments, not when it is done."""
        return await read_apart(path, st, root=self.root, text_field=self.settings.index.text_field,
                                max_mb=self.settings.index.max_file_mb)

    async def fail_load(self, rel: str, said: str, **kwargs) -> None:
        """Records that file ``rel`` could not be used (``fail``), and remembers it for
        ``not_indexed``: no later run indexes it as it is."""
        self.load_failed.add(rel)
        await self.fail("load", rel, said, **kwargs)

    def look_at(self, files: list[Path]) -> None:
        """Stats each of ``files`` (the loader's) at the run's start, keeping the stat (or why it
        failed) for the loader (``looked``) and for ``not_indexed`` to name the files the run
        takes (``index_rows.note_taking``): each file is looked at once."""
        for path in files:
            rel = loader.stored_path(path, self.root)
            try:
                self.looked[rel] = path.stat()
            except OSError as e:
                self.looked[rel] = e

    def not_indexed(self, files: list[Path], looked: Mapping[str, os.stat_result | OSError] | None = None
                    ) -> list[str]:
        """Of ``files`` (the loader's), those a run that publishes nothing leaves as they were,
        read or not yet, as the index names them: new, or changed since the published version.
        Not those as indexed (or only retimed), that could not be used (this run's failure, or an
        earlier one's while unchanged, says them), that held nothing (a warning says them), or
        gone. ``looked``: their stats as taken (``look_at``), else each is looked at now."""
        out = []
        for path in files:
            rel = loader.stored_path(path, self.root)
            if rel in self.load_failed:   # (its failure says it: a binary file, one unreadable)
                continue
            rows = self.by_file.get(rel, {})
            try:
                st = looked[rel] if looked is not None and rel in looked else path.stat()
                if isinstance(st, OSError):
                    raise st
            except OSError:   # gone, or said as a failure to read it
                continue
            if not self.recut_all and (on_disk.same_on_disk(rows, st) or on_disk.retimed(rows, st)):
                continue
            said = self.failed_reads.get(rel), self.empty.get(rel)
            if not rows and not self.recut_all and any(s is not None and s[0] == on_disk.file_stamp(st) for s in said):
                continue
            out.append(rel)
        return out

    async def _remember_empty(self, looked_at: set[str]) -> None:
        """Records the files this run found with nothing to index, and forgets those it read
        otherwise (``looked_at``: every file it loaded, by its indexed path), that are gone, or
        that it no longer takes (index.include, index.exclude: under its paths, not looked at).
        A run of a few files keeps what lies outside them."""
        kept = {rel: v for rel, v in self.empty.items()
                if rel not in looked_at and not on_disk.covered(rel, self.scan.scope)
                and os.path.lexists(Path(self.root or "") / rel)}
        now = kept | self.still_empty
        if now != self.empty:
            await self.writer.run(index_rows.save_empty_files, now)

    async def not_read(self, path: Path, rel: str, rows: dict[str, tuple[str, int, float]], same: bool,
                       e: InputError, stamp: str) -> None:
        """A file the loader could not read (``stamp``: its ``on_disk.file_stamp``, recorded with
        the failure, so that it counts once until the file changes): what was indexed from it
        stays, or leaves."""
        if on_disk.deleted(path, self.root):   # while it was read: it leaves
            self.progress.add("files_done")
            return
        # A read that failed (UnreadableFile: an I/O error, a refusal) keeps it, even where a
        # second look reads it (a flaky mount): what it holds now is not known.
        kept = rows and ((same and isinstance(e, NoTextField)) or isinstance(e, UnreadableFile)
                         or not on_disk.readable(path))
        if kept and isinstance(e, NoTextField):
            self.scan.old_reading_kept = True  # read it again next run, and say so again
        if kept:
            # What was indexed from it stays until the file can be read again,
            # or, the file being as it was, until index.text_field names a field
            # it has again. A file that now holds no text (made empty, binary,
            # or its rows' field dropped) leaves the index.
            self.scan.files.update(rows)
        if isinstance(e, EmptyInput):   # nothing failed: there is nothing to read
            self.scan.warnings.append(str(e))
            if not kept:   # (not read again while it stays as it is: ``load_files``)
                self.still_empty[rel] = (stamp, str(e), e.again)
        else:   # (one the system would not read is read again all the same: ``index_rows.failed_reads``)
            await self.fail_load(rel, loader.failure_line(loader.shown(rel), e, kept=bool(kept)), stamp=stamp,
                                 kind=e.kind)
        self.progress.add("files_done")

    async def chunk_documents(self, recv, send) -> None:
        """The chunker: cuts and stores each document not chunked yet, and schedules its chunks
        and those of the kept documents that lack an extraction."""
        scan, ix = self.scan, self.settings.index
        async with recv, send:
            async for doc in recv:
                if not self.recut_all and index_rows.is_chunked(self.store, doc.id):  # the same text is indexed already (a rename or a copy)
                    continue
                if len(doc.text) < _CHUNK_IN_THREAD_CHARS:
                    chunks = chunker.chunk_document(doc, chunk_size=ix.chunk_size, overlap=ix.chunk_overlap,
                                                    encoding=ix.encoding)
                    await self.writer.run(index_rows.save_chunks, chunks, ix.encoding)
                else:  # seconds for a book-sized file: signals and other work go on meanwhile
                    chunks = await self.cut_big(doc)
                scan.doc_chunks[doc.id] = [msgspec.structs.replace(c, text="") for c in chunks]
                await self.schedule(chunks, send)
            # Chunks of documents already indexed that lack an extraction by the current
            # extractor: its settings changed, or an earlier run failed on them.
            kept = sorted({doc_id for doc_id, _s, _m in scan.files.values()} - set(scan.doc_chunks))
            await self.schedule(index_rows.backlog(self.store, kept, self.key, ix.encoding), send)

    async def cut_big(self, doc: Document) -> list[Chunk]:
        """The chunks of a big document, in a worker thread, stored with their spans: those
        before and after its change kept from the document its file held (``chunker.cut_document``),
        without their text (``schedule`` reads it for those it sends). The run cancelled, the
        thread stops within milliseconds (``in_thread``), not when the cut is done: Python waits
        for it as it exits (Ctrl-C said "interrupted", then a 100 MB log's cut went on for a minute)."""
        ix, store = self.settings.index, self.store
        was = self.previous.get(doc.id)
        before = index_rows.chunk_spans(store, was) if was is not None and not self.recut_all else None
        cut = functools.partial(chunker.cut_document, doc, before, chunk_size=ix.chunk_size,
                                overlap=ix.chunk_overlap, encoding=ix.encoding,
                                key=chunking_marks.chunker_key(self.settings).encode())
        done = await in_thread(cut, doc.path)
        kept = []
        if before is not None and (done.kept or done.tail < len(before.starts)):
            kept = index_rows.chunks_of(store, was, done.kept, done.tail, doc.id,
                                        done.kept + len(done.chunks) - done.tail, ix.encoding)
        await self.writer.run(index_rows.save_cut, doc.id, done.chunks, done.spans, ix.encoding)
        return kept[:done.kept] + done.chunks + kept[done.kept:]

    async def schedule(self, chunks: list[Chunk], send) -> None:
        """Sends each of ``chunks`` to the extractors, once, unless its extraction is stored
        already: found for them all at once (``index_rows.extracted``), not by a query a chunk
        (4,570 for a change of a 25 MB file), and the text of a kept chunk given without it
        read then."""
        fresh = []
        for c in chunks:
            if c.id not in self.scheduled:
                self.scheduled.add(c.id)
                fresh.append(c)
        self.progress.add("chunks_total", len(fresh))
        stored = index_rows.extracted(self.store, {c.id for c in fresh}, self.key)
        self.progress.add("chunks_reused", len(stored))
        wanted = [c for c in fresh if c.id not in stored]
        if self.claimless and wanted:
            self.claims_only |= index_rows.extracted(self.store, {c.id for c in wanted}, self.claimless)
        texts = dict(index_rows.chunk_texts(self.store, [c.id for c in wanted if not c.text]))
        for c in wanted:
            await send.send(c if c.text else msgspec.structs.replace(c, text=texts[c.id]))

    def where(self, c: Chunk) -> str:
        """A chunk as a user finds it: its file, and which chunk of it."""
        scan = self.scan
        if c.doc_id not in scan.documents and c.doc_id not in self.paths_of:  # (the scan grows)
            self.paths_of.update(index_rows.shown_paths(scan.files))
        doc = scan.documents.get(c.doc_id)
        path = doc.path if doc is not None else self.paths_of.get(c.doc_id, c.doc_id)
        return chunk_shown(path, c.idx, c.id)

    async def extract_chunks(self, recv, send) -> None:
        """An extractor: the first extraction of each chunk, sent on to the gleaners."""
        async with recv, send:
            async for c in recv:
                if c.id in self.claims_only:   # (its entities extracted by a run whose claims call failed)
                    await send.send((c, index_rows.load_extractions(self.store, {c.id}, self.claimless)[c.id]))
                    continue
                try:
                    ext = await extract_chunk(self.llm, self.prompts, c, self.settings)
                except LLMError as e:
                    await self.fail("extract", c.id, f"{self.where(c)}: {e}", e)
                    continue
                await send.send((c, ext))

    async def glean_chunks(self, recv) -> None:
        """A gleaner: gleans and extracts the claims of each chunk, and stores its extraction
        (offline, nothing to glean: ``store_offline``)."""
        if self.settings.offline:
            await self.store_offline(recv)
            return
        async with recv:
            async for c, ext in recv:
                try:
                    if c.id not in self.claims_only:
                        ext = await glean(self.llm, self.prompts, c, ext, self.settings, self.check)
                except LLMError as e:
                    await self.fail("glean", c.id, f"{self.where(c)}: {e}", e)
                    continue
                faults: Counter[str] = Counter()
                try:
                    ext = await extract_claims(self.llm, self.prompts, c, ext, self.settings, faults)
                except LLMError as e:
                    await self.claims_failed(c, ext, e)
                    continue
                if faults:
                    self.claim_faults += faults
                    self.faulty_claims += 1
                    self.first_faulty_claims = self.first_faulty_claims or self.where(c)
                await self.writer.run(index_rows.save_extraction, c.id, self.key, ext)
                self.progress.add("chunks_extracted")

    async def claims_failed(self, c: Chunk, ext: Extraction, e: LLMError) -> None:
        """Chunk ``c``'s claims call failed (``e``) after its entities and relationships were
        extracted (``ext``): those are stored under ``claimless_key`` and published, its claims
        asked again on the next run (a failed claims call failed the whole chunk: its paid
        extraction was not used until a later run extracted it again). Counted extracted only
        when its entities were extracted now: a chunk only asked its claims (``claims_only``)
        whose call failed again had each failing `watch` retry say "10 chunks extracted"."""
        if c.id not in self.claims_only:
            await self.writer.run(index_rows.save_extraction, c.id, self.claimless, ext)
            self.progress.add("chunks_extracted")
        await self.fail("claims", c.id, f"{self.where(c)}: {e}; its entities and relationships are indexed "
                                        "without its claims, which the next run asks for again", e)

    def claims_warning(self) -> str:
        """The warning of what this run's claims answers got wrong ("" when none did)."""
        if not self.faulty_claims:
            return ""
        return claim_faults_warning(self.claim_faults, self.faulty_claims, self.first_faulty_claims,
                                    self.settings.llm.extraction_model)

    async def store_offline(self, recv) -> None:
        """Stores the offline extractions ``_OFFLINE_GROUP`` at a time, or those held when no
        more has come for ``_OFFLINE_IDLE`` seconds (the last ones at the stream's end): the
        chunks of small files extracted while a big one is cut were held, and counted 0
        extracted, until its cut was done (a minute for a 100 MB log), then lost to a Ctrl-C."""
        held: list[tuple[str, Extraction]] = []
        async with recv:
            while True:
                with anyio.move_on_after(_OFFLINE_IDLE if held else math.inf):
                    try:
                        c, ext = await recv.receive()
                    except anyio.EndOfStream:
                        break
                    held.append((c.id, ext))
                    if len(held) < _OFFLINE_GROUP:
                        continue
                await self._store(held)   # (a group, or those held when none came)
                held = []
            if held:
                await self._store(held)

    async def _store(self, held: list[tuple[str, Extraction]]) -> None:
        await self.writer.run(index_rows.save_extractions, self.key, held)
        self.progress.add("chunks_extracted", len(held))
