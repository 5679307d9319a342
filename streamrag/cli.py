"""The command line: parse, call the library, print. Results on stdout, progress on stderr.

Exit codes: 0 success, 1 a user error (one line on stderr saying what to do), 2 usage (also one
line), 75 the index busy (another streamrag writes it), 130 interrupted, 141 stdout closed early
(``streamrag status | head -1``: quiet, like other Unix tools). ``-v`` or ``STREAMRAG_DEBUG=1``
shows tracebacks and every debug line; warnings from the library (a retry, a wait for rate
budget) are ``streamrag: ...`` lines on stderr.
"""

from __future__ import annotations

if __name__ == "__main__":
    # python -m streamrag.cli runs as python -m streamrag does, before this module's imports: a
    # Ctrl-C during them printed a traceback (``__main__.run`` imports them and says it in one line).
    from streamrag.__main__ import run

    raise SystemExit(run())

import argparse
import contextlib
import difflib
import errno
import io
import json
import logging
import os
import re
import signal
import sqlite3
import sys
import threading
import time
from functools import partial
from pathlib import Path

import anyio

from streamrag import __version__, index_rows, signals
from streamrag.config import (API_BASE_HELP, CONFIG_NAME, Settings, default_config_text, find_config,
                              load_settings, problems_line, without_secrets)
from streamrag.errors import (ConfigError, IndexMissingError, StoreError, StreamragError, UsageError,
                              WriterBusyError, user_error)
from streamrag.signals import Terminated, raise_terminated, until_sigterm
from streamrag.status import format_status, gather_status, llm_summary, unusable_said, without_claims_said
from streamrag.store import (Store, bound_wal, check_readable, database_of, default_db_path,
                             foreign_file_error, holds_documents, indexed_root, last_opened, one_writer,
                             read_as_unchanging, reading_root, recorded_extractor, recorded_root,
                             remember_wal_tried, unchanging_why, vacuum, wal_kept_line, wal_past_bound,
                             wal_tried)
from streamrag.terminal import shell_word, shown
from streamrag.watch_lines import asked_again
from streamrag.words import counted as _n, number


def path_arg(text: str) -> str:
    """An argparse ``type`` for paths: an empty one (``"$NOTES"`` with the variable unset) is
    refused instead of meaning the current folder."""
    if not text:
        raise argparse.ArgumentTypeError("empty path (an unset variable?); give a path")
    return text


def choice_arg(text: str) -> str:
    """An argparse ``type`` for an option of named choices: any case is the choice (`ask --mode
    Global` was refused, "invalid choice: 'Global'"); --help lists the choices as they are."""
    return text.lower()


# Where a command that reads an index finds its settings (``reading_settings``), for --help.
CONFIG_DEFAULT = (f"{CONFIG_NAME} in the folder of the index given by --db or above; without --db, "
                  "here or above; with DIR, in DIR or above")
# The --db of a command that reads the index of a folder given as DIR (ask, status, vacuum, export).
DB_WITH_DIR = "store.path, else .streamrag/index.db in DIR or here, or above; not with DIR"

# --------------------------------------------------------------------------------------------
# Shared resolution of settings and database
# --------------------------------------------------------------------------------------------
def command_settings(args: argparse.Namespace, near: Path | None = None, *,
                     models_for: tuple[str, ...] = ("index", "ask"), quiet: bool = False) -> Settings:
    """The settings a command runs with: ``--config``, else the streamrag.toml found from
    ``near`` (the folder the command is about) or above, else, without ``near``, from here, with
    --api-base and --offline over it. ``models_for``: see ``load_settings``. ``quiet``: the
    settings read again, and the line on a settings file passed over not said again."""
    path = Path(args.config) if getattr(args, "config", None) else None
    passed_over = None
    if path is None:
        # Not the working folder's for a folder named: `index DIR` run from a project folder
        # read the project's streamrag.toml, which `ask` run in DIR did not (and `ask "Q" DIR`
        # did): one index, two settings, depending on where the command ran.
        path = find_config(near) if near is not None else find_config()
        if path is None and near is not None and not quiet:
            # (a file alone: a folder or a broken link of that name, which ``find_config``
            # returns to be refused, is no settings file to offer as --config)
            passed_over = here if (here := find_config()) is not None and here.is_file() else None
    overrides: dict = {}
    if getattr(args, "api_base", None) is not None:  # the flag beats the file and the environment;
        overrides.setdefault("llm", {})["api_base"] = args.api_base  # --api-base "": no model
    if getattr(args, "offline", False):
        overrides.setdefault("index", {})["extractor"] = "nlp"
    settings = load_settings(path, overrides=overrides or None,
                             override_names={"llm.api_base": "--api-base", "index.extractor": "--offline"},
                             models_for=models_for)
    settings.no_network = bool(getattr(args, "offline", False))
    if passed_over is not None:
        print(f"streamrag: warning: {_passed_over(passed_over, near, settings)}", file=sys.stderr)
    # (not status; watch: a warning event, cmd_watch)
    if (models_for and not quiet and args.command != "watch"
            and (line := file_base_unused(settings)) is not None):
        print(f"streamrag: note: {line}", file=sys.stderr)
    if settings.set_aside:   # (status, export, vacuum: one line, however many are wrong)
        print(f"streamrag: warning: {problems_line(settings.set_aside, settings.source)}"
              f" ({args.command} calls no model, so goes on; index, ask and watch refuse it until it is "
              "fixed)", file=sys.stderr)
    return settings


def file_base_unused(settings: Settings) -> str | None:
    """The line saying STREAMRAG_API_BASE is used where the settings file names another
    endpoint, or None. The environment beats the file, without a word: a variable left set in a
    shell's profile sent every run to the old endpoint while the file, edited, named the new one."""
    in_file = settings.file_api_base   # (load_settings keeps it; the file is not read again)
    if not in_file or in_file == settings.llm.api_base:
        return None
    return (f"STREAMRAG_API_BASE={without_secrets(settings.llm.api_base)} is used, not the llm.api_base "
            f"{without_secrets(in_file)!r} of {settings.source} (the environment beats the file); "
            "unset STREAMRAG_API_BASE to use the file's")


