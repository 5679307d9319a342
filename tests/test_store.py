"""The SQLite store, the single writer, and the tokenizer that never needs the network."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from conftest import LINUX_FLOCK, overlapping_readers, schema_before, wal_tries

from streamrag.errors import IndexMissingError, StoreError
from streamrag.store import SCHEMA_VERSION, Store
from streamrag import writer as writer_module
from streamrag.writer import Writer


def test_migrations_run_once_and_reopen_cleanly(tmp_path):
    db = tmp_path / "x.db"
    s = Store(db)
    assert s.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert s.scalar("PRAGMA journal_mode") == "wal"
    s.close()
    s = Store(db)  # no migration re-runs (CREATE TABLE would fail)
    assert s.version == 0
    s.close()


def test_a_delete_writes_no_page_for_each_page_it_frees(tmp_path):
    # Builds of SQLite that zero freed pages (Debian's) wrote one to the WAL for every page a
    # delete freed: a 25 MB file's removal wrote 153 MB, 86 MB without them (493 pages here, 5).
    store = Store(tmp_path / "i.db")
    conn = store.conn
    # FAST (2): what a build does by default is its own (the pages below are zeroed only where
    # it is on), so the setting itself is asserted, on any build
    assert store.scalar("PRAGMA secure_delete") == 2
    conn.execute("CREATE TABLE texts(id INTEGER PRIMARY KEY, text TEXT)")
    conn.executemany("INSERT INTO texts(text) VALUES (?)", [("x" * 40_000,) for _ in range(50)])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    freed = store.scalar("PRAGMA page_count")   # (some 500 pages of text, each a page of overflow)
    conn.execute("DELETE FROM texts WHERE id > 1")   # (a DELETE of every row frees its pages unwritten)
    _, written, _ = conn.execute("PRAGMA wal_checkpoint").fetchone()
    store.close()
    assert freed > 400 and written < freed / 20


def test_the_rows_a_publish_removes_are_found_by_an_index(tmp_path):
    # (claims by chunk and vectors by item were a scan of the table for each 500 removed)
    store = Store(tmp_path / "i.db")
    for table, column in (("files", "path"), ("documents", "id"), ("document_chunks", "doc_id"),
                          ("live_chunks", "chunk_id"), ("extractions", "chunk_id"), ("entity_sources", "chunk_id"),
                          ("relationship_sources", "chunk_id"), ("claims", "chunk_id"), ("entities", "id"),
                          ("relationships", "id"), ("answers", "owner"), ("communities", "id"),
                          ("community_members", "community_id"), ("embeddings", "item_id"), ("reports", "key")):
        plan = store.conn.execute(f"EXPLAIN QUERY PLAN DELETE FROM {table} WHERE {column} IN (?, ?)",
                                  ("a", "b"))
        assert all(row[3].startswith("SEARCH") for row in plan), (table, column)
    store.close()


def test_readers_get_clear_messages(tmp_path):
    with pytest.raises(IndexMissingError, match="streamrag index"):
        Store(tmp_path / "missing.db", readonly=True)
    s = Store(tmp_path / "new.db")
    s.set_meta("schema_version", str(SCHEMA_VERSION + 1))
    s.close()
    with pytest.raises(StoreError, match="newer streamrag"):
        Store(tmp_path / "new.db", readonly=True)


def test_a_reader_sees_one_version_while_a_writer_commits(tmp_path):
    db = tmp_path / "x.db"
    w = Store(db)
    r = Store(db, readonly=True)
    with r.snapshot():
        before = r.scalar("SELECT count(*) FROM llm_cache")
        with w.transaction():
            w.cache_put("k", "m", "{}")
        assert r.scalar("SELECT count(*) FROM llm_cache") == before  # still the old snapshot
    assert r.scalar("SELECT count(*) FROM llm_cache") == before + 1
    r.close()
    w.close()


@pytest.mark.anyio
async def test_writer_batches_and_isolates_a_failing_operation(tmp_path):
    store = Store(tmp_path / "w.db")
    async with Writer(store) as writer:
        async def put(i: int) -> None:
            await writer.run(lambda s, i: s.cache_put(f"k{i}", "m", "r"), i)

        async def bad() -> None:
            with pytest.raises(Exception, match="no such table"):
                await writer.run(lambda s: s.conn.execute("INSERT INTO nope VALUES (1)"))

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(put, i)
            tg.start_soon(bad)
    assert store.scalar("SELECT count(*) FROM llm_cache") == 50
    store.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_tokenizer_loads_without_network_or_cache(tmp_path):
    """The shipped BPE files are enough: no download, no tiktoken cache directory."""
    code = ("import socket\n"
            "def no(*a, **k): raise OSError('network disabled in this test')\n"
            "socket.socket.connect = no\n"
            "socket.create_connection = no\n"
            "from streamrag.tokens import count_tokens, get_encoding\n"
            "assert count_tokens('Hello, Scrooge!') == len(get_encoding('o200k_base').encode('Hello, Scrooge!'))\n"
            "print(count_tokens('Hello, Scrooge!'), count_tokens('Hello', 'cl100k_base'))\n")
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["6", "1"]
    assert not (tmp_path / "empty-cache").exists()


def test_an_older_index_is_migrated_forward(tmp_path):
    import sqlite3

    from streamrag.store import MIGRATIONS, _split_sql

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    for statement in _split_sql(MIGRATIONS[0][1]):
        conn.execute(statement)
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO files(path, doc_id, size, mtime) VALUES ('a.txt', 'doc-1', 3, 1.5)")
    conn.commit()
    conn.close()
    s = Store(db, readonly=True)   # a reader (ask, status) upgrades it too
    assert s.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert s.query("SELECT path, stamp FROM files") == [{"path": "a.txt", "stamp": 1.5}]
    s.close()


@contextlib.contextmanager
def _held_by_another(db, what: str, note: str | None = None):
    """The writer lock of ``db`` held for the block by another process (a lock this one holds is
    its own, under which its reader upgrades), as ``what``, ``note`` on its second line; yields
    its pid."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; from streamrag.store import one_writer\n"
                              "with one_writer(sys.argv[1], sys.argv[2]) as lock:\n"
                              "    lock.note(sys.argv[3] or None); print('held', flush=True); sys.stdin.read()",
                              str(db), what, note or ""],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "held\n"
        yield child.pid
    finally:
        child.communicate("")


def test_a_reader_does_not_upgrade_an_index_an_older_writer_holds(tmp_path):
    # An older `watch` left running across an upgrade: a new `status` upgraded its index, and
    # the daemon failed every sync after ("written by a newer streamrag") until it was stopped.
    from streamrag.config import load_settings
    from streamrag.errors import WriterBusyError
    from streamrag.estimate import estimate

    db = tmp_path / "old.db"
    _old_index(db)
    with _held_by_another(db, "streamrag watch notes") as pid:
        with pytest.raises(WriterBusyError, match=rf"old\.db is being written by another streamrag \(pid {pid}: "
                                                  r"streamrag watch notes\).*older version.*stop it and start it again"):
            Store(db, readonly=True)
        # nor does index --estimate, which spends nothing: it reads an upgraded copy (it refused,
        # as a reader that would upgrade the index does)
        assert estimate([tmp_path], load_settings(None, env={}), db, root=tmp_path)["offline"]
    import sqlite3
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
    conn.close()
    assert _schema_read(db) == str(SCHEMA_VERSION)   # the writer gone, a reader upgrades it


def _older_index(tmp_path: Path) -> Path:
    """A new index at ``tmp_path``/index.db, said to be of the schema before the last step."""
    db = tmp_path / "index.db"
    Store(db).close()
    _one_step_back(db)
    return db


def _schema_read(db: Path) -> str | None:
    """The schema version a reader of ``db`` finds: an older index's, once the reader upgraded it."""
    reader = Store(db, readonly=True)
    try:
        return reader.get_meta("schema_version")
    finally:
        reader.close()


