"""`streamrag status`: the last update's line says what it left out, not a bare "ok"."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import pytest

from conftest import (LINUX_FLOCK, clean_env, execute_on, index_under_way, make_settings, status_info,
                      unset_callers_variables)
from streamrag.index_rows import prune
from streamrag.pipeline import sync
from streamrag.status import format_status, gather_status, llm_summary
from streamrag.store import Store


def status_of(db: Path, **kwargs) -> tuple[dict, str]:
    store = Store(db, readonly=True)
    try:
        info = gather_status(store, **kwargs)
    finally:
        store.close()
    return info, format_status(info, db)


def pruned(db: Path, table: str) -> int:
    """Folds what the index no longer uses into its archive, as a run three days on would; the
    rows left in ``table``."""
    store = Store(db)
    try:
        with store.conn:
            prune(store, 1, time.time() + 3 * 86400)
        return store.scalar(f"SELECT count(*) FROM {table}")
    finally:
        store.close()


def recorded_failures(db: Path) -> list[dict]:
    """Every failure the index recorded, oldest first: ``{run_id, stage, item, message}``."""
    store = Store(db, readonly=True)
    try:
        return store.query("SELECT run_id, stage, item, message FROM failures ORDER BY id")
    finally:
        store.close()


def last_update_line(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.strip().startswith("last update")]
    return line


def test_the_failures_line_says_all_runs_count_and_how_to_list_in_one_bracket(corpus, tmp_path):
    # "1 in the last update (2 recorded over all runs) (list them with --failures)": two brackets
    # in a row, the 2 counting a file removed since, and --failures lists the last update's alone.
    db = tmp_path / "s.db"
    (corpus / "scan.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    (corpus / "scan.txt").unlink()
    (corpus / "other.txt").write_bytes(b"\x00\x02PK\x03\x04 not text either")
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    info, text = status_of(db)
    assert (info["failures_last_run"], info["failures_total"]) == (1, 2), info
    assert ("  failures       1 in the last update (2 recorded over all runs, including any since indexed or "
            "removed; list the last update's with --failures)") in text.splitlines(), text
    assert text.count("--failures") == 1, text


def test_an_unreadable_file_is_said_beside_ok(corpus, tmp_path):
    (corpus / "scan.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
    db = tmp_path / "s.db"
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    info, text = status_of(db)
    assert info["failures_last_run"] == 1 and info["unreadable_last_run"] == 1
    line = last_update_line(text)
    assert line.endswith(": ok, but 1 file is not text"), line
    # How to list them is said once, on the failures line: the last update's line said
    # "; see --failures" too.
    assert text.count("--failures") == 1 and "  failures       1 in the last update (list them with --failures)" \
        in text.splitlines(), text
    _info, text = status_of(db, failures=True)
    assert last_update_line(text).endswith(": ok, but 1 file is not text") and "--failures" not in text

    (corpus / "scan.txt").unlink()
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    assert last_update_line(status_of(db)[1]).endswith(": ok")


def test_failures_lists_the_last_update_s_as_its_help_says(corpus, tmp_path, cli_run):
    # `status --help` said --failures lists "the recorded failures": the index records every
    # update's, and it lists the last update's (as the README says).
    assert "what failed in the last update" in " ".join(cli_run("status", "--help").stdout.split())
    (corpus / "scan.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
    db = tmp_path / "s.db"
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    assert [f["item"] for f in status_of(db, failures=True)[0]["failures"]] == ["scan.txt"]
    (corpus / "scan.txt").unlink()
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    info, _text = status_of(db, failures=True)
    assert info["failures_total"] == 1 and info["failures"] == [], info


def test_failures_with_nothing_to_list_says_so_in_one_line(corpus, tmp_path, cli_run):
    # `status --failures` of an update in which nothing failed printed the count line alone, and of
    # an update that failed with no item failed, no line: nothing said the listing was empty.
    # --json keeps its empty lists.
    import json

    db = str(tmp_path / "s.db")

    def listed(*more: str) -> list[str]:
        out = cli_run("status", "--failures", "--db", db, *more)
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()

    assert cli_run("index", "-q", "--offline", "--db", db, str(corpus)).returncode == 0
    assert "    none to list: no item failed in the last update" in listed()
    assert "none to list" not in cli_run("status", "--db", db).stdout   # (only when a listing is asked)
    info = json.loads("\n".join(listed("--json")))
    assert info["failures_last_run"] == 0 and info["failures_total"] == 0, info
    assert info["failures"] == info["not_indexed_failures"] == info["not_indexed_files"] == info["settled_items"] == []
    # A file that failed is listed, and no such line said; once it is gone, what earlier updates
    # recorded is counted but not listed, and the line says so.
    (corpus / "scan.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
    assert cli_run("index", "-q", "--offline", "--db", db, str(corpus)).returncode == 0
    assert not any("none to list" in line for line in listed()), listed()
    (corpus / "scan.txt").unlink()
    assert cli_run("index", "-q", "--offline", "--db", db, str(corpus)).returncode == 0
    assert ("    none to list: no item failed in the last update (the failures recorded over all runs are "
            "earlier updates', not listed)") in listed()
    assert json.loads("\n".join(listed("--json")))["failures"] == []
    # An update under way that has met no failure; one that failed before any item did (the
    # count line is not said then: the line stands in its place).
    empty = {"failures": [], "not_indexed_failures": [], "not_indexed_files": [], "settled_items": []}
    text = format_status({**_info("running", 0, 0), **empty}, Path("i.db"))
    assert "    none to list: no item has failed so far in this update" in text.splitlines(), text
    text = format_status({**_info("failed", 0, 0), **empty}, Path("i.db"))
    assert "  failures       none to list: no item failed in the last update" in text.splitlines(), text
    assert "none to list" not in format_status({**_info("failed", 0, 0), **empty, "not_indexed_last_run": 2},
                                               Path("i.db"))


def test_files_it_could_not_use_are_said_for_what_is_true_of_them(corpus, tmp_path, monkeypatch):
    # A binary file, a file it may not read (`chmod 000`) and a folder it may not list were
    # "ok, but 3 files could not be read", in `status` and `index` alike. Tests run as root, so
    # chmod cannot refuse them: the open of the file and the listing of the folder fail instead.
    import errno
    import os

    from streamrag.cli import _format_sync

    (corpus / "scan.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
    locked = corpus / "locked.md"
    locked.write_text("Mira Osk chaired the Harbor Council in Torford.\n")
    (corpus / "sub").mkdir()
    (corpus / "sub" / "in.md").write_text("Bram Tell kept the quay.\n")
    real_open, real_scandir = Path.open, os.scandir

    def path_open(path, *args, **kwargs):
        if path == locked:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    def scandir(path="."):
        if Path(path) == corpus / "sub":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(Path, "open", path_open)
    monkeypatch.setattr(os, "scandir", scandir)
    db = tmp_path / "s.db"
    result = anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    said = "1 file could not be read, 1 is not text, 1 folder could not be listed"
    assert result.unreadable_by_kind == {"unreadable": 1, "not_text": 1, "unlisted": 1}
    assert f"  failures       3 ({said}): see `streamrag status --failures`" in _format_sync(
        result, db, ["*.txt", "*.md"]).splitlines()
    info, text = status_of(db)
    assert info["unreadable_last_run"] == info["failures_last_run"] == 3   # (the keys as they were)
    assert info["unreadable_by_kind"] == {"unreadable": 1, "not_text": 1, "unusable": 0, "unlisted": 1}
    line = last_update_line(text)
    assert line.endswith(f": ok, but {said}"), line
    # Others of a kind, and items failed beside them.
    (corpus / "more.txt").write_bytes(b"\x00\x02 more not text")
    (corpus / "rows.jsonl").write_text("not json\n")
    result = anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    result.failures += 2   # (as if two chunks' extractions had failed too)
    assert ("  failures       7 (2 items failed and 1 file could not be read, 2 are not text, 1 could "
            "not be used, 1 folder could not be listed): see `streamrag status --failures`"
            in _format_sync(result, db, ["*.txt", "*.md"]).splitlines())
    assert last_update_line(status_of(db)[1]).endswith(
        ": ok, but 1 file could not be read, 2 are not text, 1 could not be used, 1 folder could not be "
        "listed")


def test_an_index_from_before_failures_had_a_kind_says_what_its_messages_tell(corpus, tmp_path):
    # Its load failures have no kind (NULL): `status` said a binary file, a .pdf, a file the system
    # would not read and a folder it could not list "could not be used" until the next update.
    from streamrag import loader
    from streamrag.store import MIGRATIONS

    (corpus / "scan.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
    (corpus / "paper.pdf").write_bytes(b"%PDF-1.4 \x00\x01")
    (corpus / "rows.jsonl").write_text("not json\n")
    db = tmp_path / "s.db"
    anyio.run(lambda: sync([corpus, corpus / "paper.pdf"], make_settings(), db, root=corpus))
    store = Store(db)
    try:
        run = store.scalar("SELECT run_id FROM failures WHERE stage = 'load'")
        store.record_failure(run, "load", "locked.md", loader.unreadable_line("locked.md", "Permission denied", kept=False))
        store.record_failure(run, "load", "sealed", "sealed: cannot list the folder (Permission denied); what was "
                             "indexed from it stays; check its permissions")
        before = [name for name, _sql in MIGRATIONS].index("failures_kind")   # (the schema before it)
        with store.transaction():
            store.conn.execute("UPDATE failures SET kind = NULL")
            store.set_meta("schema_version", str(before))
    finally:
        store.close()
    info, text = status_of(db)   # (status upgrades it as it reads it)
    assert info["unreadable_by_kind"] == {"unreadable": 1, "not_text": 2, "unusable": 1, "unlisted": 1}, info
    assert last_update_line(text).endswith(": ok, but 1 file could not be read, 2 are not text, 1 could not be "
                                           "used, 1 folder could not be listed"), text


def _info(status: str, failures: int, unreadable: int) -> dict:
    return {"version": 1, "published_at": None, "documents": 1, "chunks": 1, "entities": 0,
            "relationships": 0, "claims": 0, "communities": 0, "communities_by_level": {},
            "reports": 0, "extractive_reports": 0, "llm": llm_summary({}), "llm_by_model": [],
            "cache_hit_rate": None, "failures_total": failures, "failures_last_run": failures,
            "unreadable_last_run": unreadable, "unreadable_by_kind": {"unreadable": unreadable}, "queries": 0,
            "size": {"database_bytes": 0, "cache_bytes": 0, "free_bytes": 0},
            "last_run": {"id": "r1", "command": "watch", "status": status}}


def test_failed_items_are_said_beside_ok():
    # `watch --once` or `index` that exited 1: the run finished ("ok"), items were left out.
    line = last_update_line(format_status(_info("ok", 3, 1), Path("i.db")))
    assert line.endswith("watch r1: ok, but 2 items failed (left out of this version) and 1 file "
                         "could not be read"), line
    line = last_update_line(format_status(_info("ok", 1, 0), Path("i.db")))
    assert line.endswith("ok, but 1 item failed (left out of this version)"), line
    assert last_update_line(format_status(_info("ok", 0, 0), Path("i.db"))).endswith("watch r1: ok")
    assert "killed" in last_update_line(format_status(_info("running", 0, 0), Path("i.db")))
    # A run that stopped (a dead endpoint: "Nothing was published") made no version to leave
    # anything out of.
    line = last_update_line(format_status(_info("failed", 1, 0), Path("i.db")))
    assert line.endswith("failed (1 item failed)"), line   # not "failed, but ... failed"


def test_how_to_list_failures_is_said_once_on_the_first_line_with_any():
    # With items failed, files left unindexed and items settled, plain `status` said
    # "(list them with --failures)" on each of the three lines.
    def said(failed: int, not_indexed: int, settled: int, **more) -> list[str]:
        info = {**_info("failed", failed, 0), "not_indexed_last_run": not_indexed, "settled": settled, **more}
        return [line for line in format_status(info, Path("i.db")).splitlines() if "list them with" in line]

    (line,) = said(2, 3, 1)
    assert line.startswith("  failures       2 in the last update (list them with --failures)"), line
    (line,) = said(0, 3, 1)
    assert line.startswith("  not indexed    3 new or changed files: ") and line.endswith("(list them with --failures)")
    (line,) = said(0, 0, 1)
    assert line.startswith("  settled        1 item no longer asked for: "), line
    # With --failures each lists its items, and none says how.
    assert said(2, 3, 1, failures=[], not_indexed_files=[], settled_items=[]) == []


def test_the_not_indexed_line_says_one_file_as_it():
    # "1 new or changed file: ... the next that gets through indexes them" (a newcomer's finding).
    def line(n: int) -> str:
        info = {**_info("failed", 0, 0), "not_indexed_last_run": n, "settled": 0}
        (said,) = [s for s in format_status(info, Path("i.db")).splitlines() if "not indexed" in s]
        return said

    assert "1 new or changed file: the last update failed and published nothing; the next that gets " \
        "through indexes it (" in line(1), line(1)
    assert "3 new or changed files: " in line(3) and "gets through indexes them (" in line(3), line(3)


def test_queries_count_the_questions_answered(corpus, tmp_path):
    # An `ask` killed with -9 (or stopped) left its run 'running' and was counted for good.
    db = tmp_path / "q.db"
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    store = Store(db)
    for i, status in enumerate(("ok", "running", "interrupted", "failed")):
        store.start_run(f"ask-{i}", "ask")
        store.finish_run(f"ask-{i}", status)
    store.close()
    assert status_of(db)[0]["queries"] == 1


def test_status_says_why_reports_are_extractive(corpus, tmp_path, simulator):
    # "reports 10 (7 extractive)" said nothing of why seven were (index.report_min_members).
    import sqlite3

    from streamrag.status import _reports_line

    db = tmp_path / "m.db"
    anyio.run(lambda: sync([corpus], make_settings(simulator.base_url, index={"report_min_members": 4}), db,
                           root=corpus))
    with sqlite3.connect(db) as conn:
        sizes = [n for (n,) in conn.execute("SELECT count(*) FROM community_members GROUP BY community_id")]
        extractive = conn.execute("SELECT count(*) FROM reports WHERE extractive = 1 AND key IN "
                                  "(SELECT report_key FROM communities)").fetchone()[0]
    conn.close()
    small = sum(1 for n in sizes if n < 4)
    assert 0 < small == extractive < len(sizes), (sizes, extractive)
    info, text = status_of(db)
    assert (f"  reports        {len(sizes)} ({extractive} extractive: for communities of fewer than 4 "
            "members, index.report_min_members)") in text.splitlines(), text
    offline = tmp_path / "o.db"
    anyio.run(lambda: sync([corpus], make_settings(""), offline, root=corpus))
    info, text = status_of(offline)
    n = info["reports"]
    assert f"  reports        {n} ({n} extractive: built offline, no LLM wrote them)" in text.splitlines(), text
    # Some stand in for the model's failed answers: each kind counted.
    mixed = {"reports": 10, "extractive_reports": 7, "reports_offline": False, "report_min_members": 3,
             "extractive_small_reports": 5}
    assert _reports_line(mixed) == ("  reports        10 (7 extractive: 5 for communities of fewer than 3 members, "
                                    "index.report_min_members; 2 standing in for the model's failed or unusable "
                                    "answers)")
    assert _reports_line({**mixed, "extractive_reports": 0}) == "  reports        10 (0 extractive)"


def test_the_reports_line_tells_stand_ins_from_reports_no_model_was_asked_for(corpus, tmp_path, simulator):
    """Reports of communities no line of whose context fits index.report_max_input_tokens are
    written with no call (``ReportStage.report``), yet were said to stand "in for the model's
    failed or unusable answers". A real index with failed report answers (half the requests
    fail) says its stand-ins and its small communities' reports; one whose contexts fit nothing
    says so, and asked the model no report."""
    import sqlite3

    from streamrag.errors import LLMUnavailableError
    from streamrag.simulator import Simulator, SimulatorConfig

    def counts(db: Path) -> tuple[int, int]:   # (extractive reports of communities of < 3 members, the others')
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT (SELECT count(*) FROM community_members m WHERE m.community_id = c.id) < 3, "
                "count(DISTINCT c.report_key) FROM communities c JOIN reports r ON r.key = c.report_key "
                "WHERE r.extractive = 1 GROUP BY 1").fetchall()
        conn.close()
        return dict(rows).get(1, 0), dict(rows).get(0, 0)

    faulty_db, bare_db = tmp_path / "faulty.db", tmp_path / "bare.db"
    with Simulator(SimulatorConfig(fault_rate=0.5, seed=11, timeout_s=0)) as faulty:
        settings = make_settings(faulty.base_url, index={"report_min_members": 3}, llm={"max_retries": 0})
        for _ in range(5):
            try:
                anyio.run(lambda: sync([corpus], settings, faulty_db, root=corpus))
                break
            except LLMUnavailableError:   # (the first calls to finish all failed: as test_bad_answers)
                continue
    small, standing_in = counts(faulty_db)
    info, text = status_of(faulty_db)
    assert small and standing_in and info["llm"]["by_stage"]["report"]["errors"], (small, standing_in, info["llm"])
    n = info["extractive_reports"]
    assert f"  reports        {info['reports']} ({n} extractive: {small} for communities of fewer than 3 members, " \
           f"index.report_min_members; {standing_in} standing in for the model's failed or unusable answers)" \
           in text.splitlines(), text
    anyio.run(lambda: sync([corpus], make_settings(simulator.base_url, index={
        "report_min_members": 3, "report_max_input_tokens": 30}), bare_db, root=corpus))
    small, unasked = counts(bare_db)
    info, text = status_of(bare_db)
    assert small and unasked and not info["llm"]["by_stage"].get("report", {}).get("calls"), info["llm"]
    assert f"  reports        {info['reports']} ({info['extractive_reports']} extractive: {small} for communities " \
           f"of fewer than 3 members, index.report_min_members; {unasked} for communities none of whose lines fit " \
           "index.report_max_input_tokens (no LLM call))" in text.splitlines(), text


def test_status_says_how_big_the_database_is_and_how_much_is_cached_answers(corpus, tmp_path, simulator):
    # A daemon's database grew to three times a fresh index under churn (the cached answers of
    # what changed are kept store.keep_unused_days), and nothing said so.
    import sqlite3

    db = tmp_path / "s.db"
    anyio.run(lambda: sync([corpus], make_settings(simulator.base_url), db, root=corpus))
    info, text = status_of(db)
    with sqlite3.connect(db) as conn:
        cached = conn.execute("SELECT sum(length(response)) FROM llm_cache").fetchone()[0]
    conn.close()
    size = info["size"]
    on_disk = sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists())
    assert size["database_bytes"] == on_disk and 0 < cached == size["cache_bytes"] < on_disk
    assert size["free_bytes"] >= 0
    (line,) = [x for x in text.splitlines() if x.strip().startswith("database")]
    assert f"{on_disk / 1e6:.1f} MB (cached model answers {cached / 1e6:.1f} MB" in line
    # No unusable answer: the calls line says none (only a count that is not 0)
    assert info["unusable"] == 0 and "unusable" not in next(x for x in text.splitlines() if "LLM calls" in x)


def test_a_failure_a_watchers_extraction_meets_before_its_sync_counts_once(corpus, tmp_path):
    # Under `watch`, a binary file showed "1 in the last update (2 recorded over all runs)"
    # after one sync: the extraction ahead of the sync (run "watch:extract") and the sync each
    # recorded it. Run as the daemon runs them, offline.
    from streamrag.pipeline import Indexer

    (corpus / "bin.txt").write_bytes(b"\x00\x01binary\x00")
    db = tmp_path / "w.db"

    def watcher_sync() -> None:
        settings = make_settings()
        anyio.run(Indexer(settings, db, root=corpus, command="watch:extract").prefetch, [corpus])
        anyio.run(Indexer(settings, db, root=corpus, command="watch").run, [corpus])

    watcher_sync()
    info, text = status_of(db)
    assert info["failures_last_run"] == info["failures_total"] == 1
    assert "failures       1 in the last update (list them" in text, text
    # An update that finds it unchanged names it again, but it is the same failure: counted once.
    watcher_sync()
    info, text = status_of(db)
    assert info["failures_last_run"] == info["failures_total"] == 1
    # Changed, and still not text: a new failure.
    (corpus / "bin.txt").write_bytes(b"\x00\x02other binary\x00")
    watcher_sync()
    assert status_of(db)[0]["failures_total"] == 2
    # Folded into the archive, the count stays the same.
    assert pruned(db, "failures") == 0
    assert status_of(db)[0]["failures_total"] == 2


def _with_calls(db: Path, stage: str, *calls: dict) -> Path:
    """An index at ``db`` whose call log holds one call of ``stage`` for each of ``calls`` (its
    keys over those of a plain call of one run, with no tokens)."""
    plain = {"run_id": "r", "stage": stage, "model": "m1", "prompt": stage, "prompt_version": "1",
             "cache_key": "k", "prompt_tokens": 0, "completion_tokens": 0, "latency_ms": 1.0, "cached": 0}
    store = Store(db)
    with store.transaction():
        for call in calls:
            store.record_call({**plain, **call})
    store.close()
    return db


def test_calls_a_run_cancelled_are_counted_apart_from_those_that_failed(tmp_path):
    # They were not recorded at all; counted as errors, they would blame the model for a run
    # that gave up (or a Ctrl-C).
    db = _with_calls(tmp_path / "s.db", "extract", {"error": "HTTP 500: boom"},
                     {"error": "cancelled after 2 tries, none answered", "cancelled": 1})
    info, text = status_of(db)
    assert (info["llm"]["calls"], info["llm"]["errors"], info["llm"]["cancelled"]) == (2, 1, 1), info["llm"]
    assert info["llm_by_model"][0]["cancelled"] == 1
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.strip().startswith("stage"))
    assert lines[header].endswith("errors  cancelled") and lines[header + 1].split()[-2:] == ["1", "1"], text


_CHECK_URL = "http://x/v1/chat/completions"


def test_a_failed_check_that_refused_nothing_is_counted_as_index_and_watch_count_it(tmp_path):
    # A check of a model by name that got no answer (a server down) or a 500 is no failed call to
    # index and watch (``CallLog.record``'s apart); `status` counted it among model_check's errors,
    # beside the refusal that stops a run (which stays one). Its row says which now.
    db = _with_calls(tmp_path / "s.db", "model_check",
                     {"error": f"{_CHECK_URL}: no answer to the check of m1", "apart": 1},
                     {"error": f"{_CHECK_URL}: HTTP 500: busy", "apart": 1},
                     {"error": f"{_CHECK_URL}: HTTP 404: model m1 not found"})
    _with_calls(db, "extract", {"error": "HTTP 500: boom"}, {})
    info, text = status_of(db)
    check = info["llm"]["by_stage"]["model_check"]
    assert (check["calls"], check["errors"], info["llm"]["errors"], info["llm"]["calls"]) == (1, 1, 2, 3), info["llm"]
    assert info["checks_failed"] == 2
    [row] = [line for line in text.splitlines() if line.strip().startswith("model_check ")]
    assert row.split()[-1] == "1", text
    [said] = [line for line in text.splitlines() if "model checks failed" in line]
    # (no wider than the table above it: it was 123 columns)
    assert said == "    and 2 model checks failed, refusing nothing (no answer, or a server error): in no count above"
    assert len(said) <= 100 and len(said.replace("2", "12,345")) <= 105


def test_a_model_whose_checks_alone_failed_has_no_row_of_zeros(tmp_path):
    db = _with_calls(tmp_path / "s.db", "model_check", {"error": f"{_CHECK_URL}: HTTP 502: Bad Gateway", "apart": 1})
    _with_calls(db, "extract", {})
    info, text = status_of(db)
    assert [r["stage"] for r in info["llm_by_model"]] == ["extract"] and "model_check" not in info["llm"]["by_stage"]
    assert info["llm"]["errors"] == 0 and info["checks_failed"] == 1 and "    and 1 model check failed" in text


def test_the_failed_checks_apart_folded_into_the_archive_are_still_said(tmp_path):
    # prune keeps what `status` counts (its docstring): the line of the failed checks that
    # refused nothing counted the rows llm_calls kept, and said nothing once they were folded.
    db = _with_calls(tmp_path / "s.db", "model_check",
                     {"error": f"{_CHECK_URL}: no answer to the check of m1", "apart": 1},
                     {"error": f"{_CHECK_URL}: HTTP 404: model m1 not found"})
    _with_calls(db, "extract", {})
    info, text = status_of(db)
    assert pruned(db, "llm_calls") == 0
    after, text_after = status_of(db)
    assert (after["checks_failed"], after["llm"]) == (info["checks_failed"], info["llm"]) == (1, info["llm"])
    assert "    and 1 model check failed" in text_after, text_after


def test_a_read_only_index_from_before_the_checks_apart_is_read_as_it_lies(tmp_path, monkeypatch):
    # An index made before llm_calls.apart, read where it cannot be upgraded (read-only media):
    # the step changes no row of one whose failed checks were all refusals (``store._NO_OP_WHEN``),
    # and status reads it without the column, each failed check counted as that streamrag did.
    import sqlite3

    import streamrag.store as store_module
    from conftest import schema_before
    from test_store import _write_protected

    db = _with_calls(tmp_path / "s.db", "model_check", {"error": f"{_CHECK_URL}: HTTP 404: model m1 not found"})
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX llm_calls_apart")   # (as the schema before made it)
        conn.execute("ALTER TABLE llm_calls DROP COLUMN apart")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(schema_before("llm_calls_apart")),))
    conn.close()
    _write_protected(monkeypatch)
    monkeypatch.setattr(store_module, "_read_only_here", lambda path: "the file is read-only to you")
    info, _text = status_of(db)
    assert (info["llm"]["by_stage"]["model_check"]["errors"], info["checks_failed"]) == (1, 0), info["llm"]


def test_answers_asked_again_are_said_as_watch_says_them(tmp_path):
    # watch's idle line said "4 answers asked again" (its `asked_again`), status only 4 errors.
    import httpx

    from streamrag.config import LLMSettings
    from streamrag.errors import LLMOutputError
    from streamrag.llm import LLMClient
    from streamrag.writer import Writer

    answers = [("entity | Mira Osk | person | An engin", "length"), ("entity | Mira Osk | person | done", "stop"),
               ("no", "length")]   # the last repeats: a request never answered usably

    def script(request: httpx.Request) -> httpx.Response:
        text, finish = answers.pop(0) if len(answers) > 1 else answers[0]
        return httpx.Response(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                      "finish_reason": finish}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

    db = tmp_path / "s.db"

    async def calls() -> dict:
        store = Store(db)
        try:
            async with Writer(store) as writer:
                async with LLMClient(LLMSettings(api_base="http://llm.test/v1", requests_per_minute=0,
                                                 tokens_per_minute=0), "k", store=store, writer=writer,
                                     run_id="r", transport=httpx.MockTransport(script)) as llm:
                    await llm.chat([{"role": "user", "content": "a"}], model="m", stage="report", max_tokens=20)
                    try:   # three unusable answers: failed, not asked again
                        await llm.chat([{"role": "user", "content": "b"}], model="m", stage="report", max_tokens=20)
                    except LLMOutputError:
                        pass
                    return llm.stats["report"]
        finally:
            store.close()
    stats = anyio.run(calls)
    assert (stats["errors"], stats["asked_again"]) == (4, 1)
    info, text = status_of(db)
    assert info["llm"]["errors"] == 4 and info["asked_again"] == stats["asked_again"] == 1
    # ... as a part of the unusable answers, not a second count of errors beside them
    assert ("  LLM calls      5 (cache hit rate 0%); 4 answers unusable (in errors), 1 of them asked again and "
            "then answered") in text.splitlines(), text
    # Folded into the archive, the count stays the same.
    assert pruned(db, "llm_calls") == 0
    assert status_of(db)[0]["asked_again"] == 1


def test_a_prune_during_an_outage_s_retry_keeps_failures_total(tmp_path):
    # A retry's failures of a chunk its update's first run left unindexed are left out as that
    # file while it runs, as that run names them. A prune in the retry (it publishes other files)
    # deleted that run, older than store.keep_unused_days: they counted again, archived as -1,
    # and once the retry ended naming them, `status` said failures_total -1.
    import json

    from streamrag import index_rows

    db, day = tmp_path / "s.db", 86400.0
    unindexed = json.dumps({"not_indexed": 1, "not_indexed_chunks": ["c1"]})
    store = Store(db)
    try:
        with store.conn:
            store.start_run("first", "watch")
            store.record_failure("first", "extract", "c1", "refused")
            store.finish_run("first", "failed", unindexed)
            store.conn.execute("UPDATE runs SET started_at = started_at - ? WHERE id = 'first'", (3 * day,))
            store.conn.execute("UPDATE failures SET created_at = created_at - ? WHERE run_id = 'first'", (3 * day,))
            store.start_run("retry", "watch", update_of="first")
            store.record_failure("retry", "extract", "c1", "refused")
            assert index_rows.failures_recorded(store) == 0
            prune(store, 1, time.time())
            store.finish_run("retry", "failed", unindexed)
    finally:
        store.close()
    assert status_of(db)[0]["failures_total"] == 0


def test_failures_total_counts_no_chunk_the_index_lacks_while_its_run_goes_on(tmp_path):
    # An outage's first sync of a new file, and a retry meeting a file first: their failures of
    # chunks no published index holds counted while the run went on (only a chunk an ended run
    # of its update had named unindexed was left out), and not once it ended naming them: 1, 0.
    # A run under way now leaves out any chunk the published index lacks; its end decides.
    import json

    from streamrag import index_rows

    def unindexed(*chunks):
        return json.dumps({"not_indexed": 1, "not_indexed_chunks": list(chunks)})

    store = Store(tmp_path / "s.db")
    try:
        with store.conn:
            store.conn.execute("INSERT INTO live_chunks(chunk_id, extractor) VALUES ('live', 'm')")
            counts = []
            store.start_run("first", "watch")
            store.record_failure("first", "extract", "c1", "refused")
            counts.append(index_rows.failures_recorded(store))
            assert index_rows.failures_recorded(store, under_way=False) == 1   # (prune's count)
            store.finish_run("first", "failed", unindexed("c1"))
            counts.append(index_rows.failures_recorded(store))
            store.start_run("retry", "watch", update_of="first")
            for chunk in ("c1", "c9"):   # c9: of a file first seen in the retry
                store.record_failure("retry", "glean" if chunk == "c9" else "extract", chunk, "refused")
            counts.append(index_rows.failures_recorded(store))
            store.finish_run("retry", "failed", unindexed("c1", "c9"))
            counts.append(index_rows.failures_recorded(store))
            assert counts == [0, 0, 0, 0], counts
            # A chunk the index holds failed again (another extraction model): a failure as it
            # goes on and after; a new chunk's failure in a run that publishes: one once it ends.
            store.start_run("later", "index")
            store.record_failure("later", "extract", "live", "bad answer")
            store.record_failure("later", "extract", "new", "bad answer")
            assert index_rows.failures_recorded(store) == 1
            store.finish_run("later", "ok", json.dumps({"not_indexed": 0}))
            assert index_rows.failures_recorded(store) == 2
    finally:
        store.close()


def test_failures_total_holds_through_an_outage_s_first_sync_and_a_file_met_in_a_retry(
        corpus, tmp_path, simulator, monkeypatch):
    # Through the daemon and the simulator: a new file in an outage, and another one first met
    # by a retry. As each sync ends (its failures recorded, its row still "running") the count
    # was 2 for the first sync and for the retry meeting the new file, 0 once they ended.
    import httpx

    from streamrag import index_rows
    from test_daemon import running, until
    from test_daemon_outage import _paragraphs, counted_syncs, fast_outage

    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    during: list[tuple[str | None, int]] = []
    real_finish = Store.finish_run

    def finish_run(store, run_id, status, stats=None):
        command, update_of = store.query("SELECT command, update_of FROM runs WHERE id = ?", (run_id,))[0].values()
        if command != "watch:extract":
            during.append((update_of, index_rows.failures_recorded(store)))
        real_finish(store, run_id, status, stats)

    monkeypatch.setattr(Store, "finish_run", finish_run)
    db = tmp_path / "f.db"

    async def outage():
        async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
            switch.up = False
            (corpus / "new.txt").write_text(_paragraphs(3))
            await send.send({(1, str(corpus / "new.txt"))})
            await until(lambda: len(syncs) >= 2, timeout=30)   # the file's sync and a retry
            (corpus / "later.txt").write_text(_paragraphs(2).replace("Oskar", "Tomas"))
            await send.send({(1, str(corpus / "later.txt"))})
            count = len(syncs)
            await until(lambda: len(syncs) >= count + 2, timeout=30)
            await send.aclose()
        await switch.client.aclose()

    anyio.run(outage)
    after = status_info(db, failures=True)
    assert after["not_indexed_last_run"] == 2 and after["failures_total"] == 0, after
    first = [n for update_of, n in during if update_of is None]
    retries = [n for update_of, n in during if update_of is not None]
    assert len(first) >= 2 and len(retries) >= 3, during   # (the initial sync, the outage's first)
    assert {n for _, n in during} == {0}, during


def test_answers_asked_again_of_an_index_pruned_before_unusable_ones_were_archived(tmp_path):
    # prune kept archived_asked_again before it kept archived_unusable (290243a): such an index
    # counted more answers asked again than unusable (0 of 1), which cannot be: each was unusable first.
    tokens = {"prompt_tokens": 10, "completion_tokens": 5}
    db = _with_calls(tmp_path / "s.db", "report", {**tokens, "error": "unusable answer: cut off at max_tokens"},
                     {**tokens, "error": None})
    line = lambda: next(s for s in status_of(db)[1].splitlines() if s.startswith("  LLM calls"))
    assert line().endswith("; 1 answer unusable (in errors), asked again and then answered"), line()
    assert pruned(db, "llm_calls") == 0
    assert line().endswith("; 1 answer unusable (in errors), asked again and then answered"), line()
    store = Store(db)
    assert store.get_meta("archived_unusable") == "1"   # (as today's prune keeps it)
    with store.transaction():
        store.conn.execute("DELETE FROM meta WHERE key = 'archived_unusable'")
    store.close()
    info, _ = status_of(db)
    assert (info["unusable"], info["asked_again"]) == (1, 1), info
    assert line().endswith("; 1 answer unusable (in errors), asked again and then answered"), line()


def test_calls_that_waited_on_a_content_filter_s_stop_are_not_counted_cached(tmp_path):
    # Identical calls that waited on one request a content filter stopped are recorded cached
    # (the stop is one unusable answer, not three), but the cache answered them nothing: status
    # counted them in cached and its hit rate (3 of 4, 75%), the run's own stats did not; then
    # in calls and errors (errors 3 beside unusable 1), which the run's stats no longer do.
    stop = {"prompt_tokens": 10, "completion_tokens": 5,
            "error": "unusable answer: the provider's content filter stopped m1's answer (stage report)"}
    waiter = {**stop, "prompt_tokens": 0, "completion_tokens": 0, "cached": 1}
    db = _with_calls(tmp_path / "s.db", "report", stop, waiter, waiter,
                     {"cache_key": "k2", "cached": 1, "prompt_tokens": 10, "completion_tokens": 5})
    before = status_of(db)[0]
    assert (before["llm"]["calls"], before["llm"]["cached"], before["cache_hit_rate"]) == (2, 1, 0.5), before["llm"]
    assert (before["llm"]["errors"], before["unusable"]) == (1, 1), before
    # Folded into the archive (archived_unusable too, as today's prune writes it), the same.
    assert pruned(db, "llm_calls") == 0
    after = status_of(db)[0]
    assert (after["llm"], after["unusable"], after["asked_again"]) == (before["llm"], 1, 0), after
    store = Store(db, readonly=True)
    try:
        assert store.get_meta("archived_unusable") == "1"
    finally:
        store.close()


class FilterOneReport:
    """The simulator's answers, but the report of the community holding ``name`` stopped by the
    provider's content filter (``finish_reason`` "content_filter")."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stopped = 0

    def __call__(self, request):
        import json
        import re

        import httpx

        from streamrag.simulator import ANSWERS, detect_task
        from test_bad_answers import body

        if request.method == "GET":   # (GET /models, which a run asks first: no listing)
            return httpx.Response(404)
        payload = json.loads(request.content)
        task = detect_task(payload["messages"])
        text = ANSWERS[task](payload["messages"])
        if task == "report" and re.search(rf"^ent-\w+ \| {self.name} \|",
                                          "\n".join(m["content"] for m in payload["messages"]), re.M):
            self.stopped += 1
            return httpx.Response(200, json=body(text[:40], "content_filter"))
        return httpx.Response(200, json=body(text))