def _passed_over(here: Path, near: Path, settings: Settings) -> str:
    """The line saying the working folder's settings file ``here`` is not read for ``near``
    (``settings``: what the command runs with instead). A model it names and the defaults
    lack is said: without it the run went offline, and said nothing more."""
    import tomllib

    # (named as the working folder's: "streamrag.toml is not read for /tmp/x" read as if it meant
    # /tmp/x/streamrag.toml)
    in_cwd = here.parent == Path.cwd().resolve()
    given = shell_word(CONFIG_NAME if in_cwd else here)
    named = (f"the {CONFIG_NAME} here (./{CONFIG_NAME})" if in_cwd
             else f"the {CONFIG_NAME} above the working folder ({shown(here)})")
    try:
        names_model = bool(tomllib.loads(here.read_text(encoding="utf-8")).get("llm", {}).get("api_base"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        names_model = False
    applied = ("the defaults apply: no model, so offline, though it names one"
               if names_model and not settings.has_endpoint else "the defaults apply")
    return (f"{named} is not read for {shown(near)}: a folder's settings are the {CONFIG_NAME} in it "
            f"or a folder above it, and that folder has none ({applied}); pass --config {given} to "
            "use this one")


def reading_settings(args: argparse.Namespace, *, models_for: tuple[str, ...] = ("ask",),
                     quiet: bool = False) -> Settings:
    """The settings of a command that reads an index: with ``--db``, those of the indexed folder
    (or above), as ``index`` of that folder used; ``ask``, ``status`` and ``export`` each
    looked elsewhere, and ``export`` wrote over the index's own settings file. With the DIR of
    ``ask``, ``status``, ``vacuum`` or ``export``, those of DIR (or above), as ``index DIR`` reads
    them. ``models_for`` and ``quiet``: see ``load_settings`` and ``command_settings``. An index
    whose folder is gone (moved or deleted, the index kept elsewhere) takes those of its own
    file's folder (or above): it read the working folder's, another endpoint or none, where the
    same command answered the day before."""
    if getattr(args, "db", None):
        db = Path(args.db)
        near = reading_root(db) or (db.resolve().parent if db.is_file() else None)
    else:
        near = Path(args.folder) if getattr(args, "folder", None) else None
    return command_settings(args, near, models_for=models_for, quiet=quiet)


def _configured_db(settings: Settings) -> Path:
    """``store.path``, refused in one line when it names a folder (the setting is a file)."""
    path = Path(settings.store.path).expanduser()
    if path.is_dir():
        raise ConfigError(f"{settings.source}: store.path = {settings.store.path!r} is a folder; "
                          f"give the index's file, e.g. {str(path / 'index.db')!r}")
    return path


def _not_special(path: Path) -> Path:
    """``path``, unless it is a device or a FIFO (a folder is said where it is opened): SQLite
    said "disk I/O error" of one where the index goes by default."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise StreamragError(f"{path}: not a regular file (a device or a FIFO); give --db (or "
                             "store.path) an index file, e.g. DIR/.streamrag/index.db")
    return path


def _usable_db(path: Path) -> Path:
    """``path``, or one line on why no index can be there: --db /dev/null made /dev/null.lock
    and ended in a traceback, a loop of links in RuntimeError."""
    try:
        path.resolve()
    except (RuntimeError, OSError):
        raise StreamragError(f"{path}: a loop of symbolic links; give --db (or store.path) an index "
                             "file") from None
    _not_special(path)
    if path.is_file():
        foreign = foreign_file_error(path)
        if foreign is not None:
            raise foreign
        if path.stat().st_size == 0:   # (the file reader loaded for an empty file alone)
            from streamrag.loader import DOCUMENT_SUFFIXES

            if path.suffix.lower() in DOCUMENT_SUFFIXES:
                # (An empty notes.md given as --db became an index, the document lost to it.)
                raise StreamragError(f"{path}: an empty {path.suffix} file, taken for a document, not an "
                                     "index; give --db (or store.path) the index's file, e.g. "
                                     "DIR/.streamrag/index.db (where none is yet, `streamrag index` builds it)")
            found = database_of(path)
            if found is not None and found[1]:
                # (An index's lock file, empty while no writer holds it: `index` built an index in
                # it, and ask and status advised doing so.)
                raise StreamragError(f"{path}: a side file of the index {found[0]} (its lock or log), "
                                     f"not an index; give --db (or store.path) {shell_word(found[0])}")
    return path


def db_for_index(args: argparse.Namespace, settings: Settings, root: Path) -> Path:
    if getattr(args, "db", None):
        return _usable_db(Path(args.db))
    if settings.store.path:
        return _usable_db(_configured_db(settings))
    db = _not_special(default_db_path(root))
    if db.exists() or db.is_symlink():
        return db
    if (kept := _kept_index(root)) is not None:
        folder = _kept_index_folder(root, kept)
    elif (kept := _kept_index_above(root)) is not None:
        folder = root   # (`index d/christmas_carol`: the demo's text, d/index.db its index)
    elif (found := _index_above(root)) is not None and _walked_into(found[1], root, settings):
        raise StreamragError(_inside_indexed_folder(args, settings, root, db, *found))
    else:
        return db
    # (`index DIR` and `watch DIR` of a `demo --dir DIR` folder, or of its christmas_carol, built
    # a second index of the demo's text in a .streamrag beside the demo's, which the reading
    # commands found from then on.)
    raise StreamragError(_wrapped(
        f"{shown(root)}: its index is {shown(kept)} ({_kept_how(kept)}), not .streamrag/index.db, which "
        f"`{args.command}` would build as a second index",
        f"{_to_update(args)}, run `streamrag {args.command}{_update_flags(args, kept, settings)} "
        f"{shell_word(folder)} --db {shell_word(kept)}`"))


def _inside_indexed_folder(args: argparse.Namespace, settings: Settings, root: Path, db: Path, above: Path,
                           folder: Path) -> str:
    """Why `index` (or `watch`) of ``root`` stops, ``root`` inside ``folder``, indexed in ``above``
    (``_index_above``): `cd notes/People; streamrag index .` built a second index there with a
    note on stderr, which ask and status in People read from then on, where they had read
    notes's (or, for an index kept as notes/index.db, been pointed to it). The line names the
    command that updates ``folder``'s index, and how to build a separate index of ``root`` (its
    --db), which is then used as any index named."""
    named = "" if above.parent.name == ".streamrag" else f" --db {shell_word(above)}"
    read = "" if named else f", which ask and status in {shown(root)} read"
    return _wrapped(f"{shown(root)} is inside {shown(folder)}, indexed in {shown(above)}{read}",
                    f"{_to_update(args)}, run `streamrag {args.command}{_update_flags(args, above, settings)} "
                    f"{shell_word(folder)}{named}`",
                    f"for a separate index of {shown(root)}, add --db {shell_word(db)}")


# The width an error's clauses are kept within, "streamrag: error: " included (``_wrapped``).
ERROR_WIDTH = 120


def _wrapped(*clauses: str) -> str:
    """``clauses`` as one error, parted by "; ", each on a line of its own when one line would be
    wider than ``ERROR_WIDTH`` (the advice of ``_inside_indexed_folder`` ran to 300 characters),
    and one still wider wrapped at its spaces, but for a command to run (in backquotes: a line
    of its own, copied whole)."""
    import textwrap

    lead = "streamrag: error: "
    if len(lead + "; ".join(clauses)) <= ERROR_WIDTH:
        return "; ".join(clauses)
    lines = []
    for i, clause in enumerate(clauses):
        clause += ";" if i < len(clauses) - 1 else ""
        first = lead if i == 0 else ""
        lines += [clause] if "`" in clause else textwrap.wrap(
            clause, ERROR_WIDTH, initial_indent=first, break_long_words=False, break_on_hyphens=False)
        if first and "`" not in clause:
            lines[0] = lines[0][len(first):]
    return "\n".join(lines)


def _to_update(args: argparse.Namespace) -> str:
    """How the advice of a refused `index` or `watch` names what its command does: `index
    --estimate` estimates the update, it does not make it."""
    return "to estimate its update" if _estimating(args) else "to update it"


def _update_flags(args: argparse.Namespace, db: Path, settings: Settings) -> str:
    """The options of the command that advice names, to run in place of the one refused: every
    one the user gave but the paths and --db (the advice names its own), each value quoted for a
    shell, the ones that decide what it does first (--estimate, --offline, --config, --api-base),
    then the others as `--help` lists them; and --offline for an index ``db`` built offline when
    no endpoint was given (run without it, it would refuse or rebuild with a model). Advice that
    kept only the first four lost -q, --json, --recluster, `watch --once` (which then watched).
    An endpoint is given by --api-base, the --config file or STREAMRAG_API_BASE (``settings``):
    one from those two was swapped for --offline, the user's model run for none. One the settings
    file found in the folder names is not given for this command: with it, the advised update of
    a demo's index extracted every chunk again with the model (7b4a95d)."""
    endpoint = getattr(args, "api_base", None) is not None or bool(settings.llm.api_base) and (
        settings.api_base_from == "STREAMRAG_API_BASE" or getattr(args, "config", None) is not None)
    offline = getattr(args, "offline", False) or (not endpoint and _built_offline(db))
    first = ("estimate", "offline", "config", "api_base")
    actions = {a.dest: a for a in build_parser().commands[args.command]._actions  # type: ignore[attr-defined]
               if a.option_strings and a.dest not in ("help", "db")}
    flags = []
    for dest in sorted(actions, key=lambda d: first.index(d) if d in first else len(first)):
        action = actions[dest]
        value = getattr(args, dest, action.default)
        if dest == "offline":
            value = offline
        if value is None or value is False or value is argparse.SUPPRESS or value == action.default:
            continue
        flag = action.option_strings[0]
        flags.append(flag if value is True else f"{flag} {shell_word(str(value))}")
    return "".join(f" {flag}" for flag in flags)


def _walked_into(folder: Path, root: Path, settings: Settings) -> bool:
    """Whether indexing ``folder`` reads ``root``, a folder inside it: not when a folder on the way
    is hidden or index.exclude leaves it out (`index n/.drafts` was told to run `streamrag index
    n`, which leaves n/.drafts out, and so never indexes it)."""
    from streamrag.loader import exclude_patterns, excluded

    rel = root.resolve().relative_to(folder.resolve())
    if any(part.startswith(".") for part in rel.parts):
        return False
    return not excluded(rel.as_posix(), exclude_patterns(settings.index.exclude))


def _index_above(folder: Path) -> tuple[Path, Path] | None:
    """The index the reading commands open in ``folder`` while it has none of its own
    (``db_for_reading``'s rule), and the folder it indexes, both named from ``folder``: a
    .streamrag/index.db in a folder above, else an index.db kept above whose folder holds
    ``folder`` (``_kept_index_holding``)."""
    found = _streamrag_index_up(folder, first=1)
    if found is not None:
        above = _named_above(folder, *found)
        return above / ".streamrag" / "index.db", above
    return _kept_index_holding(folder)


def _streamrag_index_up(folder: Path, first: int = 0) -> tuple[Path, int] | None:
    """The nearest folder holding a .streamrag/index.db, ``folder`` resolved or one above it
    (from ``first`` levels up), with how many levels up it is; ``None`` when none is: where
    the reading commands find their index (``db_for_reading``, ``_index_above``)."""
    inside = folder.resolve()
    for up, above in enumerate((inside, *inside.parents)):
        if up >= first and (above / ".streamrag" / "index.db").exists():
            return above, up
    return None


def _named_above(folder: Path, above: Path, up: int) -> Path:
    """``above``, the folder ``up`` levels over ``folder`` resolved, named from ``folder`` (a relative
    path stays one) unless that name is another folder: through a link, lnk/.. is the folder above
    the link, not above the folder it names (`index lnk` of an indexed n/sub named ./.streamrag/index.db
    and advised `streamrag index .`)."""
    named = Path(os.path.normpath(folder.joinpath(*[".."] * up)))
    return named if named.resolve() == above else above


def _estimating(args: argparse.Namespace) -> bool:
    """Whether the command is `index --estimate` (its advice keeps the flag: run as said, the
    command it names must not index, and so pay, where only an estimate was asked)."""
    return bool(getattr(args, "estimate", False))


def _kept_index(folder: Path) -> Path | None:
    """The index kept as index.db in ``folder`` (as ``demo --dir`` keeps one), when a streamrag
    index is there: the index a command given ``folder`` means, where its .streamrag/index.db is
    none."""
    kept = folder / "index.db"
    found = database_of(kept) if kept.is_file() else None
    return kept if found is not None and found[1] else None


def _kept_index_above(folder: Path) -> Path | None:
    """The index kept as index.db in a folder above ``folder`` that indexes ``folder`` itself
    (``_kept_index_holding``, found as the reading commands find it: a demo's christmas_carol, its
    index the demo folder's index.db; `index a/b/c --db a/index.db`, which `status a/b/c` was
    pointed to and `index a/b/c` built a second index beside); a subfolder of it builds its own."""
    found = _kept_index_holding(folder)
    if found is None or found[1].resolve() != folder.resolve():
        return None
    return found[0]


def _kept_index_holding(folder: Path) -> tuple[Path, Path] | None:
    """The index kept as index.db in a folder above ``folder`` whose indexed folder holds
    ``folder``, and that folder (``_kept_index_folder``), both named from ``folder``: a demo's
    christmas_carol (``_kept_index_above``), or a subfolder of a folder indexed into its own
    index.db (`index n --db n/index.db`; `status n/sub`). n's .streamrag/index.db is found from
    n/sub so; this one was not, and n/sub was told to run `streamrag index n/sub` first, which
    built a second index. Not one whose folder holds none of its documents: an index.db of a
    folder deleted since is taken for its own folder's (``_kept_index_folder``), and was said the
    index of every folder below it."""
    inside = folder.resolve()
    for up, real in enumerate(inside.parents, start=1):
        above = _named_above(folder, real, up)   # (the folders above the one a link names)
        kept = _kept_index(above)
        if kept is None:
            continue
        held = _kept_index_folder(above, kept)
        if inside.is_relative_to(resolved := held.resolve()) and holds_documents(resolved, kept):
            return kept, held
    return None


def _kept_how(kept: Path) -> str:
    """How the index ``kept`` came to be kept as index.db, for the advice on it: by a demo
    (``demo.is_demos_index``), else by the user's --db (`index n --db n/index.db`), which the
    advice said was kept as `demo --dir` keeps one."""
    from streamrag.demo import is_demos_index

    return "as `demo --dir` keeps one" if is_demos_index(kept) else "kept there by `--db`"


def _built_offline(kept: Path) -> bool:
    """Whether the index ``kept`` was built offline (a demo's always is): the command advised to
    update it then says --offline, or, with a model in the user's settings, it extracted every
    chunk again with the model (paid; 152 calls for the demo's 44 chunks on the simulator)."""
    try:
        return index_rows.offline_extractor(recorded_extractor(kept))
    except sqlite3.Error:
        return False


def _kept_index_folder(folder: Path, kept: Path) -> Path:
    """The folder the index ``kept`` in ``folder`` is updated from: the folder in ``folder`` named as
    the one it indexes (a demo's christmas_carol: the demo's folder may have been moved or copied
    since, its index naming the folder it was built in, gone or another's), else that folder, else
    ``folder``."""
    try:
        root = recorded_root(kept)
    except sqlite3.Error:
        root = None
    if root is None or Path(root).resolve() == folder.resolve():
        return folder
    if (folder / Path(root).name).is_dir():
        return folder / Path(root).name
    if not Path(root).is_dir():
        return folder
    # A folder copied with its index (`cp -r pj pj2`), before pj2 is indexed again: pj2, not pj.
    return folder if reading_root(kept) == folder.resolve() else Path(root)


def db_given(args: argparse.Namespace, settings: Settings) -> str:
    """Where ``db_for_index``'s index was named, for a fix that says what to change: an index
    from store.path was told to "give ... --db"."""
    if not getattr(args, "db", None) and settings.store.path:
        return f"store.path (in {settings.source})"
    return "--db"


def db_as_named(args: argparse.Namespace, settings: Settings, db: Path) -> Path:
    """``db_for_reading``'s index as the user named it: one it found from DIR (resolved) as a
    path from DIR, as ``index DIR`` names it (a refusal of ``vacuum DIR`` named it by its
    absolute path, of ``index DIR`` as DIR/.streamrag/index.db); --db or store.path as given,
    and one found above DIR as found."""
    if getattr(args, "db", None) or settings.store.path:
        return db
    start = Path(getattr(args, "folder", None) or ".")
    try:
        return start / db.relative_to(start.resolve())
    except ValueError:
        return db


def db_for_reading(args: argparse.Namespace, settings: Settings) -> Path:
    """The index a reading command opens: --db, else store.path, else .streamrag/index.db in the
    folder it runs in (its DIR, ``_check_indexed_folder``'s, else here) or above."""
    if getattr(args, "db", None):
        return _missing_said(_usable_db(Path(args.db)), "--db")
    if settings.store.path:
        return _missing_said(_usable_db(_configured_db(settings)), f"store.path in {settings.source}")
    folder = getattr(args, "folder", None)
    start = Path(folder or ".")
    if (found := _streamrag_index_up(start)) is not None:
        return _not_special(found[0] / ".streamrag" / "index.db")
    kept = _kept_index(start)
    if kept is None and (held := _kept_index_holding(start)) is not None:
        kept = held[0]
    if kept is not None:
        # (`demo --dir DIR` keeps its index there: the advice below, `streamrag index DIR`,
        # built a second index of the demo's text beside it, given DIR or DIR/christmas_carol,
        # or run inside either.)
        raise IndexMissingError(f"{shown(folder) if folder else 'this folder'}: its index is {shown(kept)} "
                                f"({_kept_how(kept)}), not .streamrag/index.db; pass it as --db "
                                f"{shell_word(kept)}")
    if folder:
        quoted = shell_word(folder)
        raise IndexMissingError(f"{shown(folder)}: no index in it or in a folder above it; run "
                                f"`streamrag index {quoted}` first, or pass --db PATH")
    # (run elsewhere after `index ~/notes`, the folder to name was the fix it did not say)
    raise IndexMissingError("no index found here or in a parent folder; name the indexed folder "
                            f"(`{_WITH_FOLDER.get(getattr(args, 'command', None), 'streamrag COMMAND DIR')}`), build one with "
                            "`streamrag index DIR`, or pass --db PATH")


# How each reading command names the indexed folder, for a run outside it.
_WITH_FOLDER = {"ask": 'streamrag ask "QUESTION" DIR', "status": "streamrag status DIR",
                "export": "streamrag export OUT DIR", "vacuum": "streamrag vacuum DIR"}


def _missing_said(db: Path, given: str) -> Path:
    """``db``, unless no file is there: then the index to build is that one (``given``: what named
    it). It said "build one with `streamrag index DIR` (or pass --db ...)" of the --db passed.
    An empty file (`touch index.db`) is no index either, and `index` builds in it: the store
    said "holds no index yet; run `streamrag index DIR`", which built .streamrag/index.db."""
    empty = db.is_file() and db.stat().st_size == 0
    if (db.exists() or db.is_symlink()) and not empty:
        return db
    flag = f" --db {shell_word(db)}" if given == "--db" else ""
    where = f"{shown(db)} is an empty file" if empty else f"no index at {shown(db)}"
    raise IndexMissingError(f"{where} (named by {given}); build it with "
                            f"`streamrag index DIR{flag}`, or give {given.split(' in ')[0]} an index "
                            "that exists")


def _print_json(obj: object) -> None:
    print(json.dumps(obj, indent=None, default=str))


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder; give the folder to write {CONFIG_NAME} in "
                          "(default: the current one)")
    if not folder.exists():
        # (A typo made a new folder, and the settings file in it was never read.)
        raise ConfigError(f"{folder}: no such folder; give a folder that exists (create it first "
                          f"with `mkdir -p {shell_word(folder)}` if it is new)")
    target = folder / CONFIG_NAME
    if target.exists() and not args.force:
        raise ConfigError(f"{target} exists already; edit it, or pass --force to overwrite it")
    try:
        target.write_text(default_config_text(), encoding="utf-8")
    except OSError as e:
        if target.is_symlink() and not target.exists():   # (its folder is writable: not the fix)
            raise ConfigError(f"{target}: a broken link (to {os.readlink(target)}), which init cannot "
                              "write through; fix or remove the link") from None
        raise ConfigError(f"{target}: cannot write it ({e.strerror or e}); give a folder you can "
                          "write to") from None
    if args.json:   # (the one file init writes: a script edits it next)
        _print_json({"written": [os.path.abspath(target)]})
    else:
        print(target)
    # (It said `streamrag index DIR` of the folder just named: the command to run is that one's.)
    print(f"Edit it, then run `streamrag index {shell_word(folder)}`. Set llm.api_base (or "
          "STREAMRAG_API_BASE) to use an LLM; without one streamrag indexes offline.", file=sys.stderr)
    return 0




