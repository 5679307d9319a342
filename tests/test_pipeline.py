"""The indexer end to end, through the simulator over loopback HTTP and offline."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest

from conftest import KeyRefusedMidway, chat_answer, claims_answered, clean_env, simulated_transport
from conftest import index_snapshot as snapshot, lose_extraction, make_settings, status_info, unsearchable
from streamrag.config import Settings
from streamrag.pipeline import sync
from streamrag.store import Store

pytestmark = pytest.mark.anyio


async def test_index_through_simulator(corpus, tmp_path, sim_settings, simulator):
    db = tmp_path / "index.db"
    with anyio.fail_after(120):
        before = simulator.requests
        tokens_before = (simulator.prompt_tokens, simulator.completion_tokens)
        result = await sync([corpus], sim_settings, db, root=corpus)
        assert simulator.requests > before
    assert result.documents == 4 and result.failures == 0
    assert result.entities > 10 and result.relationships > 5
    store = Store(db, readonly=True)
    # The tokens recorded per call are the ones the server reported in `usage`.
    recorded = store.query("SELECT sum(prompt_tokens) AS p, sum(completion_tokens) AS c FROM llm_calls "
                           "WHERE cached = 0 AND error IS NULL")[0]
    assert (recorded["p"], recorded["c"]) == (simulator.prompt_tokens - tokens_before[0],
                                              simulator.completion_tokens - tokens_before[1])
    # Merged entities with provenance: Mira Osk is named in three documents.
    mira = store.query("SELECT * FROM entities WHERE name = 'Mira Osk'")
    assert len(mira) == 1 and mira[0]["mentions"] >= 3 and mira[0]["description"]
    docs = {r["path"] for r in store.query(
        "SELECT DISTINCT d.path FROM entity_sources s JOIN document_chunks dc ON dc.chunk_id = s.chunk_id "
        "JOIN documents d ON d.id = dc.doc_id WHERE s.entity_id = ?", (mira[0]["id"],))}
    assert {"council.txt", "guild.txt", "railway.txt"} <= docs
    # The summarizer merged several descriptions into one (an LLM call was made for it).
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE stage = 'summarize'") > 0
    # Every entity is in exactly one level-0 community, at most one per deeper level.
    per_level = store.query("SELECT c.level, m.entity_id, count(*) AS n FROM community_members m "
                            "JOIN communities c ON c.id = m.community_id GROUP BY c.level, m.entity_id")
    assert all(r["n"] == 1 for r in per_level)
    level0 = {r["entity_id"] for r in per_level if r["level"] == 0}
    assert level0 == {r["id"] for r in store.query("SELECT id FROM entities")}
    # Every community has a report written by the model (not the extractive stand-in).
    assert store.scalar("SELECT count(*) FROM communities WHERE report_key NOT IN (SELECT key FROM reports)") == 0
    # The model wrote the report of every community of 3 or more; smaller ones are extractive.
    sizes = {r["report_key"]: r["size"] for r in store.query("SELECT report_key, size FROM communities")}
    kinds = {r["key"]: r["extractive"] for r in store.query("SELECT key, extractive FROM reports")}
    assert all(kinds[k] == (sizes[k] < 3) for k in sizes)
    assert any(size >= 3 for size in sizes.values())
    assert store.scalar("SELECT count(*) FROM communities") == result.communities > 0
    # Relationship weights come from their supporting mentions.
    for r in store.query("SELECT r.weight, sum(s.strength) / 10.0 AS w FROM relationships r "
                         "JOIN relationship_sources s ON s.relationship_id = r.id GROUP BY r.id"):
        assert r["weight"] == pytest.approx(r["w"])
    store.close()

    # A second run on the unchanged folder makes no request at all.
    with anyio.fail_after(60):
        before = simulator.requests
        again = await sync([corpus], sim_settings, db, root=corpus)
    assert simulator.requests == before
    assert sum(s.get("calls", 0) for s in again.llm.values()) == 0
    assert again.reports_generated == 0 and again.documents_added == 0


async def test_offline_index_needs_no_llm(corpus, tmp_path):
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    assert settings.offline
    db = tmp_path / "offline.db"
    result = await sync([corpus], settings, db, root=corpus)
    assert result.offline and result.entities > 10 and result.communities > 0
    store = Store(db, readonly=True)
    assert store.scalar("SELECT count(*) FROM llm_calls") == 0
    assert store.scalar("SELECT count(*) FROM reports WHERE extractive = 0") == 0
    assert store.scalar("SELECT count(*) FROM communities WHERE report_key IS NULL") == 0
    names = {r["name"] for r in store.query("SELECT name FROM entities")}
    assert {"Mira Osk", "Port Vell", "Anton Heller"} <= names
    store.close()


async def test_offline_extractions_are_stored_in_groups_not_one_transaction_each(tmp_path, monkeypatch):
    # Each offline extraction was committed alone: 3,818 transactions for a first index of 3,000
    # documents. They are made again in moments, so they are stored many to a transaction now.
    from streamrag.writer import Writer

    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(3):
        (folder / f"town{n}.txt").write_text("\n\n".join(
            f"Mayor Anna Berg{n}{k} met Captain Olaf Lind{n}{k} and Doctor Vera Holm{n}{k} in Port Vell{n}{k}, "
            f"where the Harbor Council{n}{k} and the Fishermen's Guild{n}{k} meet." for k in range(60)))
    stores = []   # of each writer transaction that stored extractions: how many it stored
    run = Writer._run

    def counted(self, batch):
        stored = [len(op.args[1]) if op.fn.__name__ == "save_extractions" else 1
                  for op in batch if op.fn.__name__ in ("save_extraction", "save_extractions")]
        if stored:
            stores.append(sum(stored))
        return run(self, batch)

    monkeypatch.setattr(Writer, "_run", counted)
    db = tmp_path / "offline.db"
    result = await sync([folder], make_settings(index={"chunk_size": 50, "chunk_overlap": 0}), db, root=folder)
    assert result.offline and result.chunks_extracted > 100
    assert sum(stores) == result.chunks_extracted
    assert len(stores) < result.chunks_extracted / 10, stores
    store = Store(db, readonly=True)
    try:
        assert store.scalar("SELECT count(*) FROM extractions") == result.chunks_extracted
        # every chunk made, the last group's too: an unstored one is left out of the index unsaid
        assert store.scalar("SELECT count(*) FROM chunks") == result.chunks == result.chunks_extracted
    finally:
        store.close()


async def test_a_chunk_left_without_an_extraction_unsaid_is_a_failure_and_extracted_by_the_next_sync(
        tmp_path, monkeypatch):
    # A chunk with no stored extraction when its run published was left out without a word (the
    # last offline group unstored: 128 of 180 chunks published, every count agreeing with that).
    from streamrag import index_rows

    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(2):
        (folder / f"town{n}.txt").write_text("\n\n".join(
            f"Mayor Anna Berg{n}{k} met Captain Olaf Lind{n}{k} in Port Vell{n}{k}." for k in range(20)))
    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    fresh = tmp_path / "fresh.db"
    whole = await sync([folder], settings, fresh, root=folder)
    save = index_rows.save_extractions
    dropped = lose_extraction(monkeypatch)   # the one chunk whose extraction is not stored, and nothing fails
    db = tmp_path / "x.db"
    result = await sync([folder], settings, db, root=folder)
    assert len(dropped) == 1 and result.chunks == whole.chunks - 1
    assert result.failures == result.failed_items == 1
    (failure,) = status_info(db, failures=True)["failures"]
    assert failure["stage"] == "extract" and failure["item"] == dropped[0]
    assert failure["message"].startswith("town") and "the next run extracts it again" in failure["message"]
    assert status_info(db)["failures_last_run"] == 1

    monkeypatch.setattr(index_rows, "save_extractions", save)
    again = await sync([folder], settings, db, root=folder)
    assert again.chunks == whole.chunks and again.chunks_extracted == 1 and again.failures == 0
    assert snapshot(db) == snapshot(fresh)


async def test_files_held_back_for_chunks_left_without_an_extraction_unsaid_count_them_as_failures(
        tmp_path, monkeypatch):
    # An edited file kept as it was, and a new one left out, for chunks with no stored extraction
    # and no failure: each was said to have chunks that "could not be extracted", the run "ok".
    from streamrag import index_rows

    folder = tmp_path / "notes"
    folder.mkdir()
    town = folder / "town.txt"
    town.write_text("Mayor Anna Berg met Captain Olaf Lind in Port Vell.")
    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    db = tmp_path / "x.db"
    await sync([folder], settings, db, root=folder)
    town.write_text("Mayor Anna Berg met Doctor Vera Holm in Port Vell.")
    (folder / "harbor.txt").write_text("The Harbor Council met the Fishermen's Guild in Port Vell.")
    with monkeypatch.context() as m:
        m.setattr(index_rows, "save_extractions", lambda store, key, held: None)
        result = await sync([folder], settings, db, root=folder)
    assert result.documents == 1 and result.failures == result.failed_items == 2, result.warnings
    said = sorted(f["message"].split(" ")[0] for f in status_info(db, failures=True)["failures"])
    assert said == ["harbor.txt", "town.txt"]

    again = await sync([folder], settings, db, root=folder)
    assert again.documents == 2 and again.failures == 0 and again.chunks_extracted == 2
    fresh = tmp_path / "fresh.db"
    await sync([folder], settings, fresh, root=folder)
    assert snapshot(db) == snapshot(fresh)


async def test_a_file_held_back_for_a_failed_call_counts_that_failure_once(tmp_path, simulator):
    # A held-back chunk whose call failed is said by that failure alone: not a second time as a
    # chunk left without an extraction "and nothing said why" (``_fail_unaccounted``).
    from conftest import failed_edit_and_addition

    _folder, _settings, db, result = await failed_edit_and_addition(tmp_path, simulator.base_url)
    assert result.documents == 1 and result.failures == result.failed_items == 2, result
    messages = [f["message"] for f in status_info(db, failures=True)["failures"]]
    assert len(messages) == 2 and not [m for m in messages if "nothing said why" in m], messages


async def test_bad_files_are_recorded_and_the_run_goes_on(corpus, tmp_path):
    (corpus / "broken.txt").write_bytes(b"\x00\x01binary\x00")
    (corpus / "empty.md").write_text("   \n")
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    result = await sync([corpus], settings, db, root=corpus)
    # a binary file failed to load; an empty one had nothing to load: a warning, not a failure
    assert result.documents == 4 and result.failures == 1
    assert [w for w in result.warnings if "empty.md" in w] == ["empty.md: only white space, nothing to index"]
    store = Store(db, readonly=True)
    messages = [r["message"] for r in store.query("SELECT message FROM failures")]
    assert len(messages) == 1 and "broken.txt" in messages[0] and "binary" in messages[0]
    store.close()


async def test_a_file_that_failed_is_not_read_again_until_it_or_the_reading_settings_change(
        corpus, tmp_path, files_read):
    # Each run read a file that could not be used again, and recorded its failure anew.
    from streamrag.status import gather_status

    read = files_read
    (corpus / "rows.csv").write_text("title,body\nQuay,Mira Osk chaired the Harbor Council.\n")
    db = tmp_path / "x.db"

    async def run(**index) -> tuple:
        result = await sync([corpus], make_settings(index=index), db, root=corpus)
        store = Store(db, readonly=True)
        try:
            total = gather_status(store)["failures_total"]
        finally:
            store.close()
        return result.failures, total, read.count("rows.csv")

    assert await run() == (1, 1, 1)   # no "text" field
    # Unchanged: named again, as the run's failure, but not read, and not counted again.
    again = await sync([corpus], make_settings(), db, root=corpus)
    assert again.failures == 1 and [w for w in again.warnings if "rows.csv" in w] == [
        "rows.csv: no 'text' field in any row (its fields: 'title', 'body'); name the column holding the text 'text' or set index.text_field "
        "(`text_field = \"body\"` under [index] reads its longest field)"]
    assert read.count("rows.csv") == 1
    # The setting it is read with changed: read again, and indexed.
    assert await run(text_field="body") == (0, 1, 2)
    assert await run(text_field="body") == (0, 1, 2)   # indexed and unchanged: not read


async def test_an_unchanged_empty_file_is_not_read_again(corpus, tmp_path, files_read):
    # An empty file was opened and read by every run (and every sync of watch), though unchanged.
    (corpus / "empty.md").write_text("  \n")
    (corpus / "notes").mkdir()
    (corpus / "notes" / "blank.txt").write_text("")
    db = tmp_path / "x.db"
    said = ["empty.md: only white space, nothing to index", "notes/blank.txt: empty file, nothing to index"]
    first = await sync([corpus], make_settings(), db, root=corpus)
    assert sorted(w for w in first.warnings if "nothing to index" in w) == said
    assert files_read.count("empty.md") == 1 and files_read.count("blank.txt") == 1
    again = await sync([corpus], make_settings(), db, root=corpus)
    # Said again (watch says a warning once while each sync has it), but not read again.
    assert sorted(w for w in again.warnings if "nothing to index" in w) == said and again.failures == 0
    assert files_read.count("empty.md") == 1 and files_read.count("blank.txt") == 1
    # `index notes/blank.txt` alone keeps empty.md remembered.
    await sync([corpus / "notes" / "blank.txt"], make_settings(), db, root=corpus)
    await sync([corpus], make_settings(), db, root=corpus)
    assert files_read.count("empty.md") == 1 and files_read.count("blank.txt") == 1
    # Changed: read again, and indexed.
    (corpus / "empty.md").write_text("Mira Osk rebuilt the north quay of Port Vell.\n")
    changed = await sync([corpus], make_settings(), db, root=corpus)
    assert files_read.count("empty.md") == 2 and changed.documents_added == 1
    assert [w for w in changed.warnings if "nothing to index" in w] == said[1:]
    # The reading settings changed: every file is read again, the empty one too.
    await sync([corpus], make_settings(index={"chunk_size": 300, "chunk_overlap": 20}), db, root=corpus)
    assert files_read.count("blank.txt") == 2
    store = Store(db, readonly=True)
    try:
        from streamrag import index_rows

        assert list(index_rows.empty_files(store)) == ["notes/blank.txt"]
    finally:
        store.close()
    (corpus / "notes" / "blank.txt").unlink()   # gone: forgotten
    await sync([corpus], make_settings(index={"chunk_size": 300, "chunk_overlap": 20}), db, root=corpus)
    store = Store(db, readonly=True)
    try:
        assert index_rows.empty_files(store) == {}
    finally:
        store.close()


async def test_an_empty_file_no_longer_included_is_forgotten(corpus, tmp_path):
    # index_rows.empty_files kept a file index.include (or index.exclude) no longer takes for ever.
    from streamrag import index_rows

    (corpus / "empty.md").write_text("  \n")
    (corpus / "notes").mkdir()
    (corpus / "notes" / "blank.txt").write_text("")
    db = tmp_path / "x.db"

    def remembered() -> list[str]:
        store = Store(db, readonly=True)
        try:
            return sorted(index_rows.empty_files(store))
        finally:
            store.close()
    await sync([corpus], make_settings(), db, root=corpus)
    assert remembered() == ["empty.md", "notes/blank.txt"]
    await sync([corpus], make_settings(index={"include": ["*.txt"]}), db, root=corpus)
    assert remembered() == ["notes/blank.txt"]
    await sync([corpus], make_settings(index={"exclude": ["notes"]}), db, root=corpus)
    assert remembered() == ["empty.md"]
    # A run of one file keeps what lies outside it.
    await sync([corpus / "council.txt"], make_settings(index={"include": ["*.txt"]}), db, root=corpus)
    assert remembered() == ["empty.md"]


async def test_a_file_the_system_would_not_read_is_read_again_though_unchanged(corpus, tmp_path, monkeypatch):
    # An I/O error (a network mount gone for a moment) was remembered like a binary file's
    # failure: the file, unchanged, was named again and never read until it changed.
    opening = Path.open

    def failing(self, *args, **kwargs):
        if self.name == "guild.txt":
            raise OSError(errno.EIO, "Input/output error")
        return opening(self, *args, **kwargs)

    db = tmp_path / "x.db"
    monkeypatch.setattr(Path, "open", failing)
    first = await sync([corpus], make_settings(), db, root=corpus)
    assert first.failures == 1 and any("guild.txt: cannot read (Input/output error)" in w for w in first.warnings)
    monkeypatch.setattr(Path, "open", opening)
    again = await sync([corpus], make_settings(), db, root=corpus)
    assert again.failures == 0 and not any("guild.txt" in w for w in again.warnings)
    assert again.files == first.files + 1


@pytest.mark.parametrize("offline", [True, False])
async def test_changes_equal_a_fresh_index(corpus, tmp_path, simulator, offline):
    base = {"index": {"chunk_size": 80, "chunk_overlap": 10}}
    settings = make_settings("" if offline else simulator.base_url, **base)
    db = tmp_path / "inc.db"
    await sync([corpus], settings, db, root=corpus)
    # Modify one document, delete one, rename one, add one.
    text = (corpus / "guild.txt").read_text()
    (corpus / "guild.txt").write_text(text.replace("Lantern Hall", "Harbor Chapel"))
    (corpus / "festival.md").unlink()
    (corpus / "railway.txt").rename(corpus / "rail_news.txt")
    (corpus / "new.txt").write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
    before = simulator.requests
    result = await sync([corpus], settings, db, root=corpus)
    # (guild.txt edited, new.txt added, festival.md removed; the rename keeps its text)
    assert (result.documents_added, result.documents_edited, result.documents_removed) == (1, 1, 1)
    incremental = snapshot(db)

    fresh_dir = tmp_path / "fresh"
    shutil.copytree(corpus, fresh_dir)
    fresh_db = tmp_path / "fresh.db"
    await sync([fresh_dir], settings, fresh_db, root=fresh_dir)
    fresh = snapshot(fresh_db)
    for key in ("entities", "relationships", "entity_sources", "relationship_sources", "documents"):
        assert incremental[key] == fresh[key], key
    names = {v[0] for v in incremental["entities"].values()}
    assert "Lena Varga" not in names            # only festival.md named her
    assert "Oskar Lind" in " ".join(names)
    if not offline:
        assert simulator.requests > before


async def test_rename_makes_no_llm_call(corpus, tmp_path, sim_settings, simulator):
    db = tmp_path / "r.db"
    await sync([corpus], sim_settings, db, root=corpus)
    (corpus / "guild.txt").rename(corpus / "guild_renamed.txt")
    before = simulator.requests
    result = await sync([corpus], sim_settings, db, root=corpus)
    assert simulator.requests == before
    assert result.documents_added == 0 and result.documents_removed == 0
    store = Store(db, readonly=True)
    assert store.scalar("SELECT count(*) FROM documents WHERE path = 'guild_renamed.txt'") == 1
    store.close()


def test_export_json_and_graphml(corpus, tmp_path):
    from streamrag.export import export

    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "e.db"
    anyio.run(lambda: sync([corpus], settings, db, root=corpus))
    store = Store(db, readonly=True)
    out = tmp_path / "out.json"
    counts = export(store, out, "json")
    data = json.loads(out.read_text())
    assert counts["entities"] == len(data["entities"]) > 0
    assert {"name", "type", "description", "documents"} <= set(data["entities"][0])
    assert {"source", "target", "description", "weight"} <= set(data["relationships"][0])
    assert {"id", "level", "parent", "members"} <= set(data["communities"][0])
    assert len(data["reports"]) == len(data["communities"])
    gml = tmp_path / "out.graphml"
    export(store, gml, "graphml")
    import xml.etree.ElementTree as ET

    root = ET.parse(gml).getroot()
    ns = "{http://graphml.graphdrawing.org/xmlns}"
    assert len(root.findall(f"{ns}graph/{ns}node")) == counts["entities"]
    store.close()


async def test_claims_when_enabled(corpus, tmp_path, simulator):
    settings = make_settings(simulator.base_url, index={"extract_claims": True})
    db = tmp_path / "claims.db"
    result = await sync([corpus], settings, db, root=corpus)
    assert result.claims > 0
    store = Store(db, readonly=True)
    claims = store.query("SELECT c.*, e.name FROM claims c JOIN entities e ON e.id = c.subject_id")
    assert len(claims) == result.claims          # every claim's subject is an entity of the graph
    assert any("Northern Rail Company" == c["name"] for c in claims)
    assert all(c["status"] in ("TRUE", "FALSE", "SUSPECTED") and c["source_text"] for c in claims)
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE stage = 'claims'") > 0
    store.close()


async def test_a_claim_whose_subject_no_extraction_named_is_shown_with_its_subject(corpus, tmp_path):
    # A model's claim about a name its extraction missed was stored with a subject_id that no
    # entity had: no report or local answer, which find claims by their subject, ever showed it.
    from streamrag.local_search import build_local_context, load_local_data

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    db = tmp_path / "claims.db"
    line = "claim | Old Quay Trust | Mira Osk | CONTRACT | TRUE | NONE | NONE | The trust paid Mira Osk. | hired"
    result = await sync([corpus], settings, db, root=corpus, transport=claims_answered(line))
    store = Store(db, readonly=True)
    try:
        claims = store.query("SELECT c.id, e.name FROM claims c JOIN entities e ON e.id = c.subject_id")
        assert result.claims > 0 and len(claims) == result.claims
        assert {c["name"] for c in claims} == {"Old Quay Trust"}
        with store.snapshot():
            data = load_local_data(store, [store.scalar("SELECT id FROM entities WHERE name = 'Old Quay Trust'")])
        context = build_local_context(data, max_tokens=4000, text_share=0.5, community_share=0.2)
    finally:
        store.close()
    assert context.text.count("claim (CONTRACT, TRUE) subject Old Quay Trust, object Mira Osk: "
                              "The trust paid Mira Osk.") == 1   # (made by every chunk: one line)


async def test_an_index_that_kept_claims_about_no_entity_makes_them_entities_once_without_a_call(
        corpus, tmp_path, monkeypatch):
    # An index merged before a claim's subject and object were made entities (merge.mentions_of)
    # kept its claims about a name no entity line gave, shown by no report or answer, until
    # their chunks were extracted again: never, for files left as they are.
    import msgspec

    from streamrag import merge

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    line = "claim | Old Quay Trust | Mira Osk | CONTRACT | TRUE | NONE | NONE | The trust paid Mira Osk. | hired"
    transport = claims_answered(line)
    fresh, old = tmp_path / "fresh.db", tmp_path / "old.db"
    await sync([corpus], settings, fresh, root=corpus, transport=transport)
    merged = merge.mentions_of

    def as_before(chunk_id, extraction, shared=None):   # the claims' ends no entities, as then
        entities, _r, _c = merged(chunk_id, msgspec.structs.replace(extraction, claims=[]), shared)
        return (entities, *merged(chunk_id, extraction, shared)[1:])
    with monkeypatch.context() as m:
        m.setattr(merge, "mentions_of", as_before)
        await sync([corpus], settings, old, root=corpus, transport=transport)
    store = Store(old)
    store.conn.execute("DELETE FROM meta WHERE key = 'claim_ends'")   # (written by no streamrag before)
    store.close()
    assert snapshot(old)["entities"].keys() < snapshot(fresh)["entities"].keys()

    def reports_of(path) -> set[tuple]:
        store = Store(path, readonly=True)
        try:
            return {tuple(r.values()) for r in store.query(
                "SELECT c.level, (SELECT group_concat(entity_id) FROM (SELECT entity_id FROM community_members m "
                "WHERE m.community_id = c.id ORDER BY entity_id)), c.report_key FROM communities c")}
        finally:
            store.close()
    before = reports_of(old)
    result = await sync([corpus], settings, old, root=corpus, transport=transport)
    # (no extraction call: the report whose context shows such a claim, found by its object, is
    # written again, its subject now named, as a fresh index writes it: Mira Osk's community's
    # alone, one paid report call; the trust's own community, below index.report_min_members, gets
    # an extractive one. It accepted any number of paid report calls, none too.)
    assert result.chunks_extracted == 0
    written = reports_of(old) - before
    by_model = [r for r in written if len(r[1].split(",")) >= settings.index.report_min_members]
    paid = {k: s["calls"] - s["cached"] for k, s in result.llm.items() if s["calls"] - s["cached"]}
    assert paid == {"report": len(by_model)} and len(by_model) == 1, (result.llm, written)
    assert result.reports_generated == len(written), (result.reports_generated, written)
    want, got = snapshot(fresh), snapshot(old)
    for table in ("entities", "relationships", "entity_sources", "relationship_sources", "claims"):
        assert got[table] == want[table], table
    assert got == want
    assert reports_of(old) == reports_of(fresh)
    again = await sync([corpus], settings, old, root=corpus, transport=transport)
    assert not again.published


async def test_claims_answers_off_the_format_are_said_in_one_warning_and_kept(corpus, tmp_path):
    # A status, a date or a description off the format was taken in silence (an unknown status
    # read as SUSPECTED, "spring 2031" stored as a date), as was an entity line in their place.
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    line = ("claim | Mira Osk | NONE | HIRING | LIKELY | spring 2031 | NONE | Mira Osk leads the work. | hired"
            "\nentity | Mira Osk | person | An engineer.")
    result = await sync([corpus], settings, db := tmp_path / "claims.db", root=corpus, transport=claims_answered(line))
    [said] = [w for w in result.warnings if w.startswith("claims:")]
    assert said.startswith(f"claims: 4 of {settings.llm.extraction_model}'s claims answers did not keep to "
                           "the claim format (the first in ")
    assert said.endswith("): 4 statuses not TRUE, FALSE or SUSPECTED (read as SUSPECTED); 4 dates not "
                         "ISO 8601 (kept as written); 4 entity or relationship lines (not claims, left out). "
                         "The rest of each answer was indexed")
    first = re.search(r"\(the first in (\S+) \(chunk 1, chk-\w+\)\)", said)
    assert first and (corpus / first[1]).is_file()
    assert result.failures == 0 and result.claims == 4
    store = Store(db, readonly=True)
    try:
        stored = {(r["status"], r["start_date"]) for r in store.query("SELECT * FROM claims")}
        assert stored == {("SUSPECTED", "spring 2031")}
    finally:
        store.close()
    again = await sync([corpus], settings, db, root=corpus, transport=claims_answered(line))
    assert not [w for w in again.warnings if w.startswith("claims:")]   # said once: the extractions are kept


async def test_claims_answers_off_the_format_are_kept_to_be_said_when_the_extraction_then_fails(tmp_path, monkeypatch):
    # An extraction ahead of a sync whose key was refused (a quota run out) after a chunk with
    # an off-format claims answer was stored: the daemon says indexer.claims_warning even when
    # the extraction failed, as yes_no's, but it was "" (set once the stage had ended well), and
    # the sync finds the chunk stored and parses no claims answer again: never said.
    from streamrag.errors import LLMRequestError
    from streamrag.pipeline import Indexer

    model = KeyRefusedMidway(monkeypatch)   # (the second chunk's call refused once the first is stored)
    folder = tmp_path / "notes"
    folder.mkdir()
    model.write_notes(folder)
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    indexer = Indexer(settings, tmp_path / "c.db", root=folder, command="watch:extract",
                      transport=model.transport)
    with anyio.fail_after(60), pytest.raises(LLMRequestError):
        await indexer.prefetch([folder / "a.txt", folder / "b.txt"])
    assert model.saved.is_set()
    assert indexer.claims_warning.startswith("claims: 1 of "), indexer.claims_warning
    assert "1 status not TRUE, FALSE or SUSPECTED (read as SUSPECTED)" in indexer.claims_warning


async def test_a_file_that_loses_its_text_leaves_the_index(corpus, tmp_path):
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    await sync([corpus], settings, db, root=corpus)
    (corpus / "festival.md").write_text("  \n")
    (corpus / "guild.txt").write_bytes(b"\x00\x00binary now")
    result = await sync([corpus], settings, db, root=corpus)
    assert result.documents == 2 and result.documents_removed == 2 and result.failures == 1   # empty: a warning
    names = {r["name"] for r in Store(db, readonly=True).query("SELECT name FROM entities")}
    assert "Lena Varga" not in names and "Anton Heller" not in names


async def test_indexing_one_file_keeps_the_rest_of_the_folder(corpus, tmp_path):
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    await sync([corpus], settings, db, root=corpus)
    (corpus / "new.txt").write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell.\n")
    result = await sync([corpus / "new.txt"], settings, db, root=corpus)
    assert result.documents == 5 and result.documents_added == 1 and result.documents_removed == 0


async def _indexed_with(corpus, other):
    """``corpus`` and one file of the folder ``other`` indexed together (`index corpus other`):
    (settings, db, the run's result)."""
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    other.mkdir()
    (other / "lind.txt").write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell.\n")
    db = other.parent / "x.db"
    return settings, db, await sync([corpus, other], settings, db, root=corpus)


async def test_indexing_one_of_two_folders_keeps_the_other(corpus, tmp_path):
    other = tmp_path / "other"
    settings, db, first = await _indexed_with(corpus, other)
    assert first.documents == 5
    again = await sync([corpus], settings, db, root=corpus)
    assert again.documents == 5 and again.documents_removed == 0
    (corpus / "council.txt").unlink()          # what lies under the folder given still syncs
    third = await sync([corpus], settings, db, root=corpus)
    assert third.documents == 4 and third.documents_removed == 1
    # A file of the other folder that was deleted leaves too (it stayed, cited, for good)...
    (other / "lind.txt").unlink()
    fourth = await sync([corpus], settings, db, root=corpus)
    assert fourth.documents == 3 and fourth.documents_removed == 1


async def test_a_file_outside_the_run_stays_while_its_whole_folder_is_missing(corpus, tmp_path):
    """...but while its whole folder is missing (a disk not mounted), it stays indexed."""
    other = tmp_path / "disk"
    settings, db, _first = await _indexed_with(corpus, other)
    other.rename(tmp_path / "elsewhere")
    again = await sync([corpus], settings, db, root=corpus)
    assert again.documents == 5 and again.documents_removed == 0


async def test_relative_folders_name_each_file_once_and_apart(tmp_path, monkeypatch):
    # `cd ab; streamrag index a b`: b/two.txt must not be stored as if it were a/b/two.txt.
    monkeypatch.chdir(tmp_path)
    for rel, text in (("a/one.txt", "Mira Osk rebuilt the Old Quay."),
                      ("a/b/two.txt", "Tobias Reyn joined the Fishermen's Guild."),
                      ("b/two.txt", "Captain Oskar Lind sailed the Blue Heron.")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel + ": " + text + "\n")
    settings = make_settings()
    db = tmp_path / "x.db"
    first = await sync([Path("a"), Path("b")], settings, db, root=Path("a"))
    assert first.documents == 3
    again = await sync([Path("a")], settings, db, root=Path("a"))
    assert again.documents == 3 and again.documents_removed == 0


async def test_a_new_chunk_size_recuts_every_document(corpus, tmp_path):
    db = tmp_path / "x.db"
    await sync([corpus], make_settings(index={"chunk_size": 60, "chunk_overlap": 5}), db, root=corpus)
    small = Store(db, readonly=True).scalar("SELECT count(*) FROM live_chunks")
    result = await sync([corpus], make_settings(), db, root=corpus)
    store = Store(db, readonly=True)
    assert store.scalar("SELECT count(*) FROM live_chunks") == result.chunks == 4 < small
    assert store.scalar("SELECT count(*) FROM document_chunks") == 4
    store.close()


async def index_one_file(tmp_path: Path, name: str, text: str) -> tuple[Path, Path]:
    """(folder, index) of a folder holding one file, indexed offline."""
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / name).write_text(text)
    db = tmp_path / "x.db"
    await sync([folder], make_settings(), db, root=folder)
    return folder, db