def test_answers_a_content_filter_stopped_are_counted_unusable_as_the_run_counted_them(corpus, tmp_path):
    # The run counted a content filter's stop as an unusable answer (llm.unusable), `status`
    # found unusable answers by their error's words, "unusable answer ...", which a content
    # filter's are not: it counted none of them.
    import httpx

    endpoint = FilterOneReport("Mira Osk")
    db = tmp_path / "f.db"
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0})
    result = anyio.run(lambda: sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(endpoint)))
    unusable = sum(s["unusable"] for s in result.llm.values())
    assert endpoint.stopped and unusable == endpoint.stopped, result.llm
    info, text = status_of(db)
    assert info["unusable"] == unusable and info["asked_again"] == 0, info
    # ... and its text says them too (--json alone did), beside the calls
    calls_line = next(line for line in text.splitlines() if line.startswith("  LLM calls"))
    assert calls_line.endswith(f"%); {unusable} answer{'s' if unusable > 1 else ''} unusable (in errors)"), text
    # Folded into the archive, the count stays the same.
    assert pruned(db, "llm_calls") == 0
    assert status_of(db)[0]["unusable"] == unusable


def test_a_content_filter_s_stop_recorded_before_it_was_marked_unusable_is_counted_so(tmp_path):
    # Rows of such stops recorded before their error began "unusable answer" keep their words.
    db = tmp_path / "s.db"
    store = Store(db)
    row = {"run_id": "r", "stage": "report", "model": "m1", "prompt": "report", "prompt_version": "1",
           "cache_key": "k", "prompt_tokens": 10, "completion_tokens": 5, "latency_ms": 1.0, "cached": 0}
    with store.transaction():
        store.record_call({**row, "error": "the provider's content filter stopped m1's answer (stage report); ..."})
        store.record_call({**row, "error": "unusable answer: no JSON object"})
        store.record_call({**row, "error": "HTTP 500: the provider's content filter stopped working"})
    store.close()
    assert status_of(db)[0]["unusable"] == 2


