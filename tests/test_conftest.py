"""The test session's own set-up (``conftest.pytest_configure``)."""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from conftest import pytest_configure


def _configured(monkeypatch, tmp_path) -> str | None:
    """``pytest_configure`` under PYTHONDONTWRITEBYTECODE, its temporary directory ``tmp_path``:
    the bytecode folder it chose (``None``: none, bytecode left unwritten)."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sys, "pycache_prefix", sys.pycache_prefix)
    monkeypatch.setattr(sys, "dont_write_bytecode", sys.dont_write_bytecode)
    pytest_configure(None)
    return os.environ.get("PYTHONPYCACHEPREFIX")


def test_the_bytecode_folder_is_the_users_own(monkeypatch, tmp_path):
    # One name for all users in the shared temporary directory: another user could make it
    # first and leave bytecode there for these sources, which Python would run.
    prefix = _configured(monkeypatch, tmp_path)
    assert prefix == str(tmp_path / f"streamrag-pycache-{os.getuid()}"), prefix
    st = os.lstat(prefix)
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ and sys.pycache_prefix == prefix


def test_a_bytecode_folder_others_may_write_is_not_used(monkeypatch, tmp_path):
    made = tmp_path / f"streamrag-pycache-{os.getuid()}"
    made.mkdir()
    made.chmod(0o777)
    assert _configured(monkeypatch, tmp_path) is None
    assert os.environ.get("PYTHONDONTWRITEBYTECODE") == "1"
