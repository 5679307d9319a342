"""``index --estimate`` against the runs that follow it: chunks extracted by a run that never
published (interrupted, or a watcher's extraction ahead of its sync) still cost their summaries
and reports; an update's new, edited and deleted files cost those of the entities they name
and of their communities (the simulator answers alike each time: the counts are stable)."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import random
import re
import shutil
import sqlite3
from pathlib import Path
from typing import NamedTuple

import pytest

import streamrag.estimate as estimate_module
from conftest import claims_answered, clean_env, make_settings, schema_before, unsearchable
from streamrag import ids, index_rows, nlp
from streamrag.config import Settings
from streamrag.estimate import _grown, _stand_in, estimate, first_graph, format_estimate
from streamrag.extractor import extractor_key
from streamrag.graph_state import GraphState
from streamrag.merge import unique_descriptions
from streamrag.pipeline import Indexer, SyncResult, sync
from streamrag.records import EntityRecord, Extraction, RelationshipRecord
from streamrag.store import Store
from streamrag.summarizer import summary_input

pytestmark = pytest.mark.anyio


def paid(stats: dict, stage: str) -> int:
    """The calls of ``stage`` a run paid for (``stats``: its ``llm``, stage by stage)."""
    s = stats.get(stage, {"calls": 0, "cached": 0})
    return s["calls"] - s["cached"]


async def extract_only(paths: list[Path], settings, db: Path, root: Path) -> int:
    """What a run stopped after extracting leaves: every extraction stored, nothing published."""
    return await Indexer(settings, db, root=root).prefetch(paths)


async def test_chunks_extracted_but_never_published_still_cost_their_summaries_and_reports(
        corpus, tmp_path, sim_settings):
    # A first run stopped while summarizing: the estimate said "0 chunks to extract ... total
    # 0 calls", and the next run made every summary and report call.
    db = tmp_path / "index.db"
    extracted = await extract_only([corpus], sim_settings, db, corpus)
    assert extracted > 4
    est = estimate([corpus], sim_settings, db, root=corpus)
    done = await sync([corpus], sim_settings, db, root=corpus)
    assert done.chunks_extracted == 0 and done.chunks_reused == extracted
    for stage in ("summarize", "report"):
        asked = est["llm"]["by_stage"].get(stage, {}).get("calls", 0)
        assert paid(done.llm, stage) > 0 and asked >= paid(done.llm, stage) / 2, (stage, asked)
    assert est["chunks_to_extract"] == 0 and "extract" not in est["llm"]["by_stage"]
    assert est["chunks_unpublished"] == extracted
    assert f"0 chunks to extract (and {extracted} extracted by an earlier run, not yet published)" \
        in format_estimate(est)
    # Published: nothing is due any more.
    after = estimate([corpus], sim_settings, db, root=corpus)
    assert after["chunks_unpublished"] == 0 and after["llm"]["calls"] == 0


async def test_an_update_extracted_but_never_published_still_costs_its_summaries_and_reports(
        corpus, tmp_path, sim_settings):
    db = tmp_path / "index.db"
    await sync([corpus], sim_settings, db, root=corpus)
    (corpus / "tides.txt").write_text(
        "The Tide Office of Port Vell publishes the spring tide tables each March. Harbormaster "
        "Edda Lind signs them, and the Harbor Council posts them on the Old Quay.\n\n"
        "In the year of the Spring Storm the tables were late, and the ferry Blue Heron ran aground "
        "near the Kessel Bridge while Edda Lind was away in Kessel.\n")
    extracted = await extract_only([corpus], sim_settings, db, corpus)
    assert extracted >= 1
    est = estimate([corpus], sim_settings, db, root=corpus)
    done = await sync([corpus], sim_settings, db, root=corpus)
    assert paid(done.llm, "summarize") > 0 and paid(done.llm, "report") > 0
    assert {"summarize", "report"} <= est["llm"]["by_stage"].keys(), est["llm"]
    assert est["chunks_to_extract"] == 0 and est["chunks_unpublished"] == extracted
    after = estimate([corpus], sim_settings, db, root=corpus)
    assert after["chunks_unpublished"] == 0 and after["llm"]["calls"] == 0


NEWS = Path(__file__).parent / "data" / "news41"


def asked(est: dict, stage: str) -> int:
    return est["llm"]["by_stage"].get(stage, {}).get("calls", 0)


def close(est: dict, done, factor: float) -> dict[str, tuple[int, int]]:
    """The summary and report calls estimated and paid, by stage, where they are more than
    ``factor`` apart (either way)."""
    out = {}
    for stage in ("summarize", "report"):
        e, a = asked(est, stage), paid(done.llm, stage)
        if not (a / factor <= e <= a * factor):
            out[stage] = (e, a)
    return out


@pytest.fixture
def news(tmp_path) -> Path:
    """Ten articles of one synthetic world (each a chunk or two), indexed."""
    return news_copy(tmp_path, 10)


class Indexed(NamedTuple):
    """Ten articles indexed through the simulator with ``make_settings``' defaults: the folder
    (``tmp_path/news``), the index (``tmp_path/index.db``) and what its first sync did."""

    news: Path
    db: Path
    first: SyncResult


@pytest.fixture(scope="module")
def _ten_indexed_once(tmp_path_factory, simulator) -> tuple[Path, SyncResult, dict]:
    """The ``news`` articles indexed once for the module (the sync most tests here begin with,
    3 s each): the folder holding ``news`` and ``index.db``, the sync's result, and the estimate
    of the next run there (each copy's must be the same: ``ten_indexed``)."""
    import anyio

    base = tmp_path_factory.mktemp("ten_indexed")
    docs = news_copy(base, 10)
    settings = make_settings(simulator.base_url)
    with pytest.MonkeyPatch.context() as m:   # (as the autouse fixture has it for a test's own sync)
        m.setattr(Indexer, "check_shortcuts", True)
        first = anyio.run(functools.partial(sync, [docs], settings, base / "index.db", root=docs))
    as_indexed = estimate([docs], settings, base / "index.db", root=docs)
    # A copy made as each test's is taken for the folder as indexed: a sync of it reads nothing
    # again (without the stamps set to the copy's, it read all ten for their new times).
    news, db = _copy_indexed(base, tmp_path_factory.mktemp("ten_checked"))
    again = anyio.run(functools.partial(sync, [news], settings, db, root=news))
    assert (again.documents_new_times, again.documents_read_again, again.published) == (0, 0, False), again
    return base, first, as_indexed


def _copy_indexed(base: Path, to: Path) -> tuple[Path, Path]:
    """A copy of ``base``'s indexed ``news`` and ``index.db`` under ``to``, as if indexed where it
    lies: the index records the folder's absolute path (meta ``root``) and each file's change
    stamp, and a copied file has a new status-change time, which the run would take for a
    `cp -a` (read again, ``documents_new_times``). Both are set to the copy's, as a sync of the
    copy would have recorded (``_ten_indexed_once`` checks it with a sync of one copy)."""
    from streamrag.on_disk import change_stamp

    news, db = to / "news", to / "index.db"
    shutil.copytree(base / "news", news)
    shutil.copy2(base / "index.db", db)   # (a closed index: no -wal beside it)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'root'", (str(news.resolve()),))
        conn.executemany("UPDATE files SET stamp = ? WHERE path = ?",
                         [(change_stamp(os.stat(news / path)), path)
                          for (path,) in conn.execute("SELECT path FROM files")])
    return news, db


@pytest.fixture
def ten_indexed(_ten_indexed_once, tmp_path, simulator) -> Indexed:
    """A copy of the module's indexed ``news`` for the test to change (``_copy_indexed``);
    checked (read only, a few ms): the copy records its folder, and its estimate is the
    original's."""
    from streamrag.store import recorded_root

    base, first, as_indexed = _ten_indexed_once
    news, db = _copy_indexed(base, tmp_path)
    assert recorded_root(db) == str(news.resolve())
    assert estimate([news], make_settings(simulator.base_url), db, root=news) == as_indexed
    return Indexed(news, db, first)


async def index_and_estimate(news: Path, settings, db: Path):
    est = estimate([news], settings, db, root=news)
    return est, await sync([news], settings, db, root=news)


async def test_an_update_counts_the_summaries_and_reports_of_what_its_new_chunks_name(
        ten_indexed, simulator):
    # New articles name people and bodies the index holds: their summaries are written again,
    # and their communities' reports. Counted per new chunk, the estimate said 3 summaries and
    # 1 report for one article of synth_small where the run made 14 and 14.
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    add_articles(news, 10, 16)
    est, done = await index_and_estimate(news, settings, db)
    assert paid(done.llm, "summarize") > 20 and paid(done.llm, "report") > 10, done.llm
    assert not close(est, done, 1.35)


async def test_an_update_s_report_prompts_show_the_summaries_a_model_writes_as_long_as_one(ten_indexed, simulator):
    # A summary written anew stands in a report's context as long as a model's summary, not as
    # its descriptions joined: 31 articles added to ten were estimated 1,769 prompt tokens a
    # report for the run's 1,296 (a 200-document corpusgen index, 40 added: 2,993 for 2,519);
    # now 1,632 (2,589). (What is left: the offline extractor's pairs, more than a model's.)
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    add_articles(news, 10)
    est, done = await index_and_estimate(news, settings, db)
    assert paid(done.llm, "report") > 30 and not close(est, done, 1.35), (est["llm"], done.llm)
    per_call = [s["report"]["prompt_tokens"] / s["report"]["calls"] for s in (est["llm"]["by_stage"], done.llm)]
    assert off_by(*per_call) <= 0.3, per_call


async def test_a_deleted_file_counts_the_summaries_and_reports_of_what_it_named(ten_indexed, simulator):
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    (news / "doc_00004.txt").unlink()
    est, done = await index_and_estimate(news, settings, db)
    assert est["chunks_to_extract"] == 0
    assert paid(done.llm, "summarize") > 0 and paid(done.llm, "report") > 0, done.llm
    assert not close(est, done, 1.35)   # (it said 0 and 0)


async def test_an_edited_file_counts_what_its_new_passage_names_not_every_name_it_holds(
        ten_indexed, simulator):
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    # A passage quoted from another article, into the middle of one: every name of the file is
    # merged again, but only those of the passage are said anew. Counted per new chunk, the
    # estimate said 1 report where the run wrote 5.
    paragraphs = (news / "doc_00005.txt").read_text().split("\n\n")
    quoted = max((news / "doc_00007.txt").read_text().split("\n\n"), key=len)
    (news / "doc_00005.txt").write_text("\n\n".join(paragraphs[:3] + [quoted] + paragraphs[3:]))
    est, done = await index_and_estimate(news, settings, db)
    assert est["chunks_to_extract"] >= 1 and paid(done.llm, "report") > 2, done.llm
    assert not close(est, done, 1.35)


async def test_an_update_the_run_reclusters_counts_the_reports_of_the_fresh_partition(tmp_path, simulator):
    # Six of twenty articles deleted: the run's drift check (index.recluster_drift) finds a
    # fresh clustering better and takes it, and reports every community it changes. The
    # estimate started Leiden from the published partition and said 31 reports where the run
    # made 36. (A deletion: the graph is known exactly, so the partition is too. A drift of 0
    # takes the fresh clustering whenever it is better, whichever articles the simulator's
    # reading makes the six that move it.)
    settings = make_settings(simulator.base_url, index={"recluster_drift": 0.0})
    docs = news_copy(tmp_path, 20)
    db = tmp_path / "index.db"
    await sync([docs], settings, db, root=docs)
    for doc in sorted(docs.glob("doc_*.txt"))[:6]:
        doc.unlink()
    est, done = await index_and_estimate(docs, settings, db)
    assert done.reclustered
    assert asked(est, "report") == paid(done.llm, "report") > 20, (est["llm"], done.llm)


async def test_a_report_prompt_is_counted_from_its_communitys_context(news, tmp_path, simulator):
    # Reports of two- and three-member communities: each prompt is counted from its community's
    # lines (as the run's context takes them), not as a full context: it said 2,050 tokens a
    # report, about six times a small community's.
    settings = make_settings(simulator.base_url, index={"report_min_members": 2})
    db = tmp_path / "index.db"
    await sync([news], settings, db, root=news)
    (news / "doc_00004.txt").unlink()
    est, done = await index_and_estimate(news, settings, db)
    calls = paid(done.llm, "report")
    assert calls > 5 and asked(est, "report") == calls, (est["llm"], done.llm)
    tokens, actual = est["llm"]["by_stage"]["report"]["prompt_tokens"], done.llm["report"]["prompt_tokens"]
    assert actual / 1.25 <= tokens <= actual * 1.25, (tokens, actual)


async def test_chunks_published_again_after_an_offline_run_are_not_called_unpublished(ten_indexed, simulator):
    # A model index, updated offline (its graph now the offline extractor's), indexed with the
    # model again: the model's stored extractions go back in. The estimate said they were
    # "extracted by an earlier run, not yet published": they were, and then replaced.
    news, db, first = ten_indexed
    settings = make_settings(simulator.base_url)
    await sync([news], make_settings("", index={"extractor": "nlp"}), db, root=news)   # --offline
    est, done = await index_and_estimate(news, settings, db)
    assert done.chunks_extracted == 0 and first.chunks_extracted > 5
    assert est["chunks_unpublished"] == 0 and est["chunks_replacing"] == first.chunks_extracted
    text = format_estimate(est)
    assert "not yet published" not in text
    assert f"(and {first.chunks_extracted} extracted with these settings by an earlier run, to replace" in text
    # (all cached, the same answers: none paid, each counted from the cache as the run counts it)
    assert done.llm["report"]["cached"] > 0 and paid(est["llm"]["by_stage"], "report") == paid(done.llm, "report") \
        == 0, done.llm
    assert est["llm"]["by_stage"]["report"]["cached"] == done.llm["report"]["cached"], (est["llm"], done.llm)


async def test_a_model_run_after_an_offline_one_is_estimated_its_summaries_and_reports_from_the_cache(
        ten_indexed, simulator):
    # Model, then --offline, then the model: the run merges the model's stored extractions again
    # and asks the cache for every summary and report (the same requests). Its estimate worked
    # them out so too, then took a floor of the published descriptions, the offline extractor's:
    # summaries counted paid the run never asks (synth_small: 116, the run taking all 148 from
    # the cache), and the reports that might show them.
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    await sync([news], make_settings("", index={"extractor": "nlp"}), db, root=news)   # --offline
    est, done = await index_and_estimate(news, settings, db)
    for stage in ("summarize", "report"):
        got, ran = est["llm"]["by_stage"].get(stage, {}), done.llm.get(stage, {})
        assert ran.get("cached", 0) > 0 and paid(done.llm, stage) == 0, done.llm
        assert (got.get("calls", 0), got.get("cached", 0)) == (ran["calls"], ran["cached"]), (stage, got, ran)


async def test_a_model_estimate_of_an_index_built_offline_is_a_first_index_s(news, tmp_path, simulator):
    # A model run of an offline index merges the model's extraction of every chunk anew: a new
    # graph, clustered afresh. Its estimate worked it out as an update of the offline graph and
    # counted the offline partition's reports, unscaled to a model's (synth_small: 34 for the
    # run's 54, 260 summaries for 148); a first index's is scaled (41 and 174).
    settings, db = make_settings(simulator.base_url), tmp_path / "index.db"
    await sync([news], make_settings("", index={"extractor": "nlp"}), db, root=news)   # --offline
    first = estimate([news], settings, tmp_path / "first.db", root=news)
    est = estimate([news], settings, db, root=news)
    for stage in ("summarize", "report"):
        got, fresh = est["llm"]["by_stage"][stage], first["llm"]["by_stage"][stage]
        assert (got["calls"], got["prompt_tokens"]) == (fresh["calls"], fresh["prompt_tokens"]), (stage, got, fresh)


async def _killed_after_extractions(news: Path, settings, db: Path, monkeypatch, stored: int) -> int:
    """A model run of ``news`` stopped (as by Ctrl-C) once it has stored ``stored`` extractions:
    those stay stored, nothing is published. Returns the model's extractions stored: ``stored``
    or more, as the writer runs the rest of the batch the cancel lands in and the ops queued then
    (``Writer._loop``; 10 articles through the simulator, 3, 4 or 5 of 8 kills)."""
    import anyio

    real, saved = index_rows.save_extraction, []
    with anyio.CancelScope() as scope:
        def save(store, *args):
            real(store, *args)
            saved.append(args[0])
            if len(saved) >= stored:
                scope.cancel()
        monkeypatch.setattr(index_rows, "save_extraction", save)
        await sync([news], settings, db, root=news)
    monkeypatch.setattr(index_rows, "save_extraction", real)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        runs = conn.execute("SELECT status, kind FROM runs ORDER BY started_at").fetchall()
        (kept,) = conn.execute("SELECT count(*) FROM extractions WHERE extractor LIKE 'llm-%'").fetchone()
    assert scope.cancelled_caught and kept >= stored and runs[-1] == ("interrupted", "model"), \
        (runs, kept, saved)
    return kept


async def test_a_model_estimate_of_an_offline_index_a_killed_model_run_left_extractions_in_is_a_first_index_s(
        news, tmp_path, simulator, monkeypatch):
    # A model run of an offline index killed part-way leaves a few of the model's extractions
    # stored. The next model run still merges the model's extraction of every chunk and clusters
    # it afresh (no model run ended there: no model's summaries, reports or partition to go on
    # from), but its estimate took the extractions stored for a model's index's and worked it
    # out as an update of the offline partition (30 articles, 6 stored: 32 reports for the
    # run's 42, where a first index's estimate says 38).
    settings, db = make_settings(simulator.base_url), tmp_path / "index.db"
    await sync([news], make_settings("", index={"extractor": "nlp"}), db, root=news)   # --offline
    kept = await _killed_after_extractions(news, settings, db, monkeypatch, 3)
    first = estimate([news], settings, tmp_path / "first.db", root=news)
    est = estimate([news], settings, db, root=news)
    assert est["chunks_to_extract"] == first["chunks_to_extract"] - kept, (est["chunks_to_extract"], kept, first)
    for stage in ("summarize", "report"):
        got, fresh = est["llm"]["by_stage"][stage], first["llm"]["by_stage"][stage]
        assert (got["calls"], got["prompt_tokens"]) == (fresh["calls"], fresh["prompt_tokens"]), (stage, got, fresh)


async def test_a_model_estimate_of_an_offline_index_a_model_run_killed_as_it_reported_takes_the_cache(
        news, tmp_path, simulator, monkeypatch):
    # Killed later, as it wrote reports (every chunk's extraction stored, the summaries answered
    # and in the cache, a report stored): the next run takes those from the cache and the index.
    # Worked out as a first index (96dcbec), its estimate counted every summary and report again
    # (christmas_carol: 45 summaries and 18 reports for the run's 0 and 4).
    import anyio

    settings, db = make_settings(simulator.base_url), tmp_path / "index.db"
    await sync([news], make_settings("", index={"extractor": "nlp"}), db, root=news)   # --offline
    real = index_rows.save_report
    with anyio.CancelScope() as scope:
        def save(store, report):
            real(store, report)
            if not report.extractive:
                scope.cancel()
        monkeypatch.setattr(index_rows, "save_report", save)
        await sync([news], settings, db, root=news)
    monkeypatch.setattr(index_rows, "save_report", real)
    assert scope.cancelled_caught
    est = estimate([news], settings, db, root=news)
    assert est["chunks_to_extract"] == 0, est["chunks_to_extract"]
    await sync([news], settings, db, root=news)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (last,) = conn.execute("SELECT id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
        (paid,) = conn.execute("SELECT count(*) FROM llm_calls WHERE run_id = ? AND stage = 'summarize' AND "
                               "cached = 0", (last,)).fetchone()
    summarize = est["llm"]["by_stage"].get("summarize", {})
    assert summarize.get("calls", 0) - summarize.get("cached", 0) == paid, (est["llm"], paid)


def _parents_of_children_reports(db: Path) -> int:
    """The stored reports whose context holds sub-communities' reports (``build_context``)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return sum(1 for (elements,) in conn.execute("SELECT elements FROM reports")
                   if json.loads(elements).get("reports"))


async def test_a_parent_s_context_of_its_children_s_reports_is_estimated_from_the_reports_the_run_has(
        news, tmp_path, simulator):
    # A parent too large for its members' lines within index.report_max_input_tokens holds its
    # children's reports instead. The estimate built every context without them, so a parent's
    # was no stored report's nor one the cache answers: model, --offline, model again, 200
    # corpusgen documents were estimated 13 reports paid, the run paid none.
    index = {"report_max_input_tokens": 400}
    settings = make_settings(simulator.base_url, index=index)
    db = tmp_path / "index.db"
    await sync([news], settings, db, root=news)
    assert _parents_of_children_reports(db) > 0   # (what this test is about)
    await sync([news], make_settings("", index={**index, "extractor": "nlp"}), db, root=news)   # --offline
    est, done = await index_and_estimate(news, settings, db)
    got, ran = est["llm"]["by_stage"]["report"], done.llm["report"]
    assert ran["cached"] > 0 and paid(done.llm, "report") == 0, done.llm
    assert (got["calls"], got["cached"]) == (ran["calls"], ran["cached"]), (got, ran)


def _two_of_a_child_shown_by_its_parent(db: Path) -> list[str]:
    """The names of two people of a community whose report its parent's context holds (the
    first such child's by id that has two, the first two by name)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        for child in sorted(k for (elements,) in conn.execute("SELECT elements FROM reports")
                            for k in json.loads(elements).get("reports", [])):
            names = [n for (n,) in conn.execute(
                "SELECT e.name FROM community_members m JOIN entities e ON e.id = m.entity_id "
                "WHERE m.community_id = ? AND e.type = 'person' ORDER BY e.name LIMIT 2", (child,))]
            if len(names) == 2:
                return names
    raise AssertionError("no child community shown by its parent has two people")


@pytest.mark.parametrize("threshold", [0, 0.05])
async def test_a_parent_showing_a_child_s_report_the_model_writes_anew_is_counted_paid(news, tmp_path, simulator,
                                                                                      threshold):
    # A new file names two people of a child community whose report its parent's context holds
    # (index.report_max_input_tokens too small for the parent's lines): the model rewrites the
    # child's report, so the parent's context changes too. Its published report standing in for
    # the child's, the parent's context came out the stored one, and was counted kept: 1 report
    # for the run's 2. Under index.report_regen_threshold (0.05), the same: the parent's context
    # came out as close to its report's as could be, and was counted kept under the threshold;
    # the stand-in's line counts as changed, as the run's is.
    settings = make_settings(simulator.base_url,
                             index={"report_max_input_tokens": 400, "report_regen_threshold": threshold})
    db = tmp_path / "index.db"
    await sync([news], settings, db, root=news)
    (news / "new.txt").write_text("{} and {} met on Tuesday.\n".format(*_two_of_a_child_shown_by_its_parent(db)))
    est, done = await index_and_estimate(news, settings, db)
    assert paid(done.llm, "report") >= 2, done.llm
    assert asked(est, "report") == paid(done.llm, "report"), (est["llm"], done.llm)


def _a_person_of_the_largest_community(db: Path) -> str:
    """The name of a person of the index's largest community (the first by name)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT e.name FROM community_members m JOIN entities e ON e.id = m.entity_id "
                            "WHERE m.community_id = (SELECT id FROM communities ORDER BY size DESC, id LIMIT 1) "
                            "AND e.type = 'person' ORDER BY e.name LIMIT 1").fetchone()[0]


async def test_an_update_counts_no_report_the_run_keeps_under_report_regen_threshold(news, tmp_path, simulator):
    # A new file says a sentence of a person of the largest community: its sub-community's context
    # changes by more than index.report_regen_threshold, the large one's by less, and the run keeps
    # that one's report. The estimate ignored the threshold: 2 reports for the run's 1 (and a
    # deleted article of ten, threshold 0.2: 9 for the run's 5).
    settings = make_settings(simulator.base_url, index={"report_regen_threshold": 0.05})
    db = tmp_path / "index.db"
    await sync([news], settings, db, root=news)
    (news / "new.txt").write_text(f"{_a_person_of_the_largest_community(db)} spoke on Tuesday.\n")
    unkept = estimate([news], make_settings(simulator.base_url), db, root=news)   # (the threshold at 0)
    est, done = await index_and_estimate(news, settings, db)
    assert 1 <= paid(done.llm, "report") < asked(unkept, "report"), (unkept["llm"], done.llm)
    assert asked(est, "report") == paid(done.llm, "report"), (est["llm"], done.llm)


async def test_a_new_report_model_rewrites_every_model_report_under_report_regen_threshold(ten_indexed, simulator):
    # A new report model rewrites every report (README, and the run's own line says so),
    # whatever index.report_regen_threshold: the contexts' elements unchanged, each model report
    # was kept as close enough to its context, none of ten articles' 26 written, and, since the
    # estimate applies the threshold, none estimated.
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url, index={"report_regen_threshold": 0.1},
                             llm={"report_model": "gpt-4o"})
    est, done = await index_and_estimate(news, settings, db)
    assert paid(done.llm, "report") >= 10, done.llm
    assert asked(est, "report") == paid(done.llm, "report"), (est["llm"], done.llm)


async def test_an_offline_estimate_of_an_index_a_model_built_says_the_model_s_work_the_run_replaces(
        ten_indexed, caplog):
    # `index --offline --estimate` said "no LLM calls, no cost" alone, where the run first says
    # it throws the model's extraction, summaries and reports away: now the run's line, and its
    # counts under --json's model_work_replaced as `index --json` has them.
    import logging

    news, db, _ = ten_indexed
    offline = make_settings("", index={"extractor": "nlp"})
    with caplog.at_level(logging.WARNING, logger="streamrag.pipeline"):
        est, done = await index_and_estimate(news, offline, db)
    said = [r.getMessage() for r in caplog.records if "built with a model" in r.getMessage()]
    assert len(said) == 1 and done.model_work_replaced["reports"] > 0, said
    assert est["model_work_replaced"] == done.model_work_replaced and est["model_work_replaced_said"] == said[0]
    head, line = format_estimate(est).split("\n")[:2]
    assert head.startswith("Offline indexing: ") and line == f"{said[0][:1].upper()}{said[0][1:]}.", (head, line)
    again = estimate([news], offline, db, root=news)   # (an offline index now: nothing of a model's)
    assert again["model_work_replaced"] == {} and "built with a model" not in format_estimate(again)


async def test_an_offline_estimate_of_a_model_index_counts_the_chunks_the_run_keeps_live(ten_indexed):
    # The run counts the model's chunks that stay live after its scan (``index_rows.model_work``'s
    # live): a file gone, fewer; every file gone, no line. Its estimate counted every published
    # chunk: "extraction of 12 chunks" for the run's 10 (one of ten articles gone), and a line
    # for an emptied folder.
    news, db, _ = ten_indexed
    offline = make_settings("", index={"extractor": "nlp"})
    sorted(news.iterdir())[0].unlink()
    est = estimate([news], offline, db, root=news)
    gone = news.parent / "gone"
    gone.mkdir()
    for f in list(news.iterdir()):
        shutil.move(f, gone / f.name)
    none = estimate([news], offline, db, root=news)
    for f in list(gone.iterdir()):
        shutil.move(f, news / f.name)
    done = await sync([news], offline, db, root=news)
    replaced = done.model_work_replaced
    assert 0 < replaced["chunks"] and est["model_work_replaced"] == replaced, est["model_work_replaced"]
    assert none["model_work_replaced"] == {} and none["model_work_replaced_said"] == "", none


async def test_an_offline_run_of_a_model_index_counts_the_summaries_and_reports_of_what_stays_live(ten_indexed):
    # ``index_rows.model_work`` counted the chunks the run keeps live (888141b2) but the claims,
    # summaries and reports of the whole published index, the files gone's too. Now all of what
    # stays: nine of ten articles gone leave fewer replaced; all files there, every one.
    news, db, _ = ten_indexed
    offline = make_settings("", index={"extractor": "nlp"})
    with contextlib.closing(Store(db, readonly=True)) as store:
        whole = index_rows.model_work(store)
        everything = index_rows.model_work(store, {c for (c,) in store.conn.execute("SELECT chunk_id FROM live_chunks")})
    assert everything == whole and whole["summaries"] and whole["reports"], (everything, whole)
    for gone in sorted(news.iterdir())[1:]:   # (one article stays: a summary is of a name several say)
        gone.unlink()
    est = estimate([news], offline, db, root=news)
    done = await sync([news], offline, db, root=news)
    replaced = done.model_work_replaced
    assert est["model_work_replaced"] == replaced, (est["model_work_replaced"], replaced)
    assert replaced["chunks"] < whole["chunks"] and replaced["summaries"] < whole["summaries"], (replaced, whole)
    assert replaced["reports"] <= whole["reports"], (replaced, whole)



async def test_documents_are_counted_as_index_counts_them_a_copy_once(news, tmp_path, simulator):
    # Three files of one text are one document to `index`: the estimate said 12 for its 10.
    (news / "copy.txt").write_text((news / "doc_00003.txt").read_text())
    (news / "again.txt").write_text((news / "doc_00003.txt").read_text())
    settings = make_settings(simulator.base_url)
    est, done = await index_and_estimate(news, settings, tmp_path / "index.db")
    assert est["documents"] == done.documents == 10
    assert "Estimate for 10 documents" in format_estimate(est)


async def test_an_update_s_estimate_says_the_documents_it_works_on(ten_indexed, simulator):
    # Two articles added, one edited, one deleted of ten: the estimate said "Estimate for 11
    # documents", the whole folder, where the run works on four of them.
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    add_articles(news, 10, 12)
    edited = news / "doc_00005.txt"
    edited.write_text(edited.read_text().rstrip("\n") + " Katja Wexstad later left Port Ruvickton.\n")
    (news / "doc_00004.txt").unlink()
    est, done = await index_and_estimate(news, settings, db)
    # (the run counts an edited file as the estimate does)
    assert (est["documents_added"], est["documents_edited"], est["documents_removed"]) \
        == (done.documents_added, done.documents_edited, done.documents_removed) == (2, 1, 1)
    assert est["documents"] == done.documents == 11
    assert format_estimate(est).startswith(
        f"Estimate for 3 changed of 11 documents ({est['corpus_tokens']:,} tokens): 2 added, 1 edited, 1 removed; "
        f"{est['chunks_to_extract']} chunks to extract:")


async def test_an_unchanged_index_s_estimate_says_there_is_nothing_to_do(ten_indexed, simulator):
    # It printed "total 0 calls" and "answers, summaries and reports are estimated".
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    est, done = await index_and_estimate(news, settings, db)
    assert not done.published and llm_calls(done) == 0, done.llm
    assert est["llm"]["calls"] == 0
    text = format_estimate(est)
    assert text == f"Nothing to do: the index is up to date with 10 documents ({est['corpus_tokens']:,} tokens); " \
        "no LLM calls.", text
    # A file touched, its text the same: still nothing to do. One removed: the run works on it.
    (news / "doc_00003.txt").write_text((news / "doc_00003.txt").read_text())
    assert format_estimate(estimate([news], settings, db, root=news)).startswith("Nothing to do:")
    (news / "doc_00003.txt").unlink()
    text = format_estimate(estimate([news], settings, db, root=news))
    assert text.startswith("Estimate for an update of 9 documents ("), text
    assert "): 1 removed; 0 chunks to extract:" in text.splitlines()[0], text


def llm_calls(done) -> int:
    return sum(s["calls"] for s in done.llm.values())


async def test_extraction_prompts_of_stored_chunks_are_counted_in_the_encoding_asked(corpus, tmp_path, simulator):
    # `index DIR/council.txt` after index.encoding changed: the other documents' chunks are
    # extracted from the index, their stored token counts cl100k_base's. A prompt counted
    # around its chunk from that count was one token short of the run's.
    db, small = tmp_path / "index.db", {"chunk_size": 80, "chunk_overlap": 10}
    await sync([corpus], make_settings(index={"extractor": "nlp", "encoding": "cl100k_base", **small}), db, root=corpus)
    settings = make_settings(simulator.base_url, index=small)
    est = estimate([corpus / "council.txt"], settings, db, root=corpus)
    done = await sync([corpus / "council.txt"], settings, db, root=corpus)
    assert est["llm"]["by_stage"]["extract"]["calls"] == paid(done.llm, "extract") == 11
    assert est["llm"]["by_stage"]["extract"]["prompt_tokens"] == done.llm["extract"]["prompt_tokens"]


async def test_stored_chunks_are_not_counted_again_where_their_count_is_of_the_encoding_asked(
        corpus, tmp_path, simulator, monkeypatch):
    # An offline index extracted again with a model: each stored chunk's count is of the run's
    # encoding (``chunks.encoding``), and the estimate took it rather than count every chunk
    # again (3,818 chunks of an index of 3,000 documents, 0.8 s of CPU). Its prompts are still
    # those of the run.
    db, small = tmp_path / "index.db", {"chunk_size": 80, "chunk_overlap": 10}
    await sync([corpus], make_settings(index={"extractor": "nlp", **small}), db, root=corpus)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        stored = {text for (text,) in conn.execute("SELECT text FROM chunks")}
    import streamrag.tokens
    counted: list[str] = []   # (every text counted whole: index_rows._in_encoding's, the prompts')
    real = streamrag.tokens.count_tokens

    def count_tokens(text, encoding="o200k_base"):
        counted.append(text)
        return real(text, encoding)

    monkeypatch.setattr(streamrag.tokens, "count_tokens", count_tokens)
    settings = make_settings(simulator.base_url, index=small)
    est = estimate([corpus], settings, db, root=corpus)
    assert est["chunks_to_extract"] == len(stored) > 1
    assert not stored & set(counted)
    done = await sync([corpus], settings, db, root=corpus)
    assert est["llm"]["by_stage"]["extract"]["calls"] == paid(done.llm, "extract")
    assert est["llm"]["by_stage"]["extract"]["prompt_tokens"] == done.llm["extract"]["prompt_tokens"]


def test_an_estimate_of_one_document_and_one_chunk_says_them_in_the_singular(tmp_path):
    # (It printed "1 documents, 10 tokens, 1 chunks to extract".)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("Ada Osk met Bob Tan on the quay.\n")
    settings = make_settings()   # no endpoint: offline
    text = format_estimate(estimate([tmp_path / "d"], settings, tmp_path / "e.db", root=tmp_path / "d"))
    assert text.startswith("Offline indexing: 1 document, ") and ", 1 chunk to extract;" in text, text


async def test_an_estimate_of_a_subfolder_leaves_out_what_index_exclude_names_from_the_indexed_folder(tmp_path):
    # `index DIR/Archive --estimate` into DIR's index: "Archive/old" is a path from DIR, as the
    # run reads it (the estimate read it from Archive, and counted Archive/old as to extract).
    for rel, text in (("Archive/old/a.md", "Alice met Bob in Paris."), ("Archive/new/b.md", "Carol met Dave.")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    settings = make_settings(index={"extractor": "nlp", "exclude": ["Archive/old"]})
    est = estimate([tmp_path / "Archive"], settings, tmp_path / "index.db", root=tmp_path)
    assert est["documents"] == 1


@pytest.mark.parametrize("given", ["folder", "file"])
async def test_a_folder_it_cannot_search_counts_the_documents_the_run_keeps(corpus, tmp_path, monkeypatch, given):
    # `chmod a-x sub` after its file was indexed: the run keeps all 4 documents; the estimate
    # said 3 (`index DIR`), or 1 (`index DIR/council.txt`), and counted guild.txt as deleted.
    settings = make_settings(index={"chunk_size": 80, "chunk_overlap": 10, "extractor": "nlp"})
    (corpus / "sub").mkdir()
    (corpus / "guild.txt").rename(corpus / "sub" / "guild.txt")
    db = tmp_path / "x.db"
    first = await sync([corpus], settings, db, root=corpus)
    unsearchable(monkeypatch, corpus / "sub")
    paths = [corpus] if given == "folder" else [corpus / "council.txt"]
    est = estimate(paths, settings, db, root=corpus)
    done = await sync(paths, settings, db, root=corpus)
    assert est["documents"] == done.documents == first.documents == 4
    text = format_estimate(est)
    assert text.startswith("Offline indexing: 4 documents, "), text
    if given == "folder":
        assert est["unreadable_files"] == est["unreadable_kept"] == 1
        assert text.endswith("\n1 file could not be read (what was indexed from it stays, counted); "
                             "the warnings name it"), text


async def test_rows_as_indexed_without_the_text_field_named_now_are_counted_as_the_run_keeps_them(tmp_path):
    # index.text_field renamed to a field one untouched .jsonl lacks: the run keeps its 3
    # documents (said as kept); the estimate said 2 documents, the file "not counted".
    import json
    folder = tmp_path / "rows"
    folder.mkdir()
    (folder / "old.jsonl").write_text("".join(
        json.dumps({"body": f"Mara Lind{i} runs the Harbor Council {i}."}) + "\n" for i in range(3)))
    (folder / "both.jsonl").write_text("".join(
        json.dumps({"body": f"Ada Osk{i} runs the Quay {i}.", "text": f"Bob Lin{i} sails to Harlow {i}."}) + "\n"
        for i in range(2)))
    db = tmp_path / "index.db"
    await sync([folder], make_settings(index={"extractor": "nlp", "text_field": "body"}), db, root=folder)
    settings = make_settings(index={"extractor": "nlp", "text_field": "text"})
    est = estimate([folder], settings, db, root=folder)
    done = await sync([folder], settings, db, root=folder)
    assert est["documents"] == done.documents == 5
    assert est["unreadable_files"] == est["unreadable_kept"] == 1
    assert "(what was indexed from it stays, counted)" in format_estimate(est)
    # Edited since: the run reads it, finds no such field, and drops it; so does the estimate.
    (folder / "old.jsonl").write_text((folder / "old.jsonl").read_text() + json.dumps({"body": "Cora Vey."}) + "\n")
    est = estimate([folder], settings, db, root=folder)
    done = await sync([folder], settings, db, root=folder)
    assert est["documents"] == done.documents == 2
    assert (est["unreadable_files"], est["unreadable_kept"]) == (1, 0)


@pytest.mark.parametrize("given", ["file", "unreadable"])
async def test_the_documents_a_run_keeps_unread_cost_the_extractions_it_makes_of_them(corpus, tmp_path, simulator,
                                                                                    monkeypatch, given):
    # Another llm.extraction_model, then `index DIR/council.txt` (or a file unreadable now): the
    # run extracts every kept document's chunks anew; the estimate counted those of the file alone.
    small = {"chunk_size": 80, "chunk_overlap": 10}
    db = tmp_path / "x.db"
    first = await sync([corpus], make_settings(simulator.base_url, index=small), db, root=corpus)
    settings = make_settings(simulator.base_url, index=small, llm={"extraction_model": "other-model"})
    if given == "file":
        paths = [corpus / "council.txt"]
    else:
        paths = [corpus]
        (corpus / "sub").mkdir()
        (corpus / "guild.txt").rename(corpus / "sub" / "guild.txt")
        await sync(paths, make_settings(simulator.base_url, index=small), db, root=corpus)   # (moved: no call)
        unsearchable(monkeypatch, corpus / "sub")
    est = estimate(paths, settings, db, root=corpus)
    done = await sync(paths, settings, db, root=corpus)
    assert est["documents"] == done.documents == first.documents
    assert est["chunks_to_extract"] == done.chunks_extracted == first.chunks
    assert est["llm"]["by_stage"]["extract"]["calls"] == paid(done.llm, "extract") == first.chunks


async def test_an_estimate_says_why_every_file_is_read_again(tmp_path):
    # After an upgrade whose loader reads Markdown differently, an untouched vault's estimate
    # had 124 of 153 chunks to extract and no word of why (the run says it only once it starts).
    import sqlite3

    from streamrag import chunker, ids, loader

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text("# Ada Osk\n\nAda Osk met Bob Tan on the quay.\n")
    settings = make_settings()   # offline
    db = tmp_path / "index.db"
    await sync([tmp_path / "d"], settings, db, root=tmp_path / "d")
    est = estimate([tmp_path / "d"], settings, db, root=tmp_path / "d")
    assert est["read_again_because"] == "" and "read and chunked again" not in format_estimate(est)
    ix = settings.index
    earlier = ids.digest(chunker.VERSION, ix.chunk_size, ix.chunk_overlap, ix.encoding,
                         str(int(loader.VERSION) - 1), ix.text_field, length=12)
    conn = sqlite3.connect(db)
    with conn:   # as an index an earlier loader read holds it
        conn.execute("UPDATE meta SET value = ? WHERE key = 'chunker'", (earlier,))
        conn.execute("DELETE FROM meta WHERE key = 'chunker_settings'")
    conn.close()
    est = estimate([tmp_path / "d"], settings, db, root=tmp_path / "d")
    said = "streamrag was upgraded since this index was built and reads documents differently"
    assert est["read_again_because"] == said
    assert format_estimate(est).splitlines()[1] == f"Every file is read and chunked again: {said}."
    with_model = dict(est, offline=False)
    assert format_estimate(with_model).splitlines()[-1] == f"Every file is read and chunked again: {said}."
    # (not 'Nothing to do' above it: the run reads every file again and publishes what it read)
    assert format_estimate(with_model).splitlines()[0].startswith("Estimate for an update of 1 document")


async def test_a_scoped_estimate_says_only_the_files_given_are_read_again(tmp_path):
    # `index d/a.md --estimate` after a chunking setting changed reads and recuts a.md alone (b.md
    # keeps its chunks until a run covers it), yet said "Every file is read and chunked again".
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text("# Ada Osk\n\nAda Osk met Bob Tan on the quay.\n")
    (tmp_path / "d" / "b.md").write_text("# Cy Dunn\n\nCy Dunn sailed to Oslo with Ada Osk.\n")
    settings = make_settings()   # offline
    db = tmp_path / "index.db"
    await sync([tmp_path / "d"], settings, db, root=tmp_path / "d")
    settings.index.chunk_size //= 2
    said = f"index.chunk_size is now {settings.index.chunk_size} (was {settings.index.chunk_size * 2})"
    scoped = estimate([tmp_path / "d" / "a.md"], settings, db, root=tmp_path / "d")
    assert f"The files given are read and chunked again: {said}." in format_estimate(scoped).splitlines()
    assert scoped["read_again_because"] == said and scoped["read_again_given_only"], scoped["read_again_because"]
    whole = estimate([tmp_path / "d"], settings, db, root=tmp_path / "d")
    assert whole["read_again_because"] == said and not whole["read_again_given_only"]
    assert f"Every file is read and chunked again: {said}." in format_estimate(whole).splitlines()


TRUST_CLAIM = "claim | Old Quay Trust | NONE | CONTRACT | TRUE | NONE | NONE | The trust paid Ada Osk. | paid"


async def trust_claimed(tmp_path: Path) -> tuple[Settings, Path]:
    """A note (``tmp_path/d``) indexed with claims on, its claims call answered ``TRUST_CLAIM``:
    the settings and the index."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text("Ada Osk met Bob Tan on the quay of Port Vell.\n")
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    db = tmp_path / "index.db"
    await sync([tmp_path / "d"], settings, db, root=tmp_path / "d", transport=claims_answered(TRUST_CLAIM))
    return settings, db


def strand_the_trust(db: Path) -> str:
    """Makes the index ``trust_claimed`` built as an index merged before a claim's ends were made
    entities holds it: the claim's subject no entity, no claim_ends mark. The trust's id."""
    trust = ids.entity_id("Old Quay Trust")
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DELETE FROM entities WHERE id = ?", (trust,))
        conn.execute("DELETE FROM entity_sources WHERE entity_id = ?", (trust,))
        conn.execute("DELETE FROM meta WHERE key = 'claim_ends'")
    return trust


async def test_an_estimate_says_the_chunks_with_claims_about_no_entity_are_merged_again(tmp_path):
    # An index merged before a claim's ends were made entities is merged again where such claims
    # are, once (GraphState.stranded): the estimate said "Nothing to do" of that run.
    settings, db = await trust_claimed(tmp_path)
    est = estimate([tmp_path / "d"], settings, db, root=tmp_path / "d")
    assert est["chunks_merged_again"] == 0 and format_estimate(est).startswith("Nothing to do")
    strand_the_trust(db)
    est = estimate([tmp_path / "d"], settings, db, root=tmp_path / "d")
    assert est["chunks_merged_again"] == 1
    assert format_estimate(est).splitlines()[-1] == (
        "1 chunk holding claims about names that are no entity is merged again from the extractions "
        "stored, once (no LLM call), to make those names entities.")
    # A chunk that leaves with its file's edit is merged as the run's new chunks are, not again
    # (``GraphState.apply``): it was counted all the same.
    (tmp_path / "d" / "a.md").write_text("Ada Osk met Bob Tan on the quay of Port Vell at dawn.\n")
    est = estimate([tmp_path / "d"], settings, db, root=tmp_path / "d")
    assert est["chunks_merged_again"] == 0 and "merged again" not in format_estimate(est)


async def test_an_old_index_s_stranded_claims_are_looked_for_once_by_a_run_and_by_its_estimate(
        tmp_path, monkeypatch):
    # An index merged before a claim's ends were made entities (no claim_ends mark): the query
    # for its chunks holding claims about no entity ran twice per run, for the published
    # bookkeeping (GraphState.unread) and again for the graph (GraphState.load), and twice per
    # estimate of an update.
    settings, db = await trust_claimed(tmp_path)
    trust = strand_the_trust(db)
    (tmp_path / "d" / "b.md").write_text("Cy Dunn sailed from Port Vell to Lisbon.\n")
    asked = []
    real = index_rows.stranded_claim_chunks
    monkeypatch.setattr(index_rows, "stranded_claim_chunks", lambda store: asked.append(1) or real(store))
    est = estimate([tmp_path / "d"], settings, db, root=tmp_path / "d")
    assert est["chunks_merged_again"] == 1 and len(asked) == 1, asked
    asked.clear()
    await sync([tmp_path / "d"], settings, db, root=tmp_path / "d", transport=claims_answered(TRUST_CLAIM))
    assert len(asked) == 1, asked
    with contextlib.closing(Store(db, readonly=True)) as store:
        assert store.get_meta("claim_ends") and trust in {eid for eid, *_ in index_rows.entity_rows(store)}
    asked.clear()   # (marked: never again)
    await sync([tmp_path / "d"], settings, db, root=tmp_path / "d", transport=claims_answered(TRUST_CLAIM))
    assert estimate([tmp_path / "d"], settings, db, root=tmp_path / "d")["chunks_merged_again"] == 0
    assert asked == []


async def test_an_estimate_says_why_every_chunk_is_extracted_again(tmp_path, simulator):
    # A new extraction model (or prompt, entity types, gleaning, claims) read as "62 chunks to
    # extract" of an unchanged folder: only the run, once started, said the settings changed.
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text("Ada Osk met Bob Tan on the quay of Port Vell.\n")
    db = tmp_path / "index.db"
    built = make_settings(simulator.base_url)
    await sync([tmp_path / "d"], built, db, root=tmp_path / "d")
    est = estimate([tmp_path / "d"], built, db, root=tmp_path / "d")
    assert est["extracted_again_because"] == "" and "extracted again" not in format_estimate(est)
    for changed in (make_settings(simulator.base_url, llm={"extraction_model": "other-model"}),
                    make_settings(simulator.base_url, index={"entity_types": ["person", "geo"]})):
        est = estimate([tmp_path / "d"], changed, db, root=tmp_path / "d")
        assert est["chunks_to_extract"] == 1
        said = ("the extraction settings (model, prompt, entity types, gleaning or claims) changed since "
                "this index was built; answers in the cache cost nothing")
        assert est["extracted_again_because"] == said
        assert format_estimate(est).splitlines()[-1] == f"Every chunk is extracted again: {said}."


async def test_extraction_settings_changed_back_are_said_to_extract_no_chunk(tmp_path, simulator):
    # A new extraction model, then the first one back: each chunk's extraction with the first
    # is stored and taken, none extracted, but the run said "every chunk is extracted again",
    # and the estimate "0 chunks to extract" beside "Every chunk is extracted again".
    from streamrag.pipeline import Indexer

    (tmp_path / "d").mkdir()
    for name, text in (("a.md", "Ada Osk met Bob Tan on the quay of Port Vell.\n"),
                       ("b.md", "Cleo Marr sailed from Port Vell to Lisbon with Dov Park.\n")):
        (tmp_path / "d" / name).write_text(text)
    db = tmp_path / "index.db"
    first = make_settings(simulator.base_url)
    other = make_settings(simulator.base_url, llm={"extraction_model": "other-model"})
    await sync([tmp_path / "d"], first, db, root=tmp_path / "d")
    await sync([tmp_path / "d"], other, db, root=tmp_path / "d")
    est = estimate([tmp_path / "d"], first, db, root=tmp_path / "d")
    assert est["chunks_to_extract"] == 0 and est["extracted_again_because"], est
    text = format_estimate(est)
    assert "Every chunk is extracted again" not in text, text
    assert f"No chunk is extracted again (the extraction of each with these settings is stored): " \
        f"{est['extracted_again_because']}." in text.splitlines(), text
    said: list[str] = []
    done = await Indexer(first, db, root=tmp_path / "d", say=said.append).run([tmp_path / "d"])
    assert done.chunks_extracted == 0 and "extraction" in done.settings_changed, done
    assert len(said) == 1 and "no chunk is extracted again (the extraction of each with these settings is " \
        "stored)" in said[0] and "every chunk" not in said[0], said
    # One file's chunk extracted with the other model alone: that one is extracted again, said so.
    (tmp_path / "d" / "b.md").write_text("Cleo Marr sailed from Port Vell to Genoa with Dov Park.\n")
    await sync([tmp_path / "d"], other, db, root=tmp_path / "d")
    # (the estimate said "Every chunk is extracted again" of it, beside "1 chunk to extract")
    est = estimate([tmp_path / "d"], first, db, root=tmp_path / "d")
    assert est["chunks_to_extract"] == 1, est
    assert "1 of 2 chunks is extracted again (the others' extractions with these settings are stored): " \
        f"{est['extracted_again_because']}." in format_estimate(est).splitlines(), format_estimate(est)
    said.clear()
    done = await Indexer(first, db, root=tmp_path / "d", say=said.append).run([tmp_path / "d"])
    assert done.chunks_extracted == 1, done
    assert len(said) == 1 and "1 of 2 chunks is extracted again (the others' extractions with these " \
        "settings are stored" in said[0], said


async def test_a_file_with_only_a_new_status_change_time_is_estimated_as_one_unchanged(ten_indexed, simulator):
    # After llm.extraction_model changed, a file as indexed (not read: its chunks the index's
    # backlog) stood in with the offline extractor's names, as a file of no name; the same file
    # chmod'ed (read again: a new ctime) with what the model said of it before. Ten articles:
    # 35 summaries and 26 reports, or 27 and 24 with one file chmod'ed (now 0 and 7 either way).
    news, db, _ = ten_indexed
    other = make_settings(simulator.base_url, llm={"extraction_model": "other-model"})

    def figures() -> dict:
        est = estimate([news], other, db, root=news)
        return {stage: asked(est, stage) for stage in ("extract", "summarize", "report")}

    unchanged = figures()
    os.chmod(sorted(news.iterdir())[0], 0o600)   # (a new status-change time, the text as it was)
    assert figures() == unchanged
    assert unchanged["extract"] > 10
    # ... and the tokens it prices are those the run then books: the extraction prompts exactly
    # (counted as sent), the extraction, check and gleaning tokens together within 10% and each
    # stage's within 25% (the answers' lengths and the gleaning rate are fixed ratios here; seen:
    # 47,292 estimated for the run's 48,675 booked, -3%; the gleanings' completions 2,942 for
    # 3,580). Not its reports: the simulator answers the new model as it answered the old, so the
    # run merges the records as they were and asks for none, where a model naming otherwise
    # would (the estimate counts 7).
    est = estimate([news], other, db, root=news)
    done = await sync([news], other, db, root=news)
    booked = {stage: paid(done.llm, stage) for stage in ("extract", "glean_check", "glean")}
    assert booked["extract"] == unchanged["extract"] and booked["glean"] > 0, done.llm
    by_stage = est["llm"]["by_stage"]
    assert by_stage["extract"]["prompt_tokens"] == done.llm["extract"]["prompt_tokens"]
    for kind in ("prompt_tokens", "completion_tokens"):
        for stage in booked:
            assert off_by(by_stage[stage][kind], done.llm[stage][kind]) < 0.25, (stage, kind, by_stage, done.llm)
    tokens = sum(by_stage[stage][kind] for stage in booked for kind in ("prompt_tokens", "completion_tokens"))
    spent = sum(done.llm[stage][kind] for stage in booked for kind in ("prompt_tokens", "completion_tokens"))
    assert off_by(tokens, spent) < 0.10, (tokens, spent)


async def test_claims_turned_on_are_said_asked_of_every_chunk_not_extracted_again(tmp_path, simulator):
    # index.extract_claims turned on for an index built without: the run keeps each chunk's
    # stored extraction and asks its claims call alone (ExtractionStage.claims_only), but the
    # estimate and the run said "every chunk is extracted again".
    from streamrag.pipeline import Indexer

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text("Ada Osk met Bob Tan on the quay of Port Vell.\n")
    db = tmp_path / "index.db"
    await sync([tmp_path / "d"], make_settings(simulator.base_url), db, root=tmp_path / "d")
    claims = make_settings(simulator.base_url, index={"extract_claims": True})
    est = estimate([tmp_path / "d"], claims, db, root=tmp_path / "d")
    why = "index.extract_claims was turned on since this index was built; answers in the cache cost nothing"
    assert est["extracted_again_because"] == "" and est["claims_asked_because"] == why, est
    assert f"Every chunk is asked for its claims (its entities and relationships as extracted): {why}." \
        in format_estimate(est).splitlines()
    # (claims are in the report settings, as reports show them: the run says reports too)
    assert format_estimate(est).splitlines()[-1].startswith("Reports are written again where their context changed")
    assert est["chunks_claims_only"] == est["chunks_to_extract"] == 1   # (as the head line says it)
    assert "1 chunk to extract (each only asked for its claims):" in format_estimate(est).splitlines()[0]
    said: list[str] = []
    done = await Indexer(claims, db, root=tmp_path / "d", say=said.append).run([tmp_path / "d"])
    assert set(done.llm) == {"claims"} and "extraction" in done.settings_changed, done.llm   # (what is said)
    assert len(said) == 1 and "every chunk is asked for its claims (its entities and relationships as " \
        "extracted; answers in the cache cost nothing)" in said[0] and "extracted again" not in said[0], said
    assert est["reported_again"] in said[0] and "report" in done.settings_changed, said
    est = estimate([tmp_path / "d"], make_settings(simulator.base_url), db, root=tmp_path / "d")
    assert est["claims_asked_because"] == "" and est["extracted_again_because"]   # (turned off again: extracted)


async def test_with_the_cache_off_no_answer_is_counted_from_it(tmp_path, simulator):
    # llm.cache = false: the run looks up no answer and pays for every call, but the estimate
    # counted the cache's answers free: "5 first extraction answers are in the cache, from an
    # earlier run: not counted; so are 9 gleaning answers" and 7 calls (the reports) of a run
    # that paid 21 (claims turned off: every chunk extracted again, its answers in the cache),
    # and said "answers in the cache cost nothing", as the run did.
    from streamrag.pipeline import Indexer

    docs = news_copy(tmp_path, 4)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"extract_claims": True}), db, root=docs)
    off = make_settings(simulator.base_url, llm={"cache": False})
    assert estimate([docs], make_settings(simulator.base_url), db, root=docs)["llm"]["cached"] > 0   # (held)
    est = estimate([docs], off, db, root=docs)
    said: list[str] = []   # (nor does the run say them free)
    done = await Indexer(off, db, root=docs, say=said.append).run([docs])
    assert done.llm["extract"]["cached"] == 0 and paid(done.llm, "extract") == done.chunks_extracted > 0, done.llm
    assert est["llm"]["cached"] == 0 and "in the cache" not in format_estimate(est), format_estimate(est)
    # (the cache's answers still foretell the graph: its summaries and reports as the run's)
    for stage in ("extract", "glean_check", "glean", "claims", "summarize", "report"):
        assert asked(est, stage) == paid(done.llm, stage), (stage, est["llm"], done.llm)
    assert est["llm"]["by_stage"]["extract"]["prompt_tokens"] == done.llm["extract"]["prompt_tokens"]
    assert said and not [line for line in said if "in the cache" in line], said