async def test_a_new_text_field_rereads_unchanged_rows(tmp_path):
    folder, db = await index_one_file(
        tmp_path, "notes.jsonl", '{"text": "Ada Osk sailed to Velo.", "body": "Bob Lin built the Quay Bridge."}\n')
    # the file is untouched on disk: only the setting says its text is elsewhere now
    result = await sync([folder], make_settings(index={"text_field": "body"}), db, root=folder)
    store = Store(db, readonly=True)
    # (read again: neither added nor removed, the file being as it was)
    assert (result.documents_added, result.documents_removed, result.documents_read_again) == (0, 0, 1)
    names = {r["name"] for r in store.query("SELECT name FROM entities")}
    assert "Bob Lin" in names and "Ada Osk" not in names
    store.close()


@pytest.mark.parametrize("copy", ["deleted", "added"])
async def test_a_copy_deleted_or_added_as_its_rows_are_read_again_reads_no_document_as_removed_or_added(
        tmp_path, copy):
    # Two documents read again with another text_field, a copy of their file deleted in the same
    # run: "2 removed, 2 read again" (2 documents before and after); a copy added: "2 added".
    folder = tmp_path / "rows"
    folder.mkdir()
    rows = "".join(json.dumps({"body": f"Mara Lind{i} runs the Harbor Council {i}.",
                               "text": f"Henrik Salo{i} built the Kessel Bridge {i}."}) + "\n" for i in range(2))
    (folder / "data.jsonl").write_text(rows)
    if copy == "deleted":
        (folder / "copy.jsonl").write_text(rows)
    db = tmp_path / "index.db"
    first = await sync([folder], make_settings(index={"extractor": "nlp", "text_field": "body"}), db, root=folder)
    if copy == "deleted":
        (folder / "copy.jsonl").unlink()
    else:
        (folder / "copy.jsonl").write_text(rows)
    result = await sync([folder], make_settings(index={"extractor": "nlp", "text_field": "text"}), db, root=folder)
    assert first.documents == result.documents == 2
    assert (result.documents_added, result.documents_removed, result.documents_read_again,
            result.documents_unchanged) == (0, 0, 2, 0)