def cmd_index(args: argparse.Namespace) -> int:
    from streamrag import loader, pipeline, progress
    from streamrag.run_progress import Progress

    if args.estimate:   # (its output is the point: said before the scan)
        stdout_needed("index --estimate", "prints the estimate", "redirect standard output to a file (e.g. > "
                      "estimate.txt)")
    paths = [Path(p) for p in args.paths]
    for p in paths:
        name = shown(p)
        if p.is_symlink() and not p.exists():   # a broken link or a loop: say which
            raise StreamragError(f"{name}: {loader.why_unusable(p)}")
        if not p.exists():
            raise StreamragError(f"{name}: no such file or folder; give the folder to index")
        if not (p.is_dir() or p.is_file()):
            raise StreamragError(f"{name}: not a regular file or folder; give a folder, or a .txt, .md, "
                                 ".jsonl or .csv file to index")
        if (why := loader.unstorable_folder(p)) is not None:   # (a traceback at publish)
            raise StreamragError(why)
        if (why := not_documents(p)) is not None:
            raise StreamragError(f"{name}: {why}")
    root = given_root = paths[0] if paths[0].is_dir() else paths[0].parent
    settings = command_settings(args, root, models_for=("index",))
    db = db_for_index(args, settings, root)
    # An existing index keeps naming documents from its own folder: `index sub` or
    # `index sub/file.txt` updates those files in it and leaves the rest alone.
    root = indexed_root(db, root) or root
    if args.estimate:
        from streamrag.estimate import estimate

        # (SIGTERM taken like Ctrl-C: killed, it left an older index's upgraded copy, a whole
        # copy of the index, in the temporary folder)
        with _sigterm_as_interrupt():
            result = estimate(paths, settings, db, root=root, recluster=args.recluster)
        if args.json:
            _print_json(result)
        else:
            from streamrag.estimate import format_estimate

            print(format_estimate(result))
            _print_warnings(result["warnings"])
        return 0
    for line in settings.unused_by_indexing():
        print(f"streamrag: warning: {line}", file=sys.stderr)
    status = failures_command_given(db, given_root, root, settings)
    prog = Progress()
    indexer = pipeline.Indexer(settings, db, root=root, progress=prog, command="index",
                               recluster=args.recluster, failures_command=status)
    with one_writer(db, f"streamrag index {' '.join(map(shell_word, paths))}",
                    given=db_given(args, settings)):
        try:
            with progress.show(prog, lambda: indexer.llm.stats if indexer.llm else {},
                               enabled=not args.quiet):
                result = anyio.run(partial(until_sigterm, ended=_run_recorded), partial(indexer.run, paths))
        except BaseException as e:
            # Stopped (a key refused, a quota run out): what its extraction's answers got wrong went
            # unsaid with its result, and the run after finds those chunks stored and never says it.
            # Before the error line, on stderr with it, in --json too.
            _print_warnings(indexer.extraction_warnings())
            if isinstance(e, KeyboardInterrupt) and indexer.published_first is not None:
                e.published_first = indexer.published_first   # (said by ``_interrupted``)
            raise
        _bound_wal(db)   # (the writer lock still held)
    if not Path(db).exists():
        raise StoreError(_deleted_meanwhile(db))
    if args.json:
        # asked_again: of llm.errors, the unusable answers a later try answered, as watch's idle
        # line and status count them (a script saw errors 39 and could not tell 14 left nothing out)
        _print_json({"db": os.path.abspath(db), **_struct_dict(result), "outcome": outcome(result),
                     "llm": llm_summary(result.llm), "asked_again": asked_again(result.llm)})
    else:
        print(_format_sync(result, db, settings.index.include, status=status))
        _print_warnings(result.warnings)
        if result.settled:
            print(f"streamrag: {pipeline.settled_line(result.settled, status)}", file=sys.stderr)
    if result.failed_items:
        # What succeeded is published; the exit status tells a script that something did not.
        # (An unreadable file is a warning: running again would not change it.) The newest
        # failure's reason is named: an unknown model or a rejected key fails again as it is.
        first = _last_failure(db, result.run_id)
        last = f" (last: {first})" if first else ""
        if not result.documents:   # (it said "left out of this version" of a version of nothing)
            print(f"streamrag: {pipeline.nothing_indexed_line(result.failed_items, first, status)}",
                  file=sys.stderr)
            return 1
        print(f"streamrag: {_failed_said(result.failed_items, result.claims_failed)}"
              f"{last}; run the same command again to retry them, "
              f"after fixing the cause unless it was a passing outage (`{status}` "
              "lists them)", file=sys.stderr)
        return 1
    return 0


def _failed_said(failed_items: int, claims_failed: int) -> str:
    """The failed items of a run that published, as what is true of them: those left out of the
    version, and the chunks whose claims calls failed, which are in it without their claims
    (``SyncResult.claims_failed``): "10 items failed and are left out of this version" was
    said of chunks whose entities and relationships the version holds."""
    left = failed_items - claims_failed
    parts = ([f"{_n(left, 'item')} failed and {'is' if left == 1 else 'are'} left out of this version"]
             if left else []) + \
        ([without_claims_said(claims_failed)] if claims_failed else [])
    return ", and ".join(parts)


def _deleted_meanwhile(db: Path) -> str:
    """The error of a run whose index was deleted while it wrote it (``rm -rf .streamrag``, a
    ``git clean -x`` of the folder): its connection wrote on into the deleted file, and the run
    said "Indexed into ..." of an index no longer there."""
    return (f"{db}: the index was deleted while this run wrote it, and what it built went with it; "
            "run the same command again to build it again")


def _bound_wal(db: Path) -> None:
    """Empties the index's write-ahead log once it is past ``store.WAL_BOUND`` (``store.bound_wal``):
    queries that overlap without a gap, next to an ``index`` run by cron, kept it growing by every
    version published. When readers outlast the wait, the log's size is noted in the index
    (``store.remember_wal_tried``) and it is tried again once twice as large, as ``watch`` does:
    every later run waited the whole 30 s for the same reader, a snapshot left open. In a thread
    of its own, so that a second Ctrl-C still ends the command while SQLite waits for readers
    (the run is recorded: the first is taken as ``_after_the_run``)."""
    if wal_past_bound(db) is None:
        return   # (a look only: no thread at every run)
    tried_before = wal_tried(db)
    if wal_past_bound(db, tried_before) is None:
        return   # (readers kept it at this size before, and it has not doubled since)
    tried: list[tuple[bool, int, float] | None] = []
    worker = threading.Thread(target=lambda: tried.append(bound_wal(db, tried_before)),
                              name="streamrag-empty-wal", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
    if not tried or tried[0] is None:
        return
    emptied, size, took = tried[0]
    remember_wal_tried(db, 0 if emptied else size)
    if not emptied:
        print(f"streamrag: warning: {wal_kept_line(db, size, took)}", file=sys.stderr)


def not_documents(path: Path, command: str = "index") -> str | None:
    """Why ``path``, given to `index` (or ``command``), holds no documents: an index's database (or a file of
    it, or its ``.streamrag`` folder) or another SQLite database; else ``None``. An index's
    database given so was read as a binary file, and a second index built beside it."""
    index_folder = path.is_dir() and path.name == ".streamrag"
    found = (database_of(path / "index.db" if index_folder else path) if index_folder or path.is_file()
             else None)
    if found is None:
        return None
    db, is_index = found
    if not is_index:
        return ("an SQLite database, not a document; give the folder or the files to index (an index's "
                "database goes with --db)")
    # (reading_root: of a folder copied with its index, `cp -r pj pj2`, the copy, not pj it names)
    folder = db.parent.parent if db.parent.name == ".streamrag" else reading_root(db) or _renamed_with(db)
    what = ("a streamrag index's folder" if index_folder else "a streamrag index's database" if db == path
            else f"a file of the streamrag index {shown(db)}")
    # (--offline as db_for_index says it of an index built offline: without it, a model in the
    # folder's settings extracted every chunk again.)
    offline = " --offline" if _built_offline(db) else ""
    if folder is None:
        # (Its folder gone or renamed: `index DIR` alone built a second index in DIR/.streamrag.)
        return (f"{what}, not documents; run `streamrag {command}{offline} DIR --db {shell_word(db)}` on "
                "the folder it indexes")
    if db.parent.name == ".streamrag":
        return (f"{what}, not documents; run `streamrag {command}{offline} {shell_word(folder)}` (its folder), "
                f"or pass the index as --db {shell_word(db)}")
    # (An index kept outside .streamrag is found from its folder by --db alone: `index pj2` was refused
    # and pointed to pj2/index.db (db_for_index), and `index DIR` of one named otherwise built a second.)
    return (f"{what}, not documents; run `streamrag {command}{offline} {shell_word(folder)} --db "
            f"{shell_word(db)}` (its folder, and the index as --db)")


def _renamed_with(db: Path) -> Path | None:
    """The folder the index ``db`` (``database_of`` found it one) kept in it as index.db was moved
    with (`index n --db n/index.db; mv n n2`), the folder it names gone: n2, as ``db_for_index``
    names it of `index n2`; else ``None``."""
    if db.name != "index.db":   # (what ``_kept_index`` of its folder would find, without opening it again)
        return None
    folder = _kept_index_folder(db.parent, db)
    return folder if holds_documents(folder, db) else None


_late_signals: list[int] = []


def _after_the_run(signum: int, frame) -> None:
    """SIGINT or SIGTERM once the run has ended and been recorded: the command still prints
    its result and exits with the run's code (143 or 130 would say "recorded as interrupted"
    of a run recorded as published). A second one ends it at once."""
    if _late_signals:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    _late_signals.append(signum)


def _run_recorded() -> None:
    """From here on, a signal does not change how the command ends (``_after_the_run``)."""
    _late_signals.clear()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):   # (not the main thread: a library caller's)
            if signal.getsignal(signum) is not signal.SIG_IGN:   # (a background job's SIGINT)
                signal.signal(signum, _after_the_run)