def completion(stats: dict, stages: tuple[str, ...] = ("extract", "glean_check", "glean")) -> int:
    return sum(stats.get(stage, {}).get("completion_tokens", 0) for stage in stages)


def off_by(estimated: float, paid: float) -> float:
    return abs(estimated - paid) / paid


async def test_an_update_takes_completion_lengths_and_the_gleaning_rate_from_the_index_s_own_calls(
        tmp_path, simulator, monkeypatch):
    # An upgrade tester's index said yes to every gleaning check, ~1,190 tokens per extraction
    # answer: the estimate, from fixed ratios (half the chunks gleaned, an answer 0.4 of its
    # chunk), had completion tokens 6 times under the run's, gleanings 62 for 124. (Here the
    # simulator's check, of chunks this short, says yes to about one in 15, its answers 300 tokens.)
    from streamrag import index_rows
    docs = news_copy(tmp_path, 30)
    articles = sorted(NEWS.glob("doc_*.txt"))
    settings = make_settings(simulator.base_url, index={"chunk_size": 300})
    db = tmp_path / "index.db"
    first = await sync([docs], settings, db, root=docs)
    assert paid(first.llm, "extract") >= 20
    with sqlite3.connect(db) as conn:   # (the gleanings, 11, too few to measure theirs by)
        # (the gleaning rate: every check and gleaning answered, cache hits too)
        calls = conn.execute("SELECT count(*) FROM llm_calls WHERE error IS NULL AND cancelled = 0 AND ("
                             "cached = 0 AND stage IN ('extract', 'summarize', 'report') OR "
                             "stage IN ('glean_check', 'glean'))").fetchone()[0]
    conn.close()
    for doc in articles[30:]:
        (docs / doc.name).write_text(doc.read_text())
    est = estimate([docs], settings, db, root=docs)
    with monkeypatch.context() as m:   # the same index, its history left unread: the fixed ratios
        m.setattr(index_rows, "call_history", lambda store: {})
        m.setattr(index_rows, "gleaning_rounds", lambda store, key: {})
        fixed = estimate([docs], settings, db, root=docs)
    done = await sync([docs], settings, db, root=docs)
    assert est["chunks_to_extract"] == fixed["chunks_to_extract"] == paid(done.llm, "extract") >= 8
    gleaned = paid(done.llm, "glean")
    # (measured: 8 gleanings of the first run's 186 chunks, 3.3 of the 77 new ones, where the run
    # made 5: a share measured on 8 yeses is known to about a third of itself, and the
    # simulator's check says yes to a chunk of more than 15 names, which no rate foresees. So
    # within two calls, the noise of such a count; the fixed share said 54.)
    assert off_by(asked(fixed, "glean"), gleaned) > 0.25 and abs(asked(est, "glean") - gleaned) <= 2, \
        (asked(fixed, "glean"), asked(est, "glean"), gleaned)
    tokens = completion(done.llm)
    # (the fixed ratios, measured on longer chunks, come within a quarter here too: closer measured)
    assert off_by(completion(est["llm"]["by_stage"]), tokens) <= 0.25, (est["llm"], tokens)
    assert off_by(completion(est["llm"]["by_stage"]), tokens) < off_by(completion(fixed["llm"]["by_stage"]), tokens)
    # (reports: ~830 tokens an answer, close to the fixed 800; measured, they stay close)
    assert off_by(est["llm"]["by_stage"]["report"]["completion_tokens"], done.llm["report"]["completion_tokens"]) <= 0.25
    said = (f"Completion lengths, the gleaning rate, gleaning prompt lengths and summary prompt lengths "
            f"from this index's {calls:,} earlier calls; the rest from stand-in ratios.")
    assert said in format_estimate(est) and est["ratios_calls"] == calls
    assert "earlier calls" not in format_estimate(fixed) and fixed["ratios_from"] == ""
    # Said when every figure is a stand-in (the history unread: as on a first index), not else.
    assert fixed["stand_in_ratios"] and not est["stand_in_ratios"]
    assert format_estimate(fixed).endswith(
        "reports are estimated, from stand-in ratios (no history of these models in this index yet).")
    assert "estimated, from stand-in ratios" not in format_estimate(est)


