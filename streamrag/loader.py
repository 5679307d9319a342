"""Reading files into Documents.

A document's id is the hash of its text, so a renamed file keeps its id and an edited one gets
a new id; the path is metadata. ``.jsonl`` and ``.csv`` files hold one document per row with
a non-empty text field (``index.text_field``), titled by its ``title`` field (on one line), else
its text's first line: a title is read as a name the document says (``joins.own_title``), so no
other field titles it (a "name" may be a row's author). Every other file is one document. A
file that cannot be used raises ``InputError`` with one line naming the file and the fix; the
caller records it and goes on. One over ``index.max_file_mb`` is never opened (``TooBig``): a
file is held whole, text and chunks, and a run publishes nothing before it is extracted.
Recoverable oddities (a legacy encoding, skipped rows) come back as warning strings instead.
``scan`` leaves out, with one such line each, names that are not valid UTF-8 (no such path
reaches the index), symlinks leading outside the indexed folder, broken symlinks, symlink
loops and entries that are not regular files (pipes, sockets, devices). Every path in a message
goes through ``_safe``, so one message is always one line. A Markdown file's
text is read as a reader sees it (``markdown``); ``VERSION`` covers that reading too. So is every
document's: without the characters no reader sees (``invisible``: a zero-width space inside a
word), its lines where they were, each ended by "\n" wherever ``str.splitlines`` ends one (a
vertical tab, U+2028; a paragraph separator, U+2029, and a form feed are a blank line; NEL,
U+0085, only in text read as Unicode: in Latin-1 it is byte 0x85, "…": ``_newlines``).
"""

from __future__ import annotations

import codecs
import collections
import csv
import errno
import fnmatch
import functools
import json
import logging
import math
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from streamrag.config import CONFIG_NAME, DEFAULT_INCLUDE, from_folder
from streamrag.errors import EmptyInput, InputError, NoTextField, NotText, UnreadableFile
from streamrag.exported import UNFINISHED, WHOLE, export_state, exported_head, written_by_export  # (told there, for export too)
from streamrag.ids import document_id
from streamrag.invisible import visible
from streamrag.records import Document
from streamrag.terminal import one_line as _safe, shell_word, shown, storable
from streamrag.words import counted

# (``legacy`` and ``markdown`` are imported by the functions that read a file with them, not
# above: compiling the legacy encodings' letter tables took 30 ms of CPU of every command that
# loads this module for a path to show, `ask` among them, which reads no file.)

_MARKDOWN = (".md", ".markdown")
TITLE_CHARS = 100
# How a file becomes documents: a new version re-reads every file (unchanged text keeps its ids).
# 3: text is composed (NFC); Markdown without its HTML comments. 4: a few bytes not UTF-8 in
# UTF-8 text are read as cp1252 alone; UTF-32; binary past the first 8 KB; NULs dropped; a CSV
# row's fields beyond the header's go back into its last column. 5: a leading --- block whose
# lines are not YAML is text, not front matter. 6: Markdown wikilinks read as the text they show;
# so are quotes and callouts (their marks taken off). 7: [[Note#H#H2]] is "Note > H > H2";
# a code span in double backticks keeps the link it shows; indented code is kept as written
# (CommonMark: not a list item's text), and so is code in a quote once the quote's marks are
# off, and fenced code where CommonMark opens it (after a list item's marker; never in a line of
# text four columns in); a quote in a list item ("1. > a") loses its marks. 8: indented code
# in a quote (">     code") is kept as written; a ``` four columns in a quote opens no code.
# 9: nor does one under a paragraph hide the HTML comments after it from being taken out; a
# line of no-break spaces is text, not a blank line; a lazy line goes on with its quote, and a
# quote after a list item holding one is a new quote. 10: a code block between %% lines
# (Obsidian's comment) is commented out, not code kept with its %% marks. 11: a wikilink in a
# front matter title reads as the text it shows; a raw HTML <textarea>, <script> or <style>
# keeps the "<!--" it holds (raw text: a browser shows it); a quote's list items are followed
# (indented code in one is kept), and a raw HTML block opens in a quote too; one of a block tag
# (<div> ...) is kept as written to a blank line; a code span of any number of backticks, or
# over a line break in its paragraph, is code; comments, quotes and links are read in one scan
# of the blocks as written (a comment opening a line is a block of its own; a <!-- that closes
# nowhere hides no block after it). 12: a backtick escaped by a backslash (\`) opens no code
# span; an HTML block of CommonMark's third to fifth kinds (<?...?>, <!DOCTYPE ...>,
# <![CDATA[...]]>) is kept as written; a comment running on from a callout's title leaves the
# title apart; UTF-32 without a byte-order mark is read (a binary file); CJK text in UTF-16
# without a byte-order mark is read as
# such (it was a binary file, or Latin-1 when it held no NUL), and so is text in an alphabet
# with fewer spaces than Latin's (Hebrew, Arabic, Thai, Devanagari, Persian with its
# non-joiners: a binary file), and one
# cut short or broken past its first bytes is not indexed (it was Latin-1 garbage); the
# characters no reader sees (``invisible``: zero-width spaces, soft hyphens ...) are taken out
# of every document. 13: a "> quote" line under a paragraph (or a deeper quote under a quote's)
# ends it, so a backtick in it closes no code span opened above (a comment after the open
# tick was read as code); a file not in UTF-8 is read in the legacy code page its letters say
# (``legacy``: cp1251, KOI8-R, ISO-8859-7, Shift-JIS, GBK, Big5, EUC-KR ...), when exactly one
# does (it was cp1252 garbage); UTF-16 without a byte-order mark in polytonic Greek, with
# combining accents, or in CJK with no punctuation in its first 8 KB is read (a binary file).
# 14: a file in ISO-2022-JP, ISO-2022-KR or HZ, said by its escape sequences, is read in it
# (``legacy.escaped``: it was ASCII garbage, "$BEl5~$O", or with ISO-2022-KR's shifts a binary file);
# fewer than 200 16-bit numbers among ideographs or Hangul are not UTF-16 text (``legacy.common``).
# 15: a few words of Western 8-bit text are not UTF-16 CJK text with no punctuation (``_WESTERN``:
# 14 read "canción schön to" in cp1252 as 捡湣槳渠獣棶渠瑯). 16: 16-bit numbers among Bopomofo,
# jamo, enclosed and compatibility characters (U+3100-U+33FF) are not UTF-16 text with no
# punctuation (``legacy.IDEOGRAPH_OR_SYLLABLE``: 15 read them as such). 17: UTF-16 or UTF-32 with
# its byte-order mark, cut short or broken, is not indexed (``_broken_after_mark``: a short one was
# read as cp1252, "ÿþAB", a long one said to be UTF-16 "without a byte-order mark"). 18: a file
# under 320 characters read as cp1252 or Latin-1 throughout with more than two control characters,
# or any and few spaces, is a binary file (``_short_and_binary``: a 64-byte digest was text);
# short cp1252 text with a digit zero is not UTF-16 CJK text (``_WESTERN``: "2031" read as kana).
# 19: a run of NULs opening or ending a file (a crash's unwritten end, a log rotated with
# copytruncate) is dropped and the text between read (``_NUL_RUN``: it was a binary file).
# 20: a run of binary bytes amid text (``_garbage_run``: a page of random bytes past the first
# 8 KB) makes a binary file, not text read as Latin-1 with its garbage indexed.
# 21: a file `streamrag export` wrote is no document, whatever its name (``exported_head``:
# `export - > x.txt` in the indexed folder was indexed, the index's output read as its input).
# 22: a file opening as a JSON export does, but not followed by a document's id and path (or no
# document and the entities), is read (a user's notes dumped with indent=1 were refused for ever).
# 23: an export is told by its whole content (``exported``: its seal, or an older export's form
# throughout), not its opening: a user's file that opened as one did was left out, never indexed.
# 24: an export cut short (no seal, no end, laid out as one as far as it goes) is left out: 23 read
# it as a document (22 did not).
# 25: CJK text in UTF-16 without a byte-order mark a fifth of whose 16-bit units hold a byte no
# Western text holds, its ideographs common ones, is read (``_not_western``: Japanese repeating a
# few kanji whose low bytes are under 0x80 was Latin-1 garbage, or a binary file, while its first
# 2 KB alone were read). A file holding ISO-2022 escape sequences it reads in no 7-bit encoding
# (ISO-2022-CN, or JP/KR cut short or mixed) is said to, with iconv's command (``_unread_escapes``:
# its escape codes were indexed, garbage, without a word), and one its shifts (SO, SI) alone made
# a binary file is refused with that command. A row's title cell over several lines is one line
# (``_one_line_title``: it was "Ada\nLovelace").
# 26: a file holding ISO-2022-CN's escape sequences is refused, with iconv's command, in long lines
# as in short (``_iso_2022_cn``: in long lines its escape codes were indexed, garbage, under a warning);
# ISO-2022-JP with half-width katakana (ESC ( I) is read (``legacy.ISO2022_JP_EXT``: its escape codes were).
# Titles (not indexed text, but read again with it): a first line ends at a line separator (``_title``);
# a row's title cell, a file's name and a front matter's title are composed (NFC) as text is (``_composed``).
# 27: ISO-2022-CN is refused only when iconv's command converts the file (``_iso_2022_cn_said``): amid
# UTF-8 or cp1252 text (one such line in an English file) 26 refused it with a command that failed; it is
# indexed under a warning, as before 26. A file read in a 7-bit encoding holding a stray ESC $ ) A is read.
# 28: a document's line ends where ``str.splitlines`` ends one (a vertical tab, a form feed, \x1c-\x1e,
# NEL, U+2028) are "\n", and a paragraph separator (U+2029) "\n\n" (``_newlines``): the extractor read
# across them as across a space, where the title ended (a file holding none keeps its text and ids).
# 29: a form feed is a blank line "\n\n", as U+2029 is (one "\n" still joined "Ada Lovelace\fAda was"
# as "Ada Lovelace Ada"); U+0085 is NEL, "\n", only in text read as Unicode: read as Latin-1 or
# ISO-8859-7 it is byte 0x85, kept ("waited\x85 then" was "waited\n then"). And read again: ISO-2022-CN
# that 27 and 28 refused with `iconv -f ISO-2022-CN`, which fails on it (an odd byte before an
# escape, ``_iconv_reads_gb2312``), remembered refused until touched; it is indexed under a warning.
# 30: a first line's title ends at no byte 0x85 read as Latin-1 or ISO-8859-7, which its text keeps
# (``_title``: "Ada\x85Lovelace wrote." was titled "Ada"), as ``joins.own_title`` reads it too.
# 31: a row's title cell read as Latin-1 or ISO-8859-7 ends no line at its byte 0x85 either
# (``_one_line_title``: "Ada\x85Lovelace" was "Ada Lovelace", where a first line's title keeps it).
VERSION = "31"
_SNIFF = 8192
# NULs in the first _SNIFF bytes that say UTF-16 without a byte-order mark, or a binary file; up
# to this many (and 1% of the bytes) are a text file's stray ones, dropped (one NUL in a file's
# first 8 KB made it binary).
_FEW_NULS = 8
# NULs a text file of any length may hold as strays, beyond 1% of a short one's bytes: a stray NUL
# or two amid a few lines of text.
_STRAY_NULS = 2
# ... but never more than one byte in this many: two NULs in a dozen bytes ("\0\0binary now") are
# no stray pair in a line of text.
_STRAY_SPACING = 20
# A run of at least this many NULs opening or ending a file is dropped, the text between judged as
# a file's whole (a log whose first or last blocks are zeros was a binary file, not indexed).
_NUL_RUN = 16
# Bytes of NULs written at a file's start read past to its text (a hole is skipped unread).
_NUL_SCAN = 1 << 20
# A character a JSON string escapes alone (``"\ud800"``), which no UTF-8 can hold: stored, it
# stopped the run (and the daemon) at the file.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

log = logging.getLogger(__name__)

csv.field_size_limit(2**31 - 1)   # a document in one cell may be far beyond csv's 128 KB default
# A read's ``check`` is called this many rows (or .jsonl lines) apart while they are parsed.
_CHECK_ROWS = 256
_CHECK_CHARS = 1 << 20   # (``_lines``: a stop is looked for once a megabyte of lines has gone by)


def scan(paths: list[Path], include: list[str], *, root: Path | None = None,
         exclude: Sequence[str] = (), skipped: list[str] | None = None,
         unlisted: list[tuple[Path, str]] | None = None,
         left_out: dict[str, int] | None = None, broken: list[Path] | None = None,
         gone: list[Path] | None = None, own: Sequence[Path] = (),
         copies: list[str] | None = None) -> list[Path]:
    """Files under ``paths`` matching ``include`` globs, sorted; hidden entries, those ``exclude``
    names (``excluded``) and loops skipped.

    A file named directly is taken whatever its name, even a symlink leading anywhere; folders
    are walked recursively. In a folder, these entries are left out with one line each naming
    it and the fix: a file or folder whose name is not valid UTF-8 (it could not be stored in the
    index), a symlink (to a file or a folder) that leads outside the folder being indexed (it
    could pull in a private file or a whole other tree), and, among names matching ``include``,
    a broken symlink, a symlink loop, or an entry that is not a regular file (a pipe, socket or
    device: never opened, reading one could block). The lines are appended to ``skipped`` when
    given, else logged as warnings. Paths in them are shown relative to ``root`` when given, as
    ``read_documents`` shows them. A path given directly that cannot be indexed at all (missing,
    a broken link, a pipe) raises ``InputError`` saying why; one that is not there (deleted, or
    a link that now leads nowhere) is appended to ``gone`` instead when given (the daemon names
    files as they change: one deleted since is no error).

    A folder that exists but cannot be listed (no permission) is appended to ``unlisted`` with
    the reason when given, so a caller can keep what was indexed from it; else it is a line of
    ``skipped`` too.

    Files of a folder that ``include`` does not match are counted by extension (``""``: none)
    in ``left_out`` when given (``left_out_lines``), but a settings file, ``own`` (the index's
    files, a custom prompt: ``one_of``), a tool's backup or temporary file (``leftover``) and
    a file `streamrag export` wrote (``written_by_export``), which are no documents.

    The symlinks of a folder matching ``include`` that lead nowhere (broken, or a loop) are
    appended to ``broken`` when given: ``watch`` syncs one when its target appears. The conflict
    copies its line names are appended to ``copies`` when given: ``watch`` names one that appears.
    """
    patterns = include_patterns(include)
    leave = exclude_patterns(exclude)
    found: set[Path] = set()
    problems: list[str] = []
    closed: list[tuple[Path, str]] = [] if unlisted is None else unlisted
    conflicts: list[str] = [] if copies is None else copies   # conflict copies met, as the index would name them
    # A file symlink into another folder given with this one leads nowhere new: it is taken.
    given = [os.path.realpath(p) for p in paths if os.path.isdir(p)]
    for path in map(Path, paths):
        if path.is_file():
            if storable(path.name):
                found.add(path)
            else:
                problems.append(_bad_name(path, root, "file"))
        elif path.is_dir():
            found.update(_walk(path, patterns, root, problems, closed, also=given, left_out=left_out,
                               broken=broken, exclude=leave, own=own, conflicts=conflicts))
        elif path.exists():
            raise InputError(f"{_safe(path.as_posix())}: not a regular file or folder (a pipe, socket "
                             "or device); give files or folders to index")
        elif gone is not None:   # deleted since it was named
            gone.append(path)
        elif path.is_symlink():   # it exists, but leads nowhere (broken, or a loop)
            raise InputError(f"{_safe(path.as_posix())}: {why_unusable(path)}")
        else:
            raise InputError(f"{_safe(path.as_posix())}: no such file or folder; check the path")
    if conflicts:
        problems.append(conflict_copies_line(conflicts))
    if unlisted is None:
        problems += [unlisted_line(f, why, root) for f, why in closed]
    for line in problems:
        if skipped is not None:
            skipped.append(line)
        else:
            log.warning("%s", line)
    return sorted(found, key=lambda p: p.parts)   # Path's own order, without its slow __lt__


