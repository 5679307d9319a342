"""The command line with its standard streams closed at the start or lost on the way, as
scripts leave them (`2>&-`, `>&-`, `2> >(head -1)`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd=None, close: tuple[int, ...] = (), stderr=subprocess.PIPE,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m streamrag ARGS`` with the descriptors ``close`` closed in the child."""
    env = clean_env()
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
    out = run("status", "--json", "--db", str(corpus / "nope.db"), close=(2,))   # (its error as JSON)
    assert out.returncode == 1 and json.loads(out.stdout)["error"].startswith("no index at "), out.stdout
    out = run("status", "--json", close=(0, 2), cwd=corpus)
    assert out.returncode == 0 and json.loads(out.stdout)["version"] == 1


@pytest.fixture(scope="module")
def indexed_once(tmp_path_factory) -> Path:
    """tests/data/harbor indexed offline, once for the module: the tests that only read an
    index (their commands are the point, not its making) each get a copy (``indexed``)."""
    folder = tmp_path_factory.mktemp("indexed") / "corpus"
    shutil.copytree(Path(__file__).parent / "data" / "harbor", folder)
    assert run("index", str(folder), "--offline", "-q").returncode == 0
    return folder


@pytest.fixture
def indexed(indexed_once, tmp_path) -> Path:
    """A copy of ``indexed_once``, its .streamrag folder with it (a copied folder's index is its
    own: the test may write to it)."""
    return Path(shutil.copytree(indexed_once, tmp_path / "corpus"))


@pytest.mark.parametrize("args", [("ask", "Who rebuilt the quay?"),
                                  ("ask", "--mode", "basic", "Who rebuilt the quay?"),
                                  ("ask", "--mode", "global", "What are the main themes?"),
                                  ("ask", "--json", "Who rebuilt the quay?"),
                                  ("export", "-"),
                                  ("export", "/dev/stdout"),
                                  ("export", "--json", "g.json"),
                                  ("status",),
                                  ("status", "--json"),
                                  ("demo",),
                                  ("demo", "--json"),
                                  ("index", "--estimate", "--offline", ".")])
def test_with_stdout_closed_every_command_ends_alike(indexed, args):
    # ask and export - ended in a traceback (sys.stdout is None), status and --json quietly.
    # Their output is the point: then it went to /dev/null with exit 0 (ask's answer paid for);
    # status, demo and index --estimate still did. Now each fails with one line, said one way
    # (``cli.stdout_needed``; export: test_export's test_an_export_to_a_closed_standard_output_fails).
    does = {"ask": "prints its answer", "status": "prints its object" if "--json" in args else "prints the index's status",
            "demo": "prints its object" if "--json" in args else "prints its tour", "index": "prints the estimate",
            "export": "prints its object" if "--json" in args else "writes the export"}[args[0]]
    command = {"export": f"export {args[-1]}" if "--json" not in args else "export --json",
               "index": "index --estimate"}.get(args[0], args[0])
    out = run(*args, cwd=indexed, close=(1,))
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"streamrag: error: standard output is closed (>&-), where `{command}` {does}, "
                                 "which would be lost; "), out.stderr
    assert not (indexed / "g.json").exists()


def test_with_stdout_closed_an_export_to_a_file_of_its_own_is_written(indexed):
    # `export /dev/null >&-` was refused as "stdout closed": the closed stream is opened on
    # /dev/null, which the export was taken to write to; it names a file of its own.
    for out_name in ("/dev/null", "g.json"):
        out = run("export", out_name, cwd=indexed, close=(1,))
        assert out.returncode == 0 and out.stderr.startswith(f"wrote {out_name}: "), out.stderr
    assert json.loads((indexed / "g.json").read_text(encoding="utf-8"))["entities"]
    # (a link to standard output is standard output)
    (indexed / "out.json").symlink_to("/dev/stdout")
    out = run("export", "out.json", cwd=indexed, close=(1,))
    assert out.returncode == 1 and "standard output is closed (>&-), where `export out.json`" in out.stderr, out.stderr


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


