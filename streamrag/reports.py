"""Community reports: the context a report is written from, and the report itself.

Context (pure): a leaf community's elements are added in descending combined degree (an edge's
source, target, their claims, then the edge) until ``report_max_input_tokens``; members without
an internal edge follow by degree. A member's claims are those naming it, as their subject or
their object: "Acme sued Jane Doe" is about Jane too, and is in her community's report though
Acme's is another (a claim naming two members is one line, added with the first of them). A
higher community uses the same element context when all of it fits; otherwise its
sub-communities' reports replace their element summaries, largest sub-community first, until
the rest fits. The selected elements are rendered in id order, so a
context, and its key, change only when what it contains changes: that is what lets an update
regenerate exactly the reports whose input changed.

Report: the LLM writes JSON (prompts/report.md) which is parsed and validated; without an LLM,
or when the model's answer stays unusable, an extractive report with the same structure is
built from the community's most central entities and strongest relationships, and a last
finding naming the members nothing else in it names (``MEMBERS_MAX_TOKENS``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from streamrag import ids
from streamrag.merge import distinct_claims
from streamrag.parsing import parse_report
from streamrag.prompts import load_prompt
from streamrag.records import Claim, Community, Entity, Relationship, Report
from streamrag.sentences import closed, headed_sentences
from streamrag.tokens import count_tokens
from streamrag.words import counted

if TYPE_CHECKING:
    from streamrag.config import Settings

# 5: "1 entity", "1 relationship" in the singular (they said "1 entities and 1 relationships").
# 6: a description's sentences end at a Markdown heading's line and before a blank line
# (``sentences.line_parts``), as a model-written description may hold them; the heading's line
# is no member's sentence (``sentences.is_heading_line``).
# 7: no heading is a member's sentence, a title either ("Aftermath of Lake Kelholmford Marathon
# 2034": ``sentences.is_heading``); a sentence quoted ending with a colon or semicolon ends with
# a full stop, one ending 'hey?"' is as written (``sentences.closed``; they read "Agenda:.", 'hey?".'); a
# relationship's description that is a heading alone is no finding, the next strongest one is
# (``_finding_text``).
# 8: a line in title case is a title only with its body after it (``sentences.is_heading``): a
# description that is one ("Call Ada Osk on Friday", a relationship's "Profile: Ivo Quinric and
# the Road to Ruvtane Press") or ends with one is quoted again.
EXTRACTIVE_VERSION = "extractive-8"
# The tag an extractive report's key digests with its context and fields (``extractive_report``),
# no version of the builder: bump EXTRACTIVE_VERSION when what ``extractive_report`` writes in the
# fields changes (every report is built again, and those whose fields changed are written: a new
# key); change this tag only when a report's stored text, token count or elements change while its
# context and fields do not (``render_markdown``, ``_make_report``), as then its key alone would
# not (test_reports pins render_markdown's output to say so). "extractive-6" is the builder version
# it was taken from: a report of an index built then, written alike now, keeps its key.
_EXTRACTIVE_KEY_TAG = "extractive-6"
# The room of an extractive report's "Other members" finding: a sentence for each member the
# rest of the report does not name, those no child report names first, while the names of the
# others still fit in a list after them.
MEMBERS_MAX_TOKENS = 250
MEMBER_SENTENCE_WORDS = 40


class ReportContext(msgspec.Struct):
    """The text a report is written from and the elements it holds. (Not its token count:
    nothing read it, and counting every context took 0.9 s of the 3.6 s an offline index of
    3,000 documents spent counting tokens.)"""
    text: str
    elements: dict[str, list[str]]      # entities / relationships / claims / reports used


# Bump when what a report context holds changes: every community's context is then rebuilt.
CONTEXT_VERSION = 2
# Bump when what a claim's line says, or which contexts show it, changes: the contexts of an
# index with claims are rebuilt (no other's: the key of one without them stays as it was). 2: the
# object and dates, and one line for a claim several chunks make. 3: a claim is in the contexts
# of its object's communities too. A bump adds its entry to ``CLAIM_LINES_CHANGES``: what a run
# on an index built before it says of why its reports are written again.
CLAIM_LINES_VERSION = 3


def settings_key(settings: Settings, *, by_llm: bool, min_members: int | None = None,
                 claim_lines: int | None = None) -> str:
    """Everything besides its context that decides a community's report, written by the report
    model or (``by_llm`` False) extractively, by ``EXTRACTIVE_VERSION``; a changed key rebuilds
    every context (and an offline index's every report, once, when the extractive one changes:
    published only where its text changed).
    ``min_members``: with that index.report_min_members instead of the settings' (all the rest
    of the key goes into every context key: a model's reports outlive a change of it alone);
    ``claim_lines``: with that ``CLAIM_LINES_VERSION`` (``claim_lines_redone``)."""
    ix = settings.index
    model, version = ((settings.llm.report_model, load_prompt("report").version) if by_llm
                      else (None, EXTRACTIVE_VERSION))
    claims = (claim_lines or CLAIM_LINES_VERSION,) if ix.extract_claims and by_llm else ()
    return ids.digest(CONTEXT_VERSION, model, version, ix.encoding, ix.report_max_input_tokens,
                      ix.report_min_members if min_members is None else min_members, *claims)


# What a run (and its estimate) says of why the reports of an index built with an earlier
# CLAIM_LINES_VERSION are written again, no setting changed: the entries after its version, by
# the version that made the change (from 3: 2 is the first in a key).
CLAIMS_BY_OBJECT_WHY = "this streamrag shows a claim in the reports of its object's communities too"
CLAIM_LINES_CHANGES: dict[int, str] = {3: CLAIMS_BY_OBJECT_WHY}
# What a run (and its estimate) on a model-built index says of why its extractive reports (of
# communities below index.report_min_members, stand-ins for failed answers) are written again,
# no setting changed: EXTRACTIVE_VERSION is not the one it was published with (it said nothing,
# the estimate "Nothing to do", and the run published a new version).
EXTRACTIVE_CHANGED_WHY = "this streamrag writes extractive reports otherwise"
# ... and what it does: true of any such change, and of an index none of whose contexts it
# changes (no report written: it said reports "are written again, once" all the same).
CLAIM_LINES_REDONE = ("every community's context is built again, once, and its report written again only if "
                      "the context changed (the others are kept)")


def claim_lines_redone(settings: Settings, published: str | None, *, by_llm: bool) -> str:
    """Why a run writes reports again, when the report settings ``published`` with an index are
    ``settings``' but for an earlier ``CLAIM_LINES_VERSION`` (from 2, the first in a key): the
    changes since that version (``CLAIM_LINES_CHANGES``), said instead of that the report
    settings changed; "" when they are not."""
    if published is None or published == settings_key(settings, by_llm=by_llm):
        return ""
    built = next((v for v in range(2, CLAIM_LINES_VERSION)
                  if published == settings_key(settings, by_llm=by_llm, claim_lines=v)), None)
    if built is None:
        return ""
    return "; ".join(CLAIM_LINES_CHANGES[v] for v in range(built + 1, CLAIM_LINES_VERSION + 1))


def _clean(text: str) -> str:
    return " ".join(text.split()).replace(" | ", " / ")


def entity_line(e: Entity) -> str:
    return f"{e.id} | {_clean(e.name)} | {e.type} | {_clean(e.description)}"


def relationship_line(r: Relationship, names: dict[str, str]) -> str:
    return (f"{r.id} | {_clean(names.get(r.source, r.source))} | "
            f"{_clean(names.get(r.target, r.target))} | {_clean(r.description)}")


def claim_table_line(c: Claim, names: dict[str, str]) -> str:
    """A claim's row in a report context's Claims table: ``id | subject | object | type | status |
    dates | description`` (its ends by name; "-" for no object or no date)."""
    obj = _clean(names.get(c.object_id, c.object_id)) if c.object_id else "-"
    return (f"{c.id} | {_clean(names.get(c.subject_id, c.subject_id))} | {obj} | {c.type} | {c.status} | "
            f"{claim_period(c.start_date, c.end_date) or '-'} | {_clean(c.description)}")


def claim_period(start: str | None, end: str | None) -> str:
    """When a claim held, as its line says it: one date, ``start to end``, ``from start``,
    ``until end``, or "" (no date given)."""
    start, end = _clean(start or ""), _clean(end or "")
    if start and end:
        return start if start == end else f"{start} to {end}"
    return f"from {start}" if start else f"until {end}" if end else ""


def report_line(community_id: str, report: Report) -> str:
    return f"{community_id} | {_clean(report.title)} | {_clean(report.summary)}"


def _render(entities: list[str], relationships: list[str], claims: list[str],
            reports: list[str]) -> str:
    parts = []
    if reports:
        parts.append("Reports of sub-communities (community id | title | summary)\n"
                     + "\n".join(sorted(reports)))
    if entities:
        parts.append("Entities (id | name | type | description)\n" + "\n".join(sorted(entities)))
    if relationships:
        parts.append("Relationships (id | source | target | description)\n"
                     + "\n".join(sorted(relationships)))
    if claims:
        parts.append("Claims (id | subject | object | type | status | dates | description)\n"
                     + "\n".join(sorted(claims)))
    return "\n\n".join(parts)


class _Elements:
    """Greedy, budgeted selection of a set of entities with the edges among them."""

    def __init__(self, entities: dict[str, Entity], relationships: Sequence[Relationship],
                 claims: dict[str, list[Claim]], names: dict[str, str], encoding: str,
                 costs: dict[str, int]) -> None:
        self.entities = entities
        self.relationships = relationships
        self.claims = claims
        self.names = names
        self.encoding = encoding
        self.costs = costs   # element id -> tokens of its line (+1), counted once
        # Made once for the selections a parent tries with each child report it takes (253 for
        # the 44 contexts of an update of an offline index of 10,000 documents): the edges in
        # the order they are added, and each element's line.
        self.by_degree = sorted(relationships, key=lambda r: (-r.combined_degree, r.id))
        self.lines: dict[str, str] = {}
        self.distinct: dict[str, list[Claim]] = {}

    def distinct_claims(self, eid: str) -> list[Claim]:
        """The claims naming ``eid`` (subject or object), one of each found in several chunks
        (``merge.distinct_claims``: the smallest id, so a claim naming two members is the same
        line under both, added once)."""
        if eid not in self.distinct:
            self.distinct[eid] = distinct_claims(self.claims.get(eid, ()))
        return self.distinct[eid]

    def line(self, key: str, make: Callable[[], str]) -> str:
        if key not in self.lines:
            self.lines[key] = make()
        return self.lines[key]

    def select(self, members: Sequence[str], budget: int) -> tuple[dict[str, str], int, bool]:
        """(line by element id, tokens used, everything fitted)."""
        member_set = set(members)
        lines: dict[str, str] = {}
        used = 0

        def add(key: str, line: str) -> bool:
            nonlocal used
            if key in lines:
                return True
            cost = self.costs.get(key)
            if cost is None:   # a parent's context is tried again with each child report it takes
                cost = self.costs[key] = count_tokens(line, self.encoding) + 1
            if used + cost > budget:
                return False
            lines[key] = line
            used += cost
            return True

        def add_entity(eid: str) -> bool:
            if eid in lines:
                return True
            if not add(eid, self.line(eid, lambda: entity_line(self.entities[eid]))):
                return False
            for c in self.distinct_claims(eid):
                if not add(c.id, self.line(c.id, lambda: claim_table_line(c, self.names))):
                    return False
            return True

        # The edges among ``members`` looked at as they are added, not listed first: a context
        # that overflows stops at the budget, and a parent's is tried with each child report.
        for r in self.by_degree:
            if r.source not in member_set or r.target not in member_set:
                continue
            if not (add_entity(r.source) and add_entity(r.target)
                    and add(r.id, self.line(r.id, lambda: relationship_line(r, self.names)))):
                return lines, used, False
        for eid in sorted(member_set, key=lambda e: (-self.entities[e].degree, e)):
            if not add_entity(eid):
                return lines, used, False
        return lines, used, True


class _Names:
    """Entity names looked up when a line needs one (copying every name for each of thousands
    of communities cost more than building their contexts)."""

    def __init__(self, entities: dict[str, Entity]) -> None:
        self.entities = entities

    def get(self, eid: str, default: str) -> str:
        entity = self.entities.get(eid)
        return default if entity is None else entity.name


def build_context(community: Community, *, entities: dict[str, Entity],
                  relationships: Sequence[Relationship], claims: dict[str, list[Claim]],
                  children: Sequence[tuple[Community, Report]], max_tokens: int,
                  encoding: str = "o200k_base", costs: dict[str, int] | None = None) -> ReportContext:
    """The input of ``community``'s report (see the module docstring for the rules).

    ``claims``: the claims naming each member, as their subject or their object, by member.
    ``costs``: the tokens of each element's line (+1) by element id, shared by the contexts a
    report stage builds from the same elements, so that a line is counted once per stage, not
    once per level holding it (an offline index of 3,000 documents counted 16,700 lines, 7,400
    of them distinct and most too long for ``tokens.count_tokens`` to remember: 1.3 s). Valid
    only while the elements, and so their lines, do not change."""
    picker = _Elements(entities, relationships, claims, _Names(entities), encoding,
                       {} if costs is None else costs)

    def finish(lines: dict[str, str], reports: dict[str, str]) -> ReportContext:
        kinds: dict[str, list[str]] = {"entities": [], "relationships": [], "claims": []}
        for key in lines:
            kinds[{"ent": "entities", "rel": "relationships", "clm": "claims"}[key[:3]]].append(key)
        text = _render([lines[k] for k in kinds["entities"]], [lines[k] for k in kinds["relationships"]],
                       [lines[k] for k in kinds["claims"]], list(reports.values()))
        elements = {k: sorted(v) for k, v in kinds.items()}
        elements["reports"] = sorted(reports)
        # What each element's line says, that a kept report's likeness to a changed context
        # (index.report_regen_threshold) sees a description changed, not only an id come or gone.
        elements["lines"] = sorted(f"{key}={ids.text_hash(line, 8)}"
                                   for key, line in (*lines.items(), *reports.items()))
        return ReportContext(text=text, elements=elements)

    lines, _used, fits = picker.select(community.members, max_tokens)
    if fits or not children:
        return finish(lines, {})
    ordered = sorted(children, key=lambda cr: (-len(cr[0].members), cr[0].id))
    report_lines: dict[str, str] = {}
    report_tokens = 0
    for k, (child, report) in enumerate(ordered, start=1):
        line = report_line(child.id, report)
        report_lines[child.id] = line
        report_tokens += count_tokens(line, encoding) + 1
        if report_tokens > max_tokens:
            report_lines.pop(child.id)
            break
        rest = [m for c, _r in ordered[k:] for m in c.members]
        lines, _used, fits = picker.select(rest, max_tokens - report_tokens)
        if fits:
            return finish(lines, report_lines)
    # The next child's report did not fit: the reports that did, and as many elements as fitted
    # beside them (with no report at all, the elements that fitted alone). An empty context was
    # sent to the model when the largest child's report alone was over the budget.
    return finish(lines, report_lines)


def context_key(context: ReportContext, *, model: str, prompt_version: str) -> str:
    """The key of the report ``model`` writes from ``context`` with the report prompt of
    ``prompt_version``. (An extractive report's key is ``extractive_report``'s: its content.)"""
    return "rpt-" + ids.digest(f"llm:{model}:{prompt_version}", context.text)


def changed_fraction(old_elements: dict[str, list[str]] | None, new_elements: dict[str, list[str]]) -> float:
    """Share of the elements of two contexts that differ: come, gone, or their line changed (a
    new description); 1.0 when there is no old one. A report stored before its elements' lines
    were kept (no ``lines``) is compared by ids alone."""
    if not old_elements:
        return 1.0
    if "lines" in old_elements and "lines" in new_elements:
        old_lines = dict(item.split("=", 1) for item in old_elements["lines"])
        new_lines = dict(item.split("=", 1) for item in new_elements["lines"])
        union = old_lines.keys() | new_lines.keys()
        changed = sum(1 for key in union if old_lines.get(key) != new_lines.get(key))
        return changed / len(union) if union else 0.0
    old = {f"{k}:{v}" for k, vs in old_elements.items() if k != "lines" for v in vs}
    new = {f"{k}:{v}" for k, vs in new_elements.items() if k != "lines" for v in vs}
    union = old | new
    return len(old ^ new) / len(union) if union else 0.0


def render_markdown(title: str, summary: str, rating: float, explanation: str,
                    findings: list[dict]) -> str:
    """A report's fields as the Markdown text queries read. An extractive report's key covers its
    context and fields, not this text: a change here reaches no stored report unless
    ``_EXTRACTIVE_KEY_TAG`` changes with it (test_reports pins this output)."""
    out = [f"# {title}", "", summary, "", f"Impact: {rating:g}/10. {explanation}".rstrip()]
    if findings:
        out += ["", "## Findings"]
        for f in findings:
            out += ["", f"### {f['summary']}", "", f.get("explanation", "")]
    return "\n".join(out).strip() + "\n"


def _make_report(key: str, fields: dict, context: ReportContext, encoding: str,
                 extractive: bool) -> Report:
    text = render_markdown(fields["title"], fields["summary"], fields["rating"],
                           fields["rating_explanation"], fields["findings"])
    return Report(key=key, title=fields["title"], summary=fields["summary"],
                  rating=float(fields["rating"]), rating_explanation=fields["rating_explanation"],
                  findings=fields["findings"], text=text, tokens=count_tokens(text, encoding),
                  elements=context.elements, extractive=extractive)


def extractive_report(community: Community, context: ReportContext, *, entities: dict[str, Entity],
                      relationships: Sequence[Relationship], children: Sequence[tuple[Community, Report]],
                      encoding: str = "o200k_base") -> Report:
    """A report built from the community itself: central entities, strongest relationships."""
    members = [entities[m] for m in community.members if m in entities]
    members.sort(key=lambda e: (-e.degree, -e.mentions, e.id))
    member_set = set(community.members)
    internal = [r for r in relationships if r.source in member_set and r.target in member_set]
    internal.sort(key=lambda r: (-r.weight, -r.combined_degree, r.id))
    top = [e.name for e in members[:3]]
    title = (", ".join(top[:-1]) + " and " + top[-1]) if len(top) > 1 else (top[0] if top else community.id)
    names = {e.id: e.name for e in members}
    telling = dict.fromkeys(s for s in (_telling_sentence(e, members) for e in members[:4]) if s)
    summary = " ".join([_overview(members, internal, names), *telling])
    findings = []
    for r in internal:
        if len(findings) >= 5:
            break
        if explanation := _finding_text(r.description):   # (a title alone is no finding)
            findings.append({
                "summary": f"{names.get(r.source, r.source)} and {names.get(r.target, r.target)}",
                "explanation": explanation, "entities": [r.source, r.target], "relationships": [r.id]})
    for child, report in sorted(children, key=lambda cr: (-len(cr[0].members), cr[0].id))[:3]:
        if len(findings) >= 8:
            break
        findings.append({"summary": report.title, "explanation": report.summary,
                         "entities": [], "relationships": []})
    said = "\n".join([title, summary, *(f"{f['summary']}\n{f['explanation']}" for f in findings)])
    others = _members_finding(members, said, children, encoding)
    if others is not None:
        findings.append(others)
    rating = round(min(10.0, 1.0 + 2.0 * math.log2(1 + len(internal) + len(members))), 1)
    fields = {"title": title, "summary": summary, "rating": rating,
              "rating_explanation": _sizes(members, internal) + ".",
              "findings": findings}
    # Named by its content, not only its context: two communities with one context (both past
    # the budget at their first line) still say different things, and a weight or a mention
    # count it shows can change while the context text does not. Not by EXTRACTIVE_VERSION: a
    # new builder has every report built again (``settings_key``, ``ReportStage.stale_extractive``),
    # and one it writes as before is found stored, so nothing is published for it (a model-built
    # index of synth_small published a new version of 19 rewritten reports, none of them changed).
    key = "rpt-" + ids.digest(_EXTRACTIVE_KEY_TAG, context.text, msgspec.json.encode(fields).decode())
    return _make_report(key, fields, context, encoding, extractive=True)


def _finding_text(description: str) -> str:
    """A relationship's ``description`` as a finding's explanation, on one line, without the
    headings it quotes (``sentences.headed_sentences``: "Profile: Ivo Quinric and the Road to
    Ruvtane Press" over the text under it); "" when it holds nothing else (a Markdown heading).
    A title-case line that is the whole description is its text (it cannot be told from "Call
    Ada Osk on Friday"). (The context shows the description whole.)"""
    sentences = headed_sentences(description)
    if not any(heading for _s, heading in sentences):
        return description.replace("\n", " ")
    return " ".join(" ".join(x.split()) for x, heading in sentences if not heading)


# How ``_overview``'s sentence opens: the index's own count, which an extractive answer quotes
# after any sentence of the documents (``extractive.pick_sentences``).
OVERVIEW_OPENING = re.compile(r"\d+ entit(?:y|ies) and \d+ relationships? around ")


def _overview(members: Sequence[Entity], internal: Sequence[Relationship], names: dict[str, str]) -> str:
    """One sentence of what the graph says about a community: its size, its central entities
    with their types, and its strongest ties (it opens as ``OVERVIEW_OPENING`` matches)."""
    if not members:
        return "No entities."
    central = [f"{e.name} ({e.type})" if e.type else e.name for e in members[:3]]
    central_text = (", ".join(central[:-1]) + " and " + central[-1]) if len(central) > 1 else central[0]
    ties = [f"{names[r.source]} and {names[r.target]}" for r in internal[:3]
            if r.source in names and r.target in names]
    text = f"{_sizes(members, internal)} around {central_text}"
    return text + (f"; strongest ties: {'; '.join(ties)}." if ties else ".")


def _sizes(members: Sequence[Entity], internal: Sequence[Relationship]) -> str:
    """``2 entities and 1 relationship``: a community's size, in its report (index content:
    the counts stay as they were written, not grouped by thousands)."""
    return f"{counted(len(members), 'entity', grouped=False)} and {counted(len(internal), 'relationship', grouped=False)}"


def _words(text: str) -> str:
    """``text``'s words, each between spaces: ``_words(name) in _words(text)`` when ``text``
    writes ``name`` as a whole (not "Pellric" inside "Pellricford"), in one pass over it."""
    return " " + " ".join(re.findall(r"\w+", text)) + " "


def _named_by_children(names: dict[str, str], children: Sequence[tuple[Community, Report]]) -> set[str]:
    """The ids of ``names`` (entity id -> ``_words`` of its name) that the ``children``'s reports
    name, as ``name in _words(" ".join(their texts))`` finds them: looked for first in the report
    of the child the entity is a member of, which names nearly every one (all but 23 of the 5,254
    of an update of an offline index of 10,000 documents), and in all of them together only when
    that one does not (a parent near the top has tens of kilobytes of children's reports: searched
    whole for each of its thousands of members, 0.12 s of that update)."""
    own = {m: (c.id, r.text) for c, r in children for m in c.members if m in names}
    words_of: dict[str, str] = {}   # child id -> the words of its report, made once
    every: str | None = None
    found = set()
    for eid, name in names.items():
        if eid in own:
            cid, text = own[eid]
            if cid not in words_of:
                words_of[cid] = _words(text)
            if name in words_of[cid]:   # (then in the children's together too)
                found.add(eid)
                continue
        if every is None:
            every = _words(" ".join(r.text for _c, r in children))
        if name in every:
            found.add(eid)
    return found


def _members_finding(members: Sequence[Entity], said: str,
                     children: Sequence[tuple[Community, Report]], encoding: str) -> dict | None:
    """The finding naming the ``members`` (central first) that ``said`` (the rest of the report)
    does not, within ``MEMBERS_MAX_TOKENS``: those no child report names first, each with a
    sentence of its description while the names of the rest still fit in a list after them,
    the rest listed by name (as many as fit, and how many more there are)."""
    said_words = _words(said)
    name_words = {e.id: _words(e.name) for e in members}
    unnamed = [e for e in members if name_words[e.id].strip() and name_words[e.id] not in said_words]
    if not unnamed:
        return None
    covered = _named_by_children({e.id: name_words[e.id] for e in unnamed}, children)
    unnamed.sort(key=lambda e: e.id in covered)   # (stable)
    labels = {e.id: f"{e.name} ({e.type})" if e.type else e.name for e in unnamed}
    label_cost: dict[str, int] = {}

    def cost_of(e: Entity) -> int:   # (a label is counted once it may be listed)
        if e.id not in label_cost:
            label_cost[e.id] = count_tokens(labels[e.id] + ",", encoding)
        return label_cost[e.id]

    room = MEMBERS_MAX_TOKENS - count_tokens("Also among its members: and 999 more.", encoding)
    # All the labels' cost, or as much of it as passes the room: then no sentence fits, and the
    # labels listed are those before the first over it (most of a large community's were
    # counted, 5,254 of an update's 44 reports, for the 20-odd listed).
    listed_cost = 0
    for e in unnamed:
        listed_cost += cost_of(e)
        if listed_cost > room:
            break
    told: dict[str, str] = {}
    told_words: list[str] = []   # (each told sentence's words, made once)
    for e in unnamed:
        if listed_cost > room:   # (a sentence costs more than the name it holds: none fits now)
            break
        if any(name_words[e.id] in x for x in told_words):   # by another's sentence
            told[e.id] = ""
            listed_cost -= cost_of(e)
            continue
        sentence = _member_sentence(e, members)
        cost = count_tokens(sentence, encoding) + 1 if sentence else room + 1
        if cost + listed_cost - cost_of(e) <= room:
            told[e.id] = sentence
            told_words.append(_words(sentence))
            room -= cost
            listed_cost -= cost_of(e)
    listed: list[str] = []
    rest = [e for e in unnamed if e.id not in told]
    for e in rest:
        if cost_of(e) > room:
            break
        listed.append(labels[e.id])
        room -= cost_of(e)
    return _other_members(unnamed, told, rest, listed)


def _other_members(unnamed: Sequence[Entity], told: dict[str, str], rest: Sequence[Entity],
                   listed: list[str]) -> dict | None:
    """The "Other members" finding of the members ``told`` (id -> their sentence, "" for one
    another's names) and the ``listed`` labels of the first of the ``rest``; None if it says
    nothing."""
    parts = [x for x in told.values() if x]
    if listed:
        more = len(rest) - len(listed)
        names = listed + [f"{more} more"] if more else listed
        parts.append("Also among its members: " + (", ".join(names[:-1]) + " and " + names[-1]
                                                   if len(names) > 1 else names[0]) + ".")
    named = [e.id for e in unnamed if e.id in told] + [e.id for e in rest[:len(listed)]]
    return {"summary": "Other members", "explanation": " ".join(parts),
            "entities": named, "relationships": []} if parts else None


def _member_sentence(entity: Entity, members: Sequence[Entity]) -> str:
    """A sentence of ``entity``'s description that names it (prefixed by its name and type
    when none does), the one naming the most other members among those of five words or more,
    cut after ``MEMBER_SENTENCE_WORDS`` words; "" without one (a parenthesised note such as
    "(Also called Wexius.)" is not one, nor a heading: ``sentences.headed_sentences``)."""
    sentences = [" ".join(x.split()) for x, heading in headed_sentences(entity.description)
                 if not x.startswith("(") and not heading]
    if not sentences:
        return ""
    name = _words(entity.name)   # (made once, not again for each sentence)
    own = [x for x in sentences if name in _words(x)]
    best = _most_telling(own or sentences, entity, members)
    named = bool(own)   # (a cut takes words away, a stop adds none)
    words = best.split()
    if len(words) > MEMBER_SENTENCE_WORDS:
        best = " ".join(words[:MEMBER_SENTENCE_WORDS]) + " ..."
        named = named and name in _words(best)
    else:
        best = closed(best)
    if not named:   # (none names it, or the cut left its name out)
        best = f"{entity.name} ({entity.type}): {best}" if entity.type else f"{entity.name}: {best}"
    return best


def _telling_sentence(entity: Entity, members: Sequence[Entity]) -> str:
    """The sentence of ``entity``'s description that names the most other members (a sentence
    of at least five words when there is one; the earliest among equals), a heading never
    (``sentences.headed_sentences``: "Aftermath of Lake Kelholmford Marathon 2034" over the text
    under it is no finding), ending as a sentence does (``sentences.closed``)."""
    sentences = [x for x, heading in headed_sentences(entity.description) if not heading]
    if not sentences:
        return ""
    return closed(_most_telling(sentences, entity, members))


def _most_telling(sentences: list[str], entity: Entity, members: Sequence[Entity]) -> str:
    """Of ``sentences`` (not empty), the one naming the most other members among those of five
    words or more (all of them when none is); the earliest among equals."""
    long_enough = [x for x in sentences if len(x.split()) >= 5] or sentences
    others = [m.name for m in members[:20] if m.id != entity.id]
    return max(long_enough, key=lambda x: sum(1 for n in others if n in x))


def usable_report(text: str) -> bool:
    """A report needs a title, a summary and at least one finding (the prompt asks for 3 to 8).
    An answer cut off at ``max_tokens`` is rejected by the client before this is asked, though
    the parser could repair its JSON: a report missing its end is not cached as a good one."""
    fields = parse_report(text, known_entity_ids=set(), known_relationship_ids=set())
    return fields is not None and bool(fields["findings"])


async def llm_report(llm, context: ReportContext, *, model: str, max_tokens: int,
                     encoding: str = "o200k_base") -> Report:
    """The LLM's report for ``context`` (raises LLMError when the model keeps failing)."""
    prompt = load_prompt("report")
    result = await llm.chat(prompt.render(context=context.text), model=model, stage="report",
                            prompt=prompt, max_tokens=max_tokens, validate=usable_report,
                            budget_setting="index.report_max_output_tokens")
    report = answered_report(result.text, context, model=model, prompt_version=prompt.version, encoding=encoding)
    if report is None:  # the client validated it; only a changed parser could get here
        from streamrag.errors import LLMOutputError
        raise LLMOutputError("community report answer could not be parsed")
    report.answer = result.key
    return report


def answered_report(text: str, context: ReportContext, *, model: str, prompt_version: str,
                    encoding: str = "o200k_base") -> Report | None:
    """The report ``model``'s answer ``text`` makes for ``context`` (``llm_report``'s; the
    estimate's of an answer the cache holds); None when it cannot be parsed."""
    fields = parse_report(text, known_entity_ids=set(context.elements["entities"]),
                          known_relationship_ids=set(context.elements["relationships"]))
    if fields is None:
        return None
    return _make_report(context_key(context, model=model, prompt_version=prompt_version), fields,
                        context, encoding, extractive=False)