def _one_summary_always_unusable(monkeypatch, *, entity: bool = False) -> list[str]:
    """The first element summarized (standing for an unlucky one; with ``entity``, the first
    entity: a relationship's is said "A and B") gets no usable summary answer, run after run;
    the others are summarized as usual. Returns where its name will be."""
    from streamrag import pipeline
    from streamrag.errors import LLMOutputError

    real = pipeline.summarize
    target: list[str] = []

    async def summarize(llm, name, descriptions, settings, counts=None):
        if not target and not (entity and " and " in name):
            target.append(name)
        if target and name == target[0]:
            raise LLMOutputError(f"{name}: no usable answer in 3 tries")
        return await real(llm, name, descriptions, settings, counts)

    monkeypatch.setattr(pipeline, "summarize", summarize)
    return target


def test_a_summary_no_longer_asked_for_is_listed_as_long_as_it_is(corpus, tmp_path, monkeypatch):
    # `index` said "1 item no longer asked for ... (`streamrag status --failures` says which and
    # why)"; after one more run that changed nothing, status listed none ("0 in the last
    # update"): only the run that settled it recorded a failure.
    target = _one_summary_always_unusable(monkeypatch)
    db = tmp_path / "i.db"
    for _ in range(3):
        anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    settled_by = recorded_failures(db)[-1:]
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))   # changes nothing

    info, text = status_of(db)
    assert info["failures_last_run"] == 0 and info["settled"] == 1
    assert "settled_items" not in info
    assert ("  settled        1 item no longer asked for: the model's answers were unusable on 3 runs in a row, "
            "so extractive text stands in (list them with --failures)") in text.splitlines()
    info, text = status_of(db, failures=True)
    assert info["failures"] == []
    (item,) = info["settled_items"]
    (said,) = settled_by   # what the run that settled it recorded, as it recorded it
    assert item["stage"] == "summarize" and item["item"] == said["item"] and item["item"].startswith(("ent-", "rel-"))
    assert item["runs"] == 3 and item["message"] == said["message"]
    assert item["message"].startswith(f"{target[0]}: ") and "unusable on 3 runs in a row" in item["message"]
    assert f"    [summarize] {item['message']}" in text.splitlines()
    assert "a change to them or to their settings asks again" in text

    # New summary settings ask it again: no longer settled (its answer is unusable once now).
    anyio.run(lambda: sync([corpus], make_settings(index={"summary_max_tokens": 120}), db, root=corpus))
    info, text = status_of(db, failures=True)
    assert info["settled"] == 0 and info["settled_items"] == [] and "settled" not in text
    assert [f["item"] for f in info["failures"]] == [item["item"]]


def test_a_settled_summary_whose_element_needs_none_now_is_not_said_settled(corpus, tmp_path, monkeypatch):
    # Its documents removed but one, the element kept one description, no summary to ask: status
    # still said it "no longer asked for: the model's answers were unusable" (its count kept:
    # given two descriptions again, one unusable answer would have settled it again).
    _one_summary_always_unusable(monkeypatch)
    db = tmp_path / "i.db"
    for _ in range(3):
        anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    (item,) = status_of(db, failures=True)[0]["settled_items"]
    store = Store(db)
    try:
        table = "entity_sources" if item["item"].startswith("ent-") else "relationship_sources"
        column = "entity_id" if table == "entity_sources" else "relationship_id"
        holding = [r["path"] for r in store.query(
            f"SELECT DISTINCT f.path FROM {table} s JOIN document_chunks c ON c.chunk_id = s.chunk_id JOIN files f "
            f"ON f.doc_id = c.doc_id WHERE s.{column} = ? ORDER BY f.path", (item["item"],))]
    finally:
        store.close()
    assert len(holding) >= 2, holding
    for path in holding[1:]:
        (corpus / path).unlink()
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    store = Store(db)
    try:
        left = store.scalar(f"SELECT count(DISTINCT description) FROM {table} WHERE {column} = ?", (item["item"],))
    finally:
        store.close()
    assert left == 1
    info, text = status_of(db, failures=True)
    assert info["settled"] == 0 and info["settled_items"] == [] and "no longer asked for" not in text


def test_a_settled_item_whose_failure_is_no_longer_kept_is_still_listed():
    from streamrag.status import settled_lines

    info = {"settled": 3, "settled_items": [
        {"stage": "report", "item": "C7", "runs": 3, "message": None, "created_at": None},
        {"stage": "summarize", "item": "ent-1", "runs": 4, "message": "Mira Osk: garbage", "created_at": 1.0}]}
    assert settled_lines(info)[1:] == [
        "    [report] community C7: unusable on 3 runs in a row (the failure recorded then is no longer kept)",
        "    [summarize] Mira Osk: garbage",
        "    ... and 1 more"]
    assert settled_lines({"settled": 0}) == []


def test_a_settled_summary_whose_failure_is_no_longer_kept_is_named_as_its_failure_named_it(corpus, tmp_path):
    # Once its failure was pruned (store.keep_unused_days), a settled summary was listed by its id
    # ("[summarize] ent-0ba69eb0e25e9581: unusable on 3 runs in a row ..."), not by the name its
    # failure gave it ("Mira Osk: ...", "Mira Osk and Harbor Board: ...").
    db = tmp_path / "i.db"
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    store = Store(db)
    try:
        ent, name = store.conn.execute("SELECT id, name FROM entities ORDER BY id LIMIT 1").fetchone()
        rel, pair = store.conn.execute(
            "SELECT r.id, s.name || ' and ' || t.name FROM relationships r JOIN entities s ON s.id = r.source "
            "JOIN entities t ON t.id = r.target ORDER BY r.id LIMIT 1").fetchone()
        with store.transaction():
            store.set_meta("summary_unusable", f'{{"{ent}": 3, "{rel}": 4}}')
    finally:
        store.close()
    info, text = status_of(db, failures=True)
    assert [(i["item"], i["name"]) for i in info["settled_items"]] == [(ent, name), (rel, pair)]
    assert f"    [summarize] {name}: unusable on 3 runs in a row (the failure recorded then is no longer kept)" \
        in text.splitlines()
    assert f"    [summarize] {pair}: unusable on 4 runs in a row (the failure recorded then is no longer kept)" \
        in text.splitlines()


def test_status_names_only_the_settled_items_it_lists(corpus, tmp_path, monkeypatch):
    # Without --failures, status read every settled item's name and failure to print a count
    # (on a large index, most of what it read); with --failures, every one's for the 50 it lists.
    import json

    from streamrag import index_rows

    db = tmp_path / "i.db"
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    store = Store(db)
    try:
        ids = [r[0] for r in store.conn.execute("SELECT id FROM entities UNION ALL SELECT id FROM relationships")]
        with store.transaction():
            store.set_meta("summary_unusable", json.dumps(dict.fromkeys(ids, 3)))
    finally:
        store.close()
    named: list[int] = []
    real = index_rows.settled_items

    def naming(store, *args):
        items = real(store, *args)
        named.append(len(items))
        return items

    monkeypatch.setattr(index_rows, "settled_items", naming)
    info, text = status_of(db)
    assert info["settled"] == len(ids) > 2 and f"  settled        {len(ids)} items no longer asked for" in text
    assert named == []
    info, text = status_of(db, failures=True, failure_limit=2)
    assert named == [2] and len(info["settled_items"]) == 2 and f"    ... and {len(ids) - 2} more" in text


def _garbled_report_runs(corpus: Path, db: Path, runs: int, **index) -> None:
    """``runs`` runs of ``index`` against the simulator's answers, but garbage for the report of
    Mira Osk's community (settled on the third), with ``index`` settings."""
    import httpx
    from test_bad_answers import GarbleOneReport

    endpoint = GarbleOneReport("Mira Osk")
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0}, index=index)
    for _ in range(runs):
        anyio.run(lambda: sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(endpoint)))


def _said_once(text: str, message: str) -> int:
    return sum(message in line for line in text.splitlines())


def test_what_the_last_update_settled_is_said_settled_not_failed(corpus, tmp_path, monkeypatch):
    # The run that settled an item recorded it as failed, and `status --failures` listed it
    # twice, under the last update's failures ("ok, but 1 item failed (left out of this
    # version)") and under settled; `index` itself had exited 0 for it.
    db = tmp_path / "r.db"
    _garbled_report_runs(corpus, db, 3)
    (said,) = [f for f in recorded_failures(db) if f["run_id"] == status_of(db)[0]["last_run"]["id"]]
    assert "unusable on 3 runs in a row" in said["message"]
    info, text = status_of(db, failures=True)
    assert info["failures"] == [] and info["failures_last_run"] == 0 and info["settled"] == 1
    assert [i["item"] for i in info["settled_items"]] == [said["item"]]
    assert _said_once(text, said["message"].split(": ", 1)[1]) == 1, text
    assert ("  failures       0 in the last update (3 recorded over all runs, including any since indexed or "
            "removed)") in text.splitlines()
    assert last_update_line(text).endswith(": ok"), text
    assert last_update_line(status_of(db)[1]).endswith(": ok")

    # A summary, as its last update settled it.
    _one_summary_always_unusable(monkeypatch)
    db = tmp_path / "s.db"
    for _ in range(3):
        anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    (said,) = [f for f in recorded_failures(db) if f["run_id"] == status_of(db)[0]["last_run"]["id"]]
    info, text = status_of(db, failures=True)
    assert info["failures"] == [] and info["failures_last_run"] == 0
    assert [(i["item"], i["message"]) for i in info["settled_items"]] == [(said["item"], said["message"])]
    assert _said_once(text, said["message"]) == 1, text



