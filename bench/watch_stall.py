"""How long `streamrag watch` holds its event loop when a big folder is moved in. One JSON line.

    python bench/watch_stall.py --files 50000

A daemon (offline, its extraction ahead left out: this measures the daemon, not the pipeline)
watches a folder of one file; a folder of N small files is made beside it and moved in, and the
daemon is told so as watchfiles would tell it (one ``added`` event for the folder). A task wakes
every 5 ms meanwhile: ``longest_stall_ms`` is the longest it waited beyond that (signals and
progress wait as long), ``took_s`` the time from the move to the daemon's ``waiting`` line.
With ``--per-file`` the daemon is told of each file too (one ``added`` event each, as a copy made
file by file, or the polling watcher, tells it): the events its ``_classify`` looks at one by one.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from _harness import emit  # (first: it puts the checkout on sys.path)
import anyio

from streamrag import pipeline
from streamrag.config import load_settings
from streamrag.daemon import Daemon

_TICK_S = 0.005


async def _measure(base: Path, files: int, per_file: bool = False) -> dict:
    root, big = base / "root", base / "big"
    root.mkdir()
    (root / "seed.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    (big / "a").mkdir(parents=True)
    for i in range(files):
        (big / "a" / f"f{i:06d}.txt").write_text(f"Note {i} of Captain Lind.\n")

    async def no_prefetch(self, paths) -> int:
        return 0

    pipeline.Indexer.prefetch = no_prefetch   # (this process only)
    settings = load_settings(None, env={}, overrides={"llm": {"api_base": ""}, "watch": {"quiet_s": 3600}})
    events: list[dict] = []
    daemon = Daemon(settings, base / "index.db", root, report=events.append)
    send, recv = anyio.create_memory_object_stream[set](16)
    longest = 0.0

    async def ticks() -> None:
        nonlocal longest
        while True:
            t = time.perf_counter()
            await anyio.sleep(_TICK_S)
            longest = max(longest, time.perf_counter() - t - _TICK_S)

    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run, recv)
        while daemon.syncs < 1:
            await anyio.sleep(0.01)
        tg.start_soon(ticks)
        event = {(1, str(root / "big"))}   # (made before the ticks count: the bench's work, not the daemon's)
        if per_file:
            event |= {(1, str(root / "big" / "a" / f"f{i:06d}.txt")) for i in range(files)}
        await anyio.sleep(0.2)
        longest = 0.0
        started = time.perf_counter()
        os.rename(big, root / "big")
        await send.send(event)
        while not any(e["state"] == "waiting" for e in events):
            await anyio.sleep(0.01)
        took = time.perf_counter() - started
        tg.cancel_scope.cancel()
    queued = next(e for e in events if e["state"] == "queued")
    return {"bench": "watch_stall", "files": files, "per_file": per_file, "queued": queued["message"], "took_s": round(took, 2),
            "longest_stall_ms": round(longest * 1000)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=50_000, help="files in the folder moved in")
    ap.add_argument("--per-file", action="store_true", help="an event for each file too, not only the folder's")
    args = ap.parse_args()
    if args.files < 1:   # (a folder of none moves in with nothing queued: it waited forever)
        ap.error("--files must be 1 or more")
    with tempfile.TemporaryDirectory() as tmp:
        emit(anyio.run(_measure, Path(tmp), args.files, args.per_file))


if __name__ == "__main__":
    main()
