"""The indexing pipeline, top to bottom: one ``sync`` brings the index to the folder as it is.

    scan ──> loader ──> chunker ──> extractor ×N ──> gleaner ×N ──> writer (chunks, extractions)
                                                                        │
    ┌───────────────────────────────────────────────────────────────────┘
    └─> changes (chunks that became live or dead) ──> merge ──> summarizer ×N ──> graph
          ──> communities (Leiden from the previous partition) ──> reports ×N, deepest level first
          ──> embeddings ──> publish (one transaction)

The first half streams: bounded memory streams connect the stages, so a slow stage holds back
the ones before it instead of filling memory. Its products are content-addressed and written as
soon as they exist, so an interrupted run loses nothing. The second half works on what changed:
a first index is simply the update from an empty index, which is why the graph of an index
built over many updates equals that of the index built at once (its communities, warm-started
from the previous partition, need not: see ``_cluster``). Nothing a query reads changes until ``publish``
replaces the published rows and bumps the version in one transaction (a run that changes
no row a query reads publishes no new version, whatever it redid: the settings it ran with, and
which stored extraction or cached answer a row came from, are bookkeeping). An ``index`` run
with a big new file and other changes is two runs, each publishing once: the others first, so
that they are answered while the big file is extracted (``Indexer._lead``).

This module holds the stages in their order (``Indexer._sync``) and wires their streams. The
first half's actors are ``extraction_stage``'s, the report of each community ``report_stage``'s.
The graph the second half works on, and what it decides is dirty, is ``graph_state``; a file on
disk as the index sees it, ``on_disk``; how the documents were chunked, ``chunking_marks``;
every row read or written is ``index_rows``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import msgspec

from streamrag import ids, index_rows, joins, loader, on_disk
from streamrag import communities as communities_module
from streamrag.call_log import UNUSABLE_RUNS
from streamrag.chunking_marks import (MIXED_CHUNKING, MIXED_CHUNKING_SAID, check_not_newer, chunker_key,
                                     chunking_change, chunking_settings, publishes_cut, recuts_all)
from streamrag.collector import fewer_collections
from streamrag.communities import GraphEdges, hierarchical_leiden, updated_partition
from streamrag.config import Settings, from_folder
from streamrag.errors import (
    ConfigError,
    InputError,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailableError,
    RejectedFirstIndex,
    StreamragError,
    UnusableFirstIndex,
    WebPageAnswer,
    said_kind,
    user_error,
    user_errors_unwrapped,
)
from streamrag.extraction_stage import ExtractionStage, ExtractionStageContext, Scan, chunk_shown, read_apart
from streamrag.extractor import ExtractionPrompts, claimless_key, extractor_key, offline_upgrade
from streamrag.gleaner import YesNoCheck
from streamrag.graph_state import (
    DEGREES_VERSION,
    Change,
    GraphCache,
    GraphState,
    check_cached,
    changed_since_fresh,
    check_rewired,
    document_changes,
    find_recut,
    moved_since,
    partition_to_keep,
    recut_of,
    renamed,
    retitled,
    start_leiden,
    titled_anew,
    warm_start,
)
from streamrag.records import Chunk, Community, Document, Extraction
from streamrag.report_stage import ReportStage, ReportStageContext, built_min_members, deepest_first
from streamrag.reports import CLAIM_LINES_REDONE, EXTRACTIVE_CHANGED_WHY, claim_lines_redone
from streamrag.reports import settings_key as report_settings_key
from streamrag.run_progress import Progress
from streamrag.status import FAILURES   # (the default of the lines below that name it)
from streamrag.store import Store, index_files, without_index_files
from streamrag.summarizer import SentenceCounts, extractive_summary, summarize, summarizer_key
from streamrag.watch_lines import answered
from streamrag.words import counted, number
from streamrag.writer import Writer

_T = TypeVar("_T")


def _cut_off(error: object) -> bool:
    """Whether a failure says the model's answer was cut off (``replies.CUT_OFFS``). Imported
    here, not above: ``replies`` imports httpx, and httpx its command line's rich, click and
    pygments, a tenth of a second of CPU that an offline run, which never fails so, need not pay."""
    from streamrag.replies import CUT_OFFS

    return any(cut in str(error) for cut in CUT_OFFS)


def _all(files: int) -> str:
    """The files a pattern leaves out: "the 1 file", "all 3 files"."""
    return f"{'the' if files == 1 else 'all'} {counted(files, 'file')}"


def settled_line(items: int, status: str = FAILURES) -> str:
    """What ``index`` and ``watch`` say of the items a run settled (``SyncResult.settled``);
    ``status``: the command that lists them (``FAILURES``, as ``cli.failures_command`` gives it)."""
    return (f"{counted(items, 'item', grouped=False)} no longer asked for: the model's answers were "
            f"unusable on {UNUSABLE_RUNS} runs in a row, so extractive text stands in (`{status}` "
            "says which and why); a change to them or to their settings asks again")


def joins_moved_said(moved: int, version: int, joined: int, parted: int) -> str:
    """What ``index`` and ``watch`` say of the short names a run publishing ``version`` joined
    to a full name or parted (``SyncResult.joins_moved``, ``joins_joined``, ``joins_parted``; the
    others joined to another full name); of a first index (version 1), every one joined, none
    parted. ("1 short name joined to a full name anew, or parted" did not say which: the run knows.)
    Only the clauses with a count are said, the first naming what they count: "0 short names
    joined to a full name, 1 parted from one" was said of a run that only parted one."""
    if version == 1:
        return f"{counted(moved, 'short name')} joined to a full name"
    # (count, as the first clause, as a later one)
    clauses = ((joined, "joined to a full name", ""), (parted, "parted from a full name", "parted from one"),
               (moved - joined - parted, "joined to another full name", "joined to another"))
    said = [(n, first, later) for n, first, later in clauses if n > 0]
    if not said:   # (no caller asks of a run that moved none)
        return f"{counted(0, 'short name')} joined to a full name"
    (n, first, _), rest = said[0], said[1:]
    return ", ".join([f"{counted(n, 'short name')} {first}"] + [f"{number(m)} {later}" for m, _, later in rest])


def nothing_indexed_line(items: int, last: str, status: str = FAILURES) -> str:
    """What ``index`` and ``watch --once`` say when every item failed, so the index holds
    nothing: ``last``, the newest failure (``index_rows.last_failure``), names the cause;
    ``status``, the command that lists them."""
    return (f"nothing was indexed: {counted(items, 'item')} failed{f' (last: {last})' if last else ''}; fix the "
            f"cause and run the same command again (`{status}` lists them)")


def unusable_first_line(chunks: int, model: str, last: str, status: str = FAILURES) -> str:
    """What a first index says when the model answered each of its ``chunks`` chunks, all that
    failed, unusably (``Indexer._sync``), naming the setting to check (``model``: its value).
    Answers cut off (``last``, the last failure, says so) are no matter of the extraction format:
    its words name the limit that cut them."""
    if _cut_off(last):
        return f"no chunk could be extracted ({chunks} failed): the model's answers were cut off; last error: {last}"
    return (f"no chunk could be extracted ({chunks} failed): the model's answers were unusable "
            f"({model}): check llm.extraction_model, or try a model that follows the extraction "
            f"format (`{status}` lists them)")


def failed_first_line(chunks: int, unusable: int, last: str, rejected: int = 0, web_pages: int = 0) -> str:
    """What a first index says when none of its ``chunks`` chunks was extracted, ``unusable`` of
    them for the model's answers, ``rejected`` for a request the endpoint refused (a 400 of one
    chunk's: longer than the model's context) or answered with a web page (``web_pages`` of them:
    no refusal, an answer that is not the API's), the others for the endpoint's errors after their
    retries (``last``: the last error of the endpoint, whose words name the fix) (``Indexer._sync``)."""
    errors = chunks - unusable - rejected
    refused = rejected - web_pages
    why = ", ".join(said for n, said in ((errors, f"{errors} for the endpoint's errors"),
                                         (refused, f"{refused} refused by the endpoint"),
                                         (web_pages, f"{web_pages} answered with a web page, not the API"),
                                         (unusable, f"{unusable} for unusable answers")) if n)
    return f"no chunk could be extracted ({chunks} failed: {why}); last error: {last}"


# A run stops once this many calls failed (after their retries) and no chunk was extracted:
# the endpoint is plainly down (3 that it did not answer), or answers nothing usable (8 failed in
# any way: a model that cannot follow the format, an HTML page; more than 3, so that a weak model
# whose first few answers happen to be unusable is not stopped) (``Indexer.fail``).
GIVE_UP_UNAVAILABLE = 3
GIVE_UP_AFTER = 8


def nothing_published(indexed: bool, reuses: bool) -> str:
    """What a run that stops (for an endpoint that does not answer) says it left: the index as it
    was, or none yet (``indexed``: a version was published before; the first failed sync of a
    folder said "the index is as it was" of no index); ``reuses``: and that a run after the fix
    reuses the finished work (not said by a daemon, which syncs again by itself)."""
    said = ". Nothing was published; " + ("the index is as it was" if indexed else "there is no index yet")
    return said + (", and a run after the fix reuses the finished work" if reuses else "")


def unaccounted(doc_chunks: dict[str, list[str]], live: set[str]) -> list[tuple[str, int, str]]:
    """The chunks of ``doc_chunks`` (document -> its chunk ids in order) not ``live``, as
    (document, its place in it, chunk id), in order."""
    return [(doc_id, idx, chunk_id) for doc_id, chunk_ids in sorted(doc_chunks.items())
            for idx, chunk_id in enumerate(chunk_ids) if chunk_id not in live]


# What a run whose extraction settings changed does when no live chunk's extraction with them
# is stored (``extracted_again`` begins so then, and only then).
EVERY_CHUNK_EXTRACTED = "every chunk is extracted again"
# What a chunk asked its claims alone keeps (``ExtractionStage.claims_only``).
CLAIMS_ALONE_KEEP = "its entities and relationships as extracted"


def extracted_again(store: Store, key: str, free: str = "", claimless: str | None = None, why: str = "") -> str:
    """What a run whose extraction settings changed to ``key``'s extracts again of the published
    chunks, in the words it and ``index --estimate`` share (``free``: the cache's clause, or "";
    ``claimless``: ``extractor.claimless_key`` of its settings; ``why``: a clause said first in
    the parentheses, as "it was built offline", or "")."""
    # (settings changed and changed back: each chunk's extraction with these is stored, and
    # taken; it was said "every chunk is extracted again", none was)
    lacking, live, claims_only = index_rows.live_lacking(store, key, claimless)
    # (a chunk whose claims call gave up is asked its claims alone: it was said extracted again)
    lacking -= claims_only
    alone = f", but for the claims of {claims_only} of them, asked alone" if claims_only else ""

    def said(what: str, cost: str = free) -> str:   # (``why`` first; the cache's clause of calls made)
        return " (" + "; ".join(clause for clause in (why, what, cost) if clause) + ")" if why or what or cost else ""
    if claims_only == live > lacking == 0:
        # (no extraction with these settings stored, each one's without its claims: it was said
        # "the extraction of each with these settings is stored, but for the claims of 12 of them")
        return "every chunk is asked for its claims alone" + said(CLAIMS_ALONE_KEEP)
    if not lacking:
        return "no chunk is extracted again" + said("the extraction of each with these settings is stored" + alone,
                                                    free if claims_only else "")
    if lacking < live:
        return f"{lacking} of {live} chunks {'is' if lacking == 1 else 'are'} extracted again" + \
            said(f"the others' extractions with these settings are stored{alone}")
    return EVERY_CHUNK_EXTRACTED + said("")


def claims_asked(store: Store, key: str, claimless: str | None, free: str = "") -> str:
    """What a run whose settings turned index.extract_claims on (``key``; ``claimless``: its
    ``extractor.claimless_key``, the one the index was built with) asks of the published chunks,
    in the words it and ``index --estimate`` share: each one's claims call alone, but those whose
    extraction with claims is stored (claims turned off and on again: none asked, it was said
    "every chunk is asked for its claims")."""
    lacking, live, claims_only = index_rows.live_lacking(store, key, claimless)
    if not claims_only:
        return "no chunk is asked for its claims (the extraction of each with these settings is stored)" \
            if not lacking else extracted_again(store, key, free, claimless)
    cost = f"; {free}" if free else ""
    if claims_only == live:
        return f"every chunk is asked for its claims ({CLAIMS_ALONE_KEEP}{cost})"
    if lacking > claims_only:   # (it said "the others' extractions ... are stored" beside those extracted again)
        return f"{claims_only} of {live} chunks are asked for their claims (their entities and relationships as " \
               f"extracted{cost}); {lacking - claims_only} extracted again"
    return f"{claims_only} of {live} chunks are asked for their claims (their entities and relationships as " \
           f"extracted; the others' extractions with these settings are stored{cost})"


def model_work_replaced(work: dict[str, int], keep_days: float, cache: bool = True) -> str:
    """The line an offline run of an index a model built says before it publishes (``work``:
    ``index_rows.model_work``; "": nothing a model made): what it replaces, and what a run with
    the model again gets back free. It said nothing: 22 model reports became 5 extractive ones
    unannounced, where a model run of an offline index says "this index was built offline: ...".
    What the model made is kept for ``keep_days`` (store.keep_unused_days; 0: for ever), the
    answers only where llm.cache stored them (synth_small, 369 calls to build: the run with the
    model after the offline one made 201 calls, all from the cache, 0 tokens; with llm.cache off,
    202 paid calls, 168k of the 410k tokens, its extractions still taken as stored). ``cache``:
    llm.cache as set now: off, no answer is looked up, and the run with the model asks for all of
    them anew, in the cache or not (it said "from the cache", and that run paid 202 calls). Why
    answers are not in the cache is not known (llm.cache off when they were made, or a prune of
    answers unused for store.keep_unused_days, or a cache emptied by hand): it is not guessed (it
    said "llm.cache was off" of any)."""
    chunks, claims, summaries, reports, not_cached = (work[k] for k in ("chunks", "claims", "summaries",
                                                                         "reports", "not_cached"))
    if not chunks and not summaries and not reports:
        return ""
    made = [part for part in (
        f"extraction of {counted(chunks, 'chunk')}" + (f" (with {counted(claims, 'claim')}: offline finds none)"
                                                      if claims else "") if chunks else "",
        counted(summaries, "summary") if summaries else "",
        counted(reports, "report") if reports else "") if part]
    replaced = made[0] if len(made) == 1 else f"{', '.join(made[:-1])} and {made[-1]}"
    written = summaries + reports
    anew = not_cached if cache else written
    kept = ("extractions are" if written and anew == written else "work is") + \
        (f" kept {keep_days:g} days (store.keep_unused_days)" if keep_days > 0 else " kept")
    line = f"this index was built with a model: this offline run replaces the model's {replaced} " \
           f"with the NLP extractor's{' and extractive ones' if summaries or reports else ''}; " \
           f"the model's {kept}, so a run with the model again" + \
           (" by then" if keep_days > 0 else "") + " extracts no unchanged chunk again"
    if not written:
        return line
    if anew == written:
        return f"{line}, but asks for its {number(written)} summaries and reports anew (" + \
            ("none of them is in the cache)" if cache else "llm.cache is off)")
    # What the cache gives back: the answers of contexts as the model's run had them. The next
    # run with the model clusters from the model's partition, which this run keeps
    # (``graph_state.KeptPartition``), so only what changes meanwhile is asked anew (200 synth
    # documents, one sentence added before this run: 1 report asked of 184; clustered from this
    # run's partition, 153).
    line += (" and takes its summaries and reports from the cache" if not anew else
             f", asks for {number(not_cached)} of its {number(written)} summaries and reports anew (not in the cache) and "
             "takes the others from the cache")
    return f"{line}, but for those of what changes meanwhile"