def test_documents_read_again_are_paired_one_for_one_so_the_counts_add_up():
    # A file read anew into the text another file holds: its document left, said neither
    # removed nor read again ("0 added, 0 removed" of 2 documents before, 1 after); read anew
    # with its old text kept by another file: said read again of 1 document before, 2 after.
    from streamrag.graph_state import Change, read_again

    def counts(added, removed, kept, before, now):
        change = Change(set(added), set(removed), set(kept), {}, set(), set(), set(), {})
        again, replaced = read_again(change.added_docs, change.removed_docs, before, now)
        out = (len(change.added_docs - again), len(change.removed_docs - replaced), len(again))
        docs_before = len({d for d, *_ in before.values()})
        assert docs_before + out[0] - out[1] == len({d for d, *_ in now.values()}), out
        return out

    # p1 read anew into p3's text: A leaves
    assert counts([], ["A"], ["B"], {"p1": ("A", 10, 1.0), "p3": ("B", 20, 1.0)},
                  {"p1": ("B", 10, 1.0), "p3": ("B", 20, 1.0)}) == (0, 1, 0)
    # p1 read anew; A stays, p6's
    assert counts(["A2"], [], ["A"], {"p1": ("A", 10, 1.0), "p6": ("A", 11, 1.0)},
                  {"p1": ("A2", 10, 1.0), "p6": ("A", 11, 1.0)}) == (1, 0, 0)
    # two documents read anew into one text: one read again, the other removed
    assert counts(["C"], ["A", "B"], [], {"p1": ("A", 10, 1.0), "p2": ("B", 11, 1.0)},
                  {"p1": ("C", 10, 1.0), "p2": ("C", 11, 1.0)}) == (0, 1, 1)
    # copies read anew alike: one document read again
    assert counts(["A2"], ["A"], [], {"p1": ("A", 10, 1.0), "p2": ("A", 10, 1.0)},
                  {"p1": ("A2", 10, 1.0), "p2": ("A2", 10, 1.0)}) == (0, 0, 1)


async def test_markdown_front_matter_is_metadata_not_text(tmp_path):
    _folder, db = await index_one_file(
        tmp_path, "a.md", "---\ntitle: Harbour notes\nauthor: Carl Zed\n---\nAda Osk sailed to Velo.\n")
    store = Store(db, readonly=True)
    assert [r["title"] for r in store.query("SELECT title FROM documents")] == ["Harbour notes"]
    assert [r["text"].strip() for r in store.query("SELECT text FROM chunks")] == ["Ada Osk sailed to Velo."]
    assert "Carl Zed" not in {r["name"] for r in store.query("SELECT name FROM entities")}
    store.close()


async def test_markdown_indexed_before_wikilinks_were_read_as_shown_is_read_again(tmp_path, monkeypatch):
    from streamrag import loader, markdown
    with monkeypatch.context() as m:   # the reader before: links kept as written
        m.setattr(loader, "VERSION", "5")
        m.setattr(markdown, "as_shown", lambda text, check=None: text)
        folder, db = await index_one_file(tmp_path, "a.md", "Ada Osk sailed to [[Velo Harbour|Velo]].\n")
    await sync([folder], make_settings(), db, root=folder)   # the file unchanged on disk
    store = Store(db, readonly=True)
    assert [r["text"].strip() for r in store.query("SELECT text FROM chunks")] == ["Ada Osk sailed to Velo."]
    store.close()


async def test_embeddings_follow_what_is_live(corpus, tmp_path, simulator):
    settings = make_settings(simulator.base_url, llm={"embedding_model": "text-embedding-3-small"},
                             index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    await sync([corpus], settings, db, root=corpus)
    for name in ("festival.md", "guild.txt", "railway.txt"):
        (corpus / name).unlink()
    await sync([corpus], settings, db, root=corpus)
    store = Store(db, readonly=True)
    stale = store.scalar(
        "SELECT count(*) FROM embeddings WHERE (kind = 'entity' AND item_id NOT IN (SELECT id FROM entities)) "
        "OR (kind = 'chunk' AND item_id NOT IN (SELECT chunk_id FROM live_chunks)) "
        "OR (kind = 'report' AND item_id NOT IN (SELECT report_key FROM communities))")
    assert stale == 0
    assert store.scalar("SELECT count(*) FROM embeddings WHERE kind = 'entity'") == \
        store.scalar("SELECT count(*) FROM entities")
    store.close()


async def test_only_what_a_search_reads_is_embedded(corpus, tmp_path, simulator):
    # Reports were embedded too (a third of the embedding tokens of synth_small), and no search
    # read their vectors.
    settings = make_settings(simulator.base_url, llm={"embedding_model": "text-embedding-3-small"},
                             index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    await sync([corpus], settings, db, root=corpus)
    store = Store(db, readonly=True)
    try:
        kinds = dict(store.conn.execute("SELECT kind, count(*) FROM embeddings GROUP BY kind").fetchall())
        assert kinds == {"entity": store.scalar("SELECT count(*) FROM entities"),
                         "chunk": store.scalar("SELECT count(*) FROM chunks")}
        assert store.scalar("SELECT count(*) FROM communities") > 0
    finally:
        store.close()


async def test_an_edit_that_keeps_size_and_mtime_is_still_seen(corpus, tmp_path):
    import os

    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    await sync([corpus], settings, db, root=corpus)
    path = corpus / "guild.txt"
    st = path.stat()
    text = path.read_text()
    path.write_text(text.replace("Anton Heller", "Anton Hollar"))   # same length
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))             # like cp -p / rsync -t
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    result = await sync([corpus], settings, db, root=corpus)
    assert (result.documents_added, result.documents_edited, result.documents_removed) == (0, 1, 0)
    names = {r["name"] for r in Store(db, readonly=True).query("SELECT name FROM entities")}
    assert "Anton Hollar" in names


async def test_a_folder_with_nothing_to_index_says_why(tmp_path):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "scan.pdf").write_bytes(b"%PDF-1.4")
    result = await sync([folder], make_settings(), tmp_path / "i.db", root=folder)
    assert result.documents == 0
    assert [w for w in result.warnings if "matches index.include" in w and str(folder) in w]


async def test_a_version_published_by_another_indexer_meanwhile_is_not_overwritten(corpus, tmp_path, monkeypatch):
    """What changed is worked out against one version; if another indexer publishes before the
    graph is loaded, this run publishes nothing rather than mixing the two."""
    import sqlite3

    from streamrag.errors import StoreError
    from streamrag.graph_state import GraphState

    db = tmp_path / "v.db"
    await sync([corpus], make_settings(), db, root=corpus)
    before = snapshot(db)
    (corpus / "guild.txt").unlink()
    load = GraphState.load.__func__

    def load_after_another_publish(cls, store):
        other = sqlite3.connect(db)
        with other:
            other.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'version'")
        other.close()
        return load(cls, store)
    monkeypatch.setattr(GraphState, "load", classmethod(load_after_another_publish))
    with pytest.raises(StoreError, match="another indexer published version 2"):
        await sync([corpus], make_settings(), db, root=corpus)
    assert snapshot(db) == before


async def test_an_llm_extractor_without_an_endpoint_names_the_setting(corpus, tmp_path):
    from streamrag.errors import ConfigError

    settings = make_settings()   # (made in code: load_settings refuses it, test_cli_errors)
    settings.index.extractor = "llm"
    with pytest.raises(ConfigError, match=r'index\.extractor = "llm" needs an endpoint: set llm\.api_base'):
        await sync([corpus], settings, tmp_path / "x.db", root=corpus)


async def test_a_sync_that_changes_nothing_publishes_no_new_version(corpus, tmp_path):
    """A run over an unchanged folder (every `watch` retry, every second `index`) leaves the
    published version as it is; the next real change publishes the next version."""
    from streamrag.communities import settings_key as communities_key

    def published_at() -> str | None:
        store = Store(db, readonly=True)
        try:
            return store.get_meta("published_at")
        finally:
            store.close()

    settings = make_settings()
    db = tmp_path / "v.db"
    first = await sync([corpus], settings, db, root=corpus)
    stamp = published_at()
    again = await sync([corpus], settings, db, root=corpus)
    assert again.version == first.version == 1 and published_at() == stamp
    # Touched files (a new change stamp, the same text) are read again and change nothing.
    for path in corpus.glob("*.txt"):
        os.utime(path, (path.stat().st_atime + 10, path.stat().st_mtime + 10))
    touched = await sync([corpus], settings, db, root=corpus)
    assert touched.version == 1 and not touched.published and published_at() == stamp
    (corpus / "guild.txt").unlink()
    changed = await sync([corpus], settings, db, root=corpus)
    assert changed.version == 2 and changed.documents_removed == 1
    # A changed setting is a change where what it makes differs: another seed clustered afresh to
    # the same communities is none (its mark is written, for the next run), smaller ones are.
    built = snapshot(db)
    reseeded = await sync([corpus], make_settings(index={"leiden_seed": 7}), db, root=corpus)
    assert snapshot(db) == built and (reseeded.version, reseeded.published) == (2, False)
    assert reseeded.communities == changed.communities > 1
    store = Store(db, readonly=True)
    assert store.get_meta("leiden") == communities_key(10, 7, 1.0)
    store.close()
    split = await sync([corpus], make_settings(index={"leiden_seed": 7, "max_cluster_size": 2}), db, root=corpus)
    assert split.communities > changed.communities and (split.version, split.published) == (3, True)


async def test_a_folder_copied_with_its_index_publishes_no_new_version(corpus, tmp_path):
    # cp -r notes copy; streamrag index copy: every file read again for its new time, nothing of
    # the graph changed, and it said 'Indexed into ... (version 2 ...)', --json published true,
    # the version made of the new folder's name alone (meta root).
    def meta(db: Path) -> tuple[str | None, str | None]:
        store = Store(db, readonly=True)
        try:
            return store.get_meta("root"), store.get_meta("published_at")
        finally:
            store.close()

    first = await sync([corpus], make_settings(), corpus / ".streamrag" / "index.db", root=corpus)
    copy = tmp_path / "copy"
    shutil.copytree(corpus, copy)
    db = copy / ".streamrag" / "index.db"
    stamp = meta(db)[1]
    again = await sync([copy], make_settings(), db, root=copy)
    assert again.documents_new_times == first.documents and again.documents_unchanged == first.documents
    assert again.version == first.version and not again.published and meta(db) == (str(copy.resolve()), stamp)


def test_a_file_of_a_missing_folder_is_told_from_a_deleted_file(tmp_path):
    from streamrag.on_disk import still_there

    (tmp_path / "there#dir").mkdir()
    (tmp_path / "there#dir" / "a.txt").write_text("x")
    (tmp_path / "rows.csv").write_text("text\nx\n")
    assert still_there(str(tmp_path / "there#dir" / "a.txt"), None)
    assert not still_there(str(tmp_path / "there#dir" / "deleted.txt"), None)
    assert still_there(str(tmp_path / "gone#dir" / "a.txt"), None)       # its folder is missing
    assert still_there("rows.csv#1", tmp_path) and not still_there("gone.csv#1", tmp_path)
    (tmp_path / "a").write_text("x")                     # "a#b.txt" is a name, not a's row
    assert not still_there("a#b.txt", tmp_path)


async def test_a_file_whose_name_goes_on_with_a_hash_is_no_row_of_another(tmp_path, monkeypatch):
    # "a.md#2.md" was taken for a row of a.md when the run matched files to what it indexed, so
    # a.md was never unchanged: every run read it again (and a.md that could not be read kept
    # the other file's text).
    from streamrag import loader

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Alice Walker met Bob Stone in Millbrook.\n")
    (docs / "a.md#2.md").write_text("Carol King met David Moss in London.\n")
    (docs / "rows.csv").write_text("text\nEve Hart met Frank Lane in Paris.\n")
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    read, real = [], loader.read_documents
    monkeypatch.setattr(loader, "read_documents", lambda path, *a, **k: read.append(path.name) or real(path, *a, **k))
    await sync([docs], settings, tmp_path / "i.db", root=docs)
    assert sorted(read) == ["a.md", "a.md#2.md", "rows.csv"]
    read.clear()
    again = await sync([docs], settings, tmp_path / "i.db", root=docs)
    assert read == [] and again.documents_unchanged == 3
    # `index docs/a.md` updates a.md, and took a.md#2.md out of the index as if it were a row.
    (docs / "a.md").write_text("Alice Walker met Bob Stone in Oldbrook.\n")
    one = await sync([docs / "a.md"], settings, tmp_path / "i.db", root=docs)
    assert (one.documents_added, one.documents_edited, one.documents_removed) == (0, 1, 0)
    store = Store(tmp_path / "i.db", readonly=True)
    try:
        paths = sorted(r["path"] for r in store.query("SELECT path FROM documents"))
    finally:
        store.close()
    assert paths == ["a.md", "a.md#2.md", "rows.csv#1"]


async def test_a_binary_file_among_text_is_named_with_a_fix_that_keeps_the_text(corpus, tmp_path):
    # A binary blob.txt was "not indexed; move it out of the folder, or leave its kind of name
    # out of index.include": leaving "*.txt" out would drop every text file with it.
    (corpus / "blob.txt").write_bytes(bytes(range(256)) * 12)
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    first = await sync([corpus], settings, tmp_path / "b.db", root=corpus)
    assert first.documents == 4 and first.failures == 1
    [said] = [w for w in first.warnings if w.startswith("blob.txt: ")]
    assert said == "blob.txt: binary file, not indexed; move it out of the folder, or add it to index.exclude"
    # The fix it names: the file is left out, the text files stay, nothing fails.
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10, "exclude": ["blob.txt"]})
    fixed = await sync([corpus], settings, tmp_path / "b.db", root=corpus)
    assert fixed.documents == 4 and fixed.failures == 0 and fixed.documents_removed == 0
    assert not [w for w in fixed.warnings if "blob.txt" in w], fixed.warnings


async def test_an_index_kept_among_the_documents_is_not_one_of_them(corpus, tmp_path):
    # `--db notes/index.txt`: the database matched index.include, and every later run failed
    # on it ("binary file, not indexed; remove it"), advising to delete the index.
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = corpus / "index.txt"
    first = await sync([corpus], settings, db, root=corpus)
    again = await sync([corpus], settings, db, root=corpus)
    assert first.documents == again.documents == 4
    assert first.failures == again.failures == 0 and not again.warnings
    store = Store(db, readonly=True)
    try:
        assert store.scalar("SELECT count(*) FROM files WHERE path LIKE 'index.txt%'") == 0
    finally:
        store.close()


async def test_a_folder_that_cannot_be_listed_now_keeps_what_was_indexed_from_it(corpus, tmp_path, monkeypatch):
    """A subfolder whose permissions changed (chmod 000) cannot be listed: what was indexed from
    it stays, the folder is named once as a failure, and the rest of the folder is synced. Tests
    run as root, so chmod cannot show it: listing the folder fails in its place."""
    settings, db, before = await _indexed_with_a_subfolder(corpus, tmp_path)

    _unlistable(monkeypatch, corpus / "sub")
    result = await sync([corpus], settings, db, root=corpus)
    assert snapshot(db) == before
    assert result.documents == 4 and result.documents_removed == 0
    assert result.failures == 1 and result.failed_items == 0
    assert [w for w in result.warnings if "sub" in w] == [
        "sub: cannot list the folder (Permission denied); what was indexed from it stays; check its permissions"]
    # The rest of the folder is still synced meanwhile.
    (corpus / "new.txt").write_text("Mira Osk opened the Lantern Museum in Torford.")
    grown = await sync([corpus], settings, db, root=corpus)
    assert grown.documents == 5 and grown.documents_added == 1 and grown.documents_removed == 0
    # Named by each update, but the folder is as it was: one failure, not one per update.
    from streamrag.status import gather_status

    store = Store(db, readonly=True)
    try:
        info = gather_status(store)
        assert info["failures_last_run"] == info["failures_total"] == 1
    finally:
        store.close()

    monkeypatch.undo()   # (listed again)
    again = await sync([corpus], settings, db, root=corpus)
    assert again.failures == 0 and again.documents == 5
    assert again.documents_added == again.documents_removed == 0 and not again.published