def _one_step_back(db) -> None:
    """The current index at ``db`` said to be of the schema before the last step, which may be
    applied again (``store._chunks_counted``: it counts the chunks it finds uncounted)."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),))


def test_a_writer_upgrading_the_index_says_so_to_readers_and_writers_that_meet_it(tmp_path, monkeypatch):
    # An `index` (or `watch`) that holds the writer lock while it upgrades the index: a reader
    # was told "if that one is an older version (a `watch` left running across an upgrade),
    # stop it and start it again", and one that met its write lock "another streamrag may be
    # upgrading it". The lock file says "upgrading" meanwhile, and each says what is under way.
    import streamrag
    import streamrag.store as store_module
    from conftest import upgrade_held
    from streamrag.errors import StoreBusyError, WriterBusyError
    from streamrag.store import lock_path, one_writer

    db = _older_index(tmp_path)
    index = ("db = Path(sys.argv[1])\n"
             "with store.one_writer(db, 'streamrag index notes'):\n"
             "    store.Store(db).close()\n")
    with upgrade_held(tmp_path, index, str(db)) as child:
        holder = f"pid {child.process.pid}: streamrag index notes"
        assert lock_path(db).read_text() == f"{holder}\nupgrading to schema {SCHEMA_VERSION}\n"
        with pytest.raises(WriterBusyError) as refused:
            Store(db, readonly=True)
        assert str(refused.value) == (f"{db} is being upgraded for this streamrag by another ({holder}; once, and "
                                      "an upgrade of a large index takes a while); run this again once it is done")
        monkeypatch.setattr(store_module, "_BUSY_S", 0)
        with pytest.raises(StoreBusyError, match=re.escape(f"; another streamrag ({holder}) is upgrading it (an "
                                                           "upgrade of a large index takes a while): run the "
                                                           "command again once it is done") + "$"):
            Store(db)   # (one that may write meets its write lock)
        with pytest.raises(WriterBusyError, match=re.escape(f"({holder}), which is upgrading it (an upgrade of "
                                                            "a large index takes a while); stop that one first")):
            with one_writer(db, "streamrag index notes"):
                pass
    assert child.process.returncode == 0, child.err
    assert child.out.strip() == streamrag.__file__   # (this checkout's streamrag)
    reader = Store(db, readonly=True)   # (done: read)
    assert reader.get_meta("schema_version") == str(SCHEMA_VERSION)
    reader.close()


def test_vacuum_upgrades_an_older_index_under_its_writer_lock_saying_so(tmp_path):
    # `vacuum` looked at the index as a reader before it took the writer lock, and that look
    # upgraded an older index: no "upgrading" in the lock meanwhile (a reader was left to wait on
    # the write lock, an `index` started then to begin its own upgrade). It upgrades under the
    # lock now, as `index` and `watch` do, and vacuums the upgraded index.
    import streamrag
    from conftest import upgrade_held

    db = _older_index(tmp_path)
    vacuum = ("from streamrag.cli import main\n"
              "sys.exit(main(['vacuum', '--db', sys.argv[1]]))\n")
    with upgrade_held(tmp_path, vacuum, str(db)) as child:
        holder = f"pid {child.process.pid}: streamrag vacuum"
        _upgrading_said(db, holder)
    assert child.process.returncode == 0, child.err
    assert child.out.splitlines()[0] == streamrag.__file__   # (this checkout's streamrag)
    assert child.out.splitlines()[1].startswith(f"{db}: ")   # (vacuumed)
    assert _schema_read(db) == str(SCHEMA_VERSION)


def _upgrading_said(db: Path, holder: str) -> None:
    """The writer lock of ``db`` says ``holder`` upgrades it, and a reader is told so."""
    from streamrag.errors import WriterBusyError
    from streamrag.store import lock_path

    assert lock_path(db).read_text() == f"{holder}\nupgrading to schema {SCHEMA_VERSION}\n"
    with pytest.raises(WriterBusyError, match=re.escape(f"is being upgraded for this streamrag by another "
                                                        f"({holder}; once")):
        Store(db, readonly=True)


def test_a_writer_that_has_not_yet_opened_an_older_index_says_it_will_upgrade_it(tmp_path):
    # `index` takes the writer lock, then opens the index (0.15 s later), which upgrades it: a
    # reader meanwhile found the lock with no note and advised stopping the writer as "an older
    # version". The lock says "upgrading" from the moment it is taken.
    db = _older_index(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", "import sys; from streamrag.store import Store, one_writer\n"
                              "with one_writer(sys.argv[1], 'streamrag index notes'):\n"
                              "    print('held', flush=True); sys.stdin.readline(); Store(sys.argv[1]).close()\n"
                              "    print(open(sys.argv[1] + '.lock').read(), end='', flush=True)",
                              str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "held\n"
        holder = f"pid {child.pid}: streamrag index notes"
        _upgrading_said(db, holder)
    finally:
        out, _ = child.communicate("go\n", timeout=60)
    assert child.returncode == 0
    assert out == f"{holder}\n"   # (upgraded: the note gone with it)
    assert _schema_read(db) == str(SCHEMA_VERSION)


def test_an_upgrade_said_as_the_writer_lock_is_taken_is_unsaid_when_another_made_it_first(tmp_path):
    # A reader of no lock (`status`) may upgrade the index after the writer found it older:
    # its Store, finding nothing to upgrade, takes the note back, and a note of its own stays.
    import sqlite3

    from streamrag.store import lock_path, one_writer

    db = _older_index(tmp_path)
    for note in (None, "updating since 1.000: 2 files"):
        with one_writer(db, "streamrag watch notes") as lock:
            holder = f"pid {os.getpid()}: streamrag watch notes\n"
            assert lock_path(db).read_text() == f"{holder}upgrading to schema {SCHEMA_VERSION}\n"
            with contextlib.closing(sqlite3.connect(db)) as conn, conn:   # (upgraded by another)
                conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            if note:
                lock.note(note)
            Store(db).close()
            assert lock_path(db).read_text() == holder + (f"{note}\n" if note else "")
        _one_step_back(db)


def test_the_writer_lock_names_its_holder_while_its_writer_looks_at_the_schema(tmp_path, monkeypatch):
    # `take` looked at the index's schema (to say "upgrading" from the start) with the lock held
    # and its file cut to nothing, until the look ended (0.5 to 10 ms, where a cut and a write take
    # microseconds): a second writer meeting it then was refused by "another process", and a
    # reader of the older index was told to stop it as "an older version". It looks first.
    import streamrag.store as store_module
    from streamrag.store import lock_path, one_writer, writer_at_work

    db = _older_index(tmp_path)
    seen = []
    real = store_module.older_schema

    def looking(path):
        seen.append(writer_at_work(db))   # (what a reader or writer meeting the lock then finds)
        return real(path)

    monkeypatch.setattr(store_module, "older_schema", looking)
    lock_path(db).write_text("pid 999999: streamrag watch notes\n")   # (left by a writer killed -9)
    with one_writer(db, "streamrag index notes"):
        assert lock_path(db).read_text() == (f"pid {os.getpid()}: streamrag index notes\n"
                                             f"upgrading to schema {SCHEMA_VERSION}\n")
    assert seen == [None]


def test_an_upgrade_another_process_made_that_its_log_alone_holds_is_not_said_under_way(tmp_path):
    # The look at the schema as the writer lock is taken read the index file alone (immutable),
    # so an index another process had upgraded, its write-ahead log not yet folded in (the file
    # at the schema before, the log at this one), was judged older: the lock said "upgrading"
    # until the writer's Store opened, and a second writer meeting it was told "which is
    # upgrading it". With a -wal holding writes and a -shm beside it, it reads through the log.
    import sqlite3

    from streamrag.errors import WriterBusyError
    from streamrag.store import committed_schema, lock_path, one_writer

    db = _older_index(tmp_path)
    held = sqlite3.connect(db)   # (the other process, at work: its log not folded in at its close)
    try:
        held.execute("SELECT 1 FROM meta").fetchone()
        with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as other:
            other.execute("PRAGMA wal_autocheckpoint = 0")
            other.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)) as file_alone:
            assert file_alone.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
                str(SCHEMA_VERSION - 1),)
        beside = {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in tmp_path.iterdir()}
        assert beside["index.db-wal"][0] > 0 and "index.db-shm" in beside
        assert committed_schema(db) == SCHEMA_VERSION
        with one_writer(db, "streamrag index notes"):
            assert lock_path(db).read_text() == f"pid {os.getpid()}: streamrag index notes\n"
            with pytest.raises(WriterBusyError) as busy:
                with one_writer(db, "streamrag vacuum"):
                    pass
            assert "upgrading" not in str(busy.value), busy.value
        lock_path(db).unlink()
        # (read with nothing made or changed beside it: the log and the file as they were)
        assert {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in tmp_path.iterdir()
                if f.name != "index.db-shm"} == {n: v for n, v in beside.items() if n != "index.db-shm"}
    finally:
        held.close()
    assert committed_schema(db) == SCHEMA_VERSION   # (folded in)


def test_the_committed_schema_is_the_file_s_where_its_log_cannot_be_read_making_nothing(tmp_path):
    # A -wal with no -shm beside it (or one that is a folder): a reader's connection would make
    # the -shm, so the file alone is read, as unchanging, and nothing is made.
    import sqlite3

    from streamrag.store import committed_schema

    db = _older_index(tmp_path)
    code = ("import sqlite3, sys, time\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('PRAGMA wal_autocheckpoint = 0')\n"
            f"c.execute(\"UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'\")\n"
            "print('upgraded', flush=True)\n"
            "time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "upgraded\n"
    finally:
        child.kill()   # (killed -9: its -wal and -shm left)
        child.wait()
        child.stdout.close()
    assert committed_schema(db) == SCHEMA_VERSION   # (read through the log it left)
    Path(f"{db}-shm").unlink()
    names = sorted(f.name for f in tmp_path.iterdir())
    assert committed_schema(db) == SCHEMA_VERSION - 1
    Path(f"{db}-shm").mkdir()
    assert committed_schema(db) == SCHEMA_VERSION - 1
    Path(f"{db}-shm").rmdir()
    assert sorted(f.name for f in tmp_path.iterdir()) == names
    with contextlib.closing(sqlite3.connect(db)) as conn:   # (the log read in by a writer: all there)
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            str(SCHEMA_VERSION),)


def test_a_writer_whose_upgrade_meets_a_write_lock_does_not_name_itself_as_the_upgrader(tmp_path, monkeypatch):
    # An `index` holding the writer lock notes "upgrading" in it as its upgrade begins; when the
    # upgrade's first write then found another program's write lock held throughout, it read its
    # own note and was told "another streamrag (pid <its own>: streamrag index notes) is upgrading it".
    import os

    import streamrag.store as store_module
    from streamrag.errors import StoreBusyError
    from streamrag.store import one_writer

    db = _older_index(tmp_path)
    monkeypatch.setattr(store_module, "_BUSY_S", 0)
    holder = _hold_write_lock(db)
    try:
        with one_writer(db, "streamrag index notes"):
            with pytest.raises(StoreBusyError) as refused:
                Store(db)
    finally:
        holder.close()
    assert f"pid {os.getpid()}" not in str(refused.value)
    assert str(refused.value).endswith("; another streamrag may be upgrading it (an upgrade of a large index takes "
                                       "a while): run the command again once it is done")


@pytest.mark.parametrize("upgrader", ["this", "newer", "older"])
def test_a_reader_is_told_which_streamrag_upgrades_the_index_and_what_to_do(tmp_path, upgrader):
    # The writer's note names the schema it upgrades to: this streamrag's, a newer one's (this one
    # cannot read the index once it is done) or an older one's (it would have to upgrade it
    # further under that writer). The newer and older wordings were tested by none, said "this
    # one reads 32" where the newer index's refusal says "this one knows 32", and "(pid N:
    # streamrag watch notes: to schema 33, ...)" with two colons.
    import sqlite3

    from streamrag.errors import WriterBusyError
    from streamrag.store import upgrading_note

    to = {"this": SCHEMA_VERSION, "newer": SCHEMA_VERSION + 1, "older": SCHEMA_VERSION - 1}[upgrader]
    at = str(min(to, SCHEMA_VERSION) - 1)   # (the index the writer upgrades: a schema before its)
    db = tmp_path / "index.db"
    Store(db).close()
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (at,))
    with _held_by_another(db, "streamrag watch notes", upgrading_note(to)) as pid:
        with pytest.raises(WriterBusyError) as refused:
            Store(db, readonly=True)
    holder = f"pid {pid}: streamrag watch notes"
    assert str(refused.value) == {
        "this": f"{db} is being upgraded for this streamrag by another ({holder}; once, and an upgrade of a large "
                "index takes a while); run this again once it is done",
        "newer": f"{db} is being upgraded by a newer streamrag ({holder}; to schema {to}, this one knows "
                 f"{SCHEMA_VERSION}), which this one cannot read once it is done; upgrade streamrag",
        "older": f"{db} is being upgraded by an older streamrag ({holder}; to schema {to}, this one knows "
                 f"{SCHEMA_VERSION}), and this one would have to upgrade it further while that one writes it: stop "
                 "that one and start it again with this version; then run this again",
    }[upgrader]
    with contextlib.closing(sqlite3.connect(db)) as conn:   # (nothing written)
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (at,)


def test_an_upgrade_under_the_writer_lock_leaves_its_note_as_it_was(tmp_path):
    # The lock's note (a watch's "updating since ...", read by `ask`) is its own again after.
    from streamrag.store import lock_path, one_writer

    db = _older_index(tmp_path)
    with one_writer(db, "streamrag watch notes") as lock:
        lock.note("updating since 1.000: 2 files")
        Store(db).close()
        assert lock_path(db).read_text().splitlines()[1:] == ["updating since 1.000: 2 files"]
        Store(db).close()   # (nothing to upgrade: nothing noted)
        assert lock.noted == "updating since 1.000: 2 files"


def test_a_reader_in_the_process_holding_the_writer_lock_upgrades_under_it(tmp_path, monkeypatch):
    # `watch` reads the index (is it a model's?) once it holds the writer lock: a reader of an
    # older index there refused it as "being written by another streamrag (pid <its own>...)".
    # The lock is its own: it upgrades the index under it, saying so there meanwhile.
    import streamrag.store as store_module
    from streamrag.store import lock_path, one_writer

    db = _older_index(tmp_path)
    name, real = store_module.MIGRATIONS[-1]
    seen = []

    def step(conn):
        seen.append(lock_path(db).read_text())
        real(conn)

    monkeypatch.setattr(store_module, "MIGRATIONS", [*store_module.MIGRATIONS[:-1], (name, step)])
    with one_writer(db, "streamrag watch notes"):
        assert _schema_read(db) == str(SCHEMA_VERSION)
        assert lock_path(db).read_text() == f"pid {os.getpid()}: streamrag watch notes\n"
    assert seen == [f"pid {os.getpid()}: streamrag watch notes\nupgrading to schema {SCHEMA_VERSION}\n"]


@pytest.mark.parametrize("case, reads", [
    ("every used chunk counted", True),
    ("an unused chunk uncounted", True),   # (the step leaves it: the run that cuts it again counts it)
    ("a used chunk uncounted", False),
    ("failure keys stale", False),         # (made again as the upgrade ends)
    ("two steps short", False),            # (failure_keys_guarded has no proof of nothing)
    # (failures_too_big makes it "too_big", which its one reader apart reads by the line too: an
    # index left on read-only media by the streamrag before was refused by ask and status)
    ("a file too big told by its line", True),
    ("another file unusable", True),
    ("a failed check told by its error", False),   # (llm_calls_apart marks it apart)
    ("a check refused by its model", True),
])
def test_a_reader_that_cannot_upgrade_reads_on_only_where_the_upgrade_changes_nothing(tmp_path, monkeypatch,
                                                                                        case, reads):
    import hashlib
    import sqlite3

    import streamrag.store as store_module

    db = tmp_path / "index.db"
    Store(db).close()
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("INSERT INTO chunks(id, text, tokens, encoding) VALUES ('chk-a', 'a', 1, 'o200k_base'), "
                     "('chk-b', 'b', 1, ?)", (None if case == "an unused chunk uncounted" else "o200k_base",))
        conn.execute("INSERT INTO document_chunks(doc_id, idx, chunk_id) VALUES ('doc-1', 0, 'chk-a')")
        if case == "a used chunk uncounted":
            conn.execute("UPDATE chunks SET encoding = NULL WHERE id = 'chk-a'")
        if case == "failure keys stale":
            conn.execute("INSERT INTO meta(key, value) VALUES ('failure_keys_stale', '1')")
        if case in ("a file too big told by its line", "another file unusable"):
            said = ("big.txt: 2.5 MB, over index.max_file_mb (1), not indexed; set index.max_file_mb = 3 (or 0: "
                    "no limit) to index it, or add it to index.exclude") if case.endswith("line") else \
                "odd.jsonl: no JSON object, not indexed"
            conn.execute("INSERT INTO failures(run_id, stage, item, message, created_at, stamp, kind) "
                         "VALUES ('r', 'load', 'big.txt', ?, 0, '1 2', 'unusable')", (said,))
        if case.endswith("check told by its error") or case.endswith("refused by its model"):
            said = "HTTP 503: loading" if case.endswith("error") else "HTTP 404: model m not found"
            conn.execute("INSERT INTO llm_calls(run_id, stage, model, prompt, prompt_version, cache_key, "
                         "prompt_tokens, completion_tokens, latency_ms, cached, error, created_at) VALUES "
                         "('r', 'model_check', 'm', '', '', 'k', 0, 0, 1.0, 0, ?, 0)", (f"http://x/v1/chat/completions: {said}",))
        # (the steps from chunks_encoding_counted on, each with its proof; one more: failure_keys_guarded)
        back = SCHEMA_VERSION - schema_before("chunks_encoding_counted") + (case == "two steps short")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION - back),))
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    _write_protected(monkeypatch)
    monkeypatch.setattr(store_module, "_read_only_here", lambda path: "the file is read-only to you")
    if reads:
        store = Store(db, readonly=True)
        assert store.query("SELECT id, tokens FROM chunks ORDER BY id") == [{"id": "chk-a", "tokens": 1},
                                                                           {"id": "chk-b", "tokens": 1}]
        store.close()
    else:
        with pytest.raises(StoreError, match=f"made by an older streamrag \\(schema {SCHEMA_VERSION - back}, "
                                             r".*must be upgraded once, which cannot be done where it lies"):
            Store(db, readonly=True)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_the_failed_checks_recorded_before_llm_calls_apart_that_refused_nothing_are_marked_apart(tmp_path):
    # A failed check of a model by name that cannot have been a refusal (no answer, a page, a
    # 5xx) is no failed call of index's and watch's; one of HTTP 400, 404 or 422 may have been
    # the model refused, and stays counted among the errors, as it was.
    import sqlite3

    db = tmp_path / "index.db"
    Store(db).close()
    said = ["no answer to the check of m: connection failed", "HTTP 500: busy",
            "HTTP 200: the answer to the check of m holds no choices", "HTTP 404: model m not found",
            "HTTP 400: The model `m` does not exist", "HTTP 422: unknown model m"]
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.executemany("INSERT INTO llm_calls(run_id, stage, model, prompt, prompt_version, cache_key, "
                         "prompt_tokens, completion_tokens, latency_ms, cached, error, created_at) VALUES "
                         "('r', ?, 'm', '', '', 'k', 0, 0, 1.0, 0, ?, 0)",
                         [("model_check", f"http://x/v1/chat/completions: {s}") for s in said]
                         + [("extract", "http://x/v1/chat/completions: HTTP 500: busy"), ("model_check", None)])
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(schema_before("llm_calls_apart")),))
    store = Store(db)
    try:
        marked = [r["apart"] for r in store.query("SELECT apart FROM llm_calls ORDER BY id")]
    finally:
        store.close()
    assert marked == [1, 1, 1, 0, 0, 0, 0, 0]


def test_the_step_to_llm_calls_apart_makes_no_index_of_every_call_again(tmp_path):
    # It dropped and made again llm_calls_usage and llm_calls_failed with the column: the
    # index's write lock held 2.3 s at 200,000 calls (the table itself is not written again:
    # the column is added in place). The rows apart have a small index of their own now
    # (0.17 s), and `status` takes them off the usage it reads from llm_calls_usage.
    import sqlite3

    db = tmp_path / "index.db"
    Store(db).close()
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        for index in ("llm_calls_usage", "llm_calls_failed", "llm_calls_apart"):
            conn.execute(f"DROP INDEX IF EXISTS {index}")
        conn.execute("ALTER TABLE llm_calls DROP COLUMN apart")
        conn.execute("CREATE INDEX llm_calls_usage ON llm_calls(stage, model, cached, cancelled, prompt_tokens, "
                     "completion_tokens, error)")   # (as the schema before made them)
        conn.execute("CREATE INDEX llm_calls_failed ON llm_calls(cached, cancelled, error) WHERE error IS NOT NULL")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(schema_before("llm_calls_apart")),))
    indexes = "SELECT name, sql, rootpage FROM sqlite_master WHERE name IN ('llm_calls_usage', 'llm_calls_failed')"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        before = sorted(conn.execute(indexes).fetchall())
    store = Store(db)
    try:
        after = sorted(store.conn.execute(indexes).fetchall())
        apart = store.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'llm_calls_apart'")
    finally:
        store.close()
    assert after == before and apart == 1, after


def _schema_one_index_with_rows(db) -> None:
    """An index of schema 1 (``_old_index``) holding a row or two of what the steps after change:
    a file, a document and its chunk (counted by the last step), runs with failures of each kind
    a step infers, calls, a cached answer."""
    import sqlite3

    _old_index(db)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("INSERT INTO files(path, doc_id, size, mtime) VALUES ('a.txt', 'doc-1', 40, 1.5)")
        conn.execute("INSERT INTO documents(id, title, path, tokens, chars) VALUES ('doc-1', 'a', 'a.txt', 9, 40)")
        conn.execute("INSERT INTO chunks(id, text, tokens) VALUES ('chk-1', 'Mira Osk chaired the harbor council.', 3)")
        conn.execute("INSERT INTO document_chunks(doc_id, idx, chunk_id) VALUES ('doc-1', 0, 'chk-1')")
        conn.execute("INSERT INTO live_chunks(chunk_id, extractor) VALUES ('chk-1', 'nlp-1')")
        conn.execute("INSERT INTO chunks_fts(id, text) VALUES ('chk-1', 'Mira Osk chaired the harbor council.')")
        conn.execute("INSERT INTO runs(id, command, started_at, finished_at, status, stats) VALUES "
                     "('r1', 'index', 1, 2, 'failed', '{\"not_indexed\": 1}'), ('r2', 'index', 3, 4, 'ok', NULL)")
        conn.executemany("INSERT INTO failures(run_id, stage, item, message, created_at) VALUES (?,?,?,?,?)", [
            ("r1", "load", "b.bin", "b.bin: binary file, not indexed", 1),
            ("r1", "extract", "chk-1", "the model failed", 1),
            ("r2", "load", "c.txt", "c.txt: cannot read (Permission denied)", 3),
            ("r2", "report", "C1", "no answer", 3)])
        conn.execute("INSERT INTO llm_calls(run_id, stage, model, prompt, prompt_version, cache_key, prompt_tokens, "
                     "completion_tokens, latency_ms, cached, error, created_at) "
                     "VALUES ('r2', 'report', 'm', 'report', 'v', 'k', 10, 5, 1.0, 0, 'x: the client gave up: y', 3)")
        conn.execute("INSERT INTO llm_cache(key, model, response, created_at) VALUES ('k', 'm', '{}', 3)")


def _every_row(db) -> dict:
    """The schema and every row of every table of the index at ``db``, to compare two by."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:
        tables = [name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {"schema": sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
                                 key=repr),
                **{t: sorted(conn.execute(f"SELECT * FROM \"{t}\"").fetchall(), key=repr) for t in tables}}


