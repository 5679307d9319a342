"""The lines ``streamrag watch`` prints, and the words in them.

``Reporter`` prints one status event as ``HH:MM:SS state  message`` on stderr, or as a JSON
object on stdout (``--json``). ``StageLines`` turns a sync's ``Progress`` into one line as
each stage ends. The rest say durations, clock times and a run's LLM calls as the lines give
them. What to say, and when, is the daemon's.
"""

from __future__ import annotations

import errno
import io
import json
import os
import select
import stat
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio

from streamrag.words import counted as _n, number

if TYPE_CHECKING:
    from streamrag.daemon import Daemon
    from streamrag.pipeline import Indexer
    from streamrag.run_progress import Progress

# Pipeline stages as the daemon reports them: a sync shows five states, not eight.
_STATES = {"scanning": "extracting", "extracting": "extracting", "merging": "merging",
           "summarizing": "merging", "clustering": "clustering", "reporting": "reporting",
           "embedding": "publishing", "publishing": "publishing"}


class Reporter:
    """Prints status events: ``HH:MM:SS state  message`` on stderr, or JSON lines on stdout."""

    def __init__(self, *, json_lines: bool = False, stream=None) -> None:
        self.json_lines = json_lines
        self.stream = stream
        self.closed = False   # the output went away (a terminal closed): the work goes on unsaid

    def __call__(self, event: dict[str, Any]) -> None:
        if self.closed:
            return
        if self.json_lines:
            line = json.dumps({"time": round(time.time(), 3), **event}, default=str)
            out = self.stream or sys.stdout
        else:
            line = f"{time.strftime('%H:%M:%S')} {event['state']:<11} {event['message']}"
            out = self.stream or sys.stderr
        try:
            print(line, file=out, flush=True)
        except OSError as e:
            if e.errno != errno.EIO:   # a pipe closed early ends the command (exit 141), as before
                raise
            self.closed = True         # a terminal hung up: the sync under way still finishes

    def check_reader(self) -> None:
        """Raises BrokenPipeError, as the next JSON line would, once the pipe they go to has no
        reader left: a daemon idle on a quiet folder may print nothing for hours. Only the JSON
        lines on stdout end it so: a lost stderr is dropped, not an end (``cli._Stderr``)."""
        if self.json_lines and not self.closed and reader_gone(self.stream or sys.stdout):
            raise BrokenPipeError(errno.EPIPE, "the reader of the --json lines is gone")


def reader_gone(stream) -> bool:
    """Whether ``stream`` is a pipe whose reading end is closed, so that a write to it fails
    (Linux's poll says POLLERR of it; a file or a terminal never says so; Windows has no poll)."""
    try:
        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        poller = select.poll()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):   # (tests capture it)
        return False
    poller.register(fd, 0)   # (POLLERR is said unasked)
    return any(revents & select.POLLERR for _, revents in poller.poll(0))


def clause(text: object) -> str:
    """An error text to embed before ``; ...``: without its own final period."""
    text = str(text).rstrip()
    return text[:-1] if text.endswith(".") and not text.endswith("..") else text


def seconds_said(seconds: float) -> str:
    """A duration as a stage, waiting or idle line gives it: ``0.42s``, ``12.3s``."""
    return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"


def clock(at: float, *, seconds: bool = False) -> str:
    """A wall-clock time as an outage line gives it: ``18:05``, or ``Fri 18:05`` on another day
    (``18:05:09`` with ``seconds``)."""
    same_day = time.localtime(at)[:3] == time.localtime()[:3]
    shown = "%H:%M:%S" if seconds else "%H:%M"
    return time.strftime(shown if same_day else f"%a {shown}", time.localtime(at))


def clocks(first: float, then: float) -> tuple[str, str]:
    """Two wall-clock times a line gives side by side, to the second when they fall in the same
    minute: "stopped answering at 19:45, having answered at 19:45" said nothing."""
    if clock(first) != clock(then):
        return clock(first), clock(then)
    return clock(first, seconds=True), clock(then, seconds=True)


def span(seconds: float) -> str:
    """A duration for a person: ``40 s``, ``12 min``, ``3.5 h``."""
    if seconds < 90:
        return f"{seconds:.3g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def paid(llm_stats: dict) -> int:
    """Calls sent to the endpoint, from a run's per-stage stats (cache hits left out)."""
    return sum(s.get("calls", 0) - s.get("cached", 0) for s in llm_stats.values())


def answered(llm_stats: dict) -> bool:
    """Whether any call of a run's per-stage stats got an answer (an unusable one too; a call
    cancelled as its sync gave up got none)."""
    return any(s.get("calls", 0) - s.get("cached", 0) - s.get("errors", 0) - s.get("cancelled", 0) > 0
               or s.get("unusable", 0) for s in llm_stats.values())


def succeeded(llm_stats: dict) -> bool:
    """Whether any call of a run's per-stage stats was answered usably: what ends an outage, in a
    run under way too (``ends_outage``; ``answered`` counts unusable answers too, and an endpoint
    failing every call, some with unusable answers and the others with HTTP 500s, was said to
    answer again before each retry)."""
    return any(s.get("calls", 0) - s.get("cached", 0) - s.get("errors", 0) - s.get("cancelled", 0) > 0
               for s in llm_stats.values())