def replaced_model_work(store: Store, settings: Settings,
                        live: Collection[str]) -> tuple[dict[str, int], str]:
    """What an offline run of an index a model built replaces of the model's work, of the chunks
    ``live`` after its scan (``index_rows.model_work``), and its line (``model_work_replaced``):
    ``({}, "")`` for a run with a model, an index no model built, or none of the model's chunks
    staying live. One rule for the run (``Indexer._say_model_work_replaced``) and its estimate."""
    if not (store.version and settings.offline and index_rows.built_by_model(store)):
        return {}, ""
    work = index_rows.model_work(store, live)
    line = model_work_replaced(work, settings.store.keep_unused_days, settings.llm.cache) \
        if work["chunks"] else ""
    return (work, line) if line else ({}, "")


# A failed run names this many of the files it leaves unindexed (it counts them all).
NOT_INDEXED_NAMED = 50
log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------
class SyncResult(msgspec.Struct):
    """What one sync did; ``index --json`` prints it (README, "JSON output"), with ``llm`` as
    the shared ``llm`` object (``status.llm_summary``)."""

    run_id: str
    version: int
    documents: int          # distinct texts indexed (a text in two files is one document)
    documents_added: int
    documents_removed: int
    documents_unchanged: int
    chunks: int
    chunks_extracted: int
    chunks_reused: int
    entities: int
    relationships: int
    claims: int
    communities: int
    reports: int
    reports_generated: int
    reports_kept: int
    reclustered: bool       # a fresh clustering replaced the partition it started from (none: False)
    failures: int
    warnings: list[str]
    llm: dict               # the LLM client's stats: stage -> calls, cached, tokens, errors, unusable
    wall_s: float
    offline: bool
    failed_items: int = 0   # of ``failures``, those that running again may fix (not unreadable files)
    # Of ``failed_items``, the chunks whose claims calls failed, published with their entities and
    # relationships as extracted but without their claims (the next run asks for them again)
    claims_failed: int = 0
    settled: int = 0        # of ``failures``, items settled now: unusable on UNUSABLE_RUNS runs in a row
    # Of ``failures``, the files and folders that could not be used, by kind (``InputError.kind``:
    # "unreadable", "not_text", "unusable"; "unlisted" for a folder), those of none left out
    unreadable_by_kind: dict[str, int] = {}
    # Of them, the files over index.max_file_mb (counted as "unusable" there, as before they had a
    # kind of their own: ``errors.SAID_AS``), said apart: a raised setting takes them
    too_big: int = 0
    published: bool = True  # False: nothing differed, and ``version`` is the one already published
    files: int = 0          # files (and .jsonl/.csv rows) indexed: more than ``documents`` when texts repeat
    left_out: dict[str, int] = {}   # extension -> files of a document format index.include leaves out
    # Settings changed since the index was built that make this run redo work for the whole
    # index ("chunking", "extraction", "summary", "report", "clustering"), as said before it
    # started (with a model only: offline work is free)
    settings_changed: list[str] = []
    # Of ``settings_changed``, "chunking" is a streamrag upgrade alone, no setting: this
    # streamrag reads (or chunks) documents differently from the one that built the index
    reading_upgraded: bool = False
    # Offline: this streamrag's NLP extractor is not the one that extracted the index's chunks
    # (``extractor.offline_upgrade``), so the run extracted them all again, free
    extraction_upgraded: bool = False
    # What a model made of the index that this offline run replaced, as said before it published
    # (``index_rows.model_work``: "chunks", "claims", "summaries", "reports", "not_cached");
    # empty with a model, and offline of an index not built by one
    model_work_replaced: dict[str, int] = {}
    # Documents of files unchanged but read anew to another text (a loader upgrade, another
    # index.text_field): counted here, not in ``documents_added`` and ``documents_removed``
    documents_read_again: int = 0
    # Files whose path stayed and whose text changed (``graph_state.edits``): each counted here
    # alone, not also as a document added and one removed, so that `index` says "1 edited" of
    # a file appended to, as its estimate does
    documents_edited: int = 0
    # Of ``documents_unchanged``, those whose files were read again for their new change times
    # alone (a touch, `cp -a`, a vault restored from a backup) and hold the text indexed
    documents_new_times: int = 0
    # Of ``documents_unchanged``, those whose file was renamed or moved (``graph_state.renamed``):
    # `watch` says "1 renamed" of a `mv`, which `index` counted unchanged alone
    documents_renamed: int = 0
    # Short names joined to a full name, parted from one or joined to another by this run (offline:
    # ``joins``): a new rule or a file renamed moves joins, and the version said nothing of them
    joins_moved: int = 0
    # ... of them, those joined anew and those parted (the others joined to another full name)
    joins_joined: int = 0
    joins_parted: int = 0
    # Files of this run whose new text could not be published, their chunks' extractions failed
    # (``Indexer._keep_previous_versions``), in none of the counts above as changed: new texts
    # with no chunk extracted, left out (the next run reads them again) ...
    documents_failed_added: int = 0
    # ... and the new texts of edited files whose previous version stays indexed (counted in
    # ``documents_unchanged``; two copies edited alike are one, as in ``documents_edited``)
    documents_failed_edited: int = 0


# --------------------------------------------------------------------------------------------
# A big file's text published after the rest of its run (``Indexer._lead``)
# --------------------------------------------------------------------------------------------
# A file with this much new text (some 200 chunks of the default size: with a model, minutes to
# hours of calls) holds back the rest of its run: a run publishes once every file is extracted,
# and 20 notes added beside a 2 MB dump were answerable only 28 s later with a 300 ms model
# (bench: the dump extracted first), hours with a 30 MB one. The other files are published first.
LEAD_BYTES = 1_000_000


def big_new_text(size: int, indexed: int | None) -> bool:
    """Whether a file of ``size`` bytes, indexed at ``indexed`` (None: new), has ``LEAD_BYTES`` of
    new text: held back by ``index`` (``extracted_later``), paused by ``watch`` (``Daemon._big_new``)."""
    return size - (indexed or 0) >= LEAD_BYTES


def extracted_later(changed: dict[str, tuple[int, int | None]], gone: dict[str, int]) -> set[str]:
    """The files of a run (``changed``: the new or changed files it reads, path -> (size, the size
    indexed, None when new)) whose new text is at least ``LEAD_BYTES``, to publish after the
    others (``Indexer._lead``); none when no other file changed (a run of the big file alone),
    or when an indexed file that big is gone (``gone``: path -> indexed size), which a new one
    may be renamed from: left out of the first version, its text would drop out of the index until
    the second. An edit within a big file's size (a word changed) reuses its chunks: not held."""
    later = {path for path, (size, indexed) in changed.items() if big_new_text(size, indexed)}
    if not later or not changed.keys() - later or any(size >= LEAD_BYTES for size in gone.values()):
        return set()
    return later


def _summed(first: dict, then: dict) -> dict:
    """Two runs' ``llm`` stats as one (numbers added, stage by stage; other values ``then``'s)."""
    out = dict(first)
    for key, value in then.items():
        was = first.get(key)
        if isinstance(value, dict) and isinstance(was, dict):
            out[key] = _summed(was, value)
        elif isinstance(value, int | float) and not isinstance(value, bool) \
                and isinstance(was, int | float) and not isinstance(was, bool):
            out[key] = was + value
        else:
            out[key] = value
    return out


def after_lead(lead: SyncResult, result: SyncResult, kept_of_lead: int = 0) -> SyncResult:
    """The result of a run that published ``lead`` (its smaller files) before ``result`` (the
    big ones): what the command did, as one run doing it all would say it. The documents the
    lead added or edited are kept by ``result`` (so not unchanged); its failures ``result``
    tried again (``result``'s stand); reports written by both are counted (each was paid), and
    kept only those from before the command (``kept_of_lead``: of ``result``'s kept, the lead's:
    a first index said "75 communities (88 reports written, 52 kept)")."""
    changed = lead.documents_added + lead.documents_edited + lead.documents_read_again
    warnings = list(dict.fromkeys(lead.warnings + result.warnings))
    return msgspec.structs.replace(
        result, published=lead.published or result.published,
        documents_added=lead.documents_added + result.documents_added,
        documents_removed=lead.documents_removed + result.documents_removed,
        documents_edited=lead.documents_edited + result.documents_edited,
        documents_read_again=lead.documents_read_again + result.documents_read_again,
        documents_unchanged=max(0, result.documents_unchanged - changed),
        documents_new_times=lead.documents_new_times + result.documents_new_times,
        documents_renamed=lead.documents_renamed + result.documents_renamed,
        chunks_extracted=lead.chunks_extracted + result.chunks_extracted,
        chunks_reused=lead.chunks_reused + result.chunks_reused,
        reports_generated=lead.reports_generated + result.reports_generated,
        reports_kept=max(0, result.reports_kept - kept_of_lead),
        reclustered=lead.reclustered or result.reclustered,
        joins_moved=lead.joins_moved + result.joins_moved, joins_joined=lead.joins_joined + result.joins_joined,
        joins_parted=lead.joins_parted + result.joins_parted,
        warnings=warnings, llm=_summed(lead.llm, result.llm))


# --------------------------------------------------------------------------------------------
# One sync: the stages in order
# --------------------------------------------------------------------------------------------
def resummarizes(store: Store, settings: Settings) -> bool:
    """Whether a run with ``settings`` writes every summary of the published index in ``store``
    again: its summary settings changed since it was built (an index from before the summarizer
    mark, holding entities, too). The run says it (``Indexer._say_what_settings_redo``), and its
    estimate says and counts it (``estimate.summary_change``, ``estimate._estimate``)."""
    built = store.get_meta("summarizer")
    return bool(store.version) and built != summarizer_key(settings) and (
        built is not None or index_rows.has_entities(store))


def reports_redone(store: Store, settings: Settings) -> str:
    """What a run with ``settings`` does again of the reports of the published index in
    ``store``, its report settings changed since it was built, in the run's words
    (``Indexer._say_what_settings_redo``; the estimate's ``reported_again``), or "" when they
    did not change."""
    return _reports_redone(store, settings)[0]


def _reports_redone(store: Store, settings: Settings) -> tuple[str, str]:
    """``reports_redone``, and why when no setting changed but what this streamrag's report
    contexts show of claims (``claim_lines_redone``; else "")."""
    said, by_llm = store.get_meta, not settings.offline
    if not store.version or said("report_settings") in (None, report_settings_key(settings, by_llm=by_llm)):
        return "", ""
    if by_llm and index_rows.built_offline(store):   # (its reports extractive: each context's key is new)
        return f"reports are written with {settings.llm.report_model}", ""
    if why := claim_lines_redone(settings, said("report_settings"), by_llm=by_llm):   # (no setting changed)
        return CLAIM_LINES_REDONE, why
    if built_min_members(settings, said, by_llm=by_llm) is not None:   # (that one alone)
        return "reports are written for the communities that now reach index.report_min_members (those " \
               "written are kept)", ""
    # (a context key holds the model and prompt, not the settings: a context built as before,
    # one within both report_max_input_tokens, finds its report)
    return ("reports are written again where their context changed (every one for a new report model or "
            "prompt; a context within both the old and the new index.report_max_input_tokens keeps its report)"), ""


def extractive_redone(store: Store, settings: Settings) -> str:
    """Why and what a run with a model does again of the extractive reports of the model-built
    index in ``store`` (``ReportStage.stale_extractive``), their builder changed since it was
    published (``reports.EXTRACTIVE_VERSION``) and no report setting: one line, or "" (offline
    runs redo every report with the settings key, which holds the version; an index published
    before the mark is rewritten too, but why is not known)."""
    said = store.get_meta
    if (settings.offline or not store.version or said("report_settings") != report_settings_key(settings, by_llm=True)
            or said("extractive_settings") in (None, report_settings_key(settings, by_llm=False))):
        return ""
    n = index_rows.extractive_reports_held(store)
    if not n:
        return ""
    return (f"{EXTRACTIVE_CHANGED_WHY}: {'its' if n == 1 else 'the'} {counted(n, 'extractive report')} "
            f"{'is' if n == 1 else 'are'} built again, once, with no LLM call, and published only where "
            f"{'its' if n == 1 else 'their'} text changed (the model's are kept)")


def check_not_downgraded(settings: Settings, store: Store, db_path: Path) -> None:
    """Refuses to index offline, for want of an endpoint, an index a model built: its graph and
    reports would be replaced by the NLP extractor's without a word (a job run without the
    variable that sets the endpoint). ``--offline`` or ``index.extractor = "nlp"`` says it is
    meant."""
    if settings.index.extractor == "auto" and settings.offline and index_rows.built_by_model(store):
        raise ConfigError(f"{db_path}: this index was built with a model, and no endpoint is set "
                          "now (llm.api_base, STREAMRAG_API_BASE or --api-base): set one to update it, "
                          "or pass --offline to rebuild it offline (the NLP extractor's graph and "
                          "extractive reports replace the model's)")


def _excluded_by(paths: list[Path], include: list[str], exclude: list[str], root: Path,
                 documents: Callable[[list[Path]], list[Path]]) -> tuple[int, list[str]]:
    """How many files under ``paths`` ``include`` matches (``documents`` of them: less the index's
    own files), and the ``exclude`` patterns that leave any of them out. Scanned again without
    ``exclude``, only once a scan found nothing (what it left out is never looked into)."""
    if not exclude:
        return 0, []
    found = documents(loader.scan(paths, include, root=root, skipped=[], unlisted=[], gone=[]))
    rels = [loader.stored_path(f, root) for f in found]
    return len(found), [p for p in exclude if any(loader.excluded(rel, loader.exclude_patterns([p])) for rel in rels)]