def test_the_settled_line_says_the_runs_its_items_were_unusable_on(corpus, tmp_path, monkeypatch):
    # A settled summary whose mentions changed is asked again; unusable again, it settles at 4
    # runs in a row, and its line said so under "the model's answers were unusable on 3 runs in
    # a row".
    target = _one_summary_always_unusable(monkeypatch, entity=True)
    db = tmp_path / "i.db"
    for _ in range(3):
        anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    (corpus / "quay.txt").write_text(f"{target[0]} stood dark all winter, and the fishermen said so at every tide.\n")
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    for failures in (False, True):
        info, text = status_of(db, failures=failures)
        assert "  settled        1 item no longer asked for: the model's answers were unusable on 4 runs in a row" \
            in text, text
        assert info["settled"] == 1 and info["settled_by_runs"] == {"4": 1}
    assert "unusable on 4 runs in a row" in info["settled_items"][0]["message"]

    # Items of several counts: a range true of each line.
    store = Store(db)
    try:
        ent, rel = store.conn.execute("SELECT (SELECT min(id) FROM entities), (SELECT min(id) FROM relationships)"
                                      ).fetchone()
        with store.transaction():
            store.set_meta("summary_unusable", f'{{"{ent}": 3, "{rel}": 5}}')
    finally:
        store.close()
    info, text = status_of(db)
    assert "2 items no longer asked for: the model's answers were unusable on 3 to 5 runs in a row" in text, text
    assert info["settled_by_runs"] == {"3": 1, "5": 1}
    from streamrag.status import settled_lines

    assert "unusable on 3 or 4 runs in a row," in settled_lines({"settled": 3, "settled_by_runs": {"3": 2, "4": 1}})[0]



def test_a_settled_report_is_listed_by_its_title_and_counted_while_held(corpus, tmp_path):
    # It was listed by its community's id only ("[report] community C3: ..."), and once
    # index.report_min_members held its community back (its count kept: it stays settled when it
    # comes back), it was not counted at all.
    db = tmp_path / "i.db"
    _garbled_report_runs(corpus, db, 3)
    info, text = status_of(db, failures=True)
    (item,) = info["settled_items"]
    store = Store(db, readonly=True)
    try:
        title = store.scalar("SELECT r.title FROM communities c JOIN reports r ON r.key = c.report_key "
                             "WHERE c.id = ?", (item["item"],))
    finally:
        store.close()
    cause = item["message"].removeprefix(f"community {item['item']}: ")
    assert title and f'    [report] "{title}" (community {item["item"]}): {cause}' in text.splitlines(), text
    assert item["title"] == title and not item["held"]
    assert item["name"] == item["item"]   # (as before: --json keys and values kept)

    _garbled_report_runs(corpus, db, 1, report_min_members=50)   # every community held back
    info, text = status_of(db, failures=True)
    assert info["settled"] == 1 and "  settled        1 item no longer asked for" in text, text
    assert info["settled_by_runs"] == {"3": 1}
    (held,) = info["settled_items"]
    assert (held["item"], held["held"], held["message"]) == (item["item"], True, item["message"])
    assert f'(community {item["item"]}, held below index.report_min_members): {cause}' in text, text
    _garbled_report_runs(corpus, db, 1)   # back: still settled, not asked
    assert status_of(db, failures=True)[0]["settled_items"][0]["held"] is False



def test_a_settled_report_is_not_said_settled_once_its_output_budget_is_raised(corpus, tmp_path, capsys, monkeypatch):
    # Raising index.report_max_output_tokens is the fix for reports cut off, and the next run
    # asks a settled report again with the room it gives (as the estimate counts it): status
    # still said it "no longer asked for", held below index.report_min_members or not.
    import json

    from streamrag.cli import main

    monkeypatch.chdir(tmp_path)   # (no streamrag.toml here, no setting from the environment)
    unset_callers_variables(monkeypatch)
    db = tmp_path / "r.db"
    _garbled_report_runs(corpus, db, 3)
    raised = tmp_path / "raised.toml"
    raised.write_text("[index]\nreport_max_output_tokens = 2400\n")
    budget = make_settings().index.report_max_output_tokens
    for held in (False, True):
        if held:
            _garbled_report_runs(corpus, db, 1, report_min_members=50)
        info, _text = status_of(db, failures=True, report_budget=budget)
        assert info["settled"] == 1 and info["settled_items"][0]["held"] is held
        info, text = status_of(db, failures=True, report_budget=2400)
        assert info["settled"] == 0 and info["settled_items"] == [] and "settled    " not in text, text
        # ... and what the update that settled it recorded is no failure of it, as before.
        assert info["failures_last_run"] == 0 and info["failures"] == []
        assert main(["status", "--json", "--db", str(db), "--config", str(raised)]) == 0
        assert json.loads(capsys.readouterr().out)["settled"] == 0
        assert main(["status", "--json", "--db", str(db)]) == 0
        assert json.loads(capsys.readouterr().out)["settled"] == 1


def test_a_run_whose_writer_holds_the_lock_under_a_name_of_its_own_is_not_said_killed(corpus, tmp_path):
    # `one_writer(db, "nightly job")`: its lock line names no streamrag command, so `writer` is
    # null, and the run it was making was said "killed before it finished" while under way.
    from streamrag.store import one_writer

    db = tmp_path / "i.db"
    anyio.run(sync, [corpus], make_settings(), db)
    for holder in ("streamrag index /x", "nightly job"):
        with one_writer(db, holder):
            store = Store(db)
            store.start_run(f"r-{len(holder)}", "index")
            store.close()
            store = Store(db, readonly=True)
            try:
                info = gather_status(store)
            finally:
                store.close()
            assert info["last_run"]["status"] == "running" and info["last_run"]["killed"] is False, (holder, info)
            store = Store(db)
            store.finish_run(f"r-{len(holder)}", "ok")
            store.close()


def test_status_says_a_run_killed_with_sigkill_was_killed(corpus, tmp_path):
    # An `index` killed with -9 left its run "running" for good, and status said "running, or
    # killed before it finished" ever after, though nothing held the index's lock. (Run with
    # PYTHONPATH at the checkout: the subprocess imports streamrag.)
    import json
    import os
    import signal
    import subprocess
    import sys

    db = tmp_path / "k.db"

    def status() -> tuple[dict, str]:
        info = status_of(db)[0]
        return info, last_update_line(format_status(info, db))

    with index_under_way(corpus, db, latency_ms=300) as proc:
        info, line = status()   # under way: its process holds the lock
        assert info["writer"]["pid"] == proc.pid and line.endswith(": running"), line
        assert info["last_run"]["status"] == "running" and info["last_run"]["killed"] is False
        assert info["killed_before_publishing"] is False and "not indexed" not in format_status(info, db)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    info, line = status()
    assert info["last_run"]["status"] == "running" and info["writer"] is None
    assert line.endswith(": killed before it finished: no streamrag is writing the index "
                         "(a new run continues its work)"), line
    assert info["last_run"]["killed"] is True
    # It published nothing, and left the files it was taking unindexed: said, and named (it had
    # no "not indexed" line, as one that failed has; then one of "the new or changed files the
    # killed update was taking, if any": which they were was recorded only at a run's end).
    assert info["killed_before_publishing"] is True and info["not_indexed_last_run"] == 4, info
    (not_indexed,) = [x for x in format_status(info, db).splitlines() if x.startswith("  not indexed")]
    assert not_indexed == ("  not indexed    4 new or changed files: the last update was killed and published "
                           "nothing; the next that gets through indexes them (list them with --failures)"), not_indexed
    listed, text = status_of(db, failures=True)
    assert listed["not_indexed_files"] == ["council.txt", "festival.md", "guild.txt", "railway.txt"], listed
    assert "    guild.txt" in text.splitlines(), text
    # Of a row that records none (an older streamrag's): that it left some, if any.
    execute_on(db, "UPDATE runs SET taking = NULL")
    info = status_of(db)[0]
    assert info["killed_before_publishing"] is True and info["not_indexed_last_run"] == 0, info
    (not_indexed,) = [x for x in format_status(info, db).splitlines() if x.startswith("  not indexed")]
    assert not_indexed == ("  not indexed    the new or changed files the killed update was taking, if any: it "
                           "published nothing and had not recorded which they are; the next update finds them "
                           "and indexes them"), not_indexed
    env = clean_env()
    out = subprocess.run([sys.executable, "-m", "streamrag", "status", "--json", "--db", str(db)],
                         env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout)["last_run"]["killed"] is True, out.stderr
    # Another writer at work before its own run row is written (a watch starting, an index
    # reading its folder): the killed run was said "running" beside "writing now ... (pid N)",
    # another process. The process the row names is gone: killed.
    from streamrag.store import one_writer

    with one_writer(db, "streamrag watch /x"):
        info, line = status()
    assert info["writer"]["pid"] == os.getpid() and info["last_run"]["killed"] is True, info
    assert line.endswith(": killed before it finished (a new run continues its work)"), line


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a process's start time is read in /proc")
def test_a_run_whose_pid_another_process_has_now_is_said_killed_while_a_writer_holds_the_lock(corpus, tmp_path):
    # A run killed with -9 whose pid the system gave again to another process (a reboot, a busy
    # machine), read while another writer holds the lock (a watch starting): its pid is alive,
    # but started at another time than the run's process: killed. The same row of a process
    # alive as it was is under way (a run of the Python API beside the writer).
    import os

    from streamrag.store import one_writer

    db = tmp_path / "p.db"
    anyio.run(sync, [corpus], make_settings(), db)
    store = Store(db)
    try:
        store.start_run("r-killed", "index")   # (its pid and process are this one's)
    finally:
        store.close()
    with one_writer(db, "streamrag watch /x"):
        info, text = status_of(db)
        assert info["last_run"]["id"] == "r-killed" and info["last_run"]["killed"] is False, info
        assert last_update_line(text).endswith(": running"), text
        # (the pid given again: the process that has it now started at another time)
        execute_on(db, "UPDATE runs SET process = 'x' || process WHERE id = 'r-killed'")
        info, text = status_of(db)
    assert info["writer"]["pid"] == os.getpid() and info["last_run"]["status"] == "running", info
    assert info["last_run"]["killed"] is True, info
    assert last_update_line(text).endswith(": killed before it finished (a new run continues its work)"), text
    assert f"  writing now    streamrag watch (pid {os.getpid()})" in text, text


def test_an_ask_killed_with_sigkill_is_not_said_to_be_asking(corpus, tmp_path, simulator):
    # An ask takes no writer lock, and one killed with -9 left its run "running" for good: its
    # row names its process now, and status says the asks under way by it, not that one.
    # (Run with PYTHONPATH at the checkout: the subprocess imports streamrag.)
    import signal
    import subprocess
    import sys

    from streamrag.simulator import Simulator, SimulatorConfig

    db = tmp_path / "a.db"
    anyio.run(lambda: sync([corpus], make_settings(simulator.base_url), db, root=corpus))
    with Simulator(SimulatorConfig(latency_ms=30_000)) as slow:
        proc = subprocess.Popen([sys.executable, "-m", "streamrag", "ask", "What does the Harbor Council do?",
                                 "--mode", "global", "--db", str(db), "--api-base", slow.base_url],
                                env=clean_env(STREAMRAG_API_KEY="x"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while slow.requests == 0 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert slow.requests > 0, proc.stderr.read() if proc.poll() is not None else "no call"
            info, text = status_of(db)
            assert info["asking"] == [{"pid": proc.pid, "run": info["asking"][0]["run"]}], info["asking"]
            assert f"  asking now     1 question (pid {proc.pid})" in text.splitlines(), text
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    store = Store(db, readonly=True)
    try:
        assert store.scalar("SELECT status FROM runs WHERE command = 'ask'") == "running"
    finally:
        store.close()
    info, text = status_of(db)
    assert info["asking"] == [] and "asking now" not in text, text
    assert info["queries"] == 0


def test_a_running_ask_row_whose_process_is_another_now_is_not_said_to_be_asking(corpus, tmp_path):
    # The pid given again to another process after the ask's ended (a reboot, a busy machine):
    # its start time is not the ask's. A row of an older streamrag names no process: not said.
    import os

    db = tmp_path / "a.db"
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    store = Store(db)
    try:
        for run in ("ask-here", "ask-reused", "ask-older"):
            store.start_run(run, "ask")
        store.conn.execute("UPDATE runs SET process = 'x' || process WHERE id = 'ask-reused'")
        store.conn.execute("UPDATE runs SET pid = NULL, process = NULL WHERE id = 'ask-older'")
    finally:
        store.close()
    assert status_of(db)[0]["asking"] == [{"pid": os.getpid(), "run": "ask-here"}]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a process's state is read in /proc")
def test_an_ask_killed_but_not_yet_waited_for_is_not_said_to_be_asking(corpus, tmp_path):
    # A script that runs `streamrag ask` and kills it leaves a zombie until it waits for it:
    # its pid answers os.kill and /proc keeps its start time, and status said it asking.
    import signal
    import subprocess
    import sys

    from streamrag.store import process_stamp

    db = tmp_path / "a.db"
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stamp = process_stamp(child.pid)
        store = Store(db)
        try:
            store.start_run("ask-killed", "ask")
            store.conn.execute("UPDATE runs SET pid = ?, process = ? WHERE id = 'ask-killed'", (child.pid, stamp))
        finally:
            store.close()
        assert status_of(db)[0]["asking"] == [{"pid": child.pid, "run": "ask-killed"}]
        child.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 60
        while not Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z" \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        info, text = status_of(db)
        assert info["asking"] == [] and "asking now" not in text, text
    finally:
        child.kill()
        child.wait()


def test_where_writers_hold_no_lock_the_process_a_run_names_tells_if_it_was_killed(corpus, tmp_path, monkeypatch):
    # Without flock (Windows) a run row still "running" was said "running, or killed before it
    # finished", under way or killed long ago: its row names its process now.
    import subprocess
    import sys

    from streamrag import status

    monkeypatch.setattr(status, "writers_lock", lambda: False)
    db = tmp_path / "i.db"
    anyio.run(lambda: sync([corpus], make_settings(), db, root=corpus))
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()

    def killed(run: str, **row) -> bool | None:
        store = Store(db)
        try:
            store.start_run(run, "index")
            for column, value in row.items():
                store.conn.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (value, run))
        finally:
            store.close()
        return status_of(db)[0]["last_run"]["killed"]

    assert killed("r1") is False                               # this process: under way
    assert killed("r2", pid=ended.pid) is True                 # its process gone
    assert killed("r3", pid=None, process=None) is None        # an older streamrag's: not told
    assert "running, or killed before it finished" in last_update_line(status_of(db)[1])



def test_without_proc_the_writer_lock_tells_a_run_whose_pid_another_process_took(tmp_path, monkeypatch):
    # Without /proc (macOS) a process's start cannot be read: a run killed with -9 whose pid was
    # given to another process was said under way for as long as that one lived. There the lock
    # decides: held by the run's pid, under way; by another process, killed; by none, not told
    # (a sync of the Python API holds none).
    import os
    import subprocess
    import sys

    from streamrag import store as store_module
    from streamrag.store import WriterLock

    monkeypatch.setattr(store_module, "_proc_stat", lambda pid: None)   # (no /proc/PID/stat)
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: (_ for _ in ()).throw(
        FileNotFoundError(f)) if f == "/proc/locks" else real_open(f, *a, **k))
    db = tmp_path / "i.db"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])   # (given the pid)

    def killed(run: str, pid: int) -> tuple[bool | None, str]:
        store = Store(db)
        try:
            store.start_run(run, "index")
            store.conn.execute("UPDATE runs SET pid = ? WHERE id = ?", (pid, run))
        finally:
            store.close()
        info, text = status_of(db)
        return info["last_run"]["killed"], last_update_line(text)

    try:
        said, line = killed("r1", other.pid)                      # no writer
        # (only a sync of the Python API can be under way holding no lock: said so)
        assert said is None and line.endswith(": running (a sync of the Python API: it holds no writer lock), "
                                              "or killed before it finished (a new run continues its work)"), line
        lock = WriterLock(db, "streamrag index .")
        lock.take()
        try:
            assert killed("r2", other.pid)[0] is True             # the lock is another process's
            assert killed("r3", os.getpid())[0] is False           # the run's process holds it
        finally:
            lock.release()
        assert killed("r4", os.getpid())[0] is None                # the Python API's: not said killed
    finally:
        other.kill()
        other.wait()


