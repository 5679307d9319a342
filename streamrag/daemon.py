"""``streamrag watch``: keep the index of a folder current while its files change.

    file events ──> pump (filter) ──> follow: queue ──> prefetch (extract the changed files now)
                                         │
                                         └── quiet_s without an event ──> sync (merge, cluster,
                                             dirty reports, publish)

Design notes:

* **Events are hints, the folder is the truth.** Every sync is ``Indexer.run`` on the whole
  folder, which decides by content what was added, changed, renamed or deleted. A missed event
  is repaired by the next sync. An event on an indexed file whose content is as indexed (a
  ``touch``, a ``chmod``, a backup writing the same bytes, a folder moved out and back) queues
  nothing: its size and change stamp, else its documents' content hashes, are compared with the
  index's.
* **Pay as files arrive, publish when things settle.** Extraction, the expensive per-file part,
  runs on each batch (``Indexer.prefetch``). Its products are content-addressed, so the sync
  after the quiet period finds them and only merges, clusters, reports and publishes.
* **The change source is a seam.** The daemon reads an async iterator of watchfiles-shaped
  sets of ``(change, path)``; ``watch_events.watch_folder`` wraps ``watchfiles.awatch``,
  tests feed scripted sets. The watcher starts before the initial sync, so edits made during
  it are not missed.
* **Quiet, but not forever.** A sync waits for ``watch.quiet_s`` without events, and without a
  write to the last batch's files that the batch before held too (the watcher holds a file
  written on and on back, its batches 10 x ``debounce_ms`` apart, each holding it), or that
  the extraction ahead found written as it waited for them to settle (said once while they
  are), but at most ten times that (``_MAX_WAIT_QUIETS``) after the first change it would
  publish: a file written steadily (an autosave, a log appended every second) is synced while
  it grows. Files that settle beside it (their own quiet period over) do not wait with it: a
  sync takes them alone, the busy file left pending and as indexed (``Indexer``'s
  ``left_as_indexed``), its cap and its settling line as they were (``_split``). Files the
  watcher still holds back (their burst not over, the files beside them handed over alone)
  are left as indexed by any sync, and said still written: their sync comes once it hands
  them over (``_held_by_watcher``).
* **A big file does not hold back what comes after it.** Its extraction ahead (``pipeline.
  LEAD_BYTES`` of new text: minutes to hours of calls) is paused by the next batch, its calls
  under way answered first and what it stored kept (``_prefetch``): the batch's sync leaves the big file as indexed, then its
  extraction resumes, once paused not again for ``_MAX_WAIT_QUIETS`` quiet periods (beside a
  log it would run only between a sync and a batch), and a sync publishes it once done.
* **Two ways to stop.** The first SIGINT/SIGTERM stops taking events and lets the in-flight
  prefetch or sync finish within ``watch.grace_s``; changes queued but not yet synced stay in
  the folder for the next start's initial sync, and so do those the watcher saw and had not
  handed over yet (within ``debounce_ms`` of the stop): the stopped line counts both. What
  watchfiles saw in its last step and had not passed on, it drops: with nothing left, the line
  says the index is current "as of the last change seen". A second
  signal (or the end of the grace period) cancels at once. Cancelling is safe: work products
  are committed as they are made and publishing is one transaction, so a restart repeats no
  paid call. SIGHUP stops it only when it runs from a terminal (a hang-up); sent to a service
  (logrotate, `systemctl reload`), it is said and changes nothing (``serve``).
* **A folder that goes away is waited for.** Deleted and made again at once (``rm -rf DIR &&
  mkdir DIR``) or after a while (a restore), the folder is followed and synced whole when it
  is back. While it is gone the daemon says so once and waits, like ``tail -F``, for as long
  as it takes; a signal stops it as usual. ``watch --once`` does not wait: a folder that is
  not there is an error.
* **An index moved away stops it.** Its file held (``_hold_index``), a move is told from a
  deletion: a deleted index is built again, a moved one is not (its calls would be paid again
  while it lies elsewhere): the daemon stops, naming where it went. One moved to the desktop's
  trash is deleted, as the file manager meant, when that costs nothing (offline); with a model
  it stops too, saying both ways on (restore it, or start again).
* **Quiet logs.** One status line per state change (queued, settling, extracting, merging, clustering,
  reporting, publishing, emptying the write-ahead log when that takes over a second, idle) with
  counts and timings on stderr, or JSON objects on stdout with ``--json``; a health line when,
  and only when, its numbers changed: after the sync that changed them, or, the sync's time
  alone, at the next look (every ``health_s``).
* **An outage is said once.** A model server that stops answering gets one full error line
  (the endpoint, the fix); the syncs meanwhile (retries, and syncs of edits, which their queued
  and extraction lines said) are silent, but for a short
  ``outage`` line when the pause between them grows (and once an hour at the cap), and one
  ``recovered`` line when it answers again: a weekend's outage is a few dozen lines, not 5,000.
  The model client's own retry lines (``HTTP 500 ...; retry 1/3``) are limited across the
  clients of every sync (``notices.sharing_notices``), and held while the outage lines speak.

This module is the orchestration (queue, prefetch, sync, retry, stop) and the command; its
parts live beside it: ``watch_events`` (the file events), ``watched_folder`` (which paths
count, what a folder holds, whether a file is as indexed), ``settings_edits`` (an edit of
the settings), ``outage`` (an endpoint that stops answering) and ``watch_lines`` (the lines).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import ctypes
import gc
import heapq
import json
import re
import logging
import math
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

import anyio

from streamrag import index_rows
from streamrag.config import Settings, find_config, load_settings, without_secrets
from streamrag.errors import (LLMError, LLMRequestError, LLMUnavailableError, RejectedFirstIndex, StreamragError,
                              UnusableFirstIndex, disk_full, user_errors_unwrapped)
from streamrag.exported import HEAD_BYTES, WHOLE, export_state_of, exported_head
from streamrag.ids import document_id
from streamrag.invisible import BREAK_HINTS
from streamrag.loader import (DOCUMENT_SUFFIXES, conflict_copies_line, file_of, leads_outside, left_out_lines,
                              export_said, read_documents, read_wide, row_text, scan_order, shown, text_start,
                              unstorable_folder, why_unusable, written_by_export_line)
from streamrag.notices import sharing_notices
from streamrag.on_disk import covered, is_file
from streamrag.outage import Outage
from streamrag.run_progress import Progress
from streamrag.settings_edits import SettingsEdits
from streamrag.status import (failures_said, last_update, left_missing, llm_summary, unfinished_update,
                              without_claims_said)
from streamrag.store import (Store, WriterLock, bound_wal, indexed_root, one_writer, remember_wal_tried,
                             updating_note, wal_kept_line, wal_past_bound, wal_tried)
from streamrag.terminal import shell_word
from streamrag.watch_events import (ADDED, DELETED, LINK_LOOP, REOPENED, REPLACED, RESCAN, UNDECODABLE, ChangeSet,
                                    folder_identity, watch_folder)
from streamrag.watch_lines import (Reporter, StageLines, answered, asked_again, calls_failed, calls_said, clause,
                                   ends_outage, paid, seconds_said, summed)
from streamrag.watched_folder import WatchedFolder, reading, under
from streamrag.words import counted as _n, number

if TYPE_CHECKING:  # the pipeline loads on first use, so `streamrag --help` stays quick
    from streamrag.pipeline import Indexer, SyncResult

_MAX_BACKOFF_S = 300.0
CURRENT_AS_SEEN = "index is current as of the last change seen"
"""The stopped line of a watch that left nothing to sync (``Daemon._run``)."""
_SAY_EMPTYING_S = 1.0
"""Emptying the write-ahead log after a publish (``Daemon._bound_wal``) that takes longer than
this is said: nothing was said between "publishing" and "idle" while it waited up to 30 s."""
_END_EMPTYING_S = 2.0
"""How long ``run`` waits, stopped, for the emptying of the log to end (``Daemon._end_emptying``)."""

log = logging.getLogger(__name__)


def _failures_after(failures: int, *, ok: bool, only_retry: bool) -> int:
    """The failed syncs in a row that set the pause before the next retry (it doubles with
    each): one for new changes that fails as the last did does not lengthen it. Edits during a
    35 s outage took the pause to 4 minutes, and the index stayed that stale after the server
    was back."""
    if ok:
        return 0
    return failures + 1 if only_retry or not failures else failures


def _joins_moved_said(result: SyncResult) -> str:
    """The idle line's clause of the short names a sync's ``result`` joined to a full name or
    parted (none: ""); of a first index (version 1), every one joined, none parted."""
    if not result.joins_moved:
        return ""
    from streamrag.pipeline import joins_moved_said

    return f"; {joins_moved_said(result.joins_moved, result.version, result.joins_joined, result.joins_parted)}"


def _news(health: dict[str, Any], last: dict[str, Any] | None) -> bool:
    """Whether the health line ``health`` says more than ``last``, the one said before, than the
    time the last sync took: that time alone is nothing a user acts on, and a line for it each
    minute (or each quiet retry of an outage) only repeated the one before."""
    return last is None or {**health, "last_sync_s": None} != {**last, "last_sync_s": None}


def _left_out_said(items: int, claims_failed: int, left_out: Callable[[str], str]) -> str:
    """The failed ``items`` of a sync that published, as what is true of them: those left out of
    the version (``left_out`` of their count: ``"4 failed items"``), and, ``claims_failed`` of
    them, the chunks whose claims calls failed, which the version holds without their claims
    (``status.without_claims_said``, as `index` says them): watch said "left out of this version:
    4 failed items" of chunks whose entities and relationships were published."""
    left = items - claims_failed
    return ", and ".join(([left_out(_n(left, "failed item"))] if left > 0 else [])
                         + ([without_claims_said(claims_failed)] if claims_failed else []))


def _to_retry_said(health: dict[str, Any]) -> str:
    """The health line's clause of the failed items a retry sync is for: ``(2 failed items to
    retry; 2 chunks without their claims, asked again at the next sync)`` ("" for none). The
    chunks indexed without their claims were counted as failed items ("4 failed items to
    retry"), though they are in the version, their entities and relationships too. Those the
    retries gave up on (``gave_up``) are said so, ``(1 failed item and 2 chunks without their
    claims, given up until a file changes)``: the line said "0 pending" of them while the
    stopped line after it counted them. With a changed file pending, the sync it waits for asks
    for them again: ``(..., asked again at the next sync)`` (it said "given up until a file
    changes" of them beside "1 pending")."""
    claims = health.get("claims_failed") or 0
    items = health["failed_items"] - claims
    if health.get("gave_up"):
        parts = ([_n(items, "failed item")] if items > 0 else []) + (
            [f"{_n(claims, 'chunk')} without {'its' if claims == 1 else 'their'} claims"] if claims else [])
        then = "asked again at the next sync" if health.get("pending") else "given up until a file changes"
        return f" ({' and '.join(parts)}, {then})" if parts else ""
    parts = ([f"{_n(items, 'failed item')} to retry"] if items > 0 else []) + (
        [f"{_n(claims, 'chunk')} without {'its' if claims == 1 else 'their'} claims, asked again at the next sync"]
        if claims else [])
    return f" ({'; '.join(parts)})" if parts else ""


def _failed_ahead(chunks: int, llm_stats: dict, then: str) -> str:
    """What the ``waiting`` line of an extraction ahead says of the ``chunks`` it could not
    extract (its calls' per-stage stats ``llm_stats``), and that ``then`` ("the sync") tries them
    again: ``; 2 chunks failed (the model's answers were unusable): the sync tries them again``
    ("" for none). Its line said "0 chunks extracted, 0 reused" of chunks a model answered with
    garbage, no word that they failed, nor why."""
    if not chunks:
        return ""
    failed = calls_failed(llm_stats)
    unusable = sum(s.get("unusable", 0) for s in llm_stats.values()) - asked_again(llm_stats)
    its = "its" if chunks == 1 else "their"
    why = ("the model's answers were unusable" if failed and unusable >= failed else
           f"{its} calls failed" if not unusable else f"{its} calls failed or {its} answers were unusable")
    return f"; {_n(chunks, 'chunk')} failed ({why}): {then} tries {'it' if chunks == 1 else 'them'} again"


def _error_field(words: str, error: str) -> dict[str, str]:
    """The ``error`` field of a line that says calls the endpoint did not answer: the model client's
    ``error`` when it gave up, else its ``words`` of the calls refused (none: no field)."""
    return {"error": error or words} if words else {}


_LOOK_S = 1.0
"""How often an idle daemon looks whether its index is still there (a stat): an index deleted
under it (``rsync --delete``, ``git clean -x``) makes no event it follows, and stayed deleted,
``ask`` failing "no index", until a file changed."""
_O_PATH: int | None = getattr(os, "O_PATH", None)
"""A handle on a file that neither reads nor locks it (Linux): ``Daemon._hold_index``."""
_MAX_RETRY_SYNCS = 3
_EXPORTS_TOLD = 16
"""New files of a batch that open as an export does, told whole or not at its event (each read
through for its checksum, ``_told_exports``); more are queued, and the sync tells them."""
_EXPORT_OPENS = 1000
"""New files of a batch opened, at most, to find those exports (``_told_exports``): a folder of
200,000 files moved in had each opened and read before its queued line (2.5 s of CPU, a slow
mount's 0.5 s an open); past them, the sync's scan tells exports, as past ``_EXPORTS_TOLD``."""
_LOOK_APART = 100
"""A batch of this many events on paths, or more, is looked at in a worker thread (``_classify``):
about 0.1-0.2 ms an event (``relevant``, a stat or two, an index query), a few ms on the loop."""
_STOP_READS_BELOW = 1 << 20
"""At a stop, the files seen changing are counted (``_seen_left``) with the renames among them, a
file read whole for that; one of this many bytes or more is not (the exit waited for its read)."""
_STOP_READS_AT_MOST = 4 << 20
"""Nor are files past this many bytes read in all: a folder of 60 indexed 0.9 MB files renamed
0.3 s before Ctrl-C had each read, and the exit came 2.8 s after the signal (0.3 s without the
rename), which a second signal did not shorten (no work under way). About 0.2 s of reading."""
_MAX_WAIT_QUIETS = 10
"""Events that never pause for ``quiet_s`` delay a sync this many times ``quiet_s`` at most."""
_NOT_THERE = ("deleted", "renamed away", "added and deleted")
"""The kinds of a file queued (``Daemon.pending``) that is not there to extract: deleted, renamed
away (its new name queued beside it), or added and deleted before its sync (``_queue``)."""
# A file added beside a deletion is read as far as its first ``_TIE_READ`` x chunk_size bytes
# to tell whether it begins with the deleted file's indexed text (``_written_on``): a chunk of
# chunk_size tokens is about 4 x chunk_size bytes of English, a few times that of other text.
_TIE_READ = 32
_TIE_MIN_CHARS = 32
"""The least indexed text of a deleted file an added one beginning with it is tied to."""
_TIE_CUT = 16
"""The characters of an opening's text not compared at its end: its last character may be cut,
a line end's half, a mark that closes further on."""
_WORD = re.compile(r"[A-Za-z0-9]{3,}")
_BLANKS = re.compile(r"\s*")


def _probe(text: str) -> bytes | None:
    """A word of ``text``'s opening (ASCII: the same bytes in UTF-8 and the legacy code pages
    the loader reads) that a file's bytes hold if its text begins with ``text``; ``None`` if
    it has none."""
    word = _WORD.search(text, 0, 200)
    return word.group()[:16].encode() if word else None


# The characters no reader sees, in UTF-8, that the loader drops (``invisible.visible``): one
# inside the probe's word ("Mi\u00adra", a soft hyphen pasted from the web) hid the word from
# the file's bytes, and a rename written on was not tied. (A legacy code page's soft hyphen,
# one byte, 0xAD, also ends many a UTF-8 letter: not looked for.)
_UNSEEN = tuple(ch.encode() for ch in BREAK_HINTS + "\u200c\u200d")


def _may_hold(head: bytes, probe: bytes | None) -> bool:
    """Whether a file whose bytes begin ``head`` may begin with a text holding ``probe``
    (``_probe``), the characters no reader sees in it left out (``_UNSEEN``): wide text (UTF-16
    and UTF-32, NULs or a byte-order mark) may, as ever."""
    if probe is None or probe in head or b"\0" in head[:4096] or head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return True
    unseen = [mark for mark in _UNSEEN if mark in head]   # (most files: none, one scan each)
    for mark in unseen:
        head = head.replace(mark, b"")
    return bool(unseen) and probe in head


def _begins_with(text: str, chunks: list[str], *, cut: bool) -> bool:
    """Whether ``text`` (a file's first document; ``cut``: the opening of it) begins with the
    text whose chunks are ``chunks`` (in order, each its part stripped, beginning within the one
    before, its overlap, or after blanks past its end): whole, or, ``cut``, as far as ``text``
    goes but its last ``_TIE_CUT`` characters, its first chunk at least; and that text is
    ``_TIE_MIN_CHARS`` long at least."""
    text = text.lstrip()
    end = len(text) - (_TIE_CUT if cut else 0)
    if not text.startswith(chunks[0]) or len(chunks[0]) > end:
        return False
    at, done = 0, len(chunks[0])   # where the chunk last matched begins, ends
    for chunk in chunks[1:]:
        stop = _BLANKS.match(text, done).end()   # (where it begins at the latest)
        found = text.rfind(chunk, at + 1, min(stop + len(chunk), end))
        if found < 0 and cut and stop + len(chunk) > end:
            # (beyond what was read: matched as far as it goes, the chunk it cuts too: a text
            # differing in that one, up to a chunk's 5,000 characters, was tied)
            if not _opens_chunk(text, chunk, at + 1, stop, end):
                return False
            break
        if found < 0:
            return False
        at, done = found, found + len(chunk)
    return done >= _TIE_MIN_CHARS


def _opens_chunk(text: str, chunk: str, first: int, last: int, end: int) -> bool:
    """Whether ``text[:end]`` ends with the opening of ``chunk``, begun at ``first`` to ``last``
    (``_begins_with``: within the chunk before, or after blanks past its end); past ``end``: it
    may."""
    if last >= end:
        return True
    at = text.find(chunk[:1], first, last + 1)
    while at >= 0:
        if chunk.startswith(text[at:end]):
            return True
        at = text.find(chunk[:1], at + 1, last + 1)
    return False


def _rows_begin(whole: list, rows: list[tuple[str, str]], *, cut: _CutRow | None,
                chunks_of: Callable[[str], list[str]]) -> bool:
    """Whether the documents ``whole`` (a .csv's or .jsonl's rows read whole from its opening)
    and the row ``cut`` after them (an opening's last row, read as far as it goes; ``None``: the
    file read whole) begin with the rows ``rows`` (a deleted file's, each its row number and
    document id, in order), each at its number: all of them; or all those read whole and the cut
    one as far as it goes (``_cut_row_begins``, the chunks of that row's text from ``chunks_of``,
    given its document id); and ``_TIE_MIN_CHARS`` of text at least. A file whose first row is
    short (a name, a date) is told by the rows after it, and one whose first row is long by them
    too: a new file sharing that row alone (a template's first entry) is no rename."""
    if len(whole) < len(rows) and cut is None:
        return False
    chars = 0
    for doc, (row, doc_id) in zip(whole, rows):
        if doc.id != doc_id or doc.path.rpartition("#")[2] != row:
            return False
        chars += len(doc.text)
    if len(whole) < len(rows):   # (the row cut is one of the rows)
        row, doc_id = rows[len(whole)]
        if cut.row != row:
            return False
        if cut.id == doc_id:
            held = len(cut.text)
        elif cut.whole:   # (its text whole, the line cut after it: compared whole, and differs)
            held = None
        else:
            held = _cut_row_begins(cut.text, chunks_of(doc_id))
        if held is None:
            return False
        chars += held
    return chars >= _TIE_MIN_CHARS


@dataclass(frozen=True)
class _CutRow:
    """The row an opening of a .csv or .jsonl file cuts short (``_rows_begin``): its number, its
    text as far as the opening goes, that text's document id (a .csv's cut row may be whole:
    matched whole first), and whether that text is whole (a .jsonl line cut after its text)."""
    row: str
    text: str
    id: str | None = None
    whole: bool = False


def _cut_line(head: bytes, docs: list, text_field: str) -> _CutRow | None:
    """The line a .jsonl file's opening ``head`` cuts short, read as far as it goes: the loader
    skips it (its JSON is not whole), so it was never compared, and a new file holding the old
    one's first row, then an unrelated line longer than an opening, was tied. Its ``text_field``
    string, as the loader would read it (``_jsonl_text``): "" if the cut comes before it; a line
    end just before the cut: the next row, "" of it. ``None`` if it cannot be read so (not UTF-8,
    not a JSON object so far, the field neither a string nor a number): no rename is told by it.
    ``head`` is read from where the loader's text begins (past a run of NULs it opens with), and
    its lines are counted as the loader counts those of UTF-8 text: each "\\r\\n", lone "\\r" or
    "\\n" ends one (by "\\n" alone, a .jsonl of "\\r" line ends was one line, no rename of it ever
    tied). Wide text (UTF-16, UTF-32: ``loader.read_wide``) is not read, ``None``: counted in
    bytes, its "\\r\\n" ends two lines and a character may hold a "\\n" byte. So a UTF-16 or
    UTF-32 .jsonl renamed and written on is not tied when its opening cuts one of the old file's
    rows (erring safe: it is synced as a deletion and an addition). A UTF-8 one's stray NULs are
    dropped, as the loader drops them (counting any NUL as wide left such a log untied)."""
    if read_wide(head):
        return None
    head = head.replace(b"\0", b"")
    at = max(head.rfind(b"\n"), head.rfind(b"\r")) + 1
    row = head.count(b"\n") + head.count(b"\r") - head.count(b"\r\n") + 1
    try:
        line = codecs.getincrementaldecoder("utf-8-sig" if not at else "utf-8")().decode(head[at:],
                                                                                       final=False)
    except UnicodeDecodeError:
        return None
    if docs and docs[-1].path.rpartition("#")[2] == str(row):   # (its JSON whole: the loader read it)
        return _CutRow(str(row + 1), "")
    read = _jsonl_text(line, text_field)
    if read is None:
        return None
    text, whole = read
    text = row_text(text)   # (as the loader's: a lone surrogate as U+FFFD, which the hash can encode)
    return _CutRow(str(row), text, document_id(text) if whole else None, whole)