def nothing_found(paths: list[Path], settings: Settings, db_path: Path, root: Path | None, *,
                  refused: bool = True) -> str:
    """The warning of a scan of ``paths`` that found no file: what left the files out (said by
    ``index`` and ``index --estimate`` alike). It blamed index.include alone, and so
    `exclude = ["*"]`, which leaves out every file (and took every document out of an index),
    was told to widen include. Raises ``ConfigError``, when ``refused`` (the index holds files,
    and the run is not a watch's sync of a folder changed under it), if index.exclude left out
    every file include matches: the run would take every document out of the index, for a
    setting no one writes to index nothing. A first index of a folder holding only what exclude
    leaves out (a new vault's Templates/) is warned of, not refused: a watch started as a
    service on it exited 1 until a note was written (a folder simply empty is indexed, as empty)."""
    ix = settings.index
    under = ", ".join(loader.shown(p) for p in paths)
    found, by = _excluded_by(paths, ix.include, ix.exclude, root,
                             lambda files: without_index_files(files, db_path, also=settings.own_files()))
    if by and not refused:
        return (f"no file under {under} is indexed: index.exclude ({', '.join(by)}) leaves out {_all(found)} "
                "index.include matches there; name only the folders or files to leave out")
    if by:
        raise ConfigError(f"index.exclude ({', '.join(by)}) leaves out {_all(found)} index.include "
                          f"matches under {under}, so nothing would be indexed; name only the folders "
                          "or files to leave out")
    if folders := _folders_named(ix.include, root, loader.exclude_patterns(ix.exclude)):
        return (f"no file under {under} matches index.include ({', '.join(ix.include)}): it matches files, "
                "not folders; " + ", ".join(f'use "{f}/*" for the files under {f}' for f in folders))
    return (f"no file under {under} matches index.include ({', '.join(ix.include)}); add such files, or "
            "widen index.include")


def _folders_named(include: list[str], root: Path | None, leave: Sequence[str] = ()) -> list[str]:
    """The folders of ``root`` that ``include`` patterns without a wildcard name ("docs", "docs/",
    "notes/docs"): a user who wrote one meant the files in it, which such a pattern never matches.
    Said when the run finds no file, not refused as the settings load: there the folder cannot be
    seen, and "docs" also takes a file named docs in any folder. Found case aside, as include
    matches (a path too: "Notes/Docs" takes notes/docs/a.md), and none that index.exclude's
    ``leave`` (``loader.exclude_patterns``) leaves out: "use 'archive/docs/*'" took no file."""
    if root is None:
        return []
    names = [from_folder(p).rstrip("/") for p in include if not any(c in p for c in "*?[")]
    found: list[str] = []
    for n in dict.fromkeys(names):
        if "/" in n:   # a path from the folder: only that one
            found += _folders_at(root, n, leave)
        elif n:        # a name: matched in every folder, as the scan matches names
            found += _folders_called(root, n, leave=leave)
    return list(dict.fromkeys(found))


def _folders_at(root: Path, path: str, leave: Sequence[str] = ()) -> list[str]:
    """The folders of ``root`` at ``path`` ("notes/docs"), each part matched case aside; hidden
    ones and those ``leave`` leaves out not taken, as the scan takes none of their files."""
    level = [""]
    for part in filter(None, path.split("/")):
        level = [f"{rel}/{d}" if rel else d for rel in level for d, _linked in _subfolders(root / rel)
                 if d.lower() == part.lower() and not loader.excluded(f"{rel}/{d}" if rel else d, leave, folders=False)]
    return [rel for rel in level if rel]


# Folders _folders_called looks into, at most: a home folder's node_modules may hold 100,000
# (a walk of them took 1.3 s with the disk cached, to give advice); 5,000 of them took 0.14 s.
FOLDERS_LOOKED_INTO = 5_000


def _folders_called(root: Path, name: str, most: int = 3, *, leave: Sequence[str] = ()) -> list[str]:
    """The paths from ``root`` of the first ``most`` folders named ``name`` (case aside, as
    include matches names), shallowest first, hidden ones left out as the scan leaves them:
    include = ["docs"] with the folder at notes/docs was told only to widen index.include, not
    to use "notes/docs/*". (A walk of the folder, on a run that found no file: level by level,
    so the shallowest are seen first, and over at most ``FOLDERS_LOOKED_INTO`` folders.) Those
    index.exclude's ``leave`` leaves out are neither named nor looked into, as the scan does."""
    found: list[str] = []
    level, looked = [""], 0
    while level and len(found) < most and looked < FOLDERS_LOOKED_INTO:
        below: list[str] = []
        for rel in level[:FOLDERS_LOOKED_INTO - looked]:
            looked += 1
            for d, linked in _subfolders(root / rel):
                path = f"{rel}/{d}" if rel else d
                if leave and loader.excluded(path, leave, folders=False):
                    continue
                found += [path] if d.lower() == name.lower() else []
                below += [] if linked else [path]   # (a link is named, not walked, as os.walk does)
        level = below
    return sorted(found, key=lambda f: (f.count("/"), f))[:most]


def _subfolders(folder: Path) -> list[tuple[str, bool]]:
    """The folders in ``folder`` (name, whether a link), hidden ones left out, sorted; none if it
    cannot be read."""
    try:
        with os.scandir(folder) as entries:
            return sorted((e.name, e.is_symlink()) for e in entries
                          if not e.name.startswith(".") and e.is_dir())
    except OSError:
        return []


def _as_indexed(doc_ids: set[str], chars: dict[str, int], docs: list[Document]) -> dict[str, str]:
    """The texts as indexed of those of ``doc_ids`` found in ``docs`` (a file's documents, read
    now): a document of the same id, or the start of the file's one document, as long as the
    text indexed (``chars``), that hashes to the id (a log appended to since it was indexed:
    its text as indexed, exactly; ids are text hashes)."""
    out = {d.id: d.text for d in docs if d.id in doc_ids}
    if len(docs) == 1 and (text := docs[0].text):
        for doc_id in doc_ids - out.keys():
            n = chars.get(doc_id, 0)
            if 0 < n < len(text) and ids.document_id(text[:n]) == doc_id:
                out[doc_id] = text[:n]
    return out


def _opening_as_now(headings: dict[str, str], docs: list[Document]) -> dict[str, bool]:
    """Of documents not found in their file (``headings``: the heading title each one's first
    chunk opens with, its indent lost), whether each opens with code, taken from the file's one
    document as read now (``docs``) where it opens with the same heading: a note edited below
    its first line, a log rewritten under its header, most likely opened as it opens now. None
    of the others: an opening changed or gone says nothing of the indent, and the chunk's
    heading, a note's common opening, stands."""
    if len(docs) != 1:
        return {}
    now = docs[0].text
    # (its opening as a chunk has it: ``index_rows.opening_headings``; not a copy of the text)
    start = _LEADING_BLANKS.match(now).end()
    title = joins.heading_title(now[start:start + 300])
    return {d: joins.code_heading(now) for d, t in headings.items() if title is not None and t == title}


_LEADING_BLANKS = re.compile(r"[ \t\n\r]*")


