"""The daemon through a provider outage: nothing published is dropped, and it keeps retrying
until the endpoint is back."""

from __future__ import annotations

import json
import os
import re
import time
import shutil
import types
from pathlib import Path

import httpx
import msgspec
import pytest

import anyio
from conftest import index_snapshot, make_settings, status_info
from streamrag.config import Settings, without_secrets
from streamrag.daemon import Daemon
from streamrag.endpoint_health import GAVE_UP, START_AGAIN
from streamrag.store import Store
from streamrag.watch_lines import clock
from test_daemon import SMALL, Events, db_count, running, scripted, until

pytestmark = pytest.mark.anyio
MODIFIED, DELETED = 2, 3


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


def fast_outage(monkeypatch, simulator) -> tuple[Switch, Settings, float]:
    """An outage in tenths of a second: retries after 0.08, 0.16, then every 0.2 s (the pause's
    cap, returned); the switch that takes the endpoint down, and the settings to watch with."""
    from streamrag import daemon as daemon_module

    cap = 0.2
    monkeypatch.setattr(daemon_module, "_MAX_BACKOFF_S", cap)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0}, watch={"quiet_s": 0.04})
    return Switch(simulator.base_url), settings, cap


def counted_syncs(monkeypatch) -> list[bool]:
    """Whether each sync the daemon runs from now on succeeds, in order."""
    syncs: list[bool] = []
    real_sync = Daemon._sync

    async def counted(self, reason, **kwargs):
        ok = await real_sync(self, reason, **kwargs)
        syncs.append(ok)
        return ok

    monkeypatch.setattr(Daemon, "_sync", counted)
    return syncs


async def edit_guild(corpus, send) -> None:
    """Adds a sentence naming Quillon Marbeck to guild.txt and tells the daemon, as the watcher would."""
    victim = corpus / "guild.txt"
    victim.write_text(victim.read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
    await send.send({(MODIFIED, str(victim))})


async def _until_indexed(db, name: str, *, timeout: float) -> None:
    """Waits until the published index holds the entity ``name``."""
    store = Store(db, readonly=True)
    try:
        await until(lambda: store.scalar("SELECT count(*) FROM entities WHERE name = ?", (name,)) == 1,
                    timeout=timeout)
    finally:
        store.close()


async def _down_then_back(endpoint, settings, db, corpus, said, **running_kw) -> Events:
    """A watch of ``corpus`` through ``endpoint`` (a switchable MockTransport handler): down for
    an edit of guild.txt until ``said(events)``, then up until the edit is indexed; its events."""
    async with running(settings, db, corpus, transport=httpx.MockTransport(endpoint), **running_kw) \
            as (_daemon, events, send):
        endpoint.up = False
        await edit_guild(corpus, send)
        await until(lambda: said(events), timeout=30)
        endpoint.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await endpoint.client.aclose()
    return events


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
        await send.send({(MODIFIED, str(victim))})
        # More retry syncs than the few allowed while some calls succeed: every call fails.
        await until(lambda: sum(e.get("outage", False) for e in events) >= 5, timeout=60)
        assert index_snapshot(db) == before        # the old version of the file is still indexed
        # The line names the endpoint that does not answer, as `streamrag index` does (the
        # first: the others say briefly that it still does not); it answered the initial sync,
        # so it stopped: it said "is the endpoint ... down? Start it, or fix llm.api_base", the
        # advice for an endpoint that never answered.
        outage = [e for e in events if e.get("outage")][0]
        assert outage["endpoint"].startswith(simulator.base_url.rstrip("/")), outage
        assert f"no call succeeded: {outage['endpoint']} stopped answering at " in outage["message"], \
            outage["message"]
        assert "api_base" not in outage["message"] and outage["answered_at"] <= outage["since"], outage

        switch.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await switch.client.aclose()
    assert not any(e.get("gave_up") for e in events)


async def test_the_health_line_counts_an_edit_left_out_in_an_outage_as_pending(corpus, tmp_path, simulator):
    # The edit's sync published the same version without its chunks, and the health line said
    # "0 pending" while the outage lines said `failed_items` were waiting to be retried.
    switch = Switch(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    async with running(settings, tmp_path / "h.db", corpus, health_s=0.02,
                       transport=httpx.MockTransport(switch)) as (daemon, events, send):
        (before,) = [e for e in events if e["state"] == "health"]
        assert before["failed_items"] == 0 and " 0 pending, " in before["message"], before["message"]
        switch.up = False
        await edit_guild(corpus, send)
        await until(lambda: any(e["state"] == "health" and e["failed_items"] for e in events), timeout=30)
        health = next(e for e in events if e["state"] == "health" and e["failed_items"])
        assert health["pending"] == 0 and health["failed_items"] == daemon._retry_items > 0, health
        assert f" 0 pending ({health['failed_items']} failed item" in health["message"], health["message"]
        assert " to retry), last sync " in health["message"], health["message"]
        switch.up = True
        await _until_indexed(tmp_path / "h.db", "Quillon Marbeck", timeout=60)
        await until(lambda: [e for e in events if e["state"] == "health"][-1]["failed_items"] == 0)
        await send.aclose()
    await switch.client.aclose()


async def test_the_health_line_follows_the_syncs_of_an_outage_begun_and_ended(corpus, tmp_path, simulator,
                                                                             monkeypatch):
    # The health line was looked at only by its loop, every minute: the items an outage left to
    # retry, and none left once it ended, were said up to a minute after the lines of their sync.
    # The loop here never looks again. The retries between say nothing new: no line each.
    syncs = counted_syncs(monkeypatch)
    switch = Switch(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    db = tmp_path / "h.db"
    async with running(settings, db, corpus, health_s=3600,
                       transport=httpx.MockTransport(switch)) as (daemon, events, send):
        def health() -> list[dict]:
            return [e for e in events if e["state"] == "health"]

        switch.up = False
        await edit_guild(corpus, send)
        await until(lambda: health()[-1]["failed_items"], timeout=30)
        down = health()[-1]
        assert down["failed_items"] == daemon._retry_items > 0 and down["errors"] == daemon.errors > 0, down
        retried = len(syncs)
        await until(lambda: len(syncs) >= retried + 3, timeout=30)
        assert health()[-1] is down, health()[-1]
        switch.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await until(lambda: health()[-1]["failed_items"] == 0, timeout=30)
        back = health()[-1]
        assert back["failures"] == status_info(db)["failures_last_run"] and back["pending"] == 0, back
        assert back["last_sync_s"] == daemon.last_sync_s and events.states()[-2:] == ["idle", "health"]
        await send.aclose()
    await switch.client.aclose()



async def test_the_outage_line_counts_the_chunks_without_their_claims_it_waits_to_ask_again(
        corpus, tmp_path, monkeypatch):
    # The outage line's claims_failed (of failed_items, the chunks indexed without their claims,
    # as the health and stopped lines count them) had no test. Chunks published without their
    # claims, then the endpoint down for their retry: the outage line waits for all of them.
    from conftest import simulated_transport
    from streamrag import daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_MAX_BACKOFF_S", 0.2)
    claimless = simulated_transport(claims_work=False).handler   # every claims answer unusable
    up = [True]

    def endpoint(request: httpx.Request) -> httpx.Response:
        if not up[0]:
            raise httpx.ConnectError("connection refused", request=request)
        return claimless(request)

    real_sync = Daemon._sync

    async def then_down(self, reason, **kwargs):   # down once the initial sync is over, before a retry
        ok = await real_sync(self, reason, **kwargs)
        up[0] = False
        return ok

    monkeypatch.setattr(Daemon, "_sync", then_down)
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True}, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    async with running(settings, tmp_path / "o.db", corpus, transport=httpx.MockTransport(endpoint)) \
            as (daemon, events, send):
        n = daemon.last_result.claims_failed
        assert n and n == daemon.last_result.failed_items == daemon.last_result.chunks
        await until(lambda: any(e["state"] == "outage" for e in events), timeout=30)
        await send.aclose()
    began = next(e for e in events if e.get("outage"))
    assert (began["failed_items"], began["claims_failed"]) == (n, n), began
    outage = next(e for e in events if e["state"] == "outage")
    assert (outage["pending"], outage["failed_items"], outage["claims_failed"]) == (0, n, n), outage

async def test_a_daemon_started_before_its_model_server_waits_for_it(corpus, tmp_path, simulator):
    # With three or more chunks to extract, the initial sync gave up ("nothing answers at ...")
    # and so did the daemon, exit 1; with one chunk it stayed up and retried.
    switch = Switch(simulator.base_url)
    switch.up = False
    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.02})
    db = tmp_path / "w.db"

    async def watch(until_then) -> Events:
        events = Events()
        # (retry_base_s: the refused tries' backoffs, 1 + 2 s, were most of its time)
        daemon = Daemon(settings, db, corpus, report=events, transport=httpx.MockTransport(switch),
                        retry_base_s=0.01)
        send, recv = scripted()
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, recv)
            await until(lambda: any("failed; the affected items are retried after a pause; no call succeeded: "
                                    "nothing answers at" in e["message"] for e in events), timeout=30)
            await until_then(daemon)
            await send.aclose()
        return events

    async def stop(_daemon) -> None:
        pass

    stopped = (await watch(stop))[-1]
    assert stopped["state"] == "stopped" and "the whole folder not synced yet" in stopped["message"], stopped

    async def server_up(daemon) -> None:
        switch.up = True
        await until(lambda: daemon.syncs >= 1, timeout=60)

    await watch(server_up)
    await switch.client.aclose()
    store = Store(db, readonly=True)
    try:
        assert store.scalar("SELECT count(*) FROM documents") == len([p for p in corpus.iterdir() if p.is_file()])
        assert store.scalar("SELECT count(*) FROM entities") > 10
    finally:
        store.close()


async def _down_at_first_sync(switch: Switch, settings: Settings, db: Path, folder: Path, *,
                              documents: int) -> tuple[Events, dict]:
    """The lines of a daemon of ``folder`` started while ``switch`` is down, and ``status --json``
    when its first error is said; then the endpoint is up again until the index holds ``documents``
    documents."""
    events = Events()
    daemon = Daemon(settings, db, folder, report=events, transport=httpx.MockTransport(switch), retry_base_s=0.01)
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: "error" in events.states(), timeout=30)
        down = status_info(db)
        switch.up = True
        await until(lambda: db_count(db, "SELECT count(*) FROM documents") == documents, timeout=60)
        await send.aclose()
    await switch.client.aclose()
    return events, down


async def test_a_first_index_through_an_endpoint_that_never_answered_publishes_nothing_until_it_does(
        tmp_path, simulator, monkeypatch):
    # With fewer chunks than make a run give up (one here), the initial sync published an empty
    # version 1 ("0 documents"), and `ask` said the index held no documents, where three or more
    # published nothing and `status` said the files were not indexed yet.
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    switch.up = False
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "one.txt").write_text(_paragraphs(1))
    db = tmp_path / "n.db"
    events, down = await _down_at_first_sync(switch, settings, db, folder, documents=1)
    assert down["version"] == 0 and down["not_indexed_last_run"] == 1, down
    assert "idle" not in events.states()[:events.states().index("error")], events
    store = Store(db, readonly=True)
    try:
        assert store.version == 1 and store.scalar("SELECT count(*) FROM entities") > 3
    finally:
        store.close()


async def _answered_unusably(tmp_path, simulator, *, ahead: int,
                             settings: Settings | None = None) -> tuple[Settings, Path, Path]:
    """The settings, folder (tmp_path/notes) and index of an earlier run that published nothing:
    the endpoint answered it, but unusably (one.txt's chunk), and ``ahead`` chunks of ahead.txt
    were extracted before (a watch stopped before its sync). ``settings``: by default, with no
    community big enough for a report (its calls would make a sync give up)."""
    from streamrag.pipeline import Indexer

    settings = settings or make_settings(simulator.base_url, index={**SMALL, "report_min_members": 1000},
                                         llm={"max_retries": 0, "cache": False}, watch={"quiet_s": 0.04})
    folder = tmp_path / "notes"
    folder.mkdir()
    db = tmp_path / "n.db"
    if ahead:
        (folder / "ahead.txt").write_text(_paragraphs(ahead))
        assert await Indexer(settings, db, root=folder, command="watch:extract").prefetch([folder / "ahead.txt"]) == ahead
    (folder / "one.txt").write_text(_paragraphs(1).replace("Captain", "Admiral"))
    garble = GarbleExtractions(simulator.base_url)
    indexer = Indexer(settings, db, root=folder, command="watch:extract", transport=httpx.MockTransport(garble))
    assert await indexer.prefetch([folder / "one.txt"]) == 0
    await garble.client.aclose()
    assert status_info(db)["version"] == 0
    return settings, folder, db


@pytest.mark.parametrize("ahead", [0, 2])
async def test_a_first_index_of_no_chunk_through_an_endpoint_that_answered_an_earlier_run_publishes_nothing(
        tmp_path, simulator, monkeypatch, ahead):
    # Its endpoint answered an earlier run of the index (its answers unusable), so a watch whose
    # first sync then reached no endpoint published what it could: an empty version 1, which `ask`
    # answered from. (With chunks extracted ahead, a version 1 of them is published, as before.)
    switch, _settings, _cap = fast_outage(monkeypatch, simulator)
    settings, folder, db = await _answered_unusably(tmp_path, simulator, ahead=ahead)
    switch.up = False
    events, down = await _down_at_first_sync(switch, settings, db, folder, documents=1 + bool(ahead))
    error = events[events.states().index("error")]
    assert f"no call succeeded: {error['endpoint']} stopped answering at " in error["message"], error
    if ahead:
        assert down["version"] == 1 and down["documents"] == 1, down
    else:
        assert down["version"] == 0 and down["not_indexed_last_run"] == 1, down
        assert "idle" not in events.states()[:events.states().index("error")], events
    assert db_count(db, "SELECT count(*) FROM entities WHERE name LIKE 'Admiral %'") == 1


async def test_index_publishes_no_first_index_through_an_endpoint_that_answered_only_an_earlier_run(
        tmp_path, simulator, monkeypatch):
    # As `watch` now: `index` reaching no endpoint publishes nothing (it does not retry).
    from streamrag.errors import LLMUnavailableError
    from streamrag.pipeline import Indexer

    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    settings, folder, db = await _answered_unusably(tmp_path, simulator, ahead=2, settings=settings)
    switch.up = False
    with pytest.raises(LLMUnavailableError, match="Nothing was published; there is no index yet"):
        await Indexer(settings, db, root=folder, transport=httpx.MockTransport(switch)).run([folder])
    await switch.client.aclose()
    assert status_info(db)["version"] == 0


@pytest.mark.parametrize("ahead", [0, 2])
async def test_a_first_index_the_model_answered_unusably_publishes_nothing_and_stops_the_watch(
        tmp_path, simulator, ahead):
    # Every chunk of the first sync answered unusably (the endpoint up): an empty version 1 was
    # published ("version 1: 0 documents"), which `ask` answered from, asked again three times
    # and given up, with no word of why. Now nothing is published, and the watch stops saying
    # the fix, which only a restart reads. With chunks extracted ahead, version 1 holds them.
    from streamrag.errors import LLMOutputError

    settings, folder, db = await _answered_unusably(tmp_path, simulator, ahead=ahead)
    garble = GarbleExtractions(simulator.base_url)
    events = Events()
    daemon = Daemon(settings, db, folder, report=events, transport=httpx.MockTransport(garble), retry_base_s=0.01)
    send, recv = scripted()
    if ahead:
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, recv)
            await until(lambda: "idle" in events.states(), timeout=30)
            await send.aclose()
        await garble.client.aclose()
        assert status_info(db)["version"] == 1 and status_info(db)["documents"] == 1
        return
    await send.aclose()   # (the initial sync, then the end of the changes)
    try:
        with anyio.fail_after(30), pytest.raises(BaseExceptionGroup) as raised:
            await daemon.run(recv)
    finally:
        await garble.client.aclose()
    assert raised.group_contains(LLMOutputError, depth=1, match=(
        r"^no chunk could be extracted \(1 failed\): the model's answers were unusable \(gpt-4o-mini\): "
        r"check llm\.extraction_model, or try a model .*\. Nothing was published; there is no index yet$"))
    assert status_info(db)["version"] == 0 and "idle" not in events.states(), events


