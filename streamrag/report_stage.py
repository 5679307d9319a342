"""The report stage of a sync: each community's report, level by level, the deepest first, so
that a parent's context holds its children's reports (``ReportStage``); and its pure parts.

A community keeps its report unread when nothing its context is built from changed; else its
context is built, and the report with that context's key, or, for a model's report, the one it
had if that is close enough (index.report_regen_threshold), is kept. Only then is one written:
by the model, or extractive (offline, below index.report_min_members, or standing in for a
failed call). Answers unusable on ``UNUSABLE_RUNS`` runs in a row settle: the extractive report
stands for good, until the context or the report settings change.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import anyio

from streamrag import index_rows
from streamrag.call_log import UNUSABLE_RUNS
from streamrag.config import Settings
from streamrag.errors import LLMError, LLMOutputError
from streamrag.graph_state import GraphState, dirty_communities
from streamrag.prompts import load_prompt
from streamrag.records import Claim, Community, Relationship, Report
from streamrag.reports import (
    ReportContext,
    build_context,
    changed_fraction,
    context_key,
    extractive_report,
    llm_report,
    settings_key as report_settings_key,
)
from streamrag.run_progress import Progress
from streamrag.store import Store
from streamrag.writer import Writer

if TYPE_CHECKING:
    from streamrag.llm import LLMClient

# Said of a community report settled as unusable (UNUSABLE_RUNS).
_REPORT_SETTLED = (", so it is not asked again while its context and the report settings stay "
                   "(index.report_max_output_tokens among them): an extractive report stands in")


@dataclass(frozen=True)
class ReportStageContext:
    """What the Indexer gives a run of the report stage (``Indexer._reports``)."""

    settings: Settings
    progress: Progress                  # the counters it bumps
    llm: LLMClient | None               # the run's model client (None offline without embeddings)
    report_key: str                     # this run's report settings (``Indexer.report_key``)
    extractive_key: str                 # those of its extractive reports (``Indexer.extractive_key``)
    # ``Indexer.check_shortcuts`` (tests): a community counted as unchanged has its context built
    # anyway, and one that did change fails the run.
    check_shortcuts: bool
    # Records a failed item, and stops the run when the endpoint is plainly down (``Indexer.fail``
    # through the run's writer): (stage, item, message, error=None, *, settled=False).
    fail: Callable[..., Awaitable[None]]


class ReportStage:
    """One run of the report stage: what its workers share (this run's reports and the keys
    assigned, the unusable and held counts, the counts written and kept), and one method per step
    of a community's report. ``Indexer._reports`` runs it over the levels."""

    def __init__(self, given: ReportStageContext, store: Store, writer: Writer, state: GraphState,
                 communities: list[Community]) -> None:
        s = self.settings = given.settings
        self.progress = given.progress
        self.llm = given.llm
        self.check_shortcuts = given.check_shortcuts
        self.fail = given.fail
        self.store = store
        self.writer = writer
        self.state = state
        use_llm = self.use_llm = not s.offline
        # Read only when a model writes the reports (``use_llm``): "" offline rather than None, so
        # that they are the str that context_key and llm_report take.
        self.prompt_version: str = load_prompt("report").version if use_llm else ""
        self.model: str = s.llm.report_model if use_llm else ""
        self.children = children_of(communities)
        self.line_costs: dict[str, int] = {}          # element id -> tokens of its context line
        self.reports: dict[str, Report] = {}          # community id -> report (this run), until its parent's is
        self.assignments: dict[str, tuple[str, str]] = {}
        self.generated = self.kept = 0
        self.written: set[str] = set()       # keys of the reports written (``generated``)
        self.kept_reports: list[str] = []    # keys of the reports kept (``kept``), one a community
        self.progress.total("reports", len(communities))
        self.old = state.old_reports

        # Communities whose context may have changed. The others keep their context and report
        # without rebuilding the context (tokenizing every community's context is most of an
        # update's time on a large index).
        same_settings = store.get_meta("report_settings") == given.report_key
        # index.report_regen_threshold keeps a report only where the settings that wrote it stay
        # (but report_min_members, which no context holds): a new report model or prompt rewrites
        # every report (threshold 0.1 and a new report model kept all 26 of ten articles' model
        # reports, none written), and a new report_max_input_tokens those whose context changed.
        self.regen_threshold = s.index.report_regen_threshold if use_llm and built_min_members(
            s, store.get_meta, by_llm=True) is not None else 0.0
        self.dirty = dirty_communities(state, communities, same_settings=same_settings)
        # The relationships and claims contexts are built from, by entity (grouping 200,000
        # relationships was a fifth of a second of every update).
        self.elements = ElementsByEntity(store, state, whole=not state.old_communities
                                         or len(self.dirty) * _FEW_DIRTY > len(communities))
        self.old_children = {parent: {k.id for k in kids}
                             for parent, kids in children_of(state.old_communities).items()}
        self.old_members = {k.id: k.members for k in state.old_communities}

        # Report answers unusable on runs in a row, by attempt (context and output budget): the
        # published counts, and this run's (those of attempts made or settled now).
        self.unusable_before, state.report_unusable = state.report_unusable, {}
        # Those of communities held below report_min_members, by community: a community held
        # for a run, its context unchanged, had its count forgotten (three more paid runs).
        self.held_before, state.report_held = state.report_held, {}
        self.held_runs = {attempt: runs for attempt, runs in self.held_before.values()}

        # A kept report is read only if a parent's context needs it (most never are).
        self.stored = index_rows.report_keys(store)
        # The extractive reports of a model-built index (communities held below
        # report_min_members, stand-ins for the model's) are looked at again when their builder
        # changed since it was published (EXTRACTIVE_VERSION): built again for free (one built as
        # it was has its key, ``reports.extractive_report``: kept, nothing published), while the
        # model's reports, their settings unchanged, are kept unread as ever.
        self.stale_extractive = (index_rows.extractive_report_keys(store) if use_llm and same_settings
                                 and store.get_meta("extractive_settings") != given.extractive_key
                                 else set())
        self.kept_keys: dict[str, str] = {}   # community id -> key of the report it keeps, unread

    def runs_before(self, attempt: str) -> int:
        """Runs in a row before this one on which the answers to ``attempt`` were unusable."""
        return self.unusable_before.get(attempt) or self.held_runs.get(attempt, 0)

    async def report_level(self, level: list[Community]) -> None:
        """The reports of one level, by the report workers (one without a model)."""
        s = self.settings
        send, recv = anyio.create_memory_object_stream[Community](s.pipeline.queue_size)
        async with anyio.create_task_group() as tg:
            with recv:
                for _ in range(s.pipeline.report_workers if self.use_llm else 1):
                    tg.start_soon(self.report_communities, recv.clone())
            async with send:
                for c in level:
                    # (most keep theirs: decided here, not passed through a worker one by one)
                    kept_as = None if self.check_shortcuts else self.unchanged(c)
                    if kept_as is not None:
                        self.keep_unread(c, kept_as)
                    else:
                        await send.send(c)

    async def report_communities(self, recv) -> None:
        """A report worker: the report of each community it receives."""
        async with recv:
            async for c in recv:
                await self.report(c)

    async def report(self, c: Community) -> None:
        """The report of ``c``, one ``report_level`` did not keep unread (nothing its context is
        built from changed): its context is built, and the report with its key (or an earlier
        one close enough) is kept, or one is written. Checking shortcuts, every community comes
        here, and one counted as unchanged must build the context it kept."""
        kept_as = self.unchanged(c) if self.check_shortcuts else None   # (else None: report_level asked)
        clean = kept_as is not None
        by_llm = self.use_llm and len(c.members) >= self.settings.index.report_min_members
        ctx, rels, kids = self.context(c)
        self.let_go_of_children(c)
        built = None
        by_llm = by_llm and bool(ctx.text)   # (nothing fitted report_max_input_tokens: no call for it)
        if by_llm:
            key = context_key(ctx, model=self.model, prompt_version=self.prompt_version)
        else:  # extractive: named by what it says, which draws on more than the context text
            built = self.extractive(c, ctx, rels, kids)
            key = built.key
            self.note_held(c, ctx)
        if clean and key != kept_as[0]:
            raise AssertionError(f"community {c.id}: context changed but counted as unchanged")
        report = self.found(c, ctx, key, by_llm)
        if report is not None:
            self.kept += 1
            self.kept_reports.append(report.key)
        else:
            if by_llm:
                report = await self.ask(c, ctx, key)
            if report is None:
                report = built or self.extractive(c, ctx, rels, kids)
            report = await self.save(report)
        if c.parent:   # (only a parent's context reads it)
            self.reports[c.id] = report
        self.assignments[c.id] = (key, report.key)
        self.progress.add("reports_done")

    def unchanged(self, c: Community) -> tuple[str, str] | None:
        """(context key, key of the report shown) that ``c`` keeps when nothing its context
        is built from changed."""
        state, old = self.state, self.old
        kids = self.children.get(c.id, ())
        if c.id in self.dirty or {k.id for k in kids} != self.old_children.get(c.id, set()) or any(
                self.assignments.get(k.id) != (state.old_contexts.get(k.id), old.get(k.id)) for k in kids):
            return None
        key, shown = state.old_contexts.get(c.id), old.get(c.id)
        if not key or shown not in self.stored or shown in self.stale_extractive:
            return None
        if key == shown:
            if c.id in self.held_before:   # (its context unchanged: the count its report had stays)
                state.report_held[c.id] = self.held_before[c.id]
            return key, shown
        # A stand-in (or a kept older report): looked at again, unless it stands in for good,
        # its report answers unusable on UNUSABLE_RUNS runs in a row (it was written again,
        # as it was, on every run).
        attempt = report_attempt(key, self.settings.index.report_max_output_tokens)
        if self.use_llm and self.runs_before(attempt) >= UNUSABLE_RUNS:
            state.report_unusable[attempt] = self.runs_before(attempt)
            return key, shown
        return None

    def keep_unread(self, c: Community, kept_as: tuple[str, str]) -> None:
        """``c`` keeps its context key and report, the report not read."""
        self.let_go_of_children(c)
        self.kept_keys[c.id] = kept_as[1]
        self.assignments[c.id] = kept_as
        self.kept += 1
        self.kept_reports.append(kept_as[1])
        self.progress.add("reports_done")

    def let_go_of_children(self, c: Community) -> None:
        """The reports of ``c``'s children, read by ``c``'s context alone, let go once it is built
        (or kept unread): this run's every report was held to the stage's end, 33 MB for the
        2,200 of an offline index of 3,000 documents."""
        for k in self.children.get(c.id, ()):
            self.reports.pop(k.id, None)

    def context(self, c: Community) -> tuple[ReportContext, list[Relationship],
                                             list[tuple[Community, Report]]]:
        """The context of ``c``'s report, with the relationships among its members and the
        reports of its children it is built from."""
        ix = self.settings.index
        rels_by_entity, claims_by_entity = self.elements.of(c.members)
        rels = internal_relationships(c, rels_by_entity)
        self.state.describe(self.store, [r.id for r in rels])   # (the lines it may show)
        kids = [(k, r) for k in self.children.get(c.id, ()) if (r := self.child_report(k)) is not None]
        ctx = build_context(c, entities=self.state.entities, relationships=rels,
                            claims={m: claims_by_entity[m] for m in c.members if m in claims_by_entity},
                            children=kids, max_tokens=ix.report_max_input_tokens,
                            encoding=ix.encoding, costs=self.line_costs)
        return ctx, rels, kids

    def child_report(self, k: Community) -> Report | None:
        """The report of child ``k``: this run's, or the one it keeps, read now."""
        if k.id in self.reports:
            return self.reports[k.id]
        return index_rows.load_report(self.store, self.kept_keys[k.id]) if k.id in self.kept_keys else None

    def extractive(self, c: Community, ctx: ReportContext, rels: list[Relationship],
                   kids: list[tuple[Community, Report]]) -> Report:
        """The report of ``c`` built from its context, without a model."""
        return extractive_report(c, ctx, entities=self.state.entities, relationships=rels,
                                 children=kids, encoding=self.settings.index.encoding)

    def note_held(self, c: Community, ctx: ReportContext) -> None:
        """For ``c`` reported without a call though a model is there: the unusable count of the
        attempt its context would be, kept (``state.report_held``)."""
        # (held below report_min_members)
        if self.use_llm and ctx.text and (self.unusable_before or self.held_runs):
            attempt = report_attempt(context_key(ctx, model=self.model, prompt_version=self.prompt_version),
                                     self.settings.index.report_max_output_tokens)
            if runs := self.runs_before(attempt):
                self.state.report_held[c.id] = [attempt, runs]

    def found(self, c: Community, ctx: ReportContext, key: str, by_llm: bool) -> Report | None:
        """The stored report with ``key``; else, for a model's report, the one ``c`` had if it
        is close enough to the new context (index.report_regen_threshold); else None."""
        previous = self.old.get(c.id)
        report = index_rows.load_report(self.store, key)
        if report is None and by_llm and previous is not None and self.regen_threshold > 0:
            prev_report = index_rows.load_report(self.store, previous)
            if close_enough(prev_report, ctx.elements, self.regen_threshold) and not names_withdrawn(
                    prev_report, self.old_members.get(c.id, ()), self.state.entities):
                report = prev_report
        return report

    async def ask(self, c: Community, ctx: ReportContext, key: str) -> Report | None:
        """The model's report for ``c``; None (the failure recorded) when there is none."""
        s = self.settings
        state = self.state
        attempt = report_attempt(key, s.index.report_max_output_tokens)
        runs = self.runs_before(attempt)
        if runs >= UNUSABLE_RUNS:
            # Settled: asking again would be paid for and answered alike, as on the runs before.
            # (Said by the run that settled it, as a settled summary is: not a failure again.)
            state.report_unusable[attempt] = runs
            return None
        try:
            return await llm_report(self.llm, ctx, model=self.model,
                                    max_tokens=s.index.report_max_output_tokens, encoding=s.index.encoding)
        except LLMError as e:
            runs = unusable_runs(runs, e)
            if runs:
                state.report_unusable[attempt] = runs
            settled = isinstance(e, LLMOutputError) and runs >= UNUSABLE_RUNS
            await self.fail("report", c.id, report_failure(c.id, e, runs, settled=settled), e, settled=settled)
            return None

    async def save(self, report: Report) -> Report:
        """Stores a report written now; the report as stored."""
        await self.writer.run(index_rows.save_report, report)
        # The stored row is the report: when a community with the same key was written
        # meanwhile by another worker, its row stands, and parents are built from it.
        report = index_rows.load_report(self.store, report.key) or report
        self.generated += 1
        self.written.add(report.key)
        self.progress.add("reports_written")
        return report


