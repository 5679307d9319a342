"""What an index holds and what it cost: the numbers behind ``streamrag status``."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from streamrag import index_rows
from streamrag.call_log import UNUSABLE_RUNS
from streamrag.store import Store, process_gone, process_stamp, writer_at_work, writer_said, writers_lock
from streamrag.terminal import flat
from streamrag.words import counted, number

LLM_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "cached", "errors", "cancelled")
_LIST_THEM = " (list them with --failures)"   # said once, on the first line with items to list
# What "recorded over all runs" counts beside the items failing now: each update's failures, an
# item fixed since (indexed, or its file removed) as well: "5" read as five things still wrong.
_SINCE = ", including any since indexed or removed"

FAILURES = "streamrag status --failures"
"""The command that lists what failed, run in the indexed folder; a command's lines name the one
that reads its index from where it ran (``cli.failures_command``: `status --failures notes`).
Written here alone: ``pipeline``, ``cli`` and ``daemon`` default to it, and ``cli`` builds the
others from it. Here, not in ``pipeline``: ask's and export's lines of an index with nothing to
read name it, and importing the pipeline for it made those errors 0.15 s slower."""


def llm_summary(by_stage: Mapping[str, Mapping[str, int | None]]) -> dict:
    """The ``llm`` object of every ``--json`` output (index, ask, status, index --estimate).

    ``by_stage`` maps a stage to its counts (an LLM client's ``stats``, or rows summed from
    ``llm_calls``); missing counts are 0 and other keys are left out. Every key is always
    there: ``{"calls", "prompt_tokens", "completion_tokens", "cached", "errors", "cancelled",
    "by_stage": {stage: {the same six}}}``. ``calls`` counts every call, cache hits, failed and
    cancelled ones included; ``cached`` those answered from the cache; the token counts are what
    was paid for (a cache hit's tokens are not counted); ``errors`` the calls that failed (an
    unusable answer asked for again is one); ``cancelled`` those stopped by their caller once a
    try had begun (a run that gave up, Ctrl-C), none answered: no failure of the model's."""
    stages = {stage: {k: int(counts.get(k) or 0) for k in LLM_FIELDS}
              for stage, counts in by_stage.items()}
    total = {k: sum(s[k] for s in stages.values()) for k in LLM_FIELDS}
    return {**total, "by_stage": stages}


def _extractive_why(store: Store) -> dict:
    """Why the index's extractive reports are extractive: ``reports_offline`` (its extractor is
    the offline one), ``report_min_members`` (the one it was published with; None unknown),
    ``extractive_small_reports``, those of communities of fewer members, and
    ``extractive_unfitted_reports``, those of communities no line of whose context fitted
    index.report_max_input_tokens: asked nothing (``ReportStage.report``), their context key is
    their report's, where a stand-in for a failed answer keeps its context's."""
    offline = index_rows.built_offline(store)
    said = store.get_meta("report_min_members") or ""
    least = int(said) if said.isdigit() else None
    small = unfitted = 0
    if not offline and least is not None:
        # (the communities' own size, not a count of their members' rows: ~10x faster)
        for row in store.query(
                "SELECT c.size < ? AS small, c.context_key = c.report_key AS unasked, count(DISTINCT c.report_key) AS n "
                "FROM communities c JOIN reports r ON r.key = c.report_key WHERE r.extractive = 1 GROUP BY 1, 2",
                (least,)):
            if row["small"]:
                small += row["n"]
            elif row["unasked"]:
                unfitted += row["n"]
    return {"reports_offline": offline, "report_min_members": least, "extractive_small_reports": small,
            "extractive_unfitted_reports": unfitted}


def _reports_line(info: dict) -> str:
    """The reports line: how many, how many extractive, and why those are (``_extractive_why``):
    "reports 10 (7 extractive)" left a newcomer wondering what was wrong with seven."""
    n, extractive = info["reports"], info["extractive_reports"]
    line = f"  reports        {number(n)} ({number(extractive)} extractive"
    if not extractive:
        return line + ")"
    if info.get("reports_offline"):
        return line + ": built offline, no LLM wrote them)" if extractive == n else line + ")"
    least, small = info.get("report_min_members"), info.get("extractive_small_reports", 0)
    unfitted = info.get("extractive_unfitted_reports", 0)
    why = []

    def some(k: int) -> str:   # ("" when they are all the extractive ones)
        return "" if k == extractive else f"{number(k)} "

    if small:
        why.append(f"{some(small)}for communities of fewer than {least} members, index.report_min_members")
    if unfitted:
        # (said "standing in for the model's failed or unusable answers": no model was asked)
        why.append(f"{some(unfitted)}for communities none of whose lines fit index.report_max_input_tokens "
                   "(no LLM call)")
    if extractive > small + unfitted and least is not None:
        why.append(f"{some(extractive - small - unfitted)}standing in for the model's failed or unusable answers")
    return line + (": " + "; ".join(why) if why else "") + ")"