async def test_calls_the_extraction_ahead_paid_before_it_gave_up_are_counted(corpus, tmp_path, simulator,
                                                                             monkeypatch):
    # Three changed chunks while the endpoint is down: the extraction ahead of the sync gives up
    # after three failed calls, and so does the sync. Their calls were sent all the same, and the
    # idle line that sums up the update dropped them.
    failed_syncs = 0   # (the extraction's error line said the outage; the syncs' failures are quiet)
    real_sync = Daemon._sync

    async def counted(self, reason, **kwargs):
        nonlocal failed_syncs
        ok = await real_sync(self, reason, **kwargs)
        failed_syncs += not ok
        return ok

    monkeypatch.setattr(Daemon, "_sync", counted)
    switch = Switch(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    db = tmp_path / "o.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        switch.up = False
        victims = sorted(corpus.glob("*.txt"))[:3]
        for k, victim in enumerate(victims):
            victim.write_text(victim.read_text() + f"\n\nQuillon Marbeck opened ferry office {k}.\n")
        await send.send({(MODIFIED, str(victim)) for victim in victims})
        await until(lambda: any(e["message"].startswith("extracting 3 files: 3 LLM calls failed; left to the sync")
                                for e in events))
        await until(lambda: failed_syncs >= 1)
        switch.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await switch.client.aclose()
    # So were those of the syncs that failed meanwhile (each gave up after three failed calls).
    idle = [e for e in events if e["state"] == "idle"][-1]
    assert failed_syncs >= 1
    assert idle["llm"]["by_stage"]["extract"]["errors"] >= 3 * (1 + failed_syncs), idle["llm"]


class RefusingName(Switch):
    """A ``Switch`` that refuses the connection of every request naming ``name`` (None: of none)."""

    name: str | None = None

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.name is not None and self.name.encode() in request.content:
            raise httpx.ConnectError("connection refused", request=request)
        return await super().__call__(request)


async def test_the_error_line_counts_the_failed_calls_the_idle_line_counts(corpus, tmp_path, simulator):
    # The idle line summed the calls of the extraction ahead of the sync and of the sync; the
    # error line after it counted the sync's alone ("2 LLM calls", then "1 LLM call failed").
    # (The one chunk naming Quillon Marbeck fails, in both; the others answer: an extraction
    # ahead none of whose calls answered says the outage itself.)
    switch = RefusingName(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": 0.02})
    db = tmp_path / "o.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        mark = len(events)
        switch.name = "Quillon Marbeck"
        victims = sorted(corpus.glob("*.txt"))[:2]
        for victim, said in zip(victims, ("Quillon Marbeck opened a ferry office",
                                          "Tamsin Oakridge rang the harbor bell at Pier 4")):
            victim.write_text(victim.read_text() + f"\n\n{said}.\n")
        await send.send({(MODIFIED, str(victim)) for victim in victims})
        await until(lambda: any("llm_errors" in e for e in events[mark:]))
        switch.name = None
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await switch.client.aclose()
    after = events[mark:]
    first_error = next(i for i, e in enumerate(after) if "llm_errors" in e)
    assert [e["chunks_extracted"] for e in after[:first_error] if e["state"] == "waiting"] == [1], after
    idle = [e for e in after[:first_error] if e["state"] == "idle"][-1]
    assert idle["llm"]["errors"] >= 2                      # the extraction ahead's and the sync's
    assert after[first_error]["llm_errors"] == idle["llm"]["errors"], (after[first_error], idle["llm"])
    assert after[first_error]["failed_items"] >= 1


@pytest.mark.parametrize("index_inside", [False, True])
async def test_a_folder_gone_for_a_while_is_waited_for_and_synced_whole_when_back(
        corpus, tmp_path, index_inside):
    """A restore (`rm -rf DIR; sleep 4; mkdir DIR`): one line says the folder is gone and that the
    daemon waits; it keeps waiting, and syncs the folder whole when it is back."""
    from streamrag.watch_events import REPLACED

    db = corpus / ".streamrag" / "index.db" if index_inside else tmp_path / "g.db"
    async with running(make_settings("", watch={"quiet_s": 0.02}), db, corpus) as (daemon, events, send):
        before = index_snapshot(db)
        shutil.rmtree(corpus)
        await send.send({(DELETED, str(corpus / "council.txt")), (DELETED, str(corpus))})
        await until(lambda: "gone" in events.states(), timeout=30)
        await send.send({(DELETED, str(corpus / "guild.txt"))})    # more news of the deletion
        await anyio.sleep(0.3)                                       # many quiet periods
        assert not daemon.stopping and daemon.syncs == 1 and daemon.exit_code == 0
        (gone,) = [e for e in events if e["state"] == "gone"]        # said once
        assert str(corpus) in gone["message"] and "waiting for it to come back" in gone["message"]
        assert "Ctrl-C" in gone["message"]
        if index_inside:
            assert "went with it" in gone["message"] and "rebuilds it" in gone["message"]
            assert not db.exists()
        else:
            assert "keeps what it held" in gone["message"] and gone["db_kept"]
            assert index_snapshot(db) == before

        corpus.mkdir()                                               # the restore
        (corpus / "fresh.txt").write_text("Quillon Marbeck opened a ferry office in Port Vale.\n")
        await send.send({(REPLACED, str(corpus))})
        await until(lambda: daemon.syncs >= 2, timeout=30)
        await send.aclose()
    back = [e for e in events if e.get("replaced")]
    assert len(back) == 1 and "is back" in back[0]["message"], back
    # Its sync queued says what it is for, not '; 0 pending' as if nothing were.
    queued = [e["message"] for e in events[events.index(back[0]):] if e["state"] == "queued"]
    assert queued == ["the whole folder"], queued
    assert "error" not in events.states(), [e["message"] for e in events if e["state"] == "error"]
    assert events[-1]["state"] == "stopped" and "index is current" in events[-1]["message"]
    assert daemon.exit_code == 0
    store = Store(db, readonly=True)
    try:
        assert [r["path"] for r in store.query("SELECT path FROM documents")] == ["fresh.txt"]
    finally:
        store.close()


async def test_a_stop_while_waiting_for_the_folder_is_prompt(corpus, tmp_path, monkeypatch):
    # The stop ends the wait for events at once: a daemon that only looked at it between two
    # looks at its index (every _LOOK_S, an hour here) meets the guard. Not timed.
    from streamrag import daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_LOOK_S", 3600)
    async with running(make_settings("", watch={"quiet_s": 0.02}), tmp_path / "w.db", corpus) \
            as (daemon, events, send):
        shutil.rmtree(corpus)
        await send.send({(DELETED, str(corpus))})
        await until(lambda: "gone" in events.states(), timeout=30)
        daemon.stop("SIGINT received")                  # what the first signal does
        await until(lambda: events.states()[-1] == "stopped", timeout=60)
    assert daemon.exit_code == 0
    assert "the watched folder is gone" in events[-1]["message"]


async def test_watch_once_on_a_folder_gone_stops_with_1(tmp_path):
    """`watch --once` does not wait: a folder that is not there is an error, as before."""
    daemon = Daemon(make_settings(""), tmp_path / "i.db", tmp_path / "gone", report=Events())
    with anyio.fail_after(5):
        await daemon.run(None)
    assert daemon.exit_code == 1 and "gone" not in daemon.report.states()
    assert any(e.get("error") == "folder gone" for e in daemon.report)


async def test_a_failed_watcher_makes_the_whole_folder_sync_again(corpus, tmp_path):
    from streamrag.watch_events import RESCAN

    settings = make_settings("", watch={"quiet_s": 0.02})
    async with running(settings, tmp_path / "w.db", corpus) as (daemon, events, send):
        # A file the failed watcher never reported: the rescan finds it.
        (corpus / "missed.txt").write_text("Quillon Marbeck opened a ferry office in Port Vale.\n")
        await send.send({(RESCAN, "WatchfilesRustInternalError: Unable to decode path")})
        await until(lambda: daemon.syncs >= 2, timeout=30)
        added = daemon.last_result.documents_added
        # A name it cannot decode is named, with the fix.
        await send.send({(RESCAN, 'WatchfilesRustInternalError: Unable to decode path '
                                   '"/data/bad\\xFFname.txt" to string')})
        await until(lambda: daemon.syncs >= 3, timeout=30)
        await send.aclose()
    assert any(e["state"] == "error" and "watcher failed" in e["message"] for e in events)
    assert added == 1
    named = [e["message"] for e in events if e["state"] == "error" and "bad" in e["message"]]
    assert named and named[0].startswith("/data/bad\\xFFname.txt: file name is not valid UTF-8")
    assert "rename it" in named[0]


async def test_a_watcher_failing_again_and_again_is_said_once_naming_the_link(corpus, tmp_path):
    # A name that is not UTF-8 makes watch poll, and the polling watcher, which follows links,
    # fails at once on a symlink loop (`ln -s . self`), however often it is restarted: an error
    # line (and a queued line) each second, all day, naming no fix.
    from streamrag.daemon import RESCAN

    settings = make_settings("", watch={"quiet_s": 0.02})
    loop = (f"WatchfilesRustInternalError: error in underlying watcher: File system loop found: "
            f"{corpus}/self points to an ancestor {corpus}")
    async with running(settings, tmp_path / "w.db", corpus) as (daemon, events, send):
        mark = len(events)
        for n in range(2, 5):
            (corpus / f"missed{n}.txt").write_text(f"Quillon Marbeck opened ferry office {n} in Port Vale.\n")
            await send.send({(RESCAN, loop)})
            await until(lambda: daemon.syncs >= n, timeout=30)   # each is still a whole-folder sync
        await send.aclose()
    said = [e["message"] for e in events[mark:] if e["state"] == "error"]
    assert said == [f"{corpus}/self: a symlink loop stops the file watcher (it polls the folder, following "
                    "links, since a name that is not UTF-8 stopped its events); remove or fix the link, "
                    "then restart watch. Meanwhile the whole folder is synced again after each failure, "
                    "said once"]
    assert db_count(tmp_path / "w.db", "SELECT count(*) FROM files WHERE path LIKE 'missed%'") == 3


async def test_a_name_that_is_not_utf8_is_said_once_when_it_goes(corpus, tmp_path):
    # The polling watcher stops again when the undecodable name changes: renamed as the line
    # advised (`mv`), it was named a second time with the same advice, to rename a file no
    # longer there. Each failure is still a whole-folder sync.
    from streamrag.daemon import RESCAN

    settings = make_settings("", watch={"quiet_s": 0.02})
    failed = (f'WatchfilesRustInternalError: Unable to decode path "{corpus}/bad\\xFF.txt" to string')
    async with running(settings, tmp_path / "w.db", corpus) as (daemon, events, send):
        mark = len(events)
        for n in range(2, 4):
            (corpus / f"missed{n}.txt").write_text(f"Quillon Marbeck opened ferry office {n} in Port Vale.\n")
            await send.send({(RESCAN, failed)})
            await until(lambda: daemon.syncs >= n, timeout=30)
        await send.aclose()
    said = [e["message"] for e in events[mark:] if e["state"] == "error"]
    assert len(said) == 1 and said[0].startswith(f"{corpus}/bad\\xFF.txt: file name is not valid UTF-8"), said
    assert db_count(tmp_path / "w.db", "SELECT count(*) FROM files WHERE path LIKE 'missed%'") == 2


async def watch_while(folder: Path, act, done) -> list[set]:
    """The batches the real watcher on ``folder`` yields while ``act(stop)`` changes the folder,
    until ``done(seen, batch)`` says enough (within 30 s)."""
    from streamrag.config import WatchSettings
    from streamrag.watch_events import watch_folder

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
    from streamrag.watch_events import RESCAN

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
                             lambda _seen, changes: any(kind == RESCAN for kind, _ in changes))
    failed = [said for batch in seen for kind, said in batch if kind == RESCAN]
    # Named as the scan's line names it a moment later ("bad\xffname.txt: file name is not valid
    # UTF-8"), not in watchfiles' Rust spelling by its whole path, "/tmp/.../bad\xFFname.txt".
    assert failed and 'Unable to decode path "bad\\xffname.txt"' in failed[0], failed


@pytest.mark.parametrize(("raw", "rust"), [
    (b"sub/caf\xe9 \x1b.txt", "sub/caf\\xE9 \\u{1b}.txt"),
    # Rust writes a '"' in the name as \": the name was read up to it ('a\'), the rest left in
    # watchfiles' spelling ('a\"b\xE9.txt' beside the scan's 'a"b\xe9.txt').
    (b'a"b\xe9.txt', 'a\\"b\\xE9.txt'),
], ids=["escapes", "a quote"])
def test_a_name_the_watcher_could_not_decode_is_spelled_as_the_scan_spells_it(tmp_path, raw, rust):
    from streamrag.loader import scan
    from streamrag.watch_events import UNDECODABLE, as_shown

    raw = os.fsencode(tmp_path) + b"/" + raw
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    with open(raw, "w") as f:
        f.write("Ada Osk met Bo Lund.\n")
    said = f'Unable to decode path "{tmp_path}/{rust}" to string'
    skipped: list[str] = []
    scan([tmp_path], ["**/*.txt"], root=tmp_path, skipped=skipped)
    [line] = skipped
    assert as_shown(said, tmp_path) == f'Unable to decode path "{line.split(": ")[0]}" to string', line
    assert UNDECODABLE.search(said).group(1) == f"{tmp_path}/{rust}"
    assert as_shown("some other error", tmp_path) == "some other error"


@pytest.mark.parametrize("told", ["by our watcher", "by the folder's deletion"])
async def test_a_replaced_folder_is_synced_whole_and_said_once(corpus, tmp_path, told):
    """`rm -rf DIR && mkdir DIR`: the daemon says so once and syncs the new folder whole."""
    from streamrag.watch_events import REPLACED

    db = corpus / ".streamrag" / "index.db"         # inside the folder, as by default: gone too
    async with running(make_settings("", watch={"quiet_s": 0.02}), db, corpus) as (daemon, events, send):
        shutil.rmtree(corpus)
        corpus.mkdir()
        (corpus / "fresh.txt").write_text("Quillon Marbeck opened a ferry office in Port Vale.\n")
        if told == "by our watcher":
            await send.send({(REPLACED, str(corpus))})
        else:   # what watchfiles reports (before it goes silent on the deleted folder)
            await send.send({(DELETED, str(corpus / "council.txt")), (DELETED, str(corpus))})
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
    from streamrag.watch_events import REPLACED

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
        return any(kind == REPLACED for batch in seen for kind, _ in batch) and any(
            path.endswith("new.txt") for _kind, path in changes)

    seen = await watch_while(folder, replace_then_write, done)
    assert any(kind == REPLACED for batch in seen for kind, _ in batch)


async def test_the_real_watcher_waits_for_a_folder_gone_for_a_while(tmp_path, monkeypatch):
    """Gone for longer than it waits for a quick re-creation: `DELETED` for the folder, then
    `REPLACED` when it is back, then the new folder's events."""
    from streamrag import watch_events
    from streamrag.watch_events import REPLACED

    monkeypatch.setattr(watch_events, "_GONE_WAIT_S", 0.2)   # 2 s in use
    monkeypatch.setattr(watch_events, "_GONE_POLL_S", 0.05)
    folder = tmp_path / "w"
    folder.mkdir()
    said_gone = anyio.Event()

    async def remove_wait_restore(stop) -> None:
        await anyio.sleep(0.3)      # the watcher is running
        shutil.rmtree(folder)
        await said_gone.wait()
        await anyio.sleep(0.3)      # the watcher keeps waiting
        folder.mkdir()
        while not stop.is_set():    # written until the watcher on the new folder reports it
            (folder / "new.txt").write_text(f"text {anyio.current_time()}")
            await anyio.sleep(0.2)

    def done(seen, changes) -> bool:
        if (DELETED, str(folder)) in changes:
            said_gone.set()
        return any(kind == REPLACED for batch in seen for kind, _ in batch) and any(
            path.endswith("new.txt") for _kind, path in changes)

    seen = await watch_while(folder, remove_wait_restore, done)
    gone = next(i for i, b in enumerate(seen) if (DELETED, str(folder)) in b)
    back = next(i for i, b in enumerate(seen) if any(kind == REPLACED for kind, _ in b))
    assert gone < back


async def test_the_real_watcher_waiting_for_a_folder_ends_at_once_on_stop(tmp_path, monkeypatch):
    from streamrag import watch_events
    from streamrag.config import WatchSettings
    from streamrag.watch_events import watch_folder

    monkeypatch.setattr(watch_events, "_GONE_WAIT_S", 0.1)
    # It looks for the folder every _GONE_POLL_S: an hour here, so a stop heeded only at the next
    # look meets the guard (it was a 1.5 s bound around a 0.2 s stop). Not timed.
    monkeypatch.setattr(watch_events, "_GONE_POLL_S", 3600)
    folder = tmp_path / "w"
    folder.mkdir()
    stop = anyio.Event()
    changes_of = watch_folder(folder, WatchSettings(debounce_ms=50), stop)
    with anyio.fail_after(20):
        async def remove() -> None:
            await anyio.sleep(0.3)
            shutil.rmtree(folder)

        async with anyio.create_task_group() as tg:
            tg.start_soon(remove)
            async for changes in changes_of:
                if (DELETED, str(folder)) in changes:
                    break
    # The generator now waits for the folder (polling every _GONE_POLL_S); a stop ends it.
    async def stop_soon() -> None:
        await anyio.sleep(0.2)
        stop.set()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_soon)
            assert [c async for c in changes_of] == []


async def test_any_event_once_the_folder_is_gone_says_so_once(tmp_path):
    events = Events()
    daemon = Daemon(make_settings(""), tmp_path / "i.db", tmp_path / "gone", report=events)
    for _ in range(2):   # nothing to queue: the folder's return is synced whole
        assert await daemon._classify({(DELETED, str(tmp_path / "gone" / "a.txt"))}) == {}
    assert events.states() == ["gone"]
    # (`watch --once` has no watcher, so no event: its sync says the folder is gone,
    # ``test_watch_once_on_a_folder_gone_stops_with_1``.)


class GarbleExtractions(Switch):
    """Forwards to the simulator, but answers every extraction with no records and no ``done``."""

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        import json

        from streamrag.simulator import detect_task

        if request.url.path.endswith("/chat/completions") \
                and detect_task(json.loads(request.content)["messages"]) == "extract":
            return httpx.Response(200, json={
                "id": "g", "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "I cannot help."},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}})
        return await super().__call__(request)


async def test_answers_the_model_keeps_getting_wrong_are_retried_a_few_times_only(corpus, tmp_path, simulator):
    # Unusable extraction answers are paid answers, not an outage: three retry syncs. (Reports
    # cut off at every size served here until such a report settled after 3 runs in a row.)
    from streamrag.pipeline import sync

    garble = GarbleExtractions(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"cache": False}, watch={"quiet_s": 0.02})
    # (A version of the folder empty first: a first index the model answers unusably throughout
    # publishes nothing, and stops the watch.)
    folder = tmp_path / "notes"
    folder.mkdir()
    await sync([folder], settings, tmp_path / "u.db", root=folder)
    shutil.copytree(corpus, folder, dirs_exist_ok=True)
    async with running(settings, tmp_path / "u.db", folder,
                       transport=httpx.MockTransport(garble)) as (daemon, events, send):
        await until(lambda: any(e.get("gave_up") for e in events), timeout=60)
        await send.aclose()
    await garble.client.aclose()
    retries = [e for e in events if e["state"] == "error" and "llm_errors" in e and not e.get("gave_up")]
    assert len(retries) == 3 and not any(e["outage"] for e in retries)
    # Each error line says what it left out, as the README promises (only --once's did).
    gave_up = next(e for e in events if e.get("gave_up"))
    assert all(e["failed_items"] > 0 for e in (*retries, gave_up)), retries
    # The health line counts what failed in the last update, as `streamrag status` does, not
    # every retry's repeat of the same items.
    status = status_info(tmp_path / "u.db", failures=True)
    assert daemon.health()["failures"] == status["failures_last_run"] > 0
    # The retry syncs asked for the same items again: one update, each item counted once,
    # recorded by the sync and its three retries.
    assert status["failures_total"] == status["failures_last_run"]
    assert {f["times"] for f in status["failures"]} == {4}, status["failures"]


async def _garbled_change(corpus, tmp_path, simulator, change, *, llm: dict | None = None) -> tuple[Events, int]:
    """The lines of a daemon of ``corpus`` whose initial sync got usable answers and whose change,
    ``change(send)``, the model then answers unusably, up to the idle line after it; and where
    the change's lines begin."""
    garble = GarbleExtractions(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"cache": False, **(llm or {})},
                             watch={"quiet_s": 0.3})
    async with running(settings, tmp_path / "g.db", corpus) as (daemon, events, send):
        daemon.transport = httpx.MockTransport(garble)
        mark = len(events)
        await change(send)
        await until(lambda: "idle" in events.states(mark), timeout=60)
        daemon.stop()
        await send.aclose()
    await garble.client.aclose()
    return events, mark


async def test_an_extraction_ahead_whose_answers_were_unusable_says_its_chunks_failed(corpus, tmp_path, simulator):
    # An edit whose chunk the model answered with garbage (answers, not an outage) said
    # "0 chunks extracted, 2 reused", no word that a chunk failed, nor why, nor what comes of it.
    events, mark = await _garbled_change(corpus, tmp_path, simulator, lambda send: edit_guild(corpus, send))
    [waiting] = [e for e in events[mark:] if e["state"] == "waiting"]
    assert waiting["chunks_extracted"] == 0 and waiting["chunks_failed"] == 1, waiting
    assert waiting["message"].startswith(f"0 chunks extracted, {waiting['chunks_reused']} reused in "), waiting
    assert waiting["message"].endswith("; 1 chunk failed (the model's answers were unusable): the sync tries it "
                                       "again; sync after 0.3s of quiet"), waiting
    # As it says: the sync asked for it again (3 unusable answers ahead, 3 more in the sync).
    idle = next(e for e in events[mark:] if e["state"] == "idle")
    assert idle["llm"]["by_stage"]["extract"]["errors"] == 6, idle["llm"]


