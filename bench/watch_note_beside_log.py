"""How long a note saved beside a log written every second waits before `streamrag watch` syncs it.
One JSON line.

    python bench/watch_note_beside_log.py --runs 3

A daemon (offline, default ``watch`` settings: debounce_ms 500, quiet_s 2) follows a folder on
the real file system (``watch_events.watch_folder``) while a thread appends a line to log.txt
every ``--interval-s``. After a few of the log's writes, note.txt is saved; ``handed_s`` is the
time from that save to the watcher handing over a batch that holds it, ``synced_s`` to the end of
the first sync whose index holds it. Each run is a fresh folder, a temporary one or with
``--keep DIR`` ``DIR/run-N``, kept (the watched ``root`` and its ``index.db``); the figures are
per run.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from _harness import emit  # (first: it puts the checkout on sys.path)
import anyio

from streamrag.config import load_settings
from streamrag.daemon import Daemon
from streamrag.watch_events import watch_folder


def _holds_note(db: Path) -> bool:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT count(*) FROM documents WHERE path = 'note.txt'").fetchone()[0] > 0
        finally:
            conn.close()
    except sqlite3.Error:
        return False


async def _one(base: Path, interval_s: float) -> dict:
    root = base / "root"
    root.mkdir()
    (root / "seed.txt").write_text("Mira Osk chaired the Harbor Council.\n")
    (root / "log.txt").write_text("Mira Osk opened the harbor ledger at Port Vell.\n")
    settings = load_settings(None, env={}, overrides={"llm": {"api_base": ""}})
    events: list[dict] = []
    daemon = Daemon(settings, base / "index.db", root, report=events.append)
    saved: list[float] = []
    handed: list[float] = []
    synced: list[float] = []
    stop_writing = threading.Event()

    def writer() -> None:
        n = 0
        while not stop_writing.wait(interval_s):
            n += 1
            with (root / "log.txt").open("a") as f:
                f.write(f"Line {n}: Captain Oskar Lind logged the tide at Port Vell.\n")
            if n == 3:
                (root / "note.txt").write_text("Mira Osk sold the Blue Heron to Bo Lund at Kessel.\n")
                saved.append(time.monotonic())

    async def source():
        async for changes in watch_folder(root, settings.watch, daemon.stop_event, keep=daemon.worth_holding):
            if saved and not handed and any(path.endswith("note.txt") for _, path in changes):
                handed.append(time.monotonic())
            yield changes

    sync_ = daemon._sync

    async def syncing(reason, **kwargs):
        ok = await sync_(reason, **kwargs)
        if saved and not synced and _holds_note(base / "index.db"):
            synced.append(time.monotonic())
        return ok

    daemon._sync = syncing
    thread = threading.Thread(target=writer, daemon=True)
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, source())
            while daemon.syncs < 1:
                await anyio.sleep(0.01)
            thread.start()
            while not synced:
                await anyio.sleep(0.01)
            daemon.stop()
    stop_writing.set()
    thread.join()
    return {"handed_s": round(handed[0] - saved[0], 2), "synced_s": round(synced[0] - saved[0], 2)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--interval-s", type=float, default=1.0, help="the log's writes, this far apart")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="run in DIR/run-1, run-2 ... (made, and kept: the folder and its index)")
    args = ap.parse_args(argv)
    runs = []
    for n in range(1, args.runs + 1):
        if args.keep is not None:
            (args.keep / f"run-{n}").mkdir(parents=True)
            runs.append(anyio.run(_one, args.keep / f"run-{n}", args.interval_s))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(anyio.run(_one, Path(tmp), args.interval_s))
    emit({"bench": "watch_note_beside_log", "interval_s": args.interval_s, "runs": runs})


if __name__ == "__main__":
    main()