def gather_status(store: Store, *, failures: bool = False, failure_limit: int = 50,
                  report_budget: int | None = None, claimless: str | None = None) -> dict:
    """Counts, LLM usage by stage and model, cache hit rate and recent failures, as one dict.
    ``report_budget``: the settings' index.report_max_output_tokens, which the next run gives
    reports: one settled with another is not said settled (it is asked again), none with any.
    ``claimless``: the settings' ``extractor.claimless_key`` (None: claims off, or offline), the
    extractor of the chunks published without their claims, their claims calls failed."""
    with store.snapshot():
        count = lambda table: store.scalar(f"SELECT count(*) FROM {table}")  # noqa: E731
        levels = {str(r["level"]): r["n"] for r in store.query(
            "SELECT level, count(*) AS n FROM communities GROUP BY level ORDER BY level")}
        usage = index_rows.usage_rows(store)
        per_stage: dict[str, dict[str, int]] = {}
        for r in usage:   # the stage's calls over all its models
            s = per_stage.setdefault(r["stage"], dict.fromkeys(LLM_FIELDS, 0))
            for k in LLM_FIELDS:
                s[k] += r[k] or 0
        llm = llm_summary(per_stage)
        last_run = last_update(store)
        settled = index_rows.settled(store, UNUSABLE_RUNS, report_budget)
        # (what the last update settled is no failure of it, whatever the settings are now)
        failed = update_failures(store, last_run, settled if report_budget is None
                                 else index_rows.settled(store, UNUSABLE_RUNS))
        runs = failed.runs
        # Of a last update whose row says "running" (under way, or killed: told below), the new or
        # changed files it was taking (``index_rows.left_by_killed``), and the chunks of its
        # update that failed which no published document holds: of those files, counted as them
        # if it was killed before it published (as ``unindexed_chunks`` of one that failed).
        taking = (index_rows.left_by_killed(store, last_run["id"])
                  if last_run is not None and last_run["status"] == "running" else None)
        taken_chunks = set().union(*(index_rows.failed_chunks(store, r) for r in runs)) if taking else set()
        queries = (store.scalar("SELECT count(*) FROM runs WHERE command = 'ask' AND status = 'ok'")
                   + int(store.get_meta("archived_queries") or 0))   # (index_rows.prune)
        published = store.get_meta("published_at", "")
        # What holds the writer lock, read once (after last_run, for killed below): any holder,
        # not only one whose line names a streamrag command (a job holding it under a name of
        # its own, `one_writer(db, "nightly job")`, is at work too).
        holder = writer_at_work(store.path)
        info = {
            "version": store.version,
            "published_at": float(published or 0) or None,   # None: never published
            "documents": count("documents"),
            # the chunks the graph is built from, as `index` counts them (a chunk whose extraction
            # failed is a failure, not part of the index)
            "chunks": count("live_chunks"),
            "entities": count("entities"),
            "relationships": count("relationships"),
            "claims": count("claims"),
            # of "chunks", those published without their claims (their claims calls failed; the
            # next update asks for them again): however many updates ago, not the last one's alone
            "chunks_without_claims": index_rows.published_without_claims(store, claimless),
            "communities": count("communities"),
            "communities_by_level": levels,
            "reports": store.scalar("SELECT count(DISTINCT report_key) FROM communities"),
            "extractive_reports": store.scalar(
                "SELECT count(*) FROM reports WHERE extractive = 1 AND key IN (SELECT report_key FROM communities)"),
            # ... why: the index was built offline, or (by a model) the communities below the
            # index.report_min_members it was published with get one, and the others stand in
            # for model answers that failed or were unusable
            **_extractive_why(store),
            "llm": llm,            # every run's calls: index, watch and ask
            "llm_by_model": usage,  # the same calls by stage and model
            # the failed checks of the endpoint that refused nothing (a check of a model by name
            # that got no answer, a page, a 5xx): counted in no call above, as index and watch
            # count them (``CallLog.record``'s apart); a check the model's refusal failed is one
            # of model_check's errors (it stops the run)
            "checks_failed": index_rows.checks_apart(store),
            "cache_hit_rate": round(llm["cached"] / llm["calls"], 3) if llm["calls"] else None,
            # of llm's errors, the unusable answers whose request a later try answered (as
            # watch's idle line says them)
            "asked_again": index_rows.asked_again(store),
            # ... and the answers their caller could not use (a content filter's stop too,
            # ``call_log.unusable_error``), each once: identical calls that waited on one stop
            # count it once, here as in the client's ``stats`` (``CallLog.record``'s shared)
            "unusable": index_rows.unusable_calls(store),
            "failures_total": index_rows.failures_recorded(store) + int(store.get_meta("archived_failures") or 0),
            "failures_last_run": failed.count,
            # ... of them, the chunks whose claims calls failed, in the version without their claims
            "claims_failed_last_run": index_rows.published_without_claims(store, claimless, *runs) if runs else 0,
            # items no longer asked for, their answers unusable on UNUSABLE_RUNS runs in a row
            # or more (found from counts, not failures: the run that settled them recorded one,
            # a later run none); by those runs ({"3": 5, "4": 1}), for the line that says them
            "settled": len(settled),
            "settled_by_runs": _by_runs(settled),
            "unreadable_last_run": index_rows.failures_of(store, *runs, stage="load"),
            # the new or changed files a last update that failed or was interrupted left
            # unindexed (it published nothing): a sync given up in an outage recorded only the chunks it waited for
            "not_indexed_last_run": failed.not_indexed,
            # ... the run that left them: the last update's, or, a retry sync under way, the run
            # of the update before it that ended (``missing_since``), said by its id
            "not_indexed_by": missing_since(store, last_run) if failed.not_indexed else None,
            # ... by what is true of them (``UNUSABLE_KINDS``), for the line that says them
            "unreadable_by_kind": unreadable_by_kind(store, *runs),
            # ... of its "unusable" ones, the files over index.max_file_mb (``errors.SAID_AS``)
            "too_big_last_run": index_rows.too_big_failures(store, *runs),
            "last_run": last_run,
            # whether an index or watch is at work now: last_run cannot say (a run killed with
            # -9 stays "running"; while watch runs, last_run is its last sync).
            "writer": writer_said(holder),
            "queries": queries,
            # the asks under way now, as their processes tell: an ask takes no lock, and one
            # killed with -9 (or the machine gone down) left its row "running" for good
            "asking": asking(store),
            "size": _sizes(store),
        }
        if failures:
            # What failed in the last update, once per item (a daemon's retries repeat them),
            # but what it settled (said settled below);
            # the table keeps every run's, which failures_total counts, once per item and update
            # (a file that cannot be read, once until it changes: index_rows.failures_recorded).
            # (split below, once it is known whether the last update was killed)
            listed = index_rows.run_failures(store, failure_limit + len(failed.of_unindexed | taken_chunks), *runs,
                                             leaving=failed.settled)
            # ... and what is no longer asked for, as long as it is so, and why (named only
            # when listed: on a large index that is most of what status reads).
            info["settled_items"] = index_rows.settled_items(store, settled[:failure_limit])
    if last_run is not None:
        last_run["killed"] = _killed(store, last_run, holder)
        # (an `index` of a big file is two runs: its other files published first, ``Indexer._lead``)
        lead = index_rows.lead_of(store, last_run["id"])
        last_run["lead"] = None if lead is None else {"id": lead[0], "version": lead[1]}
    # A last update killed (-9, the machine gone down) before it published recorded no end, nor
    # the files it left unindexed there (``not_indexed_last_run``), and status said none. A run
    # records those it is taking as it starts on them (``runs.taking``): they are said as a
    # failed run's are; of a row that records none, only that the next update takes them.
    info["killed_before_publishing"] = bool(last_run and last_run["killed"]
                                            and (info["published_at"] or 0) < last_run["started_at"])
    of_files, named = failed.of_unindexed, failed.not_indexed_files
    info["killed_taking_recorded"] = info["killed_before_publishing"] and taking is not None
    if info["killed_before_publishing"] and taking is not None:
        info["not_indexed_last_run"], named = taking
        info["failures_last_run"] -= len(taken_chunks - of_files)
        of_files = of_files | taken_chunks
    if failures:
        info["failures"] = [f for f in listed if (f["stage"], f["item"]) not in of_files][:failure_limit]
        # ... those of the files it left unindexed: why they were (said with them)
        info["not_indexed_failures"] = [f for f in listed if (f["stage"], f["item"]) in of_files][:failure_limit]
        info["not_indexed_files"] = named[:failure_limit]
    # The last update's run has not ended (under way, or killed before it did): its failures are
    # those it met so far, and failures_total leaves out its failed chunks the index lacks (its
    # end decides, ``index_rows.failures_recorded``): "2 in the last update (1 recorded over all
    # runs)" read as a contradiction.
    info["failures_under_way"] = bool(last_run and last_run["status"] == "running")
    return info


