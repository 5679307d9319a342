"""The command line with its standard streams closed at the start or lost on the way, as
scripts leave them (`2>&-`, `>&-`, `2> >(head -1)`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd=None, close: tuple[int, ...] = (), stderr=subprocess.PIPE,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m streamrag ARGS`` with the descriptors ``close`` closed in the child."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMRAG_", "OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))

    def closing() -> None:
        for fd in close:
            os.close(fd)

    return subprocess.run([sys.executable, "-m", "streamrag", *args], cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=timeout,
                          preexec_fn=closing)


def test_with_stderr_closed_stdout_carries_only_the_json(corpus):
    # Progress lines and errors were printed to stdout (Python leaves sys.stderr None), so
    # `index --json 2>&-` printed no valid JSON; and fd 2 went to the index's lock file.
    out = run("index", str(corpus), "--offline", "--json", close=(2,))
    assert out.returncode == 0, out.stdout
    result = json.loads(out.stdout)
    assert result["published"] and result["version"] == 1
    assert (corpus / ".streamrag" / "index.db.lock").read_text() == ""   # (released: emptied)
    out = run("watch", "--once", str(corpus), "--offline", close=(2,))
    assert out.returncode == 0 and out.stdout == "", out.stdout
    out = run("status", "--json", "--db", str(corpus / "nope.db"), close=(2,))
    assert out.returncode == 1 and out.stdout == "", out.stdout
    out = run("status", "--json", close=(0, 2), cwd=corpus)
    assert out.returncode == 0 and json.loads(out.stdout)["version"] == 1


@pytest.mark.parametrize("args", [("ask", "Who rebuilt the quay?"),
                                  ("ask", "--mode", "basic", "Who rebuilt the quay?"),
                                  ("ask", "--mode", "global", "What are the main themes?"),
                                  ("ask", "--json", "Who rebuilt the quay?"),
                                  ("export", "-")])
def test_with_stdout_closed_every_command_ends_alike(corpus, args):
    # ask and export - ended in a traceback (sys.stdout is None), status and --json quietly.
    assert run("index", str(corpus), "--offline", "-q").returncode == 0
    out = run(*args, cwd=corpus, close=(1,))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr


def test_losing_stderr_does_not_end_the_run(corpus):
    # `index --json 2> >(head -1 >/dev/null)` ended with 141 and published nothing (the run
    # recorded as interrupted); the progress printer's BrokenPipeError ended it.
    read, write = os.pipe()
    os.close(read)   # (the reader is gone before the first progress line)
    try:
        out = run("index", str(corpus), "--offline", "--json", stderr=write)
    finally:
        os.close(write)
    assert out.returncode == 0, out.stdout
    assert json.loads(out.stdout)["published"]
    status = json.loads(run("status", "--json", cwd=corpus).stdout)
    assert status["version"] == 1 and status["last_run"]["status"] == "ok"


def test_losing_stderr_does_not_end_watch(corpus):
    # `streamrag watch w 2>&1 >/dev/null | head -1` ended with 141 at its second line.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMRAG_", "OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.Popen([sys.executable, "-m", "streamrag", "watch", str(corpus), "--offline"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        proc.stderr.readline()   # `head -1`
        proc.stderr.close()
        db = corpus / ".streamrag" / "index.db"

        def wait_for_version(n: int) -> None:
            deadline = time.monotonic() + 60
            while not (db.exists() and json.loads(run("status", "--json", "--db", str(db)).stdout
                                                   or "{}").get("version") == n):
                assert proc.poll() is None, proc.returncode
                assert time.monotonic() < deadline
                time.sleep(0.2)

        wait_for_version(1)   # its lines after the first met a closed pipe
        (corpus / "later.txt").write_text("Ilse Marrow rang the bell of the Harbor Guild.\n")
        wait_for_version(2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