@pytest.mark.skipif(sys.platform != "linux", reason="Linux's struct flock")
def test_without_proc_a_run_killed_whose_pid_another_process_took_is_not_said_under_way(tmp_path, monkeypatch):
    # Its lock file still names it (kill -9 leaves the line): without /proc the lock was said held
    # while that pid was alive, so the run was said under way, the other process its writer. The
    # lock is asked of fcntl there (macOS: ``store._FLOCK_QUERY``; Linux's layout here): no lock.
    import subprocess

    from streamrag import store as store_module
    from streamrag.store import lock_path

    monkeypatch.setattr(store_module, "_proc_stat", lambda pid: None)   # (no /proc/PID/stat)
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: (_ for _ in ()).throw(
        FileNotFoundError(f)) if f == "/proc/locks" else real_open(f, *a, **k))
    monkeypatch.setattr(store_module, "_FLOCK_QUERY", LINUX_FLOCK)
    db = tmp_path / "i.db"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])   # (given the pid)
    try:
        store = Store(db)
        try:
            store.start_run("r1", "index")
            store.conn.execute("UPDATE runs SET pid = ? WHERE id = ?", (other.pid, "r1"))
        finally:
            store.close()
        lock_path(db).write_text(f"pid {other.pid}: streamrag index .\n")
        info, text = status_of(db)
        assert info["writer"] is None and info["last_run"]["killed"] is None, info["writer"]
        assert "(a sync of the Python API: it holds no writer lock), or killed before it finished" in \
            last_update_line(text)
    finally:
        other.kill()
        other.wait()


def _refused(request):
    import httpx

    raise httpx.ConnectError("connection refused", request=request)


def _indexed_then_changed(corpus, db, simulator):
    """``corpus`` indexed into ``db`` through ``simulator`` (calls not retried), then guild.txt
    edited and new.txt written: (db, the settings)."""
    settings = make_settings(simulator.base_url, llm={"max_retries": 0})
    anyio.run(lambda: sync([corpus], settings, db, root=corpus))
    (corpus / "guild.txt").write_text((corpus / "guild.txt").read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
    (corpus / "new.txt").write_text("Ysolde Parrin rowed across the harbor to meet Quillon Marbeck.\n" * 20)
    return db, settings


def test_an_update_that_failed_says_the_files_it_left_unindexed(corpus, tmp_path, simulator):
    # A sync given up as nothing answered recorded the two or three chunks whose calls it waited
    # for: `status --failures` said "2 in the last update" of an index holding none of the files.
    import httpx
    import pytest

    from streamrag.errors import LLMUnavailableError

    db, settings = _indexed_then_changed(corpus, tmp_path / "n.db", simulator)
    # ... and not a file that run could not use: its failure says it, and no run indexes it so.
    (corpus / "aaa_binary.txt").write_bytes(bytes(range(256)) * 8)
    with pytest.raises(LLMUnavailableError):
        anyio.run(lambda: sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(_refused)))
    info, text = status_of(db)
    assert info["last_run"]["status"] == "failed"
    # What it was for, the files new or changed since the published version; not the others.
    assert info["not_indexed_last_run"] == 2, info
    assert "not indexed    2 new or changed files: the last update failed and published nothing" in text, text
    # How to list them is said once, on the failures line: it was said on both lines.
    assert text.count("(list them with --failures)") == 1, text
    # Each file once: the binary file is a failure; the chunks the run waited for are of the files
    # not indexed, which count them (it said "3 in the last update" beside those 2 files).
    assert "failures       1 in the last update (list them with --failures)\n" in text, text
    assert info["failures_last_run"] == info["failures_total"] == 1, info
    info, text = status_of(db, failures=True)
    assert info["not_indexed_files"] == ["guild.txt", "new.txt"]
    assert "\n    guild.txt\n    new.txt\n    [extract] " in text, text   # (why, said with them)
    assert [f["stage"] for f in info["failures"]] == ["load"] and info["not_indexed_failures"], info

    anyio.run(lambda: sync([corpus], settings, db, root=corpus))
    info, text = status_of(db, failures=True)
    assert info["not_indexed_last_run"] == 0 and info["not_indexed_files"] == [] and "not indexed    " not in text


def test_a_first_run_that_failed_says_no_failures_line_of_none(corpus, tmp_path):
    # Nothing answered the first run: its chunks count as the files it left unindexed, and
    # status said "failures       0 in the last update" above "last update ...: failed".
    import httpx
    import pytest

    from streamrag.errors import LLMUnavailableError

    db = tmp_path / "f.db"
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0})
    with pytest.raises(LLMUnavailableError):
        anyio.run(lambda: sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(_refused)))
    info, text = status_of(db)
    assert info["last_run"]["status"] == "failed" and info["failures_last_run"] == info["failures_total"] == 0
    assert info["not_indexed_last_run"] > 0 and "not indexed    " in text, text
    assert "failures       " not in text, text
    # With failures of earlier runs, the line says those alone.
    text = format_status({**info, "failures_total": 2}, db)
    assert "  failures       2 recorded over all runs, including any since indexed or removed" \
        in text.splitlines(), text


def test_a_failed_update_counts_a_chunk_of_an_unchanged_file_as_a_failure(corpus, tmp_path, simulator):
    # Another extraction model extracts every chunk again. A failed chunk of a file unchanged on
    # disk is a failure of the update (the file stays indexed as it was), not one of the files it
    # left unindexed: status said "failures 0" and listed it under the one file edited.
    import httpx
    import pytest

    from streamrag.errors import LLMUnavailableError

    db = tmp_path / "m.db"
    anyio.run(lambda: sync([corpus], make_settings(simulator.base_url, llm={"max_retries": 0}), db, root=corpus))
    (corpus / "guild.txt").write_text((corpus / "guild.txt").read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
    settings = make_settings(simulator.base_url, llm={"max_retries": 0, "extraction_model": "gpt-4o"})
    with pytest.raises(LLMUnavailableError):
        anyio.run(lambda: sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(_refused)))
    info, text = status_of(db, failures=True)
    assert info["not_indexed_files"] == ["guild.txt"], info
    assert all(f["message"].startswith("guild.txt ") for f in info["not_indexed_failures"]), info
    assert info["failures"] and all(f["stage"] == "extract" and not f["message"].startswith("guild.txt ")
                                    for f in info["failures"]), info
    assert info["failures_last_run"] == len(info["failures"]) == info["failures_total"], info


def test_an_update_interrupted_says_the_files_it_left_unindexed(corpus, tmp_path, simulator):
    # A run stopped by a signal as its calls waited (Ctrl-C, SIGTERM, a daemon's second signal)
    # published nothing either, but recorded no files: `status` said "interrupted" and not which
    # files the next update has to index.
    import httpx

    db, settings = _indexed_then_changed(corpus, tmp_path / "i.db", simulator)

    async def interrupted() -> None:
        asked = anyio.Event()

        async def hangs(request):
            asked.set()
            await anyio.sleep_forever()

        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(hangs)))
            with anyio.fail_after(30):
                await asked.wait()
            tg.cancel_scope.cancel()   # as a signal stops it

    anyio.run(interrupted)
    info, text = status_of(db, failures=True)
    assert info["last_run"]["status"] == "interrupted", info["last_run"]
    assert info["not_indexed_last_run"] == 2 and info["not_indexed_files"] == ["guild.txt", "new.txt"], info
    assert "not indexed    2 new or changed files: the last update was interrupted and published nothing" in text, text

    anyio.run(lambda: sync([corpus], settings, db, root=corpus))
    assert status_of(db)[0]["not_indexed_last_run"] == 0


def test_a_run_whose_stats_are_unreadable_leaves_the_failures_counted_not_status_failing(tmp_path):
    # A run row whose stats are not JSON (not as written) made `status` fail with "malformed
    # JSON" while counting failures: json_extract ran on it though json_valid said no.
    store = Store(tmp_path / "s.db")
    try:
        store.conn.execute("INSERT INTO runs(id, command, started_at, status, stats) VALUES "
                           "('r1', 'watch', 1, 'failed', '{not json')")
        store.conn.execute("INSERT INTO runs(id, command, started_at, status, stats) VALUES "
                           "('r2', 'watch', 2, 'failed', '{\"not_indexed\": 1, \"not_indexed_chunks\": [\"c2\"]}')")
        for run, item in (("r1", "c1"), ("r2", "c2"), ("r2", "c3")):
            store.conn.execute("INSERT INTO failures(run_id, stage, item, message, created_at) VALUES "
                               "(?, 'extract', ?, 'refused', 0)", (run, item))
        store.conn.commit()
        info = gather_status(store)
    finally:
        store.close()
    # c2 is a chunk of a file r2 left unindexed: counted as the file, not as a failure
    assert info["failures_total"] == 2, info["failures_total"]


def test_an_endpoint_noted_answering_is_the_same_with_or_without_a_trailing_slash(tmp_path):
    # `llm.api_base = ".../v1/"` after runs through ".../v1" is the endpoint that answered them:
    # watch's outage line said it never answered and to fix llm.api_base.
    from streamrag.index_rows import answered_at, note_answered

    store = Store(tmp_path / "i.db")
    try:
        note_answered(store, "http://127.0.0.1:8000/v1", 1000.0)
        assert answered_at(store, "http://127.0.0.1:8000/v1/") == 1000.0
        assert answered_at(store, "http://127.0.0.1:8000/v1") == 1000.0
        assert answered_at(store, "http://127.0.0.1:8001/v1") is None
    finally:
        store.close()


def test_an_endpoint_noted_with_its_password_by_older_code_is_the_same_one(tmp_path):
    # Older code noted "http://me:PASSWORD@host/v1"; the endpoint now compared without it did not
    # match, and a watch said the endpoint, stopped since, had never answered: "fix llm.api_base".
    import json

    from streamrag.index_rows import answered_at, note_answered

    base = "http://me:sk-LEAKCHECK-1234567890abcdef@127.0.0.1:8000/v1"
    store = Store(tmp_path / "i.db")
    try:
        store.set_meta("endpoint_answered", json.dumps({"api_base": base, "at": 1000.0}))
        assert answered_at(store, base) == 1000.0 and answered_at(store, base + "/") == 1000.0
        assert answered_at(store, "http://127.0.0.1:8000/v1") is None   # (the user is kept, as now)
        assert answered_at(store, base.replace("8000", "8001")) is None
        note_answered(store, base, 2000.0)   # the next note replaces it, without the password
        assert "LEAKCHECK" not in store.get_meta("endpoint_answered") and answered_at(store, base) == 2000.0
    finally:
        store.close()


def test_a_failures_times_count_the_extractions_ahead_of_its_update_only(tmp_path):
    # A chunk the extraction ahead of a sync failed, and the sync again, was said `times: 1`: the
    # update's runs were its syncs only. Those ahead of the update before it, or of the next, are
    # no tries of this one.
    from streamrag.index_rows import run_failures

    store = Store(tmp_path / "t.db")
    runs = [("e0", "watch:extract", None), ("s0", "watch", None),   # the update before
            ("e1", "watch:extract", None), ("s1", "watch", None),   # this one: its first sync,
            ("e2", "watch:extract", None), ("s2", "watch", "s1"),   # ... and a retry, an edit ahead of it
            ("e3", "watch:extract", None)]                          # the next update's
    for at, (run, command, update) in enumerate(runs, start=1):
        store.start_run(run, command, update)
        store.conn.execute("UPDATE runs SET started_at = ? WHERE id = ?", (1000.0 + at, run))
        store.record_failure(run, "extract", "chk-1", "a.txt (chunk 1, chk-1): refused")
    store.record_failure("s2", "extract", "chk-2", "b.txt (chunk 1, chk-2): refused")   # failed once
    (two, one) = run_failures(store, 50, "s2")
    store.close()
    assert (one["item"], one["times"]) == ("chk-1", 4), one   # e1, s1, e2, s2
    assert (two["item"], two["times"]) == ("chk-2", 1), two


def test_a_listed_failure_is_one_row_its_run_message_and_time_together(tmp_path):
    # Two max() in one query (the newest time, the newest id to order by) left SQLite free to
    # take the run and message from another row than the time: an item recorded again after the
    # clock was set back was listed with one run's message and another's time.
    from streamrag.index_rows import run_failures

    store = Store(tmp_path / "t.db")
    store.start_run("s1", "watch")
    store.start_run("s2", "watch", "s1")
    for run, message, at in (("s1", "first", 2000.0), ("s2", "again", 1500.0)):   # (set back)
        store.conn.execute("INSERT INTO failures(run_id, stage, item, message, created_at) "
                           "VALUES (?, 'extract', 'chk-1', ?, ?)", (run, message, at))
    (listed,) = run_failures(store, 50, "s2", "s1")
    store.close()
    assert (listed["run_id"], listed["message"], listed["created_at"]) == ("s2", "again", 1500.0), listed
    assert listed["times"] == 2


def test_a_carried_failure_is_the_item_s_last_row_recorded_as_the_listed_one_is(tmp_path):
    # A run that published nothing carries what its update's run before it left missing. It
    # took the row of the newest time where run_failures takes the newest id: an item the run
    # before recorded again after the clock was set back was carried with its earlier message.
    from streamrag.index_rows import carry_failures

    store = Store(tmp_path / "t.db")
    store.start_run("s1", "watch")
    store.start_run("s2", "watch", "s1")
    store.conn.execute("UPDATE runs SET started_at = 1000.0 + (id = 's2')")
    for message, at in (("first", 2000.0), ("again", 1500.0)):   # (set back)
        store.conn.execute("INSERT INTO failures(run_id, stage, item, message, created_at) "
                           "VALUES ('s1', 'report', 'com-1', ?, ?)", (message, at))
    carry_failures(store, "s2", "s1")
    carried = store.conn.execute("SELECT stage, item, message, created_at FROM failures WHERE run_id = 's2'").fetchall()
    store.close()
    assert carried == [("report", "com-1", "again", 1500.0)], carried


def _killed(db: Path, run: str) -> tuple[int, str | None]:
    """Run ``run``'s row as a process killed with -9 leaves it: of a process that is gone (a row
    of this process is of a run under way, the Python API's, which holds no lock). Returns the
    ``(pid, process)`` it named, to give back."""
    import subprocess
    import sys

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    store = Store(db)
    try:
        (named,) = store.conn.execute("SELECT pid, process FROM runs WHERE id = ?", (run,)).fetchall()
        store.conn.execute("UPDATE runs SET pid = ?, process = NULL WHERE id = ?", (ended.pid, run))
        store.conn.commit()
    finally:
        store.close()
    return named


def _revived(db: Path, run: str, named: tuple[int, str | None]) -> None:
    """Run ``run``'s row naming its process again (``_killed``'s)."""
    execute_on(db, "UPDATE runs SET pid = ?, process = ? WHERE id = ?", (*named, run))


def _runs_of_an_outage(db: Path, runs: list[tuple[str, str, str | None, str]], failed: dict[str, list[str]],
                       stats: dict[str, str] = {}, *, after: int = 0) -> None:
    """Rows as a daemon leaves them: ``runs`` ``(id, command, update_of, status)`` started in
    that order (a "running" one left open), after ``after`` runs made so, each with the chunks
    ``failed`` names refused."""
    store = Store(db)
    try:
        for at, (run, command, update, status) in enumerate(runs, start=after + 1):
            store.start_run(run, command, update)
            store.conn.execute("UPDATE runs SET started_at = ? WHERE id = ?", (1000.0 + at, run))
            for item in failed.get(run, []):
                store.record_failure(run, "extract", item, f"{item[4]}.txt (chunk 1, {item}): nothing answers")
            if status != "running":
                store.finish_run(run, status, stats.get(run))
    finally:
        store.close()


