"""A file on disk as the index sees it: the files an indexed path names, whether one is still
there, was deleted or can be read, and the change stamp a run compares it by.

An indexed path is relative to the indexed folder (or absolute, for a file from another folder
given with it), and a row of a .jsonl or .csv file is ``file#n``; a file's own name may hold "#"
too, so a path may name two files (``stored_files``). A file that cannot be looked at (a folder
on its way without search permission) is not taken for a deleted one: what was indexed from it
stays.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from streamrag import loader


def covered(path: str, scope: list[str]) -> bool:
    """Whether the indexed ``path`` (``file`` or ``file#row``) lies under one of ``scope``.

    The root (".") covers what lies inside it, not files stored by absolute path: those came
    from another folder given with it (``index a b``), which ``index a`` leaves as it is."""
    real = loader.file_of(path)
    inside = not (real.startswith("/") or real.startswith("../"))
    return any((s in (".", "") and inside) or real == s or real.startswith(s.rstrip("/") + "/")
               for s in scope)


def stored_files(stored: str, root: Path | None) -> list[Path]:
    """The files an indexed path may name: ``stored`` itself, then the .jsonl or .csv file of
    which it may be a row (``file#n``; a file's own name may hold "#")."""
    return [Path(c) if root is None or Path(c).is_absolute() else Path(root) / c
            for c in file_names(stored)]


def file_names(stored: str) -> list[str]:
    """``stored_files``' names, as stored (relative to the root, or absolute)."""
    file = loader.file_of(stored)
    return [stored] if file == stored else [stored, file]


def is_file(path: Path) -> bool | None:
    """Whether ``path`` is a regular file; ``None`` when it cannot be looked at (a folder on its
    way without search permission, `chmod a-x`): it may well be there."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as e:
        return False if e.errno == errno.ELOOP else None


def still_there(stored: str, root: Path | None) -> bool:
    """Whether an indexed file outside this run's paths stays indexed: it still exists (or cannot
    be looked at), or its folder is gone as a whole (a disk not mounted now may come back; a
    deleted file does not)."""
    full = stored_files(stored, root)
    if any(is_file(f) is not False for f in full):
        return True
    return not full[0].parent.is_dir()


def deleted(path: Path, root: Path | None) -> bool:
    """Whether the file ``path`` was deleted, the indexed folder still there: a folder gone as a
    whole (moved away, a mount dropped) is no deletion of what it held, which stays indexed; nor
    is a file that cannot be looked at (``os.path.lexists`` says no to both)."""
    try:
        os.lstat(path)
        return False
    except (FileNotFoundError, NotADirectoryError):
        return (root if root is not None else path.parent).is_dir()
    except OSError:
        return False


def change_stamp(st: os.stat_result) -> float:
    """A file's change stamp as the index records it: the later of its modification and
    status-change times (so ``cp -p`` is seen)."""
    return max(st.st_mtime, st.st_ctime)


def file_stamp(st: os.stat_result) -> str:
    """A file's size and change stamp as a failure to read it records them (``failures.stamp``)."""
    return f"{st.st_size} {change_stamp(st)!r}"


def failure_stamp(path: Path) -> str | None:
    """The ``file_stamp`` a failure to use ``path`` records when its ``stat`` failed: its own
    ``lstat``'s, else that of the nearest folder above it that can be looked at (`chmod a-x` on
    a folder refuses a stat of what lies in it; a chmod of the folder changes its stamp). None
    when nothing can be (each update then counts the failure anew)."""
    try:
        return file_stamp(os.lstat(path))
    except OSError:
        pass
    for folder in Path(path).parents:
        try:
            return file_stamp(os.stat(folder))
        except OSError:
            continue
    return None


def same_on_disk(rows: dict[str, tuple[str, int, float]], st: os.stat_result) -> bool:
    """Whether a file whose indexed rows are ``rows`` (path -> document id, size, change stamp)
    is as indexed, by its ``stat``: the same size and ``change_stamp``. No rows: not indexed,
    so not the same."""
    stamp = change_stamp(st)
    return bool(rows) and all(v[1] == st.st_size and v[2] == stamp for v in rows.values())


def retimed(rows: dict[str, tuple[str, int, float]], st: os.stat_result) -> bool:
    """Whether a file whose indexed rows are ``rows`` is as indexed but for a new status-change
    time, by its ``stat``: the same size, and its modification time the change stamp it was
    indexed with (a file is written with the two times equal). `cp -a` (a vault restored from a
    backup), `chmod` and `chown` keep the modification time and make a new status-change time;
    an edit makes a new modification time."""
    return bool(rows) and all(v[1] == st.st_size and v[2] == st.st_mtime for v in rows.values())


def readable(path: Path) -> bool:
    """Whether ``path`` is a regular file whose bytes can be read."""
    if not is_file(path):   # (a pipe is not opened: that waits for a writer)
        return False
    try:
        with open(path, "rb") as f:
            f.read(1)
        return True
    except OSError:
        return False