class Indexer:
    """One sync of ``paths`` into the store at ``db_path``."""

    # Tests set this to check the shortcuts an update takes: communities counted as unchanged
    # have their context built anyway, and a context that did change fails the run (a report
    # left stale would otherwise go unnoticed); splits taken as unchanged are computed anyway,
    # and a partition that differs fails it.
    check_shortcuts = False

    def __init__(self, settings: Settings, db_path: Path, *, root: Path | None,
                 progress: Progress | None = None, command: str = "index", transport=None,
                 recluster: bool = False, graph_cache: GraphCache | None = None,
                 retried: bool = False, retry_base_s: float | None = None,
                 update_of: str | None = None, answered_at: float | None = None,
                 folder_changed: bool = False, left_as_indexed: frozenset[str] = frozenset(),
                 say: Callable[[str], None] | None = None, stopped: Callable[[], bool] | None = None,
                 failures_command: str = FAILURES) -> None:
        """``retried``: the caller retries an outage itself (the daemon), so a run that reached
        no endpoint publishes what it can rather than nothing (not the first version of an index
        through an endpoint that never answered, ``answered_at`` None). ``update_of``: the first run of the
        update this one goes on with (a daemon's retry of what the syncs before it left missing).
        ``answered_at``: when the endpoint last answered, as the caller knows it (``LLMClient``'s;
        ``index`` knows it from the index, ``_open_llm``). ``say``: where the line on the work
        changed settings make it redo goes (``_say_what_settings_redo``; default: the log).
        ``folder_changed``: a watch's sync after its first, of a folder whose files changed under
        it: one left with only the files index.exclude leaves out is warned of, not refused (the
        notes deleted, the templates kept), where a run's settings leaving out every file is.
        ``left_as_indexed``: files (paths from the root) the run leaves as the index holds them,
        unread, as it leaves those outside its paths, and with them any file that is the same
        file (a link: ``_left_with_links``): a daemon's sync of the files that settled while
        another is still written (a log), which a later sync takes up.
        ``stopped``: whether the daemon has been asked to stop (its model client's errors then say to
        start it again, not that it retries). ``transport`` and ``retry_base_s`` (the model client's
        first backoff, ``llm.RETRY_BASE_S``) are for tests. ``failures_command``: the command its
        lines name to list what failed (``cli.failures_command``)."""
        self.settings = settings
        self.failures_command = failures_command
        self.retried = retried
        # Its errors say to run the command again after the fix, unless a daemon runs it: the
        # daemon syncs again by itself (its extraction ahead too, ``watch:extract``).
        self.retries_itself = retried or command == "watch:extract"
        self.answered_at = answered_at
        self.stopped = stopped
        self.indexed = True   # a version was published before the run (known once the store is open)
        self.graph_cache = graph_cache
        self.recluster = recluster
        self.db_path = db_path
        self.root = root
        self.progress = progress or Progress()
        self.command = command
        self.transport = transport
        self.retry_base_s = retry_base_s
        self.update_of = update_of
        self.folder_changed = folder_changed
        self.left_as_indexed = left_as_indexed
        # (those and their links, as this run's scan found them: ``_left_with_links``)
        self.left_with_links: set[str] = set(left_as_indexed)
        self.run_id = time.strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
        self.key = extractor_key(settings)
        # (a chunk whose claims call failed is published with what a run without claims stores)
        self.claimless = claimless_key(settings)
        ix = settings.index
        self.summarizer_key = summarizer_key(settings)
        self.leiden_key = communities_module.settings_key(ix.max_cluster_size, ix.leiden_seed, ix.leiden_resolution)
        self.chunker_key = chunker_key(settings)
        self.chunking = chunking_settings(settings)   # (what the key is of, to name a change)
        self.prompts = None if settings.offline else ExtractionPrompts.load(settings)
        self.failures = 0
        self.failed_items = 0
        # Of them, the chunks it could not extract that no published document holds, read after
        # it published (``index_rows.failed_chunks``): a daemon counts them (``Daemon._left_out``)
        # without opening the index again after each sync that left items out.
        self.chunks_failed = 0
        self.failed_chunk_ids: set[str] = set()   # the chunks whose extraction failed (``fail``)
        self.unusable_chunk_ids: set[str] = set()   # ... of them, for the model's answers
        self.unusable_last: LLMOutputError | None = None   # ... the last (cut off only if all were)
        self.unavailable_chunk_ids: set[str] = set()   # ... of them, for the endpoint's errors
        self.rejected_chunk_ids: set[str] = set()   # ... of them, refused (a 400 not every call's)
        self.web_page_chunk_ids: set[str] = set()   # ... of those, answered with a web page (no refusal)
        self.rejected_last: LLMRequestError | None = None   # ... the last refusal, which names the fix
        # (path, chunk) of the chunks lacking an extraction whose documents stay out or as they
        # were (``_keep_previous_versions``), for ``_fail_unaccounted``
        self.held_back: list[tuple[str, Chunk]] = []
        # (the new texts left out and the new texts of edited files kept at their previous version
        # by it: the result's ``documents_failed_added`` and ``documents_failed_edited``)
        self.failed_added: set[str] = set()
        self.failed_edited: set[str] = set()
        # (the kept documents opening with a heading, of files left as indexed, not found in them:
        # looked at again by the next run, meta ``name_code_headings_pending``,
        # ``_code_headings_published``)
        self.code_headings_pending: list[str] = []
        self.settled = 0
        self.unreadable: list[str] = []  # why files could not be indexed, one line each
        self.unreadable_kinds: Counter[str] = Counter()   # and of which kind (``InputError.kind``)
        self.too_big = 0   # (of them, the files over index.max_file_mb: ``RunResult.too_big``)
        self.broken_links: list[str] = []   # the scan's symlinks leading nowhere, as stored paths
        self.conflict_copies: list[str] = []   # the scan's sync conflict copies, as stored paths
        self.settings_changed: list[str] = []   # (_say_what_settings_redo's, for the result)
        self.reading_upgraded = False   # (its "chunking" an upgrade's, no setting's)
        self.extraction_upgraded = False   # (offline: this streamrag's NLP extractor is another's)
        # (an offline run's of a model's index, said before it publishes)
        self.model_work_replaced: dict[str, int] = {}
        # Where that line goes: the log (a line on stderr), or a daemon's warning event, which
        # `watch --json` prints on stdout with its other events (a script never saw it).
        self.say = say or log.warning
        self.yes_no: YesNoCheck | None = None   # how the last extraction asked its glean checks
        self.claims_warning = ""   # what the last extraction's claims answers got wrong (``_stream_stage``)
        self.none_left_to_recut = True
        self.chunking_mixed = False   # (some documents left to recut) and some published with these settings
        self.unavailable = 0
        self.unavailable_last: LLMUnavailableError | None = None   # (``unavailable_error``)
        self.failed_calls = 0   # calls of chunks failed by the endpoint or the model (GIVE_UP_AFTER)
        self.llm = None
        # The new or changed files of the run, should it publish nothing (``_not_indexed``).
        self._unpublished: Callable[[], list[str]] | None = None
        self.not_indexed_files: list[str] | None = None   # ... as found then (None: not looked)
        # The version ``_lead`` published of the run's other files, and the big files it left out
        self.published_first: tuple[int, str] | None = None
        # ... and the run that published them (noted in this run's ``runs.stats``, so that
        # `status` says the command whole: ``index_rows.lead_of``)
        self.lead_run: str | None = None
        # The run clustered the index's first partition (no partition to start from); and the
        # one after such a lead clusters afresh, as the index's first clustering would have
        # (warm-started from the lead's partition of the small files, the big file's graph kept
        # much of it: 33 communities of modularity 0.065 where a first index finds 20 of 0.074)
        self.clustered_first = False
        self.fresh_after_lead = False
        # The keys of the reports the run wrote and kept (``_reports``); of those kept, the ones
        # its lead wrote are not counted kept (``after_lead``)
        self.reports_written: set[str] = set()
        self.reports_kept: list[str] = []
        self.lead_wrote: set[str] = set()

    @property
    def unavailable_error(self) -> str:
        """The model client's words of the last call that found the endpoint unavailable ("": none)."""
        return "" if self.unavailable_last is None else str(self.unavailable_last)

    @property
    def _nothing_published(self) -> str:
        return self._left(reuses=not self.retries_itself)

    def _unavailable(self, error: LLMUnavailableError) -> LLMUnavailableError:
        """The error a run stops with for want of an endpoint: ``error``'s words, then what it left
        (``_left``), whose "a run after the fix reuses the finished work" the model client's words
        may have said already (``run_again``: "... then run the same command (finished work is
        kept). Nothing was published; ..., and a run after the fix reuses the finished work")."""
        return LLMUnavailableError(f"{error}{self._left(reuses=not self.retries_itself and not error.run_again)}")

    def _refused(self, error: LLMRequestError) -> LLMRequestError:
        """The error a run stops with when every call would be refused alike (``every_call``: a
        rejected key, an unknown model, found by ``check_models`` before the run's work or by a
        call during it): ``error``'s words, then what it left (``_left``). The chunks extracted
        are stored (a run after the fix reuses them, as after an outage): an unknown
        llm.summary_model was found once every chunk had been extracted."""
        reuses = not self.retries_itself and self.progress.counts["chunks_extracted"] > 0
        return LLMRequestError(f"{error}{self._left(reuses=reuses)}", error.status, every_call=True)

    def _left(self, *, reuses: bool) -> str:
        """What a run that stops says it left (``nothing_published``): nothing, of an extraction
        ahead of a daemon's sync, which never publishes (its line said "Nothing was published;
        the index is as it was"; the daemon says what it leaves to the sync)."""
        if self.command == "watch:extract":
            return ""
        if self.published_first is not None:   # (``_lead``: "the index is as it was" hid the version it made)
            version, later = self.published_first
            said = f". Only the run's other files were published (version {version}, without {later})"
            return said + (", and a run after the fix reuses the finished work" if reuses else "")
        return nothing_published(self.indexed, reuses)

    # -- helpers -------------------------------------------------------------------------------
    async def fail(self, writer: Writer, stage: str, item: str, message: str,
                   error: Exception | None = None, *, settled: bool = False, stamp: str | None = None,
                   kind: str | None = None) -> None:
        """Records one failed item; the run goes on, unless the endpoint is plainly down.
        ``settled``: running again would not change it (it does not make ``index`` exit 1).
        ``stamp``: of the file or folder that could not be read (``on_disk.file_stamp``);
        ``kind``: what a load failure is of (``InputError.kind``, or "unlisted" for a folder)."""
        if isinstance(error, LLMRequestError) and error.every_call:
            # A rejected key, an unknown model, no quota: every call fails alike, stop at the first.
            raise self._refused(error) from None
        if isinstance(error, LLMUnavailableError):
            self.unavailable += 1
            self.unavailable_last = error
        if isinstance(error, LLMUnavailableError) or (isinstance(error, LLMOutputError) and not self.retried
                                                       and stage in ("extract", "glean")):
            # An endpoint failing every call fails them in either way (HTTP 500s and dropped
            # connections, garbage and cut-off answers): counting only the first, a run whose
            # first calls all failed waited for the calls still hanging (30 s a try). (The
            # daemon publishes what it can and asks unusable answers again a few times only.)
            self.failed_calls += 1
            # (Or the model client found the endpoint fails everything, ``llm.hopeless``: the
            # calls under way ended with it, a hung try's too, and none is waited for.)
            if self.progress.counts["chunks_extracted"] == 0 and isinstance(error, LLMUnavailableError) \
                    and (self.unavailable >= GIVE_UP_UNAVAILABLE or self.llm is not None and self.llm.hopeless):
                raise self._unavailable(error) from None
            if self.failed_calls >= GIVE_UP_AFTER and self.progress.counts["chunks_extracted"] == 0:
                if isinstance(error, LLMUnavailableError):
                    raise self._unavailable(error) from None
                raise LLMOutputError(f"the first {self.failed_calls} chunks to finish all failed, none "
                                     f"was extracted; last: {error}{self._nothing_published}") from None
        self.failures += 1
        if stage in ("extract", "glean"):
            self.failed_chunk_ids.add(item)
            if isinstance(error, LLMOutputError):
                self.unusable_chunk_ids.add(item)
                if self.unusable_last is None or _cut_off(self.unusable_last):
                    # (One not cut off is kept: ``unusable_first_line`` says all were cut off by
                    # it, and said so of a format failure followed by a cut-off chunk.)
                    self.unusable_last = error
            elif isinstance(error, LLMUnavailableError):
                self.unavailable_chunk_ids.add(item)
            elif isinstance(error, LLMRequestError):
                self.rejected_chunk_ids.add(item)
                self.rejected_last = error
                if isinstance(error, WebPageAnswer):
                    self.web_page_chunk_ids.add(item)
        if stage == "load":   # an unreadable file stays unreadable; a failed call may go next time
            self.unreadable.append(message)
            self.unreadable_kinds[said_kind(kind or InputError.kind)] += 1
            self.too_big += kind == loader.TooBig.kind
        elif not settled:
            self.failed_items += 1
        else:
            self.settled += 1
        self.progress.add("failures")
        await writer.run(lambda s: s.record_failure(self.run_id, stage, item, message, stamp, kind))

    def _open_llm(self, store: Store, writer: Writer):
        """The run's model client: one whenever indexing is not offline (stages that call a model
        ask ``settings.offline`` alone), else one for embeddings only, or None."""
        if not self.settings.calls_model:
            return None   # (no vectors made: ask finds what has none by BM25)
        if not self.settings.has_endpoint and self.settings.index.extractor == "llm":
            source = self.settings.source
            raise ConfigError(f"{source + ': ' if source not in ('', 'defaults') else ''}"
                              "index.extractor = \"llm\" needs an "
                              "endpoint: set llm.api_base (or STREAMRAG_API_BASE / --api-base), or set "
                              "index.extractor to \"auto\" to index offline without one")
        from streamrag.llm import LLMClient

        if self.command == "index" and self.answered_at is None:
            # As a watch says it (its daemon reads it so, ``Daemon._answered_before``): a server that
            # answered a run of the index and is stopped now was said "nothing answers at ...;
            # start the server, or fix llm.api_base", of an address that was right.
            self.answered_at = index_rows.answered_at(store, self.settings.llm.api_base)
        return LLMClient(self.settings.llm, self.settings.api_key, store=store, writer=writer,
                         run_id=self.run_id, transport=self.transport, retry_base_s=self.retry_base_s,
                         encoding=self.settings.index.encoding, base_setting=self.settings.api_base_from,
                         retried=self.retries_itself, answered_at=self.answered_at, stopped=self.stopped)

    def _models_used(self) -> list[str]:
        """The llm.*_model settings this run may call (``LLMClient.check_models``)."""
        return [*(() if self.settings.offline else ("extraction_model", "summary_model", "report_model")),
                *(("embedding_model",) if self.settings.embeds else ())]

    # -- the run -------------------------------------------------------------------------------
    async def run(self, paths: list[Path]) -> SyncResult:
        """Brings the index to ``paths`` and publishes it; first without its big new files, when
        it has others (``_lead``)."""
        started = time.monotonic()
        lead = await self._lead(paths)
        result = await self._session(lambda store, writer: self._sync(store, writer, paths, started))
        return result if lead is None else after_lead(
            lead, result, kept_of_lead=sum(key in self.lead_wrote for key in self.reports_kept))

    async def _lead(self, paths: list[Path]) -> SyncResult | None:
        """Publishes the run's files but its big new ones (``extracted_later``) as a run of its
        own, left as indexed, so that the others are answered while the big ones are extracted;
        its result, or None when there are none to hold back. ``index`` only: a daemon's sync
        finds its files extracted ahead (its waiting is ``Daemon._queue``'s), and offline the big
        file is read in seconds. Each of the two runs publishes in one transaction; killed
        between them, the index is the folder without the big files, and the next run extracts
        only what the second had not stored."""
        if self.command != "index" or self.settings.offline or self.left_as_indexed:
            return None
        later = await anyio.to_thread.run_sync(self._extracted_later, paths, abandon_on_cancel=True)
        if not later:
            return None
        big = sorted(later)
        named = ", ".join(big[:3]) + (f" and {counted(len(big) - 3, 'other')}" if len(big) > 3 else "")
        self.say(f"{named} ({sum(later.values()) / 1e6:.1f} MB) {'is' if len(big) == 1 else 'are'} extracted "
                 "after the run's other files, which are published first (`ask` answers from them meanwhile)")
        lead = Indexer(self.settings, self.db_path, root=self.root, progress=self.progress, command=self.command,
                       transport=self.transport, retry_base_s=self.retry_base_s, answered_at=self.answered_at,
                       left_as_indexed=frozenset(later), say=self.say, stopped=self.stopped,
                       failures_command=self.failures_command)
        try:
            result = await lead.run(paths)
            if result.published:
                self.published_first, self.lead_run = (result.version, named), lead.run_id
                self.fresh_after_lead = lead.clustered_first
                self.lead_wrote = lead.reports_written
        except (UnusableFirstIndex, RejectedFirstIndex):
            # Every small file's chunk failed for the model's answers or a refusal: the run of them
            # all goes on as it would have (the big file's chunks may be answered), saying the rest.
            result = None
        progress = self.progress   # (counted anew: a run's give-up rules read its own counts)
        progress.counts.clear()
        progress.totals.clear()
        progress.nothing_to_redo = False
        progress.set_stage("scanning")
        return result

    def _extracted_later(self, paths: list[Path]) -> dict[str, int]:
        """The files of ``paths`` to publish after the others (``extracted_later``) and their
        sizes, by a stat each against the index's rows."""
        known: dict[str, tuple[str, int, float]] = {}
        if Path(self.db_path).exists():
            try:
                store = Store(self.db_path, readonly=True)
            except StreamragError:   # (an index the run upgrades, or refuses: the run says so)
                return {}
            try:
                known = index_rows.files(store)
            finally:
                store.close()
        rows: dict[str, dict[str, tuple[str, int, float]]] = {}
        for path, row in known.items():
            rows.setdefault(loader.file_of(path), {})[path] = row
        s = self.settings
        # (what the run's scan says of odd names and unlisted folders, it says: not collected twice)
        found = loader.scan(paths, s.index.include, root=self.root, exclude=s.index.exclude, skipped=[],
                            unlisted=[], left_out={}, broken=[], copies=[],
                            own=[*index_files(self.db_path), *s.own_files()])
        files = without_index_files(found, self.db_path, also=s.own_files())
        changed: dict[str, tuple[int, int | None]] = {}
        seen = set()
        for path in files:
            rel = loader.stored_path(path, self.root)
            seen.add(rel)
            with contextlib.suppress(OSError):
                st = os.stat(path)
                held = rows.get(rel, {})
                if not on_disk.same_on_disk(held, st):
                    changed[rel] = (st.st_size, max((size for _d, size, _s in held.values()), default=None))
        scope = [loader.stored_path(p, self.root) for p in paths]
        gone = {file: max(size for _d, size, _s in held.values()) for file, held in rows.items()
                if file not in seen and on_disk.covered(file, scope)}
        return {path: changed[path][0] for path in extracted_later(changed, gone)}

    async def prefetch(self, paths: list[Path]) -> int:
        """Loads, chunks and extracts ``paths`` without publishing (a later ``run`` reuses it all).

        The daemon calls this as files change, so that the sync after a quiet period only
        merges, clusters and reports. Returns the number of chunks extracted now.
        """
        async def extract(store: Store, writer: Writer) -> int:
            await self._stream_stage(store, writer, paths, publishing=False)
            return self.progress.counts["chunks_extracted"]
        return await self._session(extract)

    def extraction_warnings(self) -> list[str]:
        """What the last extraction's answers got wrong (its glean checks' YES/NO, its claims'
        format), for a caller that gets no result to say them: a prefetch, a run that failed.
        The run after finds those chunks stored and reads their answers no more."""
        return [w for w in (self.yes_no.warning if self.yes_no is not None else "", self.claims_warning) if w]

    async def _session(self, work: Callable[[Store, Writer], Awaitable[_T]]) -> _T:
        """Runs ``work`` as one recorded run: the store, its one writer, the model client."""
        with user_errors_unwrapped(), fewer_collections():
            return await self._session_body(work)

    async def _session_body(self, work: Callable[[Store, Writer], Awaitable[_T]]) -> _T:
        store = Store(self.db_path)
        try:
            async with Writer(store) as writer:
                # Before the run row: an index this streamrag must not write (built offline where
                # it has a model, read by a newer one) keeps its last update as it was, not "failed".
                check_not_downgraded(self.settings, store, self.db_path)
                check_not_newer(store, self.db_path)
                self.indexed = bool(store.version)
                status = "interrupted"
                try:
                    # Inside: a signal that lands as it commits still has the run row closed.
                    kind = index_rows.OFFLINE_RUN if self.settings.offline else index_rows.MODEL_RUN
                    await writer.run(lambda s: s.start_run(self.run_id, self.command, self.update_of, kind))
                    self.llm = self._open_llm(store, writer)
                    if self.llm is not None:
                        await self.llm.__aenter__()
                    try:
                        if self.llm is not None:   # (a model named wrong stops it before any call)
                            try:
                                await self.llm.check_models(self._models_used())
                            except LLMRequestError as e:
                                raise self._refused(e) from None
                        result = await work(store, writer)
                    finally:
                        if self.llm is not None:
                            with anyio.CancelScope(shield=True):
                                await self.llm.__aexit__(None, None, None)
                    status = "ok"
                    return result
                except StreamragError:
                    status = "failed"
                    raise
                except BaseExceptionGroup as group:
                    if user_error(group) is not None:
                        status = "failed"
                    raise
                finally:
                    if status != "ok":   # stopped or failed: a lock held elsewhere is not waited out
                        writer.stop_waiting()
                    with anyio.CancelScope(shield=True):
                        try:
                            # (interrupted too: Ctrl-C, SIGTERM, a daemon's second signal left
                            # them unindexed as a failure does, and `status` did not say which)
                            stats = await self._not_indexed() if status != "ok" else None
                            if self.lead_run is not None and self.published_first is not None:
                                stats = {**(stats or {}), "lead_run": self.lead_run,
                                         "lead_version": self.published_first[0]}
                            await writer.run(self._finish, status, stats)
                        except StreamragError:
                            if status == "ok":
                                raise
                            # Not recorded (the run row stays open): what stopped the run is
                            # what is said, not that its end could not be written.
        finally:
            store.close()

    async def _not_indexed(self) -> dict | None:
        """A failed or interrupted run's ``runs.stats``: the new or changed files it was for, which
        it leaves unindexed (it published nothing), ``{"not_indexed": 50, "not_indexed_files": [...]}``,
        the first ``NOT_INDEXED_NAMED`` by name (``status --failures`` says them: a sync given
        up in an outage recorded only the few chunks whose calls it waited for)."""
        if self._unpublished is None:
            return None
        files = self.not_indexed_files = sorted(await anyio.to_thread.run_sync(self._unpublished))
        return {"not_indexed": len(files), "not_indexed_files": files[:NOT_INDEXED_NAMED]}

    def _finish(self, store: Store, status: str, stats: dict | None) -> None:
        """Closes the run's row, ``status`` and ``stats`` (``_not_indexed``); notes that the
        endpoint answered, when a call of the run got an answer (``index_rows.note_answered``)."""
        if status != "ok" and self.update_of is not None:
            # (what the update left missing still is: this run published nothing)
            index_rows.carry_failures(store, self.run_id, self.update_of)
        store.finish_run(self.run_id, status, self._stats_said(store, stats))
        if self.llm is not None and answered(self.llm.stats):   # (a watch's outage line, later)
            index_rows.note_answered(store, self.settings.llm.api_base, time.time())

    def _stats_said(self, store: Store, stats: dict | None) -> str | None:
        """``stats`` (``_not_indexed``) as written, with the chunks of those files that failed
        (``not_indexed_chunks``, ``index_rows.failed_chunks``), counted as the files, not as
        failures, in `status`'s count over all runs, after other runs have published."""
        if stats is None:
            return None
        if "not_indexed" not in stats:   # (an ok run's note of its lead alone)
            return json.dumps(stats)
        chunks = sorted({item for _stage, item in index_rows.failed_chunks(store, self.run_id)})
        return json.dumps({**stats, "not_indexed_chunks": chunks})

    async def _sync(self, store: Store, writer: Writer, paths: list[Path], started: float) -> SyncResult:
        if self._say_what_settings_redo(store):   # (a note for messages, not part of a version)
            await writer.run(lambda st: st.set_meta("chunker_said", self.chunker_key))
        scan = await self._stream_stage(store, writer, paths)
        self.none_left_to_recut = self.none_left_to_recut and not scan.old_reading_kept
        worked_from = store.version
        change = self._changes(store, scan)
        self._say_model_work_replaced(store, change)
        if self.unavailable and self.llm is not None and not self.llm.reached and (
                not self.retried or not self.indexed and (self.answered_at is None or not change.live)):
            # Not one call reached the endpoint (a wrong llm.api_base, a server not started):
            # a version published now would hold none of what the run was for. (The daemon
            # publishes what it can and retries an outage itself, saying so; but not a first
            # index through an endpoint that never answered: a watch started before its server
            # published an empty version 1 when it had fewer chunks than make the run give up.
            # Nor a first index of no chunk through one that answered only an earlier run, killed
            # or given unusable answers: that too was an empty version 1. One of chunks extracted
            # ahead holds them, and is published.)
            raise self._unavailable(self.unavailable_last)
        if not self.indexed and not change.live and self.failed_chunk_ids \
                and self.failed_chunk_ids <= self.unusable_chunk_ids:
            # Every chunk of a first index failed for the model's answers (the endpoint answered,
            # unusably): an empty version 1 was published, which `ask` answered from, and a
            # daemon asked again three times before it gave up. It stops as one through an
            # endpoint that never answered does; an empty folder, no chunk failed, is published.
            raise UnusableFirstIndex(unusable_first_line(len(self.failed_chunk_ids), self.settings.llm.extraction_model,
                                                         str(self.unusable_last or ""), self.failures_command)
                                 + self._nothing_published)
        if not self.indexed and not change.live and self.unavailable_chunk_ids and self.failed_chunk_ids \
                <= self.unusable_chunk_ids | self.unavailable_chunk_ids | self.rejected_chunk_ids:
            # Every chunk of a first index failed, some for the endpoint's errors (HTTP 5xx after
            # its retries), the others for unusable answers or refused (too long), or all for
            # errors, too few chunks for the run to give up (``fail``): an empty version 1 was
            # published, which `ask` said held no documents. It stops as an outage does: a
            # daemon waits and syncs again (chunks refused alone stop it, below).
            last = self.unavailable_last
            raise LLMUnavailableError(failed_first_line(len(self.failed_chunk_ids), len(self.unusable_chunk_ids),
                                                        str(last), len(self.rejected_chunk_ids),
                                                        len(self.web_page_chunk_ids))
                                      + self._left(reuses=not self.retries_itself and not last.run_again))
        if not self.indexed and not change.live and self.rejected_last is not None \
                and self.failed_chunk_ids <= self.unusable_chunk_ids | self.rejected_chunk_ids:
            # Every chunk of a first index failed, some refused by the endpoint for a reason of
            # their own (a 400 for a request longer than the model's context) or answered with a
            # web page (a proxy's sign-in: said apart, being no refusal), the others for
            # unusable answers: an empty version 1 was published, which `ask` said held no
            # documents, the cause a line of `status --failures`. The refusal's words name the fix
            # (a smaller index.chunk_size, a model with a longer context), which only a run with
            # the new settings reads: a daemon stops, as for unusable answers alone.
            raise RejectedFirstIndex(failed_first_line(len(self.failed_chunk_ids), len(self.unusable_chunk_ids),
                                                       str(self.rejected_last), len(self.rejected_chunk_ids),
                                                       len(self.web_page_chunk_ids))
                                     + self._nothing_published, self.rejected_last.status)
        await self._fail_unaccounted(writer, scan, change)
        self.chunking_mixed = not self.none_left_to_recut and publishes_cut(store, scan, change)
        await self._read_shown_titles(store, scan, change)
        found = await self._code_headings_read(store, scan, change)
        if self.settings.offline:   # (a front matter's title says a full name: ``joins``)
            self._join_bookkeeping(store, scan, change, found)
        if self.graph_cache is None:   # (a daemon keeps its graph: reading it costs nothing)
            unread = GraphState.unread(store)
            counts = index_rows.graph_counts(store)
            if self._nothing_to_redo(store, change, unread, counts):
                index_rows.check_version(store, worked_from)   # (the changes and the counts are of one version)
                return await self._publish_unchanged(store, writer, scan, change, unread, counts, started)
        self.progress.set_stage("merging")
        state = self._graph(store)
        index_rows.check_version(store, worked_from)  # the changes and the graph are of one version
        if state.entities and store.get_meta("summarizer") != self.summarizer_key:
            # Summary settings changed since the published index (or it predates the key): every
            # summary is redone (one with a single description costs nothing).
            state.retry_summaries |= set(state.entities) | set(state.relationships)
            state.unusable.clear()   # new settings: every element is asked afresh
        summaries_needed = state.apply(store, change, self.settings)
        self.progress.set_stage("summarizing")
        await self._summarize(writer, state, summaries_needed)
        state.finish_graph(store, check=self.check_shortcuts)
        self.progress.set_stage("clustering")
        communities, reclustered, next_id = self._cluster(store, state)
        self.progress.set_stage("reporting")
        assignments, generated, kept = await self._reports(store, writer, state, communities)
        self.progress.set_stage("embedding")
        vectors = await self._embed(store, writer, state, change)
        self.progress.set_stage("publishing")
        version = await writer.run(index_rows.publish, scan, change, state, communities, assignments,
                                   self.key, vectors, self._marks(state),
                                   self._bookkeeping(store, state, next_id()))
        self._unpublished = None   # (published: a stop from here on leaves no file unindexed)
        if self.graph_cache is not None:
            self.graph_cache.keep(state.published(store, communities, assignments), store.path)
        return await self._ended(store, writer, scan, change, version, state.version, started,
                                 entities=len(state.entities), relationships=len(state.relationships),
                                 claims=len(state.claims), communities=len(communities), reports=len(assignments),
                                 reports_generated=generated, reports_kept=kept, reclustered=reclustered,
                                 joins_moved=state.joins_moved, joins_joined=state.joins_joined,
                                 joins_parted=state.joins_parted)

    async def _ended(self, store: Store, writer: Writer, scan: Scan, change: Change, version: int,
                     worked_from: int, started: float, **graph) -> SyncResult:
        """The run's result, once it has published (``version``; ``worked_from``, the version it
        started from) the graph counted in ``graph`` (SyncResult's fields of it)."""
        if version != worked_from:   # (a daemon's database would otherwise grow for ever)
            await writer.run(index_rows.prune, self.settings.store.keep_unused_days, time.time())
        llm_stats = self.llm.stats if self.llm is not None else {}
        if self.settings.offline and change.live and not graph["entities"]:
            # (Said: an index of lower-case notes came out empty of entities without a word.)
            scan.warnings.append(
                f"offline extraction found no names in the {counted(len(change.live), 'chunk')} indexed: it takes "
                "capitalised words for names; text without them needs a model (set llm.api_base), "
                "and `ask --mode basic` searches the text as it is")
        added, edited, removed, again = document_changes(change.added_docs, change.removed_docs, scan.indexed,
                                                         scan.files, scan.retimed)
        if self.failed_items:
            self.chunks_failed = len(index_rows.failed_chunks(store, self.run_id))
        return SyncResult(
            run_id=self.run_id, version=version, published=version != worked_from,
            documents=len({d for d, _s, _m in scan.files.values()}), files=len(scan.files),
            documents_added=added, documents_removed=removed, documents_edited=edited,
            documents_read_again=again, documents_unchanged=len(change.kept_docs),
            documents_new_times=len(scan.new_times & change.kept_docs),
            documents_renamed=renamed(scan.indexed, scan.files, change.kept_docs),
            chunks=len(change.live), chunks_extracted=self.progress.counts["chunks_extracted"],
            chunks_reused=self.progress.counts["chunks_reused"], **graph, failures=self.failures,
            failed_items=self.failed_items, settled=self.settled, unreadable_by_kind=dict(self.unreadable_kinds),
            too_big=self.too_big,
            claims_failed=index_rows.published_without_claims(store, self.claimless, self.run_id)
            if self.failed_items else 0,
            warnings=self.unreadable + scan.warnings, left_out=dict(sorted(scan.left_out.items())),
            llm=llm_stats, wall_s=round(time.monotonic() - started, 3), offline=self.settings.offline,
            settings_changed=self.settings_changed, reading_upgraded=self.reading_upgraded,
            extraction_upgraded=self.extraction_upgraded,
            model_work_replaced=self.model_work_replaced,
            documents_failed_added=len(self.failed_added), documents_failed_edited=len(self.failed_edited))

    # -- a run with nothing to redo: the published graph stands, unread -----------------------
    def _nothing_to_redo(self, store: Store, change: Change, state: GraphState,
                         counts: tuple[int, int, int, int]) -> bool:
        """Whether the stages after the scan would leave the published graph as it is: no chunk
        or document came or went, and nothing they do again on a run with no change is pending
        (summaries to try again, report answers unusable on runs in a row, a community showing a
        stand-in or no report of its context, the summary, report or clustering settings changed,
        --recluster, degrees to recount, an unclustered graph, vectors to make, an offline
        index published before short names were joined to full names, or joined by another rule:
        ``joins``, ``rejoin_all``, or one of whose documents is cut into other chunks, all of them
        live already, or has its files' names say another full name, which may move a join:
        ``recut_of``, ``retitled``; claims whose ends
        are no entities: ``stranded``). ``state``:
        the published bookkeeping (``GraphState.unread``); ``counts``: ``index_rows.graph_counts``."""
        said = store.get_meta
        entities, _relationships, _claims, communities = counts
        return (bool(state.version) and not self.recluster
                and not (change.added_chunks or change.removed_chunks or change.added_docs or change.removed_docs)
                and not (state.retry_summaries or state.report_unusable or state.report_held) and state.counted
                and (not self.settings.offline   # (the joins: offline only, the recut read for them alone)
                     or (state.joins is not None and not state.rejoin_all and not change.retitled
                         and not recut_of(store, change)))
                and not state.stranded
                and said("summarizer") == self.summarizer_key and said("leiden") == self.leiden_key
                and said("report_settings") == self.report_key()
                and said("extractive_settings") == self.extractive_key()
                and (communities > 0 or entities == 0) and index_rows.reports_of_their_contexts(store)
                and self._all_embedded(store, change))

    def _all_embedded(self, store: Store, change: Change) -> bool:
        """Whether every published entity and live chunk has its vector (``_embed`` would make none)."""
        if not self.settings.embeds or self.llm is None:
            return True
        from streamrag.embeddings import fresh_vectors

        model = self.settings.llm.embedding_model
        return fresh_vectors(store, "entity", model)[1] == 0 and change.live.issubset(
            index_rows.embedded(store, "chunk", model))

    async def _publish_unchanged(self, store: Store, writer: Writer, scan: Scan, change: Change,
                                 state: GraphState, counts: tuple[int, int, int, int], started: float) -> SyncResult:
        """The end of a run with nothing to redo (``_nothing_to_redo``), the graph not read
        (reading it and passing it through the stages was 0.7 s of the 1.2 s such a run of an
        index of 10,000 documents took past its start-up): its communities and reports stand as
        published, and what the scan found is published as a full run publishes it (a renamed
        file's path and title; a touched file's stamp, which makes no version)."""
        entities, relationships, claims, communities = counts
        # The stages as a full run goes through them (watch says each): nothing summarized, every
        # report kept.
        self.progress.nothing_to_redo = True
        for stage in ("merging", "summarizing", "clustering", "reporting", "embedding", "publishing"):
            self.progress.set_stage(stage)
            if stage == "summarizing":
                self.progress.total("summaries", 0)
            elif stage == "reporting":
                self.progress.total("reports", communities)
                self.progress.add("reports_done", communities)
        state.leiden_key = self.leiden_key
        state.changed_since_fresh = changed_since_fresh(store)
        # (a run with a model that found, in an index without the mark, kept documents opening
        # with code: marked as a full run marks them; an offline one retitles them, no shortcut)
        state.mark_code_headings(change)
        next_id = next_community_number(store.get_meta("next_community_id"), index_rows.community_ids(store))
        # (``_bookkeeping`` keeps the unusable counts of elements in the graph, not read here:
        # those published are all in it still)
        bookkeeping = {**self._bookkeeping(store, state, next_id),
                       "summary_unusable": msgspec.json.encode(dict(sorted(state.unusable.items()))).decode()}
        version = await writer.run(index_rows.publish, scan, change, state, [], {}, self.key, [],
                                   self._marks(state), bookkeeping)
        self._unpublished = None
        return await self._ended(store, writer, scan, change, version, state.version, started,
                                 entities=entities, relationships=relationships, claims=claims,
                                 communities=communities, reports=communities, reports_generated=0,
                                 reports_kept=communities, reclustered=False)

    # -- before the run: the work changed settings make it do again ----------------------------
    def _say_model_work_replaced(self, store: Store, change: Change) -> None:
        """For an offline run of an index a model built, one line on what it replaces of the
        model's work (free, but it throws away paid work: the reverse of "this index was built
        offline"). Said once the scan has found which chunks stay live, before anything is
        published: said before the scan, a folder emptied meanwhile still said "replaces the
        model's extraction of 62 chunks", which went with their documents, not for this run."""
        self.model_work_replaced, line = replaced_model_work(store, self.settings, change.live)
        if line:
            self.say(line)

    def _say_what_settings_redo(self, store: Store) -> bool:
        """One line, before the run starts, on the work that settings changed since the index
        was built make it do again for the whole index (paid: offline runs say nothing), while
        it can still be stopped. Chunking is said once per new chunker (a file that cannot be
        recut yet keeps the old one recorded, and every run would say it again): returns
        whether it was said now."""
        s, said = self.settings, store.get_meta
        self.settings_changed, self.reading_upgraded, self.extraction_upgraded = [], False, False
        if store.version and s.offline:   # (free: nothing said before; the summary says what it redid)
            self.reading_upgraded = self._reading_upgraded(store)
            self.extraction_upgraded = offline_upgrade(said("extractor"), s) and index_rows.has_chunks(store)
        if not store.version or s.offline:
            return False
        changes: list[tuple[str, str]] = []
        # (its extraction, summaries and reports: said apart, as no setting changed)
        offline = index_rows.built_offline(store)
        upgrade = ""   # no setting changed, but how this streamrag reads or chunks documents
        if said("chunker") not in (None, self.chunker_key) and said("chunker_said") != self.chunker_key:
            what, of_settings = chunking_change(said("chunker_settings"), self.chunking, said("chunker"))
            if said("chunker") == MIXED_CHUNKING:   # a run cut some documents with other settings
                what = f"{what} for some documents" if of_settings else MIXED_CHUNKING_SAID
            if of_settings or said("chunker") == MIXED_CHUNKING:
                changes.append(("chunking", f"{what}, so documents are read and chunked again as they are "
                                            "indexed (chunks with new text are extracted)"))
            else:   # (it said "the reading and chunking settings changed" of an upgrade alone)
                upgrade = what
        built = said("extractor") or ""
        # (an index of no chunk, an empty folder's, has none to extract again: it was said all the same)
        if built and built != self.key and index_rows.has_chunks(store):
            # (index.extract_claims turned on: the stored extractions are kept, and each chunk's
            # claims call asked alone, ``ExtractionStage.claims_only``; it was said "every chunk
            # is extracted again")
            # (with llm.cache off no answer is looked up: each is paid for, not said free)
            free = "answers in the cache cost nothing" if s.llm.cache else ""
            if built == self.claimless:
                effect = claims_asked(store, self.key, self.claimless, free)
            elif index_rows.model_extractor(built):
                effect = extracted_again(store, self.key, free, self.claimless)
            elif (again := extracted_again(store, self.key, free, self.claimless)).startswith(EVERY_CHUNK_EXTRACTED):
                effect = f"every chunk is extracted with {s.llm.extraction_model}{f' ({free})' if free else ''}"
            else:   # (its model's extractions stored: it said "every chunk is extracted with ..." of none;
                effect = again   # then "it was built offline: no chunk is extracted again (...)", two colons)
            changes.append(("extraction", effect))
        if resummarizes(store, s):
            changes.append(("summary", f"every merged description is summarized with {s.llm.summary_model}"
                            if offline else "every merged description is summarized again"))
        # (upgraded: no setting changed, but what report contexts show of claims; offline
        # returned above, so this is the report model's key, as the estimate's)
        reported, upgraded = _reports_redone(store, s)
        if reported and not upgraded:
            changes.append(("report", reported))
        # (those of the partition the run starts from: the model's an offline run kept, ``start_leiden``)
        if start_leiden(store, offline=False) not in (None, self.leiden_key):
            changes.append(("clustering", "it is clustered afresh"))
        if upgrade:
            self.say(f"{upgrade}: its files are read and chunked again as they are indexed "
                        "(chunks with new text are extracted)")
        if upgraded:
            self.say(f"{upgraded}: {reported}")
        if rewritten := extractive_redone(store, s):
            self.say(rewritten)
        self.settings_changed = names = [what for what, _ in changes] + (["chunking"] if upgrade else [])
        self.reading_upgraded = bool(upgrade)

        # (an index built offline was said "the extraction, summary and report settings changed
        # since this index was built" of a first run with a model, no setting changed: those are
        # said as the work of its building, told apart by their kind, not their words)
        def of_building(what: str) -> bool:
            return offline and what in ("extraction", "summary", "report")
        built = [effect for what, effect in changes if of_building(what)]
        changes = [(what, effect) for what, effect in changes if not of_building(what)]
        if changes:
            # (its text_field was said to be "the chunking settings")
            shown = ["reading and chunking" if name == "chunking" else name for name, _ in changes]
            named = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
            changed = f"the {named} settings changed since this index was built: " \
                      f"{'; '.join(effect for _, effect in changes)}"
        if built:
            self.say(f"this index was built offline: {'; '.join(built)}"
                     + (f"; and {changed}" if changes else ""))
        elif changes:
            self.say(changed)
        return "chunking" in names

    def _reading_upgraded(self, store: Store) -> bool:
        """Whether this run reads and cuts every document again because this streamrag reads or
        chunks them differently from the one that built the index, no setting changed."""
        built = store.get_meta("chunker")
        if built in (None, self.chunker_key, MIXED_CHUNKING):
            return False
        return not chunking_change(store.get_meta("chunker_settings"), self.chunking, built)[1]

    def report_key(self) -> str:
        """The report settings of this run (``reports.settings_key``): with a model or without."""
        return report_settings_key(self.settings, by_llm=not self.settings.offline)

    def extractive_key(self) -> str:
        """The settings of this run's extractive reports, with a model as without: published,
        as the model's report settings leave EXTRACTIVE_VERSION out."""
        return report_settings_key(self.settings, by_llm=False)

    # -- stage 1: scan, load, chunk, extract, glean (streaming) --------------------------------
    async def _stream_stage(self, store: Store, writer: Writer, paths: list[Path], *,
                            publishing: bool = True) -> Scan:
        """loader -> chunker -> extractor -> gleaner, joined by bounded streams."""
        s = self.settings
        scan, files, recut_all = await self._scan(store, writer, paths, publishing)
        self.progress.total("files", len(files))
        self.progress.set_stage("extracting")
        q = s.pipeline.queue_size
        doc_send, doc_recv = anyio.create_memory_object_stream[Document](q)
        chunk_send, chunk_recv = anyio.create_memory_object_stream[Chunk](q)
        glean_send, glean_recv = anyio.create_memory_object_stream[tuple[Chunk, Extraction]](q)
        check = self.yes_no = YesNoCheck(s)   # how the glean workers ask their YES/NO checks
        given = ExtractionStageContext(settings=s, root=self.root, progress=self.progress, llm=self.llm,
                                       prompts=self.prompts, key=self.key, fail=functools.partial(self.fail, writer))
        stage = ExtractionStage(given, store, writer, scan, recut_all, check, publishing=publishing)
        if publishing:
            self._unpublished = functools.partial(stage.not_indexed, files)
            # (named on the run's row now: a run killed with -9 records nothing at its end)
            def looked_at() -> list[str]:   # (each file looked at once: the loader takes the stats)
                stage.look_at(files)
                return stage.not_indexed(files, stage.looked)
            taking = sorted(await anyio.to_thread.run_sync(looked_at))
            lead = (self.lead_run, self.published_first[0]) \
                if self.lead_run is not None and self.published_first is not None else None
            await writer.run(lambda st: index_rows.note_taking(st, self.run_id, len(taking), taking[:NOT_INDEXED_NAMED],
                                                               lead))
        workers = 1 if s.offline else s.pipeline.extract_workers
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(stage.load_files, files, doc_send)
                tg.start_soon(stage.chunk_documents, doc_recv, chunk_send)
                with chunk_recv, glean_send:  # workers hold clones; the originals close here
                    for _ in range(workers):
                        tg.start_soon(stage.extract_chunks, chunk_recv.clone(), glean_send.clone())
                with glean_recv:
                    for _ in range(workers):
                        tg.start_soon(stage.glean_chunks, glean_recv.clone())
        finally:
            # (a prefetch's is said by the daemon, as yes_no's, failed or not: the chunks it
            # stored are not parsed again; a key refused part-way left it unsaid)
            self.claims_warning = stage.claims_warning()
        if check.warning:   # (a prefetch's is said by the daemon: ``yes_no``)
            scan.warnings.append(check.warning)
        if self.claims_warning:
            scan.warnings.append(self.claims_warning)
        return scan

    async def _scan(self, store: Store, writer: Writer, paths: list[Path],
                    publishing: bool) -> tuple[Scan, list[Path], bool]:
        """The scan to fill, with the indexed files this run keeps as they are; the files to
        load; and whether every document it reads is recut (the chunker changed: ``recuts_all``)."""
        s = self.settings
        scan = Scan()
        known = scan.indexed = index_rows.files(store)
        # Files outside the paths given this time stay as they are (`index one.txt` inside an
        # indexed folder adds or updates that file; it does not drop the others), unless they
        # were deleted: a stat each, which the daemon's extraction ahead of a sync (nothing
        # published) does without on every batch of changed files.
        scope = scan.scope = [loader.stored_path(p, self.root) for p in paths]
        scan.files.update({p: v for p, v in known.items()
                           if not on_disk.covered(p, scope) and (not publishing or on_disk.still_there(p, self.root))})
        # A changed reader or chunker (loader version, text_field, size, overlap, encoding)
        # re-reads and recuts every document of the scope (``none_left_to_recut``: of the index).
        recut_all = recuts_all(store, self.chunker_key)
        skipped: list[str] = []  # odd names, symlinks leading out of the folder
        unlisted: list[tuple[Path, str]] = []   # folders that could not be listed
        broken: list[Path] = []
        self.conflict_copies = []
        # The daemon's extraction ahead names files as they change: one deleted since is left to
        # the sync (a file saved and deleted at once said "extracting 1 file failed").
        files = loader.scan(paths, s.index.include, root=self.root, exclude=s.index.exclude, skipped=skipped,
                            unlisted=unlisted, left_out=scan.left_out, broken=broken,
                            gone=None if publishing else [], own=[*index_files(self.db_path), *s.own_files()],
                            copies=self.conflict_copies)
        self.broken_links = [loader.stored_path(p, self.root) for p in broken]
        files = without_index_files(files, self.db_path, also=s.own_files())
        # (files left as indexed are found, not read: a folder whose only file is one is not one without
        # files, which watch said "no file ... matches index.include" of)
        found = bool(files)
        left = self.left_with_links = self._left_with_links(files)
        if left:
            files = [f for f in files if loader.stored_path(f, self.root) not in left]
            scan.files.update({p: v for p, v in known.items() if loader.file_of(p) in left})
        # The new chunker is recorded only once every document has been recut with it:
        # `index one.txt` after a chunk_size change recuts that file, the next full run the rest.
        self.none_left_to_recut = not recut_all or all(on_disk.covered(p, scope)
                                                       and loader.file_of(p) not in left for p in known)
        scan.warnings += skipped
        for folder, why in unlisted:
            # What was indexed from a folder that cannot be listed now stays until it can.
            rel = loader.stored_path(folder, self.root)
            kept = {p: v for p, v in known.items() if on_disk.covered(p, [rel])}
            scan.files.update(kept)
            try:   # (a chmod that lets it be listed again changes it)
                stamp = on_disk.file_stamp(os.stat(folder))
            except OSError:
                stamp = on_disk.failure_stamp(folder)
            told = "; what was indexed from it stays" if kept else ", so its files are not indexed"
            await self.fail(writer, "load", rel, f"{loader.shown(folder if rel == '.' else rel)}: cannot list the folder ({why})"
                            f"{told}; {loader.unlisted_fix(why)}", stamp=stamp, kind="unlisted")
        if not found and not unlisted:   # (a folder that cannot be listed is said above)
            scan.warnings.append(nothing_found(paths, self.settings, self.db_path, self.root,
                                               refused=bool(known) and not self.folder_changed))
        return scan, files, recut_all

    def _left_with_links(self, files: list[Path]) -> set[str]:
        """The files of ``files`` (the scan's) this run leaves as indexed: ``left_as_indexed``,
        and those that are the same file as one of them (a symlink to it, its target, a hard
        link) or a symlink to one deleted since (``broken_links``), by their paths from the root. A link read while the file it leads to is left as
        indexed held the file in two versions, its text as indexed and as it is now, which no
        index of the folder ever does."""
        left = set(self.left_as_indexed)
        if not left:
            return left
        same = set()
        for rel in left:
            with contextlib.suppress(OSError, ValueError):   # (gone: renamed away, deleted)
                st = os.stat(self.root / rel)
                same.add((st.st_dev, st.st_ino))
        for path in files:
            with contextlib.suppress(OSError, ValueError):   # (gone since the scan: its sync says so)
                st = os.stat(path)
                if (st.st_dev, st.st_ino) in same:
                    left.add(loader.stored_path(path, self.root))
        # A symlink to one deleted since (the log removed while left as indexed) leads nowhere
        # now; the file it led to keeps its text, and so does the link (a fresh index of the
        # folder with that file as indexed reads the link as the file).
        root = os.path.realpath(self.root)
        for rel in self.broken_links:
            target = os.path.relpath(os.path.realpath(self.root / rel), root)
            if Path(target).as_posix() in self.left_as_indexed:
                left.add(rel)
        return left

    # -- stage 2: what changed -----------------------------------------------------------------
    def _changes(self, store: Store, scan: Scan) -> Change:
        old_docs = index_rows.document_ids(store)
        self._keep_previous_versions(store, scan, old_docs)
        new_docs = {doc_id for doc_id, _s, _m in scan.files.values()}
        doc_chunk_ids = index_rows.chunk_ids_of(store, new_docs - scan.doc_chunks.keys())
        for doc_id in new_docs & scan.doc_chunks.keys():
            doc_chunk_ids[doc_id] = [c.id for c in scan.doc_chunks[doc_id]]
        wanted = {c for cs in doc_chunk_ids.values() for c in cs}
        extracted = index_rows.extracted(store, wanted, self.key)
        old_live = index_rows.live_chunks(store)
        # A chunk counts with the current extractor's result; one that has none yet (its
        # extraction failed this time) keeps the result it was published with, so a failing
        # endpoint or a changed setting never drops what the index already holds.
        live_keys = {c: self.key for c in wanted & extracted}
        live_keys.update({c: old_live[c] for c in wanted - extracted if c in old_live})
        # A new chunk whose claims call failed counts with its entities and relationships alone
        # (``ExtractionStage.claims_failed``), until a run gets its claims.
        live_keys.update({c: self.claimless for c in self._claimless(store, wanted - extracted) if c not in old_live})
        live = set(live_keys)
        # A live chunk extracted anew by the run's extractor to the records it is published with
        # stays as it is (extraction settings changed, and changed back: each chunk was merged
        # again to the same rows, a version published of which extraction it is live with alone).
        same = index_rows.same_records(store, {c: old_live[c] for c, k in live_keys.items()
                                               if k == self.key and old_live.get(c, k) != k}, self.key)
        added = {c for c, k in live_keys.items() if old_live.get(c) != k} - same
        removed = {c for c, k in old_live.items() if live_keys.get(c) != k} - same
        keys = {c: live_keys[c] for c in added if live_keys[c] != self.key}
        return Change(
            added_docs=new_docs - old_docs, removed_docs=old_docs - new_docs, kept_docs=new_docs & old_docs,
            doc_chunks=doc_chunk_ids, live=live, added_chunks=added, removed_chunks=removed,
            extractions=index_rows.StoredExtractions(store, added, self.key, keys), keys=keys,
            rekeyed=dict.fromkeys(same, self.key), cut=new_docs & scan.doc_chunks.keys(), files=scan.files,
            retitled=retitled(scan.indexed, scan.files) if self.settings.offline else set())

    def _claimless(self, store: Store, chunk_ids: set[str]) -> set[str]:
        """Those of ``chunk_ids`` extracted but for their claims (``extractor.claimless_key``)."""
        return index_rows.extracted(store, chunk_ids, self.claimless) if self.claimless and chunk_ids else set()

    async def _fail_unaccounted(self, writer: Writer, scan: Scan, change: Change) -> None:
        """Records a failure for each chunk the version leaves out though no failure of this run
        says why: it has no stored extraction, and none was published before (a stage that dropped
        it, a prune by another indexer, a bug). Left out so without a word, it was counted nowhere
        (128 of 180 chunks published, every count agreeing; a document held back for it was said
        to have chunks that "could not be extracted", the run "ok"); recorded as a failed
        extraction is, the run says it, `status --failures` lists it, and the next sync extracts
        it again (a published document's backlog, ``ExtractionStage.chunk_documents``; a file held
        back is read again)."""
        left = unaccounted(change.doc_chunks, change.live)
        if not left and not self.held_back:
            return
        paths = index_rows.shown_paths(scan.files)
        for path, idx, chunk_id in [(p, c.idx, c.id) for p, c in self.held_back] + \
                [(paths.get(d, d), idx, c) for d, idx, c in left]:
            if chunk_id in self.failed_chunk_ids:   # (said by this run: ``fail`` adds each it records)
                continue
            await self.fail(writer, "extract", chunk_id,
                            f"{chunk_shown(path, idx, chunk_id)}: no extraction of it was "
                            "stored, and nothing said why; it is left out of this version, and the next "
                            "run extracts it again")

    async def _code_headings_read(self, store: Store, scan: Scan, change: Change) -> dict[str, bool]:
        """Fills in ``change`` whether each document indexed opens with code that reads as a
        heading (``Change.code_headings``): those this run read, and once, in an index without the
        mark, the kept ones opening with a heading (later, those left pending); returns those of
        these whose mark changes (``_code_headings_published``).
        Every run, a model's too: its mark is the next offline run's, which may leave as indexed
        a file whose text as indexed is gone (deleted, rewritten) and none could read again."""
        # (of the documents indexed: a new one none of whose chunks was extracted is left out)
        change.code_headings = {d: d in scan.code_headings for d in scan.documents if d in change.doc_chunks}
        # (an index published before they were marked: its documents opening so, read again)
        found = await self._code_headings_published(store, change)
        change.code_headings |= found
        return found

    def _join_bookkeeping(self, store: Store, scan: Scan, change: Change, found: dict[str, bool]) -> None:
        """Fills in ``change`` what an offline run's joins read of the documents beside their
        chunks: the titles of those it read (``Change.titles``), the kept ones whose titles now say
        another full name (``Change.retitled``; ``found``: those whose mark of opening with code,
        no heading, this run changes, ``_code_headings_read``) and those it cut into other chunks
        (``Change.recut``)."""
        change.titles = self._titles_read(scan)
        change.retitled |= titled_anew(store, change) | found.keys()
        # (found once: the check of nothing to redo and the joins' merge both read it)
        change.recut = frozenset(find_recut(store, change))

    def _titles_read(self, scan: Scan) -> dict[str, str]:
        """The titles of the documents this run read, as published (``index_rows._write_documents``:
        the title of the file each is shown with, ``index_rows.shown_paths``): ``Change.titles``.
        (Their files alone are looked at, in one pass, not sorted: most runs read a few.) A
        document whose shown file this run did not read (a copy of it read, with another front
        matter's title) keeps its published title, as ``_write_kept_documents`` keeps it."""
        read = {v[0] for p in scan.titles if (v := scan.files.get(p)) is not None} | scan.documents.keys()
        shown: dict[str, str] = {}
        for path, (doc_id, _size, _stamp) in scan.files.items():
            if doc_id in read and (doc_id not in shown or path < shown[doc_id]):
                shown[doc_id] = path
        return {d: t for d, path in shown.items() if (t := scan.titles.get(path))}

    async def _code_headings_published(self, store: Store, change: Change) -> dict[str, bool]:
        """Of an index without the mark of the documents opening with code that reads as a heading
        (no ``name_code_headings``: ``GraphState.code_headings``; published before it existed, or
        by older code's run with a model, which dropped it), the kept documents this run did not
        read whose first chunk opens with a heading naming someone (``_unmarked_headings``):
        whether each opens with code (``joins.code_heading``), read from the file it is shown
        with, as its chunk lost the indent, or guessed (``_opening_code``); returned for those
        whose mark this changes. Once: the run writes the mark; those of a file it leaves as
        indexed (``left_with_links``) not found (a busy log rewritten since) are left pending
        (``code_headings_pending``, meta ``name_code_headings_pending``), and the next runs read
        their files alone until each is found or gone (its file's own sync reads it).
        (Else "    # Ada Lovelace" kept titling its note after the upgrade, where a fresh index
        reads it as code; and a busy log left as indexed, not read, was titled by its code for
        the sync's joins, where a fresh index of the folder, the log as indexed, reads it as code.
        And while a busy log was not found the mark stayed unwritten: every sync read every
        headed note again.)"""
        marked = store.get_meta("name_code_headings")
        headed = self._unmarked_headings(store, change, marked)
        if headed is None:
            return {}
        out = await self._opening_code(store, headed)
        # (the marks this run changes, found or guessed: of an index without the mark, those
        # opening with code; of one pending, those whose mark an earlier run's guess set otherwise)
        was = set(msgspec.json.decode(marked, type=list[str])) if marked is not None else set()
        return {d: code for d, code in sorted(out.items()) if code != (d in was)}

    def _unmarked_headings(self, store: Store, change: Change, marked: str | None) -> dict[str, str] | None:
        """The documents ``_code_headings_published`` looks at, each with the full name its first
        chunk's heading says (``joins.heading_title``): the kept ones this run did not read, of an
        index without the mark (``marked``: meta ``name_code_headings``), else those left pending;
        None for an index with the mark and none pending. Read from the index alone."""
        unread = change.kept_docs - change.code_headings.keys()
        if marked is not None:
            pending = store.get_meta("name_code_headings_pending")
            if not pending:
                return None
            unread &= set(msgspec.json.decode(pending, type=list[str]))
        first: dict[str, set[str]] = {}
        for d in unread:
            if cs := change.doc_chunks.get(d):
                first.setdefault(cs[0], set()).add(d)
        return {d: title for chunk_id, text in index_rows.opening_headings(store, sorted(first))
                if (title := joins.heading_title(text)) is not None for d in first[chunk_id]}

    async def _opening_code(self, store: Store, headed: dict[str, str]) -> dict[str, bool]:
        """Whether each document of ``headed`` (``_unmarked_headings``) opens with code, and sets
        ``code_headings_pending``. A document is found in its file as it is now (its id), or, the
        file's one document, as the start of it (``_as_indexed``: a log appended to since).
        One not found (its text as indexed nowhere: ids are text hashes) is taken to open as its
        file's one document opens now where that opens with the same heading
        (``_opening_as_now``), else as a heading, no code: the likelier guess, a note's common
        opening. That guess is the mark of one whose file changed outside this run's paths or
        cannot be read now, and of one pending until the next run looks again."""
        paths = index_rows.document_paths(store) if headed else {}
        chars = index_rows.document_chars(store, headed) if headed else {}
        # (each file read once: the rows of a .jsonl or .csv are documents of one file, which was
        # read again for each of them)
        by_file: dict[Path | None, set[str]] = {}
        for doc_id in headed:
            by_file.setdefault(self._stored_file(paths.get(doc_id, "")), set()).add(doc_id)
        out: dict[str, bool] = {}
        guessed: dict[str, bool] = {}
        for file, doc_ids in by_file.items():
            texts = _as_indexed(doc_ids, chars, docs := await self._read_file(file))
            out.update((d, joins.code_heading(text)) for d, text in texts.items())
            guessed.update(_opening_as_now({d: headed[d] for d in doc_ids - texts.keys()}, docs))
        # (one read but not found, its file unreadable now or changed outside this run's paths,
        # is marked as guessed: waiting for it, every run read every headed file again; one of a
        # file left as indexed, its own sync reads it: until then each run looks for it again)
        self.code_headings_pending = sorted(d for d in headed.keys() - out.keys()
                                            if loader.file_of(paths.get(d, "")) in self.left_with_links)
        # (one neither found nor guessed opens with a heading, whatever an earlier run guessed of
        # it: each run's guess is its own, from the file as it is now)
        return {d: False for d in headed} | guessed | out

    async def _read_stored(self, path: str) -> list[Document]:
        """The documents of the file a stored ``path`` names, read now; none when it is gone or
        cannot be read (the run that meets it so says why)."""
        return await self._read_file(self._stored_file(path))

    def _stored_file(self, path: str) -> Path | None:
        """The file a stored ``path`` names (of a row, ``file#n``, its .jsonl or .csv file), None
        when it is gone."""
        return next((f for f in on_disk.stored_files(path, self.root) if on_disk.is_file(f)), None)

    async def _read_file(self, file: Path | None) -> list[Document]:
        """The documents of ``file`` (``_stored_file``'s), read now; none when it is None or cannot
        be read. A big one in a worker thread a stop ends (``read_apart``): read in the event loop,
        a 20 MB copy of a deleted file, read for its title, held the loop (signals, a daemon's
        lines and timers) 2.4 s, and a stop waited for it."""
        if file is None:
            return []
        try:
            docs, _ = await read_apart(file, file.stat(), root=self.root, text_field=self.settings.index.text_field)
        except (InputError, OSError):   # (its stat: as read_documents says it, unreadable)
            return []
        return docs

    async def _read_shown_titles(self, store: Store, scan: Scan, change: Change) -> None:
        """Reads the title of a kept document now shown by a file this run did not read (the copy
        shown before went away): the title and the path a document is shown with come from one
        file, as in a fresh index."""
        stored = index_rows.document_paths(store)
        for doc_id, path in index_rows.shown_paths(scan.files).items():
            if doc_id not in change.kept_docs or path == stored.get(doc_id) or path in scan.titles:
                continue
            scan.titles.update({d.path: d.title for d in await self._read_stored(path)})

    def _keep_previous_versions(self, store: Store, scan: Scan, old_docs: set[str]) -> None:
        """A document whose new chunks are not all extracted (their calls failed) stays indexed
        as it was: publishing the half that worked would drop what the old version said.

        - An edited file keeps its old size and stamp, so the next run reads it again and retries.
        - The same text recut (the chunk settings changed) keeps the chunks it is indexed
          with, and the new chunker is not recorded, so the next run cuts it again.
        - A new text none of whose chunks is extracted is left out, its files not recorded, so the
          next run reads them again. (It was published as a document no search could find, and
          counted as one: during an outage, each new file of a watched folder.)
        """
        before = scan.indexed   # nothing writes the files table before publish
        new_texts: dict[str, set[str]] = {}   # new texts -> their chunks (looked up at once, below)
        for path, (doc_id, _size, _stamp) in sorted(scan.files.items()):
            if doc_id not in scan.doc_chunks:
                continue
            old = before.get(path)
            recut = doc_id in old_docs
            chunk_ids = {c.id for c in scan.doc_chunks[doc_id]}
            if not recut and (old is None or old[0] not in old_docs):
                new_texts[doc_id] = chunk_ids   # a new file: nothing indexed to keep
                continue
            lacking = chunk_ids - index_rows.extracted(store, chunk_ids, self.key)
            lacking -= self._claimless(store, lacking)
            missing = len(lacking)
            if not missing:
                continue
            self.held_back += [(path, c) for c in scan.doc_chunks[doc_id] if c.id in lacking]
            if recut:
                del scan.doc_chunks[doc_id]
                self.none_left_to_recut = False
                scan.warnings.append(f"{path}: {missing} of its {len(chunk_ids)} chunks under the new chunk "
                                     "settings could not be extracted; it stays indexed as it was until they can")
            else:   # the file shows the old text, and with it the old title
                scan.files[path] = old
                self.failed_edited.add(doc_id)   # (a text, as documents_edited counts: two copies are one)
                title = index_rows.document_title(store, old[0])
                if title is None:
                    scan.titles.pop(path, None)
                else:
                    scan.titles[path] = title
                scan.warnings.append(f"{path}: {missing} of its {len(chunk_ids)} changed chunks could not "
                                     "be extracted; its previous version stays indexed until they can")
        done = index_rows.extracted(store, set().union(*new_texts.values()), self.key) if new_texts else set()
        done |= self._claimless(store, set().union(*new_texts.values()) - done) if new_texts else set()
        unread = {d for d, chunk_ids in new_texts.items() if chunk_ids and not chunk_ids & done}   # nothing extracted
        unread_chunks = {doc_id: scan.doc_chunks.pop(doc_id) for doc_id in unread}
        self.failed_added |= unread
        for path, (doc_id, _size, _stamp) in sorted(scan.files.items()):
            if doc_id in unread:
                self.held_back += [(path, c) for c in unread_chunks[doc_id]]
                del scan.files[path]
                scan.titles.pop(path, None)
                scan.warnings.append(f"{path}: none of its chunks could be extracted; it is indexed once they can be")

    def _graph(self, store: Store) -> GraphState:
        """The published graph: the one this process published last, if it is still the one
        in the store, else read from the store."""
        cached = self.graph_cache.take(store) if self.graph_cache is not None else None
        if cached is None:
            return GraphState.load(store)
        if self.check_shortcuts:
            check_cached(store, cached, GraphState.load(store))
        return cached

    # -- stage 3: summaries --------------------------------------------------------------------
    async def _summarize(self, writer: Writer, state: GraphState, jobs: list[tuple[str, str, list[str]]]) -> None:
        self.progress.total("summaries", len(jobs))
        send, recv = anyio.create_memory_object_stream[tuple[str, str, list[str]]](self.settings.pipeline.queue_size)
        counts = SentenceCounts(self.settings.index.encoding)   # (the stage's: let go when it ends)

        async def worker(recv) -> None:
            async with recv:
                async for element_id, name, descriptions in recv:
                    try:
                        text, state.answers[element_id] = await summarize(
                            self.llm, name, descriptions, self.settings, counts)
                        state.unusable.pop(element_id, None)
                    except LLMError as e:
                        state.answers[element_id] = None
                        message, settled = f"{name}: {e}", False
                        if isinstance(e, LLMOutputError):
                            # The model answered, and nothing it said was usable. Asked again on
                            # the next runs, up to UNUSABLE_RUNS in a row (a flaky gateway's
                            # garbage passes); then it would say the same on every run, each paid
                            # for. (An outage is asked again on the next run, however many.)
                            runs = state.unusable[element_id] = state.unusable.get(element_id, 0) + 1
                            settled = runs >= UNUSABLE_RUNS
                            if settled:
                                message += (f"; unusable on {runs} runs in a row, so it is not asked again "
                                            "while the summary settings and its mentions stay: its "
                                            "descriptions are joined")
                        if not settled:
                            state.fallbacks.add(element_id)
                        await self.fail(writer, "summarize", element_id, message, e, settled=settled)
                        text = extractive_summary(descriptions, self.settings.index.summary_max_tokens,
                                                  self.settings.index.encoding, counts)
                    state.set_description(element_id, text)
                    self.progress.add("summaries_done")

        async with anyio.create_task_group() as tg:
            with recv:
                for _ in range(1 if self.settings.offline else self.settings.pipeline.summary_workers):
                    tg.start_soon(worker, recv.clone())
            async with send:
                for job in jobs:
                    await send.send(job)

    # -- clustering: Leiden from the previous partition ----------------------------------------
    def _cluster(self, store: Store, state: GraphState) -> tuple[list[Community], bool, Callable[[], int]]:
        """Leiden from the previous partition (the published one, or the model's an offline run
        kept: ``warm_start``), unless it drifted from what a fresh run finds.

        Starting from the previous partition keeps untouched regions (and their reports) as
        they are. Over many updates that partition could settle in a worse optimum than a fresh
        run would find, so a fresh clustering is computed too (cheap next to any LLM call) and
        replaces it, with ids still matched to the old communities, when its modularity is
        better by more than ``index.recluster_drift`` (or always, with ``--recluster``).
        """
        ix = self.settings.index

        @functools.cache   # (not made for a graph that did not change: the published partition is kept)
        def edges() -> list[tuple[str, str, float]]:
            return [(r.source, r.target, r.weight) for r in state.relationships.values()]

        start = warm_start(store, state, offline=self.settings.offline)
        in_use = itertools.chain(state.old_communities, start.previous)
        counter = [next_community_number(store.get_meta("next_community_id"), (c.id for c in in_use))]

        def new_id() -> str:
            counter[0] += 1
            return f"C{counter[0] - 1}"

        # Splits of communities no change reached are taken as they were (when the previous
        # partition was made with these settings): most of a warm run's time on a large graph.
        changed = None
        if not start.kept and start.leiden == self.leiden_key:   # (a kept partition's graph is not)
            changed = state.rewired | state.new_entities()
            if self.check_shortcuts:
                check_rewired(store, state, changed)

        def graph() -> GraphEdges:
            made = state.clustered_graph(store)   # (made from the published one's, when kept)
            if self.check_shortcuts and not made.same(GraphEdges.of(sorted(state.entities), edges())):
                raise AssertionError("the graph made from the published one's differs from one made anew")
            return made

        def cluster(previous):
            out = hierarchical_leiden(sorted(state.entities), graph(), max_cluster_size=ix.max_cluster_size,
                                      seed=ix.leiden_seed, resolution=ix.leiden_resolution,
                                      previous=previous, new_id=new_id, changed=changed)
            if self.check_shortcuts and previous and changed is not None:
                spare = itertools.count()
                full = communities_module.hierarchical_leiden(
                    sorted(state.entities), edges(), max_cluster_size=ix.max_cluster_size, seed=ix.leiden_seed,
                    resolution=ix.leiden_resolution, previous=previous, new_id=lambda: f"X{next(spare)}")
                if {(c.level, tuple(c.members)) for c in full} != {(c.level, tuple(c.members)) for c in out}:
                    raise AssertionError("communities taken as unchanged differ from a full warm run")
            return out

        state.leiden_key = self.leiden_key  # published with the partition, whichever path made it
        if not start.previous:   # (clustered, not re-clustered: there was no partition to replace)
            self.clustered_first = True
            return cluster(None), False, lambda: counter[0]
        # New clustering settings (resolution, seed, max_cluster_size) ask for the partition a
        # fresh run finds with them: a warm start would keep much of the old settings' one.
        recluster = self.recluster or start.leiden not in (None, self.leiden_key)
        # (after this command's own lead made the first partition, of its small files only: the
        # partition a first index finds, ids matched to the lead's; not a re-clustering it reports)
        first = self.fresh_after_lead and not recluster and not start.kept
        # (from a model's partition an offline run kept, what changed since is not this run's
        # changes, which are from the offline graph: every entity)
        moved = moved_since(start.previous, state.entities) if start.kept else \
            len(state.changed_entities | state.deleted_entities)
        communities, reclustered, state.changed_since_fresh = updated_partition(
            start.previous, warm=cluster,
            fresh=lambda: hierarchical_leiden(sorted(state.entities), graph(),
                                              max_cluster_size=ix.max_cluster_size,
                                              seed=ix.leiden_seed, resolution=ix.leiden_resolution),
            edges=edges, resolution=ix.leiden_resolution, drift_allowed=ix.recluster_drift,
            entities=len(state.entities), since_check=start.since_check, changed=moved,
            same_graph=not start.kept and state.same_graph() and start.leiden == self.leiden_key,
            recluster=recluster or first, new_id=new_id)
        return communities, reclustered and not first, lambda: counter[0]

    # -- stage 4: reports, deepest level first -------------------------------------------------
    async def _reports(self, store: Store, writer: Writer, state: GraphState,
                       communities: list[Community]) -> tuple[dict[str, tuple[str, str]], int, int]:
        """Report key per community: (context key, key of the report shown); the counts
        written and kept."""
        given = ReportStageContext(settings=self.settings, progress=self.progress, llm=self.llm,
                                   report_key=self.report_key(), extractive_key=self.extractive_key(),
                                   check_shortcuts=self.check_shortcuts, fail=functools.partial(self.fail, writer))
        run = ReportStage(given, store, writer, state, communities)
        for level in deepest_first(communities):   # a parent's context takes its children's reports
            await run.report_level(level)
        self.reports_written, self.reports_kept = run.written, run.kept_reports
        return run.assignments, run.generated, run.kept

    # -- stage 5: embeddings -------------------------------------------------------------------
    async def _embed(self, store: Store, writer: Writer, state: GraphState, change: Change) -> list[tuple]:
        """Vectors for what changed; written by ``publish`` with the rows they describe."""
        model = self.settings.llm.embedding_model
        if not self.settings.embeds or self.llm is None:
            return []
        from streamrag.embeddings import embed_missing

        try:
            return await embed_missing(self.llm, store, model, state, change)
        except LLMError as e:
            await self.fail(writer, "embed", model, f"embeddings with {model}: {e}")
            return []

    # -- publishing: what is published with the version, for the next run ----------------------
    def _marks(self, state: GraphState) -> dict[str, str]:
        """What a query reads of the index beside its rows, published with the version: the short
        names joined to full names (the next run's, and ask's: ``question._joined_named``)."""
        if state.joins is None:
            return {}
        return {"name_joins": msgspec.json.encode(state.joins).decode()}

    def _settings_marks(self, state: GraphState, next_community_id: int) -> dict[str, str]:
        """The settings and counters the index was built with, for the next run to compare. No
        query reads them (ask reads of ``extractor`` only whether a model built the index, which
        its rows show as well), so they are bookkeeping: settings changed and changed back
        redo the summaries or contexts to the rows published (summary_max_tokens 150 -> 100 ->
        150 through the simulator: the same entities, relationships, claims, communities and
        reports), and published versions 2 and 3 made of these marks alone."""
        return {
            "extractor": self.key,
            # (the key a chunk whose claims call gave up is published with: ``status`` counts them
            # by it, "" with claims off; by the failures recorded, it counted a chunk kept from
            # before, and none once they were pruned)
            "extractor_claimless": self.claimless or "",
            "summarizer": self.summarizer_key,
            "report_settings": self.report_key(),
            "extractive_settings": self.extractive_key(),
            "leiden": state.leiden_key,
            "changed_since_fresh": str(state.changed_since_fresh),
            "degrees": DEGREES_VERSION,
            "next_community_id": str(next_community_id),
            "claim_ends": "entities",   # (a claim's subject and object are entities: GraphState.stranded)
        }

    def _reading_marks(self) -> dict[str, str]:
        """How the index's documents were read and chunked (``chunker``, ``chunker_settings``),
        for the next run to tell whether it cuts them again: none when this run left some with
        the previous chunker's chunks."""
        if self.none_left_to_recut:  # else some documents still have the previous chunker's chunks
            return {"chunker": self.chunker_key, "chunker_settings": json.dumps(self.chunking, sort_keys=True)}
        if self.chunking_mixed:
            # ... and others these settings' (a run given only some files, a recut that could
            # not be extracted): the next run cuts every document again, whichever settings it
            # has. (The mark stayed the old settings', and back on them the documents cut with
            # the new ones kept their chunks.)
            return {"chunker": MIXED_CHUNKING, "chunker_settings": json.dumps(self.chunking, sort_keys=True)}
        return {}

    def _bookkeeping(self, store: Store, state: GraphState, next_community_id: int) -> dict[str, str | None]:
        """The settings the index was built with (``_settings_marks``), the summaries to try
        again, the answers unusable on runs in a row and the report_min_members the reports were
        chosen with, for the next run and its estimate to go on from (written with the index, but
        no part of a version: no query reads them). And the
        folder the files table's paths are relative to, as that table is: a copy of an indexed
        folder with its index (``cp -r notes copy``) published a version of the new folder's name
        alone, its graph as it was. And how the documents were read (``_reading_marks``): a new
        reader or chunker that cuts them anew into other text or chunks publishes those, a
        version; one that reads every file to the same text changes no row a query reads (an
        upgrade's loader VERSION published version 2 of an unchanged folder, its graph as it was).
        And the model's partition an offline run of its index keeps (``partition_to_keep``)."""
        counts: dict[str, str | None] = {"report_min_members": str(self.settings.index.report_min_members),
                  "summary_fallbacks": msgspec.json.encode(sorted(state.fallbacks)).decode(),
                  "summary_unusable": msgspec.json.encode(state.published_unusable()).decode(),
                  "report_unusable": msgspec.json.encode(dict(sorted(state.report_unusable.items()))).decode(),
                  "report_unusable_held": msgspec.json.encode(dict(sorted(state.report_held.items()))).decode()}
        if self.root is not None:
            counts["root"] = str(Path(self.root).resolve())
        # (marked by every run, a model's too: ``_code_headings_read``; those it could not mark, to
        # look at again, beside: ``_code_headings_published``)
        counts["name_code_headings"] = msgspec.json.encode(sorted(state.code_headings)).decode()
        counts["name_code_headings_pending"] = msgspec.json.encode(self.code_headings_pending).decode() \
            if self.code_headings_pending else None
        if state.joins is not None:
            # The rule the joins were made by (a query reads the joins alone): an index joined by
            # an earlier rule to the joins this one makes published version 2 of its mark alone.
            counts["name_joins_rule"] = joins.RULE
        counts.update(partition_to_keep(store, state, offline=self.settings.offline))
        return {**self._settings_marks(state, next_community_id), **counts, **self._reading_marks()}


def next_community_number(published: str | None, ids: Iterable[str]) -> int:
    """The number of the next community made: past the one published (``next_community_id``)
    and past every community id in use ("C" and a number)."""
    n = int(published or 0)
    for cid in ids:
        digits = cid.lstrip("C")
        if digits.isdigit():
            n = max(n, int(digits) + 1)
    return n


async def sync(paths: list[Path], settings: Settings, db_path: Path, *, root: Path | None = None,
               progress: Progress | None = None, command: str = "index", transport=None,
               recluster: bool = False, graph_cache: GraphCache | None = None) -> SyncResult:
    """Bring the index at ``db_path`` to the documents under ``paths`` (one published version)."""
    indexer = Indexer(settings, db_path, root=root, progress=progress, command=command,
                      transport=transport, recluster=recluster, graph_cache=graph_cache)
    return await indexer.run([Path(p) for p in paths])