def test_an_upgrade_stopped_in_any_step_leaves_the_index_as_the_step_before_left_it(tmp_path, monkeypatch):
    # Each step commits with its version, one at a time; the first two cannot be applied twice
    # (a second "ALTER TABLE files RENAME COLUMN mtime" fails). One index is taken through every
    # step: stopped in it (its writes made, not committed), the index is as the step before left
    # it, every row and the schema (a step is atomic); then the next open applies it, and it
    # alone. Taken so to the end, the index is as an upgrade that was never stopped leaves it.
    # (Each step applied once, not every step before each stop again: 33 opens, not 528.)
    import sqlite3

    import streamrag.store as store_module
    from streamrag.store import MIGRATIONS, _split_sql
    from streamrag.tokens import count_tokens

    class Stopped(Exception):
        pass

    db = tmp_path / "stopped.db"
    _schema_one_index_with_rows(db)
    whole = tmp_path / "whole.db"
    shutil.copy(db, whole)
    Store(whole).close()
    want = _every_row(whole)
    text = "Mira Osk chaired the harbor council."
    assert want["failure_keys"] and want["chunks"] == [   # (the steps had rows to change)
        ("chk-1", text, count_tokens(text, "o200k_base"), "o200k_base")]
    for number in range(2, SCHEMA_VERSION + 1):
        name, real = MIGRATIONS[number - 1]

        def stopped(conn, real=real):
            for statement in ([] if callable(real) else _split_sql(real)):
                conn.execute(statement)
            if callable(real):
                real(conn)
            raise Stopped

        before = _every_row(db)
        with monkeypatch.context() as m:
            m.setattr(store_module, "MIGRATIONS",
                      [*MIGRATIONS[:number - 1], (name, stopped), *MIGRATIONS[number:]])
            with pytest.raises(Stopped):
                Store(db)
        assert _every_row(db) == before, name
        with monkeypatch.context() as m:   # (the next open, this step the last it knows)
            m.setattr(store_module, "MIGRATIONS", MIGRATIONS[:number])
            Store(db).close()
        with contextlib.closing(sqlite3.connect(db)) as conn:
            assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(number),)
    assert _every_row(db) == want


@pytest.mark.parametrize("step", [2, 3, SCHEMA_VERSION])
@pytest.mark.parametrize("at", ["its end", "its version", "its commit"])
def test_an_upgrade_killed_in_a_step_is_finished_by_the_next_open(tmp_path, step, at):
    # As above, killed (no rollback run, the process gone mid-transaction): in the second step,
    # which cannot be applied twice, in the one after it, and in the last; at the end of its
    # work, or as its version is written (after its work: were the two committed apart, the
    # next open would apply the step again); or between two steps, at the first statement after
    # its commit (the next open goes on from the step after it).
    import sqlite3

    import streamrag

    start = tmp_path / "start.db"
    _schema_one_index_with_rows(start)
    whole = tmp_path / "whole.db"
    shutil.copy(start, whole)
    Store(whole).close()
    db = tmp_path / "killed.db"
    shutil.copy(start, db)
    script = ("import os, sys, streamrag\n"
              "from streamrag import store\n"
              "print(streamrag.__file__, flush=True)\n"
              "n = int(sys.argv[2])\n"
              "name, real = store.MIGRATIONS[n - 1]\n"
              "def killed(conn):\n"
              "    for statement in ([] if callable(real) else store._split_sql(real)):\n"
              "        conn.execute(statement)\n"
              "    if callable(real):\n"
              "        real(conn)\n"
              "    if sys.argv[3] == 'its end':\n"
              "        os._exit(3)\n"
              "    committed = []\n"
              "    def kill(sql):\n"
              "        if sys.argv[3] == 'its version' and 'schema_version' in sql or committed:\n"
              "            os._exit(3)\n"
              "        committed.extend(['COMMIT'] if sql == 'COMMIT' else [])\n"
              "    conn.set_trace_callback(kill)\n"
              "store.MIGRATIONS[n - 1] = (name, killed)\n"
              "store.Store(sys.argv[1]).conn.execute('SELECT 1')\n")   # (after the last step's commit)
    out = subprocess.run([sys.executable, "-c", script, str(db), str(step), at], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 3, out.stderr
    assert out.stdout.strip() == streamrag.__file__   # (this checkout's streamrag)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            str(step if at == "its commit" else step - 1),)
    Store(db).close()
    assert _every_row(db) == _every_row(whole)


# -- one file: the WAL is folded into index.db when the last connection closes ----------------
def _side_files(db) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name.startswith(db.name + "-"))


def _rows_in_copy(db, tmp_path, sql: str) -> list:
    """``sql`` run on a copy of the main file alone (what copying index.db by hand gives)."""
    import shutil
    import sqlite3

    copy = tmp_path / "copy" / "index.db"
    copy.parent.mkdir(exist_ok=True)
    copy.unlink(missing_ok=True)
    shutil.copyfile(db, copy)
    conn = sqlite3.connect(copy)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _built(tmp_path):
    db = tmp_path / "idx" / "index.db"
    s = Store(db)
    with s.transaction():
        s.set_meta("version", "1")
    s.close()
    assert _side_files(db) == []  # a writer closing last already cleans up
    return db


def test_a_read_only_session_leaves_only_the_main_file(tmp_path):
    """status/export open the index read-only; such a connection creates -wal/-shm and, on its
    own, cannot remove them when it closes last."""
    db = _built(tmp_path)
    r = Store(db, readonly=True)
    with r.snapshot():
        assert r.version == 1
    assert _side_files(db)  # open in WAL mode: the side files exist meanwhile
    r.close()
    assert _side_files(db) == []
    r.close()  # twice is harmless


def test_a_session_that_wrote_is_all_in_the_main_file(tmp_path):
    """ask with a model: a reader is open, a writer logs the run and closes first, then the
    reader; a copy of index.db alone must hold the run."""
    db = _built(tmp_path)
    r = Store(db, readonly=True)
    w = Store(db)
    with w.transaction():
        w.start_run("ask-1", "ask")
    with r.snapshot():
        assert r.version == 1
    with w.transaction():
        w.finish_run("ask-1", "ok", "{}")
    w.close()
    assert _side_files(db)  # the reader still has it open
    r.close()
    assert _side_files(db) == []
    assert _rows_in_copy(db, tmp_path, "SELECT id, command, status FROM runs") == [
        ("ask-1", "ask", "ok")]


def test_a_connection_of_this_process_outside_store_keeps_the_wal(tmp_path):
    import sqlite3

    db = _built(tmp_path)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("INSERT INTO runs(id, command, started_at, status) VALUES ('o1', 'x', 0, 'ok')")
    other.execute("BEGIN")
    assert other.execute("SELECT count(*) FROM runs").fetchone() == (1,)  # a read snapshot
    r = Store(db, readonly=True)
    assert r.scalar("SELECT count(*) FROM runs") == 1
    r.close()
    assert _side_files(db)  # `other` is open: nothing folded, nothing deleted under it
    assert other.execute("SELECT count(*) FROM runs").fetchone() == (1,)
    other.execute("COMMIT")
    other.execute("INSERT INTO runs(id, command, started_at, status) VALUES ('o2', 'x', 0, 'ok')")
    other.close()
    assert _side_files(db) == []
    assert _rows_in_copy(db, tmp_path, "SELECT id FROM runs ORDER BY id") == [("o1",), ("o2",)]


def test_index_empties_the_log_after_its_publish_though_queries_never_leave_a_gap(corpus, tmp_path, monkeypatch):
    # Only `watch` emptied it: an `index` run by cron next to such queries left the log growing
    # by every version published (a 200-document folder: 1 MB a run, 7 MB after 6, and on).
    from streamrag import cli, store as store_module

    monkeypatch.setattr(store_module, "WAL_BOUND", 1)   # (64 MiB: every run here)
    db = tmp_path / "i.db"
    wal = Path(f"{db}-wal")
    index = ["index", str(corpus), "--offline", "-q", "--json", "--db", str(db)]
    assert cli.main(index) == 0
    sizes = []
    with overlapping_readers(db, busy_s=0) as (_longest, errors):   # (kept waiting: an error)
        time.sleep(0.3)
        for n in range(2):
            with (corpus / "council.txt").open("a") as f:
                f.write(f"\nAt meeting {n} Mayor Ines Duarte named Pilot Arvo Kesk to the harbor board.\n")
            assert cli.main(index) == 0
            sizes.append(wal.stat().st_size if wal.exists() else 0)
    assert not errors                 # no reader waited for it (not timed: a wait is an error)
    assert sizes == [0, 0]            # emptied after each run's publish


@contextlib.contextmanager
def _queries_and_a_writer(db: Path, query_s: float, readers: int, write_every: float):
    """``readers`` connections reading in snapshots of ``query_s`` one after another, staggered,
    and a writer (an ``ask`` recording its calls: it waits 2 s for the lock, no more) writing a
    row every ``write_every`` s. Yields the writer's errors; stopped on leaving."""
    import sqlite3
    import threading

    stop = threading.Event()
    errors: list[BaseException] = []

    def reader(k: int) -> None:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
        time.sleep(k * query_s / readers)
        while not stop.is_set():
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM t").fetchone()
            time.sleep(query_s)
            conn.execute("COMMIT")
        conn.close()

    def writer() -> None:
        conn = sqlite3.connect(db, isolation_level=None, timeout=2)
        while not stop.is_set():
            try:
                conn.execute("INSERT INTO t VALUES (randomblob(100))")
            except sqlite3.OperationalError as e:
                errors.append(e)
            time.sleep(write_every)
        conn.close()

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(readers)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)   # (all of them under way)
        yield errors
    finally:
        stop.set()
        for t in threads:
            t.join()


def _logged(db: Path) -> None:
    """A database in WAL mode of 2 MB in its log, never folded in by SQLite itself."""
    import sqlite3

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t(x)")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.executemany("INSERT INTO t VALUES (randomblob(10000))", [()] * 200)
    conn.close()


def test_the_log_is_emptied_under_queries_while_a_writer_writes_between_tries(tmp_path):
    # Tries of 0.1 s, the lock free 0.2 s between them (so that an ask records its answer):
    # the writer wrote in every pause, the queries begun after it read from the log, and every
    # try found one of them: not emptied in 6 s (3.9 MB left); one wait holding the lock, 0.9 s.
    from streamrag import store as store_module

    db = tmp_path / "q.db"
    _logged(db)
    with _queries_and_a_writer(db, query_s=0.5, readers=4, write_every=0.15) as errors:
        began = time.monotonic()
        emptied = store_module.empty_wal(db, 6.0)
        took = time.monotonic() - began
    assert emptied and Path(f"{db}-wal").stat().st_size < 100_000, took   # (2 MB, and the writer's since)
    assert not errors   # and the writer never gave up (a try holds the lock 1.5 s at most)


def test_under_queries_longer_than_a_try_the_log_is_emptied_all_the_same(tmp_path, monkeypatch):
    # Queries of 1 s one after another outlast any try short enough for a writer (up to 2 s
    # from the last write): with a write in every pause, the log was never emptied. After
    # EMPTY_PATIENT_S (5 s; 1.5 here) the rest of the wait is one try: the log stays bounded.
    from streamrag import store as store_module

    monkeypatch.setattr(store_module, "EMPTY_PATIENT_S", 1.5)
    db = tmp_path / "l.db"
    _logged(db)
    with _queries_and_a_writer(db, query_s=1.0, readers=4, write_every=0.5):
        began = time.monotonic()
        emptied = store_module.empty_wal(db, 6.0)
        took = time.monotonic() - began
    assert emptied and Path(f"{db}-wal").stat().st_size < 100_000, took


