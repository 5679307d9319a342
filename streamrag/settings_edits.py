"""The settings files ``streamrag watch`` follows, and what it says when one is edited.

Watch goes on with the settings it started with; a restart reads them again. So an edit of
the settings file, of a custom extraction prompt, or a ``streamrag.toml`` made in the folder
is said, once per content (an editor's save makes several events), with what a restart
would do: nothing to restart for, the new settings, or the error a restart would meet.
None of these files is a document: the scan leaves them out, and so do the daemon's syncs.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from streamrag.config import CONFIG_NAME, Settings
from streamrag.errors import StreamragError


def _digest(path: Path) -> tuple[str | None, str]:
    """The content hash of a settings file (a prompt), and ``""``; or ``None`` and why it
    cannot be read (``"deleted"``, ``"not a regular file"``, the system's reason): an edit is
    said once per content, not once per event (an editor's save makes several). A pipe or
    device is not read (opened without waiting: reading a FIFO waited for a writer for ever,
    and the daemon with it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, "deleted"
    except OSError as e:
        return None, e.strerror or str(e)
    try:   # (open() of a folder's descriptor raised and left it open: one lost per event)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not a regular file"
        with open(fd, "rb", closefd=False) as f:
            return hashlib.sha256(f.read()).hexdigest(), ""
    except OSError as e:
        return None, e.strerror or str(e)
    finally:
        os.close(fd)


def _prompt_line(path: Path, digest: str | None, why: str) -> str:
    """What watch says of an edit of the extraction prompt it follows (``_digest``'s answer)."""
    if digest is not None:
        return (f"{path}: the extraction prompt changed; watch goes on with the one it started with: "
                "restart it to use the new one")
    if why == "deleted":
        then, needs = "was deleted", "it back"
    elif why == "not a regular file":   # (a FIFO was said deleted)
        then, needs = "is not a regular file now (a folder, pipe or device)", "a prompt file there"
    else:
        then, needs = f"cannot be read ({why})", "it readable"
    return (f"{path}: the extraction prompt {then}; watch goes on with the one it started with: "
            f"a restart needs {needs} (or index.extraction_prompt set to another)")


def _comparable(settings: Settings) -> Settings:
    """``settings`` without what says where they came from: two files of the same settings match."""
    import msgspec

    return msgspec.structs.replace(settings, source="", api_base_from="", file_api_base="", set_aside=[])


class SettingsEdits:
    """Follows the settings files of ``settings`` (and ``root``'s streamrag.toml); ``say``
    prints a line, ``reload`` reads the settings as a restart would."""

    def __init__(self, settings: Settings, root: Path, *, reload: Callable[[], Settings],
                 say: Callable[[str], None]) -> None:
        self.settings = settings
        self.say = say
        # The settings file in use: an edit takes effect at the next start, and is said to.
        self._config = Path(settings.source).resolve() if settings.source not in ("", "defaults") else None
        # The settings' own files (the settings file, a custom prompt): never documents (the scan
        # leaves them out); an edit of one is said, and applies at the next start.
        self._own = {Path(f).resolve() for f in settings.own_files()}
        # The settings a restart would read (``cmd_watch``: as `watch DIR` with the same flags),
        # and the content of each settings file last said (at the start: as read): its own files
        # and the folder's streamrag.toml, which a restart may read though none was there.
        self._reload = reload
        self._seen = {p: _digest(p) for p in (*self._own, root / CONFIG_NAME)}
        # Their names: an event's path is sifted by them first (a ``Path`` made of each of
        # 100,000 events, to ask ``edited``, took 2 s of the daemon's event loop).
        self._names = frozenset(p.name for p in self._seen)
        self._said: set[Path] = set()   # settings files an edit of was said

    def follows(self, path: str | Path) -> bool:
        """Whether ``path`` is one of the settings files (or prompts) followed: no document."""
        return os.path.basename(path) in self._names and Path(path) in self._seen

    def edited(self, path: str | Path) -> bool:
        """Says what watch does about an edit of a settings file (or prompt) it follows, once per
        content: it goes on with the settings it started with, which a restart replaces. False
        when ``path`` is none of the settings, then or now (``--config`` elsewhere left the
        folder's streamrag.toml a file like any other)."""
        if os.path.basename(path) not in self._names or (path := Path(path)) not in self._seen:
            return False
        state = _digest(path)
        if state == self._seen[path]:
            return path in self._own or path in self._said
        (before, _), self._seen[path] = self._seen[path], state
        digest = state[0]
        if path in self._own and path != self._config:   # the extraction prompt
            self._line(path, _prompt_line(path, *state))
            return True
        try:
            after = self._reload()
        except StreamragError as e:   # as a restart (or `index`) would say it
            self._line(path, f"{e}; watch goes on with what it started with: fix it, then "
                             "restart watch to use the new settings")
            return True
        read = {Path(f).resolve() for f in after.own_files()}   # (the settings file among them)
        if path not in self._own and path not in read and path not in self._said:
            return False
        same = _comparable(after) == _comparable(self.settings)
        restart = ("the defaults" if after.source in ("", "defaults") else after.source)
        if digest is None:
            line = (f"{path}: the settings file was deleted; watch goes on with what it started with"
                    + (", as a restart would" if same else f": a restart would use {restart}"))
        elif same:
            line = f"{path}: edited; the settings are those watch started with: nothing to restart for"
        elif before is None:
            line = (f"{path}: a settings file appeared; watch goes on with what it started with "
                    f"({'the defaults' if self._config is None else self._config}): restart it to use "
                    "the new ones")
        else:
            line = (f"{path}: the settings changed; watch goes on with what it started with: restart "
                    "it to use the new ones")
        self._line(path, line)
        return True

    def _line(self, path: Path, line: str) -> None:
        self._said.add(path)
        self.say(line)
