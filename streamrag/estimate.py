"""``streamrag index --estimate``: the calls and tokens a run would need, before spending any.

Extraction prompts are counted exactly (each new chunk's request is the one the run sends:
``extractor.extraction_request``), from the chunker's count of the chunk and the template's parts
counted once (``tokens.count_prompt_tokens``: exact, where the tokenizer cannot join them).
What depends on the model's answers is estimated, and said to be: completion length (about 0.8
of the chunk for the first round, 0.45 for a gleaning) and how often the gleaning check says yes
(7 times in 10), from fixed ratios (``estimate_ratios``, where each is measured); or, on an index whose own calls measure
them (``estimate_ratios``: 20 calls of a stage with the model the run asks), from those, and said
to be (``ratios_from`` in --json). Summaries and reports:

* A first index: worked out as the run works it out (``first_graph``), on the offline
  extractor's names for every chunk (``nlp``, no call): merged into a graph in memory, the
  run's clustering, a report for each community of index.report_min_members or more; the
  summaries of each kind and the reports scaled by how many more or fewer a model's extraction
  asks (fixed stand-in ratios measured through the simulator: ``estimate_ratios``). Past
  ``FIRST_SAMPLE`` chunks a sample is worked out and scaled (``_first_index``). (Counted per
  chunk, 2.5 summaries and 0.6 reports, a 200-document corpusgen corpus was estimated 157
  reports for the run's 43, 655 summaries for 376; now 29 and 321.)
* An index already there (or chunks extracted by a run that never published, interrupted or
  still under way, or whose extraction the index holds is another's, an offline run's since:
  their summaries and reports come only with the run that publishes them): the
  run's own work is done on a copy of the graph, read only (``_update_calls``): the changed
  chunks merged in (``GraphState.apply``), the run's clustering step (Leiden from the
  published partition, or a fresh clustering when it drifted by more than
  index.recluster_drift: ``_partition``), and the communities whose report context changes,
  with those above them (new communities among them), but those whose context comes out as a
  stored report's, or close enough to the one it had (index.report_regen_threshold: ``_kept_close``)
  (the run keeps that report). Each report's prompt is its
  community's context as the run builds it from the members' lines (``_report_prompt``); a
  report not worked out on the graph (a first index, reports asked again) a full context. A chunk extracted already
  counts with its stored extraction; one not yet extracted with the offline extractor's names
  (``nlp``, no call) standing in for the model's, described as long as the model describes a
  name on this index (``_as_long``: the offline extractor quotes two sentences) (the summaries of their names and pairs
  scaled by how many more or fewer a model's extraction asks on the index's own documents,
  replayed both ways: ``_stand_in_ratios``), and, in a changed file, with what the earlier
  chunks it shares a passage with said of the names it still holds (``_stand_in``). So a new chunk naming entities the
  index holds counts their summaries written again and their communities' reports, a deleted
  file those of what it named. On the bench corpora (synth_small, A Christmas Carol, corpusgen
  ones) this came within a quarter of the run's summaries and reports for files added or
  deleted. An edited file's chunks are told from what the model said of them by sentence: the
  names of its new sentences are said anew where the chunk names them first, a name it named
  before keeping what the model said of it (synth_small, one-word edits, a sentence appended, a
  name replaced throughout: the run's reports, or 4 for its 2 where a `sed` put a full name
  for a title, whose first mention the simulator's reading keeps; a sentence appended had 3
  summaries for the run's 0, each name it said counted described anew).
* The reports of the published communities a run asks for again whatever changed are counted
  from the index (``_reports_asked``): after a new report_min_members or new clustering
  settings, those of contexts that change, not every one.

Its ``llm`` object has the shape a run's has (``status.llm_summary``) and the same meanings, so
the two compare stage by stage: ``calls`` includes the answers already in the cache (an
interrupted run's, or one with other settings since) that the run asks for as the estimate can
tell it (a new chunk's first round, then its gleanings and claims as far as the cache answers
them; the summaries and reports of an update worked out on the graph), which are also counted in
``cached`` and cost no tokens; ``errors`` are the answers cut off
(or unusable) and asked again, as often per paid call as on this index (``Ratios.again``: none
on a first index); other failures are not predicted.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import logging
import math
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec

from streamrag import chunker, ids, index_rows, loader, nlp
from streamrag.answer_cache import AnswerCache
from streamrag.cache import cache_key
from streamrag.call_log import UNUSABLE_RUNS
from streamrag.chunking_marks import check_not_newer, chunker_key, recuts_all, reading_change
from streamrag.communities import hierarchical_leiden, updated_partition
from streamrag.communities import settings_key as leiden_key
from streamrag.config import Settings
from streamrag.estimate_ratios import (CLAIMS_COMPLETION, FIRST_ENTITY_SUMMARIES, FIRST_RELATIONSHIP_SUMMARIES,
                                       FIRST_REPORT_PROMPT, FIRST_REPORTS, FIRST_ROUND_COMPLETION, GLEAN_COMPLETION,
                                       MIN_CALLS, SUMMARY_COMPLETION, Ratios, calls_of_models, cut_shares, grown_union,
                                       ratios, stand_in)
from streamrag.errors import (EmptyInput, IndexMissingError, InputError, NoTextField, StoreError, UnreadableFile,
                              said_kind)
from streamrag.extractor import (ExtractionPrompts, claimless_key, claims_messages, entity_types_text,
                                 extraction_request, extractor_key)
from streamrag.gleaner import check_messages, glean_messages, merge_round, yes_no_bias
from streamrag.graph_state import (Change, GraphState, KeptSettings, dirty_communities, document_changes,
                                   kept_partition, moved_since, start_leiden, stranded_chunks, warm_start)
from streamrag.llm import request_options
from streamrag.merge import descriptions_after, mentions_of, unique_descriptions
from streamrag.on_disk import change_stamp, covered, file_names, retimed, same_on_disk, still_there
from streamrag.parsing import parse_records, parse_yes_no, read_claims, usable_extraction
from streamrag.pipeline import (EVERY_CHUNK_EXTRACTED, check_not_downgraded, claims_asked,
                                extracted_again, extractive_redone, nothing_found, replaced_model_work,
                                reports_redone, resummarizes)
from streamrag.prompts import load_prompt
from streamrag.report_stage import (built_min_members, children_of, claims_by_end, close_enough, deepest_first,
                                   names_withdrawn, report_attempt)
from streamrag.reports import (ReportContext, answered_report, build_context, claim_lines_redone, context_key,
                               extractive_report)
from streamrag.records import (Chunk, Claim, ClaimRecord, Community, Extraction, Relationship, RelationshipRecord,
                               Report)
from streamrag.sentences import sentences_of
from streamrag.status import llm_summary, unusable_said
from streamrag.store import (Store, alive, as_it_lies, index_files, older_schema, read_only_here,
                             reader_in_place, without_index_files)
from streamrag.summarizer import (SUMMARY_HEADROOM, asks_model, new_summary_input, summary_input, summary_messages,
                                  within_budget, without_model)
from streamrag.terminal import shell_word
from streamrag.tokens import count_message_tokens, count_prompt_tokens, truncate
from streamrag.words import counted


# The list of what was found, which the estimate cannot know: names alone in a gleaning check,
# names and relation pairs in a gleaning (simulator, first indexes: gleaning prompts ~215 tokens
# longer than rendered with the 120 of a check, on all three corpora).
FOUND_LIST_TOKENS = 120
GLEAN_FOUND_TOKENS = 335

log = logging.getLogger(__name__)


def estimate(paths: list[Path], settings: Settings, db: Path, *, root: Path | None,
             recluster: bool = False) -> dict:
    """``recluster``: of a run with ``--recluster``."""
    _remove_left_copies(Path(tempfile.gettempdir()))
    with contextlib.ExitStack() as stack:
        store = _published(db, stack)
        if store is not None:
            stack.callback(store.close)
        result = _estimate(paths, settings, store, root=root, db=db, recluster=recluster)
    result["warnings"] += _named_exports(paths, root)
    return result


def _named_exports(paths: list[Path], root: Path | None) -> list[str]:
    """What `index` says of each file named that `streamrag export` wrote: it leaves it out, and
    says so each time it is named (``ExtractionStage.load_files``), in the loader's words.
    ``_estimate`` says no export (one in the folder was named on every estimate): `index
    --estimate x.txt` of an export said nothing of it."""
    said = []
    for path in paths:
        if path.is_file() and loader.written_by_export(path):
            try:
                loader.read_documents(path, root=root)
            except loader.WrittenByExport as e:
                said.append(str(e))
    return said


def _published(db: Path, stack: contextlib.ExitStack) -> Store | None:
    """The index at ``db`` opened as a reader (the estimate spends nothing and writes nothing),
    or None when there is none yet: no file, or an empty one ``index`` would make it in. One an
    older streamrag made is left as it is: read in place where its upgrade would change no row of
    it (``reader_in_place``), else from an upgraded copy (``_upgraded_copy``)."""
    if not db.exists():
        return None
    try:
        if older_schema(db):
            return reader_in_place(db) or _upgraded_copy(db, stack)
        return Store(db, readonly=True)
    except IndexMissingError:
        return None


# An older index's upgraded copy is made in the temporary folder, in a folder of its own named
# COPY_PREFIX + the estimate's PID + "-...", which holds COPY_LOCK locked as long as the estimate
# runs (``_held``). A killed estimate (SIGKILL, a power cut) leaves it: the index's size, held in
# RAM where /tmp is a tmpfs. The next estimate removes it (``_remove_left_copies``).
COPY_PREFIX = "streamrag-estimate-"
COPY_LOCK = "estimating"
# A copy's folder no lock tells of (an earlier streamrag's, or an estimate killed as it made
# the folder) is removed this long after it was last written.
UNLOCKED_COPY_S = 24 * 3600


def _upgraded_copy(db: Path, stack: contextlib.ExitStack) -> Store:
    """The index at ``db``, made by an older streamrag, copied (SQLite's backup: its write-ahead
    log too) into a folder of its own, removed at ``stack``'s end, and upgraded there: an
    estimate writes nothing. Opened as ``Store(db, readonly=True)`` opens it, it was upgraded on
    disk, the file changed by a command that spends nothing (the run upgrades it, once)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{os.getpid()}-"))
    stack.callback(shutil.rmtree, folder, ignore_errors=True)
    _held(folder, stack)
    copy = folder / "index.db"
    # (`index` was advised: a run, paid, of a user who only wanted it priced; status spends nothing)
    status = f"streamrag status --db {shell_word(db)}"
    try:
        with as_it_lies(db) as source, contextlib.closing(sqlite3.connect(copy)) as target:
            source.backup(target)
    except sqlite3.Error as e:   # (not upgraded where it lies in its stead: the estimate writes nothing)
        raise StoreError(f"{db} was made by an older streamrag, and the upgraded copy an estimate reads could "
                         f"not be made in {folder.parent} ({e}); free space there (or set TMPDIR to a folder "
                         f"with room), or run `{status}` once to upgrade the index (no LLM call)") from None
    # (the copy's upgrade is no upgrade of the index: its "upgrading the index at ..." not said)
    with _quiet(logging.getLogger("streamrag.store")):
        store = Store(copy)
    # (said once the copy is made: said before, "estimated on an upgraded copy" stood above the
    # error that no copy could be made; its size unsaid, the index's, in RAM on a tmpfs /tmp)
    log.warning("%s was made by an older streamrag: estimated on an upgraded copy (%s in %s, removed after); "
                "the index is left as it is (%s)", db, _megabytes(_bytes_in(folder)), folder.parent,
                _how_to_upgrade(db, status))
    return store


def _how_to_upgrade(db: Path, status: str) -> str:
    """How the user upgrades the older index at ``db`` once: ``status`` where it lies, or, where
    no run may write it (read-only media, an immutable file or folder), a copy where they may."""
    why = read_only_here(db)
    if why is None:
        return f"`{status}` upgrades it, once, with no LLM call; so does `index`"
    # (as store's refusals of an index no reader could upgrade say it: status there would fail too)
    return (f"it cannot be upgraded where it lies ({why}): copy it to a folder you may write and run "
            "`streamrag status --db COPY` once there, with no LLM call, then use the copy")


def _held(folder: Path, stack: contextlib.ExitStack) -> None:
    """Locks ``folder``'s COPY_LOCK until ``stack``'s end: another estimate tells by it that the
    copy is still read where the PID means nothing (another container sharing /tmp). Made under
    another name and renamed once locked, so that it is never seen unlocked."""
    try:
        import fcntl
    except ImportError:   # (Windows: the PID alone tells)
        return
    made = folder / f"{COPY_LOCK}.new"
    fd = os.open(made, os.O_WRONLY | os.O_CREAT, 0o600)
    stack.callback(os.close, fd)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(made, folder / COPY_LOCK)


def _remove_left_copies(temp: Path) -> None:
    """Removes from ``temp`` the upgraded copies estimates killed before their end left there
    (``_upgraded_copy``), said on stderr. Never a live estimate's: one is removed only when its
    PID runs no process here and its COPY_LOCK is not held, or, with no lock in it (an earlier
    streamrag's copy), when it was not written for UNLOCKED_COPY_S; never another user's."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    try:
        folders = [f for f in temp.glob(f"{COPY_PREFIX}*") if not f.is_symlink() and f.is_dir()
                   and (uid is None or f.stat().st_uid == uid)]
    except OSError:
        return
    for folder in folders:
        pid, dash, _ = folder.name[len(COPY_PREFIX):].partition("-")
        if dash and pid.isdigit() and alive(int(pid)):
            continue
        size = None
        with contextlib.ExitStack() as stack, contextlib.suppress(OSError):   # (one gone meanwhile)
            try:
                fd = os.open(folder / COPY_LOCK, os.O_WRONLY)   # (written to: a lock over NFS needs it)
            except FileNotFoundError:
                if time.time() - _last_written(folder) < UNLOCKED_COPY_S:
                    continue
            except OSError:
                continue
            else:
                stack.callback(os.close, fd)
                try:
                    import fcntl
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except ImportError:
                    pass
                except OSError:   # (held: still read, by an estimate whose PID means nothing here)
                    continue
            size = _bytes_in(folder)
            shutil.rmtree(folder, ignore_errors=True)
        if size is not None and not folder.exists():
            log.warning("removed %s, an older index's upgraded copy (%s) that an estimate stopped before its end "
                        "left", folder, _megabytes(size))


def _bytes_in(folder: Path) -> int:
    """The bytes of the files in ``folder`` (none below it)."""
    total = 0
    for f in folder.iterdir():
        with contextlib.suppress(OSError):
            total += f.stat().st_size if f.is_file() else 0
    return total


def _last_written(folder: Path) -> float:
    """When ``folder`` or a file in it was last written."""
    times = [folder.stat().st_mtime]
    for f in folder.iterdir():
        with contextlib.suppress(OSError):
            times.append(f.stat().st_mtime)
    return max(times)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


@contextlib.contextmanager
def _quiet(logger: logging.Logger):
    """``logger``'s warnings left unsaid meanwhile."""
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