async def test_an_extraction_ahead_given_up_on_unusable_answers_says_it_left_them_to_the_sync(
        corpus, tmp_path, simulator):
    # The extraction ahead of a new file of 9 chunks stops once 8 answers were unusable: its line
    # said "... Nothing was published; the index is as it was; the next sync tries again", of an
    # extraction, which never publishes. The sync that follows publishes what it can.
    async def add_long(send) -> None:
        (corpus / "long.txt").write_text(_paragraphs(9))
        await send.send({(1, str(corpus / "long.txt"))})

    events, mark = await _garbled_change(corpus, tmp_path, simulator, add_long, llm={"max_retries": 0})
    [error] = [e for e in events[mark:] if e["state"] == "error" and e["message"].startswith("extracting")]
    assert error["message"].startswith("extracting 1 file failed: the first 8 chunks to finish all failed, "
                                       "none was extracted; last: "), error
    assert "published" not in error["message"] and "as it was" not in error["message"], error["message"]
    assert error["message"].endswith("try another model or prompt; left to the sync"), error["message"]


async def test_an_extraction_ahead_stopped_with_failed_chunks_says_the_next_start_once(corpus, tmp_path, simulator):
    # Stopped during an extraction ahead whose chunk the model answered with garbage, its line
    # said "...: the next start tries it again; the next start syncs it".
    garble = GarbleExtractions(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"cache": False}, watch={"quiet_s": 0.3})
    async with running(settings, tmp_path / "g.db", corpus) as (daemon, events, send):
        daemon.transport = httpx.MockTransport(garble)   # (the initial sync got usable answers)
        mark = len(events)

        def report(event: dict) -> None:
            events(event)
            if event["state"] == "extracting":
                daemon.stop()

        daemon.report = report
        await edit_guild(corpus, send)
        await until(lambda: "stopped" in events.states(mark), timeout=60)
        await send.aclose()
    await garble.client.aclose()
    [waiting] = [e for e in events[mark:] if e["state"] == "waiting"]
    assert waiting["chunks_failed"] == 1, waiting
    assert waiting["message"].endswith("; 1 chunk failed (the model's answers were unusable): the next start's "
                                       "sync tries it again"), waiting["message"]
    assert waiting["message"].count("the next start") == 1, waiting["message"]


class CutOnce(Switch):
    """Forwards to the simulator, but answers the first report cut off at max_tokens (a report is
    asked for with max_tokens: asked again, with twice the room; an extraction, sent none, is cut
    off by the server's own limit and not asked again)."""

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self.cut = False

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        import json

        from streamrag.simulator import detect_task

        if not self.cut and request.url.path.endswith("/chat/completions") \
                and detect_task(json.loads(request.content)["messages"]) == "report":
            self.cut = True
            return httpx.Response(200, json={
                "id": "cut", "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": '("entity"|'},
                             "finish_reason": "length"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
        return await super().__call__(request)


async def test_a_call_asked_again_successfully_is_no_failure_to_retry(corpus, tmp_path, simulator):
    """An answer cut off at max_tokens is asked for again; when the second answer does, nothing
    was left out: no error line and no retry sync (every sync that wrote reports showed one)."""
    cut = CutOnce(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.02})
    db = tmp_path / "c.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(cut)) as (daemon, events, send):
        await anyio.sleep(0.2)                                   # several quiet periods
        assert cut.cut and daemon.last_result.failed_items == 0
        assert sum(s.get("errors", 0) for s in daemon.last_result.llm.values()) == 1
        assert "error" not in events.states() and daemon.syncs == 1 and not daemon.pending
        # Nor is it said as a failed call: the idle line said "24 LLM calls, 4 failed" of report
        # answers cut off at report_max_output_tokens and asked again, while status said
        # "failures 0".
        [idle] = [e for e in events if e["state"] == "idle"]
        assert ", 1 answer asked again; sync " in idle["message"] and "failed" not in idle["message"], idle
        await send.aclose()
    await cut.client.aclose()
    # status says it as the idle line does (it counted it among the errors alone).
    info = status_info(db)
    assert (info["asked_again"], info["llm"]["errors"]) == (idle["asked_again"], 1) == (1, 1)


async def test_retries_through_an_outage_back_off_doubling_up_to_a_cap(corpus, tmp_path, simulator,
                                                                        monkeypatch):
    # A failed sync is retried after quiet_s * 2**(failures in a row), at most _MAX_BACKOFF_S
    # (five minutes in use): a retry every quiet period would hammer an endpoint that is down.
    from streamrag import daemon as daemon_module

    quiet, cap = 0.04, 0.2
    monkeypatch.setattr(daemon_module, "_MAX_BACKOFF_S", cap)
    syncs: list[tuple[float, float, bool]] = []   # (started, ended, ok) of every sync
    real_sync = Daemon._sync

    async def timed(self, reason, **kwargs):
        started = anyio.current_time()
        ok = await real_sync(self, reason, **kwargs)
        syncs.append((started, anyio.current_time(), ok))
        return ok

    monkeypatch.setattr(Daemon, "_sync", timed)
    chosen: list[float] = []    # the pause the daemon chose after each failed sync
    real_still_down = Daemon._still_down

    def noted(self, pause: float) -> None:
        chosen.append(pause)
        real_still_down(self, pause)

    monkeypatch.setattr(Daemon, "_still_down", noted)
    switch = Switch(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": quiet})
    async with running(settings, tmp_path / "b.db", corpus, transport=httpx.MockTransport(switch)) \
            as (daemon, events, send):
        switch.up = False
        victim = corpus / "guild.txt"
        victim.write_text(victim.read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
        await send.send({(MODIFIED, str(victim))})        # the only event: the rest are retries
        await until(lambda: len(syncs) >= 7, timeout=30)
        switch.up = True
        await send.aclose()
    await switch.client.aclose()
    failed = syncs[1:7]                                    # the initial sync succeeded
    assert syncs[0][2] and not any(ok for _s, _e, ok in failed), syncs
    assert any(e.get("outage", False) for e in events)   # (once, then briefly: test_an_outage_is_said_once_...)
    # The pause after each failed sync: 2, 4 quiet periods, then the cap (8, 16, 32 uncapped).
    expected = [2 * quiet, 4 * quiet, cap, cap, cap]
    assert chosen[:5] == pytest.approx(expected), chosen
    # And waited, from the end of one failed sync to the start of the next. (Only a lower bound:
    # a loaded machine lengthened a 0.2 s pause to 0.4 s.)
    pauses = [b[0] - a[1] for a, b in zip(failed, failed[1:])]
    assert all(p >= e - 0.005 for p, e in zip(pauses, expected)), (pauses, expected)


async def test_a_write_lock_held_by_another_program_is_waited_out(corpus, tmp_path, monkeypatch):
    """Another program holds the index's write lock past the wait: the sync fails in one line
    naming the file, the daemon keeps running and retries, and the change lands once the lock
    is let go (the daemon died with an sqlite3 traceback after 30 s)."""
    import sqlite3

    import streamrag.store as store_module

    monkeypatch.setattr(store_module, "_BUSY_S", 1)
    db = tmp_path / "l.db"
    async with running(make_settings("", index=SMALL, watch={"quiet_s": 0.02}), db, corpus) as (
            daemon, events, send):
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            new = corpus / "new.txt"
            new.write_text("Quillon Marbeck opened a ferry office at Port Vell.\n")
            await send.send({(1, str(new))})
            await until(lambda: any("stayed locked" in e["message"] for e in events if e["state"] == "error"),
                        timeout=30)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        error = next(e for e in events if e["state"] == "error" and "stayed locked" in e["message"])
        assert str(db) in error["message"] and "\n" not in error["message"]
        await _until_indexed(db, "Quillon Marbeck", timeout=30)
        await send.aclose()


async def test_a_stop_during_the_extraction_ahead_starts_no_sync(corpus, tmp_path, simulator, monkeypatch):
    # A stop finishes the work under way: the extraction ahead of a sync ended (here it failed),
    # and a whole new sync began once its quiet period had passed, after the stop.
    from streamrag.errors import StreamragError
    from streamrag.pipeline import Indexer

    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.02, "grace_s": 30})
    db = tmp_path / "o.db"
    async with running(settings, db, corpus) as (daemon, events, send):
        async def prefetch(self, paths):
            daemon.stop("stop requested")
            await anyio.sleep(0.1)       # longer than the quiet period
            raise StreamragError("endpoint down")

        monkeypatch.setattr(Indexer, "prefetch", prefetch)
        mark = len(events)
        victim = sorted(corpus.glob("*.txt"))[0]
        victim.write_text(victim.read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
        await send.send({(MODIFIED, str(victim))})
        await until(lambda: any(e["state"] == "stopped" for e in events), timeout=30)
    after = events[mark:]
    assert not [e for e in after if "scanning" in e["message"]], [e["message"] for e in after]
    assert any(e["message"].endswith("the next start tries again") for e in after)
    assert "not synced yet" in after[-1]["message"]


async def test_an_outage_is_said_once_then_briefly_as_the_pause_grows_and_once_when_over(
        corpus, tmp_path, simulator, monkeypatch):
    # Every retry through an outage said the full error line, after its sync's six state lines:
    # at five minutes apart, 5,000 lines over a weekend.
    syncs = counted_syncs(monkeypatch)
    switch, settings, cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "q.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        switch.up = False
        mark = len(events)
        await edit_guild(corpus, send)
        await until(lambda: len(syncs) >= 8, timeout=30)     # the edit's sync and six retries
        assert not any(syncs[1:])
        switch.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await switch.client.aclose()
    during = events[mark:]
    recovered = next((i for i, e in enumerate(during) if e["state"] == "recovered"), len(during))
    errors = [e for e in during[:recovered] if e["state"] == "error"]
    assert len(errors) == 1, [e["message"] for e in errors]
    first = errors[0]
    assert first["outage"] is True and first["endpoint"].startswith(simulator.base_url.rstrip("/"))
    assert f"{first['endpoint']} stopped answering at " in first["message"], first["message"]
    assert first["server_errors"] is False   # refused: nothing answers
    assert first["name_unknown"] is False   # (refused by a server, its name looked up)
    said = during[during.index(first) + 1:recovered]
    # The retries are silent (no state lines of theirs) but for a short line as the pause grew.
    # (The full line is the extraction ahead's; the edit's sync after it says, as one of an edit
    # later in the outage does, that the file keeps its previous version meanwhile.)
    assert [e["state"] for e in said if e["state"] not in ("health", "warning")] == ["outage", "outage"], \
        [(e["state"], e["message"]) for e in said]
    assert [e["message"].split(": ")[0] for e in said if e["state"] == "warning"] == ["guild.txt"], \
        [(e["state"], e["message"]) for e in said]
    assert [e["retry_s"] for e in said if e["state"] == "outage"] == [0.16, cap]
    for e in said:
        if e["state"] == "outage":
            assert e["outage"] is True and e["endpoint"] == first["endpoint"] and e["since"] == first["since"]
            assert e["message"].startswith(f"{first['endpoint']} still down since "), e["message"]
            assert "; retrying 0." in e["message"] and " after each failed sync (the last took " in e["message"], \
                e["message"]
            assert e["took_s"] > 0 and e["call_tries"] == 1, e
    back = during[recovered]
    assert back["outage"] is False and back["endpoint"] == first["endpoint"] and back["down_s"] > 0
    assert "answers again" in back["message"], back["message"]
    # Said as soon as a call of the retry got an answer; that sync's lines follow from there on.
    rest = [e["state"] for e in during[recovered + 1:]]
    assert "idle" in rest and not {"error", "outage"} & set(rest[:rest.index("idle")]), rest
    idle = during[recovered + 1 + rest.index("idle")]
    assert idle["llm"]["errors"] >= 6, idle   # the silent retries' calls too
    assert sum(e["state"] == "recovered" for e in during) == 1


async def test_the_sync_an_outage_recovers_in_says_its_opening_line_before_its_stages(
        corpus, tmp_path, simulator, monkeypatch):
    # Begun silent, it said "merging  extracting done: 2 chunks ..." after the recovered line,
    # with no extracting line before it to be done with.
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    events = await _down_then_back(switch, settings, tmp_path / "r.db", corpus,
                                   lambda events: any(e["state"] == "outage" for e in events))
    back = next(i for i, e in enumerate(events) if e["state"] == "recovered")
    lines = [e for e in events[back + 1:] if e["event"] == "state" and e["state"] not in ("warning", "health")]
    lines = lines[:[e["state"] for e in lines].index("idle")]
    assert lines[0]["state"] == "extracting" and ": scanning " in lines[0]["message"], \
        [(e["state"], e["message"]) for e in lines]
    for before, line in zip(lines, lines[1:]):   # each "X done" ends the state said before it
        assert line["message"].startswith(f"{before['state']} done"), [(e["state"], e["message"]) for e in lines]


@pytest.mark.parametrize("noted", ["by this one", "elsewhere", "with its password"])
async def test_an_endpoint_the_index_was_built_through_is_said_to_have_stopped_not_to_be_wrong(
        corpus, tmp_path, simulator, monkeypatch, noted):
    # A watch started on an index built through the endpoint (its initial sync asks it nothing),
    # which then dies: "is the endpoint ... down? Start it, or fix llm.api_base", the advice for
    # an endpoint that never answered. Built through another endpoint, the advice stays. An
    # endpoint with a password (user:password@), noted with it by older code, is the same one.
    from streamrag.pipeline import Indexer

    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    if noted == "with its password":
        base = simulator.base_url.replace("http://", "http://me:pw-LEAKCHECK-42@")
        settings = make_settings(base, index=SMALL, llm={"max_retries": 0}, watch={"quiet_s": 0.04})
    db = tmp_path / "b.db"
    await Indexer(settings, db, root=corpus, transport=httpx.MockTransport(switch)).run([corpus])
    store = Store(db)
    try:
        noted_row = json.loads(store.get_meta("endpoint_answered"))
        assert "LEAKCHECK" not in noted_row["api_base"], noted_row
        if noted != "by this one":
            api_base = settings.llm.api_base if noted == "with its password" else "http://elsewhere:1/v1"
            store.set_meta("endpoint_answered", json.dumps({**noted_row, "api_base": api_base}))
            store.conn.commit()
    finally:
        store.close()
    events = await _down_then_back(switch, settings, db, corpus,
                                   lambda events: any(e.get("outage") for e in events))
    first = next(e for e in events if e.get("outage"))
    assert first["state"] == "error", first
    assert not [e for e in events if e["state"] == "idle"][0]["llm"]["calls"]   # (nothing asked before)
    if noted != "elsewhere":
        assert f"no call succeeded: {first['endpoint']} stopped answering at " in first["message"], first
        assert "api_base" not in first["message"] and first["answered_at"] == round(noted_row["at"], 3), first
    else:
        assert "start the server, or fix llm.api_base" in first["message"] and first["answered_at"] is None, first
    store = Store(db, readonly=True)
    try:   # (the calls of the recovery noted it again, as it is noted now: a note with the password is gone)
        assert json.loads(store.get_meta("endpoint_answered"))["api_base"] == without_secrets(settings.llm.api_base)
    finally:
        store.close()


class Offline(Switch):
    """A switch whose endpoint, when down, fails as a host name no DNS answers does (glibc's words)."""

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)
        return await super().__call__(request)


async def test_an_endpoint_whose_host_name_is_not_looked_up_is_said_so_not_stopped(
        corpus, tmp_path, simulator, monkeypatch):
    # This machine offline (or its DNS), the watch said "http://... stopped answering at ..., having
    # answered at ..." and "still down since", as of a server stopped; the model client (and
    # `index`) said the host name could not be looked up, and to check the network.
    from streamrag.pipeline import Indexer

    _switch, settings, _cap = fast_outage(monkeypatch, simulator)
    offline = Offline(simulator.base_url)
    db = tmp_path / "n.db"
    await Indexer(settings, db, root=corpus, transport=httpx.MockTransport(offline)).run([corpus])
    events = await _down_then_back(offline, settings, db, corpus,
                                   lambda events: any(e["state"] == "outage" for e in events))
    first = next(e for e in events if e.get("outage"))
    host = httpx.URL(simulator.base_url).host
    assert f"no call succeeded: the host name {host} of {first['endpoint']} could not be looked up since " \
        in first["message"], first
    assert "check that this machine is online (its network and DNS)" in first["message"], first
    assert "stopped answering" not in first["message"] and "start the server" not in first["message"], first
    short = next(e for e in events if e["state"] == "outage")
    assert short["message"].startswith(f"the host name {host} of {first['endpoint']} still not looked up since "), short
    assert "; check that this machine is online (its network and DNS); retrying " in short["message"], short
    # watch --json says it in a field too: a script read it only from the words.
    assert first["name_unknown"] is True and short["name_unknown"] is True, (first, short)


def test_an_outage_of_an_endpoint_never_answered_whose_host_is_not_looked_up_says_to_check_its_spelling():
    # Said of calls recorded with no words of the client's: "is the endpoint ... down? Start it".
    from streamrag.outage import Outage

    outage = Outage(make_settings("http://llm.example.test/v1"), emit=lambda *a, **k: None)
    outage.refused = outage.unnamed = True
    outage.began()
    assert outage.unreachable() == ("the host name llm.example.test of http://llm.example.test/v1 could not be "
                                    "looked up: check its spelling in llm.api_base, and that this machine is online "
                                    "(its network and DNS)")
    outage.unnamed = False
    assert outage.unreachable() == "is the endpoint http://llm.example.test/v1 down? Start it, or fix llm.api_base"


async def test_status_says_a_call_refused_by_an_endpoint_that_answered_before_was_refused_by_one_stopped(
        corpus, tmp_path, simulator, monkeypatch):
    # Each sync's model client is new, so one refused by an endpoint that had answered the sync
    # before it recorded "nothing answers at ...; start the server, or fix llm.api_base": `status
    # --failures` told the user to fix a setting that is right, of calls the watch retries.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "s.db"
    # (stopped after the edit's sync, which follows its extraction ahead)
    daemon = await _edited_while_down(settings, db, corpus, switch, syncs, stop_after=2)
    await switch.client.aclose()
    answered = daemon.outage.answered_at   # (the initial sync's: nothing answered since)
    failures = status_info(db, failures=True)["failures"]
    assert failures, failures
    for f in failures:
        assert f"/chat/completions stopped answering (it last answered at {clock(answered)}): every connection " \
               "is refused (" in f["message"], f
        # (A retry the stop came during, as it may on a loaded machine, words its failures for a
        # process that retries no more: ``endpoint_health.START_AGAIN``.)
        assert f["message"].endswith(("; retried until it answers", START_AGAIN)), f
        assert "api_base" not in f["message"], f


