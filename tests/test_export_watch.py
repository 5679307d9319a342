"""`export` into the folder a watch runs on: what the watch says of it."""

from __future__ import annotations

import os
import time

import anyio
import pytest
from watchfiles import Change

from conftest import make_settings
from streamrag.store import Store
from test_daemon import SMALL, _indexed_paths, export_json, running, until

pytestmark = pytest.mark.anyio

SAID = "x.txt: written by `streamrag export`, the index's own output, not a document; nothing to index"


async def test_an_export_written_again_into_the_watched_folder_is_said_again(corpus, tmp_path):
    # The watch said no warning the last sync had said, to keep a file that cannot be indexed from
    # being named by every sync: an export written again (a cron job's `export x.txt`) was said
    # for its first write only. Now each write of it is said again; a sync for another file is not.
    # An export was also queued, though never indexed: "1 file (1 added); 1 pending", and a sync
    # for nothing, at each export. Now it queues nothing and its line is said at once.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})   # offline: fast
    db = tmp_path / "b.db"
    (corpus / "blank.txt").write_text("", encoding="utf-8")   # (said by every sync's scan)
    async with running(settings, db, corpus) as (daemon, events, send):
        start = len(events)
        async with send:
            for said, change in ((1, Change.added), (2, Change.modified)):
                export_json(db, corpus / "x.txt")
                old = time.time() - 10 * said   # (saved a while ago: not waited on as still written)
                os.utime(corpus / "x.txt", (old, old))
                await send.send({(change, str(corpus / "x.txt"))})
                await until(lambda: [e["message"] for e in events[start:] if e["state"] == "warning"] == [SAID] * said)
            assert daemon.syncs == 1 and not daemon.pending, (daemon.syncs, daemon.pending)
            assert "queued" not in events.states(start), events[start:]
            (corpus / "notes.txt").write_text("Mira Osk chaired the Harbor Council meeting.\n", encoding="utf-8")
            await send.send({(Change.added, str(corpus / "notes.txt"))})
            await until(lambda: daemon.syncs == 2)
    warnings = [e["message"] for e in events[start:] if e["state"] == "warning"]
    assert warnings == [SAID, SAID], warnings
    assert [e["message"] for e in events if "blank.txt" in e["message"]] == ["blank.txt: empty file, nothing to index"], events
    assert "x.txt" not in _indexed_paths(db) and "notes.txt" in _indexed_paths(db)


async def test_an_export_written_again_is_said_again_by_a_sync_of_the_whole_folder(corpus, tmp_path):
    # 7f97e32 said an export again only when its own name was queued: a sync of the whole folder
    # (".": the watcher restarted, the folder back) read an export written again and said nothing.
    from streamrag.watch_events import RESCAN

    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})
    db = tmp_path / "b.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        start = len(events)
        async with send:
            # (its own event said at once, no sync; a sync of the whole folder says it again)
            for said, syncs, change in ((1, 1, (Change.added, str(corpus / "x.txt"))), (2, 2, (RESCAN, "boom"))):
                export_json(db, corpus / "x.txt")
                old = time.time() - 10 * said
                os.utime(corpus / "x.txt", (old, old))
                await send.send({change})
                await until(lambda: daemon.syncs == syncs
                            and [e["message"] for e in events[start:] if e["state"] == "warning"] == [SAID] * said)
            await send.send({(RESCAN, "boom again")})   # (x.txt as it was: not said again)
            await until(lambda: daemon.syncs == 3)
    warnings = [e["message"] for e in events[start:] if e["state"] == "warning"]
    assert warnings == [SAID, SAID], warnings
    assert "x.txt" not in _indexed_paths(db)


