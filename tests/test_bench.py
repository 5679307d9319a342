"""The bench scripts' own options: the simulator they start listens where ``--port`` says, so
that runs side by side can each be given their own ports."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from _harness import ports, simulator_process, simulator_thread  # noqa: E402

SIMULATING = ("incremental", "index_cost", "throughput", "query_cost", "llm_client", "rename")


def busy_port() -> socket.socket:
    """A listening socket on a port the system picked: that port is taken."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def test_a_port_or_a_range_of_them():
    assert ports("8765") == range(8765, 8766)
    assert ports("19300-19309") == range(19300, 19310)
    for bad in ("x", "19309-19300", "70000", "-1", "1-2-3"):
        with pytest.raises(argparse.ArgumentTypeError):
            ports(bad)


@pytest.mark.parametrize("start", [simulator_process, simulator_thread])
def test_the_simulator_takes_the_first_free_port_of_the_range(start):
    with busy_port() as taken:
        first = taken.getsockname()[1]
        with start(range(first, first + 20)) as sim:
            url = sim if isinstance(sim, str) else sim.base_url
            assert first < port_of(url) < first + 20
        with pytest.raises((RuntimeError, OSError)):
            with start(range(first, first + 1)):
                pass


@pytest.mark.parametrize("script", SIMULATING)
def test_every_bench_that_starts_a_simulator_takes_port(script):
    out = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "--port N|FIRST-LAST" in out.stdout, out.stderr


def test_incremental_runs_its_simulator_on_the_port_given():
    # It started its simulator on any free port: runs side by side could not be kept apart.
    with busy_port() as taken:
        first = taken.getsockname()[1]
        out = subprocess.run([sys.executable, str(BENCH / "incremental.py"), "--corpus",
                              str(BENCH.parent / "tests" / "data" / "harbor"), "--port",
                              f"{first}-{first + 20}"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert first < port_of(result["api_base"]) <= first + 20 and result["fresh_doc_cited"]