def asking(store: Store) -> list[dict]:
    """The ``ask`` runs under way now: ``[{"pid": 12, "run": "ask-..."}]``, the oldest first.
    Those whose rows say "running" of a process that is gone are not (killed); nor are those
    of an older streamrag, whose rows name no process: that cannot be told of them."""
    return [{"pid": r["pid"], "run": r["id"]} for r in index_rows.asks_running(store)
            if process_gone(r["pid"], r["process"]) is False]


def _killed(store: Store, run: dict, writer: str | None) -> bool | None:
    """Whether ``run``, its row read as "running", stopped without finishing (killed with -9,
    the machine gone down); None where that cannot be told.

    The process its row names tells first (``process_gone``, as of an ask's): alive as it was
    when the run began, the run is under way; gone, it was killed. A run of the Python API
    (``pipeline.sync`` called without ``store.one_writer``) holds no writer lock, and one under
    way was said killed while nothing held it. The process tells too where writers hold no lock
    (no ``flock``: Windows), and beside a ``writer`` that holds it: another process's, a watch
    starting or an index reading its folder before its own row is written (the run killed
    before them was said "running" beside "writing now" of another pid).

    A row of an older streamrag names no process. An index, watch or demo takes the writer lock
    before its run row is written and lets it go only after the row says how it ended, and the
    lock goes with its process however it ends: so such a row still "running" (read again now,
    outside the snapshot: it may have ended since) after no process was seen holding the lock is
    of a process that is gone; beside a writer it is said running, as before, and where writers
    hold no lock it cannot be told.

    Where the process's start cannot be read (no /proc: macOS), a live pid may be another
    process's, given the pid after the run's was killed: such a run was said under way as long as
    that other process lived. There the lock decides: held by the run's pid, the run is under
    way; by another process, the run's own (an index, watch or demo holds it while it runs) is
    gone; by none, it is gone or is a run of the Python API, which holds none: not told. Whether
    it is held is asked of the kernel there too (``writer_at_work``: F_GETLK on macOS), not read
    from a live pid in its file: the killed run's line, its pid another's, named it the holder."""
    if run["status"] != "running":
        return False
    pid, stamp = index_rows.run_process(store, run["id"])
    gone = process_gone(pid, stamp)
    if gone is False and not (stamp and process_stamp(pid)) and writers_lock():
        if writer is None:
            return None
        if _holder_pid(writer) == pid:
            return False
        gone = True
    if gone is False:
        return False
    if gone is None and (writer is not None or not writers_lock()):
        return False if writer is not None else None
    return index_rows.run_status(store, run["id"]) == "running"