def test_losing_stderr_does_not_end_watch(corpus, cli_run):
    # `streamrag watch w 2>&1 >/dev/null | head -1` ended with 141 at its second line.
    (corpus / "streamrag.toml").write_text("[watch]\ndebounce_ms = 50\nquiet_s = 0.2\n")   # (its waits)
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.Popen([sys.executable, "-m", "streamrag", "watch", str(corpus), "--offline"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        proc.stderr.readline()   # `head -1`
        proc.stderr.close()
        db = corpus / ".streamrag" / "index.db"

        def wait_for_version(n: int) -> None:
            deadline = time.monotonic() + 60
            while not (db.exists() and json.loads(cli_run("status", "--json", "--db", str(db)).stdout
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



def test_watch_json_ends_when_its_reader_goes_away_while_it_idles(corpus, tmp_path):
    # `watch --json | head -8` (its first lines, up to the health line): the daemon then idled
    # on, printing nothing on a quiet folder, holding the writer lock, so the next `watch` of
    # the index was refused (exit 75) until a file changed. It ends as a line to the closed
    # pipe would end it: exit 141, quietly; and the index is free for the next writer.
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.Popen([sys.executable, "-m", "streamrag", "watch", str(corpus), "--offline", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while json.loads(proc.stdout.readline())["event"] != "health":   # (idle from here on)
            pass
        proc.stdout.close()   # `head` has what it wanted
        assert proc.wait(60) == 141
        assert proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = run("watch", "--once", str(corpus), "--offline")
    assert out.returncode == 0, out.stderr


def test_a_reader_gone_is_not_looked_for_where_there_is_no_poll(monkeypatch):
    # Windows has no select.poll, but its pipes are FIFOs to os.fstat: the idle watch's look for
    # its --json reader (each second) raised AttributeError there. It is not looked for, as on a
    # file or a terminal; the next line to a closed pipe ends it, as before.
    import select

    from streamrag.watch_lines import reader_gone
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as stream:
        assert reader_gone(stream)
        monkeypatch.delattr(select, "poll")
        assert not reader_gone(stream)


class _CutOnce:
    """An OpenAI-compatible endpoint whose first streamed answer breaks off after its first
    words (no finish_reason, no [DONE]): the client says a retry line, and asks again."""

    ANSWER = "Ada Osk rebuilt the quay after the storm."

    def __init__(self) -> None:
        import http.server
        import threading

        endpoint = self
        self.streams = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:   # (its lines would go where the CLI's go)
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not body.get("stream"):
                    self._send(200, "application/json", json.dumps(
                        {"choices": [{"index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant", "content": endpoint.ANSWER}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode())
                    return
                endpoint.streams += 1
                words = endpoint.ANSWER.split(" ")
                pieces = [f"{w} " for w in words[:-1]] + [words[-1]]
                cut = endpoint.streams == 1
                events = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
                          for p in (pieces[:3] if cut else pieces)]
                if not cut:
                    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": len(pieces)}})
                text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + ("" if cut else "data: [DONE]\n\n")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(text.encode())
                self.wfile.flush()
                self.close_connection = True

            def _send(self, code: int, kind: str, data: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_retry_line_during_a_streamed_answer_starts_on_a_line_of_its_own(indexed):
    # The retry line landed in the middle of the answer's line on the terminal (`2>&1` alike).
    corpus = indexed
    endpoint = _CutOnce()
    try:
        ask = ("ask", "--mode", "local", "--api-base", endpoint.base_url, "Who rebuilt the quay?")
        together = run(*ask, cwd=corpus, stderr=subprocess.STDOUT)
        endpoint.streams = 0
        apart = run(*ask, "--fresh", cwd=corpus)
    finally:
        endpoint.close()
    assert together.returncode == 0 and apart.returncode == 0, together.stdout
    lines = together.stdout.splitlines()
    retry = next(i for i, line in enumerate(lines) if "retry 1/" in line)
    assert lines[retry].startswith("streamrag: ") and lines[retry - 1] == "Ada Osk rebuilt", lines
    assert lines[retry + 1] == " the quay after the storm.", lines   # (the answer goes on below it)
    # Where they show apart, the answer is one line, and stderr has no line broken in two.
    assert apart.stdout.startswith(f"{_CutOnce.ANSWER}\n"), apart.stdout
    assert "retry 1/" in apart.stderr and all(line.startswith("streamrag: ")
                                              for line in apart.stderr.splitlines()), apart.stderr
