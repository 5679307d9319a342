"""The indexer's SQL: the stage products and the published graph it reads, and the rows it
writes, ending with ``publish``, which replaces the published index in one transaction (or
leaves it as it is when no published row would differ).

Functions that write run inside the writer task (``writer.run(save_chunks, ...)``); the rest
read through the caller's connection. What to write is decided by the pipeline and the
in-memory graph (``graph_state``), not here.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator
from typing import TYPE_CHECKING

import msgspec

from streamrag.cache import EMBEDDING_SCHEME
from streamrag.call_log import UNUSABLE
from streamrag.config import without_secrets
from streamrag.errors import SAID_AS, StoreError
from streamrag.records import Chunk, Claim, Community, Extraction, Report, Spans
from streamrag.store import (COUNTED_RUN, FAILURE_KEY, TOO_BIG_UNKINDED_IF, UNINDEXED_FILES, UNINDEXED_RUNS, Store,
                             count_failure_keys)
from streamrag.terminal import flat
from streamrag.terms import fts_text

if TYPE_CHECKING:
    from streamrag.graph_state import Change, GraphState
    from streamrag.extraction_stage import Scan

_extraction_json = msgspec.json.Encoder()
_extraction_decode = msgspec.json.Decoder(Extraction)


def _batches(values) -> Iterator[list]:
    """``values`` sorted, in parts small enough for one ``IN (...)`` each."""
    ordered = sorted(values)
    for i in range(0, len(ordered), 500):
        yield ordered[i:i + 500]


def _in(column: str, values: list) -> str:
    return f"{column} IN ({','.join('?' * len(values))})"


# --------------------------------------------------------------------------------------------
# Reads
# --------------------------------------------------------------------------------------------
def cached_keys(store: Store, keys) -> set[str]:
    """Those of ``keys`` the LLM cache holds an answer for."""
    out: set[str] = set()
    for part in _batches(keys):
        out.update(k for (k,) in store.conn.execute(f"SELECT key FROM llm_cache WHERE {_in('key', part)}", part))
    return out


def files(store: Store) -> dict[str, tuple[str, int, float]]:
    """The indexed files: path (``file`` or ``file#row``) -> (document id, size, change stamp)."""
    return {p: (d, size, stamp) for p, d, size, stamp in
            store.conn.execute("SELECT path, doc_id, size, stamp FROM files")}


def file_paths(store: Store) -> list[str]:
    return [p for (p,) in store.conn.execute("SELECT path FROM files")]


def _starting(prefix: str) -> tuple[str, str]:
    """The bounds of the paths that start with ``prefix``, for ``path >= ? AND path < ?``: a
    search of the path index (``substr(path, ...) = ?`` read every path, 9 ms a call for 20,000
    files, and the daemon made two per deleted file)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def paths_under(store: Store, folder: str) -> list[str]:
    """The indexed paths in the folder ``folder`` (relative to the root), at any depth."""
    return [p for (p,) in store.conn.execute("SELECT path FROM files WHERE path >= ? AND path < ?",
                                             _starting(folder + "/"))]


def file_rows_under(store: Store, folder: str) -> dict[str, dict[str, tuple[str, int, float]]]:
    """The indexed files in the folder ``folder`` (at any depth), each with its rows as
    ``file_rows`` gives them; one query for the whole folder."""
    # (loader imported by the two functions that need it, not by every command that reads the
    # index: status, vacuum and --help read no files, and it was a fifth of their start-up)
    from streamrag.loader import file_of

    out: dict[str, dict[str, tuple[str, int, float]]] = {}
    for p, doc_id, size, stamp in store.conn.execute(
            "SELECT path, doc_id, size, stamp FROM files WHERE path >= ? AND path < ?",
            _starting(folder + "/")):
        out.setdefault(file_of(p), {})[p] = (doc_id, size, stamp)
    return out


def holds_under(store: Store, folder: str) -> bool:
    return store.scalar("SELECT 1 FROM files WHERE path >= ? AND path < ? LIMIT 1",
                        _starting(folder + "/")) is not None


def holds_file(store: Store, file: str) -> bool:
    """Whether the file ``file`` is indexed (itself, or rows of it: ``data.jsonl#3``)."""
    return bool(file_rows(store, file))


def file_rows(store: Store, file: str) -> dict[str, tuple[str, int, float]]:
    """The indexed rows of the file ``file``, as ``files`` gives them: itself, or its rows
    (``data.jsonl#3``); empty if the index does not hold it."""
    from streamrag.loader import file_of   # (as in file_rows_under)

    return {p: (doc_id, size, stamp) for p, doc_id, size, stamp in store.conn.execute(
        "SELECT path, doc_id, size, stamp FROM files WHERE path = ? OR (path >= ? AND path < ?)",
        (file, *_starting(file + "#"))) if p == file or file_of(p) == file}


def file_record(store: Store, file: str) -> tuple[tuple[str, ...], int] | None:
    """(document ids, size) of the indexed file ``file``: its one document, or the documents of
    its rows (``data.jsonl#3``), sorted; ``None`` if the index does not hold it."""
    rows = list(file_rows(store, file).values())
    if not rows:
        return None
    return tuple(sorted(doc_id for doc_id, _size, _stamp in rows)), rows[0][1]


def document_ids(store: Store) -> set[str]:
    return {d for (d,) in store.conn.execute("SELECT id FROM documents")}


def document_paths(store: Store) -> dict[str, str]:
    """Document id -> the path it is shown with."""
    return dict(store.conn.execute("SELECT id, path FROM documents"))


def document_chars(store: Store, doc_ids: Iterable[str]) -> dict[str, int]:
    """Document id -> the characters of its text as indexed, of the published ``doc_ids``."""
    out: dict[str, int] = {}
    for part in _batches(doc_ids):
        out.update(store.conn.execute(f"SELECT id, chars FROM documents WHERE {_in('id', part)}", part))
    return out


def document_title(store: Store, doc_id: str) -> str | None:
    return store.scalar("SELECT title FROM documents WHERE id = ?", (doc_id,))


def document_titles(store: Store, doc_ids: Iterable[str]) -> dict[str, str]:
    """Document id -> the title it is shown with, of the published ``doc_ids``."""
    out: dict[str, str] = {}
    for part in _batches(doc_ids):
        out.update(store.conn.execute(f"SELECT id, title FROM documents WHERE {_in('id', part)}", part))
    return out


def shown_paths(files: dict[str, tuple[str, int, float]]) -> dict[str, str]:
    """Document id -> the path it is shown with: the first, in order, of the files holding it."""
    shown: dict[str, str] = {}
    for path, (doc_id, _size, _stamp) in sorted(files.items()):
        shown.setdefault(doc_id, path)
    return shown


def is_chunked(store: Store, doc_id: str) -> bool:
    return store.scalar("SELECT 1 FROM document_chunks WHERE doc_id = ? LIMIT 1", (doc_id,)) is not None


def chunk_spans(store: Store, doc_id: str) -> Spans | None:
    """Where each chunk of document ``doc_id`` lies in its text (``records.Spans``), if recorded
    for every one of its chunks."""
    rows = store.conn.execute("SELECT start, end, digest FROM chunk_spans WHERE doc_id = ? ORDER BY idx",
                              (doc_id,)).fetchall()
    chunks = store.scalar("SELECT count(*) FROM document_chunks WHERE doc_id = ?", (doc_id,))
    if not rows or len(rows) != chunks:
        return None
    return Spans(*map(list, zip(*rows)))


def chunks_of(store: Store, doc_id: str, head: int, tail: int, of: str, moved: int, encoding: str) -> list[Chunk]:
    """The chunks of document ``doc_id`` before index ``head`` and from index ``tail`` on (the
    two ends a changed big file keeps: ``chunker.cut_document``), in one query, as chunks of
    document ``of``, those from ``tail`` on numbered ``moved`` further; without their text (a
    25 MB file's, read back for the few that may lack an extraction: ``chunk_texts``). Their
    tokens counted in ``encoding`` (``_in_encoding``)."""
    rows = store.conn.execute(
        "SELECT dc.idx, dc.chunk_id, c.tokens, c.encoding FROM document_chunks dc JOIN chunks c ON c.id = dc.chunk_id "
        "WHERE dc.doc_id = ? AND (dc.idx < ? OR dc.idx >= ?) ORDER BY dc.idx", (doc_id, head, tail)).fetchall()
    other = [chunk_id for _i, chunk_id, _n, stored in rows if stored != encoding]
    counted = _in_encoding(chunk_texts(store, other), encoding)
    return [Chunk(id=chunk_id, doc_id=of, idx=idx if idx < head else idx + moved, text="",
                  tokens=counted.get(chunk_id, tokens)) for idx, chunk_id, tokens, _e in rows]


def _in_encoding(texts: Iterable[tuple[str, str]], encoding: str) -> dict[str, int]:
    """The tokens of chunks ((id, text) pairs, taken one at a time: read from the store as they
    are counted, no text is held after its count) whose stored count is another encoding's: a
    run of another index.encoding that published nothing (interrupted, or failed) stored them
    so, and the index, back at its encoding, does not cut them again. (None a document uses is
    of no recorded encoding: those from before ``chunks.encoding`` are counted by the upgrade,
    ``store._chunks_counted``, and every chunk a publish gives a document since is one its run
    stored with its encoding, ``save_chunks``, or a document's already.)"""
    pairs = iter(texts)
    if (first := next(pairs, None)) is None:
        return {}
    from streamrag.tokens import count_tokens   # (not built to read counts that are this encoding's)

    return {chunk_id: count_tokens(text, encoding) for chunk_id, text in itertools.chain((first,), pairs)}


def chunk_ids_of(store: Store, doc_ids: set[str]) -> dict[str, list[str]]:
    """Chunk ids of each of ``doc_ids`` in document order (one query, not one per document)."""
    out: dict[str, list[str]] = {d: [] for d in doc_ids}
    for doc_id, chunk_id in store.conn.execute(
            "SELECT doc_id, chunk_id FROM document_chunks ORDER BY doc_id, idx"):
        if doc_id in out:
            out[doc_id].append(chunk_id)
    return out


def document_tokens(store: Store, doc_ids: set[str]) -> int:
    """The tokens of the indexed documents ``doc_ids``, together."""
    return sum(store.scalar(f"SELECT coalesce(sum(tokens), 0) FROM documents WHERE {_in('id', part)}", part)
               for part in _batches(doc_ids))


def live_chunks(store: Store) -> dict[str, str]:
    """The published chunks: chunk id -> the extractor whose result counts."""
    return dict(store.conn.execute("SELECT chunk_id, extractor FROM live_chunks"))


def extracted(store: Store, chunk_ids: set[str], key: str) -> set[str]:
    """Those of ``chunk_ids`` with an extraction by ``key``."""
    found: set[str] = set()
    for part in _batches(chunk_ids):
        found.update(r for (r,) in store.conn.execute(
            f"SELECT chunk_id FROM extractions WHERE extractor = ? AND {_in('chunk_id', part)}", (key, *part)))
    return found


def backlog(store: Store, doc_ids: list[str], key: str, encoding: str) -> list[Chunk]:
    """Chunks of the given documents with no extraction by ``key``, their tokens counted in
    ``encoding`` (``_in_encoding``)."""
    out: list[Chunk] = []
    other: dict[str, str] = {}
    for part in _batches(doc_ids):
        for r in store.query(
                f"SELECT dc.doc_id, dc.idx, c.id, c.text, c.tokens, c.encoding FROM document_chunks dc "
                f"JOIN chunks c ON c.id = dc.chunk_id WHERE {_in('dc.doc_id', part)} "
                f"AND NOT EXISTS (SELECT 1 FROM extractions e WHERE e.chunk_id = c.id AND e.extractor = ?) "
                f"ORDER BY dc.doc_id, dc.idx", (*part, key)):
            out.append(Chunk(id=r["id"], doc_id=r["doc_id"], idx=r["idx"], text=r["text"], tokens=r["tokens"]))
            if r["encoding"] != encoding:
                other[r["id"]] = r["text"]
    counted = _in_encoding(other.items(), encoding)
    return [msgspec.structs.replace(c, tokens=counted[c.id]) if c.id in counted else c for c in out]


def load_extractions(store: Store, chunk_ids: set[str], key: str) -> dict[str, Extraction]:
    out: dict[str, Extraction] = {}
    for part in _batches(chunk_ids):
        for chunk_id, result in store.conn.execute(
                f"SELECT chunk_id, result FROM extractions WHERE extractor = ? AND {_in('chunk_id', part)}",
                (key, *part)):
            out[chunk_id] = _extraction_decode.decode(result)
    return out


def same_records(store: Store, published: dict[str, str], key: str) -> set[str]:
    """Those of the live chunks ``published`` (chunk id -> the extractor it is live with) whose
    extraction by ``key`` holds the records their published one holds (entities, relationships,
    claims; not its counts of calls), opens its sentences with the same lone words and resolves the
    same shorter names (``openers``, ``called``, which ``joins`` reads): merged again, they would
    make the rows and joins they made."""
    by_key: dict[str, set[str]] = defaultdict(set)
    for chunk_id, old in published.items():
        by_key[old].add(chunk_id)
    same: set[str] = set()
    for old, chunk_ids in by_key.items():
        for part in _batches(chunk_ids):   # (read 500 at a time, as ``StoredExtractions``)
            now, was = load_extractions(store, set(part), key), load_extractions(store, set(part), old)
            same.update(c for c, e in now.items() if (w := was.get(c)) is not None
                        and (e.entities, e.relationships, e.claims, e.openers, e.called)
                        == (w.entities, w.relationships, w.claims, w.openers, w.called))
    return same


class StoredExtractions:
    """The stored extractions of ``chunk_ids`` by extractor ``key``, read as they are taken:
    ``pop`` (a dict's, for the chunks asked for) in id order reads the next 500 when it needs
    them. A first index of 10,000 documents read all of them before merging one (165 MB held at
    once; 500 MB at 30,000 documents)."""

    def __init__(self, store: Store, chunk_ids: set[str], key: str, others: dict[str, str] | None = None) -> None:
        self._store, self._key = store, key
        # (the few chunks taken with another extractor's result: ``graph_state.Change.keys``)
        self._others = dict(others or {})
        self._parts = _batches(set(chunk_ids) - self._others.keys())
        self._read: dict[str, Extraction] = {}

    def pop(self, chunk_id: str) -> Extraction:
        if chunk_id in self._others:
            found = load_extractions(self._store, {chunk_id}, self._others.pop(chunk_id))
            if chunk_id not in found:
                raise self._gone(chunk_id)
            return found[chunk_id]
        while chunk_id not in self._read:
            part = next(self._parts, None)
            if part is None:
                raise self._gone(chunk_id)
            self._read.update(load_extractions(self._store, set(part), self._key))
        return self._read.pop(chunk_id)

    def _gone(self, chunk_id: str) -> StoreError:
        """Asked for and not stored: gone since the run found it (a prune)."""
        return StoreError(f"{self._store.path}: the extraction of chunk {chunk_id} went while this "
                          "run merged it (another indexer pruned it); run the command again")


def live_extractions(store: Store, chunk_ids: set[str]) -> dict[str, Extraction]:
    """The extraction each of the live ``chunk_ids`` is published with (its extractor's in
    live_chunks)."""
    out: dict[str, Extraction] = {}
    for part in _batches(chunk_ids):
        for chunk_id, result in store.conn.execute(
                "SELECT e.chunk_id, e.result FROM live_chunks l JOIN extractions e ON e.chunk_id = l.chunk_id "
                f"AND e.extractor = l.extractor WHERE {_in('l.chunk_id', part)}", part):
            out[chunk_id] = _extraction_decode.decode(result)
    return out


def stranded_claim_chunks(store: Store) -> set[str]:
    """The live chunks holding a claim whose subject or object is no entity: an index merged
    before ``merge.mentions_of`` made a claim's ends entities kept such claims, which no report
    or answer (both find claims by subject) showed."""
    return {row[0] for row in store.conn.execute(
        "SELECT DISTINCT chunk_id FROM claims c WHERE NOT EXISTS (SELECT 1 FROM entities WHERE id = c.subject_id) "
        "OR (c.object_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM entities WHERE id = c.object_id))")}


def named_with(store: Store, names: Iterable[str]) -> set[str]:
    """Ids of the published entities whose name holds any of ``names`` (each a run of words),
    looked up in their full-text table."""
    out: set[str] = set()
    for part in _batches(sorted({fts_text(n) for n in names} - {""})):
        expression = "name : (" + " OR ".join('"' + p.replace('"', '""') + '"' for p in part) + ")"
        out.update(i for (i,) in store.conn.execute("SELECT id FROM entities_fts WHERE entities_fts MATCH ?",
                                                    (expression,)))
    return out


def opening_words(store: Store, chunk_ids: Iterable[str]) -> set[str]:
    """The words the published extractions of the live ``chunk_ids`` open a sentence with alone
    (``Extraction.openers``)."""
    out: set[str] = set()
    for part in _batches(chunk_ids):
        out.update(w for (w,) in store.conn.execute(
            "SELECT DISTINCT j.value FROM live_chunks l JOIN extractions e ON e.chunk_id = l.chunk_id "
            f"AND e.extractor = l.extractor, json_each(e.result, '$.openers') j WHERE {_in('l.chunk_id', part)}",
            part))
    return out


def called_in(store: Store, chunk_ids: Iterable[str]) -> dict[str, dict[str, list[str]]]:
    """Of the live ``chunk_ids``, those whose published extraction resolved a shorter name to a
    name: chunk id -> name -> the shorter names as written (``Extraction.called``)."""
    out: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for part in _batches(chunk_ids):
        for chunk_id, name, shorter in store.conn.execute(
                "SELECT l.chunk_id, j.key, j.value FROM live_chunks l "
                "JOIN extractions e ON e.chunk_id = l.chunk_id AND e.extractor = l.extractor, "
                f"json_each(e.result, '$.called') j WHERE {_in('l.chunk_id', part)}",
                part):
            out[chunk_id][name] = msgspec.json.decode(shorter, type=list[str])
    return out


def opened_with(store: Store, names: Iterable[str]) -> list[tuple[str, str]]:
    """(chunk id, word) of the live chunks whose published extraction opens a sentence with one
    of ``names`` alone (``Extraction.openers``), looked up in the chunks' full-text table."""
    out: list[tuple[str, str]] = []
    for part in _batches({fts_text(n) for n in names} - {""}):
        expression = "text : (" + " OR ".join('"' + p.replace('"', '""') + '"' for p in part) + ")"
        out += store.conn.execute(
            "SELECT f.id, j.value FROM chunks_fts f JOIN live_chunks l ON l.chunk_id = f.id JOIN extractions e "
            "ON e.chunk_id = l.chunk_id AND e.extractor = l.extractor, json_each(e.result, '$.openers') j "
            "WHERE chunks_fts MATCH ?", (expression,)).fetchall()
    return out


def chunk_texts(store: Store, chunk_ids: list[str]) -> Iterator[tuple[str, str]]:
    """(id, text) of the stored chunks of ``chunk_ids``."""
    for part in _batches(chunk_ids):
        yield from store.conn.execute(f"SELECT id, text FROM chunks WHERE {_in('id', part)}", part)


def chunk_texts_of(store: Store, doc_id: str, chars: int) -> list[str]:
    """The texts of the document ``doc_id``'s chunks, in order, until they hold more than ``chars``
    characters (its opening's)."""
    texts, held = [], 0
    for (text,) in store.conn.execute("SELECT c.text FROM document_chunks dc "
                                      "JOIN chunks c ON c.id = dc.chunk_id "
                                      "WHERE dc.doc_id = ? ORDER BY dc.idx", (doc_id,)):
        texts.append(text)
        held += len(text)
        if held > chars:
            break
    return texts


def opening_headings(store: Store, chunk_ids: list[str]) -> Iterator[tuple[str, str]]:
    """(id, first 300 characters) of the stored chunks of ``chunk_ids`` whose text opens with a
    Markdown heading's "#" (``joins.heading_title``: a document's title; the texts of the others,
    a common name's thousands of first chunks, not read)."""
    opened = "ltrim(text, char(32, 9, 10, 13))"
    for part in _batches(chunk_ids):
        yield from store.conn.execute(
            f"SELECT id, substr({opened}, 1, 300) FROM chunks WHERE {_in('id', part)} AND {opened} LIKE '#%'", part)


def extracted_with(store: Store, key: str) -> set[str]:
    """The chunks extracted with extractor ``key``, in use or not."""
    return {c for (c,) in store.conn.execute("SELECT chunk_id FROM extractions WHERE extractor = ?", (key,))}


def gleaning_rounds(store: Store, key: str) -> dict[int, int]:
    """How many chunks extractor ``key`` gleaned how many times (its stored extractions, in
    use or not: a round is a gleaning call, whether it added anything or not)."""
    return {int(g): n for g, n in store.conn.execute(
        "SELECT max(rounds - 1, 0), count(*) FROM extractions WHERE extractor = ? GROUP BY 1", (key,))}


def gleaning_rounds_by_tokens(store: Store, key: str, encoding: str,
                              known: dict[str, int] | None = None) -> list[tuple[int, int]]:
    """(the chunk's tokens in ``encoding``, the times it was gleaned) of each of extractor
    ``key``'s stored extractions whose chunk the index holds, by tokens (``gleaning_rounds``,
    chunk by chunk). A count not marked ``encoding``'s is taken from ``known`` (chunk id -> its
    tokens in ``encoding``: the caller's own cut, a chunk id being its text's digest), else
    counted again (``_in_encoding``, the texts read one at a time): after index.encoding
    changed, the new chunks, counted in the new one, are set beside these by size.
    (A chunk no document uses is one a run that never published extracted, a measure of the
    model as good as the others: after an interrupted recut, of the very size asked. A published
    deletion leaves none: ``publish`` drops them. Its count may be of no recorded encoding: the
    upgrade counted only those a document uses, ``store._chunks_counted``.)"""
    known = known or {}
    rows = store.conn.execute(
        "SELECT c.id, c.tokens, c.encoding, max(e.rounds - 1, 0) FROM extractions e JOIN chunks c "
        "ON c.id = e.chunk_id WHERE e.extractor = ?", (key,)).fetchall()
    other = [chunk_id for chunk_id, _n, stored, _g in rows if stored != encoding and chunk_id not in known]
    counted = _in_encoding(chunk_texts(store, other), encoding)
    return sorted((int(known[chunk_id] if stored != encoding and chunk_id in known else
                       counted.get(chunk_id, tokens)), int(g)) for chunk_id, tokens, stored, g in rows)


def gleanings_stopped(store: Store, key: str, max_gleanings: int) -> tuple[int, int]:
    """Of extractor ``key``'s stored extractions with their checks recorded, those whose
    gleaning stopped before round ``max_gleanings`` after a gleaning, and of them those checked
    again after it (their last gleaning added something: a chunk gleaned g times was checked g
    times, and once more then)."""
    n, checked = store.conn.execute(
        "SELECT count(*), sum(checks > rounds - 1) FROM extractions WHERE extractor = ? AND checks IS NOT NULL "
        "AND rounds - 1 BETWEEN 1 AND ?", (key, max_gleanings - 1)).fetchone()
    return int(n or 0), int(checked or 0)


def later_checks(store: Store, keys: set[str]) -> tuple[int, int]:
    """Of extractors ``keys``' stored extractions with their checks recorded, the gleaning
    checks asked after a gleaning, and of them those that said yes (a chunk gleaned g times was
    checked g times, or g + 1 when the last check said no: its checks after the first said yes
    g - 1 times)."""
    n = yes = 0
    for part in _batches(sorted(keys)):
        a, b = store.conn.execute(
            f"SELECT sum(max(checks - 1, 0)), sum(max(rounds - 2, 0)) FROM extractions WHERE checks > 0 "
            f"AND {_in('extractor', part)}", part).fetchone()
        n, yes = n + int(a or 0), yes + int(b or 0)
    return n, yes


def published_with(store: Store, key: str) -> set[str]:
    """The published chunks whose result in the graph is extractor ``key``'s."""
    return {c for (c,) in store.conn.execute("SELECT chunk_id FROM live_chunks WHERE extractor = ?", (key,))}


def published_without_claims(store: Store, key: str | None, *run_ids: str) -> int:
    """The published chunks indexed without their claims, of those whose claims call failed in
    runs ``run_ids`` when any are given; 0 without ``key`` (the settings' ``extractor.claimless_key``:
    None with claims off, or offline). Such a chunk is published with a claimless key: ``key``, or,
    the settings edited since (another model), an earlier one, which no hash tells from a full
    key: the index's own (meta ``extractor_claimless``, marked since; before it, a chunk published
    with a key other than the index's, meta ``extractor``, whose claims call failed is one too:
    counted by ``key`` alone, a new model's status said 0 of them)."""
    if key is None:
        return 0
    built = store.get_meta("extractor") or ""
    if (marked := store.get_meta("extractor_claimless")) is not None:
        # The index's claimless key (``Indexer._settings_marks``): its own rows say which chunks
        # are published without claims, whatever failures are recorded (or pruned) of them.
        keys = (key, marked)
        if not run_ids:
            return store.scalar("SELECT count(*) FROM live_chunks WHERE extractor IN (?, ?)", keys)
        return store.scalar(f"SELECT count(DISTINCT f.item) FROM failures f JOIN live_chunks l ON l.chunk_id = f.item "
                            f"WHERE f.stage = 'claims' AND l.extractor IN (?, ?) AND {_in('f.run_id', run_ids)}",
                            (*keys, *run_ids))
    if not run_ids:
        return store.scalar(
            "SELECT count(*) FROM live_chunks l WHERE l.extractor = ? OR (l.extractor <> ? AND EXISTS "
            "(SELECT 1 FROM failures f WHERE f.stage = 'claims' AND f.item = l.chunk_id))", (key, built))
    return store.scalar(f"SELECT count(DISTINCT f.item) FROM failures f JOIN live_chunks l ON l.chunk_id = f.item "
                        f"WHERE f.stage = 'claims' AND (l.extractor = ? OR l.extractor <> ?) "
                        f"AND {_in('f.run_id', run_ids)}", (key, built, *run_ids))


def has_entities(store: Store) -> bool:
    return store.scalar("SELECT 1 FROM entities LIMIT 1") is not None


def has_chunks(store: Store) -> bool:
    """Whether the published index holds a chunk (one a new extractor extracts again)."""
    return store.scalar("SELECT 1 FROM live_chunks LIMIT 1") is not None


def live_lacking(store: Store, key: str, claimless: str | None = None) -> tuple[int, int, int]:
    """Of the published chunks, those with no extraction by ``key`` stored (a run with its
    settings extracts them again), all of them, and of the first those with one by ``claimless``
    (``extractor.claimless_key``: their claims call gave up), which the run asks their claims
    alone (``ExtractionStage.claims_only``), not extracted again."""
    lacking, live, claims_only = store.conn.execute(
        "SELECT sum(NOT EXISTS (SELECT 1 FROM extractions e WHERE e.chunk_id = l.chunk_id AND e.extractor = ?)), "
        "count(*), sum(NOT EXISTS (SELECT 1 FROM extractions e WHERE e.chunk_id = l.chunk_id AND e.extractor = ?) "
        "AND EXISTS (SELECT 1 FROM extractions e WHERE e.chunk_id = l.chunk_id AND e.extractor = ?)) "
        "FROM live_chunks l", (key, key, claimless)).fetchone()
    return int(lacking or 0), int(live or 0), int(claims_only or 0)


def element_descriptions(store: Store) -> Iterator[tuple[str, str]]:
    """(entity or relationship id, description) of every live mention of one."""
    for table, key in (("entity_sources", "entity_id"), ("relationship_sources", "relationship_id")):
        yield from store.conn.execute(f"SELECT {key}, description FROM {table}")


def built_offline(store: Store) -> bool:
    """Whether the published index in ``store`` was built offline (the NLP extractor, extractive
    summaries and reports): what a run with a model does again of it is said so, not as settings
    "changed since this index was built" that no one changed; its reports are extractive for it."""
    return offline_extractor(store.get_meta("extractor"))


def offline_extractor(extractor: str | None) -> bool:
    """Whether ``extractor``, an index's ``extractor`` mark (None: none published), is the NLP
    extractor's (``extractor.extractor_key``: "nlp-..."): the rule ``built_offline`` reads the mark
    by, and the command line's advice, which reads it without opening the index as a store
    (``store.recorded_extractor``)."""
    return (extractor or "").startswith("nlp-")


def built_by_model(store: Store) -> bool:
    """Whether the published index in ``store`` was built by a model: an update for want of an
    endpoint would replace its graph and reports with the NLP extractor's
    (``pipeline.check_not_downgraded`` refuses it), and a question asked without one is answered
    extractively (``query`` says why)."""
    return model_extractor(store.get_meta("extractor"))


def model_work(store: Store, live: Collection[str] | None = None) -> dict[str, int]:
    """What a model made of the published index, which an offline run replaces: the live chunks
    a model extracted, the claims it found, the summaries and reports it wrote (with ``live``, of
    those the run keeps live, below), and of those last two the answers not in llm_cache
    (``not_cached``: a run with the model again asks for them anew; the extractions stay stored
    whatever llm.cache says). (Those of the reports whose context names sub-communities, by id,
    were counted too, as asked again: the run with the model clustered from the offline
    partition, which gave those ids anew. It clusters from the model's partition now,
    ``graph_state.KeptPartition``, and they come back as the others do.)"""
    row = store.conn.execute(
        "SELECT (SELECT count(*) FROM live_chunks WHERE extractor LIKE 'llm-%'), "
        "(SELECT count(*) FROM claims), "
        "(SELECT count(*) FROM answers WHERE owner IN "
        "(SELECT id FROM entities UNION ALL SELECT id FROM relationships)), "
        "(SELECT count(*) FROM communities c JOIN reports r ON r.key = c.report_key WHERE r.extractive = 0), "
        "(SELECT count(*) FROM answers a WHERE (a.owner IN (SELECT id FROM entities UNION ALL SELECT id FROM "
        "relationships) OR a.owner IN (SELECT report_key FROM communities)) AND NOT EXISTS "
        "(SELECT 1 FROM llm_cache l WHERE l.key = a.key))").fetchone()
    work = dict(zip(("chunks", "claims", "summaries", "reports", "not_cached"), (int(n or 0) for n in row)))
    if live is None:
        return work
    # Those the run keeps live (``live``, its chunks), all counted alike: the model's chunks, the
    # claims they hold, the summaries of the entities and relationships a chunk of them still
    # names, the reports of the communities holding such an entity. A file gone counted its
    # chunks out but its claims, summaries and reports in.
    conn = store.conn
    kept = {c for (c,) in conn.execute("SELECT chunk_id FROM live_chunks WHERE extractor LIKE 'llm-%'")
            if c in live}
    sources = (("entity_sources", "entity_id"), ("relationship_sources", "relationship_id"))
    named = {e for table, column in sources
             for e, c in conn.execute(f"SELECT {column}, chunk_id FROM {table}") if c in kept}
    held = {c for c, e in conn.execute("SELECT community_id, entity_id FROM community_members") if e in named}
    reports = {cid: key for cid, key in conn.execute(
        "SELECT c.id, c.report_key FROM communities c JOIN reports r ON r.key = c.report_key "
        "WHERE r.extractive = 0") if cid in held}
    shown = set(reports.values())
    answers = dict(conn.execute("SELECT owner, key FROM answers").fetchall())
    summaries = [key for owner, key in answers.items() if owner in named]
    asked = summaries + [key for owner, key in answers.items() if owner in shown]
    cached = {key for (key,) in conn.execute(
        "SELECT key FROM llm_cache WHERE key IN (SELECT value FROM json_each(?))", (json.dumps(asked),))}
    work.update(chunks=len(kept),
                claims=sum(1 for (c,) in conn.execute("SELECT chunk_id FROM claims") if c in kept),
                summaries=len(summaries), reports=len(reports),
                not_cached=sum(1 for key in asked if key not in cached))
    return work


def model_extractor(extractor: str | None) -> bool:
    """Whether ``extractor``, an index's or a chunk's ``extractor`` mark (None: none published), is
    a model's (``extractor.extractor_key``: "llm-..."): the rule ``built_by_model`` reads the mark by."""
    return (extractor or "").startswith("llm-")


# The kinds of indexing run ``runs.kind`` records (``store``'s ``runs_kind``).
MODEL_RUN, OFFLINE_RUN = "model", "offline"

# The stages of a model's work on the index (an offline run may call an embedding model alone).
_MODEL_WORK = "('extract', 'glean', 'glean_check', 'claims', 'summarize', 'report')"


def _model_run_ok(store: Store) -> str:
    """The indexing runs (``runs r``) that ended "ok" with a model, or may have: of kind "model",
    or of no kind recorded (a streamrag before ``runs_kind``) that called a model for its work
    (each call is a row of ``llm_calls``, a cache hit too). A daemon's extraction ahead
    ("watch:extract") publishes nothing. An index a reader cannot upgrade is read without the
    column (``store._NO_OP_WHEN``): every run of no kind recorded."""
    kind = _kind_column(store)
    return ("r.status = 'ok' AND r.command NOT IN ('ask', 'watch:extract') AND ("
            f"{kind} = '{MODEL_RUN}' OR ({kind} IS NULL AND EXISTS (SELECT 1 FROM llm_calls c "
            f"WHERE c.run_id = r.id AND c.stage IN {_MODEL_WORK})))")


def _kind_column(store: Store) -> str:
    """``runs r``'s kind, as SQL: NULL of a table without the column."""
    return "r.kind" if store.scalar("SELECT 1 FROM pragma_table_info('runs') WHERE name = 'kind'") else "NULL"


def model_run_completed(store: Store) -> bool:
    """Whether a run with a model ended "ok" on the index in ``store`` (or may have: a run of
    no kind recorded that called a model), among the runs not yet pruned (``prune``)."""
    return bool(store.scalar(f"SELECT EXISTS (SELECT 1 FROM runs r WHERE {_model_run_ok(store)})"))


def extractive_report_keys(store: Store) -> set[str]:
    return {key for (key,) in store.conn.execute("SELECT key FROM reports WHERE extractive = 1")}


def extractive_reports_held(store: Store) -> int:
    """How many extractive reports a published community holds as its context's own (those a
    run with a model writes again, free, when ``reports.EXTRACTIVE_VERSION`` changed:
    ``pipeline.extractive_redone``). A stand-in for a failed answer keeps its context's key, not
    its report's: the run asks the model for it again, paid, whatever the version (a reader
    found it counted as written "with no LLM call")."""
    return store.scalar("SELECT count(*) FROM reports WHERE extractive = 1 AND key IN "
                        "(SELECT report_key FROM communities WHERE report_key = context_key)") or 0


def embedded(store: Store, kind: str, model: str) -> dict[str, str]:
    """Item id -> the hash of the text its stored ``kind`` vector (of ``model``) was made of."""
    return dict(store.conn.execute(
        "SELECT item_id, content_hash FROM embeddings WHERE kind = ? AND model = ?", (kind, model)))


def report_keys(store: Store) -> set[str]:
    return {key for (key,) in store.conn.execute("SELECT key FROM reports")}


def load_report(store: Store, key: str | None) -> Report | None:
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


# The published graph, as plain tuples for the two big tables (a dict per row was half the load).
def entity_rows(store: Store) -> Iterator[tuple[str, str, str, str, int, int]]:
    """(id, name, type, description, mentions, degree) of every entity."""
    return store.conn.execute("SELECT id, name, type, description, mentions, degree FROM entities")


def relationship_edges(store: Store) -> Iterator[tuple[str, str, str, float, int, int]]:
    """(id, source, target, weight, mentions, combined degree) of every relationship: its row
    but for the description (``relationship_descriptions`` reads those a step needs)."""
    return store.conn.execute("SELECT id, source, target, weight, mentions, combined_degree FROM relationships")


def relationship_descriptions(store: Store, ids: Collection[str], *, one_pass: bool = False) -> Iterator[tuple[str, str]]:
    """(id, description) of the published relationships among ``ids``: looked up by id, or
    picked from one pass over the table (``one_pass``, for many)."""
    if one_pass:
        wanted = ids if isinstance(ids, (set, frozenset)) else set(ids)
        yield from ((rid, d) for rid, d in store.conn.execute("SELECT id, description FROM relationships")
                    if rid in wanted)
        return
    for part in _batches(ids):
        yield from store.conn.execute(f"SELECT id, description FROM relationships WHERE {_in('id', part)}", part)


def load_claims(store: Store) -> list[Claim]:
    return [Claim(**{k: r[k] for k in Claim.__struct_fields__})
            for r in store.query("SELECT * FROM claims ORDER BY id")]


def load_communities(store: Store) -> list[tuple[Community, str | None, str | None]]:
    """Every published community in id order, members sorted, with its context and report keys."""
    # In the order of the primary key: a scan of its index alone gives each community's members
    # sorted (by entity_id, the index on it looked each row up: 93,000 members of an offline
    # index of 10,000 documents 0.48 s -> 0.24 s)
    members: dict[str, list[str]] = defaultdict(list)
    for cid, eid in store.conn.execute(
            "SELECT community_id, entity_id FROM community_members ORDER BY community_id, entity_id"):
        members[cid].append(eid)
    return [(Community(id=cid, level=level, parent=parent, members=members.get(cid, [])), context, report)
            for cid, level, parent, context, report in store.conn.execute(
                "SELECT id, level, parent, context_key, report_key FROM communities ORDER BY id")]


def graph_counts(store: Store) -> tuple[int, int, int, int]:
    """How many entities, relationships, claims and communities are published (counted, not read)."""
    return store.conn.execute("SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM relationships), "
                              "(SELECT count(*) FROM claims), (SELECT count(*) FROM communities)").fetchone()


def community_ids(store: Store) -> list[str]:
    return [cid for (cid,) in store.conn.execute("SELECT id FROM communities")]


def reports_of_their_contexts(store: Store) -> bool:
    """Whether every published community shows the stored report of its context: none shows a
    stand-in for a failed report, or an older one kept, which a run looks at again."""
    return store.scalar("SELECT 1 FROM communities WHERE context_key IS NULL OR report_key IS NOT context_key "
                        "OR report_key NOT IN (SELECT key FROM reports) LIMIT 1") is None


def ids_touching(store: Store, entity_ids: set[str]) -> set[str]:
    """Ids of the published relationships with an end among ``entity_ids``."""
    return _ids_by_ends(store, "relationships", ("source", "target"), entity_ids)


def claim_ids_of(store: Store, entity_ids: set[str]) -> set[str]:
    """Ids of the published claims whose subject or object is among ``entity_ids`` (a report's
    context shows a claim with either end among the community's members)."""
    return _ids_by_ends(store, "claims", ("subject_id", "object_id"), entity_ids)


def _ids_by_ends(store: Store, table: str, ends: tuple[str, ...], entity_ids: set[str]) -> set[str]:
    """Ids of the rows of ``table`` with one of ``ends`` among ``entity_ids``: a statement for
    each end, each on its own index, binding one batch (one statement for both bound 1,000
    values, and SQLite before 3.32 allows 999)."""
    found: set[str] = set()
    for part in _batches(entity_ids):
        for end in ends:
            found.update(r for (r,) in store.conn.execute(f"SELECT id FROM {table} WHERE {_in(end, part)}", part))
    return found


def ids_for_chunks(store: Store, table: str, column: str, chunk_ids: set[str]) -> set[str]:
    """The elements (``column`` of the provenance ``table``) that ``chunk_ids`` support."""
    out: set[str] = set()
    for part in _batches(chunk_ids):
        out.update(r for (r,) in store.conn.execute(
            f"SELECT DISTINCT {column} FROM {table} WHERE {_in('chunk_id', part)}", part))
    return out


def sources(store: Store, table: str, column: str, element_ids: set[str]) -> dict[str, list[dict]]:
    """The provenance rows of each of ``element_ids``: one per chunk that mentions it, read by
    column name. (``sqlite3.Row``, not a dict each: a hub of a big log has 18,000 of them, and
    making the dicts was a third of their reading on each edit.)"""
    out: dict[str, list[sqlite3.Row]] = defaultdict(list)
    cursor = store.conn.cursor()
    cursor.row_factory = sqlite3.Row
    for part in _batches(element_ids):
        for r in cursor.execute(f"SELECT * FROM {table} WHERE {_in(column, part)}", part):
            out[r[column]].append(r)
    return out


def relationship_weights(store: Store) -> dict[tuple[str, str], float]:
    """Weight of every published relationship by (source, target)."""
    return {(s, t): w for s, t, w in store.conn.execute("SELECT source, target, weight FROM relationships")}


# --------------------------------------------------------------------------------------------
# Writes (inside the writer task)
# --------------------------------------------------------------------------------------------
def save_chunks(store: Store, chunks: list[Chunk], encoding: str) -> None:
    """Stores ``chunks``, their ``tokens`` counted in ``encoding``. A chunk stored before (its id
    is its text's) takes this count when its own is another encoding's, or of one not recorded:
    after index.encoding changed, its count stayed the first encoding's."""
    store.conn.executemany(
        "INSERT INTO chunks(id, text, tokens, encoding) VALUES (?,?,?,?) ON CONFLICT(id) DO UPDATE "
        "SET tokens = excluded.tokens, encoding = excluded.encoding WHERE encoding IS NOT excluded.encoding",
        [(c.id, c.text, c.tokens, encoding) for c in chunks])


def chunk_tokens(store: Store, chunk_ids: list[str], encoding: str) -> dict[str, int]:
    """The stored token counts of those of ``chunk_ids`` counted in ``encoding``."""
    out: dict[str, int] = {}
    for part in _batches(chunk_ids):
        out.update(store.conn.execute(
            f"SELECT id, tokens FROM chunks WHERE encoding = ? AND {_in('id', part)}", (encoding, *part)))
    return out


def save_chunk_spans(store: Store, doc_id: str, spans: Spans) -> None:
    """Records where each chunk of document ``doc_id`` lies in its text (``chunker.cut_document``),
    in place of what was recorded of it."""
    store.conn.execute("DELETE FROM chunk_spans WHERE doc_id = ?", (doc_id,))
    store.conn.executemany("INSERT INTO chunk_spans(doc_id, idx, start, end, digest) VALUES (?,?,?,?,?)",
                           [(doc_id, k, *span) for k, span in enumerate(zip(*spans))])


def save_cut(store: Store, doc_id: str, chunks: list[Chunk], spans: Spans, encoding: str) -> None:
    """Stores the chunks a cut of big document ``doc_id`` made (``save_chunks``) and where all of
    its chunks lie: one transaction of the writer, not two."""
    save_chunks(store, chunks, encoding)
    save_chunk_spans(store, doc_id, spans)


def save_extraction(store: Store, chunk_id: str, key: str, ext: Extraction) -> None:
    save_extractions(store, key, [(chunk_id, ext)])


def save_extractions(store: Store, key: str, extractions: list[tuple[str, Extraction]]) -> None:
    """Stores each (chunk id, extraction) of ``extractions``, made by extractor ``key``."""
    at = time.time()
    store.conn.executemany(
        "INSERT OR REPLACE INTO extractions(chunk_id, extractor, result, dropped, rounds, checks, created_at) "
        "VALUES (?,?,?,?,?,?,?)",
        [(chunk_id, key, _extraction_json.encode(ext).decode(), ext.dropped, ext.rounds, ext.checks, at)
         for chunk_id, ext in extractions])


def save_report(store: Store, r: Report) -> None:
    cursor = store.conn.execute(
        "INSERT OR IGNORE INTO reports(key, title, summary, rating, rating_explanation, findings, text, "
        "tokens, elements, extractive, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (r.key, r.title, r.summary, r.rating, r.rating_explanation, msgspec.json.encode(r.findings).decode(),
         r.text, r.tokens, msgspec.json.encode(r.elements).decode(), int(r.extractive), time.time()))
    if cursor.rowcount and r.answer:
        store.conn.execute("INSERT OR REPLACE INTO answers(owner, key) VALUES (?,?)", (r.key, r.answer))


def _release_answers(store: Store, owners: set[str], at: float) -> None:
    """The model answers of ``owners`` (elements' summaries, reports by key) leave the index:
    they are dated from ``at`` in llm_cache, for ``prune`` to keep them store.keep_unused_days
    from then, and their rows in ``answers`` go."""
    for part in _batches(owners):
        store.conn.execute(f"UPDATE llm_cache SET created_at = ? WHERE key IN (SELECT key FROM answers "
                           f"WHERE {_in('owner', part)})", [at, *part])
    delete_in(store, "answers", "owner", owners)


def delete_in(store: Store, table: str, column: str, values: set[str]) -> None:
    for part in _batches(values):
        store.conn.execute(f"DELETE FROM {table} WHERE {_in(column, part)}", part)


def delete_fts(store: Store, table: str, column: str, values: set[str]) -> None:
    """Deletes the rows of the full-text ``table`` whose ``column`` is one of ``values`` (as
    ``delete_in``), in one look at its rows: its columns have no index, and ``delete_in`` scanned
    every row once per 500 values (removing 2,000 files of 6,000, 14,159 entities: 29 scans of
    entities_fts, 1.0 to 2.1 s; one, 0.35 to 0.8 s)."""
    if values:
        store.conn.execute(f"DELETE FROM {table} WHERE {column} IN (SELECT value FROM json_each(?))",
                           (json.dumps(sorted(values)),))


_ENTITY_COLUMNS = ("id", "name", "type", "description", "mentions", "degree")
_RELATIONSHIP_COLUMNS = ("id", "source", "target", "description", "weight", "mentions", "combined_degree")


def _differing(store: Store, table: str, columns: tuple[str, ...], rows: list[tuple]) -> list[tuple]:
    """Those of ``rows`` (``columns``, the id first) that ``table`` does not hold as they are."""
    stored: set[tuple] = set()
    for part in _batches(row[0] for row in rows):
        stored.update(store.conn.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {_in('id', part)}", part))
    return [row for row in rows if row not in stored]


def check_version(store: Store, worked_from: int) -> None:
    """Refuses to go on from a version another indexer has replaced since."""
    if store.version != worked_from:
        raise StoreError(f"{store.path}: another indexer published version {store.version} while this "
                         "run worked from an older one; nothing was published, run the command again "
                         "(finished work is reused)")


EMBEDDINGS = f"{EMBEDDING_SCHEME}-"   # how the cache key of an embedding begins
PRUNE_EVERY_S = 86400.0   # how often ``prune`` looks (it reads every llm_calls row)
# A stage's and model's usage, as `status` counts it, from llm_calls rows.
# (A cancelled call is no error: its caller stopped it. Cached are the calls the cache answered,
# as the client's ``stats`` count them. The rows, cached too, of identical calls that waited on a
# request a content filter stopped (``CallLog.record``'s shared, ``_WAITED``) are counted nowhere,
# as the client's stats do not count them: they got no answer and made no call; counted as calls
# that failed, a stop and its two waiters said errors 3 beside unusable 1, two endpoint errors.
# So are the waiters' rows of a request the endpoint refused: one call, one error.)
_WAITED = "cached = 1 AND error IS NOT NULL"
_USAGE = ("calls", "cached", "prompt_tokens", "completion_tokens", "errors", "cancelled")
# ... and of the paid calls answered usably, apart (``call_history``: the lengths of answers).
_ANSWERED = ("answered_paid", "answered_prompt_tokens", "answered_completion_tokens")
_PAID_ANSWER = "cached = 0 AND error IS NULL AND cancelled = 0"
_ANSWERED_SUMS = (f"sum({_PAID_ANSWER})", f"sum(CASE WHEN {_PAID_ANSWER} THEN prompt_tokens ELSE 0 END)",
                  f"sum(CASE WHEN {_PAID_ANSWER} THEN completion_tokens ELSE 0 END)")


def _unusable(error: str = "error") -> str:
    """Whether the llm_calls row's ``error`` is of an answer its caller could not use, as the
    client counted it (``call_log.unusable_error``). A content filter's stop recorded before its
    error was begun so is told by its own words."""
    return f"({error} LIKE '{UNUSABLE}%' OR {error} LIKE 'the provider''s content filter stopped %')"


# The calls answered with what their caller could not use, each answer once (as the client's
# stats count it): not the rows (cached) of identical calls that waited on it (``CallLog.record``'s shared).
_UNUSABLE_CALLS = f"FROM llm_calls u WHERE {_unusable('u.error')} AND u.cancelled = 0 AND u.cached = 0"
# Those of them whose request a later try of the same run answered (``LLMClient.chat``: a report
# cut off, asked again with more room): failed as calls, not as items. Built on ``_UNUSABLE_CALLS``
# so that the two cannot count unusable answers apart (787e447: the waiters' rows, counted here alone).
_ASKED_AGAIN = (f"{_UNUSABLE_CALLS} AND EXISTS (SELECT 1 FROM llm_calls a WHERE a.run_id = u.run_id "
                "AND a.cache_key = u.cache_key AND a.id > u.id AND a.error IS NULL)")


def unusable_answers(store: Store) -> dict[tuple[str, str], tuple[int, int, int]]:
    """By stage and model, of the calls ``llm_calls`` holds (the archive keeps no count of them
    by stage): (the usable answers paid for, the unusable ones, their completion tokens). An
    unusable answer (cut off at max_tokens, or not of the kind asked) is paid for, and its
    request asked again (a report cut off, with twice the room)."""
    return {(stage, model): (int(usable or 0), int(unusable or 0), int(tokens or 0))
            for stage, model, usable, unusable, tokens in store.conn.execute(
                f"SELECT stage, model, sum({_PAID_ANSWER}), sum({_unusable()}), "
                f"sum(CASE WHEN {_unusable()} THEN completion_tokens ELSE 0 END) FROM llm_calls "
                "WHERE cancelled = 0 AND cached = 0 GROUP BY stage, model")}


def report_answers(store: Store, model: str) -> list[tuple[int, bool]]:
    """The report answers of ``model`` paid for that ``llm_calls`` holds, as (prompt tokens,
    unusable), by prompt tokens: the usable ones (``unusable_answers``) and the unusable ones."""
    return [(int(tokens), bool(bad)) for tokens, bad in store.conn.execute(
        f"SELECT prompt_tokens, error IS NOT NULL FROM llm_calls WHERE stage = 'report' AND model = ? "
        f"AND cached = 0 AND cancelled = 0 AND (error IS NULL OR {_unusable()}) "
        "ORDER BY prompt_tokens, id", (model,))]


def asked_again(store: Store) -> int:
    """The unusable answers whose request was then answered (``errors`` counts them too), those
    folded into the archive included (``prune``)."""
    return store.scalar(f"SELECT count(*) {_ASKED_AGAIN}") + int(store.get_meta("archived_asked_again") or 0)


def unusable_calls(store: Store) -> int:
    """The calls answered with what their caller could not use (``errors`` counts them too),
    each answer once (``_UNUSABLE_CALLS``, as the client's ``stats`` count it),
    those folded into the archive included (``prune``). Of the archive, at least its answers asked again, each unusable
    first: an index pruned before ``archived_unusable`` was kept (3418377..290243a) folded
    them into ``archived_asked_again`` alone, and counted fewer unusable than asked again."""
    archived = max(int(store.get_meta("archived_unusable") or 0), int(store.get_meta("archived_asked_again") or 0))
    return store.scalar(f"SELECT count(*) {_UNUSABLE_CALLS}") + archived


# The counts are made from the calls grouped as the index ``llm_calls_usage`` orders them, by
# stage, model, cached and cancelled, with plain counts and sums (``failed``: the rows with an
# error), each group's counted as below: one read of that index (50 ms of 300,000 calls), not
# of every row sorted (250 ms). Written once, for `status` and for ``prune``, which folds old
# calls into the archive by them: each was written twice, per row and per group, kept equal by a test.
_USAGE_OF_GROUPS = ("n - CASE WHEN cached = 1 THEN failed ELSE 0 END",   # (not ``_WAITED``)
                    "CASE WHEN cached = 1 THEN n - failed ELSE 0 END",
                    "CASE WHEN cached = 0 THEN prompt_tokens ELSE 0 END",
                    "CASE WHEN cached = 0 THEN completion_tokens ELSE 0 END",
                    "CASE WHEN cancelled = 0 AND cached = 0 THEN failed ELSE 0 END",
                    "cancelled * n")
# The failed checks of the endpoint that refused nothing (``apart``: ``CallLog.record``) are counted
# in no call and no error, as the client's stats do not count them (index's and watch's lines): a
# down server's check was one of `status`'s errors, beside the refusal that stops a run. What
# ``_USAGE_OF_GROUPS`` counts of each (a group of one row: n 1) is taken off, read from their own
# small index (``llm_calls_apart``): ``llm_calls_usage`` is no index of ``apart``.
_APART_TAKEN = {"calls": "CASE WHEN cached = 1 AND error IS NOT NULL THEN 0 ELSE 1 END",
                "errors": "CASE WHEN cancelled = 0 AND cached = 0 AND error IS NOT NULL THEN 1 ELSE 0 END"}


def calls_apart(store: Store) -> bool:
    """Whether the index has ``llm_calls.apart`` (an older one a reader that cannot upgrade reads
    as it lies has none: ``store._NO_OP_WHEN``; none of its calls is apart)."""
    return "apart" in {row[1] for row in store.conn.execute("PRAGMA table_info(llm_calls)")}


def _usage_by_model(where: str = "", apart: bool = True) -> str:
    """The SQL of the usage counts (``_USAGE``) by stage and model of the calls ``where`` says
    (a condition on llm_calls; "": all of them); ``apart``: ``calls_apart``'s."""
    counts = ", ".join(f"sum({expr}) AS {name}" for expr, name in zip(_USAGE_OF_GROUPS, _USAGE))
    grouped = (f"SELECT stage, model, {counts} FROM (SELECT stage, model, cached, cancelled, count(*) AS n, "
               "count(error) AS failed, sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS "
               f"completion_tokens FROM llm_calls {f'WHERE {where} ' if where else ''}"
               "GROUP BY stage, model, cached, cancelled) GROUP BY stage, model")
    if not apart:
        return grouped
    taken = (f"SELECT stage, model, {', '.join(f'sum({e}) AS {c}' for c, e in _APART_TAKEN.items())} FROM llm_calls "
             f"WHERE apart = 1{f' AND {where}' if where else ''} GROUP BY stage, model")
    out = ", ".join(f"g.{c} - coalesce(a.{c}, 0) AS {c}" if c in _APART_TAKEN else f"g.{c} AS {c}" for c in _USAGE)
    return f"SELECT stage, model, {out} FROM ({grouped}) g LEFT JOIN ({taken}) a USING (stage, model)"


def usage_rows(store: Store) -> list[dict]:
    """LLM usage by stage and model: the calls recorded, and those folded into the archive (a
    stage and model of no call counted, only failed checks apart, left out)."""
    return store.query(
        f"SELECT stage, model, {', '.join(f'sum({c}) AS {c}' for c in _USAGE)} FROM ("
        f"{_usage_by_model(apart=calls_apart(store))} UNION ALL SELECT stage, model, {', '.join(_USAGE)} "
        "FROM llm_usage_archive) GROUP BY stage, model HAVING sum(calls) > 0 ORDER BY stage, model")


def checks_apart(store: Store) -> int:
    """The failed checks of the endpoint that refused nothing (``CallLog.record``'s apart):
    counted in no call (``_usage_by_model``), said apart by `status`; those folded into the
    archive included (``prune``: ``archived_checks_apart``)."""
    archived = int(store.get_meta("archived_checks_apart") or 0)
    if not calls_apart(store):
        return archived
    # (from their own index, ``llm_calls_apart``: each is a failed call, its row an error)
    return store.scalar("SELECT count(*) FROM llm_calls WHERE apart = 1") + archived


def call_history(store: Store) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    """The answered calls by stage and model, those folded into the archive included
    (``prune``): (answered, paid for, their prompt tokens, their completion tokens). A call
    answered is one neither failed nor cancelled; paid for, one of them not from the cache (of
    the archive, those folded in since it kept them apart: ``answered_paid``)."""
    rows = store.conn.execute(
        "SELECT stage, model, sum(answered), sum(paid), sum(prompt_tokens), sum(completion_tokens) FROM ("
        "SELECT stage, model, count(*) AS answered, sum(cached = 0) AS paid, "
        "sum(CASE WHEN cached = 0 THEN prompt_tokens ELSE 0 END) AS prompt_tokens, "
        "sum(CASE WHEN cached = 0 THEN completion_tokens ELSE 0 END) AS completion_tokens "
        "FROM llm_calls WHERE error IS NULL AND cancelled = 0 GROUP BY stage, model UNION ALL "
        f"SELECT stage, model, calls - errors - cancelled, {', '.join(_ANSWERED)} FROM llm_usage_archive) "
        "GROUP BY stage, model")
    return {(r[0], r[1]): (int(r[2] or 0), int(r[3] or 0), int(r[4] or 0), int(r[5] or 0)) for r in rows}


# The extraction and gleaning answers of runs that asked no gleaning check (index.glean_check
# off, or a model thinking aloud): every chunk of such a run gleaned, they are no measure of how
# often a check says yes.
_UNCHECKED = ("error IS NULL AND cancelled = 0 AND stage IN ('extract', 'glean') AND coalesce(run_id, '') "
              "NOT IN (SELECT coalesce(run_id, '') FROM llm_calls WHERE stage = 'glean_check')")


def unchecked_answers(store: Store) -> dict[tuple[str, str], int]:
    """The extraction and gleaning calls answered (cache hits too) in runs that asked no
    gleaning check, by stage and model, those ``prune`` folded into the archive included
    (``meta`` ``archived_unchecked``)."""
    out = _archived_unchecked(store)
    for stage, model, n in store.conn.execute(
            f"SELECT stage, model, count(*) FROM llm_calls WHERE {_UNCHECKED} GROUP BY stage, model"):
        out[(stage, model)] = out.get((stage, model), 0) + n
    return out


def _archived_unchecked(store: Store) -> dict[tuple[str, str], int]:
    try:   # (stage, model, count) triples: JSON has no tuple keys
        rows = msgspec.json.decode(store.get_meta("archived_unchecked") or "[]", type=list[tuple[str, str, int]])
    except msgspec.DecodeError:   # not as written: none counted
        return {}
    return {(stage, model): n for stage, model, n in rows}


def failures_recorded(store: Store, *, under_way: bool = True) -> int:
    """The failures of every update recorded (``status``: "recorded over all runs"): each item
    once per run, as a run counts it (a daemon's retries repeat one), and none of a daemon's
    extraction ahead of a sync (run ``watch:extract``), whose failures the sync after it meets
    again and records (a binary file counted twice per sync). A file that could not be used
    counts once per version of it (its ``stamp``), however many updates name it again: a
    binary file in a watched folder counted once per sync (14 became 772 in a day), and one
    the system would not read once per update (it is read again by each: its stamp is of what
    can be looked at, ``on_disk.failure_stamp``). A daemon's syncs that go on with an update
    (``runs.update_of``: they retry what the ones before them left missing) count as that update:
    an item failing in each retry of an hours-long outage counts once, not once per retry. The
    chunks of a run that published nothing and left files unindexed are counted as those files
    (``status.unindexed_chunks``), not as failures; so are those chunks' failures in a run of the
    update still under way (a retry of an outage: its stats are written as it ends): the count was
    0 between an outage's retries and 2 during each, for a file of 3 chunks left unindexed. A run
    under way counts no chunk the published index lacks (``_UNINDEXED_YET``): its end decides.
    ``under_way`` False counts those as failures (``prune``, whose archive is what its deletions
    take from the count: left out as a deleted run of the update named them, they came back in
    when it went, archived as -1, and once the retry ended `status` said failures_total -1)."""
    unindexed = f"({UNINDEXED_FILES} OR {_UNINDEXED_YET})" if under_way else UNINDEXED_FILES
    counted_rule = f"{COUNTED_RUN} AND NOT (f.stage IN ('extract', 'glean') AND {unindexed})"
    if not under_way or store.get_meta("failure_keys_stale"):   # (every failure read)
        return store.scalar(
            f"WITH {UNINDEXED_RUNS} SELECT count(*) FROM (SELECT DISTINCT CASE WHEN f.stamp IS NULL THEN "
            "coalesce(r.update_of, f.run_id) END, f.stage, f.item, f.stamp FROM failures f LEFT JOIN runs r "
            f"ON r.id = f.run_id WHERE {counted_rule})") or 0
    # The keys of the runs that ended are kept (``store.failure_keys``), and their count
    # (``failure_keys_count``: counting the table took 16 ms at 215,000 keys); those of the runs
    # under way (or killed: their rows say "running" for good) and of none are read, each once.
    kept = store.scalar("SELECT n FROM failure_keys_count")
    if kept is None:   # (its one row gone: counted)
        kept = store.scalar("SELECT count(*) FROM failure_keys")
    return kept + (store.scalar(
        f"WITH {UNINDEXED_RUNS} SELECT count(*) FROM (SELECT DISTINCT {FAILURE_KEY} AS key FROM failures f "
        "LEFT JOIN runs r ON r.id = f.run_id WHERE (f.run_id IS NULL OR f.run_id IN (SELECT id FROM runs WHERE "
        f"status = 'running')) AND {counted_rule}) WHERE key NOT IN (SELECT key FROM failure_keys)") or 0)


# Besides those of ``store.UNINDEXED_FILES``, a failure of a run under way (``r``) of a chunk the
# published index does not hold: it is
# unindexed so far, until the run's end says otherwise (it publishes without it: a failure; or it
# publishes nothing and names its file unindexed). A chunk an ended run of its update left
# unindexed was the only such one counted so: a file first seen in a retry, or by the first sync of
# an outage, had its chunks' failures counted while the run went on and not once it ended (2, then
# 0). A run killed before it ended (its row says "running" still) published nothing: its chunks'
# failures count as the next run that meets them again records them.
_UNINDEXED_YET = ("CASE WHEN r.status = 'running' THEN f.item NOT IN (SELECT chunk_id FROM live_chunks) ELSE 0 END")


def failures_of(store: Store, *run_ids: str, stage: str | None = None) -> int:
    """Items that failed in runs ``run_ids`` (a run and the update's run before it while it is
    under way: ``status.failure_runs``), each counted once (a daemon's retries repeat them); of
    ``stage`` only if given (``load``: files that could not be read)."""
    if not run_ids:
        return 0
    if stage is not None:
        return store.scalar(f"SELECT count(DISTINCT item) FROM failures WHERE {_in('run_id', run_ids)} "
                            "AND stage = ?", (*run_ids, stage))
    return store.scalar(f"SELECT count(*) FROM (SELECT DISTINCT stage, item FROM failures "
                        f"WHERE {_in('run_id', run_ids)})", run_ids)


# A load failure's kind as it is said (``errors.said_kind``; one recorded before failures had a
# kind, NULL there, is "unusable")
_SAID_KIND = ("CASE kind " + " ".join(f"WHEN '{kind}' THEN '{said}'" for kind, said in SAID_AS.items())
              + " ELSE coalesce(kind, 'unusable') END")


def load_failures_by_kind(store: Store, *run_ids: str) -> dict[str, int]:
    """The files and folders runs ``run_ids`` could not use, each once, by their failure's kind
    as it is said (``errors.said_kind``)."""
    return dict(store.conn.execute(
        f"SELECT {_SAID_KIND}, count(DISTINCT item) FROM failures "
        f"WHERE {_in('run_id', run_ids)} AND stage = 'load' GROUP BY 1", run_ids))


def too_big_failures(store: Store, *run_ids: str) -> int:
    """Of ``load_failures_by_kind``'s "unusable" files, those over index.max_file_mb ("too_big"):
    counted with them (``errors.SAID_AS``), said apart by `status`, a raised setting takes them.
    Those recorded before they had a kind of their own too, by their line: a reader that cannot
    upgrade the index reads on without the step that makes them "too_big" (``store._NO_OP_WHEN``)."""
    return store.scalar(f"SELECT count(DISTINCT item) FROM failures WHERE {_in('run_id', run_ids)} "
                        f"AND stage = 'load' AND (kind = 'too_big' OR ({TOO_BIG_UNKINDED_IF}))",
                        run_ids) if run_ids else 0


def last_failure(store: Store, *run_ids: str) -> str:
    """``[stage] message`` of the newest failure runs ``run_ids`` recorded, on one line and safe to
    print (``terminal.flat``), or ""."""
    rows = store.query(f"SELECT stage, message FROM failures WHERE {_in('run_id', run_ids)} ORDER BY id DESC LIMIT 1",
                       run_ids)
    return f"[{rows[0]['stage']}] {flat(rows[0]['message'])}" if rows else ""   # (one recorded as a server said it)


def settled(store: Store, runs: int, budget: int | None = None) -> list[dict]:
    """The items no longer asked for, their model's answers unusable on ``runs`` runs in a row
    (``call_log.UNUSABLE_RUNS``) or more, as the published index holds them: ``{stage, item,
    runs, held}``, summaries first, then reports, each by item. Only what counting them needs
    is read (``settled_items`` names them).

    Only the run that settles an item records a failure for it (the runs after it ask nothing),
    so they are found from the counts the runs leave in ``meta``: a summary's by element id
    (``summary_unusable``; one in ``summary_fallbacks`` too, failed since in an outage, is asked
    again), a report's by attempt (``report_unusable``: its context key and output budget),
    recorded as failed under the community whose ``context_key`` that is, and by community
    for one held below index.report_min_members (``report_unusable_held``, ``held``: its count
    kept, it is not asked while held nor once it comes back). ``budget``: the
    index.report_max_output_tokens the next run gives a report's answer; a report settled with
    another is asked again (raising it is the fix for answers cut off), so it is not settled
    (None: with any)."""
    def meta(key: str, default: str, kind):
        try:
            return msgspec.json.decode(store.get_meta(key) or default, type=kind)
        except msgspec.DecodeError:   # not as written: nothing is said settled
            return kind()

    unusable = meta("summary_unusable", "{}", dict[str, int])
    retried = set(meta("summary_fallbacks", "[]", list[str]))
    elements = {k: n for k, n in unusable.items() if n >= runs and k not in retried}
    given = (lambda attempt: True) if budget is None else (   # noqa: E731
        lambda attempt: attempt.rsplit("/", 1)[-1] == str(budget))   # (report_stage.report_attempt)
    contexts = {a.rsplit("/", 1)[0]: n for a, n in meta("report_unusable", "{}", dict[str, int]).items()
                if n >= runs and given(a)}
    held = {cid: n for cid, (attempt, n) in meta("report_unusable_held", "{}", dict[str, tuple[str, int]]).items()
            if n >= runs and given(attempt)}
    found = []
    for table, prefix in (("entities", "ent-"), ("relationships", "rel-")):
        for batch in _batches(k for k in elements if k.startswith(prefix)):
            found += [{"stage": "summarize", "item": item, "runs": elements[item], "held": False}
                      for (item,) in store.conn.execute(f"SELECT id FROM {table} WHERE {_in('id', batch)}", batch)]
    reports: dict[str, dict] = {}
    for batch in _batches(held):
        for (item,) in store.conn.execute(f"SELECT id FROM communities WHERE {_in('id', batch)}", batch):
            reports[item] = {"stage": "report", "item": item, "runs": held[item], "held": True}
    for batch in _batches(contexts):
        for item, key in store.conn.execute(
                f"SELECT id, context_key FROM communities WHERE {_in('context_key', batch)}", batch):
            reports[item] = {"stage": "report", "item": item, "runs": contexts[key], "held": False}
    return sorted(found, key=lambda f: f["item"]) + [reports[item] for item in sorted(reports)]


def settled_items(store: Store, found: list[dict]) -> list[dict]:
    """Items of ``settled`` as ``status --failures`` lists them: ``{stage, item, name, runs,
    message, created_at, held, title}`` with the newest failure recorded for each (``message``
    None when none is left: ``prune``). ``name`` is an element's name as its summary's failure
    names it (a community's id for a report); ``title`` the title of the report that stands for
    a community (None for a summary)."""
    names: dict[str, str] = {}
    for named, prefix in (("e.id, e.name FROM entities e WHERE e.id", "ent-"), (_RELATIONSHIP_NAMES, "rel-")):
        for batch in _batches(f["item"] for f in found if f["stage"] == "summarize" and f["item"].startswith(prefix)):
            names.update(store.conn.execute(f"SELECT {named} IN ({','.join('?' * len(batch))})", batch))
    titles: dict[str, str] = {}
    for batch in _batches(f["item"] for f in found if f["stage"] == "report"):
        titles.update(store.conn.execute(
            f"SELECT c.id, r.title FROM communities c JOIN reports r ON r.key = c.report_key "
            f"WHERE {_in('c.id', batch)}", batch))
    said: dict[tuple[str, str], tuple[str, float]] = {}
    for stage in ("summarize", "report"):
        for batch in _batches({f["item"] for f in found if f["stage"] == stage}):
            said.update(((stage, item), (message, at)) for item, message, at in store.conn.execute(
                "SELECT item, message, created_at FROM failures WHERE id IN (SELECT max(id) FROM failures "
                f"WHERE stage = ? AND item IN ({','.join('?' * len(batch))}) GROUP BY item)", [stage, *batch]))
    return [{"stage": f["stage"], "item": f["item"], "name": names.get(f["item"], f["item"]), "runs": f["runs"],
             "message": said.get((f["stage"], f["item"]), (None, None))[0],
             "created_at": said.get((f["stage"], f["item"]), (None, None))[1],
             "held": f["held"], "title": titles.get(f["item"]) if f["stage"] == "report" else None}
            for f in found]


def failed_in(store: Store, items: set[tuple[str, str]], *run_ids: str) -> set[tuple[str, str]]:
    """Of ``items`` (``(stage, item)`` of summaries and reports), those runs ``run_ids`` recorded as failed."""
    if not items:
        return set()
    return items & set(store.conn.execute(
        f"SELECT DISTINCT stage, item FROM failures WHERE {_in('run_id', run_ids)} "
        "AND stage IN ('summarize', 'report')", run_ids))


# The runs of update ``:update`` up to its run ``:run``: the first, those that go on with it
# (``runs.update_of``), and a daemon's extractions ahead of them (run ``watch:extract``, started
# after the update before it and before ``:run``), which asked for the changed chunks first: a
# chunk that failed there and again in the sync after it was said failed once (``times`` 1).
_UPDATE_RUNS = ("SELECT id FROM runs WHERE id = :update OR update_of = :update OR command = 'watch:extract' "
                "AND started_at < (SELECT started_at FROM runs WHERE id = :run) AND started_at > coalesce("
                "(SELECT max(started_at) FROM runs WHERE command NOT IN ('ask', 'watch:extract') AND "
                "started_at < (SELECT started_at FROM runs WHERE id = :update)), 0)")


def run_failures(store: Store, limit: int, *run_ids: str, leaving: set[tuple[str, str]] = frozenset()) -> list[dict]:
    """What failed in the first of runs ``run_ids``, once per item, the newest first, at most
    ``limit``: ``{run_id, stage, item, message, created_at, times}``; the ``(stage, item)`` in
    ``leaving`` left out. ``times``: how often its update recorded it (a run's retries, a
    daemon's syncs that go on with the update, ``runs.update_of``, and their extraction ahead
    repeat one). The runs after the first are listed as its own (the update's run that ended
    before a retry sync under way, which records the items it retries only as it meets them:
    ``status.failure_runs``); each item with the run, message and time it was last recorded."""
    if not run_ids:
        return []
    # (the item's last row found by its id, then read whole: columns beside two max() of one
    # GROUP BY are SQLite's pick of a row, which gave one row's message with another's time)
    rows = store.query(
        "SELECT f.run_id, f.stage, f.item, f.message, f.created_at, g.times FROM "
        f"(SELECT max(id) AS id, count(*) AS times FROM failures WHERE {_in('run_id', run_ids)} "
        "GROUP BY stage, item) AS g JOIN failures AS f ON f.id = g.id ORDER BY g.id DESC LIMIT ?",
        (*run_ids, limit + len(leaving)))
    rows = [r for r in rows if (r["stage"], r["item"]) not in leaving][:limit]
    update = update_of(store, run_ids[0])
    if rows and update is not None:
        times = {(stage, item): n for stage, item, n in store.conn.execute(
            f"SELECT stage, item, count(*) FROM failures WHERE run_id IN ({_UPDATE_RUNS}) GROUP BY stage, item",
            {"update": update, "run": run_ids[0]})}
        for r in rows:
            r["times"] = times.get((r["stage"], r["item"]), r["times"])
    return rows


def load_failed(store: Store, *run_ids: str) -> set[str]:
    """The files and folders runs ``run_ids`` could not use (their ``load`` failures' items)."""
    if not run_ids:
        return set()
    return {item for (item,) in store.conn.execute(
        f"SELECT DISTINCT item FROM failures WHERE {_in('run_id', run_ids)} AND stage = 'load'", run_ids)}


def failed_chunks(store: Store, run_id: str) -> set[tuple[str, str]]:
    """The ``(stage, item)`` of the chunks run ``run_id`` could not extract (stages ``extract``
    and ``glean``) that no published document holds: the new version of a file holding one stays
    unpublished until it is extracted. (Read after that run, before another publishes.) A chunk
    of an unchanged file, extracted again for another extraction model, is published: its file
    is not left unindexed, and its failure is one."""
    return set(store.conn.execute("SELECT DISTINCT stage, item FROM failures WHERE run_id = ? "
                                  "AND stage IN ('extract', 'glean') AND item NOT IN "
                                  "(SELECT chunk_id FROM document_chunks)", (run_id,)))


def carry_failures(store: Store, run_id: str, update: str) -> None:
    """Records as ``run_id``'s, a run that published nothing going on with ``update``
    (``runs.update_of``), the failed items the update's run before it left missing that it did
    not record itself (files that could not be read but: no work left). It may give up before it
    reaches them (a chunk of a file edited meanwhile, refused by a server gone): a restarted watch
    and `status` said "failures 0" of an update still missing a report. (Once per item: the
    update counts each once, ``failures_recorded``.) Each item's last row, by id, as
    ``run_failures`` lists it (not by time: the clock may have been set back meanwhile)."""
    store.conn.execute(
        "INSERT INTO failures(run_id, stage, item, message, created_at, stamp, kind) "
        "SELECT ?, stage, item, message, created_at, stamp, kind FROM failures AS f WHERE id IN "
        "(SELECT max(id) FROM failures WHERE run_id = (SELECT id FROM runs WHERE coalesce(update_of, id) = ? "
        "AND id != ? AND started_at <= (SELECT started_at FROM runs WHERE id = ?) ORDER BY started_at DESC "
        "LIMIT 1) AND stage != 'load' GROUP BY stage, item) AND NOT EXISTS (SELECT 1 FROM failures AS g "
        "WHERE g.run_id = ? AND g.stage = f.stage AND g.item = f.item) ORDER BY stage, item",
        (run_id, update, run_id, run_id, run_id))


def ended_before(store: Store, run_id: str) -> dict | None:
    """The newest run that ended (its row no longer "running": one killed with -9 stays so) of
    the update run ``run_id`` goes on with (``runs.update_of``), started before it, as
    ``status.last_update`` gives a run; None when ``run_id`` began an update, or none ended."""
    rows = store.query(
        "SELECT id, command, started_at, finished_at, status FROM runs WHERE coalesce(update_of, id) = "
        "(SELECT update_of FROM runs WHERE id = :run) AND status != 'running' AND started_at < "
        "(SELECT started_at FROM runs WHERE id = :run) ORDER BY started_at DESC LIMIT 1", {"run": run_id})
    return rows[0] if rows else None


def update_of(store: Store, run_id: str) -> str | None:
    """The first run of the update run ``run_id`` is part of (``runs.update_of``; itself when it
    began one); None when there is no such run."""
    return store.scalar("SELECT coalesce(update_of, id) FROM runs WHERE id = ?", (run_id,))


def lead_of(store: Store, run_id: str) -> tuple[str, int] | None:
    """The run of the same ``index`` command that published its other files before run ``run_id``
    took its big ones (``Indexer._lead``), and the version it published; None for a run alone."""
    # (its stats, written at its end; else its ``taking``, written as it started on the big
    # files: a run killed with -9 there wrote no end)
    for column in ("stats", "taking"):
        try:
            noted = json.loads(store.scalar(f"SELECT {column} FROM runs WHERE id = ?", (run_id,)) or "{}")
            lead, version = noted.get("lead_run"), noted.get("lead_version")
        except (ValueError, TypeError, AttributeError):   # not as written: none said
            continue
        if isinstance(lead, str) and isinstance(version, int):
            return lead, version
    return None


def not_indexed(store: Store, run_id: str) -> tuple[int, list[str], set[tuple[str, str]]]:
    """The new or changed files run ``run_id`` left unindexed, failed before it published
    (``runs.stats``, ``Indexer._not_indexed``): how many, the first of them by name, and the
    ``(stage, item)`` of the chunks of them it failed to extract (``status.unindexed_chunks``):
    those its stats name (``not_indexed_chunks``, ``failed_chunks`` as it ended), or, of a run
    recorded before they were named, ``failed_chunks`` now. (The stats read once, the chunks
    looked up only when it left files unindexed.)"""
    try:
        stats = json.loads(store.scalar("SELECT stats FROM runs WHERE id = ?", (run_id,)) or "{}")
        count, files = int(stats.get("not_indexed", 0)), [str(f) for f in stats.get("not_indexed_files", [])]
        named = stats.get("not_indexed_chunks")
    except (ValueError, TypeError, AttributeError):   # not as written: none said
        return 0, [], set()
    if not count:
        return 0, files, set()
    if not isinstance(named, list):
        return count, files, failed_chunks(store, run_id)
    return count, files, set(store.conn.execute(
        "SELECT DISTINCT stage, item FROM failures WHERE run_id = ? AND stage IN ('extract', 'glean') "
        "AND item IN (SELECT value FROM json_each(?))", (run_id, json.dumps(named))))


def note_taking(store: Store, run_id: str, count: int, named: list[str],
                lead: tuple[str, int] | None = None) -> None:
    """Records on run ``run_id``'s row the new or changed files it is taking (``runs.taking``):
    ``count`` of them, ``named`` the first by name. Written as it starts on them, before any is
    published: a run killed then left no other word of them. ``lead``: the run that published
    the command's other files first, and its version (``lead_of``: a run killed with -9 on its
    big file writes no stats)."""
    taking = {"files": count, "named": named}
    if lead is not None:
        taking |= {"lead_run": lead[0], "lead_version": lead[1]}
    store.conn.execute("UPDATE runs SET taking = ? WHERE id = ?", (json.dumps(taking), run_id))


def left_by_killed(store: Store, run_id: str) -> tuple[int, list[str]] | None:
    """The new or changed files run ``run_id`` was taking (``note_taking``), as a run killed
    before it published left them unindexed: how many, and the first by name; those it found
    it could not use left out (its ``load`` failures say them, as skipped). Not its failures of
    folders, nor those naming again a file unchanged since an earlier run's failure (the same
    stamp, of a kind not read again): it was not taking those (``ExtractionStage.not_indexed``).
    (A file over index.max_file_mb is read again, recorded before it had a kind of its own or
    not: a reader that cannot upgrade the index reads on without ``store._failures_too_big``.)
    None when the row records none (a run of an older streamrag, or killed before it knew them)."""
    try:
        taking = json.loads(store.scalar("SELECT taking FROM runs WHERE id = ?", (run_id,)) or "null")
        count, named = int(taking["files"]), [str(f) for f in taking["named"]]
    except (ValueError, TypeError, KeyError, IndexError):   # none, or not as written
        return None
    unusable = {item for (item,) in store.conn.execute(
        "SELECT DISTINCT item FROM failures f WHERE run_id = ? AND stage = 'load' AND coalesce(kind, '') != "
        f"'unlisted' AND NOT (coalesce(kind, 'unusable') IN {_REMEMBERED_SQL} AND NOT ({TOO_BIG_UNKINDED_IF}) "
        "AND stamp IS NOT NULL AND "
        "EXISTS (SELECT 1 FROM failures g WHERE g.item = f.item AND g.stage = 'load' AND g.stamp IS NOT NULL "
        "AND g.stamp = f.stamp AND g.id < f.id))", (run_id,))}
    named = [f for f in named if f not in unusable]
    return max(count - len(unusable), len(named)), named


def run_status(store: Store, run_id: str) -> str | None:
    """The ``status`` of run ``run_id`` as its row says it now (None once pruned)."""
    return store.scalar("SELECT status FROM runs WHERE id = ?", (run_id,))


def run_process(store: Store, run_id: str) -> tuple[int | None, str | None]:
    """The process run ``run_id`` is made by: ``(runs.pid, runs.process)``, None of a run an
    older streamrag made."""
    rows = store.conn.execute("SELECT pid, process FROM runs WHERE id = ?", (run_id,)).fetchall()
    return rows[0] if rows else (None, None)


def asks_running(store: Store) -> list[dict]:
    """The ``ask`` runs whose rows say "running" (under way, or killed before they ended):
    ``{id, pid, process, started_at}``, the oldest first."""
    return store.query("SELECT id, pid, process, started_at FROM runs WHERE command = 'ask' "
                       "AND status = 'running' ORDER BY started_at")


# A relationship's name as its summary's failure says it: "<source's name> and <target's name>".
_RELATIONSHIP_NAMES = ("r.id, coalesce(s.name, r.source) || ' and ' || coalesce(t.name, r.target) FROM relationships r "
                       "LEFT JOIN entities s ON s.id = r.source LEFT JOIN entities t ON t.id = r.target WHERE r.id")


def empty_files(store: Store) -> dict[str, tuple[str, str, bool]]:
    """The files last read with nothing to index (``EmptyInput``): path -> (their stamp then,
    the warning said of them, whether it is said again while they stay so: ``EmptyInput.again``).
    In the meta table, so an older streamrag opens the index still (a file said once is kept as
    a third item, which an older one reads as a list not as written, and reads those again)."""
    try:
        found = json.loads(store.get_meta("empty_files") or "{}")
        return {path: (stamp, said, not once) for path, (stamp, said, *once) in found.items()}
    except (ValueError, TypeError, AttributeError):   # not as written: every file is read again
        return {}


def save_empty_files(store: Store, files: dict[str, tuple[str, str, bool]]) -> None:
    store.set_meta("empty_files", json.dumps({path: [stamp, said] if again else [stamp, said, "once"]
                                              for path, (stamp, said, again) in files.items()}, sort_keys=True))


def note_answered(store: Store, api_base: str, at: float) -> None:
    """Notes that ``api_base`` answered a call of a run ending at ``at``: a watch started later
    says an outage of it as one of an endpoint that stopped answering, not as a wrong api_base.
    Noted without a password in it (``without_secrets``), which the index is no place for."""
    store.set_meta("endpoint_answered", json.dumps({"api_base": without_secrets(api_base), "at": at}))


def answered_at(store: Store, api_base: str) -> float | None:
    """When a run last noted ``api_base`` answering (``note_answered``); None: never, or another
    (``.../v1`` and ``.../v1/`` are one endpoint). A note older code wrote with the password in it
    is of the same endpoint too (the next note replaces it): a watch of such an index said its
    endpoint, stopped since, never answered, and to fix llm.api_base."""
    try:
        noted = json.loads(store.get_meta("endpoint_answered") or "{}")
        same = (without_secrets(str(noted.get("api_base", ""))).rstrip("/")
                == without_secrets(api_base).rstrip("/"))
        return float(noted["at"]) if same else None
    except (ValueError, TypeError, KeyError, AttributeError):   # not as written: never noted
        return None


# The kinds of load failure remembered: a file not read again while it stays as it was
# (``failed_reads``). Not one the system would not give ("unreadable"): that may pass with the
# file as it is (a group granted, a mount back); nor one over index.max_file_mb ("too_big"): a
# stat tells it, and a higher setting reads the file as it is.
REMEMBERED_KINDS = ("not_text", "unusable")
_REMEMBERED_SQL = "(" + ", ".join(f"'{kind}'" for kind in REMEMBERED_KINDS) + ")"


def failed_reads(store: Store, kinds: tuple[str, ...] = REMEMBERED_KINDS) -> dict[str, tuple[str, str, str]]:
    """The files (and folders) that could not be used when last tried, their failure of one of
    ``kinds``: path -> (its stamp then, the failure's message, its kind). By default those not
    read again while they stay so (``REMEMBERED_KINDS``). An extraction ahead of a sync's count
    too: it read them. One recorded before failures had a kind is left out (read once more, for
    its kind)."""
    rows = store.conn.execute(
        "SELECT item, stamp, message, kind FROM failures WHERE id IN (SELECT max(id) FROM failures "
        f"WHERE stage = 'load' AND stamp IS NOT NULL GROUP BY item) AND kind IN ({', '.join('?' * len(kinds))})",
        kinds)
    return {item: (stamp, message, kind) for item, stamp, message, kind in rows}


def prune(store: Store, keep_days: float, now: float) -> int:
    """Deletes what the published index does not use and nothing used for ``keep_days``: the
    extractions of chunks no document holds (dated from when they left, or were made), and
    cached chat answers neither made nor asked for again since (``llm_calls`` records every
    hit). At most once a day; ``keep_days`` 0 keeps everything. Returns the rows deleted.

    Calls older than that are folded into ``llm_usage_archive``, and older runs, failures,
    answers asked again, unusable answers and failed checks apart into counts in ``meta``
    (``archived_queries``, ``archived_failures``, ``archived_asked_again``, ``archived_unusable``,
    ``archived_checks_apart``): what ``status`` counts stays the same."""
    if keep_days <= 0 or now - float(store.get_meta("pruned_at") or 0) < PRUNE_EVERY_S:
        return 0
    cutoff = now - keep_days * 86400
    conn = store.conn
    before = conn.total_changes
    conn.execute("DELETE FROM extractions WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM "
                 "live_chunks l WHERE l.chunk_id = extractions.chunk_id AND l.extractor = "
                 "extractions.extractor) AND NOT EXISTS (SELECT 1 FROM extractions_left g WHERE "
                 "g.chunk_id = extractions.chunk_id AND g.extractor = extractions.extractor AND "
                 "g.left_at >= ?)", (cutoff, cutoff))
    # (a date before the cutoff keeps nothing: its extraction went above, or is live or newer)
    conn.execute("DELETE FROM extractions_left WHERE left_at < ?", (cutoff,))
    # (Embeddings are kept: a hit on one is recorded under its batch's key, not its own. So
    # are the answers the index's summaries and reports are, which are never asked for again.)
    conn.execute("DELETE FROM llm_cache WHERE created_at < ? AND substr(key, 1, ?) <> ? AND "
                 "key NOT IN (SELECT cache_key FROM llm_calls WHERE created_at >= ?) AND key NOT IN "
                 "(SELECT key FROM answers)", (cutoff, len(EMBEDDINGS), EMBEDDINGS, cutoff))
    # Older calls are folded into their stage's and model's sums.
    # (as `status` counts them, ``_usage_by_model``; those answered usably beside them)
    answered = (f"SELECT stage, model, {', '.join(f'{e} AS {c}' for e, c in zip(_ANSWERED_SUMS, _ANSWERED))} "
                "FROM llm_calls WHERE created_at < :cutoff GROUP BY stage, model")
    conn.execute(f"INSERT INTO llm_usage_archive(stage, model, {', '.join(_USAGE + _ANSWERED)}) "
                 f"SELECT stage, model, {', '.join(_USAGE + _ANSWERED)} FROM ({_usage_by_model('created_at < :cutoff')}) "
                 f"JOIN ({answered}) USING (stage, model) WHERE true ON CONFLICT(stage, model) DO UPDATE SET "
                 + ", ".join(f"{c} = {c} + excluded.{c}" for c in _USAGE + _ANSWERED), {"cutoff": cutoff})
    again = conn.execute(f"SELECT count(*) {_ASKED_AGAIN} AND u.created_at < ?", (cutoff,)).fetchone()[0]
    unusable = conn.execute(f"SELECT count(*) {_UNUSABLE_CALLS} AND created_at < ?", (cutoff,)).fetchone()[0]
    checks = conn.execute("SELECT count(*) FROM llm_calls WHERE apart = 1 AND created_at < ?", (cutoff,)).fetchone()[0]
    unchecked = _archived_unchecked(store)
    for stage, model, n in conn.execute(f"SELECT stage, model, count(*) FROM llm_calls WHERE {_UNCHECKED} "
                                        "AND created_at < ? GROUP BY stage, model", (cutoff,)).fetchall():
        unchecked[(stage, model)] = unchecked.get((stage, model), 0) + n
    if unchecked:
        store.set_meta("archived_unchecked", json.dumps(sorted([*k, n] for k, n in unchecked.items())))
    conn.execute("DELETE FROM llm_calls WHERE created_at < ?", (cutoff,))
    # Older runs and failures go too, counted on where `status` counts them. (Failures are
    # counted once per item and run, so what is archived is what the count loses; those of a
    # run deleted go with it, or a daemon's extraction pass would count once its run is gone.)
    recorded = failures_recorded(store, under_way=False)   # (those of a retry under way too)
    queries = conn.execute("SELECT count(*) FROM runs WHERE command = 'ask' AND status = 'ok' "
                           "AND started_at < ?", (cutoff,)).fetchone()[0]
    conn.execute("DELETE FROM runs WHERE started_at < ?", (cutoff,))
    conn.execute("DELETE FROM failures WHERE created_at < ? OR run_id NOT IN (SELECT id FROM runs)", (cutoff,))
    archived = recorded - failures_recorded(store, under_way=False)
    if store.get_meta("failure_keys_stale"):   # (marked by a deletion of a failure or run)
        count_failure_keys(conn)
    for name, n in (("archived_queries", queries), ("archived_failures", archived),
                    ("archived_asked_again", again), ("archived_unusable", unusable),
                    ("archived_checks_apart", checks)):
        if n:
            store.set_meta(name, str(int(store.get_meta(name) or 0) + n))
    deleted = conn.total_changes - before
    store.set_meta("pruned_at", str(now))
    return deleted


def _write_bookkeeping(store: Store, scan: Scan, counts: dict[str, str | None]) -> None:
    """The files table and the counts (None: a mark dropped): written whatever the version, they
    make none."""
    conn = store.conn
    # Files and documents: only the rows that differ are written (an update of a large index
    # used to rewrite every file, document and community row).
    old_files = files(store)   # read again inside the write transaction
    delete_in(store, "files", "path", old_files.keys() - scan.files.keys())
    conn.executemany("INSERT OR REPLACE INTO files(path, doc_id, size, stamp) VALUES (?,?,?,?)",
                     [(p, d, sz, mt) for p, (d, sz, mt) in sorted(scan.files.items())
                      if old_files.get(p) != (d, sz, mt)])
    # The files table is the scan's bookkeeping (sizes and change stamps, which names hold which
    # text), not what a query reads: a touched file, or a copy of indexed text, makes no version.
    # Nor do the counts.
    for name, value in counts.items():
        if value is None:
            conn.execute("DELETE FROM meta WHERE key = ?", (name,))
        elif store.get_meta(name) != value:
            store.set_meta(name, value)


def _write_live_keys(store: Store, change: Change, left_at: float) -> None:
    """The chunks that stay as published, live now with another extractor's extraction of the
    same records (``Change.rekeyed``): which extraction a chunk is live with is bookkeeping for
    ``prune``, which no query reads (extraction settings changed and back published a version of
    it alone). The one it leaves is dated from ``left_at``, as a chunk that leaves has its own."""
    for part in _batches(change.rekeyed):
        store.conn.execute("INSERT OR REPLACE INTO extractions_left(chunk_id, extractor, left_at) SELECT "
                           "e.chunk_id, e.extractor, ? FROM extractions e JOIN live_chunks l ON l.chunk_id = "
                           f"e.chunk_id AND l.extractor = e.extractor WHERE {_in('e.chunk_id', part)}",
                           [left_at, *part])
    for chunk_id, key in sorted(change.rekeyed.items()):
        store.conn.execute("UPDATE live_chunks SET extractor = ? WHERE chunk_id = ?", (key, chunk_id))
        store.conn.execute("DELETE FROM extractions_left WHERE extractor = ? AND chunk_id = ?", (key, chunk_id))


def _write_documents(store: Store, scan: Scan, change: Change) -> None:
    """Documents and their chunk lists: the removed go, the added come, the kept are updated."""
    conn = store.conn
    delete_in(store, "documents", "id", change.removed_docs)
    delete_in(store, "document_chunks", "doc_id", change.removed_docs)
    paths_by_doc = shown_paths(scan.files)
    for doc_id in sorted(change.added_docs):
        doc = scan.documents.get(doc_id)
        chunks = scan.doc_chunks.get(doc_id)
        if doc is None:
            continue
        path = paths_by_doc.get(doc_id, doc.path)
        conn.execute("INSERT OR REPLACE INTO documents(id, title, path, tokens, chars) VALUES (?,?,?,?,?)",
                     (doc_id, scan.titles.get(path, doc.title), path,
                      sum(c.tokens for c in chunks or ()), scan.chars[doc_id]))
        if chunks is not None:
            conn.execute("DELETE FROM document_chunks WHERE doc_id = ?", (doc_id,))
            conn.executemany("INSERT INTO document_chunks(doc_id, idx, chunk_id) VALUES (?,?,?)",
                             [(doc_id, c.idx, c.id) for c in chunks])
    _write_kept_documents(store, scan, change, paths_by_doc)


def _write_kept_documents(store: Store, scan: Scan, change: Change, paths_by_doc: dict[str, str]) -> None:
    """The kept documents' path, title and chunks, where they differ from the published."""
    conn = store.conn
    shown = {d: (path, title) for d, path, title in conn.execute("SELECT id, path, title FROM documents")}
    for doc_id in change.kept_docs:  # renames keep the document, with its new path
        path, title = shown.get(doc_id, (None, None))
        if path != paths_by_doc[doc_id]:
            conn.execute("UPDATE documents SET path = ? WHERE id = ?", (paths_by_doc[doc_id], doc_id))
        # The title of the file the document is shown with, when it was read (a title may
        # change while the text does not).
        now = scan.titles.get(paths_by_doc[doc_id])
        if now is not None and now != title:
            conn.execute("UPDATE documents SET title = ? WHERE id = ?", (now, doc_id))
        if doc_id in scan.doc_chunks:  # recut after a chunker change
            # Only what differs is written: the same chunks again are no new version (a run
            # that re-reads every file after index.text_field changed published one every time).
            chunks = scan.doc_chunks[doc_id]
            tokens = sum(c.tokens for c in chunks)
            conn.execute("UPDATE documents SET tokens = ? WHERE id = ? AND tokens IS NOT ?",
                         (tokens, doc_id, tokens))
            before = [c for (c,) in conn.execute(
                "SELECT chunk_id FROM document_chunks WHERE doc_id = ? ORDER BY idx", (doc_id,))]
            if before != [c.id for c in chunks]:
                conn.execute("DELETE FROM document_chunks WHERE doc_id = ?", (doc_id,))
                conn.executemany("INSERT INTO document_chunks(doc_id, idx, chunk_id) VALUES (?,?,?)",
                                 [(doc_id, c.idx, c.id) for c in chunks])


def _write_chunks(store: Store, change: Change, state: GraphState, key: str) -> None:
    """Live chunks, the entity and relationship mentions they hold, and their full-text rows."""
    conn = store.conn
    # (asked while live_chunks, whose chunks the full-text and provenance rows are of, holds them)
    most = len(change.removed_chunks) * 2 > store.scalar("SELECT count(*) FROM live_chunks")
    of_chunks = (("chunks_fts", "id"), ("entity_sources", "chunk_id"), ("relationship_sources", "chunk_id"))
    if most:
        _delete_most(store, of_chunks, change.removed_chunks)
    else:
        for table, column in of_chunks:   # (a full-text table's rows in one look: ``delete_fts``)
            (delete_fts if table.endswith("_fts") else delete_in)(store, table, column, change.removed_chunks)
    # Live chunks and provenance. A chunk that leaves keeps its extractions (a file changed back
    # costs nothing), dated from now for ``prune`` in extractions_left (dated in their own rows,
    # each update changed a page: 18 of the 19.8 MB of WAL a 25 MB file's removal wrote).
    # (a chunk merged again for a join that moved keeps its place; its mentions are written anew)
    for table in ("entity_sources", "relationship_sources"):
        delete_in(store, table, "chunk_id", state.rejoined)
    delete_in(store, "live_chunks", "chunk_id", change.removed_chunks)
    for part in _batches(change.removed_chunks):
        conn.execute("INSERT OR REPLACE INTO extractions_left(chunk_id, extractor, left_at) SELECT "
                     f"chunk_id, extractor, ? FROM extractions WHERE {_in('chunk_id', part)}",
                     [time.time(), *part])
    conn.executemany("INSERT OR REPLACE INTO live_chunks(chunk_id, extractor) VALUES (?,?)",
                     [(c, change.keys.get(c, key)) for c in sorted(change.added_chunks)])
    # A chunk back needs no date for the extractor it is live with; its other extractors'
    # extractions keep theirs (a settings change, each chunk leaving and back at once, undone
    # within store.keep_unused_days costs nothing).
    for part in _batches(change.added_chunks):
        conn.execute(f"DELETE FROM extractions_left WHERE extractor = ? AND {_in('chunk_id', part)}",
                     [key, *part])
    for c, other in change.keys.items():
        conn.execute("DELETE FROM extractions_left WHERE extractor = ? AND chunk_id = ?", (other, c))
    # In primary-key order: inserted in chunk order, every row landed at a random place of the
    # key's B-tree (93,000 provenance rows of 3,000 documents: 1.1 s, 0.6 s sorted). The
    # mentions are sorted where they are, not copied into sorted rows (a first index of 10,000
    # documents held 480,000 rows twice as it published): an entity mention is its row, and a
    # relationship mention sorts as its row does, its ends being those its id is made of.
    state.entity_mentions_added.sort()
    conn.executemany(
        "INSERT OR IGNORE INTO entity_sources(entity_id, chunk_id, name, type, description) VALUES (?,?,?,?,?)",
        state.entity_mentions_added)
    state.relationship_mentions_added.sort()
    conn.executemany(
        "INSERT OR IGNORE INTO relationship_sources(relationship_id, chunk_id, description, strength) "
        "VALUES (?,?,?,?)",
        ((m.relationship_id, m.chunk_id, m.description, m.strength) for m in state.relationship_mentions_added))
    conn.executemany(
        "INSERT INTO chunks_fts(id, text) SELECT id, fts_text(text) FROM chunks WHERE id = ?",
        [(c,) for c in sorted(change.added_chunks)])


def _delete_most(store: Store, tables, values: set[str]) -> None:
    """Deletes the rows of each of ``tables`` (table, column) whose column is one of ``values``,
    most of its rows: those that stay are set aside, the table emptied at once and they are put
    back, with their rowids. A delete a row at a time changed every page of a table and its
    indexes (the provenance rows of a 25 MB file: 0.53 s of CPU and 39 MB of WAL; emptied, its
    pages are freed whole: 0.09 s, and some 1 MB of WAL), and FTS5 deletes a row by tokenizing
    its text again and writing a tombstone for each of its words, merged away later (the 6,900
    chunks of the same file: 0.8 s and 16 MB; made again from the rows that stay, 0.07 s and
    0.5 MB with the 62 chunks of 50 documents)."""
    conn = store.conn
    conn.execute("CREATE TEMP TABLE gone(value TEXT PRIMARY KEY)")
    conn.executemany("INSERT INTO gone(value) VALUES (?)", ((v,) for v in values))
    for table, column in tables:
        columns = ", ".join(name for _, name, *_ in conn.execute(f"PRAGMA table_info({table})"))
        conn.execute(f"CREATE TEMP TABLE kept AS SELECT rowid AS r, {columns} FROM {table} "
                     f"WHERE {column} NOT IN (SELECT value FROM gone)")
        _empty(store, table)
        conn.execute(f"INSERT INTO {table}(rowid, {columns}) SELECT r, {columns} FROM kept ORDER BY r")
        conn.execute("DROP TABLE kept")
    conn.execute("DROP TABLE gone")


def _empty(store: Store, table: str) -> None:
    """Empties ``table`` at once: a full-text table is made again (a delete of all its rows
    still tokenizes each), any other is emptied by one ``DELETE``, which frees its pages whole."""
    (made,) = store.conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                                 (table,)).fetchone()
    if made.upper().startswith("CREATE VIRTUAL TABLE"):
        store.conn.execute(f"DROP TABLE {table}")
        store.conn.execute(made)
    else:
        store.conn.execute(f"DELETE FROM {table}")


def _write_claims(store: Store, change: Change, state: GraphState) -> None:
    """The claims of the chunks that left go; those of the added chunks come."""
    delete_in(store, "claims", "chunk_id", change.removed_chunks)
    store.conn.executemany(
        "INSERT OR REPLACE INTO claims(id, subject_id, object_id, type, status, start_date, end_date, "
        "description, source_text, chunk_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [(c.id, c.subject_id, c.object_id, c.type, c.status, c.start_date, c.end_date, c.description,
          c.source_text, c.chunk_id) for c in state.claims_added])


