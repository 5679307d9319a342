"""`export` into the folder a watch runs on: what the watch says of it."""

from __future__ import annotations

import os
import time

import pytest
from watchfiles import Change

from conftest import make_settings
from streamrag.export import export
from streamrag.store import Store
from test_daemon import SMALL, _indexed_paths, running, until

pytestmark = pytest.mark.anyio

SAID = "x.txt: written by `streamrag export`, the index's own output, not a document; nothing to index"


async def test_an_export_written_again_into_the_watched_folder_is_said_again(corpus, tmp_path):
    # The watch said no warning the last sync had said, to keep a file that cannot be indexed from
    # being named by every sync: an export written again (a cron job's `export x.txt`) was said
    # for its first write only. Now a file the sync was for is said again; one unchanged is not.
    settings = make_settings(index=SMALL, watch={"quiet_s": 0.3})   # offline: fast
    db = tmp_path / "b.db"
    (corpus / "blank.txt").write_text("", encoding="utf-8")   # (said by every sync's scan)
    async with running(settings, db, corpus) as (daemon, events, send):
        start = len(events)
        async with send:
            for syncs, change in ((2, Change.added), (3, Change.modified)):
                store = Store(db, readonly=True)
                try:
                    export(store, corpus / "x.txt", "json")
                finally:
                    store.close()
                old = time.time() - 10 * syncs   # (saved a while ago: not waited on as still written)
                os.utime(corpus / "x.txt", (old, old))
                await send.send({(change, str(corpus / "x.txt"))})
                await until(lambda: daemon.syncs == syncs)
            (corpus / "notes.txt").write_text("Mira Osk chaired the Harbor Council meeting.\n", encoding="utf-8")
            await send.send({(Change.added, str(corpus / "notes.txt"))})
            await until(lambda: daemon.syncs == 4)
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
            for syncs, change in ((2, (Change.added, str(corpus / "x.txt"))), (3, (RESCAN, "boom"))):
                store = Store(db, readonly=True)
                try:
                    export(store, corpus / "x.txt", "json")
                finally:
                    store.close()
                old = time.time() - 10 * syncs
                os.utime(corpus / "x.txt", (old, old))
                await send.send({change})
                await until(lambda: daemon.syncs == syncs)
            await send.send({(RESCAN, "boom again")})   # (x.txt as it was: not said again)
            await until(lambda: daemon.syncs == 4)
    warnings = [e["message"] for e in events[start:] if e["state"] == "warning"]
    assert warnings == [SAID, SAID], warnings
    assert "x.txt" not in _indexed_paths(db)