async def test_a_new_folder_that_cannot_be_listed_is_said_to_hold_nothing_indexed(corpus, tmp_path, monkeypatch):
    # `mkdir new; chmod 000 new`: nothing was ever indexed from it, yet it was said to keep
    # "what was indexed from it".
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    await sync([corpus], settings, db, root=corpus)
    (corpus / "new").mkdir()
    (corpus / "new" / "a.txt").write_text("Mira Osk opened the Lantern Museum in Torford.")
    _unlistable(monkeypatch, corpus / "new")
    result = await sync([corpus], settings, db, root=corpus)
    assert result.warnings == ["new: cannot list the folder (Permission denied), so its files are not indexed; "
                               "check its permissions"]
    assert result.failures == 1 and result.documents == 4


async def test_a_folder_given_that_cannot_be_listed_is_said_once(corpus, tmp_path, monkeypatch):
    # It was also said to hold no file matching index.include, which contradicted the first line.
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    await sync([corpus], settings, db, root=corpus)
    _unlistable(monkeypatch, corpus)
    result = await sync([corpus], settings, db, root=corpus)
    assert result.warnings == [f"{corpus}: cannot list the folder (Permission denied); what was indexed "
                               "from it stays; check its permissions"]
    assert result.documents == 4 and result.documents_removed == 0


def _unlistable(monkeypatch, folder: Path) -> None:
    """Listing ``folder`` fails as a chmod 000 would (tests run as root, where chmod cannot)."""

    real_scandir = os.scandir

    def scandir(path="."):
        if Path(path) == folder:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)


async def _indexed_with_a_subfolder(corpus: Path, tmp_path: Path) -> tuple[Settings, Path, dict]:
    """``corpus`` indexed with guild.txt in a folder ``sub``: the settings, the index and what it
    held."""
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    (corpus / "sub").mkdir()
    (corpus / "guild.txt").rename(corpus / "sub" / "guild.txt")
    db = tmp_path / "x.db"
    await sync([corpus], settings, db, root=corpus)
    return settings, db, snapshot(db)


async def _indexed_then_unsearchable(corpus: Path, tmp_path: Path, monkeypatch) -> tuple[Settings, Path, dict]:
    """As ``_indexed_with_a_subfolder``, then ``sub`` may not be searched (`chmod a-x sub`)."""
    indexed = await _indexed_with_a_subfolder(corpus, tmp_path)
    unsearchable(monkeypatch, corpus / "sub")
    return indexed


async def test_a_folder_without_search_permission_keeps_what_was_indexed_from_it(corpus, tmp_path,
                                                                                monkeypatch):
    # `chmod a-x sub`: its files are listed but cannot be looked at; they were taken for deleted
    # and left the index without a word.
    settings, db, before = await _indexed_then_unsearchable(corpus, tmp_path, monkeypatch)
    result = await sync([corpus], settings, db, root=corpus)
    assert snapshot(db) == before
    assert result.documents == 4 and result.documents_removed == 0
    named = [w for w in result.warnings if "guild.txt" in w]
    assert len(named) == 1 and named[0].startswith("sub/guild.txt: cannot read (Permission denied)"), named


async def test_a_file_given_beside_a_folder_without_search_permission(corpus, tmp_path, monkeypatch):
    # `index notes/a.txt` looks whether the index's other files are still there: one in a folder
    # it may not search stopped the run with a PermissionError traceback.
    settings, db, before = await _indexed_then_unsearchable(corpus, tmp_path, monkeypatch)
    result = await sync([corpus / "council.txt"], settings, db, root=corpus)
    assert snapshot(db) == before
    assert result.documents == 4 and result.documents_removed == 0


@pytest.mark.parametrize("fails", ["stat", "read", "flaky read"])
async def test_an_indexed_file_that_cannot_be_read_now_keeps_what_was_indexed(corpus, tmp_path, monkeypatch,
                                                                               fails):
    # A file that cannot be read this time (its permissions changed, a network mount went stale)
    # is named once as unreadable, and what was indexed from it stays until it can be read again.
    # Tests run as root, so chmod cannot make it unreadable: its stat or read fails in its place.
    from streamrag import loader, on_disk

    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    await sync([corpus], settings, db, root=corpus)
    before = snapshot(db)
    victim = corpus / "guild.txt"
    if fails != "stat":   # edited: this run reads it (an unchanged file is not even opened)
        victim.write_text(victim.read_text().replace("Anton Heller", "Anton Hollar"))

    class Unstattable(type(victim)):   # scanned, then its stat fails (a flaky mount, a race)
        def stat(self, *args, **kwargs):
            raise OSError(errno.EIO, "Input/output error", str(self))

    def path_open(path, *args, **kwargs):
        if path == victim and fails == "flaky read":   # opened by one look, not by the next
            raise OSError(errno.EIO, "Input/output error", str(path))
        if path == victim:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    scan, readable, real_open = loader.scan, on_disk.readable, Path.open
    if fails == "stat":
        monkeypatch.setattr(loader, "scan", lambda *a, **k: [
            Unstattable(p) if p == victim else p for p in scan(*a, **k)])
    else:
        monkeypatch.setattr(Path, "open", path_open)
        if fails == "read":   # (a flaky mount's file reads at one look and not at the next)
            monkeypatch.setattr(on_disk, "readable", lambda p: p != victim and readable(p))
    result = await sync([corpus], settings, db, root=corpus)
    assert snapshot(db) == before        # its document, chunks, entities and their sources stay
    assert result.documents == 4 and result.documents_removed == 0
    assert result.failures == 1 and result.failed_items == 0
    why = "Permission denied" if fails == "read" else "Input/output error"
    named = [w for w in result.warnings if "guild.txt" in w]
    assert len(named) == 1 and named[0].startswith(f"guild.txt: cannot read ({why})"), result.warnings
    # The same advice, whichever failed (the stat's lacked "check that it exists and is readable").
    assert "; check that it exists and is readable" in named[0], named
    # ... and it says what is true: what was indexed from it stays (a failed read said nothing).
    assert f"cannot read ({why}); what was indexed from it stays; check" in named[0], named
    store = Store(db, readonly=True)
    try:
        assert store.query("SELECT stage, item FROM failures") == [{"stage": "load", "item": "guild.txt"}]
        assert store.scalar("SELECT count(*) FROM entities WHERE name = 'Anton Heller'") == 1
    finally:
        store.close()

    # Readable again: the next run takes what it holds now.
    monkeypatch.setattr(loader, "scan", scan)
    monkeypatch.setattr(Path, "open", real_open)
    monkeypatch.setattr(on_disk, "readable", readable)
    again = await sync([corpus], settings, db, root=corpus)
    assert again.failures == 0 and again.documents == 4
    if fails == "stat":
        assert snapshot(db) == before and again.documents_added == 0
    else:
        assert (again.documents_added, again.documents_edited, again.documents_removed) == (0, 1, 0)
        names = {r["name"] for r in Store(db, readonly=True).query("SELECT name FROM entities")}
        assert "Anton Hollar" in names and "Anton Heller" not in names


@pytest.mark.parametrize("fails", ["read", "stat", "folder"])
async def test_a_file_it_may_not_read_counts_once_until_it_changes_and_is_read_once_it_may(
        corpus, tmp_path, monkeypatch, files_read, fails):
    # `chmod 000 locked.md` (or a folder's `chmod a-x`): status said "(3 recorded over all runs)",
    # then 4, and 8 after a watch with 3 edits, the file never changed: its failure was
    # recorded without the file's stamp, so each update counted it anew. Tests run as root, so
    # chmod cannot refuse a read: the open (or the stat) of the file fails in its place.

    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    db = tmp_path / "x.db"
    locked = corpus / ("sub/locked.md" if fails == "folder" else "locked.md")
    locked.parent.mkdir(exist_ok=True)
    locked.write_text("Mira Osk chaired the Harbor Council in Torford.\n")
    real_open, real_stat = Path.open, Path.stat
    name = locked.relative_to(corpus).as_posix()

    def path_open(path, *args, **kwargs):
        if path == locked:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    def path_stat(path, *args, **kwargs):
        if path == locked:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    if fails == "folder":   # `chmod a-x sub`: its names are listed, nothing in it looked at
        unsearchable(monkeypatch, locked.parent)
    else:
        monkeypatch.setattr(Path, *(("open", path_open) if fails == "read" else ("stat", path_stat)))

    def counted() -> tuple[int, int]:
        info = status_info(db)
        return info["failures_last_run"], info["failures_total"]

    for _ in range(3):
        result = await sync([corpus], settings, db, root=corpus)
        assert result.failures == 1 and any(w.startswith(f"{name}: cannot read (Permission denied)")
                                            for w in result.warnings), result.warnings
        # Nothing was ever indexed from it: it was said to keep "what was indexed from it".
        named = [w for w in result.warnings if w.startswith(name)]
        assert len(named) == 1 and named[0].startswith(
            f"{name}: cannot read (Permission denied), so it is not indexed; check that it exists"), named
        assert counted() == (1, 1)
    # The system may give it on a later update though the file is as it was (a group granted,
    # a mount back): it is tried on every update, and once it can be read, it is indexed.
    assert files_read.count("locked.md") == (3 if fails == "read" else 0)
    monkeypatch.undo()
    again = await sync([corpus], settings, db, root=corpus)
    assert again.failures == 0 and again.documents_added == 1 and counted() == (0, 1)


async def test_a_stop_landing_as_the_run_row_is_written_still_closes_it(corpus, tmp_path, monkeypatch):
    # A stop (Ctrl-C, SIGTERM) that lands while the run's row is being written: the write
    # commits, the caller is cancelled right after it, and the row stayed "running" for good.
    settings = make_settings()
    db = tmp_path / "stop.db"
    real = Store.start_run
    with anyio.CancelScope() as scope:
        def start_run(store, *args):
            real(store, *args)
            scope.cancel()       # the stop arrives as the row commits
        monkeypatch.setattr(Store, "start_run", start_run)
        await sync([corpus], settings, db, root=corpus)
    assert scope.cancelled_caught
    store = Store(db, readonly=True)
    runs = store.query("SELECT status, finished_at FROM runs")
    store.close()
    assert len(runs) == 1 and runs[0]["status"] == "interrupted" and runs[0]["finished_at"], runs


async def test_a_file_deleted_between_the_scan_and_its_reading_leaves_without_a_failure(
        corpus, tmp_path, monkeypatch):
    # A file deleted while a sync ran (40 of them, in a watch tester's run) was recorded as a
    # failure, "cannot read (No such file or directory)", and made the daemon's health say so.
    from streamrag import loader

    db = tmp_path / "i.db"
    doomed = corpus / "doomed.txt"
    doomed.write_text("Henrik Salo built the Kessel Bridge at Port Vell.\n")
    await sync([corpus], make_settings(), db, root=corpus)
    scan = loader.scan

    def scanned_before_the_deletion(*args, **kwargs):
        found = scan(*args, **kwargs)
        doomed.unlink(missing_ok=True)
        return [*found, corpus / "never-there.txt"]

    monkeypatch.setattr(loader, "scan", scanned_before_the_deletion)
    result = await sync([corpus], make_settings(), db, root=corpus)
    assert result.failures == 0 and not result.warnings, result.warnings
    assert result.documents_removed == 1


async def test_a_folder_gone_while_its_files_are_read_keeps_them_indexed(corpus, tmp_path, monkeypatch):
    # Its files were taken for deleted ones, and an empty index was published.
    from streamrag import loader

    db = tmp_path / "i.db"
    first = await sync([corpus], make_settings(), db, root=corpus)
    scan = loader.scan

    def scanned_before_the_folder_went(*args, **kwargs):
        found = scan(*args, **kwargs)
        corpus.rename(tmp_path / "away")
        return found

    monkeypatch.setattr(loader, "scan", scanned_before_the_folder_went)
    result = await sync([corpus], make_settings(), db, root=corpus)
    assert result.documents_removed == 0 and result.failures == first.documents
    assert result.version == first.version



async def test_a_subfolder_deleted_while_its_files_are_read_leaves_without_failures(corpus, tmp_path, monkeypatch):
    from streamrag import loader

    sub = corpus / "sub"
    sub.mkdir()
    for i in range(3):
        (sub / f"s{i}.txt").write_text(f"Henrik Salo built bridge number {i} at Port Vell.\n")
    scan = loader.scan

    def scanned_before_the_subfolder_went(*args, **kwargs):
        found = scan(*args, **kwargs)
        shutil.rmtree(sub)
        return found

    monkeypatch.setattr(loader, "scan", scanned_before_the_subfolder_went)
    result = await sync([corpus], make_settings(), tmp_path / "i.db", root=corpus)
    assert result.failures == 0 and not result.warnings, result.warnings


async def test_what_the_index_no_longer_uses_is_deleted_once_unused_for_keep_unused_days(
        corpus, tmp_path, sim_settings):
    # A daemon's database grew with every change for good: the extractions of chunks no
    # document held and every cached answer stayed (3.7 times a fresh index after 890 changes).
    import sqlite3
    import time

    db = tmp_path / "index.db"
    with anyio.fail_after(120):
        await sync([corpus], sim_settings, db, root=corpus)

    def rows(sql: str, *args) -> list:
        with sqlite3.connect(db) as conn:
            out = conn.execute(sql, args).fetchall()
        conn.close()
        return out

    def change(sql: str, *args) -> None:
        conn = sqlite3.connect(db)
        with conn:
            conn.execute(sql, args)
        conn.close()

    live = {c for (c,) in rows("SELECT chunk_id FROM live_chunks")}
    guild = corpus / "guild.txt"
    guild.write_text(guild.read_text() + "\nQuorra Vell opened a ferry office.\n")
    with anyio.fail_after(120):
        await sync([corpus], sim_settings, db, root=corpus)
    left = live - {c for (c,) in rows("SELECT chunk_id FROM live_chunks")}
    assert left
    # As if all this were 40 days old, one cached answer asked for again since, and no prune yet.
    long_ago = time.time() - 40 * 86400
    change("UPDATE extractions SET created_at = ?", long_ago)
    change("UPDATE extractions_left SET left_at = ?", long_ago)
    change("UPDATE llm_cache SET created_at = ?", long_ago)
    change("DELETE FROM meta WHERE key = 'pruned_at'")
    # and an old question and an old failure, which status counts too.
    change("INSERT INTO runs(id, command, started_at, finished_at, status) VALUES "
           "('old-ask', 'ask', ?, ?, 'ok')", long_ago, long_ago)
    change("INSERT INTO failures(run_id, stage, item, message, created_at) VALUES "
           "('old-ask', 'answer', 'q', 'x', ?)", long_ago)
    # and a call that old question's run cancelled: counted apart from the failed ones, folded too.
    change("INSERT INTO llm_calls(run_id, stage, model, prompt, prompt_version, cache_key, prompt_tokens, "
           "completion_tokens, latency_ms, cached, error, cancelled, created_at) VALUES ('old-ask', "
           "'answer', 'm1', '', '', 'k', 0, 0, 1.0, 0, 'cancelled after 1 request', 1, ?)", long_ago)
    (hit,) = rows("SELECT key FROM llm_cache LIMIT 1")[0]
    change("UPDATE llm_calls SET created_at = ? WHERE cache_key != ?", long_ago, hit)
    cached = rows("SELECT count(*) FROM llm_cache")[0][0]
    from streamrag.status import gather_status

    def usage() -> dict:
        store = Store(db, readonly=True)
        try:
            return gather_status(store)["llm"]
        finally:
            store.close()

    def counted() -> tuple:
        store = Store(db, readonly=True)
        try:
            info = gather_status(store)
            return info["queries"], info["failures_total"]
        finally:
            store.close()

    before, started, counts = usage(), time.time(), counted()
    railway = corpus / "railway.txt"
    railway.write_text(railway.read_text() + "\nBo Lund sold the rope works.\n")
    with anyio.fail_after(120):
        await sync([corpus], sim_settings, db, root=corpus)
    # Old calls are folded into the archive: what status counts is the same, plus this run's.
    assert rows("SELECT count(*) FROM llm_calls WHERE created_at < ?", started - 3600)[0][0] == 0
    now = rows("SELECT count(*), sum(cached), sum(CASE WHEN cached = 0 THEN prompt_tokens END) "
               "FROM llm_calls WHERE created_at >= ?", started)[0]
    after = usage()
    assert (after["calls"], after["cached"], after["prompt_tokens"]) == (
        before["calls"] + now[0], before["cached"] + now[1], before["prompt_tokens"] + (now[2] or 0))
    assert after["by_stage"].keys() == before["by_stage"].keys()
    assert (after["cancelled"], after["errors"]) == (before["cancelled"], before["errors"]) == (1, 0), after
    assert counted() == counts == (1, 1)   # the old run and failure are gone, still counted
    assert rows("SELECT count(*) FROM runs WHERE id = 'old-ask'")[0][0] == 0
    assert rows("SELECT count(*) FROM failures WHERE run_id = 'old-ask'")[0][0] == 0
    extracted = {c for (c,) in rows("SELECT chunk_id FROM extractions")}
    now_live = {c for (c,) in rows("SELECT chunk_id FROM live_chunks")}
    assert now_live <= extracted and not (left & extracted)   # live ones kept, old dead ones gone
    new = rows("SELECT count(*) FROM llm_cache WHERE created_at > ?", long_ago + 1)[0][0]
    # Kept however old: the answer asked for again, and those the published summaries are.
    old = {k for (k,) in rows("SELECT key FROM llm_cache WHERE created_at = ?", long_ago)}
    assert hit in old and old - {hit} <= {k for (k,) in rows("SELECT key FROM answers")}
    assert new > 0 and rows("SELECT count(*) FROM llm_cache")[0][0] == new + len(old) < cached
    # Within the day, no second look: what this run left is kept until then.
    assert float(rows("SELECT value FROM meta WHERE key = 'pruned_at'")[0][0]) > long_ago