# Formats documents are kept in. A folder's files in one that index.include leaves out are
# counted, so that `index` can say how to take them in: those not plain text by converting them,
# plain text ones by widening index.include (read as plain text, their markup stays).
NOT_TEXT_FORMATS = frozenset(".pdf .doc .docx .odt .rtf .epub .pages .ppt .pptx .odp .key .xls .xlsx "
                             ".ods .html .htm".split())
TEXT_FORMATS = frozenset(".rst .org .adoc .asciidoc .tex .mdx .text .textile .log".split())
DOCUMENT_FORMATS = NOT_TEXT_FORMATS | TEXT_FORMATS
# What a document's name ends in, those read by default too: an empty one given as --db is refused.
DOCUMENT_SUFFIXES = DOCUMENT_FORMATS | {g.removeprefix("*") for g in DEFAULT_INCLUDE} | {".json"}


# What editors, version control and sync tools leave beside a file while or after saving it: a
# backup (vim, emacs, gedit: "notes.txt~", "notes.txt.~1~"; ".bak", ".orig" and ".rej" of a merge
# or a patch), an autosave ("#notes.txt#"), a safe write's temporary file (JetBrains'
# "notes.txt___jb_tmp___" and "___jb_old___", ".tmp", a download's ".part" or ".crdownload"), a
# swap file, or an Office owner file ("~$report.docx"). Not indexed, as any file include does not
# take, and not counted as left out: each was said on the left-out line of every run.
_LEFTOVER_SUFFIXES = (".bak", ".orig", ".rej", ".tmp", ".part", ".crdownload", ".swp", ".swo", ".swx",
                      "___jb_tmp___", "___jb_old___")


def one_of(files: Iterable[Path | str]) -> Callable[[Path | str], bool]:
    """Whether a path is one of ``files``, both resolved (the index's own files, a custom prompt:
    no documents wherever they lie; ``_walk``'s count of the files left out, and
    ``store.without_index_files``); only a path named as one of them is resolved."""
    real = {os.path.realpath(f) for f in files}
    names = {os.path.basename(f) for f in real}
    return lambda path: os.path.basename(path) in names and os.path.realpath(path) in real


def leftover(name: str) -> bool:
    """Whether the file ``name`` is a tool's backup, autosave or temporary file (``_LEFTOVER_SUFFIXES``)."""
    lower = name.lower()
    return (lower.endswith("~") or lower.startswith("~$") or len(name) > 2 and name[0] == name[-1] == "#"
            or lower.endswith(_LEFTOVER_SUFFIXES))


# Files of each kind (suffix) that one ``_walk`` opens to tell an export from a file
# index.include leaves out: opening each of 20,000 .json records made a scan (and so each watch
# batch) 3.0 s, not 0.6 s. Exports are few; past these, a file of that kind is counted left out
# unopened (a large folder's count may then hold an export).
EXPORT_LOOKS = 16


class WrittenByExport(EmptyInput):
    """A file `streamrag export` wrote, read as a document: nothing to index. Said once, when first
    seen or changed (``again``): it stays in the folder, and every `index` said it again."""

    again = False


class UnfinishedExport(WrittenByExport):
    """The start of an export cut short (``exported.UNFINISHED``): the index's output all the same."""


_EXPORT_SAID = ": written by `streamrag export`, the index's own output, not a document; nothing to index"
_UNFINISHED_SAID = (": written by `streamrag export` and cut short (no end: stopped, or still written), the "
                    "index's own output, not a document; nothing to index")


def written_by_export_line(label: str) -> str:
    """What is said of a file `streamrag export` wrote, read as a document (``label``: its path as
    messages show it): said when it is read, not again while it stays as it was (``again``)."""
    return label + _EXPORT_SAID


def unfinished_export_line(label: str) -> str:
    """What is said of the start of an export cut short, read as a document (as ``written_by_export_line``)."""
    return label + _UNFINISHED_SAID


def export_said(line: str) -> str | None:
    """The label of the file a warning ``line`` says is an export, whole or cut short, else ``None``."""
    for said in (_EXPORT_SAID, _UNFINISHED_SAID):
        if line.endswith(said):
            return line[:-len(said)]
    return None


# What a sync tool leaves beside a file edited in two places at once: the version that lost, as
# a copy under another name. It keeps the include's suffix, so it was indexed as a document of its
# own: its text, nearly the document's, doubled the document's entities, claims and citations, and
# an answer quoted whichever version it met. It is not indexed; the scan names such copies on one
# line (``conflict_copies_line``), as a thing to resolve, not a file to pass over without a word as
# a backup is. Each form needs its tool's date, or, Dropbox's English one, its owner's name right
# before the words ("(Ann's conflicted copy)"), so that a title that only says the words ("Essay
# (a conflicted copy of myself).md", "notes (copy).txt") is still a document:
# - Syncthing: "notes.sync-conflict-20240115-103000-ABCDEF1.txt";
# - ownCloud's and Nextcloud's clients before 2.5: "notes_conflict-20240115-103000.txt";
# - since 2.5: "notes (conflicted copy 2024-01-15 103000).txt", the user's name before the date in
#   Nextcloud's; these words are never translated;
# - Dropbox: "notes (Ann's conflicted copy 2024-01-15).txt", in the language of the app that made
#   it: "(Anns in Konflikt stehende Kopie ...)", "(Copie en conflit de Ann ...)", "(Copia en
#   conflicto de Ann ...)", "(Copia in conflitto di Ann ...)". Only the languages whose copies'
#   names were seen written are here; a copy named in another language is indexed as a document.
#   Some are undated: "Notes (User B's conflicted copy).docx" (the owner's possessive, the words,
#   then ")" and nothing between); seen in English only, so the other languages still need the date.
#   The possessive is a word no quote opens ("(the 'final' conflicted copy)" ends a quote), and
#   no "it's": such titles were taken for copies and left out.
_CONFLICTED_COPY_WORDS = ("conflicted copy", "in konflikt stehende kopie", "copie en conflit",
                          "copia en conflicto", "copia in conflitto")
_WORD = r"[^\s()'\"`\u2018\u2019\u201c\u201d][^\s()]*?"
"""A word in a copy's parentheses that no quote opens: the owner's possessive is one ("User B's"),
and a quote closing a quoted word ("(the 'final' conflicted copy)") is no possessive."""
_CONFLICT_COPY = re.compile(r"\.sync-conflict-\d{8}-\d{6}(?:-[a-z0-9]+)?(?:\.|$)"
                            r"|_conflict-\d{8}-\d{6}(?:\.|$)"
                            r"|\((?:[^()]*\s)?(?:" + "|".join(_CONFLICTED_COPY_WORDS) + r")\b"
                            r"[^()]*\s\d{4}-\d{2}-\d{2}(?: \d{6})?\)"
                            r"|\((?:" + _WORD + r"\s+)*(?!(?:it|that|there|here|what|who|let)['\u2019]s\s)"
                            + _WORD + r"(?:['\u2019]s|s['\u2019]) conflicted copy\)", re.IGNORECASE)


def conflict_copy(name: str) -> bool:
    """Whether the file ``name`` is a sync tool's conflict copy (``_CONFLICT_COPY``)."""
    return _CONFLICT_COPY.search(name) is not None


def taken_name(name: str, rel: str, patterns: list[str]) -> bool:
    """Whether the folder scan takes a file of ``name`` at ``rel`` (its path from the indexed
    folder) by its name: ``patterns`` (index.include) match it, and it is no conflict copy."""
    return name_or_path_matches(name, rel, patterns) and not conflict_copy(name)


def conflict_copies_line(paths: Sequence[str]) -> str:
    """The scan's line for the conflict copies at ``paths`` (as the index names files), the
    first three named, their control characters escaped."""
    named = ", ".join(map(_safe, paths[:3])) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    one = len(paths) == 1
    return (f"{named}: {'a sync conflict copy' if one else f'{len(paths)} sync conflict copies'} (Syncthing, "
            f"Dropbox, Nextcloud, ownCloud), not indexed as {'it repeats its document' if one else 'they repeat their documents'}; "
            f"merge what {'it holds' if one else 'each holds'} into the document, then delete "
            f"{'it' if one else 'them'} (or rename one to index it)")


def scan_order(root: Path, rel: str) -> tuple:
    """Where ``scan`` of the folder ``root`` meets the file at ``rel`` (its path from ``root``), as
    a key to sort such paths in the order of its lines (the conflict copies'): a folder's files by
    name, then its folders, depth first; the folders reached through a symlink after all that, in
    the order the walk met their links, each walked so, and those met in them after them."""
    *folders, name = rel.split("/")
    legs: list[list[tuple[int, str]]] = [[]]   # the way from ``root``, cut at each folder symlink
    at = root
    for folder in folders:
        at = at / folder
        if os.path.islink(at):
            legs[-1].append((0, folder))   # (met among its folder's entries, walked last)
            legs.append([])
        else:
            legs[-1].append((1, folder))
    legs[-1].append((0, name))
    return (len(legs), *map(tuple, legs))


def left_out_lines(left_out: dict[str, int], include: Sequence[str]) -> list[str]:
    """What to do about the files ``scan`` counted in ``left_out``: a line per kind of format
    (``include``: the index.include in use, which the advice extends)."""
    def by_kind(kinds: list[str]) -> str:   # ("3 .pdf, 1 .docx")
        return ", ".join(f"{left_out[k]} {k}" for k in kinds)

    def them(kinds: list[str]) -> str:   # ("left out 1 .pdf (...: convert them" said of one file)
        return "it" if sum(left_out[k] for k in kinds) == 1 else "them"

    other = sorted((k for k in left_out if k in NOT_TEXT_FORMATS), key=lambda k: (-left_out[k], k))
    # (a kind read by default, .md or .csv, left out by a narrower include is plain text too:
    # it was said to be "not documents")
    text = sorted((k for k in left_out if k in TEXT_FORMATS or k in DOCUMENT_SUFFIXES - DOCUMENT_FORMATS - {".json"}),
                  key=lambda k: (-left_out[k], k))
    # Every other file left out is counted too: a .json was neither indexed nor said.
    rest = sorted((k for k in left_out if k not in DOCUMENT_SUFFIXES),
                  key=lambda k: (-left_out[k], not k, k))   # ("no suffix" after the suffixes it ties with)
    lines = []
    if other:
        lines.append(f"{by_kind(other)} (not plain text: convert {them(other)} to .txt or .md, with "
                     f"pdftotext or pandoc for example, to index {them(other)})")
    if text:
        wider = ", ".join(f'"{p}"' for p in [*include, *(f"*{k}" for k in text)])
        lines.append(f"{by_kind(text)} (plain text that index.include leaves out; to index {them(text)}, set "
                     f"include = [{wider}] under [index])")
    if ".json" in left_out:
        lines.append(f"{by_kind(['.json'])} (JSON that index.include leaves out; to index its records, write "
                     "them to a .jsonl file, one object a line with its text under index.text_field)")
    if rest:
        lines.append(_not_documents(rest, left_out))
    return lines


def _not_documents(kinds: list[str], left_out: dict[str, int]) -> str:
    """The left-out line of files in no format streamrag reads (images, code ...), the most
    frequent kinds named: they need nothing done, but each file not indexed is accounted for."""
    n = sum(left_out[k] for k in kinds)
    named = [k or "no suffix" for k in kinds[:4]] + ([f"{len(kinds) - 4} more kinds"] if len(kinds) > 4 else [])
    return f"{counted(n, 'other file', grouped=False)} ({', '.join(named)}: not documents, not indexed)"


def unstorable_folder(path: Path) -> str | None:
    """Why the folder (or file) ``path`` cannot hold an index's documents, if its absolute path
    is not valid UTF-8 (its files' paths, and the index's record of it, could not be stored)."""
    if storable(str(path.absolute())):
        return None
    return (f"{shown(path)}: its path is not valid UTF-8, so nothing under it can be indexed; rename "
            "it (or the folder above it that is not) to a UTF-8 name")


_ROW = re.compile(r"(.+\.(?:jsonl|csv))#\d+", re.IGNORECASE | re.DOTALL)


def file_of(stored: str) -> str:
    """The file an indexed path is of: a row's file (``data.jsonl#3``: ``data.jsonl``; rows are
    numbered, and only .jsonl and .csv files have them), else the path itself (``a.md#2.md`` is
    a file's name)."""
    row = _ROW.fullmatch(stored)
    return row.group(1) if row else stored


def _bad_name(path: Path, root: Path | None, kind: str) -> str:
    return (f"{_safe(stored_path(path, root))}: {kind} name is not valid UTF-8, so it is not indexed; "
            f"rename the {kind} (e.g. with `mv`) to a UTF-8 name")


def unlisted_line(folder: Path, why: str, root: Path | None) -> str:
    """The line ``scan`` says a folder it could not list with (one of its ``unlisted``)."""
    return (f"{_safe(stored_path(folder, root))}: cannot list the folder ({why}), so its files are "
            f"not indexed; {unlisted_fix(why)}")


def unreadable_line(label: str, why: str, *, kept: bool) -> str:
    """The line for a file the system would not read or look at (``label``: its path as shown,
    ``why``: the system's reason), saying what is true of the index: ``kept``, what was indexed
    from it stays; else nothing was, so it is not indexed."""
    return f"{label}: {_unreadable_said(why, kept=kept)}"


def _unreadable_said(why: str, *, kept: bool) -> str:
    """``unreadable_line`` after the path: the one wording of a file the system would not read or
    look at, in `index`, `watch` and `status` (a file the scan could not look at was said
    "cannot be read (...), not indexed; check that it is readable", a third wording)."""
    told = "; what was indexed from it stays" if kept else ", so it is not indexed"
    return f"cannot read ({_safe(why)}){told}; check that it exists and is readable (its permissions, and its folder's)"


def failure_line(label: str, e: InputError, *, kept: bool) -> str:
    """What `index` says of a file ``read_documents`` could not use (``e``; ``label``: its path
    as shown), and ``index --estimate`` as it: ``kept``, what was indexed from it stays (a file
    the system would not read, or rows as indexed without the text field named now)."""
    if kept and isinstance(e, UnreadableFile):
        return unreadable_line(label, e.why, kept=True)
    return f"{e}; what was indexed from it stays" if kept and isinstance(e, NoTextField) else str(e)


def unlisted_fix(why: str) -> str:
    """What to do about a folder the scan could not list for the reason ``why`` (``scan``'s
    ``unlisted``): a path too long for the system is no matter of permissions."""
    if why == os.strerror(errno.ENAMETOOLONG):
        return "its path is too long for the system: move the folder up or shorten its folders' names"
    return "check its permissions"