def _estimate(paths: list[Path], settings: Settings, store: Store | None, *, root: Path | None,
              db: Path, recluster: bool) -> dict:
    done: set[str] = set()        # extracted with the current extractor
    published: set[str] = set()   # and in the published graph with that extraction
    live: dict[str, str] = {}     # the published chunks -> the extractor whose result counts
    r = Ratios()                  # what depends on the answers: fixed, or this index's own
    model_calls = 0               # the calls of the run's models the index holds, however few
    if store is not None:
        check_not_downgraded(settings, store, db)   # the run would refuse: so does its estimate
        check_not_newer(store, db)
        ix = settings.index
        # (the stages this run asks: another's figures, unused, are not said measured)
        asks = {"extract", "summarize", "report"} | ({"claims"} if ix.extract_claims else set()) | (
            {"glean"} if ix.max_gleanings else set()) | (
            {"glean_check"} if ix.max_gleanings and ix.glean_check != "off" else set())
        history = {key: h for key, h in index_rows.call_history(store).items() if key[0] in asks}
        r = ratios(history, extraction_model=settings.llm.extraction_model,
                   summary_model=settings.llm.summary_model, report_model=settings.llm.report_model,
                   unchecked=index_rows.unchecked_answers(store),
                   rounds=index_rows.gleaning_rounds(store, extractor_key(settings)), max_gleanings=ix.max_gleanings,
                   stopped=index_rows.gleanings_stopped(store, extractor_key(settings), ix.max_gleanings),
                   later=index_rows.later_checks(store, _gleaning_keys(settings)),
                   unusable=index_rows.unusable_answers(store),
                   report_answers=index_rows.report_answers(store, settings.llm.report_model))
        model_calls = calls_of_models(history, extraction_model=settings.llm.extraction_model,
                                      summary_model=settings.llm.summary_model,
                                      report_model=settings.llm.report_model)
        done = index_rows.extracted_with(store, extractor_key(settings))
        published = index_rows.published_with(store, extractor_key(settings))
        live = index_rows.live_chunks(store)
    ix = settings.index
    new_chunks = {}
    unpublished: set[str] = set()   # extracted, but not yet merged, summarized and reported
    replacing: set[str] = set()     # extracted, the graph holding another extractor's result
    wanted: set[str] = set()        # every chunk of the documents read
    read: set[str] = set()          # the files read (or tried), as the index names them
    paths_of: dict[str, str] = {}   # document (distinct text) read -> its path
    # every path read -> (its document, size, change stamp), as the run's scan has it (copies
    # too: an edit, and a file read again, are told by its path)
    scanned: dict[str, tuple[str, int, float]] = {}
    restamped: set[str] = set()     # the indexed paths of files read as indexed but for a new status-change time
    unread: set[str] = set()        # the files read in vain whose indexed documents `index` keeps
    unlisted: list[tuple[Path, str]] = []
    corpus_tokens = unreadable = 0
    unreadable_kinds: dict[str, int] = {}   # (by what is true of them, as `index` says them: ``unusable_said``)
    too_big = 0   # (of them, the files over index.max_file_mb: said so, as `index` says them)
    indexed = index_rows.files(store) if store is not None else {}
    rows_of: dict[str, dict[str, tuple[str, int, float]]] = {}   # a file's rows, as the run finds them
    for p, v in indexed.items():
        for name in file_names(p):
            rows_of.setdefault(name, {})[p] = v
    # What the scan leaves out, for the command line to say as `index` says its warnings (they
    # were logged here, "streamrag: x.txt: broken symlink ...", without its "warning: ").
    skipped: list[str] = []
    left_out: dict[str, int] = {}   # (the files index.include leaves out, said as `index` says them)
    found = loader.scan(paths, ix.include, root=root, exclude=ix.exclude, skipped=skipped, unlisted=unlisted,
                        left_out=left_out, own=[*index_files(db), *settings.own_files()])
    unlisted_said = [loader.unlisted_line(folder, why, root) for folder, why in unlisted]
    failed: list[str] = []   # the files it cannot use, each said as `index` says it (after its folders)
    # The files with nothing to index, and what reading the others warns of ("not valid UTF-8,
    # read as cp1252", "1 NUL character dropped"), said as `index` says them: after the scan's
    # lines, file by file.
    read_said: list[str] = []
    found = without_index_files(found, db, also=settings.own_files())   # (as `index` does)
    if not found and not unlisted:   # (said as `index` says it: it said nothing)
        skipped.append(nothing_found(paths, settings, db, root, refused=bool(indexed)))   # (as `index`)
    # The files as indexed, which the run does not even read (``ExtractionStage.load_files``), nor
    # so warns of: their documents kept as the index holds them, not read and cut again, their
    # tokens as the index holds them (documents.tokens: its chunks', overlaps too; the text's own
    # count is not kept). A file read counts its document so too, the tokens of its chunks as
    # cut here, those the run stores: one measure whether a file is read or not (a `cp -a` of
    # ten articles, each read again for its new status-change time, said 9,613 tokens for 9,806).
    rereads = store is not None and recuts_all(store, chunker_key(settings))
    unchanged: set[str] = set()
    # the tokens of each chunk cut here that the current extractor extracted already (a chunk id
    # is its text's digest: the stored chunk's count in this encoding, ``_gleaned_near``'s below)
    cut_done: dict[str, int] = {}
    for path in found:
        stored = loader.stored_path(path, root)
        read.add(stored)
        rows = rows_of.get(stored, {})
        st = _stat(path)   # (taken once, as the run's loader; None: the loader says why it cannot read it)
        if not rereads and _unchanged(st, rows):
            read.update(rows)
            unchanged.update(doc_id for doc_id, _size, _stamp in rows.values())
            continue
        try:
            documents, warnings = loader.read_documents(path, root=root, text_field=ix.text_field, st=st,
                                                        max_mb=ix.max_file_mb)
        except EmptyInput as e:   # nothing to index: a warning in `index`, not a file it cannot read
            if e.again:   # (not an export, which `export` writes into the folder: it was named on every estimate)
                read_said.append(str(e))
            continue
        except InputError as e:
            unreadable += 1
            said = said_kind(e.kind)
            unreadable_kinds[said] = unreadable_kinds.get(said, 0) + 1
            too_big += e.kind == loader.TooBig.kind
            # a file the system would not read, or one as indexed whose rows lack the field
            # named now: what was indexed stays
            if isinstance(e, UnreadableFile) or isinstance(e, NoTextField) and _unchanged(st, rows):
                unread.add(stored)
            failed.append(loader.failure_line(loader.shown(stored), e, kept=stored in unread and bool(rows)))
            continue
        read_said += warnings
        # (a file whose stat failed, read all the same, is taken for one changed on disk)
        size, stamp = (st.st_size, change_stamp(st)) if st is not None else (-1, -1.0)
        if st is not None and retimed(rows, st):   # (as indexed but for a new status-change time: `cp -a`)
            restamped.update(rows)
        for doc in documents:
            read.add(doc.path)
            scanned[doc.path] = (doc.id, size, stamp)
            if doc.id in paths_of:
                continue   # the same text in another file (a copy): one document, as `index` counts
            paths_of[doc.id] = doc.path
            for c in chunker.chunk_document(doc, chunk_size=ix.chunk_size, overlap=ix.chunk_overlap,
                                            encoding=ix.encoding):
                corpus_tokens += c.tokens
                wanted.add(c.id)
                if c.id not in done:
                    new_chunks[c.id] = c
                    continue
                cut_done[c.id] = c.tokens
                if c.id in live and c.id not in published:
                    replacing.add(c.id)   # (published by a run with other settings since: offline)
                elif c.id not in published:
                    unpublished.add(c.id)
    # What the run keeps of the index without reading it counts as it counts it: documents,
    # tokens, and the chunks the graph keeps.
    scope = [loader.stored_path(p, root) for p in paths]
    kept_docs = _staying(indexed, read, root, scope=scope,
                         unlisted=[loader.stored_path(f, root) for f, _why in unlisted], unread=unread) | unchanged
    kept_docs -= paths_of.keys()
    if unchanged - paths_of.keys():
        # (their chunks extracted as those read are counted: the others are the backlog's below)
        held = {c for ids_ in index_rows.chunk_ids_of(store, unchanged - paths_of.keys()).values()
                for c in ids_} & done
        replacing |= (held & live.keys()) - published
        unpublished |= held - published - live.keys()
    if kept_docs:
        corpus_tokens += index_rows.document_tokens(store, kept_docs)
        # ... and the run extracts their chunks the current extractor has not (``ExtractionStage``:
        # `index DIR/a.txt` after llm.extraction_model changed extracts every document's)
        for c in index_rows.backlog(store, sorted(kept_docs), extractor_key(settings), ix.encoding):
            new_chunks.setdefault(c.id, c)
    if replacing:
        # (those whose stored extraction holds the records they are live with: the run keeps them
        # as they are, ``_same_as_live``; they were said "to replace the extraction of them the
        # index holds" of a run that published nothing)
        replacing -= index_rows.same_records(store, {c: live[c] for c in replacing}, extractor_key(settings))
    unread_kept = len(unread & {loader.file_of(p) for p in indexed})
    added_docs, edited_docs, removed_docs, read_again_docs = _changes(indexed, scanned, kept_docs, restamped)
    stages: dict[str, dict[str, int]] = {}

    def add(stage: str, calls: float, prompt: float, completion: float, cached: int = 0) -> None:
        s = stages.setdefault(stage, {"calls": 0.0, "prompt_tokens": 0.0, "completion_tokens": 0.0,
                                      "cached": 0})
        s["calls"] += calls
        s["prompt_tokens"] += prompt
        s["completion_tokens"] += completion
        s["cached"] += cached

    # With llm.cache off the run looks no answer up and pays for each: the cache's answers still
    # foretell what the model says to the same request (the graph, summaries and reports worked
    # out of them), but each is counted paid, its tokens as a call's not cached are ("5 first
    # extraction answers are in the cache ...: not counted" of a run that paid for them).
    looked_up = settings.llm.cache

    def cache_answers(stage: str, calls: int, prompt: float, completion: float) -> None:
        """``calls`` of ``stage`` the cache answers (``prompt`` and ``completion`` tokens each, if paid)."""
        if looked_up:
            add(stage, calls, 0, 0, cached=calls)
        else:
            add(stage, calls, calls * prompt, calls * completion)

    n = len(new_chunks)
    # The new chunks whose extraction the cache answers whole, as the run makes it from the
    # cache (an index built with extract_claims, run without: an extraction key of its own), or
    # the index holds but for its claims (a claims call that gave up: ``claims_only`` below)
    from_cache: dict[str, Extraction] = {}
    # ... but for claims the run asks and the cache does not hold (index.extract_claims turned on):
    # the completion tokens of each such chunk's claims (``_update_calls`` stands claims in for them)
    unclaimed: dict[str, float] = {}
    claims_only: dict[str, Extraction] = {}
    # ... whose first round alone the cache answers (index.max_gleanings raised from 0), and
    # whether its first gleaning is known to be asked (its check, from the cache, said yes)
    first_only: dict[str, bool] = {}
    if not settings.offline and n:
        prompts = ExtractionPrompts.load(settings)
        types = entity_types_text(settings)
        found, found_all = "x " * FOUND_LIST_TOKENS, "x " * GLEAN_FOUND_TOKENS
        options = request_options(settings.llm.temperature)   # (the request sets none of its own)
        asked = {c.id: extraction_request(prompts, c, settings) for c in new_chunks.values()}
        keys = {cid: cache_key(r.model, r.messages, options, r.prompt.name, r.prompt.version)
                for cid, r in asked.items()}
        # Chat answers in the cache (an interrupted run's, say) are free.
        cached = index_rows.cached_keys(store, keys.values()) if store is not None else set()
        # The chunks whose claims call gave up, their extraction stored without claims: the run
        # asks their claims call alone, of that extraction, no first round or gleaning, not even
        # from the cache (``ExtractionStage.claims_only``)
        claimless = claimless_key(settings) if store is not None else None
        claims_only = index_rows.load_extractions(store, set(new_chunks), claimless) if claimless else {}
        # (every document recut to other chunks, the index's own cut otherwise: each new chunk
        # gleaned as often as the index's chunks of its size, ``_gleaned_near``; cut as they
        # were, at the share of them all: by size, 21 articles added to 20 were estimated 52
        # checks for the run's 45, 49 so). After index.encoding changed, a stored chunk the recut
        # cuts again is counted by the cut (3,367 of an index of 3,000 documents' 3,818), the
        # others again from their text.
        sized = index_rows.gleaning_rounds_by_tokens(store, extractor_key(settings), ix.encoding, cut_done) \
            if rereads and r.gleaned is not None else []
        for c in new_chunks.values():
            # (a stored chunk's count as ``backlog`` reads it: this encoding's, counted again
            # only where it is another's; 3,818 chunks of an index of 3,000 documents were all
            # counted again, 0.8 s of CPU)
            tokens = c.tokens
            prompt = count_prompt_tokens(asked[c.id].messages, c.text, tokens, ix.encoding)
            checks = gleans = 0
            ended = claimed = False   # (claimed: the cache holds the claims answer the run asks for)
            partly_claimed = False    # (... for the extraction so far, its later rounds not cached: asked, paid)

            def check_tokens() -> tuple[float, float]:   # (of this chunk's glean check: prompt, answer)
                return (r.check_prompt * prompt if r.check_prompt is not None else
                        count_prompt_tokens(prompts.glean_check.render(text=c.text, found=found), c.text, tokens,
                                            ix.encoding)), 1.0

            def glean_tokens() -> tuple[float, float]:   # (... and of its gleaning)
                glean = r.glean_prompt * prompt if r.glean_prompt is not None else count_prompt_tokens(
                    prompts.glean.render(text=c.text, found=found_all, entity_types=types), c.text, tokens,
                    ix.encoding)
                return glean, _measured(r.glean_completion, glean, GLEAN_COMPLETION * tokens)
            if c.id in claims_only:
                ended = True
                whole = _claimed_from_cache(store, settings, prompts, c, claims_only[c.id])
                from_cache[c.id] = claims_only[c.id] if whole is None else whole
                claimed = whole is not None
            elif keys[c.id] in cached:
                # a call, answered by the cache: free
                cache_answers("extract", 1, prompt, _measured(r.extract_completion, prompt,
                                                              FIRST_ROUND_COMPLETION * tokens))
                # (its gleaning rounds too, as far as the cache answers them: an index built with
                # index.max_gleanings 1 and run with 2 was estimated 202 calls for the run's 43)
                checks, gleans, gleaned, so_far = _gleaned_from_cache(store, settings, prompts, c, keys[c.id])
                ended = gleaned is not None
                for stage, answered, of_one in (("glean_check", checks, check_tokens), ("glean", gleans, glean_tokens)):
                    if answered:   # (a stage the run does not ask has no row)
                        cache_answers(stage, answered, *(of_one() if not looked_up else (0, 0)))
                if gleaned is not None:
                    whole = _claimed_from_cache(store, settings, prompts, c, gleaned)
                    from_cache[c.id] = gleaned if whole is None else whole
                    claimed = ix.extract_claims and whole is not None
                elif so_far is not None:
                    # A round the cache does not answer after a gleaning it does (index.max_gleanings
                    # raised: its next check) is counted a call below; what it adds is not known,
                    # and taken as nothing, a later round adding less than the first: the model's
                    # names so far stand in, with the claims the cache holds of them, not the
                    # offline extractor's names (max_gleanings 1 -> 2, ten news articles, claims on
                    # or off: 28 summaries and 24 reports for the run's 0 and 0). Before any
                    # gleaning the cache answers, the first round's names stand in too, with those
                    # the offline extractor finds that they lack for the chunks a first gleaning
                    # is expected of (``_missed_stand_in``, below).
                    whole = _claimed_from_cache(store, settings, prompts, c, so_far)
                    from_cache[c.id] = so_far if whole is None else whole
                    partly_claimed = ix.extract_claims and whole is not None
                    if not gleans:
                        first_only[c.id] = checks > 0   # (its check said yes, from the cache: gleaned)
            else:
                add("extract", 1, prompt, _measured(r.extract_completion, prompt, FIRST_ROUND_COMPLETION * tokens))
            near = _gleaned_near(sized, c.tokens, ix.max_gleanings) if not ended else None
            rounds = [] if ended else _rounds(msgspec.structs.replace(r, gleaned=near) if near else r,
                                              ix.max_gleanings, checks=ix.glean_check != "off")[gleans:]
            if rounds and checks > gleans:
                rounds[0] = (0.0, 1.0)   # (its check said yes, from the cache: its gleaning is asked)
            elif rounds and gleans and (reached := rounds[0][0] or rounds[0][1]):
                # (its last gleaning from the cache added something: the next round is asked)
                rounds = [(checked / reached, gleaned / reached) for checked, gleaned in rounds]
            for checked, gleaned in rounds:
                if checked:
                    check, _ = check_tokens()
                    add("glean_check", checked, checked * check, checked)
                glean, answer = glean_tokens()
                add("glean", gleaned, gleaned * glean, gleaned * answer)
            if claimed and looked_up:   # (a call, answered by the cache: free)
                cache_answers("claims", 1, 0, 0)
            elif ix.extract_claims:
                # (the request the run sends, of the names its extraction from the cache holds)
                claims = claims_messages(prompts, c, from_cache[c.id], settings) if c.id in from_cache else \
                    prompts.claims.render(text=c.text, entities=found, claim_description=ix.claim_description)
                claims_prompt = count_prompt_tokens(claims, c.text, tokens, ix.encoding)
                said = _measured(r.claims_completion, claims_prompt, CLAIMS_COMPLETION * tokens)
                if claimed:   # (its answer known, paid all the same)
                    cache_answers("claims", 1, claims_prompt, said)
                    continue
                if partly_claimed:
                    # Asked of the extraction so far, which the cache answers, but where a round
                    # the cache does not answer adds something (each gleaning asked taken to):
                    # asked anew, paid. Counted paid whatever the rounds, max_gleanings 1 -> 2
                    # with claims on, ten articles, was estimated 18 calls for the run's 9 (every
                    # claims answer from the cache, no second-round check saying yes).
                    anew = min(1.0, rounds[0][1]) if rounds else 0.0
                    cache_answers("claims", 1 - anew, claims_prompt, said)
                    add("claims", anew, anew * claims_prompt, anew * said)
                    continue
                add("claims", 1, claims_prompt, said)
                if c.id in from_cache:
                    unclaimed[c.id] = said
    sampled = None   # (a first gleaning stood in for on a sample of the chunks: ``_add_missed``)
    if first_only:
        sampled = _add_missed(from_cache, first_only, new_chunks, r, settings, store)
    sized: list[int] = []   # the prompt tokens of the reports whose community is worked out
    stood_in = False        # the reports counted stand claims in about every name (``_claims_stand_in``)
    summarized_again = ""   # why every summary is written again ("" when it is not)
    if not settings.offline:
        summaries = communities = report_tokens = 0.0
        answered = FromCache()   # (the summaries and reports of an update the cache answers)
        staying = wanted | {c for ids in index_rows.chunk_ids_of(store, kept_docs).values() for c in ids} \
            if store is not None and store.version else set()
        made_anew = bool(staying) and _made_anew(store, new_chunks, from_cache, staying)
        if store is None or not (store.version or unpublished or replacing) or made_anew:
            # A first index: worked out on the offline extractor's names (``_first_index``)
            if made_anew:   # (said as the run says it: "it was built offline")
                summarized_again = summary_change(store, settings)
            summaries, communities, report_tokens = _first_index(
                _with_stored(store, new_chunks, staying) if made_anew else new_chunks, settings)
        else:
            # Settings that change every summary, or every report, since the published index
            # (a model, a prompt, a budget): all of them are written again, changed chunks or not.
            resummarized = resummarizes(store, settings)   # (as the run says it: ``summary_change``)
            summarized_again = summary_change(store, settings)
            # (the settings of the partition the run starts from: a model's kept one, ``start_leiden``)
            recluster = recluster or start_leiden(store, offline=settings.offline) not in (
                None, leiden_key(ix.max_cluster_size, ix.leiden_seed, ix.leiden_resolution))
            wanted |= {c for ids in index_rows.chunk_ids_of(store, kept_docs).values() for c in ids}
            chosen_with = built_min_members(settings, store.get_meta, by_llm=True)
            # (new report settings: every context is built again, and a report is written for
            # those not built as a stored report's was, as the run does; a new
            # report_max_input_tokens alone, 6000 -> 3000 on synth_small, was counted 54 reports
            # for the run's 5, most contexts fitting both)
            summaries, sized, answered = _update_calls(
                store, settings, new_chunks=new_chunks, from_cache=from_cache, unclaimed=unclaimed, wanted=wanted,
                live=live, paths_of=paths_of, resummarize=resummarized, recluster=recluster,
                summary_tokens=r.summary_completion, rereport=bool(store.version) and chosen_with is None,
                sampled=sampled)
            communities = len(sized)   # (sized: the prompt tokens of reports whose community is known)
            stood_in = bool(unclaimed) and bool(communities)
            # An index built offline is merged again whole with the model's extraction, its
            # graph worked out so above: the published descriptions and communities are the
            # offline extractor's, which the run summarizes and reports none of (model, then
            # --offline, then the model: 116 summaries counted paid on synth_small, the run
            # taking all 148 from the cache).
            if resummarized and not index_rows.built_offline(store):
                # (but those the cache answers: settings changed and changed back asked none)
                asked_again = _summaries_asked(store, settings)
                summaries = max(summaries, len(asked_again) - answered.summaries)
                if summaries:
                    # (new summaries a model writes change the descriptions reports are written
                    # from, unknown here: counted as if every report showing one of them changed;
                    # with every summary known, each context was built as the run builds it)
                    communities = max(communities, _reports_showing(store, asked_again, ix.report_min_members)
                                      - answered.reports)
            elif store.version and chosen_with is not None:   # (else each context was built above)
                asked = _reports_asked(store, settings, chosen_with=chosen_with, recluster=recluster)
                # (a new partition: the communities it changes are among those counted for it)
                communities = max(communities, asked) if recluster else communities + asked
            # (the others, communities not worked out on the graph: a full context, about)
            report_prompt = min(ix.report_max_input_tokens, 1800) + 250
            report_tokens = sum(sized) + max(0, communities - len(sized)) * report_prompt
        if summaries:
            add("summarize", summaries, summaries * r.summary_prompt, summaries * r.summary_completion)
        if communities:
            add("report", communities, report_tokens, communities * r.report_completion)
        # Calls the cache answers, free, as the run counts them: a summary setting changed and
        # changed back was estimated 'Nothing to do' of a run that said every description is
        # summarized again, and asked the cache for 10 summaries.
        if answered.summaries:
            cache_answers("summarize", answered.summaries, r.summary_prompt, r.summary_completion)
        if answered.reports and looked_up:
            cache_answers("report", answered.reports, 0, 0)
        elif answered.reports:
            # (paid, each of its context as worked out: priced as a full context, about, with
            # llm.cache off ten articles' 11 reports were 22,550 prompt tokens for the run's 13,834)
            add("report", answered.reports, sum(answered.report_prompts), answered.reports * r.report_completion)
            sized = [*sized, *answered.report_prompts]   # (and asked again as often as reports of such prompts)
    # Answers cut off (or unusable) and asked again, as often as on this index: paid calls and
    # failed ones, as the run counts them (a 1,500-document index's update asked 18 of its 40
    # report calls again, none counted).
    for stage, (share, tokens) in r.again.items():
        if (counts := stages.get(stage)) is not None and (paid := counts["calls"] - counts["cached"]) > 0:
            extra, prompts = paid * share, paid * share * counts["prompt_tokens"] / paid   # (the same requests)
            if stage == "report" and sized and (shares := cut_shares(r.report_answers, sized)) is not None:
                # Each report worked out at the share of the index's reports of prompts like its
                # own, the others at the share of every report.
                near = shares
                rest = max(0.0, paid - len(sized))
                extra = sum(near) + rest * share
                prompts = sum(n * p for n, p in zip(near, sized)) + (
                    rest * share * (counts["prompt_tokens"] - sum(sized)) / rest if rest else 0.0)
            counts["calls"] += extra
            counts["errors"] = counts.get("errors", 0) + extra
            counts["prompt_tokens"] += prompts
            counts["completion_tokens"] += extra * tokens
    # Half a call is a call (round() took 0.5 gleaning calls to 0 while counting their tokens),
    # and the tokens are those of the whole calls: a chunk's 0.13 gleanings were '0 calls  61
    # prompt  8 completion'.
    stages = {k: _whole_calls(s) for k, s in stages.items()}
    # An offline run of an index a model built replaces the model's work (free, but it throws
    # paid work away): said as the run says it once its scan is done, before it publishes; its
    # estimate said "no LLM calls, no cost" alone.
    replaced, replaced_said = {}, ""
    if settings.offline and store is not None:
        # (of the model's chunks, those that stay live, as the run counts them after its scan: a
        # file gone was counted with its chunks, and an emptied folder said the line)
        stay = wanted | {c for ids in index_rows.chunk_ids_of(store, kept_docs).values() for c in ids}
        replaced, replaced_said = replaced_model_work(store, settings, stay)
    return {"documents": len(paths_of) + len(kept_docs),
            # (of an update: what it works on, as the run counts documents added and removed)
            "update": bool(store is not None and store.version), "documents_added": added_docs,
            "documents_edited": edited_docs, "documents_removed": removed_docs,
            "documents_read_again": read_again_docs, "unreadable_files": unreadable,
            "unreadable_kept": unread_kept, "unreadable_by_kind": unreadable_kinds, "too_big": too_big,
            "left_out": dict(sorted(left_out.items())),
            "left_out_said": loader.left_out_lines(left_out, ix.include), "corpus_tokens": corpus_tokens,
            "chunks_to_extract": n, "chunks_unpublished": len(unpublished),
            # (of them, those whose stored extraction lacks only its claims: asked its claims call
            # alone, ``ExtractionStage.claims_only``; claims turned on, or a claims call that gave up)
            "chunks_claims_only": len(claims_only),
            "chunks_replacing": len(replacing), "offline": settings.offline, "llm": llm_summary(stages),
            # (offline for want of an endpoint, not index.extractor = "nlp" or --offline: the
            # estimate says how to count a model run)
            "no_endpoint": not settings.has_endpoint,
            # (claims asked of chunks whose names the cache gives, about which of them not known:
            # the reports counted as if about every one, ``_claims_stand_in``: likely more than the
            # run writes, but no bound: a claim about a name that is no entity makes one, and the
            # other new chunks' names are the offline extractor's guesses; reports_upper_bound is
            # its old name, kept for the scripts that read it)
            "reports_claims_stood_in": stood_in, "reports_upper_bound": stood_in,
            "chunks_claims_unknown": len(unclaimed) if stood_in else 0,
            "read_again_because": reading_change(store, settings) if store is not None else "",
            # (the run reads again only the files given: the index's others, still there, keep their
            # chunks until a run covers them; it said "Every file is read and chunked again")
            "read_again_given_only": rereads and any(not covered(p, scope) and still_there(p, root) for p in indexed),
            "extracted_again_because": (again_because := extraction_change(store, settings)
                                        if store is not None else ""),
            # (the run's words: "k of n chunks are extracted again" when the others' extractions
            # with these settings are stored; it said "Every chunk" beside "1 chunk to extract")
            "extracted_again": extracted_again(store, extractor_key(settings), claimless=claimless_key(settings))
            if again_because else "",
            # (claims turned on: each chunk asked its claims alone, its extraction kept)
            "claims_asked_because": (claims_because := claims_change(store, settings) if store is not None else ""),
            # (what the run asks, in its words: "every chunk is asked for its claims ...", "2 of 12
            # chunks are asked ...", "no chunk ..."; it said every chunk of claims turned off and on)
            "claims_asked": claims_asked(store, extractor_key(settings), claimless_key(settings))
            if claims_because else "",
            "summarized_again_because": summarized_again,
            # (report settings changed: what the run writes again of the reports, in its words, and why)
            "reported_again": reported_again(store, settings) if store is not None else "",
            "reported_again_because": report_change(store, settings) if store is not None else "",
            # (this streamrag's extractive reports differ from those published: rewritten, free;
            # it said "Nothing to do", and the run published a new version)
            "extractive_again": extractive_redone(store, settings) if store is not None else "",
            # (not those the run extracts again, or that leave with their file's edit: merged as
            # its new chunks are, ``GraphState.apply``)
            "chunks_merged_again": len(stranded_chunks(store) & wanted & published) if store is not None else 0,
            # (the figures measured on this index's calls, and how many: "" and 0 for fixed ratios)
            "ratios_from": "" if settings.offline else r.source(),
            "ratios_calls": 0 if settings.offline else r.calls,
            # (no figure measured: each a stand-in, the index holding no calls of these models yet)
            "stand_in_ratios": not settings.offline and not r.measured,
            # (of them, those the index holds: fewer than a stage's MIN_CALLS, and none of a first index)
            "model_calls": 0 if settings.offline else model_calls,
            "models": {} if settings.offline else {   # (offline: no model is called)
                "extraction": settings.llm.extraction_model, "summary": settings.llm.summary_model,
                "report": settings.llm.report_model},
            # (an offline run of an index a model built: what of the model's work it replaces, as
            # `index --json` says it, and the line the run says; {} and "": none)
            "model_work_replaced": replaced, "model_work_replaced_said": replaced_said,
            "warnings": unlisted_said + failed + skipped + read_said}