def test_cached_embeddings_outlive_the_calls_that_made_them(tmp_path):
    # Embeddings were kept while an embedding call was recorded; the same prune folds old calls
    # into sums, so the next day's prune deleted every cached embedding, paid for again.
    import time

    from streamrag import index_rows
    from streamrag.cache import embedding_key

    store = Store(tmp_path / "index.db")
    day, now = 86400.0, time.time()
    vector, answer = embedding_key("e1", "Ada"), "chat-answer-key"
    with store.transaction():
        store.conn.execute("INSERT INTO llm_cache VALUES (?, 'e1', '[0.5, 0.25]', ?)", (vector, now - 40 * day))
        store.conn.execute("INSERT INTO llm_cache VALUES (?, 'm1', '{\"text\": \"x\"}', ?)",
                           (answer, now - 40 * day))
        store.record_call({"run_id": "r", "stage": "embed", "model": "e1", "prompt": "", "prompt_version": "",
                           "cache_key": "batch",
                           "prompt_tokens": 5, "completion_tokens": 0, "latency_ms": 1, "cached": 0})
        store.conn.execute("UPDATE llm_calls SET created_at = ?", (now - 35 * day,))
    try:
        for when in (now, now + 1.1 * day, now + 2.2 * day):
            with store.transaction():
                index_rows.prune(store, 30, when)
        left = {k for (k,) in store.conn.execute("SELECT key FROM llm_cache")}
    finally:
        store.close()
    assert left == {vector}   # (the old chat answer, unused, went the first day)


async def test_an_edit_undone_costs_nothing_however_old_the_answers_it_undoes(corpus, tmp_path, simulator):
    # The answers the published summaries and reports are never asked for again, so the daily
    # prune took them keep_unused_days after they were made, while in use: undoing an edit of
    # an index that old paid for those summaries and reports again (27 calls against 8).
    import sqlite3
    import time

    settings = make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10,
                                                        "summary_join_tokens": 0})
    guild = corpus / "guild.txt"
    original = guild.read_text()

    async def undo_paid(db: Path, aged: bool) -> dict[str, int]:
        guild.write_text(original)
        await sync([corpus], settings, db, root=corpus)
        if aged:   # as if all this were 40 days old, and the daily prune due
            conn = sqlite3.connect(db)
            with conn:
                for table in ("llm_cache", "llm_calls", "extractions"):
                    conn.execute(f"UPDATE {table} SET created_at = ?", (time.time() - 40 * 86400,))
                conn.execute("DELETE FROM meta WHERE key = 'pruned_at'")
            conn.close()
        guild.write_text(original.replace("Harbor", "Harbour") + "\nQuorra Vell joined the guild.\n")
        await sync([corpus], settings, db, root=corpus)   # (the prune runs after it publishes)
        guild.write_text(original)
        undone = await sync([corpus], settings, db, root=corpus)
        return {stage: u["calls"] - u["cached"] for stage, u in undone.llm.items()}

    with anyio.fail_after(120):
        fresh = await undo_paid(tmp_path / "fresh.db", aged=False)
        aged = await undo_paid(tmp_path / "aged.db", aged=True)
    assert fresh.get("summarize", 0) == 0 and aged == fresh, (aged, fresh)
    conn = sqlite3.connect(tmp_path / "aged.db")
    assert conn.execute("SELECT value FROM meta WHERE key = 'pruned_at'").fetchone()   # it did run
    conn.close()


async def test_a_community_whose_context_holds_nothing_gets_no_paid_report(corpus, tmp_path, simulator):
    # A report_max_input_tokens too small for one line: the model was paid for reports of an
    # empty context. Such a community gets the extractive report, for free.
    settings = make_settings(simulator.base_url, index={"report_max_input_tokens": 5})
    result = await sync([corpus], settings, tmp_path / "i.db", root=corpus)
    assert result.reports > 0 and "report" not in result.llm


async def test_a_run_holds_no_document_text_until_it_publishes(corpus, tmp_path, monkeypatch):
    # Every new document's text and every chunk's stayed in memory through summaries,
    # clustering and reports: a first index held the corpus twice until it published.
    import streamrag.pipeline as pipeline

    real = pipeline.index_rows.publish
    held: list[int] = []

    def publish(store, scan, *args):
        held.append(sum(len(d.text) for d in scan.documents.values())
                    + sum(len(c.text) for cs in scan.doc_chunks.values() for c in cs))
        return real(store, scan, *args)

    monkeypatch.setattr(pipeline.index_rows, "publish", publish)
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(index={"chunk_size": 80, "chunk_overlap": 10}), db, root=corpus)
    assert held == [0]
    store = Store(db, readonly=True)
    try:
        chars = {r["path"]: r["chars"] for r in store.query("SELECT path, chars FROM documents")}
        assert chars and store.scalar("SELECT count(*) FROM chunks WHERE text = ''") == 0
    finally:
        store.close()
    assert chars == {p.name: len(p.read_text()) for p in corpus.iterdir() if p.suffix in (".txt", ".md")}


async def test_the_answers_kept_are_those_the_published_summaries_are(corpus, tmp_path, simulator):
    # An element left with one description is described without a model: the row naming its
    # old summary's answer stayed, and kept that answer from the prune for as long as it lived.
    import sqlite3

    from streamrag.answer_cache import unpack

    settings = make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10,
                                                        "summary_join_tokens": 0})
    db = tmp_path / "i.db"

    def kept() -> dict[str, tuple[str, str]]:
        conn = sqlite3.connect(db)
        try:
            out = {}
            for owner, key in conn.execute("SELECT owner, key FROM answers WHERE owner LIKE 'ent-%' "
                                           "OR owner LIKE 'rel-%'"):
                table = "entities" if owner.startswith("ent-") else "relationships"
                (description,) = conn.execute(f"SELECT description FROM {table} WHERE id = ?", (owner,)).fetchone()
                (response,) = conn.execute("SELECT response FROM llm_cache WHERE key = ?", (key,)).fetchone()
                body = unpack(response)   # (a compressed row's JSON is bytes)
                out[owner] = (description, body if isinstance(body, str) else body.decode())
            return out
        finally:
            conn.close()

    with anyio.fail_after(120):
        await sync([corpus], settings, db, root=corpus)
        before = kept()
        assert before
        for name in ("festival.md", "railway.txt", "council.txt"):
            (corpus / name).unlink()
        await sync([corpus], settings, db, root=corpus)
    after = kept()
    for owner, (description, response) in after.items():
        assert description[:40] in response, owner   # each row is the answer its summary is
        if owner in before and before[owner][1] == response:   # the same answer, the same summary
            assert before[owner][0] == description, owner
    assert len(after) < len(before)


def test_a_change_of_the_reading_and_chunking_settings_is_named():
    # index.text_field alone changed was said as "the chunking settings changed".
    from streamrag.chunking_marks import chunking_change, chunking_settings

    built = chunking_settings(make_settings())
    now = chunking_settings(make_settings(index={"text_field": "body", "chunk_size": 300}))
    assert chunking_change(json.dumps(built), now) == ('index.chunk_size is now 300 (was 1200), '
                                                       'index.text_field is now "body" (was "text")', True)
    newer = dict(built, loader="0")
    assert chunking_change(json.dumps(newer), built) == (
        "streamrag was upgraded since this index was built and reads documents differently", False)
    assert chunking_change(json.dumps(dict(newer, chunker="0")), built)[0].endswith(
        "and reads and chunks documents differently")
    for unknown in (None, "", "not json", "[1]"):   # an index from before they were published
        words, of_settings = chunking_change(unknown, now)
        assert of_settings and words.startswith("one of index.chunk_size, chunk_overlap, encoding "
                                                "and text_field, or how this streamrag reads documents")


def test_an_index_from_before_the_chunking_settings_were_published_is_said_upgraded_when_its_key_says_so(
        tmp_path, caplog):
    # An index built before chunker_settings were published (10c20e2, the day before) was told
    # "the reading and chunking settings changed since this index was built: one of
    # index.chunk_size, ... or how this streamrag reads documents, differs" on upgrading, though
    # no setting had: its chunker key is that of the same settings with an earlier loader.
    import logging

    from streamrag import chunker, ids, loader
    from streamrag.chunking_marks import chunking_change, chunking_settings
    from streamrag.pipeline import Indexer

    settings = make_settings("http://127.0.0.1:9/v1")
    indexer = Indexer(settings, tmp_path / "index.db", root=tmp_path)
    ix = settings.index

    def key(chunker_version, loader_version, chunk_size=ix.chunk_size):
        return ids.digest(chunker_version, chunk_size, ix.chunk_overlap, ix.encoding, loader_version,
                          ix.text_field, length=12)

    earlier = str(int(loader.VERSION) - 1)
    assert key(chunker.VERSION, loader.VERSION) == indexer.chunker_key

    class Published:   # the meta of an index whose chunker key alone was published
        version = 3
        meta = {"chunker": key(chunker.VERSION, earlier), "extractor": indexer.key,
                "summarizer": indexer.summarizer_key, "report_settings": indexer.report_key(),
                "leiden": indexer.leiden_key}

        def get_meta(self, key):
            return self.meta.get(key)

    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"):
        assert indexer._say_what_settings_redo(Published()) is True
    assert [r.getMessage() for r in caplog.records] == [
        "streamrag was upgraded since this index was built and reads documents differently: its "
        "files are read and chunked again as they are indexed (chunks with new text are extracted)"]
    assert indexer.settings_changed == ["chunking"]
    now = chunking_settings(settings)
    assert chunking_change(None, now, key("1", earlier))[0].endswith("reads and chunks documents differently")
    for other in (key(chunker.VERSION, earlier, chunk_size=ix.chunk_size + 1), "mixed", None):
        words, of_settings = chunking_change(None, now, other)   # a setting changed, or unknowable
        assert of_settings and words.startswith("one of index.chunk_size"), other


@pytest.mark.anyio
async def test_the_work_of_an_index_built_offline_is_told_apart_by_its_kind_not_its_words(corpus, tmp_path,
                                                                                        monkeypatch):
    # ``_say_what_settings_redo`` took the extraction, summary and report lines of an index built
    # offline out of the "settings changed" line by their words: any other line in the same words
    # went with them. Now by their kind: the clustering setting changed is said, whatever the
    # extraction's line says.
    from streamrag import pipeline

    db = tmp_path / "index.db"
    await sync([corpus], make_settings(), db, root=corpus)
    settings = make_settings("http://127.0.0.1:9/v1", index={"leiden_resolution": 2.0})
    clustered = "it is clustered afresh"
    monkeypatch.setattr(pipeline, "extracted_again", lambda *args, **kwargs: clustered)
    said: list[str] = []
    indexer = pipeline.Indexer(settings, db, root=corpus, say=said.append)
    store = Store(db, readonly=True)
    try:
        indexer._say_what_settings_redo(store)
    finally:
        store.close()
    assert len(said) == 1 and said[0].startswith(f"this index was built offline: {clustered}; "), said
    assert said[0].endswith(f"; and the clustering settings changed since this index was built: {clustered}"), said
    assert indexer.settings_changed == ["extraction", "summary", "report", "clustering"]


@pytest.mark.anyio
async def test_an_offline_run_fills_in_what_its_joins_read_in_one_step(corpus, tmp_path, monkeypatch):
    # ``Indexer._sync`` held the offline bookkeeping of the joins (the titles read, the documents
    # opening with code, those retitled) inline; it is one step now, taken by offline runs alone
    # (the documents opening with code are marked just before it, by every run, a model's too:
    # test_joins' test_a_log_left_as_indexed_after_a_model_run_keeps_its_code_mark).
    from streamrag import index_rows
    from streamrag.pipeline import Indexer

    filled = []
    real = Indexer._join_bookkeeping

    def spy(self, store, scan, change, found):
        real(self, store, scan, change, found)
        filled.append(change)
    monkeypatch.setattr(Indexer, "_join_bookkeeping", spy)
    db = tmp_path / "offline.db"
    await sync([corpus], make_settings(), db, root=corpus)
    store = Store(db, readonly=True)
    try:
        documents = index_rows.document_ids(store)
    finally:
        store.close()
    assert len(filled) == 1 and filled[0].code_headings.keys() == documents and filled[0].titles
    await sync([corpus], make_settings("http://llm.test/v1"), tmp_path / "model.db", root=corpus,
               transport=simulated_transport())
    assert len(filled) == 1


def test_a_new_loader_alone_is_said_as_an_upgrade_not_a_settings_change(tmp_path, caplog):
    # loader.VERSION bumped, no setting changed: it said "the reading and chunking settings
    # changed since this index was built", which no user had done.
    import logging

    from streamrag import chunker, ids, loader
    from streamrag.chunking_marks import chunking_settings
    from streamrag.pipeline import Indexer

    settings = make_settings("http://127.0.0.1:9/v1")
    indexer = Indexer(settings, tmp_path / "index.db", root=tmp_path)
    ix = settings.index
    old_key = ids.digest(chunker.VERSION, ix.chunk_size, ix.chunk_overlap, ix.encoding, "0", ix.text_field,
                         length=12)
    assert loader.VERSION != "0" and old_key != indexer.chunker_key

    class Published:   # the meta of an index built by a streamrag whose loader was older
        version = 3
        meta = {"chunker": old_key, "chunker_settings": json.dumps(dict(chunking_settings(settings), loader="0")),
                "extractor": indexer.key, "summarizer": indexer.summarizer_key,
                "report_settings": indexer.report_key(), "leiden": indexer.leiden_key}

        def get_meta(self, key):
            return self.meta.get(key)

    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"):
        assert indexer._say_what_settings_redo(Published()) is True
    said = [r.getMessage() for r in caplog.records]
    assert said == ["streamrag was upgraded since this index was built and reads documents differently: its "
                    "files are read and chunked again as they are indexed (chunks with new text are extracted)"]
    assert indexer.settings_changed == ["chunking"]


async def test_an_upgrade_reading_every_file_to_the_same_text_publishes_no_new_version(
        corpus, tmp_path, sim_settings, simulator, monkeypatch):
    # A new loader VERSION reads every file again; read to the same text, the run had nothing to
    # redo, but the new reading mark alone published version 2 of an unchanged folder. The mark
    # is still written, so the run after does not read every file again.
    from streamrag import loader
    from streamrag.chunking_marks import chunker_key, recuts_all

    db = tmp_path / "index.db"
    upgraded = loader.VERSION
    monkeypatch.setattr(loader, "VERSION", str(int(upgraded) - 1))   # the streamrag that built it
    with anyio.fail_after(120):
        await sync([corpus], sim_settings, db, root=corpus)
    built = snapshot(db)
    monkeypatch.setattr(loader, "VERSION", upgraded)
    store = Store(db, readonly=True)
    assert recuts_all(store, chunker_key(sim_settings))   # (the upgrade reads every file again)
    store.close()
    with anyio.fail_after(60):
        before = simulator.requests
        result = await sync([corpus], sim_settings, db, root=corpus)
    assert simulator.requests == before
    assert (result.version, result.published, result.documents_unchanged) == (1, False, 4)
    assert status_info(db)["version"] == 1
    assert snapshot(db) == built
    store = Store(db, readonly=True)
    assert not recuts_all(store, chunker_key(sim_settings))
    assert json.loads(store.get_meta("chunker_settings"))["loader"] == upgraded
    store.close()