def _jsonl_text(line: str, field: str) -> tuple[str, bool] | None:
    """The string under ``field`` (as the loader finds it: that key, else the first one equal to
    it but for case and blanks; a key written twice: its last value, as ``json.loads`` keeps) of
    the JSON object ``line`` begins, cut short anywhere, and whether it is whole; ("", False) if
    the line is cut before it; ``None`` if the line is no JSON object so far or the field no
    string (a number: its text). A key the cut leaves out may yet say otherwise: not known here."""
    decoder = json.JSONDecoder()
    chosen: str | None = None   # (the key the loader takes of those read)
    found: tuple[str, bool] | None = None   # (its last value read, whole; ``None``: no text)

    def read() -> tuple[str, bool] | None:   # (the line cut here)
        return ("", False) if chosen is None else found

    at = _JSON_BLANKS.match(line).end()
    if at == len(line):
        return "", False
    if line[at] != "{":
        return None
    at += 1
    while True:
        at = _JSON_BLANKS.match(line, at).end()
        if at == len(line):
            return read()
        if line[at] == ",":
            at = _JSON_BLANKS.match(line, at + 1).end()
            if at == len(line):
                return read()
        elif line[at] == "}":   # (its end: the field's last value, if a string)
            return found
        if line[at] != '"':
            return None
        try:
            key, at = json.decoder.scanstring(line, at + 1)
        except ValueError:   # (cut within the key, or no JSON: nothing read of the text)
            return read()
        if key in (field, chosen) or chosen is None and key.strip().lower() == field.lower():
            chosen, found = key, ("", False)   # (cut before its value: nothing read of it)
        at = _JSON_BLANKS.match(line, at).end()
        if at == len(line):
            return read()
        if line[at] != ":":
            return None
        at = _JSON_BLANKS.match(line, at + 1).end()
        if at == len(line):
            return read()
        ours = key == chosen
        try:
            value, at = decoder.raw_decode(line, at)
        except (ValueError, RecursionError):   # (cut within it)
            if not ours:
                return read()
            if line[at] != '"':
                return None
            for back in range(7):   # (an escape the cut split, or half a surrogate pair: left out)
                try:
                    text = json.decoder.scanstring(line[:len(line) - back] + '"', at + 1)[0]
                except ValueError:
                    continue
                return (text[:-1] if text and "\ud800" <= text[-1] <= "\udbff" else text), False
            return None
        if ours:
            if isinstance(value, str):
                found = value, True
            elif (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                  and at < len(line)):   # (a number the cut ends may be cut short: "12" of 125)
                found = str(value), True
            else:
                found = None


_JSON_BLANKS = re.compile(r"[ \t\n\r]*")   # (JSON's white space: not \s, which takes U+3000, say)


def _cut_row_begins(text: str, chunks: list[str]) -> int | None:
    """The characters of ``text`` (a row an opening cut short) that begin the text whose chunks
    are ``chunks`` (as ``_begins_with``), all but its last ``_TIE_CUT``; ``None`` if they do not.
    Unlike ``_begins_with``, text shorter than the first chunk is matched as far as it goes: an
    opening cuts a row anywhere, and the rows before it tell the rest."""
    text = text.lstrip()
    end = max(len(text) - _TIE_CUT, 0)
    if not chunks:
        return None
    if end <= len(chunks[0]):
        return end if chunks[0].startswith(text[:end]) else None
    return end if _begins_with(text, chunks, cut=True) else None


_UPDATING = frozenset({"queued", "settling", "extracting", "paused", "waiting", "merging", "clustering", "reporting",
                       "publishing"})
"""The states of an update under way, from a batch queued (or a sync begun) to the idle line of
the version that holds it: ``ask`` meanwhile answers from the version before (``_note_update``)."""


def _release_memory() -> None:
    """Frees what a sync left in reference cycles, and hands the heap pages a sync freed back
    to the system (glibc keeps them for reuse).

    A sync's ``Indexer`` and its model client sit in reference cycles (its progress listeners
    name it, say), so they went only with Python's rare full collection, and with the client its
    TLS context, a megabyte outside Python's heap that no collection threshold counts: through
    the simulator, 200 documents, ``watch`` grew by 8 MB every 100 changes (``bench/watch_soak.py``),
    0.7 MB collected after each sync.

    Between syncs the daemon idles for hours: measured on 2,500 documents, its RSS after the
    initial index went from 363 to 294 MB, and after each update from about 317 to 294 MB, in
    a millisecond or so. Elsewhere than glibc the trim does nothing."""
    global _malloc_trim
    from streamrag import ids

    ids.normalize_name.cache_clear()   # a sync's names: tens of MB the next sync may not need
    ids.entity_id.cache_clear()
    gc.collect()
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim if sys.platform.startswith("linux") else False
        except (OSError, AttributeError):  # musl and others: no malloc_trim
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim: Any = None


def _in_the_trash(path: str) -> bool:
    """Whether ``path`` lies in a desktop's trash, where a file manager's Delete moves a file: a
    freedesktop.org trash's ``files`` folder (``~/.local/share/Trash/files/``, a volume's
    ``.Trash-UID/files/`` or ``.Trash/UID/files/``), with its ``info`` folder beside it."""
    parts = Path(path).parts
    for i in range(2, len(parts) - 1):
        up = parts[i - 1]
        if parts[i] == "files" and (up == "Trash" or up.startswith(".Trash-") and up[7:].isdigit()
                                    or up.isdigit() and parts[i - 2] == ".Trash"):
            if os.path.isdir(os.path.join(*parts[:i], "info")):
                return True
    return False


def _regular_files(root: Path, rels: list[str]) -> list[Path]:
    """Those of the paths ``rels`` under ``root`` that are regular files (links to one
    included), sorted. One it may no longer look at (its folder chmod'ed since its event) is
    left out: the sync reads the folder and says what it cannot read."""
    return [p for p in (root / rel for rel in sorted(rels)) if is_file(p)]   # (not Path.is_file:
    # it lets PermissionError out)


def _modified(paths: list[Path]) -> dict[Path, tuple[int, int]]:
    """When each of ``paths`` was last written (ns), and its size; one gone since its look is left out."""
    seen = {}
    for p in paths:
        with contextlib.suppress(OSError):
            st = p.stat()
            seen[p] = (st.st_mtime_ns, st.st_size)
    return seen


def _written_again(root: Path, batch: dict[str, str], before: dict[str, str]) -> dict[Path, tuple[int, int]]:
    """``_modified`` of the files the last ``batch`` made or wrote that the batch ``before`` it
    held too: a file written on and on is in every batch the watcher hands over, and a batch of
    100,000 files (a folder moved in) took 0.9 s on the event loop to list and 2.7 s to stat, at
    each quiet period up to the cap. Run in a worker thread."""
    small, other = (batch, before) if len(batch) <= len(before) else (before, batch)
    return _modified([root / rel for rel in small
                      if rel in other and rel != "." and batch[rel] != "deleted"])


def _settle_wait(mtimes_ns: Iterable[int], young_s: float, now: float) -> float:
    """How long until the youngest of files last written at ``mtimes_ns`` was written ``young_s``
    before (0: none is younger). One written after ``now`` is not waited for: a clock set apart
    tells nothing of when the file was written."""
    ages = [now - m / 1e9 for m in mtimes_ns]
    return max((young_s - age for age in ages if 0 <= age < young_s), default=0.0)


def _still_written(mtimes_ns: dict[Path, int], young_s: float, now: float) -> list[Path]:
    """Those of the files last written at ``mtimes_ns`` that ``_settle_wait`` waits for, the
    youngest first: the one the waiting line names."""
    young = [p for p, m in mtimes_ns.items() if _settle_wait([m], young_s, now) > 0]
    return sorted(young, key=lambda p: -mtimes_ns[p])


def _young(root: Path, seen: dict[Path, tuple[int, int]], young_s: float, now: float) -> set[str]:
    """Those of the files ``seen`` (``_modified``'s) under ``root`` written less than ``young_s``
    before ``now`` (as ``_settle_wait`` waits for them), by their paths from ``root``."""
    return {p.relative_to(root).as_posix() for p, (m, _) in seen.items() if 0 <= now - m / 1e9 < young_s}


def _queued(pending: dict[str, str], rel: str) -> set[str]:
    """The files of the queue ``pending`` (``Daemon.pending``, or a copy) as there (not deleted)
    at ``rel`` or under it."""
    return {p for p in under(pending, rel) if pending[p] not in _NOT_THERE}


def _has_ready(recv) -> bool:
    """Whether a batch is waiting in ``recv`` (a memory object stream) to be taken."""
    stats = getattr(recv, "statistics", None)
    if stats is None:
        return False
    st = stats()
    return st.current_buffer_used > 0 or st.tasks_waiting_send > 0