def _made_anew(store: Store, new_chunks: dict[str, Chunk], from_cache: dict[str, Extraction],
               staying: set[str]) -> bool:
    """Whether the run makes its graph anew of a model's extraction of every chunk it keeps
    (``staying``): an index built offline, which the run merges again whole
    (``index_rows.built_offline``), of chunks none stored nor answered by the cache, or on which
    no model run has ended (``_model_published``) and the model's extraction is still to make.
    Its summaries and reports are a first index's, not the offline partition's: worked out as an update of it, synth_small's offline index was
    estimated 34 reports and 260 summaries for the run's 54 and 148; and one a model run killed
    part-way had left 6 extractions in (30 articles), 32 reports for the run's 42."""
    if not index_rows.built_offline(store):
        return False
    if not _model_published(store) and (new_chunks or from_cache):
        # (killed as it extracted: it merged nothing, and left no summary or report of the
        # model's. One killed later, every chunk's extraction stored, left them in the cache and
        # its reports stored, which the next run takes: worked out as an update, as before; as a
        # first index, christmas_carol killed as it reported was estimated 45 summaries and 18
        # reports for the run's 0 (45 from the cache) and 4.)
        return True
    return not from_cache and staying <= new_chunks.keys()


def _model_published(store: Store) -> bool:
    """Whether a run with a model has ended on the index in ``store`` (``runs.kind``), or its
    partition is kept (``graph_state.KeptPartition``: the runs' rows may be pruned since).
    Without, the extractions a model stored are a killed run's: no summary or report of the
    model's is published or kept, and the run clusters the model's graph afresh."""
    return index_rows.model_run_completed(store) or kept_partition(store, KeptSettings) is not None


def _with_stored(store: Store, new_chunks: dict[str, Chunk], staying: set[str]) -> dict[str, Chunk]:
    """``new_chunks`` and the other chunks the run keeps (``staying``, their extraction stored),
    read from the index: a first index's graph is worked out of their texts (``_first_index``)."""
    stored = sorted(staying - new_chunks.keys())
    return {**new_chunks, **{cid: Chunk(id=cid, doc_id="", idx=0, text=text, tokens=0)
                             for cid, text in index_rows.chunk_texts(store, stored)}}