def _claims_settings(simulator, **index):
    return make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10,
                                                    "extract_claims": True, **index})


async def _changed_and_back(corpus, db, simulator, changes: list[dict], check) -> None:
    """Indexes ``corpus`` into ``db`` with claims on, then runs once with each of ``changes``
    (index settings; ``{}``: back to the first): each run leaves the tables as the first did and
    publishes no new version, ``check(result, settings, first)`` asserts what else it must, and
    a run after it with the same settings asks the model nothing and redoes nothing."""
    with anyio.fail_after(180):
        first = await sync([corpus], _claims_settings(simulator), db, root=corpus)
        built = snapshot(db)
        assert built["claims"] and first.version == 1
        for changed in changes:
            settings = _claims_settings(simulator, **changed)
            result = await sync([corpus], settings, db, root=corpus)
            assert snapshot(db) == built
            assert (result.version, result.published) == (1, False), changed
            check(result, settings, first)
            before = simulator.requests
            again = await sync([corpus], settings, db, root=corpus)
            assert (again.settings_changed, again.published, simulator.requests) == ([], False, before)


async def test_settings_changed_and_back_to_the_same_tables_publish_no_new_version(corpus, tmp_path, simulator):
    # index.summary_max_tokens 150 -> 100 -> 150: each run summarized every element again (the
    # second from the cache) to the descriptions published, and still published versions 2 and
    # 3, told apart by their settings marks and which cached answer each summary is alone. So
    # did index.report_max_input_tokens 6000 -> 5000 -> 6000, every context kept. The marks are
    # still written: the run after redoes nothing. (The simulator's summaries fit in 100 tokens.)
    from streamrag.pipeline import Indexer

    db = tmp_path / "index.db"

    def marks() -> tuple:
        store = Store(db, readonly=True)
        try:
            return tuple(store.get_meta(k) for k in ("summarizer", "report_settings", "extractive_settings"))
        finally:
            store.close()

    def check(result, settings, first):
        assert result.settings_changed   # (each run redid the summaries or the contexts)
        assert status_info(db)["version"] == 1
        indexer = Indexer(settings, db, root=corpus)
        assert marks() == (indexer.summarizer_key, indexer.report_key(), indexer.extractive_key())

    await _changed_and_back(corpus, db, simulator, [{"summary_max_tokens": 100}, {"report_max_input_tokens": 5000},
                                                    {}], check)


async def test_chunks_extracted_anew_to_the_same_records_publish_no_new_version(corpus, tmp_path, simulator):
    # index.max_gleanings 1 -> 2 -> 1: every chunk was extracted again (from the cache) to the
    # records it was published with, and merged again (its provenance and claims deleted and
    # written back as they were), and versions 2 and 3 differed from version 1 in which stored
    # extraction each chunk is live with alone. The run's key is still recorded, and the
    # extraction left is dated for the prune: the run after redoes nothing. (The simulator's
    # gleanings find nothing more.)
    from streamrag.extractor import extractor_key

    db = tmp_path / "index.db"

    def live_with() -> tuple[set[str], str | None, int]:
        store = Store(db, readonly=True)
        try:
            left = store.scalar("SELECT count(*) FROM extractions_left")
            return ({k for (k,) in store.conn.execute("SELECT extractor FROM live_chunks")},
                    store.get_meta("extractor"), left)
        finally:
            store.close()

    def check(result, settings, first):
        assert result.settings_changed == ["extraction"]
        key = extractor_key(settings)
        assert live_with() == ({key}, key, first.chunks)   # (the other key's extractions left)

    await _changed_and_back(corpus, db, simulator, [{"max_gleanings": 2}, {}], check)


async def test_an_index_a_newer_streamrag_read_is_refused_not_read_again_the_older_way(tmp_path):
    # A c2e4c2b index run on one a newer loader had read said "streamrag was upgraded since this
    # index was built", read every file again its older way and published (124 of 153 notes of a
    # vault), and the newer one read them all again after it: the schema had not changed, so
    # nothing refused it.
    import sqlite3

    from streamrag import loader
    from streamrag.errors import StoreError
    from streamrag.estimate import estimate

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Mira Osk\n\nMira Osk met Anton Heller in Port Vell.\n")
    settings = make_settings()
    db = tmp_path / "index.db"
    first = await sync([folder], settings, db, root=folder)
    conn = sqlite3.connect(db)
    built = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'chunker_settings'").fetchone()[0])
    assert built["loader"] == loader.VERSION
    newer = json.dumps(dict(built, loader=str(int(loader.VERSION) + 1)), sort_keys=True)
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'chunker_settings'", (newer,))
        conn.execute("UPDATE meta SET value = 'newerloader0' WHERE key = 'chunker'")
    conn.close()
    said = f"written by a newer streamrag, which reads documents differently \\(loader {int(loader.VERSION) + 1}, " \
           f"this one {loader.VERSION}\\); upgrade streamrag"
    with pytest.raises(StoreError, match=said):
        await sync([folder], settings, db, root=folder)
    with pytest.raises(StoreError, match=said):
        estimate([folder], settings, db, root=folder)
    store = Store(db, readonly=True)
    assert store.version == first.version and store.get_meta("chunker_settings") == newer
    # The refused run leaves no run row: the newer streamrag's last update is not "failed".
    assert [r["status"] for r in store.query("SELECT status FROM runs")] == ["ok"]
    store.close()
    built["loader"] = "not a number"   # what this one cannot compare is no newer
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'chunker_settings'", (json.dumps(built),))
    conn.close()
    again = await sync([folder], settings, db, root=folder)   # (read again, to the same text: no version)
    assert (again.version, again.documents_unchanged) == (first.version, 1)
    store = Store(db, readonly=True)
    assert json.loads(store.get_meta("chunker_settings"))["loader"] == loader.VERSION
    store.close()


async def test_rows_kept_as_read_with_the_old_text_field_keep_the_index_marked_for_another_reading(tmp_path):
    # index.text_field renamed to a field one untouched .jsonl lacks: its documents stay as read
    # with the old field, so the index is not marked as read with the new one (the next run reads
    # that file again, and says so), though every other file was.
    import json

    from streamrag.chunking_marks import chunker_key

    folder = tmp_path / "rows"
    folder.mkdir()
    (folder / "old.jsonl").write_text(json.dumps({"body": "Mara Lind runs the Harbor Council."}) + "\n")
    (folder / "both.jsonl").write_text(json.dumps({"body": "Ada Osk runs the Quay.",
                                                   "text": "Bob Lin sails to Harlow."}) + "\n")
    db = tmp_path / "index.db"
    await sync([folder], make_settings(index={"extractor": "nlp", "text_field": "body"}), db, root=folder)
    settings = make_settings(index={"extractor": "nlp", "text_field": "text"})
    done = await sync([folder], settings, db, root=folder)
    assert done.documents == 2
    store = Store(db, readonly=True)
    try:
        assert store.get_meta("chunker") != chunker_key(settings)
    finally:
        store.close()


async def test_a_report_is_held_only_until_its_parents_context_is_built(tmp_path, monkeypatch):
    """The report stage holds a report written this run for its parent's context alone: let go
    once that is built, and a top-level one not held at all (every report was held to the
    stage's end, most of its memory on a large index)."""
    from streamrag import report_stage

    corpus = tmp_path / "corpus"
    shutil.copytree(Path(__file__).parent.parent / "tests" / "data" / "harbor", corpus)
    for n in range(12):   # (enough entities for levels of communities)
        (corpus / f"more{n}.txt").write_text(
            f"Captain Ilsa Varn{n} of the Harbor Guild met Mira Osk at Port Vell. Varn{n} sold rope "
            f"to the Velmouth Traders and to Anton Heller. The Quay Board of Port Vell fined Varn{n}.\n")
    held, levels = [], []
    real = report_stage.ReportStage.report_level

    async def report_level(self, level):
        await real(self, level)
        levels.append({c.id for c in level})
        held.append({cid: self.reports[cid].key for cid in self.reports})

    monkeypatch.setattr(report_stage.ReportStage, "report_level", report_level)
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10, "max_cluster_size": 3})
    db = tmp_path / "offline.db"
    await sync([corpus], settings, db, root=corpus)
    assert len(levels) >= 2 and any(held)
    for done, kept in zip(levels, held, strict=True):
        assert set(kept) <= done   # (the level below's let go as this one's contexts were built)
    assert held[-1] == {}


def test_the_folders_an_include_name_may_mean_are_looked_for_in_a_bounded_walk(tmp_path, monkeypatch):
    # include = ["docs"] finding no file walked the whole tree for advice: a home folder's
    # node_modules may hold 100,000 folders. Level by level, the shallow ones are found first.
    from streamrag import pipeline

    for i in range(60):
        (tmp_path / "node_modules" / f"p{i:02d}" / "lib" / "docs").mkdir(parents=True)
    (tmp_path / "notes" / "docs").mkdir(parents=True)
    (tmp_path / ".cache" / "docs").mkdir(parents=True)      # hidden: not named
    looked, scandir = [], os.scandir
    monkeypatch.setattr(os, "scandir", lambda path=".": looked.append(path) or scandir(path))
    monkeypatch.setattr(pipeline, "FOLDERS_LOOKED_INTO", 40, raising=False)
    assert pipeline._folders_called(tmp_path, "docs") == ["notes/docs"]
    assert len(looked) == 40    # of the 184 a whole walk looks into
    looked.clear()
    monkeypatch.setattr(pipeline, "FOLDERS_LOOKED_INTO", 5_000)
    assert pipeline._folders_called(tmp_path, "docs") == ["notes/docs", "node_modules/p00/lib/docs",
                                                          "node_modules/p01/lib/docs"]
    assert len(looked) == 124   # (three found by the third level: the fourth, 60 folders, not looked into)


async def test_a_claim_two_files_make_is_shown_once_with_its_object_and_dates_and_leaves_with_both(tmp_path):
    # A claim's line showed neither its object nor its dates, a claim was found by its subject
    # alone, and one made by two chunks was two lines of every context holding it. Each chunk's
    # row stays its provenance: the claim leaves the index with the last chunk making it.
    import httpx

    from streamrag.local_search import build_local_context, load_local_data
    from streamrag.simulator import ANSWERS, detect_task

    line = ("claim | Old Quay Trust | Mira Osk | CONTRACT | TRUE | 2031-04-02 | 2031-06-30 | "
            "The trust paid Mira Osk. | The Old Quay Trust paid Mira Osk.")

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(404)
        messages = json.loads(request.content)["messages"]
        task = detect_task(messages)
        if task == "claims":   # the claim, of each chunk saying it
            return chat_answer(f"{line}\ndone" if "paid Mira Osk" in messages[-1]["content"] else "done")
        return chat_answer(ANSWERS[task](messages))

    folder = tmp_path / "docs"
    folder.mkdir()
    said = "The Old Quay Trust paid Mira Osk for the harbor work. Mira Osk rebuilt the quay in Port Vell."
    (folder / "a.txt").write_text(f"Ledger notes\n\n{said}\n")
    (folder / "b.txt").write_text(f"Gazette clipping\n\n{said} Anton Heller praised the work.\n")
    (folder / "c.txt").write_text("Festival\n\nLena Varga led the students of the Vell Maritime Academy.\n")
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    db = tmp_path / "claims.db"
    shown = ("claim (CONTRACT, TRUE, 2031-04-02 to 2031-06-30) subject Old Quay Trust, object Mira Osk: "
             "The trust paid Mira Osk.")

    def seen() -> tuple[int, int, list[list[str]]]:
        """(claim rows, the claim's lines in the local context of Mira Osk, the claims of each report's context)."""
        store = Store(db, readonly=True)
        try:
            with store.snapshot():
                rows = store.scalar("SELECT count(*) FROM claims")
                mira = store.scalar("SELECT id FROM entities WHERE name = 'Mira Osk'")
                data = load_local_data(store, [mira] if mira else [])
                reports = [json.loads(e)["claims"] for (e,) in store.conn.execute(
                    "SELECT r.elements FROM communities c JOIN reports r ON r.key = c.report_key")]
        finally:
            store.close()
        text = build_local_context(data, max_tokens=4000, text_share=0.5, community_share=0.2).text
        return rows, text.count(shown), [ids for ids in reports if ids]

    transport = httpx.MockTransport(answer)
    await sync([folder], settings, db, root=folder, transport=transport)
    rows, lines, reports = seen()
    assert rows == 2 and lines == 1   # (found by its object: Old Quay Trust is not asked about)
    assert reports and all(len(ids) == 1 for ids in reports)
    fresh_db = tmp_path / "fresh.db"
    for gone, rows_left in (("a.txt", 1), ("b.txt", 0)):
        (folder / gone).unlink()
        await sync([folder], settings, db, root=folder, transport=transport)
        rows, lines, reports = seen()
        assert (rows, lines, bool(reports)) == (rows_left, int(bool(rows_left)), bool(rows_left))
        fresh_db.unlink(missing_ok=True)
        await sync([folder], settings, fresh_db, root=folder, transport=transport)
        assert snapshot(db) == snapshot(fresh_db)


async def test_a_claims_call_that_gives_up_keeps_its_chunks_entities_and_the_next_run_asks_it_alone(corpus, tmp_path):
    # A claims call that failed after its retries failed its chunk with it: the entities and
    # relationships paid for were not used (a first index: nothing published) until a run
    # extracted the chunk again. Now they are published, and the next run asks the claims
    # call alone, and ends with the index a fresh one makes.
    import httpx


    asked: list[str] = []

    def answering(claims_work: bool) -> httpx.MockTransport:
        return simulated_transport(claims_work=claims_work, asked=asked)

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    db = tmp_path / "claims.db"
    first = await sync([corpus], settings, db, root=corpus, transport=answering(False))
    store = Store(db, readonly=True)
    try:
        failed = store.query("SELECT stage, message FROM failures")
        live = {k for (k,) in store.conn.execute("SELECT DISTINCT extractor FROM live_chunks")}
    finally:
        store.close()
    assert first.entities > 0 and first.relationships > 0 and first.claims == 0
    assert first.chunks and first.failures == first.chunks == len(failed)
    assert {f["stage"] for f in failed} == {"claims"} and "the next run asks for again" in failed[0]["message"]
    from streamrag.extractor import claimless_key, extractor_key

    assert live == {claimless_key(settings)}
    without = tmp_path / "without.db"   # what a run without claims makes of the folder
    await sync([corpus], make_settings("http://llm.test/v1"), without, root=corpus, transport=answering(True))
    for key in ("entities", "relationships", "entity_sources", "relationship_sources", "documents"):
        assert snapshot(db)[key] == snapshot(without)[key], key

    asked.clear()
    second = await sync([corpus], settings, db, root=corpus, transport=answering(True))
    assert second.failures == 0 and second.claims > 0
    assert asked.count("claims") == first.chunks and not {"extract", "glean", "glean_check"} & set(asked)
    # ... nor of the cache, whose answers the transport never sees
    assert not {"extract", "glean", "glean_check"} & {s for s, n in second.llm.items() if n["calls"]}, second.llm
    store = Store(db, readonly=True)
    try:
        assert {k for (k,) in store.conn.execute("SELECT DISTINCT extractor FROM live_chunks")} == {
            extractor_key(settings)}
    finally:
        store.close()
    fresh = tmp_path / "fresh.db"
    await sync([corpus], settings, fresh, root=corpus, transport=answering(True))
    assert snapshot(db) == snapshot(fresh)


async def test_a_chunk_whose_claims_failed_is_said_indexed_without_them_and_a_retry_extracts_nothing(
        corpus, tmp_path):
    # A chunk whose claims call gave up is published with its entities and relationships: `index`
    # said its failure "left out of this version", `status` counted it nowhere once the next
    # update came, and a retry that asked its claims call alone, failing again, said "4 chunks
    # extracted" (each failing `watch` retry too) though nothing new was extracted.
    from streamrag.extractor import claimless_key
    from streamrag.status import format_status

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    db = tmp_path / "claims.db"
    key = claimless_key(settings)
    first = await sync([corpus], settings, db, root=corpus, transport=simulated_transport(claims_work=False))
    assert first.chunks and first.chunks_extracted == first.chunks   # (their entities were extracted now)
    assert first.failed_items == first.claims_failed == first.chunks
    again = await sync([corpus], settings, db, root=corpus, transport=simulated_transport(claims_work=False))
    assert again.chunks_extracted == 0 and again.chunks_reused == 0 and again.claims_failed == again.chunks
    info = status_info(db, claimless=key)
    assert info["chunks_without_claims"] == info["claims_failed_last_run"] == info["failures_last_run"] == first.chunks
    text = format_status(info, db)
    n = first.chunks
    assert f"claims         0 ({n} chunks indexed without their claims, the claims call failed; " \
        "the next update asks for them again)" in text, text
    assert text.splitlines()[-2].endswith(f": ok, but {n} chunks are indexed without their claims "
                                          "(the claims call failed)"), text
    assert "left out of this version" not in text
    # (claims turned off: no chunk lacks its claims, though the same rows are live)
    assert status_info(db, claimless=claimless_key(make_settings("http://llm.test/v1")))["chunks_without_claims"] == 0