async def test_the_calls_folded_into_the_archive_still_measure_the_ratios(ten_indexed, simulator):
    import time

    from streamrag import index_rows
    from streamrag.store import Store
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    (news / "extra.txt").write_text((NEWS / "doc_00040.txt").read_text())
    before = estimate([news], settings, db, root=news)
    store = Store(db)
    try:
        history = index_rows.call_history(store)
        with store.conn:
            index_rows.prune(store, 1, time.time() + 3 * 86400)
        assert store.scalar("SELECT count(*) FROM llm_calls") == 0
        assert index_rows.call_history(store) == history
    finally:
        store.close()
    after = estimate([news], settings, db, root=news)
    assert after["ratios_from"] == before["ratios_from"] != ""
    assert after["llm"]["by_stage"]["glean"] == before["llm"]["by_stage"]["glean"]


def test_the_archive_measures_the_usable_answers_alone_as_llm_calls_does(tmp_path):
    # Unusable answers (a report cut off at its budget) and cancelled calls are paid for, but
    # the history measures answers by the usable ones: folded into the archive, their tokens
    # were summed in with the usable calls' count, a report 2,950 tokens, 800 before ``prune``.
    import time

    from streamrag import index_rows
    from streamrag.store import Store
    store = Store(tmp_path / "index.db")
    old = time.time() - 10
    try:
        with store.conn:
            for i, (tokens, error, cancelled) in enumerate([(800, None, 0)] * 20 + [(4000, "unusable answer", 0)] * 10
                                                           + [(3000, "cancelled", 1), (0, "HTTP 500", 0)]):
                store.record_call(dict(run_id="r", stage="report", model="m", prompt="p", prompt_version="1",
                                       cache_key=f"k{i}", prompt_tokens=1000, completion_tokens=tokens,
                                       latency_ms=1, cached=0, error=error, cancelled=cancelled, created_at=old))
            store.record_call(dict(run_id="r", stage="report", model="m", prompt="p", prompt_version="1",
                                   cache_key="k0", prompt_tokens=1000, completion_tokens=800, latency_ms=1,
                                   cached=1, error=None, created_at=old))
        history = index_rows.call_history(store)
        assert history == {("report", "m"): (21, 20, 20_000, 16_000)}
        with store.conn:
            index_rows.prune(store, 1, time.time() + 3 * 86400)
        assert store.scalar("SELECT count(*) FROM llm_calls") == 0
        assert index_rows.call_history(store) == history
        # (status counts every call paid for, as before)
        usage = {r["stage"]: r for r in index_rows.usage_rows(store)}["report"]
        assert (usage["calls"], usage["completion_tokens"], usage["errors"], usage["cancelled"]) == \
            (33, 59_000, 11, 1)
    finally:
        store.close()


async def test_the_figures_of_a_stage_the_run_does_not_ask_are_not_said_measured(ten_indexed, simulator):
    # With index.max_gleanings 0 the estimate counted no gleaning, yet said "the gleaning rate,
    # gleaning prompt lengths ... from this index's 327 earlier calls", the checks counted in
    # (and with index.glean_check off, "the gleaning rate", no check asked).
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    (news / "extra.txt").write_text((NEWS / "doc_00040.txt").read_text())
    with sqlite3.connect(db) as conn:   # (twenty calls more of each, as a larger index has)
        conn.executemany(
            "INSERT INTO llm_calls(run_id, stage, model, prompt, prompt_version, cache_key, prompt_tokens, "
            "completion_tokens, latency_ms, cached, error, created_at) VALUES ('r', ?, ?, 'p', '1', 'k', 900, ?, "
            "1, 0, NULL, 0)", [(stage, settings.llm.extraction_model, tokens)
                               for stage, tokens in (("extract", 300), ("glean_check", 1), ("glean", 120))
                               for _ in range(20)])
        calls = dict(conn.execute("SELECT stage, count(*) FROM llm_calls WHERE error IS NULL AND cached = 0 "
                                  "GROUP BY stage").fetchall())
    conn.close()
    assert min(calls[s] for s in ("extract", "glean_check", "glean")) >= 20

    def measured_on(*stages: str) -> int:
        return sum(calls.get(s, 0) for s in stages if calls.get(s, 0) >= 20)
    every = estimate([news], settings, db, root=news)
    assert "the gleaning rate" in every["ratios_from"] and every["ratios_calls"] == measured_on(
        "extract", "glean_check", "glean", "summarize", "report")
    none = estimate([news], make_settings(simulator.base_url, index={"max_gleanings": 0}), db, root=news)
    assert "glean" not in none["llm"]["by_stage"]
    assert none["ratios_from"].startswith("Completion lengths") and "gleaning" not in none["ratios_from"]
    assert none["ratios_calls"] == measured_on("extract", "summarize", "report")
    unchecked = estimate([news], make_settings(simulator.base_url, index={"glean_check": "off"}), db, root=news)
    assert "glean_check" not in unchecked["llm"]["by_stage"] and "the gleaning rate" not in unchecked["ratios_from"]


async def test_answers_measured_on_smaller_chunks_are_scaled_to_the_chunks_now(tmp_path, simulator):
    # index.chunk_size 200, then 1200: every document cut again, each extraction answer longer.
    # Taken per call from the 200-token chunks' answers, the completion tokens were estimated
    # 12,255 for 33,711 paid.
    docs = news_copy(tmp_path)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"chunk_size": 200, "chunk_overlap": 20}),
               db, root=docs)
    settings = make_settings(simulator.base_url, index={"chunk_size": 1200})
    est = estimate([docs], settings, db, root=docs)
    done = await sync([docs], settings, db, root=docs)
    assert "Completion lengths" in est["ratios_from"]
    assert est["llm"]["by_stage"]["extract"]["calls"] == paid(done.llm, "extract") >= 20
    assert off_by(est["llm"]["by_stage"]["extract"]["completion_tokens"], done.llm["extract"]["completion_tokens"]) \
        <= 0.25, (est["llm"]["by_stage"]["extract"], done.llm["extract"])


def test_a_stage_with_too_few_calls_or_another_model_keeps_the_fixed_ratios():
    from streamrag.estimate_ratios import GLEAN_SHARE, REPORT_COMPLETION, SUMMARY_COMPLETION, SUMMARY_PROMPT, ratios
    models = dict(extraction_model="m", summary_model="m", report_model="big")
    history = {("extract", "m"): (40, 40, 40_000, 47_600), ("glean_check", "m"): (40, 40, 38_000, 40),
               ("glean", "m"): (40, 40, 44_000, 20_000), ("report", "m"): (30, 30, 60_000, 30_000),
               ("summarize", "m"): (19, 19, 3_800, 1_900)}
    r = ratios(history, **models)
    # (completions per prompt token)
    assert r.extract_completion == 1.19 and r.glean_share == 1.0 and r.glean_completion == 20_000 / 44_000
    assert r.glean_prompt == 1.1 and r.check_prompt == 0.95
    assert r.report_completion == REPORT_COMPLETION   # (another model's reports)
    assert (r.summary_prompt, r.summary_completion) == (SUMMARY_PROMPT, SUMMARY_COMPLETION)   # (19 calls: too few)
    assert r.calls == 120 and r.source() == ("Completion lengths, the gleaning rate and gleaning prompt "
                                            "lengths from this index's 120 earlier calls")
    # Half the checks said yes; too few extractions to measure their answers by.
    r = ratios({("extract", "m"): (10, 10, 1, 1), ("glean_check", "m"): (24, 0, 0, 0),
                ("glean", "m"): (12, 12, 1, 1)}, **models)
    assert r.extract_completion is None and r.glean_share == 0.5 and r.measured == ["the gleaning rate"]
    # (the checks answered from the cache, none paid for: measured on 36 calls, not "0 earlier calls")
    assert r.calls == 36 and r.source() == "The gleaning rate from this index's 36 earlier calls"
    assert ratios({}, **models).glean_share == GLEAN_SHARE and ratios({}, **models).source() == ""


async def test_a_first_index_s_answers_are_estimated_from_ratios_measured_through_the_simulator(tmp_path, simulator):
    # No history: fixed ratios. An extraction answer taken as 0.4 of its chunk and a gleaning as
    # 0.1 had a first index's completion tokens at about half the simulator's (synth_small: 23,082
    # for 57,456), and its gleaning prompts ~215 tokens short each (a list of names and pairs).
    docs = news_copy(tmp_path)
    settings = make_settings(simulator.base_url)
    est, done = await index_and_estimate(docs, settings, tmp_path / "index.db")
    assert est["ratios_from"] == "" and est["chunks_to_extract"] == paid(done.llm, "extract") >= 20
    tokens = completion(done.llm)
    assert off_by(completion(est["llm"]["by_stage"]), tokens) <= 0.25, (est["llm"], done.llm)
    glean = est["llm"]["by_stage"]["glean"]
    per_call = glean["prompt_tokens"] / glean["calls"]
    assert off_by(per_call, done.llm["glean"]["prompt_tokens"] / paid(done.llm, "glean")) <= 0.1, (glean, done.llm)


async def test_gleanings_of_runs_without_a_check_are_left_out_of_the_gleaning_rate(tmp_path, simulator):
    # An index built with the check, extracted again with index.glean_check off (every chunk
    # gleaned), then with the check again (llm.logit_bias off: other extractions, none to count
    # rounds on): the rate took the unchecked gleanings over the checks, 1.0, and counted a
    # gleaning for every chunk where the run made a few. Folded into the archive, the same.
    import time

    from streamrag import index_rows
    from streamrag.store import Store
    docs = news_copy(tmp_path, 30)
    articles = sorted(NEWS.glob("doc_*.txt"))
    db = tmp_path / "index.db"
    first = await sync([docs], make_settings(simulator.base_url, index={"chunk_size": 300}), db, root=docs)
    await sync([docs], make_settings(simulator.base_url, index={"chunk_size": 300, "glean_check": "off"}), db, root=docs)
    assert paid(first.llm, "glean_check") >= 20 and paid(first.llm, "glean") < paid(first.llm, "glean_check") / 3
    for doc in articles[30:]:
        (docs / doc.name).write_text(doc.read_text())
    settings = make_settings(simulator.base_url, index={"chunk_size": 300}, llm={"logit_bias": False})
    est = estimate([docs], settings, db, root=docs)
    store = Store(db)
    try:
        with store.conn:
            index_rows.prune(store, 1, time.time() + 3 * 86400)
        assert store.scalar("SELECT count(*) FROM llm_calls") == 0
    finally:
        store.close()
    archived = estimate([docs], settings, db, root=docs)
    done = await sync([docs], settings, db, root=docs)
    gleaned = paid(done.llm, "glean")
    assert est["chunks_to_extract"] == paid(done.llm, "extract") and gleaned > 0
    assert asked(est, "glean") == asked(archived, "glean") and off_by(asked(est, "glean"), gleaned) <= 0.5, \
        (asked(est, "glean"), gleaned)
    assert "the gleaning rate" in est["ratios_from"] and est["ratios_calls"] == archived["ratios_calls"]


async def test_a_gleaning_round_goes_on_only_after_a_gleaning_that_added_something(tmp_path, simulator, monkeypatch):
    # A model that, asked for what it missed, says again what it found: the run stops a chunk's
    # gleaning there, no second check. The estimate counted a second round for every yes (the
    # gleaning rate measured on every check): 1.6 checks a chunk for 1, and gleanings again.
    from streamrag import simulator as sim
    monkeypatch.setitem(sim.ANSWERS, "glean", sim.answer_extract)   # (the first round's names again)
    docs = news_copy(tmp_path, 30)
    articles = sorted(NEWS.glob("doc_*.txt"))
    settings = make_settings(simulator.base_url, index={"max_gleanings": 2})
    db = tmp_path / "index.db"
    first = await sync([docs], settings, db, root=docs)
    assert paid(first.llm, "glean_check") == paid(first.llm, "extract") >= 20 and paid(first.llm, "glean") >= 10
    for doc in articles[30:]:
        (docs / doc.name).write_text(doc.read_text())
    est, done = await index_and_estimate(docs, settings, db)
    assert asked(est, "glean_check") == paid(done.llm, "glean_check") == paid(done.llm, "extract"), \
        (est["llm"], done.llm)
    assert off_by(asked(est, "glean"), paid(done.llm, "glean")) <= 0.25, (asked(est, "glean"), done.llm)


async def test_an_update_s_summaries_are_counted_as_many_as_a_model_s_names_ask(tmp_path, simulator):
    # 21 articles added to 20: their chunks are counted with the offline extractor's names, fewer
    # than a model's, and more pairs of them. Taken one for one they said 190 summaries for the
    # run's 161 (on a 200-document corpusgen corpus, 446 for 341); the index's own documents,
    # replayed with its extractions and with the offline extractor's, say how many more or fewer.
    docs = news_copy(tmp_path, 20)
    articles = sorted(NEWS.glob("doc_*.txt"))
    settings = make_settings(simulator.base_url, index={"chunk_size": 300})
    db = tmp_path / "index.db"
    await sync([docs], settings, db, root=docs)
    for doc in articles[20:]:
        (docs / doc.name).write_text(doc.read_text())
    est, done = await index_and_estimate(docs, settings, db)
    assert paid(done.llm, "summarize") > 100
    assert off_by(asked(est, "summarize"), paid(done.llm, "summarize")) <= 0.15, (asked(est, "summarize"), done.llm)


async def _twenty_articles_indexed(tmp_path: Path, simulator) -> tuple[Path, Settings, Path]:
    """20 news articles indexed through the simulator in chunks of 300 tokens: (folder,
    settings, index)."""
    docs = news_copy(tmp_path, 20)
    settings = make_settings(simulator.base_url, index={"chunk_size": 300})
    db = tmp_path / "index.db"
    await sync([docs], settings, db, root=docs)
    return docs, settings, db


async def test_the_stand_in_ratios_are_replayed_only_for_a_name_whose_summary_a_model_writes(
        tmp_path, simulator, monkeypatch):
    # A new article naming no one the index holds, each name once: the offline extractor's names
    # stand in for a model's, and none of them asks a model for a summary (a lone description).
    # The replay of the index's chunks that scales those summaries was most of the estimate (4.5
    # s of 6.5 profiled, one article added to a 3,000-document index) and went unused.
    docs, settings, db = await _twenty_articles_indexed(tmp_path, simulator)
    replays = []
    replay = estimate_module._stand_in_ratios
    monkeypatch.setattr(estimate_module, "_stand_in_ratios", lambda *a, **k: replays.append(1) or replay(*a, **k))
    (docs / "new.txt").write_text("Quorvin Baltessa opened the Zennard Lighthouse Museum in Pellowick.\n")
    est = estimate([docs], settings, db, root=docs)
    assert est["chunks_to_extract"] == 1 and asked(est, "summarize") == 0 and replays == []
    # Articles naming the index's people and bodies again: their summaries are asked, and scaled.
    add_articles(docs, 20)
    est, done = await index_and_estimate(docs, settings, db)
    assert asked(est, "summarize") > 0 and paid(done.llm, "summarize") > 0 and replays == [1]


async def test_the_stand_in_replay_checks_each_list_of_descriptions_once(tmp_path, simulator, monkeypatch):
    # The replay merges each chunk's elements twice, with the model's extraction and with the
    # offline extractor's: an element given the same descriptions both ways was joined and
    # counted again (a third of the lists of a 3,000-document index's replay).
    docs, settings, db = await _twenty_articles_indexed(tmp_path, simulator)
    lists = []
    asks = estimate_module.asks_model
    monkeypatch.setattr(estimate_module, "asks_model", lambda chosen, s: lists.append(tuple(chosen)) or asks(chosen, s))
    with contextlib.closing(Store(db, readonly=True)) as store:
        estimate_module._stand_in_ratios(store, extractor_key(settings), settings,
                                         live=index_rows.live_chunks(store), lengths=None)
    assert len(lists) > 20 and len(set(lists)) == len(lists)


