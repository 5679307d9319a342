"""How long the everyday commands that call no model take: ``streamrag --help``, ``status``, and
``index .`` with nothing changed, each run as a separate process the way a user runs it.

Copies ``--corpus`` (without its own ``.streamrag``) to a temporary folder, indexes it offline
there, then runs each command ``--runs`` times from inside the copy. Each run is timed by the
clock and by the processor time it used (user and system, ``*_cpu_s_*``: on a machine other
work shares, the clock's figures grow with that work and the processor's do not). An index run
that published a version (something changed after all) ends the bench with an error, not a
figure. Prints ONE JSON line:

    {"bench": "command_latency", "corpus", "documents", "runs",
     "help_s_median", "help_cpu_s_median", "help_cpu_s_min", "help_cpu_s_max",
     "status_...", "index_unchanged_..."}

    python bench/command_latency.py --corpus ../shared/corpus/christmas_carol --runs 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import emit, folder
from _timing import Timing, run_timed, spread, streamrag_env

COMMANDS = {"help": ["--help"], "status": ["status"], "index_unchanged": ["index", ".", "--offline", "-q"]}


def _index_facts(db: Path) -> tuple[int, int]:
    """The documents of the index ``db`` and its published version."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        documents = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        version = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    finally:
        conn.close()
    return documents, int(version[0]) if version else 0


def timed(args: list[str], cwd: Path) -> Timing:
    """One run of ``streamrag *args`` in ``cwd``, timed (``_timing.run_timed``)."""
    return run_timed(args, cwd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=folder, required=True, help="folder to index offline (a copy of it)")
    p.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "corpus"
        shutil.copytree(args.corpus, copy, ignore=shutil.ignore_patterns(".streamrag"))
        first = subprocess.run([sys.executable, "-m", "streamrag", "index", ".", "--offline", "-q", "--json"],
                               check=True, cwd=copy, env=streamrag_env(), stdout=subprocess.PIPE, text=True)
        db = Path(json.loads(first.stdout)["db"])   # (where the corpus's store.path puts it, if it does)
        documents, version = _index_facts(db)
        figures = {}
        for name, command in COMMANDS.items():
            runs = [timed(command, copy) for _ in range(max(1, args.runs))]
            figures.update({**spread(f"{name}_s", (r.wall_s for r in runs), ("median",)),
                            **spread(f"{name}_cpu_s", (r.cpu_s for r in runs))})
        # (a run that re-indexed would be timed as one with nothing changed)
        after = _index_facts(db)[1]
        if after != version:
            print(f"{Path(sys.argv[0]).name}: `{' '.join(COMMANDS['index_unchanged'])}` published version "
                  f"{after} of the index, not an index with nothing changed", file=sys.stderr)
            return 1
    emit({"bench": "command_latency", "corpus": str(args.corpus), "documents": documents,
          "runs": max(1, args.runs), **figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