def _holder_pid(holder: str) -> int | None:
    """The pid a writer lock's holder line names (``pid 12: streamrag watch notes``), if any."""
    found = re.match(r"pid (\d+):", holder)
    return int(found[1]) if found else None


def _by_runs(settled: list[dict]) -> dict[str, int]:
    """The settled items by the runs in a row their answers were unusable: ``{"3": 5, "4": 1}``."""
    counts = Counter(f["runs"] for f in settled)
    return {str(runs): counts[runs] for runs in sorted(counts)}


def last_update(store: Store, *, leaving: str | None = None) -> dict | None:
    """The newest run that changed the index (not a query, not a daemon's extraction pass), but
    run ``leaving`` (a daemon's sync under way, whose failures grow as it goes)."""
    rows = store.query("SELECT id, command, started_at, finished_at, status FROM runs "
                       "WHERE command NOT IN ('ask', 'watch:extract') AND id IS NOT ? "
                       "ORDER BY started_at DESC LIMIT 1", (leaving,))
    return rows[0] if rows else None


def unfinished_update(store: Store, run: dict | None) -> str | None:
    """The update a watch left unfinished, which the next watch goes on with: the first run of
    the last update (``run``, ``last_update``) when that was a watch's sync (``runs.update_of``)
    that left items missing (failed items; files that could not be read are no work left) or did
    not finish (failed, interrupted, killed); None when it finished, or was another command's
    (``index`` begins an update of its own at every run). A watch restarted during an outage
    began a new update, and `status` counted each item its syncs retry again."""
    if run is None or run["command"] != "watch":
        return None
    if run["status"] == "ok" and not left_missing(store, run):
        return None
    return index_rows.update_of(store, run["id"])


def left_missing(store: Store, run: dict | None) -> int:
    """The failed items the last update (``run``, ``last_update``) published without
    (``failures_said``, but files that could not be read: no work left), which a watch that goes
    on with it (``unfinished_update``) retries; 0 when its last run published nothing: its
    failures are of the files it left unindexed (``not_indexed_last_run``)."""
    if run is None or run["status"] != "ok":
        return 0
    return max(0, failures_said(store, run) - index_rows.failures_of(store, run["id"], stage="load"))


def missing_since(store: Store, run: dict | None) -> dict | None:
    """While a daemon's sync that goes on with an update (``runs.update_of``: it retries what the
    syncs before it left missing) is under way, or was killed, the update's run before it that
    ended (``index_rows.ended_before``), whose failures the update is missing still (the published
    version is that run's until the sync publishes); None otherwise. The sync records the items
    it retries only as it meets them: `status` during one said "failures 0", then 1, of an
    update missing 2. (Once it has published, it has met them all: an item it got is no longer
    missing, though its row says "running" until it is closed.)"""
    if run is None or run["status"] != "running":
        return None
    if float(store.get_meta("published_at") or 0) >= run["started_at"]:
        return None
    return index_rows.ended_before(store, run["id"])


def failure_runs(store: Store, run: dict | None) -> list[str]:
    """The runs whose failures `status` counts as ``run``'s: itself, and the update's run before
    it while it is under way (``missing_since``); none without a run."""
    return _run_ids(run, missing_since(store, run))


def _run_ids(run: dict | None, before: dict | None) -> list[str]:
    """The ids of ``run`` and of the run ``before`` it (``missing_since``), those that are None left out."""
    return [r["id"] for r in (run, before) if r is not None]


def settled_by(store: Store, settled: list[dict], *run_ids: str) -> set[tuple[str, str]]:
    """Of the ``settled`` items (``index_rows.settled``), the ``(stage, item)`` that the run
    (``failure_runs``) settled: it recorded them as failed, but they are said settled, not among
    its failures (it is not to be run again for them)."""
    if not run_ids:
        return set()
    return index_rows.failed_in(store, {(f["stage"], f["item"]) for f in settled}, *run_ids)


class UpdateFailures(NamedTuple):
    """What an update failed to do, as ``status`` says it (``update_failures``)."""
    runs: list[str]                        # the runs whose failures are its own (``failure_runs``)
    settled: set[tuple[str, str]]          # of them, the (stage, item) it settled (``settled_by``)
    not_indexed: int                       # the new or changed files it left unindexed ...
    not_indexed_files: list[str]           # ... named (``index_rows.not_indexed``)
    of_unindexed: set[tuple[str, str]]     # the failed chunks of those files (``unindexed_chunks``)
    count: int                             # the items that failed, each once (``failures_last_run``)


