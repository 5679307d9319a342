"""Writing the published index for other tools: JSON, or GraphML for Gephi and yEd."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import itertools
import json
import os
import re
import stat
import sys
from collections import defaultdict
from pathlib import Path
from collections.abc import Iterable, Sequence
from typing import BinaryIO
from xml.sax import saxutils

import msgspec

from streamrag import index_rows
from streamrag.config import CONFIG_NAME
from streamrag.errors import StreamragError, UsageError
from streamrag.exported import ROW_KEYS, graphml_seal, json_seal, written_by_export
from streamrag.loader import include_patterns, matches
from streamrag.store import Store, alive, lock_path, reading_root


def _rows(store: Store, sql: str):
    """Rows as dicts, one at a time (a 200,000-relationship index is not held in memory)."""
    cursor = store.conn.execute(sql)
    names = [d[0] for d in cursor.description]
    for row in cursor:
        yield dict(zip(names, row))


def _sections(store: Store, *, entity_documents: bool = True) -> dict:
    """What an export holds, section by section; big sections are generators over the store
    (call inside a snapshot), so a writer that skips one never reads it. Without
    ``entity_documents`` (GraphML) entities and relationships do not list the documents that
    mention them."""
    members: dict[str, list[str]] = defaultdict(list)
    for community_id, entity_id in store.conn.execute(
            "SELECT community_id, entity_id FROM community_members ORDER BY entity_id"):
        members[community_id].append(entity_id)

    chunk_paths = _chunk_paths(store) if entity_documents else {}

    def with_documents(rows, sources: str, key: str):
        """``rows`` (in id order), each with the paths of the documents whose chunks ``sources``
        (its provenance table, ``key`` naming the row) say it from. The chunks are read in step
        with the rows, in the same order: a dict of every row's paths held them all at once
        (an index of 202,659 relationships exported in 138 MB max RSS, now 46). They are read
        in the order of the table's key and given their paths here (``chunk_paths``): joining
        each source row to its document and sorting the pairs (SQLite's temporary B-tree of
        304,174 relationship and 168,980 entity pairs, big10k) took its export from 3.0 to 3.7 s of CPU."""
        if not entity_documents:
            yield from rows
            return
        sourced = itertools.groupby(store.conn.execute(
            f"SELECT {key}, chunk_id FROM {sources} ORDER BY {key}"), key=lambda pair: pair[0])
        row_id, chunks = next(sourced, (None, ()))
        for r in rows:
            while row_id is not None and row_id < r["id"]:   # (the chunks of an id no row has)
                row_id, chunks = next(sourced, (None, ()))
            yield {**r, "documents": _paths_of(chunks, chunk_paths) if row_id == r["id"] else []}

    def entities():
        yield from with_documents(_rows(store, f"SELECT {_columns('entities', but=('documents',))} "
                                               "FROM entities ORDER BY id"), "entity_sources", "entity_id")

    def relationships():
        # Their provenance as the entities': a relationship's weight alone did not say which
        # documents it came from (relationship_sources held it, and no export did).
        yield from with_documents(_rows(store, f"SELECT {_columns('relationships', but=('documents',))} "
                                               "FROM relationships ORDER BY id"),
                                  "relationship_sources", "relationship_id")

    def reports():
        for r in _rows(store, f"SELECT c.id AS community, {_columns('reports', of='r.', but=('community',))} "
                              "FROM communities c JOIN reports r ON r.key = c.report_key ORDER BY c.level, c.id"):
            r["findings"] = json.loads(r["findings"])
            r["extractive"] = bool(r["extractive"])
            yield r

    return {
        "documents": _rows(store, f"SELECT {_columns('documents')} FROM documents ORDER BY path"),
        "entities": entities(),
        "relationships": relationships(),
        "claims": _rows(store, f"SELECT {_columns('claims')} FROM claims ORDER BY id"),
        "communities": [{**r, "members": members.get(r["id"], [])} for r in _rows(
            store, f"SELECT {_columns('communities', but=('members',))} FROM communities ORDER BY level, id")],
        "reports": reports(),
    }


def _columns(section: str, *, of: str = "", but: Sequence[str] = ()) -> str:
    """The columns (of the table ``of`` names, in a join) that read ``section``'s rows: its members
    as a JSON export's rows hold them, in their order (``exported.ROW_KEYS``, by which an export cut
    short is told: one list, so a member the export gains is one it is told by; `SELECT *` of the
    claims would have exported a column a migration added, and no cut export was told), but those
    ``but`` names, which ``_sections`` gives them in their place (a report's community first, a
    row's documents and a community's members last: ROW_KEYS has them there)."""
    return ", ".join(of + key.decode() for key in ROW_KEYS[section.encode()] if key.decode() not in but)


def _chunk_paths(store: Store) -> dict[str, list[str]]:
    """Chunk id -> the paths of the documents holding it (files of the same text share its
    chunks): a row for each chunk of a document (12,576 of 10,000 documents), not for each source."""
    out: dict[str, list[str]] = defaultdict(list)
    for chunk_id, path in store.conn.execute(
            "SELECT dc.chunk_id, d.path FROM document_chunks dc JOIN documents d ON d.id = dc.doc_id"):
        out[chunk_id].append(path)
    return out


def _paths_of(sources: Iterable[tuple[str, str]], chunk_paths: dict[str, list[str]]) -> list[str]:
    """The paths, each once and sorted, of the documents holding the chunks of ``sources``
    ((row id, chunk id) pairs); a chunk no document holds gives none, as the join gave."""
    return sorted({path for _, chunk_id in sources for path in chunk_paths.get(chunk_id, ())})


def check_out(out: Path | str, fmt: str) -> None:
    """Refuses an ``out`` that is a folder, or names one with a final slash (as typed: a Path
    drops the slash, and the folder's name would become a file's), before any work is done."""
    if Path(out).is_dir():
        raise StreamragError(f"{out}: is a folder; give the file to write, e.g. "
                             f"{Path(out) / ('graph.' + fmt)}")
    if str(out).endswith(("/", os.sep)):
        raise StreamragError(f"{out}: names a folder; give the file to write, e.g. "
                             f"{Path(out) / ('graph.' + fmt)}")


FORMATS = {".json": "json", ".graphml": "graphml"}


def named_format(out: Path | str) -> str | None:
    """The format ``out``'s extension names (``FORMATS``), or None: another extension, none, or
    ``-``."""
    return FORMATS.get(Path(out).suffix.lower()) if str(out) != "-" else None


def format_for(out: Path | str, fmt: str | None) -> str:
    """The format to write ``out`` in: ``fmt`` when given, else the one its extension names
    (``.graphml``: GraphML; anything else, and ``-``: JSON, which the command's line then says
    of a file: ``named_format``). A ``fmt`` that contradicts a ``.json`` or ``.graphml``
    extension is refused (a file named for one format holding the other is opened by the
    wrong tool)."""
    named = named_format(out)
    if fmt is None:
        return named or "json"
    if named and named != fmt:
        raise UsageError(f"{out}: a .{named} file cannot hold the --format {fmt} export; drop "
                         f"--format (the extension picks {named}), or name the file "
                         f"{Path(out).with_suffix('.' + fmt).name}")
    return fmt


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file: the same path once links and ``..`` are resolved,
    or (both existing) the same inode (a hard link)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except (OSError, RuntimeError):  # RuntimeError: a link loop (Python < 3.13)
        return False


def _stdout_is(path: Path) -> bool:
    """Whether standard output is the file ``path`` (`export - >> FILE`)."""
    try:
        return path.exists() and os.path.samestat(os.fstat(sys.stdout.fileno()), path.stat())
    except (OSError, ValueError, AttributeError):  # no real stdout (captured, closed)
        return False


def _stdout_file() -> Path | None:
    """The regular file standard output writes to, where the system names it (Linux's
    /proc/self/fd, as /dev/stdout leads there: `export - >> note.md`); else None (a pipe, a
    terminal, no such naming)."""
    try:
        fd = sys.stdout.fileno()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        return path if os.path.samestat(st, path.stat()) else None   # (not a deleted file's "(deleted)")
    except (OSError, ValueError, AttributeError):  # no /proc, no real stdout (captured, closed)
        return None


def names_stdout(out: Path | str) -> bool:
    """Whether ``out`` is ``-`` or a name of descriptor 1 itself (/dev/stdout, /dev/fd/1,
    /proc/self/fd/1, or a link to one), whatever file it is open on. With standard output closed
    at the start (``>&-``), descriptor 1 is /dev/null (``cli._open_closed_std_streams``): asked by
    the file it is open on (``writes_to_stdout``), `export /dev/null >&-` was refused as written
    to the closed stream, though it names a file of its own."""
    if str(out) == "-":
        return True
    hop = os.path.abspath(out)
    for _ in range(40):   # (as the system follows at most 40 links)
        # (the folders resolved: /dev/fd and /proc/self are links to /proc/<pid>/...)
        hop = os.path.join(os.path.realpath(os.path.dirname(hop)), os.path.basename(hop))
        if re.fullmatch(rf"/proc/{os.getpid()}(/task/\d+)?/fd/1", hop):
            return True
        if hop.startswith("/proc/") or not os.path.islink(hop):   # (another descriptor's link: its file)
            return False
        hop = os.path.join(os.path.dirname(hop), os.readlink(hop))
    return False


def writes_to_stdout(out: Path | str) -> bool:
    """Whether an export to ``out`` lands on standard output: ``-``, or a name of the file or
    pipe standard output is (`export /dev/stdout`, `export - > FILE` given FILE)."""
    return str(out) == "-" or _stdout_is(Path(out))


def check_not_input(store: Store, out: Path | str, fmt: str, settings_files: Iterable[Path] = (),
                    include: Sequence[str] = (), *, force: bool = False) -> None:
    """Refuses an ``out`` that is one of the export's own inputs, before anything is written:
    the index database (``store.path``) or its SQLite ``-wal``/``-shm``/``-journal`` files,
    ``settings_files`` (the settings in use, and the index folder's), or a document the index holds. Writing
    there would destroy the index, the settings or a document, and report success. Nor a file of
    the indexed folder that ``include`` (index.include) matches and no export wrote: a document
    not indexed yet (new, or one that could not be read). A new file there is written: the loader
    tells an export by its content, whatever its name and format (``exported``), and indexes none
    (`export x.txt` was refused, for a next run that no longer took it in). Nor, without ``force``,
    any other file that holds something and no export wrote (or one changed since): the user's."""
    fix = f"give another file name, e.g. graph.{fmt}"
    db = store.path
    stdout = str(out) == "-"
    out = Path(out)

    def hits(p: Path) -> bool:
        return _stdout_is(p) if stdout else _same(out, p)

    shown = "standard output" if stdout else str(out)
    if stdout:
        fix = f"send it elsewhere, or give a file name to write, e.g. graph.{fmt}"
    if hits(db):
        raise StreamragError(f"{shown}: is the index database the export reads; {fix}")
    for suffix in ("-wal", "-shm", "-journal"):
        if hits(db.with_name(db.name + suffix)):
            raise StreamragError(f"{shown}: is the index database's SQLite {suffix} file; {fix}")
    if hits(lock_path(db)):
        raise StreamragError(f"{shown}: is the lock file of the index's writer; {fix}")
    if any(hits(Path(f)) for f in settings_files):
        raise StreamragError(f"{shown}: is a settings file of this index; {fix}")
    # Where the file lands: a link to a file is written through (see ``export``), a linked folder
    # leads where it leads.
    landing = Path(os.path.realpath(out))
    if not stdout and CONFIG_NAME in (out.name, landing.name):   # not there yet: every command would read it next
        raise StreamragError(f"{shown}: is the name streamrag reads its settings from (here and in "
                             f"the folders below); {fix}")
    if stdout:
        # (its file's documents checks as `export /dev/stdout` has them: `export - >> note.md`
        # appended the export to a note, which the next index read as its text)
        found = _stdout_file()
        if found is None:
            return
        out, landing = found, found
    root = _index_root(store)
    held = _held_document(store, out, root)
    if held is not None:
        named = "" if held == out.as_posix() else f" (as {held})"
        raise StreamragError(f"{shown}: is a document the index holds{named}; {fix}")
    patterns = include_patterns(include) if include else []
    # Where the file lands (through a linked file or folder too), not where a link leading out of
    # the folder points (the scan does not follow it). A regular file: a named pipe is no document,
    # and opening one to read its first bytes waited for a writer that never came.
    taken = patterns and root is not None and root in landing.parents \
        and not any(part.startswith(".") for part in landing.relative_to(root).parts) \
        and matches(landing, root, patterns) and landing.is_file()
    # The file the export replaces; None: written into (standard output, /dev/stdout, a pipe),
    # which `export /dev/stdout >> log` appends to, after what log holds.
    replaced = None if stdout else _landing(out)
    if taken and replaced is None and _holds_something(landing) and written_by_export(landing):
        # (appended to, an export is none: its seal, or its end, no longer the file's last; the
        # next index read both as a document)
        raise StreamragError(f"{shown}: is an earlier export in the indexed folder {root}, which index.include "
                             f"takes: the export would be appended to it, and the next index would read "
                             f"both as a document; write it with `>`, not `>>`, or {fix}")
    if taken and not written_by_export(landing) \
            and (not stdout or _holds_something(landing)):   # (`export - > x.md`: the shell's new file, empty)
        raise StreamragError(f"{shown}: is a file of the indexed folder {root} that index.include takes, not "
                             f"an earlier export: a document the index does not hold yet, which the export "
                             f"would {'write into' if stdout else 'replace'}; {fix}")
    if not force and replaced is not None and _holds_something(replaced) and not written_by_export(replaced):
        raise StreamragError(f"{out}: is a file `streamrag export` did not write (or one changed since), which "
                             f"the export would replace; {fix}, or pass --force to replace it")


def _holds_something(path: Path) -> bool:
    """Whether ``path`` is a regular file that is not empty."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > 0


def _index_root(store: Store) -> Path | None:
    """The indexed folder, as `indexed_root` says, read from this open store: an index in its
    folder's .streamrag/ belongs to that folder; else the folder recorded (gone or not), or the
    copy of it the index was copied with (``reading_root``, whose settings export keeps from:
    `cp -r pj pj2; export --db pj2/index.db pj2/DOC` wrote over pj2's document), else none."""
    if store.path.parent.name == ".streamrag":
        return store.path.parent.parent.resolve()
    recorded = store.get_meta("root")
    return (reading_root(store.path) or Path(recorded)) if recorded else None


def _held_document(store: Store, out: Path, root: Path | None) -> str | None:
    """The ``files`` row naming ``out`` (itself, or one of its rows ``out#N``), if any."""
    from streamrag.loader import stored_path

    names = set()
    for p in (Path(os.path.abspath(out)), out.resolve()):  # the link itself, and where it points
        names.add(stored_path(p, root))
        names.add(p.as_posix())
    if root is None:
        names.add(out.as_posix())
    for name in names:
        if index_rows.holds_file(store, name):   # (a .jsonl/.csv file's rows: "file#3")
            return name
    return None


def export(store: Store, out: Path, fmt: str, *, settings_files: Iterable[Path] = (),
           include: Sequence[str] = (), force: bool = False) -> dict[str, int]:
    """Writes the index to ``out`` (``-``: standard output) as ``json`` or ``graphml``; returns
    what was written. Missing parent folders of ``out`` are created. An ``out`` that is one of
    the export's inputs (see ``check_not_input``; ``settings_files``: the index's settings), or
    a file of the user's (``force``: replaced all the same), is refused before anything is written.
    It ends with its seal (``exported``), which tells it from any other file.

    Written as it is read, in one read transaction. A file is written beside ``out`` (beside the
    file it leads to, for a link) and renamed over it at the end, so an export that fails leaves
    the previous file as it was, and a reader meets the old file or the new one, whole. But where
    that file has other hard links, or an owner the new one cannot be given (``_kept_in_place``,
    once given its owner and permissions: ``_take_owner_and_mode``), the written file is then
    copied into it in place, as `cp` writes: a reader may meet it
    part-written, and a stop (or a full disk) during the copy leaves it cut short under every
    name, the old export lost (told so: ``exported.UNFINISHED``; the next export replaces it).
    """
    check_out(out, fmt)
    check_not_input(store, out, fmt, settings_files, include, force=force)
    write = _write_json if fmt == "json" else _write_graphml
    if str(out) == "-":   # UTF-8, as JSON and this GraphML are, whatever the terminal's encoding
        sys.stdout.flush()
        stdout = _Sealing(sys.stdout.buffer)
        try:
            with store.snapshot():
                return write(store, stdout)
        finally:
            stdout.flush()
            sys.stdout.buffer.flush()
    # A link to a file: a file written beside the file it leads to and renamed over that, the link
    # kept (written into in place, a watch read the file empty, then again). /dev/stdout (a link to
    # the shell's file or pipe), a named pipe, a device: written into. A file whose folder refuses
    # a file beside it (read-only, or another's file in a sticky folder): written into in place, as
    # before 68fce74 (a reader may meet it empty, or cut short: told so, ``exported.UNFINISHED``).
    landing = _landing(out)
    renamed = landing is not None   # (else written into)
    target = out if landing is None else landing.with_name(f".{landing.name}.{os.getpid()}.tmp")
    if landing is not None:
        _remove_left_behind(landing)
    try:
        (landing or out).parent.mkdir(parents=True, exist_ok=True)
        # Bytes: "\n" on every system (Windows' text mode wrote "\r\n"), as the seal counted them.
        # Written into: appended, as `export - >> log` appends ("wb" through /proc/self/fd/1 emptied
        # the shell's file first: `export /dev/stdout >> log` lost the log, no --force asked).
        try:
            raw = open(target, "wb" if renamed else "ab")
        except PermissionError:
            if landing is None or not landing.is_file():
                raise
            raw, target, renamed = open(landing, "wb"), landing, False
        with raw, store.snapshot():
            if renamed:
                _hold(raw)
            f = _Sealing(raw)
            counts = write(store, f)
            f.flush()
        if renamed:
            try:
                st = os.stat(landing)
            except OSError:
                st = None   # (none there yet)
            if st is not None and _kept_in_place(landing, st, _take_owner_and_mode(st, target)):
                _write_into(target, landing)
            else:
                try:
                    os.replace(target, landing)
                except PermissionError:   # (a sticky folder: another's file, written into)
                    _write_into(target, landing)
    except BrokenPipeError:
        raise  # OUT is a pipe (/dev/stdout) whose reader left: the CLI exits quietly
    except OSError as e:
        # (a link's: where it leads, whose folder refused; not the link's own folder)
        at = f" to {landing}, where the link leads" if landing is not None and landing != out else ""
        raise StreamragError(f"{out}: cannot write the export{at} ({e.strerror or e}); give a file "
                             "in a folder you can write to") from None
    finally:
        if renamed and target.exists():
            target.unlink()
    return counts


def _write_into(written: Path, landing: Path) -> None:
    """Copies the file ``written`` into ``landing`` in place (a folder that lets no file be
    renamed over it), then removes ``written``."""
    with open(written, "rb") as src, open(landing, "wb") as dst:
        while block := src.read(1 << 20):
            dst.write(block)
    written.unlink()


def _landing(out: Path) -> Path | None:
    """The file an export to ``out`` replaces: ``out``, or the file a link (or a chain of them)
    leads to, there or not yet. ``None`` for one written into as it is: a pipe, a device, standard
    output by a name (/dev/stdout, or any link through /proc: /dev/fd/3, a descriptor's file,
    which a rename would leave as it was), a link that leads nowhere it can (a loop). A link
    into /dev that leads on to a file (/dev/shm/graph.json) is a link to a file: every link into
    /dev was written into, and a file of the user's there replaced without --force."""
    if out.exists() and not out.is_file():
        return None
    if not out.is_symlink():
        return out
    if _stdout_is(out):
        return None
    hop = out
    for _ in range(40):   # (as the system follows at most 40)
        if Path(os.path.realpath(hop.parent)).parts[1:2] == ("proc",):   # (/dev/fd: /proc/self/fd)
            return None
        if not hop.is_symlink():
            return Path(os.path.realpath(out))
        hop = Path(os.path.abspath(hop.parent / os.readlink(hop)))
    return None


def _take_owner_and_mode(replaced: os.stat_result, written: Path) -> bool:
    """Gives the file ``written`` the owner and permissions of the file it replaces (``replaced``:
    its status): a private export, mode 600, became readable by all; root's export over a user's
    file became root's. Whether the owner was given (only root gives a file away)."""
    own = os.stat(written)
    owned = True
    if (own.st_uid, own.st_gid) != (replaced.st_uid, replaced.st_gid):
        try:
            os.chown(written, replaced.st_uid, replaced.st_gid)
        except OSError:
            owned = False
    with contextlib.suppress(OSError):   # (after chown, which drops a set-id bit)
        os.chmod(written, stat.S_IMODE(replaced.st_mode))
    return owned


def _kept_in_place(landing: Path, st: os.stat_result, owned: bool) -> bool:
    """Whether the file written for ``landing`` (``st``: its status before) is copied into it in
    place instead of renamed over it, as `cp` writes into a file: where ``landing`` has other
    hard links (renamed over, they kept the old export, the link broken), or an owner the written
    file could not be given (``owned``: ``_take_owner_and_mode``), and can be written into (else
    renamed over, as before: a new owner, the links apart)."""
    return (st.st_nlink > 1 or not owned) and os.access(landing, os.W_OK)


class _Sealing:
    """What an export writes its text to: UTF-8 into the binary file ``raw``, in blocks, each byte
    counted into the digest its seal ends with (``exported``; ``sealed``)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.held: list[str] = []
        self.size = 0

    def write(self, text: str) -> None:
        self.held.append(text)
        self.size += len(text)
        if self.size >= 1 << 16:
            self.flush()

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        data = "".join(self.held).encode("utf-8")
        self.held.clear()
        self.size = 0
        self.digest.update(data)
        self.raw.write(data)

    def sealed(self) -> str:
        """The SHA-256 of all written so far, in hex."""
        self.flush()
        return self.digest.hexdigest()


def _hold(f) -> None:
    """Locks ``f``, the temporary file an export writes, for as long as it is open: a later
    export to the same OUT tells by the lock that it is still written (``_remove_left_behind``)."""
    try:
        import fcntl
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (ImportError, OSError):   # (Windows; a file system without locks)
        pass


def _remove_left_behind(out: Path) -> None:
    """Removes the files that exports to ``out`` stopped mid-write left beside it: a
    ``.NAME.PID.tmp`` of a process no longer running (killed with -9, a power cut), which nothing
    else ever removed. One a running export writes stays: its PID alive here, or its lock held
    (``_hold``): an export on another machine (a network share) or in another container, whose
    PID means nothing here, was removed mid-write. Without ``flock`` (Windows) none is removed."""
    try:
        import fcntl
    except ImportError:
        return
    for f in out.parent.glob(f".{glob.escape(out.name)}.*.tmp"):
        pid = f.name[len(out.name) + 2:-len(".tmp")]
        if not pid.isdigit() or alive(int(pid)):
            continue
        try:
            fd = os.open(f, os.O_WRONLY)   # (written to: a lock over NFS needs it)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            f.unlink()
        except OSError:
            pass   # held: still written
        finally:
            os.close(fd)


# DEL and the C1 controls (U+009B: a one-byte CSI on some terminals), which a model's text (a
# description, a report) may hold: written as the escape that means them (JSON's \u009b, XML's
# &#x9b;), as ``terminal.json_line`` writes ask's. msgspec (and saxutils) wrote them raw, and
# `export -` to a terminal let a model's text drive it. The file is the same whatever it is
# written to (a file, standard output), and reads back the same text.
_C1 = re.compile("[\x7f-\x9f]")


def _json_c1(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


def _xml_c1(match: re.Match) -> str:
    return f"&#x{ord(match.group()):x};"


def _write_json(store: Store, f: _Sealing) -> dict[str, int]:
    """The index as one JSON object, indented by one space per level (rows are encoded by
    msgspec: the json module's indenting encoder took most of a large export's time), its seal
    the last member. DEL and C1 controls as escapes (``_C1``: they stand in strings alone)."""
    f.write('{\n "version": ' + json.dumps(store.version))
    counts = {}
    for name, rows in _sections(store).items():
        f.write(f',\n "{name}": [')
        n = 0
        for row in rows:
            text = msgspec.json.format(msgspec.json.encode(row), indent=1).decode().replace("\n", "\n  ")
            # (searched only in a row that may hold one: for 470,000 rows, 147 MB, the test takes
            # 0.05 s of CPU, the search 1.0 s)
            if "\x7f" in text or not text.isascii():
                text = _C1.sub(_json_c1, text)
            f.write(("\n  " if n == 0 else ",\n  ") + text)
            n += 1
        f.write("\n ]" if n else "]")
        counts[name] = n
    f.write(json_seal(f.sealed()))   # (its last line ends: `export -` left the shell's prompt after "}")
    return {k: counts[k] for k in ("entities", "relationships", "claims", "communities", "reports")}


# Characters XML 1.0 does not allow at all, even escaped: C0 controls other than tab, newline
# and carriage return, lone surrogates, and U+FFFE / U+FFFF. Document text can hold them.
_FORBIDDEN = "\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff"   # (a character class's ranges)
_NOT_XML = re.compile(f"[{_FORBIDDEN}]")
# Text that escaping leaves as it is, as data and as an attribute's value (quoted in "): what
# most names, descriptions and every id are. Told by one match, it is not escaped character by
# character: a GraphML export escapes a million values (big10k: 1,046,044). Made of the same
# ranges, so that a character forbidden later is never let through as plain.
_PLAIN_DATA = re.compile(f"[^&<>{_FORBIDDEN}\x7f-\x9f]*")
_PLAIN_ATTR = re.compile(f"[^&<>\"\t\n\r{_FORBIDDEN}\x7f-\x9f]*")


def escape(value) -> str:
    """``value`` as XML character data, without the characters XML 1.0 forbids, DEL and C1
    controls as character references (``_C1``)."""
    text = str(value)
    return text if _PLAIN_DATA.fullmatch(text) else _C1.sub(_xml_c1, saxutils.escape(_NOT_XML.sub("", text)))


def quoteattr(value) -> str:
    """``value`` as a quoted XML attribute, without the characters XML 1.0 forbids, DEL and C1
    controls as character references (``_C1``)."""
    text = str(value)
    return f'"{text}"' if _PLAIN_ATTR.fullmatch(text) else _C1.sub(_xml_c1, saxutils.quoteattr(_NOT_XML.sub("", text)))


def _write_graphml(store: Store, f: _Sealing) -> dict[str, int]:
    """Nodes carry their level-0 community, their deepest community and its level; the seal is
    a comment after the root element."""
    sections = _sections(store, entity_documents=False)
    level0: dict[str, str] = {}
    deepest: dict[str, tuple[int, str]] = {}
    for c in sections["communities"]:
        for m in c["members"]:
            if c["level"] == 0:
                level0[m] = c["id"]
            if m not in deepest or c["level"] > deepest[m][0]:
                deepest[m] = (c["level"], c["id"])
    keys = [("name", "node", "string"), ("type", "node", "string"), ("description", "node", "string"),
            ("community", "node", "string"), ("leaf_community", "node", "string"),
            ("level", "node", "int"), ("degree", "node", "int"),
            ("description", "edge", "string"), ("weight", "edge", "double")]
    f.write('<?xml version="1.0" encoding="UTF-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n')
    for name, kind, typ in keys:
        f.write(f'  <key id="{kind[0]}_{name}" for="{kind}" attr.name="{name}" attr.type="{typ}"/>\n')
    f.write('  <graph id="streamrag" edgedefault="undirected">\n')
    # No reports: GraphML holds nodes and edges (a node names its communities), so the counts
    # say only what the file holds; `export` printed "4 reports" for a file with none.
    counts = {"entities": 0, "relationships": 0, "communities": len(sections["communities"])}
    for e in sections["entities"]:
        level, leaf = deepest.get(e["id"], (-1, ""))
        attrs = {"name": e["name"], "type": e["type"], "description": e["description"],
                 "community": level0.get(e["id"], ""), "leaf_community": leaf, "level": level,
                 "degree": e["degree"]}
        f.write(f"    <node id={quoteattr(e['id'])}>\n")
        f.writelines(f'      <data key="n_{k}">{escape(str(v))}</data>\n' for k, v in attrs.items())
        f.write("    </node>\n")
        counts["entities"] += 1
    for r in sections["relationships"]:
        f.write(f"    <edge id={quoteattr(r['id'])} source={quoteattr(r['source'])} "
                f"target={quoteattr(r['target'])}>\n"
                f'      <data key="e_description">{escape(r["description"])}</data>\n'
                f'      <data key="e_weight">{r["weight"]}</data>\n'
                "    </edge>\n")
        counts["relationships"] += 1
    f.write("  </graph>\n</graphml>\n")
    f.write(graphml_seal(f.sealed()))
    return counts