async def test_chunks_indexed_without_claims_are_counted_after_the_model_is_changed(corpus, tmp_path):
    # `status` counted the chunks whose claims call failed by the settings' claimless key: once
    # llm.extraction_model was edited (no run since) it said 0 of them, though they were still
    # published without their claims.
    import httpx

    from streamrag.extractor import claimless_key

    def answering(claims_work: bool) -> httpx.MockTransport:
        return simulated_transport(claims_work=claims_work)

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    db = tmp_path / "claims.db"
    first = await sync([corpus], settings, db, root=corpus, transport=answering(False))
    assert first.chunks and first.claims_failed == first.chunks
    edited = make_settings("http://llm.test/v1", index={"extract_claims": True}, llm={"extraction_model": "other-model"})
    assert claimless_key(edited) != claimless_key(settings)
    info = status_info(db, claimless=claimless_key(edited))
    assert info["chunks_without_claims"] == info["claims_failed_last_run"] == first.chunks, info
    # (a run whose claims all answer publishes every chunk with its claims: none is counted)
    ok = await sync([corpus], settings, db, root=corpus, transport=answering(True))
    assert ok.claims_failed == 0
    info = status_info(db, claimless=claimless_key(edited))
    assert info["chunks_without_claims"] == info["claims_failed_last_run"] == 0, info


def test_records_in_another_order_are_not_the_same_records(tmp_path):
    # A reviewer asked whether ``same_records`` could compare a chunk's records as a set (the
    # same records in another order merged again to publish a version equal to the last). It
    # cannot: ``merge.mentions_of`` keeps the first of a chunk's mentions of one entity with one
    # description, so the order picks its shown name and type. A guard: passes on main as well.
    from streamrag import index_rows, merge
    from streamrag.records import EntityRecord, Extraction

    a = EntityRecord(name="Scrooge", type="person", description="a miser")
    b = EntityRecord(name="SCROOGE", type="organization", description="a miser")
    merged = []
    for records in ([a, b], [b, a]):
        entities, _rels, _claims = merge.mentions_of("c1", Extraction(entities=records))
        merged.append(merge.merge_entity(entities[0].entity_id, entities))
    assert (merged[0].name, merged[0].type) != (merged[1].name, merged[1].type)
    store = Store(tmp_path / "index.db")
    try:
        index_rows.save_extraction(store, "c1", "llm-old", Extraction(entities=[a, b]))
        index_rows.save_extraction(store, "c1", "llm-new", Extraction(entities=[b, a]))
        index_rows.save_extraction(store, "c2", "llm-old", Extraction(entities=[a, b]))
        index_rows.save_extraction(store, "c2", "llm-new", Extraction(entities=[a, b], rounds=2))
        assert index_rows.same_records(store, {"c1": "llm-old", "c2": "llm-old"}, "llm-new") == {"c2"}
    finally:
        store.close()


async def test_chunks_indexed_without_claims_are_counted_from_the_index_s_rows_once_failures_are_pruned(
        corpus, tmp_path):
    # Counted by the claims failures recorded, after llm.extraction_model was edited: once those
    # were pruned (``index_rows.prune``), `status` said 0 chunks without claims, every one still
    # published without them. Now by the index's claimless key (meta extractor_claimless).
    import httpx

    from streamrag.extractor import claimless_key
    from streamrag.simulator import ANSWERS, detect_task

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(404)
        messages = json.loads(request.content)["messages"]
        task = detect_task(messages)
        return chat_answer("I cannot list claims." if task == "claims" else ANSWERS[task](messages))

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    db = tmp_path / "claims.db"
    first = await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(answer))
    assert first.chunks and first.claims_failed == first.chunks
    edited = make_settings("http://llm.test/v1", index={"extract_claims": True}, llm={"extraction_model": "other-model"})
    store = Store(db)
    with store.transaction() as conn:
        conn.execute("DELETE FROM failures")   # (pruned)
    store.close()
    for claimless in (claimless_key(settings), claimless_key(edited)):
        assert status_info(db, claimless=claimless)["chunks_without_claims"] == first.chunks


