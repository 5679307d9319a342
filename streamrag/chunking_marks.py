"""What an index records of how its documents were read and chunked, and what a run makes of it.

A sync publishes the chunker key of the settings every document was cut with (``chunker_key``:
the loader and chunker versions, index.chunk_size, chunk_overlap, encoding and text_field), and
those settings by name (``chunking_settings``), so that a later run with other settings cuts
every document again and can say which setting changed (``chunking_change``). A run that cut only
some documents with its settings while others keep another's publishes ``MIXED_CHUNKING``
instead (``publishes_cut``): the next run recuts them all, whichever settings it has.
``reading_change`` says why a run would (``--estimate``); ``check_not_newer`` refuses an index
whose documents a newer streamrag read or chunked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from streamrag import chunker, ids, index_rows, loader
from streamrag.config import Settings
from streamrag.errors import StoreError
from streamrag.store import Store

if TYPE_CHECKING:
    from streamrag.extraction_stage import Scan
    from streamrag.graph_state import Change

# The chunker mark of an index whose documents are not all cut with one set of reading and
# chunking settings: no settings' key, so the next run cuts them all again.
MIXED_CHUNKING = "mixed"
# How such an index is described (``reading_change``, and a run's warning when no setting changed).
MIXED_CHUNKING_SAID = "some documents were read and chunked with other settings than the rest"


def chunker_key(settings: Settings) -> str:
    """The key of the reading and chunking settings (published as the "chunker" mark): a change
    of it cuts every document again, each as a run covers it (``recuts_all``)."""
    ix = settings.index
    return _key(chunker.VERSION, loader.VERSION, ix.chunk_size, ix.chunk_overlap, ix.encoding, ix.text_field)


def recuts_all(store: Store, key: str) -> bool:
    """Whether a run whose reading and chunking settings have the ``chunker_key`` ``key`` reads
    and recuts every document of the index in ``store`` that it covers, files unchanged on disk
    too: all of them for a run of the whole folder, the files given of `index one.txt` (the others
    keep their chunks until a run covers them)."""
    return store.get_meta("chunker") not in (None, key)


def _key(chunker_version: object, loader_version: object, chunk_size: object, chunk_overlap: object,
         encoding: object, text_field: object) -> str:
    return ids.digest(chunker_version, chunk_size, chunk_overlap, encoding, loader_version, text_field, length=12)


def _upgraded_from(built_key: str | None, now: dict[str, object]) -> str:
    """What an earlier streamrag did differently ("reads", "chunks" or both) when ``built_key``,
    the key alone that indexes from before ``chunking_settings`` published, is that of these same
    settings with an earlier loader or chunker version; "" when none is (a setting changed)."""
    if not built_key:
        return ""
    setting = [now[name] for name in ("index.chunk_size", "index.chunk_overlap", "index.encoding", "index.text_field")]
    for c in range(1, int(str(now["chunker"])) + 1):
        for r in range(1, int(str(now["loader"])) + 1):
            if _key(str(c), str(r), *setting) == built_key:
                return " and ".join(verb for verb, was, is_now in (("reads", str(r), now["loader"]),
                                                                   ("chunks", str(c), now["chunker"]))
                                    if was != is_now)
    return ""


def publishes_cut(store: Store, scan: Scan, change: Change) -> bool:
    """Whether this run publishes a document it cut: a new one, or a kept one with other chunks."""
    cut = scan.doc_chunks
    if change.added_docs & cut.keys():
        return True
    before = index_rows.chunk_ids_of(store, change.kept_docs & cut.keys())
    return any(ids != [c.id for c in cut[doc_id]] for doc_id, ids in before.items())


def check_not_newer(store: Store, db_path: Path) -> None:
    """Refuses an index whose documents a newer streamrag read or chunked (a later loader or
    chunker VERSION in its published ``chunking_settings``): this one would read every file
    again its older way, saying it was upgraded, and the newer one again after it, each paying
    for the chunks whose text changed. (The schema, which refuses a newer index, need not change
    with them.)"""
    try:
        was = json.loads(store.get_meta("chunker_settings") or "")
    except ValueError:
        return
    if not isinstance(was, dict):
        return
    newer = [f"{part} {was[part]}, this one {now}" for part, now in (("loader", loader.VERSION),
                                                                    ("chunker", chunker.VERSION))
             if _later(was.get(part), now)]
    if newer:
        raise StoreError(f"{db_path} was written by a newer streamrag, which reads documents differently "
                         f"({'; '.join(newer)}); upgrade streamrag, or give this one its own index with --db")


def _later(version: object, than: str) -> bool:
    try:
        return int(str(version)) > int(than)
    except ValueError:
        return False


def reading_change(store: Store, settings: Settings) -> str:
    """Why a run with ``settings`` reads and chunks again every document of the index in
    ``store`` that it covers (``recuts_all``; ``chunking_change``'s words; ``--estimate`` says
    it), or "" when it does not."""
    built = store.get_meta("chunker")
    if built in (None, chunker_key(settings)):
        return ""
    if built == MIXED_CHUNKING:
        return MIXED_CHUNKING_SAID
    return chunking_change(store.get_meta("chunker_settings"), chunking_settings(settings), built)[0]


def chunking_settings(settings: Settings) -> dict[str, object]:
    """What the chunker key is of (``chunker_key``), by setting name: published with the
    index, so that a later run can name the one that changed."""
    ix = settings.index
    return {"index.chunk_size": ix.chunk_size, "index.chunk_overlap": ix.chunk_overlap,
            "index.encoding": ix.encoding, "index.text_field": ix.text_field,
            "chunker": chunker.VERSION, "loader": loader.VERSION}


def chunking_change(built: str | None, now: dict[str, object], built_key: str | None = None) -> tuple[str, bool]:
    """What changed of the reading and chunking settings since ``built`` (``chunking_settings``
    as published, ``None`` in an index from before it was, whose ``built_key`` alone says an
    upgrade), in words a user recognises, and whether a setting is of it: the ``index.`` settings
    that differ, else (``False``) the streamrag upgrade that reads or chunks documents differently."""
    try:
        was = json.loads(built) if built else None
    except ValueError:
        was = None
    if not isinstance(was, dict):
        if how := _upgraded_from(built_key, now):   # the same settings, an earlier loader or chunker
            return f"streamrag was upgraded since this index was built and {how} documents differently", False
        return ("one of index.chunk_size, chunk_overlap, encoding and text_field, or how this streamrag "
                "reads documents, differs from when the index was built"), True
    named = [f"{name} is now {json.dumps(value)} (was {json.dumps(was.get(name))})"
             for name, value in now.items() if name.startswith("index.") and was.get(name) != value]
    if named:
        return ", ".join(named), True
    # No setting: a new streamrag's loader or chunker (their VERSION), which re-reads every file.
    how = " and ".join(verb for verb, part in (("reads", "loader"), ("chunks", "chunker"))
                       if was.get(part) != now.get(part)) or "reads"
    return f"streamrag was upgraded since this index was built and {how} documents differently", False
