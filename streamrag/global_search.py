"""Global search: choose community reports, map them to scored points, reduce the points.

Which reports are read:

* **Static** (a level N): the cut of the community tree at N, i.e. every community of level N
  plus every leaf community above it. Each entity then lies in exactly one selected community,
  so the whole collection is covered once, never twice. A level deeper than the tree is clamped
  to the deepest level that exists.
* **Dynamic**: the roots are rated for relevance (0-5) by the rating model, many reports per
  call and from their title, summary and most connected members' names only, because rating a
  report must cost far less than mapping it. A community rated below the threshold is pruned with its whole subtree; the
  children of a relevant one are rated in turn, down to ``dynamic_max_depth``. The deepest
  relevant communities are selected: a relevant parent is replaced by its relevant children,
  and kept only when none of its children is relevant, so no report is read together with its
  own parent. When no root reaches the threshold, the best-rated roots (rating > 0) are kept:
  a broad question is best answered by the broadest reports. When every root is rated 0, the
  next level is rated (all of it) under the same rules, down to ``dynamic_max_depth``: a
  specific subject can sit in a sub-community its parent's summary never names.
  A community holding an entity the question names (its own or a sub-community's member)
  rates at least the threshold, whatever its rated text says: the rating sees a report's most
  connected members only, and "Who is Dmitri Quinquay?" never opened his community, rated 0,
  while a report naming a Dmitri Iskton was read instead.

Map-reduce: the selected reports are shuffled (seeded) and packed into batches of
``map_max_tokens``; each batch yields JSON points scored 0-100 (concurrently); points scoring 0
are dropped; the rest, best first, fill the reduce context up to ``reduce_max_tokens``, and the
answer model writes the answer from it. With no point above 0 the answer says so without a
reduce call.

The tree and the reports are plain values loaded up front (``load_tree``) inside the caller's
snapshot, the text of a report once a search is to read it (``read_texts``), so everything
below except the model calls is pure.
"""

from __future__ import annotations

import heapq
import logging
import math
import random
from collections.abc import Awaitable, Callable, Collection, Sequence

import anyio
import msgspec

from streamrag.errors import LLMOutputError, UsageError
from streamrag.parsing import has_text, parse_map_points, parse_ratings, usable_map_answer
from streamrag.prompts import load_prompt
from streamrag.store import Store
from streamrag.tokens import count_message_tokens, count_tokens, truncate
from streamrag.words import counted, number

log = logging.getLogger(__name__)

MAP_MAX_OUTPUT = 1000          # answer tokens of one map call
RATE_TOKENS_PER_REPORT = 8     # answer tokens booked per rated report ("C123: 4")
RATE_ENTITIES = 6              # member names shown to the rating model

Rater = Callable[[list["Node"]], Awaitable[dict[str, float]]]


class Node(msgspec.Struct):
    """A community with the report shown for it."""
    id: str
    level: int
    parent: str | None
    size: int
    title: str
    summary: str
    text: str | None = None   # the report's text: None until read (``read_texts``)
    key_entities: list[str] = msgspec.field(default_factory=list)  # most connected members' names
    children: list[str] = msgspec.field(default_factory=list)


class Tree(msgspec.Struct):
    nodes: dict[str, Node]

    @property
    def roots(self) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.parent is None or n.parent not in self.nodes),
                      key=community_order)

    @property
    def deepest(self) -> int:
        return max((n.level for n in self.nodes.values()), default=0)

    def children(self, node: Node) -> list[Node]:
        return sorted((self.nodes[c] for c in node.children if c in self.nodes), key=community_order)


def community_order(n: Node) -> tuple:
    """The order communities are listed in (roots, children, a selection; query's offline
    fallback too): by level, then by number (C2 before C10), then by id."""
    digits = "".join(ch for ch in n.id if ch.isdigit())
    return (n.level, int(digits) if digits else 0, n.id)