async def test_an_export_cut_short_in_the_watched_folder_is_queued_for_the_sync_to_tell(corpus, tmp_path):
    # Only a whole export is passed over at its event: one cut short (`export - > x.txt` still
    # written, or stopped) may be written on yet, so it is queued, and the sync after it settles
    # says what it is then.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})
    db = tmp_path / "b.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        export_json(db, tmp_path / "whole.json")
        data = (tmp_path / "whole.json").read_bytes()
        (corpus / "x.txt").write_bytes(data[:len(data) // 2])
        old = time.time() - 10
        os.utime(corpus / "x.txt", (old, old))
        start = len(events)
        async with send:
            await send.send({(Change.added, str(corpus / "x.txt"))})
            await until(lambda: daemon.syncs == 2)
    assert "queued" in events.states(start)
    warnings = [e["message"] for e in events[start:] if e["state"] == "warning"]
    assert len(warnings) == 1 and "x.txt: written by `streamrag export` and cut short" in warnings[0], warnings
    assert "x.txt" not in _indexed_paths(db)


async def test_an_export_written_while_a_sync_runs_is_said_once(corpus, tmp_path, monkeypatch):
    # An export's line is said at its event, and the next sync's scan, which meets it, does not
    # say it again (``warned``). One written while a sync ran, after its scan, was said again by the
    # next sync, for another file: that sync replaced ``warned`` with its own scan's lines.
    from streamrag.pipeline import Indexer

    gate = anyio.Event()
    real_run = Indexer.run

    async def held_run(self, paths):   # (the sync's scan done, held before it is said)
        result = await real_run(self, paths)
        await gate.wait()
        return result

    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})   # offline: fast
    db = tmp_path / "b.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        monkeypatch.setattr(Indexer, "run", held_run)
        start = len(events)
        async with send:
            (corpus / "n1.txt").write_text("Mira Osk chaired the Harbor Council meeting.\n", encoding="utf-8")
            await send.send({(Change.added, str(corpus / "n1.txt"))})
            await until(lambda: daemon._syncing)   # (a sync under way, n1.txt's)
            export_json(db, corpus / "x.txt")
            old = time.time() - 10
            os.utime(corpus / "x.txt", (old, old))
            await send.send({(Change.added, str(corpus / "x.txt"))})
            await until(lambda: "warning" in events.states(start))
            gate.set()
            await until(lambda: daemon.syncs == 2)
            (corpus / "n2.txt").write_text("Bo Lund paid the toll at Kessel.\n", encoding="utf-8")
            await send.send({(Change.added, str(corpus / "n2.txt"))})
            await until(lambda: daemon.syncs == 3)
    warnings = [e["message"] for e in events[start:] if e["state"] == "warning"]
    assert warnings == [SAID], warnings


async def test_an_export_among_many_new_notes_queues_nothing_for_it(corpus, tmp_path):
    # Of a batch's new files, the first 16 (EXPORT_LOOKS) were opened to tell an export, of any
    # kind: an export written beside 20 new notes (a cron job's export and a sync tool's pull at
    # once) was past them, queued ("21 files (21 added)") and synced for nothing. Now the notes
    # do not count: only files that open as an export does.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})   # offline: fast
    db = tmp_path / "b.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        export_json(db, corpus / "x.txt")
        notes = [corpus / f"note{n:02}.txt" for n in range(20)]
        for n, note in enumerate(notes):
            note.write_text(f"Mira Osk logged barge {n} at Port Vell.\n", encoding="utf-8")
        old = time.time() - 10   # (saved a while ago: not waited on as still written)
        for path in (*notes, corpus / "x.txt"):
            os.utime(path, (old, old))
        start = len(events)
        async with send:
            # (a list, the export last: past the first 16 new files, whatever a set's order)
            await send.send([*((Change.added, str(note)) for note in notes), (Change.added, str(corpus / "x.txt"))])
            await until(lambda: daemon.syncs == 2)
    queued = [e for e in events[start:] if e["state"] == "queued"]
    assert [e["files"] for e in queued] == [len(notes)], queued
    assert [e["message"] for e in events[start:] if e["state"] == "warning"] == [SAID]
    assert "x.txt" not in _indexed_paths(db) and "note19.txt" in _indexed_paths(db)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_the_export_check_reads_no_fifo_made_since_the_stat(tmp_path):
    # Every new file's first bytes are read to tell an export (``_opens_as_export``), opened
    # without waiting, as a FIFO may have been made under its name since its stat. Opened so, a
    # FIFO with a writer gave its data to the check, which read it away from its reader: it is
    # not read now, nor is anything but a regular file.
    from streamrag.daemon import _opens_as_export

    fifo = tmp_path / "x.txt"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(writer, b"the reader's data\n")
        assert not _opens_as_export(fifo)
        assert os.read(reader, 100) == b"the reader's data\n"
    finally:
        os.close(writer)
        os.close(reader)


async def test_the_export_check_reads_new_files_off_the_event_loop(corpus, tmp_path, monkeypatch):
    # Each new file's first bytes are read to tell an export (``_opens_as_export``). A batch of
    # fewer than 100 events was looked at on the event loop, these reads with it: on a slow mount
    # (each open 0.5 s) 4 new files held the loop, its signals and the other tasks, 2 s. Now they
    # are read in a worker thread, whatever the batch's size.
    import threading

    from streamrag import daemon as daemon_module

    read_on: list[int] = []
    real = daemon_module._opens_as_export

    def opens_as_export(path):
        read_on.append(threading.get_ident())
        return real(path)

    monkeypatch.setattr(daemon_module, "_opens_as_export", opens_as_export)
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})   # offline: fast
    db = tmp_path / "b.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        loop_thread = threading.get_ident()
        export_json(db, corpus / "x.txt")
        (corpus / "note.txt").write_text("Mira Osk logged the barge at Port Vell.\n", encoding="utf-8")
        old = time.time() - 10
        for path in (corpus / "x.txt", corpus / "note.txt"):
            os.utime(path, (old, old))
        start = len(events)
        async with send:
            await send.send({(Change.added, str(corpus / "x.txt")), (Change.added, str(corpus / "note.txt"))})
            await until(lambda: daemon.syncs == 2)
    assert len(read_on) == 2 and loop_thread not in read_on, (read_on, loop_thread)
    assert [e["message"] for e in events[start:] if e["state"] == "warning"] == [SAID]
    assert [e["files"] for e in events[start:] if e["state"] == "queued"] == [1]