def _changes(indexed: dict[str, tuple[str, int, float]], read: dict[str, tuple[str, int, float]], kept: set[str],
             restamped: set[str]) -> tuple[int, int, int, int]:
    """(documents added, edited, removed, read again) of an update, as the run counts them: of
    the documents ``read`` (path -> (id, size, change stamp), every path of a text in several
    files, as the run pairs them), those the index does not hold, an unchanged file's read anew
    to another text (``restamped``: paths as indexed but for a new status-change time), an
    edited one's path indexed with another text since gone (``graph_state.document_changes``,
    the run's own count); of the ``indexed`` files' documents, those neither read nor ``kept``
    (without reading them)."""
    held = {doc_id for doc_id, _size, _stamp in indexed.values()}
    docs = {doc_id for doc_id, _size, _stamp in read.values()}
    return document_changes(docs - held, held - docs - kept, indexed, read, restamped)


def _whole_calls(s: dict[str, float]) -> dict[str, int]:
    """A stage's expected counts as whole calls, its tokens scaled to them (as many per call)."""
    calls = math.floor(s["calls"] + 0.5)
    scale = calls / s["calls"] if s["calls"] else 1.0
    return {f: math.floor((v * scale if f.endswith("_tokens") else v) + 0.5) for f, v in s.items()}


def _rounds(r: Ratios, max_gleanings: int, *, checks: bool) -> list[tuple[float, float]]:
    """(the share of chunks checked, and gleaned) of each gleaning round. A round goes on after
    a gleaning that added something (``glean_adds``), when its check says yes: as many as the
    extractions with the run's settings went on (``gleaned``), or the gleaning rate for the first
    round and the share of later checks saying yes for each after it (``glean_continue``)."""
    out, reached = [], 1.0   # (the chunks a round's check is asked of)
    for k in range(max_gleanings):
        if r.gleaned is not None:
            gleaned = r.gleaned[k]
            # those gleaned again were checked; of those that stopped, the ones whose last gleaning added something
            reached = 1.0 if k == 0 else gleaned + (r.gleaned[k - 1] - gleaned) * r.glean_adds
        else:   # (a later round's check: after a gleaning, which left less to find)
            gleaned = reached * ((r.glean_share if k == 0 else r.glean_continue) if checks else 1.0)
        out.append((reached if checks else 0.0, gleaned))
        reached = gleaned * r.glean_adds
    return out


def _gleaned_near(sized: list[tuple[int, int]], tokens: int, max_gleanings: int) -> list[float] | None:
    """Of the ``MIN_CALLS`` extractions nearest a chunk of ``tokens`` in their chunk's tokens
    (``sized``: (tokens, gleanings), by tokens; ``index_rows.gleaning_rounds_by_tokens``), the
    shares gleaned at least 1, 2, ... ``max_gleanings`` times (``Ratios.gleaned`` of chunks of
    its size); None on fewer. A longer chunk leaves more for a gleaning to find: synth_small
    (1,200-token chunks, 45 of 62 gleaned) cut again to 600 tokens was estimated 85 gleanings at
    the index's share for the run's 33; its chunks under 600 tokens had 4 of 16 gleaned."""
    if len(sized) < MIN_CALLS or not max_gleanings:
        return None
    # (the window of MIN_CALLS neighbours: grown from the chunk's place toward the nearer side)
    lo = hi = bisect.bisect_left(sized, (tokens,))
    while hi - lo < MIN_CALLS:
        if hi == len(sized) or (lo and tokens - sized[lo - 1][0] <= sized[hi][0] - tokens):
            lo -= 1
        else:
            hi += 1
    window = [g for _tokens, g in sized[lo:hi]]
    return [sum(1 for g in window if g >= k) / MIN_CALLS for k in range(1, max_gleanings + 1)]


def _cached_text(store: Store, key: str) -> str | None:
    """The text of the answer the cache holds under ``key``, if one can be read."""
    answer, _ = AnswerCache(store, True).answer(key)
    return None if answer is None else answer.text


def _summary_from_cache(store: Store, settings: Settings, name: str, chosen: list[str]) -> str | None:
    """The summary of ``name`` the run writes from the cache's answer to the model's request
    for the descriptions ``chosen`` (as ``summarizer.summarize`` asks it); None when not cached."""
    budget = settings.index.summary_max_tokens
    prompt = load_prompt("summarize")
    options = request_options(settings.llm.temperature, max_tokens=SUMMARY_HEADROOM * budget)
    answer = _cached_text(store, cache_key(settings.llm.summary_model, summary_messages(name, chosen, settings),
                                           options, prompt.name, prompt.version))
    return None if answer is None else within_budget(answer.strip(), budget, settings.index.encoding)


def _report_cached(store: Store, settings: Settings, ctx: ReportContext) -> tuple[bool, Report | None]:
    """Whether the cache holds the model's report for context ``ctx``, as ``reports.llm_report``
    asks for it; and the report the run makes of that answer (None if it cannot be parsed)."""
    prompt = load_prompt("report")
    options = request_options(settings.llm.temperature, max_tokens=settings.index.report_max_output_tokens)
    answer = _cached_text(store, cache_key(settings.llm.report_model, prompt.render(context=ctx.text), options,
                                           prompt.name, prompt.version))
    if answer is None:
        return False, None
    return True, answered_report(answer, ctx, model=settings.llm.report_model, prompt_version=prompt.version,
                                 encoding=settings.index.encoding)


def _gleaned_from_cache(store: Store, settings: Settings, prompts: ExtractionPrompts, chunk: Chunk,
                        first: str) -> tuple[int, int, Extraction | None, Extraction | None]:
    """The gleaning rounds of ``chunk``, whose first extraction answer the cache holds under
    ``first``, that the cache answers too, asked as ``gleaner.glean`` asks them: (checks and
    gleanings answered, the extraction they make when its gleaning ends within them, else None;
    and the extraction as far as they make it, None when the first answer is not cached). A run after an interruption, or with another index.max_gleanings or claims setting, asks
    them again of the cache."""
    ix, model, temperature = settings.index, settings.llm.extraction_model, settings.llm.temperature
    answer = _cached_text(store, first)
    if answer is None:
        return 0, 0, None, None
    extraction = parse_records(answer, entity_types=ix.entity_types)
    biased = ix.glean_check == "logit_bias" and settings.llm.logit_bias
    check_options = request_options(temperature, max_tokens=1, logit_bias=yes_no_bias(settings)) if biased \
        else request_options(temperature, max_tokens=3)
    checks = gleans = 0
    for _ in range(ix.max_gleanings):
        if ix.glean_check != "off":
            messages = check_messages(prompts, chunk, extraction)
            said = _cached_text(store, cache_key(model, messages, check_options, prompts.glean_check.name,
                                                 prompts.glean_check.version))
            if said is None or parse_yes_no(said) is None:
                return checks, gleans, None, extraction
            checks += 1
            if parse_yes_no(said) is False:
                return checks, gleans, extraction, extraction
        messages = glean_messages(prompts, chunk, extraction, settings)
        answer = _cached_text(store, cache_key(model, messages, request_options(temperature),
                                               prompts.glean.name, prompts.glean.version))
        if answer is None:
            return checks, gleans, None, extraction
        gleans += 1
        if merge_round(extraction, parse_records(answer, entity_types=ix.entity_types)) == 0:
            return checks, gleans, extraction, extraction
    return checks, gleans, extraction, extraction


GLEAN_SAMPLE = 1000   # the chunks whose first gleaning is stood in for, at least, where it is sampled


class Sampled(NamedTuple):
    """A first gleaning stood in for on a sample of the chunks (``_add_missed``): the elements
    its stand-ins add or pair and the entities they name, and how many times more elements and
    reported communities the stand-ins of every chunk are expected to touch than those of the
    sample (``estimate_ratios.grown_union``); ``chunks``: the sample's chunks stood in for."""
    elements: set[str]
    entities: set[str]
    element_scale: float = 1.0
    community_scale: float = 1.0
    chunks: frozenset[str] = frozenset()


def _add_missed(from_cache: dict[str, Extraction], first_only: dict[str, bool], chunks: dict[str, Chunk],
                r: Ratios, settings: Settings, store: Store) -> Sampled | None:
    """The extractions ``from_cache`` of the chunks whose first round alone the cache answers
    (``first_only``: chunk -> whether its gleaning is known to be asked) with what a first
    gleaning adds standing in (``_missed_stand_in``), for as many as the gleaning rate says are
    gleaned (``_rounds``), those missing the most names first (a gleaning check says yes where
    the first answer left names out), and for every one known to be gleaned. Taken to add
    nothing (their first round's names alone), index.max_gleanings 0 -> 1 on ten articles was
    estimated 0 summaries and 0 reports for the run's 6 and 24; the offline extractor's names
    in place of the model's, 36 and 26 (synth_small: 256 and 34 for the run's 100 and 49).

    The offline extractor takes ~5 ms a chunk (17.7 s of a 49.6 s estimate on a 3,000-document
    index): past ``GLEAN_SAMPLE`` chunks not known to be gleaned, a half of them (``GLEAN_SAMPLE``
    at least; those first by id, a content hash: a spread of the corpus) are stood in for, at the
    same share, and what they touch is taken on to every chunk (``Sampled``, None when every
    chunk is): a half stood in for, that index's summaries came out 4,257 and its reports 2,358
    for the 7,398 and 2,482 of every chunk; taken on, 7,212 and 2,409 (-2.5%, -2.9%)."""
    ix = settings.index
    share = _rounds(r, ix.max_gleanings, checks=ix.glean_check != "off")[0][1] if ix.max_gleanings else 0.0
    known = [cid for cid, asked in first_only.items() if asked]
    unknown = sorted(cid for cid, asked in first_only.items() if not asked)
    sample = unknown if len(unknown) <= GLEAN_SAMPLE else unknown[:max(GLEAN_SAMPLE, math.ceil(len(unknown) / 2))]
    missed = {cid: _missed_stand_in(from_cache[cid], chunks[cid].text, ix.entity_types) for cid in [*known, *sample]}
    added = {cid: len(m.entities) - len(from_cache[cid].entities) for cid, m in missed.items()}
    rest = sorted(sample, key=lambda cid: (-added[cid], cid))
    # (of the sample, as many as of every chunk: the share, less those known, taken of the sample's part)
    wanted = max(0, math.floor(share * len(first_only) + 0.5) - len(known))
    taken = rest[:math.floor(wanted * len(sample) / len(unknown) + 0.5)] if len(sample) < len(unknown) \
        else rest[:wanted]
    # (what each chosen stand-in adds: its entities and pairs past the first round's)
    extra = {cid: (missed[cid].entities[len(from_cache[cid].entities):],
                   missed[cid].relationships[len(from_cache[cid].relationships):]) for cid in [*known, *taken]}
    for cid in [*known, *taken]:
        from_cache[cid] = missed[cid]
    if len(sample) == len(unknown) or not taken:
        return None
    # What the sample's stand-ins touch, chunk by chunk, taken on to every chunk's: the elements
    # they add or pair (a summary written), the published reported communities holding the
    # entities they pair (a report).
    reported = _reported_of(store, ix.report_min_members)
    elements: dict[str, int] = {}
    communities: dict[str, int] = {}
    entities: set[str] = set()
    for cid in taken:
        names, pairs = extra[cid]
        ends = {ids.entity_id(n) for p in pairs for n in (p.source, p.target)}
        touched = {ids.entity_id(e.name) for e in names} | {
            ids.relationship_id(ids.entity_id(p.source), ids.entity_id(p.target)) for p in pairs}
        for element in touched:
            elements[element] = elements.get(element, 0) + 1
        # (an entity it names alone is described anew too: its communities' reports change, and
        # ``_update_calls`` scales those holding any of them, so they are measured here the same)
        named = ends | {ids.entity_id(e.name) for e in names}
        for community in {c for e in named for c in reported.get(e, ())}:
            communities[community] = communities.get(community, 0) + 1
        entities |= named
    more = wanted - len(taken)   # (the chunks beyond the sample a first gleaning is expected of)

    def scale(seen: dict[str, int]) -> float:
        return grown_union(list(seen.values()), len(taken), more) / len(seen) if seen else 1.0
    return Sampled(set(elements), entities, scale(elements), scale(communities), frozenset(taken))


def _missed_stand_in(first: Extraction, text: str, entity_types: list[str]) -> Extraction:
    """``first`` (a chunk's first round, the model's) with what a gleaning of the chunk ``text``
    adds standing in: the names the offline extractor finds there that ``first`` lacks, and its
    pairs of them with the names of either."""
    offline = nlp.extract_offline(text, entity_types=entity_types)
    have = {ids.entity_id(e.name) for e in first.entities}
    extra = [e for e in offline.entities if ids.entity_id(e.name) not in have]
    new = {ids.entity_id(e.name) for e in extra}
    pairs = [p for p in offline.relationships if {ids.entity_id(p.source), ids.entity_id(p.target)} <= have | new
             and {ids.entity_id(p.source), ids.entity_id(p.target)} & new]
    return Extraction(entities=[*first.entities, *extra], relationships=[*first.relationships, *pairs],
                      claims=list(first.claims))


def _claimed_from_cache(store: Store, settings: Settings, prompts: ExtractionPrompts, chunk: Chunk,
                        gleaned: Extraction) -> Extraction | None:
    """``gleaned`` (``_gleaned_from_cache``) with ``chunk``'s claims as the run adds them
    (``extractor.extract_claims``) from the cache's answer, read as the run reads it
    (``parsing.read_claims``); None when the run asks for claims the cache does not hold (not
    known here), or holds an answer the run cannot use and so asks again, paid (its usable
    check, ``usable_extraction``: a cached answer is checked before use)."""
    if not settings.index.extract_claims:
        return gleaned
    prompt = prompts.claims
    answer = _cached_text(store, cache_key(settings.llm.extraction_model,
                                           claims_messages(prompts, chunk, gleaned, settings),
                                           request_options(settings.llm.temperature), prompt.name, prompt.version))
    if answer is None:
        return None
    parsed, _faults = read_claims(answer)
    if not usable_extraction(answer, parsed):
        return None
    gleaned.claims = list(parsed.claims)
    return gleaned


def _claims_stand_in(extraction: Extraction, text: str, tokens: float, encoding: str) -> Extraction:
    """``extraction`` (the run's, from the cache) with claims standing in for those a model
    is asked for and the cache does not hold: one about each name it holds, as a claim may be
    (which names they are about is known only from the answer), their descriptions together
    ``tokens`` long (what the claims answer is estimated to say), each from the sentences of the
    chunk ``text`` naming it. So every report context those names are in changes: the reports
    counted are likely more than the run writes, but no bound (a claim about a name that is no
    entity makes one; stand-ins have no object) (index.extract_claims turned on for ten
    articles: 26, the run 11; counted on the offline extractor's names for the chunks, 35
    summaries for the run's 0, and the same 26 reports said as if they were the run's)."""
    names = list(dict.fromkeys(e.name for e in extraction.entities))
    each = max(1, round(tokens / len(names))) if names else 0
    sentences = _sentences(text)
    claims = [ClaimRecord(subject=name, object=None, type="STAND-IN", status="SUSPECTED", start_date=None,
                          end_date=None, source_text="",
                          description=truncate(" ".join(s for s in sentences if name in s) or text, each, encoding))
              for name in names]
    return msgspec.structs.replace(extraction, claims=[*extraction.claims, *claims])