# Contexts are built from claims looked up per entity while fewer than one community in this
# many is dirty; else from the whole graph's, grouped once.
_FEW_DIRTY = 20


class ElementsByEntity:
    """The relationships (by source) and claims (by the entities they name, as subject or
    object: ``claims_by_end``) of entities, as a context takes them: each entity's in id order,
    of the graph as this run has it."""

    def __init__(self, store: Store, state: GraphState, *, whole: bool) -> None:
        self.store = store
        self.state = state
        self.by_source = state.relationships_by_source()
        self.whole = whole
        if whole:
            self.claims = claims_by_end(sorted(state.claims.values(), key=lambda c: c.id))
            return
        # Looked up once per entity (a parent's members are its children's): entity -> its
        # claims (empty when it has none). This run's, which the published rows may not hold.
        self.claims = {}
        self.added_claims = claims_by_end(state.claims_added)

    def of(self, members: list[str]) -> tuple[dict[str, list[Relationship]], dict[str, list]]:
        """(relationships by source, claims by the members they name) of ``members``."""
        state = self.state
        rels = {m: [state.relationships[rid] for rid in ids] for m in members if (ids := self.by_source.get(m))}
        if self.whole:
            return rels, self.claims
        missing = {m for m in members if m not in self.claims}
        if missing:
            cids = index_rows.claim_ids_of(self.store, missing) | {
                c.id for m in missing for c in self.added_claims.get(m, ())}
            claims = claims_by_end(c for cid in sorted(cids) if (c := state.claims.get(cid)) is not None)
            for m in missing:
                self.claims[m] = claims.get(m, [])
        return rels, {m: self.claims[m] for m in members if self.claims[m]}


