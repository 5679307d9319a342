"""The folder ``streamrag watch`` follows, as the daemon reads its events.

Which paths can change the index (as the folder scan decides it: hidden entries, the
database, ``index.include``, and where an indexed symbolic link leads), the files a folder
made or moved in holds, and whether a file is as indexed (a ``touch``) or is one deleted
under another name (a rename). All of it only reads the file system and the index: the
listing and content checks run in worker threads. What to queue is the daemon's.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from streamrag import index_rows
from streamrag.config import CONFIG_NAME, Settings
from streamrag.errors import StreamragError
from streamrag.loader import (DOCUMENT_SUFFIXES, conflict_copy, exclude_patterns, excluded, file_of, include_patterns,
                              leads_outside, leftover, written_by_export,
                              leads_outside_line, name_or_path_matches, read_documents, storable, taken_name,
                              TooBig, why_unusable)
from streamrag.terminal import shown
from streamrag.on_disk import file_stamp, same_on_disk, stored_files
from streamrag.status import failure_runs, last_update
from streamrag.store import Store, index_files
from streamrag.watch_events import ADDED, DELETED


class _Stopped(Exception):
    """Raised in a file's read by its check once the daemon stops (``WatchedFolder._documents_in``):
    the read ends there, the file taken as one not read."""


def _going_on() -> bool:
    """``stopped`` when none is given: nothing stops a look."""
    return False


@contextlib.contextmanager
def reading(db_path: Path) -> Iterator[Store | None]:
    """The index at ``db_path``, read-only, closed after the block; None while there is none to read."""
    try:
        store = Store(db_path, readonly=True)
    except StreamragError:
        yield None
        return
    try:
        yield store
    finally:
        store.close()


class WatchedFolder:
    """The folder ``root`` indexed into ``db_path`` with ``settings``, as its events are read."""

    def __init__(self, settings: Settings, db_path: Path, root: Path) -> None:
        self.settings = settings
        self.db_path = db_path
        self.root = root
        self._include = include_patterns(settings.index.include)
        self._exclude = exclude_patterns(settings.index.exclude)
        self._db_files = index_files(db_path)
        self._link_targets: dict[Path, str] = {}   # where indexed symbolic links lead (``note_links``)

    def relevant(self, change: int, path: str | Path, *,
                 indexed_under: Callable[[str], bool] | None = None, copies: set[str] | None = None) -> str | None:
        """The path relative to the root if this event can change the index, else ``None``.

        Hidden entries (the ``.streamrag`` folder among them), the database and files that
        ``index.include`` does not match are ignored, as the folder scan ignores them. A
        deleted path matching no pattern counts when indexed files lay under it (a folder), or
        files the last update could not use (``failed_now``: their failures go with them):
        ``indexed_under`` asks the index that (``batch`` gives one that opens it once for a
        batch of events; by default it is opened for the question). Such an entry counts all
        the same where an indexed link leads, or a broken link would (``note_links``): as the
        link's path.

        A sync tool's conflict copy (``conflict_copy``), which the scan names but does not take,
        made or written, is added to ``copies`` when given (it may be a folder of that name).
        """
        under = indexed_under or self._indexed_under
        p = Path(path)
        p = p if p.is_absolute() else self.root / p
        rel = self._relevant(change, p, under, copies)
        if rel is None and self._link_targets:
            for at in (p, *p.parents):
                if (link := self._link_targets.get(at)) is not None:   # (a file link: indexed itself)
                    return link if at == p else self._relevant(change, self.root / link / p.relative_to(at), under,
                                                               copies)
                if at == self.root:
                    break
        return rel

    @contextlib.contextmanager
    def batch(self, queued: Callable[[str], set[str]] = lambda _rel: set(), copies: set[str] | None = None
              ) -> Iterator[Callable[[int, str | Path], str | None]]:
        """``relevant`` for one batch of events: the index, which a deleted path matching no
        include pattern is looked up in, is opened at most once for the batch and closed
        after the block (a delete burst of 10,000 such paths opened it 10,000 times). Such a
        path counts too when ``queued`` (the daemon's queue) names files under it: a folder
        copied in, its files queued, then moved away before their sync (`cp -r`, `mv`) was
        left out, and its files stayed queued as added though gone.

        A path through a link to a folder the scan walks (``ln -s notes same``) is taken where
        it lies: watchfiles watches notes once, under the last path it met it by, and named a
        file deleted there "same/a.txt", which the index does not hold, so nothing was queued.
        Its folder is resolved once a batch (not a file in the root, whose folder is real).
        The conflict copies among its paths are added to ``copies`` (``relevant``)."""
        root = os.fspath(self.root)
        lies: dict[str, str | None] = {}   # an event's folder -> where it lies, if through such a link

        def where_it_lies(path: str | Path) -> str | Path:
            folder, name = os.path.split(os.path.join(root, path))
            if folder == root:
                return path
            if folder not in lies:
                lies[folder] = self._walked_at(folder)
            real = lies[folder]
            return path if real is None else os.path.join(real, name)

        with contextlib.ExitStack() as stack:
            opened: list[Store | None] = []
            failed: list[set[str]] = []

            def indexed_under(rel: str) -> bool:
                if queued(rel):   # (no index to open for it)
                    return True
                if not opened:
                    opened.append(stack.enter_context(reading(self.db_path)))
                    failed.append(self.failed_now(opened[0]))
                return opened[0] is not None and (index_rows.holds_under(opened[0], rel)
                                                  or bool(under(failed[0], rel)))

            yield lambda change, path: self.relevant(change, where_it_lies(path), indexed_under=indexed_under,
                                                     copies=copies)

    def worth_holding(self, changes: set[tuple[int, str]], follows: Callable[[str], bool]) -> set[tuple[int, str]]:
        """Those of the watcher's raw ``changes`` that may change the index, before it gathers them
        into bursts (``watch_events.watch_folder``'s ``keep``): all but the writes the scan leaves
        out, whatever the index holds (a hidden or excluded file, the index's own, a name
        index.include does not take), as ``relevant`` decides them, where links lead too. A
        deletion where the scan never looks (hidden, excluded, the index's own) goes too (an
        atomic save of a hidden file deletes its temporary name at each save, and held the burst
        open as its writes did); any other is kept, as if indexed files lay under it (whether they do is the index's to say, read by the daemon), and so
        are a conflict copy (named when it appears) and what ``follows`` (the settings files and
        prompts the daemon follows). No index is read: it runs in the watcher's worker thread,
        beside the loop's own reads of it, for each raw batch. It keeps all ``_classify`` would."""
        kept = set()
        copies: set[str] = set()
        # (``queued`` naming every path: a deleted one counts as holding indexed files, unasked)
        with self.batch(lambda rel: {rel}, copies=copies) as relevant:
            for change, path in changes:
                named = len(copies)
                if follows(path) or relevant(change, path) is not None or len(copies) > named:
                    kept.add((change, path))
        return kept

    def _relevant(self, change: int, p: Path, indexed_under: Callable[[str], bool],
                  copies: set[str] | None = None) -> str | None:
        try:
            rel = p.relative_to(self.root)
        except ValueError:
            try:
                rel = p.resolve().relative_to(self.root)
            except ValueError:
                return None
        if not rel.parts or any(part.startswith(".") for part in rel.parts) or p in self._db_files:
            return None
        rel_s = rel.as_posix()
        if not storable(rel_s) or excluded(rel_s, self._exclude):   # the scan leaves it out
            return None
        if taken_name(p.name, rel_s, self._include):
            return rel_s
        if (copies is not None and change != DELETED and conflict_copy(p.name)
                and name_or_path_matches(p.name, rel_s, self._include)):
            copies.add(rel_s)
        with contextlib.suppress(OSError):   # (under a folder it may not read)
            if p.is_dir():
                return rel_s
        if change == DELETED and indexed_under(rel_s):
            return rel_s
        return None

    def note_links(self, broken: Iterable[str] = ()) -> None:
        """Where the indexed symbolic links (to files, or to folders indexed files lie in) lead:
        an edit there changes what the link holds, though the target itself may be an event
        ``relevant`` ignores (hidden, or left out by index.include). After each sync: an lstat
        per indexed file and folder (10,000 files in 100 folders: 50-80 ms, measured). And where
        the links the sync found ``broken`` would lead (``note_broken``)."""
        with reading(self.db_path) as store:
            stored = index_rows.file_paths(store) if store else []
        files: set[str] = set()
        folders: set[str] = set()
        for rel in stored:
            if "#" in rel:   # a row's "file#n", or a name that holds "#"
                candidates = stored_files(rel, self.root)
                found = next((f for f in candidates if os.path.lexists(f)), candidates[0])
                rel = found.relative_to(self.root).as_posix() if self.root in found.parents else ""
            if not rel or os.path.isabs(rel):   # (another folder's file)
                continue
            files.add(rel)
            while "/" in rel:
                rel = rel.rsplit("/", 1)[0]
                if rel in folders:
                    break
                folders.add(rel)
        root = str(self.root)
        targets: dict[Path, str] = {}
        for rel in sorted(files | folders):
            full = os.path.join(root, rel)
            if os.path.islink(full):
                with contextlib.suppress(OSError, RuntimeError):   # (a loop, on older Pythons)
                    targets[Path(os.path.realpath(full))] = rel
        self._link_targets = targets
        for rel in broken:
            self.note_broken(rel)

    def note_broken(self, rel: str) -> None:
        """Notes where the broken link ``rel`` leads, so that the event of its target appearing
        syncs the link: a target that index.include leaves out (``notes.txt -> notes.bin``), or
        that is hidden, is an event ``relevant`` ignores, and the link stayed out of the index
        until some other file changed. (A loop leads nowhere to wait for.)"""
        full = os.path.join(self.root, rel)
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            target = os.path.realpath(full)
            if target != full and not leads_outside(target, self.root):   # (the watch sees no other)
                self._link_targets = {**self._link_targets, Path(target): rel}   # (replaced whole)

    def _indexed_under(self, rel: str) -> bool:
        with reading(self.db_path) as store:
            if store is None:
                return False
            return index_rows.holds_under(store, rel) or bool(under(self.failed_now(store), rel))

    @staticmethod
    def failed_now(store: Store | None) -> set[str]:
        """The files and folders the last update could not use (a binary x.txt), as the health
        line and `status` count its failures (``status.failure_runs``): one deleted is an event
        to sync, or its failure was said until some other change's sync."""
        if store is None:
            return set()
        return index_rows.load_failed(store, *failure_runs(store, last_update(store)))

    @staticmethod
    def is_indexed(store: Store | None, rel: str) -> bool:
        """Whether the index holds the file ``rel`` (or rows of it: ``data.jsonl#3``)."""
        return store is not None and index_rows.holds_file(store, rel)

    def held(self, rels: Iterable[str]) -> set[str]:
        """Those of the files ``rels`` that the index holds, or that the last update could not
        use (their failures go with them): the deletion of one changes the index, of another
        (made and deleted between two syncs) nothing. Opens the index: for a worker thread."""
        with reading(self.db_path) as store:
            if store is None:
                return set()
            failed = self.failed_now(store)
            return {rel for rel in rels if self.is_indexed(store, rel) or under(failed, rel)}

    @staticmethod
    def indexed_in(store: Store | None, rel: str) -> set[str]:
        """The indexed files under the folder ``rel``."""
        return set() if store is None else {file_of(p) for p in index_rows.paths_under(store, rel)}

    def included(self, rel: str) -> bool:
        """Whether index.include takes the file ``rel`` (its path from the root), as the scan
        does: a deleted path that held indexed files is an event ``relevant`` keeps, whatever
        its name, and it may be a file now (`mv d away && touch d`). This is ``relevant``'s
        include step alone, not all of it: ``rel`` is a path ``relevant`` kept, so it passed
        the others already (hidden, the database, index.exclude)."""
        return taken_name(rel.rsplit("/", 1)[-1], rel, self._include)

    def takes(self, path: Path) -> bool:
        """Whether the scan would read ``path``: a regular file (reading a FIFO would block), not
        out of the folder through a link, its own or a folder's on its way (its text must not
        reach the store or the model)."""
        return path.is_file() and not leads_outside(path, self.root)

    def not_taken(self, rel: str) -> str | None:
        """The scan's warning for ``rel``, which is there but which the scan will not read: a
        symlink out of the folder (to a folder, or to a file index.include takes), or a pipe,
        socket or device it takes; ``None`` for what the scan passes over without a word. The
        sync that meets it says the same line, so the daemon says it once, when it appears, as
        it says a broken link (a link to ~/.ssh was said only by a later sync for another file)."""
        path = self.root / rel
        with contextlib.suppress(OSError, RuntimeError):   # (gone again, or a loop: the sync says it)
            is_dir = path.is_dir()
            if is_dir or self.included(rel):
                if path.is_symlink() and leads_outside(path, self.root):
                    return leads_outside_line(path, self.root, self.root, folder=is_dir)
                if not is_dir and not path.is_file():
                    return f"{shown(rel)}: {why_unusable(path)}"
        return None

    def left_out_kind(self, path: str | Path, *, look: bool = True) -> str | None:
        """The kind (suffix) of the file ``path`` when the scan counts it as left out and `index`
        says what to do about it (convert a PDF, widen index.include: ``loader.left_out_lines``),
        else ``None``: a file it takes, one hidden or excluded, a tool's temporary or backup file,
        the index's own files, a settings file, an export, or a kind that needs nothing done (an
        image, code). As ``loader``'s walk counts them. Without ``look``, by its path alone (the
        watcher's filter: no look at the file)."""
        p = Path(path)
        p = p if p.is_absolute() else self.root / p
        try:
            rel = p.relative_to(self.root).as_posix()
        except ValueError:
            return None
        name = p.name
        kind = os.path.splitext(name)[1].lower()
        if (kind not in DOCUMENT_SUFFIXES or rel.startswith(".") or "/." in rel or not storable(rel)
                or excluded(rel, self._exclude) or name_or_path_matches(name, rel, self._include)
                or name == CONFIG_NAME or leftover(name) or p in self._db_files):
            return None
        if not look:
            return kind
        with contextlib.suppress(OSError, RuntimeError):
            if p.is_file() and not leads_outside(p, self.root) and not written_by_export(p):
                return kind
        return None

    def files_in(self, folder: Path, left_out: set[str] | None = None) -> list[str] | None:
        """The regular files under ``folder`` that the scan would index, relative to the root;
        ``None`` if it cannot be entered. Runs in a worker thread: it only reads the file system
        and what the daemon never changes in place (its settings; the link map is replaced whole).
        Given ``left_out``, adds to it the files it holds that the scan leaves out and says
        (``left_out_kind``), by their paths from the root: a folder of PDFs moved in is one event,
        the folder's (made here, not on the event loop: 100,000 took 0.4 s, measured).

        A file is looked at once (an ``lstat``): its path from the root is its folder's and its
        name, and a regular file lies where its folder does (``os.walk`` follows no link), so
        only a link's target is resolved. (Each file's path parsed anew, its folders resolved
        twice over: 50,000 files took 5.5 s, measured.) What that does not settle (a name no
        pattern takes, a hidden folder, a folder out of the root) is ``relevant``'s and
        ``takes``'."""
        if (real := self._walked_at(folder)) is not None:
            if os.path.islink(folder):   # (a link made to it adds no file)
                return []
            # A folder made under one: watchfiles may name it by the link's path (it watches a
            # folder once, under the last path it met it by), and its files lie where it does.
            folder = Path(real)
        out = []
        db_files = {os.fspath(f) for f in self._db_files}
        inside = not leads_outside(folder, self.root)   # (and so is every folder under it)
        try:
            for top, dirs, files in os.walk(folder):
                dirs[:] = [d for d in dirs if not d.startswith(".") and storable(d)]
                prefix = self._prefix(top) if inside else None
                for name in files:
                    full = os.path.join(top, name)
                    rel = None if prefix is None else prefix + name
                    if (rel is None or name.startswith(".") or full in db_files or not storable(rel)
                            or excluded(rel, self._exclude) or not taken_name(name, rel, self._include)):
                        rel = self.relevant(ADDED, full)   # (an added path: no index read)
                        if rel is not None and self.takes(Path(full)):
                            out.append(rel)
                        elif left_out is not None and self.left_out_kind(full, look=False):
                            left_out.add(os.path.relpath(full, self.root))
                    elif self._regular(full) or self.takes(Path(full)):   # (a link: where it leads)
                        out.append(rel)
        except OSError:
            return None
        return out

    def _walked_at(self, folder: str | Path) -> str | None:
        """Where ``folder`` lies if it is reached through a symbolic link (``ln -s .. sub/loop``,
        ``ln -s notes same``) to a folder the scan walks under its own path, else ``None``: the
        scan walks real folders first and follows a link only to a folder not walked yet, so
        the files there are found once, where they lie, and the link adds none. A link to a
        hidden or excluded folder is the only way in, and its files are taken under it."""
        real = os.path.realpath(folder)
        if real == os.path.abspath(folder):
            return None
        try:
            rel = Path(real).relative_to(self.root)
        except ValueError:
            return None   # (out of the folder: ``leads_outside``'s)
        if any(part.startswith(".") for part in rel.parts) or (
                rel.parts and excluded(rel.as_posix(), self._exclude)):
            return None
        return real

    @staticmethod
    def _regular(path: str) -> bool:
        """Whether ``path`` is a regular file itself (no link); not when it is gone since it
        was listed (it raises what keeps it from being looked at, as ``takes`` does)."""
        try:
            return stat.S_ISREG(os.lstat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def _prefix(self, top: str) -> str | None:
        """The path from the root, with a closing "/", of the folder ``top`` that ``files_in``
        walks, when the files in it are judged by it and their names: a folder in the root
        (by its path), not hidden."""
        try:
            rel = Path(top).relative_to(self.root)
        except ValueError:
            return None
        if not rel.parts or any(part.startswith(".") for part in rel.parts):
            return None
        return rel.as_posix() + "/"

    def as_indexed(self, files: dict[str, dict[str, tuple[str, int, float]]],
                   stopped: Callable[[], bool] = _going_on) -> set[str]:
        """Those of ``files`` (relative to the root -> their indexed rows) whose content is as
        indexed: a ``touch``, a ``chmod``, a backup or ``git checkout`` writing the same bytes.
        Unchanged by size and change stamp as the sync's scan sees it (``same_on_disk``), else
        the same documents (content hashes) read. Runs in a worker thread: it only reads. Once
        ``stopped()``, it ends within moments, even amid a big file's read, with those found so
        far (the process's exit waited for the thread: a 20 MB file touched, 4 s)."""
        same = set()
        for rel, rows in files.items():
            if stopped():
                break
            path = self.root / rel
            try:
                st = path.stat()
            except OSError:   # what it cannot read now is the sync's to say
                continue
            if same_on_disk(rows, st) or (self._documents_in(path, st, stopped)
                                          == {p: row[0] for p, row in rows.items()}):
                same.add(rel)
        return same

    def renames(self, files: dict[str, str], stopped: Callable[[], bool] = _going_on,
                read_below: float = float("inf"), read_at_most: float = float("inf")) -> dict[str, str]:
        """Added file -> deleted file it was renamed from: same size and same documents (a
        .jsonl or .csv file's rows, each stored as ``file#n``, count as one file). A file that
        could not be used (binary, not text: no document to compare) by the stamp its failure
        recorded, size and change time, which a move of its folder keeps: it was said "1 added,
        1 deleted". The sync decides by content anyway; this only lets the queued line say
        "renamed". Once ``stopped()``, it ends within moments, as ``as_indexed``, with the
        renames found so far. A file of ``read_below`` bytes or more is not read (no rename), nor
        one past ``read_at_most`` bytes read in all."""
        deleted = [rel for rel, kind in files.items() if kind == "deleted"]
        added = [rel for rel, kind in files.items() if kind == "added"]
        if not deleted or not added:
            return {}
        failed: dict[str, list[str]] = {}   # the failure's stamp -> the deleted files it is of
        with reading(self.db_path) as store:
            if store is None:
                return {}
            was: dict[tuple[tuple[str, ...], int], list[str]] = {}
            unused = None
            for rel in sorted(deleted):
                record = index_rows.file_record(store, rel)
                if record is not None:
                    was.setdefault(tuple(record), []).append(rel)
                    continue
                # (one over index.max_file_mb too: its failure, read again each sync, records its stamp)
                unused = index_rows.failed_reads(store, (*index_rows.REMEMBERED_KINDS, TooBig.kind)) \
                    if unused is None else unused
                if rel in unused:
                    failed.setdefault(unused[rel][0], []).append(rel)
        sizes = {size for _doc, size in was}
        unread = read_at_most   # (bytes still to read)
        out: dict[str, str] = {}
        for rel in sorted(added):
            if stopped():
                break
            path = self.root / rel
            try:
                st = path.stat()
            except OSError:
                continue
            if failed.get(stamp := file_stamp(st)):
                out[rel] = failed[stamp].pop(0)
                continue
            if (size := st.st_size) not in sizes or size >= read_below or size > unread:
                continue
            unread -= size
            if (docs := self._documents_in(path, st, stopped)) is None:
                continue
            sources = was.get((tuple(sorted(docs.values())), size), [])
            if sources:
                out[rel] = sources.pop(0)
        return out

    def _documents_in(self, path: Path, st: os.stat_result,
                      stopped: Callable[[], bool] = _going_on) -> dict[str, str] | None:
        """The documents the scan would read in ``path`` now, as shown path -> content hash (a
        .jsonl or .csv file's rows each one, ``file#n``); ``None`` if it cannot be read (the
        sync says why; ``st``: its ``stat``, just taken), or once ``stopped()``: the read asks
        between its steps (``read_documents``' check), a big file's ends there. Only reads: for
        the worker threads of ``as_indexed`` and ``renames``."""
        def check() -> None:
            if stopped():
                raise _Stopped(path)

        try:
            docs, _warnings = read_documents(path, root=self.root, text_field=self.settings.index.text_field, st=st,
                                             max_mb=self.settings.index.max_file_mb, check=check)
        except (OSError, StreamragError, _Stopped):
            return None
        return {doc.path: doc.id for doc in docs}


def under(paths: Iterable[str], rel: str) -> set[str]:
    """Those of ``paths`` that are ``rel`` or lie under it."""
    inside = f"{rel}/"
    return {p for p in paths if p == rel or p.startswith(inside)}