def _write_elements(store: Store, state: GraphState) -> None:
    """Entities (with their full-text rows) and relationships: the deleted, and the changed
    rows that differ (an element summarized again, as one whose summary failed is, may come
    out as it was)."""
    conn = store.conn
    changed = _differing(store, "entities", _ENTITY_COLUMNS, [
        (e.id, e.name, e.type, e.description, e.mentions, e.degree)
        for eid in sorted(state.changed_entities) if (e := state.entities.get(eid))])
    gone_e = state.deleted_entities | {row[0] for row in changed}
    delete_in(store, "entities", "id", gone_e)
    delete_fts(store, "entities_fts", "id", gone_e)
    conn.executemany(f"INSERT INTO entities({', '.join(_ENTITY_COLUMNS)}) VALUES (?,?,?,?,?,?)", changed)
    conn.executemany("INSERT INTO entities_fts(id, name, description) VALUES (?,?,?)",
                     [(eid, fts_text(name), fts_text(description)) for eid, name, _t, description, *_ in changed])
    changed = _differing(store, "relationships", _RELATIONSHIP_COLUMNS, [
        (r.id, r.source, r.target, r.description, r.weight, r.mentions, r.combined_degree)
        for rid in sorted(state.changed_relationships) if (r := state.relationships.get(rid))])
    delete_in(store, "relationships", "id", state.deleted_relationships | {row[0] for row in changed})
    conn.executemany(f"INSERT INTO relationships({', '.join(_RELATIONSHIP_COLUMNS)}) VALUES (?,?,?,?,?,?,?)",
                     changed)


