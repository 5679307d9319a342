"""What the bench scripts share: a simulator in its own process, peak memory, one JSON line."""

from __future__ import annotations

import contextlib
import json
import re
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, installed or not


@contextlib.contextmanager
def simulator_process(**flags: object) -> Iterator[str]:
    """Starts ``python -m streamrag.simulator`` on a free port; yields its base URL."""
    args = [sys.executable, "-m", "streamrag.simulator", "--port", "0"]
    for name, value in flags.items():
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        args += [f"--{name.replace('_', '-')}", str(value)]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        m = re.search(r"(http://\S+)", line)
        if not m:
            raise RuntimeError(f"the simulator did not start: {line.strip() or proc.wait()}")
        yield m.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def peak_rss_mb() -> float:
    """Peak resident memory of this process, in MB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)