# -- the pure parts ---------------------------------------------------------------------------
_G = TypeVar("_G")
_K = TypeVar("_K", bound=Hashable)


def _grouped(items: Iterable[_G], key: Callable[[_G], _K]) -> dict[_K, list[_G]]:
    """``items`` by ``key``, in their order."""
    groups: dict[_K, list[_G]] = defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    return groups


def claims_by_end(claims: Iterable[Claim]) -> dict[str, list[Claim]]:
    """``claims`` (in their order) by each entity they name: their subject, and their object
    when they have another (a report's context shows a claim with either end among its members)."""
    groups: dict[str, list[Claim]] = defaultdict(list)
    for c in claims:
        groups[c.subject_id].append(c)
        if c.object_id and c.object_id != c.subject_id:
            groups[c.object_id].append(c)
    return groups


def children_of(communities: Iterable[Community]) -> dict[str, list[Community]]:
    """Parent community id -> its sub-communities, in their order."""
    return _grouped((c for c in communities if c.parent), lambda c: c.parent or "")


def deepest_first(communities: Iterable[Community]) -> list[list[Community]]:
    """The communities level by level, the deepest first (a parent's context may hold its
    children's reports)."""
    levels = _grouped(communities, lambda c: c.level)
    return [levels[level] for level in sorted(levels, reverse=True)]