def news_copy(tmp_path: Path, n: int | None = None) -> Path:
    """A folder ``tmp_path/news`` of the first ``n`` articles of tests/data/news41 (all 41 without)."""
    docs = tmp_path / "news"
    docs.mkdir()
    add_articles(docs, 0, n)
    return docs


def add_articles(folder: Path, start: int, stop: int | None = None) -> None:
    """Copies articles ``start`` to ``stop`` (by name; to the last without) of tests/data/news41
    into ``folder``."""
    for doc in sorted(NEWS.glob("doc_*.txt"))[start:stop]:
        (folder / doc.name).write_text(doc.read_text())


async def test_a_first_index_s_summaries_and_reports_are_worked_out_on_its_graph(tmp_path, simulator):
    # Counted per chunk (2.5 summaries, 0.6 reports), 41 articles cut into 263 chunks were
    # estimated 658 summaries and 158 reports for the run's 168 and 47: more chunks of the same
    # articles name the same entities, and make no more communities.
    docs = news_copy(tmp_path)
    settings = make_settings(simulator.base_url, index={"chunk_size": 300})
    est, done = await index_and_estimate(docs, settings, tmp_path / "index.db")
    assert est["chunks_to_extract"] == paid(done.llm, "extract") > 150
    assert paid(done.llm, "summarize") > 100 and paid(done.llm, "report") > 30, done.llm
    # (within the spread of the stand-in ratios measured on other corpora: estimate_ratios)
    for stage in ("summarize", "report"):
        assert off_by(asked(est, stage), paid(done.llm, stage)) <= 0.4, (stage, est["llm"], done.llm)


async def test_a_first_index_worked_out_on_the_run_s_own_extractions_gives_its_calls(tmp_path, simulator):
    # The estimate's path (merged in memory, the run's Leiden, report_min_members) is the run's:
    # with the model's extractions in place of the offline extractor's, it gives the run's
    # summary and report calls exactly (the offline names are what it cannot know).
    docs = news_copy(tmp_path)
    settings = make_settings(simulator.base_url, index={"chunk_size": 300})
    db = tmp_path / "index.db"
    done = await sync([docs], settings, db, root=docs)
    store = Store(db, readonly=True)
    try:
        chunks = set(index_rows.live_chunks(store))
        worked = first_graph(index_rows.load_extractions(store, chunks, extractor_key(settings)), settings)
        prompts = [n for (n,) in store.conn.execute(
            "SELECT prompt_tokens FROM llm_calls WHERE stage = 'report' AND error IS NULL")]
    finally:
        store.close()
    assert worked.entity_summaries + worked.relationship_summaries == paid(done.llm, "summarize") > 20
    assert len(worked.reports) == paid(done.llm, "report") == len(prompts) > 20
    # Their contexts as the run builds them, of summaries: with every description joined a report
    # prompt came out 1,816 tokens for the run's 1,506 (1,884 chunks of a corpusgen corpus: 4,765
    # for 3,476, more still past the contexts' budget); now 1,434.
    assert off_by(sum(worked.reports) / len(worked.reports), sum(prompts) / len(prompts)) <= 0.1


async def test_a_large_first_index_is_worked_out_on_a_sample_of_its_chunks(tmp_path, simulator, monkeypatch):
    # The offline extractor takes ~3 ms a chunk (10,000 documents: 40 s): past FIRST_SAMPLE
    # chunks a sample is worked out and its counts taken on to every chunk at the rate they
    # grow from half the sample to the whole.
    docs = news_copy(tmp_path)
    settings = make_settings(simulator.base_url, index={"chunk_size": 300})
    whole = estimate([docs], settings, tmp_path / "index.db", root=docs)
    read: list[str] = []
    extract = nlp.extract_offline
    monkeypatch.setattr(nlp, "extract_offline", lambda text, **kw: read.append(text) or extract(text, **kw))
    monkeypatch.setattr(estimate_module, "FIRST_SAMPLE", 130)
    sampled = estimate([docs], settings, tmp_path / "index.db", root=docs)
    assert len(read) == 130 and sampled["chunks_to_extract"] == whole["chunks_to_extract"] > 150
    for stage in ("summarize", "report"):
        assert off_by(asked(sampled, stage), asked(whole, stage)) <= 0.3, (stage, sampled["llm"], whole["llm"])
    # A report's prompt: the sample's contexts about as long as the whole's (each description
    # joined, the whole's ran longer: 1,587 tokens a report for 1,946; now 1,505 for 1,642).
    per_report = [e["llm"]["by_stage"]["report"]["prompt_tokens"] / asked(e, "report") for e in (sampled, whole)]
    assert off_by(*per_report) <= 0.1, per_report


def test_a_sample_s_counts_are_taken_on_as_they_grew():
    assert _grown((10, 20, 40), doublings=2) == 160   # with the chunks
    assert _grown((50, 50, 50), doublings=3) == 50    # the same entities throughout
    assert _grown((10, 40, 160), doublings=1) == 320  # (faster than the chunks: held to them)
    # Growing ever slower (a rate of 0.5, then 0.25): taken on at 0.125, 0.0625, not at 0.25.
    assert round(_grown((100, 2 ** 0.5 * 100, 2 ** 0.75 * 100), doublings=2), 3) == round(100 * 2 ** 0.9375, 3)


def test_the_graph_worked_out_in_memory_is_not_the_index_an_error_names(tmp_path):
    # first_graph merges into Store(":memory:"): it was taken as the index opened last, and a
    # damaged index met later in the same run was said to be ':memory:'.
    from streamrag.store import last_opened
    db = tmp_path / "index.db"
    Store(db).close()
    settings = make_settings()
    text = "Alice Smith met Bob Jones in Paris. Bob Jones wrote to Alice Smith."
    first_graph({"c1": nlp.extract_offline(text, entity_types=settings.index.entity_types)}, settings)
    assert last_opened() == db


def test_the_share_of_gleanings_adding_something_is_measured_on_the_extractions_whose_rounds_count():
    # 100 earlier runs gleaned one round at most (a check per extraction); 20 extractions of the
    # run's extractor (two rounds) stopped 7 after their first gleaning, 5 of them checked once
    # more. The checks of the whole history over the 20's rounds said 0, without them 1.0.
    from streamrag.estimate_ratios import ratios
    models = dict(extraction_model="m", summary_model="m", report_model="m")
    now = {("extract", "m"): (20, 20, 20_000, 16_000), ("glean_check", "m"): (25, 25, 20_000, 25),
           ("glean", "m"): (21, 21, 20_000, 9_000)}
    earlier = {k: tuple(v * 101 for v in h) for k, h in now.items()}
    earlier[("glean_check", "m")] = tuple(v * 100 for v in (20, 20, 16_000, 20))   # (one a chunk)
    for history in (now, earlier):
        r = ratios(history, **models, rounds={0: 6, 1: 7, 2: 7}, max_gleanings=2, stopped=(7, 5))
        assert r.gleaned == [0.7, 0.35] and r.glean_adds == 5 / 7, history
    # (no extraction of the run's extractor recorded its checks: every gleaning taken as adding something)
    assert ratios(earlier, **models, rounds={0: 6, 1: 7, 2: 7}, max_gleanings=2).glean_adds == 1.0


async def test_gleanings_adding_something_are_counted_after_index_max_gleanings_changed(tmp_path, simulator):
    # Built gleaning one round at most, then again with two: the share of gleanings adding
    # something (a second check after each) was measured on the checks of both runs over the
    # second's rounds, about half what it was: an update's checks were estimated 38 for the
    # run's 45 (now 49).
    docs = news_copy(tmp_path, 20)
    articles = sorted(NEWS.glob("doc_*.txt"))
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url), db, root=docs)
    settings = make_settings(simulator.base_url, index={"max_gleanings": 2})
    again = await sync([docs], settings, db, root=docs)
    assert again.llm["glean_check"]["calls"] > 1.5 * again.llm["extract"]["calls"] >= 20, again.llm
    for doc in articles[20:]:
        (docs / doc.name).write_text(doc.read_text())
    est, done = await index_and_estimate(docs, settings, db)
    assert "the gleaning rate" in est["ratios_from"]
    assert off_by(asked(est, "glean_check"), paid(done.llm, "glean_check")) <= 0.1, (est["llm"], done.llm)


async def test_gleaning_answers_in_the_cache_are_not_counted_after_index_max_gleanings_rose(ten_indexed, simulator):
    # Built gleaning one round at most, then estimated with two: the first extraction answers
    # were found in the cache, the first round's checks and gleanings, in it too, counted as
    # paid (synth_small: 202 calls estimated for the run's 43 paid, all second-round checks).
    docs, db, _ = ten_indexed
    settings = make_settings(simulator.base_url, index={"max_gleanings": 2})
    est, done = await index_and_estimate(docs, settings, db)
    by_stage = est["llm"]["by_stage"]
    assert done.llm["glean"]["cached"] > 0 and paid(done.llm, "glean_check") > 0, done.llm
    for stage in ("glean_check", "glean"):
        assert by_stage[stage]["cached"] == done.llm[stage]["cached"], (stage, by_stage, done.llm)
    assert paid(by_stage, "glean_check") == paid(done.llm, "glean_check"), (by_stage, done.llm)
    assert paid(by_stage, "glean") <= paid(done.llm, "glean") + 1, (by_stage, done.llm)
    assert f"so are {by_stage['glean_check']['cached'] + by_stage['glean']['cached']} gleaning answers)" \
        in format_estimate(est)


def test_a_first_index_s_summaries_and_reports_are_whole_calls_and_their_tokens_those_of_the_calls(tmp_path):
    # Two chunks' one community was said "report 1 calls ... 1,233 completion" (1.37 reports'
    # tokens, FIRST_REPORTS), their 9.6 summaries 10 calls of 1,920 prompt tokens: the calls
    # were rounded, their tokens not.
    from streamrag.estimate_ratios import REPORT_COMPLETION, SUMMARY_COMPLETION, SUMMARY_PROMPT
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text(
        "Ada Osk met Bob Tan and Cy Lee in Paris on a long grey morning after the storm had passed over "
        "the old harbour and its cranes. Ada Osk wrote to Bob Tan and Cy Lee from Rome about the ship, "
        "the cargo of olive oil and the debts that the company had left unpaid for a year.\n")
    (tmp_path / "d" / "b.txt").write_text(
        "Bob Tan, Cy Lee and Ada Osk sailed from Paris to Rome with Dee Ng, who kept the ledgers and "
        "argued with the captain over every coin spent at each port. In Rome Ada Osk and Bob Tan sold "
        "the olive oil at a loss while Cy Lee wrote long letters home to Paris about the weather and the food.\n")
    settings = make_settings("http://127.0.0.1:9/v1")   # (nothing is asked of it)
    est = estimate([tmp_path / "d"], settings, tmp_path / "e.db", root=tmp_path / "d")
    by_stage = est["llm"]["by_stage"]
    # (no index, no calls of the model: the figures are stand-ins, and said to be)
    assert est["stand_in_ratios"] and format_estimate(est).endswith(
        "summaries and reports are estimated, from stand-in ratios (no history of these models in this index yet).")
    assert by_stage["report"]["calls"] == 1, by_stage
    assert by_stage["report"]["completion_tokens"] == REPORT_COMPLETION
    summaries = by_stage["summarize"]
    assert (summaries["prompt_tokens"], summaries["completion_tokens"]) == (
        summaries["calls"] * SUMMARY_PROMPT, summaries["calls"] * SUMMARY_COMPLETION) != (0, 0), summaries


async def test_a_word_changed_in_a_sentence_counts_the_names_of_that_sentence_not_of_its_paragraph(
        ten_indexed, simulator):
    # One word changed in a sentence of each of three articles: told apart by paragraph, every
    # name of the paragraph was said anew and its every two names paired by the offline
    # extractor, new edges that moved the partition (synth_small, two such edits: 9 reports
    # estimated for the run's 2).
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    for name in ("doc_00003.txt", "doc_00006.txt", "doc_00008.txt"):
        path = news / name
        path.write_text(path.read_text().replace(" the ", " a ", 1))
    est, done = await index_and_estimate(news, settings, db)
    assert est["chunks_to_extract"] == 3, est
    counts = {stage: (asked(est, stage), paid(done.llm, stage)) for stage in ("summarize", "report")}
    assert all(e <= a + 2 for e, a in counts.values()), counts


def test_a_changed_file_s_stand_in_keeps_what_the_model_said_of_its_names_still_said_alone():
    # What the model said of a file, and its text edited in two places: "Dr. Vell" became
    # "Ansel Vell" throughout (the model lists "Vell" no more: it was said inside the longer
    # name, and the relationships of "Vell" went with it), and one word of another sentence
    # changed. A relationship to a name the model gave no entity line ("Harbor Talks") stays.
    before_text = ("Ansel Vell chairs the Harbor Council. Dr. Vell spoke at Harbor Talks.\n\n"
                   "Edda Lind met Ansel Vell in Kessel. The ferry ran late.")
    before = Extraction(
        entities=[EntityRecord("Ansel Vell", "person", "Chair of the Harbor Council."),
                  EntityRecord("Harbor Council", "organization", "The council Ansel Vell chairs."),
                  EntityRecord("Vell", "person", "Spoke at Harbor Talks."),
                  EntityRecord("Edda Lind", "person", "Met Ansel Vell in Kessel."),
                  EntityRecord("Kessel", "geo", "Where Edda Lind met Ansel Vell.")],
        relationships=[RelationshipRecord("Ansel Vell", "Harbor Council", "Ansel Vell chairs it."),
                       RelationshipRecord("Vell", "Harbor Talks", "Vell spoke there."),
                       RelationshipRecord("Ansel Vell", "Harbor Talks", "Ansel Vell spoke there."),
                       RelationshipRecord("Edda Lind", "Ansel Vell", "They met in Kessel.")])
    text = before_text.replace("Dr. Vell", "Ansel Vell").replace("ran late", "ran early")
    guessed: set[str] = set()
    got = _stand_in(text, before, before_text, entity_types=None, guessed=guessed)
    names = {e.name: e.description for e in got.entities}
    assert "Vell" not in names   # (it was kept: "Vell" is in "Ansel Vell")
    pairs = {(r.source, r.target) for r in got.relationships}
    assert ("Vell", "Harbor Talks") not in pairs
    assert ("Ansel Vell", "Harbor Talks") in pairs   # (it was dropped: no entity line for its end)
    # The second paragraph's names are kept as the model said them: its edited sentence names
    # none (told apart by paragraph, Edda Lind and Kessel were the offline extractor's, and
    # paired with Ansel Vell anew).
    assert names["Edda Lind"] == "Met Ansel Vell in Kessel." and names["Kessel"] == "Where Edda Lind met Ansel Vell."
    assert all(ids.entity_id(n) not in guessed for n in ("Edda Lind", "Kessel"))



async def test_the_stand_in_replay_counts_a_summary_only_when_its_chosen_descriptions_change(corpus, tmp_path):
    # The replay measuring how many summaries a model's extraction asks per one of the offline
    # extractor's counted every element it touched, but the run summarizes a name described in
    # many chunks again only when a new description enters its chosen
    # index.summary_max_descriptions: 1,500 corpusgen documents, 200 added, were estimated 551
    # summaries for the run's 289 (now 277).
    settings = make_settings(index={"extractor": "nlp", "summary_max_descriptions": 2, "summary_join_tokens": 0})
    db = tmp_path / "index.db"
    await sync([corpus], settings, db, root=corpus)
    with contextlib.closing(Store(db, readonly=True)) as store:
        eid = ids.entity_id("Mira Osk")
        before = unique_descriptions(r["description"] for r in index_rows.sources(
            store, "entity_sources", "entity_id", {eid})[eid])
        assert len(before) > 2
        said = [f"Mira Osk, engineer, designed bridge number {n}." for n in range(40)]
        unseen = next(d for d in said if summary_input(sorted(before + [d]), 2) == summary_input(before, 2))
        seen = next(d for d in said if summary_input(sorted(before + [d]), 2) != summary_input(before, 2))
        asked = [estimate_module._summaries_of(
            store, {"chk-new": Extraction(entities=[EntityRecord("Mira Osk", "person", d)])}, {"chk-new"}, settings)
            for d in (unseen, seen)]
    assert asked == [(0, 0), (1, 0)]


async def test_the_stand_in_replay_reads_an_elements_provenance_once_for_both_extractions(corpus, tmp_path,
                                                                                         monkeypatch):
    # The replay counts the summaries of a chunk's names twice, the model's and the offline
    # extractor's, mostly the same elements: each read its provenance rows (a hub's thousands
    # on a big index) and sorted them again. Read once, the counts are those read twice.
    settings = make_settings(index={"extractor": "nlp", "summary_max_descriptions": 2, "summary_join_tokens": 0})
    db = tmp_path / "index.db"
    await sync([corpus], settings, db, root=corpus)
    said = [Extraction(entities=[EntityRecord("Mira Osk", "person", f"Mira Osk, engineer, built bridge {n}."),
                                 EntityRecord("Harbor Board", "organization", "The board.")],
                       relationships=[RelationshipRecord("Mira Osk", "Harbor Board", f"Advised it {n} times.")])
            for n in range(2)]
    with contextlib.closing(Store(db, readonly=True)) as store:
        alone = [estimate_module._summaries_of(store, {"chk-new": e}, {"chk-new"}, settings) for e in said]
        read: list[str] = []
        sources = index_rows.sources

        def counted(store, table, column, element_ids):
            read.extend(element_ids)
            return sources(store, table, column, element_ids)
        monkeypatch.setattr(index_rows, "sources", counted)
        elsewhere: dict[str, list[str]] = {}
        shared = [estimate_module._summaries_of(store, {"chk-new": e}, {"chk-new"}, settings, elsewhere) for e in said]
    assert shared == alone and alone != [(0, 0), (0, 0)]
    assert sorted(read) == sorted(set(read)) and len(read) == 3   # (two entities and their relationship)


def test_a_name_an_appended_sentence_says_again_keeps_what_the_model_said_of_it():
    # A sentence appended to a chunk names a name the chunk named before, and one it did not:
    # the model still describes the first where the chunk first names it (its description, and
    # so its summary, stay); the second is the offline extractor's. Both were taken as said
    # anew: appending a sentence to a synth_small article was estimated 3 summaries for the run's 0.
    before_text = "Ansel Vell chairs the Harbor Council. The ferry ran late."
    before = Extraction(entities=[EntityRecord("Ansel Vell", "person", "Chair of the Harbor Council."),
                                  EntityRecord("Harbor Council", "organization", "The council Ansel Vell chairs.")],
                        relationships=[RelationshipRecord("Ansel Vell", "Harbor Council", "Ansel Vell chairs it.")])
    text = before_text + " Ansel Vell later met Edda Lind in Kessel."
    guessed: set[str] = set()
    got = _stand_in(text, before, before_text, entity_types=None, guessed=guessed)
    names = {e.name: e.description for e in got.entities}
    assert names["Ansel Vell"] == "Chair of the Harbor Council." and ids.entity_id("Ansel Vell") not in guessed
    assert "Edda Lind" in names and ids.entity_id("Edda Lind") in guessed
    # (a name the new sentence says first is said anew there: the model's first words of it)
    text = "Ansel Vell spoke first. " + before_text
    got = _stand_in(text, before, before_text, entity_types=None, guessed=guessed)
    assert {e.name: e.description for e in got.entities}["Ansel Vell"] != "Chair of the Harbor Council."


async def test_an_updates_estimate_reads_only_the_relationship_descriptions_it_compares_or_shows(
        ten_indexed, simulator, monkeypatch):
    # The estimate of an update read every relationship's description to compare the lines of
    # the few an edit changes (202,662 on an index of 10,000 documents); the run reads those it
    # merges, publishes changed or shows in a report. Read so, the estimate is the same.
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    path = news / "doc_00005.txt"
    path.write_text(path.read_text().rstrip("\n") + " Later the harbor board met the ministry again.\n")
    read: list[str] = []
    descriptions = index_rows.relationship_descriptions

    def counted(store, ids, **options):
        for rid, description in descriptions(store, ids, **options):
            read.append(rid)
            yield rid, description
    monkeypatch.setattr(index_rows, "relationship_descriptions", counted)
    got = estimate([news], settings, db, root=news)
    with contextlib.closing(Store(db, readonly=True)) as store:
        every = store.conn.execute("SELECT count(*) FROM relationships").fetchone()[0]
    assert len(read) < every and got["llm"]["calls"]
    load = GraphState.load.__func__

    def described(cls, store):   # (every description read at once, as before)
        state = load(cls, store)
        state.describe(store, list(state.relationships))
        return state
    monkeypatch.setattr(GraphState, "load", classmethod(described))
    assert estimate([news], settings, db, root=news) == got


async def appended_and_estimated(indexed: Indexed, simulator, sentence: str):
    """The estimate and the run of an update appending ``sentence`` to an indexed article."""
    news, db, _ = indexed
    settings = make_settings(simulator.base_url)
    path = news / "doc_00005.txt"
    path.write_text(path.read_text().rstrip("\n") + f" {sentence}\n")
    return await index_and_estimate(news, settings, db)


async def test_a_sentence_appended_counts_the_summaries_of_the_names_it_says_first(ten_indexed, simulator):
    # A sentence appended to an article, naming a body and two people the article names: the
    # run writes no summary again (the model describes each where the chunk names it first).
    est, done = await appended_and_estimated(ten_indexed, simulator, (
        "Port Ruvickton Transit Authority later hired Katja Wexstad and Bastian Caelberg from New "
        "Drumanti Falls University."))
    assert est["chunks_to_extract"] == 1
    assert asked(est, "summarize") == paid(done.llm, "summarize"), (est["llm"], done.llm)


async def test_a_first_index_gleaning_several_rounds_counts_a_later_round_at_its_own_share(tmp_path, simulator):
    # index.max_gleanings 3 on a first index: each round was counted as the first (7 checks in
    # 10 saying yes, round after round), where a check after a gleaning finds less to say yes
    # to (the simulator's, nearly never): synth_small's checks were estimated 136 for the run's
    # 105, its gleanings 95 for 43.
    docs = news_copy(tmp_path, 20)
    settings = make_settings(simulator.base_url, index={"max_gleanings": 3})
    est, done = await index_and_estimate(docs, settings, tmp_path / "index.db")
    assert est["stand_in_ratios"] and paid(done.llm, "glean") >= 10, done.llm
    for stage in ("glean_check", "glean"):
        assert off_by(asked(est, stage), paid(done.llm, stage)) <= 0.25, (stage, est["llm"], done.llm)


def test_a_later_gleaning_round_is_counted_at_the_share_of_later_checks_saying_yes():
    from streamrag.estimate import _rounds
    from streamrag.estimate_ratios import GLEAN_CONTINUE, ratios
    models = dict(extraction_model="m", summary_model="m", report_model="m")
    history = {("extract", "m"): (40, 40, 40_000, 30_000), ("glean_check", "m"): (40, 40, 38_000, 40),
               ("glean", "m"): (20, 20, 20_000, 9_000)}
    # No extraction of the run's extractor to count rounds on, nor later checks: the fixed share.
    r = ratios(history, **models, max_gleanings=3)
    assert r.glean_share == 0.5 and r.glean_continue == GLEAN_CONTINUE
    assert _rounds(r, 3, checks=True) == [(1.0, 0.5), (0.5, 0.5 * GLEAN_CONTINUE),
                                          (0.5 * GLEAN_CONTINUE, 0.5 * GLEAN_CONTINUE ** 2)]
    # 40 checks after a gleaning, 10 of them yes (an index gleaning 2 rounds, asked for 3): measured.
    r = ratios(history, **models, max_gleanings=3, later=(40, 10))
    assert r.glean_continue == 0.25 and "the gleaning rate" in r.measured
    assert _rounds(r, 3, checks=True) == [(1.0, 0.5), (0.5, 0.125), (0.125, 0.03125)]
    assert ratios(history, **models, max_gleanings=3, later=(19, 19)).glean_continue == GLEAN_CONTINUE   # (too few)


async def test_the_later_checks_of_an_index_gleaning_other_rounds_measure_a_run_s(tmp_path, simulator):
    # Built with index.max_gleanings 2, estimated with 3: the run's extractor has no extraction
    # to count rounds on, the other's later checks (a second round's) say how often one says yes.
    from streamrag.estimate import _gleaning_keys
    docs = news_copy(tmp_path, 30)
    db = tmp_path / "index.db"
    built = await sync([docs], make_settings(simulator.base_url, index={"max_gleanings": 2}), db, root=docs)
    # (a check a chunk, and one after each first gleaning that added something)
    later = paid(built.llm, "glean_check") - paid(built.llm, "extract")
    settings = make_settings(simulator.base_url, index={"max_gleanings": 3})
    with contextlib.closing(Store(db, readonly=True)) as store:
        checks, yes = index_rows.later_checks(store, _gleaning_keys(settings))
        assert not index_rows.gleaning_rounds(store, extractor_key(settings))
    assert checks == later >= 20 and yes <= checks
    est, done = await index_and_estimate(docs, settings, db)
    assert "the gleaning rate" in est["ratios_from"]
    for stage in ("glean_check", "glean"):   # (the run's answers from the cache: the same requests)
        assert off_by(asked(est, stage), done.llm[stage]["calls"]) <= 0.15, (stage, est["llm"], done.llm)