def _last_failure(db: Path, run_id: str) -> str:
    """``[stage] message`` of the newest failure recorded by ``run_id``, or ""."""
    try:
        store = Store(db, readonly=True)
    except (StreamragError, sqlite3.Error):
        return ""
    try:
        return index_rows.last_failure(store, run_id)
    except sqlite3.Error:
        return ""
    finally:
        store.close()


def _print_warnings(warnings: list[str]) -> None:
    """A run's warnings (or an estimate's of it) on stderr, with the other messages about the
    run: the first 10, and how many more ``--json`` lists."""
    for w in warnings[:10]:
        print(f"streamrag: warning: {w}", file=sys.stderr)
    if len(warnings) > 10:
        print(f"streamrag: ... and {len(warnings) - 10} more warnings (see --json)", file=sys.stderr)


def _struct_dict(obj) -> dict:
    import msgspec

    return msgspec.to_builtins(obj)


def _repeats(n: int) -> str:
    """The documents line's note on files whose text another file already has."""
    if n <= 0:
        return ""
    return f"; {number(n)} more {'file repeats' if n == 1 else 'files repeat'} another's text, indexed once"


def _read_again(n: int) -> str:
    """The documents line's count of unchanged files read anew (not edits: said apart)."""
    return f"{number(n)} read again, " if n > 0 else ""


def _changed(r) -> str:
    """The documents line's counts of files added, edited and removed: an edit (a path kept, its
    text changed) said as one, not as one added and one removed; beside edits, the counts that
    are none are left out ("1 edited, 49 unchanged"), as the estimate says them."""
    if r.documents_edited <= 0:
        return f"{number(r.documents_added)} added, {number(r.documents_removed)} removed, "
    counts = ((r.documents_added, "added"), (r.documents_edited, "edited"), (r.documents_removed, "removed"))
    return "".join(f"{number(n)} {what}, " for n, what in counts if n > 0)


def _unchanged(r) -> str:
    """The documents line's count of unchanged documents, saying those whose files were read
    again for new change times alone (a `cp -a` restore read 145 files and changed nothing),
    and those whose files were renamed or moved (``SyncResult.documents_renamed``: a `mv` that
    `watch` says "1 renamed" of was "50 unchanged" alone, of a run that published a version).
    Both are of the unchanged, said so when both are there: "50 unchanged, read again for new
    file times, 1 of them renamed" read as one renamed among those read again."""
    unchanged, renamed, again = r.documents_unchanged, r.documents_renamed, r.documents_new_times
    said = f"{number(unchanged)} unchanged"
    if again <= 0:
        return f"{said}, {number(renamed)} of them renamed" if renamed > 0 else said
    times = "read again for new file times"
    if renamed <= 0:
        return f"{said}, {times}" if again >= unchanged else f"{said}, {number(again)} {times}"
    # "all 1" read oddly ("1 unchanged, of which 1 renamed and all 1 read again"): "all" from three.
    read = (number(again) if again < unchanged or unchanged == 1 else
            "both" if unchanged == 2 else f"all {number(unchanged)}")
    return f"{said}, of which {number(renamed)} renamed and {read} {times}"


def _failed_docs(r) -> str:
    """The documents line's files whose new text failed (their chunks' extractions did): "2 (0
    added, 0 removed, 2 unchanged)" was said of a run whose one new and one edited file both
    failed, as if they were not there. A new one is left out; an edited one keeps its previous
    version indexed, and is among the unchanged, as published. Both count new texts, as the
    counts beside them do; of edits, the previous versions kept are the files' ("2 edited failed,
    their previous versions kept" was said of two copies of one text edited apart: one was kept)."""
    added, edited = r.documents_failed_added, r.documents_failed_edited
    parts = ([f"{number(added)} new failed, left out"] if added else []) + (
        [f"{number(edited)} edited failed, " + ("its" if edited == 1 else "each file's")
         + " previous version kept"]
        if edited else [])
    return "".join(f"; {part}" for part in parts)


def _reclustered(r) -> str:
    """The clause of a run that published nothing on the graph it clustered afresh all the same
    (`--recluster`): "Nothing changed" alone read as if it had not, beside --json's reclustered
    (false with no communities to start from: there was no partition to replace)."""
    return "re-clustered afresh, to the same communities; " if r.reclustered else ""


def _applied(r) -> str:
    """The clause of a run that published nothing though settings changed since the index was
    built made it redo work for the whole index (``SyncResult.settings_changed``), and what that
    cost: "Nothing changed: ... checked in 1.1 s" was said of a run that summarized every
    description again (summary_max_tokens changed and changed back: 190 answers from the cache)
    to the index it had. A clustering setting is left to ``_reclustered`` when it clustered afresh.
    A streamrag upgrade alone (``reading_upgraded``: no setting changed, this streamrag reads
    documents differently) is said as such: it was "the reading and chunking settings applied".
    Said of this version, not "this newer streamrag": nothing here tells the direction, and an
    index a newer one read is refused before the run (``check_not_newer``), as long as its
    versions are whole numbers. Offline no setting is said (``settings_changed`` is a model
    run's), but an upgrade is: "Nothing changed" beside "62 extracted now" of a run after a new
    offline extractor (``extraction_upgraded``) never said why."""
    names = [n for n in r.settings_changed if not (n == "clustering" and r.reclustered)]
    upgraded = r.reading_upgraded
    if upgraded and "chunking" in names:
        names.remove("chunking")
    extracted = r.extraction_upgraded and r.chunks_extracted > 0
    if not names and not upgraded and not extracted:
        return ""
    shown = ["reading and chunking" if n == "chunking" else n for n in names]
    named = ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + "".join(shown[-1:])
    what = " and ".join(part for part in (f"the {named} settings applied" if names else "",
                                          redone_by_upgrade(upgraded, extracted)) if part)
    u = llm_summary(r.llm)
    calls, cached = u["calls"], u["cached"]
    if calls and cached == calls:
        spent = f" ({_n(cached, 'answer')} from the cache)"
    elif calls:
        spent = f" ({_n(calls, 'LLM call')}{f', {number(cached)} from the cache' if cached else ''})"
    else:
        spent = ""
    return f"{what}, to the same index{spent}; "


def redone_by_upgrade(read: bool, extracted: bool) -> str:
    """What a run did again because this streamrag reads documents (``read``) or extracts chunks
    offline (``extracted``) differently from the one that built the index, as `index`'s summary
    and `watch`'s idle line say it; "" for neither."""
    return " and ".join(part for part in (
        "documents read again as this version of streamrag reads them" if read else "",
        "chunks extracted again as this version of streamrag extracts them" if extracted else "") if part)


def failures_command(db: Path, root: Path, by_folder: bool = True) -> str:
    """`streamrag status --failures` as it reads the index ``db`` of folder ``root`` from here: with
    the folder (it finds its ``.streamrag/index.db``) unless that is here, else with --db (an index
    kept elsewhere, or found through settings: ``by_folder`` false). `index notes` said the bare
    command, which in notes' parent found no index; `watch` and the pipeline's lines say it too.
    The bare command is ``status.FAILURES``."""
    from streamrag.status import FAILURES

    if not by_folder or not same_path(db, default_db_path(root)):
        return f"{FAILURES} --db {shell_word(db)}"
    return FAILURES + ("" if same_path(root, Path.cwd()) else f" {shell_word(root)}")


def failures_command_given(db: Path, given: Path, root: Path, settings: Settings | None) -> str:
    """``failures_command`` as every command's lines name it (`index`, `watch`; `ask` and `export`
    of an index with nothing to read, through ``query``): the folder as given (`watch .`, `index
    notes`) when it is the index's, else ``root``; --db when ``settings`` (those the command
    read; None: the folder's own) are not what `status ROOT` reads (``folders_own``). One rule:
    `index --config notes/streamrag.toml notes` named `--db notes/.streamrag/index.db` (any
    --config), where `ask` given the same named `notes`. The command's flags are no part of it
    (what the settings read are tells: --config naming the folder's own file reads as the folder
    does)."""
    return failures_command(db, given if same_path(given, root) else root,
                            by_folder=settings is None or folders_own(settings, root))


def folders_own(settings: Settings, root: Path) -> bool:
    """Whether ``settings`` are those `status ROOT` reads, the streamrag.toml found from ``root``
    (or none), and give no store.path: then it finds the index by the folder. Of --config naming
    another file, `status --failures notes` read notes' own, whose store.path named another index
    ("no index at ...")."""
    if settings.store.path:
        return False
    found = find_config(root)
    given = Path(settings.source) if settings.source not in ("", "defaults") else None
    return found is None if given is None else found is not None and found.resolve() == given.resolve()


