"""The file events ``streamrag watch`` follows: watchfiles' batches, made robust.

The daemon reads an async iterator of watchfiles-shaped sets of ``(change, path)``
(``ChangeSet``); ``watch_folder`` is the real one, tests feed scripted sets. Besides
watchfiles' own kinds (1 added, 2 modified, 3 deleted) the iterator says three of its own:
``REPLACED`` (the folder was deleted and made again, the watch moved to the new one),
``RESCAN`` (watchfiles failed and was restarted) and ``REOPENED`` (a folder it could not read,
so could not follow, is readable again: it was restarted to follow it). Which events count is
the daemon's: it gives ``watch_folder`` a ``keep`` that drops, from each raw batch, the writes
of files the scan leaves out, before the burst gathers them (a hidden or excluded file written
on and on kept the burst open, and held every other file's batch back with it, up to ``10 x
debounce_ms``), and a ``renamed_from`` that says which files a raw batch added are one it
deleted, renamed (beginning with its indexed text): watchfiles' events do not pair a rename's
names, and a burst keeps a deletion with an added file only when it may be its new name
(``_Burst``).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from streamrag.terminal import shown

if TYPE_CHECKING:
    from streamrag.config import WatchSettings

ChangeSet = set[tuple[int, str]]
"""One batch of file events as watchfiles yields them: ``(Change, absolute path)``."""

ADDED, DELETED = 1, 3  # watchfiles.Change values (an IntEnum), so scripted sets may use ints
_KINDS = (ADDED, 2, DELETED)   # (2: modified)
RESCAN = -1
"""A change kind of our own: the watcher failed and was restarted; the path is its error."""
# watchfiles' error for such a name (Rust's Debug form: a '"' in it escaped, \")
UNDECODABLE = re.compile(r'Unable to decode path "((?:[^"\\]|\\.)+)"')
_POLL_MS = 1000
# watchfiles' polling watcher's error for a symlink loop (a folder's, or two files' links)
LINK_LOOP = re.compile(r"File system loop found: (.+?) points to an ancestor|"
                        r"IO error for operation on (.+?): Too many levels of symbolic links")
REPLACED = -2
"""A change kind of our own: the watched folder was deleted and made again (another inode);
the watcher restarted on the new one. The path is the folder."""
REOPENED = -3
"""A change kind of our own: a folder inside the watched one that the watcher could not read
(chmod 000) is readable again, or one moved in holds such a folder (the folders after it in
watchfiles' walk went unwatched); the watcher restarted to follow them. The path is that folder."""
_GONE_WAIT_S = 2.0
"""How long the watcher waits for a vanished folder to be made again before saying it is gone."""
# A watcher that fails is restarted after _RESTART_S; one that fails again at once (within
# _FAILED_AT_ONCE_S of its start: the polling watcher on a symlink loop) after twice as long
# each time, up to _RESTART_MAX_S, as each restart makes the daemon sync the whole folder (a
# sync a second of a 20,000-file folder, all day).
_RESTART_S = 1.0
_RESTART_MAX_S = 60.0
_FAILED_AT_ONCE_S = 10.0
_GONE_POLL_S = 0.5
"""How often the watcher looks for a folder that is gone (it waits for it as ``tail -F`` does)."""
_STEP_MS = 200
"""How often watchfiles' thread looks for the stop, and the pause that ends one of its raw
batches. Its thread cannot be cancelled: given ``debounce_ms`` as its step (the pause that
ends a burst), a stop of an idle watch waited up to ``debounce_ms`` (a minute at most) for it
to look. The burst's pause is ``_Burst``'s now. (50 ms woke an idle watch 24-26 times a second,
0.11-0.14 s of CPU a minute, against 2-7 and 0.03-0.06 s before; 200 ms still stops within a
fifth of a second.)"""
_FINE_STEP_MS = 50
"""The step under a ``debounce_ms`` of ``_STEP_MS`` or less. A raw batch ends at a step that saw
no change it had not seen (a file written again is none), so a step as long as the pause split a
file written every 100 ms into a batch every two or three steps (debounce_ms 150: 11 batches in
3 s); a shorter step gathered by ``_Burst`` makes it one burst, as before fcbfb99."""
_LOOK_MS = 1000
"""The longest watchfiles waits without a word (an empty batch): the watcher then checks that
the folder is still the one watched, and ``_Burst`` whether a burst has paused long enough."""


def folder_identity(path: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of ``path``, ``None`` if it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


RenamedFrom = Callable[[list[str], list[str]], dict[str, str]]
"""Given the files a raw batch added and those it deleted (paths relative to the folder), those
added that are one deleted, renamed (maybe written on since), each with that one."""


def watch_folder(root: Path, settings: WatchSettings, stop_event: anyio.Event,
                 keep: Callable[[ChangeSet], ChangeSet] | None = None,
                 renamed_from: RenamedFrom | None = None) -> AsyncIterator[ChangeSet]:
    """Batches of file events under ``root`` from watchfiles (which count is the daemon's: ``keep``,
    given, takes each raw batch's events that may count, before they are gathered into bursts;
    ``renamed_from``, given, says which deleted file a burst keeps with which added one, as a
    rename's names: without it, each with every file its raw batch added).

    A burst ends after ``debounce_ms`` without an event (a batch lasts ten times that at most),
    so an editor saving every few hundred milliseconds makes one batch, not one per save; a file
    settled beside files written on and on is handed over alone (``_Burst``). A
    stop (``stop_event``) ends it within ``_STEP_MS``, however long ``debounce_ms`` is. If
    ``root`` is replaced (deleted and made again), the watch moves to the new folder and a
    ``REPLACED`` event makes the daemon sync it whole. If it is gone for longer (a restore
    takes a while), a ``DELETED`` event for ``root`` says so, the watcher waits for it to come
    back, for as long as it takes (``stop_event`` ends the wait), and says ``REPLACED`` when
    it does. If watchfiles fails (its Rust side cannot decode a file name, say), it is restarted and a
    ``RESCAN`` event makes the daemon sync the whole folder, so nothing it missed is lost.
    What it has seen of a burst not ended yet is its ``held``: a stop drops it, and says it.
    """
    return FolderWatch(Path(root).resolve(), settings, stop_event, keep, renamed_from)


class FolderWatch:
    """``watch_folder``'s batches (iterate it), and the changes of the burst it holds back until
    it ends (``held``): a file written within ``debounce_ms`` of a stop was seen, but never
    handed over, and the daemon's stopped line said "index is current"."""

    def __init__(self, root: Path, settings: WatchSettings, stop_event: anyio.Event,
                 keep: Callable[[ChangeSet], ChangeSet] | None = None,
                 renamed_from: RenamedFrom | None = None) -> None:
        self.burst: _Burst | None = None
        self.keep = keep
        self.renamed_from = renamed_from
        self.root = root
        self.filtering: ChangeSet = set()   # a raw batch ``keep`` is looking at
        # Set as watchfiles starts (after the walk for unreadable folders before it): the daemon's
        # initial sync waits for it, so that an edit made during its scan is seen.
        self.started = anyio.Event()
        self._batches = _watch(root, settings, stop_event, self)

    def __aiter__(self) -> AsyncIterator[ChangeSet]:
        return self._batches

    @property
    def held(self) -> ChangeSet:
        """The changes seen and not handed over yet (none once the burst is)."""
        return (set(self.burst.changes) if self.burst is not None else set()) | self.filtering

    def renames(self, changes: ChangeSet) -> list[tuple[str, str]]:
        """The (deleted, added) paths of the raw batch ``changes`` that may be a rename's names,
        as ``renamed_from`` says (a worker thread's: it reads the files added, and the index).
        What it cannot say of (a folder added, ``mv dir1 dir2``; a path outside the folder, where
        a link leads) is tied as before: with each path of the other kind, as is every pair when
        ``renamed_from`` fails (an index locked or damaged a moment: the tie only delays)."""
        deleted = sorted(path for kind, path in changes if kind == DELETED)
        added = sorted(path for kind, path in changes if kind == ADDED)
        rels = {path: rel for path in deleted + added
                if (rel := os.path.relpath(path, self.root)) != os.pardir and not rel.startswith(os.pardir + os.sep)}
        files = [path for path in added if path in rels and not os.path.isdir(path)]
        asked = set(files)   # (a list looked up for each pair: quadratic in a copy's thousands)
        pairs = {(old, new) for old in deleted for new in added if old not in rels or new not in asked}
        gone = [rels[path] for path in deleted if path in rels]
        if files and gone and self.renamed_from is not None:
            paths = {rel: path for path, rel in rels.items()}
            try:
                found = self.renamed_from([rels[path] for path in files], gone)
            except Exception:   # (the index unreadable a moment, say: a watcher never stops for it)
                found = None
            if found is None:   # ... and what cannot be asked is tied as before
                pairs.update((old, new) for old in deleted for new in files)
            else:
                pairs.update((paths[old], paths[new]) for new, old in found.items())
        return sorted(pairs)


class _Burst:
    """watchfiles' raw batches (each ended by a pause of ``_STEP_MS``) gathered into one batch
    per burst: it ends after ``quiet_s`` without a change, or ``10 * quiet_s`` after its first
    (a file written steadily). ``add`` takes each raw batch, an empty one too (watchfiles waited
    ``_LOOK_MS`` or ``quiet_s`` without a change), and returns the burst once it has ended.

    The paths of a burst held open only by files written on and on (each changed for
    ``quiet_s`` already, and again within it: a log appended every 300 ms) end on their own
    after ``quiet_s`` without a change of theirs: a note saved beside such a log waited for
    the log's cap (``10 * quiet_s``, 5 s by default), the log kept its own. While a path new in
    the last ``quiet_s`` is unsettled (a ``cp -r`` under way), the burst stays whole, and so do
    a rename's names, a path deleted and one added in one raw batch (its old name left alone
    was synced as deleted, its text gone from the index until the new one's sync): the pairs
    ``add`` is given (``FolderWatch.renames``), else each deleted path with each added one (an
    unrelated ``rm old.txt`` beside a new log written every 0.3 s then waited for its cap)."""

    def __init__(self, quiet_s: float) -> None:
        self.quiet_s = quiet_s
        self.changes: ChangeSet = set()
        self.first = self.last = 0.0
        # Each path's first change in the burst, and the paths of the raw batches of the last
        # quiet_s: what is settled is told from them with no look at each path of the burst (a
        # copy of 100,000 files took 0.3 s of the event loop at its first split, measured).
        self._first: dict[str, float] = {}
        self._recent: deque[tuple[float, set[str]]] = deque()
        self._newest = 0.0   # when a path new to the burst came last
        self._tied: dict[str, set[str]] = {}   # path -> the paths that end with it (a rename's names)

    def add(self, changes: ChangeSet, now: float,
            renames: list[tuple[str, str]] | None = None) -> ChangeSet | None:
        if changes:
            if not self.changes:
                self.first = now
            self.changes |= changes
            self.last = now
            paths = {path for _kind, path in changes}
            if new := [path for path in paths if path not in self._first]:
                self._newest = now
                self._first.update(dict.fromkeys(new, now))
            self._recent.append((now, paths))
            self._tie(changes, renames)
        if not self.changes:
            return None
        if now - self.last >= self.quiet_s or now - self.first >= 10 * self.quiet_s:
            burst, self.changes = self.changes, set()
            self._first, self._tied = {}, {}
            self._recent.clear()
            return burst
        return self._settled(now)

    def _tie(self, changes: ChangeSet, renames: list[tuple[str, str]] | None) -> None:
        """Ties the names of each rename of one raw batch together: ``renames`` (deleted, added),
        given, else its deleted and added paths, all (any of them may be one)."""
        if renames is None:
            deleted = {path for kind, path in changes if kind == DELETED}   # (a Change is an IntEnum)
            added = {path for kind, path in changes if kind == ADDED} if deleted else set()
            groups = [deleted | added] if deleted and added else []
        else:
            groups = [set(names) for names in renames]
        for names in groups:
            group = set().union(*(self._tied.get(path, {path}) for path in names))
            for path in group:
                self._tied[path] = group

    def _settled(self, now: float) -> ChangeSet | None:
        """The changes of the paths that settled beside others written on and on (taken out of
        the burst), or ``None`` while there are none to hand over apart."""
        while self._recent and now - self._recent[0][0] >= self.quiet_s:
            self._recent.popleft()
        if now - self._newest < self.quiet_s:
            return None   # (a path new in the last quiet_s: it may be one of many, settling together)
        busy = set().union(*(paths for _at, paths in self._recent))
        busy = set().union(*(self._tied.get(path, {path}) for path in busy))
        if len(busy) == len(self._first):
            return None
        kept = {(kind, path) for path in busy for kind in _KINDS if (kind, path) in self.changes}
        settled, self.changes = self.changes, kept
        settled -= kept
        self._first = {path: self._first[path] for path in busy}
        self._tied = {path: group for path, group in self._tied.items() if path in busy}
        self.first = min(self._first.values())
        return settled


async def _watch(root: Path, settings: WatchSettings, stop_event: anyio.Event,
                 watch: FolderWatch) -> AsyncIterator[ChangeSet]:
    from watchfiles import awatch

    quiet = max(1, settings.debounce_ms)
    identity = folder_identity(root)
    # A name that is not UTF-8 stops watchfiles' event watcher at once, however often it starts;
    # its polling watcher stops only when something changes under that name. Polling from the
    # start if WATCHFILES_FORCE_POLLING asks for it (``_polling_asked``).
    polling = _polling_asked()
    failed_at_once = 0   # restarts in a row that failed again at once
    while not stop_event.is_set():
        replaced, reopened = False, None
        # The folders it cannot read, which watchfiles skips (ignore_permission_denied) and never
        # follows later, when they are readable again: files written in one after a `chmod 755`
        # were not synced until the next start. Listed before the watcher starts and again at its
        # first batch (within a second; a walk of 9,000 files in 1,000 folders: 18 ms of CPU warm;
        # a .git and a node_modules beside it, walked too, add 22 ms), a folder
        # unreadable at either noted: one unreadable as the watcher started and readable
        # by a walk at the first batch alone was never followed. In a worker thread, both.
        # Left: one `chmod 000` after the first walk looked at it, as watchfiles set up, and back
        # before the second walk is found by neither, and its `chmod 755` looks as a followed
        # folder's does (which restarts nothing); only the kernel knows which folders are
        # watched (/proc/self/fdinfo of watchfiles' inotify descriptor, Linux, not polling).
        # Every folder, hidden and excluded ones too: one watchfiles (notify) cannot read stops its
        # walk as it adds its watches, so the folders it would have met after it went unwatched
        # (measured, watchfiles 1.3: with .git/locked chmod 000, files written in sub/ and build/
        # gave no event until `chmod 755 .git/locked` restarted it). They are given to it beside
        # the root (``extra_watch_paths``), and that folder's `chmod 755` still restarts it.
        before = await anyio.to_thread.run_sync(unreadable_folders, root, abandon_on_cancel=True)
        # (the polling watcher raises at such a folder anyway, and would poll each extra path twice)
        extra = [] if polling or not before else await anyio.to_thread.run_sync(
            extra_watch_paths, root, before, _folders_in, abandon_on_cancel=True)
        unreadable: set[str] | None = None
        started = time.monotonic()
        # (a debounce_ms no longer than the step: watchfiles' own batches are the bursts)
        step = _STEP_MS if quiet > _STEP_MS else _FINE_STEP_MS
        held = quiet > step
        burst = watch.burst = _Burst(quiet / 1000 if held else 0.0)
        try:
            # yield_on_timeout: an empty set each second (or debounce_ms, if shorter) without events,
            # to check that the folder is still the one watched (after `rm -rf DIR && mkdir DIR` the
            # watch is on a dead inode), and whether a burst has ended (``_Burst``). Its step is
            # short, so that a stop is seen at once (``_STEP_MS``).
            changes_of = awatch(root, *extra, watch_filter=None, step=min(quiet, step), debounce=10 * quiet,
                                stop_event=stop_event, rust_timeout=min(quiet, _LOOK_MS) if held else _LOOK_MS,
                                yield_on_timeout=True,
                                force_polling=polling, poll_delay_ms=_POLL_MS,
                                # A folder it may not read (chmod 000) made it raise, at the start
                                # or when one appeared; the sync says what it cannot read.
                                ignore_permission_denied=True)
            # (awatch adds its watches in its first step, before it awaits: a task this wakes runs
            # once they are added)
            watch.started.set()
            try:
                async for changes in changes_of:
                    # The folder's own deletion, or another folder now (moved away, made again).
                    gone = any(int(kind) == DELETED and path == str(root) for kind, path in changes)
                    now = folder_identity(root)
                    waited = 0.0
                    while now is None and waited < _GONE_WAIT_S and not stop_event.is_set():
                        await anyio.sleep(0.1)   # `rm -rf DIR && mkdir DIR`: it may come back
                        waited += 0.1
                        now = folder_identity(root)
                    if now is None:
                        yield {(DELETED, str(root))}
                        now = await _wait_for_folder(root, stop_event)
                        if now is None:
                            return
                        identity, replaced = now, True
                        break
                    if gone or now != identity:
                        # The burst held goes with the REPLACED, as with a REOPENED (below), held
                        # till then: a stop before the sync it makes counted none of its files.
                        # (not this batch: the old folder's deletion, which the sync's look finds)
                        watch.filtering, watch.burst = set(burst.changes), None
                        identity, replaced = now, True
                        break
                    watch.filtering = changes   # (held while it is looked at: a stop may come)
                    if unreadable is None:
                        unreadable = before | await anyio.to_thread.run_sync(unreadable_folders, root,
                                                                             abandon_on_cancel=True)
                    if changes and (reopened := await anyio.to_thread.run_sync(
                            _readable_again, changes, unreadable, root, abandon_on_cancel=True)):
                        # Restarted to follow it; the daemon syncs the folder whole, as events of the
                        # restart's moment are not seen. This batch and the burst held go with the
                        # REOPENED, held till then: the sync takes them up, but a stop before it
                        # counted none of their files ("the whole folder not synced yet" alone).
                        # (not the folder's own chmod: it names no file; a folder moved in does)
                        watch.filtering = {(kind, path) for kind, path in changes | burst.changes
                                           if path != reopened or int(kind) == ADDED}
                        watch.burst = None
                        replaced = True
                        break
                    if changes and watch.keep is not None:   # (the folder's own events are above)
                        # In a worker thread: it looks at each path (100,000 files copied in: 5 s).
                        changes = await anyio.to_thread.run_sync(watch.keep, changes, abandon_on_cancel=True)
                    watch.filtering = set()
                    renames = None   # (no renamed_from: each deletion with each added path)
                    if watch.renamed_from is not None and {ADDED, DELETED} <= {int(kind) for kind, _ in changes}:
                        # In a worker thread: it reads the files added, and the index.
                        watch.filtering = changes
                        renames = await anyio.to_thread.run_sync(watch.renames, changes, abandon_on_cancel=True)
                        watch.filtering = set()
                    if (ended := burst.add(changes, time.monotonic(), renames)) is not None:
                        yield ended
            finally:
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await changes_of.aclose()
            if not replaced:
                return
        except (RuntimeError, BaseExceptionGroup) as caught:
            # watchfiles' own errors derive from RuntimeError; anyio may wrap them in a group.
            e: BaseException = caught
            while isinstance(e, BaseExceptionGroup):
                if e.subgroup(RuntimeError) is None:
                    raise
                e = e.subgroup(RuntimeError).exceptions[0]
            if not root.is_dir():
                yield {(DELETED, str(root))}
                now = await _wait_for_folder(root, stop_event)
                if now is None:
                    return
                identity = now
                yield {(REPLACED, str(root))}
                continue
            polling = polling or UNDECODABLE.search(str(e)) is not None
            failed_at_once = failed_at_once + 1 if time.monotonic() - started < _FAILED_AT_ONCE_S else 0
            # The burst held goes with the RESCAN, as with a REOPENED: the restart's new burst
            # dropped it, and a stop before the sync it makes counted none of its files.
            held, watch.burst, watch.filtering = watch.held, None, set()
            yield {(RESCAN, f"{type(e).__name__}: {as_shown(str(e), root)}")} | held
            with anyio.move_on_after(min(_RESTART_MAX_S, _RESTART_S * 2.0 ** max(0, failed_at_once - 1))):
                await stop_event.wait()
            continue
        # the loop watches the new folder, or the one readable again too
        yield {(REOPENED, reopened) if reopened else (REPLACED, str(root))} | watch.filtering
        watch.filtering = set()


# What Rust's Debug form of a path escapes: a byte not UTF-8 (\xE9), a character (\u{1b}) and
# the usual few (\n, \", \\ ...).
_RUST_ESCAPE = re.compile(r"\\(?:x([0-9A-Fa-f]{2})|u\{([0-9A-Fa-f]{1,6})\}|(.))", re.DOTALL)
_RUST_CHARS = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def as_shown(error: str, root: Path) -> str:
    """watchfiles' error with the name it could not decode (``UNDECODABLE``) written as the scan's
    line names it (``terminal.shown``, from ``root``): its Rust spelling, ``caf\\xE9.txt`` by its
    whole path, stood beside the scan's ``caf\\xe9.txt`` a line later."""
    def name(m: re.Match) -> str:
        path = Path(os.fsdecode(b"".join(_pieces(m.group(1)))))
        with contextlib.suppress(ValueError):
            path = path.relative_to(root)
        return f'Unable to decode path "{shown(path)}"'
    return UNDECODABLE.sub(name, error)


def _pieces(debug: str) -> list[bytes]:
    """The bytes of a path written in Rust's Debug form (its escapes read back)."""
    out, at = [], 0
    for m in _RUST_ESCAPE.finditer(debug):
        out.append(debug[at:m.start()].encode("utf-8", "surrogateescape"))
        byte, char, other = m.groups()
        out.append(bytes([int(byte, 16)]) if byte else chr(int(char, 16)).encode("utf-8", "surrogatepass")
                   if char else _RUST_CHARS.get(other, other).encode("utf-8", "surrogateescape"))
        at = m.end()
    out.append(debug[at:].encode("utf-8", "surrogateescape"))
    return out


def _polling_asked() -> bool:
    """Whether WATCHFILES_FORCE_POLLING asks for watchfiles' polling watcher: set, and not false,
    disable or disabled (watchfiles' own reading of it). It is how a user says events do not
    reach this machine (a network mount, a container's bind mount); ``force_polling=False``,
    given, overrode it, and no file written there was ever synced. (Not watchfiles' default
    otherwise, ``None``: that polls every folder on WSL, and its polling watcher raises at a
    folder it cannot read, ignore_permission_denied or not, so it restarts over and over.)"""
    asked = os.environ.get("WATCHFILES_FORCE_POLLING")
    return bool(asked) and asked.lower() not in {"false", "disable", "disabled"}


def _readable(path: str | Path) -> bool:
    """Whether the watcher may list ``path`` and follow it (read and search)."""
    return os.access(path, os.R_OK | os.X_OK)


def unreadable_folders(root: Path, top: Path | None = None) -> set[str]:
    """The folders under ``top`` (``root`` by default) it may not list now (links not followed),
    hidden and excluded ones too: watchfiles' walk stops at any (``extra_watch_paths``)."""
    found: set[str] = set()
    # Folders alone, listed with ``scandir``: os.walk, which lists the files too, took 40% more
    # CPU (9,000 files in 1,000 folders: 19 ms against 14 ms; 90,000 in 10,000: 197 against 140).
    folders = [os.fspath(top or root)]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(entry.path)
                    except OSError:   # (gone since it was listed)
                        continue
        except PermissionError:
            found.add(folder)
        except OSError:   # (gone, or no folder now)
            continue
    return found


def extra_watch_paths(root: Path, unreadable: set[str], folders_in: Callable[[str], list[str]]) -> list[str]:
    """The folders to give watchfiles beside ``root`` so that it watches every folder it may read
    though some it may not (``unreadable``): its event watcher (notify, watchfiles 1.3) stops
    adding watches at the first folder it cannot read as it walks a path, so the folders it
    would have met after it went unwatched (``.git/locked`` chmod 000: no event from ``sub/``,
    ``build/``), while a path given beside ``root`` is walked on its own (measured). They are
    the readable folders each unreadable one lies in, below ``root`` (each watched by its own
    walk first), and the readable folders in those and in ``root`` that hold no unreadable one
    (each walked whole): not every folder. ``folders_in`` lists the folders in a folder."""
    if not unreadable:
        return []   # (the root's walk meets them all)
    top = os.fspath(root)
    holding: set[str] = set()   # below top, with an unreadable folder somewhere under it
    for folder in unreadable:
        path = os.path.dirname(folder)
        while path not in holding and path.startswith(top + os.sep):
            holding.add(path)
            path = os.path.dirname(path)
    whole = {child for folder in holding | {top} for child in folders_in(folder)
             if child not in holding and child not in unreadable}
    return sorted(holding | whole)


def _folders_in(folder: str) -> list[str]:
    """The folders in ``folder``, none if it cannot be listed now. Not a link to one: a path given
    is walked from where it leads, out of the folder or back into it (a loop), and watchfiles
    names a folder by the last path it met it by; where it leads is left to its own walk."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):   # (gone since it was listed)
                    if entry.is_dir(follow_symlinks=False):
                        found.append(entry.path)
    except OSError:
        pass
    return found


def _readable_again(changes: ChangeSet, unreadable: set[str], root: Path) -> str | None:
    """A folder of ``unreadable`` that ``changes`` names (its `chmod`) and that is readable now,
    or one it adds that holds unreadable ones, if any (the watcher restarts for it); the folders
    ``changes`` adds that are unreadable now join ``unreadable`` (made, or moved in, so: the
    watch on it was refused). A folder followed and then made unreadable (a
    `chmod 000`, said modified) is still followed: the kernel checks the permission only as a
    watch is added, and a restart at its `chmod 755` synced the whole folder for nothing. Looks
    at each path: a worker thread's.

    A folder added that is readable is looked through for those it holds (``mv ~/m DIR/`` with
    m/s unreadable: the watch follows m and skips m/s), unless its parent was added with it
    (`cp -r`: looked through once, from the top). If it holds any, it is the one returned:
    watchfiles' walk of it stopped at the first, and the folders after it in m went unwatched
    (measured, m/u after m/s: a file written in m/u was never synced); the restart gives them
    to it as paths of their own (``extra_watch_paths``)."""
    _forget_deleted(changes, unreadable)   # (first: a folder deleted and made again, in one batch)
    added = {path for kind, path in changes if int(kind) == ADDED}
    for kind, path in changes:
        if path in unreadable:
            if _readable(path):
                return path
        elif int(kind) == ADDED and os.path.isdir(path) and not os.path.islink(path):
            if not _readable(path):
                unreadable.add(path)
            elif os.path.dirname(path) not in added and (inside := unreadable_folders(root, Path(path))):
                unreadable |= inside
                return path
    return None


def _forget_deleted(changes: ChangeSet, unreadable: set[str]) -> None:
    """Drops from ``unreadable`` the folders ``changes`` deletes (removed, moved away), and those
    under them: a folder made again under the name is a new one, followed as it is made (or
    noted, if unreadable then), and the old one's note made its `mkdir` a restart and a sync of
    the whole folder for nothing. Looks up each noted folder's parents, not each deleted path
    (an `rm -rf` of 100,000 files)."""
    deleted = {path for kind, path in changes if int(kind) == DELETED}
    if not deleted:
        return
    for folder in list(unreadable):
        path = folder
        while path not in deleted and (parent := os.path.dirname(path)) != path:
            path = parent
        if path in deleted:
            unreadable.discard(folder)


async def _wait_for_folder(root: Path, stop_event: anyio.Event) -> tuple[int, int] | None:
    """Waits until ``root`` is a folder again: its identity, or ``None`` once ``stop_event`` is set."""
    while not stop_event.is_set():
        if root.is_dir() and (now := folder_identity(root)) is not None:
            return now
        with anyio.move_on_after(_GONE_POLL_S):
            await stop_event.wait()
    return None
