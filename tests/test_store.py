"""The SQLite store, the single writer, and the tokenizer that never needs the network."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import pytest

from streamrag.errors import IndexMissingError, StoreError
from streamrag.store import SCHEMA_VERSION, Store
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