def _write_answers(store: Store, state: GraphState, left_at: float) -> None:
    """Which model answer each element's summary is, where that differs: bookkeeping for
    ``prune``, which no query reads (a summary setting changed and back summarized every element
    again to the same descriptions, from other answers, and published a version of that alone)."""
    # The model answers summaries are (``prune`` keeps them): one that leaves is dated from
    # now, as an extraction is, so that a change undone within store.keep_unused_days costs
    # nothing however old the answer (it was pruned 30 days after it was made, while in use).
    gone = state.deleted_entities | state.deleted_relationships
    answered = set(state.answers) | gone
    before: dict[str, str] = {}
    for part in _batches(answered):
        before.update(store.conn.execute(f"SELECT owner, key FROM answers WHERE {_in('owner', part)}",
                                         part).fetchall())
    after = {e: k for e, k in state.answers.items() if k is not None and e not in gone}
    differs = {e for e in answered if before.get(e) != after.get(e)}
    _release_answers(store, differs, left_at)
    store.conn.executemany("INSERT INTO answers(owner, key) VALUES (?,?)",
                           [(e, after[e]) for e in sorted(differs) if e in after])


def _write_communities(store: Store, state: GraphState, communities: list[Community],
                       assignments: dict[str, tuple[str, str]]) -> None:
    """Communities with the context and report each shows, and their members: the rows that differ."""
    conn = store.conn
    row = {c.id: (c.level, c.parent, len(c.members), *assignments[c.id]) for c in communities}
    old_row = {c.id: (c.level, c.parent, len(c.members), state.old_contexts.get(c.id), state.old_reports.get(c.id))
               for c in state.old_communities}
    members = {c.id: c.members for c in communities}
    old_members = {c.id: c.members for c in state.old_communities}
    delete_in(store, "communities", "id", {i for i, r in old_row.items() if row.get(i) != r})
    conn.executemany(
        "INSERT INTO communities(id, level, parent, size, context_key, report_key) VALUES (?,?,?,?,?,?)",
        [(i, *r) for i, r in row.items() if old_row.get(i) != r])
    regrouped = {i for i in members.keys() | old_members.keys()
                 if (a := members.get(i, [])) != (b := old_members.get(i, [])) and sorted(a) != sorted(b)}
    delete_in(store, "community_members", "community_id", regrouped)
    conn.executemany("INSERT INTO community_members(community_id, entity_id) VALUES (?,?)",
                     [(i, m) for i in sorted(regrouped) for m in members.get(i, ())])


