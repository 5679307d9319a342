"""A file over ``index.max_file_mb``: left out unopened, said in one line, the run going on.

Files are small here (the limit is set in fractions of a MB); what is tested is what a user of a
1 GB log gets: the other files indexed, the file named with its size and the setting that takes
it, and that setting, raised, taking it.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from conftest import execute_on, make_settings, schema_before, status_info
from streamrag import loader
from streamrag.errors import ConfigError
from streamrag.pipeline import sync

LOG = "2024-01-02 12:00:01 INFO Mira Osk chaired the Harbor Council in Port Vale.\n"
KB = f"{len(LOG) * 40 / 1024:.1f} KB"   # (40 lines: 2.9 KB)


def test_a_file_over_the_limit_is_refused_unopened_naming_its_size_and_the_setting(tmp_path, monkeypatch):
    big = tmp_path / "logs" / "big.log.txt"
    big.parent.mkdir()
    big.write_text(LOG * 40)
    opened = []
    real_open = Path.open

    def spying(self, *args, **kwargs):
        opened.append(self.name)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", spying)
    with pytest.raises(loader.TooBig) as e:
        loader.read_documents(big, root=tmp_path, max_mb=0.002)   # 2,097 bytes
    assert str(e.value) == (f"logs/big.log.txt: {KB}, over index.max_file_mb (0.002), not indexed; set "
                            "index.max_file_mb = 1 (or 0: no limit) to index it, or add it to index.exclude")
    assert e.value.kind == "too_big" and opened == []
    # At the limit, under it, or with none (0): read as ever.
    for max_mb in (big.stat().st_size / loader.MB, 1, 0):
        [doc], _ = loader.read_documents(big, root=tmp_path, max_mb=max_mb)
        assert doc.text == LOG * 40


def test_the_value_it_names_takes_the_file(tmp_path):
    big = tmp_path / "big.txt"
    with big.open("wb") as f:   # (sparse: 2.5 MB of disk never written)
        f.truncate(5 * loader.MB // 2)
    with pytest.raises(loader.TooBig) as e:
        loader.read_documents(big, root=tmp_path, max_mb=1)
    assert "big.txt: 2.5 MB, over index.max_file_mb (1), not indexed; set index.max_file_mb = 3 " in str(e.value)
    with pytest.raises(loader.InputError, match="binary file"):   # (past the limit: read, as ever)
        loader.read_documents(big, root=tmp_path, max_mb=3)


@pytest.mark.anyio
async def test_a_file_too_big_leaves_the_others_indexed_and_a_raised_setting_takes_it(corpus, tmp_path):
    (corpus / "big.txt").write_text(LOG * 40)
    db = tmp_path / "x.db"

    def settings(max_mb: float):
        return make_settings(index={"chunk_size": 80, "chunk_overlap": 10, "max_file_mb": max_mb})

    with anyio.fail_after(120):
        first = await sync([corpus], settings(0.002), db, root=corpus)
    assert first.documents == 4 and first.failures == 1 and first.unreadable_by_kind == {"unusable": 1}
    [said] = [w for w in first.warnings if "big.txt" in w]
    assert said.startswith(f"big.txt: {KB}, over index.max_file_mb (0.002), not indexed; ")
    info = status_info(db, failures=True)
    assert info["unreadable_by_kind"]["unusable"] == 1 and [f["message"] for f in info["failures"]] == [said]
    # Unchanged, it is said again (as a binary file is), and counted once.
    with anyio.fail_after(60):
        again = await sync([corpus], settings(0.002), db, root=corpus)
    assert again.failures == 1 and said in again.warnings and status_info(db)["failures_total"] == 1
    # The setting raised, the file as it was is read: it was remembered as a failure and said again.
    with anyio.fail_after(60):
        raised = await sync([corpus], settings(1), db, root=corpus)
    assert raised.documents == 5 and raised.failures == 0, raised
    assert not [w for w in raised.warnings if "big.txt" in w]


def _settings(max_mb: float):
    return make_settings(index={"chunk_size": 80, "chunk_overlap": 10, "max_file_mb": max_mb})


@pytest.mark.anyio
async def test_a_reworded_line_is_still_a_file_too_big_read_again_once_the_setting_is_raised(corpus, tmp_path,
                                                                                             monkeypatch):
    # Its failure was told from others by the words of its line: reworded, it was remembered as
    # an unusable file's, not read again while unchanged, and the raised setting found it so.
    (corpus / "big.txt").write_text(LOG * 40)
    db = tmp_path / "x.db"
    monkeypatch.setattr(loader, "too_big_line", lambda label, size, max_mb: f"{label}: too large for the settings")
    with anyio.fail_after(120):
        first = await sync([corpus], _settings(0.002), db, root=corpus)
    assert first.failures == 1 and "big.txt: too large for the settings" in first.warnings
    assert status_info(db)["unreadable_by_kind"]["unusable"] == 1   # (said as before: "could not be used")
    with anyio.fail_after(60):
        raised = await sync([corpus], _settings(1), db, root=corpus)
    assert raised.documents == 5 and raised.failures == 0, raised


@pytest.mark.anyio
async def test_a_failure_recorded_as_unusable_by_an_index_of_before_is_read_as_a_file_too_big(corpus, tmp_path):
    # An index of the streamrag before recorded such a file "unusable", told by its line: the
    # upgrade makes it "too_big" (``store._failures_too_big``), and a raised setting reads it.
    from streamrag.store import Store

    (corpus / "big.txt").write_text(LOG * 40)
    (corpus / "odd.jsonl").write_text('[1, 2]\n')   # (unusable: its failure stays so)
    db = tmp_path / "x.db"
    with anyio.fail_after(120):
        await sync([corpus], _settings(0.002), db, root=corpus)
    execute_on(db, "UPDATE failures SET kind = 'unusable' WHERE item = 'big.txt'")
    execute_on(db, "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(schema_before("failures_too_big")),))
    store = Store(db)
    try:
        kinds = dict(store.conn.execute("SELECT item, kind FROM failures WHERE stage = 'load'"))
    finally:
        store.close()
    assert kinds == {"big.txt": "too_big", "odd.jsonl": "unusable"}
    with anyio.fail_after(60):
        raised = await sync([corpus], _settings(1), db, root=corpus)
    assert raised.documents == 5 and not [w for w in raised.warnings if "big.txt" in w], raised


@pytest.mark.anyio
async def test_a_killed_update_does_not_count_a_file_too_big_unchanged_among_those_it_left_unindexed(corpus,
                                                                                                    tmp_path):
    # A run killed before it published names the new or changed files it was taking, less those
    # its failures say (skipped). A file over the limit is taken each run (a stat says it again,
    # it is never remembered); its failure, recorded "unusable" with the stamp of an earlier run's,
    # was read as one remembered, not taken: the killed run said "2 new or changed files"
    # not indexed, the file too big among them.
    import json
    import signal
    import subprocess
    import sys

    from conftest import clean_env

    (corpus / "big.txt").write_text(LOG * 40)
    db = tmp_path / "x.db"
    index = {"chunk_size": 80, "chunk_overlap": 10, "max_file_mb": 0.002}
    with anyio.fail_after(120):
        await sync([corpus], make_settings(index=index), db, root=corpus)
    (corpus / "new.txt").write_text("The lighthouse keeper, Ada Sorel, logged three ships.\n")
    script = (
        "import json, os, signal, sys, anyio\n"
        "from pathlib import Path\n"
        "from streamrag import index_rows\n"
        "from streamrag.config import load_settings\n"
        "from streamrag.pipeline import Indexer\n"
        "index_rows.publish = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        "settings = load_settings(None, env={}, overrides={'llm': {'api_base': ''}, 'index': json.loads(sys.argv[3])})\n"
        "corpus, db = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "anyio.run(Indexer(settings, db, root=corpus, command='index').run, [corpus])\n")
    killed = subprocess.run([sys.executable, "-c", script, str(corpus), str(db), json.dumps(index)],
                            env=clean_env(), capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    info = status_info(db, failures=True)
    assert info["killed_before_publishing"] is True and info["not_indexed_last_run"] == 1, info
    assert info["not_indexed_files"] == ["new.txt"], info
    assert [f["item"] for f in info["failures"]] == ["big.txt"], info


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_a_negative_limit_is_refused_naming_the_setting(tmp_path, value):
    from streamrag.config import load_settings

    (tmp_path / "streamrag.toml").write_text(f"[index]\nmax_file_mb = {value}\n")
    with pytest.raises(ConfigError, match=r"index\.max_file_mb: must be >= 0 MB \(0 = no limit\); set it to 0 or "
                                          r"more \(its default: max_file_mb = 100.0\)"):
        load_settings(tmp_path / "streamrag.toml", env={})


@pytest.mark.anyio
async def test_status_says_a_file_too_big_is_over_the_setting_not_that_it_could_not_be_used(corpus, tmp_path):
    # status said a file over index.max_file_mb "could not be used", as of a file it cannot
    # read whatever the settings: the setting that takes it went unsaid. --json keeps its count
    # under "unusable", as `index --json` does.
    from streamrag.status import format_status

    (corpus / "big.txt").write_text(LOG * 40)
    (corpus / "odd.jsonl").write_text('[1, 2]\n')   # (unusable whatever the settings)
    db = tmp_path / "x.db"
    with anyio.fail_after(120):
        await sync([corpus], _settings(0.002), db, root=corpus)
    info = status_info(db)
    assert info["unreadable_by_kind"]["unusable"] == 2 and "too_big" not in info["unreadable_by_kind"], info
    [line] = [line for line in format_status(info, db).splitlines() if line.startswith("  last update")]
    assert line.endswith(": ok, but 1 file could not be used, 1 is over index.max_file_mb (raise it to index it)"), \
        line


def test_index_says_a_file_too_big_is_over_the_setting_as_status_says(cli_run, corpus):
    # `index`'s failures line said "2 files could not be used" of a file over index.max_file_mb
    # beside an unusable one, where status (f7baf59) says the one is over the setting, which a
    # raised setting takes. --json keeps its count under "unusable", with too_big apart.
    (corpus / "big.txt").write_text(LOG * 40)
    (corpus / "odd.jsonl").write_text('[1, 2]\n')   # (unusable whatever the settings)
    (corpus / "streamrag.toml").write_text("[index]\nmax_file_mb = 0.002\n")
    done = cli_run("index", ".", cwd=corpus)
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("  failures")]
    assert line.startswith("  failures       2 (1 file could not be used, 1 is over index.max_file_mb "
                           "(raise it to index it)): see "), line
    said = json.loads(cli_run("index", "--json", ".", cwd=corpus).stdout)
    assert said["too_big"] == 1 and said["unreadable_by_kind"] == {"unusable": 2}, said


@pytest.mark.anyio
async def test_status_reads_a_file_too_big_recorded_before_its_kind_as_over_the_setting(corpus, tmp_path):
    # A reader that cannot upgrade an index (read-only media) reads on without failures_too_big,
    # whose rows `status` alone reads apart: it reads such a row by its line, as the step would.
    from streamrag import index_rows
    from streamrag.store import Store

    (corpus / "big.txt").write_text(LOG * 40)
    (corpus / "odd.jsonl").write_text('[1, 2]\n')
    db = tmp_path / "x.db"
    with anyio.fail_after(120):
        await sync([corpus], _settings(0.002), db, root=corpus)
    execute_on(db, "UPDATE failures SET kind = 'unusable' WHERE item = 'big.txt'")   # (as recorded before)
    store = Store(db, readonly=True)
    try:
        runs = [run for run, in store.conn.execute("SELECT id FROM runs")]
        assert index_rows.too_big_failures(store, *runs) == 1
    finally:
        store.close()


@pytest.mark.anyio
async def test_a_killed_run_s_file_too_big_recorded_before_its_kind_is_read_as_over_the_setting(corpus, tmp_path):
    # left_by_killed counts a file over the setting as one the killed run found it could not use
    # (it is read again each run), but one recorded before it had a kind (a reader that cannot
    # upgrade reads on without failures_too_big) as a file named again unchanged: the run's
    # "taking" said big.txt among the files it left unindexed (2, not 1).
    from streamrag import index_rows
    from streamrag.store import Store

    (corpus / "big.txt").write_text(LOG * 40)
    db = tmp_path / "x.db"
    with anyio.fail_after(120):
        await sync([corpus], _settings(0.002), db, root=corpus)
        (corpus / "new.txt").write_text("Mira Osk met Ada Brandt in Port Vale.\n")
        await sync([corpus], _settings(0.002), db, root=corpus)   # (big.txt recorded again, its stamp the same)
    execute_on(db, "UPDATE runs SET status = 'running' WHERE started_at = (SELECT max(started_at) FROM runs)")

    def taking() -> tuple[int, list[str]] | None:
        store = Store(db, readonly=True)
        try:
            [run] = [run for run, in store.conn.execute("SELECT id FROM runs WHERE status = 'running'")]
            return index_rows.left_by_killed(store, run)
        finally:
            store.close()

    marked = taking()
    assert marked == (1, ["new.txt"]), marked
    execute_on(db, "UPDATE failures SET kind = 'unusable' WHERE item = 'big.txt'")   # (as recorded before)
    assert taking() == marked


def test_the_estimate_says_a_file_too_big_is_over_the_setting_as_index_says(cli_run, corpus):
    # The estimate's line said "2 files could not be used" of a file over index.max_file_mb beside
    # an unusable one, where `index` (and status) say the one is over the setting.
    (corpus / "big.txt").write_text(LOG * 40)
    (corpus / "odd.jsonl").write_text('[1, 2]\n')
    (corpus / "streamrag.toml").write_text("[index]\nmax_file_mb = 0.002\n")
    done = cli_run("index", "--estimate", "--offline", ".", cwd=corpus)
    assert done.returncode == 0, done.stderr
    assert "\n1 file could not be used, 1 is over index.max_file_mb (raise it to index it) (not counted); " \
           in done.stdout, done.stdout
    said = json.loads(cli_run("index", "--estimate", "--offline", "--json", ".", cwd=corpus).stdout)
    assert said["too_big"] == 1 and said["unreadable_by_kind"] == {"unusable": 2}, said