def _take_ready(recv) -> dict[str, str]:
    """The batches waiting in ``recv`` now, as one (none: empty); the stream's end is left for
    the next receive to find."""
    batch: dict[str, str] = {}
    with contextlib.suppress(anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
        while True:
            batch.update(recv.receive_nowait())
    return batch


@dataclass
class _Looked:
    """What ``Daemon._look`` found of a batch's events, for ``_classify`` to apply on the loop."""

    out: dict[str, str]                                    # path -> added, modified, deleted ("." rescan)
    touched: dict[str, dict[str, tuple[str, int, float]]]  # indexed files written, maybe as indexed: their rows
    warnings: list[str]                                    # lines to say once (``_warn_once``)
    broken: list[str]                                      # broken links to note (``note_broken``)
    new: list[str]                                         # files of ``out`` new to the index and the queue


def _opens_as_export(path: Path) -> bool:
    """Whether the file ``path`` opens as one `streamrag export` wrote (``exported_head``: needed,
    not enough; an unreadable one does not). Asked of a batch's new files, up to ``_EXPORT_OPENS``
    (``_told_exports``): a descriptor, not a file object (half the CPU: 20,000 files, 0.09 s, not
    0.2 s); opened without waiting (a FIFO made since its stat does not hold the thread), and read
    only if a regular file (a FIFO's writer's data was read away from its reader)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        if not S_ISREG(os.fstat(fd).st_mode):
            return False
        head = b""
        while len(head) < HEAD_BYTES and (part := os.read(fd, HEAD_BYTES - len(head))):
            head += part
        return exported_head(head)
    except OSError:
        return False
    finally:
        os.close(fd)


def _told_exports(root: Path, rels: list[str], stopped: Callable[[], bool]) -> dict[str, bool]:
    """The first ``_EXPORTS_TOLD`` of the files ``rels`` (paths from ``root``) that open as an
    export does (``_opens_as_export``), each with whether it is one written whole (read through
    for its checksum). A worker thread's, whatever the batch's size: each file is opened and read
    (a slow mount, each open 0.5 s: 4 new files held the event loop 2 s). Ends at a stop, and
    after ``_EXPORT_OPENS`` files."""
    told: dict[str, bool] = {}
    for rel in rels[:_EXPORT_OPENS]:
        if len(told) >= _EXPORTS_TOLD or stopped():
            break
        if _opens_as_export(root / rel):
            told[rel] = export_state_of(root / rel) == WHOLE
    return told


def _left_out_by_kind(files: Iterable[str], said: frozenset[str]) -> dict[str, tuple[int, list[str]]]:
    """``Daemon._say_left_out``'s files (paths from the root) by kind, those of ``said`` left
    out: each kind's count and its first three files by name (not all sorted)."""
    by_kind: dict[str, list[str]] = {}
    for rel in files:
        if (kind := os.path.splitext(rel)[1].lower()) not in said:
            by_kind.setdefault(kind, []).append(rel)
    return {kind: (len(rels), heapq.nsmallest(3, rels)) for kind, rels in by_kind.items()}


class Daemon:
    """Keeps the index at ``db_path`` equal to the folder ``root``: ``await daemon.run(source)``."""

    def __init__(self, settings: Settings, db_path: Path, root: Path, *,
                 report: Callable[[dict[str, Any]], None] = lambda event: None,
                 transport=None, health_s: float = 60.0,
                 reload: Callable[[], Settings] | None = None, retry_base_s: float | None = None,
                 warnings: tuple[str, ...] = (), failures_command: str | None = None) -> None:
        self.settings = settings
        # What the command found to say before the daemon began (cmd_watch: the second index it
        # builds), said at the start as the settings' warnings are: on stdout with --json.
        self.warnings = warnings
        self.db_path = Path(db_path)
        self.root = Path(root).resolve()
        # The command its lines name to list what failed, as it reads this index from where the
        # watch runs (cmd_watch gives ``cli.failures_command``'s, with the folder as given): the
        # bare command, run where `watch notes` ran, said "no index found here or in a parent folder".
        from streamrag.status import FAILURES   # (None: the bare command, run in the folder)

        self.failures_command = failures_command or FAILURES
        self.report = report
        self.transport = transport
        self.retry_base_s = retry_base_s   # (tests: the model clients' first backoff, ``llm.RETRY_BASE_S``)
        self.health_s = health_s
        self.stop_event = anyio.Event()          # also stops watchfiles' thread
        self.pending: dict[str, str] = {}        # path relative to root -> added|modified|_NOT_THERE's (".": rescan|retry)
        self._syncing: dict[str, str] = {}       # ... of the sync under way (not synced yet either)
        self._sync_run: str | None = None        # the run id of the sync under way
        self.syncs = 0
        self.closing_watcher = False             # only the file watcher is left to end (``_run``)
        self._idle_wait: anyio.CancelScope | None = None   # ``_follow``'s wait for a batch
        self.indexers_made = 0                   # (a sync that made one collects it: ``_sync``)
        self.writer_lock: WriterLock | None = None   # held by `streamrag watch` (cmd_watch)
        self._updating_since: float | None = None   # when the update under way began (``_note_update``)
        # Since the last sync that published: chunks extracted as files changed, and the calls
        # of that extraction and of syncs that failed (the idle line sums up the whole update).
        self._ahead = {"chunks": 0, "llm": {}}
        self.errors = 0                          # error lines emitted
        self._last_state: tuple[str, str] | None = None   # (state, message) of the last state line
        self._retries = 0                        # syncs scheduled only to retry failed calls
        self._retry_items = 0                    # items the scheduled retry sync is for
        self._retry_chunks = 0                   # ... of them chunks, whose files' new versions wait
        # ... those chunks by file, as the last sync that published held them back (``Indexer.held_back``):
        # of a file changed again since, pending, they count as that file (``_pending_chunks``)
        self._retry_files: dict[str, frozenset[str]] = {}
        # ... of the items, the chunks indexed without their claims, their claims calls failed
        # (``SyncResult.claims_failed``): in the version, not left out of it
        self._retry_claims = 0
        # The failed items (and of them the chunks indexed without their claims) left in the
        # version after the retries gave up, which no sync is scheduled for: the stopped line
        # said "index is current" of them (``_left_out``), and the health line "0 pending"
        # (``_items_left``).
        self._given_up = (0, 0)
        # The last sync failed and listed the files it left unindexed (pending now): the files of
        # the chunks to retry are among them, and count as files, not as their chunks too.
        self._files_listed = False
        # The first run of the update the next sync goes on with: set while syncs leave items
        # missing (failed, or published without them), so `status` counts an item once per
        # update, not once per retry of an outage; None once none is left. Those the retries gave
        # up on are still missing, and the next sync (a file changed) asks for them again: it
        # began an update of its own, and `status` said "0 so far in this update" of it where it
        # said 3 before. A start goes on with the update the last watch left so (``_unfinished_update``).
        self._update_of: str | None = None
        self._nothing_indexed = False            # `--once`: every item failed, the index holds nothing
        self._once = False                       # run(None): one sync, nothing is retried
        self._answered_first = False             # a call of the initial sync was answered (``_check_key``)
        self.exit_code = 0                       # 1 when the daemon stops on an error
        self.last_sync_s: float | None = None
        self.last_result: SyncResult | None = None
        self.warned: set[str] = set()  # the warnings of the last sync, already printed
        # The lines of exports said at their event (``_classify``) since the last sync's warnings:
        # one written while a sync ran, after its scan, is not in that sync's lines, and the next
        # sync said it again (``_say_warnings``).
        self._exports_said: set[str] = set()
        self._copies: list[str] = []   # the conflict copies the last sync's scan named, and those met since
        # The kinds of file left out that were said (``left_out_lines``): the initial sync's, and
        # each new one when its first files appear (``_left_out_to_say``), once (a .pdf dropped into a
        # watched folder was said by no line, as `index` says it).
        self._kinds_said_left_out: set[str] = set()
        from streamrag.graph_state import GraphCache

        self.graph_cache = GraphCache()            # the graph the last sync published, for the next
        self._pump_scope: anyio.CancelScope | None = None  # made in run(): needs the event loop
        self._last_health: dict | None = None
        self._root_id: tuple[int, int] | None = None  # (st_dev, st_ino) of the folder watched
        self._gone = False                       # the folder is gone: waiting for it to come back
        self._index_gone_said = False            # the index was deleted under us, and we said so
        self._index_handle: int | None = None    # the index file, held to tell a move from a deletion
        self.index_moved_to: str | None = None   # where it was moved while we ran ("": not known)
        self._index_trashed: str | None = None   # where in the desktop's trash, taken as deleted (not said yet)
        self._replaced = False                   # the folder was replaced since the last sync
        # The settings files, followed: an edit is said, and applies at the next start.
        self._settings_edits = SettingsEdits(
            settings, self.root, say=lambda line: self.emit("warning", line, warning=line),
            reload=reload or (lambda: load_settings(find_config(self.root), models_for=("index",))))
        # Which paths count, what a folder holds, whether a file is as indexed: read, not kept.
        self.folder = WatchedFolder(settings, self.db_path, self.root)
        # The endpoint, when it stops answering: said once, briefly while it lasts.
        self.outage = Outage(settings, self.emit)
        self._watcher_failures: set[str] = set()   # the watcher's failures said (``_classify``)
        # The log's size when emptying it last failed; None until read from the index (``_bound_wal``).
        self._wal_tried: int | None = None
        self._emptying: tuple[threading.Thread, threading.Event] | None = None   # its thread, and its stop
        self._extracting_ahead = False   # a batch's files are being extracted ahead of their sync
        self._classifying: set[tuple[int, str]] = set()   # the events the pump is looking at
        # Set at a stop: the looks of a batch in a worker thread (``_kinds``, ``_look``), abandoned by
        # the stop, end at their next event; the process's exit waited for the thread (1.5 s of a
        # look slowed to 3 s).
        self._stop_looking = threading.Event()
        self._source: AsyncIterable[ChangeSet] | None = None   # the watcher (its ``held``: ``_held_by_watcher``)
        # The files the last extraction ahead found written while it waited for them to settle
        # (``_settled``), and those it said it waited for, until a sync comes after a quiet period.
        self._unsettled: set[Path] = set()
        self._settling_said: set[Path] = set()
        # Each file queued since its last sync: when its first and its last batch came (the
        # daemon's clock) and in how many batches (``_split``).
        self._queued_at: dict[str, tuple[float, float, int]] = {}
        # ... and the renames among them, each new name's old one (``_queue``): a rename is synced
        # whole or not at all (``_split``).
        self._renamed_from: dict[str, str] = {}
        # ... and the files a batch added that begin with the indexed text of one it deleted that
        # no rename matched (``_tie``, ``_written_on``): ``mv a.txt b.txt`` with b.txt written
        # before the batch was looked at differs from a.txt's indexed text. The old name waits
        # with the new one left as indexed (``_with_renames``).
        self._tied: list[tuple[frozenset[str], frozenset[str]]] = []
        # ... and, not asked yet (``_tie``), the files a batch added beside those it deleted: they
        # are read only once a sync would leave one as indexed (10,000 files copied in beside an
        # ``rm`` were read before the batch's queued line, none of them left).
        self._may_tie: list[tuple[frozenset[str], frozenset[str]]] = []
        # A big file's extraction ahead (``pipeline.LEAD_BYTES`` of new text: minutes to hours of
        # calls) paused by a batch that came during it (``_prefetch``): the big files, left as
        # indexed by every sync until their extraction, resumed after the sync of the others,
        # is done; and that batch, for ``_follow`` to take. ``_follow``'s stream: ``_recv``.
        self._paused: set[str] = set()
        self._came: dict[str, str] = {}
        self._recv = None
        self._pausable_at = -math.inf   # (a resumed extraction runs a while first: ``_resume_paused``)

    # -- control -------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self.stop_event.is_set()

    def stop(self, reason: str = "stop requested") -> None:
        """Takes no more events; the prefetch or sync under way finishes, then ``run`` returns."""
        if self.stopping:
            return
        self.stop_event.set()
        self._stop_looking.set()
        if self._pump_scope is not None:
            self._pump_scope.cancel()
        if self._idle_wait is not None:   # an idle daemon stops now, not at its next look
            self._idle_wait.cancel()
        if self.syncs and self._sync_run is None and not self._extracting_ahead:
            # Idle: there is no work to finish, and no grace to wait out. Files queued for a sync
            # not begun (its quiet period, a retry's pause) are no work under way: they are left
            # to the next start, as the stopped line says (it said the grace of them).
            self.emit("stopping", f"{reason}: nothing under way")
        else:
            self.emit("stopping", f"{reason}: finishing the work under way "
                                  f"(grace {self.settings.watch.grace_s:g}s, a second signal cancels)")

    def emit(self, state: str, message: str, **fields: Any) -> None:
        """Reports one status event (a state change, a health line, an error).

        Every ``error`` line is counted in the health line's errors."""
        if state == "error":
            self.errors += 1
        if state != "health":
            self._last_state = (state, message)
            self._note_update(state)
        self.report({"event": "health" if state == "health" else "state", "state": state,
                     "message": message, **fields})

    def _note_update(self, state: str) -> None:
        """Notes on the writer lock's file (``WriterLock.note``) that an update is under way, and
        since when, from its first state line to its idle line, for ``ask`` to say that its
        answer is from the version before: during a burst it answered "Nothing in the index
        mentions ..." of a name the 200 files being extracted held, without a word of them."""
        if self.writer_lock is None:
            return
        if state in _UPDATING:
            self._updating_since = self._updating_since or time.time()
            self.writer_lock.note(updating_note(self._updating_since, self._files_pending()))
        elif state in ("idle", "gone") and self._updating_since is not None:   # (gone: nothing left queued)
            self._updating_since = None
            self.writer_lock.note(None)

    def _files_pending(self) -> int:
        """Changed files not synced yet, without the ``"."`` marker (a retry, a rescan): those
        waiting for a sync and those of the sync under way (during an outage, a retry sync holds
        them for minutes), each once."""
        return len({rel for changes in (self._syncing, self.pending) for rel, kind in changes.items()
                    if rel != "." and kind not in ("renamed away", "added and deleted")})

    def _items_to_retry(self) -> int:
        """The failed items the scheduled retry sync, or the one under way, is for (0: none is
        scheduled); before a sync got through, those the update it goes on with left missing
        (``_unfinished_update``), which a whole-folder sync retries."""
        marker = self.pending.get(".") or self._syncing.get(".")
        return self._retrying() if marker == "retry" or marker == "rescan" and not self.syncs else 0

    def _claims_to_retry(self) -> int:
        """Of the failed items to retry (``_items_to_retry``), the chunks indexed without their
        claims (published: never among the chunks whose files wait, ``_retry_chunks``)."""
        return min(self._retry_claims, self._items_to_retry())

    def _items_left(self) -> tuple[int, int, bool]:
        """The failed items left in the version, of them the chunks indexed without their claims,
        and whether the retries gave up on them: those a retry sync is for (``_items_to_retry``),
        else those the retries gave up on (``_given_up``), which wait for a file to change. The
        health and stopped lines count them so: the health line said "0 pending" of those given
        up on while the stopped line after it counted them."""
        retry = self._items_to_retry()
        if retry or not self._given_up[0]:
            return retry, self._claims_to_retry(), False
        # (a file whose chunks were given up on, edited since: pending, and asked for whole by the
        # next sync; its chunks were counted as failed items too)
        items, claims = self._given_up
        return max(items - self._pending_chunks(), claims), claims, True

    def _pending_chunks(self) -> int:
        """Of the chunks to retry, those of files pending again (changed since the sync that
        left them out, ``_retry_files``): counted once, as those files."""
        files = self.pending.keys() | self._syncing.keys()
        # (a .jsonl or .csv file's rows are kept as the index names them, "rows.jsonl#2")
        chunks = set().union(*(ids for rel, ids in self._retry_files.items() if file_of(rel) in files))
        return min(len(chunks), self._retry_chunks)

    def _retrying(self) -> int:
        """The failed items to retry, each file or item once: a chunk's not while its file is
        pending (a restart during an outage said "5 pending (1 failed item to retry)" of 5 files,
        the one whose chunk failed counted twice)."""
        return self._retry_items - (self._retry_chunks if self._files_listed else self._pending_chunks())

    def _why_sync(self, left_as_indexed: Iterable[str] = (), watched: dict[str, str] | None = None,
                  held_renames: dict[str, str] | None = None, paused: Iterable[str] = ()
                  ) -> tuple[str, dict[str, Any]]:
        """What the next sync is for, ``2 changed files, retrying 3 failed items``, and its counts
        as its first line gives them: ``files``, ``whole_folder``, and ``failed_items`` and
        ``claims_failed`` (of them, the chunks indexed without their claims) when it retries.
        ``left_as_indexed``: the files it leaves for a later sync, still written (``_split``,
        and those the watcher holds, ``watched``: ``_held_by_watcher``):
        ``1 changed file; log.txt still written, synced once quiet`` (their count ``held``), or
        deleted as they were written (``held_deleted``). A new name left with its old one (a rename
        queued, ``_renamed_from`` and ``_tied``, or held, ``held_renames``) is said so:
        ``b.txt (renamed from a.txt) still written``. Those of them whose extraction ahead a batch
        paused (``paused``, ``_prefetch``) are said so, ``big.txt extracted after it``, their count
        ``paused``."""
        parts = []
        paused = sorted(paused)
        left = sorted(left_as_indexed)
        kinds = {**(watched or {}), **self.pending}
        # (the old name of a file renamed and written on is left with it, not written: ``_split``;
        # a deletion tied to a new name, ``_tied``, counts as a change left, but is not said)
        there = [rel for rel in left if kinds.get(rel) not in ("renamed away", "added and deleted")]
        files = self._files_pending() - sum(rel in self.pending for rel in there)
        tied = {old for new, olds in self._tied if new & set(left) for old in olds}
        there = [rel for rel in there if rel not in tied]
        was = {**{n: o for new, olds in self._tied for n in new for o in olds}, **self._renamed_from,
               **(held_renames or {})}   # (new name -> old)
        held: list[str] = []
        left_why: dict[str, Any] = {}
        if left:
            # A file deleted as it was written (its last batch a deletion) is left too, but is
            # not "still written": it was counted so, and named as such when it came first.
            gone = [rel for rel in there if kinds.get(rel) == "deleted"]
            written = [rel for rel in there if rel not in gone and rel not in paused]
            if not there:
                # Only the names of renames and files come and gone: the new name of a rename
                # deleted since (`mv a.txt b.txt`, b.txt written, then deleted) was deleted as it
                # was written; the old name, renamed away, is not written (this fell back on
                # every name left: "a.txt and 1 more file still written").
                gone = [rel for rel in left if kinds.get(rel) == "added and deleted"]
                written = [] if gone else [rel for rel in left if kinds.get(rel) != "renamed away"] or left
            for named, how in ((written, "still written"), (gone, "deleted as it was written")):
                if named:
                    more = f" and {_n(len(named) - 1, 'more file')}" if len(named) > 1 else ""
                    old = was.get(named[0])
                    renamed = f" (renamed from {shown(old)})" if old in left else ""
                    held.append(f"{shown(named[0])}{renamed}{more} {how}")
            left_why = {"held": len(written), **({"held_deleted": len(gone)} if gone else {}),
                        **({"paused": len(paused)} if paused else {})}
        # (a big file paused: ``big.txt extracted after it``, whether or not files still written are said)
        more = f" and {_n(len(paused) - 1, 'more file')}" if len(paused) > 1 else ""
        after = f"{shown(paused[0])}{more} extracted after {'them' if files > 1 else 'it'}" if paused else ""
        held_said = "; ".join(([f"{' and '.join(held)}, synced once quiet"] if held else [])
                              + ([after] if after else []))
        if left and "." not in self.pending:   # (a whole folder or a retry: below, the held files after it)
            came = sum(kind == "added and deleted" for rel, kind in self.pending.items() if rel not in left)
            said = _n(files, "changed file") if files else f"{_n(came, 'file')} added and deleted"
            return f"{said}; {held_said}", {"files": files, **left_why, "whole_folder": False}
        if files:
            parts.append(_n(files, "changed file"))
        marker = self.pending.get(".")
        why: dict[str, Any] = {"files": files}
        if marker == "retry" and self._retrying():   # (none: its chunks' files are pending, said above)
            # (the chunks indexed without their claims apart: "retrying 4 failed items" of them;
            # claims_failed beside failed_items, 0 too, as the health, stopped and error lines give it)
            claims = self._claims_to_retry()
            items = self._retrying() - claims
            parts.append("retrying " + " and ".join(([_n(items, "failed item")] if items else [])
                                                    + ([f"the claims of {_n(claims, 'chunk')}"] if claims else [])))
            why.update(failed_items=self._retrying(), claims_failed=claims)
        elif marker == "rescan":
            parts.append("the whole folder")
        came_and_went = sum(kind == "added and deleted" for kind in self.pending.values())
        if came_and_went and not parts:   # (a sync of its own, not of the whole folder)
            parts.append(f"{_n(came_and_went, 'file')} added and deleted")
            why["added_and_deleted"] = came_and_went
        why["whole_folder"] = marker == "rescan" or not parts
        reason = ", ".join(parts) or "the whole folder"
        if held_said:
            reason += f"; {held_said}"
            why.update(left_why)
        return reason, why

    def _check_root(self, *, replaced: bool = False) -> bool:
        """True (and one status line) if the folder was replaced since last looked at: deleted
        and made again (``rm -rf DIR && mkdir DIR``) or moved away and made again. ``replaced``:
        an event said so (the file system may give the new folder the old one's inode number)."""
        now = folder_identity(self.root) if self.root.is_dir() else None
        if now is None:
            return False
        before, self._root_id = self._root_id, now
        if self._gone:
            self._gone = False
            self._replaced = True
            self.emit("warning", f"{self.root} is back: watching it and syncing it whole",
                      warning="folder back", replaced=True)
            return True
        if not replaced and (before is None or now == before):
            return False
        self._replaced = True
        self.emit("warning", f"{self.root} was replaced (deleted and made again): watching the new "
                             "folder and syncing it whole", warning="folder replaced", replaced=True)
        return True

    def _folder_gone(self) -> None:
        """The watched folder is not there: says so once and waits for it to come back (a
        restore), forgetting what was queued: its return is synced whole."""
        from streamrag.graph_state import GraphCache

        self.pending.clear()
        self._queued_at.clear()
        self._renamed_from.clear()
        self._tied.clear()
        self._may_tie.clear()
        self._retries = self._retry_items = self._retry_chunks = self._retry_claims = 0
        self._retry_files = {}
        self._given_up = (0, 0)
        self.graph_cache = GraphCache()   # a restored folder may bring an older index with it
        if self._gone:
            return
        self._gone = True
        if self.db_path.exists():
            index = f"its index {self.db_path} keeps what it held meanwhile"
        else:  # the default .streamrag/index.db was inside it
            index = (f"its index {self.db_path} went with it: the sync when the folder is back "
                     "rebuilds it (or brings the copy restored with the folder up to date)")
        self.emit("gone", f"{self.root}: the watched folder is gone; waiting for it to come back, "
                          f"then syncing it whole (Ctrl-C stops); {index}",
                  gone=True, db_kept=self.db_path.exists())

    # -- which events matter ---------------------------------------------------------------
    def worth_holding(self, changes: ChangeSet) -> ChangeSet:
        """The watcher's ``keep`` (``watch_events.watch_folder``): those of its raw ``changes``
        that may change the index (``WatchedFolder.worth_holding``), before it gathers them into
        bursts. A hidden or excluded file written on and on (a tool's log, an editor's swap file)
        kept the burst open, and held the other files' changes back up to ``10 x debounce_ms``,
        though ``_classify`` then dropped its events. All of them while the folder is not there
        (its return is any event's to say)."""
        if self._gone or not self.root.is_dir():
            return changes
        kept = self.folder.worth_holding(changes, self._settings_edits.follows)
        # ... and a file of a kind left out not said yet (a .pdf), whose line ``_classify`` says;
        # once said, that kind's writes are dropped again (``_kinds_said_left_out``).
        return kept | {(change, path) for change, path in changes - kept if int(change) != DELETED
                       and (kind := os.path.splitext(path)[1].lower()) in DOCUMENT_SUFFIXES
                       and kind not in self._kinds_said_left_out and self.folder.left_out_kind(path, look=False)}

    def _queued_in(self, rel: str) -> set[str]:
        """The files queued for the next sync as there (not deleted) at ``rel`` or under it."""
        return _queued(self.pending, rel)

    def _warn_once(self, line: str) -> None:
        """A warning line, unless said already (by this or by the last sync, whose scan says it)."""
        if line not in self.warned:
            self.warned.add(line)
            self.emit("warning", line, warning=line)

    def _left_out_to_say(self, change: int, path: str) -> bool:
        """Whether the event's file is one the scan leaves out and says what to do about, of a
        kind not said yet (the initial sync said those the folder held): a .pdf dropped into the
        folder was said by no line, `index` says "left out 1 .pdf (... convert it ...)". Not a
        hidden, excluded or temporary file (``WatchedFolder.left_out_kind``). Only reads (the
        file's first bytes too): ``_kinds``' of the events ``relevant`` passes over."""
        return (change != DELETED and os.path.splitext(path)[1].lower() not in self._kinds_said_left_out
                and self.folder.left_out_kind(path) is not None)

    async def _say_left_out(self, files: set[str]) -> None:
        """Says the left-out line of each kind of the files ``files`` (paths from the root) not
        said yet, once, counting them and naming the first three: those of ``_left_out_to_say``,
        and those found in a folder made or moved in, which is one event
        (``WatchedFolder.files_in``). Three PDFs dropped in were said "left out 1 .pdf", none named.
        Many are told apart in a worker thread (``_left_out_by_kind``): a folder of 100,000 PDFs
        moved in held the event loop 1.2 s (0.1 s before they were counted), measured."""
        by_kind = await self._reading(len(files) >= _LOOK_APART, _left_out_by_kind, files,
                                      frozenset(self._kinds_said_left_out))
        for kind, (count, first) in sorted(by_kind.items()):
            if kind in self._kinds_said_left_out:   # (said meanwhile)
                continue
            self._kinds_said_left_out.add(kind)
            named = ", ".join(map(shown, first)) + (f" and {count - 3} more" if count > 3 else "")
            for line in left_out_lines({kind: count}, self.settings.index.include):
                self.emit("warning", f"left out {line}: {named}", warning=f"left out {line}: {named}")

    def _name_copies(self, appeared: set[str]) -> None:
        """Says the scan's line on sync conflict copies when one appears (Dropbox's, Syncthing's):
        it queues nothing, so the line came with the next sync, which may be hours away. The line
        names those the last sync found too, as the next sync's scan does, which then says
        nothing more (``warned``)."""
        new = [rel for rel in appeared if rel not in self._copies
               and os.path.lexists(at := self.root / rel) and not os.path.isdir(at)]
        if new:
            self._copies = sorted((rel for rel in [*self._copies, *new] if os.path.lexists(self.root / rel)),
                                  key=lambda rel: scan_order(self.root, rel))
            if self.syncs:   # (before, the copies the folder held were not known: the initial sync names them)
                self._warn_once(conflict_copies_line(self._copies))

    async def _classify(self, changes: ChangeSet) -> dict[str, str]:
        """The batch's files, each ``added``, ``modified`` or ``deleted`` (a ``"."`` key: the
        whole folder). A folder made or moved in counts as the files under it, a folder deleted
        as the indexed files it held; a file created where one is indexed (an editor's save by
        rename, a folder moved or copied in over indexed files) is ``modified``, unless its
        content is as indexed (``WatchedFolder.as_indexed``): then, like a ``touch``, it is
        left out."""
        out: dict[str, str] = {}
        if not self.root.is_dir():
            self._folder_gone()          # said once; the folder's return is synced whole
            return {}
        if self._gone:                   # back, whatever the event (the sync checks again)
            self._check_root(replaced=True)
            out["."] = "rescan"
        named: list[tuple[int, str]] = []   # the events on paths, which ``relevant`` decides (``_look``)
        for change, path in changes:
            if change == REPLACED or (int(change) == DELETED and Path(path) == self.root):
                # The folder was deleted, and is there again: the watcher (ours restarts on the
                # new folder and says REPLACED) saw its deletion.
                if out.get(".") != "rescan":    # said once per batch
                    self._check_root(replaced=True)
                out["."] = "rescan"
                continue
            if change == REOPENED:
                # A folder the watcher could not follow is readable again: it restarted to follow
                # it, and what changed meanwhile, in it or elsewhere, is found by a look at all.
                out["."] = "rescan"
                continue
            if change == RESCAN:
                bad_name = UNDECODABLE.search(path)
                if path in self._watcher_failures:
                    # Said once: one that fails on every restart, or the polling watcher stopped
                    # again by the name when it goes (renamed, as the line advised).
                    pass
                elif bad_name:  # watchfiles cannot pass on a name that is not UTF-8
                    self.emit("error", f"{bad_name.group(1)}: file name is not valid UTF-8, so the "
                                       "watcher stops at it; rename it (e.g. with `mv`) to a UTF-8 "
                                       "name, then restart watch. Meanwhile the watcher polls the "
                                       "folder each second; the whole folder is synced again",
                              error=path)
                else:
                    loop = LINK_LOOP.search(path)
                    self.emit("error", f"{loop.group(1) or loop.group(2)}: a symlink loop stops the file watcher (it "
                                       "polls the folder, following links, since a name that is not "
                                       "UTF-8 stopped its events); remove or fix the link, then restart "
                                       "watch. Meanwhile the whole folder is synced again after each "
                                       "failure, said once" if loop else
                              f"the file watcher failed ({path}); restarted it, the whole "
                              "folder is synced again", error=path)
                self._watcher_failures.add(path)
                out["."] = "rescan"
                continue
            if self._settings_edits.edited(path):
                continue   # (no document: nothing to sync)
            named.append((int(change), path))
        if not named:
            return out
        # What each path is, in a worker thread: ``relevant`` and the looks at the folder and the
        # index took the event loop, its signals and the other tasks with it, for seconds in a
        # batch of 100,000 events (a copy told file by file, the polling watcher). A few events
        # are looked at on the loop, at once: the hop to a thread may take longer on a busy
        # machine, and the quiet period of the batch before it runs meanwhile.
        apart = len(named) >= _LOOK_APART
        pending = dict(self.pending) if apart else self.pending
        kinds, copies, stats, left_out = await self._reading(apart, self._kinds, named, pending)
        if copies:
            self._name_copies(copies)
        if not kinds:
            await self._say_left_out(left_out)
            return out
        # A folder made or moved in may hold 100,000 files: it is listed in a worker thread (two
        # to three seconds of a stalled event loop, signals and progress held, measured), which
        # returns the names and changes nothing; what they mean is decided by ``_look``.
        listed: dict[str, list[str] | None] = {}
        found_left_out: set[str] = set()   # (the files left out among theirs, said with the batch's)
        for rel, stat in stats.items():
            # (a link elsewhere is not walked)
            if stat is not None and stat[0] and not leads_outside(self.root / rel, self.root):
                listed[rel] = await anyio.to_thread.run_sync(self.folder.files_in, self.root / rel, found_left_out,
                                                             abandon_on_cancel=True)
        await self._say_left_out(left_out | found_left_out)
        looked = await self._reading(apart, self._look, kinds, stats, listed, pending)
        for line in looked.warnings:
            self._warn_once(line)
        for rel in looked.broken:
            self.folder.note_broken(rel)
        out.update(looked.out)
        # Of the new files, those that open as an export does (`streamrag export x.txt` into the
        # folder: not indexed, yet queued, said "1 file (1 added)" and synced for nothing at each
        # export), the first ``_EXPORTS_TOLD``: the first bytes of each new file, up to
        # ``_EXPORT_OPENS``, are read for it, one open of a file index.include takes, which the
        # sync reads whole (the first 16 new files of any kind were opened, as a scan opens 16 of
        # each kind of file left out: an export beside 20 new notes was queued and synced for
        # nothing). In one hop to a worker thread, which
        # reads a whole one through for its checksum too: a small batch's were read on the loop.
        told = await anyio.to_thread.run_sync(_told_exports, self.root, looked.new, self._stop_looking.is_set,
                                              abandon_on_cancel=True) if looked.new else {}
        for rel, whole in told.items():
            if not whole:   # (one cut short, still written: the sync after it settles tells)
                continue
            # Said as the scan says it, at each write (not again by the next sync, ``warned``),
            # and nothing queued: the index is as it was.
            del out[rel]
            line = written_by_export_line(shown(rel))
            self.warned.add(line)
            self._exports_said.add(line)
            self.emit("warning", line, warning=line)
        if looked.touched:   # (it may read them: in a worker thread, as a folder is listed)
            same = await anyio.to_thread.run_sync(self.folder.as_indexed, looked.touched, self._stop_looking.is_set,
                                                  abandon_on_cancel=True)
            out.update((rel, "modified") for rel in looked.touched if rel not in same and rel not in out)
        return out

    @staticmethod
    async def _reading(apart: bool, work: Callable[..., Any], *args: Any) -> Any:
        """``work(*args)``, which only reads: in a worker thread when ``apart``, else at once."""
        if apart:
            return await anyio.to_thread.run_sync(work, *args, abandon_on_cancel=True)
        return work(*args)

    def _kinds(self, named: list[tuple[int, str]], pending: dict[str, str]
               ) -> tuple[dict[str, set[int]], set[str], dict[str, tuple[bool, bool] | None], set[str]]:
        """The paths of the events ``named`` that may change the index (``relevant``), with the
        kinds of their events; the sync conflict copies among them; whether each is a folder
        and is there (``None``: it cannot be looked at); and, of the others, the files left out
        to say (``_left_out_to_say``: a file ``relevant`` takes is none; each event was looked at
        twice, in two hops to a worker thread: 20,000 files copied in, 0.19 s of CPU more,
        measured). Only reads: for ``_classify`` (a worker thread's for a large batch, ``pending``
        then a copy of the queue as the batch came: the loop changes it meanwhile; what a sync
        took up since is the next sync's to find). At a stop it ends at the next event, with what
        it found so far (abandoned: nothing is queued)."""
        kinds: dict[str, set[int]] = {}
        copies: set[str] = set()
        left_out: set[str] = set()
        stopped = self._stop_looking.is_set

        # (the index opened once for them, if at all)
        with self.folder.batch(lambda rel: _queued(pending, rel), copies) as relevant:
            for change, path in named:
                if stopped():
                    break
                if (rel := relevant(change, path)) is not None:
                    kinds.setdefault(rel, set()).add(change)
                elif self._left_out_to_say(change, path):
                    left_out.add(os.path.relpath(path, self.root))
        stats: dict[str, tuple[bool, bool] | None] = {}
        for rel in kinds:
            if stopped():
                break
            path = self.root / rel
            try:
                stats[rel] = (path.is_dir(), path.exists())
            except OSError:
                stats[rel] = None
        return kinds, copies, stats, left_out

    def _look(self, kinds: dict[str, set[int]], stats: dict[str, tuple[bool, bool] | None],
              listed: dict[str, list[str] | None], pending: dict[str, str]) -> _Looked:
        """``_classify`` of the paths ``kinds`` (``_kinds``'), as far as the index decides it,
        with the files of the folders among them (``listed``). Only reads, and ends at a stop,
        as ``_kinds``."""
        out: dict[str, str] = {}
        stopped = self._stop_looking.is_set
        warnings: list[str] = []
        broken: list[str] = []

        looked: dict[str, tuple[bool, bool]] = {}   # rel -> (is a folder, exists)
        for rel, stat in stats.items():
            if stat is None:
                # Under a folder it may not read (chmod 000): the whole folder's sync says
                # what it cannot read, as `index` does.
                out["."] = "rescan"
            else:
                looked[rel] = stat
        touched: dict[str, dict[str, tuple[str, int, float]]] = {}   # indexed file -> its rows
        # Files the index does not hold whose event was a write alone: in a folder made in the
        # batch, the watcher may miss a file's making (a `git checkout` of 200 new files said
        # "199 added, 1 modified").
        unheld: set[str] = set()
        new: list[str] = []   # files queued that the index does not hold, nor the queue
        with reading(self.db_path) as store:
            failed = self.folder.failed_now(store) if not all(exists for _d, exists in looked.values()) else set()
            for rel, (is_dir, exists) in looked.items():
                if stopped():
                    break
                path = self.root / rel
                if is_dir:
                    # A file made a folder of its name (`rm a.txt && mkdir a.txt`, a checkout of
                    # another branch) leaves: its files are those listed, and nothing else was
                    # queued by an empty one, so its text stayed indexed.
                    if self.folder.is_indexed(store, rel):
                        out[rel] = "deleted"
                    elif (line := self.folder.not_taken(rel)) is not None:   # a link out of the folder
                        warnings.append(line)
                    continue
                if not exists:
                    # Only what the index holds, a sync is queued for, or the last update could
                    # not use (a binary x.txt, its failure said until another change's sync) can
                    # be deleted: a broken link, which the polling watcher reports deleted at
                    # every poll, is none, and queued a sync that changed nothing every 10 * quiet_s.
                    # (No index to read, gone with the folder say: the sync that makes it decides.)
                    gone = self.folder.indexed_in(store, rel) | _queued(pending, rel) | under(failed, rel)
                    if store is None or self.folder.is_indexed(store, rel):
                        gone.add(rel)
                    for each in gone:
                        out[each] = "deleted"
                    if not gone and os.path.lexists(path):
                        warnings.append(f"{shown(rel)}: {why_unusable(path)}")
                        broken.append(rel)
                elif not self.folder.takes(path) or not self.folder.included(rel):   # the scan skips it, so do we
                    # (and what was indexed under it: a folder made a file of its name, `mv d
                    # away && touch d`, was queued "added", and read ahead, though never indexed)
                    gone = self.folder.indexed_in(store, rel)
                    if self.folder.is_indexed(store, rel):
                        gone.add(rel)
                    for each in gone:
                        out[each] = "deleted"
                    if not gone and (line := self.folder.not_taken(rel)) is not None:   # (as a broken link)
                        warnings.append(line)
                elif not (rows := {} if store is None else index_rows.file_rows(store, rel)):
                    out[rel] = "added" if ADDED in kinds[rel] else "modified"
                    if rel not in pending:
                        new.append(rel)
                        if out[rel] == "modified":
                            unheld.add(rel)
                elif rel in pending:   # as queued: what it is now is the sync's to find
                    out[rel] = "modified"
                else:
                    touched[rel] = rows
            for folder, found in listed.items():
                if stopped():
                    break
                if found is None:   # listed, but not entered (chmod 644): the whole folder's sync says so
                    out["."] = "rescan"
                    continue
                # One query, not one per file found. A file the index holds there is a touched
                # one: a folder moved out and back, or copied back over itself, changes nothing.
                indexed = {} if store is None else index_rows.file_rows_under(store, folder)
                inside = folder + "/"
                for rel in found:
                    if stopped():
                        break
                    if rel in out:
                        if rel in unheld:   # written in a folder made or moved in: new, as its files are
                            out[rel] = "added"
                        continue
                    if rel.startswith(inside) or store is None:
                        rows = indexed.get(rel, {})
                    else:
                        rows = index_rows.file_rows(store, rel)
                    if not rows:
                        out[rel] = "added"
                        if rel not in pending:   # (an export among them: told as one made alone)
                            new.append(rel)
                    elif rel in pending:
                        out[rel] = "modified"
                    else:
                        touched[rel] = rows
        # (of those, ``_classify`` tells the exports, in a worker thread: ``_told_exports``)
        return _Looked(out, {rel: rows for rel, rows in touched.items() if rel not in out}, warnings, broken,
                       [rel for rel in new if rel in out])

    # -- the run ---------------------------------------------------------------------------
    async def run(self, source: AsyncIterable[ChangeSet] | None = None) -> None:
        """Initial sync, then follows ``source`` until it ends or ``stop()``; ``None``: one sync.

        When the source ends by itself, changes still queued are synced before returning.
        """
        with sharing_notices(self.outage.notices):   # (a new limit per sync said a line per retry)
            try:
                await self._run(source)
            finally:
                self._let_index_go()
                await self._end_emptying()

    def _mode(self) -> tuple[str, str | None, str]:
        """How it indexes, for the first line: ``"offline"`` or ``"llm"``, the endpoint (None
        when it calls none, ``Settings.calls_model``), and the words (`index` says "version 1, LLM"; `watch` said
        neither, nor where). Offline with an embedding model (``index.extractor = "nlp"``) still
        calls the endpoint: it said "offline" and no endpoint of a watch whose outage lines named one."""
        s = self.settings
        endpoint = without_secrets(s.llm.api_base)   # (the watch's log and --json lines: no password)
        if not s.offline:
            return "llm", endpoint, f"LLM {s.llm.extraction_model} at {endpoint}"
        said = "offline: NLP extraction, extractive reports"   # (the line's next words are in parentheses)
        if not s.calls_model:
            return "offline", None, said
        return "offline", endpoint, f"{said}, embeddings {s.llm.embedding_model} at {endpoint}"

    async def _run(self, source: AsyncIterable[ChangeSet] | None) -> None:
        w = self.settings.watch
        mode, endpoint, said = self._mode()
        db = os.path.abspath(self.db_path)   # (as `index --json` and `status --json` give it)
        # (the folder and index shown on one line: a name holding a newline split it in two;
        # the "root" and "db" fields keep them as they are, for a script to use)
        self.emit("starting", f"{shown(self.root)} -> {shown(db)}, {said} (debounce {w.debounce_ms} ms, "
                              f"quiet {w.quiet_s:g}s, grace {w.grace_s:g}s)",
                  root=str(self.root), db=db, mode=mode, endpoint=endpoint)
        for line in (*self.settings.unused_by_indexing(), *self.warnings):
            self.emit("warning", line, warning=line)
        send, recv = anyio.create_memory_object_stream[dict[str, str]](16)
        self._once, self._source = source is None, source
        if not self._once:   # (`--once` is like `streamrag index`: an update of its own)
            from streamrag.extractor import claimless_key

            with reading(self.db_path) as store:
                self._retry_files = {}   # (its chunks' files are not known: ``_files_listed`` says them)
                self._update_of, self._retry_items, self._retry_chunks, self._retry_claims = \
                    self._unfinished_update(store, claimless_key(self.settings))
                self.outage.answered_at = self._answered_before(store)
        self._root_id = folder_identity(self.root)
        self._pump_scope = anyio.CancelScope()
        if self.stopping:
            self._pump_scope.cancel()
        with recv:
            async with anyio.create_task_group() as tg:
                if source is not None:
                    tg.start_soon(self._pump, source, send)
                    await self._watcher_started(source)
                else:
                    send.close()
                if not self.stopping:
                    await self._sync("initial sync", why={"files": 0, "whole_folder": True}, initial=True)
                if source is not None and not self.stopping:
                    await self._check_key()
                if source is not None and not self.stopping:   # (a stop during the check: no health line)
                    self.check_health()
                    tg.start_soon(self._health_loop)
                    await self._follow(recv)
                # The work is over; what is left is the file watcher's thread, which looks for
                # the stop every few hundredths of a second and cannot be cancelled
                # (``watch_events._STEP_MS``: it looked every watch.debounce_ms).
                self.closing_watcher = True
                tg.cancel_scope.cancel()
            seen = await self._seen_not_synced(recv, source)
        self.closing_watcher = False
        files = self._files_pending()
        # (given up on: left for the next start, which asks for them again)
        retry, claimless, _ = self._items_left()
        counts = {"pending": files, "failed_items": retry, "claims_failed": claimless}
        left = []
        whole = self.pending.get(".") == "rescan"   # (the initial sync failed: a model server not up yet)
        if whole:   # (its files, as far as it found them: ``_sync_failed``)
            left.append("the whole folder not synced yet"
                        + (f" ({_n(files, 'new or changed file')})" if files else ""))
        elif files:
            left.append(f"{_n(files, 'changed file')} not synced yet")
        if seen:   # (written within debounce_ms of the stop, say: it said "index is current")
            left.append(f"{_n(seen, 'change')} seen but not synced")
        counts["seen"] = seen
        if retry and self._nothing_indexed:
            left.append(f"nothing indexed ({_n(retry, 'failed item')})")
        elif retry:
            left.append(_left_out_said(retry, claimless, lambda n: f"{n} left out of this version"))
        if not self.root.is_dir():
            self.emit("stopped", "the watched folder is gone" + (" (it was not back yet)" if
                                                                 self._gone else ""),
                      pending=0, failed_items=0, claims_failed=0, seen=0)
        elif self.index_moved_to is not None:
            where = f" to {shown(self.index_moved_to)}" if self.index_moved_to else ""
            self.emit("stopped", f"the index was moved{where}, not built again here"
                      + (f"; {'; '.join(left)}; the next start (or `streamrag index`) syncs what is left"
                         if left else ""), **counts)
        elif self.syncs and self._index_missing():   # deleted since, and not built again yet
            # (no failed items: they were in the index that is gone; it counted those the
            # retries gave up on, beside a line that says nothing of them)
            self.emit("stopped", f"no index: {self.db_path} was deleted and is not built again yet; "
                                 "the next start (or `streamrag index`) builds it from the folder",
                      **{**counts, "failed_items": 0, "claims_failed": 0})
        elif left:
            self.emit("stopped", f"{'; '.join(left)}; the next start (or `streamrag index`) syncs "
                                 "what is left", **counts)
        else:
            # What the watcher handed over or held is synced or counted above; what watchfiles saw
            # in its last step (``watch_events._STEP_MS``) and had not passed on, it drops at the
            # stop: a file saved a fifth of a second before Ctrl-C was neither synced nor counted,
            # and the line said "index is current". No look at the folder tells it cheaply (the
            # scan of 100,000 files took 3.3 s, a bare stat of each 0.7 s, measured; a stop takes a
            # fifth of a second), so the line says what is known; the next start's sync takes such
            # a file up. (`--once` has no watcher: its sync read the folder.)
            self.emit("stopped", "index is current" if self._once else CURRENT_AS_SEEN,
                      pending=0, failed_items=0, claims_failed=0, seen=0)

    async def _seen_not_synced(self, recv, source: AsyncIterable[ChangeSet] | None) -> int:
        """The files seen changing that no sync took up, nor the queue holds, once the daemon
        stopped taking events: those of batches sent and not taken (``recv``, ``_came``), of the events the
        pump was looking at, and of the burst the watcher held back (``FolderWatch.held``), which
        a stop within ``debounce_ms`` of a write drops. The next start's sync finds them.

        They are looked at in a worker thread (``_seen_left``): a folder moved in just before
        the stop is listed, and 100,000 files held the event loop, its signals with it, for
        seconds. Nothing else runs by then (the daemon's tasks are over), so the queue it reads
        stays as it is."""
        # (and the batch a big file's paused extraction took from the stream: ``_prefetch``)
        seen = {rel for rel in {**self._came, **_take_ready(recv)} if rel != "."}
        raw = self._of_files((*self._classifying, *getattr(source, "held", ())))
        if not seen and not raw:
            return 0
        return await anyio.to_thread.run_sync(self._seen_left, seen, raw)

    def _of_files(self, events: Iterable[tuple[int, str]]) -> set[tuple[int, str]]:
        """``events`` without rescans, replacements and the settings files' (a stop's and a
        held burst's count of the files they name)."""
        return {(int(change), path) for change, path in events
                if int(change) not in (RESCAN, REPLACED, REOPENED) and not self._settings_edits.follows(path)}

    def _without_children(self, raw: set[tuple[int, str]]) -> set[tuple[int, str]]:
        """``raw`` without the events that made paths under a folder it made that is a folder now
        (not a link): ``_folders_as_files`` lists that folder whole, and a copy under way held
        100,000 paths, each looked at (``relevant``, a stat), then listed again, under its folder
        and under each folder above it (4.8-5.5 s of CPU before each sync beside it, measured).
        Deletions are kept (the listing does not hold them). Reads the folder: a worker thread's."""
        made = {path for change, path in raw if change == ADDED}
        if len(made) < 2:
            return raw
        root = os.fspath(self.root)
        folders: dict[str, bool] = {}   # a made path above others -> whether it is a folder to list

        def under_a_made_folder(path: str) -> bool:
            up = os.path.dirname(path)
            while len(up) > len(root) and up != path:
                if up in made:
                    if up not in folders:
                        folders[up] = os.path.isdir(up) and not os.path.islink(up)
                    if folders[up]:
                        return True
                path, up = up, os.path.dirname(up)
            return False

        return {(change, path) for change, path in raw if change != ADDED or not under_a_made_folder(path)}

    def _folders_as_files(self, rels: set[str]) -> None:
        """Replaces each folder of ``rels`` (made or moved in; not a link) by the files under it
        the scan takes (``WatchedFolder.files_in``), in place. Reads the folder: a worker
        thread's."""
        # (os.path.isdir: Path.is_dir raised PermissionError of a path in a folder made
        # unsearchable, `chmod 000`, and the daemon died; the sync says what it cannot read)
        for rel in [rel for rel in rels if os.path.isdir(self.root / rel) and not os.path.islink(self.root / rel)]:
            if (found := self.folder.files_in(self.root / rel)) is not None:
                rels.discard(rel)
                rels.update(found)

    def _seen_left(self, seen: set[str], raw: set[tuple[int, str]]) -> int:
        """``_seen_not_synced`` of the files of batches not taken (``seen``) and of the events
        ``raw``: reads the folder and the index, changes nothing (a worker thread's)."""
        if raw and self.root.is_dir():
            raw = self._without_children(raw)   # (a folder made in is listed below)
            with self.folder.batch(self._queued_in) as relevant:
                seen |= {rel for change, path in raw if (rel := relevant(change, path)) is not None}
        # A folder made or moved in counts as the files under it the scan takes, as the queue
        # counts it (``_classify``): `mkdir sub && echo .. > sub/a.txt` said "2 changes seen", an
        # empty folder "1 change seen" of a current index.
        self._folders_as_files(seen)
        left = seen - self.pending.keys() - self._syncing.keys()
        if not left:
            return 0
        # Counted as the queue counts them (``_queue``, ``_classify``): a file made and deleted
        # since the last sync (a temporary file) is no change to sync, and said "1 change seen" of
        # a current index; a folder deleted is the files it held that the index holds (or could
        # not use), as many changes as its sync deletes: it said "1 change seen" of a folder of
        # 200 indexed files; a rename is one change, not its two events.
        gone = {rel for rel in left if not os.path.lexists(self.root / rel)}
        if gone:
            left -= gone
            held: set[str] = set()
            with reading(self.db_path) as store:
                failed = self.folder.failed_now(store)
                for rel in gone:
                    held |= self.folder.indexed_in(store, rel) | under(failed, rel)
                    if self.folder.is_indexed(store, rel):
                        held.add(rel)
            gone = held - self.pending.keys() - self._syncing.keys()
            left |= gone
        # (a file of a megabyte or more is not read: the process's exit waited for it, a 20 MB file
        # renamed just before the stop 2.5-4 s; nor files past a few megabytes in all; such a
        # rename counts as its two changes)
        renamed = self.folder.renames({rel: "deleted" if rel in gone else "added" for rel in left},
                                      read_below=_STOP_READS_BELOW, read_at_most=_STOP_READS_AT_MOST)
        return len(left) - len(renamed)

    @staticmethod
    def _unfinished_update(store: Store | None, claimless: str | None) -> tuple[str | None, int, int, int]:
        """The update the watch before this one left unfinished in the index ``store``
        (``status.unfinished_update``), which its syncs go on with: the items it left missing are
        the same pending work, and a restart during an outage counted each of them again in
        `status`; and how many failed items it published without (``status.left_missing``),
        counted until a sync gets through; of them the chunks whose files wait, and the chunks
        indexed without their claims (``claimless``: ``extractor.claimless_key`` of the settings),
        as `status` counts them (``claims_failed_last_run``)."""
        run = None if store is None else last_update(store)   # (looked up once: it was 3 times)
        update = None if run is None else unfinished_update(store, run)
        if update is None:
            return None, 0, 0, 0
        left = left_missing(store, run)
        if not left:
            return update, 0, 0, 0
        return (update, left, len(index_rows.failed_chunks(store, run["id"])),
                min(left, index_rows.published_without_claims(store, claimless, run["id"])))

    def _answered_before(self, store: Store | None) -> float | None:
        """When a run of the index ``store`` last got an answer from this endpoint
        (``index_rows.answered_at``)."""
        api_base = self.settings.llm.api_base
        return None if store is None or not api_base else index_rows.answered_at(store, api_base)

    async def _check_key(self) -> None:
        """Checks the endpoint's credentials once (``LLMClient.check_key``: ``GET /models``) when
        the initial sync published with no call answered (a folder indexed already): a wrong key
        was found at the first change's call, maybe hours later; now the watch stops at once with
        that call's error, the index kept. Not after an initial sync that failed (its outage
        lines speak, and its retries find the key), nor when indexing calls no model. A stop
        ends the check (a server that hangs holds it for llm.request_timeout_s)."""
        if not self.syncs or self._answered_first or not self.settings.calls_model:
            return
        from streamrag.llm import LLMClient

        s, refused = self.settings, None
        async with LLMClient(s.llm, s.api_key, transport=self.transport, base_setting=s.api_base_from) as llm, \
                anyio.create_task_group() as tg:
            tg.start_soon(self._cancel_on_stop, tg.cancel_scope)
            try:
                await llm.check_key()
            except LLMRequestError as e:
                refused = e
            tg.cancel_scope.cancel()
        if refused is not None:
            raise LLMRequestError(f"{refused}. The index is kept as the initial sync left it",
                                  refused.status, every_call=True)

    async def _cancel_on_stop(self, scope: anyio.CancelScope) -> None:
        """Cancels ``scope`` once the daemon is asked to stop (``stop``)."""
        await self.stop_event.wait()
        scope.cancel()

    async def _watcher_started(self, source: AsyncIterable[ChangeSet]) -> None:
        """Waits until ``source``'s watcher has started (its ``started``, as ``FolderWatch``'s; a
        scripted source has none), or a stop: the watcher starts before the initial sync, so
        that an edit made during its scan is seen, and it walks the folder first (for the
        folders it cannot read), while the sync's scan would have begun."""
        started = getattr(source, "started", None)
        if started is None:
            return
        async with anyio.create_task_group() as tg:
            async def until(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(until, started)
            tg.start_soon(until, self.stop_event)

    async def _pump(self, source: AsyncIterable[ChangeSet], send) -> None:
        """Source -> relevant changes, one dict per batch; closing ``send`` ends the stream."""
        assert self._pump_scope is not None
        async with send:
            with self._pump_scope:
                iterator = aiter(source)
                try:
                    async for changes in iterator:
                        self._classifying = changes   # (a stop meanwhile: ``_seen_not_synced``)
                        batch = await self._classify(changes)
                        if batch:
                            await send.send(batch)
                        self._classifying = set()
                finally:
                    close = getattr(iterator, "aclose", None)
                    if close is not None:
                        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                            await close()

    def _split(self, now: float, quiet: float, written: set[str]) -> tuple[set[str], set[str]] | None:
        """The files queued that settled (no batch of theirs for ``quiet`` seconds), and those
        still written beside them, when the latter are written on and on: each in two batches
        at least, or found written after its batch (``written``, by the last look at their
        files), for ``quiet`` already. ``None`` when there is nothing to sync apart: no file
        settled, none written on, one written that may settle soon (a single save), a whole
        folder to sync, or a file queued by a failed sync (its batches are not known).

        A sync takes the whole folder, so files edited beside a file written on and on (a log)
        waited with it for ``_MAX_WAIT_QUIETS`` quiet periods: now they are synced alone after
        their own quiet period, the busy file left pending, and as indexed, for a later sync."""
        rels = {rel for rel in self.pending if rel != "."}
        if "." in self.pending or not rels or not rels <= self._queued_at.keys():
            return None
        busy = {rel for rel in rels if self._queued_at[rel][1] + quiet > now} | (written & rels)
        if not busy or not rels - busy:
            return None
        for rel in busy:
            first, _last, batches = self._queued_at[rel]
            if first + quiet > now or batches < 2 and rel not in written:
                return None
        busy = self._with_renames(busy) & rels
        settled = rels - busy
        return (settled, busy) if settled else None

    def _with_renames(self, busy: set[str]) -> set[str]:
        """``busy`` and the other names of its renames (``_renamed_from``, each way, chained):
        ``mv a.txt b.txt`` then a log written as b.txt. Synced apart, a.txt settled and went,
        its text with it, until b.txt's own sync, and the sync said "0 files added and deleted".
        With the names deleted in a batch that added one of ``busy`` beginning with their text
        (``_tied``): b.txt written before its batch was looked at is no rename by content, and
        a.txt went as before."""
        busy = set(busy)
        while True:
            more = {old for new, old in self._renamed_from.items() if new in busy} | \
                {new for new, old in self._renamed_from.items() if old in busy} | \
                {old for new, olds in self._tied if new & busy for old in olds}
            if more <= busy:
                return busy
            busy |= more

    async def _held_by_watcher(self) -> tuple[dict[str, str], dict[str, str]]:
        """The files the watcher holds back, not queued (``FolderWatch.held``: the burst of a file
        written on and on, or of one still copied, when the files settled beside it were handed
        over alone), each ``"modified"``, or ``"deleted"`` if gone (``_held_files``, with the renames
        among them). A sync leaves them as
        indexed and says them still written, as a busy file the daemon saw (``_split``): they
        are synced once their burst ends. A sync scans the whole folder, and read them as they
        were then: a log half-written, indexed (its calls paid) at each note saved beside it.
        Looked at in a worker thread, each path (a copy under way holds thousands: 100,000 held
        paths took 0.7-1.3 s of the event loop at each sync when their settings files were told
        apart on it)."""
        raw = getattr(self._source, "held", None)
        if not raw:
            return {}, {}
        return await anyio.to_thread.run_sync(self._held_files, set(raw), dict(self.pending), abandon_on_cancel=True)

    def _held_files(self, raw: set[tuple[int, str]], pending: dict[str, str]
                    ) -> tuple[dict[str, str], dict[str, str]]:
        """``_held_by_watcher`` of the events ``raw`` (a worker thread's: reads, changes nothing):
        the held files, each ``"modified"``, ``"deleted"``, or ``"renamed away"``, the old name of a
        rename among them (``WatchedFolder.renames``, or a new name beginning with its indexed
        text, ``_written_on``: ``mv a.txt b.txt`` then b.txt written on, its burst held, was said
        "a.txt deleted as it was written"); and those renames, each new name's old one."""
        raw = self._of_files(raw)
        if not raw or not self.root.is_dir():
            return {}, {}
        raw = self._without_children(raw)   # (a folder made in is listed below)
        rels: set[str] = set()
        made: set[str] = set()   # (those made: a rename's new name)
        with self.folder.batch(lambda rel: _queued(pending, rel)) as relevant:
            for change, path in raw:
                if (rel := relevant(change, path)) not in (None, "."):
                    rels.add(rel)
                    if change == ADDED:
                        made.add(rel)
        named = set(rels)
        self._folders_as_files(rels)
        listed = rels - named   # (the files of folders made in: there, as just listed)
        held = {rel: "modified" if rel in listed or os.path.lexists(self.root / rel) else "deleted"
                for rel in rels if rel not in pending}
        gone = [rel for rel, kind in held.items() if kind == "deleted"]
        made = [rel for rel in made | listed if held.get(rel) == "modified"]
        renamed: dict[str, str] = {}
        if gone and made:
            renamed = self.folder.renames({**dict.fromkeys(made, "added"), **dict.fromkeys(gone, "deleted")})
            if left := [rel for rel in gone if rel not in renamed.values()]:
                renamed.update(self._written_on([rel for rel in made if rel not in renamed], left))
            held.update(dict.fromkeys(renamed.values(), "renamed away"))
        return held, renamed

    async def _follow(self, recv) -> None:
        """Queues batches as they come, prefetching; syncs after ``quiet_s`` with no batch and no
        write to the last batch's files, or ``_MAX_WAIT_QUIETS * quiet_s`` after the first
        unsynced batch if events never pause."""
        quiet = self.settings.watch.quiet_s
        max_wait = _MAX_WAIT_QUIETS * quiet
        settle = min(quiet, 2 * self.settings.watch.debounce_ms / 1000)
        # The initial sync may have left work (calls to retry): its quiet period starts now.
        deadline = anyio.current_time() + quiet if self.pending else math.inf
        first_batch: float | None = None  # when the oldest batch not synced yet came
        last: dict[str, str] = {}     # the last batch, and the one before it (not reset by a sync:
        before: dict[str, str] = {}   # a file written on and on has a batch after it, too)
        failures_in_row = 0
        edited = False   # a batch was queued since the last sync
        self._recv = recv   # (a batch coming pauses a big file's extraction ahead: ``_prefetch``)
        written_on = False   # the last look at the files found one written within quiet_s
        written: set[str] = set()   # ... those files

        async def sync_settled() -> bool:
            """Syncs the files that settled beside one written on and on (``_split``), if any
            (whether it did): the busy file keeps its own cap (``first_batch``: its first batch
            not synced) and the settling line said of it (``_settling_said``)."""
            nonlocal first_batch, deadline, failures_in_row
            now = anyio.current_time()
            # (a big file paused: the sync at the deadline leaves it, ``_paused``; split here, it
            # was taken as settled and extracted by the sync, which the note beside it waited for)
            if failures_in_row or first_batch is None or now >= first_batch + max_wait or self.stopping \
                    or self._paused:
                return False
            # (the files a split would leave as indexed, if others settled, tied first to the deletions they are)
            busy = {rel for rel, (_first, last, _n) in self._queued_at.items() if last + quiet > now} | written
            if self._may_tie and "." not in self.pending and self.pending.keys() - busy:
                await self._tie(busy)
            split = self._split(now, quiet, written)
            if split is None:
                return False
            settled, busy = split
            # A settled file written since its batch (the watcher holds a write back) is not settled.
            paths = [self.root / rel for rel in sorted(settled)]
            seen = await anyio.to_thread.run_sync(_modified, paths, abandon_on_cancel=True)
            young = _young(self.root, seen, quiet, time.time())
            await self._tie(young)
            young = self._with_renames(young)
            settled, busy = settled - young, busy | (young & settled)
            if not settled or self.stopping:
                return False
            watched, renamed = await self._held_by_watcher()
            if self.stopping:
                return False
            busy |= watched.keys()
            reason, why = self._why_sync(left_as_indexed=busy, watched=watched, held_renames=renamed)
            ok = await self._sync(reason, why=why, left_as_indexed=frozenset(busy))
            failures_in_row = _failures_after(failures_in_row, ok=ok, only_retry=False)
            if ok:
                self._note_update("queued")   # (its idle line let go of the update's note: the busy file is pending)
                for rel in settled:
                    self._queued_at.pop(rel, None)
                    self._renamed_from.pop(rel, None)
                self._tied = [(new, old) for new, old in self._tied if not new <= settled]
                self._may_tie = [(added - settled, gone) for added, gone in self._may_tie if added - settled]
                self._unsettled = {p for p in self._unsettled if p.relative_to(self.root).as_posix() in busy}
                first_batch = min((self._queued_at[rel][0] for rel in busy if rel in self._queued_at),
                                  default=first_batch)
            else:
                pause = min(_MAX_BACKOFF_S, quiet * 2 ** failures_in_row)
                deadline = anyio.current_time() + pause
                self._still_down(pause)
            if not self.stopping:
                self.check_health()
            return True

        while not self.stopping:
            batch, self._came = self._came, {}   # (one that paused a big file's extraction)
            ended = False
            try:
                while True:  # take everything that is ready, so a burst is one batch
                    batch.update(recv.receive_nowait())
            except anyio.WouldBlock:
                pass
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                ended = True
            if not batch and not ended:
                wait = max(0.0, deadline - anyio.current_time()) if self.pending else math.inf
                with anyio.move_on_after(min(wait, _LOOK_S)) as self._idle_wait:   # (``stop`` ends it)
                    try:
                        batch.update(await recv.receive())
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        ended = True
            if self.stopping:
                return
            if not batch and not ended:
                self._keep_lock()
                self._keep_reader()
                self._hold_index()   # replaced under us (`mv new.db index.db`): the old let go
                if self._index_lost():
                    # Built again as after any change: once the folder has been quiet (a `git
                    # clean -x` may be followed by a checkout).
                    first_batch = now = anyio.current_time()
                    deadline, edited = now + quiet, True
                    continue
                if self.pending and not ended and anyio.current_time() < deadline:
                    await sync_settled()   # (files settled between two batches of a busy one)
                    continue
            if batch:
                now = anyio.current_time()
                if first_batch is None:
                    first_batch = now
                # A file edited steadily (autosave, a log) would push the quiet deadline back
                # forever: the sync comes at most max_wait after the first unsynced batch.
                deadline = min(now + quiet, first_batch + max_wait)
                before, last = last, batch
                for rel in batch:
                    first, _last, batches = self._queued_at.get(rel, (now, now, 0))
                    self._queued_at[rel] = (first, now, batches + 1)
                await self._queue(batch)
                edited = True
                if self.stopping:  # stopped during the extraction: no new sync starts
                    return
                if anyio.current_time() < deadline:
                    await sync_settled()   # (a file written on and on, its batches within quiet_s)
                    continue
                # Extracting took longer than the quiet period: events that came meanwhile are
                # taken (and their quiet period waited for) before syncing, within max_wait; and
                # as the watcher holds events back while they keep coming (``debounce_ms``), a
                # batch may be on its way: it is waited for a moment (``settle``) before syncing.
                now = anyio.current_time()
                if now < first_batch + max_wait:
                    if _has_ready(recv):
                        continue
                    deadline = min(now + settle, first_batch + max_wait)
                    continue
            if (self.pending and last and (before or self._unsettled) and not ended and first_batch is not None
                    and deadline <= (now := anyio.current_time()) < first_batch + max_wait):
                # The watcher holds a file written on and on back for 10 x debounce_ms (a batch
                # then), longer than quiet_s: between its batches it looked quiet, and each made a
                # sync (a log written every 5 ms: one every 5.5 s, each clustering and reporting
                # again). Quiet is its files unwritten for quiet_s too: those of the last batch
                # that the one before held too, a stat each (``_written_again``), and those the
                # extraction ahead found written as it waited for them (``_settled``).
                unsettled = sorted(self._unsettled)
                seen = await anyio.to_thread.run_sync(
                    lambda: {**_written_again(self.root, last, before), **(_modified(unsettled) if unsettled
                                                                             else {})}, abandon_on_cancel=True)
                looked = time.time()
                written_on = (wait := _settle_wait((m for m, _ in seen.values()), quiet, looked)) > 0
                if written_on:
                    deadline = min(now + wait, first_batch + max_wait)
                    written = _young(self.root, seen, quiet, looked)
                    await sync_settled()
                    continue
            if self.pending and (ended or anyio.current_time() >= deadline):
                if ended:   # (no sync after this one: it takes them, extracting them)
                    self._paused.clear()
                if self._paused and not self.pending.keys() - self._paused:
                    # The others synced (or none came but the big files' own batches): their
                    # extraction resumes, and once done they are synced at once.
                    if await self._resume_paused():
                        deadline = anyio.current_time()
                    if self.stopping:
                        return
                    continue
                # Batches waiting now (they came as an extraction outlasted max_wait) are changes
                # on disk, which this sync scans whole: they join it, extracted by it. Left in
                # the stream, they made a sync of their own after it, which found nothing new.
                ready = _take_ready(recv)
                if ready:
                    await self._queue(ready, ahead=False)
                    edited = True
                    if self.stopping:
                        return
                if not written_on:   # quiet, not the cap: a file written again settles anew
                    self._settling_said.clear()
                first_batch, self._unsettled, written_on, written = None, set(), False, set()
                self._queued_at.clear()
                self._renamed_from.clear()
                self._tied.clear()
                self._may_tie.clear()
                # Retrying what failed, files among it: an edit whose sync failed stays pending,
                # and kept the pause where it was (16 s all weekend) until the endpoint was back.
                only_retry, edited = not edited, False
                # (the files the watcher holds, not handed over yet: left as indexed, ``_held_by_watcher``)
                watched, renamed = await self._held_by_watcher()
                if self.stopping:
                    return
                paused = self._paused & self.pending.keys()
                reason, why = self._why_sync(left_as_indexed=watched.keys() | paused, watched=watched,
                                             held_renames=renamed, paused=paused)
                ok = await self._sync(reason, why=why, left_as_indexed=frozenset(watched.keys() | paused))
                failures_in_row = _failures_after(failures_in_row, ok=ok, only_retry=only_retry)
                if not ok:  # retry later, backing off, unless new events come first
                    pause = min(_MAX_BACKOFF_S, quiet * 2 ** failures_in_row)
                    deadline = anyio.current_time() + pause
                    if ended:
                        return
                    self._still_down(pause)
                if not self.stopping:
                    # What a sync changes (documents, failures, items to retry) is said after its
                    # lines, not at the loop's next look: a binary x.txt added was "1 in the last
                    # update" in `status` while the health line said 0 failures for up to a minute.
                    self.check_health()
            elif ended:
                return

    def _still_down(self, pause: float) -> None:
        """After a failed sync, ``pause`` before the next: the outage line, if it is owed."""
        if not self.stopping:
            items, claims, _ = self._items_left()   # (as the health line counts them: ``_failed_counts``)
            self.outage.still_down(pause, pending=self._files_pending(), failed_items=items, claims_failed=claims)

    def _keep_lock(self) -> None:
        """Takes the writer lock again at once if its file was deleted (``WriterLock.check``):
        while the daemon idled, an `index` of the same index was not refused until the next
        file event. A writer that took the new file meanwhile is said by the next sync. A lock
        whose folder is gone (the index's folder deleted, or the watched folder with it) is
        taken by the sync that builds the index again, not made again here."""
        if self.writer_lock is not None and not self._gone:
            # (OSError: a folder on the way it may no longer search, `chmod a-x notes`, raised
            # PermissionError out of the look and ended the daemon; the next sync says why)
            with contextlib.suppress(StreamragError, OSError):
                self.writer_lock.check(make_folder=False)

    def _keep_reader(self) -> None:
        """Ends the idle daemon as its next line would (exit 141) once the reader of its --json
        lines is gone (`watch --json | head -20`, a log collector that quit): on a quiet folder
        it went on unseen, holding the writer lock, and the next `watch` was refused (exit 75)."""
        check = getattr(self.report, "check_reader", None)   # (tests give a plain list's append)
        if check is not None:
            check()

    def _index_lost(self) -> bool:
        """Whether the index was deleted under the idle daemon (no sync queued, which would build
        it again): a sync of the whole folder is queued, which says so (``_check_index``).
        Not said now: the folder may have been deleted and made again (``rm -rf DIR && mkdir
        DIR``), the index inside going with it, and the watcher's ``REPLACED`` event, which says
        that instead, may come a moment later."""
        if self.pending or not self.syncs or self._gone or not self._index_missing():
            return False
        if not self.root.is_dir():   # it went with the folder: the watcher says that, and waits
            return False
        if self._stops_for_a_moved_index():
            return False
        self.pending["."] = "rescan"
        return True

    def _hold_index(self) -> None:
        """Holds the index file the last sync published (``O_PATH``: a handle that neither reads
        nor locks, and whose closing lets go of no lock SQLite holds on it), so that once its
        name is gone ``_moved_to`` tells a move from a deletion. Not where there is no
        ``O_PATH`` (an index gone is then taken as deleted). The idle look calls it too: an
        index replaced by a rename over it (`mv new.db index.db`, a restore by rsync) left the
        old file held, deleted, its space not freed until the next sync, and a move of the new
        one taken for a deletion (the old file's). A deleted file is never held."""
        if _O_PATH is None:
            return
        with contextlib.suppress(OSError):
            if self._index_handle is not None and os.fstat(self._index_handle).st_nlink == 0:
                # deleted (`rm -rf` of the folder while watch waits for it to come back, or
                # replaced): held, its space stayed taken for as long as the folder was gone
                self._let_index_go()
        try:
            st = os.stat(self.db_path)
            if self._index_handle is not None:
                held = os.fstat(self._index_handle)
                if (held.st_dev, held.st_ino) == (st.st_dev, st.st_ino):
                    return
        except OSError:
            return
        self._let_index_go()
        with contextlib.suppress(OSError):
            self._index_handle = os.open(self.db_path, _O_PATH | os.O_CLOEXEC)

    def _let_index_go(self) -> None:
        if self._index_handle is not None:
            with contextlib.suppress(OSError):
                os.close(self._index_handle)
            self._index_handle = None

    def _moved_to(self) -> str | None:
        """Where the index file was moved to while the daemon ran, its name gone (``""``: it
        is somewhere, but where cannot be told); None when it is there, or was deleted (its
        handle then let go of: held, a deleted file's space is not freed).

        Moved to the desktop's trash (``_in_the_trash``) offline, nothing paid for, it is deleted:
        that is what the file manager's Delete does, and on another file system, or where no
        handle tells a move (macOS), the same key press deletes it outright. It is built again,
        the line naming the trash (``_check_index``), and let go of (held, emptying the trash
        freed no space). With a model it is a move (``_stops_for_a_moved_index``): built again,
        a Delete undone a few seconds later had cost every call again, and restored over the new
        one it lacked what its -wal, left behind and dropped by the new index, held."""
        if self._index_handle is None or not self._index_missing():
            return None
        try:
            if os.fstat(self._index_handle).st_nlink == 0:
                self._let_index_go()
                return None
        except OSError:
            return None
        try:
            where = os.readlink(f"/proc/self/fd/{self._index_handle}")   # (Linux: its path now)
        except OSError:
            return ""
        if not self.settings.calls_model and _in_the_trash(where):
            self._index_trashed = where
            self._let_index_go()
            return None
        return where

    def _stops_for_a_moved_index(self) -> bool:
        """True when the index was moved away while the daemon ran (``_moved_to``): it stops,
        exit status 1, with one line naming where it went and the fix. It said "the index was
        deleted" and built a new one from the whole folder, every model call paid again, while
        the index, answers cached, lay where it was moved (`mv .streamrag/index.db ~/backup/`)."""
        if self.index_moved_to is not None:
            return True
        where = self._moved_to()
        if where is None:
            return False
        self.index_moved_to = where
        self.exit_code = 1
        wal = Path(f"{self.db_path}-wal")
        again = ", paying its model calls again" if self.settings.calls_model else ""
        trashed = bool(where) and _in_the_trash(where)
        if trashed:   # (with a model: ``_moved_to``) the file manager's Delete, perhaps undone in a moment
            left = (f" ({shown(wal)}, left here, holds its last writes: the index lacks them elsewhere)"
                    if wal.exists() else "")
            # Its folder trashed (.streamrag/), the folder is what to restore; a new index needs
            # no emptying of the trash, only a stale -wal out of its way.
            went, to = ((Path(where).parent, self.db_path.parent) if not self.db_path.parent.exists()
                        else (None, self.db_path))
            fix = (f"to keep it, restore {shown(went) if went else 'it'} from the trash to {shown(to)}{left} "
                   "and start watch again; to build a new one, "
                   + (f"delete {shown(wal.name)} and " if left else "")
                   + "start watch again (emptying the trash frees its space)")
            said = f"moved to the trash ({shown(where)})"
        else:
            beside = f" (and {shown(wal.name)} beside it)" if wal.exists() else ""
            fix = (f"move it back to {shown(self.db_path)}{beside} and start watch again"
                   + (f", or start it with --db {shell_word(where)}" if where else ""))
            said = f"moved{f' to {shown(where)}' if where else ''}"
        self.emit("error", f"{shown(self.db_path)}: the index was {said} while watch ran; stopping rather than "
                           f"building a new one from the folder{again}: {fix}", error="index moved",
                  moved_to=where or None, **({"in_trash": True, "wal_left": wal.exists()} if trashed else {}))
        self.stop("the index was moved")
        return True

    def _index_missing(self) -> bool:
        """Whether there is no index file at ``db_path`` (one it may not look at is there: the
        sync says why it cannot open it; ``Path.exists`` raised PermissionError)."""
        try:
            os.stat(self.db_path)
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError:
            return False
        return False

    def _check_index(self) -> None:
        """Says so when the index was deleted under the daemon: the next write makes a new one,
        without the answers cached in the old (a tool cleaning the folder took .streamrag/)."""
        if not self.syncs or self._index_gone_said or not self._index_missing():
            return
        inside = not leads_outside(self.db_path.parent, self.root)
        if inside and (self._replaced or self._gone):
            return   # it went with the folder, as the "replaced" or "gone" line said
        self._index_gone_said = True
        paid = self.settings.calls_model   # (offline, nothing embedding: nothing was paid for)
        if (trashed := self._index_trashed) is not None:
            self._index_trashed = None
            # (offline only: with a model, watch stopped instead, ``_stops_for_a_moved_index``)
            line = (f"{self.db_path}: the index was moved to the trash ({shown(trashed)}) while watch ran; "
                    "taken as deleted, it is built again from the folder (offline, it costs no model call)")
            self.emit("warning", line, warning=line, trashed_to=trashed)
            return
        line = (f"{self.db_path}: the index was deleted while watch ran"
                + (" (rsync --delete or git clean -x on the folder?)" if inside else "")
                + ("; it is built again from the folder, and the answers it cached went with it, so "
                   "their calls are paid again" if paid else
                   "; it is built again from the folder (offline, it costs no model call)")
                + ("; keep the index out of the folder (--db FILE or store.path)" if inside else ""))
        self.emit("warning", line, warning=line)

    async def _queue(self, batch: dict[str, str], *, ahead: bool = True) -> None:
        """Queues ``batch`` for the next sync, saying so, and extracts its files now (``ahead``),
        so that the sync finds them extracted; without ``ahead`` the sync, starting now, does."""
        # A file changed again before the sync (a log appended to, an autosave) is extracted by
        # the sync, as it then is: extracting every version of it paid a call per append.
        again = {rel for rel, kind in batch.items() if rel != "." and kind != "deleted"
                 and self.pending.get(rel) not in (None, *_NOT_THERE)}
        # A file queued that the index does not hold (new, or written when the watcher missed
        # its making, during the initial sync's scan say) and deleted before its sync leaves the
        # index nothing to undo: it is neither pending nor counted deleted (a folder copied in,
        # then moved away, said "200 files (100 added, 100 deleted); 200 pending" of its 100
        # files), but stays queued, so that a sync still comes for it (what was extracted ahead
        # of it is the sync's to settle). The index is asked, not the kind it was queued as: a
        # file queued as new while a sync indexed it is held once that sync is done.
        # (No sync is under way: batches are queued between syncs, ``_follow``.)
        queued = {rel for rel, kind in batch.items()
                  if kind == "deleted" and self.pending.get(rel) in ("added", "modified", "added and deleted")}
        held = await anyio.to_thread.run_sync(self.folder.held, queued) if queued else set()
        came_and_went = queued - held
        self.pending.update(batch)
        self.pending.update(dict.fromkeys(came_and_went, "added and deleted"))
        self._retries = 0
        files = {rel: kind for rel, kind in batch.items() if rel != "."}  # "." is the whole folder
        # (it may read files; a stop ends it with the renames found so far: a big file's read held
        # the stop 4 s)
        renamed = await anyio.to_thread.run_sync(self.folder.renames, files, self._stop_looking.is_set)
        for source in renamed.values():   # a rename is one changed file, in every count
            if self.pending.get(source) == "deleted":
                self.pending[source] = "renamed away"
        self._renamed_from.update(renamed)
        # (a rename written on before its batch was looked at: no rename by content, ``_tie``)
        added = [rel for rel, kind in files.items() if kind == "added" and rel not in renamed]
        gone = [rel for rel in files if self.pending.get(rel) == "deleted"]
        if added and gone:   # (told apart once a sync would leave one of them: ``_tie``)
            self._may_tie.append((frozenset(added), frozenset(gone)))
        kinds = Counter(kind for rel, kind in files.items()
                        if rel not in renamed and rel not in renamed.values() and rel not in came_and_went)
        kinds["renamed"] += len(renamed)
        kinds = +kinds
        what = ", ".join(f"{number(n)} {k}" for k, n in sorted(kinds.items()))
        pending = self._files_pending()
        # (a rename is one file, not one added and one deleted; a file come and gone is none)
        count = len(files) - len(renamed) - len(came_and_went)
        said = f"{_n(count, 'file')} ({what})" if count else ""
        if "." in batch:
            said = f"{said} and the whole folder" if said else "the whole folder"
        if not said and came_and_went:   # (the sync that still comes says it so: ``_why_sync``)
            said = f"{_n(len(came_and_went), 'file')} added and deleted"
        if again:
            said += f"; {_n(len(again), 'file')} changed again, extracted at the sync"
        if pending:   # (none with the whole folder alone, a folder back: "; 0 pending" read as nothing to do)
            said += f"; {number(pending)} pending"
        if self._last_state != ("queued", said):   # no state change: no line
            # (a file written on and on, a log, said the same line every second all day)
            # (the files come and gone counted too: "3 files added and deleted" gave files 0 alone)
            gone = {"added_and_deleted": len(came_and_went)} if came_and_went else {}
            self.emit("queued", said, files=count, pending=pending, whole_folder="." in batch,
                      changed_again=len(again), **{k: n for k, n in kinds.items()}, **gone)
        if not ahead or self.stopping:
            # (a stop while the batch was looked at said "nothing under way": an extraction ahead
            # begun after it was waited for, a 20 MB file's read and cut, 3.2 s)
            return
        self._extracting_ahead = True   # (a stop waits for it: ``stop``)
        try:
            await self._extract_ahead(files, renamed, again)
        finally:
            self._extracting_ahead = False

    async def _tie(self, names: set[str]) -> None:
        """Ties each of ``names`` that a batch added beside files it deleted (``_may_tie``) to the
        one of them whose indexed text it begins with (``_written_on``, in a worker thread), if
        any (``_tied``). Asked of the files a sync would leave as indexed alone."""
        asked = [(added & names, gone) for added, gone in self._may_tie if added & names]
        if not asked:
            return
        self._may_tie = [(added - names, gone) for added, gone in self._may_tie if added - names]
        for added, gone in asked:
            gone = [rel for rel in sorted(gone) if self.pending.get(rel) == "deleted"]   # (not synced yet)
            if gone and not self.stopping:
                tied = await anyio.to_thread.run_sync(self._written_on, sorted(added), gone,
                                                      abandon_on_cancel=True)
                self._tied.extend((frozenset({new}), frozenset({old})) for new, old in tied.items())

    def _written_on(self, added: list[str], gone: list[str]) -> dict[str, str]:
        """Those of the files ``added`` that begin with the whole indexed text of one of the files
        ``gone`` (its document's; a CSV's or a JSONL's of more than one row: all its rows, each at
        its number, as far as an opening goes, ``_rows_begin``), each with that file: ``mv a.txt
        b.txt``, then a log written on as b.txt before the batch was looked at, differs from
        a.txt's text, and is no rename by content (``WatchedFolder.renames``). The
        watcher's events do not pair the names of a rename (a deletion and an addition, in
        whatever batch), so a batch alone tied every deletion to every file it added: ``rm
        old.txt`` beside a new log waited with the log, up to its cap. Reads the folder and the
        index: a worker thread's.

        An added file's opening alone is read (``_TIE_READ``: a 71 MB CSV was read and parsed
        whole, 8 s of CPU and 700 MB, beside an unrelated ``rm``), and only when it holds the
        first word of an old text (``_probe``: 10,000 new files beside one ``rm`` were each
        read as the loader reads them). An old text longer than that opening is matched as far
        as it goes, its first chunk at least (``_begins_with``). An old text shorter than
        ``_TIE_MIN_CHARS`` ties nothing: a one-line ``# TODO`` deleted beside a new plan.md
        beginning so is no evidence of a rename (a rename of it written on is synced as a
        deletion, and the new name when it settles: a few words out of the index for a while, as
        against a deletion held with an unrelated file; nothing in the index, its size or its
        stamp, tells the two apart, and watchfiles does not pair a move's events)."""
        limit = _TIE_READ * self.settings.index.chunk_size
        # deleted file -> its (first) document's chunks, its size, probe, and its rows (a .csv's or
        # .jsonl's: each row's number and document id, in order; none for a file of one document)
        olds: dict[str, tuple[list[str], int, bytes | None, list[tuple[str, str]]]] = {}
        known: dict[str, list[str]] = {}   # document id -> its chunks (``olds``', then rows an opening cut)
        with reading(self.db_path) as store:
            if store is None:
                return {}
            for rel in sorted(gone):
                rows = index_rows.file_rows(store, rel)
                if not rows:
                    continue
                # (itself, or its first row)
                doc_id, size, _stamp = rows[min(rows, key=lambda p: (p != rel, len(p), p))]
                # (those an opening can hold: the text of ``limit`` bytes is no longer, each chunk
                # overlapping the one before by half of it at most)
                chunks = index_rows.chunk_texts_of(store, doc_id, 2 * limit)
                if chunks and chunks[0]:
                    numbered = sorted((int(number), doc) for p, (doc, _size, _stamp) in rows.items()
                                      if (number := p.rpartition("#")[2]).isdigit() and p != rel)
                    olds[rel] = (chunks, size, _probe(chunks[0]), [(str(n), doc) for n, doc in numbered])
                    known[doc_id] = chunks

        def row_chunks(doc_id: str) -> list[str]:   # (a row after the first, an opening cut: rare)
            if doc_id not in known:
                with reading(self.db_path) as store:
                    known[doc_id] = ([] if store is None
                                     else index_rows.chunk_texts_of(store, doc_id, 2 * limit))
            return known[doc_id]

        out: dict[str, str] = {}
        for rel in sorted(added):
            if not olds or self._stop_looking.is_set():
                break
            path = self.root / rel
            try:
                # (a file written on after its rename has grown: one smaller than each is not read)
                if (st := path.stat()).st_size < min(size for _chunks, size, _probe, _rows in olds.values()):
                    continue
                with path.open("rb") as f:
                    head = f.read(limit)
                    start = 0
                    if head[:1] == b"\0":   # (the loader's opening: from its text on, past a run of NULs)
                        start = text_start(f)
                        head = f.read(limit)
                # (a probe in none of them: no old text begins this one, read as text)
                if not any(_may_hold(head, probe) for _chunks, _size, probe, _rows in olds.values()):
                    continue
                docs, _warnings = read_documents(path, root=self.root, text_field=self.settings.index.text_field,
                                                 st=st, limit=limit)
            except (OSError, StreamragError):
                continue
            if not docs:
                continue
            # (read as far as it goes, not whole: the last document is cut short, not those before;
            # a lone one may be whole, though, a .jsonl's cut last line skipped: matched whole first)
            opening = max(st.st_size - start, len(head)) >= limit
            cut = opening and len(docs) == 1
            # (a .jsonl's rows read are whole, the line cut skipped: read here; a .csv's last one is cut)
            whole, cut_row = docs, None
            if opening and path.suffix.lower() == ".jsonl":
                cut_row = _cut_line(head, docs, self.settings.index.text_field)
            elif opening:
                last = docs[-1]
                whole, cut_row = docs[:-1], _CutRow(last.path.rpartition("#")[2], last.text, last.id)

            def begins_with(chunks: list[str], old_rows: list[tuple[str, str]]) -> bool:
                if len(old_rows) > 1:   # (all its rows, not its first alone)
                    return _rows_begin(whole, old_rows, cut=cut_row, chunks_of=row_chunks)
                return (_begins_with(docs[0].text, chunks, cut=False)
                        or cut and _begins_with(docs[0].text, chunks, cut=True))

            if old := next((old for old, (chunks, _size, _probe, old_rows) in olds.items()
                            if begins_with(chunks, old_rows)), None):
                out[rel] = old
                del olds[old]
        return out

    async def _extract_ahead(self, files: dict[str, str], renamed: dict[str, str], again: set[str]) -> None:
        """Extracts the files of a batch just queued (``_queue``), so that the sync finds them extracted."""
        wanted = [rel for rel, kind in files.items()
                  if kind != "deleted" and rel not in renamed and rel not in again]
        # (no FIFO) A stat per file, in a worker thread: a folder of 50,000 moved in took a second.
        existing = await anyio.to_thread.run_sync(_regular_files, self.root, wanted, abandon_on_cancel=True)
        existing = await self._settled(existing)
        if not existing or self._stops_for_a_moved_index():
            return
        big = await anyio.to_thread.run_sync(self._big_new, existing, abandon_on_cancel=True) \
            if self._recv is not None else []
        self._check_index()
        self.emit("extracting", _n(len(existing), "file"), files=len(existing))
        from streamrag.pipeline import Indexer

        started, began = anyio.current_time(), time.time()
        progress = Progress()
        indexer = Indexer(self.settings, self.db_path, root=self.root, progress=progress,
                          command="watch:extract", transport=self.transport, stopped=self.stop_event.is_set,
                          retry_base_s=self.retry_base_s, answered_at=self.outage.answered_at,
                          failures_command=self.failures_command)
        try:
            if self.writer_lock is not None:
                self.writer_lock.check()   # its file deleted: taken again, or another writer says so
            extracted = await self._prefetch(indexer, existing, big)
        except StreamragError as e:
            self.outage.attempted(indexer, began, failed=isinstance(e, LLMUnavailableError))
            self.outage.answered_ahead(indexer)
            if isinstance(e, LLMUnavailableError):
                # Given up after three chunks refused: said as fewer are, their calls recorded as
                # failed (below). Three said "extracting 1 file failed: ...; the next sync tries
                # again", without "(retrying until it answers ...)", and of an endpoint that never
                # answered, the index "as it was", which an extraction never publishes; two said
                # "extracting 1 file: 2 LLM calls failed; left to the sync; ...", of the same outage.
                self._say_ahead_down(len(existing), indexer, error=str(e))
                return
            then = "the next start tries again" if self.stopping else "the next sync tries again"
            if isinstance(e, LLMError):   # (given up on the model's answers, a key refused: as below)
                then = "left to the next start" if self.stopping else "left to the sync"
            self.emit("error", f"extracting {_n(len(existing), 'file')} failed: {self._why_failed(e)}; {then}",
                      error=str(e), **self._failed_counts(indexer))
            return
        finally:  # its calls were sent, whether or not the extraction failed after
            self._spent_ahead(indexer)
            for warning in indexer.extraction_warnings():   # its sync finds the extractions stored
                self.emit("warning", warning, warning=warning)
        self.outage.attempted(indexer, began)
        self.outage.answered_ahead(indexer)
        if extracted is None:   # (paused for a batch: its chunks so far are stored, reused when it resumes)
            self._ahead["chunks"] += progress.counts["chunks_extracted"]
            self._say_paused(big, progress.counts["chunks_extracted"])
            return
        self._ahead["chunks"] += extracted
        stats = indexer.llm.stats if indexer.llm is not None else {}
        if indexer.failed_items and calls_failed(stats) and not answered(stats):
            # Every call failed, none answered: the endpoint is down (an item that failed with no
            # call failing is no news of it). The model client gives up on an extraction
            # (``LLMUnavailableError``, above) only after three such chunks; an edit of one (a
            # line appended) was recorded as failed, and its line said "0 chunks extracted" with
            # no word of the outage, which the sync after it said first.
            self._say_ahead_down(len(existing), indexer)
            return
        took = anyio.current_time() - started
        reused = progress.counts["chunks_reused"]
        # (its failed items are chunks: a file it cannot read is no failed item)
        failed = _failed_ahead(indexer.failed_items, stats, "the next start's sync" if self.stopping else "the sync")
        # Stopping (SIGTERM during it), no sync follows in this process: it said "sync after 2s of quiet".
        # The next start's sync, said once: with chunks failed, "the next start tries it again; the
        # next start syncs it".
        then = ("" if failed else "; the next start syncs it") if self.stopping else \
            f"; sync after {self.settings.watch.quiet_s:g}s of quiet"
        self.emit("waiting", f"{_n(extracted, 'chunk')} extracted, {number(reused)} reused in {seconds_said(took)}"
                             f"{failed}{then}",
                  chunks_extracted=extracted, chunks_reused=reused, chunks_failed=indexer.failed_items,
                  took_s=round(took, 3), pending=self._files_pending())

    def _big_new(self, paths: list[Path]) -> list[str]:
        """Those of ``paths`` with ``pipeline.LEAD_BYTES`` of new text or more (their size past the
        size indexed, as ``index`` holds them back, ``extracted_later``): a stat each, and the
        index's rows of those that big. A worker thread's."""
        from streamrag.pipeline import LEAD_BYTES, big_new_text

        sizes: dict[str, int] = {}
        for path in paths:
            with contextlib.suppress(OSError):
                if (size := path.stat().st_size) >= LEAD_BYTES:
                    sizes[path.relative_to(self.root).as_posix()] = size
        if not sizes:
            return []
        with reading(self.db_path) as store:
            indexed = {rel: None if store is None else max(
                (size for _doc, size, _stamp in index_rows.file_rows(store, rel).values()), default=None)
                for rel in sizes}
        return sorted(rel for rel, size in sizes.items() if big_new_text(size, indexed[rel]))

    async def _prefetch(self, indexer: Indexer, paths: list[Path], big: list[str]) -> int | None:
        """``indexer.prefetch(paths)``, the chunks it extracted; or, with ``big`` files among them
        (``_big_new``), None when a batch came first: the extraction is cancelled (what it stored
        is kept, and its calls' answers cached), the batch kept for ``_follow`` (``_came``) and
        the big files paused (``_paused``): left as indexed by the syncs until their extraction,
        resumed after the sync of the others, is done. The calls under way when the batch
        came are answered and cached first (``LLMClient.drain``): none is paid for twice. A note saved beside a 2 MB file just added
        waited for its whole extraction (19 s with a 300 ms model; hours beside 30 MB) before
        its batch was even taken."""
        recv = self._recv
        self._paused.difference_update(big)
        if not big or recv is None or self.stopping:
            return await indexer.prefetch(paths)
        extracted: list[int] = []

        async def batch_first(scope: anyio.CancelScope) -> None:
            # (the stream's end, a stop: the extraction goes on, as without a batch)
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
                self._came.update(await recv.receive())
                await anyio.sleep_until(self._pausable_at)
                # Drained, not cut: the calls under way are answered and cached first (a provider
                # bills a call cut as it was asked, and the resumed extraction asked it again).
                if indexer.llm is not None:
                    await indexer.llm.drain()
                scope.cancel()

        with user_errors_unwrapped():
            async with anyio.create_task_group() as tg:
                tg.start_soon(batch_first, tg.cancel_scope)
                extracted.append(await indexer.prefetch(paths))
                tg.cancel_scope.cancel()
        if extracted:   # (done as the batch came: not paused, the batch taken next all the same)
            return extracted[0]
        self._paused.update(big)
        return None

    async def _resume_paused(self) -> bool:
        """Extracts the paused big files (``_paused``) ahead again, the chunks stored so far
        reused; whether that was done (not paused again by a batch, ``_prefetch``)."""
        files = {rel: self.pending.get(rel, "modified") for rel in sorted(self._paused)}
        self._paused = set()
        # Paused again by the next batch, it would extract only between a sync and a batch: beside
        # a log written every second, a second of each sync's max_wait. It runs as long as a busy
        # file's cap first: a batch during that waits for it at most so long (``_MAX_WAIT_QUIETS``).
        self._pausable_at = anyio.current_time() + _MAX_WAIT_QUIETS * self.settings.watch.quiet_s
        self._extracting_ahead = True   # (a stop waits for it, as for any extraction ahead: ``stop``)
        try:
            await self._extract_ahead(files, {}, set())
        finally:
            self._extracting_ahead = False
        return not self._paused

    def _say_paused(self, big: list[str], chunks: int) -> None:
        """The extraction ahead of ``big`` paused for a batch that came during it (``_prefetch``)."""
        more = f" and {_n(len(big) - 1, 'more file')}" if len(big) > 1 else ""
        self.emit("paused", f"extracting {shown(big[0])}{more} paused for newer changes, synced first without "
                            f"{'it' if len(big) == 1 else 'them'} ({_n(chunks, 'chunk')} extracted so far, kept); "
                            f"{'it resumes' if len(big) == 1 else 'they resume'} after that sync",
                  file=big[0], files=len(big), chunks_extracted=chunks, pending=self._files_pending())

    async def _settled(self, paths: list[Path]) -> list[Path]:
        """Those of ``paths`` not written for ``watch.debounce_ms``, once the younger ones are that
        old (a stop ends the wait: none then). The watcher ends a batch ``debounce_ms`` after its
        last new event, and a file written again is no new event: a file written in parts a few
        hundred ms apart came in a batch while still being written, and was extracted ahead, then
        again, whole, by the sync. One written again meanwhile is left to its next batch or to
        the sync, which extract it once; a single save is that old when its batch comes."""
        young_s = self.settings.watch.debounce_ms / 1000
        seen = await anyio.to_thread.run_sync(_modified, paths, abandon_on_cancel=True)
        looked = time.time()
        wait = _settle_wait((m for m, _ in seen.values()), young_s, looked)
        self._unsettled = set()
        if wait <= 0:
            self._settling_said.difference_update(paths)
            return paths
        # Said, as the wait may last up to a minute (the longest debounce_ms) with no line
        # between "queued" and "extracting"; events meanwhile wait in the stream, taken after it.
        # Said once while its files are written on (``_settling_said``): a log appended every
        # 0.2 s had a line at every sync.
        young = _still_written({p: m for p, (m, _) in seen.items()}, young_s, looked)
        if not self._settling_said.issuperset(young):
            self._say_settling(young, wait)
        self._settling_said.update(young)
        with anyio.move_on_after(wait):
            await self.stop_event.wait()
        if self.stopping:   # (left pending: the next start's sync extracts them)
            return []
        now = await anyio.to_thread.run_sync(_modified, paths, abandon_on_cancel=True)
        # (one gone is kept, as without a wait: the extraction finds it gone, which is no failure)
        settled = [p for p in paths if now.get(p) == seen.get(p)]
        self._settling_said.difference_update(settled)
        # Written on: the sync waits for them to be quiet too (``_follow``), as for a file in two
        # batches in a row; a log's first batch made a sync quiet_s after it, while it was written.
        self._unsettled = set(paths) - set(settled)
        return settled

    def _say_settling(self, young: list[Path], wait: float) -> None:
        """The extraction ahead waits ``wait`` seconds for the files ``young`` (the youngest first),
        still being written, to be ``watch.debounce_ms`` old."""
        rel = young[0].relative_to(self.root).as_posix()
        more = f" and {_n(len(young) - 1, 'more file')}" if len(young) > 1 else ""
        self.emit("settling", f"waiting {seconds_said(wait)} for {shown(rel)}{more} to be unchanged for "
                              f"{self.settings.watch.debounce_ms} ms (watch.debounce_ms) before extracting",
                  file=rel, files=len(young), wait_s=round(wait, 3))

    def _say_ahead_down(self, files: int, indexer: Indexer, error: str = "") -> None:
        """An extraction ahead of ``files`` files whose calls all failed, none answered (recorded as
        failed items, or ``error``, the model client giving up on it): the outage begun, said in
        full as a sync says it (the sync after it then silent), the calls in the client's words
        (``Indexer.unavailable_error``: without a run's "Nothing was published", which an extraction
        never does), or, said already, that the extraction waits for the endpoint."""
        words = indexer.unavailable_error or error
        if self.outage.current is not None:
            self._say_ahead_waits(files, **_error_field(words, error))
            return
        then = "the next start" if self.stopping else "the sync"
        counts = self._failed_counts(indexer)
        self._say_down(f"extracting {_n(files, 'file')}: {_n(counts['llm_errors'], 'LLM call')} "
                       f"failed; left to {then}", words, error, **counts)

    def _say_ahead_waits(self, files: int, **fields: Any) -> None:
        """The extraction ahead of ``files`` files met the outage under way: it waits for the endpoint."""
        then = "the next start tries again" if self.stopping else "the next sync tries again"
        self.emit("outage", f"extracting {_n(files, 'file')} waits: {self.outage.down_since()}; {then}",
                  **self.outage.fields(), **fields)

    def _spent_ahead(self, indexer) -> None:
        """Adds the calls of ``indexer`` (an extraction ahead, a failed sync) to the next idle line's."""
        self._ahead["llm"] = summed(self._ahead["llm"], indexer.llm.stats if indexer.llm else {})

    async def _sync(self, reason: str, *, why: dict[str, Any], initial: bool = False,
                    left_as_indexed: frozenset[str] = frozenset()) -> bool:
        """One full sync of the folder for ``reason`` (``why``: its counts, ``_why_sync``); a
        failure is reported (raised if ``initial``), and returns False (the next sync backs off).
        One that made an ``Indexer`` frees its memory once its own frame, which holds it, is gone
        (``_release_memory``): one that failed too (a full disk, retried every few minutes at
        most), whose Indexer and model client sit in the same cycles."""
        before = self.indexers_made
        try:
            return await self._sync_once(reason, why=why, initial=initial, left_as_indexed=left_as_indexed)
        finally:
            if self.indexers_made != before:
                _release_memory()

    async def _sync_once(self, reason: str, *, why: dict[str, Any], initial: bool,
                         left_as_indexed: frozenset[str] = frozenset()) -> bool:
        from streamrag.pipeline import Indexer

        if not self.root.is_dir():
            return self._sync_without_folder()
        if self._stops_for_a_moved_index():   # (what is pending stays so)
            return False
        self._check_root()  # replaced without the watcher saying so: this sync is whole anyway
        self._check_index()
        # A sync while the endpoint is down is silent, one for new edits too (their queued and
        # extraction lines said them): it has no news until it answers again, or publishes a
        # new version (``_outage_after``); ``Outage.still_down`` says the outage goes on. Its lines
        # shown, the outage line was said again after them with the pause unchanged, at each edit.
        quiet = self.outage.current is not None
        # (``left_as_indexed``: files still written, left pending and as indexed for a later
        # sync, ``_split``)
        queued = {rel: kind for rel, kind in self.pending.items() if rel not in left_as_indexed}
        self.pending = {rel: kind for rel, kind in self.pending.items() if rel in left_as_indexed}
        self._syncing = queued   # (left so when cancelled: not synced)
        began = time.time()
        progress = Progress()
        # (`--once` keeps no graph: there is no next sync, and without one to keep, a sync with
        # nothing to redo does not read it, ``Indexer._nothing_to_redo``)
        indexer = Indexer(self.settings, self.db_path, root=self.root, progress=progress,
                          command="watch", transport=self.transport,
                          graph_cache=None if self._once else self.graph_cache,
                          retried=not self._once, retry_base_s=self.retry_base_s,   # (`--once` is like `streamrag index`)
                          stopped=self.stop_event.is_set,
                          update_of=self._update_of, answered_at=self.outage.answered_at,
                          folder_changed=self.syncs > 0, left_as_indexed=left_as_indexed,
                          say=lambda line: self.emit("warning", line, warning=line),   # (--json: on stdout)
                          failures_command=self.failures_command)
        self.indexers_made += 1
        self._sync_run = indexer.run_id
        lines = StageLines(self, indexer, reason, why, quiet=quiet)
        progress.listeners.append(lines)
        started = anyio.current_time()
        try:
            if self.writer_lock is not None:
                self.writer_lock.check()   # its file may have gone with a deleted folder
            result = await indexer.run([self.root])
        except Exception as caught:   # (groups too)
            self._syncing, self._sync_run = {}, None   # (pending again, ``_sync_failed``)
            self.outage.tried_s = anyio.current_time() - started
            self.outage.attempted(indexer, began, failed=isinstance(caught, LLMUnavailableError))
            # Answered, then failed for another reason (the index locked): the outage is over,
            # said now, as the next sync may ask the endpoint nothing (``Outage.answered_ahead``).
            self.outage.answered_ahead(indexer)
            e = self._survived(caught, initial=initial)
            if e is None:
                raise
            self._sync_failed(e, indexer, queued, quiet=lines.quiet, initial=initial)
            self._update_of = self._update_of or indexer.run_id   # what it was for is still missing
            return False
        self._syncing, self._sync_run = {}, None
        self.outage.attempted(indexer, began)
        if initial:
            self._answered_first = indexer.llm is not None and answered(indexer.llm.stats)
        took = self.outage.tried_s = anyio.current_time() - started
        self._synced(took, indexer.broken_links, indexer.conflict_copies)
        await self._bound_wal()
        self._say_warnings(result, initial=initial, changed=queued)
        previous, self.last_result = self.last_result, result
        # What this update cost, the extraction done as its files changed included (the sync
        # then finds those chunks extracted: "reused").
        ahead, self._ahead = self._ahead, {"chunks": 0, "llm": {}}
        quiet = self._outage_after(result, previous, quiet=lines.quiet)
        spent = self._say_idle(result, ahead, took, quiet=quiet)
        self._say_settled(result)
        done = self._left_out(result, spent, indexer.chunks_failed, indexer.held_back, quiet=quiet,
                              words=indexer.unavailable_error)
        # (given up on, items are left all the same: the update goes on until none is)
        self._update_of = None if not result.failed_items else self._update_of or result.run_id
        return done

    async def _bound_wal(self) -> None:
        """Empties the index's write-ahead log once it is past ``store.WAL_BOUND`` (``store.bound_wal``;
        this daemon's own extraction and syncs come after it in the one loop, ``_follow``). When
        readers outlast the wait it is tried again once the log has doubled, or, emptied meanwhile,
        once past the bound again. In a thread of its own, which a stop does not wait for here
        (SIGTERM under a reader waited out the grace period and cancelled with 143, the sync
        published): it is told to stop, and ends within a quarter of a second (``store.empty_wal``),
        before ``run`` returns (``_end_emptying``). A wait longer than ``_SAY_EMPTYING_S`` is said, once.

        It starts from the failure the index remembers (``store.wal_tried``: an ``index`` run, or a
        watch before, outlasted by the same reader), and notes its own there as ``index`` does
        (``store.remember_wal_tried``), in the emptying's thread, right after the sync's publish:
        a new watch waited the whole 30 s again for a reader that had kept ``index`` waiting."""
        if self.stopping:
            return
        if self._wal_tried is None:   # (read once, when first past the bound: no look at every start)
            if wal_past_bound(self.db_path) is None:
                return
            self._wal_tried = wal_tried(self.db_path)
        try:
            if Path(f"{self.db_path}-wal").stat().st_size < self._wal_tried:
                self._wal_tried = 0   # emptied meanwhile (its readers gone, the last connection folded it)
        except OSError:
            self._wal_tried = 0
        before = self._wal_tried
        size = wal_past_bound(self.db_path, before)
        if size is None:
            return   # (no await: nothing else runs between the publish and its idle line)
        done, halt = threading.Event(), threading.Event()
        tried: list[tuple[bool, int, float] | None] = []
        failed: list[BaseException] = []

        def work() -> None:
            try:
                result = bound_wal(self.db_path, before, halt)
                if result is not None and not halt.is_set():   # (a stop's is no failure to note)
                    remember_wal_tried(self.db_path, 0 if result[0] else result[1])
                tried.append(result)
            except BaseException as e:   # (raised here below: a bug the thread kept left watch waiting for ever)
                failed.append(e)
            finally:
                done.set()

        thread = threading.Thread(target=work, name="streamrag-empty-wal", daemon=True)
        self._emptying = (thread, halt)
        thread.start()
        started, said = anyio.current_time(), False
        while not done.is_set():
            if self.stopping:
                halt.set()
                return
            if not said and anyio.current_time() - started > _SAY_EMPTYING_S:
                said = True
                wait = Store.busy_wait_s()
                self.emit("emptying", f"the index's write-ahead log ({size / 1e6:.0f} MB), once the queries "
                                      f"reading older versions end (up to {wait:g}s; queries go on)",
                          wal_bytes=size)
            await anyio.sleep(0.05)
        self._emptying = None
        if failed:
            raise failed[0]
        if tried[0] is None:
            return
        emptied, size, took = tried[0]
        self._wal_tried = 0 if emptied else size
        if emptied:
            log.debug("%s-wal: %d bytes, emptied in %.1f s", self.db_path, size, took)
            return
        line = wal_kept_line(self.db_path, size, took)
        self.emit("warning", line, warning=line, wal_bytes=size)

    async def _end_emptying(self) -> None:
        """Stops the emptying of the log a stop left running (``_bound_wal``) and waits for it,
        ``_END_EMPTYING_S`` at most: it holds the index's write lock in its tries, and ``run``
        returned with it running, the lock held up to 30 s more in a process that goes on
        (``Daemon.run`` used as a library). Told to stop, it ends within a quarter of a second
        (``store.empty_wal``). The wait is not shielded: it was, and its first step, copying the
        log, did not look at the stop (300 MB: 2.4 s), so a second signal ("cancelling now")
        waited for the copy too. Cancelled, ``run`` returns at once and the emptying ends by
        itself moments later."""
        if self._emptying is None:
            return
        thread, halt = self._emptying
        self._emptying = None
        halt.set()
        await anyio.to_thread.run_sync(thread.join, _END_EMPTYING_S, abandon_on_cancel=True)
        if thread.is_alive():
            log.debug("%s: the emptying of its write-ahead log did not end in %g s; left to end by itself",
                      self.db_path, _END_EMPTYING_S)

    def _sync_without_folder(self) -> bool:
        """A sync that finds the watched folder gone: waits for it to come back (True), or,
        ``--once``, stops the daemon with exit status 1 (False)."""
        if not self._once:
            self._folder_gone()
            return True   # nothing to sync until the folder is back
        self.exit_code = 1
        if self.db_path.exists():
            index = f"the index keeps what it held: {self.db_path}"
        else:  # the default .streamrag/index.db was inside it
            index = f"its index {self.db_path} went with it"
        self.emit("error", f"{self.root}: the watched folder is gone; stopping ({index})",
                  error="folder gone")
        self.pending.pop(".", None)  # nothing left to sync
        self.stop("the watched folder is gone")
        return False

    def _survived(self, caught: Exception, *, initial: bool) -> StreamragError | None:
        """The error a failed sync reports, the daemon going on; None when ``caught`` is to
        propagate (a bug, a user error in the initial sync, or a first index the model answered
        unusably or the endpoint refused: ``UnusableFirstIndex``, ``RejectedFirstIndex``)."""
        full = disk_full(caught)
        if full is not None and not initial:
            # A full disk frees up (a log rotated, space made): what is pending is synced
            # again, backing off, as after any failed sync; the daemon stayed down until
            # someone restarted it. (Nothing committed is lost: the failed write rolls back.)
            return StreamragError(f"the disk holding the index is full ({clause(full)}); free some "
                                  "space")
        if not isinstance(caught, StreamragError) or isinstance(caught, (UnusableFirstIndex, RejectedFirstIndex)) \
                or initial and not (isinstance(caught, LLMUnavailableError) and not self._once):
            # (A daemon started before its model server, by a service manager say, waits
            # for the server as it does when the server goes away later; --once stops. A first
            # index the model answered unusably or the endpoint refused (a chunk too long for
            # its context), ``Indexer._sync``, stops it whichever sync met it, a retry after such
            # a wait too: watch goes on with the settings it started with, so only a restart
            # asks the model the fix names.)
            return None
        return caught

    def _sync_failed(self, e: StreamragError, indexer: Indexer, queued: dict[str, str], *,
                     quiet: bool, initial: bool) -> None:
        """After a sync that failed with ``e``: what it was to sync is pending again, its calls
        go to the next idle line, and the error is said (during an outage, the outage lines
        say it)."""
        if initial:
            self.pending.setdefault(".", "rescan")
        for rel, kind in queued.items():
            self.pending.setdefault(rel, kind)
        # The new or changed files it found and left unindexed, as `status` counts them: those
        # a restart during an outage finds are known only so (its whole-folder sync's).
        for rel in indexer.not_indexed_files or ():
            self.pending.setdefault(rel, "modified")
        if indexer.not_indexed_files is not None:   # (those of the chunks to retry among them)
            self._files_listed = True
        self._spent_ahead(indexer)   # its calls were sent all the same
        unreachable = isinstance(e, LLMUnavailableError) and not self._once
        if unreachable and self.outage.current is not None:   # said when it began
            self.outage.owe(quiet=quiet)
            return
        # Given up with none of its calls answered: said as an outage begun. (One some of whose calls
        # answered before the server stopped, reports of a deletion say, said "no call succeeded:
        # ... answered earlier but has refused every connection for 61 s".)
        if unreachable and not self.stopping and not answered(indexer.llm.stats if indexer.llm else {}):
            self._say_sync_down(indexer.unavailable_error or str(e), str(e), **self._failed_counts(indexer))
            return
        if self.stopping:
            then = "the next start syncs what is pending"
        else:
            then = self.outage.retrying() if unreachable else "retrying after the next quiet period"
        began = self.outage.began() if unreachable else {}
        self.emit("error", f"sync failed: {self._why_failed(e)}; {then}", error=str(e),
                  **self._failed_counts(indexer), **began)

    def _why_failed(self, e: StreamragError) -> str:
        """What an error line says of ``e``, the failure of a sync or an extraction ahead: as ``e``
        says it ("nothing answers at ...; start the server, or fix llm.api_base"), unless an outage
        began with it of an endpoint that answered before and now refuses every connection: then
        that it stopped answering, since when (``Outage.stopped``). Another error met during an
        outage (a full disk) is said as it is."""
        down = isinstance(e, LLMUnavailableError) and self.outage.current is not None and self.outage.refused
        return (self.outage.stopped() if down else None) or clause(e)

    def _failed_counts(self, indexer: Indexer) -> dict[str, int]:
        """What an error line about a sync or an extraction ahead that failed counts, as the
        ``outage`` and ``stopped`` lines do: its calls that failed, given up on too (``llm_errors``),
        the changed files not synced yet (``pending``), and the failed items a retry sync waits for
        (``failed_items``), of them the chunks indexed without their claims (``claims_failed``); or,
        none scheduled, those the retries gave up on, as the health and stopped lines count them
        (``_items_left``): a file edited after giving up whose sync failed in an outage said
        failed_items 0 beside a health line of 4 given up on (the sync asks for them again)."""
        failed = calls_failed(indexer.llm.stats) if indexer.llm is not None else 0
        items, claims, _ = self._items_left()
        return {"llm_errors": failed, "pending": self._files_pending(), "failed_items": items,
                "claims_failed": claims}

    def _synced(self, took: float, broken: list[str], copies: list[str]) -> None:
        """Bookkeeping after a sync that published, in ``took`` seconds (``broken``: the links
        it found leading nowhere; ``copies``: the conflict copies)."""
        self.folder.note_links(broken)
        # A copy named by a batch taken while this sync ran, after its scan, is one the next
        # scan meets: kept, or that scan named it again, as new (``_say_warnings``).
        late = [rel for rel in self._copies if rel not in copies
                and os.path.lexists(at := self.root / rel) and not os.path.isdir(at)]
        self._copies = (sorted([*copies, *late], key=lambda rel: scan_order(self.root, rel)) if late
                        else list(copies))
        self._index_trashed = None   # (said, or gone with the folder, as its line said)
        self._hold_index()
        self.syncs += 1
        self._index_gone_said = self._replaced = self._files_listed = False
        self.last_sync_s = round(took, 3)

    def _say_warnings(self, result: SyncResult, *, initial: bool, changed: Iterable[str] = ()) -> None:
        """The warnings of a sync that published, and the files the initial sync left out.
        ``changed``: the files this sync was for."""
        # Skipped and unreadable files, each said once (not again by every sync that meets it). An
        # export is said only when read, written anew: each time (said once for two writes in a row),
        # a file this sync was for, or one in a folder it was for (".": the whole folder's).
        changed = list(changed)
        named = {shown(rel) for rel in changed}   # (as the lines show them)

        def anew(label: str | None) -> bool:
            return label is not None and (label in named or covered(label, changed))

        for line in result.warnings:
            if line not in self.warned or anew(export_said(line)):
                self.emit("warning", line, warning=line)
        said, self.warned = self.warned, set(result.warnings) | self._exports_said
        self._exports_said = set()
        if self._copies and (line := conflict_copies_line(self._copies)) in said:
            self.warned.add(line)   # (a batch's, naming a copy this sync's scan did not meet: ``_synced``)
        if initial:   # the one sync that scans the whole folder
            self._kinds_said_left_out.update(result.left_out)
            for line in left_out_lines(result.left_out, self.settings.index.include):
                self.emit("warning", f"left out {line}", warning=f"left out {line}")

    def _outage_after(self, result: SyncResult, previous: SyncResult | None, *, quiet: bool) -> bool:
        """The outage after a sync that published: over when a call was answered usably, or every
        call was answered (``ends_outage``: said so), or no news when nothing is left to ask it.
        Whether the sync's lines stay unsaid (``quiet``): only while the outage goes on and
        nothing new was published."""
        if self.outage.current is not None and ends_outage(result.llm):
            self.outage.recovered()
            quiet = False
        elif self.outage.current is not None and not result.failed_items:
            self.outage.no_news()   # nothing is left to ask it: no news of it
            quiet = False
        if quiet and (previous is None or result.version != previous.version):
            quiet = False   # it published something after all: said as any sync is
        return quiet

    def _say_idle(self, result: SyncResult, ahead: dict[str, Any], took: float, *,
                  quiet: bool) -> dict[str, dict[str, int]]:
        """The idle line: what the update cost, the extraction ``ahead`` of the sync included
        (``quiet``: kept for the next idle line instead). The calls spent, by stage."""
        spent = summed(result.llm, ahead["llm"])
        calls = paid(spent)
        cached = sum(s.get("cached", 0) for s in spent.values())   # (counted as `index` counts them)
        extracted = result.chunks_extracted + ahead["chunks"]
        reused = max(result.chunks_reused - ahead["chunks"], 0)
        if quiet:   # a retry while the endpoint is still down: its calls go to the next idle line's
            self._ahead = {"chunks": extracted, "llm": spent}
        else:
            from streamrag.cli import items_left_out, outcome, redone_by_upgrade

            # (a sync whose changes all failed, or that changed nothing, said "version 1: ..." as
            # one that published it: said as `index`'s summary heads it, and as its --json has it)
            came_to = outcome(result)
            head = (f"version {result.version}:" if came_to == "published" else
                    f"nothing published: stays at version {result.version}, "
                    f"{_n(items_left_out(result), 'item')} failed (left out);" if came_to == "nothing_published" else
                    f"nothing changed: stays at version {result.version};")
            # An upgrade that made it redo work (offline: with a model, the sync said it before the
            # work, ``Indexer._say_what_settings_redo``), as `index`'s summary says it: an offline
            # watch after a new nlp.VERSION extracted every chunk again and never said why. Once:
            # the sync records this streamrag's marks.
            upgrade = redone_by_upgrade(result.offline and result.reading_upgraded,
                                        result.extraction_upgraded and extracted > 0)
            self.emit("idle", f"{head} {_n(result.documents, 'document')}, "
                              f"{_n(result.entities, 'entity')}, {_n(result.communities, 'community')}; "
                              f"{_n(result.reports_generated, 'report')} written, {number(result.reports_kept)} "
                              f"kept; {calls_said(calls, cached, spent)}; sync {seconds_said(took)}"
                              f"{_joins_moved_said(result)}{f'; {upgrade}' if upgrade else ''}",
                      version=result.version, outcome=came_to, published=result.published,
                      documents=result.documents,
                      documents_added=result.documents_added, documents_removed=result.documents_removed,
                      documents_edited=result.documents_edited,
                      documents_unchanged=result.documents_unchanged,
                      documents_read_again=result.documents_read_again,
                      documents_new_times=result.documents_new_times,
                      documents_renamed=result.documents_renamed, entities=result.entities,
                      relationships=result.relationships, communities=result.communities,
                      reports_generated=result.reports_generated, reports_kept=result.reports_kept,
                      chunks_extracted=extracted, chunks_reused=reused,
                      llm=llm_summary(spent), failures=result.failures, took_s=self.last_sync_s,
                      asked_again=asked_again(spent), joins_moved=result.joins_moved,
                      joins_joined=result.joins_joined, joins_parted=result.joins_parted,
                      documents_failed_added=result.documents_failed_added,
                      documents_failed_edited=result.documents_failed_edited,
                      reading_upgraded=result.reading_upgraded,
                      extraction_upgraded=result.extraction_upgraded and extracted > 0)
        return spent

    def _say_settled(self, result: SyncResult) -> None:
        """The items a sync settled (their answers unusable too often), said once."""
        if result.settled:
            # No longer retried, and no longer failures: said once, as the sync's error lines said
            # the tries before (the retries simply stopped).
            from streamrag.pipeline import settled_line

            line = settled_line(result.settled, self.failures_command)
            self.emit("warning", line, warning=line, settled=result.settled)

    def _left_out(self, result: SyncResult, spent: dict[str, dict[str, int]], chunks_failed: int,
                  held_back: Iterable[tuple[str, Any]] = (), *, quiet: bool, words: str = "") -> bool:
        """The items a sync that published left out, their calls failed (or none, a chunk left
        without its extraction: ``Indexer._fail_unaccounted``) (``spent``: the calls of the
        update; ``chunks_failed``: of the items, the chunks, ``Indexer.chunks_failed``, and
        ``held_back``, their files' ``(path, chunk)``, ``Indexer.held_back``;
        ``words``: the model client's of the calls refused, ``Indexer.unavailable_error``):
        retried by a sync after a pause (False), or not (True). ``--once``: said as a failure (False)."""
        # The calls that failed, the extraction's ahead of this sync included, as the idle line
        # counts them (those the client gave up on too); whether no call got an answer is this
        # sync's own question (below).
        failed_calls = calls_failed(spent)
        # Items left out because their calls failed. A call that failed and was asked again
        # successfully (an answer cut off at max_tokens) left nothing out: no retry for it.
        failed_items = result.failed_items
        self._retry_chunks = chunks_failed   # (0 when none failed: Indexer.chunks_failed)
        by_file: dict[str, set[str]] = {}
        for path, chunk in held_back if chunks_failed else ():
            by_file.setdefault(path, set()).add(chunk.id)
        self._retry_files = {path: frozenset(ids) for path, ids in by_file.items()}
        self._retry_claims = claims = result.claims_failed   # (of them, published without their claims)
        if self._once and failed_items:
            self._once_left_out(result, failed_calls)
            return False
        self._given_up = (0, 0)
        if not failed_items:
            self._retries = 0
            return True
        # Chunks, summaries or reports whose model calls failed are retried by the next sync
        # (they are its backlog), so one is scheduled instead of waiting for a file event. While
        # some calls succeed, a few times only: an item the model can never answer is not paid
        # for forever. While none succeeds the endpoint is down, and retrying (backing off up to
        # five minutes) costs nothing until it is back.
        # An outage: no call got any answer at all (an unusable answer is an answer, and paid),
        # and some failed: items left out with no call failing (a chunk left without its
        # extraction, ``Indexer._fail_unaccounted``) were said to be an endpoint down, offline too.
        outage = failed_calls > 0 and not answered(result.llm)
        if outage or self._retries < _MAX_RETRY_SYNCS:
            self._retry_left_out(failed_items, failed_calls, claims, outage=outage, quiet=quiet, words=words)
            return False
        # (Items left out with no call failing said "0 LLM calls still failed": said as items.)
        after = f"after {_MAX_RETRY_SYNCS} retries"
        what = (f"{_n(failed_calls, 'LLM call')} still failed {after}"
                + (f"; {without_claims_said(claims)}" if claims else "") if failed_calls
                else _left_out_said(failed_items, claims, lambda n: f"{n} still left out {after} (no LLM call failed)"))
        self.emit("error", f"{what}; they are tried again when a file changes or `streamrag index "
                           f"{shell_word(self.root)}` runs (`{self.failures_command}` lists them)",
                  llm_errors=failed_calls, failed_items=failed_items, claims_failed=claims, gave_up=True)
        self._given_up = (failed_items, claims)
        return True

    def _once_left_out(self, result: SyncResult, failed_calls: int) -> None:
        """``--once``: the items left out make the run a failure, said as one."""
        # `watch --once` is like `streamrag index`: what succeeded is published, and the
        # exit status tells a script that something did not.
        failed_items, claims = result.failed_items, result.claims_failed
        self.exit_code = 1
        self.pending.setdefault(".", "retry")
        self._retry_items = failed_items
        if not result.documents:   # (as `index` says it: "left out of this version" of nothing)
            from streamrag.pipeline import nothing_indexed_line

            self._nothing_indexed = True
            with reading(self.db_path) as store:
                last = "" if store is None else index_rows.last_failure(store, result.run_id)
            self.emit("error", nothing_indexed_line(failed_items, last, self.failures_command), llm_errors=failed_calls,
                      failed_items=failed_items)
            return
        # (the calls that failed are said of the items left out: of chunks indexed without their
        # claims alone, the claims calls, which their words say)
        calls = f" ({_n(failed_calls, 'LLM call')} failed)" if failed_calls else ""
        said = _left_out_said(failed_items, claims, lambda n: f"left out of this version: {n}{calls}")
        self.emit("error", f"{said}; run again to retry them (`{self.failures_command}` lists them)",
                  llm_errors=failed_calls, failed_items=failed_items, claims_failed=claims)

    def _retry_left_out(self, failed_items: int, failed_calls: int, claims_failed: int = 0, *, outage: bool,
                        quiet: bool, words: str = "") -> None:
        """Schedules a sync to retry the items left out, and says so (an ``outage``: says it
        began, its calls in the model client's ``words``, or, said already, leaves it to the
        outage lines). ``claims_failed``: of the items, the chunks indexed without their claims."""
        if not outage:   # (an outage's retries cost nothing: the few allowed once it answers are its own)
            self._retries += 1
        self.pending.setdefault(".", "retry")
        self._retry_items = failed_items
        if outage and self.outage.current is not None:   # said when it began
            self.outage.owe(quiet=quiet)
            return
        if outage:
            self._say_sync_down(words, llm_errors=failed_calls, pending=self._files_pending(),
                                failed_items=failed_items, claims_failed=claims_failed)
            return
        when = self._retried_when()
        claimless = f"; {without_claims_said(claims_failed)}" if claims_failed else ""
        said = (f"{_n(failed_calls, 'LLM call')} failed{claimless}; the affected items are retried {when}"
                if failed_calls else   # (said "0 LLM calls failed")
                _left_out_said(failed_items, claims_failed, lambda n: f"left out of this version: {n} (no LLM call "
                               "failed)") + f"; retried {when} (`{self.failures_command}` lists them)")
        self.emit("error", said, llm_errors=failed_calls, failed_items=failed_items, claims_failed=claims_failed,
                  outage=False)

    def _retried_when(self) -> str:
        """When the items a sync left out are retried: after a pause, or, stopping (SIGTERM during
        the sync), by the next start; it said "after a pause", a retry this process never runs."""
        return "by the next start" if self.stopping else "after a pause"

    def _say_sync_down(self, words: str, error: str = "", **counts: int) -> None:
        """A sync none of whose calls got an answer, an outage begun: said in full, one form whether
        it published without the chunks refused (``_retry_left_out``) or the model client gave up
        on it (``error``, three chunks refused: ``_sync_failed``), as an extraction ahead's is
        (``_say_ahead_down``): ``2 LLM calls failed; the affected items are retried after a pause;
        no call succeeded: ... (retrying until it answers, ...)``, the calls in the client's
        ``words`` (``Indexer.unavailable_error``), but of calls recorded as failed with HTTP errors,
        the outage's. (One or two chunks were said "is the endpoint ... down? Start it, or fix
        ...", three or more "sync failed: nothing answers at ...", a hung server's words too.)"""
        self._say_down(f"{_n(counts['llm_errors'], 'LLM call')} failed; the affected items are "
                       f"retried {self._retried_when()}", words, error, **counts)

    def _say_down(self, line: str, words: str, error: str, **counts: int) -> None:
        """The error ``line`` of a sync or an extraction ahead none of whose calls got an answer,
        the outage begun (``_say_sync_down``, ``_say_ahead_down``), how it says it appended
        (``_outage_began``): the calls in the model client's ``words`` (``Indexer.unavailable_error``;
        ``error``: it gave up), as a sync it failed says them (a hung server, one given up on), but
        of calls recorded as failed with HTTP errors, the outage's, which sum up every try."""
        told = words and (error or not self.outage.server_errors)
        fields, why = self._outage_began(LLMUnavailableError(words) if told else None)
        self.emit("error", f"{line}{why}", **_error_field(words, error), **counts, **fields)

    def _outage_began(self, error: LLMUnavailableError | None = None) -> tuple[dict[str, Any], str]:
        """Notes the outage begun (``Outage.began``) after a sync or an extraction ahead none of
        whose calls got an answer: the fields of the line that says it, and how it says it,
        ``; no call succeeded: ... (retrying until it answers, ...)`` (stopping, without the
        retries this process never makes); with ``error``, the model client's, as a sync it
        failed says it (``_why_failed``: it says a hung server, or one given up on, as the
        outage's words cannot)."""
        fields = self.outage.began()
        if error is not None:
            said = self._why_failed(error)
        elif fields["server_errors"]:   # as `streamrag index` says it
            said = self.outage.errors_said()
        elif stopped := self.outage.stopped():
            said = stopped
        else:
            said = self.outage.unreachable()
        # Stopping (SIGTERM during it), this process retries nothing: the line's head says that
        # the next start does ("left to the next start", "retried by the next start"); it said
        # "(retrying until it answers, ...)".
        until = "" if self.stopping else f" ({self.outage.retrying()})"
        return fields, f"; no call succeeded: {said}{until}"

    # -- health ----------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """What the published index holds and how the daemon fares, as one flat dict."""
        out: dict[str, Any] = {"documents": None, "entities": None, "communities": None,
                               "failures": None}
        with reading(self.db_path) as store:
            if store is not None:
                with store.snapshot():
                    for table in ("documents", "entities", "communities"):
                        out[table] = store.scalar(f"SELECT count(*) FROM {table}")
                    # As `streamrag status` counts them: the last update's, once per item, but
                    # those it settled; of the last sync that ended: the one under way records
                    # its items as it meets them (a retry's line said 2, 0, 1, 2 failures).
                    out["failures"] = failures_said(store, last_update(store, leaving=self._sync_run))
        # The failed items a retry sync waits for are pending too: an edit whose extraction
        # failed in an outage was synced (its file is not pending) but waits all the same.
        # (``claims_failed``: of the failed items, the chunks indexed without their claims;
        # ``gave_up``: the retries gave up on them, until a file changes, ``_items_left``)
        items, claims, gave_up = self._items_left()
        out.update(pending=self._files_pending(), failed_items=items, claims_failed=claims, gave_up=gave_up,
                   last_sync_s=self.last_sync_s, errors=self.errors)
        return out

    def check_health(self) -> bool:
        """Emits the health line if it says more than the last one; True if it did. Not when
        only the last sync's time differs (``_news``), after a sync or at the loop's look alike:
        each quiet retry of an outage (at 8, 16, 32 s) would have had a line of its own, 'last
        sync 0.06s', then '0.07s', and the minute's look one for a sync that changed nothing."""
        h = self.health()
        if not _news(h, self._last_health):
            return False
        self._last_health = h
        last = "-" if h["last_sync_s"] is None else seconds_said(h["last_sync_s"])
        if h["documents"] is None:
            held = "no index"
        else:
            held = (f"{_n(h['documents'], 'document')}, {_n(h['entities'], 'entity')}, "
                    f"{_n(h['communities'], 'community')}")
        self.emit("health", f"{held}, {number(h['pending'])} pending{_to_retry_said(h)}, last sync {last}, "
                            f"{_n(h['failures'] or 0, 'failure')}, {_n(h['errors'], 'error line')} since start", **h)
        return True

    async def _health_loop(self) -> None:
        while True:
            await anyio.sleep(self.health_s)
            self.check_health()


# --------------------------------------------------------------------------------------------
# Signals, the command
# --------------------------------------------------------------------------------------------
def _on_a_terminal() -> bool:
    """Whether ``watch`` runs from a terminal (it has a controlling terminal), so that a SIGHUP
    is that terminal hanging up (``serve``). Its stdin says nothing of it: `producer | streamrag
    watch` or `< /dev/null` in an ssh session went on after the session hung up, writing to no
    one and holding the writer lock; `setsid streamrag watch`, its stdin still a terminal, gets
    no hang-up, only someone's ``kill -HUP``."""
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK))
    except OSError:   # (ENXIO: none)
        return False
    return True