def why_unusable(path: Path | str) -> str:
    """Why ``path``, which is neither a folder nor a regular file, or is a symlink that leads to
    neither (or a file the scan found that is a folder now), is not indexed. Only looked at (``stat``), never opened: opening a pipe blocks."""
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "symlink loop, not indexed; fix or remove the link"
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            try:
                target = os.readlink(path)
            except OSError:
                target = "a missing file"
            return f"broken symlink to {_safe(target)}, not indexed; fix or remove the link"
        return _unreadable_said(e.strerror or str(e), kept=False)
    if stat.S_ISDIR(st.st_mode):   # (a file replaced by a folder since the scan was said a pipe)
        return "is a folder now (it was a file when the folder was scanned), not read; the next run looks inside it"
    return "not a regular file (a pipe, socket or device), not indexed; remove it, or add it to index.exclude"


def include_patterns(include: list[str] | None) -> list[str]:
    """``index.include`` as ``matches`` takes it: lower-case, and ``**/`` matching no folder as
    well as any ("**/*.txt" left out every .txt at the top of the folder, and a second run took
    them out of the index without a word; "docs/**/*.md" left out docs/a.md). A path written
    from the folder as "/docs/*.md" or "./docs/*.md" is "docs/*.md" (it matched nothing)."""
    patterns = [from_folder(p.lower()) for p in (include or DEFAULT_INCLUDE)]
    more = [p[3:] for p in patterns if p.startswith("**/") and p[3:]]
    more += [p.replace("/**/", "/") for p in patterns + more if "/**/" in p]
    return patterns + [p for p in dict.fromkeys(more) if p not in patterns]


def exclude_patterns(exclude: Sequence[str]) -> list[str]:
    """``index.exclude`` as ``excluded`` takes it: as ``include_patterns`` makes them, and a
    folder's trailing ``/`` dropped."""
    return [p.rstrip("/") for p in include_patterns(list(exclude))] if exclude else []


def excluded(rel: str, patterns: Sequence[str], *, folders: bool = True) -> bool:
    """Whether ``rel``, a path from the indexed folder, is left out by ``patterns``
    (``exclude_patterns``): its name or its path matches one, case aside, or, with ``folders``,
    those of a folder it lies in ("Templates" leaves out Templates/Daily.md)."""
    if not patterns:
        return False
    parts = rel.lower().split("/")
    for i in range(0 if folders else len(parts) - 1, len(parts)):
        path = "/".join(parts[:i + 1])
        if any(fnmatch.fnmatchcase(parts[i], p) or fnmatch.fnmatchcase(path, p) for p in patterns):
            return True
    return False


def matches(path: Path, root: Path, patterns: list[str]) -> bool:
    """Whether ``path`` (under ``root``) matches one of ``patterns`` (lower-case), by its name or
    its path from ``root``, as the folder scan takes files."""
    rel = _under(os.fspath(path), os.fspath(root)) or path.relative_to(root).as_posix()
    return name_or_path_matches(path.name, rel, patterns)


def name_or_path_matches(name: str, rel: str, patterns: list[str]) -> bool:
    """Whether a file's ``name`` or its path ``rel`` matches one of ``patterns`` (lower-case)."""
    name = name.lower()
    if any(fnmatch.fnmatchcase(name, p) for p in patterns):
        return True
    rel = rel.lower()
    return any(fnmatch.fnmatchcase(rel, p) for p in patterns)


@functools.lru_cache(maxsize=64)
def _normalised(root: Path | str) -> str:
    return os.fspath(Path(root))