def same_path(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one place (either may be relative, or not exist)."""
    return Path(os.path.abspath(a)).resolve() == Path(os.path.abspath(b)).resolve()


def outcome(r) -> str:
    """What the run ``r`` came to, as ``index``'s summary heads it and ``index --json``'s
    ``outcome`` says it: ``published`` ("Indexed into ..."), ``nothing_published`` (its changes
    all failed: "Nothing published: ... 2 items failed (left out)") or ``nothing_changed`` (its
    work came out as the index holds it). --json had ``published: false`` for both of the last
    two, told apart only by adding up failed_items and claims_failed. A run that stops on an error
    prints ``failed`` in its error object instead (``_error_object``)."""
    if r.published:
        return "published"
    return "nothing_published" if items_left_out(r) else "nothing_changed"


def items_left_out(r) -> int:
    """Of the run ``r``'s failed items, those left out of the version: a chunk whose claims call
    failed is in it, without its claims."""
    return r.failed_items - r.claims_failed


def _format_sync(r, db: Path, include: list[str], status: str | None = None) -> str:
    """``index``'s summary of the run ``r`` into ``db``; ``status``: the command its failures line
    names (``failures_command``; None: ``status.FAILURES``, run in the indexed folder)."""
    from streamrag.loader import left_out_lines
    from streamrag.status import FAILURES

    u = llm_summary(r.llm)
    calls, cached, tokens = u["calls"], u["cached"], u["prompt_tokens"] + u["completion_tokens"]
    # (no parentheses in its own)
    mode = "offline: NLP extraction, extractive reports" if r.offline else "LLM"
    # (the run's changes that failed were said "Nothing changed" beside "left out of this
    # version", exit 1)
    came_to = outcome(r)
    lines = [
        (f"Indexed into {db} (version {r.version}, {mode}) in {r.wall_s:.1f} s" if came_to == "published" else
         f"Nothing published: {db} stays at version {r.version} ({mode}), {_n(items_left_out(r), 'item')} failed "
         f"(left out); {_applied(r)}{_reclustered(r)}checked in {r.wall_s:.1f} s" if came_to == "nothing_published"
         else f"Nothing changed: {db} stays at version {r.version} ({mode}); {_applied(r)}{_reclustered(r)}"
              f"checked in {r.wall_s:.1f} s"),
        f"  documents      {number(r.documents)} ({_changed(r)}"
        f"{_read_again(r.documents_read_again)}{_unchanged(r)}{_failed_docs(r)}"
        f"{_repeats(r.files - r.documents)})",
        f"  chunks         {number(r.chunks)} ({number(r.chunks_extracted)} extracted now, "
        f"{number(max(r.chunks - r.chunks_extracted, 0))} already extracted)",
        f"  entities       {number(r.entities)}",
        f"  relationships  {number(r.relationships)}",
        f"  communities    {number(r.communities)} ({_n(r.reports_generated, 'report')} "
        f"written, {number(r.reports_kept)} kept)",
    ]
    if r.claims:
        lines.append(f"  claims         {number(r.claims)}")
    if r.joins_moved:   # (a first index, version 1, has every join new: none parted)
        from streamrag.pipeline import joins_moved_said

        lines.append("  name joins     "
                     f"{joins_moved_said(r.joins_moved, r.version, r.joins_joined, r.joins_parted)}")
    for i, line in enumerate(left_out_lines(r.left_out, include)):
        lines.append(f"  {'left out' if i == 0 else '':<15}{line}")
    if calls:
        lines.append(f"  LLM            {_n(calls, 'call')} ({number(cached)} from cache), "
                     f"{number(tokens)} tokens")
    if r.failures:
        # What is true of the files and folders among them (a binary file "could not be read").
        unusable = unusable_said(r.unreadable_by_kind, r.too_big)   # (over index.max_file_mb: said so)
        items = r.failures - sum(r.unreadable_by_kind.values())
        # (of the items, the chunks whose claims calls failed are in the version without their claims)
        left, claimless = items - r.claims_failed, r.claims_failed
        without = f"{_n(claimless, 'chunk')} indexed without {'its' if claimless == 1 else 'their'} claims"
        said = " and ".join(([f"{_n(left, 'item')} failed"] if left and (unusable or claimless) else [])
                            + ([without] if claimless else []) + ([unusable] if unusable else []))
        lines.append(f"  failures       {number(r.failures)}{f' ({said})' if said else ''}: "
                     f"see `{status or FAILURES}`")
    return "\n".join(lines)


def _claimless(settings: Settings) -> str | None:
    """The extractor of the chunks a model indexed without their claims, with ``settings``
    (``extractor.claimless_key``): the endpoint, which `status` is not given (index.extractor
    "auto" is offline without one), is no part of it; None with claims off or "nlp"."""
    import msgspec

    from streamrag.extractor import claimless_key

    if settings.index.extractor == "auto":
        settings = msgspec.structs.replace(settings,
                                           index=msgspec.structs.replace(settings.index, extractor="llm"))
    return claimless_key(settings)


def cmd_status(args: argparse.Namespace) -> int:
    stdout_needed("status", "prints its object" if args.json else "prints the index's status",
                  "redirect standard output to a file (e.g. > status.txt)")
    _check_indexed_folder(args)
    settings = reading_settings(args, models_for=())
    db = db_for_reading(args, settings)
    store = Store(db, readonly=True)
    try:
        info = gather_status(store, failures=args.failures,
                             report_budget=settings.index.report_max_output_tokens,
                             claimless=_claimless(settings))
    finally:
        store.close()
    if args.json:
        _print_json({"db": os.path.abspath(db), **info})
    else:
        print(format_status(info, db))
    return 0


def _check_indexed_folder(args: argparse.Namespace, after: str = "",
                          missing: str = "or its index file as --db", why: str = "") -> None:
    """The DIR of ``ask``, ``status``, ``vacuum`` and ``export``: a folder, whose index is found
    as the command run in it finds it. DIR and --db both are refused (which index was meant?);
    a name that is no folder is refused in one line saying what to give instead (one that does
    not exist would find the index of a folder above it). The words that differ: ``after``, where
    DIR goes (ask's " after the question"); ``missing``, the hint to a name that does not exist;
    ``why``, why a file will not do."""
    if args.folder is None:
        return
    folder = Path(args.folder)
    if args.db:
        raise UsageError(f"{shown(folder)} and --db {shown(args.db)}: give the index once, as the "
                         f"folder{after} or as --db, not both")
    if folder.is_dir():
        return
    if not folder.exists():
        raise StreamragError(f"{shown(folder)}: no such folder; give the indexed folder{after} ({missing})")
    found = database_of(folder) if folder.is_file() else None
    if found is not None and found[1]:
        db = found[0]
        if db.parent.name == ".streamrag":
            raise StreamragError(f"{shown(folder)}: an index's database, not a folder; give its folder, "
                                 f"{shell_word(db.parent.parent)}, or pass it as --db "
                                 f"{shell_word(db)}")
        # (An index kept elsewhere, by --db or store.path, is found from its folder only through
        # that folder's streamrag.toml: naming the folder would build a second index.)
        raise StreamragError(f"{shown(folder)}: an index's database, not a folder; pass it as --db "
                             f"{shell_word(db)}")
    what = "a file, not a folder" if folder.is_file() else "not a regular file or folder (a pipe, a device)"
    raise StreamragError(f"{shown(folder)}: {what}; {why}give the indexed folder{after} "
                         "(or its index file as --db)")


def cmd_vacuum(args: argparse.Namespace) -> int:
    """Gives the index's free pages back to the disk (SQLite's VACUUM), as the writer."""
    from streamrag.status import file_bytes

    _check_indexed_folder(args)
    settings = reading_settings(args, models_for=())
    db = db_for_reading(args, settings)
    # Refused as status refuses it before anything is made: where no index was, vacuum made an
    # empty one (its folders, its lock file) and said it had shrunk it. An older streamrag's index
    # is upgraded by the Store below, under the writer lock (said "upgrading" there), not by this
    # look before it, which upgraded it with no lock held.
    check_readable(db)
    with one_writer(db_as_named(args, settings, db), "streamrag vacuum"), _sigterm_as_interrupt():
        store = Store(db)
        try:
            before = file_bytes(store)
            late = vacuum(store)
            after = file_bytes(store)
        finally:
            store.close()
    if late:
        print("streamrag: the interrupt came as the vacuum was finishing, too late to stop it: it "
              "finished", file=sys.stderr)
    if args.json:
        _print_json({"db": os.path.abspath(db), "before_bytes": before, "after_bytes": after})
    else:
        print(f"{db}: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return 0


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises ``Terminated`` (a Ctrl-C) for the block, where no event loop takes it."""
    def stop(signum: int, frame) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:   # not the main thread: left as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def cmd_export(args: argparse.Namespace) -> int:
    from streamrag.export import check_out, export, format_for, named_format, names_stdout, writes_to_stdout

    out = Path(args.out)
    # (standard output closed: descriptor 1 is /dev/null, which `export /dev/null` names too)
    to_stdout = names_stdout(out) if 1 in closed_at_start else writes_to_stdout(out)
    if args.json and args.out != "-" and to_stdout and out.is_file() and not out.is_symlink():
        # `export x.json --json > x.json`: no stream, a file the shell opened that the export
        # replaces (a new file renamed over it), which took the object with it ("-" is the
        # stream itself, whatever file of that name the folder holds)
        raise UsageError(f"--json prints its object on standard output, which is redirected to {args.out}, "
                         f"the file `export {args.out}` replaces: the object would be lost; redirect "
                         "standard output to another file, or drop --json")
    if args.json and to_stdout:   # (the object would land inside the export)
        raise UsageError(f"--json prints its object on standard output, where `export {args.out}` writes "
                         "the export; give a file to write (e.g. graph.json), or drop --json")
    if to_stdout:   # (it went to /dev/null, and said it wrote)
        stdout_needed(f"export {args.out}", "writes the export", "give a file to write (e.g. graph.json), or "
                      "redirect standard output to one")
    if args.json:
        stdout_needed("export --json", "prints its object",
                      "redirect standard output to a file, or drop --json")
    fmt = format_for(args.out, args.format)
    if args.folder is not None and out.is_dir() and not Path(args.folder).is_dir():
        # `export notes graph.json`, DIR first as `index notes` has it: check_out's "give the
        # file to write, e.g. notes/graph.json" led to "graph.json: no such folder". (An earlier
        # export there, `graph.json` a file, is no folder either: it was told as before.)
        raise StreamragError(f"{shown(out)}: is a folder, and {shown(args.folder)} is none: the file to "
                             f"write comes first, then the indexed folder: streamrag export "
                             f"{shell_word(args.folder)} {shell_word(out)}")
    check_out(args.out, fmt)  # before the store is opened: the cheaper mistake first
    _check_indexed_folder(args)
    settings = reading_settings(args, models_for=())
    db = db_for_reading(args, settings)
    # The settings in use, and those of the index's folder (what `index` of it reads).
    settings_files = [Path(f) for f in (settings.source if settings.source != "defaults" else None,
                                        find_config(reading_root(db) or db.parent)) if f]
    store = Store(db, readonly=True)
    try:  # export refuses an OUT that is the index, its settings or a document before writing
        if not store.version:   # nothing published: say why, as ask does (not an empty export)
            from streamrag.query import check_not_empty
            check_not_empty(store, db, settings.index.include, settings=settings)
        counts = export(store, out, fmt, settings_files=settings_files, include=settings.index.include,
                        force=args.force)
    finally:
        store.close()
    if args.json:
        _print_json({"path": os.path.abspath(out), "format": fmt, **counts})
    else:
        # (a one-community index said "1 communities"; claims are said where there are, as
        # `index` says them: most indexes extract none; `export -` said "wrote -:", a file it
        # did not write)
        where = "to standard output" if args.out == "-" else args.out
        if args.out != "-" and args.format is None and named_format(args.out) is None and out.is_file():
            # (`export graph.md` wrote JSON without a word: neither the name nor a flag chose it;
            # not said of a device or a pipe, /dev/null, /dev/stdout into a pipe, nor of `-`, a
            # file of that name in the folder or not)
            suffix = Path(args.out).suffix
            where += (f" as JSON (the default: {f'{suffix} names no format' if suffix else 'no extension'}; "
                      "--format graphml writes GraphML)")
        print(f"wrote {where}: " + ", ".join(_n(v, _ONE[k]) for k, v in counts.items() if v or k != "claims"),
              file=sys.stderr)
    return 0


# The word for one of each section an export's counts name.
_ONE = {"entities": "entity", "relationships": "relationship", "claims": "claim", "communities": "community",
        "reports": "report"}


def cmd_simulate(args: argparse.Namespace) -> int:
    from streamrag.simulator import config_from_args, listen_error, serve_forever

    try:
        serve_forever(config_from_args(args))
    except OSError as e:
        raise StreamragError(listen_error(e, args.host, args.port)) from None
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    """``watch``: ``daemon.cmd_watch``, its module loaded by the one command that runs it."""
    from streamrag.daemon import cmd_watch as watch

    return watch(args)


def cmd_demo(args: argparse.Namespace) -> int:
    """``demo``: ``demo.cmd_demo``, its module loaded by the one command that runs it."""
    from streamrag.demo import cmd_demo as demo

    # (`demo >&-` indexed the sample and answered its questions into /dev/null, with exit 0)
    stdout_needed("demo", "prints its object" if args.json else "prints its tour",
                  "redirect standard output to a file (e.g. > demo.txt)")
    return demo(args)


def _question_first(args: argparse.Namespace) -> None:
    """Refuses `ask notes "What ...?"`, the folder first as `index notes` has it, saying the
    order: it was told "What ...?: no such folder; give the indexed folder after the question",
    as if the question were the mistake."""
    if args.folder is None or Path(args.folder).exists() or not Path(args.question).is_dir():
        return
    # (A question of one word, or a path: `ask docs notess`, a typo of the folder, was told to
    # swap them, `streamrag ask notess docs`, when docs is a folder and no index. Taken for the
    # question: words with a space, a "?", or a single word after an indexed folder.)
    said = args.folder.strip()
    question = any(c.isspace() for c in said) or said.endswith("?")
    if not question and (os.sep in said or "/" in said
                         or not (Path(args.question) / ".streamrag" / "index.db").is_file()):
        return
    raise StreamragError(f"{shown(args.question)}: a folder, given before the question; the question "
                         f"comes first, then the indexed folder: streamrag ask "
                         f"{shell_word(args.folder)} {shell_word(args.question)}")


def cmd_ask_checked(args: argparse.Namespace) -> int:
    """``ask``'s arguments checked before anything is opened, then ``ask_command.cmd_ask``."""
    from streamrag.ask_command import cmd_ask
    from streamrag.question import checked_question

    checked_question(args.question)
    _question_first(args)
    _check_indexed_folder(args, after=" after the question", missing="and quote a question of several words",
                          why="ask answers from a whole index: ")
    if args.level is not None:
        if args.level < -1:
            raise UsageError(f"--level {args.level}: must be 0 or more (0 = the top level), or -1 for "
                             "query.global_level / the deepest level")
        if args.mode in ("local", "basic"):
            raise UsageError(f"--level only applies to global search; drop it, or use --mode global "
                             f"instead of --mode {args.mode}")
        args.mode = "global"  # --level asks for static global search, so auto does not pick local
    # (the answer went to /dev/null, the model's calls paid, and it exited 0)
    stdout_needed("ask", "prints its answer", "redirect standard output to a file (e.g. > answer.txt)")
    if args.level is not None and args.level >= 0:
        _note_clamped_level(args)
    return cmd_ask(args)


def _note_clamped_level(args: argparse.Namespace) -> None:
    """Says on stderr when ``--level N`` is deeper than the index (the search uses the deepest),
    before the search, which says so of ``query.global_level`` (``query.deeper_level_line``)."""
    from streamrag import global_search
    from streamrag.query import deeper_level_line

    settings = reading_settings(args, quiet=True)   # (ask reads them next, and says what it finds)
    store = Store(db_for_reading(args, settings), readonly=True)
    try:
        with store.snapshot():   # (not the whole tree: ask loads it next)
            deepest = global_search.deepest_level(store)
    finally:
        store.close()
    if (line := deeper_level_line("--level", args.level, deepest)) is not None:
        print(f"streamrag: {line}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------
def _port(text: str) -> int:
    from streamrag.simulator import port_number  # imported only when --port is given

    return port_number(text)


def _share(text: str) -> float:
    from streamrag.simulator import share

    return share(text)


def _at_least(least: float, kind: type = float, what: str = "0 or more"):
    def parse(text: str):
        from streamrag.simulator import at_least

        return at_least(least, kind, what)(text)
    return parse


class _UsageExit(SystemExit):
    """argparse's exit on a usage error (2); ``said``: its line without "PROG: error: ", for
    --json's object (``_main``)."""

    def __init__(self, said: str) -> None:
        super().__init__(2)
        self.said = said


# The commands whose folder is not the current one by default, and the name of its argument.
_FOLDER_ARGUMENT = {"streamrag index": "PATH", "streamrag watch": "DIR"}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2), like every other streamrag error."""

    def error(self, message: str):  # type: ignore[override]
        folder = _FOLDER_ARGUMENT.get(self.prog)
        if folder and message == f"the following arguments are required: {folder}":
            # (`ask` and `status` take the folder they run in; `index` in ~/notes did not say how)
            message += f" (the folder to {self.prog.split()[1]}: `{self.prog} .` for the one you are in)"
        said = f"{message}; see `{self.prog} --help`"
        self._print_message(f"{self.prog}: error: {said}\n", sys.stderr)
        raise _UsageExit(said)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="streamrag",
        description="A streaming, incremental GraphRAG: index a folder into one SQLite file, keep it "
                    "current, and ask it global and local questions.")
    parser.add_argument("--version", action="version", version=f"streamrag {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show tracebacks on errors, and every retry and debug line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def common(p: argparse.ArgumentParser, *, db_default: str, config_default: str) -> None:
        p.add_argument("--config", metavar="FILE", type=path_arg,
                       help=f"settings file (default: {config_default})")
        p.add_argument("--db", metavar="FILE", type=path_arg, help=f"index database (default: {db_default})")

    p = sub.add_parser("init", help="write a commented streamrag.toml to edit")
    p.add_argument("dir", nargs="?", default=".", type=path_arg, help="folder to write it in (default: here)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument("--json", action="store_true", help="print the file written as one JSON object")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("index", help="index (or update the index of) a folder or files")
    p.add_argument("paths", nargs="+", metavar="PATH", type=path_arg, help="folders or files to index")
    common(p, db_default="store.path, else .streamrag/index.db in the first PATH (a file's folder)",
           config_default=f"{CONFIG_NAME} in the first PATH (a file's folder) or above")
    p.add_argument("--offline", action="store_true", help="no LLM: NLP extraction, extractive reports")
    p.add_argument("--api-base", metavar="URL",
                   help=API_BASE_HELP)
    p.add_argument("--estimate", action="store_true",
                   help="print the calls and tokens a run would need, spend nothing")
    p.add_argument("--recluster", action="store_true",
                   help="cluster from scratch instead of from the previous partition (ids are still kept)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=cmd_index)

    from streamrag.ask_command import add_ask_command

    add_ask_command(sub)
    sub.choices["ask"].set_defaults(func=cmd_ask_checked)

    # watch and demo are declared here, not by their modules, so that building the parser (which
    # every command does) loads neither: the daemon and its parts were 20 ms of CPU of every
    # command uncompiled (4 ms from a bytecode cache).
    p = sub.add_parser("watch", help="keep the index of a folder current as its files change")
    p.add_argument("dir", metavar="DIR", type=path_arg, help="folder to index and watch")
    common(p, db_default="store.path, else DIR/.streamrag/index.db",
           config_default=f"{CONFIG_NAME} in DIR or above")
    p.add_argument("--offline", action="store_true", help="no LLM: NLP extraction, extractive reports")
    p.add_argument("--api-base", metavar="URL",
                   help=API_BASE_HELP)
    p.add_argument("--once", action="store_true", help="sync once and exit (like `streamrag index`)")
    p.add_argument("--json", action="store_true", help="status lines as JSON objects on stdout")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser("demo", help="index a shipped sample offline and ask it two questions")
    p.add_argument("--dir", metavar="DIR", type=path_arg,
                   help="where to put the sample and its index (default: a temporary folder)")
    p.add_argument("--api-base", metavar="URL",
                   help="answer the questions with this OpenAI-compatible endpoint instead of extractively")
    p.add_argument("--json", action="store_true",
                   help="print what was built and the two answers as one JSON object (the tour goes to stderr)")
    p.set_defaults(func=cmd_demo)

    def indexed_folder(p: argparse.ArgumentParser, command: str) -> None:
        """DIR, --config and --db of a command that reads the index of a folder (status DIR)."""
        p.add_argument("folder", nargs="?", metavar="DIR", type=path_arg,
                       help=f"the indexed folder, as if {command} ran in it: its streamrag.toml and its "
                            "index (default: here)")
        common(p, db_default=DB_WITH_DIR, config_default=CONFIG_DEFAULT)

    p = sub.add_parser("status", help="what the index holds, tokens spent, failures")
    indexed_folder(p, "status")
    # (it said "the recorded failures", every run's, which it never lists: status.gather_status)
    p.add_argument("--failures", action="store_true",
                   help="list what failed in the last update, and the items no longer retried")
    p.add_argument("--json", action="store_true", help="print as one JSON object")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("vacuum", help="give the index's free space back to the disk")
    indexed_folder(p, "vacuum")
    p.add_argument("--json", action="store_true", help="print the sizes as one JSON object")
    p.set_defaults(func=cmd_vacuum)

    p = sub.add_parser("export", help="write the index as JSON or GraphML")
    p.add_argument("out", metavar="OUT", type=path_arg, help="output file (- for standard output)")
    p.add_argument("--format", choices=("json", "graphml"), type=choice_arg, default=None,
                   help="default: follows OUT's extension (.graphml: graphml; anything else, "
                        "and -: json)")
    p.add_argument("--json", action="store_true",
                   help="print the file written and its counts as one JSON object (not with -)")
    p.add_argument("--force", action="store_true",
                   help="replace OUT even when it is a file no export wrote (or one changed since)")
    indexed_folder(p, "export")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "simulate", help="run the deterministic OpenAI-compatible simulator",
        description="A deterministic OpenAI-compatible server (chat completions, embeddings, models) "
                    "that answers like a model listing a text's capitalised phrases. Point streamrag "
                    "at it with llm.api_base = \"http://127.0.0.1:PORT/v1\" (any model name works "
                    "but 'missing-model', which gets 404), or with --api-base; lift the client's "
                    "provider limits too (llm.requests_per_minute = 0 and llm.tokens_per_minute = 0 in "
                    "streamrag.toml), or a run waits for budget a real provider would need.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="0 picks a free port (default 8765)")
    p.add_argument("--latency-ms", type=_at_least(0), default=0.0, help="added to every answer (default 0)")
    p.add_argument("--per-token-ms", type=_at_least(0), default=0.0,
                   help="added per completion token (default 0)")
    p.add_argument("--rpm", type=_at_least(0, int), default=0,
                   help="requests per minute before 429 (0 = no limit)")
    p.add_argument("--tpm", type=_at_least(0, int), default=0,
                   help="tokens per minute before 429 (0 = no limit)")
    p.add_argument("--fault-rate", type=_share, default=0.0,
                   help="share of requests that fail (0 to 1): HTTP 500, a hang of --timeout-s, a "
                        "malformed or a truncated answer")
    p.add_argument("--seed", type=int, default=0, help="which requests fail (default 0)")
    # The same flags as `python -m streamrag.simulator` (simulator.build_parser), declared here so
    # that `streamrag --help` does not import the simulator.
    p.add_argument("--embedding-dim", type=_at_least(1, int, "1 or more"), default=64,
                   help="length of embeddings (default 64)")
    p.add_argument("--timeout-s", type=_at_least(0), default=30.0,
                   help="how long a simulated timeout holds the connection (default 30)")
    p.add_argument("--api-key", default="", help="the key every request must carry, as "
                                                 "Authorization: Bearer KEY (default: none asked)")
    p.set_defaults(func=cmd_simulate)

    parser.commands = sub.choices  # type: ignore[attr-defined]
    for command in sub.choices.values():  # `ask -v` as well as `-v ask`
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                             help="show tracebacks on errors, and every retry and debug line")
    return parser


# Another streamrag writes the index (a cron `index` beside a running `watch`): busy, not
# broken, so a script can tell it from a failure and try again later (sysexits' EX_TEMPFAIL).
EXIT_BUSY = 75

# A write that failed for want of room (or a device error): the output could not be written.
_WRITE_FAILED = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _stdout_closed() -> int:
    """The reader of stdout went away (``| head``): exit quietly, as a Unix tool killed by
    SIGPIPE would (141), without Python complaining again when it flushes stdout at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (tests capture it)
        pass
    return 128 + 13


def _is_broken_pipe(e: BaseException) -> bool:
    if isinstance(e, BaseExceptionGroup):
        return e.subgroup(lambda x: isinstance(x, BrokenPipeError)) is not None
    return isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and e.errno == errno.EPIPE)