async def test_reports_cut_off_and_asked_again_are_counted_as_often_as_on_the_index(tmp_path, simulator, monkeypatch):
    # Reports cut off at index.report_max_output_tokens are paid for and asked again with more
    # room: none was counted (a 1,500-document index's update: 18 of its 40 report calls).
    # Counted per paid call as often as the index's own calls were (here 16 of 58 on the first
    # run; the update's larger communities are cut off more often still, 35 of 82).
    from streamrag.estimate_ratios import cut_shares
    docs = news_copy(tmp_path, 20)
    articles = sorted(NEWS.glob("doc_*.txt"))
    settings = make_settings(simulator.base_url, index={"report_max_output_tokens": 800})
    db = tmp_path / "index.db"
    first = await sync([docs], settings, db, root=docs)
    cut = first.llm["report"]["asked_again"]
    assert cut >= 5 and first.llm["report"]["errors"] == cut, first.llm
    with contextlib.closing(Store(db, readonly=True)) as store:
        usable, unusable, _tokens = index_rows.unusable_answers(store)[("report", settings.llm.report_model)]
    assert (usable, unusable) == (paid(first.llm, "report") - cut, cut)
    for doc in articles[20:]:
        (docs / doc.name).write_text(doc.read_text())
    shared: list[int] = []   # (the reports' shares are worked out together, once an estimate)
    with monkeypatch.context() as m:
        m.setattr(estimate_module, "cut_shares",
                  lambda answers, prompts: shared.append(len(prompts)) or cut_shares(answers, prompts))
        est = estimate([docs], settings, db, root=docs)
    assert len(shared) == 1 and shared[0] > 1, shared
    with monkeypatch.context() as m:
        m.setattr(index_rows, "unusable_answers", lambda store: {})
        uncut = estimate([docs], settings, db, root=docs)
    done = await sync([docs], settings, db, root=docs)
    report, was = est["llm"]["by_stage"]["report"], uncut["llm"]["by_stage"]["report"]
    assert report["errors"] > 0 and was["errors"] == 0
    assert abs(report["calls"] - was["calls"] - report["errors"]) <= 1   # (each whole: rounded apart)
    assert report["completion_tokens"] > was["completion_tokens"]
    assert "the answers cut off and asked again" in est["ratios_from"]
    again = done.llm["report"]["asked_again"]
    assert again > 0
    assert off_by(report["calls"], paid(done.llm, "report")) < off_by(was["calls"], paid(done.llm, "report"))
    # Each report at the share of the index's reports of prompts like its own (the larger ones
    # cut off the more often), not every one at the share of all: 14 were counted for 35.
    flat = was["calls"] * unusable / usable
    assert off_by(report["errors"], again) < off_by(flat, again) - 0.03, (report["errors"], flat, again)


async def test_reports_a_content_filter_stopped_are_counted_unusable_as_the_run_counted_them(corpus, tmp_path):
    # A content filter's stop is paid for and counted unusable by the run (llm.unusable); the
    # estimate found unusable answers by their error's words, "unusable answer ...", and took
    # such a report for neither usable nor unusable.
    import httpx
    from test_status import FilterOneReport

    endpoint = FilterOneReport("Mira Osk")
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0})
    db = tmp_path / "index.db"
    done = await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(endpoint))
    assert endpoint.stopped and done.llm["report"]["unusable"] == endpoint.stopped, done.llm
    with contextlib.closing(Store(db, readonly=True)) as store:
        usable, unusable, tokens = index_rows.unusable_answers(store)[("report", settings.llm.report_model)]
        answers = index_rows.report_answers(store, settings.llm.report_model)
    assert (usable, unusable) == (paid(done.llm, "report") - endpoint.stopped, endpoint.stopped)
    assert tokens == 5 * endpoint.stopped   # (the test endpoint's completion tokens an answer)
    assert sum(bad for _tokens, bad in answers) == endpoint.stopped and len(answers) == paid(done.llm, "report")


def test_a_report_s_share_asked_again_is_that_of_the_answers_nearest_its_prompt():
    from streamrag.estimate_ratios import MIN_CALLS, cut_shares
    # 40 usable reports of 100 to 4,000 prompt tokens; those over 2,000 cut off once each.
    usable = [(100 * k, False) for k in range(1, 41)]
    answers = sorted(usable + [(t, True) for t, _ in usable if t > 2000])
    # (2,050: the 20 nearest, 1,100 to 3,000)
    assert cut_shares(answers, [300, 100_000, 2050, 0]) == [0.0, 1.0, 0.5, 0.0]
    assert cut_shares(answers[:MIN_CALLS - 1], [300]) is None   # (too few to go by)


def _cut_share_scanned(answers: list[tuple[int, bool]], prompt: float) -> float | None:
    """A prompt's share as it was first worked out, scanning every answer for each prompt: what
    ``cut_shares`` must give."""
    from streamrag.estimate_ratios import MIN_CALLS
    usable = [i for i, (_tokens, bad) in enumerate(answers) if not bad]
    if len(usable) < MIN_CALLS:
        return None
    lo = 0
    while lo + MIN_CALLS < len(usable) and \
            prompt - answers[usable[lo]][0] > answers[usable[lo + MIN_CALLS]][0] - prompt:
        lo += 1
    first = answers[usable[lo]][0] if lo else -1
    last = answers[usable[lo + MIN_CALLS - 1]][0] if lo + MIN_CALLS < len(usable) else math.inf
    return sum(1 for tokens, cut in answers if cut and first <= tokens <= last) / MIN_CALLS


def test_the_shares_cut_off_of_every_report_prompt_are_those_of_a_scan_for_each():
    # The answers are sorted once for every prompt (a scan of all per prompt: 5.4 s of an
    # estimate of 2,477 reports): the same shares, on random answers (ties, few usable, prompts
    # below, between and above them, fractions).
    from streamrag.estimate_ratios import cut_shares
    rng = random.Random(7)
    compared = 0
    for _ in range(2000):
        top = rng.choice([30, 500, 5000])
        cut_rate = rng.random()
        answers = sorted((rng.randrange(top), rng.random() < cut_rate) for _ in range(rng.randrange(120)))
        prompts = [rng.choice([0, rng.randrange(-50, top + 50), rng.uniform(-10, top + 10)]) for _ in range(20)]
        prompts += [tokens for tokens, _bad in answers[:3]]
        shares = cut_shares(answers, prompts)
        scanned = [_cut_share_scanned(answers, p) for p in prompts]
        assert shares == (None if scanned[0] is None else scanned), (answers, prompts)
        compared += shares is not None
    assert compared > 1000


async def test_a_report_whose_context_comes_out_as_stored_is_not_counted(ten_indexed, simulator):
    # A sentence appended naming an article's own body and person: their degrees change, and a
    # relationship between two communities, but no line of a report context; the run builds
    # each context as its stored report's and keeps the report. Counted by what changed, the
    # estimate said 4 reports for the run's 0 (synth_small, such a sentence: 5 for 0).
    est, done = await appended_and_estimated(ten_indexed, simulator, (
        "Port Ruvickton Transit Authority later hired Katja Wexstad from New Drumanti Falls University."))
    assert est["chunks_to_extract"] == 1 and done.reports_kept > 20
    assert asked(est, "report") == paid(done.llm, "report"), (est["llm"], done.llm)


async def test_the_stand_in_replay_takes_both_halves_of_a_small_index(tmp_path, simulator):
    # 24 articles: every other one replayed gave 17 chunks, too few to measure how many more
    # summaries a model's names ask than the offline extractor's (taken 1 for 1): the 17 added
    # were estimated 104 summaries for the run's 120. Both halves in turn measure it.
    docs = news_copy(tmp_path, 24)
    settings = make_settings(simulator.base_url)
    db = tmp_path / "index.db"
    await sync([docs], settings, db, root=docs)
    add_articles(docs, 24)
    est, done = await index_and_estimate(docs, settings, db)
    assert paid(done.llm, "summarize") > 100
    assert off_by(asked(est, "summarize"), paid(done.llm, "summarize")) <= 0.1, (est["llm"], done.llm)


async def test_an_index_of_too_few_calls_to_measure_by_is_said_so_not_said_to_hold_none(tmp_path, simulator):
    # Two articles indexed (15 calls of the models, fewer than 20 of any stage), two added: the
    # estimate said its stand-in ratios were for an index with "no history of these models".
    from streamrag.estimate_ratios import MIN_CALLS
    docs = news_copy(tmp_path, 2)
    settings = make_settings(simulator.base_url)
    db = tmp_path / "index.db"
    await sync([docs], settings, db, root=docs)
    with sqlite3.connect(db) as conn:
        calls = conn.execute("SELECT count(*) FROM llm_calls WHERE error IS NULL AND cancelled = 0").fetchone()[0]
        most = conn.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM llm_calls GROUP BY stage)").fetchone()[0]
    conn.close()
    assert 0 < most < MIN_CALLS, (calls, most)   # (too few of every stage: stand-ins all)
    add_articles(docs, 2, 4)
    est = estimate([docs], settings, db, root=docs)
    assert est["stand_in_ratios"] and est["model_calls"] == calls
    assert format_estimate(est).endswith(
        f"reports are estimated, from stand-in ratios (this index's {calls} calls of these models are too "
        f"few to measure by: {MIN_CALLS} of a stage are needed).")
    # A first index holds none, and says so.
    first = estimate([docs], settings, tmp_path / "new.db", root=docs)
    assert first["model_calls"] == 0 and format_estimate(first).endswith("(no history of these models in this index yet).")


async def test_an_estimate_s_tokens_are_those_of_its_whole_calls(tmp_path, simulator):
    # One chunk's expected gleaning on an index that gleans a few chunks in a hundred, a tenth
    # of a call, was said '0 calls  61 prompt  8 completion': the calls rounded, their tokens not.
    docs = news_copy(tmp_path, 30)
    settings = make_settings(simulator.base_url, index={"chunk_size": 300})
    db = tmp_path / "index.db"
    await sync([docs], settings, db, root=docs)
    path = docs / "doc_00005.txt"
    path.write_text(path.read_text().rstrip("\n") + " Katja Wexstad later left Port Ruvickton.\n")
    est = estimate([docs], settings, db, root=docs)
    assert est["chunks_to_extract"] == 1
    assert est["llm"]["by_stage"]["glean"]["calls"] == 0   # (else this test tests nothing)
    for stage, s in est["llm"]["by_stage"].items():
        assert s["calls"] or not (s["prompt_tokens"] or s["completion_tokens"]), (stage, s)
    rows = format_estimate(est).splitlines()[1:]
    assert not [row for row in rows if row.split()[1:3] == ["0", "calls"]], rows


def test_an_estimate_says_what_the_scan_leaves_out_as_index_does(cli_run, tmp_path):
    # A broken symlink and a pipe: the estimate said "streamrag: gone.txt: broken symlink ...",
    # a log line, where `index` says "streamrag: warning: gone.txt: broken symlink ...".
    (tmp_path / "a.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    (tmp_path / "gone.txt").symlink_to("nowhere")
    os.mkfifo(tmp_path / "pipe.txt")
    common = ("index", str(tmp_path), "--db", str(tmp_path / "x.db"), "--offline")
    est, est_json = cli_run(*common, "--estimate"), cli_run(*common, "--estimate", "--json")
    run = cli_run(*common, "-q")
    assert est.returncode == est_json.returncode == run.returncode == 0
    said = [line for line in run.stderr.splitlines() if "not indexed" in line]
    assert said == ["streamrag: warning: gone.txt: broken symlink to nowhere, not indexed; fix or remove the link",
                    "streamrag: warning: pipe.txt: not a regular file (a pipe, socket or device), not indexed; "
                    "remove it, or add it to index.exclude"]
    assert est.stderr.splitlines() == said
    # --json lists them, as index's does, and says nothing on stderr
    assert [f"streamrag: warning: {w}" for w in json.loads(est_json.stdout)["warnings"]] == said
    assert est_json.stderr == ""


def test_an_estimate_names_the_files_it_cannot_use_as_index_does(cli_run, tmp_path, monkeypatch):
    # Binary files, a .jsonl without the text field, a file in a folder that cannot be searched
    # now: the estimate said "13 files cannot be indexed as they are (...); `streamrag index`
    # names them", and named none. It names them as `index` does, the first 10 on stderr.
    import random

    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    (folder / "sub" / "guild.txt").write_text("Bo Lund led the Guild of Pilots.\n")
    (folder / "rows.jsonl").write_text('{"body": "Ada Osk sailed."}\n')
    rng = random.Random(2)
    for i in range(11):
        (folder / f"blob{i:02}.txt").write_bytes(rng.randbytes(3000))
    common = ("index", str(folder), "--db", str(tmp_path / "x.db"), "--offline")
    assert cli_run(*common, "-q").returncode == 0
    unsearchable(monkeypatch, folder / "sub")
    est, est_json = cli_run(*common, "--estimate"), cli_run(*common, "--estimate", "--json")
    run, run_json = cli_run(*common, "-q"), cli_run(*common, "--json")
    assert est.returncode == est_json.returncode == run.returncode == run_json.returncode == 0
    said = run.stderr.splitlines()
    assert len(said) == 11 and said[-1] == "streamrag: ... and 3 more warnings (see --json)", said
    assert est.stderr.splitlines() == said
    warnings = json.loads(run_json.stdout)["warnings"]
    assert json.loads(est_json.stdout)["warnings"] == warnings and len(warnings) == 13
    assert {"blob00.txt: binary file, not indexed; move it out of the folder, or add it to index.exclude",
            "rows.jsonl: no 'text' field in any row (its fields: 'body'); name the column holding the text 'text' or set "
            "index.text_field (`text_field = \"body\"` under [index] reads its longest field)",
            "sub/guild.txt: cannot read (Permission denied); what was indexed from it stays; check that it "
            "exists and is readable (its permissions, and its folder's)"} <= set(warnings), warnings
    # (said as `index` says them: what is true of each)
    assert est.stdout.rstrip().endswith("1 file could not be read, 11 are not text, 1 could not be used (what was "
                                        "indexed from 1 of them stays, counted; the others not counted); the "
                                        "warnings name them"), est.stdout
    assert "(1 file could not be read, 11 are not text, 1 could not be used)" in run.stdout, run.stdout


def test_one_call_is_said_one_call(cli_run, tmp_path, simulator):
    # A one-sentence file's estimate said '  extract  1 calls  363 prompt ...', and an index
    # with one extraction answer in the cache '(1 first extraction answers are in the cache'.
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "a.txt").write_text("Mira Osk chaired the Harbor Council in Port Ruvickton.\n")
    common = ("index", str(folder), "--api-base", simulator.base_url)
    rows = {row.split()[0]: row.split()[1:3] for row in cli_run(*common, "--estimate").stdout.splitlines()[1:]
            if row.startswith("  ")}
    assert rows["extract"] == ["1", "call"] and rows["total"][1] == "calls" and int(rows["total"][0]) > 1, rows
    assert cli_run(*common, "-q").returncode == 0
    with sqlite3.connect(folder / ".streamrag" / "index.db") as conn:   # as if killed after the answer
        conn.execute("DELETE FROM extractions")
    conn.close()
    text = cli_run(*common, "--estimate").stdout
    assert "  (1 first extraction answer is in the cache, from an earlier run: not counted; so is 1 gleaning " \
        "answer)" in text, text


def test_an_estimate_says_the_files_with_nothing_to_index_as_index_does(cli_run, tmp_path):
    # An empty file and one of spaces and line ends: `index` warns of each, the estimate said
    # nothing of them, on stderr or in --json's warnings. A broken link's line comes first, as
    # in index's.
    (tmp_path / "a.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "spaces.md").write_text("  \n\n\t \n")
    (tmp_path / "gone.txt").symlink_to("nowhere")
    common = ("index", str(tmp_path), "--db", str(tmp_path / "x.db"), "--offline")
    est, est_json = cli_run(*common, "--estimate"), cli_run(*common, "--estimate", "--json")
    run = cli_run(*common, "-q")
    assert est.returncode == est_json.returncode == run.returncode == 0
    said = [line for line in run.stderr.splitlines() if line.startswith("streamrag: warning: ")]
    assert said[1:] == ["streamrag: warning: empty.txt: empty file, nothing to index",
                        "streamrag: warning: spaces.md: only white space, nothing to index"], said
    assert est.stderr.splitlines() == said
    assert [f"streamrag: warning: {w}" for w in json.loads(est_json.stdout)["warnings"]] == said
    assert json.loads(est_json.stdout)["unreadable_files"] == 0   # (nothing failed)


def _notes_read_with_warnings(folder: Path) -> Path:
    """``folder`` made with a note in UTF-8, one in cp1252, an empty one and one with a NUL:
    reading them warns of all but the first."""
    folder.mkdir()
    (folder / "a.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    (folder / "cafe.txt").write_bytes("Mira Osk ran the café by the harbor.\n".encode("cp1252"))
    (folder / "empty.txt").write_text("")
    (folder / "nul.txt").write_bytes(b"Quillon Marbeck opened a ferry office in Port Ruvickton.\x00\n")
    return folder


def test_an_estimate_says_what_reading_a_file_warns_of_as_index_does(cli_run, tmp_path):
    # A file in cp1252 and one with a stray NUL: `index` reads both and warns of each ("not
    # valid UTF-8, read as cp1252; ... iconv ...", "1 NUL character dropped"), the estimate
    # counted them without a word. Said in index's order: its failures, then file by file.
    folder = _notes_read_with_warnings(tmp_path / "n")
    (folder / "x.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
    common = ("index", str(folder), "--db", str(tmp_path / "x.db"), "--offline")
    est, est_json = cli_run(*common, "--estimate"), cli_run(*common, "--estimate", "--json")
    run = cli_run(*common, "-q")
    assert est.returncode == est_json.returncode == run.returncode == 0
    said = [line for line in run.stderr.splitlines() if line.startswith("streamrag: warning: ")]
    assert [line.split(":")[2] for line in said] == [" x.txt", " cafe.txt", " empty.txt", " nul.txt"], said
    assert "not valid UTF-8, read as cp1252" in said[1] and "NUL character dropped" in said[3], said
    assert est.stderr.splitlines() == said
    assert [f"streamrag: warning: {w}" for w in json.loads(est_json.stdout)["warnings"]] == said


async def test_an_update_s_estimate_reads_only_the_files_the_run_reads(tmp_path, monkeypatch):
    # Three files indexed, one edited: the run reads that one alone (the others unchanged on
    # disk, ``same_on_disk``); the estimate read and cut all three again (on a 3,000-document
    # index, 4.5 of its 12 s), to the same figures.
    folder = tmp_path / "n"
    folder.mkdir()
    for name, text in [("a.txt", "Mira Osk chaired the Harbor Council."), ("b.txt", "Quillon Marbeck sailed."),
                       ("c.txt", "Torvell Energy built a dam at Port Ruvickton.")]:
        (folder / name).write_text(text + "\n")
    settings = make_settings("", index={"extractor": "nlp"})
    db = tmp_path / "x.db"
    await sync([folder], settings, db, root=folder)
    (folder / "b.txt").write_text("Quillon Marbeck sailed to Port Ruvickton.\n")
    reads = []
    real = estimate_module.loader.read_documents

    def counted(path, **kwargs):
        reads.append(path.name)
        return real(path, **kwargs)

    monkeypatch.setattr(estimate_module.loader, "read_documents", counted)
    est = estimate([folder], settings, db, root=folder)
    assert reads == ["b.txt"]
    assert (est["documents"], est["documents_edited"], est["chunks_to_extract"]) == (3, 1, 1), est


def test_an_estimate_says_of_unchanged_files_what_the_run_says_of_them(cli_run, tmp_path):
    # A file in cp1252 and one with a stray NUL, indexed: a second `index` does not read them
    # again, so warns of neither (an empty file, never indexed, it says again); the estimate read
    # them, and warned of both.
    folder = _notes_read_with_warnings(tmp_path / "n")
    common = ("index", str(folder), "--db", str(tmp_path / "x.db"), "--offline")
    assert cli_run(*common, "-q").returncode == 0
    est, est_json = cli_run(*common, "--estimate"), cli_run(*common, "--estimate", "--json")
    again = cli_run(*common, "-q")
    assert est.returncode == est_json.returncode == again.returncode == 0
    said = [line for line in again.stderr.splitlines() if line.startswith("streamrag: warning: ")]
    assert said == ["streamrag: warning: empty.txt: empty file, nothing to index"], said
    assert est.stderr.splitlines() == said
    assert [f"streamrag: warning: {w}" for w in json.loads(est_json.stdout)["warnings"]] == said


def test_two_copies_of_a_text_edited_apart_are_one_edit_and_one_file_added():
    # a.txt and b.txt held one text (one document); each was edited to a text of its own. Each
    # path paired with the one document gone counted 2 edited of 1 removed: "-1 removed".
    indexed = {"a.txt": ("old", 10, 1.0), "b.txt": ("old", 10, 1.0), "c.txt": ("kept", 5, 1.0)}
    read = {"a.txt": ("new_a", 11, 2.0), "b.txt": ("new_b", 12, 2.0), "c.txt": ("kept", 5, 1.0)}
    assert estimate_module._changes(indexed, read, set(), set()) == (1, 1, 0, 0)
    # A plain edit, and a rename (the same text at another path: no change)
    assert estimate_module._changes(indexed, {"a.txt": ("new_a", 11, 2.0), "c.txt": ("kept", 5, 1.0)},
                                    set(), set()) == (0, 1, 0, 0)
    assert estimate_module._changes(indexed, {"z.txt": ("old", 10, 2.0), "c.txt": ("kept", 5, 1.0)},
                                    set(), set()) == (0, 0, 0, 0)


async def test_an_edited_file_whose_new_text_a_new_file_copies_is_an_edit_as_the_run_counts_it(news, tmp_path):
    # doc_00005.txt edited, and its new text copied into a new file read before it: the run
    # pairs every path holding a text, so says "1 edited"; the estimate paired the text's first
    # path alone (the copy, not indexed before) and said "1 added, 1 removed".
    settings = make_settings("")
    db = tmp_path / "index.db"
    await sync([news], settings, db, root=news)
    edited = news / "doc_00005.txt"
    edited.write_text(edited.read_text().rstrip("\n") + " Katja Wexstad later left Port Ruvickton.\n")
    (news / "a_copy.txt").write_text(edited.read_text())
    est, done = await index_and_estimate(news, settings, db)
    assert (est["documents_added"], est["documents_edited"], est["documents_removed"]) \
        == (done.documents_added, done.documents_edited, done.documents_removed) == (0, 1, 0)


async def test_an_add_edit_rename_delete_mix_is_counted_by_estimate_and_run_alike(news, tmp_path):
    # Both count through graph_state.document_changes: a file added, one edited, one renamed (no
    # change), one renamed and edited at once (one added, one removed) and one deleted.
    settings = make_settings("")
    db = tmp_path / "index.db"
    await sync([news], settings, db, root=news)
    add_articles(news, 10, 11)
    edited = news / "doc_00005.txt"
    edited.write_text(edited.read_text().rstrip("\n") + " Katja Wexstad later left Port Ruvickton.\n")
    (news / "doc_00006.txt").rename(news / "renamed.txt")
    moved = news / "doc_00007.txt"
    (news / "moved_and_edited.txt").write_text(moved.read_text() + "Mara Lind chairs the Harbor Council.\n")
    moved.unlink()
    (news / "doc_00004.txt").unlink()
    est, done = await index_and_estimate(news, settings, db)
    counts = ("documents_added", "documents_edited", "documents_removed", "documents_read_again")
    assert [est[k] for k in counts] == [getattr(done, k) for k in counts] == [2, 1, 2, 0]
    assert est["documents"] == done.documents == 10


@pytest.mark.parametrize("chmod", [False, True])
async def test_rows_read_again_for_another_text_field_are_counted_as_the_run_counts_them(tmp_path, simulator, chmod):
    # index.text_field renamed: the run says the rows whose text changed "read again"; the
    # estimate said them edited ("2 changed of 4 documents: 2 edited"). A row whose new field
    # holds its old text is unchanged, and costs no call in either. A `chmod` since (a new
    # status-change time alone: ``on_disk.retimed``) changes none of that.
    folder = tmp_path / "rows"
    folder.mkdir()
    (folder / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in [
        {"body": "Ada Osk runs the Quay of Velo.", "text": "Ada Osk runs the Quay of Velo."},
        {"body": "Bob Tan sails to Harlow.", "text": "Bob Tan sails to Harlow with Cora Vey."},
        {"body": "Mara Lind chairs the Harbor Council.", "text": "Mara Lind left the Harbor Council."}]))
    (folder / "notes.txt").write_text("Dag Holm keeps the lighthouse at Velo.\n")
    db = tmp_path / "index.db"
    await sync([folder], make_settings(simulator.base_url, index={"text_field": "body"}), db, root=folder)
    if chmod:
        (folder / "rows.jsonl").chmod(0o600)
    settings = make_settings(simulator.base_url, index={"text_field": "text"})
    est = estimate([folder], settings, db, root=folder)
    done = await sync([folder], settings, db, root=folder)
    counts = ("documents_added", "documents_edited", "documents_removed")
    assert [est[k] for k in counts] == [getattr(done, k) for k in counts] == [0, 0, 0]
    assert est["documents_read_again"] == done.documents_read_again == 2
    assert format_estimate(est).startswith("Estimate for 2 changed of 4 documents (")
    assert ": 2 read again; " in format_estimate(est).splitlines()[0]
    # (the unchanged row's chunk is extracted already: the run asks nothing of it)
    assert est["chunks_to_extract"] == done.chunks_extracted == 2
    assert est["llm"]["by_stage"]["extract"]["calls"] == paid(done.llm, "extract") == 2


async def test_a_new_report_input_budget_counts_the_reports_whose_context_it_cuts_differently(
        news, tmp_path, simulator, caplog):
    # index.report_max_input_tokens lowered: a context that fits both budgets is built as its
    # stored report's was, and the run keeps that report. Counted as if every report changed,
    # the estimate said 54 reports where the run wrote 5 of synth_small's 72 (6000 -> 3000),
    # and the run said "every report is written again" before it kept 67.
    db = tmp_path / "index.db"
    first = await sync([news], make_settings(simulator.base_url), db, root=news)
    caplog.clear()
    est, done = await index_and_estimate(news, make_settings(simulator.base_url,
                                                             index={"report_max_input_tokens": 600}), db)
    assert 0 < paid(done.llm, "report") < first.reports and done.reports_kept > 0, done.llm
    assert "every report is written again" not in caplog.text
    assert "reports are written again where their context changed" in caplog.text, caplog.text
    assert asked(est, "report") == paid(done.llm, "report"), (est["llm"], done.llm)


async def test_summaries_an_interrupted_run_left_in_the_cache_are_not_counted(tmp_path, simulator):
    # A first run stopped while summarizing: its extractions unpublished, half its summary
    # answers in the cache. The rerun takes those from the cache; the estimate counted every
    # summary paid (synth_small: 148 for the rerun's 78 paid, 70 from the cache).
    import shutil

    docs = news_copy(tmp_path, 10)
    settings = make_settings(simulator.base_url)
    db, whole = tmp_path / "index.db", tmp_path / "whole.db"
    await extract_only([docs], settings, db, docs)
    shutil.copy(db, whole)
    await sync([docs], settings, whole, root=docs)   # (the summary answers the stopped run had asked)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("ATTACH ? AS whole", (str(whole),))
        conn.execute("INSERT INTO llm_cache SELECT * FROM whole.llm_cache WHERE key IN (SELECT cache_key "
                     "FROM whole.llm_calls WHERE stage = 'summarize' AND cached = 0 AND id % 2 = 0)")
    est, done = await index_and_estimate(docs, settings, db)
    assert done.llm["summarize"]["cached"] > 0 and paid(done.llm, "summarize") > 0, done.llm
    for counts in ("calls", "cached"):
        assert est["llm"]["by_stage"]["summarize"][counts] == done.llm["summarize"][counts], (est["llm"], done.llm)


async def test_reports_and_summaries_the_cache_answers_after_settings_changed_back_are_not_counted(
        tmp_path, simulator):
    # index.extract_claims off and on again: every report context shows its claims again, and
    # the cache holds the reports of those contexts; the estimate counted 11 reports the run
    # took from the cache (37 on a reviewer's index). index.summary_max_tokens changed and back:
    # every summary and so every context as before, from the cache; 10 summaries and 26 reports
    # were counted for none paid.
    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"
    claims = make_settings(simulator.base_url, index={"extract_claims": True})
    await sync([docs], claims, db, root=docs)
    await sync([docs], make_settings(simulator.base_url), db, root=docs)
    est, done = await index_and_estimate(docs, claims, db)
    assert done.llm["report"]["cached"] > 0 and paid(done.llm, "report") == 0, done.llm
    assert paid(est["llm"]["by_stage"], "report") == 0, est["llm"]
    await sync([docs], make_settings(simulator.base_url, index={"extract_claims": True, "summary_max_tokens": 100}),
               db, root=docs)
    est, done = await index_and_estimate(docs, claims, db)
    assert done.llm["summarize"]["cached"] > 0, done.llm
    for stage in ("summarize", "report"):
        assert paid(est["llm"]["by_stage"], stage) == paid(done.llm, stage) == 0, (stage, est["llm"], done.llm)
        assert est["llm"]["by_stage"].get(stage, {}).get("cached", 0) == done.llm.get(stage, {}).get("cached", 0)


async def test_extractions_the_cache_answers_whole_after_claims_are_turned_off_are_not_stood_in_for(
        tmp_path, simulator):
    # index.extract_claims turned off: every chunk is extracted again (an extractor of its own),
    # its first round and gleanings from the cache, and merges as before but for its claims. The
    # estimate stood in the offline extractor's names for them: 35 summaries and 26 reports for
    # the run's 0 and 11 (ten synth_small articles: 23 and 16). Now the cache's answers, parsed.
    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"extract_claims": True}), db, root=docs)
    est, done = await index_and_estimate(docs, make_settings(simulator.base_url), db)
    assert done.chunks_extracted > 0 and paid(done.llm, "extract") == 0, done.llm
    assert paid(done.llm, "report") > 0, done.llm
    for stage in ("summarize", "report"):
        assert asked(est, stage) == paid(done.llm, stage), (stage, est["llm"], done.llm)
    assert est["llm"]["by_stage"]["report"]["prompt_tokens"] == done.llm["report"]["prompt_tokens"]