def _under(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` (POSIX separators) by their text alone, when it plainly
    lies under it; None when that takes pathlib (relative against absolute, ".."). Both must
    be normalised as ``Path`` gives them (no "//" nor "/./")."""
    prefix = root if root.endswith(os.sep) else root + os.sep
    if not path.startswith(prefix) or root in ("", "."):
        return None
    rest = path[len(prefix):]
    if not rest or ".." in rest.split(os.sep):
        return None
    return rest.replace(os.sep, "/")


def _inside(real: str, top: str) -> bool:
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def leads_outside(path: Path | str, top: Path | str) -> bool:
    """Whether ``path`` lies outside the folder ``top`` once every symlink on its way is followed:
    a link to a file elsewhere, or any file under a link to a folder elsewhere. The scan leaves
    such a file out of a folder, and so must everything else that reads the folder."""
    return not _inside(os.path.realpath(path), os.path.realpath(top))


def leads_outside_line(link: Path, root: Path | None, top: Path, *, folder: bool) -> str:
    """The warning for the symlink ``link``, to a folder or a file, that leads outside the folder
    ``top`` scanned: the scan's, and watch's when such a link appears (the same words, said once)."""
    # The folder named absolute, as "leads outside . (to ...)" was not.
    named = _safe(Path(os.path.abspath(top)).as_posix())
    if folder:
        return (f"{_safe(stored_path(link, root))}: folder symlink leads outside {named} (to "
                f"{_safe(os.path.realpath(link))}), so it is not followed; index that folder itself if you want it")
    return (f"{_safe(stored_path(link, root))}: file symlink leads outside {named} (to "
            f"{_safe(os.path.realpath(link))}), so it is not indexed; copy the file in, or index its folder "
            "too by naming it as another PATH")


def _walk(top: Path, patterns: list[str], root: Path | None, problems: list[str],
          unlisted: list[tuple[Path, str]], also: Sequence[str] = (),
          left_out: dict[str, int] | None = None, broken: list[Path] | None = None,
          exclude: Sequence[str] = (), own: Sequence[Path] = (),
          conflicts: list[str] | None = None) -> list[Path]:
    """Files under the folder ``top``, by real folders first, then by folder symlinks; what
    ``exclude`` names (``exclude_patterns``) is not looked into. A conflict copy include takes
    (``conflict_copy``) is not taken: its path is appended to ``conflicts`` when given.

    A folder symlink is followed only when its target lies inside ``top``, and only to a folder
    not walked yet, so a file is found once and under its real path where it has one. A file
    symlink is taken only when its target lies inside ``top``, or inside one of the folders
    ``also`` (real paths) given with it.
    """
    out: list[Path] = []
    top_real = os.path.realpath(top)
    # include and exclude paths are read from the indexed folder, as watch reads them, when
    # ``top`` lies in it (`index DIR/docs` into DIR's index); else from ``top`` (`index a b`).
    # ``lead``: ``top``'s path from there, by text, else by real paths (`cd DIR; index docs`,
    # the index's folder resolved, or DIR reached through a symlink), as ``stored_path`` has it.
    # A folder is walked with its path from there (its entries': that and their names), made
    # once per folder, not once or twice per entry from the entry's whole path.
    lead = _lead(top, top_real, root)

    def inside(path: Path) -> bool:   # a file symlink's target: in ``top`` or a folder ``also``
        return any(_inside(os.path.realpath(path), t) for t in (top_real, *also))

    is_own = one_of(own)   # (the index's files, a custom prompt: never counted as left out)
    looked: dict[str, int] = {}   # files opened by kind to tell an export (``EXPORT_LOOKS``)

    def exported(path: Path, kind: str) -> bool:   # ``written_by_export``, within the budget
        if looked.get(kind, 0) >= EXPORT_LOOKS:
            return False
        looked[kind] = looked.get(kind, 0) + 1
        return written_by_export(path)

    seen: set[tuple[int, int]] = set()
    links: list[tuple[Path, str]] = []   # (folder, its path from the indexed folder, with a closing "/")
    pending = [(top, lead)]
    while pending or links:
        if pending:
            folder, prefix = pending.pop()
        else:
            folder, prefix = links.pop(0)
            target = os.path.realpath(folder)
            if not _inside(target, top_real):
                problems.append(leads_outside_line(folder, root, top, folder=True))
                continue
        try:
            st = os.stat(folder)
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTDIR):   # not gone while walked: closed
                unlisted.append((Path(folder), _safe(e.strerror or str(e))))
            continue
        if (st.st_dev, st.st_ino) in seen:   # a symlink loop or a second way in
            continue
        seen.add((st.st_dev, st.st_ino))
        subdirs: list[tuple[Path, str]] = []
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            rel = prefix + name   # from the indexed folder (or ``top``)
            if exclude and excluded(rel, exclude, folders=False):
                continue   # (the folders above it were looked at as they were met)
            try:
                is_link = entry.is_symlink()
            except OSError:
                continue
            try:
                is_dir = entry.is_dir()
                is_file = not is_dir and entry.is_file()
            except OSError:   # a symlink loop: neither, said below
                is_dir = is_file = False
            if is_dir:
                path = folder / name
                if not storable(name):
                    problems.append(_bad_name(path, root, "folder"))
                elif is_link:
                    links.append((path, rel + "/"))
                else:
                    subdirs.append((path, rel + "/"))
                continue
            if not name_or_path_matches(name, rel, patterns):
                kind = os.path.splitext(name)[1].lower()
                if (left_out is not None and is_file and storable(name) and name != CONFIG_NAME
                        and not is_own(os.path.join(folder, name))
                        and not leftover(name) and (not is_link or inside(folder / name))
                        and not exported(folder / name, kind)):
                    left_out[kind] = left_out.get(kind, 0) + 1   # a file the index would take
                continue
            path = folder / name
            if not storable(name):
                problems.append(_bad_name(path, root, "file"))
            elif conflict_copy(name):
                if conflicts is not None:
                    conflicts.append(stored_path(path, root))   # (escaped by its line: ``watch`` looks at it)
            elif not is_file:   # broken symlink, symlink loop, pipe, socket, device
                problems.append(f"{_safe(stored_path(path, root))}: {why_unusable(path)}")
                if is_link and broken is not None and not os.path.exists(path):
                    broken.append(path)
            elif is_link and not inside(path):
                problems.append(leads_outside_line(path, root, top, folder=False))
            else:
                out.append(path)
        pending.extend(reversed(subdirs))
    return out


def _lead(top: Path, top_real: str, root: Path | None) -> str:
    """The path of the folder ``top`` from the indexed folder ``root`` with a closing "/" ("" for
    ``root`` itself, or when ``top`` does not lie in it)."""
    if root is None or top == root:
        return ""
    rel = _under(os.fspath(top), os.fspath(root))
    if rel is None:
        root_real = os.path.realpath(root)
        if not _inside(top_real, root_real) or top_real == root_real:
            return ""
        rel = os.path.relpath(top_real, root_real).replace(os.sep, "/")
    return rel + "/"


def _going_on() -> None:
    """A read's ``check`` when none is given: nothing stops it."""


def read_documents(path: Path, *, root: Path | None, text_field: str = "text",
                   st: os.stat_result | None = None, limit: int | None = None,
                   max_mb: float = 0, check: Callable[[], None] = _going_on) -> tuple[list[Document], list[str]]:
    """The documents in one file and any warnings; ``InputError`` if the file cannot be used.

    ``st``: the file's ``os.stat`` as the caller has just taken it (the loader, which compares
    it with the index first), not taken again; else it is taken here. ``limit``: at most that
    many bytes read (the opening of a file, read as the whole would be as far as it goes: its
    last document, and character, may be cut short). ``max_mb``: ``index.max_file_mb``, a file
    over which is ``TooBig``, never opened (0: no limit). ``check`` is called between the steps
    of the reading (and every few rows): what it raises stops it (a big file read in a worker
    thread whose run was cancelled, which Python waits for as it exits: ``extraction_stage``)."""
    path = Path(path)
    shown = stored_path(path, root)   # the path stored; ``label``: it as messages show it
    label = _safe(shown)
    if not storable(shown):   # scan leaves such files out; a caller naming one gets the same line
        raise InputError(f"{label}: path is not valid UTF-8, so it is not indexed; "
                         "rename the file or folder to a UTF-8 name")
    try:
        st = st or os.stat(path)
        if not stat.S_ISREG(st.st_mode):   # made a pipe since the scan: opening it waits
            raise InputError(f"{label}: {why_unusable(path)}")
        if max_mb and st.st_size > max_mb * MB:
            raise TooBig(too_big_line(label, st.st_size, max_mb))
        with path.open("rb") as f:
            start, head = _past_leading_nuls(f)
            # Judged before the rest is read (a 3 GB sparse file took 3 GB), without the NULs its
            # first bytes end with (a short file's may be its crash's end).
            if _clearly_binary(_without_trailing_nuls(head)[0]):
                _refuse_nul_run(head, label, rest=f, upto=None if limit is None else limit - len(head))
                _binary(label)
            if not start and exported_head(head):   # (under a name index.include takes: x.txt)
                told = export_state(f)
                if told == WHOLE:
                    raise WrittenByExport(written_by_export_line(label))
                if told == UNFINISHED:   # (indexed, it cost a model's calls; the next export replaces it)
                    raise UnfinishedExport(unfinished_export_line(label))
            f.seek(start)   # (the whole read at once: the head and the rest joined were a second copy)
            data = f.read() if limit is None else f.read(limit)
    except OSError as e:
        why = e.strerror or str(e)
        raise UnreadableFile(unreadable_line(label, why, kept=False), why=why) from None
    if limit is not None and len(data) >= limit:
        data = _without_cut_character(data)
    check()
    warnings: list[str] = []
    data, end = _without_trailing_nuls(data)
    if start or end:
        warnings.append(_nul_runs_line(label, start, end))
    text, unicode = _decode(data, label, warnings, os.fspath(path), check)
    held = [text]
    del data, text   # (a big file's bytes, not kept beside its text)
    suffix = path.suffix.lower()
    check()
    # (once they are let go: a CRLF file's were held beside two copies of its text)
    text = _newlines(held, breaks=suffix not in (".jsonl", ".csv"), nel=unicode)
    check()
    if suffix not in _MARKDOWN:   # (Markdown's once read: "``\u200b`" in code shows a fence)
        text = _seen(text, label, check)
        check()
    if _blank(text):   # (spaces and line ends alone: said "empty file", of bytes)
        what = "only white space" if text else "empty file"
        raise EmptyInput(f"{label}: {what}, nothing to index")
    if suffix in (".jsonl", ".csv"):
        rows = (_jsonl_rows if suffix == ".jsonl" else _csv_rows)(text, label, warnings, check)
        del text   # (the rows hold what is kept of it)
    else:
        title = None
        if suffix in _MARKDOWN:
            from streamrag import markdown   # (here, not above: see the note on the imports)

            text, title = markdown.front_matter(text)
            check()
            text = _seen(markdown.readable(text, check), label, check)   # as a reader sees it
            title = _composed(visible(title)) if title else title   # (a mark left by a character taken out)
            if _blank(text):
                raise EmptyInput(f"{label}: no text outside front matter, comments and embeds "
                                 "(![[...]]), nothing to index")
        title = title[:TITLE_CHARS] if title else _title(text, _composed(path.stem))
        check()
        return [Document(id=document_id(text, check), path=shown, title=title, text=text)], warnings
    return _row_documents(rows, shown, path.stem, text_field, warnings, nel=unicode, check=check), warnings


class TooBig(InputError):
    """A file over ``index.max_file_mb``: left out unread, said on each run while it stays so.
    Its failure is recorded as a kind of its own, so that it is looked at again, never remembered
    as an unusable file is (``index_rows.failed_reads``): a stat tells it, and a higher setting
    reads the file as it is. It was told by its line's words, which a rewording would have
    made an unusable file's again (the rows so recorded are of this kind: ``store._failures_too_big``)."""

    kind = "too_big"


# A file's whole text is held at once (its bytes, its text, its chunks), and nothing of a run is
# published before its every file is extracted: a 200 MB log (75,000 chunks, with a model as
# many calls) was not indexed offline after 15 minutes, nor were the five notes beside it.
MB = 1 << 20


def too_big_line(label: str, size: int, max_mb: float) -> str:
    """What is said of a file of ``size`` bytes over ``max_mb`` (``label``: its path as shown),
    as a binary file is: what it is, and the setting that would take it."""
    shown = f"{size / MB:,.1f} MB" if size >= MB else f"{size / 1024:,.1f} KB"
    return (f"{label}: {shown}, over index.max_file_mb ({max_mb:g}), not indexed; set index.max_file_mb = "
            f"{math.ceil(size / MB)} "
            "(or 0: no limit) to index it, or add it to index.exclude")


def _without_cut_character(data: bytes) -> bytes:
    """``data``, a file's opening cut short, without the character its end cut in two: half a
    UTF-16 surrogate pair (or unit) or UTF-32 unit, as its byte-order mark says (or, without
    one, wide text's NULs), else a UTF-8 sequence's first bytes. Read as a whole file is
    (``_decode``), the cut UTF-16 was refused ("not UTF-16, so it is not indexed"), and the cut
    UTF-8 read as stray cp1252 bytes."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            width = 4 if codec == "utf-32" else 2
            data = data[:len(data) - len(data) % width]
            if width == 2 and len(data) > 2:
                high = data[-1] if bom == codecs.BOM_UTF16_LE else data[-2]
                if 0xD8 <= high <= 0xDB:   # (a pair's first half: its second was cut off)
                    data = data[:-2]
            return data
    if _many_nuls(data[:_SNIFF]):   # (UTF-16 without a mark, either byte order: a character more may go)
        data = data[:len(data) - len(data) % 2]
        return data[:-2] if len(data) > 2 and (0xD8 <= data[-1] <= 0xDB or 0xD8 <= data[-2] <= 0xDB) else data
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:   # (not a continuation byte: a sequence's first)
            need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
            return data[:-back] if need > back else data
    return data


def stored_path(path: Path, root: Path | None) -> str:
    """How the index names ``path``: relative to ``root`` when inside it, else absolute (so a
    file of another folder given with the root, ``index a b``, never looks like one under it)."""
    if root is None:
        return Path(path).as_posix()
    # Cheapest first: the text of the two (as scan gives them), then pathlib, and resolving (a
    # system call per path component) only when the others fail.
    path = path if isinstance(path, Path) else Path(path)
    top = _normalised(root)
    rel = _under(os.fspath(path), top)
    if rel is not None:
        return rel
    if path.parts and not path.is_absolute() and ".." not in path.parts and (top == "." or os.path.isabs(top)):
        # `index .` names the folder absolute and its files as the scan found them, relative:
        # their text from here, what ``absolute`` below makes of them (80 ms of CPU through
        # pathlib for 3,000 unchanged files)
        here = os.getcwd()
        rel = _under(os.path.join(here, os.fspath(path)), here if top == "." else top)
        if rel is not None:
            return rel
    if ".." in path.parts:   # `n/s/../a.txt` is n/a.txt, not a second file "s/../a.txt"
        path = path.parent.resolve() / path.name
    for p, r in ((path, Path(root)), (path.absolute(), Path(root).absolute())):
        try:
            return p.relative_to(r).as_posix()
        except ValueError:
            continue
    resolved = path.resolve()
    try:
        return resolved.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def _are(n: int) -> str:
    """The verb of a count's line: "1 byte is", "2 bytes are"."""
    return "is" if n == 1 else "are"


def _blank(text: str) -> bool:
    """``not text.strip()``, without a copy of a big file's text."""
    return not text or text.isspace()


def _seen(text: str, label: str, check: Callable[[], None] | None = None) -> str:
    """``text`` without the characters no reader sees (``invisible``); a file holding text
    but nothing else is said to (``label``: its path as messages show it), not "empty file".
    ``check``: the read's (``read_documents``)."""
    seen = visible(text, check)
    if _blank(seen) and not _blank(text):
        raise EmptyInput(f"{label}: nothing but characters no reader sees (zero-width spaces, word joiners, "
                         "soft hyphens), nothing to index")
    return seen


def _decode(data: bytes, label: str, warnings: list[str], read_from: str,
            check: Callable[[], None] = _going_on) -> tuple[str, bool]:
    """The text of ``data``, its line ends as written (``_newlines`` makes them "\\n"), and whether
    it was read as Unicode (UTF-8, -16, -32: its U+0085 is NEL, a line end; read as Latin-1 or
    ISO-8859-7 it is byte 0x85, cp1252's "…" in another code page, ``_newlines``); ``label``
    is the file's path as messages show it (``_safe``), ``read_from`` as it was read (the
    commands a warning gives name it: ``_iconv``).

    A byte-order mark says the encoding (UTF-32's before UTF-16's, which it starts with); NULs
    early on are UTF-32 or UTF-16 without one, or a binary file. Else UTF-8, or, when it is not, UTF-16
    without a byte-order mark if it reads as CJK text (``_utf16_codec``); a file of ASCII whose
    escape sequences say a 7-bit CJK encoding is read in it (``_escaped``); a file that is UTF-8
    but for a few stray bytes (a Windows quote pasted in) keeps its UTF-8 and reads those as
    cp1252, and one with no UTF-8 beyond ASCII is read in the legacy code page its letters say
    (``legacy``), else cp1252 (or Latin-1) throughout. Text full of
    control characters, wherever they begin, is a binary file, and so is text holding a run of
    binary bytes (``_garbage_run``), but for ISO-2022 text whose shifts alone are so many,
    refused with iconv's command (``_refuse_unread_escapes``). ISO-2022-CN, which Python does not
    read, is refused with that command when iconv converts the file, else indexed as written under
    a warning (``_iso_2022_cn_said``: amid UTF-8 text, the command failed). A few NULs are dropped.
    ``check``: the read's, called as its slices are read (an 80 MB file in cp1251 was judged for
    seconds between two checks)."""
    text = None
    eight_bit = False   # (read as UTF-8, cp1252 or a legacy code page: its escape sequences are bytes)
    unicode = True
    cn_stop = _cn_stop(data)   # (asked twice of a file, by the binary test and by the warning: run once)
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(codec)
            except UnicodeDecodeError as e:
                broken = e.start
            else:
                break
            # (Judged out of the except block: the error holds a copy of the whole file's bytes.)
            _broken_after_mark(data, broken, codec, label)
            break
    if text is None and _many_nuls(data[:_SNIFF]):
        text = _utf32_without_bom(data) or _utf16_without_bom(data, label)
        if text is None:
            _refuse_nul_run(data, label)
            _binary(label)
    if text is None:
        first = None   # where the bytes stop being UTF-8, if they do
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            first = e.start
        else:
            escaped = _escaped(data, label, warnings, read_from)   # (7-bit text read in its encoding)
            eight_bit = escaped is None
            text = escaped or text
        # (Judged once the error is let go: it holds a copy of the whole file's bytes.)
        if first is not None:   # (CJK in UTF-16 may hold no NUL at all: it was read as Latin-1)
            text = _utf16_without_bom(data, label)
            if text is None:
                eight_bit = True
                text, unicode = _utf8_or_cp1252(data, label, warnings, first, read_from, cn_stop, check)
                _unread_escapes(data, label, warnings, read_from)
    check()
    controls = _controls(text, check)
    if controls > max(16, 0.05 * len(text)):
        shifted = controls - _shifts(text) <= max(16, 0.05 * len(text))   # (its SO and SI alone make it so)
        _refuse_nul_run(data, label)
        _refuse_nul_run(text, label)   # (read in characters: UTF-16 or UTF-32, NULs every other byte)
        _refuse_binary(data, label, read_from, cn_stop, shifted=shifted)   # (but CN kept: said below)
    if controls >= _GARBAGE_CONTROLS and not text.isascii():   # (a run is half beyond ASCII)
        _refuse_garbage(text, label)
    if eight_bit and _iso_2022_cn(data):   # (after those: a binary file holding its bytes is one)
        _iso_2022_cn_said(data, label, warnings, read_from, cn_stop)
    if "\x00" in text:
        warnings.append(f"{label}: {counted(text.count(chr(0)), 'NUL character')} dropped; a text file holds "
                        "none: check how it was written")
        text = text.replace("\x00", "")
    return text, unicode


def _broken_after_mark(data: bytes, start: int, codec: str, label: str) -> None:
    """Refuses ``data``, whose byte-order mark says ``codec`` ("utf-16" or "utf-32") and whose
    bytes from ``start`` on are not that (cut short, or broken), when its first bytes read as
    text: read as anything else it was garbage (a short file, "ÿþAB" in cp1252), or said to be
    UTF-16 "without a byte-order mark". Bytes after the mark that do not read as text
    (``_printable``, as ``_utf16_codec`` judges its first bytes) are left to be judged as before
    (a binary file)."""
    width = 4 if codec == "utf-32" else 2
    if not _printable(data[:min(start, _SNIFF)].decode(codec, errors="ignore")):
        return
    where = ("it ends in half a character" if len(data) - start < width
             else f"byte {start:,} is not {codec.upper()}")
    raise InputError(f"{label}: {codec.upper()} by its byte-order mark, but {where}, so it is not indexed; "
                     "save it as UTF-8")


# UTF-32's marks first: UTF-32-LE's begins with UTF-16-LE's.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
# Control characters text does not hold. Tab, newlines, form feed and escape it may (logs in
# colour), and bell and backspace (a terminal session saved, a man page's overstrike); so may
# 0x80-0x9f, which Latin-1 gives an 8-bit encoding it cannot tell (Shift-JIS, MacRoman, cp437).
_CONTROL = re.compile(r"[\x00-\x06\x0e-\x1a\x1c-\x1f\x7f]")
# (its characters, read off it: all ASCII, so each is one UTF-8 byte, ``_controls``)
_CONTROL_BYTES = bytes(b for b in range(0x80) if _CONTROL.match(chr(b)))
_CONTROL_BYTES_RE = re.compile(b"[" + re.escape(_CONTROL_BYTES) + b"]")   # (searched in place: no copy)
_CONTROL_SLICE = 1 << 16   # (characters: small beside any big file, as fast as larger slices)


def _controls(text: str, check: Callable[[], None] = _going_on) -> int:
    """How many of ``_CONTROL`` ``text`` holds, counted a slice at a time in its UTF-8, where
    each is its own byte and no other character has one of those bytes: ``bytes.translate``
    drops them in C (the regex's scan took 0.13 s of each read of a 25 MB file, this 0.02 s),
    with no copy of the whole text. ``check``: the read's, called every few slices."""
    n = 0
    for at in range(0, len(text), _CONTROL_SLICE):
        if not at % (16 * _CONTROL_SLICE):
            check()
        part = text[at:at + _CONTROL_SLICE].encode("utf-8", "surrogatepass")
        n += len(part) - len(part.translate(None, _CONTROL_BYTES))
    return n


# A run of binary bytes amid text (a page of a disk block gone bad, a blob pasted in): control
# characters at most _GARBAGE_GAP characters apart, _GARBAGE_CONTROLS of them at least, beside as
# many characters beyond ASCII, and of _GARBAGE_KINDS kinds at least. Random bytes hold a control
# character in ten, of most of the 25 kinds, and half are beyond ASCII; text holds a stray one or
# two, and fields delimited by ^A (a FIX log, a Hive export: ^A to ^F at most) repeat a few kinds,
# whatever the script of their words (Russian ones were refused). Diluted in a long text, such a
# run was under ``_decode``'s 5% and read as text: indexed with its garbage, the whole file read
# as Latin-1 for the bytes that are not UTF-8.
_GARBAGE_GAP = 128
_GARBAGE_CONTROLS = 16
_GARBAGE_KINDS = 7   # (of 10,016 runs of 160 random bytes holding 16 or more, none held fewer)


def _garbage_run(text: str) -> tuple[int, int, int] | None:
    """Where the first run of binary bytes in ``text`` begins and ends (characters' indices),
    and how many control characters it holds; None when there is none."""
    start = last = 0
    n = 0
    for m in _CONTROL.finditer(text):
        at = m.start()
        if n and at - last > _GARBAGE_GAP:
            if _garbage(text[start:last + 1], n):
                return start, last + 1, n
            n = 0
        if not n:
            start = at
        n, last = n + 1, at
    return (start, last + 1, n) if _garbage(text[start:last + 1], n) else None


def _garbage(run: str, controls: int) -> bool:
    """Whether ``run``, a stretch of text from one control character to another holding
    ``controls`` of them, is binary bytes: enough of them, of enough kinds, and as many
    characters beyond ASCII."""
    beyond = len(run) - len(run.encode("ascii", errors="ignore"))
    return (controls >= _GARBAGE_CONTROLS and beyond >= controls
            and len(set(_CONTROL.findall(run))) >= _GARBAGE_KINDS)


def _refuse_garbage(text: str, label: str) -> None:
    """Refuses a text holding a run of binary bytes (``_garbage_run``), naming its line: indexed, its
    garbage was in answers and the file said nothing wrong. A run as long as the text around it
    is a binary file's bytes, said so."""
    run = _garbage_run(text)
    if run is None:
        return
    start, end, controls = run
    if 2 * (end - start) >= len(text):
        _binary(label)
    line = text.count("\n", 0, start) + 1
    raise NotText(f"{label}: binary bytes amid its text ({controls} control characters from line {line:,} "
                  "on), so it is not indexed; remove them (a page of a damaged copy, a blob pasted in), "
                  "or add it to index.exclude")


_NUL_RUN_AMID = re.compile(rb"\0{%d,}" % _NUL_RUN)
_NUL_RUN_AMID_TEXT = re.compile("\0{%d,}" % _NUL_RUN)


def _refuse_nul_run(data: bytes | str, label: str, *, rest=None, upto: int | None = None) -> None:
    """Refuses ``data`` naming the line of its run of NULs when that run is all that makes it
    binary: text before and after it holds no control byte at all. It was "binary file", where
    README says a run amid text is refused with the line it begins at (as ``_refuse_garbage``
    names a run of other bytes). A run opening or ending the file is dropped before this.
    ``rest``: the file ``data`` is the head of, read on from there (a piece at a time, up to its
    first control byte, or ``upto`` bytes: a read of ``limit`` bytes): a binary file whose first
    8 KB were text, a run and text was told "a run of NUL bytes amid its text" and to remove them. ``data`` as text: the file decoded (a
    UTF-16 file's run, amid NUL bytes every other byte, was "binary file"), its run in characters."""
    wide = isinstance(data, str)
    run = (_NUL_RUN_AMID_TEXT if wide else _NUL_RUN_AMID).search(data)
    if run is None or run.start() == 0 or run.end() == len(data):   # (``head``'s end: may go on)
        return
    control = _CONTROL if wide else _CONTROL_BYTES_RE
    if control.search(data, 0, run.start()) or control.search(data, run.end()):
        return
    while rest is not None and (upto is None or upto > 0) and \
            (piece := rest.read(1 << 20 if upto is None else min(1 << 20, upto))):
        if _CONTROL_BYTES_RE.search(piece):
            return
        upto = None if upto is None else upto - len(piece)
    line = data.count("\n" if wide else b"\n", 0, run.start()) + 1
    nuls = "NUL characters" if wide else "NUL bytes"
    raise NotText(f"{label}: a run of {run.end() - run.start():,} {nuls} amid its text (from line {line:,} on), "
                  "so it is not indexed; remove them (what a crash or a damaged copy leaves), or add it to "
                  "index.exclude")


def _binary(label: str) -> None:
    kind = Path(label).suffix.lower()
    if kind in NOT_TEXT_FORMATS:   # (named on the command line: index.include is no matter)
        raise NotText(f"{label}: a {kind} file is not plain text, not indexed; convert it to "
                         ".txt or .md (with pdftotext or pandoc, for example) and index that")
    # (Not "leave its kind of name out of index.include": for a blob.txt that drops every .txt.)
    raise NotText(f"{label}: binary file, not indexed; move it out of the folder, or add it "
                     "to index.exclude")


def _refuse_binary(data: bytes, label: str, read_from: str, cn_stop: Callable[[], int | None], *,
                   shifted: bool) -> None:
    """Refuses ``data``, text that looks binary, as a binary file, or when its shifts (SO, SI)
    alone make it so (``shifted``) with what ``_refuse_unread_escapes`` says; but ISO-2022-CN
    amid bytes iconv does not read as such (``_cn_kept_as_escapes``) is text, let through:
    ``_decode`` says so of it (``_iso_2022_cn_said``)."""
    if shifted and _cn_kept_as_escapes(data, cn_stop):
        return
    if shifted:
        _refuse_unread_escapes(data, label, read_from)
    _binary(label)


def _utf8_or_cp1252(data: bytes, label: str, warnings: list[str], first: int, read_from: str,
                    cn_stop: Callable[[], int | None], check: Callable[[], None] = _going_on) -> tuple[str, bool]:
    """The text of ``data``, which is not UTF-8 from byte ``first`` on, and whether it was read as
    UTF-8 (its strays as cp1252) (see ``_decode``; ``cn_stop``: its ``_cn_stop``)."""
    strays, utf8, letters = _strays(data, check)
    # Characters beyond ASCII that were UTF-8: more of them than strays says UTF-8 it is; so does
    # any of them when every stray is cp1252's punctuation (0x80-0x9f: quotes, dashes pasted in
    # from Windows), never a letter of a cp1252 file (a UTF-8 "Café" and two such quotes were
    # read as cp1252, "CafÃ©").
    if utf8 > strays or utf8 and not letters:
        warnings.append(f"{label}: {counted(strays, 'byte')} {_are(strays)} not UTF-8 (the first at byte "
                        f"{first:,}), read as "
                        "cp1252 and the rest as UTF-8; to be sure of them, fix those bytes and save it "
                        "as UTF-8")
        return data.decode("utf-8-sig", errors=_AS_CP1252), True
    from streamrag import legacy   # (here, not above: see the note on the imports)

    # A legacy code page its letters say (cp1251, Shift-JIS, GBK ...), else cp1252 as before.
    reading = legacy.read(data, check)
    if reading.text is not None:
        warnings.append(f"{label}: not valid UTF-8, read as {reading.encoding.name} by its letters; to be "
                        f"sure of them, save it as UTF-8 (the output of {_iconv(reading.encoding.iconv, read_from)})")
        return reading.text, False
    try:
        text, used = data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        text, used = data.decode("latin-1"), "latin-1"
    if _short_and_binary(text):
        shifted = not _short_and_binary(text.translate(_NO_SHIFTS))   # (its SO and SI alone make it so)
        _refuse_binary(data, label, read_from, cn_stop, shifted=shifted)   # (CN kept: ``_decode`` says it)
    if reading.likely:   # its letters are a legacy code page's, too few (or too mixed) to be sure
        names = " or ".join(e.name for e in reading.likely)
        warnings.append(f"{label}: not valid UTF-8, read as {used}; it looks like {names}: if so, save "
                        f"it as UTF-8 (the output of {_iconv(reading.likely[0].iconv, read_from)})")
    else:
        # (The command names what it was read as, which is what a Western file most often is:
        # `-f <its encoding>` left the newcomer to guess the one it had just been read in.)
        warnings.append(f"{label}: not valid UTF-8, read as {used}; save it as UTF-8 (the output of "
                        f"{_iconv(_ICONV_NAMES[used], read_from)}, or with -f its own encoding if its accents "
                        "look wrong in answers)")
    return text, False


# Characters below which a file's control characters are too few to say binary by their share
# (``_decode``'s test: 16 of them at least, 5% of this many). A tenth of random bytes are
# control characters: read as cp1252, those up to about 160 bytes long were text.
_SHORT = 320
_SPACING = 20   # characters of text to a space, tab or line end, at most (prose has one in 6 or 7)


def _short_and_binary(text: str) -> bool:
    """Whether ``text``, a file under ``_SHORT`` characters read as cp1252 (or Latin-1) throughout,
    is a binary file's bytes: more than two control characters (``_CONTROL``), or any in text
    with fewer than one space, tab or line end in ``_SPACING`` characters. Random bytes are
    nearly never spaced as words are (4 bytes in 256 are a space or a line end), and a text
    holds a stray control character or two at most (a DOS file's closing ^Z); the bytes above
    0x7F are no matter, as an 8-bit text in another code page is all of them."""
    if len(text) >= _SHORT:
        return False
    controls = _controls(text)
    blanks = sum(text.count(ch) for ch in " \t\n\r")
    return controls > 2 or controls > 0 and blanks * _SPACING < len(text)


def _escaped(data: bytes, label: str, warnings: list[str], read_from: str) -> str | None:
    """The text of ``data``, ASCII bytes, in the 7-bit CJK encoding its escape sequences say
    (``legacy.escaped``: ISO-2022-JP, with half-width katakana too, ISO-2022-KR, HZ), with a
    warning; None when they say none.
    (Read as ASCII, such a file was "$BEl5~" garbage with no warning, or with ISO-2022-KR's
    shifts a binary file.)"""
    from streamrag import legacy   # (here, not above: see the note on the imports)

    reading = legacy.escaped(data)
    if reading is None:
        _unread_escapes(data, label, warnings, read_from)
        return None
    warnings.append(f"{label}: written in {reading.encoding.name}, read as such by its escape sequences; "
                    f"to be sure of it, save it as UTF-8 (the output of {_iconv(reading.encoding.iconv, read_from)})")
    return reading.text


# An ISO-2022 escape sequence that switches to a CJK character set: ESC $ B (JIS X 0208), ESC $ @,
# ESC $ A, ESC $ ( D, ESC $ ) C (KS C 5601), ESC ( I (half-width katakana), ESC ( J. No other text
# holds one (a log's colours are ESC [ ...; ESC ( B, back to ASCII, switches to none).
_ISO2022_SWITCH = re.compile(rb"\x1b(?:\$[@AB]|\$[()*+][@-Z]|\([IJ])")
# Of those, ISO-2022-CN's (and -CN-EXT's): GB 2312, ISO-IR-165 and CNS 11643's planes, each
# designated to G1, G2 or G3. ``iconv -f ISO-2022-JP-2`` passes them through as ASCII with no
# error ("$)AVPND2bJT"): that command, once given for such a file, wrote its garbage as UTF-8.
_ISO2022_CN = re.compile(rb"\x1b\$(?:\)[AEG]|\*H|\+[I-M])")
_ISO2022_CN_EXT = re.compile(rb"\x1b\$(?:\)E|\+[I-M])")   # (ISO-IR-165, CNS 11643's planes 3 to 7)


def _unread_escapes(data: bytes, label: str, warnings: list[str], read_from: str) -> None:
    """Says so of ``data``, read as 8-bit text (``legacy.escaped`` read it in no 7-bit CJK
    encoding), when it holds ISO-2022 escape sequences (``_ISO2022_SWITCH``): one cut short
    within a sequence, mixed with UTF-8 or cp1252 bytes, or using Greek (ISO-2022-JP-2) was
    indexed as its escape codes ("\\x1b$BEl5~"), garbage, without a word. ISO-2022-CN, which is
    never read, is left to ``_decode`` to refuse, named as such, when iconv converts the file, else
    to say so (``_iso_2022_cn_said``): in long lines it was indexed as its escape codes, under a
    warning, where in short lines, whose shifts made it a binary file's bytes, it was refused."""
    if _iso_2022_cn(data):   # (said by ``_decode`` unless it is a binary file)
        return
    if (line := _unread_escapes_line(data, label, read_from, indexed=True)) is not None:
        warnings.append(line)


def _iso_2022_cn(data: bytes) -> bool:
    """Whether ``data``, read as 8-bit text, holds ISO-2022-CN's escape sequences (``_ISO2022_CN``)."""
    return b"\x1b" in data and _ISO2022_CN.search(data) is not None


def _iso_2022_cn_said(data: bytes, label: str, warnings: list[str], read_from: str,
                      cn_stop: Callable[[], int | None]) -> None:
    """Refuses ``data``, which holds ISO-2022-CN's escape sequences, with iconv's command when that
    command converts it (``cn_stop``: its ``_cn_stop``); else says that its ISO-2022-CN text is indexed as
    its escape codes, and where iconv stops, with no command: a file of UTF-8 or cp1252 text
    holding one such line was refused, and the command given failed ("illegal input sequence"),
    which left no way to index the file."""
    iconv = "ISO-2022-CN-EXT" if _ISO2022_CN_EXT.search(data) else "ISO-2022-CN"
    stop = cn_stop()
    if stop is None:
        _refuse_unread_escapes(data, label, read_from)
        return
    switch = _ISO2022_CN.search(data)
    warnings.append(f"{label}: holds text in {iconv} (Chinese in 7 bits, by its escape sequences, the first "
                    f"at byte {switch.start():,}), which is not read, amid bytes that are not {iconv} (the "
                    f"first at byte {stop:,}), so that text is indexed as its escape codes, garbage; to "
                    f"index it, convert that text alone to UTF-8 (iconv -f {iconv} does not convert the file "
                    "into readable text)")
    # (iconv stops at that byte, or, at another ISO-2022 set's escape, exits 0 and writes the rest
    # as its escape codes: "does not convert the whole file" was untrue of that)


def _cn_kept_as_escapes(data: bytes, cn_stop: Callable[[], int | None]) -> bool:
    """Whether ``data`` holds ISO-2022-CN's escape sequences amid bytes that iconv does not read
    as ISO-2022-CN (``cn_stop``: its ``_cn_stop``): text, indexed as written under
    ``_iso_2022_cn_said``'s warning, not refused with a command that fails."""
    return _iso_2022_cn(data) and cn_stop() is not None


def _cn_stop(data: bytes) -> Callable[[], int | None]:
    """``_iconv_cn_stop`` of ``data`` (by -CN-EXT's rules when its escape sequences say so), run
    at the first call alone: a file whose shifts make it look binary was judged by it twice, once
    for the binary test and once for its warning (3.6 s of a 25 MB file's 4.2 s)."""
    return functools.cache(lambda: _iconv_cn_stop(data, ext=_ISO2022_CN_EXT.search(data) is not None))


# What glibc's `iconv -f ISO-2022-CN` (-CN-EXT) reads (``_iconv_cn_stop``): 7-bit bytes (-CN no
# DEL either); out of ASCII (SO, after a set designated or not), pairs of 0x21-0x7E bytes, each a
# character of the set (GB 2312's are known here; ISO-IR-165's and CNS 11643's are not, so any
# pair is taken); a single shift (ESC N: CNS 11643 plane 2; -EXT's ESC O: a plane 3 to 7
# designated before) and a pair, anywhere; any other escape passes through as ASCII, but out of
# ASCII; a sequence cut short at the end is an error. Another ISO-2022 set's escape sequence
# (ISO-2022-JP's ESC $ B ...) passes through too, and the text after it is written as its escape
# codes: taken as a stop, as iconv's command gives garbage there.
_CN_SPECIAL = re.compile(rb"[\x0e\x0f\x1b\x7f-\xff]")
_CN_DESIGNATION = re.compile(rb"\x1b\$(?:\)[AG]|\*H)")
_CN_EXT_DESIGNATION = re.compile(rb"\x1b\$(?:\)[AEG]|\*H|\+[I-M])")
_CN_CUT = re.compile(rb"\x1b(?:\$[)*]?|N.?)?\Z", re.S)
_CN_EXT_CUT = re.compile(rb"\x1b(?:\$[)*+]?|[NO].?)?\Z", re.S)
_CN_PAIRS = re.compile(rb"(?:[\x21-\x7e]{2})*")
_CN_PAIR = re.compile(rb"[\x21-\x7e]{2}")
_HIGH_BIT = bytes(b | 0x80 for b in range(256))


def _iconv_cn_stop(data: bytes, *, ext: bool) -> int | None:
    """Where `iconv -f ISO-2022-CN` (``ext``: -CN-EXT) stops reading ``data``, the byte its error
    names (glibc's); None when it reads it whole, as far as the rules above go (a pair not in
    CNS 11643 is taken)."""
    if _iconv_reads_gb2312(data, ext=ext):   # (the loop below, a shift at a time, took 4 s of 25 MB of it)
        return None
    designation, cut = (_CN_EXT_DESIGNATION, _CN_EXT_CUT) if ext else (_CN_DESIGNATION, _CN_CUT)
    single = b"NO" if ext else b"N"
    gb = shifted = third = False   # (SO's set GB 2312: chosen at SO by the last one designated)
    designated = b"" if ext else b"A"   # (-CN reads GB 2312 after SO with none designated; -EXT stops)
    at = 0
    while True:
        m = _CN_SPECIAL.search(data, at)
        end = len(data) if m is None else m.start()
        if shifted and (stop := _cn_pairs_stop(data, at, end, gb)) is not None:
            return stop
        if m is None:
            return None
        at, byte = end, data[end]
        if byte == 0x0E:
            if not designated:
                return at + 1
            shifted, gb, at = True, designated == b"A", at + 1
        elif byte == 0x0F:
            shifted, at = False, at + 1
        elif byte == 0x1B and (d := designation.match(data, at)):
            if d.group()[2:3] == b")":
                designated = d.group()[3:]
            third = third or d.group()[2:3] == b"+"
            at = d.end()
        elif byte == 0x1B and cut.match(data, at):
            return at
        elif byte == 0x1B and data[at + 1:at + 2] and data[at + 1:at + 2] in single:
            if data[at + 1] == 0x4F and not third:
                return at
            if not _CN_PAIR.match(data, at + 2):
                return at + 2 if ext else at
            at += 4
        elif byte == 0x1B and not shifted and not _ISO2022_SWITCH.match(data, at) or \
                byte == 0x7F and ext and not shifted:
            at += 1   # (passed through as ASCII)
        else:
            return at


def _iconv_reads_gb2312(data: bytes, *, ext: bool) -> bool:
    """Whether ``data`` is ISO-2022-CN of GB 2312 alone (no other set designated to SO), which
    `iconv -f ISO-2022-CN` (``ext``: -CN-EXT) reads whole, judged as ``_iconv_cn_stop`` judges it
    with a few passes over the bytes in C; False when it is not, or holds more (judged by
    ``_iconv_cn_stop``, a shift at a time)."""
    if not data.isascii() or b"\x7f" in data and not ext or _OTHER_SETS.search(data) or _CN_CUT.search(data):
        return False
    if ext and (shift := data.find(b"\x0e")) >= 0 and not -1 < data.find(b"\x1b$)A") < shift:
        return False   # (-EXT stops at SO with no set designated)
    if _CN_BAD_SINGLE.search(data) or _CN_BAD_RUN.search(data):   # (before they go: see below)
        return False
    # (The escape sequences that leave SO's set as it is, gone: replaced in C at memory speed, the
    # regular expression only for a single shift's pairs. Each run out of ASCII is pairs between
    # them, so none is made by the bytes either side of one: "T\x1b$)Ax" stops iconv at "T".)
    cleaned = data.replace(b"\x1b$)A", b"").replace(b"\x1b$*H", b"")
    if b"\x1bN" in cleaned:
        cleaned = _CN_SINGLE.sub(b"", cleaned)
    shifted = _CN_ASCII.sub(b"", cleaned)   # (the bytes out of ASCII, runs joined: pairs all)
    try:
        shifted.translate(_HIGH_BIT).decode("gb2312")
    except UnicodeDecodeError:
        return False
    return True


# (CNS 11643's planes, ISO-IR-165, SS3; another ISO-2022 set, ``_ISO2022_SWITCH`` but GB 2312's and plane 2's)
_OTHER_SETS = re.compile(rb"\x1b(?:\$\)[EG]|\$\+|O|(?!\$\)A|\$\*H)(?:\$[@AB]|\$[()*+][@-Z]|\([IJ]))")
_CN_BAD_SINGLE = re.compile(rb"\x1bN(?![\x21-\x7e]{2})")
_CN_SINGLE = re.compile(rb"\x1bN[\x21-\x7e]{2}")
# (a run out of ASCII, its escape sequences that leave SO's set as it is among its pairs, ended
# otherwise than by SI or the end: an odd byte, a line end, another escape)
_CN_BAD_RUN = re.compile(rb"\x0e(?:[\x21-\x7e]{2}|\x0e|\x1b\$\)A|\x1b\$\*H|\x1bN[\x21-\x7e]{2})*+(?!\x0f|\Z)")
_CN_ASCII = re.compile(rb"\A[^\x0e]*|\x0f[^\x0e]*|\x0e")


def _cn_pairs_stop(data: bytes, start: int, end: int, gb: bool) -> int | None:
    """Where the bytes of ``data`` from ``start`` to ``end``, out of ASCII in ISO-2022-CN, stop
    being pairs of a set's bytes (``gb``: GB 2312 characters), or None."""
    m = _CN_PAIRS.match(data, start, end)
    if gb:
        try:
            data[start:m.end()].translate(_HIGH_BIT).decode("gb2312")
        except UnicodeDecodeError as e:
            return start + e.start // 2 * 2
    return None if m.end() == end else m.end()


def _refuse_unread_escapes(data: bytes, label: str, read_from: str) -> None:
    """Refuses ``data``, ISO-2022-CN that iconv converts (``_iso_2022_cn_said``) or which its shifts
    (SO and SI: ``_shifts``) alone make a binary file's bytes, with what ``_unread_escapes`` says
    of its escape sequences when it holds any: ISO-2022-KR broken, which shifts in and out every
    few characters, was refused as a "binary file" where the iconv command would have converted it."""
    if (line := _unread_escapes_line(data, label, read_from, indexed=False)) is not None:
        raise InputError(line)


def _unread_escapes_line(data: bytes, label: str, read_from: str, *, indexed: bool) -> str | None:
    """What ``_unread_escapes`` says of ``data`` (``indexed``: its escape codes are, garbage; else
    it is not indexed), or None when it holds no ISO-2022 escape sequence."""
    if b"\x1b" not in data or (switch := _ISO2022_SWITCH.search(data)) is None:
        return None
    told = "so they are indexed as written, garbage" if indexed else "so it is not indexed"
    if _ISO2022_CN.search(data):   # (no codec of Python's reads it: said so, whole or not)
        iconv = "ISO-2022-CN-EXT" if _ISO2022_CN_EXT.search(data) else "ISO-2022-CN"
        return (f"{label}: written in {iconv} (Chinese in 7 bits, by its escape sequences, the first at "
                f"byte {switch.start():,}), which is not read, {told}; save it as UTF-8 (the output of "
                f"{_iconv(iconv, read_from)})")
    iconv = "ISO-2022-KR" if b"\x1b$)C" in data else "ISO-2022-JP-2"
    return (f"{label}: holds ISO-2022 escape sequences (Japanese or Korean in 7 bits, the first at byte "
            f"{switch.start():,}) but does not read as ISO-2022-JP or ISO-2022-KR text throughout (cut "
            f"short, mixed with other bytes, or a variant's characters), {told}; save it as UTF-8 (the "
            f"output of {_iconv(iconv, read_from)}, whose errors say where it breaks)")


# ISO-2022's shifts out to its second character set and back (SO, SI): ``_CONTROL``'s to a binary
# file's test, and in ISO-2022-KR and -CN around each run of Korean or Chinese characters.
_NO_SHIFTS = str.maketrans("", "", "\x0e\x0f")


def _shifts(text: str) -> int:
    """How many shifts (SO, SI) ``text`` holds."""
    return text.count("\x0e") + text.count("\x0f")


# iconv's names of the encodings a file is read in when its letters name no other.
_ICONV_NAMES = {"cp1252": "CP1252", "latin-1": "ISO-8859-1"}


def _iconv(encoding: str, read_from: str) -> str:
    """The command that writes the file at ``read_from`` in UTF-8, from ``encoding``: its path as
    it was read, which leads to it from where the user ran streamrag (`index notes` reads
    notes/old.txt; the index's name for it, old.txt, is no file there), quoted for a shell
    (``shell_word``), not as messages show it."""
    return f"`iconv -f {encoding} -t UTF-8 {shell_word(read_from)}`"


_STRAY_LETTER = re.compile("[\udca0-\udcff]")
_SLICE = 1 << 20


def _strays(data: bytes, check: Callable[[], None] = _going_on) -> tuple[int, int, bool]:
    """Of ``data`` read as UTF-8: how many bytes are not UTF-8 (strays), how many characters
    beyond ASCII are, and whether a stray is a byte cp1252 has a letter for (0xA0-0xFF). Read a
    slice at a time, each byte that is not UTF-8 a lone surrogate (counted in C): the whole text
    so read (two bytes a character) and two copies of it to count took five times the file.
    (A file read as cp1252 throughout, the most of them, is never read so whole.) ``check``: the
    read's, called before each slice."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")("surrogateescape")
    strays = beyond = 0
    letters = False
    for at in range(0, len(data), _SLICE):
        check()
        piece = decoder.decode(data[at:at + _SLICE], final=at + _SLICE >= len(data))
        here = len(piece) - len(piece.encode("utf-8", errors="ignore").decode("utf-8"))
        strays += here
        beyond += len(piece) - len(piece.encode("ascii", errors="ignore"))
        letters = letters or bool(here) and _STRAY_LETTER.search(piece) is not None
    return strays, beyond - strays, letters


def _cp1252_strays(e: UnicodeError) -> tuple[str, int]:
    """A decoding's error handler: the bytes that are not UTF-8 read as cp1252, in place (read as
    lone surrogates first, then mapped, the text was there twice over)."""
    if not isinstance(e, UnicodeDecodeError):
        raise e
    return "".join(_cp1252(b) for b in e.object[e.start:e.end]), e.end


_AS_CP1252 = "streamrag.cp1252-strays"
codecs.register_error(_AS_CP1252, _cp1252_strays)


def _cp1252(byte: int) -> str:
    """One byte as cp1252 reads it (as Latin-1 where cp1252 has no character)."""
    return bytes([byte]).decode("cp1252", errors="ignore") or chr(byte)


def _many_nuls(head: bytes) -> bool:
    """Whether a file's first bytes hold more NULs than a text file's stray few."""
    nuls = head.count(0)
    if nuls > _FEW_NULS or nuls > max(_STRAY_NULS, 0.01 * len(head)) or nuls * _STRAY_SPACING > len(head):
        return True
    # A few NULs amid clean text are strays (a bad editor save); beside other control bytes, binary,
    # and more than one in bytes that are not UTF-8 (a header's "obj\0\0" after 8-bit bytes).
    # (Two of them made any file binary, however long: _FEW_NULS was one.)
    return nuls > 0 and (_CONTROL.search(head.decode("latin-1").replace("\0", "")) is not None
                         or nuls > 1 and not _utf8_so_far(head))


def _utf8_so_far(head: bytes) -> bool:
    """Whether a file's first bytes are UTF-8 (a character cut at their end aside)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head)
    except UnicodeDecodeError:
        return False
    return True