def _hangup_kept_line() -> str:
    """What ``watch`` says of a SIGHUP it has no terminal to take as a hang-up of."""
    return ("SIGHUP received, but watch runs from no terminal (it has no controlling one) that could "
            "have hung up: going on. It has no log file to reopen: its lines go to stderr (rotate a file they are "
            "redirected to with logrotate's copytruncate); SIGTERM stops it")


async def serve(daemon: Daemon, source: AsyncIterable[ChangeSet] | None) -> int:
    """Runs ``daemon`` under SIGINT/SIGTERM/SIGHUP handling; returns the exit code.

    First signal: ``daemon.stop()`` and a grace timer; second signal or the timer: cancel.
    Exit code: 0 when the work under way finished within the grace period, ``128 + signal``
    when it was cancelled (by the second signal, or by the first one once the grace period is
    over), as a shell reports a program ended by that signal; else the daemon's own.

    SIGHUP stops it only when it runs from a terminal (``_on_a_terminal``): the terminal hung
    up (an ssh session dropped, a tmux window closed). Without one (systemd, `setsid`, a
    container), a SIGHUP is someone's ``kill -HUP``, which daemons take as "reload" or "reopen
    your logs" and never as "stop": a logrotate ``postrotate kill -HUP`` stopped the watch.
    Watch has no log file of its own to reopen and reads its settings at its start, so it
    says so on one line and goes on. (Under ``nohup`` SIGHUP is ignored, and stays so.)
    """
    code = 0
    work = anyio.CancelScope()
    terminal = _on_a_terminal()

    async def grace(signum: int) -> None:
        nonlocal code
        await anyio.sleep(daemon.settings.watch.grace_s)
        if daemon.closing_watcher:   # (no work under way: the stop is clean, see below)
            return
        code = 128 + signum
        daemon.emit("cancelling", f"grace period of {daemon.settings.watch.grace_s:g}s over; "
                                  "cancelling (committed work is kept)")
        work.cancel()

    async def on_signals(*, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        nonlocal code
        # SIGHUP: the terminal closed (an ssh session dropped); stopping as for the others,
        # unless it is ignored (`nohup streamrag watch`: the daemon is to outlive the terminal),
        # or there is no terminal to close (said, and ignored: see above).
        # SIGINT likewise: a job a script starts in the background has it ignored, as `index` does.
        taken = [s for s in (signal.SIGINT, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN]
        with anyio.open_signal_receiver(*taken, signal.SIGTERM) as signals:
            task_status.started()
            async for signum in signals:
                name = signal.Signals(signum).name
                if signum == signal.SIGHUP and not terminal:
                    line = _hangup_kept_line()
                    daemon.emit("warning", line, warning="SIGHUP without a terminal", signal=name)
                    continue
                if not daemon.stopping:
                    hung_up = " (the terminal hung up)" if signum == signal.SIGHUP else ""
                    daemon.stop(f"{name} received{hung_up}")
                    tg.start_soon(grace, signum)
                elif daemon.closing_watcher:
                    # The work is over and the index current: cancelling would only have said
                    # "cancelled" and 128 + signal of a clean stop (the watcher's thread ends
                    # when it next looks, cancelled or not: within ``watch_events._STEP_MS``).
                    daemon.emit("stopping", f"second signal ({name}): no work under way; the file "
                                            "watcher is ending")
                else:
                    code = 128 + signum
                    daemon.emit("cancelling", f"second signal ({name}): cancelling now "
                                              "(committed work is kept)")
                    work.cancel()

    async with anyio.create_task_group() as tg:
        await tg.start(on_signals)
        with work:
            await daemon.run(source)
        if work.cancelled_caught:
            daemon.emit("stopped", "cancelled; everything committed is kept and the next start "
                                   "resumes from it")
        tg.cancel_scope.cancel()
    return code or daemon.exit_code


def cmd_watch(args: argparse.Namespace) -> int:
    """``streamrag watch DIR``: initial sync, then keep the index current until a signal."""
    from streamrag.cli import (command_settings, db_for_index, db_given, failures_command_given, file_base_unused,
                               not_documents)

    given = Path(args.dir)
    if (why := not_documents(given, "watch")) is not None:   # (`watch DIR/.streamrag`: an index in it)
        raise StreamragError(f"{shown(given)}: {why}")
    if given.is_file():
        raise StreamragError(f"{given}: is a file; give the folder to watch (e.g. {given.parent})")
    if not given.is_dir():
        raise StreamragError(f"{given}: no such folder; give the folder to watch")
    if (why := unstorable_folder(given)) is not None:
        raise StreamragError(why)
    settings = command_settings(args, given, models_for=("index",))
    # The folder a link names now: a link moved later (current -> release-2) leaves this watch,
    # and its index, on the folder it started with.
    root = given.resolve()
    db = db_for_index(args, settings, given if root == given.absolute() else root)
    indexed = indexed_root(db, root)
    if indexed is not None and indexed != root.resolve():
        raise StreamragError(f"{db} is the index of {indexed}; watch that folder, or give this one "
                             "its own index with --db FILE")
    # Said as `index` says them, but as warning events: with --json, on stdout with the others.
    notes = (file_base_unused(settings),)
    daemon = Daemon(settings, db, root, report=Reporter(json_lines=args.json),
                    reload=lambda: command_settings(args, given, models_for=("index",), quiet=True),
                    warnings=tuple(note for note in notes if note is not None),
                    failures_command=failures_command_given(db, given, root, settings))
    source = None if args.once else watch_folder(daemon.root, settings.watch, daemon.stop_event, keep=daemon.worth_holding,
                                                 renamed_from=daemon._written_on)
    with one_writer(db, f"streamrag watch {shell_word(given)}", given=db_given(args, settings)) as daemon.writer_lock:
        # A model-built index with no endpoint now is refused before the first line: it said
        # "starting ..., offline (NLP extraction, extractive reports)" and then refused to run offline.
        # Read under the lock: an older index is upgraded by this reading, which then says so in
        # the lock (``store.upgrading_note``); before the lock, a reader meanwhile met the write
        # lock alone and waited 30 s for "another streamrag may be upgrading it".
        with reading(db) as store:
            if store is not None:
                from streamrag.pipeline import check_not_downgraded

                check_not_downgraded(settings, store, db)
        return anyio.run(serve, daemon, source)
