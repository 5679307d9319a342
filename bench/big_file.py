"""What one big file costs an offline index: time and peak memory against the file's size.

Writes a plain-text file of ``--mb`` megabytes (lines of words drawn with a fixed seed, the same
file every run), indexes its folder with ``streamrag index --offline`` in a child process, and
reads that process's peak resident memory, and that of indexing a file of a few kilobytes the
same way (the process's own baseline: Python, the imports, the tokenizer). A folder a daemon watches may hold a log or a dump far
larger than any article: this is what such a file asks of the machine. Prints ONE JSON line:

    {"bench": "big_file", "file_mb", "chunks", "wall_s", "peak_rss_mb", "baseline_rss_mb",
     "peak_over_file"}

``peak_over_file`` is the peak above the baseline divided by the file's size: how many times its
size the index needs in memory at once.

    python bench/big_file.py --mb 100
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import ROOT, emit

WORDS = ("the river council harbor ledger merchant quietly north trade grain vessel Aurelia "
         "Tessaly ministry signed accord").split()


def write_file(path: Path, mb: float) -> int:
    """Lines of 14 words with a fixed seed up to ``mb`` megabytes; returns the bytes written."""
    rng = random.Random(1)
    target = int(mb * 1_000_000)
    written = 0
    with path.open("w", encoding="utf-8") as f:
        while written < target:
            line = " ".join(rng.choice(WORDS) for _ in range(14)) + ".\n"
            f.write(line)
            written += len(line)
    return written


def index(work: Path, name: str, mb: float) -> tuple[int, int, float, float]:
    """Indexes a folder of one file of ``mb`` megabytes in a child process: the bytes, chunks,
    seconds, and the child's peak resident memory in MB."""
    folder = work / name
    folder.mkdir()
    size = write_file(folder / "big.txt", mb)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-m", "streamrag", "index", str(folder), "--offline", "-q"],
                             cwd=work, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"streamrag index {folder} failed (exit {os.waitstatus_to_exitcode(status)})")
    conn = sqlite3.connect(f"file:{folder / '.streamrag' / 'index.db'}?mode=ro", uri=True)
    try:
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    finally:
        conn.close()
    return size, chunks, wall, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=100.0, help="the file's size in megabytes (default 100)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        *_, baseline_mb = index(Path(tmp), "small", 0.005)
        size, chunks, wall, peak_mb = index(Path(tmp), "big", args.mb)
    file_mb = size / 1_000_000
    emit({"bench": "big_file", "file_mb": round(file_mb, 1), "chunks": chunks, "wall_s": round(wall, 2),
          "peak_rss_mb": round(peak_mb, 1), "baseline_rss_mb": round(baseline_mb, 1),
          "peak_over_file": round((peak_mb - baseline_mb) / file_mb, 2)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