def test_a_sync_failing_as_an_endpoint_that_answered_stops_says_it_stopped(tmp_path):
    # A sync given up as every connection was refused said the model client's words for an
    # endpoint that never answered: "nothing answers at ...; start the server, or fix llm.api_base".
    from streamrag.errors import LLMUnavailableError

    events = Events()
    daemon = Daemon(make_settings("http://127.0.0.1:9/v1"), tmp_path / "i.db", tmp_path, report=events)
    error = LLMUnavailableError("nothing answers at http://127.0.0.1:9/v1/chat/completions (ConnectError: "
                                "refused); start the server, or fix llm.api_base")
    failed = types.SimpleNamespace(not_indexed_files=None, llm=None, unavailable_error=str(error))
    daemon.outage.refused = True
    daemon._sync_failed(error, failed, {}, quiet=False, initial=False)   # never answered: as it said
    daemon.outage.no_news()
    daemon.outage.answered_at = time.time() - 60
    daemon._sync_failed(error, failed, {}, quiet=False, initial=False)
    never, stopped = (e["message"] for e in events)
    assert "; no call succeeded: nothing answers at " in never and "fix llm.api_base" in never, never
    assert "; no call succeeded: http://127.0.0.1:9/v1 stopped answering at " in stopped, stopped
    assert "api_base" not in stopped and stopped.endswith(" (retrying until it answers, less often as it "
                                                          "stays down, said briefly)"), stopped


def test_a_sync_given_up_after_some_of_its_calls_answered_does_not_say_none_did(tmp_path):
    # A sync whose first report was answered, the server gone for good after: the client gave up
    # on it, "answered earlier but has refused ...", and its line said "no call succeeded: ...".
    from streamrag.errors import LLMUnavailableError

    events = Events()
    daemon = Daemon(make_settings("http://127.0.0.1:9/v1"), tmp_path / "i.db", tmp_path, report=events)
    words = ("http://127.0.0.1:9/v1/chat/completions answered earlier but has refused every connection for "
             "61 s (connection failed (ConnectError: refused)); the server stopped: start it again")
    error = LLMUnavailableError(f"{words}. Nothing was published; the index is as it was")
    llm = types.SimpleNamespace(stats={"report": {"calls": 4, "errors": 3}})   # one answered
    daemon._sync_failed(error, types.SimpleNamespace(not_indexed_files=None, llm=llm, unavailable_error=words),
                        {}, quiet=False, initial=False)
    (line,) = events
    assert "no call succeeded" not in line["message"] and line["outage"] is True, line
    assert line["message"].startswith(f"sync failed: {words}") and line["message"].endswith(
        "; retrying until it answers, less often as it stays down, said briefly"), line
    assert line["llm_errors"] == 3 and line["error"] == str(error), line


def test_an_endpoint_that_stopped_in_the_minute_it_answered_is_said_to_the_second(tmp_path):
    # It said "stopped answering at 19:45, having answered at 19:45": the same minute, no news.
    from streamrag.outage import Outage

    outage = Outage(make_settings("http://127.0.0.1:9/v1"), emit=lambda *a, **k: None)
    minute = time.time() // 60 * 60 - 120   # (a whole minute, local time zones offset by whole minutes)
    outage.answered_at, outage.failing_since = minute + 9, minute + 41
    outage.began()
    same = clock(minute)   # ("18:05", or "Fri 18:05" just after midnight)
    assert outage.stopped() == (f"http://127.0.0.1:9/v1 stopped answering at {same}:41, having answered "
                                f"at {same}:09")
    # In other minutes, as before.
    outage.answered_at = minute - 60
    assert outage.stopped() == f"http://127.0.0.1:9/v1 stopped answering at {same}, having answered at " \
                               f"{clock(minute - 60)}"


def test_an_outage_names_the_endpoint_without_its_password():
    # http://user:password@host/v1: the outage lines ("... stopped answering at ...") and their
    # --json endpoint quoted the password.
    from streamrag.outage import Outage

    outage = Outage(make_settings("http://me:pw-LEAKCHECK-42@127.0.0.1:9/v1"), emit=lambda *a, **k: None)
    outage.answered_at, outage.failing_since = time.time() - 60, time.time() - 30
    assert outage.began()["endpoint"] == "http://me:***@127.0.0.1:9/v1"
    assert outage.stopped().startswith("http://me:***@127.0.0.1:9/v1 stopped answering at ")


def test_another_error_met_during_an_outage_is_said_as_it_is(tmp_path):
    # During an outage of an endpoint that answered before, any error of a sync was said as the
    # endpoint having stopped answering: a full disk too.
    from streamrag.errors import StreamragError

    events = Events()
    daemon = Daemon(make_settings("http://127.0.0.1:9/v1"), tmp_path / "i.db", tmp_path, report=events)
    daemon.outage.began()
    daemon.outage.refused = True
    daemon.outage.answered_at = time.time() - 60
    failed = types.SimpleNamespace(not_indexed_files=None, llm=None)
    daemon._sync_failed(StreamragError("the disk holding the index is full: free some space"), failed, {},
                        quiet=False, initial=False)
    [line] = (e["message"] for e in events)
    assert line.startswith("sync failed: the disk holding the index is full"), line
    assert "stopped answering" not in line, line


async def test_edits_during_an_outage_do_not_lengthen_the_pause_before_the_next_retry(
        corpus, tmp_path, simulator, monkeypatch):
    # Each failed sync doubled the pause, those for new edits too: edits every 4 s during a 35 s
    # outage took it to 4 minutes, and the index stayed that stale once the server was back.
    from streamrag import daemon as daemon_module

    syncs = counted_syncs(monkeypatch)
    pauses: list[float] = []   # (the pause is said only as it grows: each one the daemon takes)
    retried: list[bool] = []   # ... and whether the failed sync before it retried only, no edit
    victim = corpus / "guild.txt"
    sender: list = []
    failures_after = daemon_module._failures_after

    def noted(failures: int, *, ok: bool, only_retry: bool) -> int:
        if not ok:
            retried.append(only_retry)
        return failures_after(failures, ok=ok, only_retry=only_retry)

    def edit() -> None:
        n = len(pauses)
        victim.write_text(victim.read_text() + f"\n\nQuillon Marbeck opened ferry office {n}.\n")
        sender[0].send_nowait({(MODIFIED, str(victim))})

    still_down = Daemon._still_down

    def pause_then_edit(self, pause: float) -> None:
        # Each edit comes as soon as the last one's sync failed, as the daemon takes its pause
        # (sent by the test after it, an edit late on a loaded machine let a retry double it).
        pauses.append(pause)
        still_down(self, pause)
        if len(pauses) < 6:
            edit()

    monkeypatch.setattr(Daemon, "_still_down", pause_then_edit)
    monkeypatch.setattr(daemon_module, "_failures_after", noted)
    switch = Switch(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": 0.04})
    async with running(settings, db := tmp_path / "e.db", corpus,
                       transport=httpx.MockTransport(switch)) as (daemon, events, send):
        switch.up = False
        sender.append(send)
        mark = len(syncs)   # (the first sync's)
        edit()
        await until(lambda: len(syncs) >= mark + 6, timeout=30)
        switch.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await switch.client.aclose()
    assert not any(syncs[mark:mark + 6]) and pauses, (syncs, pauses)
    # A failed sync that took an edit leaves the pause as it was; one that only retried doubles it.
    # (The edit is sent as the pause begins, but the daemon's own work on the loop after it, its
    # health line, the edit's look, may outlast a pause of 0.08 s on a loaded machine: a retry
    # then comes first, and doubles it as it should. Under load ~11, 5 runs of 6 had one such
    # retry, and max(pauses) <= 0.16 allowed one only.)
    steps = list(zip(retried[1:], pauses, pauses[1:]))
    assert any(not only for only, _was, _now in steps), (retried, pauses)   # (edits were taken)
    assert all(now <= was for only, was, now in steps if not only), list(zip(retried, pauses))
    assert all(now <= 2 * was for _only, was, now in steps), list(zip(retried, pauses))


def test_the_outage_line_says_the_pause_runs_from_the_end_of_a_sync_that_itself_retries(tmp_path):
    # "retrying every 8 s" was said while each retry sync took 40 s, its calls retried 6 times.
    events = Events()
    daemon = Daemon(make_settings("http://127.0.0.1:9/v1", llm={"max_retries": 6}), tmp_path / "i.db",
                    tmp_path, report=events)
    daemon.outage.began()    # (its full line is the sync's)
    daemon.outage.still_down(4)
    daemon.outage.tried_s = 44.0    # the failed sync's length
    daemon.outage.still_down(8)
    [line] = events
    assert "; retrying 8 s after each failed sync (the last took 44 s, each call in it tried up to 7 " \
           "times)" in line["message"], line["message"]
    assert line["retry_s"] == 8 and line["took_s"] == 44.0 and line["call_tries"] == 7, line


def test_while_the_pause_is_at_its_cap_the_outage_is_said_once_an_hour(tmp_path, monkeypatch):
    from streamrag import outage as outage_module

    events = Events()
    daemon = Daemon(make_settings("http://127.0.0.1:9/v1"), tmp_path / "i.db", tmp_path, report=events)
    now = [1000.0]
    monkeypatch.setattr(outage_module.time, "monotonic", lambda: now[0])
    daemon.outage.began()    # (its full line is the sync's)
    for pause in [2, 4, 300, 300, 300]:
        daemon.outage.still_down(pause)
        now[0] += pause
    assert [e["retry_s"] for e in events] == [4, 300]
    now[0] += outage_module.OUTAGE_REMIND_S
    daemon.outage.still_down(300)
    daemon.outage.still_down(300)
    assert [e["retry_s"] for e in events] == [4, 300, 300]
    assert all(e["state"] == "outage" and e["endpoint"] == "http://127.0.0.1:9/v1" for e in events)


class Failing(Switch):
    """A transport that forwards to the simulator while ``up`` and answers HTTP 500 otherwise."""

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            return httpx.Response(500, json={"error": {"message": "boom"}})
        return await super().__call__(request)


async def test_the_model_clients_retry_lines_are_not_said_again_by_every_retry_of_an_outage(
        corpus, tmp_path, simulator, monkeypatch, caplog):
    # Each sync's model client had its own limit on retry lines: under a server answering 500,
    # every retry sync said `URL: HTTP 500: boom; retry 1/1 in 0.7 s` again, a line each five
    # minutes for as long as it lasted.
    import logging

    from streamrag import daemon as daemon_module, llm as llm_module, notices

    monkeypatch.setattr(daemon_module, "_MAX_BACKOFF_S", 0.2)
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.01)   # the client's own pause between tries
    monkeypatch.setattr(notices, "NOTICE_EVERY_S", 0.0)   # retries far apart: held all the same
    syncs = counted_syncs(monkeypatch)
    failing = Failing(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 1},
                             watch={"quiet_s": 0.04})
    db = tmp_path / "r.db"
    with caplog.at_level(logging.WARNING, logger="streamrag.llm"):
        async with running(settings, db, corpus, transport=httpx.MockTransport(failing)) as (daemon, events, send):
            failing.up = False
            await edit_guild(corpus, send)
            await until(lambda: any(e.get("outage") for e in events), timeout=30)
            before = [r.getMessage() for r in caplog.records]   # the edit's extraction ahead, its sync
            await until(lambda: len(syncs) >= 7, timeout=30)     # and five retries
            assert not any(syncs[1:])
            said_down = [r.getMessage() for r in caplog.records]
            failing.up = True
            await _until_indexed(db, "Quillon Marbeck", timeout=60)
            await send.aclose()
    await failing.client.aclose()
    assert before and all("HTTP 500: boom; retry 1/1 in " in m for m in before), before
    assert said_down == before, said_down[len(before):]   # the outage lines speak for the retries
    assert [e["state"] for e in events].count("recovered") == 1
    assert not daemon.outage.notices.held   # answered again: its next trouble is said in full


def test_the_outage_line_names_the_flag_that_set_the_endpoint(tmp_path):
    # `watch --api-base URL` said "fix llm.api_base", a setting the user never wrote.
    events = Events()
    settings = make_settings("http://127.0.0.1:9/v1")
    settings.api_base_from = "--api-base"   # as load_settings records the flag
    daemon = Daemon(settings, tmp_path / "i.db", tmp_path, report=events)
    daemon._retry_left_out(2, 2, outage=True, quiet=False)
    [line] = events
    assert line["outage"] is True and "fix --api-base (" in line["message"], line["message"]
    assert "llm.api_base" not in line["message"], line["message"]


@pytest.mark.parametrize("statuses, said, still", [
    ({503: 4}, "the server behind --api-base answers only HTTP 503 (a proxy or load balancer answers so "
               "while the server behind it is down): check that server and its logs (",
     "the server behind http://127.0.0.1:9/v1 still down since "),
    ({503: 3, None: 1}, "the server at http://127.0.0.1:9/v1 kept answering with errors: check its logs (",
     "http://127.0.0.1:9/v1 still answering with errors since "),
    ({400: 4}, "the server at http://127.0.0.1:9/v1 kept answering with errors: check its logs (",
     "http://127.0.0.1:9/v1 still answering with errors since "),
    ({408: 2, 503: 2}, "the server behind --api-base answers only HTTP 408 and 503 (a proxy",
     "the server behind http://127.0.0.1:9/v1 still down since "),
    ({200: 4}, "the server at http://127.0.0.1:9/v1 answered, but its answers could not be read: check that "
               "--api-base is an OpenAI-compatible endpoint (",
     "http://127.0.0.1:9/v1 still giving answers that cannot be read since "),
    ({200: 3, 500: 1}, "the server at http://127.0.0.1:9/v1 kept answering with errors: check its logs (",
     "http://127.0.0.1:9/v1 still answering with errors since "),
])
def test_the_outage_line_says_only_errors_only_when_every_failed_try_was_one(tmp_path, statuses, said, still):
    # A try without an answer (a timeout, a refusal) among them, or a 400, is no proxy's answer:
    # the server answered with errors, its logs say why, as before. The line after it says the
    # outage as it did: a proxy's 503s were "still answering with errors", the proxy's logs to check.
    from collections import Counter

    events = Events()
    settings = make_settings("http://127.0.0.1:9/v1")
    settings.api_base_from = "--api-base"
    daemon = Daemon(settings, tmp_path / "i.db", tmp_path, report=events)
    daemon.outage.server_errors, daemon.outage.statuses = True, Counter(statuses)
    daemon._retry_left_out(2, 2, outage=True, quiet=False)
    [line] = events
    assert f"; no call succeeded: {said}" in line["message"], line["message"]
    daemon.outage.still_down(1)   # (the full line said it just now)
    daemon.outage.still_down(2)   # the pause grew
    [_, brief] = events
    assert brief["state"] == "outage" and brief["message"].startswith(still), brief["message"]


def _in_an_outage_of_502s(tmp_path: Path, api_base: str, events: Events, env: dict[str, str]) -> Daemon:
    """A daemon of ``api_base`` whose outage met four HTTP 502s, through the proxy ``env`` names."""
    from collections import Counter

    from streamrag.proxies import proxy_for

    daemon = Daemon(make_settings(api_base), tmp_path / "i.db", tmp_path, report=events)
    daemon.outage.server_errors, daemon.outage.statuses = True, Counter({502: 4})
    daemon.outage.proxy = proxy_for(f"{api_base}/chat/completions", env)
    return daemon


def test_the_outage_line_names_the_proxy_answering_only_502(tmp_path):
    # A proxy the environment names (HTTP_PROXY) that cannot reach the server behind it answers
    # every request 502: the lines said "a proxy or load balancer" and "the server behind
    # http://... still down", that proxy unnamed, and no NO_PROXY for a server on this machine.
    events = Events()
    daemon = _in_an_outage_of_502s(tmp_path, "http://127.0.0.1:9/v1", events,
                                   {"HTTP_PROXY": "http://puser:proxy-LEAKCHECK-7@127.0.0.1:3128"})
    daemon._retry_left_out(2, 2, outage=True, quiet=False)
    proxy = "the proxy http://puser:***@127.0.0.1:3128 (set by HTTP_PROXY)"
    [line] = events
    assert (f"; no call succeeded: requests to the server at llm.api_base go through {proxy}, which answers only "
            "HTTP 502 (as a proxy does while the server behind it is down or out of its reach): 127.0.0.1 is this "
            "machine, which needs no proxy: `export NO_PROXY=127.0.0.1`, or unset HTTP_PROXY; else check that "
            "server, and the proxy's logs (") in line["message"], line["message"]
    daemon.outage.still_down(1)   # (the full line said it just now)
    daemon.outage.still_down(2)   # the pause grew
    [_, brief] = events
    assert brief["message"].startswith(f"http://127.0.0.1:9/v1 behind {proxy} still down since "), brief["message"]
    assert "LEAKCHECK" not in json.dumps(list(events))


def test_the_outage_line_of_an_https_servers_502_through_a_proxy_does_not_name_the_proxy(tmp_path):
    # An https:// endpoint's requests go through HTTPS_PROXY's tunnel: a 502 is the server's (or
    # a gateway's behind it), never the proxy's own, which refuses a tunnel with no status; the
    # lines said "go through the proxy ..., which answers only HTTP 502" and "behind the proxy".
    events = Events()
    daemon = _in_an_outage_of_502s(tmp_path, "https://127.0.0.1:9/v1", events, {"HTTPS_PROXY": "http://127.0.0.1:3128"})
    assert daemon.outage.proxy is not None
    daemon._retry_left_out(2, 2, outage=True, quiet=False)
    daemon.outage.still_down(1)
    daemon.outage.still_down(2)
    [line, brief] = events
    assert "; no call succeeded: the server behind llm.api_base answers only HTTP 502 (a proxy or load " \
           "balancer " in line["message"], line["message"]
    assert brief["message"].startswith("the server behind https://127.0.0.1:9/v1 still down since "), brief["message"]
    assert "3128" not in json.dumps(list(events))


async def _outage_lines(transport, simulator, corpus, tmp_path, monkeypatch) -> tuple[dict, dict]:
    """The line of the outage begun, said with ``server_errors``, and the short line after it, of a
    daemon whose calls go through ``transport`` while it is down (retried after 0.2 s at most)."""
    from streamrag import daemon as daemon_module

    monkeypatch.setattr(daemon_module, "_MAX_BACKOFF_S", 0.2)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0}, watch={"quiet_s": 0.04})
    events = await _down_then_back(transport, settings, tmp_path / "o.db", corpus,
                                   lambda events: any(e["state"] == "outage" for e in events))
    first = next(e for e in events if e.get("outage"))
    assert first["state"] == "error" and first["server_errors"] is True, first
    return first, next(e for e in events if e["state"] == "outage")


async def test_a_server_answering_with_errors_is_said_to_answer_with_errors_not_to_be_down(
        corpus, tmp_path, simulator, monkeypatch):
    # A server answering HTTP 500 to every request was said to be down ("is the endpoint ...
    # down? Start it", "still down since"), while `streamrag index` says it kept answering with
    # errors: its logs say why, and starting it again is no fix.
    first, brief = await _outage_lines(Failing(simulator.base_url), simulator, corpus, tmp_path, monkeypatch)
    # (said as the model client says it: the server answers only HTTP 500)
    assert "no call succeeded: the server at llm.api_base answers only HTTP 500: check its logs (" \
        in first["message"], first["message"]
    assert "down?" not in first["message"], first["message"]
    assert brief["server_errors"] is True and brief["outage"] is True, brief
    assert brief["message"].startswith(f"{first['endpoint']} still answering with errors since "), brief