def _gleaning_keys(settings: Settings) -> set[str]:
    """The extractors of the run's model, prompts and gleaning check with any index.max_gleanings
    from 2 (of 2 to 8, or the run's): their later rounds' checks measure the run's."""
    ix = settings.index
    return {extractor_key(msgspec.structs.replace(settings, index=msgspec.structs.replace(ix, max_gleanings=m)))
            for m in range(2, max(8, ix.max_gleanings) + 1)}


def _measured(per_prompt: float | None, prompt: float, fixed: float) -> float:
    """A call's completion tokens: ``per_prompt`` token of its ``prompt`` (``Ratios``), else ``fixed``."""
    return fixed if per_prompt is None else per_prompt * prompt


def _stat(path: Path) -> os.stat_result | None:
    """The file's ``stat``, or None when it cannot be taken."""
    try:
        return path.stat()
    except OSError:
        return None


def _unchanged(st: os.stat_result | None, rows: dict[str, tuple[str, int, float]]) -> bool:
    """Whether the file of ``stat`` ``st`` (None: not taken), indexed as ``rows``, is as indexed
    (``same_on_disk``)."""
    return st is not None and same_on_disk(rows, st)


def _staying(indexed: dict[str, tuple[str, int, float]], read: set[str], root: Path | None, *,
             scope: list[str], unlisted: list[str], unread: set[str]) -> set[str]:
    """The indexed documents a run keeps without reading them, as it keeps them: those of files
    read in vain whose documents ``index`` keeps (``unread``: the system would not give them, or a file
    as indexed lacks index.text_field now), of folders it could not list (``unlisted``),
    and, outside the paths given (``scope``), of files still there (or whose whole folder is gone)."""
    kept = set()
    for path, (doc_id, _size, _stamp) in indexed.items():
        if loader.file_of(path) in unread:
            kept.add(doc_id)
        elif path in read:
            continue
        elif covered(path, scope):
            if covered(path, unlisted):
                kept.add(doc_id)
        elif still_there(path, root):
            kept.add(doc_id)
    return kept


class FromCache(NamedTuple):
    """The summaries and reports of an update the cache answers (``_update_calls``): free; and
    the prompt tokens of each of those reports (``_report_prompt``), paid with llm.cache off."""
    summaries: int = 0
    reports: int = 0
    report_prompts: tuple[int, ...] = ()


def _update_calls(store: Store, settings: Settings, *, new_chunks: dict[str, Chunk],
                  from_cache: dict[str, Extraction], unclaimed: dict[str, float], wanted: set[str],
                  live: dict[str, str],
                  paths_of: dict[str, str], resummarize: bool, recluster: bool,
                  summary_tokens: float = SUMMARY_COMPLETION,
                  rereport: bool = False, sampled: Sampled | None = None) -> tuple[int, list[int], FromCache]:
    """(summary calls, the prompt tokens of each report call) of a run bringing the published graph to the chunks
    ``wanted``, worked out as the run works them out (``GraphState.apply``, Leiden from the
    published partition, ``dirty_communities``), from each chunk's extraction: the stored one
    when there is one, else the offline extractor's names standing in for the model's
    (``new_chunks``: those not yet extracted), or the extraction the run makes of the cache's
    answers where they make it whole (``from_cache``; ``unclaimed``: those of them whose claims the
    cache does not hold, with the completion tokens of each one's claims, stood in for by
    ``_claims_stand_in``: likely more reports than the run's, no bound). A new chunk names existing entities: their
    summaries are written again, and the reports of their communities and of those above.
    ``live``: the published chunks (``index_rows.live_chunks``); ``summary_tokens``: a model's
    summary's length (``Ratios.summary_completion``), of those a report's context shows;
    ``rereport``: the report settings changed, so every community's context is built again;
    ``sampled``: a first gleaning stood in for on a sample of the chunks, the summaries of the
    elements it touches and the reports of communities holding the entities it names taken on to
    every chunk's (``Sampled``), but those the run asks for anyway (other chunks naming them,
    every summary asked again). Third, what the cache answers of them (``FromCache``)."""
    ix = settings.index
    key = extractor_key(settings)
    added = {c for c in wanted if live.get(c) != key}
    removed = {c for c, k in live.items() if c not in wanted or k != key}
    extractions = index_rows.load_extractions(store, added - new_chunks.keys(), key)
    said = _said_before(store, {c: k for c, k in live.items() if c in removed})
    guessed: set[str] = set()   # the elements the offline extractor's names stand in for
    extractions.update({c: e for c, e in from_cache.items() if c in added})
    for cid, tokens in unclaimed.items():
        if cid in added:
            extractions[cid] = _claims_stand_in(extractions[cid], new_chunks[cid].text, tokens, ix.encoding)
    guessing = added & (new_chunks.keys() - from_cache.keys())
    lengths = _description_lengths(live, store, key) if guessing else None
    # The file of a chunk whose document was not read (a file as indexed, kept unread: its chunks
    # the current extractor has not, ``index_rows.backlog``) is the index's, as ``said``'s are: it
    # stood in as a file of no name (what no file said), and the same file with a new
    # status-change time only, read, as itself (what it said before: 27 summaries for 35, on ten
    # articles after llm.extraction_model changed, one of them chmod'ed).
    unread_files = index_rows.files_of_chunks(store, {c for c in guessing if new_chunks[c].doc_id not in paths_of})
    recut = recuts_all(store, chunker_key(settings))   # (every document read is cut again)
    for cid in guessing:
        chunk = new_chunks[cid]
        file = paths_of.get(chunk.doc_id) or unread_files.get(cid, "")
        earlier = _overlapping(chunk.text, said.get(file, []))
        if recut:
            # (every document read recut, index.chunk_size or encoding changed: the model describes
            # each name of a chunk from the chunk it reads now, not as the earlier one it shares
            # text with; kept, ten articles 1,200 -> 600 tokens were estimated 0 summaries and 7
            # reports for the run's 12 and 22, synth_small 18 and 35 for 102 and 53; now 29 and
            # 25, and 224 and 51: ``_recut_stand_in``)
            extractions[cid] = _recut_stand_in(chunk.text, earlier[0])
            continue
        extractions[cid] = _stand_in(chunk.text, *earlier, entity_types=ix.entity_types, guessed=guessed,
                                     lengths=lengths)
    added &= extractions.keys()   # (a chunk neither extracted nor new: none)
    # A published chunk whose extraction here holds the records it is live with stays as it is,
    # as the run keeps it (``Indexer._changes``, ``index_rows.same_records``): one the index
    # holds, or one the cache answers whole (claims too: not stood in for). Merged again, an
    # extraction setting changed and back was counted its summaries and reports.
    same = _same_as_live(store, {c: live[c] for c in added if c in live and c not in unclaimed
                                 and c not in guessing}, extractions, key, from_cache=from_cache.keys())
    added -= same
    removed -= same
    if not added and not removed and not resummarize and not rereport:
        return 0, [], FromCache()   # (nothing changed: the run asks for nothing new)
    # The elements the run writes anew whatever a sampled first gleaning adds (documents added,
    # edited or removed beside it): their summaries and the reports showing them are counted
    # once, not taken on to every chunk's as those the sample's stand-ins alone ask for.
    other = _named_by(extractions, added - sampled.chunks) | _named_by(
        _stored_extractions(store, {c: live[c] for c in removed - sampled.chunks}), removed) \
        if sampled is not None else set()
    state = GraphState.load(store)
    # (the relationships' descriptions left in the store, as the run leaves them: those of the
    # lines compared, of the elements changed, are read below, and those a context shows)
    before = _lines(state)
    if resummarize:
        state.retry_summaries |= set(state.entities) | set(state.relationships)
    jobs = state.apply(store, Change(added_docs=set(), removed_docs=set(), kept_docs=set(), doc_chunks={},
                                     live=set(), added_chunks=added, removed_chunks=removed,
                                     extractions=extractions), settings)
    # (those of the offline extractor's names and pairs, as many as a model would find of them:
    # replayed only once one of them asks a model for its summary, the replay of 200 chunks
    # being most of an estimate whose new names are all joined without one)
    stand_ins = functools.cache(lambda: _stand_in_ratios(store, key, settings, live=live, lengths=lengths))
    # What the run writes of them without a model, as it writes it; a model's summary is not known
    # (asked of the model, as ``asks_model`` says of a run with one), and stood in for as long as
    # the model's are (``_summarized``: joined, the descriptions made an update's report prompts
    # 3,216 tokens each for the run's 2,519, and more of them counted cut off and asked again).
    summaries = 0.0
    cached_summaries = 0
    for element, name, descriptions in jobs:
        chosen = summary_input(descriptions, ix.summary_max_descriptions)
        # (a summary the cache answers, an interrupted run's, costs nothing, and is what the run
        # writes: one stopped while summarizing synth_small was estimated 148 summaries for the
        # rerun's 78 paid, 70 from the cache)
        if (written := without_model(chosen, settings)) is None:
            if (written := _summary_from_cache(store, settings, name, chosen)) is not None:
                cached_summaries += 1
            else:
                if resummarize and element in before:   # (asked again whatever the sample adds)
                    other.add(element)
                summaries += (1.0 if element not in guessed else stand_ins()[0 if element.startswith("ent-") else 1]) \
                    * (sampled.element_scale if sampled is not None and element in sampled.elements
                       and element not in other else 1.0)
                written = _summary_stand_in(chosen, settings, summary_tokens)
        if (e := state.entities.get(element) or state.relationships.get(element)) is not None:
            e.description = written
    state.finish_graph(store)
    moved = len(state.changed_entities | state.deleted_entities)   # (as the run counts them)
    # Re-merged as it was (a chunk replaced by one saying the same): its report context is too.
    now = _lines(state)
    _described(store, before, state.changed_relationships)
    state.changed_entities = {e for e in state.changed_entities if now.get(e) != before.get(e)}
    state.changed_relationships = {r for r in state.changed_relationships if now.get(r) != before.get(r)}
    communities = _partition(store, state, settings, recluster=recluster, moved=moved)
    dirty = dirty_communities(state, communities, same_settings=not rereport)
    # As the run writes them, the deepest first: a community whose elements changed, or whose
    # child's report did (its context may hold it), has its context built; one built as a stored
    # report's was (its key) keeps that report, with no call. Counted by what changed alone, a
    # sentence appended to a synth_small article was estimated 5 reports for the run's 0 (an
    # entity's degree, or a relationship between communities, is no line of a context).
    stored = index_rows.report_keys(store)
    model, version = settings.llm.report_model, load_prompt("report").version
    children = children_of(communities)
    changed: set[str] = set()
    prompts = []
    cached_reports: list[int] = []
    touched: list[int] = []   # (of those prompts, the reports of communities the sampled stand-ins name)
    ends = _Ends.of(state)
    paired = _paired_in(other, state) if sampled is not None else {}
    # The report of each community worked out that has a parent, as the run has it: a parent too
    # large for its members' lines holds its children's reports instead (``build_context``), and
    # built without them its context was no stored report's, nor one the cache answers (200
    # corpusgen documents, a model run after an offline one: 13 reports estimated paid, the run
    # paid none). One a model writes anew is not known: its published one (or an extractive one)
    # stands in, and a parent's context showing it is paid (``guessed``). An extractive stand-in
    # (an offline index's) has a summary about twice a model's (136 tokens, 71 on synth_small),
    # which matters little: a parent holds children's reports only when its lines fill
    # index.report_max_input_tokens, and it is filled either way. (A model estimate over
    # synth_small's offline index: 72,271 report prompt tokens, 72,034 with the stand-ins cut to
    # a model's length, for the run's 79,666; the gap is the reports counted, 34 for the run's
    # 54: the offline extractor's partition, not scaled to a model's as a first index's is.)
    reported: dict[str, Report] = {}
    guessed_reports: set[str] = set()
    old_members = {k.id: k.members for k in state.old_communities}

    def report_of(k: Community) -> Report | None:
        # (one not worked out keeps its published report, read only when a parent needs it)
        return reported[k.id] if k.id in reported else index_rows.load_report(store, state.old_reports.get(k.id))

    for level in deepest_first(communities):
        for c in level:
            if c.id not in dirty and not any(k.id in changed for k in children.get(c.id, ())):
                continue
            kids = [(k, r) for k in children.get(c.id, ()) if (r := report_of(k)) is not None]
            ctx = _report_context(c, state, settings, store, ends=ends, children=kids)
            for k, _r in kids:   # (read by this context alone: let go, as the run lets go of them)
                reported.pop(k.id, None)
            guessed = not guessed_reports.isdisjoint(ctx.elements["reports"])
            report: Report | None = None
            # (A context showing an element whose summary a model writes anew is not a stored
            # report's: the element's line here stands in for a summary of descriptions other than
            # those of the summary a report was written from (``_summary_stand_in``). Not shown,
            # cut at index.report_max_input_tokens, the run's context does not show it either,
            # and keeps the report.)
            key = context_key(ctx, model=model, prompt_version=version)
            if len(c.members) < ix.report_min_members:
                if key not in stored:
                    changed.add(c.id)
                if c.parent:   # (the run's, written without a model: a guess where a child's is)
                    reported[c.id] = _extractive(c, ctx, state, ends, kids, settings)
                    if not guessed_reports.isdisjoint(k.id for k, _r in kids):
                        guessed_reports.add(c.id)
                continue
            if not guessed and key in stored:
                if c.parent and (report := index_rows.load_report(store, key)) is not None:
                    reported[c.id] = report
                continue
            # (not with new report settings: ``ReportStage.regen_threshold``)
            if not rereport and (report := _kept_close(c, ctx, state, store, settings, guessed_reports,
                                                        old_members)) is not None:
                if c.parent:   # (unchanged for its parent: the report it showed)
                    reported[c.id] = report
                continue
            changed.add(c.id)
            # (a report the cache answers costs nothing: extract_claims off and on again was
            # estimated 11 reports on ten news articles, the run asked the cache for all 11)
            cached, report = (False, None) if guessed else _report_cached(store, settings, ctx)
            if cached:
                cached_reports.append(_report_prompt(ctx, settings))
            else:
                prompts.append(_report_prompt(ctx, settings))
                if sampled is not None and not sampled.entities.isdisjoint(c.members) \
                        and not _shows_any(c, other, paired):
                    touched.append(prompts[-1])
            if c.parent:
                if report is None:   # (written anew by the model: not known)
                    guessed_reports.add(c.id)
                    report = index_rows.load_report(store, state.old_reports.get(c.id)) or \
                        _extractive(c, ctx, state, ends, kids, settings)
                reported[c.id] = report
    if touched and sampled is not None:
        # (those of the sample's stand-ins taken on to every chunk's: as many more, as long)
        more = math.floor(len(touched) * (sampled.community_scale - 1) + 0.5)
        prompts += [round(sum(touched) / len(touched))] * more
    return math.floor(summaries + 0.5), prompts, FromCache(cached_summaries, len(cached_reports),
                                                           tuple(cached_reports))


def _kept_close(c: Community, ctx: ReportContext, state: GraphState, store: Store, settings: Settings,
                guessed_reports: set[str], old_members: dict[str, list[str]]) -> Report | None:
    """The report ``c`` had, where the run keeps it for context ``ctx``, close enough to the one
    it was written from (index.report_regen_threshold: ``ReportStage.found``); else None. The
    line of a child's report the model writes anew (``guessed_reports``: its published one stands
    in) counts as changed, as the run's will be."""
    threshold = settings.index.report_regen_threshold
    if threshold <= 0 or (previous := state.old_reports.get(c.id)) is None:
        return None
    elements = ctx.elements
    if not guessed_reports.isdisjoint(elements["reports"]):
        elements = {**elements, "lines": [f"{line}~" if line.split("=", 1)[0] in guessed_reports else line
                                          for line in elements["lines"]]}
    report = index_rows.load_report(store, previous)
    if close_enough(report, elements, threshold) and not names_withdrawn(report, old_members.get(c.id, ()),
                                                                         state.entities):
        return report
    return None