def internal_relationships(c: Community, by_source: dict[str, list[Relationship]]) -> list[Relationship]:
    """The relationships between members of ``c``, by member."""
    members = set(c.members)
    return [r for m in c.members for r in by_source.get(m, ()) if r.target in members]


def close_enough(previous: Report | None, elements: dict, threshold: float) -> bool:
    """Whether ``previous`` report is kept for a context of ``elements`` (under
    index.report_regen_threshold). Not an extractive report standing in for a failed one:
    close to its context as it is, it was kept for good, and the model never asked again."""
    return previous is not None and not previous.extractive and \
        changed_fraction(previous.elements, elements) < threshold


def names_withdrawn(previous: Report, members: Iterable[str], entities: Collection[str]) -> bool:
    """Whether ``previous`` report may name an entity the graph no longer holds, which keeps it
    from being kept under index.report_regen_threshold: one in its elements, or a member of its
    community as last published (a parent's context quotes its children's reports, which named
    theirs). A deleted document withdraws its entities from every report, not only from those
    whose context changed by the threshold's share."""
    elements = previous.elements or {}
    return any(e not in entities for e in (*elements.get("entities", ()), *members))


def unusable_runs(runs: int, error: LLMError) -> int:
    """The runs in a row a report's answers were unusable, after this run's ``error``. The model
    answered, and nothing it said was usable: one more (asked again on the next runs, up to
    UNUSABLE_RUNS in a row, as a flaky gateway's garbage passes; then it would say the same on
    every run, each paid for). An outage is asked again on the next run, however many, and the
    count stays."""
    return runs + 1 if isinstance(error, LLMOutputError) else runs


