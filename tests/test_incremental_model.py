"""The incremental invariant with the simulator as the model: after any sequence of changes to
a folder (and of settings, then reverted), the next `index` gives the entities, relationships,
their provenance, descriptions and claims a fresh index of the final folder has with the same
settings (communities are warm-started, so they may differ)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import failing_for, index_snapshot, make_settings
from streamrag.pipeline import sync
from streamrag.store import Store

pytestmark = pytest.mark.anyio


def comparable(db: Path) -> dict:
    """``index_snapshot`` without what warm-started clustering may give otherwise, with each
    document's chunks."""
    snap = index_snapshot(db)
    del snap["partition"], snap["reports"]
    store = Store(db, readonly=True)
    try:
        snap["document_chunks"] = sorted(tuple(r.values()) for r in store.query("SELECT * FROM document_chunks"))
        snap["documents"] = sorted(tuple(r.values()) for r in store.query("SELECT * FROM documents"))
    finally:
        store.close()
    return snap


async def fresh_index(corpus: Path, settings, tmp_path: Path) -> dict:
    copy = tmp_path / "fresh"
    shutil.copytree(corpus, copy)
    await sync([copy], settings, tmp_path / "f.db", root=copy)
    return comparable(tmp_path / "f.db")


async def test_chunk_settings_given_through_one_file_then_reverted_give_a_fresh_index(corpus, tmp_path,
                                                                                      simulator):
    # `index one.txt` with new chunk settings cuts that file anew and leaves the others for the
    # next full run. Back on the old settings, that run took every document as cut with them,
    # and the file kept the chunks of the settings given once.
    small = make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10})
    large = make_settings(simulator.base_url, index={"chunk_size": 120, "chunk_overlap": 10})
    db = tmp_path / "i.db"
    await sync([corpus], small, db, root=corpus)
    await sync([sorted(corpus.glob("*.txt"))[0]], large, db, root=corpus)
    back = await sync([corpus], small, db, root=corpus)
    assert back.failures == 0
    assert comparable(db) == await fresh_index(corpus, small, tmp_path)
    before = simulator.requests
    again = await sync([corpus], small, db, root=corpus)
    assert simulator.requests == before and not again.published


async def test_chunk_settings_reverted_after_a_failed_recut_give_a_fresh_index(corpus, tmp_path, simulator):
    # A run on new chunk settings whose new chunks failed for one file keeps that file as it
    # was and publishes the others recut; back on the old settings, those stayed so.
    small = make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "i.db"
    await sync([corpus], small, db, root=corpus)
    victim = sorted(corpus.glob("*.txt"))[0]
    marker = " ".join(victim.read_text().split()[:4])
    large = make_settings(simulator.base_url, index={"chunk_size": 120, "chunk_overlap": 10},
                          llm={"max_retries": 0})
    async with failing_for(marker, simulator.base_url) as transport:
        result = await sync([corpus], large, db, root=corpus, transport=transport)
    assert result.failures >= 1 and result.published
    back = await sync([corpus], small, db, root=corpus)
    assert back.failures == 0
    assert comparable(db) == await fresh_index(corpus, small, tmp_path)


async def test_a_text_field_reverted_names_again_the_file_read_with_the_other(tmp_path):
    # d.jsonl has a "text" field, e.jsonl a "body" one. Under text_field = "body", e.jsonl is
    # read (and d.jsonl kept, said as a failure). Back on "text", e.jsonl was never read again:
    # its rows stayed, silently, on every later run (a fresh index says it has no such field).
    folder = tmp_path / "rows"
    folder.mkdir()
    (folder / "d.jsonl").write_text(json.dumps({"text": "Alice Smith met Bob Jones in Paris."}) + "\n")
    (folder / "e.jsonl").write_text(json.dumps({"body": "Carol White founded Acme Corp in Berlin."}) + "\n")
    db = tmp_path / "i.db"
    text, body = (make_settings(index={"text_field": field}) for field in ("text", "body"))
    await sync([folder], text, db, root=folder)
    await sync([folder], body, db, root=folder)
    back = await sync([folder], text, db, root=folder)
    assert any("e.jsonl: no 'text' field" in w for w in back.warnings), back.warnings
