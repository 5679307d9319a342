"""Timing a streamrag command the way a user runs it, for the latency benches
(``command_latency``, ``query_latency``): a process of its own, timed by the clock and by the
processor time it used (user and system, its own, from wait4: on a machine other work shares,
the clock's figures grow with that work and the processor's do not), with its largest resident
memory. A command that fails ends the bench with what it wrote to stderr, not a traceback of
the bench alone."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from _harness import ROOT, Said

STDERR_LINES = 40   # the last lines of a failed command's stderr that its error shows


class Timing(NamedTuple):
    wall_s: float
    cpu_s: float     # user and system
    peak_mb: float   # largest resident memory (its own, not the largest of every child so far)


class CommandFailed(subprocess.CalledProcessError, Said):
    """A timed command exited with an error: said with the end of its stderr, no traceback."""

    def __str__(self) -> str:
        command = " ".join(["streamrag", *map(str, self.cmd[3:])])
        said = (self.stderr or "").rstrip().splitlines()[-STDERR_LINES:]
        return (f"`{command}` exited with {self.returncode}, "
                + ("saying:\n" + "\n".join(said) if said else "saying nothing on stderr"))


def streamrag_env() -> dict[str, str]:
    """The environment of a streamrag process: this checkout's code first."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def run_timed(args: list[str], cwd: Path) -> Timing:
    """Runs ``python -m streamrag *args`` in ``cwd`` (its output dropped) and times it; raises
    ``CommandFailed`` if it fails."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as err:
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "streamrag", *args], cwd=cwd, env=streamrag_env(),
                                stdout=subprocess.DEVNULL, stderr=err)
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        except BaseException:   # (Ctrl-C: the command is not left running, as subprocess.run would not)
            proc.kill()
            proc.wait()
            raise
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            raise CommandFailed(proc.returncode, proc.args, stderr=err.read())
    return Timing(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)   # (KB on Linux)


_STATS = {"median": statistics.median, "min": min, "max": max}


def spread(key: str, values: Iterable[float], stats: Iterable[str] = ("median", "min", "max")) -> dict[str, float]:
    """``{key}_median``, ``{key}_min``, ... of ``values`` (those of ``stats``, in its order), in
    seconds to the millisecond."""
    values = list(values)
    return {f"{key}_{stat}": round(_STATS[stat](values), 3) for stat in stats}