def _first_data(f) -> int | None:
    """Where a file's first written bytes are: past the hole a sparse file opens with (what a log
    truncated by logrotate's copytruncate becomes while its writer goes on at its offset), found
    without reading it; 0 when the system cannot tell, None when the file holds no data at all.
    Asked of the file object, not its descriptor: an ``os.lseek`` under a buffered file already
    read (the daemon's, ``_written_on``) put its next reads a buffer off."""
    try:
        return f.seek(0, os.SEEK_DATA)
    except OSError as e:   # (ENXIO: all hole, or empty: None, nothing written to read past)
        return None if e.errno == errno.ENXIO else 0
    except AttributeError:   # (no SEEK_DATA here)
        return 0


def _past_leading_nuls(f) -> tuple[int, bytes]:
    """Where a file's text begins, past a run of NULs it opens with (a hole, ``_first_data``, and
    NULs written after it, read up to ``_NUL_SCAN``), and its first ``_SNIFF`` bytes from there;
    ``f`` is left past the bytes read. A run shorter than ``_NUL_RUN`` is no run: (0, the first
    bytes). NULs filling every byte read (a file of zeros longer than ``_SNIFF``, a run as long as
    ``_NUL_SCAN`` or longer) give the last piece read, all NULs, and where it is: a later offset,
    no text (a binary file, judged without reading on). In text holding NULs (UTF-16 or UTF-32,
    ``_wide``) the start is a multiple of 4, so its characters stay whole. (``text_start``: the
    offset alone, for a caller outside the loader.)"""
    found = _first_data(f)
    at = found or 0
    f.seek(at)
    head = f.read(_SNIFF)
    lead = len(head) - len(head.lstrip(b"\0"))
    # Zeros written, not a hole (a log pre-allocated so, a copytruncate where no file is sparse),
    # are read past a piece at a time, up to _NUL_SCAN: a run longer than 8 KB was a binary file.
    while found is not None and lead == len(head) == _SNIFF and at + _SNIFF - found < _NUL_SCAN:
        more = f.read(_SNIFF)
        if not more:
            break
        at, head = at + _SNIFF, more
        lead = len(head) - len(head.lstrip(b"\0"))
    start = at + lead
    start -= start % 4 if _wide(head[lead:]) else 0
    if lead == len(head) or start < _NUL_RUN:
        return at, head
    return start, head[start - at:]