def _named_by(extractions: dict[str, Extraction], chunks: set[str]) -> set[str]:
    """The entities and relationships the ``extractions`` of ``chunks`` name."""
    out: set[str] = set()
    for cid in chunks & extractions.keys():
        entities, relationships, _claims = mentions_of(cid, extractions[cid])
        out.update(m.entity_id for m in entities)
        out.update(m.relationship_id for m in relationships)
    return out


def _stored_extractions(store: Store, chunks: dict[str, str]) -> dict[str, Extraction]:
    """The stored extractions of ``chunks`` (chunk -> the extractor whose result counts)."""
    out: dict[str, Extraction] = {}
    for key in set(chunks.values()):
        out.update(index_rows.load_extractions(store, {c for c, k in chunks.items() if k == key}, key))
    return out


def _paired_in(elements: set[str], state: GraphState) -> dict[str, set[str]]:
    """Each end of the relationships among ``elements`` (in ``state``), with its other ends."""
    out: dict[str, set[str]] = {}
    for e in elements:
        if (r := state.relationships.get(e)) is not None:
            out.setdefault(r.source, set()).add(r.target)
            out.setdefault(r.target, set()).add(r.source)
    return out


def _shows_any(c: Community, elements: set[str], paired: dict[str, set[str]]) -> bool:
    """Whether community ``c``'s report context may show one of ``elements``: an entity among its
    members, or a relationship with both ends among them (``paired``: ``_paired_in(elements)``,
    made once: every relationship of ``elements`` looked up again for each community, a third of
    a 3,000-document index's relationships took 11.6 s of CPU over its 2,250 communities)."""
    members = set(c.members)
    return not members.isdisjoint(elements) or any(
        not members.isdisjoint(paired[m]) for m in members if m in paired)


def _same_as_live(store: Store, published: dict[str, str], extractions: dict[str, Extraction], key: str, *,
                  from_cache) -> set[str]:
    """Those of the live chunks ``published`` (chunk -> the extractor it is live with) whose
    extraction (``extractions``: the stored one by ``key``, or, for those ``from_cache``, the
    one the run makes of the cache's answers) holds the records (entities, relationships,
    claims) of the one they are live with: the run keeps them as they are."""
    stored = index_rows.same_records(store, {c: k for c, k in published.items() if c not in from_cache}, key)
    cached = {c: k for c, k in published.items() if c in from_cache}
    same = set(stored)
    for old in set(cached.values()):
        was = index_rows.load_extractions(store, {c for c, k in cached.items() if k == old}, old)
        same.update(c for c, w in was.items() if (e := extractions.get(c)) is not None
                    and (e.entities, e.relationships, e.claims) == (w.entities, w.relationships, w.claims))
    return same


class FirstGraph(NamedTuple):
    """What a first index of some chunks' extractions asks a model for (``first_graph``)."""
    entity_summaries: int
    relationship_summaries: int
    reports: list[int]   # the prompt tokens of each report
    entities: int        # in the graph


def first_graph(extractions: dict[str, Extraction], settings: Settings) -> FirstGraph:
    """The summaries and reports a first index of these chunk ``extractions`` asks a model
    for, worked out as the run works them out:
    merged into an empty graph (``GraphState.apply``, on an index in memory: nothing is written),
    clustered as the run clusters (``_partition``: a fresh hierarchical Leiden), a report for
    each community of index.report_min_members or more."""
    with contextlib.closing(Store(":memory:")) as empty:
        state = GraphState.load(empty)
        jobs = state.apply(empty, Change(added_docs=set(), removed_docs=set(), kept_docs=set(), doc_chunks={},
                                         live=set(), added_chunks=set(extractions), removed_chunks=set(),
                                         extractions=dict(extractions)), settings)
        state.finish_graph(empty)
        chosen = [summary_input(descriptions, settings.index.summary_max_descriptions)
                  for _element, _name, descriptions in jobs]
        _summarized(state, [element for element, _n, _d in jobs], chosen, settings)
        communities = _partition(empty, state, settings, recluster=False, moved=0)
    asked = [asks_model(c, settings) for c in chosen]
    entities = sum(a for a, (element, _n, _d) in zip(asked, jobs) if element.startswith("ent-"))
    ends = _Ends.of(state)
    reports = [_report_prompt(_report_context(c, state, settings, ends=ends), settings) for c in communities
               if len(c.members) >= settings.index.report_min_members]
    return FirstGraph(entities, sum(asked) - entities, reports, len(state.entities))


def _summarized(state: GraphState, elements: list[str], chosen: list[list[str]], settings: Settings) -> None:
    """The descriptions the run has summarized (``elements``: asked of the model; ``chosen``, of
    each those ``summary_input`` takes) stood in for, as a report's context holds them: their
    first ``SUMMARY_COMPLETION`` tokens, a model's summary's length. Joined, every description
    of an element named in many chunks (the context before its summary) filled a community's
    context past index.report_max_input_tokens: 1,884 chunks' reports came out 483 prompt tokens
    each (a context of what fitted), a sample's 2,353, the run's 3,476; taken as summaries, 3,090
    and 3,109 (the run's own extractions: 3,348)."""
    for element, descriptions in zip(elements, chosen):
        (state.entities if element.startswith("ent-") else state.relationships)[element].description = \
            _summary_stand_in(descriptions, settings, SUMMARY_COMPLETION)


def _summary_stand_in(chosen: list[str], settings: Settings, tokens: float) -> str:
    """A model's summary of the descriptions ``summary_input`` has ``chosen`` as long as one
    (``tokens``, up to index.summary_max_tokens): the first tokens of those it is written from."""
    ix = settings.index
    length = max(1, min(round(tokens), ix.summary_max_tokens))
    return truncate(" ".join(chosen), length, ix.encoding)


FIRST_SAMPLE = 1000   # the chunks of a first index worked out, at most (the rest scaled)