async def test_claims_answers_the_cache_holds_are_counted_free(tmp_path, simulator):
    # index.max_gleanings 1 -> 0 with claims on: every chunk is extracted again, its first round
    # from the cache, and the claims request of a chunk whose gleaning had added nothing is the
    # one asked before, answered by the cache too. The estimate counted each claims call paid
    # (ten news articles: 12 paid for the run's 9, 3 from the cache).
    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"extract_claims": True}), db, root=docs)
    est, done = await index_and_estimate(
        docs, make_settings(simulator.base_url, index={"extract_claims": True, "max_gleanings": 0}), db)
    claims, ran = est["llm"]["by_stage"]["claims"], done.llm["claims"]
    assert ran["cached"] > 0 and paid(done.llm, "claims") > 0, done.llm
    assert (claims["calls"], claims["cached"]) == (ran["calls"], ran["cached"]), (claims, ran)
    extract = done.llm["extract"]["cached"]
    assert f"  ({extract} first extraction answers are in the cache, from an earlier run: not counted; " \
        f"so are {ran['cached']} claims answers)" in format_estimate(est).splitlines()


async def test_claims_turned_on_count_the_run_s_summaries_and_say_their_reports_stand_claims_in(ten_indexed, simulator):
    # index.extract_claims turned on for an index built without: every chunk is extracted again,
    # its first round and gleanings from the cache, and asked for its claims. The estimate stood
    # the offline extractor's names in for the whole extraction: 35 summaries and 26 reports for
    # the run's 0 and 11 (ten news articles), said as if they were the run's. Now the names from
    # the cache, and its claims about any of them: the reports likely more than the run's, said
    # so (it said "an upper bound", which they are not: a claim may name what is no entity yet).
    docs, db, _ = ten_indexed
    claims = make_settings(simulator.base_url, index={"extract_claims": True})
    est, done = await index_and_estimate(docs, claims, db)
    assert paid(done.llm, "claims") == done.chunks_extracted > 0 and paid(done.llm, "report") > 0, done.llm
    assert asked(est, "summarize") == paid(done.llm, "summarize"), (est["llm"], done.llm)
    assert asked(est, "report") >= paid(done.llm, "report"), (est["llm"], done.llm)
    # (the claims requests are the run's: of the names its extraction from the cache holds)
    assert est["llm"]["by_stage"]["claims"]["prompt_tokens"] == done.llm["claims"]["prompt_tokens"]
    assert est["reports_claims_stood_in"] and est["chunks_claims_unknown"] == done.chunks_extracted
    assert est["reports_upper_bound"]   # (the old name, kept)
    assert (f"The reports are likely fewer than counted: the claims asked of {done.chunks_extracted} chunks are "
            "counted as if about every name they hold (which names they are about, only the model's answers say; "
            "a claim about a name that is no entity yet makes one, not counted).") in format_estimate(est).splitlines()
    assert "upper bound" not in format_estimate(est)
    add_articles(docs, 10, 12)   # (new articles' claims: their names are guessed, as before)
    est = estimate([docs], claims, db, root=docs)
    assert asked(est, "report") and not est["reports_claims_stood_in"] and "likely fewer" not in format_estimate(est)


async def news_indexed(tmp_path: Path, simulator, n: int) -> tuple[Path, Path, Settings]:
    """The first ``n`` articles of news41 indexed through the simulator: their folder, the
    index, the settings."""
    docs = news_copy(tmp_path, n)
    db = tmp_path / "index.db"
    settings = make_settings(simulator.base_url)
    await sync([docs], settings, db, root=docs)
    return docs, db, settings


async def estimated_and_summarized_again(docs: Path, settings: Settings, db: Path) -> tuple[dict, SyncResult, list[str]]:
    """The estimate of a run of ``docs`` into ``db`` that summarizes every merged description
    again, the run's result and the lines it said. The estimate's summarize calls, and of them
    those the cache answers, are the run's; it says the summary settings changed; once the run
    wrote the mark, an estimate has nothing to do."""
    est = estimate([docs], settings, db, root=docs)
    said: list[str] = []
    done = await Indexer(settings, db, root=docs, say=said.append).run([docs])
    ran = done.llm.get("summarize", {})
    got = est["llm"]["by_stage"].get("summarize", {})
    assert (got.get("calls", 0), got.get("cached", 0)) == (ran.get("calls", 0), ran.get("cached", 0)), (got, ran)
    assert est["summarized_again_because"].startswith("the summary settings changed"), est
    again = estimate([docs], settings, db, root=docs)   # (the run wrote the mark: nothing again)
    assert again["summarized_again_because"] == "" and format_estimate(again).startswith("Nothing to do")
    return est, done, said


async def test_a_summary_setting_changed_and_back_is_estimated_as_the_run_summarizes_from_the_cache(
        ten_indexed, simulator):
    # index.summary_max_tokens 150 -> 100 -> 150: the run says every merged description is
    # summarized again and asks the cache for each summary a model wrote (10 of ten news
    # articles), free; the estimate said 'Nothing to do'. Now it counts them as the run does,
    # answered by the cache, and says why.
    docs, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    await sync([docs], make_settings(simulator.base_url, index={"summary_max_tokens": 100}), db, root=docs)
    est, done, _ = await estimated_and_summarized_again(docs, settings, db)
    ran = done.llm["summarize"]
    assert ran["calls"] == ran["cached"] > 0 and set(done.llm) == {"summarize"}, done.llm
    why = "the summary settings changed since this index was built (answers in the cache cost nothing)"
    assert est["summarized_again_because"] == why
    assert format_estimate(est).splitlines() == [
        f"Estimate for an update of {est['documents']} documents ({est['corpus_tokens']:,} tokens): none changed; "
        "0 chunks to extract; no LLM calls to pay for.",
        f"  ({ran['cached']} summaries are in the cache, from an earlier run: not counted)",
        f"Every merged description is summarized again: {why}."]


async def test_a_chunk_whose_claims_call_gave_up_is_estimated_its_claims_call_alone(tmp_path, simulator):
    # A chunk whose claims call gave up is published with its extraction stored without claims
    # (extractor.claimless_key), and the next run asks its claims call alone: no first round or
    # gleaning, not even from the cache. The estimate counted them as a chunk's to extract: from
    # the cache while it holds them, paid once it does not (pruned, or llm.cache off): ten news
    # articles, 10 extract, 10 glean_check and 7 glean calls the run did not make, and a claims
    # request of the offline extractor's names (10,762 prompt tokens for the run's 10,480).
    import httpx

    from streamrag.simulator import detect_task

    real = httpx.Client(base_url=simulator.base_url.removesuffix("/v1"))

    def answering(claims_work: bool) -> httpx.MockTransport:
        def answer(request: httpx.Request) -> httpx.Response:
            if request.method == "POST" and not claims_work \
                    and detect_task(json.loads(request.content)["messages"]) == "claims":
                return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "I cannot list claims."}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
            got = real.request(request.method, request.url.path, content=request.content,
                               headers={"content-type": "application/json"})
            return httpx.Response(got.status_code, content=got.content, headers={"content-type": "application/json"})
        return httpx.MockTransport(answer)

    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"
    settings = make_settings(simulator.base_url, index={"extract_claims": True})
    try:
        first = await sync([docs], settings, db, root=docs, transport=answering(False))
        assert first.failures == first.chunks > 0 and first.entities > 0
        conn = sqlite3.connect(db)
        with conn:
            conn.execute("DELETE FROM llm_cache")   # (pruned, say)
        conn.close()
        est = estimate([docs], settings, db, root=docs)
        done = await sync([docs], settings, db, root=docs, transport=answering(True))
    finally:
        real.close()
    assert set(done.llm) == {"claims", "report"} and done.failures == 0, done.llm
    assert not {"extract", "glean_check", "glean"} & set(est["llm"]["by_stage"]), est["llm"]
    claims = est["llm"]["by_stage"]["claims"]
    assert (claims["calls"], claims["prompt_tokens"]) == (done.llm["claims"]["calls"], done.llm["claims"]["prompt_tokens"])
    assert asked(est, "summarize") == paid(done.llm, "summarize") == 0, est["llm"]
    assert asked(est, "report") >= paid(done.llm, "report") and est["reports_claims_stood_in"]


def extraction_calls(llm: dict) -> dict[str, tuple[int, int]]:
    """(calls, cached) of the extraction stages of ``llm`` (a run's, or an estimate's by_stage)."""
    return {stage: (s["calls"], s["cached"]) for stage, s in llm.items()
            if stage in ("extract", "glean_check", "glean", "claims") and s["calls"]}


async def test_a_chunk_extracted_but_for_its_claims_is_estimated_as_the_run_asks_it_its_claims_alone(
        tmp_path, simulator):
    # A chunk stored under extractor.claimless_key (a claims call that gave up; or an index built
    # without claims, then index.extract_claims turned on) is sent to its claims call alone: the
    # run asks no extract or glean call, not even of the cache. The estimate said its first
    # round and gleanings were "in the cache, from an earlier run" (12 and 21 of ten articles),
    # rows the run does not have.
    import httpx

    from conftest import chat_answer
    from streamrag.simulator import ANSWERS, detect_task

    docs = news_copy(tmp_path, 3)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url), db, root=docs)
    claims = make_settings(simulator.base_url, index={"extract_claims": True})
    est, done = await index_and_estimate(docs, claims, db)
    assert extraction_calls(done.llm) == {"claims": (done.chunks_extracted, 0)}, done.llm
    assert extraction_calls(est["llm"]["by_stage"]) == extraction_calls(done.llm), (est["llm"], done.llm)
    assert "first extraction answer" not in format_estimate(est)

    def answer(request: httpx.Request) -> httpx.Response:   # (every claims answer unusable)
        messages = json.loads(request.content)["messages"]
        task = detect_task(messages)
        return chat_answer("I cannot list claims." if task == "claims" else ANSWERS[task](messages))

    failed = tmp_path / "failed.db"
    first = await sync([docs], claims, failed, root=docs, transport=httpx.MockTransport(answer))
    assert first.failures == first.chunks > 0 and first.claims == 0
    est, done = await index_and_estimate(docs, claims, failed)
    assert extraction_calls(done.llm) == {"claims": (first.chunks, 0)}, done.llm
    assert extraction_calls(est["llm"]["by_stage"]) == extraction_calls(done.llm), (est["llm"], done.llm)


async def test_report_settings_changed_are_said_as_the_run_says_them(tmp_path, simulator):
    # index.report_max_input_tokens 6000 -> 5000: the run says "reports are written again where
    # their context changed", and the estimate said "Nothing to do" (every context fitting both);
    # index.report_min_members changed: reports counted with no word of why. Now both say it.
    docs = news_copy(tmp_path, 3)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url), db, root=docs)
    why = "the report settings changed since this index was built (answers in the cache cost nothing)"
    for changed in ({"report_max_input_tokens": 5000}, {"report_max_input_tokens": 5000, "report_min_members": 2}):
        settings = make_settings(simulator.base_url, index=changed)
        est = estimate([docs], settings, db, root=docs)
        said: list[str] = []
        await Indexer(settings, db, root=docs, say=said.append).run([docs])
        assert said == [f"the report settings changed since this index was built: {est['reported_again']}"], said
        assert est["reported_again_because"] == why, est
        text = format_estimate(est)
        assert not text.startswith("Nothing to do"), text
        assert f"{est['reported_again'][0].upper()}{est['reported_again'][1:]}: {why}." in text.splitlines()
        again = estimate([docs], settings, db, root=docs)   # (the run wrote the mark: nothing again)
        assert again["reported_again_because"] == again["reported_again"] == "", again
        assert format_estimate(again).startswith("Nothing to do"), format_estimate(again)
    assert est["reported_again"].startswith("reports are written for the communities that now reach")


async def test_claims_answers_the_cache_holds_but_the_run_cannot_use_are_counted_paid(tmp_path, simulator):
    # index.max_gleanings 1 -> 0 with claims on, the cache's claims answers unusable (prose: the
    # run's usable check rejects a cached answer and asks again, paid). The estimate read them
    # with parse_records, found no claims, and counted each claims call answered by the cache.
    from streamrag.answer_cache import pack, unpack

    docs = news_copy(tmp_path, 6)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"extract_claims": True}), db, root=docs)
    conn = sqlite3.connect(db)
    with conn:
        keys = [k for (k,) in conn.execute("SELECT DISTINCT cache_key FROM llm_calls WHERE stage = 'claims'")]
        for key in keys:
            raw = conn.execute("SELECT response FROM llm_cache WHERE key = ?", (key,)).fetchone()[0]
            answer = json.loads(unpack(raw))
            answer["text"] = "I cannot list claims."
            conn.execute("UPDATE llm_cache SET response = ? WHERE key = ?",
                         (pack(json.dumps(answer).encode()), key))
    conn.close()
    assert keys
    est, done = await index_and_estimate(
        docs, make_settings(simulator.base_url, index={"extract_claims": True, "max_gleanings": 0}), db)
    claims, ran = est["llm"]["by_stage"]["claims"], done.llm["claims"]
    assert ran["cached"] == 0 and ran["calls"] > 0, done.llm
    assert (claims["calls"], claims["cached"]) == (ran["calls"], ran["cached"]), (claims, ran)


async def test_an_extraction_setting_changed_and_back_to_the_same_records_counts_no_summary_or_report(
        tmp_path, simulator):
    # index.max_gleanings 1 -> 2 -> 1 with claims on: each chunk is extracted again, from the cache
    # but for its second round's check, to the records it is published with, and the run keeps it
    # as it is (8fcc38e): no summary, no report. The estimate stood the offline extractor's names
    # in for each chunk whose second check the cache does not answer (ten news articles: 28
    # summaries and 24 reports for the run's 0 and 0). Now the model's names so far, with the
    # claims the cache holds of them, and the chunks whose records are the published ones kept.
    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"

    def settings(**index):
        return make_settings(simulator.base_url, index={"extract_claims": True, **index})

    await sync([docs], settings(), db, root=docs)
    for changed in ({"max_gleanings": 2}, {}):
        est, done = await index_and_estimate(docs, settings(**changed), db)
        assert (done.version, done.published) == (1, False), changed
        assert paid(done.llm, "summarize") == paid(done.llm, "report") == 0, done.llm
        for stage in ("summarize", "report"):
            assert asked(est, stage) == 0, (changed, est["llm"], done.llm)
        for stage in ("extract", "glean_check", "glean"):   # (the calls, as before)
            got = est["llm"]["by_stage"].get(stage, {})
            ran = done.llm.get(stage, {})
            assert (got.get("calls", 0), got.get("cached", 0)) == (ran.get("calls", 0), ran.get("cached", 0)), stage


async def test_an_index_from_before_the_summarizer_mark_is_said_summarized_again_by_run_and_estimate(
        tmp_path, simulator):
    # One condition (pipeline.resummarizes) for the run's line, the estimate's line and what it
    # counts: it was written three times, _estimate's without the pre-mark test of entities.
    docs, db, settings = await news_indexed(tmp_path, simulator, 3)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM meta WHERE key = 'summarizer'")
    conn.close()
    _, done, said = await estimated_and_summarized_again(docs, settings, db)
    assert "summary" in done.settings_changed and "every merged description is summarized again" in said[0]


async def test_an_index_whose_reports_showed_claims_by_subject_alone_is_said_and_counted_why_they_are_written(
        tmp_path, simulator, monkeypatch):
    # An index built before a claim was shown in its object's communities' reports (its contexts
    # took claims by subject alone: CLAIM_LINES_VERSION 2): the next run writes the reports whose
    # context gains such a claim, once, though no setting changed. It was said "the report settings
    # changed since this index was built". Now the run and its estimate say why, and count alike;
    # the index ends as a fresh one's.
    from streamrag import report_stage, reports

    settings = make_settings(simulator.base_url, index={"extract_claims": True})
    docs = news_copy(tmp_path, 8)
    db = tmp_path / "index.db"
    with monkeypatch.context() as old:   # (as that streamrag built it)
        old.setattr(reports, "CLAIM_LINES_VERSION", 2)
        old.setattr(report_stage, "claims_by_end", lambda claims: report_stage._grouped(claims, lambda c: c.subject_id))
        await sync([docs], settings, db, root=docs)
    est = estimate([docs], settings, db, root=docs)
    said: list[str] = []
    done = await Indexer(settings, db, root=docs, say=said.append).run([docs])
    assert said == [f"{reports.CLAIMS_BY_OBJECT_WHY}: {reports.CLAIM_LINES_REDONE}"], said
    assert est["reported_again"] == reports.CLAIM_LINES_REDONE, est
    assert est["reported_again_because"] == reports.CLAIMS_BY_OBJECT_WHY + " (answers in the cache cost nothing)"
    assert "report" not in done.settings_changed   # (no setting changed)
    assert done.reports_generated > 0 and est["llm"]["by_stage"]["report"]["calls"] == done.llm["report"]["calls"]
    fresh = tmp_path / "fresh.db"
    await sync([docs], settings, fresh, root=docs)

    def reports_of(path: Path) -> list[tuple]:
        store = Store(path, readonly=True)
        try:
            return sorted(tuple(r.values()) for r in store.query(
                "SELECT c.level, (SELECT group_concat(entity_id) FROM (SELECT entity_id FROM community_members m "
                "WHERE m.community_id = c.id ORDER BY entity_id)), c.context_key, c.report_key FROM communities c"))
        finally:
            store.close()
    assert reports_of(db) == reports_of(fresh)
    again = estimate([docs], settings, db, root=docs)   # (the run wrote the mark: nothing again)
    assert again["reported_again_because"] == again["reported_again"] == "", again


async def test_an_estimate_of_an_index_an_older_streamrag_made_leaves_its_file_as_it_was(cli_run, tmp_path, simulator):
    # `index --estimate` opened it as every reader does, which upgrades an older index's schema
    # on disk first: a command that spends nothing changed the index. Now it reads an upgraded
    # copy; the run that follows upgrades the index and does what was estimated.
    import hashlib

    from streamrag.store import SCHEMA_VERSION

    docs = news_copy(tmp_path, 4)
    settings = make_settings(simulator.base_url)
    db = tmp_path / "index.db"
    await sync([docs], settings, db, root=docs)
    add_articles(docs, 4, 6)
    # (before failure_keys_guarded: a step with no proof it changes nothing, an upgrade no reader may skip)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DROP INDEX IF EXISTS llm_calls_usage")
        conn.execute("DROP INDEX IF EXISTS llm_calls_failed")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     (str(schema_before("failure_keys_guarded")),))
    files = sorted(f.name for f in tmp_path.iterdir())
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    out = cli_run("index", str(docs), "--estimate", "--json", "--db", str(db), "--api-base", simulator.base_url)
    assert out.returncode == 0, out.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert sorted(f.name for f in tmp_path.iterdir()) == files
    assert "made by an older streamrag: estimated on an upgraded copy" in out.stderr, out.stderr
    est = json.loads(out.stdout)
    assert est["update"] and est["documents_added"] == 2 and est["chunks_to_extract"] > 0, est
    done = await sync([docs], settings, db, root=docs)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert est["llm"]["by_stage"]["extract"]["calls"] == done.llm["extract"]["calls"], (est["llm"], done.llm)


def test_an_older_index_whose_copy_cannot_be_made_is_said_so_alone_and_left_as_it_is(cli_run, corpus, tmp_path,
                                                                                     monkeypatch):
    # The copy's backup failing (a full temporary folder): the estimate said "estimated on an
    # upgraded copy" above the error that the copy could not be made.
    import hashlib
    import tempfile

    from streamrag.store import SCHEMA_VERSION

    db = tmp_path / "index.db"
    assert cli_run("index", str(corpus), "--offline", "-q", "--db", str(db)).returncode == 0
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:   # (as an older streamrag left it: read from a copy)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     (str(schema_before("failure_keys_guarded")),))
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    temp = tmp_path / "temp"
    temp.mkdir()
    real = estimate_module.as_it_lies

    @contextlib.contextmanager
    def full(path):
        with real(path):
            class Source:
                def backup(self, target):
                    raise sqlite3.OperationalError("database or disk is full")
            yield Source()
    monkeypatch.setattr(estimate_module, "as_it_lies", full)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))   # (TMPDIR, as this process read it)
    out = cli_run("index", str(corpus), "--estimate", "--offline", "--db", str(db))
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith(f"streamrag: error: {db} was made by an older streamrag, and the upgraded copy an "
                                 f"estimate reads could not be made in {temp} (database or disk is full)"), out.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest and list(temp.iterdir()) == []
    # (and the way to upgrade it named spends nothing: it said "run `streamrag index` once", a
    # run of a user who only wanted it priced)
    assert out.stderr.rstrip().endswith(f"or run `streamrag status --db {db}` once to upgrade the index (no LLM "
                                        "call)"), out.stderr
    with contextlib.closing(sqlite3.connect(db)) as conn:
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()
    assert cli_run("status", "--db", str(db)).returncode == 0
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == runs


