"""How long `streamrag ask --mode local` (or ``--mode global``) takes, end to end, on an offline index.

Builds an offline index of ``--corpus`` (no model: the extractive answer), or reuses the one at
``--db`` when that file exists, then runs ``--asks`` asks of ``--mode`` as separate processes,
the way a user runs them: each one pays for Python's start, the imports, the tokenizer and (a
local ask) the PageRank over the whole graph. The questions name the index's entities (the most
connected ones first), so every local ask seeds, widens by PageRank and builds a full context. Each ask is timed by the
clock and by the processor time it used (user and system, ``*_cpu_s_*``): on a machine other
work shares, the clock's figures grow with that work and the processor's do not; the largest
resident memory of one ask is ``*_ask_peak_mb``. ``--mode global`` times global asks of the same
questions (its keys begin ``global_``), ``--mode basic`` basic ones (``basic_``). Prints ONE JSON line:

    {"bench": "query_latency", "corpus", "documents", "entities", "relationships", "asks", "mode",
     "local_ask_s_median", "local_ask_s_max", "local_ask_s_min",
     "local_ask_cpu_s_median", "local_ask_cpu_s_max", "local_ask_cpu_s_min", "local_ask_peak_mb"}

A corpus folder's own index (``.streamrag``) is not copied with it.

    python bench/query_latency.py --corpus ../shared/corpus/christmas_carol
    python bench/query_latency.py --corpus DIR --db /tmp/big.db --asks 10   # reuses /tmp/big.db
    python bench/query_latency.py --db /tmp/big.db --mode global
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import emit, folder
from _timing import Timing, run_timed, spread, streamrag_env

TEMPLATES = (
    "What do the documents say about {name}?",
    "Who is {name} connected to, and how?",
    "What has {name} done, and where?",
)


def build(corpus: Path, db: Path, work: Path) -> None:
    """An offline index of a copy of ``corpus`` (indexing may write into the folder it reads)."""
    copy = work / "corpus"
    shutil.copytree(corpus, copy, ignore=shutil.ignore_patterns(".streamrag"))
    subprocess.run([sys.executable, "-m", "streamrag", "index", str(copy), "--offline", "-q",
                    "--db", str(db)], check=True, cwd=work, env=streamrag_env(), stdout=subprocess.DEVNULL)


def counts(db: Path) -> tuple[dict, list[str]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        sizes = {"documents": conn.execute("SELECT count(*) FROM documents").fetchone()[0],
                 "entities": conn.execute("SELECT count(*) FROM entities").fetchone()[0],
                 "relationships": conn.execute("SELECT count(*) FROM relationships").fetchone()[0]}
        names = [r[0] for r in conn.execute(
            "SELECT name FROM entities ORDER BY degree DESC, mentions DESC, id LIMIT 50")]
    finally:
        conn.close()
    return sizes, names


def questions(names: list[str], n: int) -> list[str]:
    if not names:
        return ["What do the documents say?"] * n
    return [TEMPLATES[k % len(TEMPLATES)].format(name=names[k % len(names)]) for k in range(n)]


def time_ask(db: Path, question: str, cwd: Path, mode: str = "local") -> Timing:
    """One ask of ``question`` in ``mode`` of the index ``db``, timed (``_timing.run_timed``)."""
    return run_timed(["ask", "--db", str(db), "--mode", mode, "--json", question], cwd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=folder, default=None, help="folder to index (not needed with an existing --db)")
    p.add_argument("--db", type=Path, default=None, help="index to reuse if it exists, else where to build it "
                                                         "(default: a temporary file)")
    p.add_argument("--asks", type=int, default=5, help="asks to time (default 5)")
    p.add_argument("--mode", choices=("local", "global", "basic"), default="local",
                   help="the asks' mode (default local)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db = args.db.resolve() if args.db else work / "index.db"   # (the asks run in ``work``)
        if not db.exists():
            if args.corpus is None:
                p.error(f"{db} does not exist: give --corpus to build it")
            build(args.corpus, db, work)
        sizes, names = counts(db)
        timed = [time_ask(db, q, work, args.mode) for q in questions(names, max(1, args.asks))]
    figures = {}
    for what, times in (("s", [t.wall_s for t in timed]), ("cpu_s", [t.cpu_s for t in timed])):
        figures.update(spread(f"{args.mode}_ask_{what}", times, ("median", "max", "min")))
    figures[f"{args.mode}_ask_peak_mb"] = round(max(t.peak_mb for t in timed), 1)
    emit({"bench": "query_latency", "corpus": str(args.corpus or ""), **sizes, "asks": len(timed),
          "mode": args.mode, **figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