def load_tree(store: Store, *, key_entities: bool = True) -> Tree:
    """Every community that has a report, with its report's title and summary (call inside a
    snapshot); its text is read for the reports a search reads (``read_texts``: the texts of
    an offline index of 10,000 documents are 17.6 MB, and a search reads a few of them).
    Without their ``key_entities`` (``most_connected``, a read of every member) for a search
    that rates no report (static)."""
    rows = store.query(
        "SELECT c.id, c.level, c.parent, c.size, r.title, r.summary "
        "FROM communities c JOIN reports r ON r.key = c.report_key")
    nodes = {r["id"]: Node(id=r["id"], level=r["level"], parent=r["parent"], size=r["size"],
                           title=r["title"], summary=r["summary"])
                 for r in rows}
    for n in nodes.values():
        if n.parent in nodes:
            nodes[n.parent].children.append(n.id)
    for community, names in (most_connected(store, RATE_ENTITIES) if key_entities else {}).items():
        if community in nodes:
            nodes[community].key_entities = names
    return Tree(nodes)


def read_texts(store: Store, nodes: Sequence[Node]) -> list[Node]:
    """``nodes``, each with its report's text (read for those without it; call inside the
    snapshot ``load_tree`` read them in)."""
    unread = [n for n in nodes if n.text is None]
    for start in range(0, len(unread), 500):
        part = unread[start:start + 500]
        texts = dict(store.conn.execute(
            "SELECT c.id, r.text FROM communities c JOIN reports r ON r.key = c.report_key "
            f"WHERE c.id IN ({','.join('?' * len(part))})", [n.id for n in part]))
        for n in part:
            n.text = texts[n.id]
    return list(nodes)


def deepest_level(store: Store) -> int | None:
    """``load_tree(store).deepest``, None when no community has a report, without loading the
    tree (call inside a snapshot)."""
    return store.scalar("SELECT max(c.level) FROM communities c JOIN reports r ON r.key = c.report_key")


def most_connected(store: Store, k: int) -> dict[str, list[str]]:
    """Community id -> the names of its ``k`` most connected members (by degree, then mentions,
    then id), for each community with a member (call inside a snapshot).

    The entities are ranked in one sorted read, and each community's members (read from the
    members' own index) by their rank: joining every member row to its entity and sorting
    them all (93,000 rows of 6,789 communities, an offline index of 10,000 documents) was
    0.30 s of CPU, three quarters of loading the tree for an offline global ask; this is 0.11 s."""
    rank: dict[str, int] = {}
    names: list[str] = []
    for eid, name in store.conn.execute(
            "SELECT id, name FROM entities ORDER BY degree DESC, mentions DESC, id"):
        rank[eid] = len(names)
        names.append(name)
    out: dict[str, list[str]] = {}
    # (a community's ids in one string, split here: a row per member was a third of the time;
    # an entity id is a prefix and a hash, never a space)
    for community, held in store.conn.execute(
            "SELECT community_id, group_concat(entity_id, ' ') FROM community_members GROUP BY community_id"):
        # (a member row without its entity is left out, as the join did)
        ranks = [at for at in map(rank.get, held.split(" ")) if at is not None]
        if ranks:
            out[community] = [names[at] for at in heapq.nsmallest(k, ranks)]
    return out