class _Stdout:
    """``sys.stdout`` that knows whether its last line is left open (``ask``'s answer, streamed
    as it comes), for ``_Stderr``."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.open = False
        # (anything yet: a failure's --json object is then not printed, ``_json_error``)
        self.written = False

    def write(self, text: str) -> int:
        written = self.stream.write(text)
        if text:
            self.open = not text.endswith("\n")
            self.written = True
        return written

    def __getattr__(self, name: str):   # flush, fileno, buffer, encoding ... of the stream
        return getattr(self.stream, name)


def _same_place(one, other) -> bool:
    """Whether two streams show in one place: one terminal, or one file or pipe (``2>&1``)."""
    try:
        return (os.path.samestat(os.fstat(one.fileno()), os.fstat(other.fileno()))
                or (one.isatty() and other.isatty()))
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):   # (tests capture them)
        return False


class _Stderr:
    """``sys.stderr`` whose reader may go away (``2> >(head -1)``, a log pipe closed) without
    ending the run: progress, status lines and messages are not the result, so once a write to
    it fails the rest is dropped (the descriptor goes to /dev/null, for writers that use it
    directly and for the flush at exit). A BrokenPipeError there ended `index` with 141,
    nothing published, and `watch` likewise.

    A message while stdout (``stdout``, when given) has a line open starts on a line of its own
    where both show in one place: a retry line during ``ask`` landed inside the streamed answer.
    The answer goes on on the next line; what stdout receives is unchanged."""

    def __init__(self, stream, stdout: _Stdout | None = None) -> None:
        self.stream = stream
        self.lost = False
        self.stdout = stdout
        self.open = False   # (its own last line: ``_interrupted``)

    def write(self, text: str) -> int:
        if text and self.stdout is not None and self.stdout.open:
            self.stdout.open = False
            if _same_place(self.stdout, self.stream):
                with contextlib.suppress(OSError, ValueError):   # (its own errors come where it is written)
                    self.stdout.flush()   # (what it holds goes first)
                self._write("\n")
        written = self._write(text)
        if text:
            self.open = not text.endswith("\n")
        return written

    def _write(self, text: str) -> int:
        if not self.lost:
            try:
                return self.stream.write(text)
            except (OSError, ValueError):
                self._lose()
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self._lose()

    def _lose(self) -> None:
        self.lost = True
        with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self.stream.fileno())
            finally:
                os.close(null)

    def __getattr__(self, name: str):   # isatty, fileno, encoding ... of the stream
        return getattr(self.stream, name)


class _LogLines(logging.Handler):
    """Library log records as ``streamrag: ...`` lines on the stderr of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"streamrag: {self.format(record)}", file=sys.stderr, flush=True)
        except Exception:  # a closed stderr must not end the run
            self.handleError(record)