def test_an_offline_index_loads_no_http_client(corpus):
    # httpx imports its command line's rich, click and pygments (a tenth of a second of CPU):
    # pipeline took one constant of ``replies`` at its top, which pulled them into every
    # offline index, a model's client being imported only when a run calls a model. And
    # ``progress`` imported rich (40 ms) for a panel that -q never shows.
    probe = ("import sys\nfrom streamrag import cli\n"
             "code = cli.main(['index', '.', '--offline', '-q'])\n"
             "print(code, sorted(m for m in ('httpx', 'click', 'pygments', 'rich') if m in sys.modules))\n")
    env = clean_env(PYTHONPATH=str(Path(__file__).resolve().parent.parent))   # (this code, not an installed one)
    out = subprocess.run([sys.executable, "-c", probe], cwd=corpus, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split("\n")[-2] == "0 []", out


@pytest.mark.parametrize("cache", [True, False])
async def test_an_offline_run_of_an_index_a_model_built_says_what_it_replaces_and_what_comes_back(
        corpus, tmp_path, simulator, caplog, cache):
    # `index --offline` of an index a model built replaced its model reports with extractive ones
    # and said nothing (the reverse says "this index was built offline: ..."). Now one line before
    # the run, in --json `model_work_replaced`; what it says a run with the model again gets back
    # is what that run does: with llm.cache on, no call reaches the endpoint; off, the summaries
    # and reports are asked anew (the extractions are stored either way).
    import logging

    from streamrag.status import llm_summary

    sized = {"chunk_size": 80, "chunk_overlap": 10}
    with_model = make_settings(simulator.base_url, index=sized, llm={"cache": cache})
    db = tmp_path / "index.db"
    with anyio.fail_after(120):
        built = await sync([corpus], with_model, db, root=corpus)
    store = Store(db, readonly=True)
    try:
        summaries = store.scalar("SELECT count(*) FROM answers WHERE owner IN (SELECT id FROM entities "
                                 "UNION ALL SELECT id FROM relationships)")
        reports = store.scalar("SELECT count(*) FROM communities c JOIN reports r ON r.key = c.report_key "
                               "WHERE r.extractive = 0")
    finally:
        store.close()
    assert summaries and reports and built.chunks
    offline = make_settings("", index={**sized, "extractor": "nlp"})
    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"):
        replaced = await sync([corpus], offline, db, root=corpus)
    said = [r.getMessage() for r in caplog.records if "built with a model" in r.getMessage()]
    assert replaced.model_work_replaced == {"chunks": built.chunks, "claims": 0, "summaries": summaries,
                                            "reports": reports,
                                            "not_cached": 0 if cache else summaries + reports}
    assert said and said[0].startswith(
        f"this index was built with a model: this offline run replaces the model's extraction of {built.chunks} "
        f"chunks, {summaries} summaries and {reports} reports with the NLP extractor's and extractive ones; "), said
    assert len(said) == 1, said
    assert said[0].endswith("takes its summaries and reports from the cache, but for those of what changes "
                            "meanwhile" if cache else
                            f"asks for its {summaries + reports} summaries and reports anew (none of them is "
                            "in the cache)"), said
    # Said once: the index is an offline one now.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"):
        again = await sync([corpus], offline, db, root=corpus)
    assert again.model_work_replaced == {} and not [r for r in caplog.records if "built with a model" in r.getMessage()]
    # What it said comes back does.
    asked = simulator.requests
    with anyio.fail_after(120):
        back = await sync([corpus], with_model, db, root=corpus)
    assert back.chunks_extracted == 0 and back.model_work_replaced == {}
    calls = llm_summary(back.llm)
    if cache:
        assert simulator.requests == asked and calls["calls"] == calls["cached"] == summaries + reports
    else:
        assert simulator.requests - asked >= summaries + reports and calls["cached"] == 0


async def test_an_offline_run_with_llm_cache_off_says_the_model_run_asks_again(corpus, tmp_path, simulator, caplog):
    # Built with llm.cache on, then llm.cache set off and an offline run: the line said the run
    # with the model again "takes its summaries and reports from the cache", but with llm.cache
    # off no answer is looked up, and that run (same settings) paid for every one of them.
    import logging

    from streamrag.status import llm_summary

    sized = {"chunk_size": 80, "chunk_overlap": 10}
    db = tmp_path / "index.db"
    with anyio.fail_after(120):
        await sync([corpus], make_settings(simulator.base_url, index=sized), db, root=corpus)
    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"):
        replaced = await sync([corpus], make_settings("", index={**sized, "extractor": "nlp"}, llm={"cache": False}),
                              db, root=corpus)
    work = replaced.model_work_replaced
    written = work["summaries"] + work["reports"]
    assert written and work["not_cached"] == 0, work
    said = [r.getMessage() for r in caplog.records if "built with a model" in r.getMessage()]
    assert len(said) == 1 and said[0].endswith(
        f"extracts no unchanged chunk again, but asks for its {written} summaries and reports anew "
        "(llm.cache is off)"), said
    asked = simulator.requests
    with anyio.fail_after(120):
        back = await sync([corpus], make_settings(simulator.base_url, index=sized, llm={"cache": False}), db,
                          root=corpus)
    calls = llm_summary(back.llm)
    assert back.chunks_extracted == 0 and calls["cached"] == 0 and simulator.requests - asked >= written


async def test_a_model_run_after_an_offline_one_takes_the_reports_naming_sub_communities_from_the_cache(
        corpus, tmp_path, simulator):
    # A large community's report context holds its sub-communities' reports, named by community
    # id. The run with the model after an offline one clustered from the offline run's partition,
    # which gave those ids anew, and asked for such reports again (200 synth documents: 12 paid
    # of 183; the line said "but for up to 12 reports of large communities"). The offline run
    # keeps the model's partition now, and that run clusters from it: nothing is asked.
    from streamrag.status import llm_summary

    sized = {"chunk_size": 80, "chunk_overlap": 10, "report_max_input_tokens": 400, "max_cluster_size": 4}
    db = tmp_path / "index.db"
    with anyio.fail_after(120):
        built = await sync([corpus], make_settings(simulator.base_url, index=sized), db, root=corpus)
    assert any(c.parent for c in _communities(db)), "no sub-community: the test shows nothing"
    await sync([corpus], make_settings("", index={**sized, "extractor": "nlp"}), db, root=corpus)
    asked = simulator.requests
    with anyio.fail_after(120):
        back = await sync([corpus], make_settings(simulator.base_url, index=sized), db, root=corpus)
    calls = llm_summary(back.llm)
    assert back.chunks_extracted == 0 and simulator.requests == asked, calls
    assert calls["calls"] == calls["cached"], calls
    assert back.communities == built.communities and back.version == built.version + 2


def _communities(db: Path) -> list:
    """The published communities of ``db`` (``index_rows.load_communities``: with their keys)."""
    from streamrag import index_rows

    store = Store(db, readonly=True)
    try:
        return [c for c, _context, _report in index_rows.load_communities(store)]
    finally:
        store.close()


def _meta(db: Path, key: str) -> str | None:
    store = Store(db, readonly=True)
    try:
        return store.get_meta(key)
    finally:
        store.close()


async def test_a_model_run_after_an_offline_one_pays_for_what_changed_since_the_model_run(
        corpus, tmp_path, simulator):
    # A document edited, then `index --offline` of an index a model built, then a run with the
    # model: that run clustered the model's graph from the offline partition, so most
    # communities came out with other members and ids and their reports missed the cache (200
    # synth documents, one sentence added: 153 reports paid of 184, where the same edit with no
    # offline run between pays 1). The offline run keeps the model's partition (bookkeeping, not
    # published) and the run with the model clusters from it: it pays what the edit alone costs
    # and publishes the partition that run publishes. The offline index shows its own
    # communities and reports meanwhile.
    sized = {"chunk_size": 80, "chunk_overlap": 10, "max_cluster_size": 4}
    model, offline = (make_settings(simulator.base_url, index=sized),
                      make_settings("", index={**sized, "extractor": "nlp"}))
    twin = tmp_path / "twin"
    shutil.copytree(corpus, twin)
    paid, partitions, marks = [], [], []
    for folder, db, between in ((corpus, tmp_path / "a.db", True), (twin, tmp_path / "b.db", False)):
        with anyio.fail_after(120):
            await sync([folder], model, db, root=folder)
        council = folder / "council.txt"
        council.write_text(council.read_text() + "\nMayor Ilse Varga met Captain Tomas Brennan in port.\n")
        if between:
            kept = [(c.id, c.level, c.parent, c.members) for c in _communities(db)]
            await sync([folder], offline, db, root=folder)
            store = Store(db, readonly=True)
            try:   # (the offline index shows no report of the model's)
                assert store.scalar("SELECT count(*) FROM communities c JOIN reports r "
                                    "ON r.key = c.report_key WHERE r.extractive = 0") == 0
            finally:
                store.close()
            marks.append(bool(_meta(db, "model_partition")) and _communities(db) != kept)
            guild = (folder / "guild.txt").read_text()
            (folder / "guild.txt").write_text(guild + "\nThe guild met again.\n")
            await sync([folder], offline, db, root=folder)   # (an offline run of an offline index keeps it)
            marks.append(bool(_meta(db, "model_partition")))
            (folder / "guild.txt").write_text(guild)
        before = simulator.by_task["report"]
        with anyio.fail_after(120):
            await sync([folder], model, db, root=folder)
        paid.append(simulator.by_task["report"] - before)
        partitions.append(snapshot(db)["partition"])
        marks.append(_meta(db, "model_partition") is None)   # (dropped: the model's is published)
    assert paid[0] == paid[1] and partitions[0] == partitions[1], paid
    assert marks == [True] * 4, marks


@pytest.mark.parametrize("then", [5, 3], ids=["the-offline-runs-seed", "the-models-seed"])
async def test_a_model_run_after_an_offline_one_says_clustered_afresh_by_the_model_partitions_settings(
        corpus, tmp_path, simulator, caplog, then):
    # The run starts from the model's partition the offline run kept, and clusters afresh when
    # its Leiden settings are not that partition's. The line read the published (offline)
    # partition's: a model built with seed 3, an offline run with seed 5, then a model run with
    # seed 3 was said "it is clustered afresh" and started from the model's partition; with
    # seed 5, it clustered afresh unsaid (200 synth documents, seeds 42, 7 and 7: 68 reports paid).
    import logging

    sized = {"chunk_size": 80, "chunk_overlap": 10, "max_cluster_size": 4}
    db = tmp_path / "index.db"
    model = make_settings(simulator.base_url, index={**sized, "leiden_seed": 3})
    with anyio.fail_after(120):
        await sync([corpus], model, db, root=corpus)
    offline = make_settings("", index={**sized, "extractor": "nlp", "leiden_seed": 5})
    await sync([corpus], offline, db, root=corpus)
    model = make_settings(simulator.base_url, index={**sized, "leiden_seed": then})
    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"), anyio.fail_after(120):
        back = await sync([corpus], model, db, root=corpus)
    said = [r.getMessage() for r in caplog.records if "clustered afresh" in r.getMessage()]
    assert back.reclustered == (then == 5) and bool(said) == back.reclustered, said
    assert ("clustering" in back.settings_changed) == back.reclustered, back.settings_changed


async def test_a_model_run_after_an_offline_one_reads_the_kept_partitions_communities_once(
        corpus, tmp_path, simulator, monkeypatch):
    # The run read the model's partition the offline run kept twice, whole: for its Leiden
    # settings (``start_leiden``, as it looked for changed settings), then to cluster from it
    # (a 20,000-entity graph's, 1.5 MB: 43 ms a decode). The settings are read without decoding
    # the communities now.
    import msgspec

    from streamrag.graph_state import KeptPartition

    sized = {"chunk_size": 80, "chunk_overlap": 10, "max_cluster_size": 4}
    db = tmp_path / "index.db"
    with anyio.fail_after(120):
        await sync([corpus], make_settings(simulator.base_url, index=sized), db, root=corpus)
    await sync([corpus], make_settings("", index={**sized, "extractor": "nlp"}), db, root=corpus)
    assert _meta(db, "model_partition")
    decoded, decode = [], msgspec.json.decode

    def counted(*args, **kwargs):
        decoded.append(kwargs.get("type"))
        return decode(*args, **kwargs)

    monkeypatch.setattr(msgspec.json, "decode", counted)
    with anyio.fail_after(120):
        back = await sync([corpus], make_settings(simulator.base_url, index=sized), db, root=corpus)
    assert back.failures == 0 and not back.reclustered
    assert decoded.count(KeptPartition) == 1, decoded


async def test_a_model_partition_kept_in_a_shape_this_streamrag_cannot_read_is_a_start_no_more(
        corpus, tmp_path, simulator):
    # The model's partition an offline run keeps is bookkeeping, a place for Leiden to start:
    # one this streamrag cannot read (another version's) has the run start from the published
    # partition, as it did before any was kept, and drops it.
    import sqlite3

    sized = {"chunk_size": 80, "chunk_overlap": 10}
    db = tmp_path / "index.db"
    with anyio.fail_after(120):
        built = await sync([corpus], make_settings(simulator.base_url, index=sized), db, root=corpus)
    await sync([corpus], make_settings("", index={**sized, "extractor": "nlp"}), db, root=corpus)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        assert conn.execute("UPDATE meta SET value = '{\"communities\": 1}' "
                            "WHERE key = 'model_partition'").rowcount
    with anyio.fail_after(120):
        back = await sync([corpus], make_settings(simulator.base_url, index=sized), db, root=corpus)
    assert back.failures == 0 and back.entities == built.entities and _meta(db, "model_partition") is None


async def test_a_kept_model_partition_whose_communities_this_streamrag_cannot_read_is_said_as_dropped(
        corpus, tmp_path, simulator, caplog):
    # Its settings and count read without its communities (``KeptSettings``), a partition whose
    # top level reads but whose communities do not (another version's ``Community``) is one the
    # run drops (``warm_start`` reads it whole) and starts from the published partition: the
    # run must not say "it is clustered afresh" by the dropped partition's settings (a model
    # built with seed 3, an offline run with seed 5, a model run with seed 5 said so, and
    # clustered from the published one, its settings the run's; whether that run reclusters
    # is the drift check's, unsaid).
    import logging
    import sqlite3

    sized = {"chunk_size": 80, "chunk_overlap": 10, "max_cluster_size": 4}
    db = tmp_path / "index.db"
    with anyio.fail_after(120):
        built = await sync([corpus], make_settings(simulator.base_url, index={**sized, "leiden_seed": 3}), db,
                           root=corpus)
    offline = make_settings("", index={**sized, "extractor": "nlp", "leiden_seed": 5})
    await sync([corpus], offline, db, root=corpus)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        (kept,), = conn.execute("SELECT value FROM meta WHERE key = 'model_partition'")
        kept = json.loads(kept)
        kept["communities"] = [{"id": c["id"]} for c in kept["communities"]]   # (no members, no level)
        assert conn.execute("UPDATE meta SET value = ? WHERE key = 'model_partition'",
                            (json.dumps(kept),)).rowcount
    model = make_settings(simulator.base_url, index={**sized, "leiden_seed": 5})
    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"), anyio.fail_after(120):
        back = await sync([corpus], model, db, root=corpus)
    said = [r.getMessage() for r in caplog.records if "clustered afresh" in r.getMessage()]
    assert back.failures == 0 and back.entities == built.entities and _meta(db, "model_partition") is None
    assert not said and "clustering" not in back.settings_changed, (said, back.settings_changed)


async def test_an_offline_run_of_a_model_index_counts_only_the_chunks_it_keeps_live(
        corpus, tmp_path, simulator, caplog):
    # The line was said before the scan: a folder emptied meanwhile still said "replaces the
    # model's extraction of N chunks", which went with their documents. Now said after the scan,
    # of the model's chunks that stay live; none, nothing said.
    import logging

    sized = {"chunk_size": 80, "chunk_overlap": 10}
    db = tmp_path / "index.db"
    with anyio.fail_after(120):
        built = await sync([corpus], make_settings(simulator.base_url, index=sized), db, root=corpus)
    offline = make_settings("", index={**sized, "extractor": "nlp"})
    first = sorted(corpus.iterdir())[0]
    first.unlink()
    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"):
        fewer = await sync([corpus], offline, db, root=corpus)
    said = [r.getMessage() for r in caplog.records if "built with a model" in r.getMessage()]
    kept = fewer.model_work_replaced["chunks"]
    assert 0 < kept < built.chunks and len(said) == 1 and f"extraction of {kept} chunks" in said[0], said
    # Emptied before an offline run: nothing of the model's is replaced, nothing said.
    again = tmp_path / "again.db"
    with anyio.fail_after(120):
        await sync([corpus], make_settings(simulator.base_url, index=sized), again, root=corpus)
    for f in corpus.iterdir():
        f.unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"):
        emptied = await sync([corpus], offline, again, root=corpus)
    assert emptied.model_work_replaced == {} and not [
        r for r in caplog.records if "built with a model" in r.getMessage()]


def test_the_offline_over_a_model_line_groups_its_counts_by_thousands_as_every_line_does():
    # It said "1500 chunks, 2100 summaries ... asks for 1100 of its 3300", where every other line
    # says "1,500" (words.number).
    from streamrag.pipeline import model_work_replaced

    line = model_work_replaced({"chunks": 1500, "claims": 0, "summaries": 2100, "reports": 1200,
                                "not_cached": 1100}, 30, True)
    assert "extraction of 1,500 chunks, 2,100 summaries and 1,200 reports" in line, line
    assert "asks for 1,100 of its 3,300 summaries and reports anew" in line, line


def test_the_offline_over_a_model_line_says_answers_missing_from_the_cache_without_guessing_why():
    # It said "(they are not in the cache: llm.cache was off)" of any answer missing from the
    # cache, where a prune of answers unused for store.keep_unused_days, or a cache emptied by
    # hand, leaves them out as well, llm.cache on all along.
    from streamrag.pipeline import model_work_replaced

    line = model_work_replaced({"chunks": 4, "claims": 0, "summaries": 6, "reports": 3, "not_cached": 9},
                               30, True)
    assert line.endswith("but asks for its 9 summaries and reports anew (none of them is in the cache)"), line
    assert "llm.cache" not in line.split("anew")[-1], line


def _notes_beside_a_big_file(folder: Path) -> None:
    """Three notes and a file of some 3 kB (``LEAD_BYTES`` set below it), the only one naming
    Orrin Vale."""
    folder.mkdir()
    (folder / "big.txt").write_text(" ".join(f"Captain Orrin Vale sailed from Port Alder on voyage {i}."
                                             for i in range(60)))
    for i, name in enumerate(["Ada Osk", "Bram Teller", "Cora Vin"]):
        (folder / f"note{i}.md").write_text(f"# {name}\n\n{name} works at the Zephyr Cannery in Port Alder.\n")


async def test_notes_indexed_beside_a_big_new_file_are_published_before_it_is_extracted(tmp_path, monkeypatch,
                                                                                           caplog):
    # A run published once every file was extracted: 20 notes indexed beside a 2 MB dump were
    # answered 28 s later with a 300 ms model, hours later beside a 30 MB one. The version the
    # big file's first extraction call sees holds the notes (and not it); the run ends with
    # both, the graph a run of them all at once makes.
    from streamrag import pipeline

    monkeypatch.setattr(pipeline, "LEAD_BYTES", 2000)
    folder, db = tmp_path / "notes", tmp_path / "index.db"
    _notes_beside_a_big_file(folder)
    seen: list[tuple[int, list[str]]] = []
    real = simulated_transport()

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and b"Orrin Vale" in request.content and not seen:
            store = Store(db, readonly=True)
            try:
                seen.append((store.version, sorted(r["path"] for r in store.query("SELECT path FROM documents"))))
            finally:
                store.close()
        return real.handler(request)

    settings = make_settings("http://127.0.0.1:9/v1", index={"chunk_size": 80, "chunk_overlap": 10})
    with anyio.fail_after(120):
        result = await sync([folder], settings, db, root=folder, transport=httpx.MockTransport(answer))
    assert seen == [(1, ["note0.md", "note1.md", "note2.md"])]
    assert "big.txt (0.0 MB) is extracted after the run's other files, which are published first" in caplog.text
    assert (result.version, result.documents, result.documents_added, result.documents_unchanged) == (2, 4, 4, 0)
    assert result.llm["extract"]["calls"] == result.chunks_extracted == result.chunks   # (each asked once)
    # `status`'s last update is the command's: its second run, after the one that published first
    last_run = status_info(db)["last_run"]
    assert last_run["status"] == "ok" and last_run["lead"]["version"] == 1, last_run

    # A run of them all at once (no file that big) makes the same graph, which the notes' version
    # held part of (the communities are clustered from that version's: they need not be the same).
    monkeypatch.setattr(pipeline, "LEAD_BYTES", 10**9)
    at_once = tmp_path / "at_once.db"
    with anyio.fail_after(120):
        whole = await sync([folder], settings, at_once, root=folder, transport=simulated_transport())
    assert whole.version == 1
    graph = ("entities", "relationships", "entity_sources", "relationship_sources", "claims", "documents")
    assert {k: snapshot(db)[k] for k in graph} == {k: snapshot(at_once)[k] for k in graph}


def test_only_a_big_files_new_text_waits_and_only_beside_other_changes():
    from streamrag.pipeline import LEAD_BYTES, extracted_later

    big, small = LEAD_BYTES + 1, 10
    assert extracted_later({"dump.txt": (big, None), "a.md": (small, None)}, {}) == {"dump.txt"}
    assert extracted_later({"dump.txt": (big, None)}, {}) == set()   # (alone: nothing to publish first)
    # grown by less than LEAD_BYTES (a log appended to, a word changed): its chunks mostly reused
    assert extracted_later({"log.txt": (big + 5, big), "a.md": (small, 8)}, {}) == set()
    assert extracted_later({"log.txt": (2 * big, big - 1), "a.md": (small, 8)}, {}) == {"log.txt"}
    # an indexed big file gone (renamed to the new one?) would drop out of the first version
    assert extracted_later({"dump2.txt": (big, None), "a.md": (small, None)}, {"dump.txt": big}) == set()
    assert extracted_later({"dump.txt": (big, None), "a.md": (small, None)}, {"b.md": small}) == {"dump.txt"}


async def test_a_run_stopped_on_its_big_file_says_the_version_its_other_files_made(tmp_path, monkeypatch):
    # Its error said "Nothing was published; the index is as it was" of a run that had published
    # the notes beside the big file as version 1, which `ask` answers from.
    from streamrag import pipeline
    from streamrag.errors import LLMRequestError

    monkeypatch.setattr(pipeline, "LEAD_BYTES", 2000)
    folder, db = tmp_path / "notes", tmp_path / "index.db"
    _notes_beside_a_big_file(folder)
    real = simulated_transport()

    def answer(request: httpx.Request) -> httpx.Response:
        if b"Orrin Vale" in request.content:   # (the key revoked as the big file is reached)
            return httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}})
        return real.handler(request)

    settings = make_settings("http://127.0.0.1:9/v1", index={"chunk_size": 80, "chunk_overlap": 10})
    with anyio.fail_after(120), pytest.raises(LLMRequestError) as raised:
        await sync([folder], settings, db, root=folder, transport=httpx.MockTransport(answer))
    said = str(raised.value)
    assert said.endswith(". Only the run's other files were published (version 1, without big.txt)"), said
    assert "Nothing was published" not in said, said
    assert status_info(db)["version"] == 1
    # `status` said its second run alone: "1 new or changed file: the last update failed and
    # published nothing", of a command that had published version 1.
    import sqlite3

    from streamrag.status import format_status

    info = status_info(db)
    lead = info["last_run"]["lead"]
    assert lead["version"] == 1 and lead["id"] != info["last_run"]["id"], info["last_run"]
    said = format_status(info, db)
    assert "1 new or changed file: the last update published only its other files (version 1), then failed;" \
        in said and "published nothing" not in said, said
    assert f"(its other files published first by {lead['id']}, version 1): failed" in said, said
    # A run killed with -9 on its big file writes no stats at its end: the lead is on its row
    # from its start too (``runs.taking``); status said "the last update was killed and published
    # nothing" of the command that had published version 1.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET stats = NULL WHERE id = ?", (info["last_run"]["id"],))
    conn.close()
    assert status_info(db)["last_run"]["lead"] == lead


def _groups_beside_a_big_file(folder: Path) -> None:
    """Six notes, each naming one of six groups of names, and a file of some 2 kB of meetings
    within and across the groups (``LEAD_BYTES`` set below it); a note of names it has not."""
    folder.mkdir()
    names = [[f"{first} {last}" for first in ("Ada", "Bram", "Cora", "Dane")]
             for last in ("Osk0", "Holt1", "Vale2", "Pike3", "Rook4", "Lund5")]
    (folder / "big.txt").write_text(" ".join(
        f"{names[i % 6][i % 4]} met {names[i % 6][(i + 1) % 4]} and {names[(i * 5 + 1) % 6][(i + 2) % 4]} at the docks."
        for i in range(40)))
    for i, group in enumerate(names):
        (folder / f"note{i}.md").write_text(f"# {group[0]}\n\n{group[0]} works with {names[(i + 1) % 6][1]} "
                                            "at the Zephyr Cannery.\n")
    (folder / "shop.md").write_text("# Tinker Shop\n\nOtto Brass and Nemo Plum run the Tinker Shop of Saltmere.\n")


def _partition(db: Path) -> list[tuple[int, tuple[str, ...]]]:
    store = Store(db, readonly=True)
    try:
        members: dict[tuple[int, str], list[str]] = {}
        for row in store.query("SELECT c.id, c.level, m.entity_id FROM communities c "
                               "JOIN community_members m ON m.community_id = c.id"):
            members.setdefault((row["level"], row["id"]), []).append(row["entity_id"])
    finally:
        store.close()
    return sorted((level, tuple(sorted(m))) for (level, _id), m in members.items())


async def test_a_first_index_with_a_big_file_is_clustered_as_a_first_index_is(tmp_path, monkeypatch):
    # The run after the notes' own version warm-started from their partition, of a few of the
    # graph's entities: a first index of a 2 MB dump beside 20 notes had 33 communities of
    # modularity 0.065 where one run finds 20 of 0.074 (within index.recluster_drift, so kept
    # until an `index --recluster`). It now clusters afresh, as a first index does (ids matched
    # to the notes' version's), and says no re-clustering; an index that had a partition is
    # still updated from it.
    from streamrag import pipeline

    settings = make_settings("http://127.0.0.1:9/v1", index={"chunk_size": 80, "chunk_overlap": 10,
                                                              "recluster_drift": 1.0})
    folder = tmp_path / "groups"
    _groups_beside_a_big_file(folder)
    monkeypatch.setattr(pipeline, "LEAD_BYTES", 1500)
    with anyio.fail_after(120):
        result = await sync([folder], settings, tmp_path / "lead.db", root=folder, transport=simulated_transport())
    assert (result.version, result.reclustered) == (2, False)
    # (none kept: the lead's reports its run after kept were written by this command, and counted so)
    assert (result.reports_kept, result.reports_generated >= result.reports) == (0, True), result
    monkeypatch.setattr(pipeline, "LEAD_BYTES", 10**9)
    with anyio.fail_after(120):
        whole = await sync([folder], settings, tmp_path / "once.db", root=folder, transport=simulated_transport())
    assert whole.version == 1
    assert _partition(tmp_path / "lead.db") == _partition(tmp_path / "once.db")

    # An index with a partition already: both runs start from the one before them.
    again, db = tmp_path / "again", tmp_path / "again.db"
    _groups_beside_a_big_file(again)
    big = (again / "big.txt").read_text()
    (again / "big.txt").unlink()
    with anyio.fail_after(120):
        await sync([again], settings, db, root=again, transport=simulated_transport())
    (again / "big.txt").write_text(big)
    (again / "note6.md").write_text("# Eda Marsh\n\nEda Marsh keeps the Zephyr Cannery books.\n")
    asked: list[bool] = []
    real = pipeline.updated_partition

    def updated(*args, **kwargs):
        asked.append(kwargs["recluster"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "LEAD_BYTES", 1500)
    monkeypatch.setattr(pipeline, "updated_partition", updated)
    with anyio.fail_after(120):
        result = await sync([again], settings, db, root=again, transport=simulated_transport())
    assert (result.version, asked) == (3, [False, False])