def test_an_older_index_in_a_folder_no_one_may_write_is_not_told_to_be_upgraded_where_it_lies(cli_run, corpus,
                                                                                              tmp_path):
    # An index marked immutable (chattr +i, file and folder: read-only to root too) whose estimate
    # read an upgraded copy said "`streamrag status --db ...` upgrades it", which no run can do
    # there: it names the fix the other read-only refusals name, a copy in a folder one may write.
    import subprocess

    folder = tmp_path / "kept"
    folder.mkdir()
    db = folder / "index.db"
    assert cli_run("index", str(corpus), "--offline", "-q", "--db", str(db)).returncode == 0
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:   # (as an older streamrag left it: read from a copy)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     (str(schema_before("failure_keys_guarded")),))
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr is not available here (or the file system has no attributes)")
    try:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
        out = cli_run("index", str(corpus), "--estimate", "--offline", "--db", str(db))
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
        subprocess.run(["chattr", "-i", str(db)], check=True)
    assert out.returncode == 0, out.stderr
    assert "estimated on an upgraded copy" in out.stderr, out.stderr
    assert "upgrades it" not in out.stderr, out.stderr
    assert "cannot be upgraded where it lies" in out.stderr and "copy it to a folder you may write" in out.stderr, \
        out.stderr


async def older_index(corpus: Path, tmp_path: Path, before: str = "failure_keys_guarded") -> tuple[Path, Path]:
    """``corpus`` indexed offline, its schema marked as an older streamrag left it (before step
    ``before``: by default failure_keys_guarded, an upgrade an estimate reads a copy for), and an
    empty folder to be an estimate's TMPDIR."""
    db = tmp_path / "index.db"
    await sync([corpus], make_settings(), db, root=corpus)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(schema_before(before)),))
    temp = tmp_path / "temp"
    temp.mkdir()
    return db, temp


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "file read-only to the user"])
async def test_an_estimate_reads_an_older_index_in_place_where_its_upgrade_would_change_nothing(
        cli_run, corpus, tmp_path, monkeypatch, read_only):
    # It read an upgraded copy of every older index, the whole index copied into the temporary
    # folder (a 372 MB index: 4.8 s, 2.8 s in place), even where the steps it lacks would change
    # no row of it (its chunks all counted), as a reader that cannot write it reads it in place.
    # The index is left as it was: its bytes, its mtime, and nothing left beside it (a reader of
    # a file read-only to the user makes no -wal or -shm there, which it could not remove).
    import hashlib
    import subprocess
    import sys
    import tempfile

    from streamrag.store import SCHEMA_VERSION

    db, temp = await older_index(corpus, tmp_path, before="chunks_encoding_counted")
    (corpus / "added.txt").write_text("Mayor Anna Berg met Captain Olaf Lind in Port Vell.")
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    stamp = db.stat().st_mtime_ns
    beside = sorted(f.name for f in db.parent.iterdir())
    args = ["index", str(corpus), "--estimate", "--offline", "--json", "--db", str(db)]
    if read_only:   # (as a user the file's mode holds: root ignores it, so its capabilities dropped)
        drop = [] if os.geteuid() != 0 else ["setpriv", "--inh-caps=-all", "--bounding-set=-all"]
        if drop and not shutil.which("setpriv"):
            pytest.skip("root, and no setpriv to drop its capabilities")
        db.chmod(0o444)
        try:
            out = subprocess.run([*drop, sys.executable, "-m", "streamrag", *args], env=clean_env(TMPDIR=str(temp)),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        finally:
            db.chmod(0o644)
    else:
        monkeypatch.setattr(tempfile, "tempdir", str(temp))   # (TMPDIR, as this process read it)
        out = cli_run(*args)
    assert out.returncode == 0, out.stderr
    assert "upgraded copy" not in out.stderr and list(temp.iterdir()) == [], out.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert db.stat().st_mtime_ns == stamp
    assert sorted(f.name for f in db.parent.iterdir()) == beside
    in_place = json.loads(out.stdout)
    assert in_place["documents_added"] == 1, in_place
    assert cli_run("status", "--db", str(db)).returncode == 0   # (upgraded: the same estimate)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    out = cli_run("index", str(corpus), "--estimate", "--offline", "--json", "--db", str(db))
    assert json.loads(out.stdout) == in_place


def held_estimate(corpus: Path, db: Path, temp: Path):
    """An `index --estimate` of ``db`` in a process of its own (TMPDIR ``temp``), held once its
    upgraded copy is made, until a signal comes."""
    import subprocess
    import sys

    held = ("import sys, time\nimport streamrag.estimate as e\n"
            "def held(*a, **k):\n    print('estimating', flush=True)\n    time.sleep(60)\n"
            "e._estimate = held\nfrom streamrag.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.Popen([sys.executable, "-c", held, "index", str(corpus), "--estimate", "--offline",
                             "--db", str(db)], env=clean_env(TMPDIR=str(temp)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.stdout.readline() != "estimating\n":
        proc.kill()
        raise AssertionError(proc.communicate()[1])
    return proc


async def test_an_estimate_stopped_by_sigterm_removes_the_upgraded_copy_it_read(corpus, tmp_path):
    # SIGTERM (a service manager, `timeout`, `kill`) killed `index --estimate` outright, leaving
    # the upgraded copy of an older index, a whole copy of it, in the temporary folder; Ctrl-C
    # removed it. Now SIGTERM stops it as Ctrl-C does.
    import signal

    db, temp = await older_index(corpus, tmp_path)
    proc = held_estimate(corpus, db, temp)
    try:
        assert [f.name[:len("streamrag-estimate-")] for f in temp.iterdir()] == ["streamrag-estimate-"]
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.splitlines()[-1] == "streamrag: interrupted", err
    assert list(temp.iterdir()) == []


async def test_an_upgraded_copy_a_killed_estimate_left_is_removed_by_the_next_never_a_live_ones(
        cli_run, corpus, tmp_path, monkeypatch):
    # SIGKILL (or a power cut) leaves an older index's upgraded copy, the index's size, in the
    # temporary folder (in RAM on a tmpfs /tmp), and nothing removed it. Now the next estimate
    # does, unless an estimate still reads it: its PID alive, or its lock held (a PID in another
    # container means nothing here); a copy with no lock (an earlier streamrag's) after a day.
    import signal
    import tempfile

    db, temp = await older_index(corpus, tmp_path)

    def copies() -> set[str]:
        return {f.name for f in temp.iterdir()}

    live = killed = None
    try:
        live = held_estimate(corpus, db, temp)
        (running,) = copies()
        killed = held_estimate(corpus, db, temp)
        (left,) = copies() - {running}
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=30)
        # (one whose PID is gone, but whose lock is held: an estimate in another container)
        elsewhere = temp / left.replace(f"-{killed.pid}-", f"-{killed.pid}-elsewhere")
        shutil.copytree(temp / left, elsewhere)
        lock = open(elsewhere / "estimating", "w")
        import fcntl
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # (an earlier streamrag's, no PID and no lock in it: one written now, one two days ago)
        (temp / "streamrag-estimate-abcd1234").mkdir()
        (temp / "streamrag-estimate-abcd1234" / "index.db").write_bytes(b"x")
        old = temp / "streamrag-estimate-efgh5678"
        old.mkdir()
        (old / "index.db").write_bytes(b"x")
        for f in (old / "index.db", old):
            os.utime(f, (f.stat().st_atime, f.stat().st_mtime - 2 * 24 * 3600))
        monkeypatch.setattr(tempfile, "tempdir", str(temp))   # (TMPDIR, as this process read it)
        out = cli_run("index", str(corpus), "--estimate", "--offline", "--db", str(db))
        assert out.returncode == 0, out.stderr
        assert copies() == {elsewhere.name, "streamrag-estimate-abcd1234", running}, copies()
        removed = [line for line in out.stderr.splitlines() if line.startswith("streamrag: removed ")]
        assert len(removed) == 2 and str(temp / left) in "".join(removed), out.stderr
        assert re.search(r"estimated on an upgraded copy \(\d+\.\d MB in ", out.stderr), out.stderr
        lock.close()
        live.send_signal(signal.SIGTERM)
        live.communicate(timeout=30)
        assert cli_run("index", str(corpus), "--estimate", "--offline", "--db", str(db)).returncode == 0
        assert copies() == {"streamrag-estimate-abcd1234"}, copies()
    finally:
        for proc in (killed, live):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()


async def test_claims_answers_the_cache_holds_after_index_max_gleanings_rose_are_counted_free(tmp_path, simulator):
    # Built with claims, gleaning one round at most, then estimated with two: each chunk whose
    # cached gleaning went on was counted its claims call paid, its next round taken to add
    # nothing all the same (ten articles: 18 paid calls for the run's 9, every claims answer the
    # run's from the cache). Now its claims are paid only as far as a round is expected to add.
    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"extract_claims": True}), db, root=docs)
    settings = make_settings(simulator.base_url, index={"extract_claims": True, "max_gleanings": 2})
    est, done = await index_and_estimate(docs, settings, db)
    by_stage = est["llm"]["by_stage"]
    assert done.llm["claims"]["cached"] > 0, done.llm
    assert by_stage["claims"]["cached"] == done.llm["claims"]["cached"], (by_stage, done.llm)
    assert paid(by_stage, "claims") <= paid(done.llm, "claims") + 1, (by_stage, done.llm)
    assert sum(map(functools.partial(paid, by_stage), by_stage)) <= \
        sum(map(functools.partial(paid, done.llm), done.llm)) + 1, (by_stage, done.llm)


async def test_with_the_cache_off_the_reports_it_foretells_are_priced_at_their_contexts(tmp_path, simulator):
    # index.extract_claims on, off and on again, with llm.cache = false: the reports the cache
    # holds are paid, and their contexts are known, but each was priced at a full context
    # (ten articles: 22,550 prompt tokens for the run's 13,834).
    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"extract_claims": True}), db, root=docs)
    await sync([docs], make_settings(simulator.base_url), db, root=docs)
    off = make_settings(simulator.base_url, llm={"cache": False}, index={"extract_claims": True})
    est, done = await index_and_estimate(docs, off, db)
    report = est["llm"]["by_stage"]["report"]
    assert report["cached"] == done.llm["report"]["cached"] == 0 and report["calls"] == paid(done.llm, "report") > 0
    assert off_by(report["prompt_tokens"], done.llm["report"]["prompt_tokens"]) <= 0.02, (report, done.llm["report"])


async def claims_given_up(tmp_path: Path, simulator) -> tuple[Path, Path, Settings, SyncResult]:
    """Three news articles indexed with claims, every claims call giving up (each chunk stored
    without its claims): the folder, the index, the claims settings and that run's result."""
    from conftest import simulated_transport

    docs = news_copy(tmp_path, 3)
    db = tmp_path / "index.db"
    claims = make_settings(simulator.base_url, index={"extract_claims": True})
    first = await sync([docs], claims, db, root=docs, transport=simulated_transport(claims_work=False))
    assert first.failures == first.chunks > 0
    return docs, db, claims, first


async def test_chunks_whose_claims_call_gave_up_are_not_said_extracted_again(tmp_path, simulator):
    # Built with claims, every claims call giving up (each chunk stored without its claims),
    # then with index.max_gleanings 2 and back: the estimate, and the run, said "every chunk is
    # extracted again"; the run extracted none, and asked each chunk its claims alone.
    docs, db, claims, first = await claims_given_up(tmp_path, simulator)
    await sync([docs], make_settings(simulator.base_url, index={"extract_claims": True, "max_gleanings": 2}),
               db, root=docs)
    said: list[str] = []
    est = estimate([docs], claims, db, root=docs)
    done = await Indexer(claims, db, root=docs, say=said.append).run([docs])
    assert extraction_calls(done.llm).keys() == {"claims"}, done.llm
    assert est["chunks_claims_only"] == est["chunks_to_extract"] == first.chunks, est
    # (it said "no chunk is extracted again (the extraction of each with these settings is
    # stored, but for the claims of 3 of them, asked alone)": none is stored with these settings)
    words = "every chunk is asked for its claims alone (its entities and relationships as extracted"
    assert est["extracted_again"] == f"{words})", est["extracted_again"]
    assert f"{words[:1].upper()}{words[1:]}): " in format_estimate(est)
    assert [line for line in said if f"{words}; answers in the cache cost nothing)" in line], said
    assert not [line for line in said if "stored" in line], said


async def test_an_index_built_offline_whose_chunks_are_asked_their_claims_alone_is_not_said_extracted(tmp_path,
                                                                                                     simulator):
    # Built with claims, every claims call giving up, then offline: each chunk's model extraction
    # stored without its claims. The run asks each its claims alone, said so, with why ("every
    # chunk is asked ..." is no "every chunk is extracted again": not "is extracted with gpt-4o-mini").
    docs, db, claims, first = await claims_given_up(tmp_path, simulator)
    await sync([docs], make_settings("", index={"extractor": "nlp"}), db, root=docs)
    said: list[str] = []
    est = estimate([docs], claims, db, root=docs)
    done = await Indexer(claims, db, root=docs, say=said.append).run([docs])
    assert extraction_calls(done.llm).keys() == {"claims"}, done.llm
    words = "this index was built offline: every chunk is asked for its claims alone (its entities and " \
            "relationships as extracted"
    assert [line for line in said if f"{words}; answers in the cache cost nothing)" in line], said
    assert est["extracted_again_because"] == "it was built offline", est
    assert "\nEvery chunk is asked for its claims alone (its entities and relationships as extracted): it was " \
        "built offline." in format_estimate(est), format_estimate(est)


async def test_chunks_extracted_to_the_records_they_are_live_with_are_not_said_to_replace_them(tmp_path, simulator):
    # index.max_gleanings 1 -> 2 -> 1 with claims on: the run keeps the index as it is (each
    # stored extraction holds the records its chunk is live with), and the estimate's first line
    # said "(and 12 extracted with these settings by an earlier run, to replace the extraction of
    # them the index holds, made with other settings since)".
    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"

    def settings(**index):
        return make_settings(simulator.base_url, index={"extract_claims": True, **index})

    await sync([docs], settings(), db, root=docs)
    await sync([docs], settings(max_gleanings=2), db, root=docs)
    est, done = await index_and_estimate(docs, settings(), db)
    assert (done.published, done.chunks_extracted) == (False, 0), done
    assert est["chunks_replacing"] == 0 and "to replace" not in format_estimate(est), format_estimate(est)
    # (one whose records differ is still said to be replaced: an offline run's since)
    await sync([docs], make_settings("", index={"extractor": "nlp"}), db, root=docs)
    said: list[str] = []
    est = estimate([docs], settings(), db, root=docs)
    done = await Indexer(settings(), db, root=docs, say=said.append).run([docs])
    assert est["chunks_replacing"] == done.chunks > 0 and "to replace" in format_estimate(est)
    # (... and the run says how many it extracts: "every chunk is extracted with gpt-4o-mini (it
    # was built offline...)" of none; then "...changed since this index was built: it was built
    # offline: no chunk is extracted again (...)", two colons)
    words = "this index was built offline: no chunk is extracted again (the extraction of each with these " \
            "settings is stored)"
    assert done.chunks_extracted == 0 and [line for line in said if words in line], said
    # (and the estimate says it so, not "No chunk is extracted again (...): it was built offline, and is
    # extracted with gpt-4o-mini")
    assert "No chunk is extracted again (the extraction of each with these settings is stored): it was built " \
        "offline." in format_estimate(est).splitlines(), format_estimate(est)


async def test_claims_turned_off_and_on_again_are_said_asked_of_no_chunk(tmp_path, simulator):
    # Built with claims, then without, then with again: each chunk's extraction with claims is
    # stored, and taken; the estimate and the run said "every chunk is asked for its claims".
    docs = news_copy(tmp_path, 4)
    db = tmp_path / "index.db"
    claims = make_settings(simulator.base_url, index={"extract_claims": True})
    await sync([docs], claims, db, root=docs)
    await sync([docs], make_settings(simulator.base_url), db, root=docs)
    said: list[str] = []
    est = estimate([docs], claims, db, root=docs)
    done = await Indexer(claims, db, root=docs, say=said.append).run([docs])
    assert "claims" not in done.llm and done.chunks_extracted == 0, done.llm
    words = "no chunk is asked for its claims (the extraction of each with these settings is stored)"
    assert est["claims_asked"] == words and "\nNo chunk is asked for its claims (" in format_estimate(est)
    assert [line for line in said if words in line], said


async def test_claims_asked_of_some_chunks_beside_one_extracted_again_say_no_others_stored(tmp_path, simulator):
    # Claims turned on for an index built without, one chunk's extraction stored with other
    # settings alone: the estimate and the run said "2 of 3 chunks are asked for their claims
    # (...; the others' extractions with these settings are stored); 1 extracted again", the
    # one other extracted again, not stored.
    docs = news_copy(tmp_path, 3)
    db = tmp_path / "index.db"
    first = await sync([docs], make_settings(simulator.base_url), db, root=docs)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:   # (as if extracted with other settings)
        (chunk,) = conn.execute("SELECT chunk_id FROM live_chunks ORDER BY chunk_id LIMIT 1").fetchone()
        conn.execute("UPDATE extractions SET extractor = 'llm-other' WHERE chunk_id = ?", (chunk,))
        conn.execute("UPDATE live_chunks SET extractor = 'llm-other' WHERE chunk_id = ?", (chunk,))
    claims = make_settings(simulator.base_url, index={"extract_claims": True})
    said: list[str] = []
    est = estimate([docs], claims, db, root=docs)
    done = await Indexer(claims, db, root=docs, say=said.append).run([docs])
    assert done.llm["extract"]["calls"] == 1 and done.llm["claims"]["calls"] == first.chunks, done.llm
    words = f"{first.chunks - 1} of {first.chunks} chunks are asked for their claims (their entities and " \
            "relationships as extracted"
    assert est["claims_asked"] == f"{words}); 1 extracted again", est["claims_asked"]
    assert [line for line in said if f"{words}; answers in the cache cost nothing); 1 extracted again" in line], said
    assert "stored" not in est["claims_asked"] and not [line for line in said if "stored" in line], said


async def test_a_first_gleaning_the_cache_does_not_answer_counts_the_names_it_would_add(tmp_path, simulator):
    # index.max_gleanings 0 -> 1: each chunk's first round from the cache, its gleaning not. The
    # offline extractor's names stood in for the whole chunk (ten articles: 36 summaries and 26
    # reports for the run's 6 and 24); the first round's names alone would count 0 and 0. Now
    # the first round's, with the names the offline extractor finds that it lacks standing in
    # for a gleaning's, of as many chunks as the gleaning rate says.
    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"max_gleanings": 0}), db, root=docs)
    est, done = await index_and_estimate(docs, make_settings(simulator.base_url, index={"max_gleanings": 1}), db)
    assert done.llm["extract"]["cached"] == done.chunks_extracted > 0 and paid(done.llm, "glean") > 0, done.llm
    assert paid(done.llm, "summarize") > 0 and paid(done.llm, "report") > 0, done.llm
    assert close(est, done, 1.5) == {}, (est["llm"], done.llm)


def test_the_distinct_items_of_a_sample_of_units_are_taken_on_to_every_unit():
    from streamrag.estimate_ratios import grown_union
    # 2,000 units (chunks) each holding 10 items (names) of 20,000, some far more often named
    # than others: the items half of them hold, taken on to all, come within 3% of those all
    # hold (seen: 3,370 in the half, taken on 5,453, for 5,419).
    rng = random.Random(3)
    weights = [1 / (k + 1) for k in range(20_000)]
    units = [set(rng.choices(range(20_000), weights=weights, k=10)) for _ in range(2000)]
    every = len(set().union(*units))
    half = units[:1000]
    seen: dict[int, int] = {}
    for unit in half:
        for item in unit:
            seen[item] = seen.get(item, 0) + 1
    grown = grown_union(list(seen.values()), len(half), len(units) - len(half))
    assert len(seen) < 0.8 * every and off_by(grown, every) < 0.03, (len(seen), grown, every)
    assert grown_union(list(seen.values()), len(half), 0) == len(seen)   # (no more units: those seen)
    assert grown_union([2, 3, 2], 4, 10) == 3   # (none seen once: none unseen)


async def test_a_first_gleaning_of_many_chunks_is_stood_in_for_on_a_half_of_them(tmp_path, simulator, monkeypatch):
    # index.max_gleanings 0 -> 1: the offline extractor read every chunk for what a first
    # gleaning adds (17.7 s of a 49.6 s estimate on a 3,000-document index). Past GLEAN_SAMPLE
    # chunks, a half of them are read, and what their stand-ins touch taken on to every chunk's
    # (there: 7,212 summaries and 2,409 reports for every chunk's 7,398 and 2,482). Here 41
    # articles (50 chunks), a sample from 10: 25 read; 107 summaries and 37 reports for 115 and
    # 41 (the run: 104 and 44).
    docs = news_copy(tmp_path)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"max_gleanings": 0}), db, root=docs)
    settings = make_settings(simulator.base_url, index={"max_gleanings": 1})
    read: list[str] = []
    real = nlp.extract_offline
    monkeypatch.setattr(nlp, "extract_offline", lambda text, **kw: read.append(text) or real(text, **kw))
    every = estimate([docs], settings, db, root=docs)
    chunks = every["chunks_to_extract"]
    assert len(read) == chunks > 40, (len(read), chunks)
    read.clear()
    monkeypatch.setattr(estimate_module, "GLEAN_SAMPLE", 10)
    est = estimate([docs], settings, db, root=docs)
    assert len(read) == math.ceil(chunks / 2), (len(read), chunks)
    for stage in ("summarize", "report"):
        assert off_by(asked(est, stage), asked(every, stage)) < 0.15, (stage, est["llm"], every["llm"])
    assert {k: v for k, v in est["llm"]["by_stage"].items() if k not in ("summarize", "report")} == \
        {k: v for k, v in every["llm"]["by_stage"].items() if k not in ("summarize", "report")}
    monkeypatch.undo()
    done = await sync([docs], settings, db, root=docs)
    assert close(est, done, 1.5) == {}, (est["llm"], done.llm)


async def test_a_sampled_first_gleaning_s_report_scale_is_measured_on_the_communities_it_is_applied_to(
        tmp_path, simulator, monkeypatch):
    # The reports of a sampled first gleaning (index.max_gleanings 0 -> 1, past GLEAN_SAMPLE
    # chunks) are scaled up for the reported communities holding any entity its stand-ins name
    # (``_update_calls``); the scale was measured on those holding the ends of their pairs only,
    # so chunks each naming one such entity alone (no pair) were scaled by 1.0.
    from streamrag.estimate_ratios import Ratios
    from streamrag.records import Chunk, Extraction
    docs = news_copy(tmp_path, 10)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"max_gleanings": 0}), db, root=docs)
    settings = make_settings(simulator.base_url, index={"max_gleanings": 1})
    with contextlib.closing(Store(db, readonly=True)) as store:
        reported = estimate_module._reported_of(store, settings.index.report_min_members)
        names = dict(store.conn.execute("SELECT id, name FROM entities"))
        people = [names[e] for e in sorted(reported) if nlp.extract_offline(
            f"{names[e]} arrived.", entity_types=settings.index.entity_types).entities][:12]
        texts = [f"{name} arrived." for name in people]
        chunks = {f"chk-{k:02}": Chunk(f"chk-{k:02}", "doc", 0, text, 5) for k, text in enumerate(texts)}
        from_cache = {cid: Extraction(entities=[], relationships=[], claims=[]) for cid in chunks}
        seen: list[list[int]] = []
        real_union = estimate_module.grown_union
        monkeypatch.setattr(estimate_module, "grown_union", lambda counts, *a: seen.append(counts) or real_union(counts, *a))
        monkeypatch.setattr(estimate_module, "GLEAN_SAMPLE", 4)
        sampled = estimate_module._add_missed(from_cache, dict.fromkeys(chunks, False), chunks, Ratios(), settings,
                                              store)
    assert len(people) == 12 and sampled is not None and sampled.entities, (people, sampled)
    applied = {c for e in sampled.entities for c in reported.get(e, ())}
    assert len(seen) == 2 and len(seen[1]) == len(applied) > 0, (seen, applied)
    assert sampled.community_scale > 1, sampled


def test_a_community_shows_an_element_asked_anyway_looked_up_once_an_estimate():
    # Whether a community's report shows an element the run writes anew whatever a sampled first
    # gleaning adds (``_shows_any``, bfca9e4) looked every such relationship up again for each
    # community: a third of a 3,000-document index's, 11.6 s of CPU over its 2,250 communities.
    from types import SimpleNamespace

    from streamrag.records import Community

    looked_up: list[str] = []

    class Relationships(dict):
        def get(self, key, default=None):
            looked_up.append(key)
            return super().get(key, default)

    pairs = [(f"ent-{i}", f"ent-{i + 1}") for i in range(0, 2000, 2)]
    state = SimpleNamespace(relationships=Relationships(
        {f"rel-{a}-{b}": SimpleNamespace(source=a, target=b) for a, b in pairs}))
    other = {f"rel-{a}-{b}" for a, b in pairs[1:]} | {"ent-x"}
    communities = [Community(f"c{i}", 0, None, [a, b]) for i, (a, b) in enumerate(pairs)]
    communities += [Community("one-end", 0, None, ["ent-2", "ent-5"]), Community("entity", 0, None, ["ent-x"])]
    paired = estimate_module._paired_in(other, state)
    shown = [c.id for c in communities if estimate_module._shows_any(c, other, paired)]
    assert shown == [f"c{i}" for i in range(1, len(pairs))] + ["entity"], shown[:3]
    assert len(looked_up) <= len(other), len(looked_up)