def text_start(f) -> int:
    """Where the loader reads a file's text from (``read_documents``), ``f`` left there.

    ``f``: the file, opened for binary reading, at any position, read from or not (the daemon
    reads an added file's opening first, ``_written_on``): it is sought, its buffer kept with it,
    never its descriptor moved under it. 0, but past a run of ``_NUL_RUN`` NULs or more the file
    opens with (a hole, then NULs written, read up to ``_NUL_SCAN``: what a log rotated with
    copytruncate opens with); a multiple of 4 in UTF-16 or UTF-32 text. Where NULs fill all that
    is read (written zeros longer than ``_SNIFF`` bytes, or a run of ``_NUL_SCAN``, 1 MiB, or
    more), a later offset, where NULs still are: no text there (the loader's binary file)."""
    start, _head = _past_leading_nuls(f)
    f.seek(start)
    return start


def _without_trailing_nuls(data: bytes) -> tuple[bytes, int]:
    """``data`` without a run of NULs it ends with (what a crash leaves of a file being written:
    its size grown, its last blocks never written), and how many went; a run shorter than
    ``_NUL_RUN``, or all of ``data``, stays (a stray NUL), and in text holding NULs (``_wide``)
    so do those of its last character (the text cut at a multiple of its width, ``_width``).
    Found a slice at a time: no copy of the whole file unless there is a run to cut."""
    end = len(data)
    while end:
        piece = data[max(0, end - _SNIFF):end]
        kept = len(piece.rstrip(b"\0"))
        end -= len(piece) - kept
        if kept:
            break
    if _wide(data[max(0, end - _SNIFF):end]):
        end += -end % _width(data[max(0, end - 64) // 4 * 4:end // 4 * 4])
    run = len(data) - end
    # (Zeros alone are no text's end: a binary file, judged so from its first bytes.)
    return (data[:len(data) - run], run) if run >= _NUL_RUN and end else (data, 0)


def _width(units: bytes) -> int:
    """Bytes a character takes in ``units``, whole 4-byte units of text holding NULs (``_wide``)
    read from its start: 4 when each is a UTF-32 code point (a zero byte and one at most 0x10
    beside it), else 2, UTF-16's. (Rounded to 4 alone, UTF-16 text whose length is 2 past a
    multiple of 4 kept a NUL character of the run after it, said a second time.)"""
    n = len(units) // 4
    utf32 = n >= 2 and any(units[zero::4].count(0) == n and max(units[small::4]) <= 0x10
                           for zero, small in ((3, 2), (0, 1)))
    return 4 if utf32 else 2


def _wide(text_bytes: bytes) -> bool:
    """Whether bytes of text hold NULs, as UTF-16 and UTF-32 do (a character of several bytes)."""
    return b"\0" in text_bytes


def read_wide(head: bytes) -> bool:
    """Whether a file whose text opens with ``head`` (from ``text_start``) is not read as UTF-8 by
    ``_decode`` for its NULs or mark: UTF-16 or UTF-32 (a byte-order mark, more NULs than a text's
    stray few), or a binary file. Else its NULs are strays, dropped from the text it reads."""
    return any(head.startswith(bom) for bom, _codec in _BOMS) or _many_nuls(head[:_SNIFF])


def _nul_runs_line(label: str, start: int, end: int) -> str:
    """The warning that the runs of NULs a file opened (``start`` bytes) or ended with (``end``)
    were dropped."""
    where = " and ".join(f"{n:,} at its {side}" for n, side in ((start, "start"), (end, "end")) if n)
    return (f"{label}: NUL bytes dropped ({where}: what a crash, or a log rotated with copytruncate, "
            "leaves); the text between is indexed")


def _clearly_binary(head: bytes) -> bool:
    """Whether a file's first ``_SNIFF`` bytes say binary without the rest: NULs beyond a stray
    few, and not UTF-16 without a byte-order mark (``_utf16_codec``)."""
    if not _many_nuls(head) or any(head.startswith(bom) for bom, _codec in _BOMS):
        return False
    return _utf16_codec(head) is None and _utf32_without_bom(head[:len(head) - len(head) % 4]) is None


def _utf32_without_bom(data: bytes) -> str | None:
    """The text of UTF-32 written without a byte-order mark, or None: every four bytes a code
    point, at most 0x10FFFF (so one byte of each is zero and the next at most 0x10), that
    decodes whole and reads as text (it was "binary file ... move it out of the folder")."""
    head = data[:_SNIFF - _SNIFF % 4]
    if len(data) % 4 or len(head) < 16:
        return None
    for codec, zero, small in (("utf-32-le", 3, 2), ("utf-32-be", 0, 1)):
        if head[zero::4].count(0) == len(head) // 4 and max(head[small::4]) <= 0x10:
            try:
                text = data.decode(codec)
            except UnicodeDecodeError:
                return None
            sample = text[:4096]
            printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in sample)
            return text if printable >= 0.98 * len(sample) else None
    return None


def _utf16_without_bom(data: bytes, label: str) -> str | None:
    """The text of UTF-16 written without a byte-order mark (``_utf16_codec``), or None when its
    first bytes are not that. A file whose first bytes are and whose rest is not (cut short, or
    broken further on) is not indexed: read as anything else it was garbage."""
    codec = _utf16_codec(data[:_SNIFF])
    if codec is None:
        return None
    try:
        return data.decode(codec)
    except UnicodeDecodeError as e:
        where = "its last byte is half a character" if e.start == len(data) - 1 else f"byte {e.start:,} is not UTF-16"
        raise InputError(f"{label}: UTF-16 without a byte-order mark by its first bytes, but {where}, so it "
                         "is not indexed; save it as UTF-8") from None


# (Asked twice of a file with NULs early on, by ``_clearly_binary`` before the rest is read and by
# ``_decode`` after: judged once, a few milliseconds of CJK text's.)
@functools.lru_cache(maxsize=4)
def _utf16_codec(head: bytes) -> str | None:
    """Which UTF-16, "utf-16-le" or "utf-16-be", a file's first bytes are written in without a
    byte-order mark, or None when they are not.

    Text in a Latin script has a zero in every other byte, on one side; a binary file has them
    anywhere. So has text in another alphabet, where a space, a digit or a line end is (Hebrew,
    Arabic, Thai, Devanagari ...): the bytes on that side are zeros and its block's (``_one_block``).
    CJK text has few zeros or none (一 is 4E 00, 中 2D 4E), so it is told by what its characters
    are (``_reads_as_cjk``); a file of 8-bit text, UTF-8 or a legacy CJK encoding paired up into
    16-bit units reads as no such text."""
    half = len(head) // 2
    if half < 8:
        return None
    even, odd = head[0::2].count(0), head[1::2].count(0)
    # (A zero on the other side is a character U+XX00's, as few are: ἀ, Ā, a combining grave
    # accent; polytonic Greek was a binary file. Never both: a NUL is no text's.)
    nuls = bytes(a | b for a, b in zip(head[0::2], head[1::2])).count(0) if even and odd else 0
    for zeros, others, codec, high in ((odd, even, "utf-16-le", head[1::2]),
                                       (even, odd, "utf-16-be", head[0::2])):
        if not nuls and others <= 0.05 * half and (
                zeros > 0.3 * half or zeros >= max(2, 0.02 * half) and _one_block(high)):
            text = _head_text(head, codec)
            if text is None:
                return None
            return codec if _printable(text) else None
    cjk = [codec for codec in ("utf-16-le", "utf-16-be") if _reads_as_cjk(_head_text(head, codec), head)]
    return cjk[0] if len(cjk) == 1 else None


# Characters of text that str.isprintable() says are not: line ends and tabs, and the format
# characters of text (Cf): Persian's non-joiner (U+200C) in every other word, emoji's
# joiner, direction marks, a soft hyphen. With them counted out, Persian in UTF-16 without a
# byte-order mark was a binary file.
_SHOWN_UNPRINTABLE = frozenset("\n\r\t\u00ad\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029"
                               "\u202a\u202b\u202c\u202d\u202e\u2060\u2066\u2067\u2068\u2069\ufeff")


def _printable(text: str) -> bool:
    """Whether ``text`` reads as text: nearly all of it printable (``_SHOWN_UNPRINTABLE`` counted so)."""
    return sum(ch.isprintable() or ch in _SHOWN_UNPRINTABLE for ch in text) >= 0.98 * len(text)


def _one_block(high: bytes) -> bool:
    """Whether ``high``, the high bytes of a file read as UTF-16, are those of text in one
    alphabet: zeros (ASCII), its blocks' (0x05 in Hebrew, 0x0E in Thai; 0x03 and Greek
    Extended's 0x1F in polytonic Greek, which was a binary file) and General Punctuation's
    (0x20: dashes and quotes), nearly all."""
    counts = collections.Counter(high)
    blocks = sorted((b for b in counts if b not in (0, 0x20)), key=counts.__getitem__, reverse=True)[:2]
    return counts[0] + counts[0x20] + sum(counts[b] for b in blocks) >= 0.98 * len(high)


def _head_text(head: bytes, codec: str) -> str | None:
    """``head``, a file's first bytes, read as ``codec`` (a character cut at its end left out),
    or None if it is not that. A few halves of a character (lone surrogates: at most 1% of
    it, or 2) are left out too, said by the whole file's reading: with one, a short UTF-16
    file was a binary one."""
    try:
        text = codecs.getincrementaldecoder(codec)("surrogatepass").decode(head[: len(head) - len(head) % 2])
    except UnicodeDecodeError:
        return None
    halves = len(_LONE_SURROGATE.findall(text))
    if halves > max(2, 0.01 * len(text)):
        return None
    return _LONE_SURROGATE.sub("", text) if halves else text


# The characters of text in Chinese, Japanese or Korean: ASCII and Latin, Greek and Cyrillic,
# general punctuation and symbols (※ → ① ─ ■ ★), CJK radicals, punctuation, kana, bopomofo,
# Hangul Jamo, enclosed and compatibility characters, ideographs, Hangul syllables, CJK
# compatibility ideographs and forms, full-width forms, and (below) the supplementary planes.
_CJK_TEXT = re.compile("[\t\n\r\x20-\x7e\xa0-\u024f\u0370-\u04ff\u2000-\u206f\u2100-\u27bf"
                       "\u2e80-\u2fdf\u3000-\u9fff\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
                       "\U00010000-\U0010ffff]")
# Of those, the ones a 16-bit unit can be only in UTF-16: with a zero byte (ASCII: spaces, line
# ends, digits), and CJK punctuation, kana and full-width forms, whose 0x30 or 0xFF byte is no
# byte of a legacy CJK encoding (Shift-JIS, EUC, GBK, Big5: their bytes are 0x40 and over, and
# never 0xFF) nor of 8-bit text but for a digit zero.
_UTF16_ONLY = re.compile("[\x01-\xff\u3000-\u30ff\uff00-\uffef]")
# Ideographs and Hangul syllables. About half of them have a low byte of 0x80 or more (的 is
# 0x7684); two ASCII letters paired up make one whose low byte is below 0x80 (Latin-1 "Hello"
# read as UTF-16 is 效汬...).
_CJK_LETTER = re.compile("[\u3100-\u9fff\uac00-\ud7a3\uf900-\ufaff]")
# (Of those, the ideographs and Hangul syllables alone, ``legacy.IDEOGRAPH_OR_SYLLABLE``: CJK
# text with no character only UTF-16 makes is nearly all of them. Bopomofo, Hangul's jamo,
# strokes, enclosed and compatibility characters (U+3100-U+33FF) are a text's now and then, and
# 16-bit numbers drawn among them were read as UTF-16 text: ``legacy.common`` judges ideographs
# and Hangul syllables only.)

# Characters a 16-bit unit holding a zero byte is, but for a NUL (ASCII and Latin-1 in UTF-16).
_ZERO_BYTE = re.compile("[\x01-\xff]")


# The bytes of a Western 8-bit text (cp1252, Latin-1): ASCII's printable ones, tabs and line
# ends, Latin-1's letters and cp1252's quotes and dashes. Short, such a text reads as ideographs
# in UTF-16 ("canción schön to" as 捡湣槳渠獣棶渠瑯), and a digit zero beside a letter or digit as
# kana, a character only UTF-16 makes ("20" as 〲): "July 4, 2031 \x97 The" was UTF-16 text, or
# refused as UTF-16 cut short. UTF-16 CJK text's bytes are nearly never all of these (a zero
# byte is ASCII's in UTF-16, and a low byte is any of 256).
_WESTERN = re.compile("[\t\n\r\x20-\x7e\u0091-\u0097\u00ab\u00bb\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff]*")


def _reads_as_cjk(text: str | None, head: bytes) -> bool:
    """Whether ``text``, a file's first bytes (``head``) read as UTF-16, is text in Chinese,
    Japanese or Korean: nearly all of it CJK text's characters (``_CJK_TEXT``: not the private
    use area, Yi, Glagolitic ... where 8-bit text and legacy encodings paired up fall), some of
    them only UTF-16 makes (``_UTF16_ONLY``: sentences end in 。 or ！, lines in a line end,
    and Korean is spaced; Shift-JIS read as UTF-16 is ideographs alone) or else nearly all
    ideographs or Hangul syllables (``legacy.IDEOGRAPH_OR_SYLLABLE``: not Bopomofo, jamo, enclosed
    or compatibility characters), four in five of them common ones (``legacy.common``: a third of
    16-bit numbers that fall among ideographs are, a fifth among Hangul; under 200 of them
    were read as text) and some of them again and again as a text's are (16-bit numbers that
    fall there are nearly all different), when no legacy CJK encoding reads the bytes as text
    (``legacy``): Chinese with no punctuation, or Korean with no space, in its first 8 KB was
    a binary file; and its ideographs not all pairs of ASCII letters (``_CJK_LETTER``), nor its
    bytes all a Western 8-bit text's (``_WESTERN``)."""
    from streamrag import legacy   # (here, not above: see the note on the imports)

    if text is None or len(text) < 8 or _WESTERN.fullmatch(head.decode("latin-1")):
        return False
    n = len(text)
    if len(_CJK_TEXT.findall(text)) < 0.95 * n:
        return False
    letters = _CJK_LETTER.findall(text)
    if len(_UTF16_ONLY.findall(text)) < 0.03 * n and (
            len(legacy.IDEOGRAPH_OR_SYLLABLE.findall(text)) < 0.9 * n
            or len(letters) >= 200 and len(set(letters)) > 0.75 * len(letters)
            or legacy.common(letters) < 0.8 or legacy.cjk_codec(head[: len(head) - len(head) % 2]) is not None):
        return False
    # (Paired-up 8-bit text has no zero byte: text a tenth of whose characters have one, ASCII
    # in UTF-16, is no such pairs, however its few ideographs fall: an English text naming
    # 中国一汽 and 长春 was a binary file. Nor is text a fifth of whose 16-bit units hold a byte
    # no Western text holds, however few its ideographs, when they are common ones: ``_not_western``.
    # A Western list of numbers each with a symbol, "0€ 10€ 20€" or "10°  20°", or numbers
    # delimited by ^A, makes a third of such units, but its ideographs and syllables (a digit
    # paired with a digit or a symbol) are rare ones: it was read as UTF-16, or refused as such.)
    return len(letters) < 8 or sum(ord(ch) & 0x80 != 0 for ch in letters) >= 0.25 * len(letters) or \
        len(_ZERO_BYTE.findall(text)) >= 0.1 * n or _not_western(head) >= 0.2 and legacy.common(letters) >= 0.8


# _WESTERN's bytes, as a table for bytes.translate: 1 for each of them, 0 for any other byte.
_WESTERN_BYTES = bytes(_WESTERN.fullmatch(chr(b)) is not None for b in range(256))


def _not_western(head: bytes) -> float:
    """The share of the 16-bit units of ``head`` (a file's first bytes, read as UTF-16) that hold
    a byte no Western 8-bit text holds (``_WESTERN``): a control byte, or most of 0x80-0xBF.

    Paired up, Western prose makes next to none: a symbol now and then (€, °, ©); a list of
    numbers each ending in one ("0€ 10€ 20€") makes a third, whose characters are rare ideographs
    and Hangul (``_reads_as_cjk`` asks for common ones too). CJK text's low bytes are any of 256, so a
    fourth to half of its units hold one, however it repeats its words. (The share of its
    ideographs with a low byte of 0x80 or more, ``_reads_as_cjk``'s other test, is a few words'
    in Japanese of kana and a few kanji repeated, and it fell under a quarter in one file's first
    8 KB where its first 2 KB were over: read whole, the file was cp1252 garbage, its opening
    Japanese.)"""
    odd = head[1::2].translate(_WESTERN_BYTES)
    if not odd:
        return 0.0
    even = head[0:2 * len(odd):2].translate(_WESTERN_BYTES)
    both = (int.from_bytes(even, "big") & int.from_bytes(odd, "big")).bit_count()   # (0 or 1 a byte)
    return 1 - both / len(odd)


def _newlines(held: list[str], *, breaks: bool = True, nel: bool = True) -> str:
    """The text ``held`` alone in a list with its lines ended by \\n and its characters composed
    (NFC): an accent written as a letter and a combining mark (macOS, some PDF converters) cut
    "Benoît" to "Benoi" where the extractor reads names. A run of blanks within a line longer
    than ``_BLANK_RUN`` is cut to that: a million spaces overflowed the tokenizer's stack (a
    traceback in `index`, and the end of `watch`). The text is taken out of ``held``, so each
    copy is let go once the next is made: a CRLF file with lone CRs was held three times at
    once, its caller's copy beside both replacements'.

    ``breaks``: the other line ends of ``str.splitlines`` (``_LINE_BREAK``) are "\\n" too, and a
    paragraph separator (U+2029) or a form feed (a page break) a blank line
    (``_BLANK_LINE_BREAKS``), as a reader sees them: the title ended there (``_title``) while the
    extractor and the chunker, which end lines at "\\n" alone, read across them as across a space
    ("Ada Lovelace\\u2029Ada was" named "Ada Lovelace Ada"; with "\\n\\n", "Ada Lovelace"); now as
    they read a line end. Not in a .jsonl or .csv file's text before its rows are read (a JSON
    string may hold a U+2028 as written, a cell a form feed: each would have cut its row in two),
    but in each row's text (``row_text``). ``nel``: the text was read as Unicode (``_decode``), so
    a U+0085 is NEL, a line end; else it is byte 0x85 of Latin-1 or ISO-8859-7, written as
    cp1252's "…" most likely, and kept ("waited\\x85 then" was "waited\\n then")."""
    if "\r" in held[-1]:   # (looked for first: one character is found at memory speed, "\r\n" took 30 ms of 25 MB)
        held.append(held.pop().replace("\r\n", "\n").replace("\r", "\n"))
    if breaks:
        for ch in _BREAKS if nel else _BREAKS.replace("\x85", ""):
            if ch in held[-1]:   # (one character at a time, each at memory speed: most texts hold none)
                held.append(held.pop().replace(ch, "\n\n" if ch in _BLANK_LINE_BREAKS else "\n"))
    text = unicodedata.normalize("NFC", held.pop())
    return _LONG_BLANKS.sub(lambda m: m.group()[:_BLANK_RUN], text) if _may_hold_long_blanks(text) else text


_BLANK_RUN = 10_000
_LONG_BLANKS = re.compile(r"[^\S\n]{%d,}" % (_BLANK_RUN + 1))
_TWO_BLANKS = re.compile(r"[^\S\n](?=[^\S\n])")   # (each blank before another, overlapping)
_NOT_A_BLANK = re.compile(r"\S|\n")


def _may_hold_long_blanks(text: str) -> bool:
    """Whether ``text`` may hold a run of more than ``_BLANK_RUN`` blanks: such a run holds two
    multiples of ``_BLANK_RUN // 2`` in a row and all between them, so only where its characters
    there are blanks in a row is what lies between looked at, to the first that is none (a
    search of all of it took half a second of every read of a 25 MB file)."""
    if len(text) <= _BLANK_RUN:
        return False
    step = _BLANK_RUN // 2
    return any(_NOT_A_BLANK.search(text, m.start() * step, m.start() * step + step + 1) is None
               for m in _TWO_BLANKS.finditer(text[::step]))


def _title(text: str, fallback: str) -> str:
    """The first line with a letter or digit (a rule, ``---`` of front matter never closed,
    names nothing), else ``fallback``; a line ends where ``str.splitlines`` ends one, but for a
    U+0085, which a text keeps only as Latin-1's byte 0x85 (``_LINE_BREAK``: "Ada Lovelace\\u2028born
    1815" is titled "Ada Lovelace", as ``joins.own_title`` reads a first line)."""
    for line in _lines(text):
        for part in _parts(line):
            part = part.strip().lstrip("#").strip()
            if any(ch.isalnum() for ch in part):
                return part if len(part) <= TITLE_CHARS else part[: TITLE_CHARS - 1].rstrip() + "\u2026"
    return fallback


# What ends a line for ``str.splitlines`` beyond "\n" and "\r": a line or paragraph separator (a
# JSON "\u2028", a word processor's line break), a vertical tab, a form feed, the file, group and
# record separators, NEL. A document's text holds none of them since VERSION 28 (``_newlines``), but
# since 29 a U+0085 read as Latin-1 or ISO-8859-7 (byte 0x85, no NEL), where ``_title`` ends no
# line since 30, as ``joins.own_title`` and ``joins.heading_title`` end none (``joins.LINE_END``):
# the extractor read "Ada\x85Lovelace wrote" as "Ada Lovelace" under the title "Ada". (The others
# still end a title's line: an index's older texts.)
_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_LINE_BREAK = re.compile(f"[{_BREAKS.replace(chr(0x85), '')}]")
# Of those, the ones that end a paragraph, or a page, not a line: a blank line in a document's
# text (a form feed read as one "\n" joined "Ada Lovelace\fAda was" as "Ada Lovelace Ada").
_BLANK_LINE_BREAKS = "\x0c\u2029"


def _parts(line: str):
    """``line.splitlines()`` a part at a time, empty ones too (a document's first line may be all
    of a big file: not copied whole again)."""
    start = 0
    for m in _LINE_BREAK.finditer(line):
        yield line[start:m.start()]
        start = m.end()
    yield line[start:]


def _composed(title: str) -> str:
    """``title`` composed (NFC), as a document's text is (``_newlines``): a row's title cell or a
    file's name, decomposed (macOS's file names, a cell pasted from one) where its text is not,
    differed from the text's first line it repeats, and so was read as a name the document says
    (``joins.own_title``) where the same title composed is not."""
    return unicodedata.normalize("NFC", title)


def _lines(text: str, *, ends: bool = False, check: Callable[[], None] = _going_on):
    """``text.split("\\n")`` a line at a time: a big file's title is in its first lines, and a
    list of all the lines of a .jsonl file took twice its text beside it. ``ends``: each line
    with its "\\n", as ``io.StringIO(text, newline="")`` gives them to ``csv`` (the text's line
    ends are all "\\n" by then, ``_newlines``), without that copy of the text four bytes a
    character (a 25 MB .csv file peaked at 12 times its size). ``check`` is called every
    ``_CHECK_CHARS`` characters: ``csv`` reads a row of many lines (a quoted cell) in one call,
    which asks for its lines here (a one-row 50 MB .csv, loaded: 3.2 s, a stop waiting for it)."""
    start, checked = 0, _CHECK_CHARS
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end + 1 if ends else end]
        start = end + 1
        if start >= checked:
            check()
            checked = start + _CHECK_CHARS
    if not ends or start < len(text):
        yield text[start:]


