"""Every call of the model client, counted and recorded.

A call, served from the cache or not, failed or not, is counted in ``stats`` (per stage, for
progress display; its token counts are what was paid for: a cache hit counts in ``cached`` only)
and becomes one ``llm_calls`` row. The row is written through the writer (or, without one,
straight to a writable store) in one transaction with the cache puts the call brings
(``AnswerCache.put_answer``), committed before the call returns: a crash right after never pays
for an answer twice. Without a store only the counts are kept.

A call cancelled after its first try began (a run that gave up, Ctrl-C, a task group cancelled)
is one too: counted in ``cancelled`` (not ``errors``: the model did not fail it), with the
tokens paid for all the same (the prompt of a request that went out, an answer streamed in
part; an answer not streamed and not read is billed too, of a length unknown: its row says it is
not counted), and noted in memory at once, without awaiting anything, so it can neither hang nor be cut
short by the cancellation it comes from. Its row is written with the next call's, in that call's
transaction, or by ``flush`` when the client closes. A call the client itself ended, every try of
the endpoint failing (``endpoint_health.GaveUp``), is noted so too, but as failed: its tries
failed, and the error lines, the idle line and ``status`` all count it in ``errors``.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable

import anyio

from streamrag.errors import StoreError, StreamragError
from streamrag.store import Store
from streamrag.words import counted
from streamrag.writer import Writer

log = logging.getLogger(__name__)

# What a write of the index fails with that may be no bug (``unwritten`` tells): another
# program's lock past the wait (``StoreBusyError``), a full disk ("database or disk is full"), a
# read-only index ("attempt to write a readonly database"), an I/O error: sqlite3's, or a
# ``StoreError`` that says it.
UNWRITTEN = (StoreError, sqlite3.OperationalError)
# ... SQLite's of them, by name (``sqlite_errorname``; its extended ones too, SQLITE_IOERR_WRITE,
# SQLITE_READONLY_DBMOVED). Its others are bugs (a column a bad migration left out: SQLITE_ERROR,
# "no such column"), raised as they are, as the CLI raises them (``cli._database_failed``): one
# was kept as a row for later and said as a warning at the client's close.
_UNWRITABLE = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_BUSY", "SQLITE_LOCKED")
UNUSABLE = "unusable answer"  # how the llm_calls error of an answer the caller could not use begins
CANCELLED = "cancelled"       # ... and the start of a cancelled call's (its row has cancelled = 1)
# Runs in a row an element's summary answers (or a community's report answers) may be unusable
# before it is no longer asked (``GraphState.unusable``, ``report_unusable``). Here, not in
# graph_state, so that ``status`` (every command's parser) does not import the graph's numpy.
UNUSABLE_RUNS = 3
# errors: calls that failed; unusable: those of them that got an answer the caller could not use;
# asked_again: those unusable answers whose request was then answered usably (a report cut off at
# max_tokens, asked again with more room): the call failed, its item did not;
# cancelled: calls stopped by their caller once a try of theirs began (no failure of the model's);
# gave_up: of the errors, the calls the client ended, every try of the endpoint failing
# (``endpoint_health``): failed, not cancelled (their rows too), as every line and `status` say them
STAT_FIELDS = ("calls", "cached", "prompt_tokens", "completion_tokens", "errors", "unusable", "asked_again",
               "cancelled", "gave_up")


class CallLog:
    """The counts and rows of one client's calls."""

    def __init__(self, store: Store | None, writer: Writer | None) -> None:
        self.store = store
        self.writer = writer
        self._stats: dict[str, dict[str, int]] = {}
        self._unwritten: list[dict] = []   # rows of calls cancelled (or given up), not written yet

    @property
    def stats(self) -> dict[str, dict[str, int]]:
        """Per stage: calls, cached, prompt_tokens, completion_tokens (paid), errors, unusable,
        asked_again, cancelled, gave_up (``STAT_FIELDS``)."""
        return {stage: dict(counts) for stage, counts in self._stats.items()}

    async def record(self, row: dict, prompt_tokens: int, completion_tokens: int,
                     latency_ms: float, *, cached: bool, error: str | None = None, unusable: bool = False,
                     shared: bool = False, apart: bool = False,
                     put: Callable[[Store], None] | None = None) -> None:
        """Counts a call in ``stats`` and persists its ``row`` (what was asked: run_id, stage,
        model, prompt, prompt_version, cache_key), after ``put`` in the same transaction.
        ``unusable``: its ``error`` is of an answer the caller could not use, said by the caller,
        not read from the error's words: a content filter's stop is an answer too, whose words
        are no "unusable answer ...", and was counted as an endpoint error (a watch's outage
        kept open by it, ``watch_lines.ends_outage``). Its row's error is made to begin with
        ``UNUSABLE`` (``unusable_error``), which `status` and the estimate count such rows by.
        ``shared``: the error (an unusable answer, or a request the endpoint refused) was an
        identical call's, this one waited on it: failed for its caller all the same (its item
        too), but its row is cached, as a waiter's of a usable answer is (it asked nothing), so
        that `status` and the estimate, which count unusable rows not cached, count one stop of
        N identical calls once, not N times. It is
        not counted in ``stats`` at all (nor by `status`: ``index_rows._USAGE_OF_GROUPS``): the cache
        answered it nothing, and it made no call of its own to fail; counted as an error, each
        waiter was an endpoint error to the watch's lines (errors beyond the unusable ones:
        ``watch_lines.calls_failed``), and the run's end line said 3 unusable of one stop.
        A failed call's row the index could not take (``UNWRITTEN``: another program's lock, a full
        disk, a read-only index) is written with the next: its caller raises the call's error, not
        the index's.
        ``apart``: a check of the endpoint that failed and refused nothing (``LLMClient.
        _refusal_by_name``: no answer, a page, a 5xx), no call of the run's work: it is counted in
        no ``stats`` (a watch's idle line said "1 failed" of it beside every work call answered, and
        a run with items failed for other reasons took it for an endpoint down), and its row says
        so (``llm_calls.apart``), for `status` to count it as they do. A check the model's refusal
        failed is a failed call of its stage, apart from nothing: it stops the run."""
        counts = {} if apart else self._stats.setdefault(row["stage"], dict.fromkeys(STAT_FIELDS, 0))
        if not (shared or apart):
            counts["calls"] += 1
            if error is not None:
                counts["errors"] += 1
                if unusable:
                    counts["unusable"] += 1
            if cached:
                counts["cached"] += 1
            else:  # paid for (a failed request reports no tokens)
                counts["prompt_tokens"] += prompt_tokens
                counts["completion_tokens"] += completion_tokens
        if self.store is None:
            return
        record = {**row, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "latency_ms": round(latency_ms, 3), "cached": int(cached or shared), "apart": int(apart),
                  "error": unusable_error(error) if unusable and error is not None else error}
        try:
            await self._write(self._take_unwritten(), [record], put)
        except UNWRITTEN as e:
            if error is None or not unwritten(e):
                raise   # (an answer's row, and the cache put it brings: the caller's to know; a bug)
            # A failed call's row is bookkeeping: the error it records (a refusal the user must act
            # on) is what its caller raises, not the index's lock, a full disk or a read-only index,
            # which replaced it. Kept, as a cancelled call's row is, for the next write (``flush``:
            # said there if it fails too; the run's own writes say a disk that stays full).
            self._unwritten.append({**record, "created_at": time.time()})
            log.debug("the row of a failed %s call is kept for the next write: %s", row["stage"], e)

    def asked_again(self, stage: str, answers: int) -> None:
        """Counts ``answers`` unusable answers (recorded as errors) whose request a later try
        answered usably."""
        counts = self._stats.setdefault(stage, dict.fromkeys(STAT_FIELDS, 0))
        counts["asked_again"] += answers

    def cancelled(self, row: dict, tries: int, latency_ms: float,
                  prompt_tokens: int = 0, completion_tokens: int = 0, *, why: str | None = None,
                  unread: bool = False) -> None:
        """Counts a call its caller cancelled after ``tries`` tries, none answered whole, and
        notes its row for the next write (``record``, ``flush``). The tokens are those paid for
        all the same (counted here: an answer streamed in part, and its prompt). ``why``: who
        stopped it, when not its caller: a client that gave up on its endpoint, whose call failed
        (``errors`` and ``gave_up``, its row an error, not cancelled: an idle line said "1
        cancelled" and `status` "errors 0" of calls the error line counted as failed).
        ``unread``: its request went out for an answer that comes whole (not streamed), none of
        it read: the answer a provider goes on to write is billed, and counted in no row, which
        says so. Awaits nothing: it runs where a cancellation is being delivered."""
        counts = self._stats.setdefault(row["stage"], dict.fromkeys(STAT_FIELDS, 0))
        counts["calls"] += 1
        counts["cancelled" if why is None else "errors"] += 1
        if why is not None:
            counts["gave_up"] += 1
        counts["prompt_tokens"] += prompt_tokens
        counts["completion_tokens"] += completion_tokens
        if self.store is None:
            return
        answered = ("none answered" if not prompt_tokens
                    else f"its answer cut short after {counted(completion_tokens, 'token')}" if completion_tokens
                    else ("its request sent, its answer not read (its prompt is counted; the answer a "
                          "provider goes on to write is billed too, and not counted)") if unread
                    else "its request sent, no answer begun")
        self._unwritten.append({
            **row, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "latency_ms": round(latency_ms, 3), "cached": 0, "cancelled": int(why is None), "created_at": time.time(),
            "error": f"{CANCELLED if why is None else 'ended'} after {counted(tries, 'try')}, "
                     f"{answered}: {why or 'its caller stopped waiting (a run that gave up, or was stopped)'}"})

    async def flush(self) -> None:
        """Writes the rows ``cancelled`` noted (and ``record``'s of failed calls a busy index kept
        out) and no call's write took along (the client closes). Shielded: it runs as a run is being stopped too. A write that fails is said."""
        rows = self._take_unwritten()
        if not rows:
            return
        with anyio.CancelScope(shield=True):
            try:
                await self._write(rows, [], None)
            except (StreamragError, sqlite3.OperationalError) as e:
                if not (isinstance(e, StreamragError) or unwritten(e)):
                    raise   # (a bug: ``unwritten``)
                log.warning("%s (cancelled, or failed as the index could not be written) could not be "
                            "recorded: %s", counted(len(rows), "LLM call"), e)

    def _take_unwritten(self) -> list[dict]:
        rows, self._unwritten = self._unwritten, []
        return rows

    async def _write(self, noted: list[dict], rows: list[dict], put: Callable[[Store], None] | None) -> None:
        """Writes the rows ``noted`` (``cancelled``'s) and ``rows``, after ``put``, in one
        transaction; those ``noted`` are noted again when it fails, for the next write."""
        def persist(store: Store) -> None:
            if put is not None:
                put(store)
            for record in (*noted, *rows):
                store.record_call(record)

        try:
            if self.writer is not None:
                await self.writer.run(persist)
            elif self.store is not None and not self.store.readonly:
                with self.store.transaction():
                    persist(self.store)
        except Exception:   # (a cancelled wait still had them committed: ``Writer.run``)
            self._unwritten[:0] = noted
            raise


def unwritten(e: BaseException) -> bool:
    """Whether ``e`` (one of ``UNWRITTEN``) is the index not taking a write, no bug: a
    ``StoreError``, or SQLite's error of a lock, a full disk, a read-only index, an I/O error."""
    if isinstance(e, StoreError):
        return True
    name = getattr(e, "sqlite_errorname", None) or ""
    return isinstance(e, sqlite3.OperationalError) and any(
        name == kind or name.startswith(f"{kind}_") for kind in _UNWRITABLE)


def unusable_error(error: str) -> str:
    """The ``llm_calls`` error of an answer its caller could not use: ``error``, begun with
    ``UNUSABLE`` when its words do not (a content filter's stop), so that the rows `status` and
    the estimate count as unusable (``index_rows``) are those the client counted so."""
    return error if error.startswith(UNUSABLE) else f"{UNUSABLE}: {error}"


__all__ = ["CallLog", "CANCELLED", "STAT_FIELDS", "UNUSABLE", "UNUSABLE_RUNS", "UNWRITTEN", "unusable_error",
           "unwritten"]
