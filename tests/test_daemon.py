"""The watch daemon: scripted change sets in process, one real watch, signals and kill -9 in
subprocesses against a simulator with latency."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
from functools import partial
import pytest
from watchfiles import Change

from conftest import (index_snapshot as snapshot, lose_extraction, make_settings, overlapping_readers, status_info,
                      simulated_transport, wal_tries)
from streamrag.config import load_settings
from streamrag.cli import main
from streamrag import index_rows, watched_folder
from streamrag.daemon import CURRENT_AS_SEEN, Daemon, Reporter
from streamrag.pipeline import sync
from streamrag.simulator import Simulator, SimulatorConfig
from streamrag.store import Store
from streamrag.watch_events import watch_folder

REPO = Path(__file__).resolve().parent.parent
SMALL = {"chunk_size": 80, "chunk_overlap": 10}
VERSION = "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'version'"  # the published version


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------
def db_count(db: Path, sql: str) -> int:
    """A count from a database another process may be writing (0 while it does not exist yet)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute(sql).fetchone()
            return (row[0] or 0) if row else 0
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def _indexed_paths(db: Path) -> set[str]:
    """The paths of the files the index at ``db`` holds (its ``files`` table)."""
    store = Store(db, readonly=True)
    try:
        return {r["path"] for r in store.query("SELECT path FROM files")}
    finally:
        store.close()


async def until(predicate, timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


class Events(list):
    """A reporter that keeps the events; ``states()`` lists their states in order."""

    def __call__(self, event: dict) -> None:
        if event["state"] == "idle" and "llm" in event:   # the line counts calls as its object does
            calls, cached = event["llm"]["calls"], event["llm"]["cached"]
            said = f"{calls} LLM call{'' if calls == 1 else 's'}" + (f" ({cached} from cache)" if cached else "")
            # Said as failed: not "4 LLM calls" when all 4 failed; but an unusable answer whose
            # request was then answered is said as asked again, not failed.
            again = event.get("asked_again", 0)
            failed = event["llm"]["errors"] - again
            cancelled = event["llm"]["cancelled"]   # (as a sync gave up)
            if failed and not cancelled and not again:
                said += ", failed" if failed == calls == 1 else ", all failed" if failed == calls - cached \
                    else f", {failed} failed"
            else:
                said += (f", {failed} failed" if failed else "") \
                    + (f", {again} answer{'' if again == 1 else 's'} asked again" if again else "") \
                    + (f", {cancelled} cancelled" if cancelled else "")
            assert f"; {said}; sync " in event["message"], event
        self.append(event)

    def states(self, start: int = 0) -> list[str]:
        return [e["state"] for e in self[start:]]


def scripted():
    """A scripted change source: the test sends sets of (Change, path) into ``send``."""
    return anyio.create_memory_object_stream[set](16)


class _Holding:
    """A scripted change source whose watcher holds events back (``held``, the test's set), as
    ``FolderWatch`` does the burst of a file written on and on while others are handed over."""

    def __init__(self, recv, held: set) -> None:
        self.recv, self.held = recv, held

    def __aiter__(self):
        return aiter(self.recv)


def export_json(db: Path, out: Path) -> None:
    """``streamrag export OUT`` (JSON) of the index ``db``, as a user's cron job writes one."""
    from streamrag.export import export

    store = Store(db, readonly=True)
    try:
        export(store, out, "json")
    finally:
        store.close()


@contextlib.asynccontextmanager
async def running(settings, db, corpus, *, locked: bool = False, held: set | None = None, **kwargs):
    """A daemon on a scripted change source, past its initial sync: (daemon, events, send).
    Closing ``send`` ends it; the block exits once it has. ``locked``: it holds the index's
    writer lock, as `streamrag watch` does (released at the end). ``held``: the events its
    watcher holds back (``_Holding``), the test's set, changed as it goes."""
    from streamrag.store import WriterLock

    events = Events()
    daemon = Daemon(settings, db, corpus, report=events, **kwargs)
    if locked:
        daemon.writer_lock = WriterLock(db, "streamrag watch .")
        daemon.writer_lock.take()
    send, recv = scripted()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, recv if held is None else _Holding(recv, held))
            await until(lambda: daemon.syncs >= 1, timeout=30)
            yield daemon, events, send
    finally:
        if locked:
            daemon.writer_lock.release()


pytestmark = pytest.mark.anyio


# --------------------------------------------------------------------------------------------
# Scripted change sets
# --------------------------------------------------------------------------------------------
async def test_a_deleted_lock_file_is_taken_again_before_extracting_ahead(corpus, tmp_path):
    # `rm .streamrag/index.db.lock` while watch ran let `index` write the index too: both paid
    # for the same new files (the lock was looked at only when a sync began).
    from streamrag.errors import StoreBusyError
    from streamrag.store import WriterLock, lock_path

    settings = make_settings("", watch={"quiet_s": 30})
    db = tmp_path / "w.db"
    async with running(settings, db, corpus, locked=True) as (daemon, _events, send):
        lock_path(db).unlink()
        new = corpus / "new.txt"
        new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        async with send:
            await send.send({(Change.added, str(new))})
            await until(lambda: lock_path(db).exists())
            with pytest.raises(StoreBusyError, match="is being written by another streamrag"):
                WriterLock(db, "streamrag index .").take()
            daemon.stop()


async def _noted_under_way(corpus: Path, db: Path, send, events: Events) -> dict:
    """Adds a file and waits for the daemon's waiting line: the update under way its lock file
    notes (one file)."""
    from streamrag.store import update_under_way

    new = corpus / "new.txt"
    new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
    await send.send({(Change.added, str(new))})
    await until(lambda: "waiting" in events.states())
    noted = update_under_way(db)
    assert noted is not None and noted["files"] == 1, noted
    return noted


async def test_an_update_under_way_is_noted_for_ask_until_its_version_is_published(corpus, tmp_path):
    # `ask` during a burst answered from the version before, without a word of the changes
    # queued: the lock file now says an update is under way, from its queued line to its idle line.
    from streamrag.store import update_under_way, writer_at_work

    settings = make_settings("", watch={"quiet_s": 30})
    db = tmp_path / "w.db"
    async with running(settings, db, corpus, locked=True) as (daemon, events, send):
        assert update_under_way(db) is None   # (the initial sync published: idle)
        async with send:
            noted = await _noted_under_way(corpus, db, send, events)
            assert noted["command"] == "watch", noted
            assert writer_at_work(db) == f"pid {os.getpid()}: streamrag watch ."
        await until(lambda: daemon.syncs >= 2)   # (the source ended: what was queued is synced)
        assert "idle" in events.states(events.states().index("waiting"))
        assert update_under_way(db) is None and writer_at_work(db) is not None   # (still held: said done)


async def test_a_lock_file_taken_again_keeps_its_note_of_the_update_under_way(corpus, tmp_path, monkeypatch):
    # `rm .streamrag/index.db.lock` during an update: the lock taken again wrote its holder's
    # line only, and `ask` said nothing of the update under way until the next state line.
    import streamrag.daemon as daemon_module
    from streamrag.store import lock_path, update_under_way

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings("", watch={"quiet_s": 30})
    db = tmp_path / "w.db"
    async with running(settings, db, corpus, locked=True) as (daemon, events, send):
        async with send:
            noted = await _noted_under_way(corpus, db, send, events)
            lock_path(db).unlink()
            await until(lambda: lock_path(db).exists(), timeout=5)
            assert update_under_way(db) == noted
            daemon.stop()


async def test_a_deleted_lock_file_is_taken_again_while_nothing_changes(corpus, tmp_path, monkeypatch):
    # `rm .streamrag/index.db.lock` with watch idle: `streamrag index` ran beside it, both writing
    # the index, until a file event made watch look at its lock.
    import streamrag.daemon as daemon_module
    from streamrag.errors import StoreBusyError
    from streamrag.store import WriterLock, lock_path

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings("", watch={"quiet_s": 30})
    db = tmp_path / "w.db"
    async with running(settings, db, corpus, locked=True) as (daemon, _events, send):
        async with send:
            lock_path(db).unlink()
            await until(lambda: lock_path(db).exists(), timeout=5)
            with pytest.raises(StoreBusyError, match="is being written by another streamrag"):
                WriterLock(db, "streamrag index .").take()
            daemon.stop()
    assert daemon.syncs == 1 and not daemon.pending


async def test_a_look_at_the_lock_it_may_not_take_leaves_the_daemon_running(corpus, monkeypatch):
    # `chmod a-x notes` while watch idled (the index inside): the once-a-second look at the
    # writer lock raised PermissionError out of Path.is_dir and the daemon died.
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings("", watch={"quiet_s": 0.05})
    db = corpus / ".streamrag" / "index.db"
    real_stat = os.stat

    def stat(path, *args, **kwargs):   # (as root nothing is refused, so the refusal is made)
        if Path(path) == db.parent or db.parent in Path(path).parents:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    async with running(settings, db, corpus, locked=True) as (daemon, _events, send):
        async with send:
            os.unlink(f"{db}.lock")          # so the look tries to take it again
            monkeypatch.setattr(os, "stat", stat)
            await anyio.sleep(0.5)           # ten looks
            monkeypatch.setattr(os, "stat", real_stat)
            assert not daemon.stopping
    assert daemon.syncs == 1


async def test_a_watched_folder_deleted_is_not_made_again_by_the_lock(corpus, monkeypatch):
    # `rm -rf notes` under watch with its index inside: the once-a-second look at the writer
    # lock took it again, making notes/.streamrag/ anew, so the folder came back, was said
    # "replaced" and was indexed empty; a later `mv notes.bak notes` landed inside it.
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings("", watch={"quiet_s": 0.05})
    db = corpus / ".streamrag" / "index.db"
    async with running(settings, db, corpus, locked=True) as (daemon, events, send):
        async with send:
            shutil.rmtree(corpus)
            await anyio.sleep(0.5)          # ten looks at the lock, no event yet
            assert not corpus.exists()
            await send.send({(Change.deleted, str(corpus))})
            await until(lambda: daemon._gone)
            await anyio.sleep(0.3)
            assert not corpus.exists()
            daemon.stop()
    assert daemon.syncs == 1
    assert not [e for e in events if e["state"] == "warning" and "replaced" in e["message"]]


def test_watch_upgrades_an_older_index_under_its_writer_lock_saying_so(tmp_path, corpus, monkeypatch):
    # watch read the index (check_not_downgraded) before it took the writer lock, and that read
    # upgraded an older index: the lock said nothing of it, and a reader meanwhile met the write
    # lock alone and waited 30 s for "another streamrag may be upgrading it". The upgrade is made
    # under watch's lock now, which says "upgrading" as index's does. (A child watch, its last
    # step held until told to go.)
    import streamrag
    import streamrag.store as store_module
    from conftest import upgrade_held
    from streamrag.errors import WriterBusyError
    from streamrag.store import SCHEMA_VERSION, lock_path

    db = tmp_path / "w.db"
    assert main(["index", str(corpus), "--offline", "-q", "--db", str(db)]) == 0
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:   # (the last step may be applied again)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),))
    watch = ("from streamrag.cli import main\n"
             "db, corpus = sys.argv[1:]\n"
             "raise SystemExit(main(['watch', '--once', '--offline', '--db', db, corpus]))\n")
    with upgrade_held(tmp_path, watch, str(db), str(corpus)) as child:
        holder = f"pid {child.process.pid}: streamrag watch {corpus}"
        assert lock_path(db).read_text() == f"{holder}\nupgrading to schema {SCHEMA_VERSION}\n"
        monkeypatch.setattr(store_module, "_BUSY_S", 0)   # (met its write lock: refused at once)
        with pytest.raises(WriterBusyError) as refused:
            Store(db, readonly=True)
        assert str(refused.value) == (f"{db} is being upgraded for this streamrag by another ({holder}; once, and "
                                      "an upgrade of a large index takes a while); run this again once it is done")
    assert child.process.returncode == 0, child.err
    assert child.out.splitlines()[0] == streamrag.__file__   # (this checkout's streamrag)
    assert "upgrading the index at" in child.err and "idle " in child.err, child.err
    assert db_count(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'") == SCHEMA_VERSION


def test_watch_refuses_an_older_model_built_index_without_an_endpoint_before_its_first_line(tmp_path, corpus,
                                                                                             cli_run):
    # Its read for check_not_downgraded is made under the writer lock now, where an older index
    # is upgraded by it, and the refusal still comes before "starting ...", as of a current one.
    from streamrag.store import SCHEMA_VERSION

    db = tmp_path / "m.db"
    assert main(["index", str(corpus), "--offline", "-q", "--db", str(db)]) == 0
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE meta SET value = 'llm-m1' WHERE key = 'extractor'")   # (a model's)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),))
    out = cli_run("watch", "--once", "--db", str(db), str(corpus))
    assert out.returncode == 1, out
    assert [line for line in out.stderr.splitlines() if "upgrading the index" not in line] == [
        f"streamrag: error: {db}: this index was built with a model, and no endpoint is set now (llm.api_base, "
        "STREAMRAG_API_BASE or --api-base): set one to update it, or pass --offline to rebuild it offline (the "
        "NLP extractor's graph and extractive reports replace the model's)"], out.stderr
    assert db_count(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'") == SCHEMA_VERSION


async def test_an_index_deleted_with_its_folder_is_not_held_while_the_folder_is_gone(corpus, monkeypatch):
    # `rm -rf notes` under watch, the index inside: the daemon's handle on the index file (to tell
    # a move from a deletion) held it, deleted, its space taken, for as long as notes was gone.
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings("", watch={"quiet_s": 0.05})
    db = corpus / ".streamrag" / "index.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        assert daemon._index_handle is not None or daemon_module._O_PATH is None
        async with send:
            shutil.rmtree(corpus)
            await send.send({(Change.deleted, str(corpus))})
            await until(lambda: daemon._gone)
            await until(lambda: daemon._index_handle is None, timeout=5)
            daemon.stop()
    assert daemon.syncs == 1 and daemon.index_moved_to is None


async def test_burst_is_prefetched_then_synced_once(corpus, tmp_path, simulator):
    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.3})
    db = tmp_path / "w.db"
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events)
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: daemon.syncs == 1)
        mark = len(events)
        new = corpus / "new.txt"
        new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        guild = corpus / "guild.txt"
        guild.write_text(guild.read_text().replace("Lantern Hall", "Harbor Chapel"))
        async with send:
            await send.send({(Change.added, str(new)), (Change.modified, str(new))})
            await send.send({(Change.modified, str(guild))})
            await send.send({(Change.added, str(corpus / "notes.pdf")),
                             (Change.modified, str(corpus / ".streamrag" / "index.db-wal"))})
            await until(lambda: daemon.syncs == 2)
    # The burst was extracted as it came, then synced once after the quiet period.
    after = events[mark:]
    states = events.states(mark)
    assert states[0] == "queued" and "extracting" in states and "waiting" in states
    # (the health line after the idle line: the sync added a document)
    assert states[-8:] == ["extracting", "merging", "clustering", "reporting", "publishing", "idle",
                           "health", "stopped"]
    assert states.count("idle") == 1
    # Each line names the stage it sums up, not the one just entered.
    messages = {e["state"]: e["message"] for e in after}
    assert messages["merging"].startswith("extracting done: ")
    assert messages["clustering"].startswith("merging done: ")
    assert messages["publishing"].startswith("reporting done: ")
    assert " written, " in messages["publishing"] and " kept " in messages["publishing"]
    queued = [e for e in after if e["state"] == "queued"]
    assert sum(e["files"] for e in queued) == 2           # the .pdf and the .streamrag file ignored
    ahead = sum(e["chunks_extracted"] for e in after if e["state"] == "waiting")
    assert ahead > 0
    merging = next(e for e in after if e["state"] == "merging")
    assert merging["chunks_extracted"] == 0           # the sync itself paid no extraction ...
    idle = [e for e in after if e["state"] == "idle"][0]
    # ... and the idle line sums up the whole update: a script adding up idle lines counted 0.
    assert idle["chunks_extracted"] == ahead and idle["llm"]["calls"] - idle["llm"]["cached"] >= ahead
    assert idle["llm"]["by_stage"]["extract"]["calls"] >= ahead   # the calls made ahead included
    # new.txt came and guild.txt was edited: "1 added, 1 edited", not "2 added, 1 removed"
    assert (idle["documents_added"], idle["documents_edited"], idle["documents_removed"]) == (1, 1, 0)
    assert idle["documents_added"] + idle["documents_edited"] + idle["documents_unchanged"] == idle["documents"]
    assert idle["version"] == 2 and daemon.pending == {}
    # (the counts `index --json` has beside them: the idle line said "1 parted from one" with no key)
    beside = ("joins_joined", "joins_parted", "documents_failed_added", "documents_failed_edited")
    assert [idle[k] for k in beside] == [0, 0, 0, 0]

    # The graph equals a fresh index of the folder as it now is (the partition may differ:
    # Leiden starts from the previous one).
    fresh_dir = tmp_path / "fresh"
    shutil.copytree(corpus, fresh_dir)
    await sync([fresh_dir], settings, tmp_path / "fresh.db", root=fresh_dir)
    ours, fresh = snapshot(db), snapshot(tmp_path / "fresh.db")
    for key in ("entities", "relationships", "documents"):
        assert ours[key] == fresh[key], key


async def test_deleted_file_and_folder_leave_the_index(corpus, tmp_path):
    sub = corpus / "archive"
    sub.mkdir()
    shutil.move(corpus / "railway.txt", sub / "railway.txt")
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "d.db"
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events)
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: daemon.syncs == 1)
        mark = len(events)
        (corpus / "festival.md").unlink()
        shutil.rmtree(sub)
        # A deleted path matching no pattern counts when indexed files lay under it.
        assert daemon.folder.relevant(Change.deleted, sub) == "archive"
        assert daemon.folder.relevant(Change.deleted, corpus / "photos") is None
        async with send:
            await send.send({(Change.added, str(corpus / ".hidden.txt")),
                             (Change.added, str(corpus / "image.png"))})
            await send.send({(Change.deleted, str(corpus / "festival.md")), (Change.deleted, str(sub))})
            await until(lambda: daemon.syncs == 2)
    queued = [e for e in events[mark:] if e["state"] == "queued"]
    assert len(queued) == 1 and queued[0]["files"] == 2 and queued[0]["deleted"] == 2
    assert "waiting" not in events.states(mark)                     # nothing to extract
    store = Store(db, readonly=True)
    paths = {r["path"] for r in store.query("SELECT path FROM documents")}
    names = {r["name"] for r in store.query("SELECT name FROM entities")}
    store.close()
    assert paths == {"council.txt", "guild.txt"}
    assert "Lena Varga" not in names                                 # only festival.md named her


async def test_a_folder_left_with_only_what_exclude_leaves_out_is_synced_empty_not_refused(tmp_path):
    # index.exclude leaving out every file is refused as a run starts (a setting's mistake);
    # under a watch, the last note deleted beside the templates kept is the folder's change.
    folder = tmp_path / "notes"
    (folder / "Templates").mkdir(parents=True)
    (folder / "Templates" / "daily.md").write_text("Carol Smith plans the day in Oslo.\n")
    (folder / "a.md").write_text("Alice Smith works at Acme Corp in Paris.\n")
    settings = make_settings(index={**SMALL, "exclude": ["Templates"]}, watch={"quiet_s": 0.05})
    db = tmp_path / "d.db"
    async with running(settings, db, folder) as (daemon, events, send):
        mark = len(events)
        (folder / "a.md").unlink()
        async with send:
            await send.send({(Change.deleted, str(folder / "a.md"))})
            await until(lambda: daemon.syncs == 2)
    assert "failed" not in events.states(mark)
    assert [e["message"] for e in events[mark:] if e["state"] == "warning"] == [
        f"no file under {folder} is indexed: index.exclude (Templates) leaves out the 1 file index.include "
        "matches there; name only the folders or files to leave out"]
    assert db_count(db, "SELECT COUNT(*) FROM documents") == 0


def _made_here():
    """How many Indexers and model clients made from now on are alive (no collection made:
    what the daemon leaves is what is counted). Those of earlier tests in the process, which
    some keep, are not counted."""
    import gc

    from streamrag.llm import LLMClient
    from streamrag.pipeline import Indexer

    def kept() -> list:
        return [o for o in gc.get_objects() if isinstance(o, (Indexer, LLMClient))]

    before = {id(o): o for o in kept()}   # (held, so that no new object takes one of their ids)
    return lambda: sum(id(o) not in before for o in kept())


async def test_a_sync_leaves_no_indexer_or_model_client_behind(corpus, tmp_path, simulator):
    # They sit in reference cycles, and went only with Python's rare full collection, each
    # client with its TLS context (a megabyte outside Python's heap, which no collection
    # threshold counts): `watch` grew 8 MB every 100 changes of 200 documents (bench/watch_soak.py).
    alive = _made_here()
    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.05})
    async with running(settings, tmp_path / "w.db", corpus) as (daemon, events, send):
        for n in range(3):
            note = corpus / f"note{n}.txt"
            note.write_text(f"Captain Oskar Lind{n} sailed the Blue Heron to Kessel.\n")
            await send.send({(Change.added, str(note))})
            await until(lambda: daemon.syncs == n + 2)
            await until(lambda: alive() == 0, timeout=10)   # (once the sync has returned)
        send.close()


async def test_a_sync_that_failed_leaves_no_indexer_or_model_client_behind(corpus, tmp_path, simulator,
                                                                           monkeypatch):
    # A sync that raised (a full disk, say, retried every few minutes at most) left its
    # Indexer and model client in their reference cycles as one that published did (only those
    # were collected), each client with its TLS context, for Python's rare full collection.
    import gc

    import streamrag.daemon as daemon_module
    from streamrag.errors import StreamragError
    from streamrag.pipeline import Indexer

    alive = _made_here()
    real_run = Indexer.run

    async def failing(self, paths):
        if self.command == "watch" and failing.on:
            await real_run(self, [])   # (an index of nothing: its model client made, no version)
            raise StreamragError("the disk holding the index is full")
        return await real_run(self, paths)

    failing.on = False
    monkeypatch.setattr(Indexer, "run", failing)
    # What is left right after each sync's release (a retry sync, 0.1 s on, makes new ones).
    left: list[int] = []
    release = daemon_module._release_memory

    def released() -> None:
        release()
        left.append(alive())

    monkeypatch.setattr(daemon_module, "_release_memory", released)
    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.05})
    gc.disable()   # (only the daemon's own collections count)
    try:
        async with running(settings, tmp_path / "w.db", corpus) as (daemon, events, send):
            await until(lambda: left, timeout=10)
            failing.on = True
            note = corpus / "note.txt"
            note.write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
            await send.send({(Change.added, str(note))})
            await until(lambda: any("disk holding the index is full" in str(e) for e in events))
            await until(lambda: len(left) >= 2)
            assert left[:2] == [0, 0]   # (the initial sync's, the failed one's)
            send.close()
    finally:
        gc.enable()


async def test_a_burst_of_deleted_paths_opens_the_index_once_not_once_per_path(corpus, tmp_path, monkeypatch):
    # A deleted path that matches no include pattern may be a folder that held indexed files:
    # the index is asked, opened once for the batch (10,000 deleted thumbnails opened it 10,000 times).
    (corpus / "archive").mkdir()
    shutil.move(corpus / "railway.txt", corpus / "archive" / "railway.txt")
    settings = make_settings(index=SMALL)
    db = tmp_path / "b.db"
    await sync([corpus], settings, db, root=corpus)
    daemon = Daemon(settings, db, corpus)
    opened = []

    def counted(*args, **kwargs):
        opened.append(args)
        return Store(*args, **kwargs)

    monkeypatch.setattr(watched_folder, "Store", counted)
    (corpus / "festival.md").unlink()
    shutil.rmtree(corpus / "archive")
    burst = {(Change.deleted, str(corpus / "thumbs" / f"{i}.png")) for i in range(300)}
    burst |= {(Change.deleted, str(corpus / "festival.md")), (Change.deleted, str(corpus / "archive"))}
    assert await daemon._classify(burst) == {"festival.md": "deleted", "archive/railway.txt": "deleted"}
    assert len(opened) <= 2, len(opened)   # the paths asked about, then the files classified


async def _looked_at_in_threads(corpus, tmp_path, monkeypatch, *methods: str):
    """A daemon of an index of ``corpus``, the event loop's thread, and the set of threads that
    ``WatchedFolder``'s ``methods`` then run in (each call records its thread)."""
    settings = make_settings(index=SMALL)
    db = tmp_path / "t.db"
    await sync([corpus], settings, db, root=corpus)
    threads: set[int] = set()

    def recorded(method):
        def in_thread(self, *args, **kwargs):
            threads.add(threading.get_ident())
            return method(self, *args, **kwargs)
        return in_thread

    for name in methods:
        monkeypatch.setattr(watched_folder.WatchedFolder, name, recorded(getattr(watched_folder.WatchedFolder, name)))
    return Daemon(settings, db, corpus), threading.get_ident(), threads


async def test_a_batch_is_looked_at_off_the_event_loop(corpus, tmp_path, monkeypatch):
    # ``relevant`` ran for each event on the event loop, and so did the looks at each path and
    # at the index: a batch of 100,000 events (a copy told file by file) held the loop, its
    # signals and its other tasks with it, for seconds. They run in a worker thread now (a
    # batch of a few events at once, on the loop); the batch is classified as before.
    from streamrag import daemon as daemon_module

    daemon, loop, threads = await _looked_at_in_threads(corpus, tmp_path, monkeypatch, "relevant", "takes")
    (corpus / "new.txt").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
    (corpus / "festival.md").unlink()
    burst = {(Change.added, str(corpus / "new.txt")), (Change.deleted, str(corpus / "festival.md"))}
    burst |= {(Change.modified, str(corpus / ".cache" / f"{i}.txt")) for i in range(daemon_module._LOOK_APART)}
    assert await daemon._classify(burst) == {"new.txt": "added", "festival.md": "deleted"}
    assert threads and loop not in threads, threads


async def test_a_small_batch_is_looked_at_on_the_event_loop_at_once(corpus, tmp_path, monkeypatch):
    # The hop to a worker thread came before every batch (one event too) and, on a loaded
    # machine, outlasted the quiet period of the batch before, whose sync then began first
    # (eed1cad). A batch of fewer than _LOOK_APART events is looked at on the loop, at once.
    from streamrag import daemon as daemon_module

    daemon, loop, threads = await _looked_at_in_threads(corpus, tmp_path, monkeypatch, "relevant")
    (corpus / "new.txt").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
    (corpus / "festival.md").unlink()
    burst = {(Change.added, str(corpus / "new.txt")), (Change.deleted, str(corpus / "festival.md"))}
    burst |= {(Change.modified, str(corpus / ".cache" / f"{i}.txt")) for i in range(daemon_module._LOOK_APART - 3)}
    assert await daemon._classify(burst) == {"new.txt": "added", "festival.md": "deleted"}
    assert threads == {loop}, threads


@pytest.mark.parametrize("slowed", ["relevant", "included"])
async def test_a_stop_ends_the_look_at_a_large_batch_in_its_worker_thread(corpus, tmp_path, slowed):
    # A batch of _LOOK_APART events or more is looked at in a worker thread, which a stop
    # abandons; the thread went on to the batch's last event, and the process's exit waited for
    # it (1.5 s of a look slowed to 3 s). Now it ends at the event after the stop: in ``_kinds``
    # (``relevant`` of each event) and in ``_look`` (``included`` of each file there). (The
    # stopped line's count of the events seen, ``_seen_left``, asks ``relevant`` too: not counted.)
    from streamrag import daemon as daemon_module

    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db = tmp_path / "c.db"
    looked: list[tuple] = []   # the events (or files) the slowed step was asked about
    ended, inside = threading.Event(), threading.local()
    async with running(settings, db, corpus) as (daemon, events, send):
        files = [corpus / f"n{i}.txt" for i in range(2 * daemon_module._LOOK_APART)]
        for i, path in enumerate(files):
            path.write_text(f"Entry {i}: Bo Lund paid the toll.\n")
        step = getattr(daemon.folder, slowed)

        def slow(*args, **kwargs):
            if getattr(inside, "work", False):
                looked.append(args)
                time.sleep(0.02)
            return step(*args, **kwargs)

        setattr(daemon.folder, slowed, slow)
        work = getattr(daemon, "_kinds" if slowed == "relevant" else "_look")

        def working(*args):
            inside.work = True
            try:
                return work(*args)
            finally:
                inside.work = False
                ended.set()

        setattr(daemon, work.__name__, working)
        async with send:
            await send.send({(Change.added, str(path)) for path in files})
            await until(lambda: len(looked) >= 3)
            daemon.stop("test")
    await until(ended.is_set)
    assert 3 <= len(looked) < len(files), len(looked)


async def test_a_file_replaced_by_a_folder_of_its_name_leaves_the_index(corpus, tmp_path):
    # `rm guild.txt && mkdir guild.txt` in one batch queued nothing (an empty folder has no file
    # to add): the daemon said the index was current with guild.txt's text still in it.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "f.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        async with send:
            guild, council = corpus / "guild.txt", corpus / "council.txt"
            guild.unlink()
            guild.mkdir()
            burst = {(Change.deleted, str(guild)), (Change.added, str(guild))}
            assert await daemon._classify(burst) == {"guild.txt": "deleted"}
            await send.send(burst)
            await until(lambda: daemon.syncs == 2)
            # One with a file in it: the folder's file is added, and the file it was leaves.
            council.unlink()
            council.mkdir()
            (council / "minutes.txt").write_text("Mira Osk chaired the Harbor Council.\n")
            burst = {(Change.deleted, str(council)), (Change.added, str(council)),
                     (Change.added, str(council / "minutes.txt"))}
            assert await daemon._classify(burst) == {"council.txt": "deleted", "council.txt/minutes.txt": "added"}
            await send.send(burst)
            await until(lambda: daemon.syncs == 3)
    store = Store(db, readonly=True)
    paths = set(index_rows.file_paths(store))
    store.close()
    assert "guild.txt" not in paths and "council.txt" not in paths and "council.txt/minutes.txt" in paths, paths


async def test_a_folder_replaced_by_a_file_of_its_name_is_not_read_and_its_files_leave(corpus, tmp_path):
    # `mv archive away && echo ... > archive`: "archive" (a name index.include does not take)
    # was queued "added" and extracted ahead, and the files the folder held were not queued.
    (corpus / "archive").mkdir()
    shutil.move(corpus / "railway.txt", corpus / "archive" / "railway.txt")
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "f.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        async with send:
            mark = len(events)
            shutil.move(corpus / "archive", tmp_path / "away")
            (corpus / "archive").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
            burst = {(Change.deleted, str(corpus / "archive")), (Change.added, str(corpus / "archive"))}
            assert await daemon._classify(burst) == {"archive/railway.txt": "deleted"}
            await send.send(burst)
            await until(lambda: daemon.syncs == 2)
            assert not [e for e in events[mark:] if e["state"] in ("extracting", "waiting") and "scanned" not in e]
    store = Store(db, readonly=True)
    paths = set(index_rows.file_paths(store))
    store.close()
    assert "archive/railway.txt" not in paths and "archive" not in paths and "guild.txt" in paths, paths


async def test_a_file_that_cannot_be_indexed_is_said_once(corpus, tmp_path):
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "b.db", corpus) as (daemon, events, send):
        assert "warning" not in events.states()
        (corpus / "scan.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
        async with send:
            await send.send({(Change.added, str(corpus / "scan.txt"))})
            await until(lambda: daemon.syncs == 2)
            (corpus / "notes.txt").write_text("Mira Osk chaired the Harbor Council meeting.\n")
            await send.send({(Change.added, str(corpus / "notes.txt"))})
            await until(lambda: daemon.syncs == 3)
    warnings = [e["message"] for e in events if e["state"] == "warning"]
    assert len(warnings) == 1 and warnings[0].startswith("scan.txt: binary file"), warnings


async def test_an_export_written_into_the_watched_folder_is_said_once(corpus, tmp_path):
    # `export x.txt` into the folder a watch runs on: the batch's extraction ahead read it,
    # remembered it as an export said once (``WrittenByExport.again``), and said nothing (its
    # warnings are a sync's); the sync found it so remembered and unchanged, and said nothing
    # either: the warning `index` gives was never given. (Now a whole export queues nothing, and
    # its line is said at its event: test_export_watch.)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})   # offline: fast
    db = tmp_path / "b.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        export_json(db, corpus / "x.txt")
        old = time.time() - 5   # (saved a while ago: not waited on as still written)
        os.utime(corpus / "x.txt", (old, old))
        start = len(events)
        async with send:
            await send.send({(Change.added, str(corpus / "x.txt"))})
            await until(lambda: "warning" in events.states(start))
    assert events.states(start) == ["warning", "stopped"] and daemon.syncs == 1, events[start:]   # (nothing queued)
    warnings = [e["message"] for e in events[start:] if e["state"] == "warning"]
    assert warnings == ["x.txt: written by `streamrag export`, the index's own output, not a document; "
                        "nothing to index"], warnings
    assert _indexed_paths(db) == {"council.txt", "festival.md", "guild.txt", "railway.txt"}


async def test_a_file_that_cannot_be_indexed_counts_once_until_it_changes(corpus, tmp_path, files_read):
    # Every sync read a binary file again and recorded a new failure: `status` counted one more
    # per sync for each such file (14 became 772 in a day's soak with 12 of them).
    read = files_read
    (corpus / "scan.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "c.db"

    def failures() -> tuple[int, int]:
        info = status_info(db)
        return info["failures_total"], info["failures_last_run"]

    async with running(settings, db, corpus) as (daemon, events, send):
        assert read.count("scan.txt") == 1 and failures() == (1, 1)
        async with send:
            for n in range(3):   # syncs for other files: the binary one is named, not read again
                (corpus / f"note{n}.txt").write_text(f"Mira Osk chaired meeting {n} of the Harbor Council.\n")
                await send.send({(Change.added, str(corpus / f"note{n}.txt"))})
                await until(lambda: daemon.syncs == 2 + n)
                assert failures() == (1, 1)
                assert daemon.health()["failures"] == 1
            assert read.count("scan.txt") == 1
            # Changed, and still binary: read again, and a new failure.
            (corpus / "scan.txt").write_bytes(b"\x00\x02PK\x03\x04 still not text")
            await send.send({(Change.modified, str(corpus / "scan.txt"))})
            await until(lambda: daemon.syncs == 5)
            assert read.count("scan.txt") >= 2 and failures() == (2, 1)
            # Made text: indexed, and no failure of the last update.
            (corpus / "scan.txt").write_text("Ansel Pirrow scanned the charts of Brisk Hollow.\n")
            await send.send({(Change.modified, str(corpus / "scan.txt"))})
            await until(lambda: daemon.syncs == 6)
            assert failures() == (2, 0) and daemon.health()["failures"] == 0
    assert db_count(db, "SELECT count(*) FROM files WHERE path = 'scan.txt'") == 1
    warnings = [e["message"] for e in events if e["state"] == "warning"]
    assert len(warnings) == 1 and warnings[0].startswith("scan.txt: binary file"), warnings   # (the same line)


async def test_a_file_that_cannot_be_indexed_takes_its_failure_with_it_when_deleted(corpus, tmp_path):
    # A binary x.txt added and then deleted stayed a failure ("1 in the last update", the health
    # line's failures 1) until the sync of some other change.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "d.db"

    def failures() -> tuple[int, int]:
        info = status_info(db)
        return info["failures_total"], info["failures_last_run"]

    async with running(settings, db, corpus) as (daemon, events, send):
        async with send:
            (corpus / "x.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
            await send.send({(Change.added, str(corpus / "x.txt"))})
            await until(lambda: daemon.syncs == 2)
            assert failures() == (1, 1) and daemon.health()["failures"] == 1
            (corpus / "x.txt").unlink()
            await send.send({(Change.deleted, str(corpus / "x.txt"))})
            await until(lambda: daemon.syncs == 3)
            assert failures()[1] == 0 and daemon.health()["failures"] == 0
            # (and one in a folder moved away, the one event a watcher sees of it)
            (corpus / "scans").mkdir()
            (corpus / "scans" / "y.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
            await send.send({(Change.added, str(corpus / "scans"))})
            await until(lambda: daemon.syncs == 4)
            assert failures()[1] == 1 and daemon.health()["failures"] == 1
            (corpus / "scans").rename(tmp_path / "scans")
            await send.send({(Change.deleted, str(corpus / "scans"))})
            await until(lambda: daemon.syncs == 5)
            assert failures()[1] == 0 and daemon.health()["failures"] == 0


async def test_the_health_line_follows_the_sync_that_changes_its_failures(corpus, tmp_path):
    # A binary x.txt added: `status` said "1 in the last update" at once, and the health line
    # still said "0 failures" until its loop looked again, up to a minute later (its deletion
    # alike). The loop here never looks again: each line comes after its sync's idle line.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "f.db"

    def health() -> list[dict]:
        return [e for e in events if e["state"] == "health"]

    async with running(settings, db, corpus, health_s=3600) as (daemon, events, send):
        assert [h["failures"] for h in health()] == [0]
        async with send:
            for failures, change in ((1, Change.added), (0, Change.deleted)):
                if change == Change.added:
                    (corpus / "x.txt").write_bytes(b"\x00\x01PK\x03\x04 not text")
                else:
                    (corpus / "x.txt").unlink()
                await send.send({(change, str(corpus / "x.txt"))})
                await until(lambda: len(health()) == 3 - failures, timeout=5)
                line = health()[-1]
                assert line["failures"] == status_info(db)["failures_last_run"] == failures, line
                assert f", {failures} failure{'' if failures == 1 else 's'}, " in line["message"], line
                assert line["last_sync_s"] == daemon.last_sync_s and events.states()[-2:] == ["idle", "health"]


async def test_the_initial_sync_names_documents_in_formats_left_out_once(corpus, tmp_path):
    (corpus / "minutes.pdf").write_bytes(b"%PDF-1.4")
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "l.db", corpus) as (daemon, events, send):
        (corpus / "notes.txt").write_text("Mira Osk chaired the Harbor Council meeting.\n")
        async with send:
            await send.send({(Change.added, str(corpus / "notes.txt"))})
            await until(lambda: daemon.syncs == 2)
    warnings = [e["message"] for e in events if e["state"] == "warning"]
    assert warnings == ["left out 1 .pdf (not plain text: convert it to .txt or .md, with pdftotext "
                        "or pandoc for example, to index it)"], warnings


async def test_a_file_of_a_kind_left_out_that_appears_is_said_once_per_kind(corpus, tmp_path):
    # `index` says "left out 1 .pdf (... convert it ...)"; `watch` said it only of the files its
    # initial sync found: a .pdf dropped into the folder later got no line. Now the first file of
    # each kind left out that appears is said, once; hidden, excluded and temporary files, and a
    # kind that needs nothing done (an image), are not.
    (corpus / "minutes.pdf").write_bytes(b"%PDF-1.4")   # (said by the initial sync)
    (corpus / "Archive").mkdir()
    settings = make_settings(index={**SMALL, "exclude": ["Archive"]}, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "l.db", corpus) as (daemon, events, send):
        said = len([e for e in events if e["state"] == "warning"])
        made = ["minutes2.pdf", ".draft.docx", "Archive/old.docx", "~$report.docx", "photo.png", "report.docx",
                "memo.docx", "guide.rst", "notes.txt"]
        for name in made:
            (corpus / name).write_bytes(b"PK\x03\x04 word" if name.endswith(".docx") else b"text\n")
        # The watcher's keep passes a kind not said yet, which the scan leaves out
        changes = {(Change.added, str(corpus / name)) for name in made}
        kept = {os.path.relpath(path, corpus) for _change, path in daemon.worth_holding(changes)}
        assert {"report.docx", "memo.docx", "guide.rst", "notes.txt"} <= kept and "photo.png" not in kept, kept
        async with send:
            for name in made:   # (one batch each: a kind said is not said again)
                await send.send({(Change.added, str(corpus / name))})
            await until(lambda: daemon.syncs == 2)
        # ... and drops that kind's writes once said.
        assert not daemon.worth_holding({(Change.modified, str(corpus / "memo.docx"))})
    warnings = [e["message"] for e in events if e["state"] == "warning"][said:]
    assert warnings == ["left out 1 .docx (not plain text: convert it to .txt or .md, with pdftotext "
                        "or pandoc for example, to index it): report.docx",
                        "left out 1 .rst (plain text that index.include leaves out; to index it, set include = "
                        "[\"*.txt\", \"*.md\", \"*.markdown\", \"*.jsonl\", \"*.csv\", \"*.rst\"] under [index]): "
                        "guide.rst"], warnings


@pytest.mark.parametrize("pdfs_alone", [False, True])
async def test_a_folder_moved_in_says_the_kinds_left_out_that_it_holds(corpus, tmp_path, pdfs_alone):
    # A folder moved in (`mv ~/Downloads/scans notes/`) is one event, the folder's: the files in
    # it were listed for those the scan takes, and its .pdf files got no line (82b2826 said only
    # a file's own event), though `index` of the same folder says "left out 2 .pdf". They are
    # counted (the line said "1 .pdf" of any number) and named; so are those of a folder of
    # PDFs alone (no file to sync: no sync comes).
    outside = tmp_path / "scans"
    outside.mkdir()
    for name in ("a.pdf", "b.pdf", *(() if pdfs_alone else ("c.txt",))):
        (outside / name).write_bytes(b"%PDF-1.4" if name.endswith(".pdf") else b"Mira Osk met Bo Lund.\n")
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "m.db", corpus) as (daemon, events, send):
        said = len([e for e in events if e["state"] == "warning"])
        os.rename(outside, corpus / "scans")
        async with send:
            await send.send({(Change.added, str(corpus / "scans"))})
            await until(lambda: daemon.syncs == 2 or pdfs_alone and ".pdf" in daemon._kinds_said_left_out)
    warnings = [e["message"] for e in events if e["state"] == "warning"][said:]
    assert warnings == ["left out 2 .pdf (not plain text: convert them to .txt or .md, with pdftotext "
                        "or pandoc for example, to index them): scans/a.pdf, scans/b.pdf"], warnings


async def test_the_files_left_out_of_a_folder_moved_in_are_told_apart_off_the_event_loop(
        corpus, tmp_path, monkeypatch):
    # A folder of 100,000 PDFs moved in: counting and naming them (d30225c) made each one's path
    # from the root and its kind on the event loop, which it held 1.2 s (0.1 s before), its
    # signals and progress with it. Now in the worker threads that list the folder and count them.
    outside = tmp_path / "scans"
    outside.mkdir()
    for n in range(300):   # (past _LOOK_APART)
        (outside / f"scan{n:03}.pdf").write_bytes(b"%PDF-1.4")
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    on_loop: list[str] = []
    async with running(settings, tmp_path / "m.db", corpus) as (daemon, events, send):
        said = len([e for e in events if e["state"] == "warning"])
        loop_thread = threading.current_thread()
        for name in ("relpath", "splitext"):
            def recording(path, *args, _real=getattr(os.path, name), _name=name):
                if threading.current_thread() is loop_thread and os.fspath(path).endswith(".pdf"):
                    on_loop.append(_name)
                return _real(path, *args)
            monkeypatch.setattr(os.path, name, recording)
        os.rename(outside, corpus / "scans")
        async with send:
            await send.send({(Change.added, str(corpus / "scans"))})
            await until(lambda: ".pdf" in daemon._kinds_said_left_out)
        monkeypatch.undo()
    warnings = [e["message"] for e in events if e["state"] == "warning"][said:]
    assert warnings == ["left out 300 .pdf (not plain text: convert them to .txt or .md, with pdftotext or pandoc "
                        "for example, to index them): scans/scan000.pdf, scans/scan001.pdf, scans/scan002.pdf "
                        "and 297 more"], warnings
    assert not on_loop, f"{len(on_loop)} on the loop: {sorted(set(on_loop))}"


async def test_files_of_a_kind_left_out_dropped_in_together_are_counted_and_named(corpus, tmp_path):
    # Five PDFs dropped in (one batch) were said "left out 1 .pdf (... convert it ...)", none
    # named: now counted, the first three named, as the scan's line on conflict copies names them.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    names = [f"scan{n}.pdf" for n in range(5)]
    async with running(settings, tmp_path / "p.db", corpus) as (daemon, events, send):
        said = len([e for e in events if e["state"] == "warning"])
        for name in names:
            (corpus / name).write_bytes(b"%PDF-1.4")
        async with send:
            await send.send({(Change.added, str(corpus / name)) for name in names})
            await until(lambda: ".pdf" in daemon._kinds_said_left_out)
    warnings = [e["message"] for e in events if e["state"] == "warning"][said:]
    assert warnings == ["left out 5 .pdf (not plain text: convert them to .txt or .md, with pdftotext "
                        "or pandoc for example, to index them): scan0.pdf, scan1.pdf, scan2.pdf and 2 more"], warnings


class DaemonClock:
    """The time as the daemon reads it (``anyio.current_time`` in ``streamrag.daemon``), moved
    on by the test alone, so that its quiet periods and waits are counted in the test's steps,
    whatever a loaded machine does to the real time between them. (Its waits for events still
    end in real time: the daemon then reads the clock, finds its deadline not reached, and
    waits again.)"""

    def __init__(self, monkeypatch) -> None:
        import types

        from streamrag import daemon as daemon_module

        self.now = 1000.0
        clock = types.ModuleType("anyio")
        clock.__dict__.update(vars(anyio))
        clock.current_time = lambda: self.now
        monkeypatch.setattr(daemon_module, "anyio", clock)


class WallClock:
    """The wall clock as the daemon reads it (``time.time`` in ``streamrag.daemon``, against which
    it tells a file's age by its mtime), held at ``now`` by the test: a file is then as old as the
    test made it when the daemon looks, whatever time a loaded machine takes to get the batch to
    it. (The daemon's waits still pass in real time.)"""

    def __init__(self, monkeypatch, now: float) -> None:
        import types

        from streamrag import daemon as daemon_module

        self.now = now
        clock = types.ModuleType("time")
        clock.__dict__.update(vars(time))
        clock.time = lambda: self.now
        monkeypatch.setattr(daemon_module, "time", clock)


async def test_a_file_written_steadily_is_synced_while_it_grows(corpus, tmp_path, monkeypatch):
    """Events that never pause for quiet_s (a log appended to) delay the sync 10 x quiet_s at most.

    An edit every 0.03 s of the daemon's clock, which moves as it queues each edit's batch (in
    its own task: a clock moved by the test could be read by a daemon woken just then, before
    the edit's batch came); each edit is sent once the one before was queued. So no quiet
    period of 0.1 s ever passes, and the sync starts with the first edit 1 s after the first
    one was sent (the 34th: 0.03 * 34 = 1.02 s). Told by the edits queued before it, not timed
    (a 4 s bound on the wall clock)."""
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.1})   # offline: fast
    log = corpus / "log.txt"
    async with running(settings, tmp_path / "g.db", corpus) as (daemon, _events, send):
        clock = DaemonClock(monkeypatch)
        queued: list[int] = []          # the edits queued, one a batch
        at_sync: list[int] = []         # how many were queued when a sync began
        queue, sync_ = daemon._queue, daemon._sync

        async def queueing(batch, **kwargs):
            clock.now += 0.03
            await queue(batch, **kwargs)
            queued.append(len(queued) + 1)

        async def syncing(reason, **kwargs):
            at_sync.append(len(queued))
            return await sync_(reason, **kwargs)

        daemon._queue, daemon._sync = queueing, syncing
        async with send:
            for n in range(1, 200):    # (without the bound: 6 s of the clock, 60 quiet periods, no sync)
                if at_sync:
                    break
                with log.open("a") as f:
                    f.write(f"Line {n}: Captain Oskar Lind logged the tide at Port Vell.\n")
                await send.send({(Change.added if n == 1 else Change.modified, str(log))})
                await until(lambda: len(queued) == n or at_sync, timeout=60)
    assert at_sync == [34], (at_sync, len(queued))   # (and none once the edits ended)
    store = Store(tmp_path / "g.db", readonly=True)
    assert store.scalar("SELECT count(*) FROM documents WHERE path = 'log.txt'") == 1
    store.close()


async def _a_log_written_steadily(corpus: Path, db: Path, monkeypatch, *, note_at: int | None) -> tuple[list, list]:
    """A log written and sent as a batch every 0.12 s of the daemon's clock (quiet_s 0.5: its
    batches never pause for it) until the sync that takes it, and a note saved once, in the
    log's batch ``note_at`` (None: no note). The syncs: (log batches queued when it began, the
    files it left pending, the files indexed after it and ``snapshot`` of the index); and the
    batches queued."""
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5, "debounce_ms": 0})
    log, note = corpus / "log.txt", corpus / "note.txt"
    log.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")   # (indexed by the initial sync)
    syncs: list[tuple[int, frozenset]] = []
    queued: list[int] = []
    async with running(settings, db, corpus) as (daemon, _events, send):
        # (both clocks moved by the test alone, the files' mtimes set 0.01 s before the wall
        # clock's time: at exactly its time, float rounding made a file written after it now and then)
        clock, wall = DaemonClock(monkeypatch), WallClock(monkeypatch, time.time())
        queue, sync_ = daemon._queue, daemon._sync

        async def queueing(batch, **kwargs):
            clock.now += 0.12
            wall.now += 0.12
            await queue(batch, **kwargs)
            queued.append(len(queued) + 1)

        async def syncing(reason, **kwargs):
            at = len(queued)
            ok = await sync_(reason, **kwargs)
            syncs.append((at, kwargs.get("left_as_indexed", frozenset()), _indexed_paths(db), snapshot(db)))
            return ok

        daemon._queue, daemon._sync = queueing, syncing
        async with send:
            for n in range(1, 200):
                if any(not held for _, held, *_ in syncs):   # (the log's own sync: it leaves nothing pending)
                    break
                with log.open("a") as f:
                    f.write(f"Line {n}: Captain Oskar Lind logged the tide at Port Vell.\n")
                batch = {(Change.modified, str(log))}
                if n == note_at:
                    note.write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
                    batch.add((Change.added, str(note)))
                for _, path in batch:
                    # (0.01 s old: no rounding makes it younger than now)
                    os.utime(path, ns=(int((wall.now - 0.01) * 1e9),) * 2)
                await send.send(batch)
                await until(lambda: len(queued) == n, timeout=60)
    return syncs, queued


async def test_a_file_saved_beside_one_written_steadily_is_synced_after_its_own_quiet_period(
        corpus, tmp_path, monkeypatch):
    # A sync takes the whole folder, so a note saved beside a log written on and on waited with
    # it, up to the log's cap of 10 x quiet_s (20 s by default). Now the note is synced alone once
    # its own quiet period is over (4 of the log's batches, 0.5 s of the daemon's clock, not 40),
    # the log left pending and as indexed; the log is synced at its own cap, as without the note.
    alone, _ = await _a_log_written_steadily(corpus, tmp_path / "a.db", monkeypatch, note_at=None)
    shutil.rmtree(corpus)
    shutil.copytree(REPO / "tests" / "data" / "harbor", corpus)
    syncs, _ = await _a_log_written_steadily(corpus, tmp_path / "b.db", monkeypatch, note_at=8)
    # (and the sync of the log's last batch, sent as its cap's sync ran, when the source ends)
    assert alone[0][0] > 30 and not alone[0][1], alone   # the log's cap
    (at, held, indexed, ours), *rest = syncs
    assert held == {"log.txt"} and "note.txt" in indexed, syncs
    assert 8 < at <= 8 + 0.5 / 0.12 + 2, syncs                # its own quiet period, in the log's batches
    assert [s[:2] for s in rest] == [s[:2] for s in alone], (syncs, alone)   # the log's, as without the note
    # Each version is the graph a fresh index of the folder makes: with the log as it was
    # indexed (held back), then as it is (Leiden's partition may differ: it starts from the
    # previous one).
    settings = make_settings(index=SMALL)
    fresh = tmp_path / "fresh"
    shutil.copytree(corpus, fresh, ignore=shutil.ignore_patterns("log.txt", ".*"))
    (fresh / "log.txt").write_text("Mira Osk opened the harbor ledger at Port Vell.\n")
    for folder, got in ((fresh, ours), (corpus, rest[-1][3])):
        await sync([folder], settings, tmp_path / f"{folder.name}.db", root=folder)
        expected = snapshot(tmp_path / f"{folder.name}.db")
        for key in ("entities", "relationships", "documents"):
            assert got[key] == expected[key], (folder, key)


def _written_at(path: Path, text: str, wall: WallClock) -> None:
    """Appends ``text`` to ``path``, its mtime 0.01 s before the test's wall clock (no rounding
    makes it younger than now)."""
    with path.open("a") as f:
        f.write(text)
    os.utime(path, ns=(int((wall.now - 0.01) * 1e9),) * 2)


async def _a_note_beside_a_log_written_on(log: Path, note: Path, events, send, clock, wall) -> None:
    """The log's two batches, the note saved in the second, both clocks moved 0.2 s after each;
    then, its quiet period over, the log written again with no batch (the watcher holds it)."""
    for n in range(2):
        _written_at(log, f"Entry {n}: Bo Lund paid the toll.\n", wall)
        batch = {(Change.modified, str(log))}
        if n == 1:
            _written_at(note, "Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n", wall)
            batch.add((Change.added, str(note)))
        mark = len(events)
        await send.send(batch)
        await until(lambda: "queued" in events.states(mark))
        clock.now += 0.2
        wall.now += 0.2
    clock.now += 0.4
    wall.now += 0.4
    _written_at(log, "Entry 2: Bo Lund paid the toll.\n", wall)


async def test_a_file_saved_beside_one_written_on_with_its_batches_apart_is_synced_alone(corpus, tmp_path, monkeypatch):
    # With its batches further apart than quiet_s (the watcher holds a file written on and on
    # back for 10 x debounce_ms), the log is found written at the look after each quiet period
    # (``_written_again``), which held the note saved in its second batch back too, up to the
    # log's cap. Now that look syncs the note alone, the log left as indexed. Scripted: both
    # clocks are moved by the test, the files' mtimes set 0.01 s before the wall clock's time.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5, "debounce_ms": 0})
    db = tmp_path / "c.db"
    log, note = corpus / "log.txt", corpus / "note.txt"
    log.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")
    syncs: list[tuple[frozenset, set[str]]] = []

    async with running(settings, db, corpus) as (daemon, events, send):
        clock, wall = DaemonClock(monkeypatch), WallClock(monkeypatch, time.time())
        sync_ = daemon._sync

        async def syncing(reason, **kwargs):
            ok = await sync_(reason, **kwargs)
            syncs.append((kwargs.get("left_as_indexed", frozenset()), _indexed_paths(db)))
            return ok

        daemon._sync = syncing
        async with send:
            await _a_note_beside_a_log_written_on(log, note, events, send, clock, wall)
            await until(lambda: syncs, timeout=10)   # (the look, within a second: _LOOK_S)
            assert syncs[0][0] == {"log.txt"} and "note.txt" in syncs[0][1], syncs
            assert daemon.pending == {"log.txt": "modified"}
            assert db_count(db, "SELECT chars FROM documents WHERE path = 'log.txt'") == \
                len("Mira Osk opened the harbor ledger at Port Vell.\n")   # as indexed
    assert syncs[-1][0] == set() and db_count(db, "SELECT chars FROM documents WHERE path = 'log.txt'") == \
        len(log.read_text())   # (the source ended: synced whole)


async def test_a_file_the_watcher_holds_is_left_as_indexed_by_the_sync_of_a_note_beside_it(corpus, tmp_path):
    # A log written every 0.1 s is held by the watcher (its burst goes on), a note saved beside
    # it handed over alone: the note's sync scanned the whole folder and indexed the log as it
    # was, half-written (its calls paid at each such note), and said nothing of it: the daemon
    # never saw the log's events. Now it is left as indexed and said still written, as a busy
    # file the daemon saw is, and synced when its burst is handed over.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3, "debounce_ms": 0})
    db = tmp_path / "h.db"
    log, note = corpus / "log.txt", corpus / "note.txt"
    first = "Mira Osk opened the harbor ledger at Port Vell.\n"
    log.write_text(first)   # (indexed by the initial sync)
    held: set = set()
    syncs: list[tuple[str, dict, frozenset, int]] = []
    async with running(settings, db, corpus, held=held) as (daemon, _events, send):
        sync_ = daemon._sync

        async def syncing(reason, **kwargs):
            ok = await sync_(reason, **kwargs)
            syncs.append((reason, kwargs["why"], kwargs.get("left_as_indexed", frozenset()),
                          db_count(db, "SELECT chars FROM documents WHERE path = 'log.txt'")))
            return ok

        daemon._sync = syncing
        async with send:
            with log.open("a") as f:
                f.write("Line 1: Captain Oskar Lind logged the tide at Port Vell.\n")
            held.add((Change.modified, str(log)))
            note.write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
            await send.send({(Change.added, str(note))})
            await until(lambda: syncs, timeout=30)
            reason, why, left, chars = syncs[0]
            assert left == {"log.txt"} and chars == len(first), syncs   # as indexed
            assert "note.txt" in _indexed_paths(db)
            assert reason == "1 changed file; log.txt still written, synced once quiet", reason
            assert why["files"] == 1 and why["held"] == 1, why
            assert daemon.pending == {}, daemon.pending   # (it is the watcher's, not queued)
            held.clear()   # its burst ends: handed over, synced
            await send.send({(Change.modified, str(log))})
            await until(lambda: len(syncs) == 2, timeout=30)
    reason, _why, left, chars = syncs[1]
    assert left == frozenset() and chars == len(log.read_text()) and reason == "1 changed file", syncs


# A big file of the pause tests (over pipeline.LEAD_BYTES, as they set it: 2,000 bytes).
_BIG_TEXT = "".join(f"Captain Ilse Zorbanek{n} moored the Sea Lark{n} at Kessel pier {n} and paid the harbor "
                    f"master Tomas Rell{n} in silver.\n" for n in range(30))


def _big_calls_held(hold, asked=None):
    """An endpoint answering as the simulator does (an httpx.MockTransport handler) whose calls of
    _BIG_TEXT, past its first two answered, each await ``hold()`` first; ``asked`` counts every
    request that reaches it, answered or not."""
    from collections import Counter

    answer = simulated_transport().handler
    answered: Counter = Counter()

    async def handler(request):
        if asked is not None:
            asked[request.content] += 1
        if b"Zorbanek" in request.content and sum(b"Zorbanek" in body for body in answered) >= 2:
            await hold()
        response = answer(request)
        answered[request.content] += 1
        return response

    return handler


async def test_a_note_saved_during_a_big_files_extraction_is_published_before_it(corpus, tmp_path, monkeypatch):
    # A big file added (pipeline.LEAD_BYTES of new text: a 2 MB dump, 19 s of calls with a 300 ms
    # model, hours at 30 MB), then a note beside it: the note's batch was not even taken until
    # the big file's extraction ahead was done. Now the batch pauses that extraction (what it
    # stored kept), the note is synced with the big file left as indexed, then the extraction
    # resumes, and a later sync publishes the big file. The calls under way at the pause are
    # answered and cached first (drained, not cancelled: cut, they were asked again, and a paid
    # API billed them twice), so no request reaches the endpoint twice.
    import httpx
    from collections import Counter

    from streamrag import pipeline

    monkeypatch.setattr(pipeline, "LEAD_BYTES", 2_000)
    settings = make_settings("http://llm.test/v1", index=SMALL, watch={"quiet_s": 0.3, "debounce_ms": 0})
    db = tmp_path / "b.db"
    big, note = corpus / "big.txt", corpus / "note.txt"
    (tmp_path / "big.txt").write_text(_BIG_TEXT)   # (moved in after the initial sync)
    asked: Counter = Counter()   # (requests that reached the endpoint, answered or not)
    release = anyio.Event()
    blocked = anyio.Event()

    async def hold() -> None:
        # (the big file's first answers come, then its calls wait until the note's batch is taken)
        blocked.set()
        await release.wait()

    handler = _big_calls_held(hold, asked)

    syncs: list[tuple[str, dict, frozenset, set[str]]] = []
    try:
        async with running(settings, db, corpus, transport=httpx.MockTransport(handler)) as (daemon, events, send):
            sync_ = daemon._sync

            async def syncing(reason, **kwargs):
                ok = await sync_(reason, **kwargs)
                syncs.append((reason, kwargs["why"], kwargs.get("left_as_indexed", frozenset()), _indexed_paths(db)))
                return ok

            daemon._sync = syncing
            async with send:
                (tmp_path / "big.txt").rename(big)
                await send.send({(Change.added, str(big))})
                await blocked.wait()   # (its extraction ahead under way)
                note.write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
                await send.send({(Change.added, str(note))})
                await until(lambda: daemon._came, timeout=30)   # (taken: the pause has begun)
                release.set()   # (the calls under way answer now: the pause waits for them)
                await until(lambda: syncs, timeout=30)
                reason, why, left, indexed = syncs[0]
                assert left == {"big.txt"} and "note.txt" in indexed and "big.txt" not in indexed, syncs
                assert reason == "1 changed file; big.txt extracted after it", reason
                assert why["files"] == 1 and why["paused"] == 1, why
                assert [e["file"] for e in events if e["state"] == "paused"] == ["big.txt"]
                assert daemon.pending == {"big.txt": "added"}, daemon.pending
                await until(lambda: len(syncs) == 2, timeout=30)
    finally:
        release.set()
    reason, _why, left, indexed = syncs[1]
    assert left == frozenset() and "big.txt" in indexed and reason == "1 changed file", syncs
    assert max(asked.values()) == 1, [body[:200] for body, n in asked.items() if n > 1]   # none asked twice
    # The graph equals one built in one go (the partition may differ: Leiden starts from the last).
    fresh_dir = tmp_path / "fresh"
    shutil.copytree(corpus, fresh_dir, ignore=shutil.ignore_patterns(".streamrag"))
    await sync([fresh_dir], settings, tmp_path / "fresh.db", root=fresh_dir, transport=simulated_transport())
    ours, fresh = snapshot(db), snapshot(tmp_path / "fresh.db")
    for key in ("entities", "relationships", "claims", "documents"):
        assert ours[key] == fresh[key], key


async def test_a_stop_as_a_batch_pauses_a_big_files_extraction_counts_that_batch(corpus, tmp_path, monkeypatch):
    # A stop came as a note's batch was pausing a big file's extraction ahead (its calls under
    # way answering): the batch, taken from the stream by the pause (``_came``), was neither
    # pending nor seen, and the stopped line counted the big file alone.
    import httpx

    from streamrag import pipeline

    monkeypatch.setattr(pipeline, "LEAD_BYTES", 2_000)
    settings = make_settings("http://llm.test/v1", index=SMALL, watch={"quiet_s": 0.3, "debounce_ms": 0})
    db = tmp_path / "b.db"
    big, note = corpus / "big.txt", corpus / "note.txt"
    release, blocked = anyio.Event(), anyio.Event()

    async def hold() -> None:
        blocked.set()
        await release.wait()

    handler = _big_calls_held(hold)

    try:
        async with running(settings, db, corpus, transport=httpx.MockTransport(handler)) as (daemon, events, send):
            async with send:
                big.write_text(_BIG_TEXT)
                await send.send({(Change.added, str(big))})
                await blocked.wait()
                note.write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
                await send.send({(Change.added, str(note))})
                await until(lambda: daemon._came, timeout=30)   # (taken by the pause, which waits)
                daemon.stop()
                release.set()
                await until(lambda: any(e["state"] == "stopped" for e in events), timeout=30)
    finally:
        release.set()
    stopped = [e for e in events if e["state"] == "stopped"][-1]
    assert (stopped["pending"], stopped["seen"]) == (1, 1), stopped
    assert stopped["message"].startswith("1 changed file not synced yet; 1 change seen but not synced"), stopped


async def test_a_resumed_big_files_extraction_is_not_paused_again_within_its_guard(corpus, tmp_path, monkeypatch):
    # Paused once for a note, a big file's extraction resumes; a note saved during it does not
    # pause it again for _MAX_WAIT_QUIETS quiet periods (beside a log written every second it
    # would extract only between a sync and a batch): that note waits for it (the guard here
    # outlasts the test, so this does not hang on the machine's speed).
    import httpx

    from streamrag import daemon as daemon_module, pipeline

    monkeypatch.setattr(pipeline, "LEAD_BYTES", 2_000)
    monkeypatch.setattr(daemon_module, "_MAX_WAIT_QUIETS", 100_000)
    settings = make_settings("http://llm.test/v1", index=SMALL, watch={"quiet_s": 0.3, "debounce_ms": 0})
    db = tmp_path / "b.db"
    big, note, later = corpus / "big.txt", corpus / "note.txt", corpus / "later.txt"
    big.parent.mkdir(exist_ok=True)
    text = _BIG_TEXT
    gates = [anyio.Event(), anyio.Event()]   # (the first extraction's calls, then the resumed one's)
    blocked = [anyio.Event(), anyio.Event()]
    syncs: list[tuple[str, set[str]]] = []

    async def hold() -> None:
        phase = min(len(syncs), 1)
        blocked[phase].set()
        await gates[phase].wait()

    handler = _big_calls_held(hold)

    try:
        async with running(settings, db, corpus, transport=httpx.MockTransport(handler)) as (daemon, events, send):
            sync_ = daemon._sync

            async def syncing(reason, **kwargs):
                ok = await sync_(reason, **kwargs)
                syncs.append((reason, _indexed_paths(db)))
                return ok

            daemon._sync = syncing
            async with send:
                big.write_text(text)
                await send.send({(Change.added, str(big))})
                await blocked[0].wait()
                note.write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
                await send.send({(Change.added, str(note))})
                await until(lambda: daemon._came, timeout=30)
                gates[0].set()
                await until(lambda: syncs, timeout=30)
                await until(blocked[1].is_set, timeout=30)   # (the resumed extraction's calls wait)
                later.write_text("Bo Lund sailed the Blue Heron from Kessel to Port Vell.\n")
                await send.send({(Change.added, str(later))})
                await until(lambda: daemon._came, timeout=30)   # (taken: not pausing it)
                gates[1].set()
                await until(lambda: {"big.txt", "later.txt"} <= _indexed_paths(db), timeout=30)
    finally:
        for gate in gates:
            gate.set()
    assert [e["file"] for e in events if e["state"] == "paused"] == ["big.txt"], events
    assert "big.txt" not in syncs[0][1] and "big.txt" in syncs[1][1], syncs


@pytest.mark.parametrize("written_before_look", [False, True])
async def test_a_rename_the_watcher_holds_is_said_renamed_not_deleted(corpus, tmp_path, written_before_look):
    # `mv a.txt b.txt`, b.txt then written on: the watcher holds the burst (a.txt's deletion and
    # b.txt's making), a note saved beside is handed over alone. Its sync left both names as
    # indexed, but said a.txt "deleted as it was written": it was renamed. Now the held names of
    # a rename (by content, or b.txt beginning with a.txt's indexed text) are said as one.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3, "debounce_ms": 0})
    db = tmp_path / "n.db"
    old, new, note = corpus / "a.txt", corpus / "b.txt", corpus / "note.txt"
    old.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")   # (indexed by the initial sync)
    held: set = set()
    syncs: list[tuple[str, dict, frozenset]] = []
    async with running(settings, db, corpus, held=held) as (daemon, _events, send):
        sync_ = daemon._sync

        async def syncing(reason, **kwargs):
            ok = await sync_(reason, **kwargs)
            syncs.append((reason, kwargs["why"], kwargs.get("left_as_indexed", frozenset())))
            return ok

        daemon._sync = syncing
        async with send:
            old.rename(new)
            if written_before_look:
                with new.open("a") as f:
                    f.write("Line 1: Captain Oskar Lind logged the tide at Port Vell.\n")
            held.update({(Change.deleted, str(old)), (Change.added, str(new))})
            note.write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
            await send.send({(Change.added, str(note))})
            await until(lambda: syncs, timeout=30)
            reason, why, left = syncs[0]
            assert left == {"a.txt", "b.txt"} and {"a.txt", "note.txt"} <= _indexed_paths(db), syncs
            assert reason == "1 changed file; b.txt (renamed from a.txt) still written, synced once quiet", reason
            assert why["files"] == 1 and why["held"] == 1 and "held_deleted" not in why, why
            held.clear()


async def test_the_files_the_watcher_holds_are_told_apart_off_the_event_loop(corpus, tmp_path):
    # A copy under way holds thousands of paths at each sync beside it: telling the settings
    # files among them apart (a Path made and looked up for each) took 0.7-1.3 s of the event
    # loop for 100,000 held paths, its signals and progress with it. Now in the worker thread.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3, "debounce_ms": 0})
    db = tmp_path / "t.db"
    copied = corpus / "copied"
    held: set = set()
    on_loop: list[bool] = []
    syncs: list[frozenset] = []
    async with running(settings, db, corpus, held=held) as (daemon, _events, send):
        loop_thread = threading.current_thread()
        copied.mkdir()
        for n in range(20):
            (copied / f"c{n}.txt").write_text(f"Bo Lund paid toll {n} at the bridge of Kessel.\n")
            held.add((Change.added, str(copied / f"c{n}.txt")))
        follows = daemon._settings_edits.follows

        def recording(path):
            on_loop.append(threading.current_thread() is loop_thread)
            return follows(path)

        daemon._settings_edits.follows = recording
        sync_ = daemon._sync

        async def syncing(reason, **kwargs):
            syncs.append(kwargs.get("left_as_indexed", frozenset()))
            return await sync_(reason, **kwargs)

        daemon._sync = syncing
        async with send:
            (corpus / "note.txt").write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
            await send.send({(Change.added, str(corpus / "note.txt"))})
            await until(lambda: syncs, timeout=30)
            daemon._settings_edits.follows = follows   # (the stop's count looks at them on the loop)
    assert syncs[0] == {f"copied/c{n}.txt" for n in range(20)}, syncs
    assert on_loop and not any(on_loop), on_loop


def test_a_folder_made_in_that_the_watcher_holds_is_listed_once_its_files_not_looked_at(corpus, tmp_path):
    # A copy under way (`cp -r`) held 100,000 paths: each was looked at (``relevant``), then the
    # folder was listed, and each of its subfolders again (each a held path too): 4.8-5.5 s of
    # CPU before each sync beside it, measured. Now the paths under a folder made in that the
    # watcher holds are left to its listing, once; the held files are the same.
    settings = make_settings(index=SMALL)
    daemon = Daemon(settings, tmp_path / "c.db", corpus)
    copied = corpus / "copied"
    raw = {(Change.added, str(copied)), (Change.deleted, str(copied / "gone.txt"))}
    for d in range(3):
        (copied / f"d{d}").mkdir(parents=True)
        raw.add((Change.added, str(copied / f"d{d}")))
        for f in range(4):
            (copied / f"d{d}" / f"f{f}.txt").write_text(f"Bo Lund paid toll {f} at Kessel.\n")
            raw.add((Change.added, str(copied / f"d{d}" / f"f{f}.txt")))
    (corpus / "council.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    raw.add((Change.modified, str(corpus / "council.txt")))
    listed: list[Path] = []
    looked: list[str] = []
    files_in, relevant = daemon.folder.files_in, daemon.folder.relevant
    daemon.folder.files_in = lambda folder, *a: listed.append(folder) or files_in(folder, *a)
    daemon.folder.relevant = lambda change, path, **kw: looked.append(str(path)) or relevant(change, path, **kw)
    held, renamed = daemon._held_files(raw, {})
    files = {f"copied/d{d}/f{f}.txt": "modified" for d in range(3) for f in range(4)}
    assert held == {"council.txt": "modified", "copied/gone.txt": "deleted", **files} and not renamed, held
    assert listed == [copied], listed
    assert sorted(looked) == sorted([str(corpus / "council.txt"), str(copied), str(copied / "gone.txt")]), looked


async def test_a_copy_syncs_without_the_file_still_copied_the_watcher_holds(corpus, tmp_path):
    # `cp -r` of many files and one written for seconds: the copied files, settled, are handed
    # over alone, and their sync scanned the whole folder, reading the slow file half-written.
    # Now it is left out (new: absent from the index) until its own burst ends.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3, "debounce_ms": 0})
    db = tmp_path / "k.db"
    copied, names = corpus / "copied", [f"c{n}.txt" for n in range(3)]
    slow = copied / "slow.txt"
    held: set = set()
    async with running(settings, db, corpus, held=held) as (daemon, _events, send):
        copied.mkdir()   # (after the initial sync)
        for n, name in enumerate(names):
            (copied / name).write_text(f"Bo Lund paid toll {n} at the bridge of Kessel.\n")
        slow.write_text("Captain Oskar Lind sailed")   # (half copied)
        held.add((Change.added, str(slow)))
        syncs = _record_syncs(daemon, db)
        async with send:
            await send.send({(Change.added, str(copied / name)) for name in names})
            await until(lambda: syncs, timeout=30)
            reason, left, indexed = syncs[0]
            assert left == {"copied/slow.txt"} and "copied/slow.txt" not in indexed, syncs
            assert {f"copied/{name}" for name in names} <= indexed, indexed
            assert reason == "3 changed files; copied/slow.txt still written, synced once quiet", reason
            with slow.open("a") as f:
                f.write(" the Blue Heron from Port Vell to Kessel.\n")
            held.clear()
            await send.send({(Change.added, str(slow))})
            await until(lambda: len(syncs) == 2, timeout=30)
    assert not syncs[1][1] and "copied/slow.txt" in syncs[1][2], syncs
    assert db_count(db, "SELECT chars FROM documents WHERE path = 'copied/slow.txt'") == len(slow.read_text())


async def test_a_file_deleted_as_it_was_written_is_not_said_still_written(corpus, tmp_path, monkeypatch):
    # A log deleted in its last batch, a note saved beside it settled: the note's sync leaves
    # the log as indexed (its batches within quiet_s), and said "log.txt still written" of a
    # file that is gone, counting it among those still written (``held``). Scripted as the
    # tests above: both clocks moved by the test.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5, "debounce_ms": 0})
    db = tmp_path / "g.db"
    log, note = corpus / "log.txt", corpus / "note.txt"
    log.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")
    syncs: list[tuple[str, dict, frozenset]] = []

    async with running(settings, db, corpus) as (daemon, events, send):
        clock, wall = DaemonClock(monkeypatch), WallClock(monkeypatch, time.time())
        sync_ = daemon._sync

        async def syncing(reason, **kwargs):
            syncs.append((reason, kwargs["why"], kwargs.get("left_as_indexed", frozenset())))
            return await sync_(reason, **kwargs)

        daemon._sync = syncing
        async with send:
            for n in range(3):   # the log written twice, the note saved in the second; the log deleted
                if n < 2:
                    _written_at(log, f"Entry {n}: Bo Lund paid the toll.\n", wall)
                    batch = {(Change.modified, str(log))}
                else:
                    log.unlink()
                    batch = {(Change.deleted, str(log))}
                if n == 1:
                    _written_at(note, "Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n", wall)
                    batch.add((Change.added, str(note)))
                mark = len(events)
                await send.send(batch)
                await until(lambda: "queued" in events.states(mark))
                clock.now += 0.2
                wall.now += 0.2
            clock.now += 0.15   # the note's quiet period over, not the log's
            wall.now += 0.15
            await until(lambda: syncs, timeout=10)   # (the look, within a second: _LOOK_S)
            reason, why, left = syncs[0]
            assert left == {"log.txt"} and daemon.pending == {"log.txt": "deleted"}, (syncs, daemon.pending)
            assert reason == "1 changed file; log.txt deleted as it was written, synced once quiet", reason
            assert why["held"] == 0 and why["held_deleted"] == 1 and why["files"] == 1, why
    assert "log.txt" not in _indexed_paths(db)   # (the source ended: synced whole)


@pytest.mark.parametrize("linked", ["link", "target", "hard"])
async def test_a_link_to_a_file_left_as_indexed_is_left_as_indexed_too(corpus, tmp_path, monkeypatch, linked):
    # The sync of the files that settled beside a log written on and on left the log as
    # indexed, but read link.txt, a symlink to it, with the log's text as it is now: one file in
    # two versions, which no index of the folder holds. Now a link to a file left as indexed
    # (or the target of one written through its link, or a hard link) is left as indexed too.
    # Scripted as the test above: both clocks moved by the test.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5, "debounce_ms": 0})
    db = tmp_path / "l.db"
    log, note = corpus / "log.txt", corpus / "note.txt"
    first = "Mira Osk opened the harbor ledger at Port Vell.\n"
    log.write_text(first)
    if linked == "hard":
        os.link(log, corpus / "link.txt")
    else:
        (corpus / "link.txt").symlink_to("log.txt")
    busy = corpus / ("link.txt" if linked == "target" else "log.txt")   # the name the writes come by
    syncs: list[frozenset] = []

    def chars() -> dict[str, int]:
        return {p: db_count(db, "SELECT d.chars FROM files f JOIN documents d ON d.id = f.doc_id "
                               f"WHERE f.path = '{p}'") for p in ("log.txt", "link.txt")}   # the text indexed

    async with running(settings, db, corpus) as (daemon, events, send):
        assert chars() == {"log.txt": len(first), "link.txt": len(first)}
        clock, wall = DaemonClock(monkeypatch), WallClock(monkeypatch, time.time())
        sync_ = daemon._sync

        async def syncing(reason, **kwargs):
            ok = await sync_(reason, **kwargs)
            syncs.append(kwargs.get("left_as_indexed", frozenset()))
            return ok

        daemon._sync = syncing
        async with send:
            await _a_note_beside_a_log_written_on(busy, note, events, send, clock, wall)
            await until(lambda: syncs, timeout=10)   # (the look, within a second: _LOOK_S)
            assert syncs[0] == {busy.name} and "note.txt" in _indexed_paths(db), syncs
            assert chars() == {"log.txt": len(first), "link.txt": len(first)}   # both as indexed
    now = len(log.read_text())
    assert syncs[-1] == set() and chars() == {"log.txt": now, "link.txt": now}   # (the source ended: synced whole)


async def test_a_symlink_to_a_file_deleted_while_left_as_indexed_is_left_as_indexed_too(corpus, tmp_path):
    # The log deleted while a sync of the files settled beside it left it as indexed: link.txt,
    # a symlink to it, now leads nowhere and was dropped, though the log kept its text: a fresh
    # index of the folder with the log as indexed reads the link as the log. (The sync the
    # daemon makes, ``Indexer(left_as_indexed=)``, run directly.)
    from streamrag.pipeline import Indexer

    settings = make_settings(index=SMALL)
    db = tmp_path / "b.db"
    log = corpus / "log.txt"
    log.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")
    (corpus / "link.txt").symlink_to("log.txt")
    await sync([corpus], settings, db, root=corpus)
    before = {p: v[0] for p, v in _files(db).items() if p in ("log.txt", "link.txt")}
    log.unlink()
    (corpus / "note.txt").write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
    await Indexer(settings, db, root=corpus, left_as_indexed=frozenset({"log.txt"})).run([corpus])
    assert "note.txt" in _indexed_paths(db)
    assert {p: v[0] for p, v in _files(db).items() if p in ("log.txt", "link.txt")} == before   # both as indexed
    await sync([corpus], settings, db, root=corpus)   # (its own sync: both go)
    assert not {"log.txt", "link.txt"} & _indexed_paths(db)


def _files(db: Path) -> dict:
    store = Store(db, readonly=True)
    try:
        return index_rows.files(store)
    finally:
        store.close()


def _record_syncs(daemon, db) -> list[tuple[str, frozenset, set[str]]]:
    """Wraps ``daemon``'s sync to record each sync: its reason, the files it left as indexed,
    the paths indexed after it."""
    syncs: list[tuple[str, frozenset, set[str]]] = []
    sync_ = daemon._sync

    async def syncing(reason, **kwargs):
        ok = await sync_(reason, **kwargs)
        syncs.append((reason, kwargs.get("left_as_indexed", frozenset()), _indexed_paths(db)))
        return ok

    daemon._sync = syncing
    return syncs


def _record_syncs_and_splits(daemon, db):
    """Wraps ``daemon``'s sync and split to record each sync (as ``_record_syncs``) and each
    split (the files written, what it chose)."""
    syncs = _record_syncs(daemon, db)
    splits: list[tuple[set[str], object]] = []
    split_ = daemon._split

    def splitting(now, quiet, written):
        got = split_(now, quiet, written)
        splits.append((set(written), got))
        return got

    daemon._split = splitting
    return syncs, splits


@pytest.mark.parametrize("note_beside", [False, True])
@pytest.mark.parametrize("written_before", [False, True])
async def test_a_file_renamed_then_written_on_is_left_with_its_old_name(
        corpus, tmp_path, monkeypatch, note_beside, written_before):
    # `mv a.txt b.txt`, then b.txt written on and on: a.txt, its batch over, settled beside it,
    # and a sync took it alone ("0 files added and deleted; b.txt still written"), dropping its
    # text until b.txt's own sync. Now a rename is on one side: with nothing else settled there
    # is no sync apart; with a note saved beside it, the note's sync leaves both names as
    # indexed. Scripted as the tests above: both clocks moved by the test.
    # ``written_before``: with the real watcher, the batch of the rename was looked at after the
    # first write (b.txt written every 0.1 s), so b.txt's text differed from a.txt's indexed one
    # and no rename was found by content; a.txt, settled, was synced alone as deleted. Now a
    # deletion handed over with a new name beginning with its text is kept with it (the tie).
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5, "debounce_ms": 0})
    db = tmp_path / "r.db"
    old, new, note = corpus / "a.txt", corpus / "b.txt", corpus / "note.txt"
    old.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")
    gone = "deleted" if written_before else "renamed away"   # (a rename by content, or the tie)

    async with running(settings, db, corpus) as (daemon, events, send):
        clock, wall = DaemonClock(monkeypatch), WallClock(monkeypatch, time.time())
        syncs, splits = _record_syncs_and_splits(daemon, db)
        async with send:
            old.rename(new)
            if written_before:
                _written_at(new, "Entry 0: Bo Lund paid the toll.\n", wall)   # (before the batch is looked at)
            batches = [{(Change.deleted, str(old)), (Change.added, str(new))}, {(Change.modified, str(new))}]
            for n, batch in enumerate(batches):   # the rename, then b.txt written (and the note)
                if n == 1:
                    _written_at(new, "Entry 1: Bo Lund paid the toll.\n", wall)
                    if note_beside:
                        _written_at(note, "Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n", wall)
                        batch.add((Change.added, str(note)))
                mark = len(events)
                await send.send(batch)
                await until(lambda: "queued" in events.states(mark))
                clock.now += 0.2
                wall.now += 0.2
            assert daemon.pending.get("a.txt") == gone
            clock.now += 0.4
            wall.now += 0.4
            _written_at(new, "Entry 2: Bo Lund paid the toll.\n", wall)
            # (the look, within a second: _LOOK_S)
            await until(lambda: any("b.txt" in w for w, _ in splits) and (syncs or not note_beside), timeout=10)
            if note_beside:
                reason, left, indexed = syncs[0]
                assert left == {"a.txt", "b.txt"} and {"a.txt", "note.txt"} <= indexed, syncs
                assert "b.txt" not in indexed, indexed
                assert reason == "1 changed file; b.txt (renamed from a.txt) still written, synced once quiet", reason
                assert daemon.pending == {"a.txt": gone, "b.txt": "modified"}, daemon.pending
            else:
                assert [got for w, got in splits if "b.txt" in w] == [None], splits   # no sync apart
                assert not syncs and "a.txt" in _indexed_paths(db), syncs
    assert not syncs[-1][1] and "b.txt" in syncs[-1][2] and "a.txt" not in syncs[-1][2]   # (the source ended)


async def test_a_rename_whose_new_name_was_deleted_as_it_was_written_is_not_said_still_written(
        corpus, tmp_path, monkeypatch):
    # `mv a.txt b.txt` (a rename by content), b.txt written on, then deleted, a note saved
    # beside: the note's sync leaves both names as indexed (a rename is synced whole), and its
    # line fell back on naming every name left, "a.txt and 1 more file still written": a.txt was
    # renamed away, b.txt deleted. Now b.txt is said deleted as it was written, renamed from a.txt.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5, "debounce_ms": 0})
    db = tmp_path / "r.db"
    old, new, note = corpus / "a.txt", corpus / "b.txt", corpus / "note.txt"
    old.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")
    syncs: list[tuple[str, dict, frozenset]] = []

    async with running(settings, db, corpus) as (daemon, events, send):
        clock, wall = DaemonClock(monkeypatch), WallClock(monkeypatch, time.time())
        sync_ = daemon._sync

        async def syncing(reason, **kwargs):
            ok = await sync_(reason, **kwargs)
            syncs.append((reason, kwargs["why"], kwargs.get("left_as_indexed", frozenset())))
            return ok

        async def step(batch: set, seconds: float) -> None:
            mark = len(events)
            await send.send(batch)
            await until(lambda: "queued" in events.states(mark))
            clock.now += seconds
            wall.now += seconds

        daemon._sync = syncing
        async with send:
            old.rename(new)
            await step({(Change.deleted, str(old)), (Change.added, str(new))}, 0.2)
            assert daemon.pending == {"a.txt": "renamed away", "b.txt": "added"}, daemon.pending
            _written_at(new, "Entry 1: Bo Lund paid the toll.\n", wall)
            await step({(Change.modified, str(new))}, 0.2)
            _written_at(new, "Entry 2: Bo Lund paid the toll.\n", wall)
            _written_at(note, "Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n", wall)
            await step({(Change.modified, str(new)), (Change.added, str(note))}, 0.2)
            new.unlink()
            await step({(Change.deleted, str(new))}, 0.35)   # (the note settled, b.txt not: a sync apart)
            await until(lambda: syncs, timeout=10)   # (the look, within a second: _LOOK_S)
            reason, why, left = syncs[0]
            assert left == {"a.txt", "b.txt"}, syncs
            assert reason == "1 changed file; b.txt (renamed from a.txt) deleted as it was written, synced once quiet", \
                reason
            assert why["held"] == 0 and why["held_deleted"] == 1, why


async def test_a_deletion_beside_a_new_file_written_on_is_not_held_with_it(corpus, tmp_path, monkeypatch):
    # `rm old.txt` while a new log.txt is written every 0.1 s, both handed over in one batch: the
    # batch tied every deletion to every file it added (as a rename written on is: the test
    # above), so old.txt's deletion waited with the log, up to its cap (published at 25.9 s, not
    # 7.5 s, with the real watcher). The log does not begin with old.txt's indexed text: no
    # rename, and old.txt's deletion is synced apart once settled, the log left as indexed.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5, "debounce_ms": 0})
    db = tmp_path / "r.db"
    old, log = corpus / "old.txt", corpus / "log.txt"
    old.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")

    async with running(settings, db, corpus) as (daemon, events, send):
        assert "old.txt" in _indexed_paths(db)
        clock, wall = DaemonClock(monkeypatch), WallClock(monkeypatch, time.time())
        syncs = _record_syncs(daemon, db)
        async with send:
            old.unlink()
            _written_at(log, "Entry 0: Bo Lund paid the toll.\n", wall)
            for n, batch in enumerate([{(Change.deleted, str(old)), (Change.added, str(log))},
                                       {(Change.modified, str(log))}]):
                if n == 1:
                    _written_at(log, "Entry 1: Bo Lund paid the toll.\n", wall)
                mark = len(events)
                await send.send(batch)
                await until(lambda: "queued" in events.states(mark))
                clock.now += 0.2
                wall.now += 0.2
            clock.now += 0.4
            wall.now += 0.4
            _written_at(log, "Entry 2: Bo Lund paid the toll.\n", wall)
            await until(lambda: syncs, timeout=10)   # (the look, within a second: _LOOK_S)
            reason, left, indexed = syncs[0]
            assert left == {"log.txt"} and "old.txt" not in indexed and "log.txt" not in indexed, syncs
            assert reason == "1 changed file; log.txt still written, synced once quiet", reason
            assert daemon.pending.keys() == {"log.txt"}, daemon.pending
    assert "log.txt" in syncs[-1][2]   # (the source ended)


async def test_a_file_deleted_beside_the_only_other_one_written_on_is_synced_without_a_warning(
        corpus, tmp_path, monkeypatch):
    # The sync of the files that settled beside a log written on and on leaves the log as
    # indexed, unread: with the log the folder's only file left, its scan found no file to read,
    # and watch said "no file under ... matches index.include" of a folder whose log it matches.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5, "debounce_ms": 0})
    db = tmp_path / "d.db"
    for path in corpus.iterdir():
        path.unlink()
    log, note = corpus / "log.txt", corpus / "note.txt"
    log.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")
    note.write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
    syncs: list[frozenset] = []

    def written(text: str, wall: WallClock) -> None:
        with log.open("a") as f:
            f.write(text)
        os.utime(log, ns=(int((wall.now - 0.01) * 1e9),) * 2)   # (0.01 s old: no rounding makes it younger than now)

    async with running(settings, db, corpus) as (daemon, events, send):
        clock, wall = DaemonClock(monkeypatch), WallClock(monkeypatch, time.time())
        sync_ = daemon._sync

        async def syncing(reason, **kwargs):
            ok = await sync_(reason, **kwargs)
            syncs.append(kwargs.get("left_as_indexed", frozenset()))
            return ok

        daemon._sync = syncing
        mark = len(events)
        async with send:
            for n in range(2):   # the log's two batches; the note deleted in the second
                written(f"Entry {n}: Bo Lund paid the toll.\n", wall)
                batch = {(Change.modified, str(log))}
                if n == 1:
                    note.unlink()
                    batch.add((Change.deleted, str(note)))
                sent = len(events)
                await send.send(batch)
                await until(lambda: "queued" in events.states(sent))
                clock.now += 0.2
                wall.now += 0.2
            clock.now += 0.4
            wall.now += 0.4
            written("Entry 2: Bo Lund paid the toll.\n", wall)
            await until(lambda: syncs, timeout=10)   # (the look, within a second: _LOOK_S)
            assert syncs[0] == {"log.txt"}, syncs
            assert _indexed_paths(db) == {"log.txt"}
            assert [e["message"] for e in events[mark:] if e["state"] == "warning"] == []


async def test_the_log_is_emptied_after_a_publish_though_queries_never_leave_a_gap(corpus, tmp_path, monkeypatch):
    # Queries that overlap without a gap (a web app, a notebook, a cron job asking at once)
    # each read in a snapshot, and SQLite starts its write-ahead log over only when no reader
    # reads from it: under `watch` it grew by every version published, 37 MB in 3 minutes.
    from streamrag import store as store_module

    monkeypatch.setattr(store_module, "WAL_BOUND", 1)   # (64 MiB: every sync here)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "q.db"
    wal = Path(f"{db}-wal")
    sizes = []
    async with running(settings, db, corpus) as (daemon, events, send):
        # (a sync is counted before the log is emptied and "idle" said: each edit below waits for its own)
        await until(lambda: "idle" in events.states())
        with overlapping_readers(db, busy_s=0) as (_longest, errors):   # (kept waiting: an error)
            async with send:
                for n in range(4):
                    idle = events.states().count("idle")
                    with (corpus / "council.txt").open("a") as f:
                        f.write(f"\nAt meeting {n} Mayor Ines Duarte named Pilot Arvo Kesk to the harbor board.\n")
                    await send.send({(Change.modified, str(corpus / "council.txt"))})
                    await until(lambda: events.states().count("idle") > idle, timeout=40)
                    sizes.append(wal.stat().st_size if wal.exists() else 0)
    assert not errors                  # no reader waited for it (not timed: a wait is an error)
    assert daemon.syncs == 5
    assert sizes == [0, 0, 0, 0]       # emptied after every publish (it grew: 4 versions' pages)


async def test_a_failure_emptying_the_log_is_raised_not_waited_on_for_ever(corpus, tmp_path, monkeypatch):
    # The log is emptied in a thread of its own; an error there (a bug) ended the thread before
    # it said it was done, and watch polled for it for ever: no sync, no line, no exit.
    from streamrag import store as store_module

    def empty_wal(path, wait_s, stop=None):
        raise RuntimeError("no log for you")

    settings, db = make_settings(index=SMALL), tmp_path / "e.db"   # offline: fast
    await sync([corpus], settings, db, root=corpus)
    held = sqlite3.connect(db)   # (open, so that the log outlives the sync's connection)
    held.execute("SELECT count(*) FROM entities").fetchone()
    monkeypatch.setattr(store_module, "WAL_BOUND", 1)
    monkeypatch.setattr(store_module, "empty_wal", empty_wal)
    daemon = Daemon(settings, db, corpus, report=Events())
    send, recv = scripted()
    await send.aclose()   # (the initial sync, then the end of the changes)
    try:
        with anyio.fail_after(20), pytest.raises(BaseExceptionGroup) as raised:   # (a bug: it propagates)
            await daemon.run(recv)
    finally:
        held.close()
    assert raised.group_contains(RuntimeError, match="no log for you", depth=1)
    assert daemon.syncs == 1


async def test_a_reader_that_never_ends_holds_up_the_emptying_of_the_log_only_as_it_doubles(corpus, tmp_path,
                                                                                            monkeypatch):
    # A snapshot left open (a notebook, a stopped process) outlasts every wait to empty the log:
    # writers must not be held up by that wait at every publish.

    tried = wal_tries(monkeypatch)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "n.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        await until(lambda: "idle" in events.states())   # (as above)
        held = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
        held.execute("BEGIN")
        held.execute("SELECT count(*) FROM entities").fetchone()   # and never ends
        sizes = []
        try:
            async with send:
                for n in range(6):
                    idle = events.states().count("idle")
                    with (corpus / "guild.txt").open("a") as f:
                        f.write(f"\nIn season {n} Guild Master Tomas Ruud hired Net Maker Ilse Varn.\n")
                    await send.send({(Change.modified, str(corpus / "guild.txt"))})
                    await until(lambda: events.states().count("idle") > idle, timeout=40)
                    sizes.append(Path(f"{db}-wal").stat().st_size)
        finally:
            held.close()
    assert tried, "the log was never emptied"
    assert all(later > 2 * earlier for earlier, later in zip(tried, tried[1:]))
    assert len(tried) < len(sizes)           # not at every publish
    said = [e for e in events if e["state"] == "warning" and "write-ahead log" in e["message"]]
    assert [e["wal_bytes"] for e in said] == tried   # each failed try said once, with what to look for
    assert "tried again once it is twice as large" in said[0]["message"]


@contextlib.contextmanager
def a_reader_left_open(db: Path):
    """A snapshot of ``db`` left open (a notebook, a stopped process), which outlasts every wait to
    empty the log; and the log padded with 4 MB, so that a run or a sync does not double it."""
    held = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    try:
        held.execute("BEGIN")
        held.execute("SELECT count(*) FROM entities").fetchone()   # and never ends
        pad = sqlite3.connect(db, isolation_level=None)
        pad.execute("INSERT INTO meta(key, value) VALUES ('pad', hex(randomblob(2000000)))")
        pad.close()
        yield
    finally:
        held.close()


def _edit_guild(corpus: Path, n: int) -> None:
    with (corpus / "guild.txt").open("a") as f:
        f.write(f"\nIn season {n} Guild Master Tomas Ruud hired Net Maker Ilse Varn.\n")


def test_watch_starts_from_the_failure_to_empty_the_log_that_index_remembers(corpus, tmp_path, monkeypatch,
                                                                             capsys):
    # `index` notes in the index that a reader kept it from emptying the log (meta.wal_tried), and
    # tries again only once the log has doubled; watch kept its own count from 0, so a watch
    # started after it waited the whole 30 s again for the same reader, and warned again.
    tried = wal_tries(monkeypatch)
    db = tmp_path / "i.db"
    assert main(["index", str(corpus), "--offline", "-q", "--db", str(db)]) == 0
    with a_reader_left_open(db):
        _edit_guild(corpus, 0)
        assert main(["index", str(corpus), "--offline", "-q", "--db", str(db)]) == 0
        assert tried and "write-ahead log" in capsys.readouterr().err   # (kept by the reader)
        before = len(tried)
        _edit_guild(corpus, 1)
        assert main(["watch", str(corpus), "--offline", "--db", str(db), "--once", "--json"]) == 0
        out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines()]
    assert [e["version"] for e in lines if e["state"] == "idle"] == [3]   # (synced the edit)
    assert len(tried) == before, tried   # the log has not doubled: not tried again
    assert not [e for e in lines if "write-ahead log" in e["message"]], lines


def test_watch_once_with_nothing_changed_reads_no_graph(corpus, tmp_path, monkeypatch, capsys):
    # `watch --once` is `index` under cron: it kept the graph for a next sync it never has, and
    # so read it back whole on every run with nothing to redo (0.8 s at 10,000 documents).
    from streamrag.graph_state import GraphState

    db = tmp_path / "i.db"
    assert main(["index", str(corpus), "--offline", "-q", "--db", str(db)]) == 0
    reads: list[int] = []
    load = GraphState.load.__func__
    monkeypatch.setattr(GraphState, "load", classmethod(lambda cls, store: reads.append(1) or load(cls, store)))
    idle = []
    for edit in (None, 0):
        if edit is not None:
            _edit_guild(corpus, edit)
        capsys.readouterr()
        assert main(["watch", str(corpus), "--offline", "--db", str(db), "--once", "--json"]) == 0
        idle += [(e["version"], len(reads)) for e in map(json.loads, capsys.readouterr().out.splitlines())
                 if e["state"] == "idle"]
    assert idle == [(1, 0), (2, 1)]   # the edit is merged into the graph read back


def test_a_failure_to_empty_the_log_under_watch_is_remembered_for_index(corpus, tmp_path, monkeypatch, capsys):
    # Watch kept its failures to itself: an `index` run after it waited the whole 30 s again for
    # the reader that had outlasted watch's wait. Noted in the index as `index` notes its own.
    tried = wal_tries(monkeypatch)
    db = tmp_path / "w.db"
    assert main(["index", str(corpus), "--offline", "-q", "--db", str(db)]) == 0
    capsys.readouterr()
    with a_reader_left_open(db):
        _edit_guild(corpus, 0)
        assert main(["watch", str(corpus), "--offline", "--db", str(db), "--once", "--json"]) == 0
        said = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert tried and [e for e in said if "write-ahead log" in e["message"]]   # (kept by the reader)
        before = len(tried)
        _edit_guild(corpus, 1)
        assert main(["index", str(corpus), "--offline", "-q", "--json", "--db", str(db)]) == 0
        out, err = capsys.readouterr()
    assert json.loads(out)["published"]
    assert len(tried) == before, tried   # the log has not doubled: not tried again
    assert "write-ahead log" not in err, err


async def test_once_the_log_is_emptied_otherwise_it_is_emptied_again_past_the_bound(corpus, tmp_path, monkeypatch):
    # A try that readers outlasted set the next at twice that size for good: the log emptied
    # meanwhile (the reader gone, the last connection folding it), it grew again under other
    # readers to the bound, and was left to grow to twice the size that had failed.

    tried = wal_tries(monkeypatch)
    db = tmp_path / "e.db"
    async with running(make_settings(index=SMALL, watch={"quiet_s": 0.05}), db, corpus) as (daemon, events, send):
        async with send:
            for n in range(3):
                held = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
                held.execute("BEGIN")
                held.execute("SELECT count(*) FROM entities").fetchone()   # outlasts the wait
                try:
                    idle = events.states().count("idle")
                    with (corpus / "guild.txt").open("a") as f:
                        f.write(f"\nIn season {n} Guild Master Tomas Ruud hired Net Maker Ilse Varn.\n")
                    await send.send({(Change.modified, str(corpus / "guild.txt"))})
                    await until(lambda: events.states().count("idle") > idle, timeout=40)
                finally:
                    held.close()
                if n < 2:   # a sync with no reader left: the log is folded into the index
                    idle = events.states().count("idle")
                    (corpus / f"new{n}.txt").write_text(f"Net Maker Ilse Varn sailed {n} times to Port Vell.\n")
                    await send.send({(Change.added, str(corpus / f"new{n}.txt"))})
                    await until(lambda: events.states().count("idle") > idle, timeout=40)
                    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size < tried[-1]
    assert len(tried) == 3, tried   # each time past the bound anew


async def test_a_stop_does_not_wait_for_the_log_to_be_emptied(corpus, tmp_path, monkeypatch):
    # SIGTERM while a reader held the log (a snapshot left open) waited out the grace period,
    # then cancelled with 143: the wait to empty it (30 s) ran on though the sync had published.
    # Then `run` returned with that wait still going on in its thread, holding the index's write
    # lock up to 30 s more: a program using `Daemon.run` as a library (it goes on) could not
    # write the index meanwhile. And nothing was said between "publishing" and "idle" while it
    # waited: a wait of more than a second is said, once. (The wait for the reader lasts an hour
    # here, not 30 s: a stop that waited for it meets the guard; not timed.)
    from streamrag import store as store_module

    monkeypatch.setattr(store_module, "WAL_BOUND", 1)
    monkeypatch.setattr(store_module, "_BUSY_S", 3600)
    db = tmp_path / "s.db"
    held = None
    try:
        async with running(make_settings(index=SMALL, watch={"quiet_s": 0.05}), db, corpus) as (daemon, events, send):
            held = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
            held.execute("BEGIN")
            held.execute("SELECT count(*) FROM entities").fetchone()   # (the log is kept for it)
            async with send:
                with (corpus / "guild.txt").open("a") as f:
                    f.write("\nGuild Master Tomas Ruud hired Net Maker Ilse Varn.\n")
                await send.send({(Change.modified, str(corpus / "guild.txt"))})
                await until(lambda: "emptying" in events.states(), timeout=20)   # published, and waiting
                daemon.stop("SIGTERM received")
                await until(lambda: events.states()[-1] == "stopped", timeout=60)
        # `run` has returned: the index's write lock is free (it was held up to 30 s more)
        free = sqlite3.connect(db, isolation_level=None, timeout=0)
        try:
            free.execute("BEGIN IMMEDIATE")
            free.execute("ROLLBACK")
        finally:
            free.close()
        assert not [t for t in threading.enumerate() if t.name == "streamrag-empty-wal"]
    finally:
        if held is not None:
            held.close()
    assert events[-1]["message"] == CURRENT_AS_SEEN
    assert not [e for e in events if "write-ahead log" in e["message"] and e["state"] == "warning"]
    emptying = [e for e in events if e["state"] == "emptying"]
    assert len(emptying) == 1 and emptying[0]["wal_bytes"] > 0, emptying
    assert emptying[0]["message"].startswith("the index's write-ahead log (")
    assert events.states()[events.states().index("emptying") - 1] == "publishing"


@pytest.mark.parametrize("how", ["stop", "second signal"])
async def test_run_does_not_wait_long_for_an_emptying_of_the_log_that_ignores_the_stop(corpus, tmp_path,
                                                                                       monkeypatch, how):
    # ``run`` joined the emptying thread in a shielded scope, as long as it took: its first
    # step, copying the log (wal_checkpoint(PASSIVE)), did not look at the stop (300 MB: 2.4 s,
    # more on a slow disk), and a second Ctrl-C ("cancelling now") waited for it too. A stop
    # waits for it ``_END_EMPTYING_S`` at most; a second signal (``serve`` cancels the work)
    # not at all. Not timed: the emptying here ignores the stop for an hour, and a second
    # signal's wait for it is made an hour too; a wait for either meets the guard, which then
    # lets the emptying end.
    from streamrag import daemon as daemon_module
    from streamrag import store as store_module

    released, guard_fired = threading.Event(), []
    ended: list[bool] = []   # the emptying's end

    def empty_wal(path, wait_s, stop=None):
        released.wait(3600)   # (a copy that does not look at the stop)
        ended.append(True)
        return False

    monkeypatch.setattr(store_module, "WAL_BOUND", 1)
    monkeypatch.setattr(store_module, "empty_wal", empty_wal)
    if how == "second signal":
        monkeypatch.setattr(daemon_module, "_END_EMPTYING_S", 3600)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "c.db"
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events)
    send, recv = scripted()
    work = anyio.CancelScope()

    async def run() -> None:
        with work:
            await daemon.run(recv)

    held = None
    guard = threading.Timer(60, lambda: (guard_fired.append(True), released.set()))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await until(lambda: daemon.syncs >= 1, timeout=30)
            held = sqlite3.connect(db)   # (open, so that the log outlives the sync's connection)
            held.execute("SELECT count(*) FROM entities").fetchone()
            with (corpus / "guild.txt").open("a") as f:
                f.write("\nGuild Master Tomas Ruud hired Net Maker Ilse Varn.\n")
            await send.send({(Change.modified, str(corpus / "guild.txt"))})
            await until(lambda: "emptying" in events.states(), timeout=30)   # published, and emptying
            guard.start()
            daemon.stop("SIGINT received")
            if how == "second signal":
                await anyio.sleep(0.1)
                work.cancel()
        gone_on = not ended   # (`run` returned with the emptying still going on)
    finally:
        guard.cancel()
        released.set()
        send.close()
        if held is not None:
            held.close()
    assert not guard_fired, "run waited for the emptying of the log"
    assert gone_on


async def test_a_model_that_ignores_the_yes_no_bias_is_said_once_by_watch(tmp_path, simulator, monkeypatch):
    # The warning came with the extraction ahead of a sync, which returned only its count: watch
    # never said it, and every extraction paid a biased glean check per worker again.
    # (A cl100k index.encoding stands in for a model whose tokenizer is not it: see test_bad_answers.)
    from streamrag import gleaner

    monkeypatch.setattr(gleaner, "_IGNORING", set())
    folder = tmp_path / "notes"
    folder.mkdir()
    settings = make_settings(simulator.base_url, index={**SMALL, "encoding": "cl100k_base"},
                             watch={"quiet_s": 0.2})
    async with running(settings, tmp_path / "b.db", folder) as (daemon, events, send):
        mark = len(events)
        async with send:
            for n in (1, 2):
                new = folder / f"n{n}.txt"
                new.write_text(f"Captain Tomas Quell{n} sailed the Blue Heron from Port Vell to Kessel.\n")
                await send.send({(Change.added, str(new))})
                await until(lambda: daemon.syncs == 1 + n)
    said = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    assert len(said) == 1 and said[0].startswith("llm.logit_bias: "), said
    store = Store(tmp_path / "b.db", readonly=True)
    try:
        biased = store.scalar("SELECT count(*) FROM llm_calls WHERE stage = 'glean_check' AND error IS NOT NULL")
        checks = store.scalar("SELECT count(*) FROM llm_calls WHERE stage = 'glean_check'")
    finally:
        store.close()
    assert biased == 1 and checks == 3      # one biased try, then every check in words


async def test_a_file_changed_again_before_the_sync_is_extracted_once_by_it(corpus, tmp_path, simulator,
                                                                             monkeypatch):
    # A log appended to every second paid one extraction per append (and printed three lines).
    # Its first batch comes while it is still written (the watcher ends a batch debounce_ms after
    # its last new event, and a write to the same file is none): that part was extracted ahead,
    # then the whole file again by the sync (a real watch: 2 extract and 2 glean_check calls for
    # a file written in 5 parts 300 ms apart). Now the daemon waits until the file is debounce_ms
    # old, finds it written again meanwhile, and leaves it to the sync.
    # (The daemon's wall clock held at the first write, so it finds the file just written however
    # late its batch comes, and its quiet period in the test's steps, so no sync starts between
    # two appends on a busy machine: the second is written while the daemon waits, the others
    # each once the one before was queued, then the quiet period passes.)
    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.4})
    log = corpus / "log.txt"
    async with running(settings, tmp_path / "a.db", corpus) as (daemon, events, send):
        mark = len(events)
        clock = DaemonClock(monkeypatch)
        queued_batches: list[int] = []
        queue = daemon._queue

        async def queueing(batch, **kwargs):
            await queue(batch, **kwargs)
            queued_batches.append(len(queued_batches) + 1)

        daemon._queue = queueing
        async with send:
            for n in range(1, 6):
                with log.open("a") as f:
                    f.write(f"Line {n}: Captain Tomas Quell{n} logged the tide at Port Vell.\n")
                if n == 1:
                    WallClock(monkeypatch, log.stat().st_mtime_ns / 1e9)
                await send.send({(Change.added if n == 1 else Change.modified, str(log))})
                if n == 1:
                    await until(lambda: any(e["state"] == "settling" for e in events[mark:]))
                else:
                    await until(lambda: len(queued_batches) == n)
            clock.now += 1      # the quiet period over
            await until(lambda: daemon.syncs == 2)
    after = events[mark:]
    queued = [e for e in after if e["state"] == "queued"]
    waiting = [e for e in after if e["state"] == "waiting"]
    assert not waiting, waiting     # none extracted ahead
    # One line per state change: the same "changed again" line is not said again for each append.
    assert [e["changed_again"] for e in queued] == [0, 1], [e["message"] for e in queued]
    assert "1 file changed again, extracted at the sync" in queued[-1]["message"]
    by_sync = next(e for e in after if e["state"] == "merging")["chunks_extracted"]
    idle = next(e for e in after if e["state"] == "idle")
    assert by_sync >= 1 and idle["chunks_extracted"] == by_sync     # the whole file, by the sync alone
    assert idle["llm"]["by_stage"]["extract"]["calls"] == by_sync
    store = Store(tmp_path / "a.db", readonly=True)
    try:
        assert store.scalar("SELECT count(*) FROM entities WHERE name = 'Tomas Quell5'") == 1
    finally:
        store.close()


def test_a_file_is_waited_for_until_its_last_write_is_debounce_ms_old():
    import streamrag.daemon as daemon_module

    # A single save comes debounce_ms after it was written (the watcher's batch ends so): no wait.
    now = 1000.0
    assert daemon_module._settle_wait([], 0.5, now) == 0
    assert daemon_module._settle_wait([999_000_000_000], 0.5, now) == 0
    assert daemon_module._settle_wait([999_800_000_000, 999_900_000_000], 0.5, now) == pytest.approx(0.4)
    assert daemon_module._settle_wait([1_005_000_000_000], 0.5, now) == 0   # a clock set apart: not waited for
    assert daemon_module._settle_wait([999_900_000_000], 0, now) == 0      # debounce_ms = 0


async def test_the_wait_for_a_file_still_being_written_is_said_once_naming_it(corpus, tmp_path, monkeypatch):
    # The extraction ahead waited for the youngest file to be debounce_ms old (up to a minute at
    # the setting's maximum) with no line between "queued" and "extracting".
    # (offline: fast; the daemon's wall clock held 0.5 s after new.txt was written, so it finds
    # it that old however long a busy machine takes to get the batch to it: it waited 1.5 s of
    # real time, and a batch later than that found nothing to wait for)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5, "debounce_ms": 1500})
    async with running(settings, tmp_path / "s.db", corpus) as (daemon, events, send):
        mark = len(events)
        old, new = corpus / "old.txt", corpus / "new.txt"
        old.write_text("Ivo Jax rowed to Port Vell.\n")
        os.utime(old, (time.time() - 60, time.time() - 60))   # written long ago: not waited for
        new.write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
        WallClock(monkeypatch, new.stat().st_mtime_ns / 1e9 + 0.5)
        async with send:
            await send.send({(Change.added, str(old)), (Change.added, str(new))})
            await until(lambda: daemon.syncs == 2)
    after = events[mark:]
    assert [e["state"] for e in after][:3] == ["queued", "settling", "extracting"], after
    settling = after[1]
    assert (settling["file"], settling["files"]) == ("new.txt", 1), settling
    assert settling["wait_s"] == 1.0, settling    # 1500 ms less the 0.5 s it was old
    assert settling["message"].startswith("waiting ") and " for new.txt to be unchanged for 1500 ms" \
        in settling["message"], settling
    assert after[2]["files"] == 2     # both extracted ahead, once the new one settled


async def test_folders_are_not_counted_as_files_and_a_save_by_rename_is_a_modification(corpus, tmp_path):
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "f.db", corpus) as (daemon, events, send):
        def queued(start: int) -> dict:
            (event,) = [e for e in events[start:] if e["state"] == "queued"]
            return event

        async with send:
            # mkdir -p n1/n2 && echo ... > n1/n2/d.txt, and a file beside; an empty folder
            mark = len(events)
            (corpus / "n1" / "n2").mkdir(parents=True)
            (corpus / "n1" / "n2" / "d.txt").write_text("Captain Oskar Lind sailed to Kessel.\n")
            (corpus / "n1" / "e.txt").write_text("Mira Osk chaired the Harbor Council.\n")
            (corpus / "empty").mkdir()
            await send.send({(Change.added, str(corpus / "n1")), (Change.added, str(corpus / "n1" / "n2")),
                             (Change.added, str(corpus / "n1" / "n2" / "d.txt")),
                             (Change.added, str(corpus / "empty"))})
            await until(lambda: daemon.syncs == 2)
            event = queued(mark)
            assert event["files"] == 2 and event["added"] == 2, event["message"]
            assert event["message"].startswith("2 files (2 added)")

            # An editor's save: written beside, renamed over the indexed file.
            mark = len(events)
            guild = corpus / "guild.txt"
            temp = corpus / ".guild.txt.tmp"
            temp.write_text(guild.read_text().replace("Lantern Hall", "Harbor Chapel"))
            os.replace(temp, guild)
            await send.send({(Change.added, str(temp)), (Change.deleted, str(temp)),
                             (Change.added, str(guild))})
            await until(lambda: daemon.syncs == 3)
            event = queued(mark)
            assert event["files"] == 1 and event.get("modified") == 1 and "added" not in event, event

            # A folder deleted counts the indexed files it held.
            mark = len(events)
            shutil.rmtree(corpus / "n1")
            await send.send({(Change.deleted, str(corpus / "n1"))})
            await until(lambda: daemon.syncs == 4)
            event = queued(mark)
            assert event["files"] == 2 and event["deleted"] == 2, event["message"]

            # A rename is one file renamed (it said "2 files (1 added, 1 deleted)"); a new file
            # of the same size but other text is not taken for one.
            mark = len(events)
            (corpus / "council.txt").rename(corpus / "council_minutes.txt")
            size = (corpus / "council_minutes.txt").stat().st_size
            (corpus / "other.txt").write_text("x" * size)
            await send.send({(Change.deleted, str(corpus / "council.txt")),
                             (Change.added, str(corpus / "council_minutes.txt")),
                             (Change.added, str(corpus / "other.txt"))})
            await until(lambda: daemon.syncs == 5)
            event = queued(mark)
            assert event["message"].startswith("2 files (1 added, 1 renamed); 2 pending"), event["message"]
            sync_line = next(e for e in events[mark:] if e["state"] == "extracting" and "scanned" in e)
            assert sync_line["message"].startswith("2 changed files: "), sync_line["message"]
            # --json gives the count the message gives (it had only "scanned"), as the queued line does.
            assert sync_line["files"] == 2 and sync_line["whole_folder"] is False, sync_line
            assert "failed_items" not in sync_line and sync_line["scanned"] == 5, sync_line
            assert (event["files"], event["renamed"], event["added"]) == (2, 1, 1) and "deleted" not in event


async def test_a_sync_line_counts_the_files_it_scans_beside_a_folder_it_cannot_list(corpus, tmp_path, monkeypatch):
    # A subfolder at chmod 000 made every sync say "initial sync: scanning 0 files" (`scanned`
    # 0 in --json) of a folder of 4: its failure, recorded during the scan, made the line before
    # the scan had counted them.
    (corpus / "sub").mkdir()
    (corpus / "sub" / "locked.txt").write_text("Lena Varga kept the keys of Lantern Hall.\n")
    real_scandir = os.scandir

    def scandir(path="."):   # (tests run as root, where chmod 000 refuses nothing)
        if Path(path) == corpus / "sub":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "s.db", corpus) as (daemon, events, send):
        async with send:
            mark = len(events)
            (corpus / "new.txt").write_text("Mira Osk opened the Lantern Museum in Torford.\n")
            await send.send({(Change.added, str(corpus / "new.txt"))})
            await until(lambda: daemon.syncs == 2)
    initial, changed = [e for e in events if e["state"] == "extracting" and "scanned" in e]
    assert initial["message"] == "initial sync: scanning 4 files" and initial["scanned"] == 4, initial
    assert changed["message"] == "1 changed file: scanning 5 files" and changed["scanned"] == 5, changed
    assert any("sub: cannot list the folder" in e["message"] for e in events[:mark]), events


def _stopped_at_its_first_check(monkeypatch) -> tuple[threading.Event, list[str]]:
    """A stop (the event returned) set as a file's read by ``WatchedFolder`` reaches its first
    check (``read_documents``' ``check``: after the bytes are read), and the files whose line
    ends were then made (``loader._newlines``, the step after it: a read the stop ended never
    gets there)."""
    from streamrag import loader

    stop, went_on = threading.Event(), []
    read, newlines = watched_folder.read_documents, loader._newlines

    def reading(path, *args, check=lambda: None, **kwargs):
        def first() -> None:
            stop.set()
            check()

        return read(path, *args, check=first, **kwargs)

    def noted(held, **kwargs):
        went_on.append("read on")
        return newlines(held, **kwargs)

    monkeypatch.setattr(watched_folder, "read_documents", reading)
    monkeypatch.setattr(loader, "_newlines", noted)
    return stop, went_on


async def test_a_stop_ends_the_read_of_a_big_file_touched_or_renamed(corpus, tmp_path, monkeypatch):
    # A touched file (``as_indexed``) and one renamed (``renames``, same size as a deleted one)
    # are read whole in a worker thread to compare their documents with the index's; a stop
    # abandoned the thread, but the read went on, and the process's exit waited for it: a 20 MB
    # cp1251 file touched, SIGTERM 1 s later, exit 4 s after it (renamed: 4.3 s). Now the read
    # asks the daemon's stop between its steps and ends there, the file taken as not read:
    # touched, it is queued as modified; renamed, it is no rename (added, and one deleted).
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    await sync([corpus], settings, db, root=corpus)
    folder = watched_folder.WatchedFolder(settings, db, corpus)
    later = time.time() + 60
    os.utime(corpus / "council.txt", (later, later))
    with watched_folder.reading(db) as store:
        rows = index_rows.file_rows(store, "council.txt")
    assert folder.as_indexed({"council.txt": rows}) == {"council.txt"}   # (not stopped: read, as indexed)
    os.rename(corpus / "guild.txt", corpus / "guild2.txt")
    moved = {"guild.txt": "deleted", "guild2.txt": "added"}
    assert folder.renames(moved) == {"guild2.txt": "guild.txt"}
    stop, went_on = _stopped_at_its_first_check(monkeypatch)
    assert folder.as_indexed({"council.txt": rows}, stop.is_set) == set()
    assert stop.is_set() and went_on == []
    stop.clear()
    assert folder.renames(moved, stop.is_set) == {}
    assert stop.is_set() and went_on == []
    # (asked after the stop, nothing more is read: the next file is not begun)
    assert folder.as_indexed({"council.txt": rows, "railway.txt": rows}, stop.is_set) == set()
    assert went_on == []


async def test_a_stop_while_a_batch_is_queued_extracts_nothing_ahead(corpus, tmp_path):
    # A stop while a batch's files were looked at (a big file read for a rename) said "nothing
    # under way"; the batch was queued after it, and its files extracted ahead, which the stop
    # then waited for: a 20 MB file's read and cut, 3.2 s after SIGTERM. Queued, not extracted.
    settings = make_settings(index=SMALL, watch={"quiet_s": 30})
    async with running(settings, tmp_path / "q.db", corpus) as (daemon, events, send):
        async with send:
            new = corpus / "new.txt"
            new.write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
            earlier = time.time() - 60   # (settled: not waited for, ``_settled``, which a stop ends)
            os.utime(new, (earlier, earlier))
            mark = len(events)
            daemon.stop("test")
            await daemon._queue({"new.txt": "added"})
    assert daemon.pending == {"new.txt": "added"}
    assert "queued" in events.states(mark) and "extracting" not in events.states(mark), events.states(mark)


async def test_an_event_on_a_file_whose_content_is_as_indexed_queues_nothing(corpus, tmp_path):
    # `touch corp/*.txt` said "queued 43 files (43 modified)" and ran a sync that changed
    # nothing: backups, `git checkout` and rsync filled the log with edits that were none.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    notes = corpus / "notes.txt"
    notes.write_text("Mira Osk chaired the Harbor Council meeting at Lantern Hall.\n")
    async with running(settings, tmp_path / "t.db", corpus) as (daemon, events, send):
        async with send:
            mark = len(events)
            later = time.time() + 60
            for name in ("council.txt", "festival.md"):   # touch: a new mtime (and ctime)
                os.utime(corpus / name, (later, later))
            os.chmod(corpus / "railway.txt", 0o600)       # chmod: a new ctime only
            guild = corpus / "guild.txt"                  # written again, the same bytes, by rename
            temp = corpus / ".guild.txt.tmp"
            temp.write_bytes(guild.read_bytes())
            os.replace(temp, guild)
            await send.send({(Change.modified, str(corpus / "council.txt")),
                             (Change.modified, str(corpus / "festival.md")),
                             (Change.modified, str(corpus / "railway.txt")),
                             (Change.added, str(guild))})
            # An edit of the same size, its modification time put back (`cp -p`): changed.
            st = notes.stat()
            notes.write_text(notes.read_text().replace("Lantern Hall", "Lantern Hale"))
            os.utime(notes, ns=(st.st_atime_ns, st.st_mtime_ns))
            assert notes.stat().st_size == st.st_size
            await send.send({(Change.modified, str(notes))})
            await until(lambda: daemon.syncs == 2)
    queued = [e for e in events[mark:] if e["state"] == "queued"]
    assert len(queued) == 1 and queued[0]["files"] == 1 and queued[0]["modified"] == 1, \
        [e["message"] for e in queued]
    assert daemon.pending == {}


async def test_a_sync_conflict_copy_is_neither_queued_nor_indexed_and_is_named_once(corpus, tmp_path):
    # Syncthing keeping both sides of an edit made in two places: the losing side, renamed
    # "notes.sync-conflict-...", was queued, extracted and indexed as a document of its own.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "c.db"
    council = corpus / "council.txt"
    copy = corpus / "council.sync-conflict-20240115-103000-ABCDEF1.txt"
    async with running(settings, db, corpus) as (daemon, events, send):
        async with send:
            mark = len(events)
            copy.write_text(council.read_text() + "Mira Osk left the council.\n")
            council.write_text(council.read_text() + "Mira Osk chaired the council.\n")
            await send.send({(Change.added, str(copy)), (Change.modified, str(council))})
            await until(lambda: daemon.syncs == 2)
            copy.write_text(copy.read_text() + "Bo Lund seconded.\n")
            council.write_text(council.read_text() + "Bo Lund seconded.\n")
            await send.send({(Change.modified, str(copy)), (Change.modified, str(council))})
            await until(lambda: daemon.syncs == 3)
    queued = [e for e in events[mark:] if e["state"] == "queued"]
    assert [e["files"] for e in queued] == [1, 1], [e["message"] for e in queued]
    assert copy.name not in _indexed_paths(db) and council.name in _indexed_paths(db)
    said = [e["message"] for e in events if e["state"] == "warning" and copy.name in e["message"]]
    assert said == [_copy_line(copy.name)]


async def test_a_file_written_on_after_its_batch_holds_its_sync_back_until_it_is_quiet(corpus, tmp_path, monkeypatch):
    # The watcher holds a file written on and on back for 10 x debounce_ms, longer than quiet_s:
    # between its batches it looked quiet, and each batch made a sync (a log written every 5 ms:
    # a sync every 5.5 s, each clustering and reporting again, 82 lines a minute). Quiet is now
    # its files unwritten for quiet_s too, those in two batches in a row (a file written on and on
    # is in every batch; one batch alone is a write like any other, synced after quiet_s). The cap
    # of 10 x quiet_s still syncs it: out of the way.
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_MAX_WAIT_QUIETS", 1000)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5})
    db = tmp_path / "c.db"
    log = corpus / "log.txt"
    synced_while_written = []
    async with running(settings, db, corpus) as (daemon, events, send):
        async with send:
            with log.open("a") as f:
                f.write("Mira Osk opened the harbor ledger.\n")
                f.flush()
                await send.send({(Change.added, str(log))})
                await until(lambda: daemon.syncs == 2)
                f.write("Entry: Bo Lund paid the toll at Port Vell.\n")
                f.flush()
                await send.send({(Change.modified, str(log))})   # the watcher's next batch of it
                for n in range(60):   # written on, no event: the watcher holds them back
                    await anyio.sleep(0.02)
                    f.write(f"Entry {n}: Bo Lund paid the toll at Port Vell.\n")
                    f.flush()
                    synced_while_written.append(daemon.syncs > 2)
            await until(lambda: daemon.syncs == 3)
    assert not any(synced_while_written)
    assert db_count(db, "SELECT chars FROM documents WHERE path = 'log.txt'") == len(log.read_text())
    assert daemon.syncs == 3


async def test_only_the_files_of_two_batches_in_a_row_are_looked_at_for_writes(corpus, tmp_path, monkeypatch):
    # At 100,000 files queued (a folder moved in), each quiet period listed the last batch's
    # paths on the event loop (0.9 s) and stat'ed them all in a thread (2.7 s), up to ten times
    # before the cap. A file written on and on is in every batch: only the files of the last
    # batch that the one before held too are looked at.
    import streamrag.daemon as daemon_module
    from streamrag.daemon import Daemon

    looked: list[list[str]] = []
    real = daemon_module._modified

    def spy(paths):
        looked.append(sorted(p.name for p in paths))
        return real(paths)

    async def settled(self, paths):   # (the extraction's own look, for debounce_ms: not this one)
        return paths

    monkeypatch.setattr(daemon_module, "_modified", spy)
    monkeypatch.setattr(Daemon, "_settled", settled)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.1})
    db = tmp_path / "c.db"
    moved, log, other = corpus / "moved", corpus / "log.txt", corpus / "other.txt"
    async with running(settings, db, corpus) as (daemon, events, send):
        moved.mkdir()   # (moved in, made after the initial sync)
        for n in range(20):
            (moved / f"n{n:02}.txt").write_text(f"Note {n}: Mira Osk counted the nets at Port Vell.\n")
        log.write_text("Mira Osk opened the harbor ledger.\n")
        async with send:
            await send.send({(Change.added, str(p)) for p in [*moved.iterdir(), log]})
            await until(lambda: daemon.syncs == 2)
            with log.open("a") as f:
                f.write("Entry: Bo Lund paid the toll at Port Vell.\n")
            other.write_text("Bo Lund sailed the Blue Heron to Kessel.\n")
            await send.send({(Change.modified, str(log)), (Change.added, str(other))})
            await until(lambda: daemon.syncs == 3)
    assert looked and all(names == ["log.txt"] for names in looked), looked
    assert db_count(db, "SELECT count(*) FROM documents WHERE path LIKE 'moved/%'") == 20


async def test_a_file_written_on_with_its_batches_apart_is_synced_by_the_cap(corpus, tmp_path, monkeypatch):
    # Quiet is also the last batches' files unwritten; a file written on and on, its batches
    # further apart than quiet_s, is still synced by about _MAX_WAIT_QUIETS quiet periods after
    # its first batch: counted in the daemon's looks at it (one per quiet period), not timed.
    # The file is written before each batch and, in the look's own worker thread, just before
    # the look stats it (``_written_again``), and the look reads the clock as it stats: every
    # look finds it written, however loaded the machine. (A writer task on the event loop, every
    # 10 ms, stalled over 0.2 s under load: a look found it unwritten, and the watch synced.)
    import streamrag.daemon as daemon_module

    quiet = 0.2
    looks: list[float] = []   # each quiet period's look at the files: how long it waits yet
    real_wait, real_written = daemon_module._settle_wait, daemon_module._written_again
    log = corpus / "log.txt"
    log.write_text("Mira Osk opened the harbor ledger.\n")
    writes = 0
    stat_at = 0.0   # when the last look stat'ed the files

    def write() -> None:
        nonlocal writes
        with log.open("a") as f:
            f.write(f"Entry {writes}: Bo Lund paid the toll at Port Vell.\n")
        writes += 1

    def written_again(root, batch, before):
        nonlocal stat_at
        write()
        seen = real_written(root, batch, before)
        stat_at = time.time()
        return seen

    def spy(mtimes_ns, young_s, now):
        if young_s != quiet:   # the extraction's look, for debounce_ms
            return real_wait(mtimes_ns, young_s, now)
        looks.append(wait := real_wait(mtimes_ns, young_s, stat_at))   # (not the time it got back)
        return wait

    monkeypatch.setattr(daemon_module, "_written_again", written_again)
    monkeypatch.setattr(daemon_module, "_settle_wait", spy)
    settings = make_settings(index=SMALL, watch={"quiet_s": quiet, "debounce_ms": 50})
    db = tmp_path / "c.db"
    # Batches enough for the cap to sync it, bounded apart from it: one made huge (or taken out
    # of _follow) never syncs it within them.
    most = min(daemon_module._MAX_WAIT_QUIETS, 20) + 2
    synced_after = None   # the batches sent, each after a quiet period that found it written
    async with running(settings, db, corpus) as (daemon, events, send):
        async with send:
            write()
            await send.send({(Change.added, str(log))})
            await until(lambda: daemon.syncs == 2)   # (one batch alone: a write like any other)
            start = len(looks)
            for batches in range(1, most + 1):
                mark = len(looks)
                write()
                await send.send({(Change.modified, str(log))})
                await until(lambda: len(looks) > mark or daemon.syncs == 3)
                if daemon.syncs == 3:
                    synced_after = batches
                    break
    looks = looks[start:]
    assert looks and all(wait > 0 for wait in looks), looks   # written at every look
    assert synced_after is not None, looks
    assert synced_after <= daemon_module._MAX_WAIT_QUIETS + 1, (synced_after, looks)
    assert len(looks) <= daemon_module._MAX_WAIT_QUIETS + 1, looks


def _copy_lines(events: list[dict], start: int = 0) -> list[str]:
    """The warning lines naming sync conflict copies among ``events[start:]``."""
    return [e["message"] for e in events[start:] if e["state"] == "warning" and "conflict cop" in e["message"]]


def _copy_line(name: str) -> str:
    """The warning line naming one sync conflict copy."""
    return (f"{name}: a sync conflict copy (Syncthing, Dropbox, Nextcloud, ownCloud), not indexed as it repeats its "
            "document; merge what it holds into the document, then delete it (or rename one to index it)")


def _copies_line(*names: str) -> str:
    """The warning line naming several sync conflict copies, in the order given."""
    return (f"{', '.join(names)}: {len(names)} sync conflict copies (Syncthing, Dropbox, Nextcloud, ownCloud), not "
            "indexed as they repeat their documents; merge what each holds into the document, then delete them (or "
            "rename one to index it)")


def _a_copy_found_and_one_to_come(corpus: Path) -> tuple[Path, Path, Path]:
    """A conflict copy in sub/ from the start (``found``), the name of one to come (``copy``) and
    a document to change (``council``)."""
    (corpus / "sub").mkdir()
    found = corpus / "sub" / "guild.sync-conflict-20240115-103000-ABCDEF1.txt"
    found.write_text((corpus / "guild.txt").read_text())
    return found, corpus / "railway (User B's conflicted copy).txt", corpus / "council.txt"


async def test_a_conflict_copy_that_appears_is_named_in_its_batch_with_those_found_before(corpus, tmp_path):
    # A copy queues nothing, so only the next sync named it, which another change had to bring
    # (hours later on a quiet folder). Named at once now, in the line the next sync's scan says
    # (the copies it found before too, in its order), which that sync then does not say again.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    db = tmp_path / "c.db"
    found, copy, council = _a_copy_found_and_one_to_come(corpus)

    async with running(settings, db, corpus) as (daemon, events, send):
        assert _copy_lines(events, 0) == [_copy_line(f"sub/{found.name}")]
        mark = len(events)
        async with send:
            copy.write_text((corpus / "railway.txt").read_text() + "The line closed in May.\n")
            await send.send({(Change.added, str(copy))})
            await until(lambda: _copy_lines(events, mark), timeout=5)
            assert daemon.syncs == 1 and not daemon.pending   # (named, queued nothing)
            council.write_text(council.read_text() + "Mira Osk chaired the council.\n")
            await send.send({(Change.modified, str(council))})
            await until(lambda: daemon.syncs == 2)
    assert _copy_lines(events, mark) == [_copies_line(copy.name, f"sub/{found.name}")]
    assert [e["files"] for e in events[mark:] if e["state"] == "queued"] == [1]
    assert copy.name not in _indexed_paths(db)


async def test_a_conflict_copy_under_a_linked_folder_is_named_once_in_the_scans_order(corpus, tmp_path):
    # The scan walks folders reached through a symlink last; the batch's line sorted a copy under
    # one ("aa/", a link) before a real folder's ("zz/"): its line differed from the next sync's,
    # which said the copies again, nothing having changed.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db = tmp_path / "c.db"
    (corpus / "zz").mkdir()
    found = corpus / "zz" / "guild.sync-conflict-20240115-103000-ABCDEF1.txt"
    found.write_text((corpus / "guild.txt").read_text())
    (corpus / ".keep" / "x").mkdir(parents=True)
    (corpus / "aa").symlink_to(".keep/x")
    copy = corpus / "aa" / "railway (User B's conflicted copy).txt"
    council = corpus / "council.txt"

    async with running(settings, db, corpus) as (daemon, events, send):
        mark = len(events)
        async with send:
            copy.write_text((corpus / "railway.txt").read_text())
            await send.send({(Change.added, str(copy))})
            await until(lambda: _copy_lines(events, mark), timeout=5)
            council.write_text(council.read_text() + "Mira Osk chaired the council.\n")
            await send.send({(Change.modified, str(council))})
            await until(lambda: daemon.syncs == 2)
    assert _copy_lines(events, mark) == [_copies_line(f"zz/{found.name}", f"aa/{copy.name}")]


async def test_a_conflict_copy_that_appears_during_a_sync_after_its_scan_is_named_once(corpus, tmp_path, monkeypatch):
    # Its batch, taken while the sync ran, named it; the sync, whose scan had not met it, then
    # kept only its own copies: the next sync named it again, nothing having changed.
    from streamrag.pipeline import Indexer

    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db = tmp_path / "c.db"
    found, copy, council = _a_copy_found_and_one_to_come(corpus)
    scan_once = Indexer._scan
    late: list = []

    async def scan_then_a_copy(self, store, writer, paths, publishing):
        out = await scan_once(self, store, writer, paths, publishing)
        if late and publishing and not copy.exists():   # (the sync's scan is done; the copy comes, and its batch)
            copy.write_text((corpus / "railway.txt").read_text() + "The line closed in May.\n")
            late[0].send_nowait({(Change.added, str(copy))})
            await until(lambda: _copy_lines(events, late[1]), timeout=5)
        return out

    monkeypatch.setattr(Indexer, "_scan", scan_then_a_copy)
    async with running(settings, db, corpus) as (daemon, events, send):
        mark = len(events)
        late += [send, mark]
        async with send:
            council.write_text(council.read_text() + "Mira Osk chaired the council.\n")
            await send.send({(Change.modified, str(council))})
            await until(lambda: daemon.syncs == 2)
            council.write_text(council.read_text() + "Bo Lund kept the minutes.\n")
            await send.send({(Change.modified, str(council))})
            await until(lambda: daemon.syncs == 3)
    assert _copy_lines(events, mark) == [_copies_line(copy.name, f"sub/{found.name}")]


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_conflict_copy_that_appears_during_the_initial_sync_is_named_once(corpus, tmp_path, monkeypatch, when):
    # Its batch, taken before the initial sync published, named it alone: the copies the folder
    # held were not known yet, and the initial sync's line then named it again with them.
    from streamrag.pipeline import Indexer

    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    found, copy, council = _a_copy_found_and_one_to_come(corpus)
    scan_once = Indexer._scan
    events = Events()
    daemon = Daemon(settings, tmp_path / "c.db", corpus, report=events)
    send, recv = scripted()

    async def a_copy_by_the_scan(self, store, writer, paths, publishing):
        if when == "after":
            out = await scan_once(self, store, writer, paths, publishing)
        if publishing and not copy.exists():   # (the copy comes, and its batch, as the initial sync runs)
            copy.write_text((corpus / "railway.txt").read_text() + "The line closed in May.\n")
            send.send_nowait({(Change.added, str(copy))})
            await until(lambda: copy.name in daemon._copies, timeout=5)
        return out if when == "after" else await scan_once(self, store, writer, paths, publishing)

    monkeypatch.setattr(Indexer, "_scan", a_copy_by_the_scan)
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        async with send:
            await until(lambda: daemon.syncs == 1, timeout=30)
            council.write_text(council.read_text() + "Mira Osk chaired the council.\n")
            await send.send({(Change.modified, str(council))})
            await until(lambda: daemon.syncs == 2)
    lines = _copy_lines(events)
    both = _copies_line(copy.name, f"sub/{found.name}")
    # (after the scan: the initial sync names those it met, the next sync the copy with them)
    assert lines == ([both] if when == "before" else [_copy_line(f"sub/{found.name}"), both])


async def test_a_conflict_copy_with_a_control_character_in_its_name_is_named_as_the_scan_names_it(corpus, tmp_path):
    # Its batch named it raw (a tab, an escape sequence driving the terminal), the scan escaped:
    # two lines, the next sync's naming it again.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    copy = corpus / "rail\tway (User B's conflicted copy).txt"
    council = corpus / "council.txt"

    async with running(settings, tmp_path / "c.db", corpus) as (daemon, events, send):
        async with send:
            copy.write_text((corpus / "railway.txt").read_text())
            await send.send({(Change.added, str(copy))})
            await until(lambda: _copy_lines(events, 0), timeout=5)
            council.write_text(council.read_text() + "Mira Osk chaired the council.\n")
            await send.send({(Change.modified, str(council))})
            await until(lambda: daemon.syncs == 2)
    assert _copy_lines(events, 0) == [_copy_line("rail\\tway (User B's conflicted copy).txt")]


async def test_a_folder_moved_out_and_back_or_copied_over_itself_queues_only_what_changed(corpus, tmp_path):
    # `mv corp/sub /tmp/x && mv /tmp/x corp/sub` queued its files as modified and ran a sync
    # that changed nothing: the files of a folder moved in were not compared as a touched one's.
    sub, ledger = corpus / "sub", corpus / "ledger"
    sub.mkdir()
    (sub / "notes.txt").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
    (sub / "data.csv").write_text("id,text\n1,Mira Osk chaired the Harbor Council.\n"
                                  "2,Tomas Vell kept the Lantern Hall.\n")
    ledger.mkdir()
    (ledger / "kept.txt").write_text("Ada Brenn mapped the Kessel shoals.\n")
    (ledger / "edited.txt").write_text("Ivo Sand rebuilt the north pier.\n")
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "m.db", corpus) as (daemon, events, send):
        async with send:
            mark = len(events)
            sub.rename(tmp_path / "x")                 # moved out and back: stamps unchanged
            (tmp_path / "x").rename(sub)
            shutil.move(ledger, tmp_path / "y")        # copied back (new change stamps), one file
            shutil.copytree(tmp_path / "y", ledger)    # edited and one new file
            (ledger / "edited.txt").write_text("Ivo Sand rebuilt the south pier.\n")
            (ledger / "new.txt").write_text("Lena Varga opened the Kessel festival.\n")
            await send.send({(Change.deleted, str(sub)), (Change.added, str(sub)),
                             (Change.deleted, str(ledger)), (Change.added, str(ledger))})
            await until(lambda: daemon.syncs == 2)
    (queued,) = [e for e in events[mark:] if e["state"] == "queued"]
    assert (queued["files"], queued.get("added"), queued.get("modified")) == (2, 1, 1), queued["message"]
    assert daemon.pending == {}
    assert db_count(tmp_path / "m.db", "SELECT count(*) FROM files WHERE path LIKE 'ledger/%'") == 3


async def test_a_link_to_a_file_outside_the_folder_is_never_read(corpus, tmp_path):
    # The folder scan leaves such a link out, but the daemon extracted it on its own as an
    # added file: its text reached the store (and, with a model, the endpoint).
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    private = tmp_path / "private.txt"
    private.write_text("Captain Oskar Lind keeps the vault code hunter2 at Port Vell.\n")
    async with running(settings, tmp_path / "o.db", corpus) as (daemon, events, send):
        mark = len(events)
        (corpus / "secret.txt").symlink_to(private)
        (corpus / "new.txt").write_text("Mira Osk chaired the Harbor Council at Port Vell.\n")
        async with send:
            await send.send({(Change.added, str(corpus / "secret.txt")), (Change.added, str(corpus / "new.txt"))})
            await until(lambda: daemon.syncs == 2)
    (queued,) = [e for e in events[mark:] if e["state"] == "queued"]
    assert queued["files"] == 1 and queued["added"] == 1, queued["message"]
    store = Store(tmp_path / "o.db", readonly=True)
    try:
        assert store.scalar("SELECT count(*) FROM chunks WHERE text LIKE '%hunter2%'") == 0
        assert store.scalar("SELECT count(*) FROM files WHERE path = 'secret.txt'") == 0
        assert store.scalar("SELECT count(*) FROM files WHERE path = 'new.txt'") == 1
    finally:
        store.close()


@pytest.mark.parametrize("target", [".drafts/quay.txt", "quay.rst"])
async def test_an_edit_where_an_indexed_link_leads_is_synced(corpus, tmp_path, target):
    # A link to a hidden file, or to one index.include leaves out, is indexed; the daemon ignored
    # events on its target, so the index kept the old text (and, once the target was deleted,
    # the broken link) until some other file changed.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    where = corpus / target
    where.parent.mkdir(exist_ok=True)
    where.write_text("Zelda Quorn chaired the Lantern Guild at Brisk Hollow.\n")
    (corpus / "quay.txt").symlink_to(where)
    db = tmp_path / "o.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        assert db_count(db, "SELECT count(*) FROM chunks WHERE text LIKE '%Zelda Quorn%'") == 1
        async with send:
            where.write_text("Ansel Pirrow rebuilt the mill at Brisk Hollow.\n")
            await send.send({(Change.modified, str(where))})
            await until(lambda: daemon.syncs == 2)
            assert db_count(db, "SELECT count(*) FROM chunks WHERE text LIKE '%Ansel Pirrow%'") == 1
            where.unlink()
            await send.send({(Change.deleted, str(where))})
            await until(lambda: daemon.syncs == 3)
    assert db_count(db, "SELECT count(*) FROM files WHERE path = 'quay.txt'") == 0


@pytest.mark.parametrize("made", ["before the start", "while watching"])
@pytest.mark.parametrize("target", ["quay.bin", ".drafts/quay.txt"])
async def test_a_broken_link_is_synced_when_its_target_appears(corpus, tmp_path, target, made):
    # A broken link whose target index.include leaves out, or is hidden: no event named the link
    # when the target appeared, so it stayed out of the index until some other file changed.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    where, link = corpus / target, corpus / "quay.txt"
    if made == "before the start":
        link.symlink_to(where)
    db = tmp_path / "t.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        async with send:
            if made == "while watching":
                link.symlink_to(where)
                await send.send({(Change.added, str(link))})
                await anyio.sleep(0.2)
                assert daemon.syncs == 1 and daemon.pending == {}   # nothing to sync yet
            where.parent.mkdir(exist_ok=True)
            where.write_text("Zelda Quorn chaired the Lantern Guild at Brisk Hollow.\n")
            await send.send({(Change.added, str(p)) for p in {where.parent, where} - {corpus}})
            await until(lambda: daemon.syncs == 2, timeout=10)
    assert db_count(db, "SELECT count(*) FROM files WHERE path = 'quay.txt'") == 1
    assert db_count(db, "SELECT count(*) FROM chunks WHERE text LIKE '%Zelda Quorn%'") == 1
    warned = [e["message"] for e in events if e["state"] == "warning"]
    assert warned == [f"quay.txt: broken symlink to {where}, not indexed; fix or remove the link"], warned


def test_events_where_links_lead_are_named_as_the_links(corpus, tmp_path):
    # A link to a hidden folder, a link whose name holds "#", and a link to an indexed file.
    hidden = corpus / ".drafts"
    hidden.mkdir()
    (hidden / "quay.txt").write_text("Zelda Quorn chaired the Lantern Guild at Brisk Hollow.\n")
    (hidden / "mill.md").write_text("Ansel Pirrow rebuilt the mill at Brisk Hollow.\n")
    (corpus / "drafts").symlink_to(hidden)
    (corpus / "C#notes.txt").symlink_to(hidden / "mill.md")
    (corpus / "again.txt").symlink_to(corpus / "council.txt")
    db = tmp_path / "o.db"
    settings = make_settings(index=SMALL)
    assert anyio.run(partial(sync, [corpus], settings, db, root=corpus)).files == 8
    daemon = Daemon(settings, db, corpus)
    daemon.folder.note_links()
    assert daemon.folder.relevant(Change.modified, hidden / "quay.txt") == "drafts/quay.txt"
    assert daemon.folder.relevant(Change.modified, hidden / "mill.md") == "C#notes.txt"
    assert daemon.folder.relevant(Change.deleted, corpus / "council.txt") == "council.txt"   # itself, not the link
    assert daemon.folder.relevant(Change.modified, hidden / "other.rst") is None


def test_a_folder_moved_in_is_listed_with_a_look_at_each_file(tmp_path, monkeypatch):
    # Each file's path was parsed anew and resolved, with the root's, by an lstat per folder on
    # the way: a dozen looks a file (50,000 files moved in: 5.5 s of listing). A file is looked
    # at once; only links are resolved.
    root = tmp_path / "root"
    inbox = root / "inbox"
    for i in range(60):
        (inbox / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (inbox / f"d{i % 3}" / f"n{i}.txt").write_text(f"Note {i}.\n")
    (inbox / "photo.png").write_text("not text")
    (inbox / ".draft.txt").write_text("hidden")
    (inbox / "d0" / "again.txt").symlink_to(inbox / "d1" / "n1.txt")       # inside: taken
    (tmp_path / "secret.txt").write_text("private")
    (inbox / "d0" / "secret.txt").symlink_to(tmp_path / "secret.txt")      # outside: not taken
    (inbox / "d0" / "gone.txt").symlink_to(inbox / "nowhere.txt")          # broken: not taken
    os.mkfifo(inbox / "d2" / "pipe.txt")                                   # not a file: not taken
    daemon = Daemon(make_settings(), tmp_path / "index.db", root)
    looks = []
    for name in ("stat", "lstat"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda path, *a, real=real, **k: looks.append(path) or real(path, *a, **k))
    found = daemon.folder.files_in(inbox)
    assert sorted(found) == sorted([f"inbox/d{i % 3}/n{i}.txt" for i in range(60)] + ["inbox/d0/again.txt"])
    looks = [os.fspath(p) for p in looks]
    assert {looks.count(str(inbox / f"d{i % 3}" / f"n{i}.txt")) for i in range(2, 60)} == {1}   # (n1: a link's target)
    assert looks.count(str(tmp_path)) < 10, looks.count(str(tmp_path))   # (resolving the links)


async def test_a_link_to_a_folder_outside_is_neither_walked_nor_read(corpus, tmp_path):
    # The daemon walked the link's target and extracted what it found there (/etc, a home
    # folder): its text reached the store and the model, though the sync then left it out.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    outside = tmp_path / "outside" / "deep"
    outside.mkdir(parents=True)
    (outside / "passwords.md").write_text("Captain Oskar Lind keeps the vault code hunter2 at Port Vell.\n")
    async with running(settings, tmp_path / "o.db", corpus) as (daemon, events, send):
        mark = len(events)
        (corpus / "notes_link").symlink_to(tmp_path / "outside")
        (corpus / "new.txt").write_text("Mira Osk chaired the Harbor Council at Port Vell.\n")
        async with send:
            await send.send({(Change.added, str(corpus / "notes_link")), (Change.added, str(corpus / "new.txt")),
                             (Change.added, str(corpus / "notes_link" / "deep" / "passwords.md"))})
            await until(lambda: daemon.syncs == 2)
    (queued,) = [e for e in events[mark:] if e["state"] == "queued"]
    assert queued["files"] == 1 and queued["added"] == 1, queued["message"]
    assert db_count(tmp_path / "o.db", "SELECT count(*) FROM chunks WHERE text LIKE '%hunter2%'") == 0
    assert db_count(tmp_path / "o.db", "SELECT count(*) FROM chunks WHERE text LIKE '%Mira Osk chaired%'") == 1


async def test_a_link_to_a_folder_the_scan_walks_queues_nothing(corpus, tmp_path):
    # `ln -s .. sub/loop` (or `ln -s notes same`): the daemon listed the folder through the link
    # and queued every file under it as added ("8 files (8 added)" of one new file), extracted
    # them ahead, where the sync's scan finds them once, under their own paths. A link to a
    # hidden folder, which the scan walks only through the link, still queues its files.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    hidden = corpus / ".drafts"
    hidden.mkdir()
    async with running(settings, tmp_path / "l.db", corpus) as (daemon, events, send):
        mark = len(events)
        sub = corpus / "sub"
        sub.mkdir()
        (sub / "new.txt").write_text("Mira Osk chaired the Harbor Council at Port Vell.\n")
        (sub / "loop").symlink_to("..")
        (hidden / "quay.txt").write_text("Zelda Quorn chaired the Lantern Guild at Brisk Hollow.\n")
        (corpus / "drafts").symlink_to(hidden)
        async with send:
            await send.send({(Change.added, str(sub)), (Change.added, str(sub / "new.txt")),
                             (Change.added, str(sub / "loop")), (Change.added, str(corpus / "drafts"))})
            await until(lambda: daemon.syncs == 2)
    (queued,) = [e for e in events[mark:] if e["state"] == "queued"]
    assert queued["message"] == "2 files (2 added); 2 pending", queued["message"]
    assert _indexed_paths(tmp_path / "l.db") >= {"sub/new.txt", "drafts/quay.txt"}
    assert not any(p.startswith("sub/loop/") for p in _indexed_paths(tmp_path / "l.db"))


async def test_a_folder_named_by_a_link_to_a_walked_folder_queues_its_files_where_they_lie(corpus, tmp_path):
    # With `ln -s notes same`, watchfiles watches notes once, under the last path it met it by,
    # and may name a folder moved into notes "same/sub": the listing through the link, left
    # empty so as not to queue "same/sub/b.txt", queued nothing, and the folder's files stayed
    # out of the index until some other change's sync.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    notes = corpus / "notes"
    notes.mkdir()
    (corpus / "same").symlink_to("notes")
    async with running(settings, tmp_path / "s.db", corpus) as (daemon, events, send):
        mark = len(events)
        (notes / "sub").mkdir()
        (notes / "sub" / "b.txt").write_text("Zelda Quorn chaired the Lantern Guild at Brisk Hollow.\n")
        async with send:
            await send.send({(Change.added, str(corpus / "same" / "sub"))})
    queued = [e["message"] for e in events[mark:] if e["state"] == "queued"]
    assert queued == ["1 file (1 added); 1 pending"], queued
    paths = _indexed_paths(tmp_path / "s.db")
    assert "notes/sub/b.txt" in paths and not any(p.startswith("same/") for p in paths), paths


async def test_a_file_deleted_by_a_link_to_a_walked_folder_leaves_the_index(corpus, tmp_path):
    # With `ln -s notes same`, watchfiles watches notes once, under the last path it met it by,
    # and may name its files by the link's path: a file deleted in notes came as "same/a.txt",
    # which the index does not hold, so nothing was queued and notes/a.txt stayed indexed until
    # some other change's sync.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    notes = corpus / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("Zelda Quorn chaired the Lantern Guild at Brisk Hollow.\n")
    (corpus / "same").symlink_to("notes")
    async with running(settings, tmp_path / "s.db", corpus) as (daemon, events, send):
        assert "notes/a.txt" in _indexed_paths(tmp_path / "s.db")
        mark = len(events)
        (notes / "a.txt").unlink()
        async with send:
            await send.send({(Change.deleted, str(corpus / "same" / "a.txt"))})
    queued = [e["message"] for e in events[mark:] if e["state"] == "queued"]
    assert queued == ["1 file (1 deleted); 1 pending"], queued
    paths = _indexed_paths(tmp_path / "s.db")
    assert "notes/a.txt" not in paths and not any(p.startswith("same/") for p in paths), paths


async def test_an_edit_of_the_settings_file_says_a_restart_applies_it(corpus, tmp_path):
    # Adding *.rst to index.include in DIR/streamrag.toml did nothing, and nothing said so.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    config = corpus / "streamrag.toml"
    config.write_text("[index]\nchunk_size = 80\nchunk_overlap = 10\n")
    settings.source = str(config)
    async with running(settings, tmp_path / "c.db", corpus) as (daemon, events, send):
        mark = len(events)
        config.write_text('[index]\nchunk_size = 80\nchunk_overlap = 10\ninclude = ["*.txt", "*.rst"]\n')
        async with send:
            await send.send({(Change.modified, str(config))})
            await send.send({(Change.modified, str(config))})   # said once
            await anyio.sleep(0.3)
    warned = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    assert warned == [f"{config}: the settings changed; watch goes on with what it started with: "
                      "restart it to use the new ones"]


def reloading(folder, overrides):
    """The settings a restart of watch would read: streamrag.toml of ``folder`` (or none), then
    ``overrides`` (its flags)."""
    from streamrag.config import find_config

    return lambda: load_settings(find_config(folder), env={}, overrides=overrides, models_for=("index",))


async def test_every_edit_of_the_settings_file_in_use_is_said_a_typo_named(corpus, tmp_path):
    # Only the first edit was said: a later one that brought in a typo (which a restart
    # stops on) said nothing, nor did deleting the file.
    config = corpus / "streamrag.toml"
    config.write_text("[query]\nlocal_top_k = 5\n")
    flags = {"index": SMALL, "watch": {"quiet_s": 0.05}}
    settings = load_settings(config, env={}, overrides=flags)
    reload = reloading(corpus, flags)
    async with running(settings, tmp_path / "c.db", corpus, reload=reload) as (daemon, events, send):
        mark = len(events)
        async with send:
            for said, text in enumerate(("[query]\nlocal_top_k = 5\n[index]\ninclude = [\"*.txt\", \"*.rst\"]\n",
                         "[query]\nlocal_top_k = 5\n[index]\nchunk_sise = 80\n",
                         "# back as it started\n[query]\nlocal_top_k = 5\n",
                         None), 1):
                if text is None:
                    config.unlink()
                else:
                    config.write_text(text)
                await send.send({(Change.modified if text else Change.deleted, str(config))})
                await send.send({(Change.modified if text else Change.deleted, str(config))})   # unchanged
                await until(lambda: sum(e["state"] == "warning" for e in events[mark:]) >= said)
            await anyio.sleep(0.3)
        assert daemon.syncs == 1
    warned = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    assert warned == [
        f"{config}: the settings changed; watch goes on with what it started with: restart it to use "
        "the new ones",
        f"{config}: index.chunk_sise: unknown setting; did you mean index.chunk_size? (every valid key, "
        f"with its default, is in {REPO / 'config' / 'default.toml'}); watch goes on with what it started with: "
        "fix it, then restart watch to use the new settings",
        f"{config}: edited; the settings are those watch started with: nothing to restart for",
        f"{config}: the settings file was deleted; watch goes on with what it started with: a restart "
        "would use the defaults"]


async def test_a_settings_file_made_in_the_folder_after_the_start_is_said(corpus, tmp_path):
    # No streamrag.toml at the start: one written there (which a restart reads) said nothing.
    config = corpus / "streamrag.toml"
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    reload = reloading(corpus, {})
    async with running(settings, tmp_path / "m.db", corpus, reload=reload) as (daemon, events, send):
        mark = len(events)
        config.write_text("[index]\nchunk_size = 400\n")
        async with send:
            await send.send({(Change.added, str(config))})
            await send.send({(Change.modified, str(config))})   # (the editor's second event)
            await anyio.sleep(0.3)
        assert daemon.syncs == 1
    warned = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    assert warned == [f"{config}: a settings file appeared; watch goes on with what it started with "
                      "(the defaults): restart it to use the new ones"]


async def test_a_pipe_made_as_the_settings_file_does_not_hang_the_daemon(corpus, tmp_path):
    # `mkfifo streamrag.toml` in the watched folder: the daemon read it to see whether the
    # settings changed, and waited for a writer for ever (SIGTERM too: the open is retried).
    config = corpus / "streamrag.toml"
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    done, released = threading.Event(), threading.Event()

    def release():   # a daemon stuck opening the pipe is let go (and the test fails)
        if not done.wait(10):
            released.set()
            with contextlib.suppress(OSError):
                os.close(os.open(config, os.O_WRONLY | os.O_NONBLOCK))

    async with running(settings, tmp_path / "f.db", corpus, reload=reloading(corpus, {})) as (daemon, events, send):
        os.mkfifo(config)
        threading.Thread(target=release, daemon=True).start()
        (corpus / "new.txt").write_text("Mira Osk chaired the Harbor Council at Port Vell.\n")
        async with send:
            await send.send({(Change.added, str(config)), (Change.added, str(corpus / "new.txt"))})
            await until(lambda: daemon.syncs == 2)
        done.set()
    assert not released.is_set(), "the daemon waited on the pipe"
    assert db_count(tmp_path / "f.db", "SELECT count(*) FROM files WHERE path = 'new.txt'") == 1


async def test_an_edit_of_the_extraction_prompt_in_the_folder_is_said_not_synced(corpus, tmp_path):
    # The prompt (no document) was queued as a changed file, and a sync that did nothing ran.
    prompt = corpus / "my_prompt.md"
    prompt.write_text((Path(__file__).parents[1] / "prompts" / "extract.md").read_text())
    settings = make_settings(index={**SMALL, "extraction_prompt": str(prompt)}, watch={"quiet_s": 0.05})
    async with running(settings, tmp_path / "p.db", corpus) as (daemon, events, send):
        mark = len(events)
        prompt.write_text(prompt.read_text() + "\nBe brief.\n")
        async with send:
            await send.send({(Change.modified, str(prompt))})
            await anyio.sleep(0.3)
        assert daemon.syncs == 1
    assert [e["state"] for e in events[mark:] if e["state"] in ("queued", "warning")] == ["warning"]
    assert db_count(tmp_path / "p.db", "SELECT count(*) FROM files WHERE path = 'my_prompt.md'") == 0


async def test_every_edit_of_the_extraction_prompt_is_said_once(corpus, tmp_path):
    # Only its first edit was said, and its deletion (which a restart stops on) not at all.
    prompt = corpus / "my_prompt.md"
    prompt.write_text((Path(__file__).parents[1] / "prompts" / "extract.md").read_text())
    settings = make_settings(index={**SMALL, "extraction_prompt": str(prompt)}, watch={"quiet_s": 0.05})
    async with running(settings, tmp_path / "p.db", corpus) as (daemon, events, send):
        mark = len(events)
        async with send:
            for said, text in enumerate(("\nBe brief.\n", "\nBe briefer.\n", None), 1):
                if text is None:
                    prompt.unlink()
                else:
                    prompt.write_text(prompt.read_text() + text)
                for _ in range(2):   # (the second: the same content, said once)
                    await send.send({(Change.modified if text else Change.deleted, str(prompt))})
                await until(lambda: sum(e["state"] == "warning" for e in events[mark:]) >= said)
            await anyio.sleep(0.3)
        assert daemon.syncs == 1
    warned = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    edited = (f"{prompt}: the extraction prompt changed; watch goes on with the one it started with: "
              "restart it to use the new one")
    assert warned == [edited, edited, f"{prompt}: the extraction prompt was deleted; watch goes on with "
                      "the one it started with: a restart needs it back (or index.extraction_prompt set to another)"]


async def test_an_extraction_prompt_replaced_by_a_pipe_or_a_folder_is_said_so_not_deleted(corpus, tmp_path):
    # A prompt replaced by a FIFO was said "deleted", and its fix ("a restart needs it back") with it.
    prompt = corpus / "my_prompt.md"
    prompt.write_text((Path(__file__).parents[1] / "prompts" / "extract.md").read_text())
    settings = make_settings(index={**SMALL, "extraction_prompt": str(prompt)}, watch={"quiet_s": 0.05})
    async with running(settings, tmp_path / "p.db", corpus) as (daemon, events, send):
        mark = len(events)
        prompt.unlink()
        async with send:
            for said, replace in enumerate((os.mkfifo, None, os.mkdir), 1):
                if replace is None:
                    prompt.unlink()
                else:
                    replace(prompt)
                await send.send({(Change.modified if replace else Change.deleted, str(prompt))})
                await until(lambda: sum(e["state"] == "warning" for e in events[mark:]) >= said)
            await anyio.sleep(0.2)
    warned = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    not_a_file = (f"{prompt}: the extraction prompt is not a regular file now (a folder, pipe or device); "
                  "watch goes on with the one it started with: a restart needs a prompt file there "
                  "(or index.extraction_prompt set to another)")
    assert warned == [not_a_file, f"{prompt}: the extraction prompt was deleted; watch goes on with the one it "
                      "started with: a restart needs it back (or index.extraction_prompt set to another)",
                      not_a_file], warned


def test_a_settings_file_replaced_by_a_folder_is_looked_at_without_keeping_a_descriptor_open(tmp_path):
    # Each event on a prompt made a folder opened the folder and left its descriptor open: a
    # watch running for weeks ran out of them.
    from streamrag.settings_edits import _digest
    (tmp_path / "prompt.md").mkdir()
    os.mkfifo(tmp_path / "fifo.md")
    (tmp_path / "ok.md").write_text("Extract.\n")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        assert _digest(tmp_path / "prompt.md") == _digest(tmp_path / "fifo.md") == (None, "not a regular file")
        assert _digest(tmp_path / "ok.md")[1] == "" and _digest(tmp_path / "gone.md") == (None, "deleted")
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize("inside", [True, False])
async def test_an_index_deleted_with_a_replaced_folder_is_said_only_when_it_lay_outside(corpus, tmp_path, inside):
    # `rm -rf DIR && mkdir DIR`: an index inside went with the folder, as the "replaced" line
    # says ("the index was deleted while watch ran" was said on top of it); one outside, deleted
    # as well, was rebuilt without a word.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db = corpus / ".streamrag" / "index.db" if inside else tmp_path / "gone" / "i.db"
    db.parent.mkdir(exist_ok=True)
    async with running(settings, db, corpus) as (daemon, events, send):
        mark = len(events)
        if not inside:
            shutil.rmtree(db.parent)
        shutil.rmtree(corpus)
        corpus.mkdir()
        (corpus / "new.txt").write_text("Mira Osk chaired the Harbor Council at Port Vell.\n")
        async with send:
            await send.send({(Change.deleted, str(corpus)), (Change.added, str(corpus / "new.txt"))})
            await until(lambda: daemon.syncs == 2)
    warned = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    if inside:
        assert any("was replaced" in w for w in warned), warned
        assert not any("the index was deleted" in w for w in warned), warned
    else:
        assert any("the index was deleted while watch ran; it is built again" in w for w in warned), warned


def test_a_status_line_to_a_closed_terminal_is_dropped_not_raised():
    # A closed terminal (SIGHUP) made the first line after it raise EIO: the daemon died with
    # the sync it was finishing.
    class Hungup(io.StringIO):
        def write(self, text):
            raise OSError(5, "Input/output error")

    reporter = Reporter(stream=Hungup())
    reporter({"state": "stopping", "message": "SIGHUP received"})
    reporter({"state": "stopped", "message": "index is current"})
    assert reporter.closed

    class Closed(io.StringIO):   # `watch --json | head -1`: exit 141, as the README says
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        Reporter(stream=Closed())({"state": "idle", "message": "version 1"})


@pytest.mark.parametrize("event", ["file", "folder"])
async def test_a_folder_it_may_not_enter_syncs_the_folder_instead_of_crashing(corpus, tmp_path, monkeypatch,
                                                                              event):
    # `mkdir locked; echo x > locked/in.md; chmod 000 locked` (an event for the file) or
    # `chmod 644 locked` (its names listed, an event for the folder): a stat under it raised
    # PermissionError and the daemon died. (As root nothing is refused, so the refusal is made.)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    locked = corpus / "locked"
    locked.mkdir()
    (locked / "in.md").write_text("Ada Osk met Bram Tell at the quay.\n")
    real_stat, real_lstat = Path.stat, os.lstat

    def stat(self, *args, **kwargs):
        if locked in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return real_stat(self, *args, **kwargs)

    def lstat(path, *args, **kwargs):   # (the listing of a folder moved in looks at a file so)
        if locked in Path(path).parents:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    async with running(settings, tmp_path / "p.db", corpus) as (daemon, events, send):
        mark = len(events)
        monkeypatch.setattr(Path, "stat", stat)
        monkeypatch.setattr(os, "lstat", lstat)
        async with send:
            await send.send({(Change.added, str(locked / "in.md" if event == "file" else locked))})
            await until(lambda: daemon.syncs == 2)
        monkeypatch.undo()
    (queued,) = [e for e in events[mark:] if e["state"] == "queued"]
    assert queued["whole_folder"], queued["message"]


def test_a_file_it_may_list_but_not_look_at_is_left_to_the_sync(corpus, monkeypatch):
    # A folder chmod'ed between a batch's classification and the extraction ahead of its sync:
    # Path.is_file raised PermissionError out of _regular_files (run by the daemon's task
    # group), and the daemon died. The sync that follows reads the folder and says what it
    # cannot read.
    from streamrag import daemon as daemon_module
    locked = corpus / "locked"
    locked.mkdir()
    (locked / "in.md").write_text("Ada Osk met Bram Tell at the quay.\n")
    real_stat = os.stat

    def stat(path, *args, **kwargs):   # (as root nothing is refused, so the refusal is made)
        if locked in Path(path).parents:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    found = daemon_module._regular_files(corpus, ["locked/in.md", "guild.txt"])
    assert found == [corpus / "guild.txt"]


def test_a_held_file_in_a_folder_it_may_not_enter_is_left_to_the_sync(corpus, tmp_path, monkeypatch):
    # A burst the watcher held at a sync (a file still written beside it) named a file in a folder
    # made unsearchable since (`chmod 000 b`): Path.is_dir raised PermissionError out of
    # _folders_as_files and the daemon died with a traceback (the chaos run of helper G, s49).
    daemon = Daemon(make_settings(index=SMALL), tmp_path / "c.db", corpus)
    locked = corpus / "locked"
    locked.mkdir()
    (locked / "in.md").write_text("Ada Osk met Bram Tell at the quay.\n")
    (corpus / "council.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    real_stat = os.stat

    def stat(path, *args, **kwargs):   # (as root nothing is refused, so the refusal is made)
        if locked in Path(path).parents:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    held, _renamed = daemon._held_files({(Change.modified, str(locked / "in.md")),
                                         (Change.modified, str(corpus / "council.txt"))}, {})
    assert held.get("council.txt") == "modified", held


async def test_an_index_deleted_under_the_daemon_is_said_and_built_again(corpus, tmp_path):
    # rsync --delete or git clean -x on the folder took .streamrag/: the next sync made a new
    # index without a word, and with a model every answer was paid for again.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db = tmp_path / "gone" / "i.db"
    db.parent.mkdir()
    async with running(settings, db, corpus) as (daemon, events, send):
        mark = len(events)
        shutil.rmtree(db.parent)
        (corpus / "new.txt").write_text("Mira Osk chaired the Harbor Council at Port Vell.\n")
        async with send:
            await send.send({(Change.added, str(corpus / "new.txt"))})
            await until(lambda: daemon.syncs == 2)
    warned = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    assert len(warned) == 1 and "the index was deleted while watch ran" in warned[0], warned
    # Offline nothing was paid for ("so their calls are paid again" was said of a free index).
    assert "paid again" not in warned[0] and "offline, it costs no model call" in warned[0], warned
    assert db_count(db, "SELECT count(*) FROM files") == len(list(corpus.rglob("*.*")))


@pytest.mark.parametrize("inside", [True, False])
async def test_an_index_deleted_while_no_file_changes_is_built_again_within_the_quiet_period(
        corpus, tmp_path, monkeypatch, inside):
    # `rm -rf DIR/.streamrag` (git clean -x, rsync --delete) with watch idle: no sync ran until a
    # file changed; meanwhile `ask` failed "no index" and the health line said "no index".
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db = corpus / ".streamrag" / "index.db" if inside else tmp_path / "gone" / "i.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        mark = len(events)
        shutil.rmtree(db.parent)
        async with send:   # (no event: an index's files are no documents)
            await until(lambda: daemon.syncs == 2, timeout=10)
    warned = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    assert len(warned) == 1 and "the index was deleted while watch ran" in warned[0], warned
    assert ("git clean -x" in warned[0]) == inside
    assert [e for e in events[mark:] if e.get("whole_folder")], events[mark:]   # the sync that built it
    assert db_count(db, "SELECT count(*) FROM documents") == 4
    assert events[-1]["state"] == "stopped" and events[-1]["message"] == CURRENT_AS_SEEN


@pytest.mark.parametrize("then", ["idle", "edited"])
async def test_an_index_moved_away_stops_the_daemon_naming_where_it_went(corpus, tmp_path, monkeypatch, then):
    # `mv .streamrag/index.db ~/backup/` while watch ran: "the index was deleted", and a new one
    # built from the whole folder, its model calls paid again, the old one kept where it went.
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05 if then == "idle" else 3600)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db, moved = corpus / ".streamrag" / "index.db", tmp_path / "backup.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        mark = len(events)
        os.rename(db, moved)
        async with send:
            if then == "edited":
                new = corpus / "new.txt"
                new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
                await send.send({(Change.added, str(new))})
            await until(lambda: daemon.stopping, timeout=10)
    assert not db.exists() and db_count(moved, "SELECT count(*) FROM documents") == 4
    assert daemon.syncs == 1 and daemon.exit_code == 1
    errors = [e for e in events[mark:] if e["state"] == "error"]
    assert len(errors) == 1 and errors[0]["moved_to"] == str(moved), errors
    assert errors[0]["message"] == (
        f"{db}: the index was moved to {moved} while watch ran; stopping rather than building a new one "
        f"from the folder: move it back to {db} and start watch again, or start it with --db {moved}")
    assert not [e for e in events[mark:] if e["state"] in ("warning", "extracting")], events[mark:]
    left = "; 1 changed file not synced yet; the next start (or `streamrag index`) syncs what is left"
    assert events[-1]["state"] == "stopped"
    said = f"the index was moved to {moved}, not built again here"
    assert events[-1]["message"] == said + (left if then == "edited" else "")


@pytest.mark.parametrize("trash", [".local/share/Trash", ".Trash-1000", ".Trash/1000"])
async def test_an_index_moved_to_the_desktops_trash_offline_is_taken_as_deleted(corpus, tmp_path, monkeypatch, trash):
    # The file manager's Delete on .streamrag/ (or on the --db file) moves it to the trash: watch
    # stopped, "the index was moved to ~/.local/share/Trash/files/.streamrag/index.db ...; or start
    # it with --db" that path. Offline, building it again costs nothing: it is the desktop's
    # deletion (on another file system the same key deletes it outright), built again, the line
    # naming the trash.
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db = corpus / ".streamrag" / "index.db"
    bin_ = tmp_path / "home" / trash
    (bin_ / "info").mkdir(parents=True)
    (bin_ / "files").mkdir()
    moved = bin_ / "files" / ".streamrag"
    async with running(settings, db, corpus) as (daemon, events, send):
        mark = len(events)
        os.rename(db.parent, moved)   # (as `gio trash`, with its .trashinfo in info/)
        async with send:
            await until(lambda: daemon.syncs == 2 or daemon.stopping, timeout=10)
            # the new index held, not the old (held, emptying the trash would free no space)
            assert daemon._index_handle is not None and os.fstat(daemon._index_handle).st_ino == os.stat(db).st_ino
    assert daemon.syncs == 2 and daemon.exit_code == 0 and daemon.index_moved_to is None
    warned = [e for e in events[mark:] if e["state"] == "warning"]
    assert [e["trashed_to"] for e in warned] == [str(moved / "index.db")], warned
    assert warned[0]["message"] == (f"{db}: the index was moved to the trash ({moved / 'index.db'}) while watch "
                                    "ran; taken as deleted, it is built again from the folder (offline, it costs "
                                    "no model call)")
    assert not [e for e in events[mark:] if e["state"] == "error"]
    assert db_count(db, "SELECT count(*) FROM documents") == 4
    assert db_count(moved / "index.db", "SELECT count(*) FROM documents") == 4   # (the trash keeps it)


@pytest.mark.parametrize("what", ["folder", "db file, its -wal left"])
async def test_an_index_moved_to_the_desktops_trash_with_a_model_stops_the_daemon(corpus, tmp_path, monkeypatch, what):
    # With a model, taken as deleted it was built again, every call paid again: a Delete undone a
    # few seconds later cost a full paid rebuild. And with the --db file alone trashed, its -wal
    # holding commits stayed behind and was dropped by the new index, so the index restored from
    # the trash over the new one was an older one. Now it stops, as for a move, saying both ways on.
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings("http://llm.test/v1", index=SMALL, watch={"quiet_s": 0.05})
    folder = what == "folder"
    db = corpus / ".streamrag" / "index.db" if folder else tmp_path / "data" / "index.db"
    bin_ = tmp_path / "home" / ".local/share/Trash"
    (bin_ / "info").mkdir(parents=True)
    (bin_ / "files").mkdir()
    moved = bin_ / "files" / (".streamrag" if folder else "index.db")
    in_trash = moved / "index.db" if folder else moved
    wal = Path(f"{db}-wal")
    async with running(settings, db, corpus, transport=simulated_transport()) as (daemon, events, send):
        mark = len(events)
        reader = None
        if not folder:   # a commit in the -wal, which a reader holding the index keeps there
            reader = sqlite3.connect(db)
            reader.execute("PRAGMA wal_autocheckpoint = 0")
            reader.execute("CREATE TABLE note_of_a_reader (x)")
            reader.commit()
            assert wal.stat().st_size > 0
        os.rename(db.parent if folder else db, moved)
        async with send:
            await until(lambda: daemon.stopping, timeout=10)
        if reader is not None:
            assert wal.exists()   # (left here, its commits not in the file in the trash)
            reader.close()
    assert daemon.syncs == 1 and daemon.exit_code == 1 and daemon.index_moved_to == str(in_trash)
    errors = [e for e in events[mark:] if e["state"] == "error"]
    left = (f" ({wal}, left here, holds its last writes: the index lacks them elsewhere)" if not folder else "")
    assert [e["message"] for e in errors] == [
        f"{db}: the index was moved to the trash ({in_trash}) while watch ran; stopping rather than building a new "
        f"one from the folder, paying its model calls again: to keep it, restore "
        + (f"{moved} from the trash to {db.parent}" if folder else f"it from the trash to {db}{left}")
        + " and start watch again; to build a new one, " + ("delete index.db-wal and " if not folder else "")
        + "start watch again (emptying the trash frees its space)"]
    assert errors[0]["in_trash"] and errors[0]["wal_left"] == (not folder)
    assert not [e for e in events[mark:] if e["state"] in ("warning", "extracting", "merging")], events[mark:]
    assert events[-1]["state"] == "stopped" and events[-1]["message"] == (
        f"the index was moved to {in_trash}, not built again here")
    assert not db.exists() and db_count(in_trash, "SELECT count(*) FROM documents") == 4


def test_only_a_trash_is_taken_for_one():
    from streamrag.daemon import _in_the_trash

    assert not _in_the_trash("/home/ann/backup/files/index.db")
    assert not _in_the_trash("/home/ann/Trash/files/index.db")   # (no info/ beside files/: a folder of the user's)


async def test_an_index_replaced_by_a_rename_over_it_is_held_in_the_olds_place(corpus, tmp_path, monkeypatch):
    # `mv restored.db .streamrag/index.db` (or an rsync restore) while watch idled: the old file,
    # deleted, stayed held (its space not freed) until the next sync, and a move of the new one
    # then was taken for a deletion (the old file's), the index built again from the folder.
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db, restored, moved = corpus / ".streamrag" / "index.db", tmp_path / "restored.db", tmp_path / "moved.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        async with send:
            shutil.copyfile(db, restored)
            os.replace(restored, db)
            await until(lambda: os.fstat(daemon._index_handle).st_ino == os.stat(db).st_ino, timeout=5)
            assert os.fstat(daemon._index_handle).st_nlink == 1
            os.rename(db, moved)
            await until(lambda: daemon.stopping, timeout=10)
    assert daemon.index_moved_to == str(moved) and daemon.syncs == 1
    assert events[-1]["message"] == f"the index was moved to {moved}, not built again here"


async def test_an_index_gone_with_its_folder_replaced_is_said_as_the_replacement_only(corpus, monkeypatch):
    # `rm -rf DIR && mkdir DIR`: the daemon may find the index inside missing before the
    # watcher's event says the folder was replaced; its line is the replacement's, not "the
    # index was deleted while watch ran (rsync --delete or git clean -x on the folder?)".
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings(index=SMALL, watch={"quiet_s": 1})
    db = corpus / ".streamrag" / "index.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        mark = len(events)
        shutil.rmtree(corpus)
        corpus.mkdir()
        (corpus / "new.txt").write_text("Mira Osk chaired the Harbor Council at Port Vell.\n")
        async with send:
            await until(lambda: daemon.pending == {".": "rescan"})   # found missing first
            await send.send({(Change.deleted, str(corpus)), (Change.added, str(corpus / "new.txt"))})
            await until(lambda: daemon.syncs == 2)
    warned = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    assert len(warned) == 1 and "was replaced" in warned[0], warned
    assert db_count(db, "SELECT count(*) FROM documents") == 1


async def test_a_stop_before_a_deleted_index_is_built_again_does_not_call_it_current(corpus, monkeypatch):
    # SIGTERM with the index deleted said "stopped  index is current".
    import streamrag.daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 0.05)
    settings = make_settings(index=SMALL, watch={"quiet_s": 30})
    db = corpus / ".streamrag" / "index.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        shutil.rmtree(db.parent)
        async with send:
            await until(lambda: daemon.pending == {".": "rescan"})   # noticed; its sync waits 30 s
            daemon.stop()
    assert daemon.syncs == 1 and not db.exists()
    assert events[-1]["state"] == "stopped", events[-1]
    assert events[-1]["message"] == (f"no index: {db} was deleted and is not built again yet; the next "
                                     "start (or `streamrag index`) builds it from the folder")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
async def test_a_fifo_among_new_files_is_skipped_not_failing_the_batch(corpus, tmp_path):
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "p.db", corpus) as (daemon, events, send):
        mark = len(events)
        os.mkfifo(corpus / "pipe.txt")
        (corpus / "sub").mkdir()
        os.mkfifo(corpus / "sub" / "pipe2.txt")
        new = corpus / "new.txt"
        new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        async with send:
            await send.send({(Change.added, str(corpus / "pipe.txt")), (Change.added, str(new)),
                             (Change.added, str(corpus / "sub"))})
            await until(lambda: daemon.syncs == 2)
    after = events[mark:]
    assert "error" not in events.states(mark), [e["message"] for e in after if e["state"] == "error"]
    (queued,) = [e for e in after if e["state"] == "queued"]
    assert queued["files"] == 1
    (waiting,) = [e for e in after if e["state"] == "waiting"]
    assert waiting["chunks_extracted"] > 0
    store = Store(tmp_path / "p.db", readonly=True)
    assert {r["path"] for r in store.query("SELECT path FROM documents")} >= {"new.txt"}
    assert store.scalar("SELECT count(*) FROM documents WHERE path LIKE '%pipe%'") == 0
    store.close()


async def test_a_broken_link_is_said_once_and_queues_nothing(corpus, tmp_path):
    # A path that is not there was queued as deleted even when it was never indexed: a broken
    # link added said "1 file (1 deleted)" and synced nothing, and the polling watcher, which
    # reports it deleted at every poll, made a sync every 10 * quiet_s for ever.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5})   # offline: fast
    async with running(settings, tmp_path / "k.db", corpus) as (daemon, events, send):
        mark = len(events)
        link = corpus / "broken.txt"
        link.symlink_to("nowhere")
        (corpus / "fleeting.txt").write_text("Ivo Jax rowed to Port Vell.\n")
        new = corpus / "new.txt"
        new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        async with send:
            await send.send({(Change.added, str(link))})
            for _ in range(3):   # as each poll says it
                await send.send({(Change.deleted, str(link))})
            await anyio.sleep(0.3)
            assert daemon.syncs == 1 and daemon.pending == {}
            # A file queued, then deleted before its sync, is still taken off the queue.
            await send.send({(Change.added, str(corpus / "fleeting.txt"))})
            await until(lambda: daemon.pending.get("fleeting.txt") == "added")
            (corpus / "fleeting.txt").unlink()
            await send.send({(Change.deleted, str(corpus / "fleeting.txt"))})
            await until(lambda: daemon.pending.get("fleeting.txt") == "added and deleted")
            await send.send({(Change.added, str(new))})
            await until(lambda: daemon.syncs == 2)
            await send.send({(Change.deleted, str(link))})
            await anyio.sleep(0.3)
    after = events[mark:]
    assert "error" not in events.states(mark), [e["message"] for e in after if e["state"] == "error"]
    assert daemon.syncs == 2
    queued = [e for e in after if e["state"] == "queued"]
    # (never indexed, the file gone is no longer pending: it said "1 pending", then "2")
    assert [e["message"] for e in queued] == ["1 file (1 added); 1 pending", "1 file added and deleted",
                                              "1 file (1 added); 1 pending"]
    assert daemon.pending == {}
    warned = [e["message"] for e in after if e["state"] == "warning"]
    assert warned == ["broken.txt: broken symlink to nowhere, not indexed; fix or remove the link"], warned
    store = Store(tmp_path / "k.db", readonly=True)
    try:
        assert {r["path"] for r in store.query("SELECT path FROM documents")} >= {"new.txt"}
    finally:
        store.close()


async def test_a_link_out_of_the_folder_or_a_pipe_is_said_when_it_appears(corpus, tmp_path):
    # A broken link was said when it appeared; a link to a file or a folder outside the folder
    # (to ~/.ssh), or a pipe, only by the sync of some later edit of another file, hours later.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5})   # offline: fast
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("Admiral Rolf Stein hid the harbour key.\n")
    async with running(settings, tmp_path / "k.db", corpus) as (daemon, events, send):
        mark = len(events)
        (corpus / "key.txt").symlink_to(outside / "secret.txt")
        (corpus / "elsewhere").symlink_to(outside)
        os.mkfifo(corpus / "pipe.txt")
        new = corpus / "new.txt"
        new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        async with send:
            await send.send({(Change.added, str(corpus / name)) for name in ("key.txt", "elsewhere", "pipe.txt")})
            await send.send({(Change.added, str(new))})
            await until(lambda: daemon.syncs == 2)
    after = events[mark:]
    assert "error" not in events.states(mark), [e["message"] for e in after if e["state"] == "error"]
    states = events.states(mark)
    said = [e["message"] for e in after if e["state"] == "warning"]
    assert sorted(said) == sorted([
        f"key.txt: file symlink leads outside {corpus} (to {outside / 'secret.txt'}), so it is not indexed; "
        "copy the file in, or index its folder too by naming it as another PATH",
        f"elsewhere: folder symlink leads outside {corpus} (to {outside}), so it is not followed; index that "
        "folder itself if you want it",
        "pipe.txt: not a regular file (a pipe, socket or device), not indexed; remove it, or add it to index.exclude",
    ]), said   # each once: the sync, whose scan meets them, does not say them again
    assert states[:3] == ["warning"] * 3, states   # as they appeared, before the edit's sync
    (queued,) = [e for e in after if e["state"] == "queued"]
    assert queued["files"] == 1 and queued.get("added") == 1, queued   # new.txt alone
    assert _indexed_paths(tmp_path / "k.db") == {"new.txt"} | {
        p.name for p in corpus.iterdir() if p.is_file() and not p.is_symlink() and p.suffix in (".txt", ".md")}


async def test_a_file_written_in_a_folder_made_in_the_same_batch_is_added(corpus, tmp_path):
    # A `git checkout` of a branch with 200 new files in a new folder: the watcher saw the folder
    # made and one file's write, not its making (the folder was watched after it was made), and
    # the queued line said "200 files (199 added, 1 modified)" of files the index never held.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.5})   # offline: fast
    async with running(settings, tmp_path / "k.db", corpus) as (daemon, events, send):
        mark = len(events)
        gen = corpus / "gen"
        gen.mkdir()
        (gen / "a.txt").write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        (gen / "b.txt").write_text("Warden Edda Holm opened the Kessel lock at dawn.\n")
        async with send:
            await send.send({(Change.added, str(gen)), (Change.modified, str(gen / "b.txt"))})
            await until(lambda: daemon.syncs == 2)
    after = events[mark:]
    (queued,) = [e for e in after if e["state"] == "queued"]
    assert queued["message"] == "2 files (2 added); 2 pending", queued["message"]
    assert (queued.get("added"), queued.get("modified")) == (2, None), queued
    assert _indexed_paths(tmp_path / "k.db") >= {"gen/a.txt", "gen/b.txt"}


def _three_files_in(folder: Path) -> Path:
    """``folder``, made with three small files in it (x0.txt ... x2.txt), as `cp -r` makes one."""
    folder.mkdir()
    for i in range(3):
        (folder / f"x{i}.txt").write_text(f"Captain Oskar Lind sailed the Blue Heron {i} to Kessel.\n")
    return folder


async def _copied_in_then_moved(corpus: Path, tmp_path: Path, to: Path, said: set) -> tuple[list, list]:
    """`cp -r` of three files into ``corpus`` as c, then `mv c to` before c's sync, the move's
    events ``said`` as the watcher says them, under a daemon offline indexing into tmp_path/k.db.
    Once the second sync is done: the events from the copy on, and copies of daemon.pending
    as it stood once the copy, then the move, was queued. quiet_s is 2: an extraction ahead
    longer than quiet_s (CI under load) is followed by its sync a moment later (``settle``),
    which took the copy's files before they were looked at."""
    settings = make_settings(index=SMALL, watch={"quiet_s": 2})   # offline: fast
    async with running(settings, tmp_path / "k.db", corpus) as (daemon, events, send):
        mark = len(events)
        copied = _three_files_in(corpus / "c")
        async with send:
            await send.send({(Change.added, str(copied))})
            await until(lambda: "waiting" in events.states(mark))
            pending = [dict(daemon.pending)]
            shutil.move(copied, to)
            await send.send(said)
            await until(lambda: len([e for e in events[mark:] if e["state"] == "queued"]) == 2)
            pending.append(dict(daemon.pending))
            await until(lambda: daemon.syncs == 2)
    return events[mark:], pending


async def test_a_folder_copied_in_then_moved_before_its_sync_takes_its_queued_files_with_it(corpus, tmp_path):
    # `cp -r src notes/c`, then `mv notes/c notes/c2` before the sync: the watcher says the
    # folder's move alone (c deleted, c2 added), not its files'. The deleted folder, matching no
    # include pattern and holding no indexed file, was left out, so its files stayed queued as
    # added though gone: "3 files (3 added); 6 pending", with no deletion queued for them.
    after, (when_copied, when_moved) = await _copied_in_then_moved(
        corpus, tmp_path, corpus / "c2", {(Change.added, str(corpus / "c2")), (Change.deleted, str(corpus / "c"))})
    assert set(when_copied) == {f"c/x{i}.txt" for i in range(3)}
    assert {rel: kind for rel, kind in when_moved.items() if rel.startswith("c/")} \
        == {f"c/x{i}.txt": "added and deleted" for i in range(3)}
    moved = [e for e in after if e["state"] == "queued"][1]
    # The files gone with c were never indexed: the index gets c2's alone, as added, and they
    # alone are pending ("6 pending" of 3 files); c's are no deletion ("3 files (3 added, 3
    # deleted)" said 6 files, where the sync adds 3 and deletes none).
    assert moved["message"] == "3 files (3 added); 3 pending", moved
    assert (moved["files"], moved.get("added"), moved.get("deleted"), moved["pending"]) == (3, 3, None, 3), moved
    began = next(e for e in after if e["message"].endswith(": scanning 7 files"))   # (4 of the corpus)
    assert began["message"].startswith("3 changed files: ") and began["files"] == 3, began
    paths = _indexed_paths(tmp_path / "k.db")
    assert {f"c2/x{i}.txt" for i in range(3)} <= paths and not any(p.startswith("c/") for p in paths)


async def test_a_folder_copied_in_then_moved_out_before_its_sync_queues_nothing_to_add_or_delete(corpus, tmp_path):
    # `cp -r src notes/c`, then `mv notes/c /elsewhere` before the sync: its files, never
    # indexed, were said "3 files (3 deleted)", a deletion of nothing the index holds.
    after, _ = await _copied_in_then_moved(corpus, tmp_path, tmp_path / "away",
                                            {(Change.deleted, str(corpus / "c"))})
    moved = [e for e in after if e["state"] == "queued"][1]
    assert moved["message"] == "3 files added and deleted", moved
    assert (moved["files"], moved.get("added"), moved.get("deleted"), moved["pending"]) == (0, None, None, 0), moved
    began = next(e for e in after if "scanning" in e["message"])
    assert began["message"].startswith("3 files added and deleted: scanning "), began
    # --json gives the count the lines say (files 0 alone said nothing of the 3)
    assert moved["added_and_deleted"] == began["added_and_deleted"] == 3, (moved, began)
    assert not any(p.startswith("c/") for p in _indexed_paths(tmp_path / "k.db"))


async def test_a_file_queued_modified_but_never_indexed_is_not_pending_once_deleted(corpus, tmp_path):
    # A file whose creation the watcher missed (made during the initial sync's scan) comes as
    # modified; deleted before its sync, it stayed "1 pending", a deletion of nothing indexed.
    # An indexed file modified, then deleted, is still one (its text leaves the index).
    settings = make_settings(index=SMALL, watch={"quiet_s": 2})   # offline: fast
    async with running(settings, tmp_path / "k.db", corpus) as (daemon, events, send):
        mark = len(events)
        late = corpus / "late.txt"
        late.write_text("Ivo Jax rowed to Port Vell.\n")
        async with send:
            await send.send({(Change.modified, str(late))})
            await until(lambda: daemon.pending.get("late.txt") == "modified")
            late.unlink()
            await send.send({(Change.deleted, str(late))})
            await until(lambda: len([e for e in events[mark:] if e["state"] == "queued"]) == 2)
            assert daemon.pending == {"late.txt": "added and deleted"} and daemon.health()["pending"] == 0
            (corpus / "guild.txt").write_text("Warden Edda Holm opened the Kessel lock at dawn.\n")
            await send.send({(Change.modified, str(corpus / "guild.txt"))})
            await until(lambda: daemon.pending.get("guild.txt") == "modified")
            (corpus / "guild.txt").unlink()
            await send.send({(Change.deleted, str(corpus / "guild.txt"))})
            await until(lambda: daemon.pending.get("guild.txt") == "deleted")
            await until(lambda: daemon.syncs == 2)
    queued = [e["message"] for e in events[mark:] if e["state"] == "queued"]
    assert queued == ["1 file (1 modified); 1 pending", "1 file added and deleted",
                      "1 file (1 modified); 1 pending", "1 file (1 deleted); 1 pending"], queued
    assert "error" not in events.states(mark)
    assert not {"late.txt", "guild.txt"} & _indexed_paths(tmp_path / "k.db")


async def test_a_file_deleted_before_its_extraction_ahead_reads_it_is_no_failure(corpus, tmp_path, monkeypatch):
    # A file saved and deleted at once (an editor's temporary file) was found by the daemon's
    # stat, then gone when the extraction ahead of the sync scanned it: "extracting 1 file
    # failed: ...: no such file or folder" for a file that was simply deleted.
    import streamrag.daemon as daemon_module
    found = daemon_module._regular_files

    def found_then_deleted(root, rels):
        files = found(root, rels)
        for path in files:
            path.unlink()   # deleted right after the daemon saw it
        return files

    monkeypatch.setattr(daemon_module, "_regular_files", found_then_deleted)
    # quiet_s 2: an extraction ahead outlasting it (CI under load) syncs before the deletion comes
    settings = make_settings(index=SMALL, watch={"quiet_s": 2})   # offline: fast
    async with running(settings, tmp_path / "g.db", corpus) as (daemon, events, send):
        mark = len(events)
        gone = corpus / "gone.txt"
        gone.write_text("Ivo Jax rowed to Port Vell.\n")
        async with send:
            await send.send({(Change.added, str(gone))})
            await until(lambda: "waiting" in events.states(mark) or "error" in events.states(mark))
            await send.send({(Change.deleted, str(gone))})
            await until(lambda: daemon.syncs == 2)
    after = events[mark:]
    # Never indexed, it is no longer pending once deleted ("1 pending"), but its sync still comes,
    # said for what it is, not as one of the whole folder.
    deleted = [e for e in after if e["state"] == "queued"][-1]
    assert deleted["pending"] == 0 and deleted.get("deleted") is None, deleted
    assert deleted["message"] == "1 file added and deleted", deleted
    began = next(e for e in after if "scanning" in e["message"])
    assert began["message"].startswith("1 file added and deleted: scanning "), began
    assert (began["files"], began["whole_folder"]) == (0, False), began
    assert "error" not in events.states(mark), [e["message"] for e in after if e["state"] == "error"]
    waiting = [e for e in after if e["state"] == "waiting"]
    assert waiting and waiting[0]["chunks_extracted"] == 0, waiting
    assert daemon.pending == {}
    store = Store(tmp_path / "g.db", readonly=True)
    try:
        assert "gone.txt" not in {r["path"] for r in store.query("SELECT path FROM documents")}
    finally:
        store.close()


async def test_a_folder_moved_in_with_a_name_that_is_not_utf8_inside_is_synced_without_it(corpus, tmp_path):
    # The daemon listed the folder's files itself and looked the undecodable name up in the
    # store, which cannot hold it: UnicodeEncodeError ended the daemon.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    staged = tmp_path / "pkg"
    (staged / os.fsdecode(b"bad\xffdir")).mkdir(parents=True)
    (staged / os.fsdecode(b"bad\xffdir") / "c.txt").write_text("Una Pell sailed to Kessel.\n")
    (staged / os.fsdecode(b"x\xff.txt")).write_text("Ivo Jax rowed to Port Vell.\n")
    (staged / "good.txt").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
    async with running(settings, tmp_path / "u.db", corpus) as (daemon, events, send):
        mark = len(events)
        os.replace(staged, corpus / "pkg")
        async with send:
            await send.send({(Change.added, str(corpus / "pkg"))})
            await until(lambda: daemon.syncs == 2)
    after = events[mark:]
    assert "error" not in events.states(mark), [e["message"] for e in after if e["state"] == "error"]
    (queued,) = [e for e in after if e["state"] == "queued"]
    assert queued["files"] == 1 and queued["added"] == 1, queued["message"]
    warned = [e["message"] for e in after if e["state"] == "warning"]
    assert any(m.startswith("pkg/x\\xff.txt: file name is not valid UTF-8") for m in warned), warned
    assert any(m.startswith("pkg/bad\\xffdir: folder name is not valid UTF-8") for m in warned), warned
    store = Store(tmp_path / "u.db", readonly=True)
    try:
        assert {r["path"] for r in store.query("SELECT path FROM files WHERE path LIKE 'pkg/%'")} == {"pkg/good.txt"}
    finally:
        store.close()


def test_relevant_ignores_what_the_scan_ignores(tmp_path):
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    settings = make_settings(index={"include": ["*.txt", "notes/*.md"]})
    daemon = Daemon(settings, root / "index.db", root)
    assert daemon.folder.relevant(Change.added, root / "a.txt") == "a.txt"
    assert daemon.folder.relevant(Change.modified, str(root / "sub" / "b.TXT")) == "sub/b.TXT"
    assert daemon.folder.relevant(Change.added, root / "notes" / "c.md") == "notes/c.md"
    assert daemon.folder.relevant(Change.added, root / "d.md") is None               # not included
    assert daemon.folder.relevant(Change.added, root / ".streamrag" / "x.txt") is None
    assert daemon.folder.relevant(Change.added, root / "sub" / ".draft.txt") is None  # hidden
    assert daemon.folder.relevant(Change.added, tmp_path / "elsewhere.txt") is None   # outside the root
    assert daemon.folder.relevant(Change.added, root / "sub") == "sub"                # a folder moved in
    everything = Daemon(make_settings(index={"include": ["*"]}), root / "index.db", root)
    assert everything.folder.relevant(Change.modified, root / "index.db") is None     # the index itself
    assert everything.folder.relevant(Change.modified, root / "index.db-wal") is None


def test_relevant_ignores_what_index_exclude_names(tmp_path):
    root = tmp_path / "vault"
    daemon = Daemon(make_settings(index={"exclude": ["Templates", "*.excalidraw.md"]}), root / "index.db", root)
    assert daemon.folder.relevant(Change.modified, root / "Templates" / "Daily.md") is None
    assert daemon.folder.relevant(Change.added, root / "Templates") is None              # the folder itself
    assert daemon.folder.relevant(Change.added, root / "Notes" / "Drawing.excalidraw.md") is None
    assert daemon.folder.relevant(Change.added, root / "Notes" / "Templates.md") == "Notes/Templates.md"


def test_the_watcher_holds_only_the_writes_that_may_change_the_index(corpus, tmp_path):
    # The watcher's filter (its ``keep``), run on each raw batch before bursts gather them: the
    # writes the scan leaves out go (hidden, excluded, the index's own files, a name include does
    # not take); deletions, folders, a conflict copy and the settings files followed stay, and
    # so does what ``_classify`` keeps of them.
    settings = make_settings(index={"exclude": ["build/**"]})
    db = corpus / ".streamrag" / "index.db"
    daemon = Daemon(settings, db, corpus, report=Events())
    (corpus / "build").mkdir()
    (corpus / "sub").mkdir()
    toml = corpus / "streamrag.toml"
    daemon._settings_edits.follows = lambda path: Path(path) == toml
    left_out = {(Change.modified, str(corpus / ".app.log")), (Change.modified, str(corpus / "build" / "out.txt")),
                (Change.modified, f"{db}-wal"), (Change.added, str(corpus / "app.log")),
                (Change.modified, str(corpus / ".git" / "index")),
                # deleted where the scan never looks: no index to ask (an atomic save's temporary name)
                (Change.deleted, str(corpus / ".git" / "index.lock")), (Change.deleted, str(corpus / "build" / "a.txt")),
                (Change.deleted, f"{db}-journal")}
    kept = {(Change.modified, str(corpus / "new.txt")), (Change.deleted, str(corpus / "gone.log")),
            (Change.added, str(corpus / "sub")), (Change.modified, str(toml)),
            (Change.added, str(corpus / "notes (conflicted copy).txt"))}
    # (a file of a kind left out that was not said yet is kept, for its line: ``_left_out_to_say``)
    assert daemon.worth_holding({(Change.added, str(corpus / "app.log"))}) == {(Change.added, str(corpus / "app.log"))}
    daemon._kinds_said_left_out.add(".log")   # (as the initial sync says it of an app.log already there)
    assert daemon.worth_holding(left_out | kept) == kept


async def _first_burst(tmp_path, monkeypatch, raw: list[set], daemon: Daemon | None = None) -> tuple[set, int]:
    """The first burst ``watch_folder`` hands on (the daemon's ``keep`` filtering) of the raw
    batches ``raw`` (scripted: watchfiles' batches, 0.3 s of the watcher's clock apart), and how
    many raw batches it had taken by then. ``daemon``, given: the watch of its folder, with its
    ``renamed_from`` as `streamrag watch` gives it."""
    import types

    import watchfiles

    from streamrag import watch_events
    from streamrag.config import WatchSettings

    clock = types.SimpleNamespace(now=1000.0)
    fake_time = types.ModuleType("time")
    fake_time.__dict__.update(vars(time))
    fake_time.monotonic = lambda: clock.now
    monkeypatch.setattr(watch_events, "time", fake_time)
    sent = []

    async def awatch(*_args, **_kwargs):
        for changes in raw:
            sent.append(changes)
            yield changes
            clock.now += 0.3

    monkeypatch.setattr(watchfiles, "awatch", awatch)
    stop = anyio.Event()
    renamed_from = None if daemon is None else daemon._written_on
    daemon = daemon or Daemon(make_settings(), tmp_path / "w.db", tmp_path, report=Events())
    with anyio.fail_after(10):
        async for batch in watch_folder(daemon.root, WatchSettings(debounce_ms=500), stop, keep=daemon.worth_holding,
                                        renamed_from=renamed_from):
            return batch, len(sent)
    raise AssertionError("the watcher handed on no burst")


async def test_a_hidden_file_written_on_and_on_does_not_hold_back_the_burst_of_another(tmp_path, monkeypatch):
    # The watcher gathered raw batches into bursts before the daemon filtered them: a hidden or
    # excluded file written every 0.3 s (debounce_ms 500) kept the burst open for its cap of
    # 10 x debounce_ms, and a file saved beside it waited that long. Filtered first (``keep``),
    # its writes are no events, and the saved file's burst ends debounce_ms after its save.
    note, log = tmp_path / "note.txt", tmp_path / ".tool.log"
    raw = [{(Change.added, str(note)), (Change.modified, str(log))}] + [{(Change.modified, str(log))}] * 30
    first, sent = await _first_burst(tmp_path, monkeypatch, raw)
    assert first == {(Change.added, str(note))}
    assert sent <= 3, sent   # (0.6 s of the clock: not the burst's cap, 17 batches)


async def test_a_hidden_file_saved_on_and_on_by_renames_does_not_hold_back_the_burst_of_another(
        tmp_path, monkeypatch):
    # A file saved by writing a temporary file and renaming it over itself (an editor's, a
    # tool's state file) is a deletion at each save: the watcher kept every deletion, so a hidden
    # one saved every 0.3 s held the burst of a note saved beside it open for its cap (10 x
    # debounce_ms), as the writes of a hidden file did before the filter. A deletion where the
    # scan never looks (hidden, excluded, the index's own) goes as a write there does.
    note, state, tmp = tmp_path / "note.txt", tmp_path / ".tool" / "state.json", tmp_path / ".tool" / "state.json.tmp"
    save = {(Change.added, str(tmp)), (Change.modified, str(tmp)), (Change.deleted, str(tmp)), (Change.added, str(state))}
    raw = [{(Change.added, str(note)), *save}] + [save] * 30
    first, sent = await _first_burst(tmp_path, monkeypatch, raw)
    assert first == {(Change.added, str(note))}
    assert sent <= 3, sent   # (0.6 s of the clock: not the burst's cap, 17 batches)


async def test_a_file_saved_beside_one_written_on_and_on_is_handed_over_after_its_own_quiet(tmp_path, monkeypatch):
    # The burst was one for all paths: a note saved beside a log written every 0.3 s (debounce_ms
    # 500) waited for the log's cap of 10 x debounce_ms, 17 raw batches, before the daemon saw
    # it. Now a path settled beside paths written on and on is handed over alone, debounce_ms
    # after its save; the log stays held, its cap as it was.
    note, log = tmp_path / "note.txt", tmp_path / "log.txt"
    raw = [{(Change.added, str(note)), (Change.modified, str(log))}] + [{(Change.modified, str(log))}] * 30
    first, sent = await _first_burst(tmp_path, monkeypatch, raw)
    assert first == {(Change.added, str(note))}
    assert sent <= 3, sent   # (0.6 s of the clock)


async def test_files_copied_in_beside_one_written_on_and_on_are_handed_over_as_one_burst(tmp_path, monkeypatch):
    # A copy under way (a new file each raw batch) is not cut into pieces as its first files
    # settle: the burst stays whole while a path new within debounce_ms is unsettled, and is
    # handed over once the copy ends, without the log written beside it.
    log = tmp_path / "log.txt"
    copied = [{(Change.added, str(tmp_path / f"f{i}.txt"))} for i in range(8)]
    raw = [{*batch, (Change.modified, str(log))} for batch in copied] + [{(Change.modified, str(log))}] * 30
    first, sent = await _first_burst(tmp_path, monkeypatch, raw)
    assert first == set().union(*copied)
    assert sent <= len(copied) + 2, sent


async def test_a_rename_then_written_on_is_handed_over_with_its_old_name(tmp_path, monkeypatch):
    # `mv a.txt b.txt`, then b.txt written on and on: the old name, settled, is not handed over
    # alone (the daemon synced it as deleted, its text gone until b.txt's own sync).
    old, new = tmp_path / "a.txt", tmp_path / "b.txt"
    raw = [{(Change.deleted, str(old)), (Change.added, str(new))}] + [{(Change.modified, str(new))}] * 30
    first, sent = await _first_burst(tmp_path, monkeypatch, raw)
    assert (Change.deleted, str(old)) in first and (Change.added, str(new)) in first, first


async def test_a_deletion_beside_a_new_file_written_on_is_handed_over_without_it(corpus, tmp_path, monkeypatch):
    # The burst tied each path a raw batch deleted to each it added (maybe a rename's names): an
    # unrelated `rm old.txt` as a new log.txt began, written every 0.3 s, waited with the log for
    # its cap (10 x debounce_ms; its sync 7.6-7.9 s after the rm, real watcher, defaults). Told
    # the renames (the daemon's: an added file beginning with a deleted one's indexed text), the
    # deletion is handed over alone once settled; `mv a.txt b.txt`, b.txt written on, in the same
    # raw batch, keeps a.txt with b.txt (its text would go from the index until b.txt's sync).
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    old, log, a, b = (corpus / name for name in ("old.txt", "log.txt", "a.txt", "b.txt"))
    old.write_text("Bo Lund paid the toll at Kessel.\n")
    a.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")
    await sync([corpus], settings, db, root=corpus)
    assert {"old.txt", "a.txt"} <= _indexed_paths(db)
    old.unlink()
    log.write_text("Entry 0: Captain Oskar Lind logged the tide at Port Vell.\n")
    a.rename(b)
    with b.open("a") as f:
        f.write("Entry 1: Mira Osk closed the ledger.\n")
    written = {(Change.modified, str(log)), (Change.modified, str(b))}
    raw = [{(Change.deleted, str(old)), (Change.added, str(log)), (Change.deleted, str(a)), (Change.added, str(b))}]
    daemon = Daemon(settings, db, corpus, report=Events())
    first, sent = await _first_burst(tmp_path, monkeypatch, raw + [written] * 30, daemon=daemon)
    assert first == {(Change.deleted, str(old))}, first
    assert sent <= 3, sent   # (0.6 s of the clock: not the burst's cap, 17 batches)


async def test_what_the_watcher_cannot_ask_of_a_rename_it_ties_as_before(tmp_path):
    # ``renamed_from`` reads files under the folder: a folder added (`mv docs docs2`: its files
    # are not read) and a path outside the folder (where a link leads) are tied with each path
    # of the other kind, as every raw batch's were; the files are asked of by their relative paths.
    from streamrag.config import WatchSettings
    from streamrag.watch_events import FolderWatch

    (tmp_path / "docs2").mkdir()
    (tmp_path / "log.txt").write_text("Entry 0\n")
    asked = []

    def renamed_from(added: list[str], gone: list[str]) -> dict[str, str]:
        asked.append((added, gone))
        return {}

    watch = FolderWatch(tmp_path, WatchSettings(debounce_ms=500), anyio.Event(), renamed_from=renamed_from)
    at = {name: str(tmp_path / name) for name in ("docs", "docs2", "old.txt", "log.txt")}
    outside = str(tmp_path.parent / "elsewhere.txt")
    changes = {(Change.deleted, at["docs"]), (Change.added, at["docs2"]), (Change.deleted, at["old.txt"]),
               (Change.added, at["log.txt"]), (Change.deleted, outside)}
    assert set(watch.renames(changes)) == {(at["docs"], at["docs2"]), (at["old.txt"], at["docs2"]),
                                           (outside, at["docs2"]), (outside, at["log.txt"])}
    assert asked == [(["log.txt"], ["docs", "old.txt"])]


async def test_files_added_beside_a_deletion_are_read_for_a_rename_only_when_a_sync_leaves_one(corpus, tmp_path):
    # The files a batch added beside a deletion were each read for a rename written on
    # (``_written_on``) before its queued line: 10,000 files copied in beside one `rm`, 1.3 s,
    # though a tie counts only for a file a sync leaves as indexed (written on), and none was.
    # Now they are read once a sync would leave one of them (the rename tests above), not before.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3, "debounce_ms": 0})
    db = tmp_path / "r.db"
    old = corpus / "old.txt"
    old.write_text("Mira Osk opened the harbor ledger at Port Vell.\n")

    async with running(settings, db, corpus) as (daemon, events, send):
        asked: list[list[str]] = []
        written_on = daemon._written_on

        def asking(added: list[str], gone: list[str]) -> dict[str, str]:
            asked.append(sorted(added))
            return written_on(added, gone)

        daemon._written_on = asking
        async with send:
            old.unlink()
            batch = {(Change.deleted, str(old))}
            for n in range(30):   # (each would be read: it begins with old.txt's text)
                (corpus / f"copy{n}.txt").write_text(f"Mira Osk opened the harbor ledger at Port Vell.\nCopy {n}.\n")
                batch.add((Change.added, str(corpus / f"copy{n}.txt")))
            mark = len(events)
            await send.send(batch)
            await until(lambda: "queued" in events.states(mark))
            assert asked == [], asked
            await until(lambda: "idle" in events.states(mark), timeout=30)
        assert asked == [], asked
        assert "old.txt" not in _indexed_paths(db) and "copy0.txt" in _indexed_paths(db)


async def test_an_added_file_is_tied_to_a_deleted_one_only_if_it_begins_with_all_of_its_text(corpus, tmp_path):
    # ``_written_on`` tied an added file beginning with a deleted one's first chunk alone: a new
    # file opening with the same first chunk as a deleted long one (a template, a copied
    # preamble) and going on otherwise was tied (and waited with it), and so was a new plan.md
    # beginning with the one line of a deleted todo.md. Now the whole indexed text counts (as far
    # as an opening read goes), and a text too short to tell a rename is no tie.
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    paragraphs = [f"Entry {n}: Mira Osk logged the {n}th barge of salt at Port Vell, and Bo Lund paid its toll "
                  f"at Kessel before the tide turned on day {n}." for n in range(60)]
    long_text = "\n\n".join(paragraphs) + "\n"
    (corpus / "journal.txt").write_text(long_text)
    (corpus / "todo.md").write_text("# TODO\n")
    note = "Bo Lund closed the harbor ledger at Kessel on the last night of the fair."
    (corpus / "short.txt").write_text(note + "\n")
    await sync([corpus], settings, db, root=corpus)
    with contextlib.closing(Store(db, readonly=True)) as store:
        (first, chunks), = store.conn.execute(
            "SELECT c.text, (SELECT count(*) FROM document_chunks WHERE doc_id = f.doc_id) FROM files f "
            "JOIN document_chunks dc ON dc.doc_id = f.doc_id AND dc.idx = 0 JOIN chunks c ON c.id = dc.chunk_id "
            "WHERE f.path = 'journal.txt'")
    assert chunks > 20 and len(long_text.encode()) > 32 * SMALL["chunk_size"]   # (longer than the opening read)
    for name in ("journal.txt", "todo.md", "short.txt"):
        (corpus / name).unlink()
    daemon = Daemon(settings, db, corpus, report=Events())
    gone = ["journal.txt", "todo.md", "short.txt"]

    def tied(name: str, text: str) -> dict[str, str]:
        (corpus / name).write_text(text)
        try:
            return daemon._written_on([name], gone)
        finally:
            (corpus / name).unlink()

    # A rename written on: tied, the long text matched as far as its opening goes.
    assert tied("journal2.txt", long_text + "Entry 60: the ledger closed.\n" * 40) == {"journal2.txt": "journal.txt"}
    assert tied("short2.txt", note + "\nEntry 1: the ledger closed.\n") == {"short2.txt": "short.txt"}
    # The first chunk alone, then another text: no tie.
    other = long_text[:long_text.index(first) + len(first)] + "\n\nThe council met at noon about the railway.\n" * 80
    assert tied("copy.txt", other) == {}
    # A one-line file's text beginning a new file: too short to tell a rename.
    assert tied("plan.md", "# TODO\n\n- buy salt at Kessel\n- ask Bo Lund about the toll\n") == {}


async def test_an_added_file_is_read_for_a_rename_only_if_it_may_be_one_and_only_its_opening(
        corpus, tmp_path, monkeypatch):
    # ``_written_on`` read and parsed every added file at least as large as a deleted one, whole:
    # a 71 MB CSV beside an unrelated `rm` took 8 s of CPU and 700 MB, 10,000 new files beside
    # one `rm` a second, before the queued line, before each sync while a copy was held, and in
    # the watcher. Now a file whose opening holds no word an old text begins with is not read as
    # text, and one that does is read as far as its opening: a CSV renamed and written on is
    # still tied (its first document: its first row's text).
    import streamrag.daemon as daemon_module
    from streamrag.loader import read_documents

    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    rows = "".join(f'{n},"Row {n}: Mira Osk weighed the salt barge at Port Vell."\n' for n in range(3))
    (corpus / "data.csv").write_text("id,text\n" + rows)
    (corpus / "old.txt").write_text("Bo Lund paid the toll at Kessel before the tide turned.\n")
    await sync([corpus], settings, db, root=corpus)
    (corpus / "old.txt").unlink()
    (corpus / "data.csv").rename(corpus / "data2.csv")
    with (corpus / "data2.csv").open("a") as f:   # (written on)
        f.write("".join(f'{n},"Row {n}: the council met at noon about the railway."\n' for n in range(3, 30_000)))
    for n in range(20):
        (corpus / f"new{n}.txt").write_text("The council met at noon about the railway and the fair.\n" * 5)
    (corpus / "big.log").write_text("Entry: the railway council met at noon.\n" * 50_000)
    read: list[tuple[str, int]] = []

    def reading(path, **options):
        docs, warnings = read_documents(path, **options)
        read.append((Path(path).name, sum(len(doc.text) for doc in docs)))
        return docs, warnings

    monkeypatch.setattr(daemon_module, "read_documents", reading)
    daemon = Daemon(settings, db, corpus, report=Events())
    added = sorted(p.name for p in corpus.iterdir() if p.name.startswith(("new", "big", "data2")))
    assert daemon._written_on(added, ["old.txt", "data.csv"]) == {"data2.csv": "data.csv"}
    assert [name for name, _chars in read] == ["data2.csv"], read
    assert read[0][1] <= 32 * SMALL["chunk_size"] < (corpus / "data2.csv").stat().st_size, read


async def test_a_jsonl_renamed_and_written_on_is_tied_when_its_opening_cuts_its_second_row(corpus, tmp_path):
    # ``_written_on`` compares an opening's lone document but its last 16 characters (it may be
    # cut short); a .jsonl whose second row the opening cut has that line skipped, not cut, so
    # its whole first row was its lone document: `mv a.jsonl b.jsonl`, b.jsonl written on, was
    # not tied, and a real `watch` published a version without a.jsonl's text for 10 s.
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    first = json.dumps({"text": "Mira Osk weighed the salt barge at Port Vell and logged it by lamplight."}) + "\n"
    second = json.dumps({"text": "Second row: " + "the council met at noon about the railway. " * 100}) + "\n"
    (corpus / "a.jsonl").write_text(first + second)
    await sync([corpus], settings, db, root=corpus)
    (corpus / "a.jsonl").rename(corpus / "b.jsonl")
    with (corpus / "b.jsonl").open("a") as f:   # (written on)
        f.write(json.dumps({"text": "Row three: Bo Lund paid the toll at Kessel."}) + "\n")
    assert len(first) < 32 * SMALL["chunk_size"] < len(first + second)   # (the opening cuts the second row)
    daemon = Daemon(settings, db, corpus, report=Events())
    assert daemon._written_on(["b.jsonl"], ["a.jsonl"]) == {"b.jsonl": "a.jsonl"}
    # (a first row beginning the old one, shorter: no tie, cut or not)
    (corpus / "b.jsonl").write_text(json.dumps({"text": json.loads(first)["text"][:40]}) + "\n" + second)
    assert daemon._written_on(["b.jsonl"], ["a.jsonl"]) == {}


async def test_a_jsonl_is_not_tied_by_its_rows_before_a_line_its_opening_cuts_that_differs(corpus, tmp_path):
    # The loader skips the .jsonl line an opening cuts (its JSON is not whole), so ``_written_on``
    # never compared it: a new .jsonl holding a deleted one's first row, then any line longer than
    # the opening (an unrelated `rm` beside it), was tied, and the rm waited with it. And the last
    # line it held whole was compared as if cut, its last 16 characters not. Now the cut line's
    # text is read as far as it goes and compared, and the lines held whole are compared whole.
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    limit = 32 * SMALL["chunk_size"]

    def line(text: str, **more) -> str:
        return json.dumps({**more, "text": text}) + "\n"

    first = line("Mira Osk weighed the salt barge at Port Vell and logged it by lamplight.")
    second = line("Bo Lund paid the toll at Kessel on the second day of the thaw, in silver.")
    third = line("The tide turned on day three and the barges went out past the breakwater.")
    (corpus / "two.jsonl").write_text(first + second)
    (corpus / "three.jsonl").write_text(first + second + third)
    await sync([corpus], settings, db, root=corpus)
    (corpus / "two.jsonl").unlink()
    (corpus / "three.jsonl").unlink()
    daemon = Daemon(settings, db, corpus, report=Events())

    def tied(gone: str, text: str) -> dict[str, str]:
        (corpus / "new.jsonl").write_text(text)
        try:
            return daemon._written_on(["new.jsonl"], [gone])
        finally:
            (corpus / "new.jsonl").unlink()

    unrelated = "The harbor guild met at noon about the railway. " * (limit // 40)
    assert len(first + line(unrelated)) > limit
    # Its first row, then an unrelated line longer than the opening (its text first or not): no tie.
    assert tied("two.jsonl", first + line(unrelated)) == {}
    assert tied("two.jsonl", first + line(unrelated, id=7, tags=["x"])) == {}
    # Renamed, its second row grown past the opening: tied (that row as far as it goes).
    grown = json.loads(second)["text"] + " And more." * (limit // 10)
    assert tied("two.jsonl", first + line(grown)) == {"new.jsonl": "two.jsonl"}
    # Its second line held whole, differing in its last characters, then a line the opening cuts:
    # no tie (compared whole); as it was: tied.
    other_end = second.replace("in silver.", "in copper.")
    assert tied("three.jsonl", first + other_end + line(unrelated)) == {}
    assert tied("three.jsonl", first + second + line(json.loads(third)["text"] + " x" * limit)) == {
        "new.jsonl": "three.jsonl"}



@pytest.mark.parametrize("line, text", [
    ('{"text": "old", "text": "new"}', "new"),    # (a key written twice: json.loads keeps the last)
    ('{"Text": "a", "text": "b"}', "b"),          # (the key itself before one equal but for case)
    ('{"TEXT": [1], "text": "b"}', "b"),
    ('{"text": "a", "Text": "b"}', "a"),
    ('{" Text ": "a", "TEXT": "b"}', "a"),        # (else the first equal but for case and blanks)
    ('{"text": 125, "id": 1}', "125"),
])
def test_jsonl_text_takes_the_value_the_loader_takes(line, text):
    # ``_cut_line``'s reader of a .jsonl line an opening cuts took the first key equal to the
    # field but for case, or the first of a key written twice, where the loader (json.loads, then
    # the key itself first) takes another: a false tie, or a true one missed. Now the value the
    # loader takes of the keys read (a key the cut leaves out cannot be known).
    from streamrag.daemon import _jsonl_text

    assert json.loads(line) and _jsonl_text(line, "text") == (text, True)


def test_jsonl_text_at_each_cut_is_a_prefix_of_the_loaders():
    from streamrag.daemon import _jsonl_text

    line = ('{"meta": {"text": "x"}, "title": "\\"text\\": \\"y\\"", '
            '"text": "z\\u00e9\\ud83d\\ude00\\\\\\"\\/ end", "id": 2}')
    text = json.loads(line)["text"]
    for cut in range(len(line) + 1):
        read = _jsonl_text(line[:cut], "text")
        assert read is not None and text.startswith(read[0]) and (read[1] is False or read[0] == text), (cut, read)
    assert _jsonl_text(line, "text") == (text, True)


def test_jsonl_text_reads_only_json_of_a_line():
    from streamrag.daemon import _jsonl_text

    assert _jsonl_text('{\u3000"text": "a"}', "text") is None   # (no JSON: the loader skips the line)
    assert _jsonl_text('{"text": 12', "text") is None   # (a number the cut may end)
    assert _jsonl_text('{"text": "ab', "text") == ("ab", False)
    assert _jsonl_text('{"id": 3, "te', "text") == ("", False)
    assert _jsonl_text('{"Text": "a", "text": ', "text") == ("", False)   # (not "a": the key itself comes)

async def test_a_jsonl_whose_cut_line_holds_half_a_surrogate_pair_whole_is_read_as_the_loader_reads_it(corpus, tmp_path):
    # ``_cut_line`` hashed a cut line's text read whole (its line cut after it) as JSON gives it:
    # a "\ud800" escape (half a character) in it raised UnicodeEncodeError out of ``_written_on``.
    # The loader reads one as U+FFFD; so, now, does ``_cut_line``: a rename is tied by that row too.
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    limit = 32 * SMALL["chunk_size"]
    first = json.dumps({"text": "Mira Osk weighed the salt barge at Port Vell and logged it by lamplight."}) + "\n"
    half = "Bo Lund paid the toll at Kessel \ud800 on the second day of the thaw, in silver."
    (corpus / "two.jsonl").write_text(first + json.dumps({"text": half}) + "\n")
    await sync([corpus], settings, db, root=corpus)
    (corpus / "two.jsonl").unlink()
    daemon = Daemon(settings, db, corpus, report=Events())

    def tied(text: str) -> dict[str, str]:
        return _tied_as_written(daemon, corpus / "new.jsonl", ["two.jsonl"], text)

    after = ", \"notes\": \"" + "x" * limit + "\"}\n"   # (the line cut after its text, held whole)
    assert tied(first + json.dumps({"text": half})[:-1] + after) == {"new.jsonl": "two.jsonl"}
    assert tied(first + json.dumps({"text": half.replace("silver", "copper")})[:-1] + after) == {}


def _salt_rows() -> list[str]:
    """60 rows' texts of a .jsonl, a few KB: an opening of 32 small chunks cuts one."""
    return [f"Row {n}: Mira Osk weighed {n} salt barges at Port Vell and logged them by lamplight."
            for n in range(1, 61)]


async def _tie_of_renamed(corpus: Path, settings, db: Path, jsonl, texts: list[str]):
    """rows.jsonl of ``texts`` (``jsonl`` makes its bytes) indexed into ``db``, then gone: a
    daemon's tie (``_tied_as_written``) of a new.jsonl of the rows given, to rows.jsonl."""
    (corpus / "rows.jsonl").write_bytes(jsonl(texts))
    await sync([corpus], settings, db, root=corpus)
    (corpus / "rows.jsonl").unlink()
    daemon = Daemon(settings, db, corpus, report=Events())
    return lambda rows: _tied_as_written(daemon, corpus / "new.jsonl", ["rows.jsonl"], jsonl(rows))


@pytest.mark.parametrize("ends, lead",
                         [("\r", b""), ("\r\n", b""), ("\n", b"\0" * 1024), ("\r", b"\0" * 1024)],
                         ids=["CR", "CRLF", "NULs-LF", "NULs-CR"])
async def test_a_jsonl_opening_is_read_in_the_lines_the_loader_reads(corpus, tmp_path, ends, lead):
    # ``_cut_line`` counted a .jsonl opening's lines by "\n" alone, from the file's first byte: a
    # file of "\r" line ends was one line (the row its opening cuts taken for the first), and one
    # opening with a run of NULs (a log rotated with copytruncate) was read from them, where the
    # loader reads its opening from its text on (the row cut taken for one it read whole): such a
    # file renamed and written on was never tied to its old name. Its lines are now the loader's.
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    limit = 32 * SMALL["chunk_size"]
    texts = _salt_rows()

    def jsonl(rows: list[str]) -> bytes:
        return lead + "".join(json.dumps({"text": text}) + ends for text in rows).encode()

    assert len(jsonl(texts)) > len(lead) + 2 * limit   # (an opening holds some of its rows)
    tied = await _tie_of_renamed(corpus, settings, db, jsonl, texts)
    more = [f"Row {n}: Bo Lund paid the toll at Kessel." for n in range(61, 66)]
    assert tied(texts + more) == {"new.jsonl": "rows.jsonl"}   # (renamed, written on)
    assert tied(texts[:1] + ["Row 2: another row"] + texts[2:] + more) == {}


@pytest.mark.parametrize("ends, lead", [("\n", b"\0" * 8192), ("\r", b"\0" * 8192), ("\r", b"")],
                         ids=["NULs-LF", "NULs-CR", "CR"])
async def test_the_row_a_jsonl_opening_cuts_is_read_where_the_loader_reads_it(corpus, tmp_path, ends, lead):
    # ``_written_on`` read an added file's opening, then asked the loader where its text begins,
    # past the NULs it opens with; the loader's look (an lseek of the descriptor) put the
    # buffered file's reads a buffer (4 KB) off, so a run that long or longer had the opening's
    # lines counted from a buffer past the text: a rename written on was not tied, and a file
    # whose row the opening cuts differs from the old one's was (the last row read whole taken
    # for the one before the cut, nothing of the cut row compared). (8 KB: zeros written, as where
    # no file is sparse; "CR": the row an opening of "\r" line ends cuts, compared as it reads.)
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    limit = 32 * SMALL["chunk_size"]
    texts = _salt_rows()
    texts[0] += " And so on." * 5

    def jsonl(rows: list[str]) -> bytes:
        return lead + "".join(json.dumps({"text": text}) + ends for text in rows).encode()

    opening = jsonl(texts)[len(lead):len(lead) + limit]
    cut = opening.rpartition(ends.encode())[2]
    assert cut == b'{"text": "Row 27: Mira Osk weighed 27 salt barges at '   # (row 27, cut in its text)
    tied = await _tie_of_renamed(corpus, settings, db, jsonl, texts)
    assert tied(texts + [f"Row {n}: Bo Lund paid the toll at Kessel." for n in range(61, 66)]) == \
        {"new.jsonl": "rows.jsonl"}
    other = [f"Row {n}: Una Vik hauled crates of tin to Narsk and sold them at dawn, by the {n}th quay."
             for n in range(27, 200)]
    assert tied(texts[:26] + other) == {}   # (row 27 differs where the opening reads it)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32-be"])
async def test_a_wide_jsonl_renamed_and_written_on_is_tied_by_whole_rows_alone(corpus, tmp_path, encoding):
    # ``_cut_line`` counts an opening's line ends in bytes, as the loader counts UTF-8 text's; in
    # UTF-16 or UTF-32 a "\r\n" is two of them: an opening cut just after a line end's "\n" or
    # "\r" byte was read as cut before the next row's text, a "\r\n" file's row numbered about
    # twice its own (no old row's: erring safe by chance). Wide text now gives no cut row (None):
    # a renamed wide .jsonl written on is tied when the old file's rows are whole in the new one's
    # opening, never by the row that opening cuts.
    from streamrag.daemon import _cut_line

    texts = _salt_rows()

    def jsonl(rows: list[str], ends: str = "\r\n") -> bytes:
        return "".join(json.dumps({"text": text}) + ends for text in rows).encode(encoding)

    for ends in ("\n", "\r\n", "\r"):
        data = jsonl(texts[:29], ends)
        assert [k for k in range(600, 1200) if _cut_line(data[:k], [], "text") is not None] == [], ends
    settings = make_settings(index=SMALL)
    limit = 32 * SMALL["chunk_size"]
    more = [f"Row {n}: Bo Lund paid the toll at Kessel." for n in range(61, 99)]
    for old, tie in ((texts[:5], True), (texts, False)):   # (an opening holds all its rows whole; cuts one)
        assert (len(jsonl(old)) < limit) == tie
        db = tmp_path / f"{len(old)}.db"
        (corpus / "rows.jsonl").write_bytes(jsonl(old))
        await sync([corpus], settings, db, root=corpus)
        (corpus / "rows.jsonl").unlink()
        (corpus / "new.jsonl").write_bytes(jsonl(old + more))
        try:
            tied = Daemon(settings, db, corpus, report=Events())._written_on(["new.jsonl"], ["rows.jsonl"])
        finally:
            (corpus / "new.jsonl").unlink()
        assert tied == ({"new.jsonl": "rows.jsonl"} if tie else {}), len(old)


@pytest.mark.parametrize("stray", ["row 2", "cut row"])
async def test_a_utf8_jsonl_with_a_stray_nul_is_tied_by_the_row_its_opening_cuts(corpus, tmp_path, stray):
    # c45cac8d gave no cut row (None) of any opening holding a NUL, UTF-16 or UTF-32 meant, but a
    # UTF-8 .jsonl with one stray NUL (a bad save; the loader drops it under a warning) too: such a
    # log renamed and written on, tied before, was not (one whose NUL is in the row the opening
    # cuts was not tied before either: a raw NUL is no JSON). Its NULs are dropped as the loader
    # drops them, and its cut row read; a wide one still gives None (the test above).
    from streamrag.daemon import _cut_line

    texts = _salt_rows()
    texts[0] += " And so on." * 5
    at = 1 if stray == "row 2" else 26   # (row 27: the one a 2,560-byte opening cuts, in its text)

    def jsonl(rows: list[str]) -> bytes:
        lines = [json.dumps({"text": text}) for text in rows]
        lines[at] = lines[at].replace("Mira", "\0Mira")
        return "".join(line + "\n" for line in lines).encode()

    settings = make_settings(index=SMALL)
    limit = 32 * SMALL["chunk_size"]
    opening = jsonl(texts)[:limit]
    assert opening.count(b"\0") == 1 and b'"Row 27: ' in opening.rpartition(b"\n")[2]
    assert _cut_line(opening, [], "text") == _cut_line(opening.replace(b"\0", b""), [], "text") != None
    db = tmp_path / "r.db"
    tied = await _tie_of_renamed(corpus, settings, db, jsonl, texts)
    assert tied(texts + [f"Row {n}: Bo Lund paid the toll at Kessel." for n in range(61, 99)]) == \
        {"new.jsonl": "rows.jsonl"}
    other = [f"Row {n}: Una Vik hauled crates of tin to Narsk and sold them at dawn." for n in range(27, 200)]
    assert tied(texts[:26] + other) == {}   # (row 27 differs where the opening reads it)


def _rows(suffix: str, texts: list[str]) -> str:
    """A .csv (id, text) or .jsonl file of one row per text."""
    if suffix == ".csv":
        return "id,text\n" + "".join(f'{n},"{text}"\n' for n, text in enumerate(texts))
    return "".join(json.dumps({"text": text}) + "\n" for text in texts)


def _tied_as_written(daemon: Daemon, new: Path, gone: list[str], text: str | bytes) -> dict[str, str]:
    """What ``_written_on`` ties of ``gone`` to ``new`` written with ``text`` (then removed)."""
    new.write_bytes(text) if isinstance(text, bytes) else new.write_text(text)
    try:
        return daemon._written_on([new.name], gone)
    finally:
        new.unlink()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
async def test_a_rows_file_whose_first_row_is_short_renamed_and_written_on_is_tied(corpus, tmp_path, suffix):
    # ``_written_on`` compared an added file's first document with a deleted one's first row alone,
    # and a text under 32 characters ties nothing: `mv a.csv b.csv`, b.csv written on, a.csv's
    # first row a name or a date, was never tied, and every row of a.csv went out of the index
    # until b.csv settled. Now the rows after a short first one count: each as the deleted file
    # held it, at its number. A short file of one document is still not tied (nothing tells its
    # rename from a new file beginning as it did; a few words are out of the index a while).
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"

    rows = functools.partial(_rows, suffix)
    texts = [f"Barge {n}: salt" for n in range(4)]   # (each under 32 characters)
    (corpus / f"a{suffix}").write_text(rows(texts))
    (corpus / "short.txt").write_text("Mira Osk at Port Vell.\n")
    await sync([corpus], settings, db, root=corpus)
    assert sum(p.startswith(f"a{suffix}#") for p in _indexed_paths(db)) == len(texts)   # (a row each)
    (corpus / f"a{suffix}").unlink()
    (corpus / "short.txt").unlink()
    daemon = Daemon(settings, db, corpus, report=Events())
    gone = [f"a{suffix}", "short.txt"]

    def tied(name: str, text: str) -> dict[str, str]:
        return _tied_as_written(daemon, corpus / name, gone, text)

    # Renamed and written on: its rows, then new ones.
    assert tied(f"b{suffix}", rows(texts + ["Barge 4: tar", "Barge 5: rope"])) == {f"b{suffix}": f"a{suffix}"}
    # Beginning with its first row, then others: no tie; nor with its rows alone, fewer of them
    # (three: 32 characters and more, so the rows missing decide it, not the text's length); nor
    # with its rows, the same texts in the same order, one at another number (a row without text
    # inserted, skipped).
    assert tied(f"c{suffix}", rows(texts[:1] + ["Barge 9: wool"] + texts[1:])) == {}
    assert sum(map(len, texts[:3])) >= 32
    assert tied(f"d{suffix}", rows(texts[:3])) == {}
    assert tied(f"e{suffix}", rows(texts[:1] + [""] + texts[1:] + ["Barge 4: tar"])) == {}
    # A short file of one document renamed and written on: not tied (the behaviour chosen).
    assert tied("short2.txt", "Mira Osk at Port Vell.\nEntry 1: Bo Lund paid the toll.\n") == {}


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
async def test_a_rows_file_is_tied_only_to_a_new_one_beginning_with_all_its_rows(corpus, tmp_path, suffix):
    # ``_written_on`` tied a deleted file of rows to an added one whose first document began with
    # its first row, when that row held 32 characters or more, whatever followed: an unrelated
    # `rm one.csv` beside a new file sharing its first row (a header line, a template's first
    # entry) waited with it. Now a file of more than one row is tied by all its rows, each at its
    # number (as one whose first row is short), or, an opening, by all those it holds whole and
    # its cut last one as far as it goes.
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"

    rows = functools.partial(_rows, suffix)
    first = "Mira Osk weighed the salt barge at Port Vell."   # (32 characters and more)
    texts = [first, "Bo Lund paid the toll at Kessel.", "The tide turned on day three."]
    long_texts = [f"Entry {n}: " + f"the council met at noon about the railway and barge {n}. " * 6
                  for n in range(12)]
    (corpus / f"one{suffix}").write_text(rows(texts))
    (corpus / f"big{suffix}").write_text(rows([first] + long_texts))
    await sync([corpus], settings, db, root=corpus)
    limit = 32 * SMALL["chunk_size"]
    assert len(rows(texts)) < limit < len(rows([first] + long_texts))   # (big: longer than an opening)
    (corpus / f"one{suffix}").unlink()
    (corpus / f"big{suffix}").unlink()
    daemon = Daemon(settings, db, corpus, report=Events())

    def tied(gone: str, text: str) -> dict[str, str]:
        return _tied_as_written(daemon, corpus / f"new{suffix}", [f"{gone}{suffix}"], text)

    others = ["The council met at noon about the railway.", "Tar and rope came in from Kessel."]
    # Its first row, then others: no tie (tied before).
    assert tied("one", rows(texts[:1] + others)) == {}
    # Renamed and written on: tied.
    assert tied("one", rows(texts + others)) == {f"new{suffix}": f"one{suffix}"}
    # Longer than an opening: its first row, then other long ones: no tie (tied before); renamed
    # and written on, the opening cutting one of its rows: tied.
    other_long = [text.replace("council", "harbor guild") for text in long_texts]   # (longer: read)
    assert tied("big", rows([first] + other_long)) == {}
    assert tied("big", rows([first] + long_texts + others)) == {f"new{suffix}": f"big{suffix}"}
    # Its rows as far as the opening holds them whole, then the row it cuts another: no tie (its
    # cut row compared as far as it goes: a .jsonl's cut line, which the loader skips, too).
    held = max(n for n in range(len(long_texts)) if len(rows([first] + long_texts[:n])) + 60 < limit)
    changed = long_texts[held].replace("the council", "the harbor guild") + " And more." * 60   # (cut)
    assert tied("big", rows([first] + long_texts[:held] + [changed] + long_texts[held + 1:])) == {}


@pytest.mark.parametrize("suffix", [".txt", ".csv"])
async def test_a_text_longer_than_an_opening_is_tied_only_if_it_holds_the_opening_up_to_its_cut(corpus, tmp_path,
                                                                                                 suffix):
    # An old text longer than an added file's opening is matched as far as the opening goes,
    # but its last ``_TIE_CUT`` characters (``_begins_with``, and ``_cut_row_begins`` for a row
    # an opening cuts). The chunk the opening cut was not compared at all: a file differing
    # anywhere in it (up to a chunk, 5,000 characters by default) was tied as a rename.
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    sentences = [f"Entry {n}: the council met at noon about the railway and the salt barge {n}." for n in range(120)]
    if suffix == ".txt":
        text = " ".join(sentences) + "\n"
    else:   # (its rows longer than a chunk, the opening cutting one)
        text = "id,text\n" + "".join(f'{n},"{" ".join(sentences[n * 12:n * 12 + 12])}"\n' for n in range(10))
    (corpus / f"old{suffix}").write_text(text)
    await sync([corpus], settings, db, root=corpus)
    limit = 32 * SMALL["chunk_size"]
    assert len(text) > limit + 1000
    (corpus / f"old{suffix}").unlink()
    daemon = Daemon(settings, db, corpus, report=Events())

    def tied(new: str) -> dict[str, str]:
        (corpus / f"new{suffix}").write_text(new)
        try:
            return daemon._written_on([f"new{suffix}"], [f"old{suffix}"])
        finally:
            (corpus / f"new{suffix}").unlink()

    assert tied(text + "Written on after the rename.\n") == {f"new{suffix}": f"old{suffix}"}
    # A letter changed before the last 16 characters the opening holds (every 20 characters
    # over more than a chunk: one falls in the chunk it cuts, wherever it cuts): no tie.
    for at in range(limit - 300, limit - 20, 20):
        at = next(n for n in range(at, limit) if text[n].isalpha())
        assert tied(text[:at] + ("X" if text[at] != "X" else "Y") + text[at + 1:]) == {}, at


@pytest.mark.parametrize("name, first", [("shy.txt", "Mi\u00adra"), ("zwsp.txt", "Mi\u200bra"),
                                         ("bold.md", "**Mira**"), ("split.md", "Mi**ra**")])
async def test_a_rename_written_on_is_tied_whatever_hides_in_its_first_word(corpus, tmp_path, name, first):
    # ``_written_on`` reads an added file only if its bytes hold the first word of a deleted one's
    # indexed text (``_probe``): a soft hyphen or a zero-width space inside that word (pasted
    # from the web), which the loader drops, hid the word from the bytes, and `mv`, then written
    # on, was not tied (its text out of the index until the new name settled). Markdown's marks
    # stay in the text as written, so a word they wrap or split is found as it is.
    settings = make_settings(index=SMALL)
    db = tmp_path / "r.db"
    text = f"{first} Osk opened the harbor ledger at Port Vell and counted the barges.\n"
    (corpus / name).write_text(text)
    await sync([corpus], settings, db, root=corpus)
    new = "2".join(os.path.splitext(name))
    (corpus / name).rename(corpus / new)
    with (corpus / new).open("a") as f:   # (written on)
        f.write("\nEntry 1: Bo Lund paid the toll at Kessel.\n")
    daemon = Daemon(settings, db, corpus, report=Events())
    assert daemon._written_on([new], [name]) == {new: name}


def test_a_rename_check_that_fails_ties_every_pair_and_the_watcher_goes_on(tmp_path):
    # ``renamed_from`` reads the index: one it cannot read (locked, damaged) raised out of the
    # watcher's loop and stopped the watch; now the raw batch is tied as before the check was.
    from streamrag.config import WatchSettings
    from streamrag.watch_events import FolderWatch

    (tmp_path / "log.txt").write_text("Entry 0\n")

    def renamed_from(added: list[str], gone: list[str]) -> dict[str, str]:
        raise sqlite3.OperationalError("database disk image is malformed")

    watch = FolderWatch(tmp_path, WatchSettings(debounce_ms=500), anyio.Event(), renamed_from=renamed_from)
    old, log = str(tmp_path / "old.txt"), str(tmp_path / "log.txt")
    assert watch.renames({(Change.deleted, old), (Change.added, log)}) == [(old, log)]


def test_the_watcher_asks_of_every_file_added_beside_a_deletion_and_ties_none_not_named(tmp_path):
    # A raw batch of files copied in beside one ``rm``: each is asked of once, and none the check
    # does not name is tied. (Its cost, quadratic before 8693a19 - 20,000 files 2.0 s of CPU - is
    # a bench's to measure, not a test's.)
    from streamrag.config import WatchSettings
    from streamrag.watch_events import FolderWatch

    asked = []

    def renamed_from(added: list[str], gone: list[str]) -> dict[str, str]:
        asked.append((sorted(added), gone))
        return {"f7.txt": "old.txt"}

    watch = FolderWatch(tmp_path, WatchSettings(debounce_ms=500), anyio.Event(), renamed_from=renamed_from)
    changes = {(Change.added, str(tmp_path / f"f{n}.txt")) for n in range(2_000)}
    changes.add((Change.deleted, str(tmp_path / "old.txt")))
    assert watch.renames(changes) == [(str(tmp_path / "old.txt"), str(tmp_path / "f7.txt"))]
    assert asked == [(sorted(f"f{n}.txt" for n in range(2_000)), ["old.txt"])]


@pytest.mark.parametrize("when", ["prefetch", "sync"])
async def test_stop_finishes_the_work_under_way(corpus, tmp_path, when):
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db = tmp_path / "s.db"
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events)
    trigger = "extracting" if when == "prefetch" else "clustering"

    def report(event: dict) -> None:
        events(event)
        if daemon.syncs == 1 and event["state"] == trigger:
            daemon.stop("test")

    daemon.report = report
    send, recv = scripted()
    new = corpus / "new.txt"
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, recv)
            await until(lambda: daemon.syncs == 1)
            new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
            await send.send({(Change.added, str(new))})
    states = events.states()
    assert "stopping" in states and states[-1] == "stopped"
    store = Store(db, readonly=True)
    if when == "prefetch":
        # The extraction finished and is kept; the change waits for the next start's sync.
        assert "waiting" in states and daemon.syncs == 1 and store.version == 1
        # ... as its line says: it said "sync after 0.05s of quiet", a sync this process never runs.
        (waiting,) = [e for e in events if e["state"] == "waiting"]
        assert waiting["message"].endswith("; the next start syncs it"), waiting
        assert events[-1]["pending"] == 1
        assert store.scalar("SELECT count(*) FROM documents WHERE path = 'new.txt'") == 0
    else:
        assert daemon.syncs == 2 and store.version == 2 and events[-1]["pending"] == 0
        assert store.scalar("SELECT count(*) FROM documents WHERE path = 'new.txt'") == 1
    store.close()


async def test_health_line_only_when_it_changes(corpus, tmp_path):
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    events = Events()
    daemon = Daemon(settings, tmp_path / "h.db", corpus, report=events, health_s=0.02)
    checks = 0
    check_health = daemon.check_health

    def counted(**kwargs) -> bool:              # the health checks, counted
        nonlocal checks
        checks += 1
        return check_health(**kwargs)

    daemon.check_health = counted

    def last_health() -> dict:
        return [e for e in events if e["state"] == "health"][-1]

    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: daemon.syncs == 1)
        first = checks
        await until(lambda: checks >= first + 10)   # ten health checks, nothing changed
        health = [e for e in events if e["state"] == "health"]
        assert len(health) == 1
        assert health[0]["documents"] == 4 and health[0]["pending"] == 0 and health[0]["errors"] == 0
        (corpus / "council.txt").unlink()
        async with send:
            await send.send({(Change.deleted, str(corpus / "council.txt"))})
            await until(lambda: daemon.syncs == 2)
            # A check while the sync publishes may already see 3 documents with the previous
            # sync's time: the finished sync's time alone is no new line.
            await until(lambda: last_health()["documents"] == 3)
    assert not check_health()


async def test_the_health_line_is_not_said_again_for_the_last_sync_s_time_alone(corpus, tmp_path):
    # A sync that changes none of the counts still takes a time of its own: the minute's look
    # said the whole line again for its 'last sync 0.07s' alone, nothing a user acts on.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "t.db", corpus, health_s=0.02) as (daemon, events, send):
        checks = 0
        check_health = daemon.check_health

        def counted() -> bool:                  # the loop's looks, counted
            nonlocal checks
            checks += 1
            return check_health()

        daemon.check_health = counted

        def health() -> list[dict]:
            return [e for e in events if e["state"] == "health"]

        await until(lambda: len(health()) == 1)
        said = health()[0]
        daemon.last_sync_s = said["last_sync_s"] + 0.25   # (as such a sync leaves it)
        looked = checks
        await until(lambda: checks >= looked + 10)
        assert health() == [said], health()
        await send.aclose()


async def test_status_lines_count_in_the_singular_and_embed_errors_cleanly(tmp_path, monkeypatch):
    from streamrag.errors import StreamragError
    from streamrag.pipeline import Indexer

    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "a.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.02})   # offline: fast
    async with running(settings, tmp_path / "one.db", folder) as (daemon, events, send):
        (idle,) = [e for e in events if e["state"] == "idle"]
        assert idle["documents"] == 1 and "1 document," in idle["message"], idle["message"]
        assert "1 documents" not in idle["message"] and "0 LLM calls" in idle["message"]
        (health,) = [e for e in events if e["state"] == "health"]
        assert health["message"].startswith("1 document, "), health["message"]
        # ("errors" read as the LLM call errors `status` counts; these are the error lines printed)
        assert "0 failures, 0 error lines since start" in health["message"], health["message"]

        async def fails(self, paths):
            raise StreamragError("the endpoint failed (fault injection).")

        monkeypatch.setattr(Indexer, "run", fails)
        (folder / "a.txt").write_text("Mira Osk chaired the Harbor Council twice.\n")
        await send.send({(Change.modified, str(folder / "a.txt"))})
        await until(lambda: "sync failed" in " ".join(e["message"] for e in events))
        await send.aclose()
    failed = [e["message"] for e in events if "sync failed" in e["message"]][0]
    assert "(fault injection); retrying" in failed and ".;" not in failed, failed


async def test_a_full_disk_fails_a_sync_and_the_daemon_waits_for_space(tmp_path, monkeypatch):
    # SQLite's "database or disk is full" ended the daemon: someone had to restart it once space
    # was freed. The sync fails, what was pending stays pending, and a later sync takes it.
    import sqlite3

    from streamrag.pipeline import Indexer

    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "a.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.02})   # offline: fast
    real = Indexer.run
    full = {"left": 1}

    async def fills(self, paths):
        if full["left"]:
            full["left"] -= 1
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorname = "SQLITE_FULL"
            raise error
        return await real(self, paths)

    async with running(settings, tmp_path / "one.db", folder) as (daemon, events, send):
        monkeypatch.setattr(Indexer, "run", fills)
        (folder / "a.txt").write_text("Mira Osk chaired the Harbor Council twice, with Bram Tull.\n")
        await send.send({(Change.modified, str(folder / "a.txt"))})
        await until(lambda: daemon.syncs == 2)
        await send.aclose()
    failed = [e["message"] for e in events if "sync failed" in e["message"]]
    assert failed and failed[0].startswith("sync failed: the disk holding the index is full (database or "
                                           "disk is full); free some space; retrying"), failed
    store = Store(tmp_path / "one.db", readonly=True)
    try:
        assert store.scalar("SELECT count(*) FROM entities WHERE name = 'Bram Tull'") == 1
    finally:
        store.close()


def test_reporter_text_and_json():
    out = io.StringIO()
    Reporter(stream=out)({"event": "state", "state": "queued", "message": "2 files (2 added)", "files": 2})
    line = out.getvalue()
    assert line.endswith("queued      2 files (2 added)\n") and line[2] == ":"
    out = io.StringIO()
    Reporter(json_lines=True, stream=out)({"event": "state", "state": "idle", "message": "m", "version": 3})
    obj = json.loads(out.getvalue())
    assert obj["state"] == "idle" and obj["version"] == 3 and obj["time"] > 0


def test_once_syncs_and_exits(corpus, tmp_path, capsys):
    db = tmp_path / "once.db"
    assert main(["watch", str(corpus), "--offline", "--db", str(db), "--once", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["state"] for e in lines][:2] == ["starting", "extracting"]
    assert lines[-1]["state"] == "stopped"
    idle = [e for e in lines if e["state"] == "idle"]
    assert len(idle) == 1 and idle[0]["version"] == 1 and idle[0]["documents"] == 4
    assert main(["watch", str(tmp_path / "missing"), "--offline", "--once"]) == 1
    assert "no such folder" in capsys.readouterr().err


def test_the_idle_line_says_what_the_sync_came_to_as_index_does(cli_run, corpus, simulator, monkeypatch):
    # A sync whose only change failed said "version 1: 4 documents, ..." as one that published
    # version 1 did, and its --json had neither `outcome` nor `published` (index --json has both).
    from streamrag import simulator as sim_module

    def idle(*flags: str) -> tuple[int, list]:
        out = cli_run("watch", str(corpus), "--once", "--api-base", simulator.base_url, *flags)
        if flags:
            lines = [json.loads(line) for line in out.stdout.splitlines()]
            return out.returncode, [(e["outcome"], e["published"], e["version"]) for e in lines if e["state"] == "idle"]
        return out.returncode, [line.split("idle", 1)[1].strip() for line in out.stderr.splitlines() if " idle " in line]

    assert idle("--json") == (0, [("published", True, 1)])
    assert idle("--json") == (0, [("nothing_changed", False, 1)])
    code, (said,) = idle()
    assert code == 0 and said.startswith("nothing changed: stays at version 1; 4 documents, "), said
    monkeypatch.setitem(sim_module.ANSWERS, "extract", lambda messages: "I cannot help with that.")
    (corpus / "added.txt").write_text("Margaret Hollis met Tomas Brenner at Bergen Harbour.\n")
    assert idle("--json") == (1, [("nothing_published", False, 1)])
    code, (said,) = idle()
    assert code == 1 and said.startswith("nothing published: stays at version 1, 1 item failed (left out); "
                                         "4 documents, "), said
    monkeypatch.undo()
    code, (said,) = idle()
    assert code == 0 and said.startswith("version 2: 5 documents, "), said
    assert idle("--json") == (0, [("nothing_changed", False, 2)])


def test_a_watch_that_fails_ends_its_json_lines_saying_why(corpus, tmp_path, capsys):
    import socket

    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "s.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n")
    rc = main(["watch", str(corpus), "--once", "--json", "--db", str(tmp_path / "w.db"),
               "--config", str(tmp_path / "s.toml"), "--api-base", f"http://127.0.0.1:{port}/v1"])
    out, err = capsys.readouterr()
    last = json.loads(out.splitlines()[-1])
    assert rc == 1 and (last["state"], last["exit_code"]) == ("failed", 1)
    assert f"streamrag: error: {last['message']}\n" in err and "nothing answers at" in err


@pytest.mark.parametrize("name, said", [("SQLITE_FULL", "the disk holding the index database is full"),
                                        ("SQLITE_CORRUPT", "cannot be read")])
def test_a_watch_stopped_by_its_database_ends_its_json_lines_saying_why(corpus, tmp_path, capsys,
                                                                        monkeypatch, name, said):
    # An SQLite error out of the initial sync (a full disk, a damaged page) was said on stderr
    # alone: a script reading the lines saw them end with no `failed` line.
    import sqlite3

    from streamrag.pipeline import Indexer

    async def fails(self, paths):
        error = sqlite3.DatabaseError("database or disk is full")
        error.sqlite_errorname = name
        raise error

    monkeypatch.setattr(Indexer, "run", fails)
    rc = main(["watch", str(corpus), "--once", "--json", "--offline", "--db", str(tmp_path / "w.db")])
    out, err = capsys.readouterr()
    last = json.loads(out.splitlines()[-1])
    assert rc == 1 and (last["state"], last["exit_code"]) == ("failed", 1)
    assert err.endswith(f"streamrag: error: {last['message']}\n") and said in last["message"], err


def test_a_folder_watched_through_a_link_is_indexed_where_the_link_leads_then(corpus, tmp_path, capsys):
    # `current -> release-1`: the index path kept the link, so once the link was moved the
    # next sync wrote release-1's files into release-2's index.
    link = tmp_path / "current"
    link.symlink_to(corpus)
    assert main(["watch", str(link), "--offline", "--once"]) == 0
    err = capsys.readouterr().err
    assert f"{corpus}/.streamrag/index.db" in err and str(link) not in err, err


# --------------------------------------------------------------------------------------------
# The real file system
# --------------------------------------------------------------------------------------------
async def test_real_watch_picks_up_a_new_file(corpus, tmp_path):
    settings = make_settings(index=SMALL, watch={"debounce_ms": 50, "quiet_s": 0.1})
    db = corpus / ".streamrag" / "index.db"          # inside the watched folder, as by default
    daemon = Daemon(settings, db, corpus, report=Events())
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, watch_folder(corpus, settings.watch, daemon.stop_event))
            await until(lambda: daemon.syncs == 1)
            # Written beside the folder and moved in: one event. A file written in place is created,
            # then modified, and the two may reach the daemon as batches apart by more than the
            # quiet period, each followed by a sync, which would make the count below vary.
            staged = tmp_path / "new.txt"
            staged.write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
            os.replace(staged, corpus / "new.txt")
            await until(lambda: db_count(db, "SELECT count(*) FROM documents WHERE path = 'new.txt'") == 1)
            await until(lambda: daemon.syncs == 2)   # published, now counted
            await anyio.sleep(0.5)               # its own writes to .streamrag trigger nothing
            assert daemon.syncs == 2
            daemon.stop()
    assert daemon.pending == {}


async def test_a_stop_of_an_idle_watch_does_not_wait_for_debounce_ms(corpus, tmp_path):
    # SIGTERM to an idle watch: its stopped line came up to watch.debounce_ms later (a minute
    # at most), watchfiles' thread looking for the stop only between waits that long. The
    # fail_after bounds what took up to 60 s here; the stop is seen within watch_events._STEP_MS.
    from streamrag import watch_events

    settings = make_settings(index=SMALL, watch={"debounce_ms": 60_000})
    events = Events()
    daemon = Daemon(settings, tmp_path / "w.db", corpus, report=events)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, watch_folder(corpus, settings.watch, daemon.stop_event))
            await until(lambda: "health" in events.states())
            daemon.stop()
    assert events.states()[-2:] == ["stopping", "stopped"] and events[-1]["message"] == CURRENT_AS_SEEN
    # Nothing was under way: it said 'finishing the work under way (grace 10s, a second signal
    # cancels)' of an idle watch.
    assert events[-2]["message"] == "stop requested: nothing under way", events[-2]
    assert watch_events._STEP_MS < settings.watch.debounce_ms


async def test_a_stop_in_the_quiet_period_after_an_extraction_ahead_says_nothing_under_way(corpus, tmp_path):
    # A file queued and extracted ahead, its sync waiting for quiet: nothing was under way, yet
    # the stop said 'finishing the work under way (grace 10s, a second signal cancels)', and the
    # stopped line at once left the file to the next start.
    settings = make_settings("", watch={"quiet_s": 30})
    async with running(settings, tmp_path / "w.db", corpus) as (daemon, events, send):
        new = corpus / "new.txt"
        new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        await send.send({(Change.added, str(new))})
        await until(lambda: "waiting" in events.states())
        daemon.stop()
        await until(lambda: "stopped" in events.states())
    stopping = [e for e in events if e["state"] == "stopping"]
    assert [e["message"] for e in stopping] == ["stop requested: nothing under way"], stopping
    assert "not synced yet" in events[-1]["message"], events[-1]


@pytest.mark.parametrize("quiet_s", [0.5, 0.0])
def test_the_watchers_batches_are_gathered_into_one_per_burst(quiet_s):
    # watchfiles' batches end after a pause of watch_events._STEP_MS now (so that its thread
    # sees a stop at once); a burst still ends after debounce_ms without one, or ten times that
    # after its first. Times on a clock of the test's.
    from streamrag.watch_events import _Burst

    burst = _Burst(quiet_s)
    a, b, c = {(1, "/w/a.txt")}, {(2, "/w/b.txt")}, {(3, "/w/c.txt")}
    if not quiet_s:   # (debounce_ms within the step: watchfiles' batches are the bursts)
        assert burst.add(a, 0.0) == a and burst.add(set(), 1.0) is None and burst.add(b, 1.1) == b
        return
    assert burst.add(set(), 0.0) is None          # nothing held: nothing ends
    assert burst.add(a, 1.0) is None
    assert burst.add(set(), 1.4) is None          # 0.4 s without a change
    assert burst.add(b, 1.45) is None
    assert burst.add(set(), 1.9) is None
    assert burst.add(set(), 1.96) == a | b        # 0.51 s since the last
    assert burst.add(set(), 3.0) is None          # said once
    # A file written every 0.2 s: its burst ends 10 quiet periods after it began.
    ended = [t for t in range(30) if burst.add(c, 4.0 + 0.2 * t) is not None]
    assert ended == [25]                          # at 9.0 s, 5 s after 4.0
    assert burst.add(set(), 10.2) is None and burst.add(set(), 10.31) == c   # (the writes at 9.2 to 9.8)


def test_a_path_settled_beside_one_written_on_ends_its_burst_alone_and_the_other_keeps_its_cap():
    # Times on a clock of the test's: a log written every 0.3 s from 0.0 (quiet_s 0.5), a note
    # saved at 0.3. The note ends its burst quiet_s after its save, at the first raw batch past
    # it; the log's burst ends at its own cap (10 quiet periods after 0.0), as without the note.
    from streamrag.watch_events import _Burst

    log, note = (2, "/w/log.txt"), (1, "/w/note.txt")
    for with_note in (False, True):
        burst, ended = _Burst(0.5), []
        for n in range(30):
            changes = {log, note} if with_note and n == 1 else {log}
            if (got := burst.add(changes, round(0.3 * n, 1))) is not None:
                ended.append((round(0.3 * n, 1), got))
        assert ended[-1] == (5.1, {log}) and len(ended) == 1 + with_note, ended
        if with_note:
            assert ended[0] == (0.9, {note}), ended


@pytest.mark.parametrize("debounce_ms", [200, 500])
async def test_a_file_written_every_50_ms_is_one_burst_of_the_real_watcher(tmp_path, monkeypatch, debounce_ms):
    # watchfiles ends a raw batch at a step that saw no change it had not seen, and a file
    # written again is none: with the step at 200 ms (fcbfb99) a debounce_ms of 200 or less
    # took watchfiles' batches as the bursts, and a file saved every 100 ms for 1.2 s made 3 to 4
    # batches at debounce_ms 150 (8 in 3 s at 200), each a sync, where it is one burst. Here
    # 200, the longest debounce_ms that took them, and a write every 50 ms until watchfiles has
    # ended 3 raw batches. The burst's clock is the writer's, 50 ms a write: on the machine's
    # clock a stall of the writer of 0.15 s (a loaded machine's) was a pause, and two bursts.
    import types

    import watchfiles

    from streamrag import watch_events
    from streamrag.config import WatchSettings

    raw: list[set] = []   # watchfiles' batches: its changes, or an empty one (it waited without any)
    real_awatch = watchfiles.awatch

    async def recorded(*args, **kwargs):
        async for changes in real_awatch(*args, **kwargs):
            raw.append(changes)
            yield changes

    monkeypatch.setattr(watchfiles, "awatch", recorded)
    clock = [0.0]
    writers_time = types.ModuleType("time")
    writers_time.__dict__.update(vars(time))
    writers_time.monotonic = lambda: clock[0]
    monkeypatch.setattr(watch_events, "time", writers_time)
    (tmp_path / "a.txt").write_text("start\n")
    stop, batches, wrote = anyio.Event(), [], []

    def looks() -> int:   # the empty batches watchfiles handed on: each after a wait without a change
        return sum(not changes for changes in raw)

    async def writer() -> None:
        await until(lambda: looks() >= 1)   # (watching: its first look)
        while sum(bool(changes) for changes in raw) < 3:
            assert len(wrote) < 100, raw   # (5 s of writes: watchfiles would have ended 3 batches)
            (tmp_path / "a.txt").write_text(f"edit {len(wrote)}\n")
            wrote.append(clock[0])
            clock[0] += 0.05
            await anyio.sleep(0.05)
        # Every write handed on: two looks without a change (the first may have begun before the last write).
        seen = looks()
        await until(lambda: looks() >= seen + 2)
        # The burst's pause, and a millisecond: it ends at the next look. (debounce_ms alone was
        # less in floats after some counts of writes, 9 at 200, 19 at 500: clock + 0.2 - clock <
        # 0.2, and the burst never ended; the test waited out its 30 s.)
        clock[0] += debounce_ms / 1000 + 0.001
        await until(lambda: batches)
        stop.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            async for changes in watch_folder(tmp_path, WatchSettings(debounce_ms=debounce_ms), stop):
                if changes:
                    batches.append(changes)
    assert len(batches) == 1, (batches, len(wrote), raw)


async def test_a_second_signal_while_the_idle_daemon_stops_leaves_its_stop_clean(corpus, tmp_path):
    # Ctrl-C twice (or a service manager's SIGTERM sent again) while an idle watch stopped: its
    # file watcher ends only when its thread next looks, and cancelling that wait ends it no
    # sooner; the second signal said "cancelling now", the stopped line "cancelled; ... resumes
    # from it", and the exit status was 143, of a stop with nothing under way and the index
    # current. The source here holds its end until the test lets it go, as that thread does.
    from streamrag.daemon import serve

    events = Events()
    daemon = Daemon(make_settings(watch={"quiet_s": 30}), tmp_path / "w.db", corpus, report=events)
    let_go = anyio.Event()

    async def watcher():
        try:
            await anyio.sleep_forever()
            yield set()
        finally:
            with anyio.CancelScope(shield=True):
                await let_go.wait()

    async def signals() -> None:
        await until(lambda: "health" in events.states())
        os.kill(os.getpid(), signal.SIGTERM)
        await until(lambda: daemon.closing_watcher)
        os.kill(os.getpid(), signal.SIGTERM)
        await until(lambda: events[-1]["message"].startswith("second signal"))
        let_go.set()

    codes = []
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(signals)
            codes.append(await serve(daemon, watcher()))
    assert codes == [0], "\n".join(f"{e['state']} {e['message']}" for e in events)
    assert events[-1]["state"] == "stopped" and events[-1]["message"] == CURRENT_AS_SEEN, events[-3:]
    assert events[-2]["message"] == "second signal (SIGTERM): no work under way; the file watcher is ending"
    assert "cancelling" not in events.states()


async def test_real_watch_polls_a_folder_holding_a_name_that_is_not_utf8(corpus, tmp_path, monkeypatch):
    # watchfiles' event watcher fails at once in such a folder, every time it starts: the
    # daemon restarted it and synced the whole folder again and again, about once a second.
    # Now it says so once and polls, and a new file is still picked up.
    from streamrag import watch_events

    monkeypatch.setattr(watch_events, "_RESTART_S", 0.1)   # 1 s in use
    monkeypatch.setattr(watch_events, "_POLL_MS", 100)     # 1 s in use
    settings = make_settings(index=SMALL, watch={"debounce_ms": 50, "quiet_s": 0.1})
    (corpus / os.fsdecode(b"sub\xff")).mkdir()
    (corpus / os.fsdecode(b"sub\xff") / "b.txt").write_text("Kai Lu sailed to Lima.\n")
    db = tmp_path / "w.db"
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, watch_folder(corpus, settings.watch, daemon.stop_event))
            await until(lambda: "error" in events.states())
            # The polling watcher says a broken link deleted at each poll: not a change either.
            (corpus / "broken.txt").symlink_to("nowhere")
            await anyio.sleep(0.8)               # polling, 6 polls or so: no further error, no further sync
            (corpus / "new.txt").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
            await until(lambda: db_count(db, "SELECT count(*) FROM documents WHERE path = 'new.txt'") == 1)
            daemon.stop()
    errors = [e["message"] for e in events if e["state"] == "error"]
    assert len(errors) == 1 and "then restart watch. Meanwhile the watcher polls the folder each second" in errors[0], \
        errors
    assert daemon.syncs <= 3, daemon.syncs   # the first, the one after the error, the new file
    assert not any(e.get("deleted") for e in events if e["state"] == "queued"), events


# --------------------------------------------------------------------------------------------
# Subprocesses: kill -9, signals
# --------------------------------------------------------------------------------------------
SLOW_CONFIG = """
[llm]
requests_per_minute = 0
tokens_per_minute = 0
max_retries = 3
concurrency = 4

[index]
chunk_size = 80
chunk_overlap = 10

[pipeline]
extract_workers = 2
summary_workers = 2
report_workers = 2

[watch]
quiet_s = 0.2
grace_s = 20
"""


@pytest.fixture(scope="module")
def slow_simulator():
    """Each answer takes 50 ms, so an index of the corpus takes a couple of seconds."""
    with Simulator(SimulatorConfig(latency_ms=50)) as sim:
        yield sim


async def test_events_that_come_while_extracting_are_taken_before_syncing(corpus, tmp_path, slow_simulator):
    """Extraction outlasting the quiet period (a real model takes seconds, quiet_s is short)
    must not sync while more events wait: the batch that came meanwhile joins the same sync."""
    settings = make_settings(slow_simulator.base_url, index=SMALL, watch={"quiet_s": 0.05})
    events = Events()
    send, recv = scripted()
    first, second = corpus / "first.txt", corpus / "second.txt"
    armed = False

    def report(event: dict) -> None:
        # The second batch comes as the first is extracted, whatever the machine's load: sent
        # when the test saw "extracting", it came after the extraction and its sync on a busy one.
        nonlocal armed
        events(event)
        if armed and event["state"] == "extracting":
            armed = False
            send.send_nowait({(Change.added, str(second))})

    daemon = Daemon(settings, tmp_path / "w.db", corpus, report=report)
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: daemon.syncs == 1)
        mark = len(events)
        first.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        second.write_text("Mayor Ada Quill opened the Kessel ferry terminal.\n")
        async with send:
            armed = True
            await send.send({(Change.added, str(first))})
            await until(lambda: daemon.syncs >= 2 and not daemon.pending)
            await anyio.sleep(0.5)   # a second sync, if any, would start within the quiet period
    assert events.states(mark).count("idle") == 1
    assert daemon.syncs == 2


async def test_a_batch_waiting_when_an_extraction_outlasted_the_longest_wait_joins_the_sync(
        corpus, tmp_path, monkeypatch):
    """An extraction longer than 10 x quiet_s (a real model on a big file; a loaded machine)
    made the sync start with a batch waiting: left in the stream, it was queued after the sync
    (whose scan of the folder had taken its file) and made a second sync, which found nothing."""
    from streamrag.pipeline import Indexer

    extract = Indexer.prefetch

    async def slow_extract(self, paths):
        extracted = await extract(self, paths)
        await anyio.sleep(0.7)    # past the longest wait, 10 x quiet_s
        await until(lambda: classified)   # and the second batch is waiting
        return extracted

    monkeypatch.setattr(Indexer, "prefetch", slow_extract)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    first, second = corpus / "first.txt", corpus / "second.txt"
    events = Events()
    send, recv = scripted()
    armed = False

    def report(event: dict) -> None:
        nonlocal armed
        events(event)
        if armed and event["state"] == "extracting":   # the second batch comes during the extraction
            armed = False
            send.send_nowait({(Change.added, str(second))})

    daemon = Daemon(settings, tmp_path / "w.db", corpus, report=report)
    classified: list[dict] = []
    classify = daemon._classify

    async def noted(changes):
        batch = await classify(changes)
        if "second.txt" in batch:
            classified.append(batch)
        return batch

    daemon._classify = noted
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: daemon.syncs == 1)
        mark = len(events)
        first.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        second.write_text("Mayor Ada Quill opened the Kessel ferry terminal.\n")
        async with send:
            armed = True
            await send.send({(Change.added, str(first))})
            await until(lambda: daemon.syncs >= 2 and not daemon.pending)
            await anyio.sleep(0.3)   # a second sync, if any, would start within the quiet period
    after = events[mark:]
    assert [e["state"] for e in after].count("idle") == 1 and daemon.syncs == 2, [e["message"] for e in after]
    assert [e["files"] for e in after if e["state"] == "queued"] == [1, 1]
    assert [e["state"] for e in after].count("waiting") == 1     # the second is extracted by the sync
    synced = next(e for e in after if e["state"] == "extracting" and "scanning" in e["message"])
    assert synced["message"].startswith("2 changed files: "), synced["message"]
    assert db_count(tmp_path / "w.db", "SELECT count(*) FROM documents WHERE path IN ('first.txt', 'second.txt')") == 2


async def test_a_batch_just_after_an_extraction_that_outlasted_the_quiet_period_joins_its_sync(
        corpus, tmp_path, monkeypatch):
    """The watcher holds events back while they keep coming (a log appended to every 0.2 s
    reached the daemon about once a second): the sync began the moment an extraction longer
    than quiet_s ended, and the next batch, a moment later, made a sync of its own (a version
    every 2 s with quiet_s = 1). The daemon now waits a moment for it (``settle``: the shorter
    of quiet_s and twice debounce_ms), here 2 s: at quiet_s 0.4 the batch sent 0.1 s after the
    waiting line was too late once the test ran 0.3 s after the daemon began to wait."""
    from streamrag.pipeline import Indexer

    extract = Indexer.prefetch
    first, second = corpus / "first.txt", corpus / "second.txt"

    async def slow_extract(self, paths):
        extracted = await extract(self, paths)
        if first in paths:
            await anyio.sleep(2.5)   # past quiet_s (a model's seconds)
        return extracted

    monkeypatch.setattr(Indexer, "prefetch", slow_extract)
    settings = make_settings(index=SMALL, watch={"quiet_s": 2, "debounce_ms": 1000})   # offline: fast
    async with running(settings, tmp_path / "w.db", corpus) as (daemon, events, send):
        classify, sync_ = daemon._classify, daemon._sync
        classified: list[dict] = []

        async def noted(changes):
            batch = await classify(changes)
            if "second.txt" in batch:
                classified.append(batch)
            return batch

        async def once_it_came(*args, **kwargs):
            # A sync begun before the second batch came lasts until it has: an offline sync
            # (0.2 s) that took second.txt from the folder and published before its batch was
            # looked at left it nothing to queue (the fix undone, it passed in 2 runs of 3).
            await until(lambda: classified)
            return await sync_(*args, **kwargs)

        daemon._classify, daemon._sync = noted, once_it_came
        mark = len(events)
        first.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        second.write_text("Mayor Ada Quill opened the Kessel ferry terminal.\n")
        async with send:
            await send.send({(Change.added, str(first))})
            await until(lambda: "waiting" in events.states(mark))     # extracted
            await anyio.sleep(0.1)
            await send.send({(Change.added, str(second))})
            await until(lambda: daemon.syncs >= 2 and not daemon.pending, timeout=30)
    waited = next(e for e in events[mark:] if e["state"] == "waiting")
    assert waited["took_s"] > 2                   # the case: extraction outlasted quiet_s
    assert events.states(mark).count("idle") == 1 and daemon.syncs == 2


@pytest.fixture(scope="module")
def config_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "slow.toml"
    path.write_text(SLOW_CONFIG)
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, simulator, config_file) -> dict:
    """An uninterrupted index of the corpus with the same settings, and its request count."""
    src = tmp_path_factory.mktemp("ref") / "corpus"
    shutil.copytree(Path(__file__).parent / "data" / "harbor", src)
    settings = load_settings(config_file, env={}, overrides={"llm": {"api_base": simulator.base_url}})
    db = src.parent / "ref.db"
    before = simulator.requests
    anyio.run(lambda: sync([src], settings, db, root=src))
    return {"snapshot": snapshot(db), "requests": simulator.requests - before}


def spawn(args: list[str], log: Path, stdin=None, preexec=None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STREAMRAG_") and k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, *args], stdin=stdin, stdout=f, stderr=subprocess.STDOUT, env=env,
                                cwd=log.parent, preexec_fn=preexec or as_from_a_terminal)


@contextlib.contextmanager
def a_terminal():
    """A pseudo-terminal, (our end, its far end): the far end is a watch's controlling
    terminal (``in_a_session``), whatever this run's is; closing our end is its hang-up."""
    ours, theirs = os.openpty()
    try:
        yield ours, theirs
    finally:
        os.close(theirs)
        with contextlib.suppress(OSError):   # (closed already: hung up)
            os.close(ours)


def in_a_session(terminal: int | None):
    """A preexec_fn: signals as from a terminal (``as_from_a_terminal``), in a session of its own
    whose controlling terminal is the pty's far end ``terminal`` (None: none, as under systemd
    or `setsid`), whatever this run's session has."""
    name = None if terminal is None else os.ttyname(terminal)

    def preexec() -> None:
        as_from_a_terminal()
        os.setsid()
        if name is not None:   # (a session leader opening a terminal takes it as its own)
            os.close(os.open(name, os.O_RDWR))
    return preexec


def as_from_a_terminal(hangup=signal.SIG_DFL) -> None:
    """SIGHUP and SIGINT as a terminal's session has them, whatever this run's (nohup ignores
    SIGHUP; a suite run in the background has SIGINT ignored, and watch heeds that as index does)."""
    signal.signal(signal.SIGHUP, hangup)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def wait_for(predicate, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None and not predicate():
            raise AssertionError(f"process ended with {proc.returncode}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out:\n{log.read_text()}")
        time.sleep(0.02)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("command", ["index", "watch"])
def test_kill_9_then_restart_resumes_without_loss(command, tmp_path, corpus, slow_simulator,
                                                  config_file, reference):
    db = tmp_path / "k.db"
    log = tmp_path / "k.log"
    if command == "index":
        args = ["-m", "streamrag", "index", str(corpus), "-q"]
    else:
        args = ["-m", "streamrag", "watch", str(corpus)]
    args += ["--api-base", slow_simulator.base_url, "--db", str(db), "--config", str(config_file)]
    proc = spawn(args, log)
    try:
        wait_for(lambda: db_count(db, "SELECT count(*) FROM extractions") >= 4, 30, proc, log)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        stop(proc)
    assert db_count(db, VERSION) == 0   # killed before publishing
    paid = db_count(db, "SELECT count(*) FROM llm_cache")
    assert paid > 0

    before = slow_simulator.requests
    proc = spawn(args, log)
    try:
        if command == "index":
            assert proc.wait(60) == 0, log.read_text()
        else:
            wait_for(lambda: db_count(db, VERSION) == 1, 60, proc, log)
            wait_for(lambda: "idle" in log.read_text(), 10, proc, log)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(20) == 0, log.read_text()
    finally:
        stop(proc)
    after = slow_simulator.requests - before
    # Every answer paid before the kill came from the cache; only the work left was requested.
    assert 0 < after <= reference["requests"] - paid
    assert snapshot(db) == reference["snapshot"]
    assert "Traceback" not in log.read_text()


def interrupted_watch(corpus: Path, sim, config: Path, db: Path, log: Path,
                      first: signal.Signals = signal.SIGINT, preexec=None) -> subprocess.Popen:
    """`streamrag watch` in a subprocess, sent ``first`` once its initial sync has extracted a chunk."""
    proc = spawn(["-m", "streamrag", "watch", str(corpus), "--api-base", sim.base_url,
                  "--db", str(db), "--config", str(config)], log, preexec=preexec)
    try:
        wait_for(lambda: db_count(db, "SELECT count(*) FROM extractions") >= 1, 30, proc, log)
        proc.send_signal(first)
    except BaseException:
        stop(proc)
        raise
    return proc


@pytest.mark.parametrize("signals", [1, 2, "hangup"])
def test_signals_finish_or_cancel(signals, tmp_path, corpus, slow_simulator, config_file, reference):
    # hangup: the terminal closed (an ssh session dropped); it killed the daemon at once.
    db, log = tmp_path / "sig.db", tmp_path / "sig.log"
    with a_terminal() as (_, tty):   # (a hang-up is a terminal's: held open until the end)
        proc = interrupted_watch(corpus, slow_simulator, config_file, db, log,
                                 signal.SIGHUP if signals == "hangup" else signal.SIGINT, in_a_session(tty))
        try:
            if signals == 2:
                # The second once the first is taken: sent a fixed 0.2 s later, a child that a loaded
                # machine had not run meanwhile got both as one (a pending signal is not queued twice).
                wait_for(lambda: "SIGINT received" in log.read_text(), 30, proc, log)
                proc.send_signal(signal.SIGINT)
            code = proc.wait(30)
        finally:
            stop(proc)
    text = log.read_text()
    assert "stopping" in text and "Traceback" not in text, text
    if signals in (1, "hangup"):   # the initial sync under way finished within the grace period
        assert code == 0, text
        assert db_count(db, VERSION) == 1
        assert snapshot(db) == reference["snapshot"]
    else:              # cancelled at once; what was committed stays, the run is marked
        assert code == 128 + signal.SIGINT, text
        assert db_count(db, VERSION) == 0
        assert db_count(db, "SELECT count(*) FROM runs WHERE status = 'interrupted'") == 1
        assert db_count(db, "SELECT count(*) FROM extractions") >= 1


def _watch_ignores(tmp_path, corpus, preexec, ignored: signal.Signals, stopping: signal.Signals) -> None:
    """A `watch` started with ``preexec`` leaves ``ignored`` ignored, and ``stopping`` stops it."""
    db, log = tmp_path / "w.db", tmp_path / "w.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRAG_") and k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with open(log, "ab") as f:
        proc = subprocess.Popen([sys.executable, "-m", "streamrag", "watch", str(corpus), "--offline",
                                 "--db", str(db)], stdout=f, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=preexec)
    try:
        wait_for(lambda: "idle" in log.read_text(), 30, proc, log)
        proc.send_signal(ignored)
        time.sleep(0.5)
        assert proc.poll() is None, log.read_text()
        assert ignored.name not in log.read_text()
        proc.send_signal(stopping)
        assert proc.wait(20) == 0, log.read_text()
    finally:
        stop(proc)


def test_under_nohup_a_hangup_leaves_the_daemon_running(tmp_path, corpus):
    _watch_ignores(tmp_path, corpus, lambda: as_from_a_terminal(signal.SIG_IGN), signal.SIGHUP, signal.SIGINT)


@pytest.mark.parametrize("stdin", ["/dev/null", "a terminal"])
def test_a_sighup_without_a_terminal_is_said_and_leaves_the_daemon_running(tmp_path, corpus, stdin):
    # `postrotate kill -HUP $(cat watch.pid)` in a logrotate rule, or `systemctl reload`, of a
    # watch run by systemd (no terminal, SIGHUP not ignored): it stopped, "SIGHUP received".
    # `setsid streamrag watch` leaves its stdin a terminal, but not its controlling one.
    db, log = tmp_path / "w.db", tmp_path / "w.log"
    with a_terminal() as (_, tty):   # (open throughout: a terminal hung up is none to isatty)
        proc = spawn(["-m", "streamrag", "watch", str(corpus), "--offline", "--db", str(db)], log,
                     stdin=subprocess.DEVNULL if stdin == "/dev/null" else tty, preexec=in_a_session(None))
        try:
            wait_for(lambda: " idle " in log.read_text(), 30, proc, log)
            proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "SIGHUP received" in log.read_text(), 30, proc, log)
            proc.send_signal(signal.SIGHUP)   # (said each time, never a stop)
            wait_for(lambda: log.read_text().count("SIGHUP received") == 2, 30, proc, log)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
        finally:
            stop(proc)
    text = log.read_text()
    assert code == 0, text
    hup = [line for line in text.splitlines() if "SIGHUP" in line]
    assert len(hup) == 2 and all(" warning " in line and "going on" in line for line in hup), text
    assert "stopping    SIGTERM received: " in text and text.rstrip().endswith(CURRENT_AS_SEEN), text


def test_a_hangup_stops_a_watch_whose_stdin_is_no_terminal(tmp_path, corpus):
    # `producer | streamrag watch notes` (or `< /dev/null`) in an ssh session that dropped: its
    # terminal hung up, but its stdin was no terminal, so the SIGHUP was taken for a `kill -HUP`
    # and watch went on, writing to no one and holding the writer lock.
    db, log = tmp_path / "w.db", tmp_path / "w.log"
    with a_terminal() as (ours, tty):
        proc = spawn(["-m", "streamrag", "watch", str(corpus), "--offline", "--db", str(db)], log,
                     stdin=subprocess.PIPE, preexec=in_a_session(tty))
        try:
            wait_for(lambda: " idle " in log.read_text(), 30, proc, log)
            os.close(ours)   # the terminal hangs up: the kernel sends SIGHUP
            code = proc.wait(20)
        finally:
            stop(proc)
    text = log.read_text()
    assert code == 0, text
    assert "stopping    SIGHUP received (the terminal hung up): " in text and "going on" not in text, text
    assert text.rstrip().endswith(CURRENT_AS_SEEN), text


def test_a_background_job_of_a_script_ignores_sigint_as_index_does(tmp_path, corpus):
    # `bash -c 'streamrag watch w & ... kill -INT $!'`: the shell starts it with SIGINT
    # ignored; watch stopped all the same (it took SIGINT over), while index ignores it.
    def in_the_background() -> None:
        as_from_a_terminal()
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    _watch_ignores(tmp_path, corpus, in_the_background, signal.SIGINT, signal.SIGTERM)


# `python -m streamrag`, its writer's fixed waits shortened (a wait for another program's lock
# said after 3 s, and 2 s more once stopped): each test below took 8 s, most of it waiting.
_SHORT_LOCK_WAITS = ("import sys; import streamrag.writer as w; w._SAY_WAIT_S = 0.3; w._STOPPING_WAIT_S = 0.3; "
                     "sys.argv[0] = 'streamrag'; from streamrag.__main__ import run; raise SystemExit(run())")


@pytest.mark.parametrize("command", ["index", "watch"])
def test_ctrl_c_while_another_program_holds_the_lock_stops_soon(command, tmp_path, corpus):
    # `index` took 58 s to heed Ctrl-C (its write waited out 30 s, then its finish_run 30 s
    # more) and exited 1; `watch` exited 1 once its grace was over, with the lock's message.
    db, log = tmp_path / "l.db", tmp_path / "l.log"
    assert main(["index", str(corpus), "--offline", "-q", "--db", str(db)]) == 0   # (in this process: 1 s less)
    (corpus / "extra.txt").write_text("Quorra Vell opened a ferry office on the quay.\n")
    config = tmp_path / "g.toml"
    config.write_text("[watch]\ngrace_s = 0.1\n")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")   # another program writing
    try:
        proc = spawn(["-c", _SHORT_LOCK_WAITS, command, str(corpus), "--offline", "--db", str(db),
                      "--config", str(config)], log)
        try:
            wait_for(lambda: "another program holds its write lock" in log.read_text(), 30, proc, log)
            proc.send_signal(signal.SIGINT)
            code = proc.wait(20)
        finally:
            stop(proc)
    finally:
        holder.close()
    text = log.read_text()
    assert "Traceback" not in text, text
    # What it could not write is said, and the stop is what the exit status says (README).
    assert "stopped before this could be written" in text and "stayed locked by another process" in text, text
    if command == "index":
        assert code == 128 + signal.SIGINT and "streamrag: interrupted" in text, text
    else:
        assert code == 128 + signal.SIGINT, text
        assert "stopped     cancelled; everything committed is kept" in text, text


def test_grace_period_over_cancels_with_a_nonzero_code(tmp_path, corpus, slow_simulator, config_file):
    config = tmp_path / "short-grace.toml"
    config.write_text(config_file.read_text().replace("grace_s = 20", "grace_s = 0.1"))
    db, log = tmp_path / "g.db", tmp_path / "g.log"
    proc = interrupted_watch(corpus, slow_simulator, config, db, log)   # the sync needs > 0.1 s
    try:
        code = proc.wait(30)
    finally:
        stop(proc)
    text = log.read_text()
    assert "grace period of 0.1s over" in text and "Traceback" not in text, text
    assert code == 128 + signal.SIGINT, text   # cancelled, not a clean stop
    assert db_count(db, VERSION) == 0


async def test_failed_model_calls_are_retried_without_a_file_event(corpus, tmp_path):
    """Extraction calls that failed (a flaky endpoint) are retried by syncs the daemon schedules."""
    with Simulator(SimulatorConfig(fault_rate=0.2, seed=3, timeout_s=0.2)) as flaky:
        settings = make_settings(flaky.base_url, index=SMALL,
                                 llm={"max_retries": 0, "request_timeout_s": 2.0},
                                 watch={"quiet_s": 0.05})
        db = tmp_path / "r.db"
        events = Events()
        daemon = Daemon(settings, db, corpus, report=events)
        send, recv = scripted()
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, recv)
            await until(lambda: daemon.syncs >= 1, timeout=30)
            first = daemon.last_result
            await until(lambda: daemon.syncs >= 2 and not daemon.pending, timeout=30)
            await send.aclose()
    assert sum(s.get("errors", 0) for s in first.llm.values()) > 0
    assert daemon.syncs >= 2                              # a retry sync ran without any file event
    assert any(e["state"] == "error" and "retried" in e["message"] for e in events)
    assert daemon.last_result.chunks >= first.chunks
    # The health line counts every error line, failed model calls among them.
    assert daemon.health()["errors"] == events.states().count("error") > 0
    # The retry sync says what it is for; no file changed, so none is counted as one.
    first_idle = events.states().index("idle")
    retry_start = next(e for e in events[first_idle:] if e["state"] == "extracting")
    assert retry_start["message"].startswith("retrying "), retry_start
    assert "changed file" not in retry_start["message"] and " failed item" in retry_start["message"]
    # ... in its fields too, as the message counts them (--json had only "scanned").
    retrying = int(retry_start["message"].split()[1])
    assert (retry_start["files"], retry_start["failed_items"], retry_start["whole_folder"]) == \
        (0, retrying, False), retry_start
    initial = next(e for e in events if e["state"] == "extracting")
    assert initial["message"].startswith("initial sync: ") and initial["whole_folder"] is True, initial


async def test_a_chunk_left_without_an_extraction_unsaid_is_retried_and_no_outage_is_said(tmp_path, monkeypatch):
    """A chunk left without its extraction, no call failing (offline: none made), is a failed item
    the daemon retries after a pause; it said "0 LLM calls failed ... is the endpoint down?"."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(2):
        (folder / f"town{n}.txt").write_text("\n\n".join(
            f"Mayor Anna Berg{n}{k} met Captain Olaf Lind{n}{k} in Port Vell{n}{k}." for k in range(20)))
    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0}, watch={"quiet_s": 0.05})
    fresh = tmp_path / "fresh.db"
    whole = await sync([folder], settings, fresh, root=folder)
    dropped = lose_extraction(monkeypatch)
    async with running(settings, tmp_path / "d.db", folder) as (daemon, events, send):
        await until(lambda: daemon.syncs >= 2 and not daemon.pending, timeout=30)
        await send.aclose()
    assert len(dropped) == 1
    (error,) = [e for e in events if e["state"] == "error"]
    assert error["outage"] is False and (error["failed_items"], error["llm_errors"]) == (1, 0), error
    assert error["message"].startswith("left out of this version: 1 failed item") and "endpoint" not in error["message"]
    assert "retried after a pause" in error["message"]
    assert daemon.last_result.chunks == whole.chunks and daemon.last_result.failed_items == 0
    assert snapshot(tmp_path / "d.db") == snapshot(fresh)


async def test_a_chunk_never_extracted_with_no_call_failing_gives_up_saying_the_item(tmp_path, monkeypatch):
    """The line giving up after the retries of a chunk left without its extraction, no call
    failing (offline: none made), said "0 LLM calls still failed"; it says the item left out. The
    command it gives is one a shell runs: `streamrag index /tmp/.../my notes` was two arguments."""
    folder = tmp_path / "my notes"
    folder.mkdir()
    (folder / "town.txt").write_text("\n\n".join(
        f"Mayor Anna Berg{k} met Captain Olaf Lind{k} in Port Vell{k}." for k in range(20)))
    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0}, watch={"quiet_s": 0.02})
    lost = lose_extraction(monkeypatch, every_time=True)   # the chunk whose extraction is never stored
    async with running(settings, tmp_path / "d.db", folder) as (daemon, events, send):
        await until(lambda: any(e.get("gave_up") for e in events), timeout=30)
        await send.aclose()
    assert len(lost) == 1
    gave_up = next(e for e in events if e.get("gave_up"))
    assert (gave_up["failed_items"], gave_up["llm_errors"]) == (1, 0), gave_up
    assert gave_up["message"].startswith("1 failed item still left out after 3 retries (no LLM call failed); "
                                         "they are tried again when a file changes"), gave_up["message"]
    assert f"or `streamrag index '{folder}'` runs" in gave_up["message"], gave_up["message"]
    retries = [e for e in events if e["state"] == "error" and not e.get("gave_up")]
    assert len(retries) == 3 and all("(no LLM call failed)" in e["message"] for e in retries), retries
    # each retry sync's opening line gives claims_failed beside failed_items, 0 too (it gave it only
    # when not 0, while the health, stopped and error lines always give it)
    opening = [e for e in events if e["message"].startswith("retrying ")]
    assert len(opening) == 3 and all(e["message"].startswith("retrying 1 failed item: scanning ")
                                      and (e["failed_items"], e["claims_failed"]) == (1, 0) for e in opening), opening
    # the health line after it says the item given up on (it said "0 pending", failed_items 0)
    health = [e for e in events[events.index(gave_up):] if e["state"] == "health"][-1]
    assert (health["failed_items"], health["claims_failed"], health["gave_up"]) == (1, 0, True), health
    assert " 0 pending (1 failed item, given up until a file changes), " in health["message"], health


async def test_once_exits_1_when_items_failed_like_index(corpus, tmp_path):
    """`watch --once` is like `streamrag index`: items whose calls failed make the exit status 1."""
    with Simulator(SimulatorConfig(fault_rate=0.2, seed=3, timeout_s=0.2)) as flaky:
        settings = make_settings(flaky.base_url, index=SMALL,
                                 llm={"max_retries": 0, "request_timeout_s": 2.0})
        events = Events()
        daemon = Daemon(settings, tmp_path / "once.db", corpus, report=events)
        await daemon.run(None)
    assert daemon.last_result.failed_items > 0
    assert daemon.exit_code == 1
    stopped = events[-1]
    assert stopped["state"] == "stopped" and stopped["pending"] == 0, stopped
    assert "changed file" not in stopped["message"]
    assert stopped["failed_items"] == daemon.last_result.failed_items
    assert not any("retried after a pause" in e["message"] for e in events)   # --once retries nothing
    assert daemon.health()["pending"] == 0
    # `streamrag status` does not call that update a bare "ok".
    from streamrag.status import format_status, gather_status

    store = Store(tmp_path / "once.db", readonly=True)
    try:
        text = format_status(gather_status(store), tmp_path / "once.db")
    finally:
        store.close()
    (line,) = [line for line in text.splitlines() if line.strip().startswith("last update")]
    assert f"ok, but {daemon.last_result.failed_items} item" in line and "failed" in line, line


async def test_a_report_settled_as_unusable_is_not_retried(corpus, tmp_path):
    """A community whose report answers are never usable: the daemon's retry syncs ask for it
    until it is settled (UNUSABLE_RUNS in a row), then no sync is scheduled for it."""
    import httpx
    from test_bad_answers import GarbleOneReport

    from streamrag.call_log import UNUSABLE_RUNS

    endpoint = GarbleOneReport("Mira Osk")
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0}, watch={"quiet_s": 0.05})
    events = Events()
    daemon = Daemon(settings, tmp_path / "r.db", corpus, report=events, transport=httpx.MockTransport(endpoint))
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: daemon.syncs >= UNUSABLE_RUNS and not daemon.pending, timeout=30)
        await anyio.sleep(1.0)   # (a retry would come after 0.05 s times a few backoffs)
        await send.aclose()
    assert daemon.syncs == UNUSABLE_RUNS
    assert endpoint.asked == 3 * UNUSABLE_RUNS
    assert daemon.last_result.failed_items == 0 and daemon.last_result.failures == 1
    # Its health line counts failures as status does: settled, it is not one of them.
    from streamrag.status import gather_status

    store = Store(tmp_path / "r.db", readonly=True)
    try:
        info = gather_status(store)
    finally:
        store.close()
    assert daemon.health()["failures"] == info["failures_last_run"] == 0 and info["settled"] == 1
    # ... and says so once: the error lines of the tries before simply stopped.
    (said,) = [e for e in events if e.get("settled")]
    assert said["state"] == "warning" and said["message"].startswith(
        "1 item no longer asked for: the model's answers were unusable on 3 runs in a row"), said


async def test_a_folder_renamed_with_rows_files_inside_is_said_renamed(corpus, tmp_path):
    # A .csv or .jsonl file is indexed as its rows (data.csv#1, ...): the rename of the folder
    # holding one was said "1 added, 1 deleted, 2 renamed", the path itself never being indexed.
    sub = corpus / "ledger"
    sub.mkdir()
    (sub / "notes.txt").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
    (sub / "data.csv").write_text("id,text\n1,Mira Osk chaired the Harbor Council.\n"
                                  "2,Tomas Vell kept the Lantern Hall.\n")
    (sub / "log.jsonl").write_text('{"text": "Ada Brenn mapped the Kessel shoals."}\n'
                                   '{"text": "Ivo Sand rebuilt the north pier."}\n')
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "r.db", corpus) as (daemon, events, send):
        assert db_count(tmp_path / "r.db", "SELECT count(*) FROM files WHERE path LIKE 'ledger/data.csv#%'") == 2
        async with send:
            mark = len(events)
            sub.rename(corpus / "archive")
            await send.send({(Change.deleted, str(sub)), (Change.added, str(corpus / "archive"))})
            await until(lambda: daemon.syncs == 2)
    (queued,) = [e for e in events[mark:] if e["state"] == "queued"]
    assert queued["message"].startswith("3 files (3 renamed); 3 pending"), queued["message"]
    assert (queued["files"], queued["renamed"]) == (3, 3) and "added" not in queued and "deleted" not in queued


async def test_a_binary_file_moved_with_its_folder_is_said_renamed(corpus, tmp_path):
    # A file not indexed (binary: no document to compare by content) moved with its folder was
    # said "1 added, 1 deleted" beside its neighbours' "renamed"; it is told by the stamp its
    # failure recorded (size and change time, which the move keeps).
    sub = corpus / "ledger"
    sub.mkdir()
    (sub / "notes.txt").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
    (sub / "blob.txt").write_bytes(bytes(range(256)) * 8)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "r.db", corpus) as (daemon, events, send):
        assert db_count(tmp_path / "r.db", "SELECT count(*) FROM failures WHERE item = 'ledger/blob.txt'") == 1
        async with send:
            mark = len(events)
            sub.rename(corpus / "archive")
            await send.send({(Change.deleted, str(sub)), (Change.added, str(corpus / "archive"))})
            await until(lambda: daemon.syncs == 2)
    (queued,) = [e for e in events[mark:] if e["state"] == "queued"]
    assert queued["message"].startswith("2 files (2 renamed); 2 pending"), queued["message"]
    assert (queued["files"], queued["renamed"]) == (2, 2) and "added" not in queued and "deleted" not in queued


async def test_a_folder_moved_in_is_listed_while_the_event_loop_goes_on(corpus, tmp_path, monkeypatch):
    # The listing of a folder moved in ran on the event loop: 100,000 files held signals and
    # progress for seconds. Here the listing waits until the test, on the loop, lets it go on.
    listing, go_on, went_on = threading.Event(), threading.Event(), []
    real_walk = os.walk

    def walk(top, *args, **kwargs):
        listing.set()
        went_on.append(go_on.wait(10))   # False: nothing on the loop could run meanwhile
        yield from real_walk(top, *args, **kwargs)

    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})   # offline: fast
    async with running(settings, tmp_path / "l.db", corpus) as (daemon, events, send):
        moved = tmp_path / "inbox"
        (moved / "deep").mkdir(parents=True)
        for i, name in enumerate(["a.txt", "b.txt", "deep/c.txt"]):
            (moved / name).write_text(f"Captain Oskar Lind sailed to Kessel on day {i}.\n")
        moved.rename(corpus / "inbox")
        monkeypatch.setattr(os, "walk", walk)
        async with send:
            await send.send({(Change.added, str(corpus / "inbox"))})
            await until(listing.is_set)
            go_on.set()
            await until(lambda: daemon.syncs == 2)
    assert went_on == [True]
    (queued,) = [e for e in events if e["state"] == "queued"]
    assert queued["message"].startswith("3 files (3 added)"), queued["message"]
    assert db_count(tmp_path / "l.db", "SELECT count(*) FROM files WHERE path LIKE 'inbox/%'") == 3


def test_the_first_line_says_offline_or_which_model_at_which_endpoint(corpus, tmp_path, capsys, simulator):
    # `index` says "version 1, LLM"; watch's first line said neither that nor the endpoint.
    db = tmp_path / "w.db"
    assert main(["watch", str(corpus), "--offline", "--db", str(db), "--once", "--json"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (first["state"], first["mode"], first["endpoint"]) == ("starting", "offline", None)
    assert ", offline: NLP extraction, extractive reports (debounce" in first["message"]
    db = tmp_path / "w2.db"
    assert main(["watch", str(corpus), "--api-base", simulator.base_url, "--db", str(db), "--once"]) == 0
    first = capsys.readouterr().err.splitlines()[0]   # (text lines go to stderr)
    assert first.endswith(f"{corpus} -> {db}, LLM gpt-4o-mini at {simulator.base_url} (debounce 500 ms, "
                          "quiet 2s, grace 10s)"), first


def test_no_line_and_nothing_in_the_index_shows_the_endpoints_password(corpus, tmp_path, capsys, simulator):
    # http://user:password@host/v1: the first line ("LLM ... at ENDPOINT", its --json endpoint) and
    # the index's note of the endpoint answering (meta endpoint_answered) held the password.
    base = simulator.base_url.replace("http://", "http://me:pw-LEAKCHECK-42@")
    db = tmp_path / "w.db"
    assert main(["watch", str(corpus), "--api-base", base, "--db", str(db), "--once", "--json"]) == 0
    said = capsys.readouterr()
    first = json.loads(said.out.splitlines()[0])
    assert first["endpoint"] == simulator.base_url.replace("http://", "http://me:***@"), first
    assert "LEAKCHECK" not in said.out + said.err
    with contextlib.closing(sqlite3.connect(db)) as conn:
        dump = "\n".join(conn.iterdump())
    assert "LEAKCHECK" not in dump and "http://me:***@" in dump


def test_the_first_line_names_the_index_by_its_absolute_path(corpus, capsys, monkeypatch):
    # `watch DIR` said "DIR/.streamrag/index.db" (and "db" so in JSON), `status --json` the absolute path.
    monkeypatch.chdir(corpus.parent)
    assert main(["watch", corpus.name, "--offline", "--once", "--json"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    expected = str(corpus / ".streamrag" / "index.db")
    assert first["db"] == expected and f" -> {expected}, offline" in first["message"]


def test_the_first_line_names_the_endpoint_an_offline_watch_embeds_at(corpus, tmp_path, capsys, simulator):
    # index.extractor = "nlp" with an embedding model: offline extraction, but every sync sends
    # its embeddings to the endpoint; the first line said "offline" and endpoint None.
    config = tmp_path / "nlp.toml"
    config.write_text('[index]\nextractor = "nlp"\n[llm]\nembedding_model = "text-embedding-3-small"\n'
                      'requests_per_minute = 0\ntokens_per_minute = 0\n', encoding="utf-8")
    db = tmp_path / "w.db"
    assert main(["watch", str(corpus), "--config", str(config), "--api-base", simulator.base_url,
                 "--db", str(db), "--once", "--json"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (first["state"], first["mode"], first["endpoint"]) == ("starting", "offline", simulator.base_url)
    assert (f", offline: NLP extraction, extractive reports, embeddings text-embedding-3-small at "
            f"{simulator.base_url} (debounce") in first["message"], first["message"]
    assert db_count(db, "SELECT count(*) FROM llm_calls WHERE stage = 'embed'") > 0


def test_an_extraction_ahead_says_why_its_chunks_failed_in_their_number():
    # "1 chunk failed (their calls failed)": the words of why agree with how many chunks failed.
    from streamrag.daemon import _failed_ahead

    refused = {"extract": {"calls": 3, "errors": 3}}
    assert _failed_ahead(1, refused, "the sync") == "; 1 chunk failed (its calls failed): the sync tries it again"
    assert _failed_ahead(2, {"extract": {"calls": 6, "errors": 6}}, "the sync") == \
        "; 2 chunks failed (their calls failed): the sync tries them again"
    assert _failed_ahead(0, refused, "the sync") == ""


async def test_claims_answers_off_the_format_are_said_by_watch(tmp_path, monkeypatch):
    # The warning came with the extraction ahead of a sync, which finds the extractions stored
    # and parses no claims answer again: watch never said it.
    from conftest import claims_answered

    folder = tmp_path / "notes"
    folder.mkdir()
    settings = make_settings("http://llm.test/v1", index={**SMALL, "extract_claims": True},
                             watch={"quiet_s": 0.2})
    line = "claim | Tomas Quell | NONE | VOYAGE | LIKELY | NONE | NONE | Quell sailed. | sailed"
    async with running(settings, tmp_path / "c.db", folder, transport=claims_answered(line)) as (daemon, events, send):
        mark = len(events)
        async with send:
            new = folder / "n1.txt"
            new.write_text("Captain Tomas Quell sailed the Blue Heron from Port Vell to Kessel.\n")
            await send.send({(Change.added, str(new))})
            await until(lambda: daemon.syncs == 2)
    said = [e["message"] for e in events[mark:] if e["state"] == "warning"]
    assert len(said) == 1 and said[0].startswith("claims: 1 of "), said
    assert "1 status not TRUE, FALSE or SUSPECTED (read as SUSPECTED)" in said[0]


async def test_watch_once_says_chunks_whose_claims_failed_indexed_without_them(corpus, tmp_path):
    # `index` says a chunk whose claims call failed is indexed without its claims (its entities
    # and relationships are in the version); `watch --once` said "left out of this version: 4
    # failed items (12 LLM calls failed)", and its stopped line "4 failed items left out of this
    # version".
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True}, llm={"max_retries": 0})
    events = Events()
    daemon = Daemon(settings, tmp_path / "c.db", corpus, report=events, transport=simulated_transport(claims_work=False))
    await daemon.run(None)
    result = daemon.last_result
    n = result.chunks
    assert n and result.failed_items == result.claims_failed == n and result.entities > 0
    assert daemon.exit_code == 1
    (error,) = [e for e in events if e["state"] == "error"]
    assert error["message"] == (f"{n} chunks are indexed without their claims (the claims call failed); run "
                                "again to retry them (`streamrag status --failures` lists them)"), error
    assert (error["failed_items"], error["claims_failed"]) == (n, n) and error["llm_errors"] > 0, error
    stopped = events[-1]
    assert stopped["state"] == "stopped" and stopped["message"].startswith(
        f"{n} chunks are indexed without their claims (the claims call failed); the next start"), stopped
    assert (stopped["failed_items"], stopped["claims_failed"]) == (n, n), stopped
    assert not any("left out" in e["message"] for e in events), events


async def test_watch_says_chunks_whose_claims_failed_indexed_without_them_as_it_retries(corpus, tmp_path):
    # A watch retrying chunks whose claims calls failed said "12 LLM calls failed; the affected
    # items are retried after a pause", and, stopped before the retry, "4 failed items left out
    # of this version"; started again while the endpoint is down, "the whole folder not synced
    # yet; 4 failed items left out of this version": they are in the version, without claims.
    import httpx

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True}, llm={"max_retries": 0},
                             watch={"quiet_s": 60})
    db = tmp_path / "c.db"
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events, transport=simulated_transport(claims_work=False))
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: daemon.syncs >= 1 and any(e["state"] == "error" for e in events), timeout=30)
        daemon.stop()   # (before the retry, a quiet period away)
    n = daemon.last_result.chunks
    assert n and daemon.last_result.claims_failed == n
    (error,) = [e for e in events if e["state"] == "error"]
    assert "; the affected items are retried after a pause" in error["message"], error
    assert f" failed; {n} chunks are indexed without their claims (the claims call failed); the affected" \
        in error["message"], error
    assert (error["failed_items"], error["claims_failed"]) == (n, n), error
    stopped = events[-1]
    assert stopped["message"] == (f"{n} chunks are indexed without their claims (the claims call failed); the "
                                  "next start (or `streamrag index`) syncs what is left"), stopped
    assert (stopped["failed_items"], stopped["claims_failed"]) == (n, n), stopped

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    events = Events()
    daemon = Daemon(settings, db, corpus, report=events, transport=httpx.MockTransport(refused))
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: any(e["state"] == "error" for e in events), timeout=30)
        daemon.stop()
    assert daemon.syncs == 0   # (the initial sync failed: its count is the update's it goes on with)
    (error,) = [e for e in events if e["state"] == "error"]
    assert (error["failed_items"], error["claims_failed"]) == (n, n), error
    stopped = events[-1]
    assert stopped["message"].startswith(f"the whole folder not synced yet; {n} chunks are indexed without their "
                                         "claims (the claims call failed); the next start"), stopped
    assert not any("left out of this version" in e["message"] for e in events), events


async def test_watch_gives_up_retrying_chunks_whose_claims_failed_saying_them(corpus, tmp_path):
    # After its retries the give-up line said only "12 LLM calls still failed after 3 retries".
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True}, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    async with running(settings, tmp_path / "c.db", corpus,
                       transport=simulated_transport(claims_work=False)) as (daemon, events, send):
        await until(lambda: any(e.get("gave_up") for e in events), timeout=30)
        await send.aclose()
    n = daemon.last_result.chunks
    retries = [e for e in events if e["state"] == "error" and not e.get("gave_up")]
    assert len(retries) == 3 and all(e["claims_failed"] == e["failed_items"] == n for e in retries), retries
    gave_up = next(e for e in events if e.get("gave_up"))
    assert f"still failed after 3 retries; {n} chunks are indexed without their claims (the claims call " \
        "failed); they are tried again when a file changes" in gave_up["message"], gave_up
    assert gave_up["claims_failed"] == gave_up["failed_items"] == n, gave_up
    # The health lines before it counted those chunks as "failed items to retry", and the stopped
    # line after it said "index is current" while they were still without their claims.
    # ... and so did the opening line of each retry sync ("retrying 4 failed items: scanning ...")
    opening = [e for e in events if e["message"].startswith("retrying ")]
    assert len(opening) == 3 and all(e["message"].startswith(f"retrying the claims of {n} chunks: scanning ")
                                      and e["failed_items"] == e["claims_failed"] == n for e in opening), opening
    health = [e for e in events if e["state"] == "health" and e["failed_items"] and not e["gave_up"]]
    assert health and all(e["claims_failed"] == e["failed_items"] == n for e in health), health
    assert all(f"({n} chunks without their claims, asked again at the next sync)" in e["message"]
               and "failed item" not in e["message"] for e in health), health
    stopped = events[-1]
    assert stopped["state"] == "stopped" and stopped["message"] == (
        f"{n} chunks are indexed without their claims (the claims call failed); the next start (or "
        "`streamrag index`) syncs what is left"), stopped
    assert (stopped["failed_items"], stopped["claims_failed"]) == (n, n), stopped
    # The health line after giving up said "0 pending" (failed_items 0) of what the stopped line
    # counts: it says them, given up on.
    after = [e for e in events[events.index(gave_up):] if e["state"] == "health"]
    assert after and (after[-1]["failed_items"], after[-1]["claims_failed"], after[-1]["gave_up"]) == (n, n, True)
    assert f" 0 pending ({n} chunks without their claims, given up until a file changes), last sync " \
        in after[-1]["message"], after[-1]



async def test_a_file_edited_after_the_retries_gave_up_whose_sync_fails_counts_them_on_every_line(corpus, tmp_path):
    # After giving up, a file edited whose extraction and sync then met an outage: the error and
    # outage lines said failed_items 0 (no retry scheduled) beside a health line of n given up,
    # and the health line said them "given up until a file changes" of a file changed, pending,
    # whose sync asks for them again.
    import httpx

    answer = simulated_transport(claims_work=False).handler
    down = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        if down.is_set():
            raise httpx.ConnectError("connection refused", request=request)
        return answer(request)

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True}, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    edited = sorted(corpus.glob("*.txt"))[0]
    async with running(settings, tmp_path / "c.db", corpus, transport=httpx.MockTransport(handler)) \
            as (daemon, events, send):
        async with send:
            await until(lambda: any(e["state"] == "health" and e["gave_up"] for e in events), timeout=30)
            n = daemon.last_result.chunks
            gave_up = len(events)
            down.set()
            edited.write_text(edited.read_text() + "\n\nMayor Anna Berg met Captain Olaf Lind in Port Vell.\n")
            await send.send({(Change.modified, str(edited))})
            # (its extraction ahead says the outage; the syncs after it, backing off, the outage line)
            await until(lambda: any(e["state"] == "outage" for e in events[gave_up:]), timeout=30)
            await until(lambda: not daemon._syncing, timeout=30)
            daemon.check_health()
            daemon.stop()
    after = events[gave_up:]
    failing = [e for e in after if e["state"] in ("error", "outage") and "failed_items" in e]
    assert {e["state"] for e in failing} == {"error", "outage"} and all(
        (e["failed_items"], e["claims_failed"]) == (n, n) for e in failing), failing
    health = [e for e in after if e["state"] == "health"][-1]
    assert (health["pending"], health["failed_items"], health["claims_failed"], health["gave_up"]) == (1, n, n, True)
    assert f" 1 pending ({n} chunks without their claims, asked again at the next sync), " in health["message"], health
    # the stopped line counts them as these did
    assert (events[-1]["state"], events[-1]["failed_items"], events[-1]["claims_failed"]) == ("stopped", n, n), events[-1]


async def test_an_index_deleted_after_the_retries_gave_up_stops_counting_nothing_left_in_it(corpus, tmp_path):
    # The "no index" stopped line took its failed_items and claims_failed from the items the
    # retries gave up on, left in the index that is gone: 4 and 4 beside "no index: ... deleted".
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True}, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    db = tmp_path / "c.db"
    async with running(settings, db, corpus, transport=simulated_transport(claims_work=False)) as (daemon, events, send):
        async with send:
            # (the health line after giving up: the sync is over)
            await until(lambda: any(e["state"] == "health" and e["gave_up"] for e in events), timeout=30)
            for path in (db, db.with_name("c.db-wal"), db.with_name("c.db-shm")):
                path.unlink(missing_ok=True)
            daemon.stop()   # (at once: the next look would build it again)
    stopped = events[-1]
    assert stopped["state"] == "stopped" and stopped["message"].startswith(f"no index: {db} was deleted"), stopped
    assert (stopped["pending"], stopped["failed_items"], stopped["claims_failed"]) == (0, 0, 0), stopped


async def test_a_folder_gone_after_the_retries_gave_up_forgets_the_items_given_up_on(corpus, tmp_path):
    # A folder gone forgets what was queued (``_folder_gone``), the items given up on too: its
    # return is synced whole. Kept, the health line went on saying "4 chunks without their
    # claims, given up until a file changes" of a folder that is not there.
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True}, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    async with running(settings, tmp_path / "c.db", corpus, transport=simulated_transport(claims_work=False)) \
            as (daemon, events, send):
        async with send:
            await until(lambda: any(e["state"] == "health" and e["gave_up"] for e in events), timeout=30)
            shutil.rmtree(corpus)
            await send.send({(Change.deleted, str(corpus))})
            await until(lambda: "gone" in events.states(), timeout=30)
            daemon.check_health()   # (it changed: nothing is given up on now)
            daemon.stop()
    health = [e for e in events if e["state"] == "health"][-1]
    assert (health["failed_items"], health["claims_failed"], health["gave_up"]) == (0, 0, False), health
    assert " 0 pending, last sync " in health["message"], health["message"]
    assert events[-1]["state"] == "stopped" and "the watched folder is gone" in events[-1]["message"]

def test_failed_items_and_chunks_without_their_claims_are_said_apart():
    from streamrag.daemon import _left_out_said, _to_retry_said

    # the health line's clause, as the stopped and error lines say them: apart
    assert _to_retry_said({"failed_items": 5, "claims_failed": 4}) == \
        " (1 failed item to retry; 4 chunks without their claims, asked again at the next sync)"
    assert _to_retry_said({"failed_items": 1, "claims_failed": 1}) == \
        " (1 chunk without its claims, asked again at the next sync)"
    assert _to_retry_said({"failed_items": 2, "claims_failed": 0}) == " (2 failed items to retry)"
    assert _to_retry_said({"failed_items": 0, "claims_failed": 0}) == ""
    # ... and those the retries gave up on, as given up (the stopped line counts them)
    assert _to_retry_said({"failed_items": 5, "claims_failed": 4, "gave_up": True}) == \
        " (1 failed item and 4 chunks without their claims, given up until a file changes)"
    assert _to_retry_said({"failed_items": 1, "claims_failed": 1, "gave_up": True}) == \
        " (1 chunk without its claims, given up until a file changes)"
    assert _to_retry_said({"failed_items": 2, "claims_failed": 0, "gave_up": True}) == \
        " (2 failed items, given up until a file changes)"
    # ... but while a changed file is pending: the sync it waits for asks for them again
    assert _to_retry_said({"failed_items": 5, "claims_failed": 4, "gave_up": True, "pending": 1}) == \
        " (1 failed item and 4 chunks without their claims, asked again at the next sync)"

    said = _left_out_said(5, 4, lambda n: f"left out of this version: {n} (2 LLM calls failed)")
    assert said == ("left out of this version: 1 failed item (2 LLM calls failed), and 4 chunks are indexed "
                    "without their claims (the claims call failed)")
    assert _left_out_said(1, 1, lambda n: f"{n} left out") == (
        "1 chunk is indexed without its claims (the claims call failed)")
    assert _left_out_said(3, 0, lambda n: f"{n} left out") == "3 failed items left out"


class HeldBack:
    """A scripted change source whose watcher holds back ``held``, the events of a burst not ended
    yet (``watch_events.FolderWatch.held``: a file written within debounce_ms of a stop)."""

    def __init__(self, recv) -> None:
        self.recv = recv
        self.held: set = set()

    def __aiter__(self):
        return self.recv.__aiter__()


async def _stopped_holding(corpus: Path, db: Path, settings, hold) -> dict:
    """The ``stopped`` line of a daemon stopped while its watcher held back the events
    ``hold()`` returns (``HeldBack``), ``hold`` run once the initial sync is over."""
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events)
    send, recv = scripted()
    source = HeldBack(recv)
    with anyio.fail_after(30):
        async with send, anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, source)
            await until(lambda: "health" in events.states())
            source.held = hold()
            daemon.stop()
    assert events[-1]["state"] == "stopped", events[-1]
    return events[-1]


async def test_a_change_the_watcher_held_back_at_a_stop_is_said_not_synced(corpus, tmp_path):
    # A file written 0.6 s before SIGTERM (debounce_ms 500 ms: its burst not handed over yet)
    # was left out, and the stopped line said "index is current"; the next start syncs it.
    def hold():
        new = corpus / "new.txt"
        new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        (corpus / ".hidden").write_text("not a document")
        return {(Change.added, str(new)), (Change.modified, str(new)),
                (Change.added, str(corpus / ".hidden"))}   # (the latter no document)

    stopped = await _stopped_holding(corpus, tmp_path / "w.db", make_settings(index=SMALL), hold)
    assert stopped["seen"] == 1, stopped
    assert stopped["message"] == ("1 change seen but not synced; the next start (or `streamrag index`) "
                                  "syncs what is left"), stopped


async def test_a_rename_held_back_at_a_stop_is_one_change_and_a_file_come_and_gone_none(corpus, tmp_path):
    # A rename (its two events) said "2 changes seen but not synced", where every other count
    # makes it one changed file; a file added and deleted within the burst (a temporary file),
    # which leaves the next start nothing to sync, said "1 change seen" of a current index.
    def hold():
        (corpus / "council.txt").rename(corpus / "council-2024.txt")
        temp = corpus / "draft.txt"   # (written and deleted: gone before the stop)
        return {(Change.deleted, str(corpus / "council.txt")), (Change.added, str(corpus / "council-2024.txt")),
                (Change.added, str(temp)), (Change.deleted, str(temp))}

    stopped = await _stopped_holding(corpus, tmp_path / "w.db", make_settings(index=SMALL), hold)
    assert stopped["seen"] == 1, stopped
    assert stopped["message"].startswith("1 change seen but not synced;"), stopped


async def test_a_stop_reads_a_few_megabytes_at_most_to_tell_the_renames_it_counts(corpus, tmp_path, monkeypatch):
    # A folder of 60 indexed 0.9 MB files renamed 0.3 s before Ctrl-C had each file read to tell
    # the renames the stopped line counts: the exit came 2.8 s after the signal, and a second
    # signal did not shorten it (no work under way). Past ``_STOP_READS_AT_MOST`` bytes read in
    # all (here the first file's size) no file is read: such a rename counts as its two changes.
    from streamrag import daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_STOP_READS_AT_MOST", (corpus / "council.txt").stat().st_size, raising=False)

    def hold():
        events = set()
        for name in ("council", "guild"):   # (read in name order: council-2024.txt first)
            (corpus / f"{name}.txt").rename(corpus / f"{name}-2024.txt")
            events |= {(Change.deleted, str(corpus / f"{name}.txt")), (Change.added, str(corpus / f"{name}-2024.txt"))}
        return events

    stopped = await _stopped_holding(corpus, tmp_path / "w.db", make_settings(index=SMALL), hold)
    assert stopped["seen"] == 3, stopped   # (council's rename read: 1; guild's not: 2)


async def test_a_file_the_watcher_never_passed_on_is_not_said_current(corpus, tmp_path):
    # A file saved in watchfiles' last step before Ctrl-C (its changes dropped when the stop is
    # set: never handed over, nor held) was neither synced nor counted, and the line said "index
    # is current". The line says what is known; the next start syncs the file. `--once` has no
    # watcher: its sync read the folder.
    def hold():
        (corpus / "new.txt").write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        return set()   # (the watcher saw nothing of it)

    stopped = await _stopped_holding(corpus, tmp_path / "w.db", make_settings(index=SMALL), hold)
    assert stopped["seen"] == 0 and stopped["message"] == "index is current as of the last change seen", stopped
    events = Events()
    await Daemon(make_settings(index=SMALL), tmp_path / "w.db", corpus, report=events).run(None)
    assert events[-1]["state"] == "stopped" and events[-1]["message"] == "index is current", events[-1]
    assert "new.txt" in {p for p, in sqlite3.connect(tmp_path / "w.db").execute("SELECT path FROM files")}


async def test_a_temporary_file_held_back_at_a_stop_leaves_the_index_current(corpus, tmp_path):
    def hold():
        temp = corpus / "draft.txt"
        return {(Change.added, str(temp)), (Change.modified, str(temp)), (Change.deleted, str(temp))}

    stopped = await _stopped_holding(corpus, tmp_path / "w.db", make_settings(index=SMALL), hold)
    assert stopped["message"] == CURRENT_AS_SEEN and stopped["seen"] == 0, stopped


async def test_a_folder_held_back_at_a_stop_counts_as_its_files(corpus, tmp_path):
    # (`mkdir sub && echo .. > sub/a.txt; mkdir empty` said "3 changes seen" of one file added)
    def hold():
        (corpus / "sub").mkdir()
        (corpus / "sub" / "a.txt").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
        (corpus / "empty").mkdir()
        return {(Change.added, str(corpus / "sub")), (Change.added, str(corpus / "sub" / "a.txt")),
                (Change.added, str(corpus / "empty"))}

    stopped = await _stopped_holding(corpus, tmp_path / "w.db", make_settings(index=SMALL), hold)
    assert stopped["seen"] == 1, stopped


async def test_a_folder_held_back_at_a_stop_is_listed_off_the_event_loop(corpus, tmp_path, monkeypatch):
    # A folder moved in just before a stop was listed on the event loop to count its files: at
    # 100,000 files, 1.7 s without signals or any other task (measured). The listing now waits,
    # in its worker thread, for a task on the loop to run: on the loop it would wait in vain.
    listing, loop_ran = threading.Event(), threading.Event()
    listed_in: list[bool] = []
    real = watched_folder.WatchedFolder.files_in

    def files_in(self, folder):
        listing.set()
        listed_in.append(loop_ran.wait(timeout=10))
        return real(self, folder)

    async def on_the_loop():
        while not listing.is_set():
            await anyio.sleep(0.01)
        loop_ran.set()

    def hold():
        (corpus / "sub").mkdir()
        (corpus / "sub" / "a.txt").write_text("Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
        return {(Change.added, str(corpus / "sub"))}

    monkeypatch.setattr(watched_folder.WatchedFolder, "files_in", files_in)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(on_the_loop)
            stopped = await _stopped_holding(corpus, tmp_path / "w.db", make_settings(index=SMALL), hold)
    assert listed_in == [True], listed_in
    assert stopped["seen"] == 1, stopped


@pytest.mark.parametrize("events", ["the folder", "the folder and its files"])
async def test_a_folder_deleted_held_back_at_a_stop_counts_as_its_indexed_files(corpus, tmp_path, events):
    # `rm -rf sub` of a folder of three indexed files within debounce_ms of a stop said "1 change
    # seen" (the folder's event alone: a polling watcher, a folder moved out), or 4 (inotify's
    # events of its files too); its sync deletes three files, as the queue would count them.
    sub = corpus / "sub"
    sub.mkdir()
    for n in range(3):
        (sub / f"n{n}.txt").write_text(f"Note {n}: Captain Oskar Lind sailed the Blue Heron to Kessel.\n")
    names = [str(p) for p in sorted(sub.iterdir())]

    def hold():
        shutil.rmtree(sub)
        return {(Change.deleted, str(sub))} | ({(Change.deleted, n) for n in names} if events != "the folder" else set())

    stopped = await _stopped_holding(corpus, tmp_path / "w.db", make_settings(index=SMALL), hold)
    assert stopped["seen"] == 3, stopped


async def test_a_stop_with_nothing_held_back_says_the_index_is_current(corpus, tmp_path):
    # (the held events of the index's own writes, and of its settings' prompt, leave it current)
    prompt = corpus / "my_prompt.md"
    prompt.write_text((REPO / "prompts" / "extract.md").read_text())
    settings = make_settings(index={**SMALL, "extraction_prompt": str(prompt)})
    db = corpus / ".streamrag" / "index.db"

    def hold():
        prompt.write_text(prompt.read_text() + "\n")
        return {(Change.modified, str(db)), (Change.added, f"{db}-wal"), (Change.modified, str(prompt))}

    stopped = await _stopped_holding(corpus, db, settings, hold)
    assert stopped["message"] == CURRENT_AS_SEEN and stopped["seen"] == 0, stopped


async def test_a_file_written_on_is_said_settling_once_and_synced_once_it_is_quiet(corpus, tmp_path, monkeypatch):
    # A log appended every 0.2 s: its first batch made a sync quiet_s after it while it was still
    # written (one batch alone), and every batch after a sync said "settling ... waiting 0.5s"
    # again. Now a file the extraction ahead found written as it waited is waited for as one in
    # two batches in a row, and the wait is said once while it is written on (the syncs by the
    # cap between), again once a sync came after a quiet period.
    # (Both clocks the test's: the daemon's quiet periods in its steps, and its wall clock held
    # just after each write, so the file is young whenever the daemon looks.)
    import streamrag.daemon as daemon_module

    quiet = 0.5
    looks: list[float] = []   # each quiet period's look at the files written on: how long it waits yet
    real_wait = daemon_module._settle_wait

    def spy(mtimes_ns, young_s, now):
        wait = real_wait(mtimes_ns, young_s, now)
        if young_s == quiet:   # (not the extraction's look, for debounce_ms)
            looks.append(wait)
        return wait

    monkeypatch.setattr(daemon_module, "_settle_wait", spy)
    stats: list[int] = []   # the daemon's looks at the files' times (``_modified``), counted
    real_modified = daemon_module._modified

    def counted(paths):
        stats.append(len(paths))
        return real_modified(paths)

    monkeypatch.setattr(daemon_module, "_modified", counted)
    settings = make_settings(index=SMALL, watch={"quiet_s": quiet, "debounce_ms": 300})
    log = corpus / "log.txt"
    written = 0

    def write(wall: WallClock | None = None) -> WallClock:
        nonlocal written
        with log.open("a") as f:
            f.write(f"Entry {written}: Bo Lund paid the toll at Port Vell.\n")
        written += 1
        young = log.stat().st_mtime_ns / 1e9 + 0.1
        if wall is None:
            return WallClock(monkeypatch, young)
        wall.now = young
        return wall

    def settling() -> list[dict]:
        return [e for e in events if e["state"] == "settling"]

    async with running(settings, tmp_path / "l.db", corpus) as (daemon, events, send):
        clock = DaemonClock(monkeypatch)
        queued: list[int] = []   # the batches queued, their extraction ahead done
        queue = daemon._queue

        async def queueing(batch, **kwargs):
            await queue(batch, **kwargs)
            queued.append(1)

        daemon._queue = queueing
        async with send:
            wall = write()
            await send.send({(Change.added, str(log))})
            await until(lambda: len(settling()) == 1)
            write(wall)                          # written as the extraction waits for it
            await until(lambda: len(queued) == 1)
            clock.now += 1                       # quiet_s without a batch, the file written on
            await until(lambda: looks or daemon.syncs == 2)
            assert looks and looks[-1] > 0 and daemon.syncs == 1, (looks, events.states())
            clock.now += daemon_module._MAX_WAIT_QUIETS * quiet   # the cap: synced as it grows
            await until(lambda: daemon.syncs == 2)
            mark = len(events)
            write(wall)                          # its next batch, written on since the sync
            looked = len(stats)
            await send.send({(Change.modified, str(log))})
            await until(lambda: len(stats) > looked)   # (the extraction's first look: it waits)
            write(wall)
            await until(lambda: len(queued) == 2)
            assert "extracting" not in events.states(mark)   # (written as it waited: left to the sync)
            assert len(settling()) == 1, [e["message"] for e in settling()]
            clock.now += 100                     # quiet at last: synced
            wall.now += 100
            await until(lambda: daemon.syncs == 3)
            mark = len(events)
            wall = write(wall)                   # written again later: a wait said anew
            await send.send({(Change.modified, str(log))})
            await until(lambda: len(settling()) == 2)
            daemon.stop()


async def _scripted_watch(tmp_path, monkeypatch, awatch, readable, walked=None, *, walk=True,
                          refused=False, debounce_ms=50) -> list:
    """The batches ``watch_folder`` yields over ``tmp_path`` with watchfiles scripted by ``awatch``
    and the folders of ``readable`` (path -> may be read) refused where False: as root nothing is
    refused, so the refusals, with ``walk`` the walk's (``unreadable_folders``) too, are made;
    with ``refused`` (and no ``walk``) the real walk's, by its listing (``_refused``). ``walked``
    (a list) records, at each walk, whether the watcher had not started yet."""
    import watchfiles
    from streamrag import watch_events
    from streamrag.config import WatchSettings

    watch = watch_folder(tmp_path, WatchSettings(debounce_ms=debounce_ms), anyio.Event())

    def unreadable_folders(root, top=None):
        if walked is not None:
            walked.append(not getattr(watch, "started", anyio.Event()).is_set())
        return {path for path, ok in readable.items()
                if not ok and Path(top or root) in Path(path).parents and os.path.isdir(path)}

    monkeypatch.setattr(watchfiles, "awatch", awatch)
    monkeypatch.setattr(watch_events, "_readable", lambda path: readable.get(os.fspath(path), True))
    if walk:
        monkeypatch.setattr(watch_events, "unreadable_folders", unreadable_folders)
    elif refused:
        _refused(monkeypatch, readable)
    batches = []
    with anyio.fail_after(20):
        async for changes in watch:
            batches.append(changes)
    return batches


def _refused(monkeypatch, readable) -> None:
    """``os.scandir`` (``os.walk``'s listing) refuses the folders of ``readable`` (path -> may be
    read) where False, as it refuses one chmod 000 to all but root."""
    listing = os.scandir

    def scandir(path="."):
        if readable.get(os.fspath(path), True) is False:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return listing(path)

    monkeypatch.setattr(os, "scandir", scandir)


async def test_a_folder_readable_again_is_followed_by_a_restarted_watcher(tmp_path, monkeypatch):
    # `mkdir x; chmod 000 x` (or a folder unreadable at the start), then `chmod 755 x`: watchfiles
    # skips a folder it may not read (ignore_permission_denied) and never follows it later, so
    # files written in x after the chmod were never synced (until the next start). Now the
    # folder's chmod restarts the watcher, said REOPENED (the daemon then syncs the folder whole).
    # As root nothing is refused, so watchfiles is scripted and the refusal is made.
    from streamrag import watch_events

    locked = tmp_path / "x"
    locked.mkdir()
    readable = {str(locked): False}
    starts: list[int] = []

    async def awatch(*paths, stop_event, **kwargs):
        starts.append(len(starts))
        if len(starts) == 1:
            yield {(Change.added, str(locked))}
            readable[str(locked)] = True      # `chmod 755 x`
            yield {(Change.modified, str(locked))}
        else:                                 # (started again: the test ends)
            stop_event.set()
            return
            yield set()

    batches = await _scripted_watch(tmp_path, monkeypatch, awatch, readable, walk=False)
    assert {(watch_events.REOPENED, str(locked))} in batches, batches
    assert len(starts) == 2, starts


async def test_a_folder_readable_again_syncs_the_folder_whole_without_an_error(corpus, tmp_path):
    # The watcher's REOPENED (above): what changed while it restarted, in that folder or
    # elsewhere, is found by a sync of the whole folder; nothing failed, so no error line.
    from streamrag import watch_events

    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    (corpus / "x").mkdir()
    async with running(settings, tmp_path / "p.db", corpus) as (daemon, events, send):
        mark = len(events)
        (corpus / "x" / "in.md").write_text("Ada Osk met Bram Tell at the quay.\n")
        async with send:
            await send.send({(watch_events.REOPENED, str(corpus / "x"))})
            await until(lambda: daemon.syncs == 2)
    (queued,) = [e for e in events[mark:] if e["state"] == "queued"]
    assert queued["whole_folder"], queued["message"]
    assert not [e for e in events[mark:] if e["state"] in ("error", "warning")], events[mark:]
    assert db_count(tmp_path / "p.db", "SELECT count(*) FROM documents WHERE path = 'x/in.md'") == 1


async def test_a_followed_folder_made_unreadable_and_readable_again_restarts_nothing(tmp_path, monkeypatch):
    # `chmod 000 x; chmod 755 x` of a folder the watcher follows: its inotify watch stays (the
    # kernel checks the permission only as the watch is added), so files written in x after are
    # seen; the watcher restarted all the same, and the daemon synced the whole folder (10,000
    # files: 2-4 s of stats) at each such chmod. Only a folder that came in unreadable (made,
    # moved in) or was unreadable at the start is not followed.
    followed = tmp_path / "x"
    followed.mkdir()
    readable = {str(followed): True}
    starts: list[int] = []

    async def awatch(*paths, stop_event, **kwargs):
        starts.append(len(starts))
        if len(starts) == 1:
            readable[str(followed)] = False   # `chmod 000 x`
            yield {(Change.modified, str(followed))}
            readable[str(followed)] = True    # `chmod 755 x`
            yield {(Change.modified, str(followed))}
            yield {(Change.added, str(followed / "b.txt"))}
        stop_event.set()

    batches = await _scripted_watch(tmp_path, monkeypatch, awatch, readable, walk=False)
    assert not [b for b in batches if any(int(kind) < 0 for kind, _ in b)], batches
    assert starts == [0], starts
    assert {(Change.added, str(followed / "b.txt"))} in batches, batches


async def test_an_unreadable_folder_inside_one_moved_in_is_followed_once_readable(tmp_path, monkeypatch):
    # `mv ~/m DIR/` where m/s is unreadable (chmod 000): watchfiles says m added, follows m and
    # skips m/s; the `chmod 755 m/s` was an event on a folder never noted, so files written in
    # m/s were not synced until the next start. The folder added is looked through for them.
    # (Its move restarts the watcher too: the test below.)
    from streamrag import watch_events

    moved, inner = tmp_path / "m", tmp_path / "m" / "s"
    readable = {str(inner): False}
    starts: list[int] = []

    async def awatch(*paths, stop_event, **kwargs):
        starts.append(len(starts))
        if len(starts) == 1:
            yield set()                      # (a second without events: the start's walk)
            inner.mkdir(parents=True)        # `mv ~/m DIR/`
            yield {(Change.added, str(moved))}
        elif len(starts) == 2:
            readable[str(inner)] = True      # `chmod 755 m/s`
            yield {(Change.modified, str(inner))}
        stop_event.set()

    batches = await _scripted_watch(tmp_path, monkeypatch, awatch, readable)
    assert {(watch_events.REOPENED, str(inner))} in batches, batches
    assert len(starts) == 3, starts


async def test_a_folder_moved_in_holding_an_unreadable_one_restarts_the_watcher_to_watch_the_rest(
        tmp_path, monkeypatch):
    # `mv ~/m DIR/` where m/s is unreadable (chmod 000) and m/u is listed after it: watchfiles'
    # walk of m stopped at m/s, so a file written in m/u was never synced (measured, watchfiles
    # 1.3, as root without CAP_DAC_OVERRIDE), and a stop said the index was current. The move
    # restarts the watcher (REOPENED: the whole folder synced), with m/u given beside the root.
    from streamrag import watch_events

    moved, inner, after = tmp_path / "m", tmp_path / "m" / "s", tmp_path / "m" / "u"
    readable = {str(inner): False}
    given: list[tuple] = []

    async def awatch(*paths, stop_event, **kwargs):
        given.append(paths)
        if len(given) == 1:
            yield set()                      # (a second without events: the start's walk)
            inner.mkdir(parents=True)        # `mv ~/m DIR/`
            after.mkdir()
            yield {(Change.added, str(moved))}
        stop_event.set()

    batches = await _scripted_watch(tmp_path, monkeypatch, awatch, readable)
    (reopened,) = [b for b in batches if any(int(kind) == watch_events.REOPENED for kind, _ in b)]
    assert reopened == {(watch_events.REOPENED, str(moved)), (Change.added, str(moved))}, batches
    assert len(given) == 2 and str(after) in map(str, given[1]), given


@pytest.mark.parametrize("removed", ["x", "m"])
async def test_an_unreadable_folder_removed_and_made_again_readable_restarts_nothing(tmp_path, monkeypatch, removed):
    # An empty x unreadable (chmod 000) at the start, `rmdir x` (or m/x's m moved away), then a
    # readable x made under the name: the watcher follows the new folder as it is made, but the
    # old one stayed noted unreadable, so the `mkdir` was a REOPENED: a restart and a sync of the
    # whole folder for nothing. A folder deleted, and those under it, are no longer noted.
    top = tmp_path / removed
    locked = tmp_path / "m" / "x" if removed == "m" else top
    locked.mkdir(parents=True)
    readable = {str(locked): False}
    starts: list[int] = []

    async def awatch(*paths, stop_event, **kwargs):
        starts.append(len(starts))
        if len(starts) == 1:
            yield set()                      # (a second without events: the start's walk)
            shutil.rmtree(top)               # `rmdir x` (or `mv m ~/`)
            yield {(Change.deleted, str(top))}
            locked.mkdir(parents=True)       # `mkdir x` (or `mkdir -p m/x`): readable
            readable[str(locked)] = True
            yield {(Change.added, str(top))} | {(Change.added, str(locked))}
        stop_event.set()

    batches = await _scripted_watch(tmp_path, monkeypatch, awatch, readable)
    assert not [b for b in batches if any(int(kind) < 0 for kind, _ in b)], batches
    assert starts == [0], starts


async def test_a_folder_unreadable_as_the_watcher_starts_is_followed_once_readable_before_its_first_batch(
        tmp_path, monkeypatch):
    # x unreadable (chmod 000) as watchfiles starts (it skips x), `chmod 755 x` before the
    # watcher's first batch: the walk for unreadable folders ran at that batch alone, found x
    # readable, and x's chmod was an event on a folder never noted: files written in x were not
    # synced until the next start. The folder is walked before the watcher starts too.
    from streamrag import watch_events

    locked = tmp_path / "x"
    locked.mkdir()
    readable = {str(locked): False}
    starts: list[int] = []
    walked_before_start: list[bool] = []

    async def awatch(*paths, stop_event, **kwargs):
        starts.append(len(starts))
        if len(starts) == 1:
            readable[str(locked)] = True      # `chmod 755 x`, watchfiles started
            yield {(Change.modified, str(locked))}
        stop_event.set()

    batches = await _scripted_watch(tmp_path, monkeypatch, awatch, readable, walked_before_start)
    assert {(watch_events.REOPENED, str(locked))} in batches, batches
    assert len(starts) == 2, starts
    assert walked_before_start[0], walked_before_start   # (the daemon's initial sync waits for ``started``)


async def test_the_initial_sync_waits_for_the_watcher_to_start(corpus, tmp_path):
    # The watcher starts before the initial sync, so that an edit made during its scan is seen;
    # it walks the folder for the folders it cannot read first (in a worker thread), and the sync
    # began meanwhile. The daemon waits for the source's ``started`` (FolderWatch's).
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    daemon = Daemon(settings, tmp_path / "w.db", corpus, report=Events())
    started = anyio.Event()
    seen: list[bool] = []

    class Source:
        def __init__(self):
            self.started = started

        async def __aiter__(self):
            await anyio.to_thread.run_sync(lambda: None)   # (the walk before the watcher)
            started.set()
            await daemon.stop_event.wait()
            return
            yield set()

    sync = daemon._sync

    async def first_sync(reason, **kwargs):
        seen.append(started.is_set())
        return await sync(reason, **kwargs)

    daemon._sync = first_sync
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, Source())
            await until(lambda: daemon.syncs == 1)
            daemon.stop()
    assert seen[:1] == [True], seen


@pytest.mark.parametrize("rel", [".cache/x", "node_modules/x", "x"])
async def test_a_hidden_or_excluded_folder_readable_again_restarts_the_watcher_too(tmp_path, monkeypatch, rel):
    # A hidden or excluded folder unreadable at the start (x) or made so (y, moved in unreadable),
    # then `chmod 755`: it was left out of the walks and restarted nothing. But watchfiles stops
    # its walk at any folder it cannot read, so every folder after it went unwatched (measured,
    # watchfiles 1.3, `chmod 000 .git/locked`: files written in sub/ gave no event, and after
    # `chmod 755 .git/locked` none still, till watch was started again). Its restart and the
    # whole-folder sync bring them back, whatever its name; node_modules is left out by
    # index.exclude, as a user's settings have it.
    from streamrag import watch_events

    at_start, moved_in = tmp_path / rel, tmp_path / (rel[:-1] + "y")
    at_start.mkdir(parents=True)
    readable = {str(at_start): False, str(moved_in): False}
    _refused(monkeypatch, readable)
    starts: list[int] = []

    async def awatch(*paths, stop_event, **kwargs):
        starts.append(len(starts))
        if len(starts) == 1:
            moved_in.mkdir()                    # `mv ~/y DIR/...`, unreadable
            yield {(Change.added, str(moved_in))}
            readable[str(moved_in)] = True      # `chmod 755 y`
            yield {(Change.modified, str(moved_in))}
        elif len(starts) == 2:
            readable[str(at_start)] = True      # `chmod 755 x`
            yield {(Change.modified, str(at_start))}
        stop_event.set()

    batches = await _scripted_watch(tmp_path, monkeypatch, awatch, readable, walk=False, refused=True)
    reopened = [b for b in batches if any(int(kind) == watch_events.REOPENED for kind, _ in b)]
    assert reopened == [{(watch_events.REOPENED, str(moved_in))}, {(watch_events.REOPENED, str(at_start))}], \
        batches
    assert starts == [0, 1, 2], starts


@pytest.mark.parametrize("module", ["nlp", "loader"])
async def test_an_offline_watch_after_an_upgrade_says_what_it_did_again_once(corpus, tmp_path, monkeypatch, module):
    # An offline index built by an older streamrag (its NLP extractor's or loader's VERSION
    # earlier): watch's initial sync extracted every chunk (or read every document) again and its
    # idle line never said why; `index` says it (``cli._applied``). Said once, as index says it.
    from streamrag import loader, nlp

    versioned = {"nlp": nlp, "loader": loader}[module]
    said = {"nlp": "chunks extracted again as this version of streamrag extracts them",
            "loader": "documents read again as this version of streamrag reads them"}[module]
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.05})
    db = tmp_path / "u.db"
    upgraded = versioned.VERSION
    monkeypatch.setattr(versioned, "VERSION", str(int(upgraded) - 1))   # the streamrag that built it
    await sync([corpus], settings, db, root=corpus)
    monkeypatch.setattr(versioned, "VERSION", upgraded)
    async with running(settings, db, corpus) as (daemon, events, send):
        (corpus / "new.md").write_text("Ada Osk met Bram Tell at the quay.\n")
        async with send:
            await send.send({(Change.added, str(corpus / "new.md"))})
            await until(lambda: daemon.syncs == 2)
    idle = [e for e in events if e["state"] == "idle"]
    assert len(idle) == 2, events.states()
    assert idle[0]["message"].endswith(f"; {said}"), idle[0]["message"]
    assert idle[0][{"nlp": "extraction_upgraded", "loader": "reading_upgraded"}[module]], idle[0]
    assert "again as this version" not in idle[1]["message"], idle[1]["message"]
    assert not idle[1]["extraction_upgraded"] and not idle[1]["reading_upgraded"], idle[1]


async def test_the_events_of_the_batch_that_finds_a_folder_readable_again_go_with_its_reopened(tmp_path, monkeypatch):
    # The batch in which a folder is found readable again (and the burst held before it) was
    # dropped for the whole-folder sync that REOPENED makes; a stop before that sync then
    # counted none of their files ("the whole folder not synced yet", pending 0, seen 0). They
    # go with the REOPENED now, which the daemon queues with the whole folder.
    from streamrag import watch_events

    locked = tmp_path / "x"
    locked.mkdir()
    readable = {str(locked): False}
    starts: list[int] = []
    before, beside = (Change.added, str(tmp_path / "a.md")), (Change.added, str(tmp_path / "b.md"))

    async def awatch(*paths, stop_event, **kwargs):
        starts.append(len(starts))
        if len(starts) == 1:
            yield {before}                    # (held in the burst, or handed over: either way seen)
            readable[str(locked)] = True      # `chmod 755 x`, b.md written with it
            yield {(Change.modified, str(locked)), beside}
        stop_event.set()

    batches = await _scripted_watch(tmp_path, monkeypatch, awatch, readable)
    (reopened,) = [b for b in batches if (watch_events.REOPENED, str(locked)) in b]
    assert beside in reopened, batches
    assert any(before in b for b in batches), batches


@pytest.mark.parametrize("restart", ["reopened", "rescan", "replaced"])
async def test_a_stop_before_the_sync_a_reopened_makes_counts_the_files_that_came_with_it(corpus, tmp_path, restart):
    # (the daemon's side of the test above, and of a RESCAN's or REPLACED's burst: queued with the
    # whole folder, they are counted)
    from streamrag import watch_events

    settings = make_settings(index=SMALL, watch={"quiet_s": 60})
    (corpus / "x").mkdir()
    event = {"reopened": (watch_events.REOPENED, str(corpus / "x")),
             "rescan": (watch_events.RESCAN, "RuntimeError: scripted failure"),
             "replaced": (watch_events.REPLACED, str(corpus))}[restart]
    async with running(settings, tmp_path / "r.db", corpus) as (daemon, events, send):
        (corpus / "b.md").write_text("Ada Osk met Bram Tell at the quay.\n")
        async with send:
            await send.send({event, (Change.added, str(corpus / "b.md"))})
            await until(lambda: "queued" in events.states())
            daemon.stop()
    (stopped,) = [e for e in events if e["state"] == "stopped"]
    assert stopped["pending"] == 1 and "the whole folder not synced yet (1 new or changed file)" in stopped["message"], \
        stopped


def test_the_folders_given_beside_the_root_are_those_a_walk_stopped_by_an_unreadable_one_would_miss():
    # watchfiles (notify) stops adding watches at the first folder it cannot read as it walks
    # the root: the folders after it went unwatched. Given beside the root: the readable folders
    # each unreadable one lies in, and the folders in those (and in the root) that hold none,
    # each walked whole; not every folder (not .git/objects/ab, notes/sub/in).
    from streamrag import watch_events

    root = "/r"
    tree = {"/r": [".git", "notes", "build", "a"], "/r/.git": ["objects", "locked", "hooks"],
            "/r/.git/objects": ["ab"], "/r/notes": ["sub", "deep"], "/r/notes/sub": ["in"],
            "/r/notes/deep": ["x", "locked2"], "/r/a": ["locked3"]}
    folders_in = {top: [f"{top}/{name}" for name in names] for top, names in tree.items()}.get
    unreadable = {"/r/.git/locked", "/r/notes/deep/locked2", "/r/a/locked3"}
    paths = watch_events.extra_watch_paths(Path(root), unreadable, lambda folder: folders_in(folder, []))
    assert paths == ["/r/.git", "/r/.git/hooks", "/r/.git/objects", "/r/a", "/r/build", "/r/notes",
                     "/r/notes/deep", "/r/notes/deep/x", "/r/notes/sub"], paths
    assert watch_events.extra_watch_paths(Path(root), {"/r/build"}, lambda folder: folders_in(folder, [])) == \
        ["/r/.git", "/r/a", "/r/notes"]   # (in the root: its other folders alone)
    assert watch_events.extra_watch_paths(Path(root), set(), lambda folder: folders_in(folder, [])) == []


_WATCH_PAST_A_LOCKED_FOLDER = """
import json, os, sys
from pathlib import Path
import anyio
from streamrag.config import WatchSettings
from streamrag.watch_events import watch_folder

root = Path(sys.argv[1])
if os.access(root / ".git" / "locked", os.R_OK):
    print(json.dumps("readable"))   # (the permission is not checked for this user)
    sys.exit()
written = ["sub/y.md", "build/b.md", "zz/deep/z.md", "a.md"]   # a.md last: in the root, always watched


async def main():
    stop = anyio.Event()
    watch = watch_folder(root, WatchSettings(debounce_ms=50), stop)
    seen = set()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            async def write():
                await watch.started.wait()
                for rel in written:
                    (root / rel).write_text("x")

            tg.start_soon(write)
            async for changes in watch:
                seen |= {os.path.relpath(path, root) for _kind, path in changes}
                if "a.md" in seen:   # (inotify's events come in order: those written before it are in)
                    stop.set()
    print(json.dumps(sorted(seen & set(written))))

anyio.run(main)
"""


def test_the_real_watcher_follows_the_folders_after_one_it_cannot_read(tmp_path):
    # notes/.git/locked chmod 000 as watch starts: watchfiles 1.3 (notify) stopped adding watches
    # there, so files written in sub/, build/ and zz/deep/ gave no event, and a stop said "index is
    # current as of the last change seen". Root reads every folder, so it runs without the
    # capabilities that let it (setpriv), in a subprocess.
    for rel in [".git/locked", ".git/objects", "sub", "build", "zz/deep"]:
        (tmp_path / rel).mkdir(parents=True)
    (tmp_path / ".git" / "locked").chmod(0)
    prefix = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root reads a folder chmod 000, and setpriv, to drop that, is not installed")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run([*prefix, sys.executable, "-c", _WATCH_PAST_A_LOCKED_FOLDER, str(tmp_path)],
                              capture_output=True, text=True, env=env, timeout=120)
    finally:
        (tmp_path / ".git" / "locked").chmod(0o755)
    if prefix and done.returncode != 0 and "setpriv" in done.stderr:
        pytest.skip(f"setpriv cannot drop the capabilities here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    if seen == "readable":
        pytest.skip("this user reads a folder chmod 000")
    assert seen == ["a.md", "build/b.md", "sub/y.md", "zz/deep/z.md"], seen


@pytest.mark.parametrize("asked, polls", [(None, False), ("1", True), ("true", True), ("false", False),
                                          ("Disabled", False), ("", False)])
async def test_watchfiles_force_polling_set_makes_the_watcher_poll(tmp_path, monkeypatch, asked, polls):
    # force_polling=False, always given, overrode WATCHFILES_FORCE_POLLING, which watchfiles
    # documents (a network mount, a container's bind mount: no events reach the machine, and
    # no file written was ever synced). Read as watchfiles reads it; unset, events as before.
    given = []

    async def awatch(*paths, stop_event, force_polling, **kwargs):
        given.append(force_polling)
        stop_event.set()
        yield set()

    if asked is None:
        monkeypatch.delenv("WATCHFILES_FORCE_POLLING", raising=False)
    else:
        monkeypatch.setenv("WATCHFILES_FORCE_POLLING", asked)
    await _scripted_watch(tmp_path, monkeypatch, awatch, {})
    assert given == [polls], given
@pytest.mark.parametrize("restart", ["rescan", "replaced"])
async def test_the_burst_held_at_a_watcher_restart_goes_with_its_event(tmp_path, monkeypatch, restart):
    # A RESCAN (watchfiles failed) or a REPLACED (the folder made again) restarted the watcher
    # with a new burst, so the one held was dropped for the whole-folder sync the event makes: a
    # stop before that sync counted none of its files, as a REOPENED's did before 78b348b7.
    from streamrag import watch_events

    held = (Change.added, str(tmp_path / "a.md"))
    identity = [watch_events.folder_identity(tmp_path)]
    monkeypatch.setattr(watch_events, "folder_identity", lambda root: identity[0])
    starts: list[int] = []

    async def awatch(*paths, stop_event, **kwargs):
        starts.append(len(starts))
        if len(starts) == 1:
            yield {held}   # (a minute's debounce_ms: held in the burst, never over by itself)
            if restart == "rescan":
                raise RuntimeError("scripted failure")
            identity[0] = ("another", "folder")   # `rm -rf DIR && mkdir DIR`, the watch on the old one
            yield {(Change.deleted, str(tmp_path / "gone.md"))}
        stop_event.set()

    batches = await _scripted_watch(tmp_path, monkeypatch, awatch, {}, debounce_ms=60_000)
    event = watch_events.RESCAN if restart == "rescan" else watch_events.REPLACED
    (restarted,) = [b for b in batches if any(kind == event for kind, _ in b)]
    assert held in restarted, batches