def test_a_stop_ends_the_copying_of_a_large_log_at_once(tmp_path):
    # The copying that goes first (wal_checkpoint(PASSIVE)) did not look at the stop: a log of
    # 300 MB took 2.4 s to copy, and watch's stop (``Daemon._end_emptying``) waited for it.
    import sqlite3
    import threading

    from streamrag import store as store_module

    db = tmp_path / "big.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t(x)")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.executemany("INSERT INTO t VALUES (randomblob(1000000))", [()] * 120)   # (kept open: its
    try:                                                                             # close folds the log)
        stop = threading.Event()

        def stop_once_copying() -> None:   # (the main file grows page by page as the log is copied)
            while not stop.is_set():
                if db.stat().st_size > 2e6:
                    stop.set()
                time.sleep(0.001)

        threading.Thread(target=stop_once_copying, daemon=True).start()
        assert not store_module.empty_wal(db, 30.0, stop)
        # The copying (0.2-1 s) was ended when the stop came, not waited out: told by what it
        # copied into the main file, not by timing it. A copy run to its end leaves the main file
        # as large as the log's 120 MB. (A stop at a set time was met after 72 MB on a fast
        # disk: the stop was looked at every 50 ms, and is now waited on.)
        assert db.stat().st_size < 60e6, db.stat().st_size
        assert Path(f"{db}-wal").stat().st_size > 100e6   # (not emptied)
        assert store_module.empty_wal(db, 30.0)   # and a later try copies it all
    finally:
        conn.close()


def test_index_says_when_a_reader_kept_the_log_from_being_emptied(corpus, tmp_path, monkeypatch, capsys):
    # A snapshot left open (a notebook, a stopped process) outlasts the wait: the run is
    # published all the same, and the warning names the log and its size. It said "tried again
    # at the next index run", but nothing was remembered: every later run waited the whole
    # 30 s again for the same reader. Now its size is noted in the index, and the next try is
    # once the log has doubled, as under `watch`; the reader gone, it is emptied at the next run.
    import sqlite3

    from streamrag import cli

    tried = wal_tries(monkeypatch)
    db = tmp_path / "h.db"
    wal = Path(f"{db}-wal")
    index = ["index", str(corpus), "--offline", "-q", "--json", "--db", str(db)]
    assert cli.main(index) == 0
    held = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    errs = []
    try:
        held.execute("BEGIN")
        held.execute("SELECT count(*) FROM entities").fetchone()   # and never ends
        pad = sqlite3.connect(db, isolation_level=None)   # (a log that one run does not double)
        pad.execute("INSERT INTO meta(key, value) VALUES ('pad', hex(randomblob(2000000)))")
        pad.close()
        capsys.readouterr()
        for n in range(2):
            with (corpus / "guild.txt").open("a") as f:
                f.write(f"\nIn season {n} Guild Master Tomas Ruud hired Net Maker Ilse Varn.\n")
            assert cli.main(index) == 0
            out, err = capsys.readouterr()
            errs.append(err)
            assert json.loads(out)["published"]
        kept = tried[-1]
    finally:
        held.close()
    warning = [line for line in errs[0].splitlines() if "write-ahead log" in line]
    assert warning == [f"streamrag: warning: {db}-wal, the index's write-ahead log, is {kept / 1e6:.0f} MB: "
                       "readers kept it from being emptied for 0 s (queries that overlap without a gap, or "
                       "a program holding the index open in one snapshot); tried again once it is twice as large"]
    assert len(tried) == 1, tried              # the next run, the log not doubled, did not wait again
    assert "write-ahead log" not in errs[1]
    # The reader gone and the log started over since (emptied by another program, or folded in
    # by the last connection to close): the failure is forgotten, and the next run empties it.
    other = sqlite3.connect(db, isolation_level=None)
    try:
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (corpus / "new.txt").write_text("Net Maker Ilse Varn sailed to Port Vell.\n")
        assert cli.main(index) == 0
        assert "write-ahead log" not in capsys.readouterr().err
        assert len(tried) == 2 and wal.stat().st_size < 20_000   # (emptied; then the note deleted)
        assert other.execute("SELECT count(*) FROM meta WHERE key = 'wal_tried'").fetchone() == (0,)
    finally:
        other.close()


_HOLDER = """
import sys
import time
from streamrag.store import Store
s = Store(sys.argv[1])
with s.transaction():
    s.start_run("w-1", "watch")
s.conn.execute("BEGIN IMMEDIATE")         # a write in progress, not committed yet
s.finish_run("w-1", "ok")
print("writing", flush=True)
sys.stdin.readline()
s.conn.execute("COMMIT")
print("idle", flush=True)
sys.stdin.readline()
with s.transaction():
    s.start_run("w-2", "watch")
s.close()
print("closed", flush=True)
"""


@contextlib.contextmanager
def _never_kept_waiting_by(holder: subprocess.Popen, guard_s: float = 60):
    """Fails the block if it was still running after ``guard_s``: kept waiting for ``holder``'s
    lock (the test makes such a wait an hour), which is then ended by killing ``holder``."""
    import threading

    fired: list[bool] = []
    timer = threading.Timer(guard_s, lambda: (fired.append(True), holder.kill()))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
    assert not fired, f"kept waiting {guard_s} s for the other process"


def test_another_process_holding_the_index_open_is_never_blocked_nor_loses_a_write(tmp_path, monkeypatch):
    """Like `streamrag watch` or a running `index` in another process: status (read-only) and
    ask (reader + writer) close without waiting for it or disturbing it; the WAL stays while it
    is open, and when it closes last everything it and they committed is in the main file.
    A wait for its lock here lasts an hour (not 30 s), and meets the guard; not timed."""
    from streamrag import store as store_module

    monkeypatch.setattr(store_module, "_BUSY_S", 3600)
    db = _built(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "writing"
        with _never_kept_waiting_by(holder):
            r = Store(db, readonly=True)                    # status, during the other's write
            assert r.scalar("SELECT status FROM runs WHERE id = 'w-1'") == "running"
            r.close()
        assert _side_files(db)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "idle"
        with _never_kept_waiting_by(holder):
            r = Store(db, readonly=True)                    # ask, while the other is open
            w = Store(db)
            with w.transaction():
                w.start_run("ask-1", "ask")
            w.close()
            assert r.scalar("SELECT count(*) FROM runs") == 2
            r.close()
        assert _side_files(db)  # the other process still has it open
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "closed"
        assert holder.wait(timeout=30) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert _side_files(db) == []
    assert _rows_in_copy(db, tmp_path, "SELECT id, status FROM runs ORDER BY id") == [
        ("ask-1", "running"), ("w-1", "ok"), ("w-2", "running")]


def test_a_path_with_uri_characters_opens_read_only(tmp_path):
    db = tmp_path / "a?b#c%20d" / "index.db"
    s = Store(db)
    s.close()
    r = Store(db, readonly=True)
    assert r.version == 0
    r.close()
    assert _side_files(db) == []


# -- files that are not a usable index: one line naming the file and what to do ---------------
def _old_index(db, *, wal: bool = False) -> None:
    """An index of schema 1, as an older streamrag left it (in WAL mode, as streamrag writes
    them: one that may not be written failed with a raw sqlite3 error mid-upgrade)."""
    import sqlite3

    from streamrag.store import MIGRATIONS, _split_sql

    conn = sqlite3.connect(db)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    for statement in _split_sql(MIGRATIONS[0][1]):
        conn.execute(statement)
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '1')")
    conn.commit()
    conn.close()


def _write_protected(monkeypatch) -> None:
    """Every connection opened for writing gets a read-only one, as SQLite does (silently) for
    a file the user may not write (tests run as root, so chmod cannot show it)."""
    import sqlite3

    from streamrag.store import _uri_path

    real = sqlite3.connect

    def connect(database, *args, uri=False, **kwargs):
        if not uri:
            database, uri = f"{_uri_path(Path(database))}?mode=ro", True
        return real(database, *args, uri=uri, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)


def _bad_index(case: str, db, monkeypatch) -> None:
    import sqlite3

    if case == "an empty file":
        db.write_bytes(b"")
    elif case == "another program's database":
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        conn.commit()
        conn.close()
    elif case == "a newer schema":
        s = Store(db)
        s.set_meta("schema_version", str(SCHEMA_VERSION + 1))
        s.close()
    elif case.startswith("an older schema it may not upgrade"):
        _old_index(db, wal="WAL" in case)
        _write_protected(monkeypatch)
    elif case == "not a database":
        db.write_bytes(b"title,text\nHarbor,Mira Osk chaired the council.\n" * 200)
    elif case == "damaged":
        Store(db).close()
        data = bytearray(db.read_bytes())
        page_size = int.from_bytes(data[16:18], "big")
        data[100:page_size] = b"\xa5" * (page_size - 100)   # the schema page, past its header
        db.write_bytes(bytes(data))


_SAYS = {   # what each case's message says to do
    "an empty file": r"holds no index yet; run `streamrag index DIR`",
    # (It said "holds no index yet; run `streamrag index DIR`", which then refused it.)
    "another program's database": r"an SQLite database that is not a streamrag index \(it holds other "
                                  r"tables\); give --db \(or store.path\) a new file, or an index's",
    "a newer schema": r"written by a newer streamrag .*; upgrade streamrag",
    # (It said "cannot be upgraded here (read-only?); run `streamrag index DIR` once", which
    # cannot run where the index lies either.)
    "an older schema it may not upgrade":
        r"made by an older streamrag \(schema 1, .*\) and must be upgraded once, which cannot be done where "
        r"it lies \(the index is read-only to you\); copy it to a folder you may write and open the copy once",
    "an older schema it may not upgrade, in WAL mode":
        r"made by an older streamrag \(schema 1, .*\) and must be upgraded once, which cannot be done where "
        r"it lies \(the index is read-only to you\); copy it to a folder you may write and open the copy once",
    # (It said "or remove this one" of what was most likely a document given as --db.)
    "not a database": r"not a streamrag index \(not an SQLite database: some other file\); give --db \(or "
                      r"store.path\) the index's file, or a path where none is yet",
    "damaged": r"damaged \(.*malformed.*\); remove it and run `streamrag index DIR`",
}


@pytest.mark.parametrize("case", list(_SAYS))
def test_a_file_that_is_no_usable_index_is_named_in_one_line_with_the_fix(tmp_path, monkeypatch, case):
    # status, ask and export open the index read-only: what they meet is said in one line (the
    # CLI prints it after "streamrag: error:"), never as an sqlite3 traceback.
    db = tmp_path / "index.db"
    _bad_index(case, db, monkeypatch)
    with pytest.raises((IndexMissingError, StoreError)) as caught:
        Store(db, readonly=True)
    message = str(caught.value)
    assert "\n" not in message and str(db) in message, message
    assert re.search(_SAYS[case], message), message


def test_the_writer_lock_is_taken_again_when_its_file_went_with_the_folder(tmp_path):
    # `rm -rf DIR/.streamrag` under a running watch: the next `index` made a new lock file,
    # locked it and wrote beside the daemon.
    from streamrag.errors import StoreBusyError
    from streamrag.store import WriterLock

    db = tmp_path / ".streamrag" / "index.db"
    first = WriterLock(db, "streamrag watch .")
    first.take()
    second = WriterLock(db, "streamrag index .")
    with pytest.raises(StoreBusyError, match=r"\(pid \d+: streamrag watch \.\); stop that one first"):
        second.take()
    shutil.rmtree(tmp_path / ".streamrag")
    first.check()                      # the daemon's next sync: its lock file is back, locked
    with pytest.raises(StoreBusyError, match="keeps the index current"):
        second.take()
    first.release()
    second.take()                      # free once the first lets go
    with pytest.raises(StoreBusyError, match=r"streamrag index \.\); stop that one first \(or wait for it"):
        WriterLock(db, "streamrag watch .").take()
    second.release()


@pytest.mark.parametrize("holder, advice", [
    ("streamrag watch .", "stop that watch first and start it again after the vacuum, or vacuum later; "
                          "the index stays usable meanwhile"),
    ("streamrag index .", "vacuum once it has finished; the index stays usable meanwhile")])
def test_a_vacuum_turned_away_is_told_what_to_do_about_a_vacuum(tmp_path, holder, advice):
    # It was given index's advice: "a running `streamrag watch` keeps the index current on its
    # own ... or give this run its own index with --db".
    from streamrag.errors import WriterBusyError
    from streamrag.store import WriterLock

    db = tmp_path / "index.db"
    first = WriterLock(db, holder)
    first.take()
    try:
        with pytest.raises(WriterBusyError) as caught:
            WriterLock(db, "streamrag vacuum").take()
    finally:
        first.release()
    assert str(caught.value) == (f"{db} is being written by another streamrag (pid {os.getpid()}: {holder}); "
                                 f"{advice}")


def test_a_reader_looking_at_the_writer_lock_does_not_turn_a_writer_away(tmp_path):
    # A reader that looks by taking the lock shared for a moment (an older streamrag's
    # writer_at_work): an index starting just then exited 75,
    # naming a process long dead (the lock file's last line).
    import fcntl
    import threading

    from streamrag.store import lock_path, one_writer

    db = tmp_path / "i.db"
    lock = lock_path(db)
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("pid 1: streamrag index gone\n")
    f = open(lock)
    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
    threading.Timer(0.03, f.close).start()   # (closing lets it go)
    with one_writer(db, "streamrag index notes"):
        assert "streamrag index notes" in lock.read_text()