def _first_index(chunks: dict[str, Chunk], settings: Settings) -> tuple[int, int, float]:
    """(summary calls, report calls, report prompt tokens) of a first index of ``chunks``: worked
    out on the offline extractor's names (``first_graph``), scaled kind by kind to a model's
    (``estimate_ratios.FIRST_ENTITY_SUMMARIES``, ...).

    Over ``FIRST_SAMPLE`` chunks (the offline extractor takes ~3 ms a chunk: 40 s more on
    10,000 documents), those first by id (a content hash: a spread of the corpus) are worked
    out, and a half and a quarter of them again: each count is taken on to every chunk as it
    grew, a power of the chunks (``_grown``). Reports grow as the graph's entities do (a
    community holds index.max_cluster_size at most), a steadier count than the communities
    Leiden finds on a part of the graph. A report's prompt is the sample's mean, not taken on:
    a context holds index.max_cluster_size members at most, each described by a summary
    (``_summarized``), so it grows little if at all with the corpus (1,884 chunks of a
    corpusgen corpus: 3,114 tokens a report in a sample of 1,000, 3,093 in the whole; 263
    chunks of 41 articles, 1,505 in a sample of 130, 1,642), and its growth over a quarter and
    a half of the sample is noise (taken on as ``_grown`` takes the counts: 1,889)."""
    ix = settings.index
    order = sorted(chunks)
    sample = order[:FIRST_SAMPLE]
    offline = {cid: nlp.extract_offline(chunks[cid].text, entity_types=ix.entity_types) for cid in sample}
    g = first_graph(offline, settings)
    ent, rel, reports, entities = g.entity_summaries, g.relationship_summaries, len(g.reports), g.entities
    mean_prompt = sum(g.reports) / len(g.reports) if g.reports else 0
    if len(order) > len(sample):
        h, q = (first_graph({c: offline[c] for c in sample[:len(sample) // k]}, settings) for k in (2, 4))
        grown = functools.partial(_grown, doublings=math.log2(len(order) / len(sample)))
        ent = grown((q.entity_summaries, h.entity_summaries, ent))
        rel = grown((q.relationship_summaries, h.relationship_summaries, rel))
        if entities:
            reports *= grown((q.entities, h.entities, entities)) / entities
    # Whole calls, their tokens those of the calls counted (as an update's are counted): 1.37
    # reports of one chunk were said "1 calls" with 1.37 calls' tokens.
    summaries = math.floor(ent * FIRST_ENTITY_SUMMARIES + rel * FIRST_RELATIONSHIP_SUMMARIES + 0.5)
    communities = math.floor(reports * FIRST_REPORTS + 0.5)
    return summaries, communities, communities * mean_prompt * FIRST_REPORT_PROMPT


def _grown(counts: tuple[int, int, int], *, doublings: float) -> float:
    """A count of a quarter, a half and the whole of a sample (``counts``), taken on to a
    corpus ``doublings`` doublings of the sample larger: at the rate it grew from the half to
    the whole (a power of the chunks, between 0, not growing, and 1, as the chunks: a sample's
    noise kept in bounds), that rate falling on each doubling as it fell from the quarter to
    the half. (A corpus naming the same entities throughout grows ever slower: on 10,000
    corpusgen documents the relationship summaries of 1,000 chunks taken on at their last rate
    came out 3,314 for the 2,100 of every chunk worked out, falling 1,951.)"""
    quarter, half, whole = counts
    if not (quarter and half and whole):
        return whole * 2 ** doublings if whole else 0.0   # (too few to say: as the chunks)
    rate = min(1.0, max(0.0, math.log2(whole / half)))
    before = min(1.0, max(0.0, math.log2(half / quarter)))
    fall = min(1.0, rate / before) if before else 1.0
    total, left = 0.0, doublings
    while left > 0:
        rate *= fall
        total += rate * min(1.0, left)
        left -= 1
    return whole * 2 ** total


STAND_IN_SAMPLE = 200   # the chunks the stand-in ratios are replayed on, at most


def _stand_in_ratios(store: Store, key: str, settings: Settings, *, live: dict[str, str],
                     lengths: tuple[float, float] | None) -> tuple[float, float]:
    """The entity and relationship summaries a model's extraction asks for per one the offline
    extractor's does (``estimate_ratios.stand_in``), replayed on the index: every other published
    document (by id) taken as new, its chunks' elements merged with what the rest of the index
    says of them, once with the stored extractions and once with the offline extractor's; then,
    short of ``STAND_IN_SAMPLE`` chunks extractor ``key`` read, the other half the same way (30
    synth_small articles gave 17 chunks a half, too few: 20 added were estimated 109 summaries
    for the run's 133, where both halves measured 1.2 a model's per offline name). 1 and 1 on
    too few. ``live``: the published chunks (``index_rows.live_chunks``); ``lengths``: the
    model's description lengths (``_description_lengths``), the stand-ins cut to them (``_as_long``)."""
    docs = sorted(index_rows.chunk_ids_of(store, index_rows.document_ids(store)).items())
    model_asks, offline_asks, chunks = [0, 0], [0, 0], 0
    checked: dict[tuple[str, ...], bool] = {}   # (``_summaries_of``: a third of the lists come again)
    for half in (docs[::2], docs[1::2]):
        if chunks >= STAND_IN_SAMPLE:
            break
        ids_ = [c for _doc, of_doc in half for c in of_doc if live.get(c) == key][:STAND_IN_SAMPLE - chunks]
        model = index_rows.load_extractions(store, set(ids_), key)
        offline = {cid: _as_long(nlp.extract_offline(text, entity_types=settings.index.entity_types), lengths)
                   for cid, text in index_rows.chunk_texts(store, sorted(model))}
        replayed = set(offline)
        model = {c: e for c, e in model.items() if c in replayed}
        elsewhere: dict[str, list[str]] = {}   # (read once for both: mostly the same elements)
        for total, asks in ((model_asks, _summaries_of(store, model, replayed, settings, elsewhere, checked)),
                            (offline_asks, _summaries_of(store, offline, replayed, settings, elsewhere, checked))):
            total[0] += asks[0]
            total[1] += asks[1]
        chunks += len(replayed)
    return stand_in(tuple(model_asks), tuple(offline_asks), chunks) or (1.0, 1.0)


def _summaries_of(store: Store, extractions: dict[str, Extraction], replayed: set[str],
                  settings: Settings, elsewhere: dict[str, list[str]] | None = None,
                  checked: dict[tuple[str, ...], bool] | None = None) -> tuple[int, int]:
    """The entity and relationship summaries the ``extractions`` of the ``replayed`` chunks ask
    for, their elements' descriptions merged with those the other chunks of the index give.
    ``elsewhere``: those (``unique_descriptions``) of the elements an earlier call for the same
    ``replayed`` chunks read, added to with those read here (the model's and the offline
    extractor's names of a chunk are mostly the same elements, a hub's thousands of rows).
    ``checked``: whether a model is asked for each list of descriptions an earlier call chose,
    added to here (the two extractions often give an element the same list: each is joined and
    counted once, not again, 4,252 lists for 6,334 replaying a 3,000-document index)."""
    elsewhere = {} if elsewhere is None else elsewhere
    checked = {} if checked is None else checked
    said: dict[str, list[str]] = {}
    for cid, ext in extractions.items():
        entities, relationships, _claims = mentions_of(cid, ext)
        for m in entities:
            said.setdefault(m.entity_id, []).append(m.description)
        for m in relationships:
            said.setdefault(m.relationship_id, []).append(m.description)
    out = [0, 0]
    limit = settings.index.summary_max_descriptions
    for kind, table, column in ((0, "entity_sources", "entity_id"), (1, "relationship_sources", "relationship_id")):
        elements = {e for e in said if e.startswith(("ent-", "rel-")[kind])}
        unread = elements - elsewhere.keys()
        others = index_rows.sources(store, table, column, unread)
        for element in unread:
            elsewhere[element] = unique_descriptions(r["description"] for r in others.get(element, [])
                                                     if r["chunk_id"] not in replayed)
        for element in elements:
            before = elsewhere[element]
            # (merged in as the run's re-merge does, not the whole list sorted again)
            descriptions = descriptions_after(before, (), said[element], ())
            # (as the run asks: not when the descriptions a summary takes are those it took,
            # a hub's chosen index.summary_max_descriptions)
            if (chosen := new_summary_input(descriptions, before, limit)) is not None:
                if (seen := tuple(chosen)) not in checked:
                    checked[seen] = asks_model(chosen, settings)
                out[kind] += checked[seen]
    return out[0], out[1]


def _report_prompt(ctx: ReportContext, settings: Settings) -> int:
    """The prompt tokens of a community's report of context ``ctx`` (``_report_context``: its
    members' lines as the run's context takes them, up to index.report_max_input_tokens; a
    context too long for them holds its children's reports instead: as long, about), in the
    report prompt."""
    return count_message_tokens(load_prompt("report").render(context=ctx.text), settings.index.encoding)


class _Ends(NamedTuple):
    """A graph's relationships (with their place in it) and claims by each entity they name, for
    the report contexts of its communities (``_report_context``): each found among its members'
    own, not in the whole graph. Each context scanned every relationship and sorted every claim:
    at 3,000 corpusgen documents (2,885 contexts), 68 s of an estimate's 283 (profiled)."""
    relationships: dict[str, list[tuple[int, Relationship]]]
    claims: dict[str, list[Claim]]

    @classmethod
    def of(cls, state: GraphState) -> _Ends:
        relationships: dict[str, list[tuple[int, Relationship]]] = {}
        for i, r in enumerate(state.relationships.values()):
            relationships.setdefault(r.source, []).append((i, r))
            if r.target != r.source:
                relationships.setdefault(r.target, []).append((i, r))
        # (those naming an entity, as subject or object, as the run's context takes them)
        return cls(relationships, claims_by_end(sorted(state.claims.values(), key=lambda k: k.id)))


def _report_context(c: Community, state: GraphState, settings: Settings, store: Store | None = None, *,
                    ends: _Ends, children: Sequence[tuple[Community, Report]] = ()) -> ReportContext:
    """``c``'s report context as the run builds it, of its ``children``'s reports (none: a
    context past index.report_max_input_tokens holds as many of its elements as fit instead);
    ``store``: the index whose relationships' descriptions ``state`` leaves there
    (``GraphState.describe``); ``ends``: ``state``'s (``_Ends.of``), made once for the
    communities of a graph unchanged."""
    ix = settings.index
    rels = _relationships_among(c, ends)
    if store is not None:
        state.describe(store, [r.id for r in rels])   # (the lines it may show, as the run reads them)
    claims = {m: ends.claims[m] for m in c.members if m in ends.claims}
    return build_context(c, entities=state.entities, relationships=rels, claims=claims, children=children,
                         max_tokens=ix.report_max_input_tokens, encoding=ix.encoding)


def _extractive(c: Community, ctx: ReportContext, state: GraphState, ends: _Ends,
                kids: list[tuple[Community, Report]], settings: Settings) -> Report:
    """``c``'s extractive report of context ``ctx`` and its children's reports ``kids``, as the
    run writes it (``ReportStage.extractive``)."""
    return extractive_report(c, ctx, entities=state.entities, relationships=_relationships_among(c, ends),
                             children=kids, encoding=settings.index.encoding)


def _relationships_among(c: Community, ends: _Ends) -> list[Relationship]:
    """The relationships between two members of ``c``, in the graph's order (as a scan of it
    finds them)."""
    members = set(c.members)
    found = {i: r for m in members for i, r in ends.relationships.get(m, ())
             if r.source in members and r.target in members}
    return [found[i] for i in sorted(found)]


def _partition(store: Store, state: GraphState, settings: Settings, *, recluster: bool,
               moved: int) -> list[Community]:
    """The communities the run's clustering step finds (``communities.updated_partition``, as
    ``Pipeline._cluster`` calls it), ``moved`` the entities this update changes."""
    ix = settings.index
    edges = [(r.source, r.target, r.weight) for r in state.relationships.values()]
    counter = itertools.count()
    new_id = lambda: f"new-{next(counter)}"  # noqa: E731  (never a published community's id)
    leiden = {"max_cluster_size": ix.max_cluster_size, "seed": ix.leiden_seed, "resolution": ix.leiden_resolution}
    fresh = functools.partial(hierarchical_leiden, sorted(state.entities), edges, **leiden)
    start = warm_start(store, state, offline=settings.offline)   # (a model's kept one, as the run takes it)
    if not start.previous:
        return fresh()
    same_settings = start.leiden == leiden_key(ix.max_cluster_size, ix.leiden_seed, ix.leiden_resolution)
    changed = state.rewired | (set(state.entities) - set(state.old_degree)) \
        if same_settings and not start.kept else None
    communities, _fresh, _moved = updated_partition(
        start.previous, warm=lambda old: fresh(previous=old, new_id=new_id, changed=changed),
        fresh=fresh, edges=lambda: edges, resolution=ix.leiden_resolution, drift_allowed=ix.recluster_drift,
        entities=len(state.entities), since_check=start.since_check,
        changed=moved_since(start.previous, state.entities) if start.kept else moved,
        same_graph=not start.kept and state.same_graph() and same_settings, recluster=recluster,
        new_id=new_id)
    return communities


def _lines(state: GraphState) -> dict[str, tuple]:
    """What a report context shows of each element, and the degrees it orders them by."""
    out: dict[str, tuple] = {e.id: (e.name, e.type, e.description, e.degree) for e in state.entities.values()}
    out.update({r.id: (r.source, r.target, r.description, r.combined_degree) for r in state.relationships.values()})
    return out


def _described(store: Store, lines: dict[str, tuple], ids: set[str]) -> None:
    """The ``lines`` (``_lines``) of the relationships among ``ids`` given the description
    ``GraphState.load`` left in the store (None there): the published one, the estimate writing
    nothing. (Every relationship's was read to compare the few changed: 202,662 of them on an
    index of 10,000 documents.)"""
    unread = [rid for rid in ids if (line := lines.get(rid)) is not None and line[2] is None]
    for rid, description in index_rows.relationship_descriptions(store, unread) if unread else ():
        source, target, _none, degree = lines[rid]
        lines[rid] = (source, target, description, degree)


def _said_before(store: Store, removed: dict[str, str]) -> dict[str, list[tuple[Extraction, str]]]:
    """What each of the ``removed`` chunks (chunk -> the extractor whose result counts) said,
    with its text, by the path of its document."""
    file_of = index_rows.files_of_chunks(store, set(removed))
    texts = dict(index_rows.chunk_texts(store, sorted(removed)))
    out: dict[str, list[tuple[Extraction, str]]] = {}
    for key in set(removed.values()):
        chunks = {c for c, k in removed.items() if k == key}
        for cid, ext in sorted(index_rows.load_extractions(store, chunks, key).items()):
            out.setdefault(file_of.get(cid, ""), []).append((ext, texts.get(cid, "")))
    return out


def _overlapping(text: str, earlier: list[tuple[Extraction, str]]) -> tuple[Extraction, str]:
    """What the ``earlier`` chunks of a file (extraction, text) that share a passage with the
    chunk ``text`` said, merged, and their text."""
    passages = _sentences(text)
    merged, texts = Extraction(), []
    for ext, old in earlier:
        if any(p in old for p in passages):
            merged.entities += ext.entities
            merged.relationships += ext.relationships
            texts.append(old)
    return merged, "\n\n".join(texts)


def _sentences(text: str) -> list[str]:
    """The sentences of ``text``, paragraph by paragraph (``sentences.sentences_of``)."""
    return [s for p in text.split("\n\n") for s in sentences_of(p)]


def _new_sentences(text: str, before_text: str) -> str:
    """The sentences of ``text`` that ``before_text`` does not hold, in their paragraphs (a
    paragraph new as a whole as it is: a new file's chunk is read as the run reads it)."""
    out = []
    for p in text.split("\n\n"):
        sentences = sentences_of(p)
        new = [s for s in sentences if s not in before_text]
        if new:
            out.append(p if len(new) == len(sentences) else " ".join(new))
    return "\n\n".join(out)


def _stand_in(text: str, before: Extraction, before_text: str, entity_types: list[str],
              guessed: set[str], lengths: tuple[float, float] | None = None) -> Extraction:
    """What a model would extract from the chunk ``text`` of a file whose earlier chunks said
    ``before`` of ``before_text``: what it said then of the names ``text`` still says on their
    own (``_said_alone``), and the offline extractor's names of the sentences that are new (a
    file edited in one place reads the same elsewhere, and the model's names for it are known).
    The elements of the offline extractor's names and pairs are added to ``guessed``.

    Told apart by sentence, not by paragraph: a paragraph with one word changed had each of its
    names described anew and its every two names paired by the offline extractor (two small
    edits of synth_small were estimated 9 reports for the run's 2)."""
    new = _new_sentences(text, before_text)
    predicted = _as_long(nlp.extract_offline(new, entity_types=entity_types) if new else Extraction(), lengths)
    if predicted.entities:
        # A name of a new sentence the whole chunk reads as another's ("TE" of "Torvell Energy",
        # the offline extractor's alias) is not one the model names either.
        whole = {ids.entity_id(e.name) for e in nlp.extract_offline(text, entity_types=entity_types).entities}
        whole |= {ids.entity_id(e.name) for e in before.entities}
        predicted.entities = [e for e in predicted.entities if ids.entity_id(e.name) in whole]
        predicted.relationships = [r for r in predicted.relationships
                                   if ids.entity_id(r.source) in whole and ids.entity_id(r.target) in whole]
    names = {e.name for e in before.entities} | {e.name for e in predicted.entities}
    names |= {n for r in before.relationships for n in (r.source, r.target)}
    alone = {n for n in names if _said_alone(n, text, names)}
    said = {ids.entity_id(e.name): e for e in reversed(before.entities) if e.name in alone}
    # A name the new sentences hold is said anew where they name it first (the model's first
    # words of it are there); one the chunk named already in a sentence it held keeps what the
    # model said of it (a sentence appended naming a hub was counted its summary written again).
    sentences = _sentences(text)
    fresh = {s for s in sentences if s not in before_text}
    anew = [e for e in predicted.entities
            if ids.entity_id(e.name) not in said or _first_said_in(e.name, sentences, fresh)]
    said.update({ids.entity_id(e.name): e for e in anew})
    entities = list(said.values())

    def pair(r: RelationshipRecord) -> frozenset[str]:
        return frozenset((ids.entity_id(r.source), ids.entity_id(r.target)))

    # (an end the model named in a relationship alone, not listed as an entity, is one still)
    kept = [r for r in before.relationships if r.source in alone and r.target in alone]
    known = {pair(r) for r in kept}
    new_pairs = [r for r in predicted.relationships if pair(r) not in known]
    guessed.update(ids.entity_id(e.name) for e in anew)
    guessed.update(ids.relationship_id(ids.entity_id(r.source), ids.entity_id(r.target)) for r in new_pairs)
    return Extraction(entities=entities, relationships=kept + new_pairs)


def _recut_stand_in(text: str, before: Extraction) -> Extraction:
    """What a model would extract from the chunk ``text`` of a file recut (every document cut
    again at other bounds), whose earlier chunks sharing its passages said ``before``: a new
    prompt, which a model words anew, so each name is described anew (``_worded_anew``); but the
    model read each of its sentences before, and names and pairs what it named and paired there
    (those ``text`` says on their own, ``_said_alone``), not what the offline extractor finds.
    Stood in for by the offline extractor's names of the whole chunk (``_stand_in`` of no earlier
    text), its other names and every two names of a sentence paired were taken in too:
    synth_small 1,200 -> 600 tokens was estimated 189 summaries and 57 reports (the run's 102 and
    53, the simulator repeating a description for the same first sentence), 224 and 51 so (more
    summaries: every name of the model's is described anew, an upper bound)."""
    names = {e.name for e in before.entities} | {n for r in before.relationships for n in (r.source, r.target)}
    alone = {n for n in names if _said_alone(n, text, names)}
    said = {ids.entity_id(e.name): e for e in reversed(before.entities) if e.name in alone}
    return Extraction(
        entities=[msgspec.structs.replace(e, description=_worded_anew(e.description, text)) for e in said.values()],
        relationships=[msgspec.structs.replace(r, description=_worded_anew(r.description, text))
                       for r in before.relationships if r.source in alone and r.target in alone])


def _worded_anew(description: str, text: str) -> str:
    """A description a model words anew reading the chunk ``text``: not known, stood in for by
    what it said before (``description``, as long) marked with the chunk, unlike any earlier one,
    so that the summaries and report contexts showing it change as a real model's words change
    them."""
    return f"{description} ({ids.text_hash(text, 8)})"


def _description_lengths(live: dict[str, str], store: Store, key: str) -> tuple[float, float] | None:
    """The mean words of an entity's and of a relationship's description in the extractions of
    extractor ``key`` the index holds (up to ``STAND_IN_SAMPLE`` of the published chunks
    ``live``, by id), or None when it holds none."""
    chunks = sorted(c for c, k in live.items() if k == key)[:STAND_IN_SAMPLE]
    said: tuple[list[int], list[int]] = ([], [])
    for ext in index_rows.load_extractions(store, set(chunks), key).values():
        said[0].extend(len(e.description.split()) for e in ext.entities)
        said[1].extend(len(r.description.split()) for r in ext.relationships)
    if not said[0]:
        return None
    entity = sum(said[0]) / len(said[0])
    return entity, sum(said[1]) / len(said[1]) if said[1] else entity


def _as_long(extraction: Extraction, lengths: tuple[float, float] | None) -> Extraction:
    """``extraction`` (the offline extractor's) with each description cut to the sentences that
    fit the model's mean length of its kind (``lengths``, words; one sentence at least; None:
    as it is). The offline extractor quotes two sentences of a name where the model said one:
    more descriptions too long to join, and summaries counted that the run never asks (news41,
    six articles added to ten: 33 for the run's 21)."""
    if lengths is None:
        return extraction

    def cut(description: str, words: float) -> str:
        kept: list[str] = []
        for sentence in sentences_of(description):
            if kept and len(" ".join([*kept, sentence]).split()) > words:
                break
            kept.append(sentence)
        return " ".join(kept)
    return Extraction(
        entities=[msgspec.structs.replace(e, description=cut(e.description, lengths[0])) for e in extraction.entities],
        relationships=[msgspec.structs.replace(r, description=cut(r.description, lengths[1]))
                       for r in extraction.relationships], claims=extraction.claims)


def _first_said_in(name: str, sentences: list[str], fresh: set[str]) -> bool:
    """Whether the first of a chunk's ``sentences`` (``_sentences``) saying ``name`` is one of ``fresh``."""
    return next((s in fresh for s in sentences if name in s), True)


def _said_alone(name: str, text: str, names: set[str]) -> bool:
    """Whether ``text`` says ``name`` other than inside a longer one of ``names`` ("Quinquay"
    once every "Dr. Quinquay" is "Dmitri Quinquay": a model lists it no more)."""
    if name not in text:
        return False
    longer = [n for n in names if name in n and n != name]
    inside = [m.span() for n in longer for m in re.finditer(re.escape(n), text)]
    return any(not any(a <= m.start() and m.end() <= b for a, b in inside)
               for m in re.finditer(re.escape(name), text))


def _reports_asked(store: Store, settings: Settings, *, chosen_with: int, recluster: bool) -> int:
    """The community reports of the published graph the next run asks a model for, its report
    contexts the same (``chosen_with``: the report_min_members its reports were chosen with).
    Every community of report_min_members or more members is asked for, but those showing the
    model's report of their context (or one kept close to it) and those settled as unusable
    (``UNUSABLE_RUNS``, with the same output budget). ``recluster``: the communities are those
    a fresh clustering finds; one with the members of a published community is that one (its
    context the same, but for sub-community reports it may hold)."""
    ix = settings.index
    budget = ix.report_max_output_tokens
    counts = msgspec.json.decode(store.get_meta("report_unusable") or "{}", type=dict[str, int])
    held = msgspec.json.decode(store.get_meta("report_unusable_held") or "{}", type=dict[str, list])
    extractive = index_rows.extractive_report_keys(store)
    published = {tuple(c.members): (c.id, context, report) for c, context, report in index_rows.load_communities(store)}
    if recluster:
        edges = [(source, target, weight) for _id, source, target, weight, *_ in index_rows.relationship_edges(store)]
        partition = [tuple(c.members) for c in hierarchical_leiden(
            sorted(eid for eid, *_ in index_rows.entity_rows(store)), edges, max_cluster_size=ix.max_cluster_size,
            seed=ix.leiden_seed, resolution=ix.leiden_resolution)]
    else:
        partition = list(published)
    asked = 0
    for members in partition:
        if len(members) < ix.report_min_members:
            continue
        if members not in published:
            asked += 1
            continue
        cid, context, report = published[members]
        if report not in extractive:   # the model's
            continue
        if context != report:          # standing in for an answer that failed
            asked += counts.get(report_attempt(context or "", budget), 0) < UNUSABLE_RUNS
        elif len(members) < chosen_with:   # held below report_min_members until now
            attempt, runs = held.get(cid) or ("", 0)
            asked += runs < UNUSABLE_RUNS or attempt.rsplit("/", 1)[-1] != str(budget)
        # (else a context with nothing in it, report_max_input_tokens too small: no call)
    return asked


def _summaries_asked(store: Store, settings: Settings) -> set[str]:
    """The elements whose summary a model writes when every summary is made again: those whose
    descriptions (as ``summarize`` takes them) are several and too long to join."""
    said: dict[str, set[str]] = {}   # (entity and relationship ids differ: "ent-", "rel-")
    for element, description in index_rows.element_descriptions(store):
        if description.strip():   # (as merging takes them: empty ones are none)
            said.setdefault(element, set()).add(description)
    limit = settings.index.summary_max_descriptions
    return {element for element, descriptions in said.items()
            if asks_model(summary_input(sorted(descriptions), limit), settings)}


def _reported_of(store: Store, min_members: int) -> dict[str, set[str]]:
    """Entity -> the published communities of ``min_members`` or more (those given a report)
    it is a member of."""
    of: dict[str, set[str]] = {}
    for c, _context, _report in index_rows.load_communities(store):
        if len(c.members) >= min_members:
            for member in c.members:
                of.setdefault(member, set()).add(c.id)
    return of


def _reports_showing(store: Store, elements: set[str], min_members: int) -> int:
    """The published communities of ``min_members`` or more whose report context may show one of
    ``elements``: an entity among its members, or a relationship with both ends among them (a
    context shows no other; a parent holds its children's members). Counted as every report, a
    summary setting changed on ten articles (10 summaries written again) was estimated 26
    reports where the 10 communities showing those elements could change, the run writing 0."""
    of = _reported_of(store, min_members)
    shown = {c for e in elements if e.startswith("ent-") for c in of.get(e, ())}
    for rid, source, target, *_ in index_rows.relationship_edges(store):
        if rid in elements:
            shown |= of.get(source, set()) & of.get(target, set())
    return len(shown)


def format_estimate(e: dict) -> str:
    n, kept = e["unreadable_files"], e.get("unreadable_kept", 0)
    it = "it" if n == 1 else "them"
    if kept == n:   # (the system would not give them: what was indexed from them stays)
        counts = f"what was indexed from {it} stays, counted"
    elif kept:
        counts = f"what was indexed from {kept} of them stays, counted; the others not counted"
    else:
        counts = "not counted"
    # What is true of them, as `index` says it ("1 file is not text"): it said "1 file cannot be
    # indexed as it is" of a binary file. And the files index.include leaves out, as `index` says
    # them, which it did not say at all. A file over index.max_file_mb as `index` says it (it said
    # "2 files could not be used" where `index` says "1 file could not be used, 1 is over ...").
    by_kind = e.get("unreadable_by_kind", {})
    said = unusable_said(by_kind, e.get("too_big", 0)) if sum(by_kind.values()) == n else ""
    said = said or f"{counted(n, 'file')} cannot be indexed as {'it is' if n == 1 else 'they are'}"
    unreadable = f"\n{said} ({counts}); the warnings name {it}" if n else ""
    unreadable += "".join(f"\n{'Left out: ' if i == 0 else ' ' * 10}{line}"
                          for i, line in enumerate(e.get("left_out_said", ())))
    # (An unchanged vault had 124 of 153 chunks to extract after an upgrade, and no word of why.)
    which = "The files given are" if e.get("read_again_given_only") else "Every file is"
    because = f"\n{which} read and chunked again: {e['read_again_because']}." \
        if e.get("read_again_because") else ""
    if e.get("extracted_again_because") and not e["offline"]:
        # (each chunk's extraction with these settings stored: it said "Every chunk is extracted
        # again" beside "0 chunks to extract", and the run extracted none)
        again = e.get("extracted_again") or "every chunk is extracted again"
        because += f"\n{again[:1].upper()}{again[1:]}: {e['extracted_again_because']}."
    if e.get("claims_asked_because") and not e["offline"]:
        asked = e.get("claims_asked") or "every chunk is asked for its claims (its entities and relationships " \
                                          "as extracted)"
        because += f"\n{asked[:1].upper()}{asked[1:]}: {e['claims_asked_because']}."
    if e.get("summarized_again_because") and not e["offline"]:
        because += f"\nEvery merged description is summarized again: {e['summarized_again_because']}."
    if e.get("reported_again_because") and not e["offline"]:
        # (the run said "reports are written again where their context changed"; the estimate
        # "Nothing to do", or counted reports with no word of why)
        because += f"\n{e['reported_again'][:1].upper()}{e['reported_again'][1:]}: {e['reported_again_because']}."
    if e.get("extractive_again") and not e["offline"]:
        because += f"\n{e['extractive_again'][:1].upper()}{e['extractive_again'][1:]}."
    if stranded := e.get("chunks_merged_again"):
        because += (f"\n{counted(stranded, 'chunk')} holding claims about names that are no entity "
                    f"{'is' if stranded == 1 else 'are'} merged again from the extractions stored, once "
                    "(no LLM call), to make those names entities.")
    if e["offline"]:
        head = (f"Offline indexing: {counted(e['documents'], 'document')}, {e['corpus_tokens']:,} tokens, "
                f"{counted(e['chunks_to_extract'], 'chunk')} to extract; no LLM calls, no cost"
                + ("; pass --api-base URL (or set llm.api_base) to count a model run." if e.get("no_endpoint")
                   else "."))
        if replaced := e.get("model_work_replaced_said"):
            head += f"\n{replaced[:1].upper()}{replaced[1:]}."
        return head + because + unreadable
    stored = [f"{e['chunks_unpublished']} extracted by an earlier run, not yet published"] \
        if e["chunks_unpublished"] else []
    if e["chunks_replacing"]:
        stored.append(f"{e['chunks_replacing']} extracted with these settings by an earlier run, to replace "
                      "the extraction of them the index holds, made with other settings since")
    unpublished = f" (and {'; '.join(stored)})" if stored else ""
    u = e["llm"]
    changed = e.get("documents_added", 0) + e.get("documents_edited", 0) + e.get("documents_read_again", 0)
    if e.get("update") and not (changed or e.get("documents_removed") or u["calls"] or e["chunks_to_extract"]
                                or e["chunks_unpublished"] or e["chunks_replacing"] or e.get("chunks_merged_again")
                                or e.get("read_again_because") or e.get("summarized_again_because")
                                or e.get("reported_again_because") or e.get("extractive_again")):
        # (It printed "total 0 calls" and that answers "are estimated" of an index with nothing to do.)
        return (f"Nothing to do: the index is up to date with {counted(e['documents'], 'document')} "
                f"({e['corpus_tokens']:,} tokens); no LLM calls." + because + unreadable)
    only = e.get("chunks_claims_only", 0)
    claims_only = ("" if not only else " (each only asked for its claims)" if only == e["chunks_to_extract"]
                   else f" ({only} of them only asked for their claims)")
    lines = [f"Estimate for {_worked_on(e)}{counted(e['chunks_to_extract'], 'chunk')} to extract{claims_only}"
             f"{unpublished}:"]
    if not u["calls"]:
        lines[0] = lines[0][:-1] + "; no LLM calls."
        return "\n".join(lines) + because + unreadable
    if u["calls"] == u["cached"]:   # (each answered by the cache: nothing to pay, no table of zeros)
        lines[0] = lines[0][:-1] + "; no LLM calls to pay for."
        return "\n".join([*lines, f"  ({_cached_said(u['by_stage'])})"]) + because + unreadable
    for stage, s in [*u["by_stage"].items(), ("total", u)]:   # paid calls: cache hits left out
        if stage != "total" and s["calls"] == s["cached"]:
            continue   # every call from the cache, or none expected (0.13 gleanings): nothing to pay
        lines.append(f"  {stage:<12} {_paid_calls(s['calls'] - s['cached'])}  {s['prompt_tokens']:>12,} prompt  "
                     f"{s['completion_tokens']:>10,} completion")
    if u["cached"]:
        lines.append(f"  ({_cached_said(u['by_stage'])})")
    # (A first index's estimate read as if measured on its model: nothing said it had no calls to go by.)
    # (An index of 15 calls of these models was said to hold none: 20 of a stage are needed.)
    few = e.get("model_calls", 0)
    stand_in = "" if not e.get("stand_in_ratios") else \
        ", from stand-in ratios (no history of these models in this index yet)" if not few else \
        (f", from stand-in ratios (this index's {counted(few, 'call')} of these models "
         f"{'is' if few == 1 else 'are'} too few to measure by: {MIN_CALLS} of a stage are needed)")
    lines.append(f"Extraction prompts are counted exactly; answers, summaries and reports are estimated{stand_in}.")
    if e.get("ratios_from"):
        lines.append(f"{e['ratios_from']}; the rest from stand-in ratios.")
    if e.get("reports_claims_stood_in", e.get("reports_upper_bound")):
        # (It said "The reports are an upper bound", which they are not: a claim about a name that
        # is no entity makes one, and other new chunks' names are guessed.)
        k = e["chunks_claims_unknown"]
        lines.append(f"The reports are likely fewer than counted: the claims asked of {counted(k, 'chunk')} are "
                     f"counted as if about every name {'it holds' if k == 1 else 'they hold'} (which names they "
                     "are about, only the model's answers say; a claim about a name that is no entity yet makes "
                     "one, not counted).")
    return "\n".join(lines) + because + unreadable


def extraction_change(store: Store, settings: Settings) -> str:
    """Why a run with ``settings`` extracts every chunk of the index in ``store`` again, in the
    run's words (``Indexer`` says it once the run starts, when it is being paid for), or "" when
    it does not: a new model, prompt, entity types, gleaning or claims setting read only as '62
    chunks to extract' of an unchanged folder. Offline runs pay nothing and say nothing."""
    built = store.get_meta("extractor") or ""
    if settings.offline or not built or built == extractor_key(settings) or not index_rows.has_chunks(store):
        return ""   # (an index of no chunk has none to extract again, as the run says)
    if built == claimless_key(settings):   # (asked its claims alone: ``claims_change``)
        return ""
    if index_rows.model_extractor(built):
        return ("the extraction settings (model, prompt, entity types, gleaning or claims) changed since "
                "this index was built" + _free(settings, "; answers in the cache cost nothing"))
    if not extracted_again(store, extractor_key(settings), claimless=claimless_key(settings)
                           ).startswith(EVERY_CHUNK_EXTRACTED):   # ("every chunk is asked for its claims alone")
        # (its model's extractions stored, taken: "No chunk is extracted again (...): it was built
        # offline, and is extracted with gpt-4o-mini", the run saying "no chunk ... (it was built offline; ...)")
        return "it was built offline"
    return f"it was built offline, and is extracted with {settings.llm.extraction_model}"


def claims_change(store: Store, settings: Settings) -> str:
    """Why a run with ``settings`` asks every chunk of the index in ``store`` for its claims, in
    the run's words, or "" when it does not: index.extract_claims turned on for an index built
    without, whose extractions the run keeps (``ExtractionStage.claims_only``: no extract or
    glean call) and asks the claims call alone of. It was said "every chunk is extracted again"."""
    built = store.get_meta("extractor") or ""
    if settings.offline or not built or built != claimless_key(settings) or not index_rows.has_chunks(store):
        return ""
    return "index.extract_claims was turned on since this index was built" + _free(
        settings, "; answers in the cache cost nothing")


def _free(settings: Settings, said: str) -> str:
    """``said`` of the answers in the cache, which cost nothing: "" with llm.cache off (the run
    looks none up, and pays for each)."""
    return said if settings.llm.cache else ""


# What the cache answers, stage by stage, as the estimate's line names them (gleaning: its checks too).
CACHED_SAID = (("first extraction answer", ("extract",)), ("gleaning answer", ("glean_check", "glean")),
               ("claims answer", ("claims",)), ("summary", ("summarize",)), ("report", ("report",)))


def _cached_said(by_stage: dict[str, dict[str, int]]) -> str:
    """The answers in the cache, which cost nothing: '62 first extraction answers are in the
    cache, from an earlier run: not counted; so are 105 gleaning answers' (a claims answer, a
    summary or a report the cache holds was said to be a gleaning answer, or not said)."""
    parts = [(n, word) for word, stages in CACHED_SAID
             if (n := sum(by_stage.get(stage, {}).get("cached", 0) for stage in stages))]
    (n, word), rest = parts[0], parts[1:]
    said = f"{counted(n, word)} {'is' if n == 1 else 'are'} in the cache, from an earlier run: not counted"
    if rest:
        others = [counted(k, w) for k, w in rest]
        listed = others[0] if len(others) == 1 else f"{', '.join(others[:-1])} and {others[-1]}"
        said += f"; so {'is' if len(rest) == 1 and rest[0][0] == 1 else 'are'} {listed}"
    return said


def summary_change(store: Store, settings: Settings) -> str:
    """Why a run with ``settings`` writes every summary of the index in ``store`` again (the run
    says it as it starts: ``Indexer._say_what_settings_redo``), or "" when it does not."""
    if settings.offline or not resummarizes(store, settings):
        return ""
    if index_rows.built_offline(store):   # (it said "the summary settings changed" of a first run with a model)
        return "it was built offline"
    return "the summary settings changed since this index was built" + _free(
        settings, " (answers in the cache cost nothing)")


def reported_again(store: Store, settings: Settings) -> str:
    """What a run with ``settings`` writes again of the reports of the index in ``store``, its
    report settings changed, in the run's words (``pipeline.reports_redone``), or "": offline
    runs pay nothing and say nothing."""
    return "" if settings.offline else reports_redone(store, settings)


def report_change(store: Store, settings: Settings) -> str:
    """Why a run with ``settings`` writes reports of the index in ``store`` again
    (``reported_again``), or "" when it does not. A new report_max_input_tokens was estimated
    'Nothing to do' of a run that said reports are written again where their context changed."""
    if not reported_again(store, settings):
        return ""
    if index_rows.built_offline(store):   # (as ``summary_change``)
        return "it was built offline"
    if why := claim_lines_redone(settings, store.get_meta("report_settings"), by_llm=True):   # (no setting changed)
        return why + _free(settings, " (answers in the cache cost nothing)")
    return "the report settings changed since this index was built" + _free(
        settings, " (answers in the cache cost nothing)")


def _paid_calls(n: int) -> str:
    """The calls column of the estimate's table, worded as ``counted`` words it ('1 call', where
    it said '1 calls'), the word padded to keep the columns after it in line."""
    return f"{n:>6,} {'call' if n == 1 else 'calls':<5}"


def _worked_on(e: dict) -> str:
    """The documents an estimate is for, up to its chunks: of an update, those it works on
    among them (an update of 2 files in 50 said "Estimate for 50 documents")."""
    every = f"{counted(e['documents'], 'document')} ({e['corpus_tokens']:,} tokens)"
    if not e.get("update"):
        return every + ", "
    added, edited, removed = e["documents_added"], e["documents_edited"], e["documents_removed"]
    again = e.get("documents_read_again", 0)   # (unchanged files read anew to another text, as the run says them)
    parts = [f"{n} {what}" for n, what in ((added, "added"), (edited, "edited"), (removed, "removed"),
                                           (again, "read again")) if n]
    changed = added + edited + again
    head = f"{changed} changed of {every}" if changed else f"an update of {every}"
    return f"{head}: {', '.join(parts) or 'none changed'}; "