@pytest.mark.parametrize("indexed, changed", [(30, {}), (41, {"summary_max_tokens": 40})])
async def test_a_sampled_first_gleaning_takes_on_only_what_its_stand_ins_alone_ask_for(
        tmp_path, simulator, monkeypatch, indexed, changed):
    # index.max_gleanings 0 -> 1 past GLEAN_SAMPLE chunks, with something else the run writes
    # anew: the summaries (and reports) of what the sample's stand-ins touch were taken on to
    # every chunk's even where the run asks for them anyway, for the articles added beside it
    # (30 articles + 11: 159 summaries for the run's 125) or every summary asked again
    # (summary_max_tokens 150 -> 40: 242 for 197). Now those are counted once: 127 and 197.
    docs = news_copy(tmp_path, indexed)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"max_gleanings": 0}), db, root=docs)
    add_articles(docs, indexed)
    settings = make_settings(simulator.base_url, index={"max_gleanings": 1, **changed})
    monkeypatch.setattr(estimate_module, "GLEAN_SAMPLE", 10)
    est = estimate([docs], settings, db, root=docs)
    monkeypatch.undo()
    done = await sync([docs], settings, db, root=docs)
    assert paid(done.llm, "summarize") > 100 and paid(done.llm, "report") > 30, done.llm
    assert close(est, done, 1.15) == {}, (est["llm"], done.llm)


@pytest.mark.parametrize("changed", [{"summary_max_tokens": 100}, {"summary_max_tokens": 40},
                                     {"summary_join_tokens": 0}])
async def test_a_summary_setting_changed_counts_the_reports_that_may_show_a_summary_written_again(
        ten_indexed, simulator, changed):
    # index.summary_max_tokens 150 -> 100 with llm.cache off: the 10 summaries a model writes
    # again (counted as the run asks them) may change the contexts showing them, and no other:
    # every report was counted (26 of ten articles), now the 10 of communities holding one. (The
    # run writes none: the simulator's summaries come out as before, a model's need not.) The
    # count is an upper bound (README): so also where the run writes reports, 150 -> 40 (the
    # descriptions of one truncated shorter, 34 summaries: 16 reports, the run's 16) and
    # summary_join_tokens 60 -> 0 (every several summarized: 73; 25 reports for the run's 22).
    docs, db, _ = ten_indexed
    settings = make_settings(simulator.base_url, index=changed, llm={"cache": False})
    with contextlib.closing(Store(db, readonly=True)) as store:
        # (the communities big enough for a report, every one counted before f6bc13a)
        reported = store.scalar("SELECT count(*) FROM communities WHERE size >= ?",
                                (settings.index.report_min_members,))
    est, done = await index_and_estimate(docs, settings, db)
    assert est["summarized_again_because"], est
    assert asked(est, "summarize") == paid(done.llm, "summarize") > 0, (est["llm"], done.llm)
    assert paid(done.llm, "report") <= asked(est, "report") < reported, (est["llm"], done.llm, reported)
    assert paid(done.llm, "report") > 0 or changed == {"summary_max_tokens": 100}, done.llm


async def test_documents_cut_again_to_a_new_chunk_size_count_their_names_described_anew(ten_indexed, simulator):
    # index.chunk_size 1,200 -> 600: every chunk is new, and its text the file's earlier chunks
    # held; each stood in for with what the model said of them, as an edit's unchanged passage is,
    # so nothing changed: 0 summaries and 7 reports for the run's 12 and 22. The model reads
    # each new chunk on its own, and describes its names anew: 29 summaries, an upper bound
    # (the simulator repeats a description for the same first sentence), and 25 reports (the run 22).
    docs, db, _ = ten_indexed
    est, done = await index_and_estimate(docs, make_settings(simulator.base_url, index={"chunk_size": 600}), db)
    assert est["read_again_because"] and est["chunks_to_extract"] == paid(done.llm, "extract") > 12, est
    assert paid(done.llm, "summarize") > 0 and paid(done.llm, "report") > 0, done.llm
    assert asked(est, "summarize") >= paid(done.llm, "summarize"), (est["llm"], done.llm)
    assert "report" not in close(est, done, 1.5), (est["llm"], done.llm)


async def test_an_index_built_offline_is_said_so_not_its_summary_and_report_settings_changed(tmp_path, simulator):
    # Built offline, then indexed with a model, no setting changed: the estimate said "Every merged
    # description is summarized again: the summary settings changed since this index was built",
    # and the run "the extraction, summary and report settings changed since this index was built".
    docs = news_copy(tmp_path, 3)
    db = tmp_path / "index.db"
    await sync([docs], make_settings("", index={"extractor": "nlp"}), db, root=docs)
    settings = make_settings(simulator.base_url)
    est = estimate([docs], settings, db, root=docs)
    said: list[str] = []
    await Indexer(settings, db, root=docs, say=said.append).run([docs])
    assert (est["extracted_again_because"], est["summarized_again_because"], est["reported_again_because"]) == (
        f"it was built offline, and is extracted with {settings.llm.extraction_model}", "it was built offline",
        "it was built offline"), est
    text = format_estimate(est)
    assert "settings changed" not in text and "Every merged description is summarized again: it was built " \
        "offline." in text.splitlines(), text
    model = settings.llm.summary_model
    assert said == [f"this index was built offline: every chunk is extracted with {settings.llm.extraction_model} "
                    f"(answers in the cache cost nothing); every merged description is summarized with {model}; "
                    f"{est['reported_again']}"], said
    assert est["reported_again"] == f"reports are written with {settings.llm.report_model}", est


async def test_the_estimate_reads_built_by_a_model_by_the_runs_rule(tmp_path, monkeypatch):
    # extraction_change wrote the "llm-" mark's rule out again after b0d7398 gave the run, the
    # refusal and the ask one (index_rows.model_extractor): told that this offline index is a
    # model's, the estimate says what the run says of one, not "it was built offline".
    docs = news_copy(tmp_path, 2)
    db = tmp_path / "index.db"
    await sync([docs], make_settings("", index={"extractor": "nlp"}), db, root=docs)
    settings = make_settings("http://127.0.0.1:9/v1")   # (never asked: the estimate sends nothing)
    store = Store(db, readonly=True)
    try:
        assert estimate_module.extraction_change(store, settings).startswith("it was built offline")
        monkeypatch.setattr(index_rows, "model_extractor", lambda extractor: extractor.startswith("nlp-"))
        assert estimate_module.extraction_change(store, settings).startswith(
            "the extraction settings (model, prompt, entity types, gleaning or claims) changed since this "
            "index was built")
    finally:
        store.close()


def test_an_estimate_without_its_files_by_kind_is_said():
    """format_estimate read e["unreadable_by_kind"] beside e.get("unreadable_by_kind", {}): an
    estimate without the key (none unreadable) raised KeyError where the check beside it passed."""
    e = {"unreadable_files": 0, "offline": True, "documents": 2, "corpus_tokens": 1200, "chunks_to_extract": 3}
    assert format_estimate(e) == "Offline indexing: 2 documents, 1,200 tokens, 3 chunks to extract; no LLM calls, no cost."
    e["unreadable_files"] = 1
    assert "1 file cannot be indexed as it is (not counted); the warnings name it" in format_estimate(e)


async def test_extractive_reports_of_another_streamrag_are_said_rewritten_by_run_and_estimate(
        corpus, tmp_path, simulator, monkeypatch):
    # A model-built index whose small communities' reports are extractive, published by a streamrag
    # whose EXTRACTIVE_VERSION was another: `index --estimate` said "Nothing to do: the index is up
    # to date", then the run rewrote those reports (free) and published a new version, neither
    # saying why.
    from streamrag import reports

    settings = make_settings(simulator.base_url, index={"report_min_members": 3})
    db = tmp_path / "index.db"
    with monkeypatch.context() as old:   # (as that streamrag built it, writing them otherwise)
        old.setattr(reports, "EXTRACTIVE_VERSION", "extractive-0")
        old.setattr(reports, "_sizes", lambda members, internal: f"{len(members)} members, {len(internal)} ties")
        first = await sync([corpus], settings, db, root=corpus)
    with sqlite3.connect(db) as conn:
        n = conn.execute("SELECT count(*) FROM reports WHERE extractive = 1 AND key IN "
                         "(SELECT report_key FROM communities)").fetchone()[0]
    conn.close()
    assert n > 0
    est = estimate([corpus], settings, db, root=corpus)
    text = format_estimate(est)
    assert not text.startswith("Nothing to do"), text
    rewritten = f"{reports.EXTRACTIVE_CHANGED_WHY}: {'its' if n == 1 else 'the'} {n} extractive " \
                f"report{'s are' if n > 1 else ' is'} built again, once, with no LLM call, and published only " \
                f"where {'their' if n > 1 else 'its'} text changed (the model's are kept)"
    assert f"\n{rewritten[:1].upper()}{rewritten[1:]}." in text, text
    assert est["llm"]["calls"] == 0 and "no LLM calls" in text.splitlines()[0], text
    said: list[str] = []
    done = await Indexer(settings, db, root=corpus, say=said.append).run([corpus])
    assert said == [rewritten], said
    assert done.version == first.version + 1 and done.reports_generated == n and llm_calls(done) == 0, done
    # Said once: the next run has nothing to do, and says nothing.
    said.clear()
    assert format_estimate(estimate([corpus], settings, db, root=corpus)).startswith("Nothing to do")
    await Indexer(settings, db, root=corpus, say=said.append).run([corpus])
    assert said == [], said


def test_a_stand_in_for_a_failed_report_is_not_counted_as_rewritten_free(tmp_path):
    # A stand-in for a failed answer (its community's context key is not its report's) was
    # counted among "the N extractive reports written again, once, with no LLM call", though the
    # run asks the model for it again, paid.
    from streamrag import index_rows
    from streamrag.store import Store

    store = Store(tmp_path / "i.db")
    try:
        for cid, context, key in (("C1", "k1", "k1"), ("C2", "k2", "r2"), ("C3", "k3", "k3")):
            store.conn.execute("INSERT INTO communities(id, level, parent, size, context_key, report_key) "
                               "VALUES (?, 0, NULL, 2, ?, ?)", (cid, context, key))
            store.conn.execute("INSERT INTO reports(key, title, summary, rating, rating_explanation, findings, "
                               "text, tokens, elements, extractive, created_at) "
                               "VALUES (?, 't', 's', 0, '', '[]', 't', 1, '[]', ?, 0)", (key, int(cid != "C3")))
        store.conn.commit()
        assert index_rows.extractive_reports_held(store) == 1   # (C1; C2 stands in, C3 the model's)
    finally:
        store.close()


async def test_documents_recut_count_the_reports_of_the_model_s_names_described_anew_not_offline_pairs(
        tmp_path, simulator):
    # index.chunk_size 1,200 -> 600 on 41 articles: each recut chunk was stood in for by the
    # offline extractor's names of it, its other names and every two names of a sentence paired
    # taken in with the model's: 46 reports for the run's 42 (synth_small 57 for 53). The model
    # read every sentence before: its own names and pairs, each described anew, 44.
    docs = news_copy(tmp_path)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url), db, root=docs)
    est, done = await index_and_estimate(docs, make_settings(simulator.base_url, index={"chunk_size": 600}), db)
    assert est["read_again_because"] and paid(done.llm, "report") > 30, done.llm
    assert paid(done.llm, "report") <= asked(est, "report") <= paid(done.llm, "report") * 1.06, (est["llm"], done.llm)
    # (every name of a recut chunk described anew: an upper bound of the summaries)
    assert asked(est, "summarize") >= paid(done.llm, "summarize"), (est["llm"], done.llm)


def test_a_recut_chunk_s_stand_in_holds_the_model_s_names_and_pairs_it_says_each_worded_anew():
    from streamrag.estimate import _recut_stand_in

    text = "Ada Osk met Bo Lund in Velo. Dr. Cyra Mund spoke to Ada Osk and Bo Lund."
    before = Extraction(entities=[EntityRecord("Ada Osk", "person", "Ada Osk met Bo Lund."),
                                  EntityRecord("Bo Lund", "person", "Bo Lund met Ada Osk."),
                                  EntityRecord("Ida Nye", "person", "Ida Nye left.")],
                        relationships=[RelationshipRecord("Ada Osk", "Bo Lund", "They met.", 1.0),
                                       RelationshipRecord("Ada Osk", "Ida Nye", "Friends.", 1.0)])
    got = _recut_stand_in(text, before)
    # (not the offline extractor's Velo or Cyra Mund, nor its pairs of them; not Ida Nye, not said)
    assert sorted(e.name for e in got.entities) == ["Ada Osk", "Bo Lund"]
    assert [(r.source, r.target) for r in got.relationships] == [("Ada Osk", "Bo Lund")]
    old = {e.name: e.description for e in before.entities} | {"rel": "They met."}
    for name, description in [*((e.name, e.description) for e in got.entities), ("rel", got.relationships[0].description)]:
        assert description != old[name] and description.startswith(old[name])
    assert _recut_stand_in(text + " More.", before).entities[0].description != got.entities[0].description


async def test_documents_recut_smaller_are_counted_gleaned_at_the_share_of_chunks_of_their_size(tmp_path, simulator):
    # 41 articles of 1,200-token chunks (gleaned at 0.7), cut again to 600 tokens: counted at the
    # index's share, 75 gleanings for the run's 39; at that of the index's chunks nearest each
    # new one's size, 57.
    docs = news_copy(tmp_path)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url), db, root=docs)
    est, done = await index_and_estimate(docs, make_settings(simulator.base_url, index={"chunk_size": 600}), db)
    assert "the gleaning rate" in est["ratios_from"], est["ratios_from"]
    assert paid(done.llm, "glean") <= asked(est, "glean") <= paid(done.llm, "glean") * 1.5, (est["llm"], done.llm)


def test_a_chunk_s_gleaning_share_is_that_of_the_extractions_nearest_its_size():
    from streamrag.estimate import _gleaned_near
    from streamrag.estimate_ratios import MIN_CALLS

    # (small chunks gleaned once in four, large ones twice each)
    sized = sorted([(100 + i, 1 if i % 4 == 0 else 0) for i in range(MIN_CALLS)]
                   + [(1000 + i, 2) for i in range(MIN_CALLS)])
    assert _gleaned_near(sized, 90, 2) == [0.25, 0.0]
    assert _gleaned_near(sized, 5000, 2) == [1.0, 1.0]
    # (between the two, the nearer side first)
    assert _gleaned_near(sized, 700, 1) == [1.0]
    assert _gleaned_near(sized, 400, 1) == [0.25]
    assert _gleaned_near(sized[:MIN_CALLS - 1], 90, 1) is None


@pytest.mark.parametrize("change", ["encoding", "recut interrupted"])
async def test_documents_recut_are_set_beside_the_index_s_chunks_counted_alike(tmp_path, simulator, monkeypatch,
                                                                                change):
    # Each recut chunk is gleaned at the share of the index's chunks nearest its size
    # (``_gleaned_near``). After index.encoding changed, the new chunks' tokens (the new
    # encoding's) were set beside the stored chunks' counts (the old one's). Now each stored
    # chunk is counted in the run's encoding; and those a recut that never published extracted
    # (no document uses them yet) count too, measures of the model at the very size asked.
    from streamrag.tokens import count_tokens
    docs = news_copy(tmp_path, 30)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"chunk_size": 300}), db, root=docs)
    settings = make_settings(simulator.base_url, index={"chunk_size": 300, "encoding": "cl100k_base"}
                             if change == "encoding" else {"chunk_size": 250})
    if change == "recut interrupted":   # (a third of the articles extracted at 250, nothing published)
        await Indexer(settings, db, root=docs).prefetch(sorted(docs.iterdir())[:10])
    seen: list[list[tuple[int, int]]] = []
    real = estimate_module._gleaned_near
    monkeypatch.setattr(estimate_module, "_gleaned_near", lambda sized, *a: seen.append(sized) or real(sized, *a))
    est = estimate([docs], settings, db, root=docs)
    assert est["read_again_because"] and est["chunks_to_extract"] and seen, est
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT c.text, c.tokens, max(e.rounds - 1, 0), c.id IN (SELECT chunk_id FROM "
                            "document_chunks) FROM extractions e JOIN chunks c ON c.id = e.chunk_id "
                            "WHERE e.extractor = ?", (extractor_key(settings),)).fetchall()
    counted = sorted((count_tokens(text, settings.index.encoding), g) for text, _tokens, g, _in_use in rows)
    assert len(counted) >= 20 and all(sized == counted for sized in seen), (seen[0][:5], counted[:5])
    if change == "encoding":   # (the two encodings' counts differ here: the old ones were compared)
        assert sorted((tokens, g) for _text, tokens, g, _in_use in rows) != counted
    else:
        assert not all(in_use for *_, in_use in rows)


async def test_a_sampled_first_gleaning_takes_on_no_report_the_run_writes_anyway(tmp_path, simulator, monkeypatch):
    # bfca9e4's report half: a community whose report shows an element the run summarizes again
    # whatever the sampled stand-ins add (``_shows_any``: here every summary, summary_max_tokens
    # changed) is counted once, not taken on to every chunk's by the sample's community scale.
    # Its test (within 1.15 of the run) passed with ``_shows_any`` always False: the simulator's
    # scale, ~1.1, moved the count by one. Here the scale is made 3: the reports counted do not
    # move with it, though they do with nothing else changed (36 -> 108 on these articles).
    docs = news_copy(tmp_path)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url, index={"max_gleanings": 0}), db, root=docs)
    monkeypatch.setattr(estimate_module, "GLEAN_SAMPLE", 10)
    real = estimate_module._add_missed

    def reports(scale: float, **changed) -> int:
        monkeypatch.setattr(estimate_module, "_add_missed",
                            lambda *a: sampled._replace(community_scale=scale) if (sampled := real(*a)) else None)
        settings = make_settings(simulator.base_url, index={"max_gleanings": 1, **changed})
        return asked(estimate([docs], settings, db, root=docs), "report")

    assert reports(1.0) < reports(3.0), "the scale is not taken on at all"
    assert 0 < reports(1.0, summary_max_tokens=40) == reports(3.0, summary_max_tokens=40)


async def test_a_stored_chunk_the_recut_cuts_again_is_not_counted_again(tmp_path, simulator, monkeypatch):
    # After index.encoding changed, every stored chunk (its count the old encoding's) was counted
    # again from its text to be set beside the recut's by size (``_gleaned_near``): those the
    # recut cuts again (a chunk id is its text's digest) already had their count in the new
    # encoding. Now only the others are; the sizes compared are the same.
    docs = news_copy(tmp_path, 30)
    db = tmp_path / "index.db"
    await sync([docs], make_settings(simulator.base_url), db, root=docs)
    settings = make_settings(simulator.base_url, index={"encoding": "cl100k_base"})
    import streamrag.tokens
    counted: list[str] = []   # (every text counted through tokens.count_tokens, as index_rows counts)
    real = streamrag.tokens.count_tokens
    monkeypatch.setattr(streamrag.tokens, "count_tokens", lambda text, *a: counted.append(text) or real(text, *a))
    seen: list[list[tuple[int, int]]] = []
    near = estimate_module._gleaned_near
    monkeypatch.setattr(estimate_module, "_gleaned_near", lambda sized, *a: seen.append(sized) or near(sized, *a))
    est = estimate([docs], settings, db, root=docs)
    assert est["read_again_because"] and seen, est
    with contextlib.closing(sqlite3.connect(db)) as conn:
        stored = dict(conn.execute("SELECT c.id, c.text FROM extractions e JOIN chunks c ON c.id = e.chunk_id "
                                   "WHERE e.extractor = ?", (extractor_key(settings),)))
    assert all(sized == sorted(seen[0]) for sized in seen)
    assert sorted(t for t, _g in seen[0]) == sorted(real(t, "cl100k_base") for t in stored.values())
    counted_again = {chunk_id for chunk_id, text in stored.items() if text in set(counted)}
    await sync([docs], settings, db, root=docs)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        recut = {c for (c,) in conn.execute("SELECT chunk_id FROM document_chunks")}
    assert recut & stored.keys() and stored.keys() - recut, "no chunk cut again, or every one"
    assert counted_again == stored.keys() - recut


async def test_the_corpus_tokens_are_the_same_whether_the_files_are_read_or_not(ten_indexed, simulator,
                                                                               monkeypatch):
    # A file as indexed is not read: its document counted as the index holds it (documents.tokens,
    # its chunks' tokens). A file read again counted the text's own tokens, so touching the
    # folder's files (`cp -a`, `chmod`, `touch`) changed "(N tokens)": 9,806 for 9,613 here. Now
    # both count the chunks' tokens, which the run stores.
    from streamrag import loader
    news, db, _ = ten_indexed
    settings = make_settings(simulator.base_url)
    reads: list[Path] = []
    real = loader.read_documents
    monkeypatch.setattr(loader, "read_documents", lambda path, **kw: reads.append(path) or real(path, **kw))

    def stored() -> int:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            return conn.execute("SELECT sum(tokens) FROM documents").fetchone()[0]

    before = estimate([news], settings, db, root=news)
    assert not reads and before["corpus_tokens"] == stored()
    files = sorted(news.iterdir())
    for f in files:
        os.utime(f, (f.stat().st_atime, f.stat().st_mtime + 60))
    files[0].chmod(0o600)
    touched = estimate([news], settings, db, root=news)
    assert len(reads) == len(files) and touched["corpus_tokens"] == before["corpus_tokens"]
    # ... and what it counts is what the run stores, of documents edited and added too
    with files[1].open("a") as f:
        f.write("\nThe harbor council met again on Tuesday to read the tide tables aloud.\n")
    add_articles(news, 10, 13)
    est, _done = await index_and_estimate(news, settings, db)
    assert est["corpus_tokens"] == stored() != before["corpus_tokens"]


def test_an_offline_estimate_for_want_of_an_endpoint_says_how_to_count_a_model_run(tmp_path):
    # "no LLM calls, no cost" alone: a newcomer read that the run would cost nothing with a model too.
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("Ada Osk met Bob Tan on the quay.\n")
    for settings, said in ((make_settings(), True),
                           (make_settings("http://127.0.0.1:9/v1", index={"extractor": "nlp"}), False)):
        text = format_estimate(estimate([tmp_path / "d"], settings, tmp_path / "e.db", root=tmp_path / "d"))
        assert text.startswith("Offline indexing: ") and text.endswith(
            "no LLM calls, no cost; pass --api-base URL (or set llm.api_base) to count a model run."
            if said else "no LLM calls, no cost."), text


def _partitions_found(monkeypatch) -> list:
    """The partitions the estimate clusters, in order (``estimate._partition`` watched)."""
    found: list = []
    partition = estimate_module._partition
    monkeypatch.setattr(estimate_module, "_partition",
                        lambda *a, **k: found.append(partition(*a, **k)) or found[-1])
    return found


async def test_the_estimate_of_a_model_run_after_an_offline_one_clusters_from_the_model_partition(
        corpus, tmp_path, simulator, monkeypatch):
    # The run with the model after an offline one clusters from the model's partition that
    # run kept (``graph_state.warm_start``); its estimate clustered from the offline one, so it
    # found other communities and ids, and counted their reports paid (200 synth documents, one
    # edited: 166 reports estimated, the run paid 1; from the kept partition, 21). Its partition,
    # of a graph it knows whole (no chunk to extract), is now the run's, ids and all.
    found = _partitions_found(monkeypatch)
    sized = {"chunk_size": 80, "chunk_overlap": 10, "max_cluster_size": 4}
    model = make_settings(simulator.base_url, index=sized)
    db = tmp_path / "index.db"
    await sync([corpus], model, db, root=corpus)
    await sync([corpus], make_settings("", index={**sized, "extractor": "nlp"}), db, root=corpus)
    estimate([corpus], model, db, root=corpus)
    await sync([corpus], model, db, root=corpus)
    store = Store(db, readonly=True)
    try:
        published = sorted((c.id, c.level, c.members)
                           for c, _context, _report in index_rows.load_communities(store))
    finally:
        store.close()
    assert found and sorted((c.id, c.level, c.members) for c in found[-1]) == published


async def test_the_estimate_after_an_offline_run_with_other_clustering_settings_clusters_as_the_run(
        corpus, tmp_path, simulator, monkeypatch):
    # The run with the model after an offline one starts from the model's kept partition and
    # clusters afresh when its settings are not that partition's; the estimate decided by the
    # published (offline) partition's settings: of a model built with one Leiden seed, an
    # offline run with another, then a model run with that other, the run clustered afresh and
    # the estimate warm-started (200 synth documents: 19 of the run's 71 communities found).
    # Its partition is the run's now, but for the ids it gives anew (its own, "new-N").
    found = _partitions_found(monkeypatch)
    sized = {"chunk_size": 80, "chunk_overlap": 10, "max_cluster_size": 4}
    built, then = 3, 5   # (Leiden seeds: the model's; the offline run's and the model run's after it)
    db = tmp_path / "index.db"
    await sync([corpus], make_settings(simulator.base_url, index={**sized, "leiden_seed": built}), db,
               root=corpus)
    await sync([corpus], make_settings("", index={**sized, "extractor": "nlp", "leiden_seed": then}), db,
               root=corpus)
    model = make_settings(simulator.base_url, index={**sized, "leiden_seed": then})
    estimate([corpus], model, db, root=corpus)
    await sync([corpus], model, db, root=corpus)
    store = Store(db, readonly=True)
    try:
        ran = {(c.level, tuple(c.members)): c.id
               for c, _context, _report in index_rows.load_communities(store)}
    finally:
        store.close()
    assert found and {(c.level, tuple(c.members)) for c in found[-1]} == ran.keys()
    assert all(c.id == ran[c.level, tuple(c.members)] or c.id.startswith("new-") for c in found[-1])