@pytest.mark.parametrize("proc_locks", [True, False])
def test_the_writer_at_work_is_told_without_taking_the_lock(tmp_path, monkeypatch, proc_locks):
    # `status --json` could not tell a script whether an index or watch was alive: after
    # kill -9 of index its last run stays "running"; while watch runs it is its last sync.
    import fcntl

    from streamrag.store import WriterLock, lock_path, writer_at_work, writer_said

    def writer_of(db):   # (as `status` says it)
        with pytest.MonkeyPatch.context() as m:   # not even a shared lock for a moment
            m.setattr(fcntl, "flock", lambda *a: pytest.fail("the lock was taken to look"))
            return writer_said(writer_at_work(db))

    if not proc_locks:   # (no /proc/locks: whether the pid the file names is alive)
        real_open = open
        monkeypatch.setattr("builtins.open", lambda f, *a, **k: (_ for _ in ()).throw(
            FileNotFoundError(f)) if f == "/proc/locks" else real_open(f, *a, **k))
    db = tmp_path / ".streamrag" / "index.db"
    assert writer_of(db) is None                              # never written
    lock = WriterLock(db, "streamrag watch .")
    lock.take()
    assert writer_of(db) == {"pid": os.getpid(), "command": "watch"}
    lock.release()
    assert writer_of(db) is None                              # released: the file is emptied
    # kill -9: the line stays in the file, the lock went with the process
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    lock_path(db).write_text(f"pid {gone}: streamrag index .\n")
    assert writer_of(db) is None
    if proc_locks:   # the lock is what counts, not a live pid in the file (a pid used again)
        lock_path(db).write_text(f"pid {os.getpid()}: streamrag index .\n")
        assert writer_of(db) is None


@pytest.mark.skipif(sys.platform != "linux", reason="Linux's struct flock and open file description locks")
def test_without_proc_the_writer_lock_is_asked_not_guessed_from_a_live_pid(tmp_path, monkeypatch):
    # Without /proc (macOS) the writer was named while the pid its line names was alive: a writer
    # killed with -9 whose pid another process was given was named still, and its run said under
    # way. There fcntl's F_GETLK tells whether the lock is held, taking none: macOS's kernel says
    # a flock there (one list of locks for both); Linux's only fcntl's, so here an open file
    # description's lock (another owner than this process, l_pid -1, as macOS says a flock) stands
    # for the writer's flock.
    import fcntl
    import struct

    from streamrag import store as store_module
    from streamrag.store import lock_path, writer_at_work, writer_said

    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: (_ for _ in ()).throw(
        FileNotFoundError(f)) if f == "/proc/locks" else real_open(f, *a, **k))
    monkeypatch.setattr(store_module, "_FLOCK_QUERY", LINUX_FLOCK)

    def writer_of(db):
        with pytest.MonkeyPatch.context() as m:   # (not taken to look)
            m.setattr(fcntl, "flock", lambda *a: pytest.fail("the lock was taken to look"))
            m.setattr(fcntl, "lockf", lambda *a: pytest.fail("the lock was taken to look"))
            return writer_said(writer_at_work(db))

    db = tmp_path / "i.db"
    lock = lock_path(db)
    lock.write_text(f"pid {os.getpid()}: streamrag index .\n")   # a live pid (another's now), no lock
    assert writer_of(db) is None
    held = open(lock, "r+")
    try:
        form, names = LINUX_FLOCK
        fields = {"type": fcntl.F_WRLCK, "whence": os.SEEK_SET, "start": 0, "len": 0, "pid": 0}
        fcntl.fcntl(held, fcntl.F_OFD_SETLK, struct.pack(form, *(fields[n] for n in names)))
        assert writer_of(db) == {"pid": os.getpid(), "command": "index"}
    finally:
        held.close()   # (lets it go)
    assert writer_of(db) is None


def _within(seconds, main):
    """Runs ``anyio.run(main)`` in a thread; fails instead of hanging the suite when it hangs."""
    import threading

    outcome: dict = {}

    def target():
        try:
            outcome["value"] = anyio.run(main)
        except BaseException as e:  # noqa: BLE001 - re-raised below, in the test's thread
            outcome["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: a caller waits forever"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _hold_write_lock(db):
    import sqlite3

    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def _stopped_wait_said(line: str) -> float:
    """The seconds a write stopped while it waited for the lock says it waited (``busy_error``)."""
    found = re.search(r"stayed locked by another process for ([0-9.]+) s", line)
    assert found, line
    return float(found.group(1))


def _locked_store(tmp_path, monkeypatch, busy_s: float):
    """A store whose writes wait ``busy_s`` for a lock, and another program holding it."""
    import streamrag.store as store_module

    monkeypatch.setattr(store_module, "_BUSY_S", busy_s)
    store = Store(tmp_path / "index.db")
    return store, _hold_write_lock(tmp_path / "index.db")


def test_waiting_for_another_programs_write_lock_leaves_the_event_loop_running(tmp_path, monkeypatch):
    # SQLite's own busy wait blocked the loop for up to 30 s: no signal, no timer, no stream went on.
    from streamrag.errors import StoreBusyError

    store, holder = _locked_store(tmp_path, monkeypatch, 1)
    ticks = []

    async def main():
        async with Writer(store) as writer:
            async with anyio.create_task_group() as tg:
                async def tick():
                    while True:
                        await anyio.sleep(0.05)
                        ticks.append(1)
                tg.start_soon(tick)
                with pytest.raises(StoreBusyError, match="stayed locked by another process for 1 s"):
                    await writer.run(lambda s: s.set_meta("k", "v"))
                holder.execute("ROLLBACK")
                await writer.run(lambda s: s.set_meta("k", "v"))   # free again: it goes through
                tg.cancel_scope.cancel()

    try:
        _within(20, main)
    finally:
        holder.close()
    assert len(ticks) >= 10, len(ticks)
    assert store.get_meta("k") == "v"
    store.close()


def test_a_write_lock_held_through_an_index_upgrade_says_an_upgrade_may_be_under_way(tmp_path, monkeypatch, capsys):
    # A step of an upgrade over every chunk of a large index holds the write lock longer than a
    # write waits (30 s): a command started meanwhile, reader or writer, was told "if another
    # streamrag is writing it, let it finish, else stop the program holding it", as if something
    # were stuck. With the schema on disk older than this streamrag's, it says an upgrade may be
    # under way. (The lock is another connection's here, and the wait none, not 30 s.)
    import streamrag.store as store_module
    from streamrag import cli
    from streamrag.errors import StoreBusyError

    monkeypatch.setattr(store_module, "_BUSY_S", 0)
    db = tmp_path / "index.db"
    Store(db).close()
    upgrading = (re.escape(f"{db} stayed locked by another process for 0 s") + r".*; another streamrag may be "
                 r"upgrading it \(an upgrade of a large index takes a while\): run the command again once it is done$")
    holder = _hold_write_lock(db)
    try:
        store = Store(db)   # (a current index: the holder is writing it, said as before)
        with pytest.raises(StoreBusyError, match="let it finish, else stop the program holding it$") as held:
            with store.transaction():
                store.set_meta("k", "v")
        assert "upgrading" not in str(held.value)
        store.close()
        holder.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),))
        holder.execute("COMMIT")   # (an upgrade's step committed, the next one begun)
        holder.execute("BEGIN IMMEDIATE")
        for readonly in (True, False):   # (`ask` and `status` upgrade it as `index` does)
            with pytest.raises(StoreBusyError, match=upgrading):
                Store(db, readonly=readonly)
        capsys.readouterr()
        assert cli.main(["status", "--db", str(db)]) == 1
        said = capsys.readouterr().err.strip().splitlines()
        assert len(said) == 1 and re.search(upgrading, said[0]), said
    finally:
        holder.close()
    store = Store(db)   # (the lock let go: upgraded)
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    store.close()


def test_a_write_begun_or_refused_keeps_the_wait_its_connection_had(tmp_path, monkeypatch):
    # try_begin and busy_error (asking whether an upgrade is due) waited for no lock for a moment,
    # then set the wait to _BUSY_S's: a connection's own wait (here _BUSY_S changed after it was
    # opened, as a test or an embedding program does) was lost after the first write.
    import streamrag.store as store_module

    db = tmp_path / "index.db"
    store = Store(db)
    monkeypatch.setattr(store_module, "_BUSY_S", 3600)
    store.conn.execute("PRAGMA busy_timeout = 1234")
    holder = _hold_write_lock(db)
    try:
        assert store.try_begin() is False
        assert store.conn.execute("PRAGMA busy_timeout").fetchone() == (1234,)
        assert "let it finish" in str(store.busy_error())
        assert store.conn.execute("PRAGMA busy_timeout").fetchone() == (1234,)
    finally:
        holder.close()
    assert store.try_begin() is True
    store.conn.execute("ROLLBACK")
    assert store.conn.execute("PRAGMA busy_timeout").fetchone() == (1234,)
    store.close()


def test_a_begin_that_fails_otherwise_than_busy_fails_its_callers_and_the_writer_goes_on(tmp_path, monkeypatch):
    import sqlite3

    db = tmp_path / "index.db"
    store = Store(db)
    real = store.try_begin
    failures = iter([sqlite3.OperationalError("disk I/O error")])

    def try_begin():
        for e in failures:
            raise e
        return real()

    monkeypatch.setattr(store, "try_begin", try_begin)

    async def main():
        async with Writer(store) as writer:
            with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
                await writer.run(lambda s: s.set_meta("first", "1"))
            await writer.run(lambda s: s.set_meta("second", "2"))

    _within(20, main)
    assert store.get_meta("first") is None and store.get_meta("second") == "2"
    store.close()


def test_an_op_interrupted_halfway_commits_none_of_its_writes(tmp_path):
    class Interrupted(BaseException):
        pass

    db = tmp_path / "index.db"
    store = Store(db)
    calls = []

    def half_done(s):
        calls.append(1)
        s.set_meta("half", "written")
        raise Interrupted

    async def main():
        async with Writer(store) as writer:
            await writer.run(half_done)

    with pytest.raises(BaseException) as caught:
        _within(20, main)
    assert caught.group_contains(Interrupted) if isinstance(caught.value, BaseExceptionGroup) \
        else isinstance(caught.value, Interrupted)
    assert calls == [1]                       # not run a second time on the way out
    assert store.get_meta("half") is None     # rolled back, not committed by a later write
    store.close()


def test_a_writer_cancelled_while_it_waits_for_the_lock_commits_what_it_was_given(tmp_path):
    # Ctrl-C while another program holds the lock: the op taken from the queue (a paid answer)
    # is neither lost nor left with its caller waiting forever; it commits once the lock is
    # free. So does a shielded cleanup write (like finish_run) sent during that wait: it was
    # queued, then thrown away with the stream, and its caller hung.
    import threading

    db = tmp_path / "index.db"
    store = Store(db)
    holder = _hold_write_lock(db)
    returned = []

    async def main():
        with anyio.CancelScope() as scope:
            async with Writer(store) as writer:
                async def caller():
                    try:
                        await writer.run(lambda s: s.set_meta("paid", "answer"))
                    finally:   # returned, or cancelled once the op committed: not hung
                        returned.append("caller")
                async def cleanup():
                    try:
                        await anyio.sleep_forever()
                    finally:
                        with anyio.CancelScope(shield=True):
                            await anyio.sleep(0.1)   # the writer is in its shielded wait by now
                            await writer.run(lambda s: s.set_meta("cleanup", "done"))
                            returned.append("cleanup")
                async with anyio.create_task_group() as tg:
                    tg.start_soon(caller)
                    tg.start_soon(cleanup)
                    await anyio.sleep(0.3)
                    threading.Timer(0.6, holder.rollback).start()
                    scope.cancel()

    try:
        _within(20, main)
    finally:
        holder.close()
    assert sorted(returned) == ["caller", "cleanup"]
    assert store.get_meta("paid") == "answer" and store.get_meta("cleanup") == "done"
    store.close()


def test_a_transaction_left_open_on_the_write_connection_is_not_joined(tmp_path):
    # An interrupted BEGIN or a failed ROLLBACK can leave a transaction open. Joining it told
    # callers "committed" while nothing was: their writes vanished with the connection.
    db = tmp_path / "index.db"
    store = Store(db)
    store.conn.execute("BEGIN IMMEDIATE")
    store.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('leftover', 'x')")

    async def main():
        async with Writer(store) as writer:
            await writer.run(lambda s: s.set_meta("paid", "answer"))

    _within(20, main)
    assert not store.conn.in_transaction
    store.close()
    reopened = Store(db)
    assert reopened.get_meta("paid") == "answer" and reopened.get_meta("leftover") is None
    reopened.close()


@pytest.mark.anyio
async def test_ops_of_one_batch_fail_alone_in_one_transaction(tmp_path):
    # Each op runs in a savepoint: a failing op is undone alone, the others commit with it in
    # one transaction (a retry op by op took the lock once per op, each wait up to 30 s).
    store = Store(tmp_path / "index.db")
    begins = []
    real = store.try_begin
    store.try_begin = lambda: begins.append(1) or real()

    def bad(s):
        s.set_meta("bad", "half")
        raise ValueError("bad op")

    async with Writer(store) as writer:
        results = {}

        async def call(name, fn):
            try:
                results[name] = await writer.run(fn)
            except ValueError as e:
                results[name] = str(e)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "a", lambda s: s.set_meta("a", "1") or "ok")
            tg.start_soon(call, "bad", bad)
            tg.start_soon(call, "b", lambda s: s.set_meta("b", "2") or "ok")
    assert results == {"a": "ok", "bad": "bad op", "b": "ok"}
    assert (store.get_meta("a"), store.get_meta("bad"), store.get_meta("b")) == ("1", None, "2")
    assert len(begins) == 1
    store.close()


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["disk full", "commit refused"])
async def test_a_batch_whose_whole_transaction_is_lost_fails_every_caller(tmp_path, how):
    # SQLite gives a whole transaction up on a full disk, and a COMMIT can fail: then no op of
    # the batch was kept, and every caller must hear so, not "committed".
    import sqlite3

    store = Store(tmp_path / "index.db")
    if how == "disk full":
        pages = store.scalar("PRAGMA page_count")

        def middle(s):
            s.conn.execute(f"PRAGMA max_page_count = {pages + 3}")
            for i in range(2000):
                s.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (f"big{i}", "y" * 3000))
    else:
        store.conn.execute("CREATE TABLE parent(id INTEGER PRIMARY KEY)")
        store.conn.execute("CREATE TABLE child(pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
        store.conn.execute("PRAGMA foreign_keys = ON")

        def middle(s):
            s.conn.execute("INSERT INTO child VALUES (99)")   # refused only at COMMIT
    outcome = {}

    async def call(name, fn):
        try:
            await writer.run(fn)
            outcome[name] = "committed"
        except sqlite3.Error:
            outcome[name] = "failed"

    async with Writer(store) as writer:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "a", lambda s: s.set_meta("a", "1"))
            tg.start_soon(call, "middle", middle)
            tg.start_soon(call, "b", lambda s: s.set_meta("b", "2"))
        store.conn.execute("PRAGMA max_page_count = 1073741823")
        store.conn.execute("PRAGMA foreign_keys = OFF")
        await writer.run(lambda s: s.set_meta("next", "3"))   # the writer goes on
    assert outcome == {"a": "failed", "middle": "failed", "b": "failed"}
    assert (store.get_meta("a"), store.get_meta("b"), store.get_meta("next")) == (None, None, "3")
    store.close()