_log_lines = _LogLines()


def _show_logs(debug: bool) -> None:
    """Warnings (a retry, a wait for rate budget) always; with -v, every debug line as well."""
    logger = logging.getLogger("streamrag")
    if _log_lines not in logger.handlers:
        logger.addHandler(_log_lines)
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parse_args``, but an unknown option is reported by the command it was given to, with
    the option it most looks like (`ask --levle 1` said only "unrecognized arguments")."""
    given = sys.argv[1:] if argv is None else argv
    if _asked_offline(given):   # (argparse said only "QUESTION required" when no question was given)
        ask = parser.commands["ask"]  # type: ignore[attr-defined]
        # (with the other misspellings named: `--offline "q" --levle 1` said only --offline's)
        hints = [_ASK_OFFLINE, *_misspelt(ask, _ask_options(given))]
        ask.error(f"unrecognized arguments: --offline ({'; '.join(hints)})")
    dashed = _dashed_question(parser, given)
    if dashed:
        parser.commands["ask"].error(  # type: ignore[attr-defined]
            f'{dashed}: a question that begins with - is read as an option; put -- before it: '
            f'streamrag ask -- "{dashed}" [DIR]')
    args, extras = parser.parse_known_args(argv)
    if _folder_passed_over(args, extras):
        args.folder, extras = extras[0], []
    if not extras:
        return args
    command = parser.commands.get(getattr(args, "command", None) or "", parser)  # type: ignore[attr-defined]
    hints = _misspelt(command, extras)
    if getattr(args, "command", None) == "ask" and _strays(command, extras, given, args.folder is None):
        # (`ask What is it` took "What" for the question and "is" for the folder)
        hints.append('quote a question of several words: streamrag ask "QUESTION" [DIR]')
    command.error(f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else ""))
    raise AssertionError("unreachable")  # error() exits


def _help_of(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser | None:
    """The parser whose help `streamrag help [COMMAND]` asks for (streamrag's, or COMMAND's),
    else None: `help` was refused as an invalid choice, as git and pip users type it. Read
    before argparse, as no command: the README's table lists what streamrag does."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] != "help":
        return None
    if any(len(a) > 5 and "--version".startswith(a.split("=", 1)[0]) for a in argv[:argv.index("help")]):
        return None   # (`streamrag --version help` printed the help: argparse says the version, as before)
    if len(words) > 2:
        parser.error(f"unrecognized arguments: {' '.join(words[2:])} (`streamrag help COMMAND` takes one)")
    commands = parser.commands  # type: ignore[attr-defined]
    if len(words) == 1:
        return parser
    if words[1].lower() not in commands:
        parser.error(f"help {words[1]}: no such command; choose from {', '.join(commands)}")
    return commands[words[1].lower()]


def _misspelt(command: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """"OPTION: did you mean ..." for each of ``words`` that is an option ``command`` does not
    take but one it takes looks like."""
    known = [s for action in command._actions for s in action.option_strings]
    hints = []
    for word in words:
        option = word.split("=", 1)[0]
        if not word.startswith("-") or option in known:
            continue
        close = _look_alike(option, known)
        if close:
            hints.append(f"{option}: did you mean {close}?")
    return hints


def _look_alike(option: str, known: list[str]) -> str | None:
    """The option of ``known`` that ``option``, one ``known`` does not hold, most looks like."""
    close = difflib.get_close_matches(option, known, n=1, cutoff=0.75) or _long_option_for(option, known)
    return close[0] if close else None


def _strays(command: argparse.ArgumentParser, words: list[str], argv: list[str],
            folder_unset: bool = False) -> list[str]:
    """The words of ``words`` (what ``command`` did not take of ``argv``, in its order) that are
    no option nor an option's value: the word right after a misspelt option whose look-alike takes
    a value is that value, as it would have been spelt right (`ask "q" --levle 1` was told to
    quote a question of several words, of the 1). ("Right after" in ``argv``: of `ask -m local
    Scrooge x`, the question took "local" and "x" is left.) ``folder_unset``: argparse left DIR
    empty, as it does of one given after an option (``_folder_passed_over``): the first word
    left that is a folder is that DIR (`ask "q" --levle 1 notes` was told to quote the question).)"""
    takes = {s: action.nargs != 0 for action in command._actions for s in action.option_strings}
    strays, value_at, at = [], -1, 0
    for word in words:
        # (its place in the line: what argparse left is in its order)
        at = argv.index(word, at) if word in argv[at:] else at
        if word.startswith("-"):
            option = word.split("=", 1)[0]
            alike = option if option in takes else _look_alike(option, list(takes))
            value_at = at + 1 if "=" not in word and alike is not None and takes[alike] else -1
        elif at != value_at:
            if folder_unset and Path(word).is_dir():
                folder_unset = False
            else:
                strays.append(word)
        at += 1
    return strays


def _ask_options(argv: list[str]) -> list[str]:
    """The words of ``argv`` after ``ask`` and before ``--`` but --offline (``_asked_offline``)."""
    rest = argv[argv.index("ask") + 1:]
    return [a for a in (rest[:rest.index("--")] if "--" in rest else rest) if a.split("=", 1)[0] != "--offline"]


# What `ask --offline` is told: index and watch take --offline, so a newcomer tried it when the
# server was down.
_ASK_OFFLINE = '--offline: ask answers with no model (extractively) given --api-base ""'


def _asked_offline(argv: list[str]) -> bool:
    """Whether ``argv`` gives ``ask`` --offline, which it does not take (a question after ``--``
    is none): said before argparse reads the line, which without a question said only that
    QUESTION was required."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] != "ask":
        return False
    rest = argv[argv.index("ask") + 1:]
    return any(a.split("=", 1)[0] == "--offline" for a in (rest[:rest.index("--")] if "--" in rest else rest))


def _dashed_question(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The question of ``ask`` that begins with "-" (`ask "-Marard" notes`), which argparse reads
    as an option it does not know: it said "unrecognized arguments: -Marard", or with no DIR
    that QUESTION was missing. None for what argparse takes as a question ("-Odile Marard?",
    holding a space, or "-5"), for what follows ``--``, and for a misspelt option (`--levle`,
    `-m`, `-fresh`), which ``_parse`` names with the option it looks like."""
    commands = [a for a in argv if not a.startswith("-")]
    if not commands or commands[0] != "ask":
        return None
    rest = argv[argv.index("ask") + 1:]
    known = [s for action in parser.commands["ask"]._actions   # type: ignore[attr-defined]
             for s in action.option_strings]
    for arg in rest[:rest.index("--")] if "--" in rest else rest:
        if (not arg.startswith("-") or arg.startswith("--") or len(arg) <= 2 or " " in arg
                or re.fullmatch(r"-\d+|-\d*\.\d+", arg)):
            continue
        option = arg.split("=", 1)[0]
        if (any(k.startswith(option) for k in known)
                or difflib.get_close_matches(option, known, n=1, cutoff=0.75)):
            continue
        return arg
    return None


def _long_option_for(option: str, known: list[str]) -> list[str]:
    """The one long option a short one that is none stands for (`ask -m local` for --mode): too
    short to look like it by difflib, and the rest of the line was then taken for the question
    and the folder."""
    if len(option) != 2 or option[0] != "-" or not option[1].isalpha():
        return []
    starting = [s for s in known if s.startswith("--" + option[1])]
    return starting if len(starting) == 1 else []


def _folder_passed_over(args: argparse.Namespace, extras: list[str]) -> bool:
    """Whether the one argument left over is the DIR of ``export OUT [DIR]`` or ``ask QUESTION
    [DIR]`` given after an option (`export graph.json --format json notes`): argparse fills the
    optional DIR, empty, along with the positional before the option, and then refused the
    folder as "unrecognized arguments"."""
    return (getattr(args, "folder", "") is None and len(extras) == 1 and extras[0] != ""
            and not extras[0].startswith("-"))


def _first(group: BaseExceptionGroup) -> BaseException:
    """The first exception inside a (nested) exception group."""
    inner = group.exceptions[0]
    return _first(inner) if isinstance(inner, BaseExceptionGroup) else inner


def _database_error_only(group: BaseExceptionGroup) -> sqlite3.Error | None:
    """The SQLite error a task group raised when nothing else went wrong, else None. A stage
    feeding workers that such an error ended finds their stream broken (anyio's
    BrokenResourceError): an echo of it, not a second fault (a full disk while the reports were
    saved came out as a traceback)."""
    inner, rest = group.split(sqlite3.Error)
    if rest is not None:
        rest = rest.split(anyio.BrokenResourceError)[1]
    return _first(inner) if inner is not None and rest is None else None


_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def _database_failed(e: BaseException) -> str:
    """The one line for an SQLite error that reached the command line (exit 1). What it is
    comes from SQLite's error name, never from the message (which may quote document text);
    an error that is no fault of the file (a bug's "no such table") is raised as it is."""
    name = getattr(e, "sqlite_errorname", None)
    # Python's own decoder, for text no longer UTF-8: "Could not decode ... with text '...'"
    undecodable = (isinstance(e, sqlite3.OperationalError) and name is None
                   and str(e).startswith("Could not decode"))
    what = str(e).split(" with text ", 1)[0] if undecodable else " ".join(str(e).split())[:200]
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):
        return f"the index database stayed locked by another process ({what}); try again in a moment"
    if name == "SQLITE_FULL":
        return (f"the disk holding the index database is full ({what}); free some space, then run "
                "the same command again (finished work is kept)")
    if not (name in _DAMAGED or undecodable or type(e) is sqlite3.DatabaseError):
        raise e
    if read_as_unchanging() and not undecodable:
        return (f"the index changed while it was read ({what}): {unchanging_why(last_opened())}, so "
                "it is read as unchanging, and its owner's indexer wrote it meanwhile; try again "
                "once that has finished")
    # A damaged page (text no longer UTF-8, a malformed record) is as unreadable as a damaged header.
    where = f" {last_opened()}" if last_opened() is not None else ""
    return (f"the index database{where} cannot be read ({what}); pass --db with a streamrag index, "
            "or delete the damaged file and run `streamrag index DIR` again")