def _write_embeddings(store: Store, change: Change, state: GraphState, vectors: list[tuple]) -> None:
    """This run's vectors; those of what no longer exists go."""
    store.conn.executemany("INSERT OR REPLACE INTO embeddings(kind, item_id, model, content_hash, vector) "
                           "VALUES (?,?,?,?,?)", vectors)
    # Vectors of what no longer exists would crowd out live items in similarity search.
    delete_in(store, "embeddings", "item_id", state.deleted_entities | change.removed_chunks - change.live)


def _clean_up(store: Store, left_at: float) -> None:
    """Rows nothing published refers to any more. A report's model answer is dated from
    ``left_at``, for a change undone meanwhile to find it."""
    conn = store.conn
    unused = {key for (key,) in conn.execute("SELECT key FROM reports WHERE key NOT IN (SELECT "
                                             "report_key FROM communities WHERE report_key IS NOT NULL)")}
    _release_answers(store, unused, left_at)
    delete_in(store, "reports", "key", unused)
    conn.execute("DELETE FROM chunks WHERE id NOT IN (SELECT chunk_id FROM document_chunks)")
    # (a removed document's spans, and those of a version cut but never published: held back)
    conn.execute("DELETE FROM chunk_spans WHERE doc_id NOT IN (SELECT id FROM documents)")
    conn.execute("DELETE FROM embeddings WHERE kind = 'report'")   # (made before reports were not)