async def test_past_the_exports_told_at_their_event_the_sync_tells_them(corpus, tmp_path):
    # A batch's new files that open as an export are told at its event, the first
    # ``_EXPORTS_TOLD`` (each read through for its checksum); more are queued, and the sync's
    # scan says them: 17 exports in one batch, 16 said at once, 1 queued and said by the sync.
    from streamrag.daemon import _EXPORTS_TOLD

    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})   # offline: fast
    db = tmp_path / "b.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        export_json(db, tmp_path / "graph.json")
        names = [f"x{n:02}.txt" for n in range(_EXPORTS_TOLD + 1)]
        old = time.time() - 10   # (saved a while ago: not waited on as still written)
        for name in names:
            (corpus / name).write_bytes((tmp_path / "graph.json").read_bytes())
            os.utime(corpus / name, (old, old))
        start = len(events)
        async with send:
            await send.send([(Change.added, str(corpus / name)) for name in names])   # (in this order)
            await until(lambda: daemon.syncs == 2)
    said = [e["message"] for e in events[start:] if e["state"] == "warning"]
    queued = [i for i, e in enumerate(events[start:]) if e["state"] == "queued"]
    assert len(queued) == 1 and events[start + queued[0]]["files"] == 1, events[start:]
    # (the first 16 before the queued line, the last after it, by the sync)
    before = [e["message"] for e in events[start:start + queued[0]] if e["state"] == "warning"]
    assert before == [SAID.replace("x.txt", name) for name in names[:_EXPORTS_TOLD]], before
    assert said == before + [SAID.replace("x.txt", names[-1])], said
    assert not any(name in _indexed_paths(db) for name in names)


async def test_an_export_in_a_folder_moved_in_queues_nothing_for_it(corpus, tmp_path):
    # Only files with an event of their own were checked for an export: one inside a folder moved
    # in (its files have none, the folder is listed) was queued, "2 files (2 added)", and synced
    # for nothing. Now the folder's new files go through the same check.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})   # offline: fast
    db = tmp_path / "b.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        moved = tmp_path / "reports"
        moved.mkdir()
        export_json(db, moved / "x.txt")
        (moved / "note.txt").write_text("Mira Osk logged the barge at Port Vell.\n", encoding="utf-8")
        old = time.time() - 10   # (saved a while ago: not waited on as still written)
        for path in (moved / "x.txt", moved / "note.txt"):
            os.utime(path, (old, old))
        moved.rename(corpus / "reports")
        start = len(events)
        async with send:
            await send.send({(Change.added, str(corpus / "reports"))})
            await until(lambda: daemon.syncs == 2)
    assert [e["files"] for e in events[start:] if e["state"] == "queued"] == [1], events[start:]
    assert [e["message"] for e in events[start:] if e["state"] == "warning"] == [SAID.replace("x.txt", "reports/x.txt")]
    assert "reports/x.txt" not in _indexed_paths(db) and "reports/note.txt" in _indexed_paths(db)


def test_a_batch_opens_at_most_export_opens_of_its_new_files_to_find_exports(corpus, tmp_path, monkeypatch):
    # A folder of 200,000 files moved in had every file opened and read (up to 2 KB) for an export
    # before its queued line (2.5 s of CPU; on a slow mount 0.5 s an open): the 16 told counted
    # exports found, not files opened. Now at most _EXPORT_OPENS are opened; past them the sync's
    # scan tells exports, as it does past the 16.
    import streamrag.daemon as daemon_module

    db = tmp_path / "b.db"
    Store(db).close()
    for n in range(3):
        (corpus / f"note{n}.txt").write_text("Mira Osk logged the barge at Port Vell.\n")
    export_json(db, corpus / "x.txt")
    rels = ["note0.txt", "note1.txt", "note2.txt", "x.txt"]
    opened: list[str] = []
    looks = daemon_module._opens_as_export
    monkeypatch.setattr(daemon_module, "_opens_as_export", lambda path: opened.append(path.name) or looks(path))
    assert daemon_module._told_exports(corpus, rels, lambda: False) == {"x.txt": True}
    monkeypatch.setattr(daemon_module, "_EXPORT_OPENS", 3)
    opened.clear()
    assert daemon_module._told_exports(corpus, rels, lambda: False) == {}
    assert opened == rels[:3]