def ends_outage(llm_stats: dict) -> bool:
    """Whether the calls of a run over (a sync's, an extraction ahead's: per-stage stats) end an
    outage: some was answered usably (``succeeded``), or every one was answered, unusably too,
    none meeting an endpoint error (an HTTP error, a connection refused, a call given up on or
    cancelled unanswered). An endpoint back with the wrong model behind it answers every call
    unusably: it was said "still answering with errors" after each retry, while its answers
    are the problem, which the retries' own error lines say. Not for a run under way
    (``StageLines``): its HTTP 500 may come after an unusable answer."""
    return succeeded(llm_stats) or answered(llm_stats) and not any(
        s.get("errors", 0) - s.get("unusable", 0) or s.get("cancelled", 0) for s in llm_stats.values())


def calls_said(paid: int, cached: int, llm_stats: dict) -> str:
    """The calls of an update as its idle line says them, those that failed as failed: during an
    outage "4 LLM calls, all failed", not "4 LLM calls" (those the client gave up on, every try
    failing, among them); those cancelled as a sync gave up as cancelled ("9 LLM calls, 3
    failed, 6 cancelled"). An unusable answer whose request was then
    answered (a report cut off at max_tokens, asked again with more room) is said as asked
    again, not failed ("24 LLM calls, 4 answers asked again"): nothing was left out for it, and
    `status` said "failures 0"."""
    again = asked_again(llm_stats)
    failed = calls_failed(llm_stats)
    cancelled = sum(s.get("cancelled", 0) for s in llm_stats.values())
    said = _n(paid + cached, "LLM call") + (f" ({number(cached)} from cache)" if cached else "")
    if failed and not cancelled and not again and failed >= paid:
        return said + (", failed" if paid == 1 else ", all failed")
    return (said + (f", {number(failed)} failed" if failed else "")
            + (f", {_n(again, 'answer')} asked again" if again else "")
            + (f", {number(cancelled)} cancelled" if cancelled else ""))


def asked_again(llm_stats: dict) -> int:
    """Of an update's calls (per-stage stats), the unusable answers a later try answered."""
    return sum(s.get("asked_again", 0) for s in llm_stats.values())


def calls_failed(llm_stats: dict) -> int:
    """Of an update's calls (per-stage stats), those that failed, as the idle line and an error
    line (``llm_errors``) count them: those the client gave up on (``llm.give_up_after_s``)
    included; the answers asked again left nothing out, so they are not among them."""
    return sum(s.get("errors", 0) for s in llm_stats.values()) - asked_again(llm_stats)


def summed(*llm_stats: dict) -> dict[str, dict[str, int]]:
    """Per-stage stats of several runs (a sync and the extraction done ahead of it), summed."""
    out: dict[str, dict[str, int]] = {}
    for stats in llm_stats:
        for stage, counts in stats.items():
            into = out.setdefault(stage, {})
            for k, n in counts.items():
                into[k] = into.get(k, 0) + n
    return out


def _stage_line(reason: str, previous: str, p: Progress, took: float, *,
                why: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """What a sync says as it leaves stage ``previous`` ("": as it begins, for ``reason``, whose
    counts are ``why``) after ``took`` seconds, and the line's fields."""
    c, t = p.counts, p.totals
    if not previous:
        return f"{reason}: scanning {_n(t['files'], 'file')}", dict(**(why or {}), scanned=t["files"])
    if previous == "extracting":
        return (f"extracting done: {_n(c['chunks_extracted'], 'chunk')} extracted, "
                f"{number(c['chunks_reused'])} reused ({seconds_said(took)})",
                dict(chunks_extracted=c["chunks_extracted"], chunks_reused=c["chunks_reused"],
                     took_s=round(took, 3)))
    if previous == "merging":
        return (f"merging done: {_n(t['summaries'], 'description')} summarized ({seconds_said(took)})",
                dict(summaries=t["summaries"], took_s=round(took, 3)))
    if previous == "reporting":
        written = c["reports_written"]
        return (f"reporting done: {_n(written, 'report')} written, "
                f"{number(c['reports_done'] - written)} kept ({seconds_said(took)})",
                dict(reports=c["reports_done"], reports_generated=written,
                     reports_kept=c["reports_done"] - written, took_s=round(took, 3)))
    return f"{previous} done ({seconds_said(took)})", dict(took_s=round(took, 3))


class StageLines:
    """The listener of a sync's ``Progress``: one line as each stage ends, none while the sync
    is ``quiet`` (any during an outage); the first usable answer the endpoint gives ends both, and says
    the opening line the sync kept quiet."""

    def __init__(self, daemon: Daemon, indexer: Indexer, reason: str, why: dict[str, Any], *,
                 quiet: bool) -> None:
        self.daemon = daemon
        self.indexer = indexer
        self.reason = reason
        self.why = why
        self.quiet = quiet
        self.state = ""
        self.since = anyio.current_time()

    def __call__(self, p: Progress) -> None:
        llm = self.indexer.llm
        if self.quiet and llm is not None and succeeded(llm.stats):
            self.quiet = False   # it answers again: said now, and this sync's lines from here on
            self.daemon.outage.recovered()
            if self.state:   # begun silent: its opening line first, which the next "... done" ends
                message, fields = _stage_line(self.reason, "", p, 0.0, why=self.why)
                self.daemon.emit(self.state, message, **fields)
        if p.stage == "scanning" and "files" not in p.totals:
            return   # a failure met while scanning (a folder it cannot list) comes before the count
        state = _STATES.get(p.stage, p.stage)
        if state == self.state:
            return
        now = anyio.current_time()
        took = now - self.since
        previous = self.state
        self.state, self.since = state, now
        if self.quiet:
            return
        message, fields = _stage_line(self.reason, previous, p, took, why=self.why)
        self.daemon.emit(state, message, **fields)