async def test_a_proxy_answering_only_503_is_said_as_the_model_client_says_it(corpus, tmp_path, simulator,
                                                                              monkeypatch):
    # A proxy whose server behind it is down answers 503 "try again later" to everything: the
    # line of the outage begun said "the server at URL kept answering with errors: check its
    # logs" (the proxy's, which say nothing of it), while the model client's error names the
    # statuses and the server behind llm.api_base to check (``endpoint_health.only_errors``).
    first, brief = await _outage_lines(AskingToWait(simulator.base_url), simulator, corpus, tmp_path, monkeypatch)
    assert ("; no call succeeded: the server behind llm.api_base answers only HTTP 503 (a proxy or load "
            "balancer answers so while the server behind it is down): check that server and its logs "
            "(retrying until it answers") in first["message"], first["message"]
    assert "kept answering with errors" not in first["message"], first["message"]
    # ... and the line after it as the first: it said "still answering with errors since".
    assert brief["message"].startswith(f"the server behind {first['endpoint']} still down since "), brief


class CacheFull(Switch):
    """A transport that forwards to the simulator while ``up`` and otherwise answers every chat
    request with llama.cpp's 500 when its KV cache fills ("Context size has been exceeded.")."""

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.up and request.url.path.endswith("/chat/completions"):
            return httpx.Response(500, json={"error": {"code": 500, "message": "Context size has been exceeded.",
                                                       "type": "server_error"}})
        return await super().__call__(request)


async def test_a_crowded_llama_cpp_is_said_with_what_to_change_not_its_logs(corpus, tmp_path, simulator, monkeypatch):
    # Every try answered llama.cpp's KV-cache-full 500: the line of the outage begun said "the
    # server at llm.api_base answers only HTTP 500: check its logs", where each call's error (and
    # `streamrag index`) says to give each request more context or send fewer at once.
    first, _ = await _outage_lines(CacheFull(simulator.base_url), simulator, corpus, tmp_path, monkeypatch)
    assert ("; no call succeeded: the server's context filled with the requests it was answering at once "
            "(llama.cpp: -c is split among its -np slots, or shared by them all with --kv-unified): raise -c or "
            "lower -np, lower llm.concurrency (") in first["message"], first["message"]
    assert "check its logs" not in first["message"], first["message"]


class AnsweringText(Switch):
    """A transport that forwards to the simulator while ``up`` and otherwise answers HTTP 200 with
    text that is no chat answer (not JSON), as a web server at a wrong path may."""

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            return httpx.Response(200, text="I cannot help.", headers={"content-type": "text/plain"})
        return await super().__call__(request)


async def test_a_server_whose_answers_cannot_be_read_is_said_so_not_to_answer_with_errors(
        corpus, tmp_path, simulator, monkeypatch):
    # Every call answered HTTP 200 with text that is not a chat answer: the line of the outage
    # begun said "no call succeeded: the server at URL kept answering with errors: check its logs",
    # and the next "still answering with errors", of a server that answered every request, with
    # nothing in its logs; the model client's own error says its answers could not be read. It is
    # retried after a pause, not "until it answers": it answers.
    first, brief = await _outage_lines(AnsweringText(simulator.base_url), simulator, corpus, tmp_path, monkeypatch)
    assert (f"; no call succeeded: the server at {first['endpoint']} answered, but its answers could not be "
            "read: check that llm.api_base is an OpenAI-compatible endpoint (retrying after a pause, less often "
            "as it goes on, said briefly)") in first["message"], first["message"]
    assert "until it answers" not in first["message"], first["message"]
    assert "with errors" not in first["message"], first["message"]
    assert brief["message"].startswith(f"{first['endpoint']} still giving answers that cannot be read since "), brief


class SlowFailing(Failing):
    """Answers HTTP 500 slowly while down, noting when the first such answer was given."""

    first_failed: float | None = None

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.up:
            return await super().__call__(request)
        await anyio.sleep(0.25)
        if self.first_failed is None:
            self.first_failed = time.time()
        return httpx.Response(500, json={"error": {"message": "boom"}})


async def test_an_outage_is_said_to_last_since_the_first_call_failed(corpus, tmp_path, simulator,
                                                                     monkeypatch):
    # "since" was the time of the line that said the outage, after the failing sync's retries:
    # a first 500 at 23:51:51 was said as "since 23:53 ... after 55 s down".
    from streamrag import daemon as daemon_module, llm as llm_module

    monkeypatch.setattr(daemon_module, "_MAX_BACKOFF_S", 0.2)
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.01)
    failing = SlowFailing(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 2},
                             watch={"quiet_s": 0.04})
    async with running(settings, tmp_path / "s.db", corpus, transport=httpx.MockTransport(failing)) \
            as (daemon, events, send):
        failing.up = False
        await edit_guild(corpus, send)
        await until(lambda: any(e.get("outage") for e in events), timeout=30)
        said_at = time.time()
        first = next(e for e in events if e.get("outage"))
        failing.up = True
        await _until_indexed(tmp_path / "s.db", "Quillon Marbeck", timeout=60)
        await send.aclose()
    await failing.client.aclose()
    # The extraction ahead's call was tried three times, 0.25 s a try: the line came half a second after.
    assert said_at - failing.first_failed > 0.45, (said_at, failing.first_failed)
    assert abs(first["since"] - failing.first_failed) < 0.1, (first["since"], failing.first_failed)
    back = next(e for e in events if e["state"] == "recovered")
    assert back["since"] == first["since"]


async def test_the_idle_line_of_a_sync_whose_calls_all_failed_says_they_failed(corpus, tmp_path, simulator,
                                                                              monkeypatch):
    # "version 2: 5 documents ...; 2 LLM calls; sync 0.02s" when both calls had failed. (A file
    # deleted: no extraction ahead, which would say the outage first, the sync silent after it;
    # the sync publishes the index without it, its communities' reports failed; the retries
    # publish nothing.)
    from streamrag import daemon as daemon_module
    from test_daemon import VERSION, db_count

    monkeypatch.setattr(daemon_module, "_MAX_BACKOFF_S", 0.1)
    syncs = counted_syncs(monkeypatch)
    failing = Failing(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": 0.04})
    db = tmp_path / "f.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(failing)) as (daemon, events, send):
        failing.up = False
        mark = len(events)
        (corpus / "festival.md").unlink()
        await send.send({(DELETED, str(corpus / "festival.md"))})
        await until(lambda: len(syncs) >= 5, timeout=30)   # the deletion's sync and three retries
        version = db_count(db, VERSION)
        await send.aclose()
    await failing.client.aclose()
    idle = [e for e in events[mark:] if e["state"] == "idle"]
    assert len(idle) == 1 and idle[0]["version"] == version, [e["message"] for e in idle]   # retries: none
    calls = idle[0]["llm"]["calls"]
    assert calls and idle[0]["llm"]["errors"] == calls, idle[0]
    assert f"; {calls} LLM calls, all failed; sync " in idle[0]["message"], idle[0]["message"]


def test_calls_cancelled_as_a_sync_gave_up_got_no_answer_and_are_said_as_cancelled():
    # Recorded now (they were dropped), a sync's cancelled calls would have counted as answered:
    # an outage "recovered" by calls that never got an answer.
    from streamrag.watch_lines import answered, calls_said

    gave_up = {"extract": {"calls": 9, "cached": 0, "errors": 3, "cancelled": 6, "unusable": 0}}
    assert not answered(gave_up)
    assert calls_said(9, 0, gave_up) == "9 LLM calls, 3 failed, 6 cancelled"
    assert answered({"extract": {**gave_up["extract"], "calls": 10}})
    # Those the client gave up on (its endpoint failing every try) are failed ones, as the idle
    # line and an error line (``llm_errors``) both count them (``CallLog.cancelled``).
    from streamrag.watch_lines import calls_failed

    given_up = {"extract": {**gave_up["extract"], "errors": 7, "cancelled": 2, "gave_up": 4}}
    assert calls_said(9, 0, given_up) == "9 LLM calls, 7 failed, 2 cancelled"
    assert calls_failed(given_up) == 7 and calls_failed(gave_up) == 3


async def test_an_outage_that_ends_in_an_extraction_ahead_is_said_to_end(corpus, tmp_path, simulator,
                                                                         monkeypatch):
    # The endpoint answered again first in the extraction ahead of a sync, and that sync needed
    # no call: the outage ended without a `recovered` line (the sync, asking the endpoint
    # nothing, had no news of it and dropped it unsaid).
    syncs = counted_syncs(monkeypatch)
    failing = Failing(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": 0.5})
    note = corpus / "note.txt"   # (no capitalised names: nothing to summarize or report)
    async with running(settings, tmp_path / "n.db", corpus, transport=httpx.MockTransport(failing)) \
            as (daemon, events, send):
        failing.up = False
        note.write_text("the ferry left at noon and nobody spoke of it.\n")
        await send.send({(1, str(note))})
        await until(lambda: len(syncs) >= 2, timeout=30)   # the initial sync, the note's that failed
        assert not syncs[-1] and daemon.outage.current is not None
        mark = len(events)
        failing.up = True
        note.write_text("the ferry left at dawn, and the harbour was quiet.\n")
        await send.send({(MODIFIED, str(note))})   # (before the retry: its pause is 1 s)
        await until(lambda: len(syncs) >= 3, timeout=30)
        await send.aclose()
    await failing.client.aclose()
    after = events[mark:]
    states = [e["state"] for e in after]
    # The scene: the extraction ahead got the answers, the sync that published asked nothing.
    assert "waiting" in states and syncs[2] and not daemon.last_result.llm, (states, daemon.last_result.llm)
    assert states.count("recovered") == 1, [(e["state"], e["message"]) for e in after]
    back = after[states.index("recovered")]
    assert back["outage"] is False and back["down_s"] > 0 and "answers again" in back["message"], back
    assert states.index("recovered") < states.index("idle")
    assert not daemon.outage.notices.held   # its next trouble is said in full


async def test_an_outage_that_ends_in_a_sync_failing_for_another_reason_is_said_to_end(
        corpus, tmp_path, simulator, monkeypatch):
    # The endpoint answered again in a sync (of an edit: not a silent retry) that then failed for
    # another reason, the index locked, and the sync after it needed no call: the outage ended
    # without a `recovered` line (that sync, asking the endpoint nothing, dropped it unsaid).
    from streamrag import index_rows
    from streamrag.errors import StoreBusyError

    syncs = counted_syncs(monkeypatch)
    switch = Switch(simulator.base_url)
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0},
                             watch={"quiet_s": 0.05})
    db = tmp_path / "k.db"
    note = corpus / "note.txt"   # (no capitalised names: nothing to summarize or report)
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        switch.up = False
        note.write_text("the ferry left at noon and nobody spoke of it.\n")
        await send.send({(1, str(note))})
        await until(lambda: len(syncs) >= 2, timeout=30)   # the initial sync, the note's that failed
        assert not syncs[-1] and daemon.outage.current is not None
        mark, tried = len(events), len(syncs)
        real_publish, busy = index_rows.publish, []

        def publish(*args, **kwargs):
            if not busy:   # once: the sync's calls were answered, then it cannot write
                busy.append(True)
                raise StoreBusyError(f"{db}: the index stayed locked by another program")
            return real_publish(*args, **kwargs)

        monkeypatch.setattr(index_rows, "publish", publish)
        switch.up = True
        (corpus / "festival.md").unlink()   # (no extraction ahead: the sync asks the endpoint)
        await send.send({(DELETED, str(corpus / "festival.md"))})
        await until(lambda: any(syncs[tried:]), timeout=30)   # published at last
        await send.aclose()
    await switch.client.aclose()
    after = events[mark:]
    states = [e["state"] for e in after]
    failed = next(e for e in after if e["state"] == "error")
    assert busy and "stayed locked" in failed["message"], failed
    # The scene: the sync that published asked the endpoint nothing (the failed one did).
    assert not [s for s in daemon.last_result.llm.values() if s.get("calls", 0) > s.get("cached", 0)], \
        daemon.last_result.llm
    assert states.count("recovered") == 1, [(e["state"], e["message"]) for e in after]
    assert states.index("recovered") < states.index("idle")
    assert not daemon.outage.notices.held   # its next trouble is said in full



async def test_an_outage_the_extraction_ahead_meets_first_is_said_there_in_full_once(corpus, tmp_path, simulator,
                                                                                   monkeypatch):
    # A line appended to a file once the endpoint had died: its extraction ahead (one chunk to
    # extract: the model client gives up on an extraction only after three) failed its one call
    # and said "waiting: 0 chunks extracted, 2 reused", no word of the outage, which the sync
    # after it said first, after its own stage and idle lines. An edit later in the outage said
    # "0 chunks extracted" too.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "a.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        mark = len(events)
        switch.up = False
        await edit_guild(corpus, send)
        await until(lambda: len(syncs) >= 3, timeout=30)   # the initial sync, the edit's, a retry
        assert not any(syncs[1:]), syncs
        edit = len(events) - mark
        festival = corpus / "festival.md"
        festival.write_text(festival.read_text() + "\n\nOrla Brand rang the harbor bell at Pier 4.\n")
        await send.send({(MODIFIED, str(festival))})
        await until(lambda: len(syncs) >= 5, timeout=30)   # its sync and a retry
        switch.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await switch.client.aclose()
    during = [e for e in events[mark:] if e["state"] != "settling"]   # (the file just written: waited for)
    down = during[:next(i for i, e in enumerate(during) if e["state"] == "recovered")]
    lines = [(e["state"], e["message"]) for e in down]
    # Said in full where it was first known, the extraction ahead, with a sync's fields and words.
    assert [s for s, _ in lines[:3]] == ["queued", "extracting", "error"], lines
    first = down[2]
    assert first["message"].startswith(f"extracting 1 file: 1 LLM call failed; left to the sync; no call "
                                       f"succeeded: {first['endpoint']} stopped answering at "), first
    assert first["outage"] is True and first["endpoint"].startswith(simulator.base_url.rstrip("/")), first
    assert first["answered_at"] <= first["since"] and first["llm_errors"] == 1, first
    assert [e for e in down if e["state"] == "error"] == [first], lines
    # No line says chunks were extracted, and the syncs are silent: neither their stages nor an
    # idle line (the file's warning says its previous version stays indexed).
    assert not {"waiting", "merging", "idle"} & {s for s, _ in lines}, lines
    assert [m for s, m in lines if s == "extracting"] == ["1 file", "1 file"], lines
    # The edit during the outage: its extraction waits, said as one that gave up says it.
    waits = [e for e in down[edit:] if e["state"] == "outage" and "retry_s" not in e]
    assert len(waits) == 1 and waits[0]["since"] == first["since"], lines
    assert waits[0]["message"].startswith(f"extracting 1 file waits: {first['endpoint']} still down since "), waits
    assert waits[0]["message"].endswith("; the next sync tries again"), waits


def _is_outage_line(line: dict, opening: str, chunks: int) -> None:
    """``line`` is an outage's error line of ``chunks`` refused calls, its message ``opening``
    ... said briefly."""
    assert line["message"].startswith(opening), line
    assert line["message"].endswith(" (retrying until it answers, less often as it stays down, said briefly)"), line
    assert line["outage"] is True and line["llm_errors"] == chunks, line


def _refused_said(endpoint: str, answered_before: bool) -> str:
    """How an outage line says the calls refused by ``endpoint``, after "no call succeeded: "."""
    return (f"{endpoint} stopped answering at " if answered_before else
            f"nothing answers at {endpoint}/chat/completions (connection failed (ConnectError: connection refused)); "
            "start the server, or fix llm.api_base (")


@pytest.mark.parametrize("answered_before", [False, True])
@pytest.mark.parametrize("chunks", [2, 3])   # the model client gives up on an extraction at 3 refused
async def test_an_outage_met_by_an_extraction_ahead_is_said_alike_however_many_chunks_it_had(
        corpus, tmp_path, simulator, monkeypatch, chunks, answered_before):
    # Two chunks refused were recorded as failed: "extracting 1 file: 2 LLM calls failed; left to
    # the sync; no call succeeded: ... (retrying until it answers, ...)". Three made the client
    # give up: "extracting 1 file failed: ...; the next sync tries again", no word of the retries,
    # and of an endpoint that never answered "Nothing was published; the index is as it was".
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    if not answered_before:   # down from the start: the initial sync of no file asks it nothing
        for path in corpus.iterdir():
            path.unlink()
        switch.up = False
    async with running(settings, tmp_path / "c.db", corpus, transport=httpx.MockTransport(switch)) \
            as (daemon, events, send):
        switch.up = False
        mark = len(events)
        new = corpus / "new.txt"   # (a chunk a paragraph, at SMALL's chunk size)
        new.write_text("\n\n".join(f"Captain Oskar{k} Lind{k} sailed the Blue Heron{k} from Port Vell{k} to "
                                    f"Kessel{k} with Mayor Ines Varr{k} and the Guild of Harbor Pilots{k}, whose "
                                    f"Council{k} met at Pier {k} in the old Customs House{k} every Tuesday."
                                    for k in range(chunks)))
        await send.send({(1, str(new))})
        await until(lambda: "error" in events.states(mark), timeout=30)
        daemon.stop()
        await send.aclose()
    await switch.client.aclose()
    first = next(e for e in events[mark:] if e["state"] == "error")
    endpoint = first["endpoint"]
    _is_outage_line(first, f"extracting 1 file: {chunks} LLM calls failed; left to the sync; no call succeeded: "
                           f"{_refused_said(endpoint, answered_before)}", chunks)
    assert "Nothing was published" not in first["message"], first


def _paragraphs(chunks: int) -> str:
    """A text of ``chunks`` chunks at SMALL's chunk size (a chunk a paragraph), each naming its own."""
    return "\n\n".join(f"Captain Oskar{k} Lind{k} sailed the Blue Heron{k} from Port Vell{k} to Kessel{k} "
                       f"with Mayor Ines Varr{k} and the Guild of Harbor Pilots{k}, whose Council{k} met at "
                       f"Pier {k} in the old Customs House{k} every Tuesday." for k in range(chunks))


@pytest.mark.parametrize("chunks", [1, 3])   # its chunks recorded as failed, or the client gave up
async def test_an_outage_met_by_an_extraction_ahead_while_stopping_is_left_to_the_next_start(
        corpus, tmp_path, simulator, monkeypatch, chunks):
    # SIGTERM during an extraction ahead that met an outage: its line ended "(retrying until it
    # answers, less often as it stays down, said briefly)", though this process retries nothing.
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    async with running(settings, tmp_path / "t.db", corpus, transport=httpx.MockTransport(switch)) \
            as (daemon, events, send):
        switch.up = False
        mark = len(events)

        def report(event: dict) -> None:   # the stop comes as the extraction begins
            events(event)
            if event["state"] == "extracting":
                daemon.stop("SIGTERM received")

        daemon.report = report
        new = corpus / "new.txt"
        new.write_text(_paragraphs(chunks))
        await send.send({(1, str(new))})
        await until(lambda: "stopped" in events.states(mark), timeout=30)
    await switch.client.aclose()
    after = [e for e in events[mark:] if e["state"] != "settling"]   # (the file just written: waited for)
    assert [e["state"] for e in after] == ["queued", "extracting", "stopping", "error", "stopped"], after
    error = after[3]
    assert error["message"].startswith(f"extracting 1 file: {chunks} LLM call{'s' if chunks > 1 else ''} "
                                       f"failed; left to the next start; no call succeeded: "
                                       f"{error['endpoint']} stopped answering at "), error
    assert "retrying" not in error["message"], error
    assert error["outage"] is True and error["llm_errors"] == chunks, error
    assert after[-1]["pending"] == 1 and daemon.syncs == 1


