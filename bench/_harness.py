"""What the bench scripts share: a simulator (in its own process or a thread) on a free port or
the one ``--port`` gives, peak memory, one JSON line."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import re
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, installed or not

if TYPE_CHECKING:
    from streamrag.simulator import Simulator


ANY_PORT = range(0, 1)   # port 0: the system picks a free one


def ports(text: str) -> range:
    """An argparse type for ``--port``: ``N``, or ``FIRST-LAST`` (the first of them free)."""
    first, _, last = text.partition("-")
    try:
        span = range(int(first), int(last or first) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a port (e.g. 8765) or a range of them "
                                         "(e.g. 19300-19309)") from None
    if not span or not 0 <= span[0] <= span[-1] <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: ports run from 1 to 65535, the first of a range "
                                         "no higher than its last (0: any free port)")
    return span


def folder(text: str) -> Path:
    """An argparse type for ``--corpus``: a folder that is there (a path gone was a traceback from
    deep inside the first sync, or from copying it)."""
    from streamrag.terminal import shown

    if not Path(text).is_dir():   # (a file given was said to be no such folder, though it is there)
        said = "not a folder" if Path(text).exists() else "no such folder"
        raise argparse.ArgumentTypeError(f"{shown(text)}: {said}")
    return Path(text)


class Said(Exception):
    """An error a bench ends with in its own words (``_one_line``), without a traceback of the
    bench, which would bury them."""


class PortsTaken(Said, RuntimeError):
    """Every port ``--port`` gave is in use: said in one line (see ``_one_line``), as a traceback
    of the simulator's start would bury what to do."""


def _one_line(kind, error, tb) -> None:
    if issubclass(kind, Said):
        print(f"{Path(sys.argv[0]).name}: {error}", file=sys.stderr)   # (exit 1, as any error)
    elif issubclass(kind, KeyboardInterrupt):   # Ctrl-C: 54 lines of where it was, of no use
        print(f"{Path(sys.argv[0]).name}: interrupted", file=sys.stderr)   # (still killed by SIGINT)
    else:
        sys.__excepthook__(kind, error, tb)


sys.excepthook = _one_line


def _taken(port: range) -> PortsTaken:
    where = f"port {port[0]} is" if len(port) == 1 else f"ports {port[0]}-{port[-1]} are all"
    return PortsTaken(f"{where} in use; give --port another port or range (0: any free port)")


def add_port_option(ap: argparse.ArgumentParser) -> None:
    """``--port`` for a bench that starts its own simulator: runs side by side each get their own."""
    ap.add_argument("--port", type=ports, default=ANY_PORT, metavar="N|FIRST-LAST",
                    help="the simulator's port, or a range to take the first free port of "
                         "(default: any free port)")


@contextlib.contextmanager
def simulator_process(port: range = ANY_PORT, **flags: object) -> Iterator[str]:
    """Starts ``python -m streamrag.simulator`` on the first free port of ``port``; yields its
    base URL."""
    args = [sys.executable, "-m", "streamrag.simulator"]
    for name, value in flags.items():
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        args += [f"--{name.replace('_', '-')}", str(value)]
    for number in port:
        proc = subprocess.Popen([*args, "--port", str(number)], stderr=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, text=True, cwd=ROOT)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        if m := re.search(r"(http://\S+)", line):
            break
        code = proc.wait()
        if "already in use" in line and number == port[-1]:
            raise _taken(port)
        if "already in use" not in line:
            raise RuntimeError(f"the simulator did not start: {line.strip() or code}")
    try:
        yield m.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def simulator_thread(port: range = ANY_PORT, **config: object) -> Iterator[Simulator]:
    """A ``Simulator`` in this process on the first free port of ``port``."""
    from streamrag.simulator import Simulator, SimulatorConfig

    for number in port:
        sim = Simulator(SimulatorConfig(port=number, **config))
        try:
            sim.start()
            break
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            if number == port[-1]:
                raise _taken(port) from None
    try:
        yield sim
    finally:
        sim.stop()


CORPUSGEN = Path("shared") / "tools" / "corpusgen.py"
"""The project's corpus generator, where it lies beside a checkout."""


def find_corpusgen(root: Path = ROOT) -> Path:
    """``corpusgen.py`` beside the checkout ``root``, or beside the checkout it was cloned from:
    a clone made elsewhere (``git clone /work/main /tmp/x``) has no ``../shared`` of its own, and
    its benches were told to give ``--corpusgen`` a path its origin already tells. The path beside
    ``root`` when neither holds it (the error names it)."""
    beside = root.parent / CORPUSGEN
    if beside.is_file():
        return beside
    origin = subprocess.run(["git", "-C", str(root), "config", "--get", "remote.origin.url"],
                            capture_output=True, text=True).stdout.strip().removeprefix("file://")
    if origin and Path(origin).is_absolute() and (Path(origin).parent / CORPUSGEN).is_file():
        return Path(origin).parent / CORPUSGEN
    return beside


def generate_corpus(script: str, gen: Path | None, out: Path, *, seed: int, scale: int, docs: int,
                    hint: str = "try another --seed", takes_corpus: bool = True) -> None:
    """Writes corpusgen's ``docs`` documents of ``seed`` and ``scale`` into ``out``, or exits with
    one line naming ``script``, what went wrong and what to do (``hint`` when the seed cannot make
    that many; --corpus DIR offered only to a script that ``takes_corpus``)."""
    gen = gen or find_corpusgen()
    if not gen.is_file():
        sys.exit(f"{script}: no corpus generator at {gen}; give its path with --corpusgen PATH"
                 + (", or --corpus DIR instead" if takes_corpus else ""))
    made = subprocess.run([sys.executable, str(gen), "--seed", str(seed), "--scale", str(scale),
                           "--docs", str(docs), "--out", str(out)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if made.returncode:
        last = (made.stderr.strip().splitlines() or ["no message"])[-1]
        sys.exit(f"{script}: corpusgen could not make {docs} documents with seed {seed} ({last}); {hint}")


def peak_rss_mb() -> float:
    """Peak resident memory of this process, in MB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)