def report_failure(community_id: str, error: LLMError, runs: int, *, settled: bool) -> str:
    """What a failed report is recorded with."""
    return f"community {community_id}: {error}" + (
        f"; unusable on {runs} runs in a row{_REPORT_SETTLED}" if settled
        else "; an extractive report stands in until the next run")


def report_attempt(context_key: str, max_output_tokens: int) -> str:
    """What a community's report answers are counted as unusable for (``UNUSABLE_RUNS``): its
    context key (the context, the report model and prompt) and the room the answer is given."""
    return f"{context_key}/{max_output_tokens}"


def built_min_members(settings: Settings, said: Callable[[str], str | None], *, by_llm: bool) -> int | None:
    """The index.report_min_members the published index (its meta read by ``said``) chose its
    reports with, when its report settings are ``settings``' but for that one; None when others
    differ too (every context changes), or it is not known."""
    published = said("report_settings")
    if published == report_settings_key(settings, by_llm=by_llm):
        return settings.index.report_min_members
    chosen_with = said("report_min_members") or ""
    # (An index published before the setting was recorded is matched against the likely ones:
    # unknown, it was taken for one whose every report is written again.)
    for tried in [int(chosen_with)] if chosen_with.isdigit() else range(1, _MIN_MEMBERS_TRIED + 1):
        if published == report_settings_key(settings, by_llm=by_llm, min_members=tried):
            return tried
    return None


_MIN_MEMBERS_TRIED = 64   # the report_min_members values an index of unknown one is matched with