@pytest.mark.parametrize("answered_before", [False, True])
@pytest.mark.parametrize("chunks", [2, 3])   # the model client gives up on a sync at 3 refused
async def test_an_outage_met_by_a_sync_is_said_alike_however_many_chunks_it_had(
        corpus, tmp_path, simulator, monkeypatch, chunks, answered_before):
    # A sync of two chunks refused published without them: "2 LLM calls failed; the affected items
    # are retried after a pause; no call succeeded: is the endpoint ... down? Start it, or fix
    # llm.api_base (...)", no error field. Three made the client give up: "sync failed: nothing
    # answers at ...; start the server, or fix llm.api_base. Nothing was published; ...".
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "s.db"
    for path in corpus.iterdir():
        path.unlink()
    if answered_before:   # an index built through it: it stopped since
        (corpus / "a.txt").write_text("Mayor Ada Quill met Captain Bo Rask at Pier Nine.\n")
        await Daemon(settings, db, corpus, transport=httpx.MockTransport(switch)).run(None)
    (corpus / "new.txt").write_text("\n\n".join(   # (a chunk a paragraph, at SMALL's chunk size)
        f"Captain Oskar{k} Lind{k} sailed the Blue Heron{k} from Port Vell{k} to Kessel{k} with Mayor Ines "
        f"Varr{k} and the Guild of Harbor Pilots{k}, whose Council{k} met at Pier {k} in the old Customs "
        f"House{k} every Tuesday." for k in range(chunks)))
    switch.up = False
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events, transport=httpx.MockTransport(switch), retry_base_s=0.01)
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: "error" in events.states(), timeout=30)   # the initial sync's
        daemon.stop()
        await send.aclose()
    await switch.client.aclose()
    first = next(e for e in events if e["state"] == "error")
    endpoint = first["endpoint"]
    _is_outage_line(first, f"{chunks} LLM calls failed; the affected items are retried after a pause; no call "
                           f"succeeded: {_refused_said(endpoint, answered_before)}", chunks)
    assert first["error"].startswith("nothing answers at " if not answered_before else
                                     f"{endpoint}/chat/completions stopped answering (it last answered at "), first
    assert "Nothing was published" not in first["message"], first


@pytest.mark.parametrize("chunks", [1, 3])   # its chunks recorded as failed, or the client gave up
async def test_calls_refused_after_a_stop_came_during_them_are_not_said_to_be_retried(
        corpus, tmp_path, simulator, monkeypatch, chunks):
    # SIGTERM while an extraction ahead's calls were on the wire, then every connection refused:
    # the line's head said "left to the next start", but its error field and the failures
    # recorded (`status --failures`) kept the words of a model client made while the watch still
    # retried: "... every connection is refused (...); retried until it answers", a retry this
    # process, stopping, never makes.
    # (Each call on the wire before the stop is refused once the stop has come, whenever that is:
    # a sleep of 0.2 s passed only if the stop came within it.)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    async with running(settings, tmp_path / "s.db", corpus) as (daemon, events, send):
        on_wire, stopped = anyio.Event(), anyio.Event()

        async def endpoint(request: httpx.Request) -> httpx.Response:
            if not stopped.is_set():   # the stop comes while the first calls are on the wire
                on_wire.set()
                await stopped.wait()
            raise httpx.ConnectError("connection refused", request=request)

        daemon.transport = httpx.MockTransport(endpoint)
        mark = len(events)
        new = corpus / "new.txt"
        new.write_text(_paragraphs(chunks))
        await send.send({(1, str(new))})
        await on_wire.wait()
        daemon.stop("SIGTERM received")
        stopped.set()
        await until(lambda: "stopped" in events.states(mark), timeout=30)
    await switch.client.aclose()
    (error,) = [e for e in events[mark:] if e["state"] == "error"]
    assert "left to the next start" in error["message"] and "retr" not in error["message"], error
    assert "stopped answering" in error["error"] and "retried until it answers" not in error["error"], error
    assert error["error"].endswith("start the server again, then start the watch again (this watch has stopped; "
                                   "finished work is kept)"), error
    store = Store(tmp_path / "s.db", readonly=True)
    try:
        recorded = [m for (m,) in store.conn.execute("SELECT message FROM failures")]
    finally:
        store.close()
    assert recorded and not any("retried until it answers" in m for m in recorded), recorded


@pytest.mark.parametrize("down", [True, False])   # no call answered (an outage), or one chunk's failed
async def test_a_sync_that_publishes_without_failed_items_while_stopping_leaves_them_to_the_next_start(
        corpus, tmp_path, simulator, monkeypatch, down):
    # SIGTERM during a sync that published without the items whose calls failed: its line said
    # "the affected items are retried after a pause", a retry this process never runs.
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    for path in corpus.iterdir():
        path.unlink()
    db = tmp_path / "p.db"
    if down:   # an index built through it, which stopped since (a first index through an endpoint
        # that never answered publishes nothing: see the test of a first index above)
        (corpus / "a.txt").write_text("Mayor Ada Quill met Captain Bo Rask at Pier Nine.\n")
        await Daemon(settings, db, corpus, transport=httpx.MockTransport(switch)).run(None)
    (corpus / "new.txt").write_text(_paragraphs(2))   # (two chunks: the client gives up at three)
    switch.up = not down

    async def endpoint(request: httpx.Request) -> httpx.Response:   # up, one chunk's calls fail
        if switch.up and b"Oskar1 " in request.content:
            return httpx.Response(500, json={"error": {"message": "boom"}})
        return await switch(request)

    events = Events()
    daemon = Daemon(settings, db, corpus, report=events, transport=httpx.MockTransport(endpoint))

    def report(event: dict) -> None:   # the stop comes as the initial sync extracts
        events(event)
        if event["state"] == "extracting":
            daemon.stop("SIGTERM received")

    daemon.report = report
    send, recv = scripted()
    with anyio.fail_after(30):
        await daemon.run(recv)
    await switch.client.aclose()
    states = events.states()
    assert states[-1] == "stopped" and "stopping" in states and daemon.syncs == 1, states
    (error,) = [e for e in events if e["state"] == "error"]
    calls = f"{error['llm_errors']} LLM call{'s' if error['llm_errors'] > 1 else ''}"
    assert error["message"].startswith(f"{calls} failed; the affected items are retried by the next start"), error
    assert "pause" not in error["message"] and "retrying" not in error["message"], error
    assert error["failed_items"] == 1 + down and error.get("outage") is down, error
    assert events[-1]["failed_items"] == 1 + down, events[-1]


@pytest.mark.parametrize("sentences", [1, 12])   # its sync publishes the same version, or fails
async def test_an_edit_during_an_outage_repeats_no_outage_line(corpus, tmp_path, simulator, monkeypatch,
                                                             sentences):
    # An edit during an outage showed its sync's lines, then the outage line again with the
    # pause unchanged (`retrying 16 s` ... the edit's lines ... `retrying 16 s`), at every edit.
    # An edit whose sync failed stayed pending, and its retries did not lengthen the pause:
    # 16 s apart all weekend, said once (12 sentences: more calls failed than a sync goes on after).
    syncs = counted_syncs(monkeypatch)
    switch, settings, cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "q.db"
    festival = corpus / "festival.md"
    edited_at: list[tuple[int, int]] = []   # the events and syncs there were when the edit came
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        def edit_in_the_pause(event: dict) -> None:
            # The edit comes as the pause of 0.16 s is said: sent once the test had seen the line
            # (polling), it came after the pause on a loaded machine, and a retry read it from disk.
            events(event)
            if event.get("retry_s") == 0.16 and not edited_at:
                edited_at.append((len(events), len(syncs)))
                festival.write_text(festival.read_text() + "".join(
                    f"\n\nOrla Brand{n} rang the harbor bell at Pier {n} while the ferry Kestrel{n} "
                    f"left for Vell{n} with the mayor Ines Varr{n} aboard." for n in range(sentences)))
                send.send_nowait({(MODIFIED, str(festival))})

        daemon.report = edit_in_the_pause
        switch.up = False
        mark = len(events)
        await edit_guild(corpus, send)
        await until(lambda: edited_at, timeout=30)
        (edit, n), = edited_at
        await until(lambda: len(syncs) >= n + 4, timeout=30)   # the edit's sync and retries
        switch.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await switch.client.aclose()
    assert not any(syncs[n:n + 4]), syncs
    during = events[mark:]
    recovered = next(i for i, e in enumerate(during) if e["state"] == "recovered")
    pauses = [e["retry_s"] for e in during[:recovered] if e["state"] == "outage" and "retry_s" in e]
    assert pauses == [0.16, cap], [(e["state"], e["message"]) for e in during]
    # The edit was taken (queued, extracted as far as it could be); its sync, silent as the
    # retries are, said nothing the endpoint being down, and no state it was not in.
    # (The daemon looks at the edited file in a worker thread before queueing it: on a loaded
    # machine that outlasted the 0.16 s pause, and a silent retry, its cap line, its health and
    # warning lines came first.)
    edited = [e["state"] for e in events[edit:mark + recovered]]
    assert "queued" in edited and set(edited[:edited.index("queued")]) <= {"outage", "health", "warning"}, edited
    assert "idle" not in edited and "merging" not in edited, edited


async def test_a_watcher_failing_at_once_again_is_restarted_less_and_less_often(tmp_path, monkeypatch):
    # Each restart of a failed watcher makes the daemon sync the whole folder; one that fails at
    # once every time (the polling watcher on a symlink loop) was restarted every second, so a
    # 20,000-file folder was synced whole every second, all day.
    import watchfiles

    from streamrag import watch_events

    def failing(*args, **kwargs):
        raise RuntimeError("error in underlying watcher: File system loop found")

    monkeypatch.setattr(watchfiles, "awatch", failing)
    monkeypatch.setattr(watch_events, "_RESTART_S", 0.05)
    # The pauses before the restarts, as the watcher chose them (its waits, not the gaps timed
    # between the batches: a loaded machine made the first of 0.05 s longer than 0.3 s).
    pauses: list[float] = []
    waits = types.ModuleType("anyio")
    waits.__dict__.update(vars(anyio))
    waits.move_on_after = lambda delay, *a, **kw: (pauses.append(delay), anyio.move_on_after(delay, *a, **kw))[1]
    monkeypatch.setattr(watch_events, "anyio", waits)
    stop = anyio.Event()
    times: list[float] = []
    with anyio.fail_after(60):
        async for batch in watch_events.watch_folder(tmp_path, make_settings("").watch, stop):
            assert {kind for kind, _ in batch} == {watch_events.RESCAN}
            times.append(time.monotonic())
            if len(times) == 5:
                stop.set()
    assert pauses == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8]), pauses   # (the last one cut short by the stop)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(gap >= pause - 1e-3 for gap, pause in zip(gaps, pauses)), (gaps, pauses)   # and waited


async def test_an_outages_retry_syncs_count_an_item_once_as_one_update(corpus, tmp_path, simulator, monkeypatch):
    # Each silent retry of an outage is a run of its own, and each recorded the items it asked
    # for again: `status` said "2 in the last update (6 recorded over all runs)" after a minute
    # down, 8 after the end, and `--failures` said `times: 1` of each, retried four times.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "c.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        switch.up = False
        await edit_guild(corpus, send)
        await until(lambda: len(syncs) >= 6, timeout=30)     # the edit's sync and four retries
        assert not any(syncs[1:])
        during = status_info(db, failures=True)
        switch.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await switch.client.aclose()
    assert during["failures_last_run"] >= 1, during
    # Every item the outage left missing, once, however often it was retried.
    assert during["failures_total"] == during["failures_last_run"], during
    assert all(f["times"] >= 4 for f in during["failures"]), during["failures"]
    after = status_info(db, failures=True)
    assert after["failures_last_run"] == 0
    assert after["failures_total"] == during["failures_total"], (during, after)


async def test_failures_total_holds_while_an_outage_s_retry_is_under_way(corpus, tmp_path, simulator, monkeypatch):
    # A new file of 3 chunks in an outage: its sync publishes nothing and leaves the file
    # unindexed, its chunks' failures counted as the file, not in failures_total. Each retry
    # recorded them again, and until it ended (its stats naming them) they counted: `status`
    # said failures_total 0 between the retries and 2 during each. Read as each retry ends,
    # its failures recorded, its row still "running".
    from streamrag import index_rows

    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    during: list[int] = []
    real_finish = Store.finish_run

    def finish_run(store, run_id, status, stats=None):
        if store.scalar("SELECT update_of FROM runs WHERE id = ?", (run_id,)) is not None:
            during.append(index_rows.failures_recorded(store))
        real_finish(store, run_id, status, stats)

    monkeypatch.setattr(Store, "finish_run", finish_run)
    db = tmp_path / "f.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        switch.up = False
        (corpus / "new.txt").write_text(_paragraphs(3))
        await send.send({(1, str(corpus / "new.txt"))})
        await until(lambda: len(syncs) >= 4, timeout=30)   # the file's sync and two retries at least
        await send.aclose()
    await switch.client.aclose()
    after = status_info(db, failures=True)
    assert after["not_indexed_last_run"] == 1 and after["failures_total"] == 0, after
    assert len(during) >= 2 and set(during) == {0}, during


async def test_a_chunk_failed_ahead_and_again_by_its_sync_is_said_failed_twice(corpus, tmp_path, simulator,
                                                                                 monkeypatch):
    # The extraction ahead of a sync asks for an edit's chunks first, and the sync asks again:
    # `status --failures` said `times: 1` of a chunk both had recorded (and the extract stage's
    # calls 2 errors), as `times` counted the update's syncs only.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "t.db"
    # (stopped after the edit's sync, which follows its extraction ahead)
    await _edited_while_down(settings, db, corpus, switch, syncs, stop_after=2)
    await switch.client.aclose()
    failures = status_info(db, failures=True)["failures"]
    assert failures, failures
    store = Store(db, readonly=True)
    try:
        for f in failures:
            recorded_by = [command for (command,) in store.conn.execute(
                "SELECT r.command FROM failures f JOIN runs r ON r.id = f.run_id WHERE f.item = ? "
                "ORDER BY f.id", (f["item"],))]
            assert recorded_by == ["watch:extract", "watch"], recorded_by
            assert f["times"] == 2, f
    finally:
        store.close()


async def _edited_while_down(settings, db, corpus, switch, syncs, *, stop_after: int = 3) -> Daemon:
    """A watch whose endpoint goes down, then guild.txt edited: stopped after ``stop_after``
    syncs (``syncs``: ``counted_syncs``), by default the edit's sync and two retries; the daemon."""
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, _events, send):
        switch.up = False
        await edit_guild(corpus, send)
        await until(lambda: len(syncs) >= stop_after, timeout=30)     # the edit's sync and retries
        daemon.stop()
    return daemon


async def test_a_watch_restarted_during_an_outage_goes_on_with_its_update(corpus, tmp_path, simulator, monkeypatch):
    # The items an outage left missing are the same pending work after a restart, but the new
    # watch's syncs were a new update: `status` counted each item again ("2 in the last update
    # (4 recorded over all runs)"), once more at each restart.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "r.db"
    await _edited_while_down(settings, db, corpus, switch, syncs)
    before = status_info(db, failures=True)
    assert before["failures_last_run"] >= 1 and before["failures_total"] == before["failures_last_run"], before

    daemon = Daemon(settings, db, corpus, report=Events(), transport=httpx.MockTransport(switch))
    send, recv = scripted()
    done = len(syncs)
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: len(syncs) >= done + 2, timeout=30)   # its initial sync and a retry
        during = status_info(db, failures=True)
        switch.up = True
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await send.aclose()
    await switch.client.aclose()
    assert during["last_run"]["id"] != before["last_run"]["id"], during
    assert during["failures_total"] == before["failures_total"], (before, during)
    assert all(f["times"] > b["times"] for f, b in zip(during["failures"], before["failures"])), (before, during)
    after = status_info(db, failures=True)
    assert after["failures_last_run"] == 0 and after["failures_total"] == before["failures_total"], after


async def test_a_watch_started_after_an_update_that_finished_begins_its_own(corpus, tmp_path, simulator,
                                                                           monkeypatch):
    # ... but one whose last update left nothing missing starts anew: its failures are its own.
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "n.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        daemon.stop()
    assert status_info(db, failures=True)["failures_total"] == 0
    switch.up = False
    syncs = counted_syncs(monkeypatch)
    victim = corpus / "guild.txt"
    victim.write_text(victim.read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
    daemon = Daemon(settings, db, corpus, report=Events(), transport=httpx.MockTransport(switch))
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: len(syncs) >= 2, timeout=30)
        daemon.stop()
    await switch.client.aclose()
    store = Store(db, readonly=True)
    try:
        chained = store.scalar("SELECT count(*) FROM runs WHERE update_of IS NOT NULL")
        first = store.scalar("SELECT update_of FROM runs WHERE command = 'watch' ORDER BY started_at LIMIT 1 OFFSET 1")
    finally:
        store.close()
    assert first is None and chained >= 1, (first, chained)


async def test_a_failure_after_the_outage_is_over_counts_again(corpus, tmp_path, simulator, monkeypatch):
    # An update is the syncs that retry what the ones before them left missing: once one leaves
    # nothing missing, the next outage's failures are its own.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "d.db"
    totals = []   # failures_total during each outage
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        for name in ("Quillon Marbeck", "Ysolde Parrin"):
            switch.up = False
            victim = corpus / "guild.txt"
            victim.write_text(victim.read_text() + f"\n\n{name} opened a ferry office.\n")
            await send.send({(MODIFIED, str(victim))})
            done = len(syncs)
            await until(lambda: len(syncs) >= done + 3, timeout=30)
            totals.append(status_info(db, failures=True)["failures_total"])
            switch.up = True
            await _until_indexed(db, name, timeout=60)
        await send.aclose()
    await switch.client.aclose()
    assert totals[1] > totals[0] >= 1, totals


