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
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import ROOT, emit, folder

COMMANDS = {"help": ["--help"], "status": ["status"], "index_unchanged": ["index", ".", "--offline", "-q"]}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _index_facts(db: Path) -> tuple[int, int]:
    """The documents of the index ``db`` and its published version."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        documents = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        version = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    finally:
        conn.close()
    return documents, int(version[0]) if version else 0


def timed(args: list[str], cwd: Path) -> tuple[float, float]:
    """The seconds one command took by the clock and of the processor (its own, from wait4)."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "streamrag", *args], cwd=cwd, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _pid, status, usage = os.wait4(proc.pid, 0)
    except BaseException:   # (Ctrl-C: the command is not left running)
        proc.kill()
        proc.wait()
        raise
    wall = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise subprocess.CalledProcessError(code, proc.args)
    return wall, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=folder, required=True, help="folder to index offline (a copy of it)")
    p.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "corpus"
        shutil.copytree(args.corpus, copy, ignore=shutil.ignore_patterns(".streamrag"))
        first = subprocess.run([sys.executable, "-m", "streamrag", "index", ".", "--offline", "-q", "--json"],
                               check=True, cwd=copy, env=_env(), stdout=subprocess.PIPE, text=True)
        db = Path(json.loads(first.stdout)["db"])   # (where the corpus's store.path puts it, if it does)
        documents, version = _index_facts(db)
        figures = {}
        for name, command in COMMANDS.items():
            runs = [timed(command, copy) for _ in range(max(1, args.runs))]
            cpu = [c for _, c in runs]
            figures.update({f"{name}_s_median": round(statistics.median(w for w, _ in runs), 3),
                            f"{name}_cpu_s_median": round(statistics.median(cpu), 3),
                            f"{name}_cpu_s_min": round(min(cpu), 3), f"{name}_cpu_s_max": round(max(cpu), 3)})
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