def test_an_interrupted_op_during_the_shutdown_drain_does_not_strand_later_ops(tmp_path):
    # A second Ctrl-C (a BaseException) inside an op the cancelled writer drains stopped the
    # drain: an op sent meanwhile stayed in the closed stream and its caller hung.
    import threading

    class Interrupted(BaseException):
        pass

    def interrupted(s):
        raise Interrupted

    db = tmp_path / "index.db"
    store = Store(db)
    holder = _hold_write_lock(db)
    outcome = {}

    async def main():
        with anyio.CancelScope() as scope:
            async with Writer(store) as writer:
                async def call(name, fn, delay=0.0):
                    with anyio.CancelScope(shield=True):
                        await anyio.sleep(delay)
                        try:
                            await writer.run(fn)
                            outcome[name] = "committed"
                        except Interrupted:
                            outcome[name] = "interrupted"
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call, "first", lambda s: s.set_meta("first", "1"))
                    await anyio.sleep(0.05)
                    tg.start_soon(call, "interrupted", interrupted)
                    tg.start_soon(call, "after", lambda s: s.set_meta("after", "1"), 0.2)
                    await anyio.sleep(0.05)
                    threading.Timer(0.4, holder.rollback).start()
                    scope.cancel()

    try:
        with pytest.raises(BaseException):
            _within(20, main)
    finally:
        holder.close()
    assert outcome["after"] == "committed" and store.get_meta("after") == "1"
    assert outcome["interrupted"] == "interrupted"
    store.close()


def test_a_caller_stopped_while_its_write_waits_for_a_lock_waits_2_s_more_at_most(tmp_path, monkeypatch,
                                                                                   caplog):
    # Ctrl-C during `index` while another program held the lock: the writer task itself is not
    # cancelled, so the write (start_run) waited out its whole busy wait, 30 s, then the run's
    # finish_run 30 s more; Ctrl-C did nothing meanwhile.
    from streamrag.errors import StoreBusyError

    store, holder = _locked_store(tmp_path, monkeypatch, 3600)
    monkeypatch.setattr(writer_module, "_STOPPING_WAIT_S", 0.5)   # (2 s: the same, shorter)
    outcome = []

    async def main():
        async with Writer(store) as writer:
            with anyio.CancelScope() as caller:
                async with anyio.create_task_group() as tg:
                    async def stop_soon():
                        await anyio.sleep(0.3)
                        caller.cancel()
                    tg.start_soon(stop_soon)
                    try:
                        await writer.run(lambda s: s.set_meta("run", "started"))
                    except StoreBusyError as e:   # (the stop is what the caller gets back)
                        outcome.append(str(e))
            outcome.append(caller.cancelled_caught)

    try:
        _within(60, main)
    finally:
        holder.close()
    assert outcome == [True]   # stopped, as asked: a Ctrl-C was lost when the error came back instead
    said = [r.getMessage() for r in caplog.records if "stopped before this could be written" in r.getMessage()]
    # (its 0.5 s from the stop, not the lock's hour: at least that, more on a loaded machine,
    # whose late wake-ups said 0.9 s of a nominal 0.85 under load 13, and "1 s" failed the 0.[5-9] it had)
    assert len(said) == 1 and 0.5 <= _stopped_wait_said(said[0]) < 3600, said
    assert store.get_meta("run") is None
    store.close()


@pytest.mark.parametrize("when", ["queued", "after the writer ended"])
def test_a_stopped_writer_does_not_wait_out_another_programs_lock(tmp_path, monkeypatch, when, caplog):
    # A second Ctrl-C must stop at once: the shutdown drain waited the whole busy wait (here an
    # hour) for a lock another program kept. So did a shielded cleanup write (finish_run) sent
    # once the writer task had ended, which runs in its caller. Now what cannot be written
    # within 2 s fails, said so.
    from streamrag.errors import StoreBusyError

    store, holder = _locked_store(tmp_path, monkeypatch, 3600)
    monkeypatch.setattr(writer_module, "_STOPPING_WAIT_S", 0.5)   # (2 s: the same, shorter)
    outcome = []

    async def write():
        try:
            await writer.run(lambda s: s.set_meta("paid", "answer"))
        except StoreBusyError as e:
            outcome.append(str(e))

    async def main():
        nonlocal writer
        with anyio.CancelScope() as scope:
            async with Writer(store) as writer:
                if when == "queued":
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(write)
                        await anyio.sleep(0.3)
                        scope.cancel()
                else:
                    try:
                        scope.cancel()
                        await anyio.sleep(1)
                    finally:
                        with anyio.CancelScope(shield=True):
                            await anyio.sleep(0.05)   # the writer task ends
                            await write()

    writer = None
    try:
        _within(60, main)
    finally:
        holder.close()
    if when == "queued":   # its caller was stopped: what was not written is said
        outcome = [r.getMessage() for r in caplog.records
                   if "stopped before this could be written" in r.getMessage()]
    assert len(outcome) == 1 and 0.5 <= _stopped_wait_said(outcome[0]) < 3600, outcome   # (see above)
    assert store.get_meta("paid") is None
    store.close()


@pytest.mark.parametrize("writer_at_work", [False, True])
def test_an_index_in_a_folder_the_reader_may_not_write_is_read_as_it_is(tmp_path, monkeypatch, writer_at_work):
    """A reader of a WAL database makes index.db-shm beside it, which it cannot in a read-only
    folder (a read-only mount, another user's index): SQLite says SQLITE_READONLY_DIRECTORY,
    and `status`, `ask` and `export` called a whole index "no index yet". With no write-ahead
    log to take in, the file is read as it is; while a writer has one, one line says so. Tests
    run as root, so a read-only folder cannot show it: the connections say what SQLite does."""
    import sqlite3

    db = tmp_path / "index.db"
    s = Store(db)
    s.set_meta("version", "3")
    s.close()
    if writer_at_work:
        Path(f"{db}-wal").write_bytes(b"\0" * 32)

    class NoShm(sqlite3.Connection):
        def execute(self, sql, *args):
            if sql.startswith("PRAGMA"):   # settings of the connection: the file is not read
                return super().execute(sql, *args)
            error = sqlite3.OperationalError("attempt to write a readonly database")
            error.sqlite_errorname = "SQLITE_READONLY_DIRECTORY"
            raise error

    real, opened = sqlite3.connect, []

    def connect(database, *args, uri=False, **kwargs):
        opened.append(str(database))
        if uri and "immutable=1" not in str(database):
            kwargs["factory"] = NoShm
        return real(database, *args, uri=uri, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    if writer_at_work:
        with pytest.raises(StoreError, match="its folder is read-only to you, and a write-ahead log lies "
                                             "beside it"):
            Store(db, readonly=True)
        return
    reader = Store(db, readonly=True)
    try:
        assert reader.get_meta("version") == "3"
        assert opened[-1].endswith("?mode=ro&immutable=1")
    finally:
        reader.close()


def _reader_refused_at_first_read(monkeypatch, db, errorname: str, message: str) -> Store:
    """A reader of ``db`` whose first read fails as SQLite fails it where the reader cannot make
    the -shm file (``errorname``), then falls back as ``store._readable`` does."""
    import sqlite3

    s = Store(db)
    s.set_meta("version", "3")
    s.close()

    class Refused(sqlite3.Connection):
        def execute(self, sql, *args):
            if sql.startswith("PRAGMA"):   # settings of the connection: the file is not read
                return super().execute(sql, *args)
            error = sqlite3.OperationalError(message)
            error.sqlite_errorname = errorname
            raise error

    real = sqlite3.connect

    def connect(database, *args, uri=False, **kwargs):
        if uri and "mode=ro" in str(database) and "immutable=1" not in str(database):
            kwargs["factory"] = Refused
        return real(database, *args, uri=uri, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    try:
        return Store(db, readonly=True)
    finally:
        monkeypatch.setattr(sqlite3, "connect", real)


def test_a_publish_under_a_reader_that_reads_an_index_as_unchanging_is_an_error(tmp_path, monkeypatch):
    # Read as unchanging (no lock: its folder is read-only to the reader), an index its owner's
    # indexer published meanwhile was read half from each version, with no error: the
    # communities of one and the reports of the other (none found).
    db = tmp_path / "index.db"
    reader = _reader_refused_at_first_read(monkeypatch, db, "SQLITE_READONLY_DIRECTORY",
                                           "attempt to write a readonly database")
    try:
        with reader.snapshot():   # nothing changed: read as it is
            assert reader.get_meta("version") == "3"
        with pytest.raises(StoreError, match="the index was updated while this command read it, and what "
                                             "it read may mix two versions"):
            with reader.snapshot():
                reader.get_meta("version")
                writer = Store(db)
                writer.set_meta("version", "4")
                writer.close()   # (folds its log into the file)
    finally:
        reader.close()


def test_an_index_on_a_full_disk_is_read_as_it_is(tmp_path, monkeypatch):
    # A reader makes index.db-shm beside the index; on a full disk that is an I/O error, and a
    # whole index could not be asked (or its status shown) until space was freed.
    # (SQLite makes the empty -shm file, and fails as it grows it)
    (tmp_path / "index.db-shm").write_bytes(b"\0\0\0")
    reader = _reader_refused_at_first_read(monkeypatch, tmp_path / "index.db", "SQLITE_IOERR_SHMSIZE",
                                           "disk I/O error")
    try:
        assert reader.get_meta("version") == "3"
    finally:
        reader.close()


def test_an_error_reading_an_index_read_as_unchanging_is_not_called_damage(tmp_path, monkeypatch, capsys):
    # Read as unchanging, an index its owner's indexer writes meanwhile can read as malformed:
    # the message advised deleting the index.
    import sqlite3

    from streamrag import cli, store

    db = tmp_path / "index.db"
    Store(db).close()

    def malformed(*args, **kwargs):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(cli, "gather_status", malformed)
    monkeypatch.setattr(store, "_unchanging", {str(db)})
    assert cli.main(["status", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert "the index changed while it was read" in err and "delete" not in err
    monkeypatch.setattr(store, "_unchanging", set())
    assert cli.main(["status", "--db", str(db)]) == 1
    assert "delete the damaged file" in capsys.readouterr().err


def test_an_index_file_read_only_to_its_writer_is_one_line(tmp_path, monkeypatch):
    # SQLite opens a file it may not write read-only without a word: the run did its work and
    # failed with a traceback at its first write. (Tests run as root: os.access says what a
    # user without write permission would get.)
    import os

    from streamrag import store as store_module

    db = tmp_path / "index.db"
    Store(db).close()
    real = os.access
    monkeypatch.setattr(store_module.os, "access",
                        lambda p, mode, **kw: False if Path(p) == db and mode == os.W_OK else real(p, mode, **kw))
    with pytest.raises(StoreError, match=r"index\.db: the index file is read-only to you; make it writable "
                                         r"\(chmod u\+w '.*index\.db'\), or run as its owner"):
        Store(db)
    Store(db, readonly=True).close()   # a reader needs no write access to the file
    # The -shm a reader made while the file was read-only stays so after a chmod of the file.
    shm = tmp_path / "index.db-shm"
    shm.write_bytes(b"")
    monkeypatch.setattr(store_module.os, "access",
                        lambda p, mode, **kw: False if Path(p) == shm and mode == os.W_OK else real(p, mode, **kw))
    with pytest.raises(StoreError, match=r"index\.db-shm: the index file is read-only to you; make it "
                                         r"writable \(chmod u\+w '.*index\.db' '.*index\.db-shm'\)"):
        Store(db)


@pytest.mark.parametrize("attribute", ["+i", "+a"])
def test_an_index_file_marked_immutable_is_refused_naming_chattr(tmp_path, attribute):
    # chattr +i: the refusal said "chmod u+w", which changes nothing (root was refused too);
    # chattr +a: the file looked writable, and the run failed with a traceback at its first write.
    db = tmp_path / "index.db"
    Store(db).close()
    data = db.read_bytes()
    if subprocess.run(["chattr", attribute, str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr is not available here (or the file system has no attributes)")
    try:
        with pytest.raises(StoreError, match=re.escape(f"{db}: the index file is marked immutable or append-only, "
                                                       f"so no one may write it; lift that (chattr -i -a {db}, as root)")):
            Store(db)
        Store(db, readonly=True).close()   # still read
    finally:
        subprocess.run(["chattr", "-i", "-a", str(db)], check=True)
    assert db.read_bytes() == data
    Store(db).close()   # the fix it gives is all there is to do


def test_an_index_in_a_folder_marked_immutable_is_refused_naming_chattr(tmp_path):
    # chattr +i on the index's folder: the refusal said "make its folder writable", which no
    # chmod does (root was refused the same).
    folder = tmp_path / "kept"
    folder.mkdir()
    db = folder / "index.db"
    Store(db).close()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr is not available here (or the file system has no attributes)")
    try:
        with pytest.raises(StoreError, match=re.escape(
                f"{db}: the index cannot be written where it lies (its folder is read-only to you); copy it "
                f"to a folder you may write and give --db the copy, or lift its folder's immutable mark "
                f"(chattr -i -a {folder}, as root)")):
            Store(db)
        Store(db, readonly=True).close()   # still read
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    Store(db).close()   # the fix it gives is all there is to do


def _locks_held(db: Path) -> list[str]:
    """The POSIX locks this process holds on the index and its -wal and -shm, as /proc/locks lists them."""
    inodes = {os.stat(f).st_ino: f.name for f in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if f.exists()}
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1] == "POSIX" and fields[4] == str(os.getpid()) and int(fields[5].split(":")[2]) in inodes:
            held.append(f"{inodes[int(fields[5].split(':')[2])]} {fields[3]} {fields[6]}-{fields[7]}")
    return sorted(held)


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="no /proc/locks to read the locks held")
def test_opening_an_index_to_write_keeps_the_locks_its_reader_holds(tmp_path):
    # ask opens its writer beside its reader: the open asked each file's attributes (chattr +i,
    # +a) through a descriptor it closed, and closing one drops every POSIX lock the process
    # holds on the file: SQLite's read marks in -shm and its lock on the index, which tell
    # another process's checkpoint what the reader still reads.
    db = tmp_path / "index.db"
    Store(db).close()
    reader = Store(db, readonly=True)
    try:
        reader.conn.execute("BEGIN")
        reader.conn.execute("SELECT count(*) FROM entities").fetchone()
        held = _locks_held(db)
        assert held
        Store(db).close()
        assert _locks_held(db) == held
    finally:
        reader.close()


def test_a_reader_of_an_index_file_read_only_to_it_makes_nothing_beside_it_but_reads_a_writers_log(tmp_path,
                                                                                                     monkeypatch):
    # A reader makes -wal and -shm with the file's mode, and only a connection that may write
    # the file removes them: status and ask of a chmod 444 index left both behind. Read as
    # unchanging instead; but while a writer keeps its log there, through the log, which holds
    # what it committed. (Tests run as root: os.access says what the user would get; the
    # real permissions are tests/test_cli_errors'.)
    import sqlite3

    from streamrag import store as store_module

    db = _built(tmp_path)
    real = os.access
    monkeypatch.setattr(store_module.os, "access",
                        lambda p, mode, **kw: False if Path(p) == db and mode == os.W_OK else real(p, mode, **kw))
    r = Store(db, readonly=True)
    with r.snapshot():
        assert r.version == 1
    assert _side_files(db) == []
    r.close()
    assert _side_files(db) == []
    writer = sqlite3.connect(db, isolation_level=None)   # (its owner's, at work: its log holds the write)
    try:
        writer.execute("UPDATE meta SET value = '2' WHERE key = 'version'")
        assert Path(f"{db}-wal").stat().st_size > 0
        r = Store(db, readonly=True)
        with r.snapshot():
            assert r.version == 2
        r.close()
        assert _side_files(db)   # the writer's, left to it
    finally:
        writer.close()
    assert _side_files(db) == []

def test_a_full_disk_at_the_lock_file_says_so(tmp_path, monkeypatch):
    # It was "cannot write the output (No space left on device)": the lock file is no output.
    import builtins
    import errno

    from streamrag.store import one_writer

    real_open = builtins.open

    def full_open(file, *args, **kwargs):
        handle = real_open(file, *args, **kwargs)
        if str(file).endswith(".lock"):
            def flush():
                raise OSError(errno.ENOSPC, "No space left on device")
            handle.flush = flush
        return handle

    monkeypatch.setattr(builtins, "open", full_open)
    with pytest.raises(StoreError, match=r"index\.db\.lock: cannot write the index's lock file \(No space "
                                         r"left on device\); free some space on its disk"):
        with one_writer(tmp_path / "index.db", "streamrag index notes"):
            pass


def test_an_index_built_with_the_earlier_name_of_the_answers_table_gets_it(tmp_path):
    # Development code of one day named the table summary_answers at the same schema step:
    # such an index had no table answers, and every publish failed.
    import sqlite3

    from streamrag.store import MIGRATIONS

    db = tmp_path / "index.db"
    Store(db).close()
    step = [name for name, _ in MIGRATIONS].index("answers") + 1
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DROP TABLE answers")
        conn.execute("CREATE TABLE summary_answers (element_id TEXT PRIMARY KEY, key TEXT NOT NULL)")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(step),))
    conn.close()
    store = Store(db)
    try:
        tables = {name for (name,) in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "answers" in tables and "summary_answers" not in tables
    finally:
        store.close()


def test_an_index_from_before_compressed_answers_is_upgraded_and_its_answers_read(tmp_path):
    # Its rows are JSON text; one it upgrades may hold compressed ones, which the streamrag
    # before would take for answers it cannot read (and pay for again): it refuses the index.
    import sqlite3

    import msgspec

    from streamrag.answer_cache import Answer, AnswerCache
    from streamrag.store import MIGRATIONS

    db = tmp_path / "index.db"
    Store(db).close()
    before = [name for name, _ in MIGRATIONS].index("llm_cache_packed")
    answer = Answer("a report's answer, as the streamrag before cached it\n" * 50, "stop", 2400, 800)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO llm_cache(key, model, response, created_at) VALUES ('k', 'm', ?, 0)",
                     (msgspec.json.encode(answer).decode(),))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(before),))
    conn.close()
    reader = Store(db, readonly=True)   # (`status`, `ask`: brought forward, then read)
    try:
        assert reader.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert AnswerCache(reader, enabled=True).answer("k") == (answer, False)
    finally:
        reader.close()
    store = Store(db)
    try:
        AnswerCache(store, enabled=True).put_answer("k2", "m", answer, replace=False)(store)
        store.conn.commit()
        assert AnswerCache(store, enabled=True).answer("k") == (answer, False)
    finally:
        store.close()
    from unittest import mock

    with mock.patch("streamrag.store.SCHEMA_VERSION", before):   # the streamrag before
        with pytest.raises(StoreError, match="newer streamrag"):
            Store(db, readonly=True)