# The page cache a publish writes with. Provenance rows go in in key order, but their index by
# chunk takes them at random places, and with SQLite's default 2 MB its pages went in and out of
# the cache: inserting the provenance and relationship rows of a first index took 6.0 s of CPU at
# 10,000 documents (3.7 s with 16 MB) and 24 s at 30,000 (16 s with 16 MB, 12 s with 64 MB; 119 s,
# 71 s and 27 s of wall time as the spilled pages went to the WAL again and again). The index
# entry of a row is some 30 bytes: the cache is sized to hold it for the rows a run adds, within
# [2 MB, 64 MB], and given back after (a daemon keeps 2 MB between its small publishes). The rows
# it removes count too: those of a 25 MB file (127,000) are everywhere in both tables, and their
# deletes wrote 240 MB more than the WAL's 39 MB with 2 MB (their pages went out and came back),
# 38 MB more with the 5 MB they ask for, none with 8 MB.
PUBLISH_CACHE_BYTES_PER_ROW = 40
PUBLISH_CACHE_KIB = (2000, 64 * 1024)


def publish_cache_kib(rows: int) -> int:
    """The page cache (KiB) a publish adding or removing ``rows`` provenance rows writes with."""
    least, most = PUBLISH_CACHE_KIB
    return min(most, max(least, rows * PUBLISH_CACHE_BYTES_PER_ROW // 1024))


def _provenance_rows(store: Store, chunk_ids: set[str]) -> int:
    """How many provenance rows ``chunk_ids`` hold (counted in their index by chunk)."""
    return sum(store.scalar(f"SELECT count(*) FROM {table} WHERE {_in('chunk_id', part)}", part)
               for part in _batches(chunk_ids) for table in ("entity_sources", "relationship_sources"))


@contextlib.contextmanager
def _page_cache(store: Store, kib: int) -> Iterator[None]:
    """The connection's page cache at ``kib`` KiB while the block runs, then as it was."""
    before = store.scalar("PRAGMA cache_size")
    store.conn.execute(f"PRAGMA cache_size = {-kib}")
    try:
        yield
    finally:
        store.conn.execute(f"PRAGMA cache_size = {int(before)}")


def publish(store: Store, scan: Scan, change: Change, state: GraphState,
            communities: list[Community], assignments: dict[str, tuple[str, str]], key: str,
            vectors: list[tuple], meta: dict[str, str], counts: dict[str, str | None]) -> int:
    """Replaces the published index with this run's, in the writer's one transaction, and
    returns its version: a new one, or the published one when no row and no mark differs (a
    sync that found nothing to change publishes nothing).

    ``key`` is the extractor the added chunks count with; ``meta`` holds the marks a query reads
    beside the rows, published with this version. ``counts`` are the next run's bookkeeping (the
    settings the index was built with, answers unusable on runs in a row), which no query reads:
    written whatever the version, they make none (each run counting up to settling an item
    published a version that differed from the one before only in them; a setting changed and
    changed back, one made of its marks alone). So are which cached answer each summary is and
    which stored extraction a chunk that stays is live with (``Change.rekeyed``)."""
    check_version(store, state.version)
    _write_bookkeeping(store, scan, counts)
    left_at = time.time()   # when the answers and extractions that leave the index left it
    _write_answers(store, state, left_at)
    _write_live_keys(store, change, left_at)
    written_before = store.conn.total_changes   # what follows is published: a change makes a version
    with _page_cache(store, publish_cache_kib(len(state.entity_mentions_added) + len(state.relationship_mentions_added)
                                              + _provenance_rows(store, change.removed_chunks))):
        _write_documents(store, scan, change)
        _write_chunks(store, change, state, key)
        _write_claims(store, change, state)
        _write_elements(store, state)
        _write_communities(store, state, communities, assignments)
        _write_embeddings(store, change, state, vectors)
    if store.conn.total_changes == written_before and all(store.get_meta(k) == v for k, v in meta.items()):
        # Nothing published differs: the version stands. (Chunks this run stored for an edit it
        # could not extract are not a change; they go with the next version's clean-up.)
        return store.version
    _clean_up(store, left_at)
    # The version marks.
    version = store.version + 1
    store.set_meta("version", str(version))
    for name, value in meta.items():
        store.set_meta(name, value)
    store.set_meta("published_at", str(time.time()))
    return version


def files_of_chunks(store: Store, chunk_ids: set[str]) -> dict[str, str]:
    """Chunk id -> the path of an indexed file whose document holds it (the estimate's: what a
    changed file said before)."""
    out: dict[str, str] = {}
    for part in _batches(chunk_ids):
        out.update(store.conn.execute(
            "SELECT dc.chunk_id, MIN(f.path) FROM document_chunks dc JOIN files f ON f.doc_id = dc.doc_id "
            f"WHERE {_in('dc.chunk_id', part)} GROUP BY dc.chunk_id", part))
    return out