def _jsonl_rows(text: str, label: str, warnings: list[str],
                check: Callable[[], None] = _going_on) -> list[tuple[int, dict]]:
    rows: list[tuple[int, dict]] = []
    bad: list[int] = []   # line numbers
    for number, line in enumerate(_lines(text), 1):
        if not number % _CHECK_ROWS:
            check()
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):   # (arrays nested thousands deep)
            bad.append(number)
            continue
        if isinstance(row, dict):
            rows.append((number, row))
        else:
            bad.append(number)
    if bad and not rows:
        raise InputError(f"{label}: no line is a JSON object; a .jsonl file needs one object per line")
    if bad:
        lines = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        objects, which = ("a JSON object", "line") if len(bad) == 1 else ("JSON objects", "lines")
        warnings.append(f"{label}: {counted(len(bad), 'line')} {_are(len(bad))} not {objects}, skipped ({which} {lines})")
    return rows


def _csv_rows(text: str, label: str, warnings: list[str],
              check: Callable[[], None] = _going_on) -> list[tuple[int, dict]]:
    whole = text
    text = text[_BLANK_LINES.match(text).end():]   # blank lines before the header
    delimiter = None
    if m := _CSV_SEP.match(text):   # Excel's "sep=;" line names the delimiter
        delimiter, text = m.group(1), text[m.end():]
    lines_before = whole.count("\n", 0, len(whole) - len(text))
    # Else the delimiter is the one that splits the header into the most columns, a comma on a
    # tie: Excel writes semicolons where the comma is the decimal mark, and a header may hold one.
    header = next(_lines(text))   # (split("\n", 1) copied the rest)
    if delimiter is None:
        delimiter = max(",;\t", key=lambda d: (len(next(csv.reader([header], delimiter=d), [])), d == ","))
    try:
        reader = csv.DictReader(_lines(text, ends=True, check=check), delimiter=delimiter)
        rows = []
        for number, row in enumerate(reader, 1):
            if not number % _CHECK_ROWS:
                check()
            rows.append((number, row))
    except csv.Error as e:
        raise InputError(f"{label}: not readable as CSV ({_safe(str(e))}); check the quoting or convert it to .jsonl") from None
    if not rows:
        raise EmptyInput(f"{label}: a header and no rows, nothing to index")
    # A row with more fields than the header: a delimiter in a value not quoted. Its fields
    # beyond go back into the last column, as they were written (the text, when it is last).
    # (Empty fields beyond are a delimiter ending the row, as some exports write: dropped.)
    last = reader.fieldnames[-1]
    long_rows = []
    for number, row in rows:
        extra = row.pop(None, None) or []
        while extra and not extra[-1].strip():
            extra.pop()
        if extra:
            long_rows.append(number)
            row[last] = delimiter.join([row[last] or "", *extra])
    if long_rows:
        have = "has" if len(long_rows) == 1 else "have"
        warnings.append(f"{label}: {counted(len(long_rows), 'row')} {have} more fields than the header (the first: "
                        f"row {long_rows[0]}); their extra fields were joined to the last column, "
                        f"{_safe(last)!r}: quote values that hold the delimiter {delimiter!r}")
    if rows and any(isinstance(v, str) and "\n" in v for v in rows[-1][1].values()):
        # A quote opened and never closed takes the rest of the file into one field.
        strict = csv.reader(_lines(text, ends=True, check=check), strict=True, delimiter=delimiter)
        try:
            for _ in strict:
                pass
        except csv.Error:
            warnings.append(f"{label}: row {len(rows)} opens a quote that never closes, so the rest of "
                            f"the file from line {lines_before + _line_of_row(text, len(rows), delimiter)} is read as one field; "
                            "close the quote")
    return rows