def test_another_programs_database_is_not_taken_over(tmp_path):
    # --db naming some other SQLite file: streamrag wrote its 60 tables in among that file's own.
    import sqlite3

    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("CREATE TABLE t (a)")
    conn.close()
    with pytest.raises(StoreError, match=r"other\.db: an SQLite database that is not a streamrag index"):
        Store(db)
    conn = sqlite3.connect(db)
    assert [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["t"]
    conn.close()


@pytest.mark.parametrize("interrupted", [False, True])
def test_a_vacuum_stopped_by_ctrl_c_leaves_the_index_as_it_was(tmp_path, interrupted):
    # The signal waited for VACUUM to end (the main thread is in SQLite meanwhile): `vacuum`
    # then said "interrupted" about a file it had shrunk, or SIGTERM ended it without a word.
    import signal
    import threading

    from streamrag.store import vacuum

    store = Store(tmp_path / "i.db")
    store.conn.execute("CREATE TABLE filler(x TEXT)")
    store.conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 2000,)] * 3000)
    store.conn.execute("DELETE FROM filler WHERE rowid % 2 = 0")
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    rows = store.conn.execute("SELECT count(*) FROM filler").fetchone()[0]
    if interrupted:   # Ctrl-C lands once VACUUM is under way, which goes slowly till then
        asked = threading.Event()

        def slowly() -> int:
            if not asked.is_set():
                asked.set()
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.002)
            return 0

        store.conn.set_progress_handler(slowly, 10)
        with pytest.raises(KeyboardInterrupt):
            vacuum(store)
        store.conn.set_progress_handler(None, 0)
        assert asked.is_set()
        assert store.conn.execute("PRAGMA page_count").fetchone()[0] == pages
    else:
        vacuum(store)
        assert store.conn.execute("PRAGMA page_count").fetchone()[0] < pages
    assert store.conn.execute("SELECT count(*) FROM filler").fetchone()[0] == rows
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store.close()


def test_a_vacuum_past_stopping_finishes_and_says_so_through_a_second_ctrl_c():
    # SQLite honours an interrupt only early in a VACUUM. Past that, vacuum said "the index is
    # as it was" about a file it had shrunk, and a second Ctrl-C escaped while the thread still
    # worked on the connection, which was then closed under it (a segfault).
    import signal
    import threading
    from types import SimpleNamespace

    from streamrag.store import vacuum

    class Late:   # a connection whose VACUUM goes on to its end whatever interrupts it
        def __init__(self) -> None:
            self.ran: list[str] = []
            self.interrupted = threading.Event()

        def execute(self, sql: str) -> None:
            if sql == "VACUUM":
                for _ in range(2):
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(0.05)
                assert self.interrupted.wait(5)
                time.sleep(0.1)   # (the second Ctrl-C comes meanwhile)
            self.ran.append(sql)

        def interrupt(self) -> None:
            self.interrupted.set()

    conn = Late()
    assert vacuum(SimpleNamespace(conn=conn)) is True
    assert conn.ran == ["VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)", "PRAGMA wal_checkpoint(TRUNCATE)"]


def test_a_file_or_folder_is_looked_up_by_the_path_index_not_by_reading_every_path(tmp_path):
    # `rm -rf notes/big` under watch: each of its 20,000 deletions asked for the indexed files
    # under it and for its rows, two passes over the whole files table (9 ms each), on the
    # daemon's event loop: 3 minutes with signals held. Counted in SQLite VM steps.
    from streamrag import index_rows

    s = Store(tmp_path / "x.db")
    s.conn.executemany("INSERT INTO files(path, doc_id, size, stamp) VALUES (?, 'd', 1, 1.0)",
                       [(f"big/f{i:05d}.txt",) for i in range(20_000)]
                       + [("data.jsonl#1",), ("data.jsonl#2",), ("data.jsonl2",), ("big.txt",)])
    s.conn.commit()
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0

    s.conn.set_progress_handler(step, 1)
    assert index_rows.holds_file(s, "big/f00007.txt") and not index_rows.holds_file(s, "big/f7.txt")
    assert set(index_rows.file_rows(s, "data.jsonl")) == {"data.jsonl#1", "data.jsonl#2"}
    assert index_rows.paths_under(s, "big/f00007.txt") == []
    assert index_rows.holds_under(s, "big") and not index_rows.holds_under(s, "bi")
    assert steps < 1_000, steps   # a few seeks; a pass over the table is 20,000 rows
    s.conn.set_progress_handler(None, 1)
    assert len(index_rows.paths_under(s, "big")) == len(index_rows.file_rows_under(s, "big")) == 20_000
    assert index_rows.paths_under(s, "data.jsonl") == [] and index_rows.file_rows_under(s, "bi") == {}
    s.close()


def _index_in_its_log(folder: Path):
    """An index.db in ``folder`` whose rows (root /notes, file a.md) are still in its -wal,
    and the open connection holding them there (no checkpoint)."""
    import sqlite3

    folder.mkdir()
    conn = sqlite3.connect(folder / "index.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE files(path TEXT)")
    conn.execute("INSERT INTO meta VALUES ('root', '/notes')")
    conn.execute("INSERT INTO files VALUES ('a.md')")
    return conn


def test_a_look_at_an_index_left_with_its_log_adds_no_file_beside_it(tmp_path):
    # demo's read-only look (root_and_paths) at a folder holding index.db and its -wal but no
    # -shm left the -shm it made there: it removed side files only when neither was there.
    import shutil

    from streamrag.store import root_and_paths

    made = tmp_path / "made"
    conn = _index_in_its_log(made)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("index.db", "index.db-wal"):   # (copied while the writer holds it open)
        shutil.copy(made / name, copy / name)
    conn.close()
    assert root_and_paths(copy / "index.db") == ("/notes", ["a.md"])
    assert sorted(p.name for p in copy.iterdir()) == ["index.db"]   # (its log folded in)
    assert root_and_paths(copy / "index.db") == ("/notes", ["a.md"])


def test_a_look_at_an_index_leaves_the_shm_of_a_writer_that_opened_it_meanwhile(tmp_path, monkeypatch):
    # root_and_paths removed the -shm it made beside a log left without one, though a writer
    # that opened the index while it read shared that -shm: the writer's file was unlinked from
    # under it, and the next process to read made another.
    import sqlite3

    from streamrag import store

    made = tmp_path / "made"
    conn = _index_in_its_log(made)
    db = tmp_path / "index.db"
    for name in ("index.db", "index.db-wal"):   # (a log without its -shm, as a copy leaves it)
        shutil.copy(made / name, tmp_path / name)
    conn.close()
    writers = []
    reader_uri = store._reader_uri

    def writer_opens_first(path, **kw):   # (after the look at the side files, before its read)
        w = sqlite3.connect(db, isolation_level=None)
        w.execute("SELECT count(*) FROM files").fetchone()
        writers.append(w)
        return reader_uri(path, **kw)

    monkeypatch.setattr(store, "_reader_uri", writer_opens_first)
    assert store.root_and_paths(db) == ("/notes", ["a.md"])
    assert Path(f"{db}-wal").exists() and Path(f"{db}-shm").exists()
    writers[0].execute("INSERT INTO files VALUES ('b.md')")
    seen = subprocess.run([sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
                           ".execute('SELECT count(*) FROM files').fetchone()[0])", str(db)],
                          capture_output=True, text=True, timeout=60)
    assert seen.stdout.strip() == "2", seen.stderr
    writers[0].close()


def test_calls_a_client_gave_up_on_recorded_as_cancelled_are_made_failed(tmp_path):
    # Recorded as cancelled, they were "errors 0, cancelled 2" in `status` of calls whose tries
    # had all failed (the daemon's error lines counted them as failed); a call its run stopped
    # stays cancelled.
    from streamrag.endpoint_health import GAVE_UP
    from streamrag.status import gather_status
    from streamrag.store import MIGRATIONS

    db = tmp_path / "old.db"
    s = Store(db)
    rows = [("cancelled after 3 tries, none answered: " + GAVE_UP, 1), ("cancelled after 1 try, none answered: "
            + GAVE_UP, 1), ("cancelled after 1 try, none answered: its caller stopped waiting", 1)]
    for error, cancelled in rows:
        s.record_call({"run_id": "r", "stage": "extract", "model": "m", "prompt": "", "prompt_version": "",
                       "cache_key": "k", "prompt_tokens": 0, "completion_tokens": 0, "latency_ms": 1.0,
                       "cached": 0, "error": error, "cancelled": cancelled})
    before = [name for name, _ in MIGRATIONS].index("calls_given_up_failed")
    s.set_meta("schema_version", str(before))   # as written before the fix-up
    s.conn.commit()
    s.close()
    s = Store(db, readonly=True)
    try:
        llm = gather_status(s)["llm"]
    finally:
        s.close()
    assert (llm["calls"], llm["errors"], llm["cancelled"]) == (3, 2, 1), llm


def test_failures_of_a_run_are_read_through_an_index(tmp_path):
    """`status` and the daemon read the failures of one run; without an index on run_id each
    read scanned every run's (5 ms a read at 100,000 rows, several reads a `status`)."""
    from streamrag import index_rows

    store = Store(tmp_path / "i.db")
    with store.conn:
        store.conn.executemany(
            "INSERT INTO failures(run_id, stage, item, message, created_at) VALUES (?, ?, ?, ?, 0)",
            [(f"run-{i % 500}", "glean", f"chk-{i}", "boom") for i in range(5000)])
    assert index_rows.failures_of(store, "run-7") == 10
    assert len(index_rows.failed_chunks(store, "run-7")) == 10
    for sql in ("SELECT count(DISTINCT stage || ' ' || item) FROM failures WHERE run_id = ?",
                "SELECT DISTINCT stage, item FROM failures WHERE run_id = ? AND stage IN ('extract', 'glean')"):
        plan = " ".join(str(r[-1]) for r in store.conn.execute(f"EXPLAIN QUERY PLAN {sql}", ("run-7",)))
        assert "USING" in plan and "INDEX" in plan, plan