def _failed(args: argparse.Namespace, message: str, code: int) -> int:
    """Says ``message`` as the one error line, and as ``watch --json``'s last line or another
    command's --json object (``_json_error``); the exit code."""
    print(f"streamrag: error: {message}", file=sys.stderr)
    _last_watch_line(args, message, code)
    _json_error(args, message, code)
    return code


def _json_error(args: argparse.Namespace, message: str, code: int) -> None:
    """A command given --json that fails prints ``_error_object`` on stdout, as ``watch --json``
    ends with its failed line: a script parsing stdout got nothing to parse (`index --json` with
    a bad streamrag.toml). Not when the command printed anything
    already (its object, or part of it), nor where stdout is the export's file (`export - --json`,
    `export x.json --json >> x.json`: refused so that no object lands in the export)."""
    if args.command == "watch" or not getattr(args, "json", False) or getattr(sys.stdout, "written", False):
        return
    if args.command == "export":
        from streamrag.export import writes_to_stdout

        if writes_to_stdout(args.out):
            return
    try:
        print(json.dumps(_error_object(message, code)), flush=True)
    except OSError:   # (stdout closed: the message is on stderr)
        pass


def _error_object(message: str, code: int) -> dict[str, object]:
    """The one object every command given --json prints when it fails (``_json_error``,
    ``_usage_json_error``): the line on stderr, the exit code, and ``outcome`` "failed", the key
    `index --json` says what a run came to by (``outcome``): a script reading it got a KeyError
    of a run that failed, whose object had only the other two."""
    return {"error": message, "exit_code": code, "outcome": "failed"}


def _usage_json_error(parser: argparse.ArgumentParser, words: list[str], said: str) -> None:
    """A usage error argparse says (``_UsageExit``) under --json, given to a command that takes
    it among the words before any ``--`` (`ask -- --json` is a question), as ``_failed`` says
    others: the command is not parsed, so it is the first word that is no option (the
    top-level options take no value), and an export's OUT any later word. `simulate --json`,
    `streamrag --json index` and an unknown command printed the object for a --json they do not
    take. `watch --json` ends with its failed line (it printed an object of another shape), and
    no object lands where `export` writes (`export x.json --json --formt json >> x.json`
    appended one to the export it was to replace)."""
    given = words[:words.index("--")] if "--" in words else words
    at = next((i for i, w in enumerate(given) if not w.startswith("-")), None)
    if at is None:
        return
    command, after = given[at], given[at + 1:]
    if "--json" not in after:
        return
    takes = parser.commands.get(command)  # type: ignore[attr-defined]
    if takes is None or "--json" not in takes._option_string_actions:
        return
    if command == "export":
        from streamrag.export import writes_to_stdout

        if any(writes_to_stdout(w) for w in after if w == "-" or not w.startswith("-")):
            return
    if command == "watch":
        _last_watch_line(argparse.Namespace(command=command, json=True), said, 2)
        return
    with contextlib.suppress(OSError):
        print(json.dumps(_error_object(said, 2)), flush=True)


def _unwritten_output(e: BaseException) -> OSError | None:
    """The failed write of the output (a full disk, ``> /dev/full``) that ``e`` is, or that is all
    a task group's ``e`` holds (``watch --json`` writes its lines from one): such an OSError
    names no file, where a document read or a folder made does."""
    def unwritten(x: BaseException) -> bool:
        return isinstance(x, OSError) and x.errno in _WRITE_FAILED and x.filename is None

    if isinstance(e, BaseExceptionGroup):
        inner, rest = e.split(unwritten)
        return _first(inner) if inner is not None and rest is None else None
    return e if unwritten(e) else None


def _output_unwritten(e: OSError) -> int:
    """One line for output sent to a full disk (``> /dev/full``, a quota), not a traceback."""
    print(f"streamrag: error: cannot write the output ({e.strerror}); free some space, or send "
          "it elsewhere", file=sys.stderr)
    _stdout_closed()   # (the unwritten rest would fail again, with a traceback, at exit)
    return 1


def _last_watch_line(args: argparse.Namespace, message: str, code: int) -> None:
    """``watch --json``'s last line when it fails: a script reading its lines sees why it ended."""
    if args.command == "watch" and getattr(args, "json", False):
        try:
            print(json.dumps({"time": round(time.time(), 3), "event": "state", "state": "failed",
                              "message": message, "exit_code": code}), flush=True)
        except OSError:   # (stdout closed: the message is on stderr)
            pass


# The descriptors of the standard streams closed at the start (``_open_closed_std_streams``).
closed_at_start: set[int] = set()


def stdout_needed(command: str, does: str, instead: str) -> None:
    """Refuses, before any work, a command whose output is the point (``does``: what it writes
    there) run with standard output closed (``>&-``; ``instead``: what to do). What it wrote went
    to /dev/null with exit 0: ask's answer (paid for), `export -`, `status` and `demo`, each
    refused in its own words, or not at all. A command whose work is the point (index, watch,
    vacuum) goes on, its lines lost."""
    if 1 in closed_at_start:
        raise StreamragError(f"standard output is closed (>&-), where `{command}` {does}, which would be "
                             f"lost; {instead}")


def _open_closed_std_streams() -> None:
    """A standard stream closed at the start (``2>&-``, ``>&-``, ``<&-``) is opened on
    /dev/null, before anything else opens a file: Python leaves ``sys.stderr`` None then, so
    ``print(file=sys.stderr)`` wrote to stdout (into ``--json``'s object), ``sys.stdout.write``
    raised AttributeError, and the next file opened (the index's lock file) took the free
    descriptor, where any write to the stream would have landed. What is sent to it is dropped
    (a command whose output is the point asks ``closed_at_start``: `export - >&-`, `ask Q >&-`)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            closed_at_start.add(fd)
        try:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:   # (the lowest free descriptor: fd itself unless a lower one is closed too)
                os.dup2(null, fd)
                os.close(null)
        except OSError:
            continue
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8",
                                    errors="backslashreplace", closefd=False))


def main(argv: list[str] | None = None) -> int:
    _open_closed_std_streams()
    for stream in (sys.stdout, sys.stderr):   # a terminal or pipe that cannot show a character
        with contextlib.suppress(AttributeError, ValueError):   # (PYTHONIOENCODING=ascii, a C locale)
            stream.reconfigure(errors="backslashreplace")      # gets \u escapes, not a traceback
    stdout, stderr = sys.stdout, sys.stderr
    if not isinstance(stdout, _Stdout):
        sys.stdout = _Stdout(stdout)
    if not isinstance(stderr, _Stderr):
        sys.stderr = _Stderr(stderr, sys.stdout)
    # Called with arguments (tests, a script's own Python) the caller's signal handlers are
    # given back; as the program, those set once a run is recorded stay while the process
    # ends (its last 0.1 s: a signal then made a published run exit 143).
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if argv is not None else {}
    _late_signals.clear()   # (a caller's earlier command's)
    try:
        return _main(argv)
    finally:
        try:
            signals.ending = _after_the_run   # (first: see _ending)
            _ending()
        except KeyboardInterrupt as e:   # one that came before _ending took its signal: taken as it takes one
            _late_signals.append(signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)
            signals.ending = _after_the_run
            _ending()
        if isinstance(sys.stderr, _Stderr) and sys.stderr.stream is stderr:
            sys.stderr = stderr
        if isinstance(sys.stdout, _Stdout) and sys.stdout.stream is stdout:
            sys.stdout = stdout
        for signum, handler in handlers.items():
            if handler is not None and signal.getsignal(signum) is not handler:
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(signum, handler)
        if argv is None:   # the program ends: Python puts back the default action of the signals
            for signum in (signal.SIGINT, signal.SIGTERM):   # it handles as it shuts down (its
                if signal.getsignal(signum) is _after_the_run:   # last 0.1 s), so one ignored
                    with contextlib.suppress(ValueError):      # then ended a published run
                        signal.signal(signum, signal.SIG_IGN)   # with -15, not 0


def _ending() -> None:
    """The command has returned (or raised): the entry point's SIGTERM handler (``__main__``,
    raising ``Terminated``), still there when no command took SIGTERM (``status``, ``export``),
    gives way to ``_after_the_run``, so that a SIGTERM as ``main`` ends leaves the exit status as
    it is, as for a recorded run: raised there, out of any ``except``, it was a traceback and
    exit 1 once `status` had printed its object. ``main`` first sets ``signals.ending``, which
    the handler then calls instead (an assignment: a call, even ``signal.signal``, lets a
    pending signal's handler run before it). Python's SIGINT handler gives way too (it was a
    KeyboardInterrupt out of the program, then a death by SIGINT, -2, after export's "wrote"
    line); it cannot be told to, so the Ctrl-C that comes before is raised here (``main``
    takes it)."""
    with contextlib.suppress(ValueError):   # (not the main thread: a library caller's)
        if signal.getsignal(signal.SIGTERM) is raise_terminated:
            signal.signal(signal.SIGTERM, _after_the_run)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _after_the_run)


def _interrupted(command: str | None, e: KeyboardInterrupt) -> int:
    """One line for a Ctrl-C (or a SIGTERM taken like one); the exit code."""
    if getattr(sys.stderr, "open", False):   # (one between a line and its end, as print writes
        print(file=sys.stderr)               # them apart: "... 38 reportsstreamrag: interrupted")
    # Stopped in the run after its big files' lead (``Indexer._lead``), whose version `ask` answers
    # from: "finished work is kept" alone left a user to think nothing of the run was published.
    first = getattr(e, "published_first", None)
    lead = f"; the run's other files were published first (version {first[0]}, without {first[1]})" \
        if first else ""
    print("streamrag: interrupted" + lead + ("; finished work is kept, run the same command to continue"
                                             if command in ("index", "watch", "demo") else
                                             "; the index is as it was (nothing given back)"
                                             if command == "vacuum" else ""),
          file=sys.stderr)
    return 128 + signal.SIGTERM if isinstance(e, Terminated) else 130


def _main(argv: list[str] | None) -> int:
    try:   # (the commands' modules load here: a Ctrl-C then was a traceback)
        parser = build_parser()
        if (helped := _help_of(parser, sys.argv[1:] if argv is None else argv)) is not None:
            helped.print_help()
            return 0
        args = _parse(parser, argv)
    except KeyboardInterrupt as e:
        return _interrupted(None, e)
    except _UsageExit as e:   # (`index --json` with no PATH: its object too, as ``_json_error`` prints)
        _usage_json_error(parser, sys.argv[1:] if argv is None else argv, e.said)
        raise
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    debug = (args.verbose
             or os.environ.get("STREAMRAG_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"))
    _show_logs(debug)
    try:
        return args.func(args)
    except (StreamragError, BaseExceptionGroup) as e:
        if _is_broken_pipe(e):
            return _stdout_closed()
        if not debug and (unwritten := _unwritten_output(e)) is not None:
            return _output_unwritten(unwritten)
        error = e if isinstance(e, StreamragError) else user_error(e)
        if error is None and isinstance(e, BaseExceptionGroup) and not debug:
            if (database := _database_error_only(e)) is not None:   # (raised inside a task group)
                return _failed(args, _database_failed(database), 1)
        if debug or error is None:
            raise
        code = 2 if isinstance(error, UsageError) else EXIT_BUSY if isinstance(error, WriterBusyError) else 1
        return _failed(args, str(error), code)
    except BrokenPipeError:
        return _stdout_closed()
    except OSError as e:
        if debug or _unwritten_output(e) is None:
            raise
        return _output_unwritten(e)
    except sqlite3.Error as e:
        if debug:
            raise
        return _failed(args, _database_failed(e), 1)
    except KeyboardInterrupt as e:   # (an estimate keeps nothing: nothing to continue)
        return _interrupted(None if getattr(args, "estimate", False) else args.command, e)