_CSV_SEP = re.compile(r"\"?sep=(.)\"?[ \t]*\n")   # (some tools quote it)
_BLANK_LINES = re.compile(r"(?:[ \t]*\n)*")


def _line_of_row(text: str, row: int, delimiter: str = ",") -> int:
    """The line where data row ``row`` (1 = the first after the header) starts."""
    reader = csv.reader(_lines(text, ends=True), delimiter=delimiter)
    for _ in range(row):   # the header, then the rows before it
        next(reader, None)
    return reader.line_num + 1


def _whole_characters(value: str, check: Callable[[], None] = _going_on) -> tuple[str, bool]:
    """A row's field without NULs (a JSON "\\u0000": no text holds one) and with its lone
    surrogates as U+FFFD; and whether it had any of those. (ASCII holds none: not searched, a
    90 MB cell's search took half a second, a stop waiting for it.) Other text is searched a
    slice at a time, ``check`` called between (a 50 MB cell, loaded: 1-1.5 s in one search)."""
    halves = not value.isascii() and any(
        check() or _LONE_SURROGATE.search(value, at, at + _CHECK_CHARS) is not None
        for at in range(0, len(value), _CHECK_CHARS))   # (one character a match: no slice cuts one)
    return (_LONE_SURROGATE.sub("\ufffd", value) if halves else value).replace("\x00", ""), halves


def row_text(value: str) -> str:
    """A .jsonl or .csv row's text field ``value`` as a document's text holds it (``_row_documents``):
    visible characters, a lone surrogate as U+FFFD, no NULs, "\\n" line ends, composed (NFC)."""
    return _visible_row_text(visible(value))[0]


def _visible_row_text(value: str, *, nel: bool = True,
                      check: Callable[[], None] = _going_on) -> tuple[str, bool]:
    """``row_text`` of a field already ``visible``, and whether it held a lone surrogate: one
    place for both readers (the daemon's rename tie compares what ``_row_documents`` stored; it
    reads UTF-8 alone). ``nel``: as ``_newlines``'s, the file read as Unicode."""
    value, halves = _whole_characters(value, check)
    return _newlines([value], nel=nel), halves


def _one_line_title(cell: str, *, nel: bool = True) -> str:
    """A row's title ``cell`` on one line: its lines (a cell wrapped in a spreadsheet, "Ada\nLovelace")
    joined by a space, each without the blanks around it. A title is shown on one line, and
    said a name as a whole (``joins.name_title`` reads "Ada\nLovelace" as "Ada Lovelace"): its
    first line alone, "Ada", would have been no full name, and the graph's joins would change.
    A line ends where it does in a text (``_newlines``): ``nel``, the file was read as Unicode,
    where a U+0085 is NEL; else it is byte 0x85 of Latin-1 or ISO-8859-7, kept, as a first
    line's title keeps it (``_title``: "Ada\\x85Lovelace" was "Ada Lovelace", its text's first
    line "Ada\\x85Lovelace", so ``joins.own_title`` read it as a name the row says besides)."""
    if cell.isprintable():   # (no line break: most cells)
        return cell.strip()
    lines = cell.splitlines() if nel else _CELL_LINE_END.split(cell)
    return " ".join(line.strip() for line in lines if line.strip())


# Where ``str.splitlines`` ends a line but at U+0085 (``_one_line_title``, read as Latin-1).
_CELL_LINE_END = re.compile(f"\r\n|[\r\n{_BREAKS.replace(chr(0x85), '')}]")


# How many of a file's fields its "no 'text' field" line names.
FIELDS_SHOWN = 8


# The rows ``_longest_field`` looks at: enough to tell the text from the rest, and no seconds
# more on a 100 MB file's refusal (all of its 314,000 rows took 6.7 s).
LONGEST_ROWS = 1000
# A token that is no word: it has a digit, or a URL's, a path's or an address's characters.
_NOT_A_WORD = re.compile(r"[\d/\\@:=_]")


def _longest_field(rows: list[tuple[int, dict]]) -> str | None:
    """The field whose words run longest over the first rows, the likeliest to hold the text;
    None when no field holds words. "set index.text_field" left a newcomer to work out the TOML
    to write. Words, not a CSV's numbers, ids (a UUID) or links, which are strings too, and were
    named before the text when they ran longer than it."""
    lengths: collections.Counter[str] = collections.Counter()
    for _, row in rows[:LONGEST_ROWS]:
        for key, value in row.items():
            if isinstance(key, str) and isinstance(value, str):
                lengths[key] += sum(len(token) for token in value.split()
                                    if not _NOT_A_WORD.search(token) and any(c.isalpha() for c in token))
    best = lengths.most_common(1)
    return best[0][0] if best and best[0][1] else None


def _row_documents(rows: list[tuple[int, dict]], shown: str, stem: str, text_field: str,
                   warnings: list[str], *, nel: bool = True, check: Callable[[], None] = _going_on) -> list[Document]:
    def field(row: dict, wanted: str) -> str | None:
        if wanted in row:
            return wanted
        for key in row:
            if isinstance(key, str) and key.strip().lower() == wanted.lower():
                return key
        return None

    label = _safe(shown)   # ``shown`` names the documents, ``label`` the file in messages
    if not any(field(row, text_field) is not None for _, row in rows):
        # (the columns the file has, first seen first: which one holds the text was left to guess)
        names = list(dict.fromkeys(k for _, row in rows for k in row if isinstance(k, str)))
        shown_names = ", ".join(repr(_safe(k)) for k in names[:FIELDS_SHOWN]) + \
            (f" and {len(names) - FIELDS_SHOWN} more" if len(names) > FIELDS_SHOWN else "")
        has = f" (its fields: {shown_names})" if names else ""
        longest = _longest_field(rows)
        setting = (f"set index.text_field (`text_field = {json.dumps(_safe(longest), ensure_ascii=False)}` "
                   "under [index] reads its longest field)" if longest else "set index.text_field")
        raise NoTextField(
            f"{label}: no {text_field!r} field in any row{has}; name the column holding the text "
            f"{text_field!r} or {setting}"
        )
    docs: list[Document] = []
    seen: set[str] = set()
    skipped = duplicates = lone = 0
    for number, row in rows:
        check()   # (a row may be all of a 90 MB file: each is read in seconds)
        key = field(row, text_field)
        value = row.get(key) if key is not None else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            value = str(value)   # (NaN and Infinity, which JSON's reader takes, are no text)
        value = visible(value, check) if isinstance(value, str) else None   # (a JSON "\u200b" once parsed)
        if not value or not value.strip():
            skipped += 1
            continue
        text, halves = _visible_row_text(value, nel=nel, check=check)
        doc_id = document_id(text, check)
        if doc_id in seen:
            duplicates += 1
            continue
        seen.add(doc_id)
        title_key = field(row, "title")
        title = row.get(title_key) if title_key is not None else None
        title = _one_line_title(visible(title), nel=nel) if isinstance(title, str) else ""
        title = title or _title(text, f"{stem} #{number}")
        title, title_halves = _whole_characters(title)
        title = _composed(title)
        lone += halves or title_halves
        docs.append(Document(id=doc_id, path=f"{shown}#{number}", title=title[:TITLE_CHARS], text=text))
    if skipped:
        warnings.append(f"{label}: {counted(skipped, 'row')} without text in the field {text_field!r} "
                        "(index.text_field), skipped")
    if duplicates:
        repeat = "repeats" if duplicates == 1 else "repeat"
        warnings.append(f"{label}: {counted(duplicates, 'row')} {repeat} an earlier row's text, skipped")
    if lone:
        hold = "holds" if lone == 1 else "hold"
        warnings.append(f"{label}: {counted(lone, 'row')} {hold} a \\u escape of half a character (a lone "
                        "surrogate), read as \ufffd; check how the file was written")
    return docs
