"""The bench scripts' own options: the simulator they start listens where ``--port`` says, so
that runs side by side can each be given their own ports."""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from _harness import ports, simulator_process, simulator_thread  # noqa: E402

SIMULATING = ("incremental", "index_cost", "throughput", "query_cost", "llm_client", "rename", "watch_soak",
              "crash_fuzz")


def busy_port() -> socket.socket:
    """A listening socket on a port the system picked: that port is taken."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def offline_incremental(corpus: Path, *args: str) -> subprocess.CompletedProcess:
    """bench/incremental.py run offline (no simulator started) on ``corpus``, with ``args``."""
    return subprocess.run([sys.executable, str(BENCH / "incremental.py"), "--offline", "--corpus", str(corpus),
                           *args], capture_output=True, text=True, timeout=300)


def harbor_notes(tmp_path: Path) -> Path:
    """The documents of tests/data/harbor as Markdown notes, in ``tmp_path/notes``."""
    corpus = tmp_path / "notes"
    corpus.mkdir()
    for f in sorted((BENCH.parent / "tests" / "data" / "harbor").iterdir()):
        (corpus / f"{f.stem}.md").write_text(f.read_text())
    return corpus


def test_a_port_or_a_range_of_them():
    assert ports("8765") == range(8765, 8766)
    assert ports("19300-19309") == range(19300, 19310)
    for bad in ("x", "19309-19300", "70000", "-1", "1-2-3"):
        with pytest.raises(argparse.ArgumentTypeError):
            ports(bad)


@pytest.mark.parametrize("start", [simulator_process, simulator_thread])
def test_the_simulator_takes_the_first_free_port_of_the_range(start):
    with busy_port() as taken:
        first = taken.getsockname()[1]
        with start(range(first, first + 20)) as sim:
            url = sim if isinstance(sim, str) else sim.base_url
            assert first < port_of(url) < first + 20
        with pytest.raises((RuntimeError, OSError)):
            with start(range(first, first + 1)):
                pass


@pytest.mark.parametrize("script", SIMULATING)
def test_every_bench_that_starts_a_simulator_takes_port(script):
    out = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "--port N|FIRST-LAST" in out.stdout, out.stderr


def test_incremental_runs_its_simulator_on_the_port_given():
    # It started its simulator on any free port: runs side by side could not be kept apart.
    with busy_port() as taken:
        first = taken.getsockname()[1]
        out = subprocess.run([sys.executable, str(BENCH / "incremental.py"), "--corpus",
                              str(BENCH.parent / "tests" / "data" / "harbor"), "--port",
                              f"{first}-{first + 20}"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert first < port_of(result["api_base"]) <= first + 20 and result["fresh_doc_cited"]
    # (its delete undid its add, every report answered by the cache: 0 tokens)
    assert result["delete_tokens"] > 0


def _harbor_but_its_last(tmp_path):
    """harbor's files, a corpus of all but the last of them, its index's path, and a run of an
    offline sync (folder, database) -> its result: what --samples works on."""
    import anyio

    from streamrag.config import load_settings
    from streamrag.pipeline import sync

    harbor = sorted((BENCH.parent / "tests" / "data" / "harbor").iterdir())
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in harbor[:-1]:
        (corpus / f.name).write_text(f.read_text())
    settings = load_settings(None, env={}, overrides={"index": {"extractor": "nlp"}})

    def run(folder, database):
        return anyio.run(lambda: sync([folder], settings, database, root=folder, command="bench"))
    return harbor, corpus, tmp_path / "index.db", run


def test_incremental_samples_leave_the_corpus_and_the_index_as_they_were(tmp_path):
    # --samples adds and deletes documents one at a time on copies of the index, between the
    # bench's own steps: the folder and the index those steps go on with must not move.
    from incremental import one_at_a_time, shares

    from streamrag.store import Store

    harbor, corpus, db, run = _harbor_but_its_last(tmp_path)

    full = run(corpus, db)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in corpus.iterdir()}
    results = one_at_a_time(corpus, db, harbor[-1:], tmp_path / "sample.db", run)
    counts = {kind: [r.reports_generated for r in rs] for kind, rs in results.items()}
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in corpus.iterdir()} == before
    assert len(counts["add"]) == len(counts["delete"]) == 1 and counts["add"][0] > 0
    assert not list(tmp_path.glob("sample.db*"))
    again = run(corpus, db)   # the index saw none of it: nothing to do
    assert again.reports_generated == 0 and again.documents_added == again.documents_removed == 0
    store = Store(db, readonly=True)
    assert store.query("SELECT count(*) AS n FROM communities")[0]["n"] == full.reports
    store.close()
    s = shares(results, full.reports)
    assert s["samples_add"] == 1 and s["add_share_max"] == round(counts["add"][0] / full.reports, 4)


def test_incremental_syncs_with_the_settings_file_given(tmp_path):
    # Its settings were the defaults: trying a setting (index.report_regen_threshold, say) meant
    # editing the script. Offline, so that no simulator is started.
    def bench(*extra):
        return subprocess.run([sys.executable, str(BENCH / "incremental.py"), "--offline", "--corpus",
                               str(BENCH.parent / "tests" / "data" / "harbor"), *extra],
                              capture_output=True, text=True, timeout=300)

    config = tmp_path / "streamrag.toml"
    config.write_text("[index]\nmax_cluster_size = 2\n")
    default, split = bench(), bench("--config", str(config))
    assert default.returncode == split.returncode == 0, default.stderr + split.stderr
    assert json.loads(split.stdout)["reports_total"] > json.loads(default.stdout)["reports_total"]
    config.write_text("[index]\nmax_cluster_size = 1\n")
    bad = bench("--config", str(config))
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and str(config) in bad.stderr and "max_cluster_size" in bad.stderr


def test_incremental_deletes_a_document_of_the_first_index():
    # Its delete step removed the middle .txt of the folder once the add was made: in harbor,
    # the document just added, so that the step measured undoing the add (its reports all
    # answered by the cache, 0 tokens paid). Offline, so that no simulator is started.
    harbor = BENCH.parent / "tests" / "data" / "harbor"
    out = subprocess.run([sys.executable, str(BENCH / "incremental.py"), "--offline", "--corpus", str(harbor)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    changed = json.loads(out.stdout)["changed"]
    first = sorted(p.name for p in harbor.iterdir())[:-1]   # (the last is held out, then added)
    assert changed["add"] not in first and changed["modify"] in first
    assert changed["delete"] in first and changed["delete"] != changed["modify"]


def test_incremental_counts_apart_the_reports_a_paid_call_wrote(tmp_path, simulator):
    # reports_regenerated_* counted the reports the cache answered as rewritten: a delete that
    # undid an add said 4 reports regenerated for 0 tokens paid.
    import anyio
    from incremental import reports_by_paid_calls

    from streamrag.config import load_settings
    from streamrag.pipeline import sync

    harbor = sorted((BENCH.parent / "tests" / "data" / "harbor").iterdir())
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in harbor[:-1]:
        (corpus / f.name).write_text(f.read_text())
    settings = load_settings(None, env={}, overrides={"llm": {"api_base": simulator.base_url,
                                                              "requests_per_minute": 0, "tokens_per_minute": 0}})

    def run():
        return anyio.run(lambda: sync([corpus], settings, tmp_path / "index.db", root=corpus, command="bench"))

    run()
    (corpus / harbor[-1].name).write_text(harbor[-1].read_text())
    add = run()
    (corpus / harbor[-1].name).unlink()
    undone = run()   # the contexts of the first index again: the cache has their reports
    assert add.reports_generated > 0 and reports_by_paid_calls(add) == add.reports_generated
    assert undone.reports_generated > 0 and reports_by_paid_calls(undone) == 0
    assert undone.llm["report"]["cached"] == undone.reports_generated


def test_incremental_modifies_a_document_of_any_format_it_reads(tmp_path):
    # Its modify step picked among the folder's .txt files alone: a folder of Markdown notes had
    # none, an IndexError once the add was made. A .jsonl file (a document per row) is read but
    # never the one modified: a sentence added to its last paragraph would be a line no row.
    corpus = harbor_notes(tmp_path)
    (corpus / "aa_rows.jsonl").write_text(json.dumps({"text": "Mira Solen rowed across the Kessel harbor."}) + "\n")
    (corpus / "zz_left.pdf").write_bytes(b"%PDF-1.4")   # (not read: neither held out nor modified)
    out = offline_incremental(corpus)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["docs"] == 4   # (the three notes of the first index and the row)
    assert result["changed"]["add"] == "railway.md"
    assert result["changed"]["modify"].endswith(".md") and result["changed"]["modify"] != "railway.md"
    from incremental import modified_document

    names = [Path(n) for n in ("a.jsonl", "b.md", "c.txt", "d.csv", "e.markdown", "f.txt")]
    assert modified_document(names) == Path("c.txt")   # (a third of the way along b, c, e, f)
    assert modified_document(sorted(Path(f"doc_{i:05d}.txt") for i in range(1, 32))) == Path("doc_00011.txt")


def test_incremental_counts_what_was_paid_of_its_samples_and_its_add(tmp_path, simulator):
    # add_llm_reports and the --samples shares counted the reports the LLM cache answered as
    # written: a sample that brought back a document the index had dropped said every report
    # it rewrote, for none paid.
    import anyio
    from incremental import one_at_a_time, report_calls_sent, reports_by_paid_calls, shares

    from streamrag.config import load_settings
    from streamrag.pipeline import sync

    harbor = sorted((BENCH.parent / "tests" / "data" / "harbor").iterdir())
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in harbor:
        (corpus / f.name).write_text(f.read_text())
    settings = load_settings(None, env={}, overrides={"llm": {"api_base": simulator.base_url,
                                                              "requests_per_minute": 0, "tokens_per_minute": 0}})
    db = tmp_path / "index.db"

    def run(folder, database):
        return anyio.run(lambda: sync([folder], settings, database, root=folder, command="bench"))

    first = run(corpus, db)
    (corpus / harbor[-1].name).unlink()
    full = run(corpus, db)   # the cache still holds the reports of the folder with the last document
    samples = one_at_a_time(corpus, db, harbor[-1:], tmp_path / "sample.db", run)
    back = samples["add"][0]
    assert back.reports_generated > 0 and back.llm["report"]["cached"] > 0   # (and extractive ones)
    assert report_calls_sent(back) == reports_by_paid_calls(back) == 0
    assert report_calls_sent(first) == first.llm["report"]["calls"] > 0
    s = shares(samples, full.reports)
    assert s["add_share_max"] == round(back.reports_generated / full.reports, 4) > 0
    assert s["add_paid_share_max"] == s["add_paid_share_mean"] == 0 and s["adds_paid_over_10pct"] == 0
    deleted = samples["delete"][0]   # (contexts never seen: paid calls wrote its reports)
    assert s["delete_paid_share_max"] == round(reports_by_paid_calls(deleted) / full.reports, 4) > 0


def test_incremental_counts_report_calls_apart_from_the_reports_they_wrote(tmp_path):
    # add_llm_reports, named as a count of reports, counted report calls sent: a failed one too,
    # which wrote none. The calls are add_report_calls now, those that wrote no report
    # add_report_calls_failed, and reports_paid_* the reports paid calls wrote.
    import anyio
    import httpx
    from conftest import chat_answer, make_settings
    from incremental import report_calls_failed, report_calls_sent, reports_by_paid_calls

    from streamrag.pipeline import sync
    from streamrag.simulator import ANSWERS, detect_task

    def answer(request: httpx.Request) -> httpx.Response:   # (every report answer unusable)
        if request.method == "GET":   # (GET /models, which a run asks first: no listing)
            return httpx.Response(404)
        messages = json.loads(request.content)["messages"]
        task = detect_task(messages)
        return chat_answer("I cannot summarise this community." if task == "report" else ANSWERS[task](messages))

    corpus = BENCH.parent / "tests" / "data" / "harbor"
    result = anyio.run(lambda: sync([corpus], make_settings("http://llm.test/v1"), tmp_path / "index.db",
                                    root=corpus, command="bench", transport=httpx.MockTransport(answer)))
    report = result.llm["report"]
    assert report["calls"] > 0 and report["errors"] == report["calls"] and not report["cached"]
    assert report_calls_sent(result) == report_calls_failed(result) == report["calls"]
    assert reports_by_paid_calls(result) == 0 < result.reports_generated   # (extractive stand-ins)
    out = offline_incremental(corpus)
    assert out.returncode == 0, out.stderr
    line = json.loads(out.stdout)
    assert "add_llm_reports" not in line and line["add_report_calls"] == line["add_report_calls_failed"] == 0


def test_incremental_writes_its_fresh_note_under_a_name_index_include_takes(tmp_path):
    # The freshness step wrote zz_fresh_note.txt whatever index.include said: with include =
    # ["*.md"] the note was never read, and fresh_doc_cited said false.
    from incremental import fresh_note_name

    from streamrag.config import load_settings

    corpus = harbor_notes(tmp_path)
    config = tmp_path / "streamrag.toml"
    config.write_text('[index]\ninclude = ["*.md"]\n')
    out = offline_incremental(corpus, "--config", str(config))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["fresh_doc"] == "zz_fresh_note.md" and result["fresh_doc_cited"]

    def name(include, exclude=(), documents=("a.jsonl", "b.md", "guild.txt")):
        settings = load_settings(None, env={}, overrides={"index": {"include": include, "exclude": list(exclude)}})
        return fresh_note_name([Path(d) for d in documents], settings, tmp_path / "probe")

    assert name(["*.txt", "*.md"]) == "zz_fresh_note.md"   # (the first document's suffix; no .jsonl)
    assert name(["g*.txt"]) == "guild_fresh_note.txt"
    assert name(["*.md"], exclude=["zz_*"]) == "b_fresh_note.md"
    assert name(["b.md", "guild.txt"]) is None and not (tmp_path / "probe").exists()
    narrow = config.with_name("narrow.toml")
    narrow.write_text('[index]\ninclude = ["council.md", "festival.md", "guild.md", "railway.md"]\n')
    out = offline_incremental(corpus, "--config", str(narrow))
    assert out.returncode == 1 and out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert "widen index.include" in out.stderr


def test_watch_soak_samples_the_daemon_after_each_change():
    out = subprocess.run([sys.executable, str(BENCH / "watch_soak.py"), "--corpus",
                          str(BENCH.parent / "tests" / "data" / "harbor"), "--changes", "3", "--offline"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    # One held out, added; one modified; one deleted: the daemon synced each and stopped clean.
    assert result["changes"] == 3 and result["docs"] == 3 and result["documents_last"] == 3
    assert result["errors"] == 0 and result["exit"] == 0 and result["stopped"] == "index is current as of the last change seen"
    assert result["rss_mb"]["first"] > 0 and result["fds"]["last"] > 0 and result["db_mb"]["last"] > 0
    assert [k for k, v in result["latency_median_by_kind_s"].items() if v is not None] == ["add", "modify", "delete"]


def test_watch_soak_says_when_its_memory_growth_is_noise():
    # Its growth per 100 changes was one figure whatever it was fitted over: 8 changes offline
    # said -25.5 MB per 100 of a memory that only moved up and down a MB with the change's kind.
    from watch_soak import summary

    wobble = [138.45, 138.63, 138.63, 137.6]   # (the memory after an add, modify, delete, rename)

    def soak(changes, mb_per_change):
        rss = [139.7] + [wobble[i % 4] + mb_per_change * i for i in range(changes)]
        return summary([{"rss_mb": m, "fds": 10, "db_mb": 1.0, "wal_mb": 0.0} for m in rss], [0.1] * changes)

    few = soak(8, 0)
    assert few["rss_growth_changes"] == 4 and abs(few["rss_growth_mb_per_100"]) > 10
    assert few["rss_growth_noise_mb_per_100"] > abs(few["rss_growth_mb_per_100"])
    assert not few["rss_growth_beyond_noise"]
    leak = soak(200, 0.05)   # 5 MB per 100 changes
    assert leak["rss_growth_changes"] == 100 and leak["rss_growth_beyond_noise"]
    assert leak["rss_growth_mb_per_100"] == pytest.approx(5, abs=leak["rss_growth_noise_mb_per_100"])
    assert soak(2, 0)["rss_growth_noise_mb_per_100"] is None and soak(2, 0)["rss_growth_beyond_noise"] is None


def test_watch_soak_fits_its_memory_growth_a_kind_of_change_at_a_time():
    # The memory steps with the kind of change (1.4 MB lower after a rename): a line through all
    # the points counted that step as noise, and 60 changes of 50 documents offline said
    # 0.45 +- 2.83 MB per 100, within noise, of a memory that grew after every kind of change.
    import random

    from watch_soak import summary

    step = {"add": 1.5, "modify": 1.4, "delete": 1.5, "rename": 0.0}
    jitter = random.Random(7)

    def soak(changes, mb_per_change, kinds=True):
        rows = [{"rss_mb": 138.4 + step[k] + mb_per_change * i + jitter.uniform(-0.15, 0.15), "kind": k}
                for i, k in ((i, ("add", "modify", "delete", "rename")[i % 4]) for i in range(changes))]
        samples = [{"rss_mb": 141.0}] + [r if kinds else {"rss_mb": r["rss_mb"]} for r in rows]
        return summary([{"fds": 10, "db_mb": 1.0, "wal_mb": 0.0, **s} for s in samples], [0.1] * changes)

    grows = soak(60, 0.01)   # 1 MB per 100 changes
    assert grows["rss_growth_changes"] == 30 and grows["rss_growth_beyond_noise"] is True
    assert grows["rss_growth_mb_per_100"] == pytest.approx(1, abs=grows["rss_growth_noise_mb_per_100"])
    assert grows["rss_growth_noise_mb_per_100"] < 1 < soak(60, 0.01, kinds=False)["rss_growth_noise_mb_per_100"]
    steady = soak(60, 0)
    assert abs(steady["rss_growth_mb_per_100"]) < steady["rss_growth_noise_mb_per_100"] < 1
    assert steady["rss_growth_beyond_noise"] is False
    few = soak(8, 0)   # (4 changes fitted, one of each kind: no slope within a kind to tell by)
    assert few["rss_growth_noise_mb_per_100"] is None and few["rss_growth_beyond_noise"] is None


def test_query_latency_times_global_asks_of_an_index_given_by_a_relative_path(tmp_path):
    # --mode global timed only local asks before it was an option, and a relative --db was
    # looked for in the temporary folder the asks run in (each ask failed: no index there).
    corpus = BENCH.parent / "tests" / "data" / "harbor"
    subprocess.run([sys.executable, str(BENCH / "query_latency.py"), "--corpus", str(corpus), "--db", "index.db",
                    "--asks", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True)
    out = subprocess.run([sys.executable, str(BENCH / "query_latency.py"), "--db", "index.db", "--asks", "2",
                          "--mode", "global"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["mode"] == "global" and result["asks"] == 2 and result["documents"] > 0
    assert 0 < result["global_ask_cpu_s_min"] <= result["global_ask_cpu_s_median"] <= result["global_ask_cpu_s_max"]
    assert result["global_ask_peak_mb"] > 0 and "local_ask_s_median" not in result


def test_query_latency_times_basic_asks(tmp_path):
    corpus = BENCH.parent / "tests" / "data" / "harbor"
    out = subprocess.run([sys.executable, str(BENCH / "query_latency.py"), "--corpus", str(corpus), "--asks", "1",
                          "--mode", "basic"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["mode"] == "basic" and 0 < result["basic_ask_cpu_s_min"] <= result["basic_ask_cpu_s_max"]


def test_command_latency_times_help_status_and_an_index_with_nothing_changed(tmp_path):
    corpus = BENCH.parent / "tests" / "data" / "harbor"
    out = subprocess.run([sys.executable, str(BENCH / "command_latency.py"), "--corpus", str(corpus), "--runs", "2"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["bench"] == "command_latency" and result["runs"] == 2 and result["documents"] > 0
    for name in ("help", "status", "index_unchanged"):
        assert 0 < result[f"{name}_cpu_s_min"] <= result[f"{name}_cpu_s_median"] <= result[f"{name}_cpu_s_max"]
        assert result[f"{name}_s_median"] > 0
    assert not (corpus / ".streamrag").exists()   # (indexed in a copy)


def test_command_latency_reads_the_index_where_the_corpus_settings_put_it(tmp_path):
    # A corpus whose streamrag.toml sets store.path: the bench read .streamrag/index.db, not
    # there, and ended in a traceback (sqlite3.OperationalError: unable to open database file).
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(BENCH.parent / "tests" / "data" / "harbor", corpus)
    (corpus / "streamrag.toml").write_text('[store]\npath = "idx/n.db"\n')
    out = subprocess.run([sys.executable, str(BENCH / "command_latency.py"), "--corpus", str(corpus), "--runs", "1"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["documents"] == 4


def test_command_latency_does_not_time_an_index_that_changed_as_unchanged(tmp_path, monkeypatch, capsys):
    # Nothing checked that the timed `index .` found nothing changed: one that re-indexed (a
    # file written in the copy meanwhile) was printed as index_unchanged_* all the same.
    import command_latency

    timed = command_latency.timed

    def written_first(args, cwd):
        if args[0] == "index":
            (cwd / "new.txt").write_text("Ada Lovelace wrote the first program in London.\n")
        return timed(args, cwd)

    monkeypatch.setattr(command_latency, "timed", written_first)
    code = command_latency.main(["--corpus", str(BENCH.parent / "tests" / "data" / "harbor"), "--runs", "1"])
    out, err = capsys.readouterr()
    assert code == 1 and out == "", out
    assert err.strip().endswith("published version 2 of the index, not an index with nothing changed"), err


def test_a_latency_bench_whose_command_fails_says_what_the_command_said(tmp_path, monkeypatch, capsys):
    # A timed command that failed ended the bench with "Command '[...]' returned non-zero exit
    # status 1." and a traceback of the bench: what the command wrote to stderr was dropped.
    import _harness
    import command_latency
    import query_latency
    from _timing import CommandFailed

    monkeypatch.setattr(command_latency, "COMMANDS", {"status": ["status", "--db", "gone.db"]})
    with pytest.raises(CommandFailed) as failed:
        command_latency.main(["--corpus", str(BENCH.parent / "tests" / "data" / "harbor"), "--runs", "1"])
    said = str(failed.value)
    assert said.startswith("`streamrag status --db gone.db` exited with 1, saying:\n"), said
    assert "gone.db" in said.split("\n", 1)[1] and "Traceback" not in said, said
    _harness._one_line(CommandFailed, failed.value, failed.tb)   # (what the bench prints: no traceback)
    assert capsys.readouterr().err.rstrip().endswith(said.rsplit("\n", 1)[-1])
    with pytest.raises(CommandFailed, match="no index") as asked:   # (query_latency's asks too)
        query_latency.time_ask(tmp_path / "none.db", "What?", tmp_path, "basic")
    assert "streamrag ask --db" in str(asked.value)


@pytest.mark.parametrize("kind", ["txt", "crlf", "md", "jsonl", "csv", "line"])
def test_big_file_changes_its_file_at_the_end_and_in_the_middle_as_its_kind_is_read(tmp_path, kind):
    # big_file.py times an update after each change: a change that broke a record (a JSONL
    # line or a CSV row) would time the reading of an error, not of a change.
    from big_file import big_file, change, write_file

    from streamrag.loader import read_documents

    path = big_file(tmp_path, kind)
    write_file(path, 0.02, kind)
    docs, _ = read_documents(path, root=tmp_path)
    change(path, kind, "end")
    appended, _ = read_documents(path, root=tmp_path)
    change(path, kind, "middle")
    edited, _ = read_documents(path, root=tmp_path)
    records = kind in ("jsonl", "csv")
    assert len(appended) == len(docs) + records and len(edited) == len(appended)
    assert "the river council met again" in " ".join(d.text for d in appended[-1:]).lower()
    changed = [(a.text, e.text) for a, e in zip(appended, edited) if a.text != e.text]
    assert len(changed) == 1 and changed[0][1].count("rivers") == changed[0][0].count("rivers") + 1


def test_a_bench_without_its_corpus_generator_names_only_options_it_takes(tmp_path):
    # (rename.py, which has no --corpus, was told to give "--corpus DIR instead")
    run = [sys.executable, str(BENCH / "rename.py")]
    out = subprocess.run([*run, "--corpusgen", str(tmp_path / "none.py")], capture_output=True,
                         text=True, timeout=60)
    helped = subprocess.run([*run, "--help"], capture_output=True, text=True, timeout=60).stdout
    options = set(re.findall(r"--[a-z][a-z-]*", helped))
    named = set(re.findall(r"--[a-z][a-z-]*", out.stderr))
    assert out.returncode == 1 and "no corpus generator" in out.stderr, out.stderr
    assert "--corpusgen" in named and named <= options, out.stderr


@pytest.mark.parametrize("script, args", [("watch_stall", ("--files", "20")), ("markdown_pathological", ()),
                                          pytest.param("markdown_diff", ("--snippets", "20"), marks=pytest.mark.skipif(
                                              not (BENCH.parent / ".git").exists(), reason="reads HEAD's markdown.py"))])
def test_a_bench_line_names_its_bench(script, args):
    # Every bench's JSON line says which bench it is ("bench": its script's name), so lines
    # gathered in one file can be told apart; these three said none.
    out = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), *args], cwd=BENCH.parent,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["bench"] == script


@pytest.mark.parametrize("script", ["index_cost", "throughput", "query_cost", "query_latency", "incremental",
                                    "crash_fuzz", "command_latency"])
def test_a_corpus_folder_not_there_is_one_line(script, tmp_path):
    # It was a traceback: an InputError from inside the first sync, or FileNotFoundError from
    # copying the folder.
    gone = tmp_path / "gone"
    out = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), "--corpus", str(gone)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.splitlines()[-1].endswith(f"--corpus: {gone}: no such folder")


def test_a_corpus_that_is_a_file_is_not_a_folder(tmp_path):
    # It was said to be "no such folder", though it is there.
    from _harness import folder

    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(argparse.ArgumentTypeError, match=r"notes\.txt: not a folder$"):
        folder(str(tmp_path / "notes.txt"))
    assert folder(str(tmp_path)) == tmp_path


@pytest.mark.parametrize("script, args", [("index_cost", ("--corpus", str(BENCH.parent / "tests" / "data" / "harbor"))),
                                          ("llm_client", ("--requests", "1"))])
def test_ports_all_in_use_are_one_line(script, args):
    # A process simulator (index_cost) and a thread one (llm_client) alike: both were tracebacks.
    with busy_port() as taken:
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), *args, "--port", str(port)],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == "", out.stderr
    assert out.stderr == f"{script}.py: port {port} is in use; give --port another port or range (0: any free port)\n"


def test_a_clone_made_elsewhere_finds_the_corpus_generator_beside_its_origin(tmp_path):
    # A clone outside the workspace (git clone /work/main /tmp/x) has no ../shared of its own:
    # every --generate needed --corpusgen, though its origin's folder holds the generator.
    from _harness import find_corpusgen

    gen = tmp_path / "workspace" / "shared" / "tools" / "corpusgen.py"
    gen.parent.mkdir(parents=True)
    gen.write_text("")
    origin, clone = tmp_path / "workspace" / "main", tmp_path / "elsewhere" / "clone"
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
    assert find_corpusgen(clone) == gen
    assert find_corpusgen(origin) == gen    # beside the checkout, as before
    gen.unlink()
    assert find_corpusgen(clone) == clone.parent / "shared" / "tools" / "corpusgen.py"  # (named in the error)


def test_rename_with_no_entity_to_rename_says_so():
    # Too few articles for any entity to reach --min-links: a KeyError '' traceback (the pattern
    # of no names matched the empty string).
    from _harness import find_corpusgen

    if not find_corpusgen().is_file():   # (where rename.py looks for it without --corpusgen)
        pytest.skip("no corpus generator beside the checkout or its origin")
    out = subprocess.run([sys.executable, str(BENCH / "rename.py"), "--generate", "3"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and out.stdout == "", out.stderr
    assert out.stderr.startswith("rename.py: no entity is named in --min-links 15 of the 3 articles")
    assert out.stderr.count("\n") == 1


@pytest.mark.parametrize("script, args", [("big_file", ("--mb", "0")), ("watch_stall", ("--files", "0")),
                                          ("llm_client", ("--requests", "0"))])
def test_a_size_of_nothing_is_refused(script, args):
    # big_file --mb 0 ended in ValueError 'subsection not found'; watch_stall --files 0 waited
    # forever for a queue no file was put in; llm_client --requests 0 printed an efficiency of 1869.
    out = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), *args], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert out.stderr.splitlines()[-1] == f"{script}.py: error: {args[0]} must be {'more than 0' if script == 'big_file' else '1 or more'}"


def test_throughput_critical_path_counts_the_gleaning_rounds_made():
    # It counted the rounds the settings allow: a run whose checks all said no (harbor: 4 checks,
    # no gleaning) was bound by 5 calls of latency, longer than the run took (15 s for 13.1 s).
    from throughput import critical_path_calls

    harbor = {"extract": 4, "glean_check": 4, "summarize": 1, "report": 3}
    assert critical_path_calls(harbor, 1) == 4
    assert critical_path_calls({**harbor, "glean": 2}, 1) == 5
    assert critical_path_calls({"extract": 4}, 0) == 1



def test_throughput_through_an_endpoint_bounds_by_the_latency_it_measured(simulator):
    # With --api-base the bound still counted --latency-ms, the simulator's (default 400 ms),
    # whatever the endpoint answered in: a 1.1 s run was bound by 8 s (efficiency 7.36).
    out = subprocess.run([sys.executable, str(BENCH / "throughput.py"), "--corpus",
                          str(BENCH.parent / "tests" / "data" / "harbor"), "--api-base", simulator.base_url,
                          "--latency-ms", "60000", "--rpm", "0", "--tpm", "0"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["latency_ms"] is None   # (60,000 ms: the simulator's flag, no part of an endpoint's bound)
    from throughput import critical_path_s, critical_path_stages

    least = result["least_latency_ms"]
    stages = critical_path_stages(dict.fromkeys(least, 1), 0)
    stages += ["report"] * (result["critical_path_calls"] - len(stages))
    assert result["critical_path_s"] == pytest.approx(
        sum(least[s] for s in stages) / 1000, abs=0.01)
    assert result["bound_s"] == result["critical_path_s"]   # (no rate limit: the chain alone)
    assert critical_path_s({"extract": 400, "glean_check": 300, "report": 250}, stages[:1] + ["report"] * 2) == 0.9
    assert critical_path_s({"extract": 400}, ["extract", "summarize"]) is None   # (none answered)

def test_throughput_bounds_by_the_simulator_s_per_token_latency_too():
    # The bound counted --latency-ms alone: with --per-token-ms the simulator took each call
    # longer than the bound said (at --latency-ms 0, a 5.3 s run was bound by 0 s: no efficiency).
    out = subprocess.run([sys.executable, str(BENCH / "throughput.py"), "--corpus",
                          str(BENCH.parent / "tests" / "data" / "harbor"), "--latency-ms", "0",
                          "--per-token-ms", "1", "--rpm", "0", "--tpm", "0"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    from throughput import critical_path_stages, simulated_least_ms

    least = result["least_completion_tokens"]
    stages = critical_path_stages(dict.fromkeys(least, 1), 0)
    stages += ["report"] * (result["critical_path_calls"] - len(stages))
    assert result["per_token_ms"] == 1 and "report" in stages
    assert result["critical_path_s"] == pytest.approx(sum(least[s] for s in stages) / 1000, abs=0.01)
    assert 0 < result["bound_s"] == result["critical_path_s"] <= result["wall_s"]   # (a bound: no run beats it)
    assert result["efficiency"] is not None and "efficiency_unknown" not in result
    assert simulated_least_ms(400, 2, {"extract": 300}, ["extract", "summarize"]) == {"extract": 1000,
                                                                                       "summarize": 400}

def test_throughput_with_nothing_to_bound_it_gives_no_efficiency():
    # No rate limit and no latency: the bound was 0 s, its efficiency 0.0, as if the run had
    # taken for ever.
    out = subprocess.run([sys.executable, str(BENCH / "throughput.py"), "--corpus",
                          str(BENCH.parent / "tests" / "data" / "harbor"), "--rpm", "0", "--tpm", "0",
                          "--latency-ms", "0"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["chat_calls"] > 0 and result["bound_s"] == 0
    assert result["efficiency"] is None and result["burst_efficiency"] is None
    assert result["efficiency_unknown"].startswith("no rate limit (--rpm 0 --tpm 0) and no latency (--latency-ms 0)")

def test_ctrl_c_is_one_line():
    # Ctrl-C printed a 54-line KeyboardInterrupt traceback.
    import os
    import signal
    import time

    with busy_port() as free:   # (closed: free again, for the run's simulator alone)
        port = free.getsockname()[1]
    run = subprocess.Popen([sys.executable, str(BENCH / "throughput.py"), "--corpus",
                            str(BENCH.parent / "tests" / "data" / "harbor"), "--latency-ms", "60000",
                            "--port", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        while not _listening(port):   # its simulator is up: the run waits a minute on its calls
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        os.killpg(run.pid, signal.SIGINT)   # as a terminal's Ctrl-C: the whole group
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == -signal.SIGINT and out == "", err
    assert err == "throughput.py: interrupted\n"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_incremental_explain_puts_each_rewritten_report_down_to_its_cause():
    # Why an update rewrote a report was a guess: the bench counted them, and said nothing of
    # which were the document's doing and which the clustering's, a child's or the selection's.
    from _rewrites import Snapshot, explain

    def snap(communities, lines, doc=None):
        return Snapshot(communities=communities, lines=lines, reports=set(lines),
                        ends={"rel-ab": ("ent-a", "ent-b"), "rel-hi": ("ent-h", "ent-i")},
                        docs={"new.txt": doc} if doc else {})

    f = frozenset
    before = snap({"C1": (0, f({"ent-a", "ent-b"}), "k1"), "C2": (0, f({"ent-d", "ent-e"}), "k2"),
                   "C3": (1, f({"ent-f"}), "k3"), "C4": (0, f({"ent-f", "ent-g"}), "k4"),
                   "C5": (0, f({"ent-h", "ent-i", "ent-j"}), "k5"), "C6": (0, f({"ent-z"}), "k6")},
                  {"k1": {"ent-a": "1", "ent-b": "1", "rel-ab": "1"}, "k2": {"ent-d": "1", "ent-e": "1"},
                   "k3": {"ent-f": "1"}, "k4": {"C3": "1", "ent-g": "1"},
                   "k5": {"ent-h": "1", "rel-hi": "1", "ent-i": "1"}, "k6": {"ent-z": "1"}})
    after = snap({"C1": (0, f({"ent-a", "ent-b"}), "n1"), "C2": (0, f({"ent-d"}), "n2"),
                  "C3": (1, f({"ent-f"}), "n3"), "C4": (0, f({"ent-f", "ent-g"}), "n4"),
                  "C5": (0, f({"ent-h", "ent-i", "ent-j"}), "n5"), "C6": (0, f({"ent-z"}), "k6"),
                  "C7": (0, f({"ent-e", "ent-n"}), "n7")},
                 {"n1": {"ent-a": "2", "ent-b": "1", "rel-ab": "1"}, "n2": {"ent-d": "1"},
                  "n3": {"ent-f": "2"}, "n4": {"C3": "2", "ent-g": "1"},
                  "n5": {"ent-j": "1", "ent-i": "1"}, "n7": {"ent-e": "1", "ent-n": "1"}},
                 doc={"entities": {"ent-a", "ent-f", "ent-n"}, "relationships": set(), "claims": set()})
    rows = {r["id"]: r for r in explain(before, after, "new.txt")["communities"]}
    assert set(rows) == {"C1", "C2", "C3", "C4", "C5", "C7"}   # (C6 kept its report)
    assert {k: r["cause"] for k, r in rows.items()} == {
        "C1": "document", "C2": "clustering", "C3": "document", "C4": "child report", "C5": "selection",
        "C7": "new community"}
    assert rows["C1"]["changes"] == {"entity changed (document)": 1}
    assert rows["C2"]["changes"] == {"entity went (clustering)": 1}
    assert rows["C5"]["overflows"] and not rows["C1"]["overflows"]
    assert rows["C5"]["changes"] == {"entity came (selection)": 1, "entity went (selection)": 1,
                                     "relationship went (selection)": 1}


def test_incremental_explain_accounts_for_every_report_each_step_wrote(tmp_path):
    out = offline_incremental(harbor_notes(tmp_path), "--explain")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    from _rewrites import CAUSES

    for step in ("add", "modify", "delete"):
        told = result["explain"][step]
        assert told["rewritten"] == result[f"reports_regenerated_{step}"]
        assert sum(told["by_cause"].values()) == told["rewritten"] == len(told["communities"])
        assert set(told["by_cause"]) <= set(CAUSES)
    assert result["explain"]["add"]["document"]["entities"] > 0
    assert result["reports_regenerated_add"] > 0


def test_incremental_explains_each_sampled_change_it_counts(tmp_path):
    from _rewrites import summed
    from incremental import one_at_a_time

    harbor, corpus, db, run = _harbor_but_its_last(tmp_path)

    run(corpus, db)
    explained: dict[str, list] = {}
    results = one_at_a_time(corpus, db, harbor[-1:], tmp_path / "sample.db", run, explained)
    for kind in ("add", "delete"):
        assert [t["rewritten"] for t in explained[kind]] == [r.reports_generated for r in results[kind]]
        assert explained[kind][0]["document"]["entities"] > 0   # (read from the index it was in)
        told = summed(explained[kind])
        assert told["changes"] == 1 and told["rewritten"] == sum(told["by_cause"].values())
        assert all(r["cause"] not in ("document", "new community") for r in told["not_the_document"])


def test_watch_note_beside_log_says_how_long_a_run_s_note_waited_once_it_is_synced(tmp_path, capsys):
    # One run of the bench (its own main, in this process) beside a log written every 0.2 s, its
    # folder kept: its one line, and the note in the index the daemon built.
    import contextlib
    import sqlite3

    from watch_note_beside_log import main

    main(["--runs", "1", "--interval-s", "0.2", "--keep", str(tmp_path)])
    line = json.loads(capsys.readouterr().out)
    assert sorted(line) == ["bench", "interval_s", "runs"] and line["bench"] == "watch_note_beside_log"
    assert line["interval_s"] == 0.2 and [sorted(run) for run in line["runs"]] == [["handed_s", "synced_s"]]
    assert 0 <= line["runs"][0]["handed_s"] <= line["runs"][0]["synced_s"]
    with contextlib.closing(sqlite3.connect(tmp_path / "run-1" / "index.db")) as conn:
        texts = [text for (text,) in conn.execute(
            "SELECT c.text FROM documents d JOIN document_chunks dc ON dc.doc_id = d.id "
            "JOIN chunks c ON c.id = dc.chunk_id WHERE d.path = 'note.txt'")]
    assert texts == [(tmp_path / "run-1" / "root" / "note.txt").read_text().strip()], texts


def test_crash_fuzz_kills_an_offline_index_too_and_at_its_start(tmp_path):
    # crash_fuzz pointed every folder at its simulator: an index built offline (the default mode)
    # was never killed, nor a process before it said a stage (opening, making or upgrading the
    # index). --offline writes no endpoint; --stages start kills up to 1.5 s after the start.
    harbor = BENCH.parent / "tests" / "data" / "harbor"
    out = subprocess.run([sys.executable, str(BENCH / "crash_fuzz.py"), "--offline", "--corpus", str(harbor),
                          "--trials", "1", "--max-kills", "3", "--stages", "start,publishing",
                          "--watch-share", "0", "--keep", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    line = json.loads(out.stdout)
    assert line["offline"] is True and line["mismatches"] == 0 and line["failed_trials"] == []
    said = {"start", "scanning", "extracting", "merging", "summarizing", "clustering", "reporting", "embedding",
            "publishing"}   # (a kill is counted by the stage its process said last)
    assert set(line["kills_by_stage"]) <= said, line
    assert (tmp_path / "t0" / "streamrag.toml").read_text() == ""
    log = (tmp_path / "t0.log").read_text()
    assert "offline" in log and "LLM" not in log.split("Indexed into")[-1].splitlines()[0]


def test_crash_fuzz_names_the_stages_it_may_kill_in():
    from crash_fuzz import stage_list

    assert stage_list("start, publishing") == ("start", "publishing")
    with pytest.raises(argparse.ArgumentTypeError, match="name stages from start, extracting"):
        stage_list("publish")


def test_crash_fuzz_counts_a_chunk_repeated_in_a_document_as_no_duplicate(tmp_path):
    # duplicates() left out every INTEGER column of a primary key, document_chunks' idx too:
    # a file whose text repeats (the same chunk at idx 0 and 1) was a duplicate row, a false
    # alarm on repetitive files. A row id is still left out, and a real duplicate still counted.
    import sqlite3

    from crash_fuzz import duplicates

    db = tmp_path / "i.db"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE documents (id TEXT PRIMARY KEY, path TEXT NOT NULL);
        CREATE TABLE document_chunks (doc_id TEXT NOT NULL, idx INTEGER NOT NULL, chunk_id TEXT NOT NULL,
                                      PRIMARY KEY (doc_id, idx));
        CREATE TABLE runs (n INTEGER PRIMARY KEY, what TEXT);
        INSERT INTO documents VALUES ('doc-1', 'a.txt');
        INSERT INTO document_chunks VALUES ('doc-1', 0, 'chk-same'), ('doc-1', 1, 'chk-same');
        INSERT INTO runs VALUES (1, 'index');""")
    conn.commit()
    assert duplicates(db) == {}
    conn.execute("INSERT INTO runs VALUES (2, 'index')")
    conn.commit()
    conn.close()
    assert duplicates(db) == {"runs": 1}


def test_crash_fuzz_reads_an_index_a_kill_at_the_start_left_unmade(tmp_path):
    # A kill before the index was made (--stages start) ended the bench with a traceback: the
    # cache it reads after each kill ("unable to open database file"), or its tables not there.
    import sqlite3

    from crash_fuzz import cached_keys, intact

    gone, bare = tmp_path / "gone.db", tmp_path / "bare.db"
    sqlite3.connect(bare).close()
    assert cached_keys(gone) == set() and intact(gone) and not gone.exists()
    assert cached_keys(bare) == set() and intact(bare)
