"""The daemon through a provider outage: nothing published is dropped, and it keeps retrying
until the endpoint is back."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

import anyio
from conftest import index_snapshot, make_settings
from streamrag.daemon import Daemon
from streamrag.status import gather_status
from streamrag.store import Store
from test_daemon import SMALL, running, until

pytestmark = pytest.mark.anyio
_MODIFIED, _DELETED = 2, 3


class Switch:
    """A transport that forwards to the simulator while ``up`` and refuses connections otherwise."""

    def __init__(self, base_url: str) -> None:
        self.up = True
        self.client = httpx.AsyncClient(base_url=base_url)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            raise httpx.ConnectError("connection refused", request=request)
        r = await self.client.send(self.client.build_request(
            request.method, str(request.url), headers=request.headers, content=request.content))
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)


async def test_an_outage_during_an_edit_loses_nothing_and_is_retried_until_it_ends(
        corpus, tmp_path, simulator):
    switch = Switch(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    db = tmp_path / "o.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        before = index_snapshot(db)

        switch.up = False
        victim = sorted(corpus.glob("*.txt"))[0]
        victim.write_text(victim.read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
        await send.send({(_MODIFIED, str(victim))})
        # More retry syncs than the few allowed while some calls succeed: every call fails.
        await until(lambda: sum(e.get("outage", False) for e in events) >= 5, timeout=60)
        assert index_snapshot(db) == before        # the old version of the file is still indexed

        switch.up = True
        store = Store(db, readonly=True)
        try:
            await until(lambda: store.scalar(
                "SELECT count(*) FROM entities WHERE name = 'Quillon Marbeck'") == 1, timeout=60)
        finally:
            store.close()
        await send.aclose()
    await switch.client.aclose()
    assert not any(e.get("gave_up") for e in events)


async def test_the_watched_folder_going_away_stops_the_daemon_and_keeps_the_index(corpus, tmp_path):
    db = tmp_path / "g.db"
    async with running(make_settings("", watch={"quiet_s": 0.02}), db, corpus) as (daemon, events, send):
        before = index_snapshot(db)
        shutil.rmtree(corpus)
        await send.send({(_DELETED, str(corpus / "council.txt"))})
        await until(lambda: daemon.stopping, timeout=30)
    assert daemon.exit_code == 1
    assert any(e["state"] == "error" and "gone" in e["message"] and "the index keeps what it held"
               in e["message"] for e in events)
    assert events[-1]["state"] == "stopped" and "index is current" not in events[-1]["message"]
    assert index_snapshot(db) == before


async def test_the_watched_folder_going_away_with_its_index_says_so(corpus, tmp_path):
    db = corpus / ".streamrag" / "index.db"          # inside the folder, as by default
    async with running(make_settings("", watch={"quiet_s": 0.02}), db, corpus) as (daemon, events, send):
        shutil.rmtree(corpus)
        await send.send({(_DELETED, str(corpus / "council.txt"))})
        await until(lambda: daemon.stopping, timeout=30)
    (gone,) = [e for e in events if e.get("error") == "folder gone"]
    assert "keeps" not in gone["message"] and "went with it" in gone["message"], gone["message"]
    assert daemon.exit_code == 1


async def test_a_failed_watcher_makes_the_whole_folder_sync_again(corpus, tmp_path):
    from streamrag.daemon import _RESCAN

    settings = make_settings("", watch={"quiet_s": 0.02})
    async with running(settings, tmp_path / "w.db", corpus) as (daemon, events, send):
        # A file the failed watcher never reported: the rescan finds it.
        (corpus / "missed.txt").write_text("Quillon Marbeck opened a ferry office in Port Vale.\n")
        await send.send({(_RESCAN, "WatchfilesRustInternalError: Unable to decode path")})
        await until(lambda: daemon.syncs >= 2, timeout=30)
        added = daemon.last_result.docs_added
        # A name it cannot decode is named, with the fix.
        await send.send({(_RESCAN, 'WatchfilesRustInternalError: Unable to decode path '
                                   '"/data/bad\\xFFname.txt" to string')})
        await until(lambda: daemon.syncs >= 3, timeout=30)
        await send.aclose()
    assert any(e["state"] == "error" and "watcher failed" in e["message"] for e in events)
    assert added == 1
    named = [e["message"] for e in events if e["state"] == "error" and "bad" in e["message"]]
    assert named and named[0].startswith("/data/bad\\xFFname.txt: file name is not valid UTF-8")
    assert "rename it" in named[0]


async def watch_while(folder: Path, act, done) -> list[set]:
    """The batches the real watcher on ``folder`` yields while ``act(stop)`` changes the folder,
    until ``done(seen, batch)`` says enough (within 30 s)."""
    from streamrag.config import WatchSettings
    from streamrag.daemon import watch_folder

    stop = anyio.Event()
    seen: list[set] = []
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(act, stop)
            async for changes in watch_folder(folder, WatchSettings(debounce_ms=50), stop):
                seen.append(changes)
                if done(seen, changes):
                    stop.set()
                    break
    return seen


async def test_the_real_watcher_survives_a_file_name_it_cannot_decode(tmp_path):
    from streamrag.daemon import _RESCAN

    folder = tmp_path / "w"
    folder.mkdir()

    async def write_then_wait(_stop) -> None:
        await anyio.sleep(0.3)      # the watcher is running (it yields nothing before an event)
        try:
            with open(os.fsencode(folder) + b"/bad\xffname.txt", "w") as f:
                f.write("text")
        except (OSError, UnicodeError):
            pytest.skip("this file system refuses names that are not UTF-8")
        (folder / "good.txt").write_text("text")

    seen = await watch_while(folder, write_then_wait,
                             lambda _seen, changes: any(kind == _RESCAN for kind, _ in changes))
    assert any(kind == _RESCAN for batch in seen for kind, _ in batch)


@pytest.mark.parametrize("told", ["by our watcher", "by the folder's deletion"])
async def test_a_replaced_folder_is_synced_whole_and_said_once(corpus, tmp_path, told):
    """`rm -rf DIR && mkdir DIR`: the daemon says so once and syncs the new folder whole."""
    from streamrag.daemon import _REPLACED

    db = corpus / ".streamrag" / "index.db"         # inside the folder, as by default: gone too
    async with running(make_settings("", watch={"quiet_s": 0.02}), db, corpus) as (daemon, events, send):
        shutil.rmtree(corpus)
        corpus.mkdir()
        (corpus / "fresh.txt").write_text("Quillon Marbeck opened a ferry office in Port Vale.\n")
        if told == "by our watcher":
            await send.send({(_REPLACED, str(corpus))})
        else:   # what watchfiles reports (before it goes silent on the deleted folder)
            await send.send({(_DELETED, str(corpus / "council.txt")), (_DELETED, str(corpus))})
        await until(lambda: daemon.syncs >= 2, timeout=30)
        await send.aclose()
    said = [e for e in events if e.get("replaced")]
    assert len(said) == 1 and "replaced" in said[0]["message"], said
    queued = [e for e in events if e["state"] == "queued"][0]
    assert "the whole folder" in queued["message"] and "rescan" not in queued["message"], queued
    assert queued["files"] == (0 if told == "by our watcher" else 1)    # council.txt's deletion
    assert not daemon.stopping or daemon.exit_code == 0
    store = Store(db, readonly=True)
    try:
        assert [r["path"] for r in store.query("SELECT path FROM documents")] == ["fresh.txt"]
    finally:
        store.close()


async def test_the_real_watcher_follows_a_replaced_folder(tmp_path):
    from streamrag.daemon import _REPLACED

    folder = tmp_path / "w"
    folder.mkdir()

    async def replace_then_write(stop) -> None:
        await anyio.sleep(0.3)      # the watcher is running
        shutil.rmtree(folder)
        folder.mkdir()
        while not stop.is_set():    # written until the watcher on the new folder reports it
            (folder / "new.txt").write_text(f"text {anyio.current_time()}")
            await anyio.sleep(0.2)

    def done(seen, changes) -> bool:
        return any(kind == _REPLACED for batch in seen for kind, _ in batch) and any(
            path.endswith("new.txt") for _kind, path in changes)

    seen = await watch_while(folder, replace_then_write, done)
    assert any(kind == _REPLACED for batch in seen for kind, _ in batch)


def test_any_event_once_the_folder_is_gone_means_deleted(tmp_path):
    daemon = Daemon(make_settings(""), tmp_path / "i.db", tmp_path / "gone")
    assert daemon._classify({(_DELETED, str(tmp_path / "gone"))}) == {".": "deleted"}


async def test_answers_the_model_keeps_getting_wrong_are_retried_a_few_times_only(corpus, tmp_path, simulator):
    # Reports cut off at 5 tokens (and 10, 20) are paid answers, not an outage: three retry syncs.
    settings = make_settings(simulator.base_url, index={**SMALL, "report_max_output_tokens": 5},
                             llm={"cache": False}, watch={"quiet_s": 0.02})
    async with running(settings, tmp_path / "u.db", corpus) as (daemon, events, send):
        await until(lambda: any(e.get("gave_up") for e in events), timeout=60)
        await send.aclose()
    retries = [e for e in events if e["state"] == "error" and "failed_calls" in e and not e.get("gave_up")]
    assert len(retries) == 3 and not any(e["outage"] for e in retries)
    # The health line counts what failed in the last update, as `streamrag status` does, not
    # every retry's repeat of the same items.
    store = Store(tmp_path / "u.db", readonly=True)
    try:
        status = gather_status(store)
    finally:
        store.close()
    assert daemon.health()["failures"] == status["failures_last_run"] > 0
    assert status["failures_total"] > status["failures_last_run"]