def holding(store: Store, entity_ids: Collection[str]) -> dict[str, set[str]]:
    """The communities holding any of ``entity_ids`` (a community holds every member of its
    subtree), each with those it holds (call inside a snapshot)."""
    out: dict[str, set[str]] = {}
    ids = sorted(set(entity_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for community, entity in store.conn.execute(
                "SELECT community_id, entity_id FROM community_members WHERE entity_id IN "
                f"({','.join('?' * len(chunk))})", chunk):
            out.setdefault(community, set()).add(entity)
    return out


# --------------------------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------------------------
def resolve_level(tree: Tree, level: int, configured: int = -1) -> int:
    """The static level actually used: a negative level means ``configured``, and a negative
    ``configured`` the deepest level; anything deeper than the tree is clamped to it."""
    if level < 0:
        level = configured
    if level < 0:
        return tree.deepest
    return min(level, tree.deepest)


def static_selection(tree: Tree, level: int) -> list[Node]:
    """The cut of the tree at ``level``: communities of that level plus shallower leaves, and a
    deeper community whose parent has no report (a root of the tree) for its subtree."""
    roots = {n.id for n in tree.roots}
    return sorted((n for n in tree.nodes.values()
                   if n.level == level or (n.level < level and not tree.children(n))
                   or (n.level > level and n.id in roots)), key=community_order)


class Selection(msgspec.Struct):
    selected: list[str]
    rated: int = 0                     # reports rated
    pruned: int = 0                    # communities never rated because an ancestor was pruned
    ratings: dict[str, float] = msgspec.field(default_factory=dict)
    fallback: bool = False             # no root reached the threshold; best roots kept


async def dynamic_selection(tree: Tree, rater: Rater, *, threshold: float, max_depth: int,
                            named: Collection[str] = ()) -> Selection:
    """Rate from the roots down; see the module docstring for the rules. The communities of
    ``named`` (those holding an entity the question names) rate at least ``threshold``."""
    ratings: dict[str, float] = {}
    selected: set[str] = set()
    fallback = False
    frontier = tree.roots
    searching = True       # nothing rated so far says anything about the question
    while frontier:
        try:
            got = await rater(frontier)
        except LLMOutputError as e:
            if searching:
                raise
            # Not one rating of a deeper level could be read: the relevant parents stand for
            # their children (the ratings already paid for are not thrown away).
            log.warning("the ratings of %d sub-communities could not be read (%s); their relevant "
                        "parents are used instead", len(frontier), e)
            selected.update(n.parent for n in frontier)
            break
        for n in frontier:
            ratings[n.id] = float(got.get(n.id, 0.0))
            if n.id in named:
                ratings[n.id] = max(ratings[n.id], float(threshold))
        relevant = [n for n in frontier if ratings[n.id] >= threshold]
        if searching and not relevant:
            best = max((ratings[n.id] for n in frontier), default=0.0)
            if best <= 0:
                # Not one of these says anything: what the question is about may sit in a
                # sub-community whose parent's summary never names it. Look one level deeper.
                frontier = [k for n in frontier if n.level < max_depth for k in tree.children(n)]
                continue
            relevant = [n for n in frontier if ratings[n.id] == best]
            fallback = True
        if not searching:
            # A relevant parent none of whose children is relevant stands for itself.
            selected.update({n.parent for n in frontier} - {n.parent for n in relevant})
        nxt: list[Node] = []
        for n in relevant:
            kids = tree.children(n)
            if kids and n.level < max_depth and not fallback:
                nxt.extend(kids)
            else:
                selected.add(n.id)
        searching = False
        frontier = nxt
    selected.discard(None)
    return Selection(selected=sorted(selected, key=lambda c: community_order(tree.nodes[c])),
                     rated=len(ratings), pruned=len(tree.nodes) - len(ratings), ratings=ratings,
                     fallback=fallback)


# --------------------------------------------------------------------------------------------
# Rendering and packing (pure)
# --------------------------------------------------------------------------------------------
def _one_line(text: str) -> str:
    return " ".join(text.split())




def rate_line(node: Node) -> str:
    """What the rating model sees of a report, on one line: its id, title, summary and the
    names of its most connected members, never the full text, because rating a report must
    cost a fraction of mapping it. The names keep recall for questions about entities whose
    community's summary does not mention them."""
    line = f"[R:{node.id}] {_one_line(node.title)}: {_one_line(node.summary)}"
    if node.key_entities:
        line += " Key entities: " + ", ".join(_one_line(n) for n in node.key_entities) + "."
    return line


def report_block(node: Node) -> str:
    """A report as the map step reads it, headed by its citation tag."""
    body = node.text.strip()
    lines = body.splitlines()
    if lines and lines[0].startswith("# "):
        body = "\n".join(lines[1:]).strip()
    return f"[R:{node.id}] {_one_line(node.title)}\n{body}"


# The least room a batch of reports (or a local context) needs beside its prompt and the
# question: less holds no report's title and a line.
MIN_ROOM_TOKENS = 64


def room_beside(messages: list[dict[str, str]], budget: int, encoding: str, *, what: str,
                setting: str = "query.map_max_tokens", filling: str = "the reports") -> int:
    """The tokens of ``budget`` (``setting``) what fills a prompt may take: less what its
    ``messages`` take without it (the instructions and the question), so that each call stays
    within the setting (a 1,000-word question went past it by its size, in every batch)."""
    fixed = count_message_tokens(messages, encoding)
    room = budget - fixed
    if room < MIN_ROOM_TOKENS:
        raise UsageError(f"the question and the {what} prompt take {fixed:,} of the {budget:,} tokens of "
                         f"{setting}, leaving no room for {filling}; raise {setting} or ask a shorter question")
    return room


def pack(blocks: Sequence[tuple[str, str]], budget: int, encoding: str = "o200k_base"
         ) -> list[list[tuple[str, str]]]:
    """Consecutive (id, text) blocks grouped into batches of at most ``budget`` tokens each.

    A block larger than the budget on its own is cut to fit, alone in its batch.
    """
    batches: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    used = 0
    for key, text in blocks:
        cost = count_tokens(text, encoding) + 1
        if cost > budget:
            text = truncate(text, max(1, budget - 1), encoding)
            cost = budget
        if current and used + cost > budget:
            batches.append(current)
            current, used = [], 0
        current.append((key, text))
        used += cost
    if current:
        batches.append(current)
    return batches


def shuffled(nodes: Sequence[Node], seed: int) -> list[Node]:
    out = sorted(nodes, key=community_order)
    random.Random(seed).shuffle(out)
    return out


class Point(msgspec.Struct):
    description: str
    score: float
    batch: int


def point_line(p: Point) -> str:
    return f"- (score: {p.score:g}) {_one_line(p.description)}"


def pack_points(points: Sequence[Point], budget: int, encoding: str = "o200k_base"
                ) -> tuple[str, list[Point]]:
    """The reduce context: points scoring above 0, best first, while they fit ``budget``."""
    ranked = sorted((p for p in points if p.score > 0), key=lambda p: (-p.score, p.batch))
    lines: list[str] = []
    used_points: list[Point] = []
    used = 0
    for p in ranked:
        line = point_line(p)
        cost = count_tokens(line, encoding) + 1
        if used + cost > budget:
            continue
        lines.append(line)
        used_points.append(p)
        used += cost
    return "\n".join(lines), used_points


# --------------------------------------------------------------------------------------------
# Model calls
# --------------------------------------------------------------------------------------------
def llm_rater(llm, question: str, *, model: str, batch_tokens: int,
              encoding: str = "o200k_base") -> Rater:
    """A rater asking ``model`` about many reports per call, concurrently per batch."""
    prompt = load_prompt("rate")
    room = room_beside(prompt.render(question=question, reports=""), batch_tokens, encoding, what="rating")

    async def rate(nodes: list[Node]) -> dict[str, float]:
        by_id = {n.id: n for n in nodes}
        batches = pack([(n.id, rate_line(n)) for n in nodes], room, encoding)
        out: dict[str, float] = {}
        errors: list[LLMOutputError] = []

        async def one(batch: list[tuple[str, str]], first: bool = True) -> None:
            ids = [k for k, _ in batch]
            text = "\n".join(t for _, t in batch)
            try:
                result = await llm.chat(
                    prompt.render(question=question, reports=text), model=model, stage="rate",
                    prompt=prompt, max_tokens=RATE_TOKENS_PER_REPORT * len(ids) + 32,
                    # (asked about the rest, "none of these" is an answer too)
                    validate=(lambda t: bool(parse_ratings(t, ids))) if first else None,
                    **({} if first else {"tries": 1}))
            except LLMOutputError as e:
                log.warning("rating failed for %d reports, treated as irrelevant: %s", len(ids), e)
                if first:
                    errors.append(e)
                rate.unrated += len(ids)
                return
            got = parse_ratings(result.text, ids)
            for k, v in got.items():
                if k in by_id:
                    out[k] = min(5.0, max(0.0, v))
            if first and len(got) < len(ids) and set(got) == set(ids[:len(got)]):
                # The first lines only, in order: a model that stopped early is asked once more
                # about the rest (they were rated 0 unsaid, and pruned with their subtrees). One
                # that leaves out the reports it finds irrelevant (many do) rates them 0.
                await one(batch[len(got):], first=False)

        async with anyio.create_task_group() as tg:
            for batch in batches:
                tg.start_soon(one, batch)
        if errors and len(errors) == len(batches):
            # Not one rating could be read: "nothing is relevant" would be a guess, not an answer.
            raise LLMOutputError(
                f"{_none_read(model, len(batches), 'rating', len(nodes))} ({errors[0]}); use a model "
                "that follows the rating prompt (llm.rating_model), or search every report of a level "
                "with --level N")
        return out

    rate.unrated = 0  # reports whose rating could not be read (counted as irrelevant)
    return rate


class MapReduce(msgspec.Struct):
    text: str
    reports: int
    batches: int
    points: int              # all points the map step returned
    kept: int                # points scoring above 0
    reduced: int             # points that fitted the reduce context
    reduce_tokens: int       # tokens of the reduce context
    answered: bool           # False when nothing was relevant (no reduce call)
    cut_off: bool = False    # the answer reached query.answer_max_tokens
    failed_batches: int = 0  # map batches whose answer could not be read (their reports unused)


async def map_reduce(llm, question: str, nodes: Sequence[Node], *, settings, encoding: str,
                     on_delta: Callable[[str], None] | None = None) -> MapReduce:
    """Map ``nodes`` to scored points in batches, then reduce them to the streamed answer."""
    q = settings.query
    model = settings.llm.answer_model
    map_prompt = load_prompt("map")
    blocks = [(n.id, report_block(n)) for n in shuffled(nodes, q.seed)]
    room = room_beside(map_prompt.render(question=question, reports=""), q.map_max_tokens, encoding, what="map")
    batches = pack(blocks, room, encoding)
    points: list[Point] = []
    errors: list[LLMOutputError] = []

    async def one(i: int, batch: list[tuple[str, str]]) -> None:
        text = "\n\n".join(t for _, t in batch)
        try:
            result = await llm.chat(map_prompt.render(question=question, reports=text), model=model,
                                    stage="map", prompt=map_prompt, max_tokens=MAP_MAX_OUTPUT,
                                    validate=usable_map_answer)
        except LLMOutputError as e:
            log.warning("map batch %d of %d gave no usable answer, skipped: %s", i + 1, len(batches), e)
            errors.append(e)
            return
        for p in parse_map_points(result.text):
            points.append(Point(description=p["description"], score=p["score"], batch=i))

    async with anyio.create_task_group() as tg:
        for i, batch in enumerate(batches):
            tg.start_soon(one, i, batch)
    if errors and len(errors) == len(batches):
        # Every report went unread: saying none is relevant would be a guess, not an answer.
        raise LLMOutputError(
            f"{_none_read(model, len(batches), 'over', len(nodes))} ({errors[0]}); use a model that "
            "follows the map prompt (llm.answer_model)")

    context, used = pack_points(points, q.reduce_max_tokens, encoding)
    kept = sum(1 for p in points if p.score > 0)
    if not used:
        text = (f"None of the {len(nodes)} community reports searched holds anything relevant to "
                "this question, so there is no answer to give from this index.")
        if on_delta is not None:
            on_delta(text)
        return MapReduce(text=text, reports=len(nodes), batches=len(batches), points=len(points),
                         kept=kept, reduced=0, reduce_tokens=0, answered=False,
                         failed_batches=len(errors))
    reduce_prompt = load_prompt("reduce")
    result = await llm.chat(
        reduce_prompt.render(question=question, points=context, max_words=max_words(q.answer_max_tokens)),
        model=model, stage="reduce", prompt=reduce_prompt, max_tokens=q.answer_max_tokens,
        on_delta=on_delta, validate=has_text, on_length="keep")  # at its length limit still the answer
    return MapReduce(text=result.text, reports=len(nodes), batches=len(batches), points=len(points),
                     kept=kept, reduced=len(used), reduce_tokens=count_tokens(context, encoding),
                     answered=True, cut_off=result.finish_reason == "length",
                     failed_batches=len(errors))


def _none_read(model: str, answers: int, how: str, reports: int) -> str:
    """The start of the error of a question none of whose ``answers`` (rating, or ``how`` "over",
    ``reports`` community reports) could be read: "its answer ... could not be read" of one."""
    said = f"{how} {counted(reports, 'community report')}"
    if answers == 1:
        return f"{model}: its answer {said} could not be read"
    return f"{model}: none of its {number(answers)} answers {said} could be read"


def max_words(answer_tokens: int) -> int:
    """Words to ask for so the answer fits ``answer_tokens`` (about 4 words per 3 tokens, with
    room for citations)."""
    return max(50, math.floor(answer_tokens * 0.6))
