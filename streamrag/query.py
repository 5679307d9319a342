"""Asking the index: the façade over global, local, basic and extractive search.

``ask(question, settings, db_path, mode=...)`` returns an ``Answer``. Its shape:

* **One snapshot.** Every index read of a query happens inside one read transaction of a
  read-only connection, held for the whole query, so an indexer publishing meanwhile is never
  half-seen. The model calls are recorded (``llm_calls``, stages ``rate``, ``map``, ``reduce``,
  ``answer``, ``embed``) through a separate writable connection and its ``Writer``, under a
  ``runs`` row with command ``ask``, exactly like indexing calls.
* **Routing.** ``auto`` costs no model call: ``question.choose_mode`` picks global or local
  search from the question's words and the entities of the index it names. The choice and its
  reason are returned. A question naming only names the index lacks (``question.unknown_names``)
  is answered without a search.
* **Global search** is dynamic selection unless a static level is asked for: ``level=N``
  (``--level N``) or a ``query.global_level >= 0`` in the settings. ``level=-1`` means
  ``query.global_level``, and its default -1 the deepest level of the tree. A level deeper than
  the tree is clamped to the deepest (GraphRAG's default of 2 often does not exist on small
  corpora). Static search at level N reads the cut of the tree at N: every community of level N
  plus the leaves above it, so each entity is covered exactly once.
* **Outcome.** ``Answer.outcome`` says what the answer came to (``OUTCOMES``): answered,
  redirected (the search asked for cannot answer it; the text names one that may) or no answer.
  It is set where each search decides its answer, never read back from the text's wording.
* **No model configured** (``llm.api_base`` empty): the same selections, with term overlap
  standing in for the rating model, feed ``extractive`` answers, labelled as such.
* **Citations** ``[E:..] [L:..] [R:..] [T:..]`` in the answer are resolved against the context
  the answer was written from, in the snapshot (``citations.check``); one that names nothing
  given (made up, or an item of the index the model never saw) is dropped from the returned
  text and reported in ``unresolved``. The documents an answer rests on are those of its resolved
  citations (or of its context when it cites nothing), first those that give the entities the
  question names.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Sequence
from functools import cached_property, partial
from pathlib import Path

import anyio
import msgspec

from streamrag import citations, extractive, global_search, index_rows, local_search
from streamrag.collector import fewer_collections
from streamrag.config import MODES, Settings
from streamrag.errors import IndexMissingError, StoreBusyError, StreamragError, user_errors_unwrapped
from streamrag.parsing import has_text
from streamrag.prompts import load_prompt
from streamrag.question import (RELATION_WORDS, asks_more, broad_words, checked_question,
                                choose_mode, content_stop, global_question, named_entities,
                                missing_words, near_names, unknown_names)
from streamrag.signals import until_sigterm
from streamrag.status import failure_runs, last_update, llm_summary
from streamrag.store import Store, writer_at_work
from streamrag.terminal import shell_word, shown
from streamrag.terms import words
from streamrag.tokens import count_tokens
from streamrag.words import counted

# The keys ``ask --json``'s ``details`` always has, per search, with the value each has when the
# search did not get that far (no communities, no report selected, no model): a key is never
# left out for being zero.
_MAP_REDUCE = {"reports": 0, "map_batches": 0, "map_batches_failed": 0, "points": 0, "points_kept": 0,
               "points_reduced": 0, "reduce_context_tokens": 0}
_GLOBAL = {"communities": 0, "deepest_level": None, **_MAP_REDUCE, "broad_fallback": False}
DETAILS: dict[str, dict] = {
    "global_static": {**_GLOBAL, "level": None, "requested_level": None},
    "global_dynamic": {**_GLOBAL, "rated": 0, "pruned": 0, "selected": [], "ratings": {},
                       "fallback": False, "unrated": 0},
    "local": {"entities": [], "entity_search": "", "context_tokens": {}, "context_budgets": {}},
    "basic": {"chunks": [], "chunk_search": "", "context_tokens": {}},
    "none": {},   # (no search was made: nothing to count)
}


# What an answer came to (``Answer.outcome``): "redirected" and "no_answer" are no answer to the
# question, their ``text`` this program's own sentence (an error's object says "failed" instead).
# The same situation comes to the same outcome with a model or without: "redirected" where a
# search not made may find what this one did not (the text names it), "no_answer" where what
# was searched holds nothing for it. A model's answer is "answered" even where its text says the
# context does not tell: that is free-form prose, in any language, often beside a partial answer
# ("it does not say when; it says who"), and no wording of it is reliable to read back.
OUTCOMES = {
    "answered": "the text answers it (a model's answer, or the sentences an extractive one quotes)",
    "redirected": "the search asked for cannot answer it (a broad question of a local or basic "
                  "search, an index without communities or entities, no report rated relevant by "
                  "dynamic global search, which rates their titles and summaries only): the text "
                  "says which mode or level to ask instead",
    "no_answer": "nothing in the index matches it: only names the index lacks (no search made), "
                 "no passage or report holding its words, no point the map step kept (of "
                 "reports read whole); offline, a dynamic global search of a question no source "
                 "text has a word of; offline in auto mode, a global search that found nothing "
                 "followed by a basic search that found nothing either",
}

# What a dynamic global search says when it rated every report 0, down to query.dynamic_max_depth:
# with a model (its ratings) or offline (their overlap with the question's words), it rated a
# line of each report, never the whole (``global_search.rate_line``), so a static search of a
# level, or a local one, may find it still. (Offline it said "nothing in the community reports
# searched matches the words of this question", no_answer, of a question `--level 0` answered
# from the same reports: "Why was the mooring safe in winter?" of the harbor corpus.)
NO_REPORT_RATED = ("No community report was rated relevant to this question, so there is no answer to give "
                   "from them. An exhaustive search may still find something: try `--level N` (static global "
                   "search) or `--mode local`.")


class Answer(msgspec.Struct, kw_only=True):
    question: str
    requested_mode: str
    version: int = 0                # the published version of the index the answer was read from
    mode: str                       # global | local | basic
    search: str                     # global_dynamic | global_static | local | basic | none
    auto_choice: str | None = None  # the mode auto chose (None when a mode was given)
    auto_reason: str | None = None
    level: int | None = None        # static global search level
    text: str = ""
    citations: list[dict] = msgspec.field(default_factory=list)
    unresolved: list[str] = msgspec.field(default_factory=list)
    documents: list[str] = msgspec.field(default_factory=list)
    llm: dict = msgspec.field(default_factory=dict)
    extractive: bool = False
    cut_off: bool = False           # the model's answer reached query.answer_max_tokens
    not_in_index: list[str] = msgspec.field(default_factory=list)   # names no document has
    # of each of those, the closest names the index has (``question.near_names``)
    near_names: dict[str, list[str]] = msgspec.field(default_factory=dict)
    details: dict = msgspec.field(default_factory=dict)
    # What the search came to (``OUTCOMES``), set where the answer is decided: ``ask --json``
    # printed a redirect or a "nothing matches" as its answer, exit 0, told apart by wording alone
    outcome: str = "answered"

    def to_json(self) -> dict:
        """The object ``ask --json`` prints."""
        return {
            "question": self.question, "version": self.version, "mode": self.mode,
            "requested_mode": self.requested_mode,
            "auto_choice": self.auto_choice, "auto_reason": self.auto_reason, "search": self.search,
            "level": self.level, "outcome": self.outcome, "answer": self.text, "citations": self.citations,
            "unresolved_citations": self.unresolved, "documents": self.documents,
            "llm": self.llm or llm_summary({}), "extractive": self.extractive, "cut_off": self.cut_off,
            "not_in_index": self.not_in_index, "near_names": self.near_names,
            "details": {**DETAILS.get(self.search, {}), **self.details},
        }


# --------------------------------------------------------------------------------------------
# The façade
# --------------------------------------------------------------------------------------------
def ask(question: str, settings: Settings, db_path: Path | str, *, mode: str = "auto",
        level: int | None = None, on_delta: Callable[[str], None] | None = None,
        transport=None, on_status: Callable[[str], None] | None = None, sigterm: bool = False,
        fresh: bool = False) -> Answer:
    """Answer ``question`` from the index at ``db_path`` (see the module docstring). ``sigterm``
    (the command line): SIGTERM stops it as Ctrl-C does (``signals.Terminated``); a library
    caller's own SIGTERM handling is left alone. ``fresh``: the model is asked again, its
    cached answers for this question replaced."""
    work = partial(aask, question, settings, db_path, mode=mode, level=level, on_delta=on_delta,
                   transport=transport, on_status=on_status, fresh=fresh)
    with fewer_collections():
        return anyio.run(until_sigterm, work) if sigterm else anyio.run(work)


async def aask(question: str, settings: Settings, db_path: Path | str, *, mode: str = "auto",
               level: int | None = None, on_delta: Callable[[str], None] | None = None,
               transport=None, on_status: Callable[[str], None] | None = None,
               fresh: bool = False) -> Answer:
    """``ask`` for callers already inside an event loop."""
    if mode not in MODES:
        raise StreamragError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    question = checked_question(question)
    db_path = Path(db_path)
    status = on_status or (lambda _m: None)
    store = Store(db_path, readonly=True)
    try:
        with store.snapshot():
            check_not_empty(store, db_path, settings.index.include, settings=settings)
            answer = Answer(question=question, requested_mode=mode, mode=mode, search=mode,
                            version=store.version)   # (in the snapshot: what every read below sees)
            # Words in lower case the index has in no form may be a topic it covers in other
            # words ("what are the cybersecurity vulnerabilities?" of reports on security
            # flaws): a model's search can find that, an extractive one cannot.
            answer.not_in_index = unknown_names(store, question, lower_case=not settings.has_endpoint)
            answer.near_names = {name: near_names(store, name) for name in answer.not_in_index}
            # Once: routing, search and citations ask them, and must agree. Not the entities
            # inside a name the index lacks: "Ulmard" is not who "Zeno Ulmard" is.
            missing = missing_words(question, answer.not_in_index)
            named = _outside(named_entities(store, question), answer.not_in_index, missing)
            anchored = local_search.anchors(question, [(eid, name) for eid, name, _ in named])
            if answer.not_in_index and not asks_more(question, answer.not_in_index):
                # Only names the index lacks ("Zorblax Quintrell?"): nothing to search for, and
                # with a model a whole global search was paid to find nothing.
                answer.text = (f"Nothing in the index mentions {_missing(answer)}, and the "
                               "question asks about nothing else: no search was made.")
                answer.search, answer.outcome = "none", "no_answer"
                if mode == "auto":   # (``mode`` is a search's, as in every answer: the one auto picks)
                    answer.auto_choice = answer.mode = choose_mode(store, question, named, anchored, missing)[0]
                    # (not the reason it gives for its search: "... so the community reports answer
                    # it" beside a text saying that no search was made)
                    answer.auto_reason = ("the question names only what the index lacks ("
                                          + ", ".join(f'"{n}"' for n in answer.not_in_index) + "), so no search was made")
                if on_delta is not None:
                    on_delta(answer.text)
                return answer
            if mode == "auto":
                chosen, reason = choose_mode(store, question, named, anchored, missing)
                answer.auto_choice, answer.auto_reason, answer.mode = chosen, reason, chosen
                status(f"auto mode: {chosen} search ({reason})")
            if answer.not_in_index and settings.has_endpoint:   # (an extractive answer says it)
                status(f"nothing in the index mentions {_missing(answer)}")
                if on_delta is not None:   # (the model's answer never says it: printed first)
                    on_delta(missing_note(answer) + "\n\n")
            search = _Search(store, settings, answer, level, on_delta, status, fresh=fresh, named=named,
                             anchors=anchored, missing=missing)
            if not settings.has_endpoint:
                if settings.api_base_from != "--api-base" and index_rows.built_by_model(store):
                    # (a model built it: its user may not know the endpoint is not set here; said
                    # on stderr under --json too, where a script may not find the settings)
                    logging.getLogger("streamrag").warning(
                        "no endpoint is set (llm.api_base, STREAMRAG_API_BASE or --api-base), though a "
                        "model built this index: the answer is extractive")
                await search.run_extractive()
            else:
                with user_errors_unwrapped():
                    await search.run_with_llm(db_path, transport)
            if answer.cut_off:   # the length limit may have cut its last citation in two
                answer.text = citations.without_open_citation(answer.text)
            # The documents first of the names local search anchors on ("Pellric", written apart
            # from "the 2032 Pellric Flood" that holds it, too: not only the longest names).
            answer.text, answer.citations, answer.unresolved, answer.documents = citations.check(
                store, answer.text, search.context_tags, [eid for eid, _ in anchored])
            if answer.extractive:
                answer.documents = citations.quoted_first(store, extractive.quotes(answer.text),
                                                          answer.documents)
    finally:
        store.close()
    return answer


def deeper_level_line(given: str, level: int, deepest: int | None) -> str | None:
    """The line saying that the level a static global search was asked for, ``level`` (by
    ``given``: ``--level``, ``query.global_level``), is deeper than the index's deepest, which
    the search reads instead (``global_search.resolve_level``); ``None`` when it is not, or the
    index has no level."""
    if deepest is None or level <= deepest:
        return None
    return f"{given} {level} is deeper than this index's deepest level ({deepest}); using level {deepest}"


def _outside(named: list[tuple[str, str, bool]], missing: list[str],
             only_in: frozenset[str] = frozenset()) -> list[tuple[str, str, bool]]:
    """``named`` (``named_entities``) without those whose name's words are all of one of the
    ``missing`` names' (the index's "Ulmard" or "Zeno" of a "Zeno Ulmard" it lacks), or all
    words the question writes only in those (``missing_words``: "Bob Cratchit" and "Jacob
    Marley" of "Did Bob Marley meet Jacob Cratchit?", names it lacks both)."""
    held = [set(words(name)) for name in missing] + [set(only_in)]
    return [n for n in named if not any(set(local_search.name_words(n[1])) <= own for own in held)]


def _as_given(root: str) -> str:
    """The indexed folder ``root`` (recorded absolute) as a user gives it here: relative to the
    current folder when it is that folder or lies in it (``.``, ``notes``), else as recorded."""
    try:
        return str(Path(root).relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return root


def _failures_command(store: Store, db_path: Path, settings: Settings | None) -> str:
    """The command that lists what failed in the index at ``db_path`` (as the command was given
    it) from here, as `index` and `watch` name it (``cli.failures_command``): its folder, as
    recorded and given here (else the one of its .streamrag), or --db when ``settings`` (those
    the command read; None: the folder's own) are not what `status FOLDER` reads, by the one rule
    of every command (``cli.failures_command_given``). `ask notes` said a bare `streamrag status
    --failures`, which run there found no index."""
    from streamrag.cli import failures_command_given

    folder = store.get_meta("root")   # (none before a first publish: the folder of its .streamrag)
    if not folder and db_path.parent.name == ".streamrag":
        folder = str(db_path.parent.parent.resolve())
    root = Path(_as_given(folder)) if folder else db_path.parent
    return failures_command_given(db_path, root, root, settings)


def check_not_empty(store: Store, db_path: Path, include: list[str], *, settings: Settings | None = None) -> None:
    """Raises ``IndexMissingError``, saying why and what to do, when the index has nothing to
    read: never published (being built, its first run stopped, never built), or no document.
    ``settings``: those the command read (see ``_failures_command``)."""
    if store.version and store.scalar("SELECT 1 FROM document_chunks LIMIT 1"):
        return
    if store.version:  # indexed, but its folder held nothing to index, or nothing of it worked
        recorded = store.get_meta("root")
        root = shown(_as_given(recorded)) if recorded else "its folder"
        again = f"`streamrag index {shell_word(root)}`" if recorded else "`streamrag index DIR`"
        named = "the current folder" if root == "." else root
        runs = failure_runs(store, last_update(store))
        if index_rows.failures_of(store, *runs):
            # (It said "DIR had no file index.include matches; add such files" of a folder whose
            # .txt files had all failed: an endpoint down, or answering with an HTML page.)
            raise IndexMissingError(
                f"the index at {db_path} holds no documents: the last update could not index any "
                f"file it read (`{_failures_command(store, db_path, settings)}` lists what failed; last: "
                f"{index_rows.last_failure(store, *runs)}); fix the cause and run {again} again")
        raise IndexMissingError(f"the index at {db_path} holds no documents: {named} had no file "
                                f"index.include ({', '.join(include)}) matches when it was last indexed; "
                                "add such files (or widen index.include), then run `streamrag index` on it again")
    if (holder := writer_at_work(db_path)) is not None:
        raise IndexMissingError(f"the index at {db_path} has nothing published yet: {holder} is building "
                                "it; try again once it has published its first version")
    run = store.query("SELECT command, status FROM runs WHERE command IN ('index', 'watch') "
                      "ORDER BY started_at DESC LIMIT 1")
    if run:   # (a run still 'running' that holds no lock was killed)
        how = {"failed": "failed"}.get(run[0]["status"], "was stopped")
        again = (f"`streamrag index {shell_word(shown(_as_given(str(db_path.parent.parent.resolve()))))}`"
                 if db_path.parent.name == ".streamrag" else "the same command")
        # (A first index that failed on every chunk publishes nothing; ask named no cause, where
        # an empty version 1 once let it name the last failure: the index keeps them.)
        last = index_rows.last_failure(store, *failure_runs(store, last_update(store)))
        cause = f" (last: {last}; `{_failures_command(store, db_path, settings)}` lists what failed)" if last else ""
        raise IndexMissingError(f"the index at {db_path} has nothing published yet: its first "
                                f"`streamrag {run[0]['command']}` {how} before publishing{cause}; run "
                                f"{again} again: it goes on from the work it kept")
    raise IndexMissingError(f"the index at {db_path} is empty; build it with "
                            "`streamrag index DIR` (add --offline to index without an LLM)")


class _Search:
    """One query's search, run inside the caller's snapshot."""

    def __init__(self, store: Store, settings: Settings, answer: Answer, level: int | None,
                 on_delta: Callable[[str], None] | None, status: Callable[[str], None], *,
                 named: list[tuple[str, str, bool]], anchors: list[tuple[str, str]],
                 missing: frozenset[str], fresh: bool = False) -> None:
        self.store = store
        self.settings = settings
        self.answer = answer
        self.level = level
        self.on_delta = on_delta
        self.status = status
        self.encoding = settings.index.encoding
        self.context_tags: list[str] = []
        # (id, name, written capitalised) of the entities the question names (``named_entities``)
        self.named = named
        self.anchors = anchors   # (id, name) of those it asks about (``local_search.anchors``)
        self.llm = None
        self.fresh = fresh   # the model's cached answers are not used, and are replaced
        self._held: list[str] | None = None   # emitted text held back while a fallback may replace it
        self._global_stop: frozenset[str] | None = None   # the words offline global search left out
        self._global_terms: set[str] = set()   # the words it rated reports by (none: a broad question)
        # the words of the names the index lacks, searched for by no search ("Zeno Ulmard": "zeno")
        self.missing = missing

    @cached_property
    def local_stop(self) -> frozenset[str] | None:
        """The words local and basic search leave out of the question (``content_stop``)."""
        stop = content_stop(self.answer.question, [name for _e, name, _c in self.named])
        return None if stop is None else stop | self.missing

    def _emit(self, text: str) -> None:
        if self._held is not None:
            self._held.append(text)
        elif self.on_delta is not None:
            self.on_delta(text)

    def _say(self, text: str, outcome: str) -> None:
        """``text``, a sentence of this program's own, as the answer, which came to ``outcome``
        (``OUTCOMES``: no answer, or a redirect): labelled as an extractive answer is when there is
        no model (``extractive.EXTRACTIVE_LABEL``), after the names the index lacks. (Only the
        report-less redirect said them: one of an index without entities or communities did not,
        where a model's came after the CLI's ``missing_note``.)"""
        self.answer.outcome = outcome
        if self.answer.extractive:
            text = self._missing_said() + f"{extractive.EXTRACTIVE_LABEL}: {text[0].lower()}{text[1:]}"
        self._emit(text)
        self.answer.text = text

    def _missing_said(self) -> str:
        """What an extractive answer's text says first of the names the index lacks
        (``not_in_index``): a model's answer is printed after ``missing_note`` instead."""
        return f"Nothing in the index mentions {_missing(self.answer)}.\n\n" if self.answer.not_in_index else ""

    def _given_only(self) -> citations.GivenOnly | None:
        """Where a model's answer streams to: ``on_delta`` without the citations of what it was
        not given (``context_tags``, set before the call), as the answer's text will be."""
        from streamrag.llm import RESTARTED

        return None if self.on_delta is None else citations.GivenOnly(self.context_tags, self.on_delta, RESTARTED)

    def _static(self) -> bool:
        return self.level is not None or self.settings.query.global_level >= 0

    # -- with a model ------------------------------------------------------------------------
    async def run_with_llm(self, db_path: Path, transport) -> None:
        from streamrag.llm import LLMClient
        from streamrag.writer import Writer

        run_id = time.strftime("ask-%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
        async with contextlib.AsyncExitStack() as stack:
            if _writable(db_path):
                wstore = Store(db_path)
                stack.callback(wstore.close)
                writer = _Unrecorded(await stack.enter_async_context(Writer(wstore, patience=_ASK_WAIT_S)), db_path)
            else:   # a read-only mount, another user's index: answered, from the cache too
                wstore = Store(db_path, readonly=True)
                stack.callback(wstore.close)
                writer = _Unrecorded(None)
                writer.skip(f"{db_path}: the index is read-only to you", "this answer")
            outcome = "failed"
            try:
                # Inside the try: a stop landing as the row commits still has it closed.
                await writer.run(lambda s: s.start_run(run_id, "ask"))
                self.llm = await stack.enter_async_context(LLMClient(
                    self.settings.llm, self.settings.api_key, store=wstore, writer=writer,
                    run_id=run_id, transport=transport, encoding=self.encoding,
                    base_setting=self.settings.api_base_from))
                self.llm.fresh = self.fresh
                self.llm.by_endpoint = True   # (--api-base names the server whose answer is wanted)
                try:
                    await self._dispatch()
                finally:
                    self.answer.llm = _usage(self.llm.stats)
                outcome = "ok"
            except (KeyboardInterrupt, anyio.get_cancelled_exc_class()):
                outcome = "interrupted"   # Ctrl-C, SIGTERM (was recorded as failed, or left running)
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await writer.run(lambda s: s.finish_run(run_id, outcome, json.dumps(self.answer.llm)))

    async def _dispatch(self) -> None:
        mode = self.answer.mode
        if mode == "global":
            await (self._global_static() if self._static() else self._global_dynamic())
        elif mode == "local":
            await self._local()
        else:
            await self._basic()

    def _no_communities(self, tree) -> bool:
        """Answers, and says so, when the index has no communities: global search has no report
        to read at any level (its documents gave no entities to group)."""
        if tree.nodes:
            return False
        self.answer.search = "global_static" if self._static() else "global_dynamic"
        self.answer.level = None
        self.answer.details = {"communities": 0, "reports": 0}
        if self._static():
            self.answer.details["requested_level"] = self.level
        self.status("the index has no communities, so global search has no reports to read")
        self._say("The index has no communities, so global search has no community reports to "
                  "answer from. Try `--mode basic`, which searches the documents' text.", "redirected")
        return True

    async def _global_static(self) -> None:
        tree = global_search.load_tree(self.store, key_entities=False)   # (nothing is rated)
        if self._no_communities(tree):
            return
        self._note_deep_setting(tree)
        level = global_search.resolve_level(tree, -1 if self.level is None else self.level,
                                            self.settings.query.global_level)
        nodes = global_search.static_selection(tree, level)
        self.answer.search, self.answer.level = "global_static", level
        self.status(f"global search, static at level {level}: {counted(len(nodes), 'report')}")
        await self._map_reduce(nodes, {"communities": len(tree.nodes), "level": level,
                                       "requested_level": self.level, "deepest_level": tree.deepest})

    def _note_deep_setting(self, tree) -> None:
        """Says on stderr when the level a static search reads is ``query.global_level`` and that
        is deeper than the index (``deeper_level_line``), as ``--level N`` is said
        (``cli._note_clamped_level``); under ``--json`` too, which status lines are not."""
        if self.level is None or self.level < 0:
            line = deeper_level_line("query.global_level", self.settings.query.global_level, tree.deepest)
            if line is not None:
                logging.getLogger("streamrag").warning("%s", line)

    async def _global_dynamic(self) -> None:
        q, llm_s = self.settings.query, self.settings.llm
        tree = global_search.load_tree(self.store)
        if self._no_communities(tree):
            return
        rater = global_search.llm_rater(self.llm, self.answer.question, model=llm_s.rating_model,
                                        batch_tokens=q.map_max_tokens, encoding=self.encoding)
        sel = await global_search.dynamic_selection(tree, rater, threshold=q.dynamic_threshold,
                                                    max_depth=q.dynamic_max_depth,
                                                    named=self._named_holding()[1])
        self.answer.search = "global_dynamic"
        unread = f", {rater.unrated} ratings unreadable or not given, counted as irrelevant" if rater.unrated else ""
        below = (f"; none reached query.dynamic_threshold ({q.dynamic_threshold:g}), so the best-rated "
                 "ones are used" if sel.fallback else "")
        self.status(f"global search, dynamic selection: {len(sel.selected)} of {len(tree.nodes)} "
                    f"reports selected ({sel.rated} rated{unread}{below})")
        await self._map_reduce([tree.nodes[c] for c in sel.selected],
                               {"communities": len(tree.nodes),
                                "rated": sel.rated, "pruned": sel.pruned, "selected": sel.selected,
                                "ratings": sel.ratings, "fallback": sel.fallback,
                                "unrated": rater.unrated, "deepest_level": tree.deepest})

    async def _map_reduce(self, nodes: list, details: dict) -> None:
        """Answers from the reports of ``nodes`` (their texts read here: ``global_search.read_texts``)."""
        nodes = global_search.read_texts(self.store, nodes)
        self.context_tags = [f"[R:{n.id}]" for n in nodes]
        if not nodes:
            self._say(NO_REPORT_RATED, "redirected")
            self.answer.details = {**details, "reports": 0}
            return
        given = self._given_only()
        mr = await global_search.map_reduce(self.llm, self.answer.question, nodes,
                                            settings=self.settings, encoding=self.encoding,
                                            on_delta=given and given.feed)
        if given:
            given.flush()
        self.answer.text = mr.text
        self.answer.cut_off = mr.cut_off
        self.answer.outcome = "answered" if mr.answered else "no_answer"
        if not mr.answered:
            self.context_tags = []  # an answer that found nothing rests on no document
        self.answer.details = {**details, "reports": mr.reports, "map_batches": mr.batches,
                               "points": mr.points, "points_kept": mr.kept,
                               "points_reduced": mr.reduced, "reduce_context_tokens": mr.reduce_tokens,
                               "map_batches_failed": mr.failed_batches}
        if mr.failed_batches:
            self.status(f"{mr.failed_batches} of {mr.batches} map batches gave no usable answer; "
                        "their reports are missing from this answer")

    async def _local_context(self) -> local_search.Context:
        """The local search context for the question (also what extractive local answers use)."""
        q = self.settings.query
        entities, how = await self._entities()
        anchors = [a for a, _name in self.anchors]
        data = local_search.load_local_data(self.store, [e for e, _ in entities], anchors, self._asked_forms())
        ctx = local_search.build_local_context(
            data, max_tokens=self._context_budget(), text_share=q.local_text_share,
            community_share=q.local_community_share, encoding=self.encoding, anchors=anchors,
            texts=partial(index_rows.chunk_texts, self.store))
        self.answer.search = "local"
        self.answer.details = {"entities": [e for e, _ in entities], "entity_search": how,
                               "context_tokens": ctx.sections, "context_budgets": ctx.budgets}
        self.status(f"local search: {_seeds_said(len(entities), how)}, "
                    f"{sum(ctx.sections.values()):,} context tokens")
        return ctx

    def _asked_forms(self) -> list[tuple[str, ...]]:
        """The question's words other than the names it asks about, each as the words of the index
        it stands for, by which the chunks of the named entities are chosen
        (``local_search.load_local_data``): by the entities they mention alone, "Where did Scrooge
        live?" took four of his 43 chunks, none the one saying where he lived. A word stands for
        the index's words of its stem (``extractive.same_stem``: "live" for "lived", "marry" for
        "married") and its irregular forms ("bought" for "buy"); as the start of a word, "art"
        found "article" and "run" "rung". (A stem marked as a stop word's, ``extractive.stem``, or
        under three letters would find most chunks.) A
        word it writes as a name (``asked_names``) stands for itself and its plural, as
        ``extractive.NameKeys`` matches it: "Who did Belle marry?" (no entity named Belle) searched
        "bell", and the chunks of church bells came first."""
        names = {w for _e, name in self.anchors for w in words(name)}
        written = extractive.asked_names(self.answer.question, [name for _e, name in self.anchors])
        terms = local_search.query_terms(self.answer.question, extra_stop=self.local_stop or frozenset())
        out = []
        for t in terms:
            one = (t[:-1] if t[-1:] == "s" and len(t) > 3 else t) if t in written else extractive.stem(t)
            if t in names or len(one) < 3 or one.endswith("~"):
                continue
            if t in written:
                out.append((one, one + "s"))
            else:
                found = local_search.index_words(self.store, extractive.stem_start(one))
                out.append((*(w for w in found if extractive.same_stem(w, one)), *extractive.irregular_forms(one)))
        return out

    async def _local(self) -> None:
        ctx = await self._local_context()
        if self.local_stop is None or not self._no_entities():   # (the first: ``_answer`` says why)
            await self._answer(ctx)

    def _no_entities(self) -> bool:
        """Answers, and says so, when a local search found no entity because the index has none
        (its documents name nothing the extractor took): "Nothing in the index matches this
        question" said of an index holding documents, as if the question were at fault."""
        if self.answer.details["entities"]:
            return False
        self._say("The index has no entities, so local search has none to start from. Try "
                  "`--mode basic`, which searches the documents' text.", "redirected")
        return True

    async def _basic(self) -> None:
        hits, how = await self._chunks()
        chunks = local_search.load_chunks(self.store, [c for c, _ in hits])
        ctx = local_search.build_basic_context(chunks, max_tokens=self._context_budget(),
                                               encoding=self.encoding)
        self.answer.search = "basic"
        self.answer.details = {"chunks": [c["id"] for c in chunks], "chunk_search": how,
                               "context_tokens": ctx.sections}
        self.status(f"basic search: {counted(len(chunks), 'chunk')} ({how})")
        await self._answer(ctx)

    def _context_budget(self) -> int:
        """The tokens a local or basic context may take: ``query.local_max_tokens`` less what the
        answer prompt takes without it (its instructions and the question), so that the whole
        prompt stays within the setting. (A 1,000-word question took 1,100 tokens past it.)
        Without a model there is no prompt: the context has the whole budget."""
        q = self.settings.query
        if self.llm is None:
            return q.local_max_tokens
        return global_search.room_beside(self._answer_messages(""), q.local_max_tokens, self.encoding,
                                         what="answer", setting="query.local_max_tokens",
                                         filling="the index's text")

    def _answer_messages(self, context: str) -> list[dict[str, str]]:
        return load_prompt("answer").render(
            question=self.answer.question, context=context,
            max_words=global_search.max_words(self.settings.query.answer_max_tokens))

    async def _answer(self, ctx: local_search.Context) -> None:
        self.context_tags = ctx.tags
        if not ctx.tags:
            # A question of no word to search for ("What is it?") is told what an offline
            # answer tells it, not that nothing in the index matches it.
            if self.local_stop is None:
                self._say(self._broad_text(self.answer.mode), "redirected")
            else:
                self._say("Nothing in the index matches this question, so there is no answer to give.",
                          "no_answer")
            return
        # A broad question asked of a local or basic search by name is answered from the most
        # connected entities, or the passages sharing its words: it is told first, as offline,
        # where the answer to it is (``_broad_text``), then answered.
        note = (self._broad_text(self.answer.mode, answered=True) + "\n\n"
                if self.local_stop is None and self.answer.requested_mode == self.answer.mode else "")
        if note:
            self._emit(note)
        q = self.settings.query
        prompt = load_prompt("answer")
        given = self._given_only()
        result = await self.llm.chat(
            self._answer_messages(ctx.text), model=self.settings.llm.answer_model, stage="answer",
            prompt=prompt,
            max_tokens=q.answer_max_tokens, on_delta=given and given.feed, validate=has_text,
            on_length="keep")  # an answer at its length limit is still the answer, said to be cut
        if given:
            given.flush()
        self.answer.text = note + result.text
        self.answer.cut_off = result.finish_reason == "length"
        self.answer.outcome = "answered"   # (told first where the answer to it is, or not)

    async def _embedded(self, kind: str) -> tuple[list[float] | None, set[str]]:
        """The question's vector and the ids of the ``kind`` items whose vector is of their
        present text; no vector when none has one. Items without one are said once (and are
        found by BM25 beside the vectors: an offline update made a new document unfindable)."""
        model = self.settings.llm.embedding_model
        if self.llm is None or not model:
            return None, set()
        from streamrag.embeddings import fresh_vectors

        fresh, missing = fresh_vectors(self.store, kind, model)
        items = "entities" if kind == "entity" else "chunks"
        if missing and not fresh:   # (it said nothing: a model set after the index was built)
            self.status(f"no {items} have an embedding from {model} (the index was built without it); "
                        f"BM25 finds them. Run `streamrag index` with the endpoint set (llm.api_base) "
                        "to embed them")
        elif missing:
            total = len(fresh) + missing
            self.status(f"{items} without an embedding from {model} "
                        f"of their present text: {missing} of {total} (an offline update, or a failed "
                        "embedding stage); BM25 finds them beside the embeddings. Run `streamrag index` "
                        "with the endpoint set (llm.api_base) to embed them")
        if not fresh:
            return None, fresh
        # (Its own stage: an overflow says to shorten the question, not index.chunk_size.)
        return (await self.llm.embed([self.answer.question], model=model, stage="embed_question"))[0], fresh

    async def _entities(self) -> tuple[list[tuple[str, float]], str]:
        q = self.settings.query
        vector, fresh = await self._embedded("entity")
        # (with vectors, BM25 ranks those without one: as deep as those with one may fill)
        seeds = local_search.fts_entities(self.store, self.answer.question, q.local_top_k + len(fresh),
                                          extra_stop=self.local_stop or frozenset())
        how = "bm25"
        if vector is not None:
            near = local_search.nearest(self.store, "entity", self.settings.llm.embedding_model,
                                        vector, q.local_top_k, allowed=fresh)
            seeds, how = _with_unembedded(near, seeds, fresh, q.local_top_k)
        seeds = seeds[:q.local_top_k]
        seeds = self._named_first(seeds, q.local_top_k)
        if not seeds:
            seeds, how = local_search.fallback_entities(self.store, q.local_top_k), "most connected"
        if q.local_pagerank:
            widened = local_search.widen(self.store, seeds, math.ceil(q.local_top_k / 2))
            if len(widened) > len(seeds):
                how += " + pagerank"
            seeds = widened
        return seeds, how

    def _named_first(self, seeds: list[tuple[str, float]], k: int) -> list[tuple[str, float]]:
        """``seeds`` with the entities the question names in full first, the most specific name
        first: BM25 ranked "Torford Heights" (a long description) below "Torford Heights Braces"
        (a short one) for "Tell me about Torford Heights"."""
        named = self.named
        if not named:
            return seeds
        order = sorted(range(len(named)), key=lambda i: (-len(words(named[i][1])), i))
        top = max((score for _e, score in seeds), default=0.0) + 1.0
        first = dict.fromkeys(named[i][0] for i in order)
        return ([(e, top) for e in first] + [(e, s) for e, s in seeds if e not in first])[:k]

    async def _chunks(self) -> tuple[list[tuple[str, float]], str]:
        q = self.settings.query
        vector, fresh = await self._embedded("chunk")
        hits = local_search.fts_chunks(self.store, self.answer.question, q.basic_top_k + len(fresh),
                                       extra_stop=self.local_stop or frozenset())
        if vector is None:
            return hits[:q.basic_top_k], "bm25"
        near = local_search.nearest(self.store, "chunk", self.settings.llm.embedding_model,
                                    vector, q.basic_top_k, allowed=fresh)
        return _with_unembedded(near, hits, fresh, q.basic_top_k)

    # -- without a model ---------------------------------------------------------------------
    async def run_extractive(self) -> None:
        """The same selections, term overlap for the rating model, sentences for the answer.

        In auto mode a global or local search whose passages have no sentence for the question
        (or an index without communities: text in a script the offline extractor finds no
        names in) is followed by a basic search of the source text, which answers instead when
        it finds something; nothing is printed until then."""
        self.answer.extractive = True
        self.answer.llm = _usage({})
        if self.answer.auto_choice is None or self.answer.mode == "basic":
            await self._extractive(self.answer.mode)
            return
        self._held = []
        await self._extractive(self.answer.mode)
        # (not of a question global search found no words of its own in, "What is the story
        # about?": its overview of the reports stands, not a sentence that says "story")
        met = (self._words_met() if self.context_tags and self.answer.mode == "global" and self._global_terms
               else None)
        if not self.context_tags or met is not None and met[0] < met[1]:
            first, first_held, first_tags = msgspec.structs.replace(self.answer), self._held, self.context_tags
            self._held, self.context_tags = [], []
            self.answer.mode = "basic"
            await self._extractive("basic")
            if met is not None:
                self._weaker_of(met, first, first_held, first_tags)
            # The first answer says best what is missing, unless it advises the search just made.
            elif self.context_tags or first.details.get("communities") == 0:
                self.answer.auto_choice = "basic"
                # (of an index without communities, the basic search's answer stands though it
                # found nothing: "so the source text answers" was said above "nothing matches")
                self.answer.auto_reason = (f"the {first.mode} search found nothing for it, so the source text "
                                           + ("answers" if self.context_tags else "was searched: it has nothing either"))
                self.status(f"auto mode: the {first.mode} search found nothing; basic search of "
                            "the source text " + ("answers" if self.context_tags else "found nothing either"))
            else:
                for field in self.answer.__struct_fields__:
                    setattr(self.answer, field, getattr(first, field))
                self._held = first_held
        held, self._held = self._held, None
        for text in held:
            self._emit(text)

    def _words_met(self) -> tuple[int, int]:
        """How many of the words a basic search looks for the best sentence the answer quotes
        has, and of how many (``extractive.words_met``); none of none for a broad question.
        (Not the words global search rates reports by, without the generic ones: "Who wrote the
        letter?" asks for "letter" too.)"""
        if self.local_stop is None:
            return 0, 0
        return extractive.words_met(self.answer.question, [s for s, _tag in extractive.quotes(self.answer.text)],
                                    RELATION_WORDS | self.local_stop)

    def _weaker_of(self, met: tuple[int, int], first: Answer, first_held: list[str], first_tags: list[str]) -> None:
        """Auto mode's global answer (``first``) whose best sentence has only ``met`` of the
        question's words, beside the basic search's just made: the source text answers where
        its best sentence has more of them (counted alike), else the global answer stands. A
        report's sentence sharing one word of "Who fell upon his knees?" ("fall off", of
        another passage) was quoted, while the text says "Scrooge fell upon his knees"."""
        if self.context_tags and (basic := self._words_met()[0]) >= met[0]:
            self.answer.auto_choice = "basic"
            self.answer.auto_reason = (f"the global search's best sentence has {met[0]} of the question's "
                                       f"{met[1]} words, the source text's {basic}, so the source text answers")
            self.status(f"auto mode: {self.answer.auto_reason}")
            return
        for field in self.answer.__struct_fields__:
            setattr(self.answer, field, getattr(first, field))
        self._held, self.context_tags = first_held, first_tags

    async def _extractive(self, mode: str) -> None:
        if mode != "global" and self.answer.requested_mode == mode and self.local_stop is None:
            self._broad(mode)
        elif mode == "global":
            await self._extractive_global()
        elif mode == "local":
            ctx = await self._local_context()
            if self._no_entities():
                return
            # (a short name the question writes for the full name an offline index joined it to,
            # "Scrooge" for "Ebenezer Scrooge", names that one's kind where the context writes it)
            joined = {name: kind for eid, name in self.anchors if name not in ctx.types and (
                kind := self.store.scalar("SELECT type FROM entities WHERE id = ?", (eid,)))}
            anchors, types = [name for _e, name in self.anchors], {**ctx.types, **joined}
            self._extract(_context_passages(ctx), "local context", anchors=anchors, types=types,
                          namesakes=_namesakes(self.store, anchors, types))
        else:
            hits = local_search.fts_chunks(self.store, self.answer.question,
                                           self.settings.query.basic_top_k,
                                           extra_stop=self.local_stop or frozenset())
            chunks = local_search.load_chunks(self.store, [c for c, _ in hits])
            self.answer.search, self.answer.level = "basic", None
            # (the tokens of the texts its sentences are picked from, under the key a model's
            # basic search counts its context by: the whole chunks, as no prompt bounds them;
            # their stored counts where of this encoding, not the tokenizer built for them, 0.23 s)
            ids = [c["id"] for c in chunks]
            stored = index_rows.chunk_tokens(self.store, ids, self.encoding)
            self.answer.details = {"chunks": ids, "chunk_search": "bm25", "context_tokens": {"text": sum(
                stored[c["id"]] if c["id"] in stored else count_tokens(c["text"], self.encoding) for c in chunks)}}
            self._extract([(f"[T:{c['id']}]", c["text"]) for c in chunks], "source text")

    async def _extractive_global(self) -> None:
        tree = global_search.load_tree(self.store, key_entities=not self._static())   # (rated if dynamic)
        if self._no_communities(tree):
            return
        if self._static():
            self._note_deep_setting(tree)
        question, stop = global_question(self.answer.question)
        stop |= self.missing
        terms = set(local_search.query_terms(question, extra_stop=stop))
        names, holding = self._named_holding()
        # Reports are rated by the words their sentences are picked by (``_extract``, which gives
        # ``pick_sentences`` the same question and no anchors): a name asked about by its own form.
        key = extractive.NameKeys(extractive.asked_names(question))
        nodes = await self._global_nodes(tree, terms, names, holding, key)
        if terms & RELATION_WORDS and not any(extractive.overlap_rating(terms, n.text, key=key) for n in nodes):
            # Words of how things relate that no report has ("Summarize the connections across
            # the collection") ask about the rest; those a report has ("the themes of the plays")
            # were kept: left out of both, the theatre's report was never quoted.
            stop, terms = stop | RELATION_WORDS, terms - RELATION_WORDS
            nodes = await self._global_nodes(tree, terms, names, holding, key)
        self._global_stop, self._global_terms = stop, terms
        broad = False
        if not nodes and terms:
            # The question names something and no report's line has any of its words: say so,
            # rather than quote the largest communities as if they were relevant. As a model's
            # ratings of 0 are, a redirect (``NO_REPORT_RATED``), where the source text has a
            # word of it (a report read whole, or a local context, may then); else nothing
            # matches, and the searches it names find nothing either ("What did the critics say
            # about freight?" of A Christmas Carol). In auto mode, where a basic search follows
            # (``run_extractive``), this answer stands only where that finds nothing either.
            self.answer.details["reports"] = 0
            if self.answer.auto_choice is None and local_search.fts_chunks(self.store, question, 1, extra_stop=stop):
                self._say(NO_REPORT_RATED, "redirected")
            else:
                self._extract([], "community reports")
            return
        if not nodes:
            # A broad question ("what are the main themes?") shares no words with any report:
            # the largest top-level communities are what the collection is mostly about.
            nodes = global_search.read_texts(self.store, sorted(
                (n for n in tree.nodes.values() if n.level == 0),
                key=lambda n: (-n.size, global_search.community_order(n)))[:8])
            broad = True
            self.answer.details["broad_fallback"] = True
        ranked = sorted(nodes, key=lambda n: (-extractive.overlap_rating(terms, n.text, names,
                                                                         holding.get(n.id, ()), key),
                                              -n.size, global_search.community_order(n)))[:20]
        self.context_tags = [f"[R:{n.id}]" for n in ranked]
        self._extract([(f"[R:{n.id}]", f"{n.summary}\n\n{n.text}") for n in ranked],
                      "community reports", broad=broad)

    def _named_holding(self) -> tuple[list[str], dict[str, set[str]]]:
        """The names of the entities the question names (``local_search.anchors``), and the
        communities holding those it writes capitalised, each with the names it holds (a word
        in lower case is no name to open a community for: "What happened at the quay?")."""
        named = self.named
        written = {e for e, _name, capitalised in named if capitalised}
        names = dict(self.anchors)
        holding = {c: {names[e] for e in held} for c, held in
                   global_search.holding(self.store, [e for e in names if e in written]).items()}
        return list(names.values()), holding

    async def _global_nodes(self, tree, terms: set[str], names: list[str],
                            holding: dict[str, set[str]], key: extractive.NameKeys) -> list:
        """The reports an offline global search reads for ``terms``: a level's (static), or
        those dynamic selection rates highest by their overlap with the terms, the entity
        ``names`` the question has each counting as one term (``extractive.overlap_rating``),
        and opens because they hold one of them (``holding``: community -> those names); words
        compared by ``key``. Their texts read (``global_search.read_texts``)."""
        if self._static():
            level = global_search.resolve_level(tree, -1 if self.level is None else self.level,
                                                self.settings.query.global_level)
            nodes = global_search.static_selection(tree, level)
            self.answer.search, self.answer.level = "global_static", level
            self.answer.details = {"communities": len(tree.nodes), "level": level,
                                   "requested_level": self.level, "deepest_level": tree.deepest,
                                   "reports": len(nodes)}
        else:
            async def rate(frontier):
                return {n.id: extractive.overlap_rating(terms, global_search.rate_line(n), names,
                                                        holding.get(n.id, ()), key)
                        for n in frontier}

            q = self.settings.query
            sel = await global_search.dynamic_selection(tree, rate, threshold=q.dynamic_threshold,
                                                        max_depth=q.dynamic_max_depth, named=holding)
            nodes = [tree.nodes[c] for c in sel.selected]
            self.answer.search = "global_dynamic"
            self.answer.details = {"communities": len(tree.nodes), "rated": sel.rated,
                                   "pruned": sel.pruned, "selected": sel.selected,
                                   "ratings": sel.ratings, "fallback": sel.fallback,
                                   "deepest_level": tree.deepest, "reports": len(nodes)}
            if sel.fallback:   # (said with a model too: the README promises it)
                self.status(f"global search, dynamic selection: no report's overlap with the question "
                            f"reached query.dynamic_threshold ({q.dynamic_threshold:g}), so the "
                            f"best-rated {len(nodes)} are used")
        return global_search.read_texts(self.store, nodes)

    def _broad(self, mode: str) -> None:
        """Says that a broad question is one for global search, rather than quote the passages
        sharing its generic words ("main", "themes") as its answer."""
        self.answer.search, self.answer.level, self.answer.details = mode, None, {}
        self._say(self._broad_text(mode), "redirected")

    def _broad_text(self, mode: str, *, answered: bool = False) -> str:
        """What a ``mode`` (local or basic) search says of a question it cannot answer
        (``content_stop`` None); ``answered``: said before a model's answer to it all the same,
        which must not read "cannot answer" above an answer."""
        cues = broad_words(self.answer.question)
        if cues and answered:
            text = (f"This question asks about the collection as a whole ({', '.join(cues)}), of which a "
                    f"{mode} search reads only the few "
                    + ("entities and passages" if mode == "local" else "passages")
                    + " that share its words; --mode global, "
                    "which reads the community reports, answers it. The " + mode + " search's answer:")
        elif cues:
            text = (f"This question asks about the collection as a whole ({', '.join(cues)}), which "
                    f"a {mode} search, quoting the few passages that share its words, cannot answer; "
                    "ask it with --mode global, which reads the community reports.")
        elif answered:
            text = (f"This question names nothing for a {mode} search to look for, so it is answered from "
                    + ("the most connected entities" if mode == "local" else "the passages sharing its words")
                    + "; ask about something the documents name, or ask it with --mode global for an "
                    "overview of the collection.")
        else:   # ("What is it?": the most connected entities were quoted, as if relevant)
            text = (f"This question names nothing for a {mode} search to look for; ask about something "
                    "the documents name, or ask it with --mode global for an overview of the collection.")
        return text

    def _extract(self, passages: list[tuple[str, str]], what: str, *, broad: bool = False,
                 anchors: Sequence[str] = (), types: dict[str, str] | None = None,
                 namesakes: Sequence[str] = ()) -> None:
        if not self.context_tags:
            self.context_tags = [tag for tag, _ in passages]
        question, stop = self.answer.question, RELATION_WORDS | (self.local_stop or frozenset())
        if self.answer.mode == "global":   # (the words its reports were rated by)
            question, stop = global_question(question)
            stop = self._global_stop or stop | RELATION_WORDS
        text, found = extractive.extractive_answer("" if broad else question, passages,
                                                   what=what, extra_stop=stop, anchors=anchors,
                                                   types=types, namesakes=namesakes,
                                                   named=[name for _e, name in self.anchors])
        if not found:
            self.context_tags = []  # an answer that found nothing rests on no document
        # (a search followed by another, auto's basic one, has the outcome of the answer it gives)
        self.answer.outcome = "answered" if found else "no_answer"
        if self.answer.not_in_index:   # (the sentences matched the rest of the question)
            text = (f"Nothing in the index mentions {_missing(self.answer)}"
                    + (": the sentences below match the rest of the question only." if found else ".")
                    + "\n\n" + text)
        self._emit(text)
        self.answer.text = text


def _seeds_said(n: int, how: str) -> str:
    """A local search's entities as its status line counts them: those it fell back to when the
    question matched none are said to be so, not as if found ("15 entities (most connected +
    pagerank)" above "Nothing in the index mentions "Ada Osk"." read as the question's finds)."""
    found = f"{counted(n, 'entity')} ({how})"
    return f"no entity matches the question, so {found}" if how.startswith("most connected") else found


def _with_unembedded(near: list[tuple[str, float]], bm25: list[tuple[str, float]], fresh: set[str],
                     k: int) -> tuple[list[tuple[str, float]], str]:
    """The ``k`` best of the embedding ranking ``near`` and the BM25 hits without a fresh vector
    (which no embedding ranking can hold), taken in turn, each in its own order; ``near`` alone
    when every hit has a vector. (Cosines and BM25 scores are not comparable: ranks are, and
    each list's scores are given as shares of its best, which is what ``local_search.widen``
    weighs seeds by: raw, a BM25 seed weighed 0.25-1 beside embedding seeds' 0.015-0.02.)"""
    rest = [(i, s) for i, s in bm25 if i not in fresh]
    if not rest:
        return near, "embedding"

    def shares(pairs: list[tuple[str, float]]) -> list[tuple[str, float]]:
        top = max((s for _i, s in pairs), default=0.0)
        return [(i, s / top) for i, s in pairs] if top > 0 else pairs

    out: dict[str, float] = {}
    for pair in itertools.zip_longest(shares(near), shares(rest)):
        for item in pair:
            if item is not None and item[0] not in out and len(out) < k:
                out[item[0]] = item[1]
    return list(out.items()), "embedding + bm25 for the items without one"


def _namesakes(store: Store, anchors: Sequence[str], known: dict[str, str]) -> list[str]:
    """The names of the index outside ``known`` (the context's) that have a word of an anchor's
    name no other known name or anchor has, and a word the anchor's name lacks: "Otto Brandt"
    for "Anna Brandt", a namesake her context does not show, so "Brandt said" is not hers
    wholly (``extractive.pick_sentences``). A name inside the anchor's ("Brandt") is its short
    form, no namesake. One full-text lookup of names a word, for the few words of each anchor
    that ``pick_sentences`` counts as its own (``extractive.own_words``: none of a phrase's, no title)."""
    out: list[str] = []
    for anchor in anchors:
        for word in sorted(extractive.own_words(anchor, known, anchors)):
            out += _namesakes_of(store, word, set(words(anchor)), known, out)
    return out


# The namesakes kept for each word of an anchor's (``_namesakes``): one takes the word from it,
# more say nothing more; the cap bounds the rows a common surname reads.
_NAMESAKES_A_WORD = 50


def _namesakes_of(store: Store, word: str, anchor_words: set[str], known: dict[str, str],
                  found: Sequence[str]) -> list[str]:
    """Up to ``_NAMESAKES_A_WORD`` names of the index having ``word`` that are namesakes of the
    anchor of ``anchor_words``: outside ``known`` and ``found``, and not made of its words
    alone. Counted once so filtered, on rows read as they are needed: the first 50 rows, taken
    before the filter, could be the anchor's own forms ("Brandt", "Brandt, Anna") and names
    already found, and a namesake after them was never found."""
    out: list[str] = []
    seen = set(found)
    rows = store.conn.execute("SELECT entities.name FROM entities_fts JOIN entities USING (id) "
                              "WHERE entities_fts MATCH ?", ("name : (" + local_search.fts_match([word]) + ")",))
    try:
        for (name,) in rows:
            if name in known or name in seen or word not in (held := set(words(name))) or held <= anchor_words:
                continue
            out.append(name)
            seen.add(name)
            if len(out) == _NAMESAKES_A_WORD:
                break
    finally:
        rows.close()
    return out


def _context_passages(ctx: local_search.Context) -> list[tuple[str, str]]:
    out = []
    for line in ctx.text.splitlines():
        m = re.match(r"^(\[(?:E|L|R|T):[^\]]+\])\s*(.*)$", line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def _usage(stats: dict[str, dict[str, int]]) -> dict:
    """The query's calls as the shared ``llm`` object, stages in name order."""
    return llm_summary(dict(sorted(stats.items())))


def missing_note(answer: Answer) -> str:
    """The line a model's answer is printed after when the question names what the index lacks
    (``not_in_index``), as an extractive answer's text begins: the model answers the rest of
    the question and never says so, which stderr and ``--json``'s ``not_in_index`` alone did.
    "" for an answer whose text says it (extractive, or no search made) or names nothing missing."""
    if not answer.not_in_index or answer.extractive or answer.search == "none":
        return ""
    return f"Nothing in the index mentions {_missing(answer)}: the answer below is to the rest of the question only."


def _missing(answer: Answer) -> str:
    """The names the index lacks (``not_in_index``) quoted, as a list in words, each with the
    closest names it has (``near_names``): "Zeno Ulmard" (names it has: Zeno Ulmford, ...)'."""
    near = answer.near_names
    quoted = [f'"{n}"' + (f" (names it has: {', '.join(near[n])})" if near.get(n) else "")
              for n in answer.not_in_index]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


_ASK_WAIT_S = 2.0   # ask's writes are its own records: an answer waits this long for them, no more


class _Unrecorded:
    """``ask``'s writes (its run, its calls, the answer cache) through a writer, kept when the
    index can be written and skipped, said once, when another program holds its write lock past
    ``_ASK_WAIT_S``: an answer already streamed was followed by an error and exit 1, after a
    30 s wait. (A run row written before the lock was taken then stays open.)"""

    def __init__(self, writer, db_path: Path | None = None) -> None:
        self.writer = writer
        self.db_path = db_path
        self.busy = False

    def skip(self, why: object, what: str = "the rest of this answer") -> None:
        """No more writes, said once."""
        self.busy = True
        logging.getLogger("streamrag").warning("%s; %s is not recorded or cached", why, what)

    async def run(self, fn, *args):
        if self.busy:   # the answer goes on without waiting for the lock again
            return None
        try:
            return await self.writer.run(fn, *args)
        except StoreBusyError as e:
            self.skip(self._held_by() or e)
            return None

    def _held_by(self) -> str | None:
        """Who held the write lock, when it is a streamrag writer (``index``, ``watch``): what it
        does with it, said instead of the busy error's advice (let it finish, else stop it),
        which is no advice for a `watch` that runs for good."""
        from streamrag.store import writer_at_work

        holder = self.db_path is not None and writer_at_work(self.db_path)
        if not holder:
            return None
        found = re.match(r"pid (\d+): (.+)", holder)   # ("pid 12: streamrag watch notes")
        holder = f"{found[2]} (pid {found[1]})" if found else holder
        return (f"{self.db_path}: {holder} held its write lock past {_ASK_WAIT_S:g} s (publishing a "
                "version, or emptying the index's write-ahead log after one)")


def _writable(db_path: Path) -> bool:
    """Whether ``ask`` may record in the index at ``db_path`` (its file and its folder)."""
    return os.access(db_path, os.W_OK) and os.access(Path(db_path).parent, os.W_OK)