async def test_status_says_the_files_a_sync_given_up_in_an_outage_left_unindexed(corpus, tmp_path, simulator,
                                                                                 monkeypatch):
    # A daemon started while nothing answers: each sync gave up at its first calls' failures, and
    # `status --failures` listed those two or three chunks only, every file of the folder unindexed.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    switch.up = False
    db = tmp_path / "g.db"
    daemon = Daemon(settings, db, corpus, report=Events(), transport=httpx.MockTransport(switch), retry_base_s=0.01)
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: len(syncs) >= 3, timeout=30)
        during = status_info(db, failures=True)
        switch.up = True
        await until(lambda: daemon.syncs >= 1, timeout=60)
        await send.aclose()
    await switch.client.aclose()
    files = sorted(p.name for p in corpus.iterdir() if p.is_file())
    assert during["last_run"]["status"] == "failed", during
    assert during["not_indexed_last_run"] == len(files) and during["not_indexed_files"] == files, during
    # The chunks it waited for are of those files, counted once, as the files; said with them.
    assert during["failures_last_run"] == 0 and during["failures"] == [], during
    assert 0 < len(during["not_indexed_failures"]) < len(files), during
    assert status_info(db, failures=True)["not_indexed_last_run"] == 0


class AskingToWait(Switch):
    """A transport that forwards to the simulator while ``up`` and otherwise answers 503 "try
    again later", as a proxy whose server behind it is down does."""

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            return httpx.Response(503, json={"error": {"message": "try again later", "type": "error"}})
        return await super().__call__(request)


async def test_an_endpoint_given_up_on_is_said_as_a_daemon_retrying_it_and_its_calls_as_failed_everywhere(
        corpus, tmp_path, simulator, monkeypatch):
    # The error line of an endpoint found hopeless (answering only 503 for llm.give_up_after_s)
    # told the daemon's user to "run the same command (finished work is kept)", while the daemon
    # retries by itself; and it had neither `llm_errors` nor `failed_items`, which an error line
    # about failed calls carries.
    from streamrag import daemon as daemon_module, llm as llm_module

    monkeypatch.setattr(daemon_module, "_MAX_BACKOFF_S", 0.2)
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.01)
    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.04},
                             llm={"max_retries": 1000, "give_up_after_s": 0.3})
    events = await _down_then_back(AskingToWait(simulator.base_url), settings, tmp_path / "g.db", corpus,
                                   lambda events: any(e["state"] == "error" and e.get("outage") for e in events),
                                   retry_base_s=0.01)
    error = next(e for e in events if e["state"] == "error" and e.get("outage"))
    message = error["message"]
    assert "the server behind llm.api_base answers only HTTP 503" in message, message
    assert "raising llm.give_up_after_s (0.3 s) waits longer" in message, message
    assert "run the same command" not in message and "a run after the fix" not in message, message
    assert error["failed_items"] == 0 and error["pending"] == 1, error
    # The calls the client gave up on failed: the line said `llm_errors` 0 of an endpoint that
    # had failed every try for llm.give_up_after_s.
    store = Store(tmp_path / "g.db", readonly=True)
    try:
        gave_up = store.query("SELECT run_id, count(*) AS n FROM llm_calls WHERE cancelled = 0 AND error LIKE ? "
                              "GROUP BY run_id ORDER BY min(id)", (f"%{GAVE_UP}%",))
    finally:
        store.close()
    assert gave_up and error["llm_errors"] == gave_up[0]["n"] >= 1, (error, gave_up)
    # ... and so did the idle line and `status`, which said them "cancelled" ("3 LLM calls, 1
    # cancelled"; errors 0), as if the run had stopped them.
    idle = [e for e in events if e["state"] == "idle"][-1]
    assert idle["llm"]["cancelled"] == 0 and idle["llm"]["errors"] == error["llm_errors"], idle
    assert f", {error['llm_errors']} failed; sync " in idle["message"], idle["message"]
    llm = status_info(tmp_path / "g.db")["llm"]
    assert llm["cancelled"] == 0 and llm["errors"] == sum(r["n"] for r in gave_up), (llm, gave_up)


async def test_the_health_line_counts_the_files_of_a_sync_under_way_as_pending(corpus, tmp_path, simulator,
                                                                              monkeypatch):
    # During an outage the changed files are inside a retry sync most of the time (its calls
    # retrying, for minutes), and the health line said "0 pending" for files not synced yet.
    from streamrag import pipeline

    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.04})
    async with running(settings, tmp_path / "p.db", corpus, health_s=3600) as (daemon, events, send):
        entered, gate = anyio.Event(), anyio.Event()   # the sync under way, held until let go on
        real_run = pipeline.Indexer.run

        async def held(self, paths):
            entered.set()
            await gate.wait()
            return await real_run(self, paths)

        monkeypatch.setattr(pipeline.Indexer, "run", held)
        victims = sorted(corpus.glob("*.txt"))[:2]
        for victim in victims:
            victim.write_text(victim.read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
        await send.send({(MODIFIED, str(v)) for v in victims})
        with anyio.fail_after(30):
            await entered.wait()
        assert not daemon.pending   # (taken by the sync)
        daemon.check_health()
        health = [e for e in events if e["state"] == "health"][-1]
        assert health["pending"] == 2 and " 2 pending, " in health["message"], health
        gate.set()
        await until(lambda: daemon.syncs >= 2, timeout=60)
        daemon.check_health()
        assert [e for e in events if e["state"] == "health"][-1]["pending"] == 0
        await send.aclose()



async def _restart_down(settings, db, corpus, switch, syncs) -> Events:
    """A watch started while the endpoint is down, stopped after its initial sync and a retry:
    its events."""
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events, transport=httpx.MockTransport(switch), health_s=0.02)
    send, recv = scripted()
    done = len(syncs)
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: len(syncs) >= done + 2, timeout=30)   # its initial sync and a retry
        await until(lambda: any(e["state"] == "health" for e in events), timeout=30)
        daemon.stop()
    return events


def _counts(events: Events, state: str) -> list[tuple[int, int]]:
    return [(e["pending"], e["failed_items"]) for e in events if e["state"] == state]


async def test_a_watch_restarted_during_an_outage_counts_the_files_it_is_to_sync_as_pending(
        corpus, tmp_path, simulator, monkeypatch):
    # Four files added during an outage, then a restart: its error, health and stopped lines
    # said "pending 0, failed_items 0" and "the whole folder not synced yet" while `streamrag
    # status` said 4 files were not indexed.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "p.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        switch.up = False
        added = [corpus / f"new{i}.txt" for i in range(4)]
        for i, path in enumerate(added):
            path.write_text(f"Captain Oskar Lind{i} sailed the Blue Heron from Port Vell to Kessel.\n")
        await send.send({(1, str(path)) for path in added})
        await until(lambda: len(syncs) >= 3, timeout=30)
        daemon.stop()
    assert status_info(db, failures=True)["not_indexed_last_run"] == 4

    events = await _restart_down(settings, db, corpus, switch, syncs)
    await switch.client.aclose()
    assert status_info(db, failures=True)["not_indexed_last_run"] == 4
    assert _counts(events, "error") and set(_counts(events, "error")) == {(4, 0)}, events
    assert set(_counts(events, "health")) == {(4, 0)}, events
    assert _counts(events, "stopped") == [(4, 0)], events
    stopped = events[-1]["message"]
    assert stopped.startswith("the whole folder not synced yet (4 new or changed files); "), stopped
    assert any(" 4 pending, " in e["message"] for e in events if e["state"] == "health"), events


async def test_a_watch_restarted_during_an_outage_counts_each_file_it_goes_on_with_once(
        corpus, tmp_path, simulator, monkeypatch):
    # An edit published without its chunks in an outage, then files added and a restart whose
    # initial sync gets nowhere: the edited file is pending, and its chunk the last watch left
    # missing is not pending a second time. Its lines said "5 pending (1 failed item to retry)",
    # and `status` "failures 2 in the last update" beside "not indexed 5 new or changed files",
    # of 5 files in all.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "f.db"
    await _edited_while_down(settings, db, corpus, switch, syncs)
    left = status_info(db, failures=True)["failures_last_run"]
    assert left >= 1
    for i in range(4):
        (corpus / f"new{i}.txt").write_text(f"Captain Oskar Lind{i} sailed the Blue Heron from Port Vell to Kessel.\n")

    events = await _restart_down(settings, db, corpus, switch, syncs)
    await switch.client.aclose()
    # As `status` says it: 4 new files and guild.txt, whose new version is not indexed.
    info = status_info(db, failures=True)
    assert info["not_indexed_last_run"] == 5 and info["failures_last_run"] == 0, info
    assert info["failures_total"] == left, info   # (the update's, once)
    assert _counts(events, "error") and set(_counts(events, "error")) == {(5, 0)}, events
    assert set(_counts(events, "health")) == {(5, 0)}, events   # (a retry under way too)
    assert _counts(events, "stopped") == [(5, 0)], events
    stopped = events[-1]["message"]
    assert stopped.startswith("the whole folder not synced yet (5 new or changed files); the next start"), stopped


async def test_the_health_lines_failures_are_the_last_finished_syncs_not_the_retry_under_way(
        corpus, tmp_path, simulator, monkeypatch):
    # The health line read the failures of the sync under way, which records its items as it
    # meets them: a retry in an outage made it say "2 failures", "0 failures", "1 failure",
    # "2 failures", each a new health line, while nothing changed.
    syncs = counted_syncs(monkeypatch)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    db = tmp_path / "h.db"
    await _edited_while_down(settings, db, corpus, switch, syncs)
    events = Events()
    daemon = Daemon(settings, db, corpus, report=events, transport=httpx.MockTransport(switch), health_s=0.005)
    send, recv = scripted()
    done = len(syncs)
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: len(syncs) >= done + 5, timeout=30)   # its initial sync and retries
        daemon.stop()
    await switch.client.aclose()
    said = [e["failures"] for e in events if e["state"] == "health"]
    # (its loop looked every 5 ms: a count that changed was a line; the retries' times alone are none)
    assert said and set(said) == {status_info(db)["failures_last_run"]}, said


async def test_the_outage_line_says_how_many_times_a_refused_call_was_really_tried(
        corpus, tmp_path, simulator, monkeypatch):
    # With llm.max_retries = 6 it said "each call in it tried up to 7 times" of calls whose
    # connections were refused, which stop after 3 tries where nothing ever answered.
    from streamrag import llm as llm_module

    monkeypatch.setattr(llm_module, "RETRY_BASE_S", 0.01)
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    settings.llm.max_retries = 6
    from streamrag.endpoint_reach import EndpointReach

    # Each model client's (each sync's) refused tries, keyed by its EndpointReach itself, held:
    # by id() a freed client's was taken by a later sync's, whose 3 tries then made it 6.
    refused: dict[object, int] = {}
    asked: set[bytes] = set()
    real_refused = EndpointReach.refused

    def counted_refused(self) -> None:
        refused[self] = refused.get(self, 0) + 1
        real_refused(self)

    monkeypatch.setattr(EndpointReach, "refused", counted_refused)

    async def counted(request: httpx.Request) -> httpx.Response:
        if not switch.up:
            asked.add(request.content)
        return await switch(request)

    async with running(settings, tmp_path / "r.db", corpus,
                       transport=httpx.MockTransport(counted)) as (_daemon, events, send):
        switch.up = False
        mark = len(events)
        await edit_guild(corpus, send)
        await until(lambda: any(e["state"] == "outage" for e in events[mark:]), timeout=60)
        await send.aclose()
    await switch.client.aclose()
    line = next(e for e in events[mark:] if e["state"] == "outage")
    assert "each call in it tried up to 3 times)" in line["message"] and line["call_tries"] == 3, line
    # As it says: the one call (the edited chunk's) of each sync (and extraction ahead) was tried 3 times.
    assert len(asked) == 1 and set(refused.values()) == {3}, list(refused.values())


class FailingReports(Switch):
    """A ``Switch`` that, while ``reports_fail``, answers every report request with HTTP 500."""

    reports_fail = True

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        import json

        from streamrag.simulator import detect_task

        if self.up and self.reports_fail and request.url.path.endswith("/chat/completions") \
                and detect_task(json.loads(request.content)["messages"]) == "report":
            return httpx.Response(500, json={"error": {"message": "boom"}})
        return await super().__call__(request)


async def test_a_watch_restarted_after_an_update_left_a_report_out_still_counts_it(
        corpus, tmp_path, simulator, monkeypatch):
    # An update published without a report, the server then gone, the watch stopped, a file
    # edited: the restarted watch's sync gave up at that file's chunk, and its lines and
    # `status` said "failures 0" while the report was still missing from the version.
    syncs = counted_syncs(monkeypatch)
    _switch, settings, _cap = fast_outage(monkeypatch, simulator)
    switch = FailingReports(simulator.base_url)
    db = tmp_path / "m.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        switch.up = False
        daemon.stop()
    left = status_info(db, failures=True)
    missing = {(f["stage"], f["item"]) for f in left["failures"]}
    assert left["failures_last_run"] >= 1 and {s for s, _ in missing} == {"report"}, left
    victim = corpus / "guild.txt"
    victim.write_text(victim.read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")

    events = await _restart_down(settings, db, corpus, switch, syncs)
    during = status_info(db, failures=True)
    assert during["not_indexed_last_run"] == 1, during
    assert during["failures_last_run"] == left["failures_last_run"], (left, during)
    assert {(f["stage"], f["item"]) for f in during["failures"]} == missing, during["failures"]
    assert during["failures_total"] == left["failures_total"], (left, during)
    stopped = [e for e in events if e["state"] == "stopped"][-1]
    assert stopped["pending"] == 1 and stopped["failed_items"] == left["failures_last_run"], stopped

    # ... and it is retried once the server is back, once.
    switch.up, switch.reports_fail = True, False
    async with running(settings, db, corpus, transport=httpx.MockTransport(switch)) as (daemon, events, send):
        await _until_indexed(db, "Quillon Marbeck", timeout=60)
        await until(lambda: status_info(db)["failures_last_run"] == 0, timeout=30)
        await send.aclose()
    await switch.client.aclose()
    after = status_info(db, failures=True)
    assert after["failures_last_run"] == 0 and after["failures_total"] == left["failures_total"], after


@pytest.mark.parametrize("down, since, lasted", [(7.52, True, "8 s"), (720, False, "12 min")])
def test_a_short_outage_is_said_since_the_second_it_began_in_whole_seconds(down, since, lasted, monkeypatch):
    # "still down since 00:38 (7.52 s)" came right after an error line giving 00:38:19 (a
    # newcomer's finding): under a minute, to the second and in whole seconds; a long one as before.
    # The outage's wall clock is held: 7.52 s said "9 s" after a stall of 0.98 s or more in here.
    from streamrag import outage as outage_module
    from streamrag.outage import Outage

    now = time.time()
    held = types.ModuleType("time")
    held.__dict__.update(vars(time))
    held.time = lambda: now
    monkeypatch.setattr(outage_module, "time", held)
    lines = []
    outage = Outage(make_settings("http://127.0.0.1:9/v1"), emit=lambda state, message, **_: lines.append(message))
    outage.failing_since = now - down
    outage.began()
    outage.still_down(1)   # (the full line said it just now)
    outage.still_down(2)   # the pause grew
    [line] = lines
    assert line.startswith(f"http://127.0.0.1:9/v1 still down since {clock(outage.failing_since, seconds=since)} "
                           f"({lasted}); retrying 2 s after each failed sync"), line


@pytest.mark.parametrize("down, seconds, lasted", [(7.52, True, r"\d+ s"), (720, False, r"1[23] min")])
def test_the_recovered_line_says_since_as_the_outage_lines_did(down, seconds, lasted):
    # "still down since 08:31:08" was followed by "answers again, after 7.52 s down (since 08:31)":
    # the seconds the outage's lines showed were dropped, and its span was not in whole seconds.
    # After a long one, "still down since 08:31 (12 min)" was followed by "(since 08:31:08)".
    from streamrag.outage import Outage

    lines = []
    outage = Outage(make_settings("http://127.0.0.1:9/v1"), emit=lambda state, message, **_: lines.append(message))
    outage.failing_since = time.time() - down
    outage.began()
    outage.still_down(1)
    outage.still_down(2)
    outage.recovered()
    still, back = lines
    since = clock(outage.failing_since, seconds=seconds)
    assert f"still down since {since} " in still, still
    assert re.fullmatch(rf"http://127\.0\.0\.1:9/v1 answers again, after {lasted} down \(since {since}\)", back), back


@pytest.mark.parametrize("answered_s", [None, 600, 20], ids=["no time", "minute", "same minute"])
def test_the_recovered_line_of_an_outage_said_only_by_its_error_line_says_since_as_it_did(answered_s):
    # (no shorter line followed.) The error line "stopped answering at 10:49, having answered at
    # 10:41" was followed by "answers again, after 2 min down (since 10:49:21)": to the minute,
    # as it; to the second when it gave the second (the minute it last answered), or no time.
    from streamrag.outage import Outage

    lines = []
    outage = Outage(make_settings("http://127.0.0.1:9/v1"), emit=lambda state, message, **_: lines.append(message))
    minute = time.time() // 60 * 60 - 120   # (a whole minute, local time zones offset by whole minutes)
    outage.failing_since = minute + 41
    outage.began()
    said = None
    if answered_s is not None:
        outage.answered_at = outage.failing_since - answered_s
        said = outage.stopped()   # (the error line's words, ``Daemon._outage_began``)
    outage.recovered()
    [back] = lines
    seconds = answered_s != 600
    since = clock(outage.failing_since, seconds=seconds)
    assert back.endswith(f"(since {since})"), back
    assert said is None or f"stopped answering at {since}, " in said, said


async def _watch_indexed_folder(settings: Settings, db: Path, folder: Path, **kwargs) -> tuple[Events, BaseException | None]:
    """A watch of ``folder``, whose index ``db`` is current, until it stops by itself (a wrong key)
    or has said its first health line (then stopped): its events, and what it raised."""
    events, raised = Events(), None
    daemon = Daemon(settings, db, folder, report=events, **kwargs)
    send, recv = scripted()
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(daemon.run, recv)
                await until(lambda: "health" in events.states())
                await send.aclose()
    except BaseException as e:   # (the task group's, a wrong key's error in it)
        raised = e
    return events, raised


async def test_a_wrong_key_stops_a_watch_of_a_folder_indexed_already_as_it_starts(corpus, tmp_path):
    # Its initial sync asked the model nothing: a wrong key (or api_base password) was found at
    # the first change's call, maybe hours later, the watch saying it watched meanwhile.
    from streamrag.errors import LLMRequestError, user_error
    from streamrag.simulator import Simulator, SimulatorConfig

    db = tmp_path / "w.db"
    with Simulator(SimulatorConfig(api_key="sk-right-key-1234")) as keyed:
        right = msgspec.structs.replace(make_settings(keyed.base_url, index=SMALL), api_key="sk-right-key-1234")
        await Daemon(right, db, corpus).run(None)
        indexed = index_snapshot(db)
        events, raised = await _watch_indexed_folder(msgspec.structs.replace(right, api_key="sk-wrong-key-5678"),
                                                     db, corpus)
        error = raised if isinstance(raised, LLMRequestError) else user_error(raised)
        assert isinstance(error, LLMRequestError), raised
        assert str(error).startswith(f"{keyed.base_url}/models: HTTP 401: the API key was rejected; set "
                                     "STREAMRAG_API_KEY to a valid key (Incorrect API key provided.)")
        assert events.states()[-1] == "idle" and "health" not in events.states()   # stopped before watching
        assert index_snapshot(db) == indexed   # nothing indexed lost
        # The right key: the watch goes on, as before.
        events, raised = await _watch_indexed_folder(right, db, corpus)
        assert raised is None and events.states()[-1] == "stopped", events[-1]


@pytest.mark.parametrize("endpoint", ["down", "no /models"])
async def test_a_watch_whose_endpoint_cannot_say_whether_the_key_is_good_goes_on(corpus, tmp_path, simulator,
                                                                                  endpoint):
    # Down: as a watch started before its server (its first call finds it); no /models (Azure's
    # deployments, some servers), a 5xx, a page: nothing is said either.
    settings = make_settings(simulator.base_url, index=SMALL)
    db = tmp_path / "w.db"
    await Daemon(settings, db, corpus).run(None)
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if endpoint == "down":
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(404, json={"error": {"message": "Resource not found"}})

    events, raised = await _watch_indexed_folder(settings, db, corpus, transport=httpx.MockTransport(answer))
    assert raised is None and asked == ["/v1/models"]
    assert "error" not in events.states() and events.states()[-1] == "stopped"
    # Indexing that calls no model checks nothing.
    offline = make_settings(simulator.base_url, index={**SMALL, "extractor": "nlp"}, llm={"embedding_model": ""})
    asked.clear()
    await Daemon(offline, tmp_path / "o.db", corpus).run(None)
    events, raised = await _watch_indexed_folder(offline, tmp_path / "o.db", corpus, transport=httpx.MockTransport(answer))
    assert raised is None and asked == []


async def test_a_stop_ends_a_check_of_the_key_that_hangs(corpus, tmp_path, simulator):
    # A server that takes connections and never answers held the check for llm.request_timeout_s
    # (120 s by default) and the stop with it, until the grace period cancelled the work.
    settings = make_settings(simulator.base_url, index=SMALL)
    db = tmp_path / "w.db"
    await Daemon(settings, db, corpus).run(None)
    asked = anyio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        asked.set()
        await anyio.sleep(3600)
        raise AssertionError("unreachable")

    events = Events()
    daemon = Daemon(settings, db, corpus, report=events, transport=httpx.MockTransport(hang))
    send, recv = scripted()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, recv)
            await asked.wait()
            daemon.stop("SIGTERM received")
    assert events.states()[-2:] == ["stopping", "stopped"] and "error" not in events.states()