def test_a_retry_sync_under_way_says_what_its_update_is_missing(tmp_path):
    # During an outage, `status` said the retry sync under way was the last update: its failures
    # were those it had met again so far, "failures 0 in the last update ... running", then 1,
    # though the update was missing 2 throughout (the sync records them as it retries them).
    from streamrag.store import one_writer

    db = tmp_path / "w.db"
    _runs_of_an_outage(db, [("s1", "watch", None, "ok"), ("s2", "watch", "s1", "ok"), ("s3", "watch", "s1", "running")],
                       {"s1": ["chk-a", "chk-b"], "s2": ["chk-a", "chk-b"], "s3": ["chk-b"]})
    with one_writer(db, "streamrag watch /x"):
        info, text = status_of(db, failures=True)
        assert info["failures_last_run"] == 2 and info["last_run"]["id"] == "s3", info
        assert sorted(f["item"] for f in info["failures"]) == ["chk-a", "chk-b"], info["failures"]
        assert {f["item"]: f["times"] for f in info["failures"]} == {"chk-a": 2, "chk-b": 3}
        assert "failures       2 so far in this update" in text, text
        assert last_update_line(text).endswith("watch s3: running (2 items failed)"), text
    # Killed with -9 mid-retry: the update is still missing both, for the next start.
    named = _killed(db, "s3")
    info, text = status_of(db)
    assert info["failures_last_run"] == 2 and info["last_run"]["killed"] is True, info
    _revived(db, "s3", named)
    # The retry got chk-a: published, it is no longer missing (its row closed after), and so
    # once the retry has ended.
    store = Store(db)
    store.set_meta("published_at", "1003.5")
    store.close()
    for end in ("running", "ok"):
        if end == "ok":
            store = Store(db)
            store.finish_run("s3", "ok")
            store.close()
        with one_writer(db, "streamrag watch /x"):
            info, text = status_of(db, failures=True)
        assert info["failures_last_run"] == 1 and [f["item"] for f in info["failures"]] == ["chk-b"], info
        assert last_update_line(text).endswith(f"watch s3: {end}, but 1 item failed (left out of this version)"
                                               if end == "ok" else "watch s3: running (1 item failed)"), text
    # A fresh `index` under way begins an update of its own: what it met so far.
    _runs_of_an_outage(db, [("i1", "index", None, "running")], {"i1": ["chk-c"]}, after=3)
    with one_writer(db, "streamrag index /x"):
        info, text = status_of(db, failures=True)
    assert info["failures_last_run"] == 1 and [f["item"] for f in info["failures"]] == ["chk-c"], info


def test_an_update_under_way_says_its_failures_so_far_beside_a_total_that_leaves_its_chunks_out(tmp_path):
    # All runs' count leaves out a run under way's failed chunks the index lacks (its end
    # decides), its own count has them: "2 in the last update (1 recorded over all runs)".
    from streamrag.store import one_writer

    db = tmp_path / "u.db"
    _runs_of_an_outage(db, [("i1", "index", None, "ok"), ("i2", "index", None, "running")],
                       {"i1": ["chk-x"], "i2": ["chk-a", "chk-b"]})
    with one_writer(db, "streamrag index /x"):
        info, text = status_of(db)
    assert (info["failures_last_run"], info["failures_total"], info["failures_under_way"]) == (2, 1, True), info
    (line,) = [line for line in text.splitlines() if line.startswith("  failures ")]
    assert line == ("  failures       2 so far in this update (1 recorded over all runs, including any since "
                    "indexed or removed, not counting its chunks until it ends; list this update's with "
                    "--failures)"), text
    # Killed before it ended: the last update's, whose chunks the total does not count.
    _killed(db, "i2")
    info, text = status_of(db)
    assert info["last_run"]["killed"] is True and info["failures_under_way"] is True, info
    assert "  failures       2 in the last update (1 recorded over all runs, including any since indexed or " \
           "removed, not counting its chunks: it did not end; list the last update's with --failures)" in text, text
    # Ended: the total counts them, and the line is as before.
    store = Store(db)
    store.finish_run("i2", "ok")
    store.close()
    info, text = status_of(db)
    assert (info["failures_last_run"], info["failures_total"], info["failures_under_way"]) == (2, 3, False), info
    assert ("  failures       2 in the last update (3 recorded over all runs, including any since indexed or removed; "
            "list the last update's with --failures)") in text, text


def test_a_retry_sync_under_way_after_one_that_failed_says_the_files_left_unindexed(tmp_path):
    # A sync given up in an outage published nothing: "not indexed 2 new or changed files",
    # "failures 0". While its retry ran, the not indexed line was gone and the chunk it had met
    # again so far was said a failure: "failures 1 ... running (1 item failed)".
    import json

    from streamrag.store import one_writer

    db = tmp_path / "w.db"
    said = json.dumps({"not_indexed": 2, "not_indexed_files": ["a.txt", "b.txt"], "not_indexed_chunks": ["chk-a"]})
    _runs_of_an_outage(db, [("s1", "watch", None, "failed"), ("s2", "watch", "s1", "running")],
                       {"s1": ["chk-a"], "s2": ["chk-b"]}, {"s1": said})
    with one_writer(db, "streamrag watch /x"):
        info, text = status_of(db, failures=True)
    assert (info["failures_last_run"], info["not_indexed_last_run"]) == (0, 2), info
    assert info["failures"] == [] and info["not_indexed_files"] == ["a.txt", "b.txt"], info
    assert "not indexed    2 new or changed files" in text and last_update_line(text).endswith(": running"), text


def test_an_ask_of_an_empty_index_under_a_retry_sync_names_the_last_failure_of_its_update(tmp_path):
    # An index whose first update indexed no file (every chunk refused), a retry sync under way
    # that has met none of them again: `ask` said "last: )", the sync's own failures being none.
    from streamrag.errors import IndexMissingError
    from streamrag.query import check_not_empty

    db = tmp_path / "w.db"
    _runs_of_an_outage(db, [("s1", "watch", None, "ok"), ("s2", "watch", "s1", "running")],
                       {"s1": ["chk-a", "chk-b"]})
    store = Store(db)
    store.set_meta("version", "1")
    store.set_meta("published_at", "1001.5")   # (s1's publish; s2 began at 1002)
    try:
        with pytest.raises(IndexMissingError) as e:
            check_not_empty(store, db, ["*.txt"])
    finally:
        store.close()
    assert "last: [extract] b.txt (chunk 1, chk-b): nothing answers)" in str(e.value), e.value


def test_an_index_of_no_community_says_none_without_levels():
    # An index of an empty folder said "communities    0 by level -" (a reviewer's finding).
    lines = format_status(_info("ok", 0, 0), Path("i.db")).splitlines()
    assert "  communities    0" in lines, lines
    info = {**_info("ok", 0, 0), "communities": 3, "communities_by_level": {0: 2, 1: 1}}
    assert "  communities    3 by level 0: 2, 1: 1" in format_status(info, Path("i.db")).splitlines()


def _calls_of_every_kind(store: Store) -> list[dict]:
    """``llm_calls`` rows of every kind, in two stages and two models: paid, cached, failed,
    unusable (asked again, and not), cancelled, and the waiters of a shared stop (cached, failed);
    the rows, in order."""
    kinds = [(0, 0, None), (1, 0, None), (0, 0, "HTTP 500"), (0, 0, "unusable answer: cut off"),
             (0, 1, "cancelled after 1 try"), (1, 0, "unusable answer: shared stop"), (0, 0, None)]
    rows = []
    for stage, model in (("extract", "m1"), ("report", "m1"), ("report", "m2")):
        for cached, cancelled, error in kinds:
            n = len(rows)
            # (the extraction's calls are of one request: its unusable answer is asked again, answered
            # by the last row; a report's unusable answer is not)
            key = f"{stage}-{model}" + ("" if stage == "extract" or error == "unusable answer: cut off" else f"-{n}")
            rows.append({"run_id": "r1", "stage": stage, "model": model, "prompt": stage, "prompt_version": "v",
                         "cache_key": key, "prompt_tokens": 10 * n, "completion_tokens": n,
                         "latency_ms": 1.0, "cached": cached, "error": error, "cancelled": cancelled})
            store.record_call(rows[-1])
    return rows


def test_status_reads_the_calls_usage_from_indexes_not_every_call(tmp_path):
    # `status` summed the calls by stage and model from every row of llm_calls, sorted, and
    # looked at every row again for its unusable answers: 0.34 s (some 0.8 on a busy machine)
    # of an index of 300,000 calls. Now each read of llm_calls is a search or a covering index's.
    db = tmp_path / "i.db"
    store = Store(db)
    with store.transaction():
        rows = _calls_of_every_kind(store)
    store.close()
    store = Store(db, readonly=True)
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    try:
        info = gather_status(store, failures=True)
        store.conn.set_trace_callback(None)
        plans = {sql: [row[3] for row in store.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
                 for sql in statements if "llm_calls" in sql and not sql.startswith("PRAGMA")}
    finally:
        store.close()
    assert len(plans) == 4, plans   # the usage, the unusable answers, those asked again, the checks apart
    scans = [step for plan in plans.values() for step in plan if step.startswith("SCAN")
             and ("llm_calls" in step or step.startswith("SCAN u")) and "COVERING INDEX" not in step]
    assert not scans, plans
    # The counts are those of each row as the client counts its call (``CallLog.record``): a
    # waiter's row (cached, failed) is no call; cached, the calls the cache answered; the tokens
    # paid for; errors, the calls that failed but those cancelled.
    by_row = []
    for stage, model in sorted({(r["stage"], r["model"]) for r in rows}):
        of = [r for r in rows if (r["stage"], r["model"]) == (stage, model)]
        by_row.append((stage, model, sum(not (r["cached"] and r["error"]) for r in of),
                       sum(bool(r["cached"] and not r["error"]) for r in of),
                       sum(r["prompt_tokens"] for r in of if not r["cached"]),
                       sum(r["completion_tokens"] for r in of if not r["cached"]),
                       sum(bool(r["error"] and not r["cancelled"] and not r["cached"]) for r in of),
                       sum(r["cancelled"] for r in of)))
    assert [tuple(r.values()) for r in info["llm_by_model"]] == by_row, info
    # ... and so they stay once the calls are folded into the archive (``prune``)
    assert pruned(db, "llm_calls") == 0
    assert status_of(db)[0]["llm_by_model"] == info["llm_by_model"]
    # ... as the client counts them (``CallLog.record``: a waiter's row is cached and failed, no call)
    waiters = [r for r in rows if r["cached"] and r["error"]]
    assert (info["llm"]["calls"], info["llm"]["cached"], info["llm"]["cancelled"]) \
        == (len(rows) - len(waiters), sum(r["cached"] for r in rows) - len(waiters),
            sum(r["cancelled"] for r in rows)), info["llm"]
    unusable = [i for i, r in enumerate(rows) if not r["cached"] and (r["error"] or "").startswith("unusable")]
    again = [i for i in unusable if any(r["error"] is None and r["cache_key"] == rows[i]["cache_key"]
                                        for r in rows[i + 1:])]
    assert (info["unusable"], info["asked_again"]) == (len(unusable), len(again)) and 0 < len(again) < len(unusable)


def test_an_index_from_before_the_usage_indexes_gets_them_when_status_reads_it(tmp_path):
    # An older index read by `status` is upgraded with them (once), its counts the same.
    import sqlite3

    from streamrag.store import MIGRATIONS, SCHEMA_VERSION

    db = tmp_path / "i.db"
    store = Store(db)
    with store.transaction():
        _calls_of_every_kind(store)
    store.close()
    want = status_of(db)[0]
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DROP INDEX llm_calls_usage")
        conn.execute("DROP INDEX llm_calls_failed")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     (str([name for name, _ in MIGRATIONS].index("llm_calls_usage")),))
    conn.close()
    info = status_of(db)[0]
    assert (info["version"], info["llm_by_model"], info["unusable"]) == (want["version"], want["llm_by_model"], 3)
    conn = sqlite3.connect(db)
    indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"llm_calls_usage", "llm_calls_failed"} <= indexes
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    conn.close()


def test_failures_are_told_apart_by_their_run_stage_and_item_not_by_a_string_of_them(tmp_path):
    # The failures of the chunks of files a run left unindexed (counted as those files) were
    # found by "run item" strings, and an update's failures counted by "stage item" ones: run
    # "r 1"'s failure of chunk "c" was taken for run "r"'s of chunk "1 c" (a run's id holds no
    # space today, an item may), and "extract a" of "b" for "extract" of "a b".
    import json

    store = Store(tmp_path / "s.db")
    try:
        store.conn.execute("INSERT INTO runs(id, command, started_at, status, stats) VALUES "
                           "('r', 'watch', 1, 'failed', ?)",
                           (json.dumps({"not_indexed": 1, "not_indexed_chunks": ["1 c"]}),))
        store.conn.execute("INSERT INTO runs(id, command, started_at, finished_at, status) VALUES "
                           "('r 1', 'watch', 2, 3, 'ok')")
        for run, stage, item in (("r", "extract", "1 c"), ("r 1", "extract", "c"),
                                 ("r 1", "extract", "a b"), ("r 1", "extract a", "b")):
            store.conn.execute("INSERT INTO failures(run_id, stage, item, message, created_at) VALUES "
                               "(?, ?, ?, 'refused', 0)", (run, stage, item))
        store.conn.commit()
        info = gather_status(store, failures=True)
    finally:
        store.close()
    # r's chunk "1 c" counts as its file; r 1's three failures are three, each once
    assert (info["failures_total"], info["failures_last_run"]) == (3, 3), info
    assert sorted((f["stage"], f["item"]) for f in info["failures"]) == [("extract", "a b"), ("extract", "c"),
                                                                         ("extract a", "b")], info["failures"]