def update_failures(store: Store, run: dict | None, settled: list[dict]) -> UpdateFailures:
    """The failures of the update of ``run`` (``last_update``): of it, and of the update's run
    before it while a retry sync is under way (``missing_since``). Counted each once, those it
    settled (of ``settled``, ``index_rows.settled``) left out, and the chunks of the files it left
    unindexed too: they count once, as those files."""
    before = missing_since(store, run)
    runs = _run_ids(run, before)   # (``failure_runs``, ``before`` kept for the files it left)
    ended = before or run
    unindexed, files, left = index_rows.not_indexed(store, ended["id"]) if ended else (0, [], set())
    settled_now = settled_by(store, settled, *runs)
    of_unindexed = unindexed_chunks(store, run, before, left)
    count = index_rows.failures_of(store, *runs) - len(settled_now) - len(of_unindexed)
    return UpdateFailures(runs, settled_now, unindexed, files, of_unindexed, count)


def failures_said(store: Store, run: dict | None) -> int:
    """Items that failed in ``run`` as ``status`` counts them (``failures_last_run``)."""
    return update_failures(store, run, index_rows.settled(store, UNUSABLE_RUNS)).count


def unindexed_chunks(store: Store, run: dict | None, before: dict | None,
                     left: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The ``(stage, item)`` of the chunks ``run`` failed to extract when it published nothing and
    left files unindexed (``not_indexed_last_run``): chunks of those files, which count once, as
    files. A restart during an outage said "failures 2 in the last update" beside "not indexed 5
    new or changed files", two of the five counted twice. Of a retry sync under way
    (``missing_since``), those of the files the update's run before it left unindexed, and the
    chunks the sync waited for that no published document holds (they are of those files, as
    its own stats name them if it publishes nothing too). ``before``: ``missing_since`` of
    ``run``; ``left``: the chunks ``index_rows.not_indexed`` gives of it, or of ``before`` if any
    (the run that ended)."""
    if run is None or run["status"] == "ok" or (before is not None and before["status"] == "ok"):
        return set()
    return left if before is None else left | index_rows.failed_chunks(store, run["id"])


# What a file or folder an update could not use is (``errors.InputError.kind``, "unlisted" for
# a folder), in the order the lines say them.
UNUSABLE_KINDS = ("unreadable", "not_text", "unusable", "unlisted")


def unreadable_by_kind(store: Store, *run_ids: str) -> dict[str, int]:
    """``unreadable_last_run`` by kind (of the runs ``failure_runs`` gives): every one of
    ``UNUSABLE_KINDS``, 0 when none is."""
    found = index_rows.load_failures_by_kind(store, *run_ids) if run_ids else {}
    return {kind: found.get(kind, 0) for kind in UNUSABLE_KINDS}


def unusable_said(by_kind: Mapping[str, int], too_big: int = 0) -> str:
    """The files and folders an update could not use, as what is true of them: ``1 file could
    not be read, 1 is not text, 1 folder could not be listed`` ("" for none). A binary file was
    said to be one that "could not be read", and so was a folder that could not be listed.
    ``too_big``: of the "unusable" ones, those over index.max_file_mb, which a raised setting
    takes: said so, not "could not be used" (`status`; a run's own line names the setting)."""
    parts, named = [], False
    for kind in _SAID_ORDER:
        n = too_big if kind == "too_big" else by_kind.get(kind, 0) - (too_big if kind == "unusable" else 0)
        if n <= 0:
            continue
        if kind == "unlisted":
            parts.append(f"{counted(n, 'folder')} could not be listed")
            continue
        what = f"{number(n)} {'' if named else 'file ' if n == 1 else 'files '}"
        named = True
        parts.append(what + {"unreadable": "could not be read", "unusable": "could not be used",
                             "not_text": "is not text" if n == 1 else "are not text",
                             "too_big": f"{'is' if n == 1 else 'are'} over index.max_file_mb (raise it to index it)",
                             }[kind])
    return ", ".join(parts)


# The kinds ``unusable_said`` says, in order: the files over index.max_file_mb after the others
# that could not be used, whose count holds them (``errors.SAID_AS``).
_SAID_ORDER = (*UNUSABLE_KINDS[:3], "too_big", *UNUSABLE_KINDS[3:])


def without_claims_said(n: int) -> str:
    """The chunks of an update whose claims calls failed, as what is true of them: ``4 chunks
    are indexed without their claims (the claims call failed)``; they were said "left out of this
    version", which holds their entities and relationships (`index`, `status` and `watch` lines)."""
    return (f"{counted(n, 'chunk')} {'is' if n == 1 else 'are'} indexed without "
            f"{'its' if n == 1 else 'their'} claims (the claims call failed)")


def _outcome(info: dict) -> str:
    """The last update's state, with what it left out: ``ok, but 1 file could not be read``
    (or is not text; ``unusable_said``).

    A run that finished is ``ok`` in the runs table even when items failed (what worked is
    published, and ``index`` or ``watch --once`` exited 1): the failures are said beside it."""
    state = info["last_run"]["status"]
    unreadable = info.get("unreadable_last_run", 0)
    skipped = (unusable_said(info.get("unreadable_by_kind") or {"unusable": unreadable}, info.get("too_big_last_run", 0))
               if unreadable else "")
    if state == "running":
        killed = info["last_run"].get("killed")
        # The files it met that it could not use were not said: skipped, as every update skips
        # them (not continued by the next run, which skips them too while they are as they are).
        also = f"; {skipped} (skipped)" if skipped else ""
        if killed:   # (another may be writing it: its line says so)
            return ("killed before it finished" + ("" if info.get("writer") else ": no streamrag is writing the index")
                    + " (a new run continues its work)" + also)
        if killed is None:   # (where it cannot be told, ``_killed``: say both readings)
            # Where writers hold a lock, only a run that holds none can be under way with
            # nothing holding it: a sync of the Python API (its process's start unread: macOS).
            running = "running (a sync of the Python API: it holds no writer lock)" if writers_lock() else "running"
            return f"{running}, or killed before it finished (a new run continues its work)" + also
    failed = info["failures_last_run"] - unreadable
    # (the chunks whose claims calls failed are in the version, without their claims: they were
    # said "left out of this version")
    claimless = min(info.get("claims_failed_last_run", 0), failed) if state == "ok" else 0
    failed -= claimless
    left = []
    if failed:
        # A run that did not finish published nothing: no version left anything out.
        left.append(f"{counted(failed, 'item')} failed" + (" (left out of this version)" if state == "ok" else ""))
    if claimless:
        left.append(without_claims_said(claimless))
    # (How to list them is the failures line's to say, above: this line said it too, twice in
    # plain `status`.)
    if state == "ok":   # "ok, but 2 items failed (...) and 1 file is not text"
        return f"{state}, but {' and '.join(left + [skipped] * bool(skipped))}" if left or skipped else state
    # A run that failed outright: "failed (2 items failed)". The files it could not use were
    # said the same way, "failed (1 file is not text)", as if the binary file had made it fail:
    # they are said apart, as skipped, which every update does with them.
    said = f"{state} ({' and '.join(left)})" if left else state
    if skipped and state == "running":   # (under way, its process alive: it has not failed)
        said += f"; {skipped} (skipped)"
    elif skipped:
        cause = "was interrupted" if state == "interrupted" else "failed"
        said += f"; besides, {skipped} (skipped, not why it {cause})"
    return said


def not_indexed_lines(info: dict, *, told: bool = False) -> list[str]:
    """The new or changed files the last update left unindexed, as it failed or was interrupted
    (``not_indexed_last_run``),
    and with ``--failures`` the first of them by name. ``told``: a line above already said how
    to list them (``_LIST_THEM``)."""
    n = info.get("not_indexed_last_run", 0)
    if not n and info.get("killed_before_publishing") and not info.get("killed_taking_recorded"):
        return ["  not indexed    the new or changed files the killed update was taking, if any: it published "
                "nothing and had not recorded which they are; the next update finds them and indexes them"]
    if not n:
        return []
    named = info.get("not_indexed_files")
    by = info.get("not_indexed_by") or info.get("last_run") or {}
    ended = "was interrupted" if by.get("status") == "interrupted" else "failed"
    # (a retry sync under way: its run is the last update's, "running" on the line below; it said
    # "the last update failed" of the run before it)
    last = info.get("last_run") or {}
    if info.get("killed_before_publishing") and (info.get("killed_taking_recorded") or by is last or not by):
        which = "the last update was killed"   # (the files it was taking, as it recorded them)
    else:
        which = (f"the last update {ended}" if by is last or not by else
                 f"{by['command']} {by['id']}, the sync before the one {'killed' if last.get('killed') else 'under way'}, "
                 f"{ended}")
    which += " and published nothing"
    if (by is last or not by) and last.get("lead"):
        # (an `index` of a big file published its other files first, ``Indexer._lead``: "published
        # nothing" was of its second run alone; killed with -9 on it too, ``runs.taking``)
        ended = "was killed" if info.get("killed_before_publishing") else ended
        which = f"the last update published only its other files (version {last['lead']['version']}), then {ended}"
    lines = [f"  not indexed    {counted(n, 'new or changed file')}: {which}; "
             f"the next that gets through indexes {'it' if n == 1 else 'them'}"
             + ("" if named is not None or told else _LIST_THEM)]
    lines += [f"    {name}" for name in named or []]
    if named and n > len(named):
        lines.append(f"    and {number(n - len(named))} more")
    lines += [f"    [{f['stage']}] {flat(f['message'])}" for f in info.get("not_indexed_failures") or ()]
    return lines


def settled_lines(info: dict, *, told: bool = False) -> list[str]:
    """The items no longer asked for (``settled``), and with ``--failures`` which and why.
    ``told``: a line above already said how to list them (``_LIST_THEM``)."""
    n = info.get("settled", 0)
    if not n:
        return []
    items = info.get("settled_items")
    lines = [f"  settled        {counted(n, 'item')} no longer asked for: the model's answers were unusable on "
             f"{_runs_said(info)} runs in a row, so extractive text stands in"
             + ("; a change to them or to their settings asks again" if items is not None
                else "" if told else _LIST_THEM)]
    for f in items or ():
        lines.append(f"    [{f['stage']}] {_settled_said(f)}")
    if items is not None and len(items) < n:
        lines.append(f"    ... and {number(n - len(items))} more")
    return lines


def _runs_said(info: dict) -> str:
    """The runs in a row of the settled items, as true of each: ``3``, ``3 or 4``, ``3 to 5``."""
    runs = sorted(int(r) for r in info.get("settled_by_runs") or {str(UNUSABLE_RUNS): 1})
    low, high = runs[0], runs[-1]
    return str(low) if low == high else f"{low} or {high}" if high == low + 1 else f"{low} to {high}"


def _settled_said(item: dict) -> str:
    """A settled item's line: the failure recorded by the run that settled it, a report's led by
    its title (the failure names its community by id only), and said if it is held below
    index.report_min_members now."""
    said = flat(item["message"]) if item["message"] else _unsaid(item)
    if item["stage"] != "report":
        return said
    community = f"community {item['item']}"
    notes = [community] + (["held below index.report_min_members"] if item.get("held") else [])
    what = f'"{item["title"]}" ({", ".join(notes)})' if item.get("title") else ", ".join(notes)
    return what + said[len(community):] if said.startswith(f"{community}:") else f"{what}: {said}"


def _unsaid(item: dict) -> str:
    """Of a settled item whose failure is no longer kept (``store.keep_unused_days``)."""
    what = f"community {item['item']}" if item["stage"] == "report" else item.get("name") or item["item"]
    return f"{what}: unusable on {item['runs']} runs in a row (the failure recorded then is no longer kept)"


def file_bytes(store: Store) -> int:
    """The database's bytes on disk, its write-ahead log's too."""
    on_disk = 0
    for name in (store.path.name, store.path.name + "-wal"):
        try:
            on_disk += (store.path.parent / name).stat().st_size
        except OSError:
            pass
    return on_disk


def _sizes(store: Store) -> dict[str, int]:
    """The database's bytes on disk (its write-ahead log too), of them the cached model answers'
    (as stored: compressed, most of them: ``answer_cache.pack``) and the free pages SQLite
    reuses before the file grows."""
    page = store.scalar("PRAGMA page_size") or 0
    return {"database_bytes": file_bytes(store),
            "cache_bytes": store.scalar("SELECT coalesce(sum(length(response)), 0) FROM llm_cache"),
            "free_bytes": (store.scalar("PRAGMA freelist_count") or 0) * page}


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _unusable_answers_said(unusable: int, again: int) -> str:
    """The LLM calls line's clause of the unusable answers (of errors), and of those whose request
    a later try answered, one clause: the answers asked again are a part of the unusable ones
    (``index_rows._ASKED_AGAIN``; of an old archive too: ``index_rows.unusable_calls``), and were
    said as a second count of errors beside them."""
    if not unusable:
        return ""
    of_them = ("" if not again else ", asked again and then answered" if again == unusable
               else f", {number(again)} of them asked again and then answered")
    return f"; {counted(unusable, 'answer')} unusable (in errors){of_them}"


def _failures_line(last: int, total: int, last_run: dict | None, told: bool) -> list[str]:
    """The failures line: the last update's, and all runs' when more. An update that failed with
    no item failed (it stopped at the endpoint; its chunks count as the files it left unindexed,
    said below) names none: "0 in the last update" beside "last update: failed" read as though
    nothing had gone wrong. Its line is all runs' alone then, or none. A last update whose run has
    not ended (``failures_under_way``) is said as what it met so far, and all runs' count as
    leaving out its chunks: "2 in the last update (1 recorded over all runs)" read as a
    contradiction, the total not counting the chunks its end decides. All runs' count says it
    holds items since fixed (``_SINCE``); ``told``: how to list them is said here, in the same
    bracket."""
    if not last and last_run is not None and last_run["status"] == "failed":
        return [f"  failures       {number(total)} recorded over all runs{_SINCE}"] if total else []
    running = last_run is not None and last_run["status"] == "running"
    killed = running and last_run.get("killed")
    of_it = ("in the last update" if not running or killed else "so far in this update")
    but = ("" if not running else ", not counting its chunks: it did not end" if killed
           else ", not counting its chunks until it ends")
    # (one bracket: "(5 recorded over all runs) (list them with --failures)" had two in a row,
    # and --failures lists the last update's alone)
    said = [f"{number(total)} recorded over all runs{_SINCE}{but}"] if total != last else []
    if told:
        whose = "them" if not said else "this update's" if running and not killed else "the last update's"
        said.append(f"list {whose} with --failures")
    return [f"  failures       {number(last)} {of_it}" + (f" ({'; '.join(said)})" if said else "")]


def _none_to_list(info: dict) -> str | None:
    """The line of ``status --failures`` when it lists nothing: no item of the last update failed,
    none was left unindexed or settled (those lines list them). It printed the count line alone,
    or, of an update that failed, no line, which read as though the listing had been lost. The
    failures of earlier updates, counted over all runs, are not listed: said when there are any."""
    if ("failures" not in info or info["failures"] or info["failures_last_run"] or info.get("not_indexed_last_run")
            or info.get("killed_before_publishing") or info.get("settled_items") or info.get("not_indexed_failures")):
        return None
    run = info["last_run"]
    if run is None:
        return "none to list: no update is recorded"
    if run["status"] == "running" and not run.get("killed"):
        return "none to list: no item has failed so far in this update"
    earlier = " (the failures recorded over all runs are earlier updates', not listed)" if info["failures_total"] else ""
    return f"none to list: no item failed in the last update{earlier}"


def _without_claims(n: int) -> str:
    """The claims line's clause of the chunks published without their claims ("" for none)."""
    if not n:
        return ""
    return (f" ({counted(n, 'chunk')} indexed without {'its' if n == 1 else 'their'} claims, the claims "
            f"call failed; the next update asks for them again)")


def _communities_line(count: int, by_level: dict) -> str:
    """The communities line, by level when there are any: an index of no community (an empty
    folder's) said "0 by level -", which reads as a fault."""
    levels = ", ".join(f"{k}: {number(v)}" for k, v in by_level.items())
    return f"  communities    {number(count)}" + (f" by level {levels}" if levels else "")


# The usage table's columns after the model's: heading, key, width with the space before it.
# Counts are grouped by thousands as the tokens are, in room for millions: the calls column
# was 5 wide, and a stage of 100,000 calls or more pushed its row out of line with the others.
_USAGE_COLUMNS = (("calls", "calls", 10), ("cached", "cached", 10), ("prompt tok", "prompt_tokens", 14),
                  ("completion tok", "completion_tokens", 17), ("errors", "errors", 9))


def _checks_failed_line(failed: int) -> list[str]:
    """The line of the failed checks of the endpoint that refused nothing, if any: in no count of
    the table, as in none of index's and watch's lines, and not to be lost (a server down). Under
    100 columns, as the table's (it was 123)."""
    if not failed:
        return []
    return [f"    and {counted(failed, 'model check')} failed, refusing nothing (no answer, or a server "
            "error): in no count above"]


def format_status(info: dict, db: Path) -> str:
    when = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["published_at"]))
            if info["published_at"] else "never")
    lines = [
        f"Index {db}",
        f"  version        {info['version']} (published {when})",
        f"  documents      {number(info['documents'])}",
        f"  chunks         {number(info['chunks'])}",
        f"  entities       {number(info['entities'])}",
        f"  relationships  {number(info['relationships'])}",
        f"  claims         {number(info['claims'])}" + _without_claims(info.get("chunks_without_claims", 0)),
        _communities_line(info["communities"], info["communities_by_level"]),
        _reports_line(info),
    ]
    if info["llm_by_model"]:
        rate = info["cache_hit_rate"]
        again, unusable = info.get("asked_again", 0), info.get("unusable", 0)
        # (the unusable answers were said by --json alone: the errors column mixes them with the
        # endpoint's failures, which are fixed elsewhere)
        lines.append(f"  LLM calls      {number(info['llm']['calls'])} (cache hit rate {rate:.0%})"
                     + _unusable_answers_said(unusable, again))
        cancelled = any(r["cancelled"] for r in info["llm_by_model"])   # (a column only when there are some)
        columns = _USAGE_COLUMNS + (("cancelled", "cancelled", 11),) * cancelled
        lines.append("    stage          model                     " + "".join(f"{h:>{w}}" for h, _, w in columns))
        for r in info["llm_by_model"]:
            lines.append(f"    {r['stage']:<14} {r['model'][:26]:<26}"
                         + "".join(f"{r[key] or 0:>{w},}" for _, key, w in columns))
    else:
        lines.append("  LLM calls      none")
    lines += _checks_failed_line(info.get("checks_failed", 0))
    last, total = info["failures_last_run"], info["failures_total"]
    # How to list them is said once, on the first of the failures, not indexed and settled lines
    # that has any (it was said on each: twice when an update failed with items failed).
    told = bool(last) and "failures" not in info
    failures_line = _failures_line(last, total, info["last_run"], told)
    lines += failures_line
    for f in info.get("failures", []):   # (a server's words kept by a run before they were made safe: ``flat``)
        lines.append(f"    [{f['stage']}] {flat(f['message'])}")
    if (none := _none_to_list(info)) is not None:
        lines.append(("    " if failures_line else "  failures       ") + none)
    lines += not_indexed_lines(info, told=told)
    told = told or (bool(info.get("not_indexed_last_run")) and "failures" not in info)
    lines += settled_lines(info, told=told)
    if info["last_run"]:
        r = info["last_run"]
        lead = r.get("lead")
        first = f" (its other files published first by {lead['id']}, version {lead['version']})" if lead else ""
        lines.append(f"  last update    {r['command']} {r['id']}{first}: {_outcome(info)}")
    if info.get("writer"):
        lines.append(f"  writing now    streamrag {info['writer']['command']} (pid {info['writer']['pid']})")
    if info["queries"]:
        lines.append(f"  queries        {number(info['queries'])} asked (their calls are in the table above)")
    if info.get("asking"):
        asks = info["asking"]
        lines.append(f"  asking now     {counted(len(asks), 'question')} "
                     f"(pid{'s' if len(asks) > 1 else ''} {', '.join(str(a['pid']) for a in asks)})")
    size = info["size"]
    lines.append(f"  database       {_mb(size['database_bytes'])} (cached model answers {_mb(size['cache_bytes'])}, "
                 f"free for reuse {_mb(size['free_bytes'])}"
                 + ("; `streamrag vacuum` gives it back to the disk" if size["free_bytes"] >= 1e6 else "") + ")")
    return "\n".join(lines)