def test_stored_extractions_are_read_as_they_are_taken(tmp_path, monkeypatch):
    """A run's extractions are read from the store as the merge takes them, 500 at a time, not
    all before it starts (a first index of 10,000 documents held 165 MB of them at once); one
    pruned meanwhile says so in one line."""
    from streamrag import index_rows
    from streamrag.records import EntityRecord, Extraction

    s = Store(tmp_path / "x.db")
    ids = [f"chk-{n:04d}" for n in range(1200)]
    for n, chunk_id in enumerate(ids):
        index_rows.save_extraction(s, chunk_id, "nlp-k", Extraction(
            entities=[EntityRecord(name=f"Name {n}", type="person", description=f"Said {n}.")]))
    read: list[int] = []
    load = index_rows.load_extractions
    monkeypatch.setattr(index_rows, "load_extractions", lambda *a: read.append(len(a[1])) or load(*a))
    stored = index_rows.StoredExtractions(s, set(ids), "nlp-k")
    assert read == []
    assert stored.pop(ids[0]).entities[0].name == "Name 0"
    assert read == [500]
    assert [stored.pop(c).entities[0].description for c in ids[1:]] == [f"Said {n}." for n in range(1, 1200)]
    assert read == [500, 500, 200]
    gone = index_rows.StoredExtractions(s, {ids[0], "chk-pruned"}, "nlp-k")
    with pytest.raises(StoreError, match="chk-pruned went while this run merged it"):
        gone.pop("chk-pruned")
    s.close()


def test_an_index_from_before_extractions_left_keeps_its_extractions_dates(tmp_path):
    # The date a chunk left was written into its extraction rows (created_at): an index of then
    # gets the table of those dates, its extractions keeping theirs, each kept
    # store.keep_unused_days from it as before.
    import sqlite3
    import time

    from streamrag import index_rows
    from streamrag.store import MIGRATIONS

    db = tmp_path / "index.db"
    Store(db).close()
    before = [name for name, _ in MIGRATIONS].index("extractions_left")
    day, now = 86400.0, time.time()
    dated = [("chk-left-lately", now - 10 * day), ("chk-left-long-ago", now - 40 * day)]
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DROP TABLE extractions_left")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(before),))
        conn.executemany("INSERT INTO extractions(chunk_id, extractor, result, created_at) VALUES (?, 'k', '{}', ?)",
                         dated)
    conn.close()
    store = Store(db)
    try:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert store.conn.execute(
            "SELECT chunk_id, created_at FROM extractions ORDER BY chunk_id").fetchall() == dated
        with store.transaction():
            index_rows.prune(store, 30, now)
        assert [c for (c,) in store.conn.execute("SELECT chunk_id FROM extractions")] == ["chk-left-lately"]
        assert store.scalar("SELECT count(*) FROM extractions_left") == 0
    finally:
        store.close()


def test_an_index_from_before_the_calls_by_run_and_request_gets_them_and_status_looks_them_up(tmp_path):
    # `status` counts the unusable answers a later try of the same run answered: each a look
    # among every call of its run (llm_calls_run alone), 2 s of a `status` of 300,000 calls in
    # 10 runs. An older index opened by a reader is upgraded with the index of run and request.
    import sqlite3

    from streamrag import index_rows
    from streamrag.store import MIGRATIONS

    def looks_up(store: Store) -> None:
        plan = [row[3] for row in store.conn.execute(f"EXPLAIN QUERY PLAN SELECT count(*) {index_rows._ASKED_AGAIN}")]
        assert any("USING INDEX llm_calls_run_key (run_id=? AND cache_key=?" in step for step in plan), plan

    db = tmp_path / "index.db"
    store = Store(db)
    looks_up(store)   # a new index has it
    store.close()
    before = [name for name, _ in MIGRATIONS].index("llm_calls_run_key")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DROP INDEX IF EXISTS llm_calls_run_key")
        conn.execute("CREATE INDEX IF NOT EXISTS llm_calls_run ON llm_calls(run_id)")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(before),))
        for key, error in (("k1", "unusable answer: cut off"), ("k1", None), ("k2", "unusable answer"), ("k3", None)):
            conn.execute("INSERT INTO llm_calls(run_id, stage, model, prompt, prompt_version, cache_key, "
                         "prompt_tokens, completion_tokens, latency_ms, cached, error, cancelled, created_at) "
                         "VALUES ('r1', 'report', 'm', 'report', 'v', ?, 10, 10, 1.0, 0, ?, 0, 1.0)", (key, error))
    conn.close()
    store = Store(db, readonly=True)
    try:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        indexes = {name for (name,) in store.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'llm_calls'")}
        assert "llm_calls_run_key" in indexes and "llm_calls_run" not in indexes
        looks_up(store)
        assert (index_rows.asked_again(store), index_rows.unusable_calls(store)) == (1, 2)
    finally:
        store.close()


@pytest.mark.anyio
@pytest.mark.parametrize("encoding, recorded", [("o200k_base", True), ("cl100k_base", True), ("o200k_base", False)])
async def test_an_index_from_before_chunks_encoding_has_its_chunks_counted_in_its_encoding(tmp_path, encoding, recorded):
    # Its chunks' encoding was NULL, and a basic ask built the tokenizer to count them until
    # they were cut again. Their counts are not taken as the recorded encoding's: one of an
    # index that changed index.encoding is the first encoding's to cut the text (the rows were
    # kept, not replaced), so they are counted again in it, once, by the upgrade (a reader's).
    # A chunk no document uses (a run's that published nothing) is not counted: it was, in the
    # upgrade's one transaction; the run that cuts its text again counts it.
    import sqlite3

    from conftest import make_settings
    from streamrag import index_rows
    from streamrag.pipeline import sync
    import streamrag.store as store_module
    from streamrag.store import MIGRATIONS
    from streamrag.tokens import count_tokens

    other = "cl100k_base" if encoding == "o200k_base" else "o200k_base"
    settings = make_settings(index={"encoding": encoding})
    corpus, db = tmp_path / "harbor", tmp_path / "index.db"
    shutil.copytree(Path(__file__).parent / "data" / "harbor", corpus)
    pier = tmp_path / "pier"   # (its chunk, cut by an index of its own, is the orphan)
    pier.mkdir()
    (pier / "pier.txt").write_text("Der Hafenmeister Anselm Rook zählt die Überfahrten der Fähre Quillback.\n",
                                   encoding="utf-8")
    await sync([pier], settings, tmp_path / "pier.db", root=pier)
    with contextlib.closing(sqlite3.connect(tmp_path / "pier.db")) as conn:
        ((orphan, orphan_text),) = conn.execute("SELECT id, text FROM chunks").fetchall()
    await sync([corpus], settings, db, root=corpus)
    before = [name for name, _ in MIGRATIONS].index("chunks_encoding")
    conn = sqlite3.connect(db)
    with conn:
        texts = dict(conn.execute("SELECT id, text FROM chunks"))
        # (the counts an index cut in the other encoding first kept)
        conn.executemany("UPDATE chunks SET tokens = ? WHERE id = ?",
                         [(count_tokens(t, other), i) for i, t in texts.items()])
        conn.execute("INSERT INTO chunks(id, text, tokens) VALUES (?, ?, ?)",
                     (orphan, orphan_text, count_tokens(orphan_text, other)))
        conn.execute("ALTER TABLE chunks DROP COLUMN encoding")
        if not recorded:   # (an index from before chunker_settings: the default encoding)
            conn.execute("DELETE FROM meta WHERE key = 'chunker_settings'")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(before),))
    conn.close()
    counted = {i: count_tokens(t, encoding) for i, t in texts.items()}
    assert counted != {i: count_tokens(t, other) for i, t in texts.items()}   # (the harbor's differ)
    assert count_tokens(orphan_text, encoding) != count_tokens(orphan_text, other)
    store = Store(db, readonly=True)   # (`ask`, `status`: brought forward, then read)
    try:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert store.scalar(f"SELECT count(*) {store_module._UNCOUNTED}") == 0
        assert index_rows.chunk_tokens(store, list(texts), encoding) == counted
        assert {e for (e,) in store.conn.execute("SELECT encoding FROM chunks WHERE id != ?", (orphan,))} == {encoding}
        assert store.conn.execute("SELECT tokens, encoding FROM chunks WHERE id = ?", (orphan,)).fetchall() == [
            (count_tokens(orphan_text, other), None)]
    finally:
        store.close()
    shutil.copy(pier / "pier.txt", corpus)   # (its text cut again, now by a run that publishes)
    await sync([corpus], settings, db, root=corpus)
    store = Store(db, readonly=True)
    try:
        assert store.scalar("SELECT count(*) FROM document_chunks WHERE chunk_id = ?", (orphan,)) == 1
        assert index_rows.chunk_tokens(store, [orphan], encoding) == {orphan: count_tokens(orphan_text, encoding)}
        # What index_rows.backlog and chunks_of count on (they take no NULL encoding for one of
        # theirs): every chunk a document uses has its encoding recorded, the orphan's too.
        assert store.scalar(f"SELECT count(*) {store_module._UNCOUNTED}") == 0
        docs = [d for (d,) in store.conn.execute("SELECT id FROM documents")]
        assert {c.id: c.tokens for c in index_rows.backlog(store, docs, "another-extractor", encoding)} == {
            i: count_tokens(t, encoding) for i, t in store.conn.execute(
                "SELECT id, text FROM chunks WHERE id IN (SELECT chunk_id FROM document_chunks)")}
    finally:
        store.close()


def test_deleting_many_full_text_rows_looks_at_the_table_once(tmp_path):
    # A full-text table's id has no index: its rows were deleted 500 ids at a time, each a look
    # at every row of the table (removing 2,000 files of 6,000: 29 looks at entities_fts). The
    # work a delete of 1,500 ids does grows with the rows the table holds beside them as one
    # look's does, not three looks'. (SQLite's work counted in its program's steps, not timed.)
    from streamrag.index_rows import _write_elements
    from streamrag.graph_state import GraphState

    def steps_to_delete(kept: int, gone: int) -> int:
        store = Store(tmp_path / f"{kept}-{gone}.db")
        try:
            rows = [(f"ent-{i:05d}", f"name {i}", f"what entity {i} did") for i in range(kept + gone)]
            store.conn.executemany("INSERT INTO entities_fts(id, name, description) VALUES (?,?,?)", rows)
            state = GraphState()
            state.deleted_entities = {row[0] for row in rows[:gone]}
            steps = [0]

            def count() -> int:
                steps[0] += 1
                return 0
            with store.transaction():
                store.conn.set_progress_handler(count, 100)   # (each 100 steps)
                _write_elements(store, state)
                store.conn.set_progress_handler(None, 1)
            assert store.scalar("SELECT count(*) FROM entities_fts") == kept
            return steps[0]
        finally:
            store.close()

    one_look = steps_to_delete(6000, 1) - steps_to_delete(3000, 1)   # (3,000 rows more, looked at once)
    assert steps_to_delete(6000, 1500) - steps_to_delete(3000, 1500) < 1.5 * one_look


@pytest.mark.parametrize("read", ["upgraded", "in place"])
def test_a_run_recorded_before_runs_kind_is_a_model_run_by_the_calls_of_a_model_it_recorded(tmp_path, monkeypatch,
                                                                                            read):
    # runs.kind tells an indexing run with a model ("model") from an offline one; a run recorded
    # before it (NULL) is told by its llm_calls rows (a cache hit is one too): a model's work
    # makes them, an offline run's embeddings alone do not. An ask, a daemon's extraction ahead
    # (it publishes nothing) and a run that did not end "ok" are no model run that ended. A
    # reader that cannot upgrade reads the table without the column: every run of no kind.
    import sqlite3

    import streamrag.store as store_module
    from streamrag import index_rows

    db = tmp_path / "index.db"
    Store(db).close()
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("ALTER TABLE runs DROP COLUMN kind")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(schema_before("runs_kind")),))

    def ran(run_id: str, command: str, status: str, *stages: str, cached: int = 0) -> None:
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("INSERT INTO runs(id, command, started_at, status) VALUES (?, ?, 0, ?)",
                         (run_id, command, status))
            conn.executemany("INSERT INTO llm_calls(run_id, stage, model, prompt, prompt_version, cache_key, "
                             "prompt_tokens, completion_tokens, latency_ms, cached, created_at) "
                             "VALUES (?, ?, 'm', 'p', '1', ?, 1, 1, 1, ?, 0)",
                             [(run_id, stage, f"{run_id}-{stage}", cached) for stage in stages])

    def completed() -> tuple[bool, str | None]:
        """Whether a model run ended, as a reader finds it, and the schema it read."""
        with monkeypatch.context() as reader:
            if read == "in place":
                _write_protected(reader)
                reader.setattr(store_module, "_read_only_here", lambda path: "the file is read-only to you")
            store = Store(db, readonly=True)
            try:
                return index_rows.model_run_completed(store), store.get_meta("schema_version")
            finally:
                store.close()

    schema = str(schema_before("runs_kind") if read == "in place" else SCHEMA_VERSION)
    for run in [("offline", "index", "ok", "embed"), ("asked", "ask", "ok", "map", "reduce"),
                ("killed", "index", "interrupted", "extract", "summarize"),
                ("ahead", "watch:extract", "ok", "extract")]:
        ran(*run)
        assert completed() == (False, schema), run
    ran("model", "watch", "ok", "summarize", "report", cached=1)
    assert completed() == (True, schema)
    if read == "upgraded":   # (and this streamrag's rows: by their kind alone)
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("DELETE FROM runs WHERE id = 'model'")
            conn.execute("INSERT INTO runs(id, command, started_at, status, kind) VALUES "
                         "('new-offline', 'index', 0, 'ok', 'offline'), ('new-ahead', 'watch:extract', 0, 'ok', 'model')")
        assert completed() == (False, schema)
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("INSERT INTO runs(id, command, started_at, status, kind) VALUES "
                         "('new-model', 'index', 0, 'ok', 'model')")
        assert completed() == (True, schema)