def test_the_usage_table_keeps_its_columns_in_line_at_any_count():
    # The calls column was 5 wide: a stage of 100,000 calls or more pushed the rest of its row
    # one place right of the others' and of the heading.
    rows = [{"stage": stage, "model": "m", "calls": calls, "cached": calls // 3, "prompt_tokens": 40 * calls,
             "completion_tokens": 9 * calls, "errors": calls // 50, "cancelled": calls // 70}
            for stage, calls in (("extract", 7), ("summarize", 123_456), ("report", 2_345_678))]
    info = {**_info("ok", 0, 0), "llm_by_model": rows,
            "llm": llm_summary({r["stage"]: r for r in rows}), "cache_hit_rate": 0.3}
    lines = format_status(info, Path("i.db")).splitlines()
    at = lines.index(next(line for line in lines if line.strip().startswith("stage")))
    table = lines[at:at + 4]
    # every count's right edge where its heading's is (cancelled: some are)
    edges = [table[0].index(h) + len(h) for h in ("calls", "cached", "prompt tok", "completion tok", "errors",
                                                  "cancelled")]
    for row in table[1:]:
        assert len(row) == len(table[0]), table
        assert all(row[e - 1].isdigit() and (e == len(row) or row[e] == " ") for e in edges), table


def test_the_calls_line_groups_its_counts_by_thousands_as_the_table_does():
    # The table below it grouped its counts by thousands (97a6aaa); the line above said
    # "LLM calls      2469141" and "12345 answers unusable".
    rows = [{"stage": "report", "model": "m", "calls": 2_469_141, "cached": 0, "prompt_tokens": 1,
             "completion_tokens": 1, "errors": 12_345, "cancelled": 0}]
    info = {**_info("ok", 0, 0), "llm_by_model": rows, "llm": llm_summary({"report": rows[0]}),
            "cache_hit_rate": 0.0, "unusable": 12_345, "asked_again": 1_234}
    line = next(x for x in format_status(info, Path("i.db")).splitlines() if x.strip().startswith("LLM calls"))
    assert line.startswith("  LLM calls      2,469,141 (cache hit rate 0%); 12,345 answers unusable"), line
    assert "1,234 of them asked again" in line, line


def test_failures_recorded_counts_each_item_once_per_update_as_its_definition_says(tmp_path):
    # The count of "recorded over all runs" looks up the pairs of a run that left files
    # unindexed for that run's failures alone (it made the pair of every failure): the same count
    # as each failure read by its definition, over failures of every kind of run. A chunk's
    # failure of no run (run_id NULL) was not counted at all: NULL IN (...) made it unknown.
    import json

    from streamrag import index_rows

    runs = [("i1", "index", "ok", None, None), ("w1", "watch", "failed", "w1", None),
            ("w2", "watch", "ok", None, "w1"), ("w3", "watch", "ok", None, "w1"), ("x1", "watch:extract", "ok", None, None),
            ("u1", "index", "failed", json.dumps({"not_indexed": 2, "not_indexed_chunks": ["c1", "c2"]}), None),
            ("u2", "index", "interrupted", json.dumps({"not_indexed": 1}), None),
            ("u3", "index", "failed", "not json", None)]
    failures = [(run, stage, item, stamp) for run in ("i1", "w1", "w2", "w3", "x1", "u1", "u2", "u3", None, "gone")
                for stage, item, stamp in (("extract", "c1", None), ("extract", "c3", None), ("glean", "c2", None),
                                           ("summarize", "e1", None), ("load", "a.bin", "4 1"),
                                           ("load", "a.bin", "8 2" if run in ("w3", "x1") else "4 1"),
                                           ("load", "x.bin", "1 1" if run == "x1" else None))]
    store = Store(tmp_path / "s.db")
    try:
        store.conn.executemany("INSERT INTO runs(id, command, started_at, status, stats, update_of) "
                               "VALUES (?, ?, 1, ?, ?, ?)", [(i, c, s, st, u) for i, c, s, st, u in runs])
        store.conn.executemany("INSERT INTO failures(run_id, stage, item, message, created_at, stamp) "
                               "VALUES (?, ?, ?, 'no', 0, ?)", failures)
        store.conn.commit()
        counted = index_rows.failures_recorded(store)
    finally:
        store.close()
    by_id = {r[0]: r for r in runs}
    keys = set()
    for run, stage, item, stamp in failures:
        _, command, status, stats, update = by_id.get(run, (run, None, None, None, None))
        if command == "watch:extract":
            continue   # met again by the sync after it
        try:
            said = json.loads(stats or "null") if status != "ok" else None
        except ValueError:
            said = None
        if stage in ("extract", "glean") and isinstance(said, dict) and said.get("not_indexed", 0) > 0 \
                and ("not_indexed_chunks" not in said or item in said["not_indexed_chunks"]):
            continue   # a chunk of a file the run left unindexed: counted as that file
        keys.add((None if stamp else update or run, stage, item, stamp))
    assert counted == len(keys), (counted, sorted(keys, key=str))


def test_a_failed_update_says_the_files_it_skipped_apart_from_why_it_failed():
    # "last update ... failed (1 file is not text)" read as though the binary file had made it
    # fail; an update skips such a file and goes on, and failed for another reason.
    def line(status: str, failed: int, not_text: int) -> str:
        info = {**_info(status, failed + not_text, not_text), "unreadable_by_kind": {"not_text": not_text}}
        return last_update_line(format_status(info, Path("i.db")))

    assert line("failed", 0, 1).endswith("watch r1: failed; besides, 1 file is not text (skipped, not why it failed)")
    assert line("failed", 2, 3).endswith("watch r1: failed (2 items failed); besides, 3 files are not text "
                                          "(skipped, not why it failed)")
    assert line("interrupted", 0, 1).endswith("interrupted; besides, 1 file is not text (skipped, not why it was "
                                              "interrupted)")
    assert line("ok", 0, 1).endswith("watch r1: ok, but 1 file is not text")   # (ok: nothing failed)


def test_a_run_under_way_says_the_files_it_skipped_without_saying_it_failed():
    # A run still going (its process alive, the lock held) that had met a binary file said
    # "running; besides, 1 file is not text (skipped, not why it failed)": it has not failed.
    def line(failed: int, not_text: int) -> str:
        info = {**_info("running", failed + not_text, not_text), "unreadable_by_kind": {"not_text": not_text},
                "writer": {"command": "index", "pid": 1}}
        info["last_run"] = {**info["last_run"], "killed": False}
        return last_update_line(format_status(info, Path("i.db")))

    assert line(0, 1).endswith("watch r1: running; 1 file is not text (skipped)"), line(0, 1)
    assert line(2, 3).endswith("watch r1: running (2 items failed); 3 files are not text (skipped)"), line(2, 3)


def test_every_count_of_status_and_the_watch_lines_is_grouped_by_thousands():
    # The LLM calls and the usage table were grouped ("2,469,141"); the counts beside them were
    # not: "failures 12345 in the last update", "1234 files are not text", "(1234 from cache)".
    from streamrag.status import unusable_said
    from streamrag.words import counted, number
    from streamrag.watch_lines import calls_said

    assert (number(1234567), counted(12_345, "chunk"), counted(1_000, "entity")) == \
        ("1,234,567", "12,345 chunks", "1,000 entities")
    assert unusable_said({"unreadable": 1_234, "not_text": 5_678}) == "1,234 files could not be read, 5,678 are not text"
    info = {**_info("ok", 23_456, 1_234), "documents": 12_345, "chunks": 123_456, "entities": 45_678,
            "relationships": 98_765, "claims": 4_321, "communities": 2_345, "communities_by_level": {"0": 2_000, "1": 345},
            "reports": 2_345, "extractive_reports": 1_001, "failures_total": 34_567, "queries": 1_500}
    text = format_status(info, Path("i.db"))
    for said in ("documents      12,345", "chunks         123,456", "entities       45,678", "relationships  98,765",
                 "claims         4,321", "communities    2,345 by level 0: 2,000, 1: 345",
                 "reports        2,345 (1,001 extractive)", "failures       23,456 in the last update (34,567 recorded",
                 "22,222 items failed", "1,234 files could not be read", "queries        1,500 asked"):
        assert said in text, (said, text)
    stats = {"extract": {"calls": 5_000, "cached": 1_500, "errors": 2_000, "cancelled": 1_200}}
    assert calls_said(3_500, 1_500, stats) == "5,000 LLM calls (1,500 from cache), 2,000 failed, 1,200 cancelled"


def test_a_count_says_its_nouns_plural_by_its_ending_and_a_report_keeps_its_counts_ungrouped():
    # Each module had its own "1 entity / 2 entities" (word[:-1] + "ies" for any "y", "s" for the
    # rest): "2 daies", "3 matchs"; now one helper, words.plural, for every line.
    from streamrag.words import counted, plural

    assert [counted(n, w) for n, w in ((1, "try"), (2, "try"), (2, "day"), (3, "match"), (2, "process"),
                                      (2, "failed item"), (0, "community"), (2, "person"))] == \
        ["1 try", "2 tries", "2 days", "3 matches", "2 processes", "2 failed items", "0 communities", "2 people"]
    assert (plural(1, "entity"), counted(1_234, "entity", grouped=False)) == ("entity", "1234 entities")


def test_a_killed_update_is_said_to_leave_files_unindexed_only_if_it_published_nothing(tmp_path):
    # Killed after it published (before its row was closed): what it was taking is in the index.
    store = Store(tmp_path / "k.db")
    try:
        store.start_run("r-killed", "index")
        store.conn.commit()
    finally:
        store.close()
    _killed(tmp_path / "k.db", "r-killed")   # (and no process holds the lock)
    store = Store(tmp_path / "k.db")
    try:
        info = gather_status(store)
        assert info["last_run"]["killed"] is True and info["killed_before_publishing"] is True, info
        started = info["last_run"]["started_at"]
        store.set_meta("published_at", str(started + 1))
        store.conn.commit()
        info = gather_status(store)
        assert info["last_run"]["killed"] is True and info["killed_before_publishing"] is False, info
        assert "not indexed" not in format_status(info, tmp_path / "k.db")
    finally:
        store.close()


def _recounted(store: Store) -> int:
    """``failures_recorded`` as every failure's row says it (the kept keys set aside); a table
    marked stale is left so (the mark was taken off, and the steps after a deletion read kept
    keys that were wrong as though they were right)."""
    from streamrag import index_rows

    was = store.get_meta("failure_keys_stale")
    store.set_meta("failure_keys_stale", "1")
    try:
        return index_rows.failures_recorded(store)
    finally:
        if was is None:
            store.conn.execute("DELETE FROM meta WHERE key = 'failure_keys_stale'")


def _one_failed_chunk(db: Path, run: str = "r1", status: str = "ok", stats: dict | None = None) -> Store:
    """A store at ``db`` (open: the caller closes it) whose run ``run`` failed chunk c1 and ended
    ``status``, with ``stats``."""
    import json

    store = Store(db)
    try:
        with store.transaction():
            store.start_run(run, "index")
            store.record_failure(run, "extract", "c1", "no")
            store.finish_run(run, status, json.dumps(stats) if stats else None)
    except BaseException:
        store.close()
        raise
    return store


def _kept_keys(store: Store) -> tuple[int, int]:
    """The count of the kept failure keys (``failure_keys_count``), and the keys counted."""
    return (store.scalar("SELECT n FROM failure_keys_count"), store.scalar("SELECT count(*) FROM failure_keys"))


def _failures_as_before(db: Path, step: str, *, under_way: bool) -> None:
    """An index at ``db`` whose run r1 failed c1 (extract) and C1 (report) and ended, and, if
    ``under_way``, whose run r2 failed e1 (summarize) and is under way; as the streamrag before
    migration ``step`` left it: no triggers keeping ``failure_keys``, no ``failure_keys_count``,
    before the step ``failure_keys`` no keys either, and the schema version that step's number."""
    from streamrag.store import _FAILURE_KEY_TRIGGERS, MIGRATIONS

    store = Store(db)
    try:
        with store.transaction():
            store.start_run("r1", "index")
            store.record_failure("r1", "extract", "c1", "no")
            store.record_failure("r1", "report", "C1", "no")
            store.finish_run("r1", "ok")
            if under_way:
                store.start_run("r2", "index")
                store.record_failure("r2", "summarize", "e1", "no")
        with store.transaction():
            for name, _ in _FAILURE_KEY_TRIGGERS:
                store.conn.execute(f"DROP TRIGGER {name}")
            store.conn.execute("DROP TABLE failure_keys_count")
            if step == "failure_keys":
                store.conn.execute("DROP TABLE failure_keys")
            number = [name for name, _ in MIGRATIONS].index(step)
            store.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(number),))
    finally:
        store.close()


def _assert_upgraded(store: Store, *, kept: int, recorded: int) -> None:
    """Asserts ``store`` is at this schema with its failure keys made and not marked stale:
    ``kept`` of them, and ``recorded`` failures counted, as every failure's row says."""
    from streamrag import index_rows
    from streamrag.store import SCHEMA_VERSION

    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert store.get_meta("failure_keys_stale") is None
    assert _kept_keys(store) == (kept, kept)
    assert index_rows.failures_recorded(store) == _recounted(store) == recorded


def test_the_failures_count_kept_as_they_are_written_is_the_count_of_every_failure(tmp_path):
    # The count of "recorded over all runs" read every failure's row (0.13 to 0.26 s at 200,000);
    # now the keys of the runs that ended are kept as they are written (``store.failure_keys``).
    # Through runs as the pipeline writes them (retries of an update, one that leaves files
    # unindexed, one killed, a daemon's extraction ahead, an unreadable file named again), rows
    # edited and deleted by hand, and a prune, it says what reading every row says.
    import json

    from streamrag import index_rows
    from streamrag.store import count_failure_keys

    store = Store(tmp_path / "k.db")
    counts: list[tuple[str, int, int]] = []

    def step(what: str, write) -> None:
        with store.transaction():
            write()
        counts.append((what, index_rows.failures_recorded(store), _recounted(store)))
        kept.append((what, *_kept_keys(store)))

    kept: list[tuple[str, int, int]] = []

    def run(run_id: str, failures: list[tuple], status: str | None = "ok", update_of: str | None = None,
            stats: dict | None = None, command: str = "watch") -> None:
        store.start_run(run_id, command, update_of)
        for stage, item, stamp in failures:
            store.record_failure(run_id, stage, item, "no", stamp)
        if update_of is not None and status not in ("ok", None):
            index_rows.carry_failures(store, run_id, update_of)
        if status is not None:
            store.finish_run(run_id, status, json.dumps(stats) if stats else None)

    try:
        step("first", lambda: run("r1", [("extract", "c1", None), ("summarize", "e1", None), ("load", "a.bin", "4 1")]))
        step("retry", lambda: run("r2", [("extract", "c1", None), ("report", "C1", None)], "failed", "r1"))
        step("again", lambda: run("r3", [("extract", "c1", None), ("load", "a.bin", "4 1")], "ok", "r1"))
        step("ahead", lambda: run("x1", [("extract", "c9", None)], command="watch:extract"))
        step("unindexed", lambda: run("u1", [("extract", "c2", None), ("extract", "c3", None), ("glean", "c4", None)],
                                      "failed", stats={"not_indexed": 1, "not_indexed_chunks": ["c2", "c4"]}))
        step("unnamed", lambda: run("u2", [("extract", "c5", None)], "interrupted", stats={"not_indexed": 2}))
        step("under way", lambda: run("w1", [("extract", "c6", None), ("summarize", "e1", None)], None, "r1"))
        store.conn.execute("INSERT INTO live_chunks(chunk_id, extractor) VALUES ('c6', 'k')")
        step("published", lambda: None)
        step("of no run", lambda: store.record_failure(None, "report", "C2", "no"))
        step("edited", lambda: store.conn.execute("UPDATE runs SET status = 'running' WHERE id = 'u2'"))
        step("ended", lambda: run("r4", [("load", "b.bin", "1 1")], "ok"))   # (made again, once)
        assert store.get_meta("failure_keys_stale") is None
        step("deleted", lambda: store.conn.execute("DELETE FROM failures WHERE run_id = 'r4'"))
        assert store.get_meta("failure_keys_stale") == "1"   # (made again by the next run's end, or a prune)
        step("run deleted", lambda: store.conn.execute("DELETE FROM runs WHERE id = 'r3'"))
        step("pruned", lambda: index_rows.prune(store, 1, time.time() + 3 * 86400))
        assert store.get_meta("failure_keys_stale") is None
        step("after", lambda: run("r5", [("extract", "c7", None)], "ok"))
        with store.transaction():
            count_failure_keys(store.conn)
        step("made again", lambda: None)
    finally:
        store.close()
    assert all(kept == every for _, kept, every in counts), counts
    assert [n for _, n, _ in counts][:3] == [3, 4, 4], counts   # (a retry counts an item once per update)
    assert all(n == keys for _, n, keys in kept), kept   # (the kept count of the keys, at every step)