async def test_a_proxy_down_in_the_way_is_said_as_the_proxy_not_as_the_endpoint(corpus, tmp_path, simulator,
                                                                                 monkeypatch):
    # HTTP_PROXY set for the internet takes a loopback endpoint's requests too; that proxy down,
    # a watch of an index built through the endpoint said "http://127.0.0.1:.../v1 stopped
    # answering at ..., having answered at ...", then "http://127.0.0.1:.../v1 still down since",
    # of a server that was up. NO_PROXY set as said (here in the watch's own environment, as a
    # watch started again with it) ends it: each sync's model client reads the environment.
    from conftest import loopback_proxy, without_proxy_variables
    from streamrag.pipeline import Indexer

    _switch, settings, _cap = fast_outage(monkeypatch, simulator)
    without_proxy_variables(monkeypatch)
    db = tmp_path / "p.db"
    await Indexer(settings, db, root=corpus).run([corpus])   # answered, directly
    with loopback_proxy("down") as (address, _):
        monkeypatch.setenv("HTTP_PROXY", f"http://puser:proxy-LEAKCHECK-7@{address}")
        async with running(settings, db, corpus) as (_daemon, events, send):
            await edit_guild(corpus, send)
            await until(lambda: any(e["state"] == "outage" for e in events), timeout=30)
            monkeypatch.setenv("NO_PROXY", "127.0.0.1")
            await _until_indexed(db, "Quillon Marbeck", timeout=60)
            await send.aclose()
    proxy = f"the proxy http://puser:***@{address} (set by HTTP_PROXY)"
    first = next(e for e in events if e.get("outage"))
    assert f"; no call succeeded: nothing answers at {proxy} that requests to " in first["message"], first
    assert "`export NO_PROXY=127.0.0.1`" in first["message"] and "stopped answering" not in first["message"], first
    brief = next(e for e in events if e["state"] == "outage")
    assert brief["message"].startswith(f"{proxy} to {simulator.base_url} still down since "), brief
    assert any(e["state"] == "recovered" for e in events) and "LEAKCHECK" not in json.dumps(list(events))


async def test_a_watch_given_up_on_behind_a_proxys_503s_names_the_proxy_once(corpus, tmp_path, simulator,
                                                                               monkeypatch):
    # An http:// endpoint's requests through HTTP_PROXY, answered 503 by that proxy for
    # llm.give_up_after_s: the outage's error line said it twice over, "the server behind
    # llm.api_base answers only HTTP 503 (a proxy or load balancer answers so ...)" and "requests
    # go through the proxy ...: check it too; ... check the proxy's logs". Now once, as the proxy's.
    from conftest import loopback_proxy, without_proxy_variables
    from streamrag import daemon as daemon_module, llm as llm_module
    from streamrag.pipeline import Indexer

    monkeypatch.setattr(daemon_module, "_MAX_BACKOFF_S", 0.2)
    monkeypatch.setattr(llm_module, "MAX_BACKOFF_S", 0.01)
    settings = make_settings(simulator.base_url, index=SMALL, watch={"quiet_s": 0.04},
                             llm={"max_retries": 1000, "give_up_after_s": 0.3})
    without_proxy_variables(monkeypatch)
    db = tmp_path / "p.db"
    await Indexer(settings, db, root=corpus).run([corpus])   # answered, directly
    with loopback_proxy("503") as (address, _):
        monkeypatch.setenv("HTTP_PROXY", f"http://puser:proxy-LEAKCHECK-7@{address}")
        async with running(settings, db, corpus, retry_base_s=0.01) as (_daemon, events, send):
            await edit_guild(corpus, send)
            await until(lambda: any(e["state"] == "error" and e.get("outage") for e in events), timeout=30)
            await send.aclose()
    proxy = f"the proxy http://puser:***@{address} (set by HTTP_PROXY)"
    message = next(e for e in events if e["state"] == "error" and e.get("outage"))["message"]
    assert f"requests to the server at llm.api_base go through {proxy}, which answers only HTTP 503" in message, message
    assert message.count("the proxy http://") == 1 and message.count("the proxy's logs") == 1, message
    assert "a proxy or load balancer" not in message and "check it too" not in message, message
    assert "LEAKCHECK" not in json.dumps(list(events))


class FailsEveryCall:
    """A transport whose every chat call fails, those naming Bram Lind with an unusable answer,
    the others with an HTTP 500, until ``fixed``: then it forwards to the simulator."""

    def __init__(self, base_url: str) -> None:
        self.fixed = False
        self.client = httpx.AsyncClient(base_url=base_url)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.fixed:
            r = await self.client.send(self.client.build_request(
                request.method, str(request.url), headers=request.headers, content=request.content))
            return httpx.Response(r.status_code, headers=r.headers, content=r.content)
        if b"Bram Lind" in request.content:
            return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "I cannot help."}}], "usage": {"prompt_tokens": 9, "completion_tokens": 3}})
        return httpx.Response(500, json={"error": {"message": "boom"}})


async def test_a_watch_whose_every_call_fails_says_recovered_only_once_a_call_succeeds(
        tmp_path, simulator, monkeypatch):
    # Every call failed, some with unusable answers, the others with HTTP 500s: each retry's
    # first unusable answer was taken for the endpoint answering again, and the watch said
    # "recovered ... answers again" before every retry, then the outage's error line again.
    syncs = counted_syncs(monkeypatch)
    _switch, settings, _cap = fast_outage(monkeypatch, simulator)
    await _switch.client.aclose()
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("Ada Osk met Bram Lind at the quay in Port Vell.\n")
    (folder / "b.txt").write_text("Cy Dunn sailed to Elm Harbour with Fay Gold.\n")
    db = tmp_path / "n.db"
    failing = FailsEveryCall(simulator.base_url)
    events = Events()
    daemon = Daemon(settings, db, folder, report=events, transport=httpx.MockTransport(failing), retry_base_s=0.01)
    send, recv = scripted()
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        await until(lambda: len(syncs) >= 4, timeout=30)
        down = list(events)
        failing.fixed = True
        await until(lambda: db_count(db, "SELECT count(*) FROM documents") == 2, timeout=60)
        await send.aclose()
    await failing.client.aclose()
    assert not any(syncs[:4]) and "error" in [e["state"] for e in down], down
    assert "recovered" not in [e["state"] for e in down], [(e["state"], e["message"]) for e in down]
    assert [e["state"] for e in events].count("recovered") == 1, [(e["state"], e["message"]) for e in events]


class WrongModelBack(Switch):
    """A ``Switch`` that, once ``wrong``, answers every chat call with an answer no stage can use,
    as an endpoint back with the wrong model behind it (or ``finish_reason`` "content_filter":
    stopped by the provider's content filter)."""

    wrong = False
    finish_reason = "stop"

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.wrong and request.url.path.endswith("/chat/completions"):
            return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": self.finish_reason, "message": {
                "role": "assistant", "content": "I cannot help."}}], "usage": {"prompt_tokens": 9, "completion_tokens": 3}})
        return await super().__call__(request)


@pytest.mark.parametrize("finish_reason", ["stop", "content_filter"])
async def test_an_outage_is_over_once_the_endpoint_answers_every_call_even_unusably(
        corpus, tmp_path, simulator, monkeypatch, finish_reason):
    # Back after an outage with the wrong model behind it, the endpoint answered every call,
    # each unusably: no call succeeded, and the watch said "... still answering with errors"
    # after every retry, of an endpoint that answers; its answers are the problem, said by the
    # retries' own error lines. So for answers a content filter stopped: counted as endpoint
    # errors (their words are no "unusable answer ..."), they kept the outage open too.
    switch, settings, _cap = fast_outage(monkeypatch, simulator)
    await switch.client.aclose()
    wrong = WrongModelBack(simulator.base_url)
    wrong.finish_reason = finish_reason
    async with running(settings, tmp_path / "w.db", corpus, transport=httpx.MockTransport(wrong)) \
            as (daemon, events, send):
        wrong.up = False
        await edit_guild(corpus, send)
        await until(lambda: any(e["state"] == "outage" for e in events), timeout=30)
        mark = len(events)
        wrong.up = wrong.wrong = True
        await until(lambda: any(e.get("gave_up") for e in events), timeout=60)
        await send.aclose()
    await wrong.client.aclose()
    after = events[mark:]
    states = [e["state"] for e in after]
    assert states.count("recovered") == 1, [(e["state"], e["message"]) for e in after]
    back = states.index("recovered")
    assert "outage" not in states[back:], [(e["state"], e["message"]) for e in after[back:]]
    # Said as answers the model keeps getting wrong are: retried a few times, then given up on.
    errors = [e for e in after[back:] if e["state"] == "error"]
    assert errors[-1].get("gave_up") and not any(e.get("outage") for e in errors), errors
    # Those few retries counted from the end of the outage, whose own retries cost nothing: it
    # said "... still failed after 3 retries" after one retry of an endpoint that answered.
    assert len(errors) == 4 and "still failed after 3 retries" in errors[-1]["message"], \
        [e["message"] for e in errors]


def test_an_outage_ends_with_a_usable_answer_or_with_every_call_answered():
    # The rule a sync's or an extraction ahead's calls, all done, end an outage by: an endpoint
    # answering every call unusably answers; one answering some calls unusably and failing the
    # others (HTTP 500s) still fails, and calls cancelled unanswered got no answer.
    from streamrag.watch_lines import ends_outage

    def stats(calls: int, errors: int = 0, unusable: int = 0, cancelled: int = 0, cached: int = 0) -> dict:
        return {"extract": {"calls": calls, "cached": cached, "errors": errors, "unusable": unusable,
                            "cancelled": cancelled}}

    assert ends_outage(stats(3, errors=3, unusable=3))                 # the wrong model behind it
    assert not ends_outage(stats(3, errors=3, unusable=2))             # ... and an HTTP 500
    assert not ends_outage(stats(3, errors=1, unusable=1, cancelled=2))
    assert ends_outage(stats(3, errors=2))                             # one answered usably
    assert not ends_outage(stats(2, errors=2)) and not ends_outage({})  # none answered, none asked
    assert not ends_outage(stats(2, cached=2))                         # the cache answered, not it
    assert ends_outage({**stats(2, errors=2, unusable=2), "report": stats(1, cached=1)["extract"]})


class GarbleOneFile(Switch):
    """Forwards to the simulator, but answers the extraction of every chunk holding ``marker``
    unusably (the retries give up on them: answered, no outage); once ``hold`` is set, such a
    call waits for ``release`` first, ``held`` set: a sync that asks for them again is under way."""

    def __init__(self, base_url: str, marker: str) -> None:
        super().__init__(base_url)
        self.marker = marker
        self.hold = False
        self.held, self.release = anyio.Event(), anyio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        from streamrag.simulator import detect_task

        if request.url.path.endswith("/chat/completions"):
            messages = json.loads(request.content)["messages"]
            if detect_task(messages) == "extract" and self.marker in messages[-1]["content"]:
                if self.hold:
                    self.held.set()
                    await self.release.wait()
                return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "I cannot help."}}], "usage": {"prompt_tokens": 9,
                                                                                    "completion_tokens": 3}})
        return await super().__call__(request)


async def test_items_given_up_on_stay_counted_while_the_next_sync_asks_for_them_again(corpus, tmp_path, simulator):
    # The retries gave up on guild.txt's chunks (3 failures); a file added after made a sync
    # that asks for them again, and while it ran `status` said "failures 0 so far in this
    # update": it began an update of its own, though the items were still missing. It goes on
    # with the update they are missing from, as a restart does (``status.unfinished_update``).
    garble = GarbleOneFile(simulator.base_url, "Anton Heller")
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0}, watch={"quiet_s": 0.02})
    db = tmp_path / "g.db"
    async with running(settings, db, corpus, transport=httpx.MockTransport(garble), locked=True) \
            as (daemon, events, send):
        await until(lambda: any(e.get("gave_up") for e in events), timeout=60)
        await until(lambda: not daemon.pending, timeout=10)
        given_up = status_info(db)["failures_last_run"]
        assert given_up > 0 and daemon.health()["failures"] == given_up
        garble.hold = True
        new = corpus / "new.txt"
        new.write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        await send.send({(1, str(new))})
        with anyio.fail_after(30):
            await garble.held.wait()   # (the sync's retry of them, under way)
        assert daemon._sync_run is not None
        during = status_info(db)
        assert during["last_run"]["status"] == "running" and during["failures_last_run"] == given_up, during
        assert daemon.health()["failures"] == given_up
        garble.release.set()
        await until(lambda: daemon._sync_run is None and not daemon.pending, timeout=30)
        daemon.stop()
        await send.aclose()
    await garble.client.aclose()
    after = status_info(db)
    assert after["failures_last_run"] == given_up and after["failures_total"] == given_up, after


async def test_chunks_given_up_on_of_a_file_edited_since_count_once_as_that_file(corpus, tmp_path, simulator):
    # The retries gave up on guild.txt's chunks; guild.txt edited since, the health line said
    # "1 pending (3 failed items, asked again at the next sync)": its chunks counted as failed
    # items beside the file, pending, whose next sync extracts it whole.
    garble = GarbleOneFile(simulator.base_url, "Anton Heller")
    settings = make_settings(simulator.base_url, index=SMALL, llm={"max_retries": 0}, watch={"quiet_s": 0.02})
    async with running(settings, tmp_path / "g.db", corpus, transport=httpx.MockTransport(garble)) \
            as (daemon, events, send):
        await until(lambda: any(e.get("gave_up") for e in events), timeout=60)
        await until(lambda: not daemon.pending, timeout=10)
        given_up = daemon.health()
        assert given_up["gave_up"] and given_up["failed_items"] >= 2, given_up
        garble.hold = True   # (its extraction ahead waits: the file pending meanwhile)
        await edit_guild(corpus, send)
        with anyio.fail_after(30):
            await garble.held.wait()
        edited = daemon.health()
        assert edited["pending"] == 1 and edited["failed_items"] == 0, edited
        garble.release.set()
        daemon.stop()
        await send.aclose()
    await garble.client.aclose()


def test_chunks_to_retry_count_as_their_files_only_while_those_are_pending(tmp_path):
    # (the rule behind the test above: per file, a chunk of two files once)
    daemon = Daemon(make_settings(), tmp_path / "x.db", tmp_path)
    daemon._given_up, daemon._retry_chunks = (4, 1), 3
    daemon._retry_files = {"a.txt": frozenset({"c1", "c2"}), "b.txt": frozenset({"c2", "c3"})}
    assert daemon._items_left() == (4, 1, True)
    daemon.pending = {"b.txt": "modified"}
    assert daemon._items_left() == (2, 1, True)
    daemon.pending = {"a.txt": "modified", "b.txt": "modified"}
    assert daemon._items_left() == (1, 1, True)   # (the chunk indexed without its claims stays)


def test_chunks_to_retry_of_a_files_rows_count_as_that_file_while_it_is_pending(tmp_path):
    # (``Indexer.held_back`` names a .jsonl or .csv file's rows as the index does, "rows.jsonl#2",
    # and the queue names the file: its failed chunks were counted beside it, pending)
    daemon = Daemon(make_settings(), tmp_path / "x.db", tmp_path)
    daemon._given_up, daemon._retry_chunks = (2, 0), 2
    daemon._retry_files = {"rows.jsonl#1": frozenset({"c1"}), "rows.jsonl#2": frozenset({"c2"})}
    assert daemon._items_left() == (2, 0, True)
    daemon.pending = {"rows.jsonl": "modified"}
    assert daemon._items_left() == (0, 0, True)


def test_the_files_a_sync_left_unindexed_are_said_of_it_while_its_retry_runs(tmp_path):
    # During an outage `status` said "not indexed 2 new or changed files: the last update failed
    # and published nothing" beside "last update watch s2: running": the run that failed is the
    # sync before, named now; killed, the one after it is said so.
    from streamrag.store import one_writer
    from test_status import _killed, _runs_of_an_outage, status_of

    db = tmp_path / "w.db"
    said = json.dumps({"not_indexed": 2, "not_indexed_files": ["a.txt", "b.txt"], "not_indexed_chunks": ["chk-a"]})
    _runs_of_an_outage(db, [("s1", "watch", None, "failed"), ("s2", "watch", "s1", "running")],
                       {"s1": ["chk-a"], "s2": ["chk-b"]}, {"s1": said})

    def not_indexed(text: str) -> str:
        (line,) = [line for line in text.splitlines() if line.startswith("  not indexed ")]
        return line

    with one_writer(db, "streamrag watch /x"):
        info, text = status_of(db)
    assert info["not_indexed_by"]["id"] == "s1", info
    assert not_indexed(text).startswith("  not indexed    2 new or changed files: watch s1, the sync before the "
                                        "one under way, failed and published nothing; "), text
    _killed(db, "s2")   # (its process gone, and no writer: s2 was killed)
    _info, text = status_of(db)
    assert "watch s1, the sync before the one killed, failed and published nothing" in not_indexed(text), text
