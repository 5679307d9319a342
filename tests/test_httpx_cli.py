"""httpx imported without its command-line client (``streamrag.httpx_cli``), which still runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytest.importorskip("click")   # (without click, httpx loads no client, and there is nothing to defer)


def _python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=60)


def test_httpx_imported_after_streamrag_loads_no_click_rich_or_pygments():
    # Every command that calls a model loaded them with httpx (80-90 ms), for httpx's own client.
    ran = _python("import sys\nimport streamrag.llm\nimport httpx\n"
                  "print(sorted({m.partition('.')[0] for m in sys.modules} & {'click', 'rich', 'pygments'}))\n"
                  "print(httpx.Client.__name__, httpx.Timeout(5).read)")
    assert ran.returncode == 0 and ran.stdout.split("\n")[:2] == ["[]", "Client 5"], ran.stderr


def test_httpx_s_own_client_still_runs():
    ran = _python("import streamrag\nimport httpx\nhttpx.main(['--help'])")
    assert ran.returncode == 0 and "A next generation HTTP client" in ran.stdout, ran.stderr


def test_without_click_httpx_keeps_its_own_advice_to_install_its_client():
    # click is no dependency of httpx or streamrag: without it the stand-in raised
    # ModuleNotFoundError from httpx.main, and from hasattr on it, where httpx says what to install.
    ran = _python("import sys\nsys.modules['click'] = None   # (not installed)\nimport streamrag\nimport httpx\n"
                  "print('httpx._main' in sys.modules, httpx.main.__module__)\nhttpx.main()")
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert ran.stdout.startswith("False httpx\n") and "pip install 'httpx[cli]'" in ran.stdout, ran.stdout