def test_the_failures_count_reads_no_failure_of_a_run_that_ended(tmp_path):
    # What `status` reads for "recorded over all runs": a look at each failure's row made it
    # 0.13 to 0.26 s of a `status` at 200,000 failures. Now no statement it runs scans the failures.
    from streamrag import index_rows

    store = _one_failed_chunk(tmp_path / "s.db")
    try:
        statements: list[str] = []
        store.conn.set_trace_callback(statements.append)
        assert index_rows.failures_recorded(store) == 1
        store.conn.set_trace_callback(None)
        plans = [" ".join(row[3] for row in store.conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
                 for sql in statements if "failures" in sql]
    finally:
        store.close()
    assert plans and not any("SCAN f " in f"{plan} " or "SCAN failures " in f"{plan} " for plan in plans), plans
    # ... nor counts the kept keys (16 ms at 215,000): their count is kept with them
    assert not any("count(*) FROM failure_keys" in sql for sql in statements), statements


def test_a_sync_of_the_python_api_under_way_is_not_said_killed(corpus, tmp_path):
    # ``pipeline.sync`` called without ``store.one_writer`` holds no writer lock: its run under
    # way was said "killed before it finished: no streamrag is writing the index". Its row names
    # its process, alive: running.
    import json
    import threading

    import httpx

    from conftest import chat_answer
    from streamrag.simulator import ANSWERS, detect_task

    reached, release = threading.Event(), threading.Event()

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(404)
        reached.set()
        release.wait(60)
        messages = json.loads(request.content)["messages"]
        return chat_answer(ANSWERS[detect_task(messages)](messages))

    db = tmp_path / "api.db"
    done: list = []
    settings = make_settings("http://llm.test/v1")
    worker = threading.Thread(target=lambda: done.append(anyio.run(lambda: sync(
        [corpus], settings, db, root=corpus, transport=httpx.MockTransport(answer)))))
    worker.start()
    try:
        assert reached.wait(60)
        info, text = status_of(db)
    finally:
        release.set()
        worker.join(120)
    assert info["writer"] is None and info["last_run"]["status"] == "running", info
    assert info["last_run"]["killed"] is False and info["killed_before_publishing"] is False, info
    assert last_update_line(text).endswith(": running"), text
    assert done and status_of(db)[0]["last_run"]["status"] == "ok"


def test_a_killed_update_says_the_files_it_skipped(tmp_path, monkeypatch):
    # Killed after it met a binary file: "killed before it finished ... (a new run continues its
    # work)", the file it could not use never said (as a run that failed or is under way says it).
    from streamrag import status

    db = tmp_path / "k.db"
    store = Store(db)
    try:
        store.start_run("r-killed", "index")
        store.record_failure("r-killed", "load", "scan.bin", "scan.bin: binary file, not indexed", "4 1", "not_text")
        store.conn.commit()
    finally:
        store.close()
    _killed(db, "r-killed")
    info, text = status_of(db)
    assert info["last_run"]["killed"] is True, info
    assert last_update_line(text).endswith(": killed before it finished: no streamrag is writing the index (a new "
                                           "run continues its work); 1 file is not text (skipped)"), text
    # Where it cannot be told (no lock here, a row naming no process): both readings, and the file.
    execute_on(db, "UPDATE runs SET pid = NULL, process = NULL")
    monkeypatch.setattr(status, "writers_lock", lambda: False)
    info, text = status_of(db)
    assert info["last_run"]["killed"] is None, info
    assert last_update_line(text).endswith(": running, or killed before it finished (a new run continues its "
                                           "work); 1 file is not text (skipped)"), text


def test_a_watch_retry_sync_killed_before_it_published_names_the_files_it_left_unindexed(corpus, tmp_path):
    # A daemon's sync that goes on with an update (``runs.update_of``), killed with -9 as it was
    # about to publish: its update's run before it had ended "ok", so `status` had no files of it
    # to name, and said "the new or changed files the killed update was taking, if any". The sync
    # records those it takes as it starts on them (``runs.taking``): named, as a failed run's are.
    import signal
    import subprocess
    import sys

    from streamrag.pipeline import Indexer

    db = tmp_path / "w.db"
    first = Indexer(make_settings(), db, root=corpus, command="watch")
    anyio.run(first.run, [corpus])
    (corpus / "guild.txt").write_text((corpus / "guild.txt").read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
    (corpus / "new.txt").write_text("The lighthouse keeper, Ada Sorel, logged three ships.\n")
    (corpus / "scan.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")   # (taken, then skipped: said apart)
    script = (
        "import os, signal, sys, anyio\n"
        "from pathlib import Path\n"
        "from streamrag import index_rows\n"
        "from streamrag.config import load_settings\n"
        "from streamrag.pipeline import Indexer\n"
        "index_rows.publish = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        "settings = load_settings(None, env={}, overrides={'llm': {'api_base': ''}})\n"
        "corpus, db, update = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]\n"
        "anyio.run(Indexer(settings, db, root=corpus, command='watch', update_of=update).run, [corpus])\n")
    env = clean_env()
    killed = subprocess.run([sys.executable, "-c", script, str(corpus), str(db), first.run_id], env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    info, text = status_of(db, failures=True)
    assert info["last_run"]["command"] == "watch" and info["last_run"]["killed"] is True, info
    assert info["killed_before_publishing"] is True and info["not_indexed_last_run"] == 2, info
    assert info["not_indexed_files"] == ["guild.txt", "new.txt"], info
    lines = text.splitlines()
    assert "  not indexed    2 new or changed files: the last update was killed and published nothing; the next " \
           "that gets through indexes them" in lines, text
    assert "    guild.txt" in lines and "    new.txt" in lines and "if any" not in text, text
    assert last_update_line(text).endswith("(a new run continues its work); 1 file is not text (skipped)"), text


def test_a_killed_update_s_failed_chunks_count_as_the_files_it_left_unindexed(tmp_path):
    # Its chunks that failed are of the new or changed files it was taking (no published document
    # holds them): counted once, as those files, listed with them, as a failed run's are; it
    # said "failures 2 in the last update" beside "not indexed 1 new or changed file".
    from streamrag import index_rows

    db = tmp_path / "c.db"
    store = Store(db)
    try:
        store.start_run("r-killed", "index")
        index_rows.note_taking(store, "r-killed", 1, ["new.txt"])
        store.record_failure("r-killed", "extract", "chk-new", "new.txt (chunk 1, chk-new): refused")
        store.record_failure("r-killed", "summarize", "ent-a", "Ada: unusable answer")
        store.conn.commit()
    finally:
        store.close()
    _killed(db, "r-killed")
    info, text = status_of(db, failures=True)
    assert info["killed_before_publishing"] is True and info["not_indexed_last_run"] == 1, info
    assert info["failures_last_run"] == 1 and [f["item"] for f in info["failures"]] == ["ent-a"], info
    assert [f["item"] for f in info["not_indexed_failures"]] == ["chk-new"], info
    lines = text.splitlines()
    assert lines[lines.index("    new.txt") + 1] == "    [extract] new.txt (chunk 1, chk-new): refused", text


def test_a_noun_the_s_ending_rule_would_double_says_its_own_plural():
    # "series" and "species" are their own plural, and a noun in -sis takes -ses ("analyses",
    # "bases", "crises"); the ending rule said "serieses", "basises", "crisises".
    from streamrag.words import plural

    assert [plural(2, w) for w in ("series", "time series", "species", "analysis", "basis", "crisis",
                                   "status", "index", "summary", "copy", "entity")] == \
        ["series", "time series", "species", "analyses", "bases", "crises",
         "statuses", "indexes", "summaries", "copies", "entities"]


def test_the_failures_count_kept_follows_an_ended_run_whose_status_changes(tmp_path):
    # Whether a failure of a file a run left unindexed counts depends on the run's status ('ok'
    # or not: ``store.UNINDEXED_RUNS``); an ended run's status changed to another end (by hand)
    # left the kept keys as they were: 0 kept, 1 recounted. And an index whose triggers are
    # those before the fix-up migration has them made again, its keys too.
    from streamrag import index_rows
    from streamrag.store import MIGRATIONS, count_failure_keys

    store = _one_failed_chunk(tmp_path / "k.db", "u1", "failed", {"not_indexed": 1})
    try:
        assert index_rows.failures_recorded(store) == _recounted(store) == 0
        with store.transaction():
            store.conn.execute("UPDATE runs SET status = 'ok' WHERE id = 'u1'")
        assert index_rows.failures_recorded(store) == _recounted(store) == 1
        with store.transaction():
            store.conn.execute("UPDATE runs SET status = 'failed' WHERE id = 'u1'")
        assert index_rows.failures_recorded(store) == _recounted(store) == 0
        # The fix-up migration over a kept table that missed the change.
        number = [name for name, _ in MIGRATIONS].index("failure_keys_status")
        with store.transaction():
            count_failure_keys(store.conn)   # (made again, as the next run's end makes it)
            store.conn.execute("DROP TRIGGER failure_keys_run_changed")
            store.conn.execute("UPDATE runs SET status = 'ok' WHERE id = 'u1'")
            store.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(number),))
        assert index_rows.failures_recorded(store) == 0 != _recounted(store)
    finally:
        store.close()
    store = Store(tmp_path / "k.db")
    try:
        assert index_rows.failures_recorded(store) == _recounted(store) == 1
        assert _kept_keys(store) == (1, 1)
        assert store.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'failure_keys_run_changed'") == 1
    finally:
        store.close()


@pytest.mark.parametrize("before", ["failure_keys", "failure_keys_count"])
def test_an_upgraded_index_makes_its_failure_keys_once_and_keeps_their_count(tmp_path, monkeypatch, before):
    # Each step that changed the triggers of ``failure_keys`` made its keys again: an index
    # upgraded from before ``failure_keys`` made them twice (1.3 s each at 200,000 failures).
    # Now once, as the upgrade ends, with their count (``failure_keys_count``), which `status`
    # reads; from the step before the count, not at all (the keys are right: counted).
    from streamrag import index_rows
    from streamrag import store as store_module

    db = tmp_path / "k.db"
    _failures_as_before(db, before, under_way=True)
    made: list[str] = []
    real = store_module.count_failure_keys
    monkeypatch.setattr(store_module, "count_failure_keys", lambda conn: (made.append(before), real(conn))[1])
    store = Store(db)
    try:
        assert len(made) == (before == "failure_keys"), made   # (of the step before: right, counted)
        _assert_upgraded(store, kept=2, recorded=3)
        with store.transaction():   # (kept on by the triggers made in the upgrade)
            store.finish_run("r2", "ok")
            store.record_failure("r2", "summarize", "e2", "no")
        assert _kept_keys(store) == (4, 4)
        assert index_rows.failures_recorded(store) == _recounted(store) == 4
    finally:
        store.close()


def test_the_failure_keys_count_holds_under_an_outer_insert_or_replace(tmp_path):
    # A statement's conflict policy gives way to an outer one's: an INSERT OR REPLACE into
    # failures or runs made the triggers' INSERT OR IGNORE replace a key kept already, counted as
    # added (``failure_keys_count`` one more than the keys). No statement of streamrag does so: a
    # guard, for one run by hand or a later change.
    from streamrag import index_rows
    from streamrag.store import MIGRATIONS, SCHEMA_VERSION

    store = Store(tmp_path / "k.db")
    try:
        with store.transaction():
            store.start_run("r1", "index")
            store.record_failure("r1", "report", "C1", "no")
            store.finish_run("r1", "ok")
            store.conn.execute(   # (the same failure again: its key is kept already)
                "INSERT OR REPLACE INTO failures(run_id, stage, item, message, created_at) "
                "VALUES ('r1', 'report', 'C1', 'no', 0)")
        assert _kept_keys(store) == (1, 1)
        with store.transaction():   # (an ended run's row written again: its keys are kept already)
            store.conn.execute("INSERT OR REPLACE INTO runs SELECT * FROM runs WHERE id = 'r1'")
        assert _kept_keys(store) == (1, 1)
        assert index_rows.failures_recorded(store) == _recounted(store) == 1
        with store.transaction():   # (a count off, as such a statement left it before the step)
            store.conn.execute("UPDATE failure_keys_count SET n = 2")
            store.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                               (str([name for name, _ in MIGRATIONS].index("failure_keys_guarded")),))
    finally:
        store.close()
    store = Store(tmp_path / "k.db")   # (upgraded: counted again)
    try:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION) and _kept_keys(store) == (1, 1)
    finally:
        store.close()


def test_an_upgrade_killed_as_it_makes_the_failure_keys_leaves_no_index_marked_stale(tmp_path):
    # The keys were made again in a transaction of their own after the last step: a crash between
    # the two left the index at this schema marked stale, every `status` reading all failures
    # until a run ended. Now in the last step's: killed there, the step is undone, and applied
    # again by the next open.
    import contextlib
    import sqlite3
    import subprocess

    import streamrag
    from streamrag.store import SCHEMA_VERSION

    db = tmp_path / "k.db"
    _failures_as_before(db, "failure_keys", under_way=False)
    script = ("import os, sys, streamrag\n"
              "from streamrag import store\n"
              "print(streamrag.__file__, flush=True)\n"
              "store.count_failure_keys = lambda conn: os._exit(3)\n"   # (killed as it makes them)
              "store.Store(sys.argv[1])\n")
    crashed = subprocess.run([sys.executable, "-c", script, str(db)], capture_output=True, text=True, timeout=60)
    assert crashed.returncode == 3, crashed.stderr
    assert crashed.stdout.strip() == streamrag.__file__   # (this checkout's streamrag)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        left = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('schema_version', 'failure_keys_stale')"))
    assert left.get("schema_version") != str(SCHEMA_VERSION), left   # (the last step undone)
    store = Store(db)
    try:
        _assert_upgraded(store, kept=2, recorded=2)
    finally:
        store.close()


def test_a_run_that_leaves_many_chunks_unindexed_ends_without_a_parse_of_its_stats_per_failure(tmp_path):
    # The trigger that adds an ended run's failure keys read its stats (which name the chunks it
    # left unindexed) with JSON functions per failure: parsed again for each, a run's end with
    # 30,000 such failures, 20,000 named, took 4.1 s under the write lock here. Now once. (Counted,
    # not timed: json_extract is this test's own, counting its calls.)
    import json

    from streamrag import index_rows

    store = Store(tmp_path / "k.db")
    n = 300
    calls: list[str] = []

    def json_extract(text, path):
        calls.append(path)
        return json.loads(text).get(path.removeprefix("$."))

    store.conn.create_function("json_extract", 2, json_extract, deterministic=True)
    try:
        with store.transaction():
            store.start_run("u1", "index")
            store.conn.executemany("INSERT INTO failures(run_id, stage, item, message, created_at) "
                                   "VALUES ('u1', 'extract', ?, 'no', 0)", [(f"c{i}",) for i in range(n)])
            stats = json.dumps({"not_indexed": 9, "not_indexed_chunks": [f"c{i}" for i in range(n) if i % 3]})
            store.finish_run("u1", "failed", stats)
        assert 0 < len(calls) <= 4, len(calls)   # (once or twice per trigger, not once per failure)
        assert index_rows.failures_recorded(store) == _recounted(store) == n // 3
    finally:
        store.close()


def test_a_prune_that_deletes_no_failure_nor_run_leaves_the_kept_failure_keys(tmp_path):
    # prune made ``failure_keys`` again from every failure (1.3 s at 200,000) whether or not it
    # deleted any; a deletion marks it stale, and only then is it made again.
    from streamrag import index_rows

    store = _one_failed_chunk(tmp_path / "k.db")
    try:
        statements: list[str] = []
        store.conn.set_trace_callback(statements.append)
        with store.transaction():
            index_rows.prune(store, 30, time.time())
        store.conn.set_trace_callback(None)
        assert store.get_meta("pruned_at") is not None
        assert not any("DELETE FROM failure_keys" in sql for sql in statements), statements
        assert index_rows.failures_recorded(store) == _recounted(store) == 1
        with store.transaction():   # (a deletion: made again)
            index_rows.prune(store, 1, time.time() + 3 * 86400 + index_rows.PRUNE_EVERY_S)
        assert store.get_meta("failure_keys_stale") is None
        assert index_rows.failures_recorded(store) == _recounted(store) == 0
    finally:
        store.close()


def test_the_count_words_are_imported_from_words_not_through_status():
    # status imported ``counted`` and ``number`` from words for cli, daemon, query ... to take
    # from it: two homes for one thing. Every module takes them from words.
    import ast

    import streamrag

    through_status = []
    for source in sorted(Path(streamrag.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "streamrag.status":
                through_status += [f"{source.name}: {a.name}" for a in node.names if a.name in ("counted", "number")]
    assert through_status == [], through_status


def test_a_failure_recorded_with_a_servers_controls_is_listed_safe_to_print(tmp_path):
    # A run before error lines were made safe (``provider_errors.one_line``) recorded a server's
    # words as they came: `status --failures` printed its "\x1b[2J" and "\x1b]0;...\x07" to the
    # terminal. Listed on one line, the sequences dropped, any other control shown escaped.
    db = tmp_path / "s.db"
    store = Store(db)
    try:
        with store.conn:
            store.start_run("r1", "index")
            store.record_failure("r1", "summarize", "ent-1", "HTTP 500: bad \x1b[2J\x1b]0;pwned\x07 gateway\n"
                                                           "caf\u00e9 \x07")
            store.finish_run("r1", "done", "{}")
    finally:
        store.close()
    info, text = status_of(db, failures=True)
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    assert "    [summarize] HTTP 500: bad gateway caf\u00e9 \\x07\n" in text, text
    assert info["failures"][0]["message"].startswith("HTTP 500: bad \x1b[2J")   # (--json: json escapes it)
    # ... and as `ask` and a watch's line quote the last one ("last: ...")
    from streamrag import index_rows

    store = Store(db, readonly=True)
    try:
        assert index_rows.last_failure(store, "r1") == "[summarize] HTTP 500: bad gateway caf\u00e9 \\x07"
    finally:
        store.close()
