"""`ask` end to end through the simulator, plus the pure parts of selection and context building.

The index is the harbor corpus with ``max_cluster_size = 4``, which gives a three-level
community tree (C1 -> C6 -> C12/C13 ...), small enough to index in well under a second.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import json
import math
import re
import shutil
import sqlite3
import sys

import anyio
import httpx
import pytest

from conftest import DATA, make_settings
from streamrag import citations, global_search, index_rows, local_search
from streamrag.errors import IndexMissingError, LLMOutputError, LLMRequestError, UsageError
from streamrag.extractive import EXTRACTIVE_LABEL, pick_sentences, quotes
from streamrag.pipeline import sync
from streamrag.citations import parse_citations
from streamrag.ask_command import add_ask_command, cmd_ask
from streamrag.query import DETAILS, OUTCOMES, Answer, aask
from streamrag.question import choose_mode, named_entities
from streamrag.simulator import ANSWERS, detect_task
from streamrag.store import Store
from streamrag.tokens import count_message_tokens, count_tokens

pytestmark = pytest.mark.anyio

INDEX = {"chunk_size": 80, "chunk_overlap": 10, "max_cluster_size": 4}


async def _abuild(path, api_base: str):
    import shutil

    corpus = path / "corpus"
    shutil.copytree(DATA / "harbor", corpus)
    db = path / "index.db"
    await sync([corpus], make_settings(api_base, index=INDEX), db, root=corpus)
    return db


def _build(path, api_base: str):
    return anyio.run(_abuild, path, api_base)


@pytest.fixture(scope="module")
def llm_db(tmp_path_factory, simulator):
    """The harbor corpus indexed through the simulator (three community levels)."""
    return _build(tmp_path_factory.mktemp("llm"), simulator.base_url)


@pytest.fixture(scope="module")
def offline_db(tmp_path_factory):
    """The harbor corpus indexed offline (NLP extraction, extractive reports)."""
    return _build(tmp_path_factory.mktemp("offline"), "")


@pytest.fixture
def qs(simulator):
    """Query settings against the simulator, uncached so every test pays its own calls."""
    return make_settings(simulator.base_url, index=INDEX, llm={"cache": False})


class Recorder(httpx.AsyncBaseTransport):
    """Forwards to the real simulator over loopback and keeps every chat request body."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bodies: list[dict] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        if request.url.path.endswith("/chat/completions"):
            self.bodies.append(json.loads(body))
        return await self.inner.handle_async_request(request)

    def prompts(self, task: str) -> list[str]:
        return ["\n".join(m["content"] for m in b["messages"]) for b in self.bodies
                if detect_task(b["messages"]) == task]

    async def aclose(self) -> None:
        await self.inner.aclose()


def mock(overrides: dict | None = None, seen: list | None = None) -> httpx.MockTransport:
    """A MockTransport answering like the simulator, with some tasks' answers replaced."""
    overrides = overrides or {}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":   # (GET /models, which a run asks first: no listing)
            return httpx.Response(404)
        body = json.loads(request.content)
        task = detect_task(body["messages"])
        if seen is not None:
            seen.append((task, body))
        text = overrides[task](body["messages"]) if task in overrides else ANSWERS[task](body["messages"])
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if body.get("stream"):
            events = [{"choices": [{"index": 0, "delta": {"content": text}}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}]
            sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            return httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "stop",
                                                      "message": {"role": "assistant", "content": text}}],
                                         "usage": usage})

    return httpx.MockTransport(handler)


def tags_in(text: str) -> set[str]:
    return set(re.findall(r"\[[ELRT]:[^\]]+\]", text))


def check_citations(answer: Answer, db) -> None:
    """Every citation resolves to an existing item, and the documents are real paths."""
    assert answer.citations, answer.text
    store = Store(db, readonly=True)
    try:
        for c in answer.citations:
            assert c["resolved"] is True
            table = {"entity": "entities", "relationship": "relationships", "report": "communities",
                     "chunk": "chunks"}[c["kind"]]
            assert store.scalar(f"SELECT count(*) FROM {table} WHERE id = ?", (c["id"],)) == 1
        paths = {r["path"] for r in store.query("SELECT path FROM documents")}
    finally:
        store.close()
    assert answer.documents and set(answer.documents) <= paths


# --------------------------------------------------------------------------------------------
# Global search
# --------------------------------------------------------------------------------------------
def community_levels(db) -> tuple[dict[str, int], set[str]]:
    """The published communities' levels by id, and the ids that are some community's parent."""
    store = Store(db, readonly=True)
    try:
        rows = store.query("SELECT id, level, parent FROM communities")
    finally:
        store.close()
    return {r["id"]: r["level"] for r in rows}, {r["parent"] for r in rows if r["parent"]}


async def test_global_static_end_to_end(llm_db, qs):
    streamed: list[str] = []
    answer = await aask("What damage did the Spring Storm do to the quay?", qs, llm_db,
                        mode="global", level=-1, on_delta=streamed.append)
    levels, parents = community_levels(llm_db)
    deepest = max(levels.values())
    assert deepest == 2                                                   # three levels
    assert answer.search == "global_static" and answer.level == deepest
    # The cut at the deepest level: its communities plus every shallower leaf; each entity
    # covered once.
    leaves_above = [c for c, level in levels.items() if level < deepest and c not in parents]
    assert answer.details["reports"] == sum(1 for level in levels.values() if level == deepest) + len(leaves_above)
    assert "".join(streamed) == answer.text and answer.text.startswith("From the reports")
    assert answer.llm["by_stage"]["map"]["calls"] >= 1 and answer.llm["by_stage"]["reduce"]["calls"] == 1
    assert {c["kind"] for c in answer.citations} == {"report"}
    check_citations(answer, llm_db)
    assert not answer.extractive


async def test_static_level_is_clamped_and_level_zero_reads_the_roots(llm_db, qs):
    deep = await aask("Who designed the Kessel Bridge?", qs, llm_db, mode="global", level=9)
    assert deep.level == 2
    roots = await aask("Who designed the Kessel Bridge?", qs, llm_db, mode="global", level=0)
    levels, _ = community_levels(llm_db)
    assert roots.level == 0 and roots.details["reports"] == sum(1 for level in levels.values() if level == 0)


async def test_dynamic_selection_prunes_irrelevant_subtrees(llm_db, qs):
    recorder = Recorder()
    try:
        answer = await aask("What damage did the Spring Storm do to the eastern wall of the Lantern Hall?",
                            qs, llm_db, mode="global", transport=recorder)
    finally:
        await recorder.aclose()
    assert answer.search == "global_dynamic"
    rated = set()
    for prompt in recorder.prompts("rate"):
        rated |= {t[3:-1] for t in tags_in(prompt.split("<reports>")[1])}
        assert "Findings" not in prompt and "## " not in prompt    # title + summary only
    ratings = answer.details["ratings"]
    assert rated == set(ratings)
    store = Store(llm_db, readonly=True)
    parent = {r["id"]: r["parent"] for r in store.query("SELECT id, parent FROM communities")}
    store.close()
    roots = {c for c, p in parent.items() if p is None}
    pruned_roots = {c for c in roots if ratings[c] < qs.query.dynamic_threshold}
    assert pruned_roots and roots - pruned_roots                 # one branch kept, others pruned
    assert any(parent[c] in pruned_roots for c in parent)        # a pruned root had children
    for c, p in parent.items():
        top = c
        while parent[top] is not None:
            top = parent[top]
        if top in pruned_roots and c != top:
            assert c not in rated, f"{c} under pruned root {top} was rated"
    # Rating is batched: one call per tree level reached, never one per report.
    assert answer.llm["by_stage"]["rate"]["calls"] <= 3 < len(rated)
    # Selected reports are the deepest relevant ones, never a report and its ancestor.
    selected = set(answer.details["selected"])
    assert selected and not pruned_roots & selected
    for c in selected:
        p = parent[c]
        while p is not None:
            assert p not in selected
            p = parent[p]
    assert answer.details["reports"] == len(selected)
    check_citations(answer, llm_db)



async def test_a_dynamic_selection_that_falls_back_says_so(llm_db, simulator):
    """Nothing reached the threshold, so the best-rated reports were used: it was only in --json."""
    strict = make_settings(simulator.base_url, index=INDEX, llm={"cache": False},
                           query={"dynamic_threshold": 5})
    said: list[str] = []
    answer = await aask("What are the main themes?", strict, llm_db, mode="global", on_status=said.append)
    assert answer.details["fallback"] and answer.details["selected"]
    assert any("none reached query.dynamic_threshold (5)" in line for line in said), said

async def test_dynamic_selection_rules():
    def node(i, level, parent):
        return global_search.Node(id=i, level=level, parent=parent, size=1, title=i, summary=i, text=i)

    nodes = {n.id: n for n in [node("A", 0, None), node("B", 0, None), node("A1", 1, "A"),
                                node("A2", 1, "A"), node("B1", 1, "B"), node("A1x", 2, "A1")]}
    for n in nodes.values():
        if n.parent:
            nodes[n.parent].children.append(n.id)
    tree = global_search.Tree(nodes)
    asked: list[list[str]] = []

    def rater(scores):
        async def rate(frontier):
            asked.append([n.id for n in frontier])
            return {n.id: scores.get(n.id, 0) for n in frontier}
        return rate

    sel = await global_search.dynamic_selection(tree, rater({"A": 4, "A1": 3, "A1x": 1}),
                                                threshold=2, max_depth=3)
    # B pruned with B1 unrated; A replaced by A1; A1 kept since its child is irrelevant.
    assert asked == [["A", "B"], ["A1", "A2"], ["A1x"]] and sel.selected == ["A1"]
    assert sel.rated == 5 and sel.pruned == 1
    asked.clear()
    sel = await global_search.dynamic_selection(tree, rater({"A": 4, "B": 3}), threshold=2, max_depth=3)
    assert sel.selected == ["A", "B"]          # no relevant child: the parents stand for themselves
    sel = await global_search.dynamic_selection(tree, rater({"A": 4, "A1": 5}), threshold=2, max_depth=0)
    assert sel.selected == ["A"]               # depth limit: children never rated
    sel = await global_search.dynamic_selection(tree, rater({"A": 1, "B": 1}), threshold=2, max_depth=3)
    assert sel.selected == ["A", "B"] and sel.fallback   # nothing reached the threshold: best roots
    asked.clear()
    sel = await global_search.dynamic_selection(tree, rater({}), threshold=2, max_depth=3)
    assert sel.selected == [] and not sel.fallback
    assert asked == [["A", "B"], ["A1", "A2", "B1"], ["A1x"]]   # every level looked at, then none
    # Every root rated 0: the next level is rated in full and the usual rules apply there.
    sel = await global_search.dynamic_selection(tree, rater({"A2": 3}), threshold=2, max_depth=3)
    assert sel.selected == ["A2"] and not sel.fallback
    sel = await global_search.dynamic_selection(tree, rater({"B1": 1, "A1": 1, "A1x": 4}), threshold=2,
                                                max_depth=3)
    assert sel.selected == ["A1", "B1"] and sel.fallback     # best of the first level that says anything
    sel = await global_search.dynamic_selection(tree, rater({"A2": 3}), threshold=2, max_depth=0)
    assert sel.selected == [] and sel.rated == 2             # the depth limit holds for the descent too


def _tree(*specs):
    nodes = {i: global_search.Node(id=i, level=lv, parent=par, size=1, title=i, summary=i, text=i)
             for i, lv, par in specs}
    for n in nodes.values():
        if n.parent in nodes:   # (a parent left out: a community without a report)
            nodes[n.parent].children.append(n.id)
    return global_search.Tree(nodes)


class RatingModel:
    """A model answering rating prompts from ``answers`` (one function of the asked ids per call)."""

    def __init__(self, *answers) -> None:
        self.answers, self.asked = list(answers), []

    async def chat(self, messages, *, validate=None, **_kw):
        ids = re.findall(r"\[R:([^\]]+)\]", messages[-1]["content"])
        self.asked.append(ids)
        text = self.answers.pop(0)(ids) if self.answers else ""
        if validate is not None and not validate(text):
            raise LLMOutputError("unreadable")
        return argparse.Namespace(text=text)


def test_vectors_of_another_length_are_left_out_of_the_nearest_and_said(tmp_path, caplog):
    # The model under the same name changed its size: cosine was taken over the shorter length,
    # ranking entities by half a vector, with no word of it.
    from streamrag.embeddings import pack

    store = Store(tmp_path / "i.db")
    with store.conn:
        for item, vector in (("a", [1.0, 0.0, 0.0]), ("b", [0.0, 1.0, 0.0]), ("c", [1.0, 0.0]), ("d", [0.9, 0.1])):
            store.conn.execute("INSERT INTO embeddings(kind, item_id, model, content_hash, vector) "
                               "VALUES ('entity', ?, 'e1', '', ?)", (item, pack(vector)))
    try:
        near = local_search.nearest(store, "entity", "e1", [1.0, 0.0, 0.0], 4)
    finally:
        store.close()
    assert [i for i, _ in near] == ["a", "b"]
    assert "2 of the index's entity vectors from e1 have another length than the question's (3)" in caplog.text


def test_nearest_ranks_by_cosine_ties_by_id_and_keeps_to_the_allowed(tmp_path):
    import random

    from streamrag.embeddings import pack

    def unpack(blob: bytes) -> list[float]:   # the float32 values as stored
        a = array.array("f")
        a.frombytes(blob)
        return a.tolist()

    def cosine(a: list[float], b: list[float]) -> float:   # the reference the numpy product matches
        dot = sum(x * y for x, y in zip(a, b, strict=True))
        na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
        return dot / (na * nb) if na and nb else 0.0

    rng = random.Random(5)
    vectors = {f"e{i:03d}": [rng.gauss(0, 1) for _ in range(16)] for i in range(200)}
    vectors["tie-b"] = vectors["tie-a"] = [1.0] * 16   # the same vector: the id decides
    vectors["zero"] = [0.0] * 16                       # no direction: cosine 0, not an error
    store = Store(tmp_path / "i.db")
    with store.conn:
        store.conn.executemany("INSERT INTO embeddings(kind, item_id, model, content_hash, vector) "
                               "VALUES ('chunk', ?, 'm', '', ?)", [(i, pack(v)) for i, v in vectors.items()])
    try:
        for question in ([1.0] * 16, [rng.gauss(0, 1) for _ in range(16)]):
            near = local_search.nearest(store, "chunk", "m", question, 300)
            expected = sorted(((i, cosine(unpack(pack(v)), question)) for i, v in vectors.items()),
                              key=lambda p: (-p[1], p[0]))
            assert [i for i, _ in near] == [i for i, _ in expected]
            assert all(abs(a[1] - b[1]) < 1e-9 for a, b in zip(near, expected, strict=True))
        assert [i for i, _ in local_search.nearest(store, "chunk", "m", [1.0] * 16, 2)] == ["tie-a", "tie-b"]
        allowed = {"e001", "e002", "zero"}
        assert {i for i, _ in local_search.nearest(store, "chunk", "m", [1.0] * 16, 9, allowed)} == allowed
        assert local_search.nearest(store, "chunk", "other", [1.0] * 16, 9) == []
    finally:
        store.close()


def _joined_top(store: Store, k: int) -> dict[str, list[str]]:
    """Each community's ``k`` most connected member names as one sorted join gives them (what
    ``load_tree`` read before ``most_connected``)."""
    out: dict[str, list[str]] = {}
    for community, name in store.conn.execute(
            "SELECT m.community_id, e.name FROM community_members m JOIN entities e ON e.id = m.entity_id "
            "ORDER BY m.community_id, e.degree DESC, e.mentions DESC, e.id"):
        names = out.setdefault(community, [])
        if len(names) < k:
            names.append(name)
    return out


def test_most_connected_ranks_members_as_the_sorted_join_did(tmp_path):
    # Ties of degree broken by mentions, then by id; a member row whose entity is gone left
    # out; a community with fewer members than asked for keeps them all.
    store = Store(tmp_path / "index.db")
    entities = [("ent-b", "B", 5, 2), ("ent-a", "A", 5, 2), ("ent-c", "C", 5, 3), ("ent-d", "D", 9, 1),
                ("ent-e", "E", 0, 7), ("ent-f", "F", 1, 1)]
    members = {"C1": ["ent-a", "ent-b", "ent-c", "ent-d", "ent-e", "ent-gone"], "C2": ["ent-f", "ent-gone"],
               "C3": ["ent-e", "ent-a"], "C4": ["ent-gone"]}
    with store.conn:
        store.conn.executemany("INSERT INTO entities(id, name, type, description, mentions, degree) "
                               "VALUES (?, ?, 'person', '', ?, ?)", [(e, n, m, d) for e, n, d, m in entities])
        store.conn.executemany("INSERT INTO community_members(community_id, entity_id) VALUES (?, ?)",
                               [(c, e) for c, held in members.items() for e in held])
    for k in (1, 3, 6):
        assert global_search.most_connected(store, k) == _joined_top(store, k)
    assert global_search.most_connected(store, 3) == {"C1": ["D", "C", "A"], "C2": ["F"], "C3": ["A", "E"]}


def test_the_tree_of_a_built_index_names_the_members_the_sorted_join_did(offline_db):
    store = Store(offline_db, readonly=True)
    try:
        with store.snapshot():
            tree = global_search.load_tree(store)
            joined = _joined_top(store, global_search.RATE_ENTITIES)
    finally:
        store.close()
    assert len(tree.nodes) > 5 and any(len(n.key_entities) == global_search.RATE_ENTITIES
                                       for n in tree.nodes.values())
    assert {c: n.key_entities for c, n in tree.nodes.items()} == {c: joined.get(c, []) for c in tree.nodes}


@pytest.mark.parametrize("level, reads_members", [(0, False), (None, True)])
async def test_only_a_search_that_rates_reports_reads_their_members(offline_db, monkeypatch, level, reads_members):
    # The key entities are what a rating sees of a report: a static search rates none, and read
    # every member row of the index for nothing (0.3 s of an offline index of 10,000 documents).
    calls = []
    real = global_search.most_connected

    def counted(store, k):
        calls.append(k)
        return real(store, k)

    monkeypatch.setattr(global_search, "most_connected", counted)
    answer = await aask("What happened at the quay?", make_settings(""), offline_db, mode="global", level=level)
    assert answer.search == ("global_static" if level is not None else "global_dynamic")
    assert answer.text and calls == ([global_search.RATE_ENTITIES] if reads_members else [])


@pytest.mark.parametrize("level", [None, 0])
async def test_a_global_search_reads_the_text_of_the_reports_it_quotes_only(offline_db, monkeypatch, level):
    # Every report's text was read with the tree (17.6 MB of an offline index of 10,000
    # documents), for the few a search quotes.
    read: list[str] = []
    real = global_search.read_texts

    def counted(store, nodes):
        read.extend(n.id for n in nodes if n.text is None)
        return real(store, nodes)

    monkeypatch.setattr(global_search, "read_texts", counted)
    answer = await aask("What happened at the quay?", make_settings(""), offline_db, mode="global", level=level)
    store = Store(offline_db, readonly=True)
    try:
        reports = store.scalar("SELECT count(*) FROM communities c JOIN reports r ON r.key = c.report_key")
        tree = global_search.load_tree(store)
    finally:
        store.close()
    quoted = {c.removeprefix("[R:").removesuffix("]") for c in re.findall(r"\[R:[^\]]+\]", answer.text)}
    assert quoted and quoted <= set(read) and len(read) == len(set(read)) < reports
    assert all(n.text is None for n in tree.nodes.values())


async def test_a_local_search_reads_the_text_of_the_chunks_its_context_takes_only(offline_db, monkeypatch):
    # Every chunk of the selected entities was read (3,026 for a question about two hubs of an
    # index of 10,000 documents) for the three its text section took. A section left with room
    # for a short line reads on, to learn whether one is.
    read: list[str] = []
    built: list[local_search.Context] = []
    real, build = index_rows.chunk_texts, local_search.build_local_context
    monkeypatch.setattr(index_rows, "chunk_texts", lambda store, ids: read.extend(ids) or real(store, ids))
    monkeypatch.setattr(local_search, "build_local_context", lambda *a, **k: built.append(build(*a, **k)) or built[-1])
    filled = 0
    for max_tokens in range(300, 700, 50):
        read.clear()
        built.clear()
        settings = make_settings("", query={"local_max_tokens": max_tokens})
        answer = await aask("What happened at the quay?", settings, offline_db, mode="local")
        store = Store(offline_db, readonly=True)
        try:
            entities = answer.details["entities"]
            mentioned = store.scalar("SELECT count(DISTINCT chunk_id) FROM entity_sources WHERE entity_id IN "
                                     f"({','.join('?' * len(entities))})", entities)
        finally:
            store.close()
        [ctx] = built
        taken = {t[3:-1] for t in ctx.tags if t.startswith("[T:")}
        assert taken and taken <= set(read) and len(read) == len(set(read)) <= mentioned
        if ctx.sections["text"] >= ctx.budgets["text"] - 1:   # no room for a line
            assert len(read) < mentioned
            filled += 1
    assert filled


def test_static_selection_covers_a_subtree_whose_parent_has_no_report():
    # A community without a report makes its children roots at level 1: static search at
    # level 0 read neither it nor them, leaving its whole subtree out.
    tree = _tree(("C1", 0, None), ("C3", 1, "C2"), ("C4", 1, "C2"), ("C5", 2, "C3"))   # C2: no report
    assert [n.id for n in global_search.static_selection(tree, 0)] == ["C1", "C3", "C4"]
    assert [n.id for n in global_search.static_selection(tree, 1)] == ["C1", "C3", "C4"]
    assert [n.id for n in global_search.static_selection(tree, 2)] == ["C1", "C4", "C5"]


async def test_reports_a_rating_answer_leaves_out_are_asked_about_again():
    # A model that stopped after two of six lines had the other four rated 0 unsaid: pruned with
    # their subtrees.
    tree = _tree(*[(f"C{i}", 0, None) for i in range(1, 7)])
    model = RatingModel(lambda ids: "C1: 5\nC2: 1", lambda ids: "\n".join(f"{i}: 4" for i in ids))
    rate = global_search.llm_rater(model, "q?", model="m", batch_tokens=8000)
    got = await rate(tree.roots)
    assert model.asked == [["C1", "C2", "C3", "C4", "C5", "C6"], ["C3", "C4", "C5", "C6"]]
    assert got == {"C1": 5, "C2": 1, "C3": 4, "C4": 4, "C5": 4, "C6": 4} and rate.unrated == 0
    # Asked about the rest, "none of these" is an answer: asked once, not three times.
    model = RatingModel(lambda ids: "C1: 5\nC2: 1", lambda ids: "None of these is relevant.")
    rate = global_search.llm_rater(model, "q?", model="m", batch_tokens=8000)
    assert await rate(tree.roots) == {"C1": 5, "C2": 1} and len(model.asked) == 2 and rate.unrated == 0
    # A model that leaves out the reports it finds irrelevant (not the first lines in order) is
    # not asked again: every ask paid three more calls for it.
    model = RatingModel(lambda ids: "C2: 4\nC5: 3")
    rate = global_search.llm_rater(model, "q?", model="m", batch_tokens=8000)
    assert await rate(tree.roots) == {"C2": 4, "C5": 3} and len(model.asked) == 1 and rate.unrated == 0


async def test_unreadable_ratings_of_a_deeper_level_leave_its_relevant_parents():
    # The roots were rated, then the one batch rating C1's children could not be read: the
    # whole question failed, after paying for the root ratings.
    tree = _tree(("C1", 0, None), ("C2", 0, None), ("C3", 1, "C1"), ("C4", 1, "C1"))
    model = RatingModel(lambda ids: "C1: 5\nC2: 0", lambda ids: "no idea", lambda ids: "still none")
    rate = global_search.llm_rater(model, "q?", model="m", batch_tokens=8000)
    sel = await global_search.dynamic_selection(tree, rate, threshold=2, max_depth=3)
    assert sel.selected == ["C1"] and model.asked[1] == ["C3", "C4"]
    # The roots themselves unreadable: an error, as before.
    model = RatingModel(lambda ids: "no idea")
    with pytest.raises(LLMOutputError) as raised:
        await global_search.dynamic_selection(tree, global_search.llm_rater(
            model, "q?", model="m", batch_tokens=8000), threshold=2, max_depth=3)
    # (it said "none of its 1 answers rating 2 community reports")
    assert str(raised.value).startswith("m: its answer rating 2 community reports could not be read ("), raised.value
    assert global_search._none_read("m", 3, "over", 1) == "m: none of its 3 answers over 1 community report could be read"


async def test_map_points_scoring_zero_are_dropped(llm_db, qs):
    def map_answer(messages):
        ids = sorted({t[3:-1] for t in tags_in(messages[-1]["content"].split("<reports>")[1])})
        return json.dumps({"points": [{"description": f"ZERO-POINT [R:{ids[0]}]", "score": 0},
                                      {"description": f"KEPT-POINT [R:{ids[-1]}]", "score": 70}]})

    seen: list = []
    answer = await aask("What happened at the quay?", qs, llm_db, mode="global", level=1,
                        transport=mock({"map": map_answer}, seen))
    reduce_prompts = [b for t, b in seen if t == "reduce"]
    assert len(reduce_prompts) == 1
    text = reduce_prompts[0]["messages"][-1]["content"]
    assert "KEPT-POINT" in text and "ZERO-POINT" not in text
    assert answer.details["points"] == 2 * answer.details["map_batches"]
    assert answer.details["points_kept"] == answer.details["map_batches"]

    seen.clear()
    nothing = await aask("What happened at the quay?", qs, llm_db, mode="global", level=1,
                         transport=mock({"map": lambda m: '{"points": [{"description": "x", "score": 0}]}'},
                                        seen))
    assert [t for t, _ in seen if t == "reduce"] == []
    assert "None of the" in nothing.text and "relevant" in nothing.text
    assert nothing.documents == []             # an answer that found nothing rests on no document


NO_REPORT_RATED = ("No community report was rated relevant to this question, so there is no answer to "
                   "give from them. An exhaustive search may still find something: try `--level N` "
                   "(static global search) or `--mode local`.")


async def test_a_dynamic_search_rating_every_report_zero_answers_without_map_or_reduce(llm_db, qs):
    def all_zero(messages):
        ids = sorted({t[3:-1] for t in tags_in(messages[-1]["content"].split("<reports>")[1])})
        return "\n".join(f"{i}: 0" for i in ids)

    seen: list = []
    streamed: list[str] = []
    answer = await aask("What happened at the quay?", qs, llm_db, mode="global",
                        transport=mock({"rate": all_zero}, seen), on_delta=streamed.append)
    assert answer.search == "global_dynamic"
    assert answer.text == NO_REPORT_RATED and "".join(streamed) == NO_REPORT_RATED
    assert answer.outcome == "redirected"   # (it names the searches that may find something)
    tasks = [t for t, _ in seen]
    assert tasks and set(tasks) == {"rate"}                     # no map, no reduce call
    assert answer.llm["calls"] == len(tasks) and set(answer.llm["by_stage"]) == {"rate"}
    rated = {t for _, b in seen for t in tags_in(b["messages"][-1]["content"].split("<reports>")[1])}
    store = Store(llm_db, readonly=True)
    communities = store.scalar("SELECT count(*) FROM communities")
    store.close()
    # Nothing relevant at any level: every level was looked at, then nothing selected.
    assert answer.details["rated"] == len(rated) == communities
    assert answer.details["selected"] == [] and answer.details["reports"] == 0
    assert not answer.details["fallback"]
    assert answer.documents == [] and answer.citations == []


@pytest.mark.parametrize("missing", ["", "Zorblax Quintrell "], ids=["names it has", "a name it lacks"])
async def test_an_offline_dynamic_search_rating_every_report_zero_redirects_as_a_models_does(offline_db, missing):
    # Offline, no report's line sharing the question's words was "nothing in the community
    # reports searched matches the words of this question", outcome no_answer; with a model, a
    # rating of 0 of every report is NO_REPORT_RATED, redirected. Either rated a line of each
    # report, not the whole: a static search of the same reports answers this question. The same
    # situation now comes to the same outcome, said in the same words.
    settings = make_settings("", index=INDEX)
    question = f"What did the {missing}critics say about freight?"
    answer = await aask(question, settings, offline_db, mode="global")
    assert answer.search == "global_dynamic" and answer.details["reports"] == 0
    said = f"{EXTRACTIVE_LABEL}: n{NO_REPORT_RATED[1:]}"
    assert answer.text == ('Nothing in the index mentions "Zorblax Quintrell".\n\n' + said if missing else said)
    assert answer.outcome == "redirected" and answer.documents == [] and answer.citations == []
    static = await aask(question, settings, offline_db, mode="global", level=0)   # (what it says to try)
    assert static.outcome == "answered" and "so that freight can move from ships to trains" in static.text


async def test_a_map_step_scoring_every_point_zero_answers_without_a_reduce(llm_db, qs):
    seen: list = []
    qs.query.map_max_tokens = 300       # several map batches, every one of them says nothing
    answer = await aask("What happened at the quay?", qs, llm_db, mode="global", level=1,
                        transport=mock({"map": lambda m: json.dumps(
                            {"points": [{"description": "ZERO-A", "score": 0},
                                        {"description": "ZERO-B", "score": 0}]})}, seen))
    tasks = [t for t, _ in seen]
    assert set(tasks) == {"map"} and len(tasks) == answer.details["map_batches"] > 1   # no reduce
    mapped = {t for _, b in seen for t in tags_in(b["messages"][-1]["content"].split("<reports>")[1])}
    assert len(mapped) == answer.details["reports"] > 1
    assert answer.text == (f"None of the {len(mapped)} community reports searched holds anything relevant "
                           "to this question, so there is no answer to give from this index.")
    assert answer.outcome == "no_answer"
    assert answer.details["points"] == 2 * len(tasks)
    assert answer.details["points_kept"] == answer.details["points_reduced"] == 0
    assert answer.details["reduce_context_tokens"] == 0
    assert "reduce" not in answer.llm["by_stage"] and answer.llm["by_stage"]["map"]["calls"] == len(tasks)
    assert answer.documents == [] and answer.citations == []


async def test_unreadable_ratings_or_map_answers_are_an_error_not_an_empty_answer(llm_db, qs):
    """A model whose answers cannot be read has not said that nothing is relevant."""
    from streamrag.errors import LLMOutputError

    refuse = {"rate": lambda m: "I cannot help with that.", "map": lambda m: "I cannot help with that."}
    qs.llm.max_retries = 0
    with pytest.raises(LLMOutputError, match=r": its answer rating \d+ community reports could not be read"):
        await aask("What are the main themes?", qs, llm_db, mode="global", transport=mock(refuse))
    with pytest.raises(LLMOutputError, match=r": its answer over \d+ community reports could not be read"):
        await aask("What are the main themes?", qs, llm_db, mode="global", level=1,
                   transport=mock({"map": refuse["map"]}))
    # Some batches unreadable: the answer comes from the rest, and says how many were lost.
    doomed: list[str] = []

    def first_map_fails(messages):   # one batch's answer, asked again or not, is never readable
        doomed[:] = doomed or [messages[-1]["content"]]
        if messages[-1]["content"] == doomed[0]:
            return "I cannot help with that."
        return ANSWERS["map"](messages)
    qs.query.map_max_tokens = 300   # several batches
    answer = await aask("What happened at the quay?", qs, llm_db, mode="global", level=1,
                        transport=mock({"map": first_map_fails}))
    assert answer.details["map_batches"] > 1 and answer.details["map_batches_failed"] == 1


@pytest.mark.parametrize("mode,level", [("local", None), ("global", 1)])
async def test_an_empty_answer_is_asked_again_and_never_cached(llm_db, simulator, mode, level):
    # A blank answer was shown with exit 0 and cached: the same question got it for good.
    settings = make_settings(simulator.base_url, index=INDEX)
    task = "answer" if mode == "local" else "reduce"
    said = []

    def blank_then_text(messages):
        said.append(1)
        return "  \n" if len(said) == 1 else ANSWERS[task](messages)
    answer = await aask("What happened at the quay?", settings, llm_db, mode=mode, level=level,
                        transport=mock({task: blank_then_text}))
    assert answer.text.strip() and len(said) == 2
    always_blank = mock({task: lambda m: ""})
    with pytest.raises(LLMOutputError, match="gave no usable answer in 3 tries"):
        await aask("Who rebuilt the quay, and when?", settings, llm_db, mode=mode, level=level,
                   transport=always_blank)


@pytest.mark.parametrize("said", ["{}", '{"answer": "The quay was rebuilt."}', "Sure! {",
                                  'Sure! Here:\n```\n{"title": "Unfinished, "findings": [{"summary": \n```'])
async def test_a_map_answer_of_another_shape_is_unreadable_not_nothing_relevant(llm_db, qs, said):
    # Any JSON object passed: {} or prose around broken JSON read as "no point", the answer
    # said no report was relevant (exit 0), and that answer was cached.
    from streamrag.errors import LLMOutputError

    qs.llm.max_retries = 0
    with pytest.raises(LLMOutputError, match=r": its answer over \d+ community reports could not be read"):
        await aask("What happened at the quay?", qs, llm_db, mode="global", level=1,
                   transport=mock({"map": lambda m: said}))


async def test_a_map_answer_of_no_points_is_nothing_relevant(llm_db, qs):
    for said in ('{"points": []}', "[]", '```json\n{"points": []}\n```'):
        answer = await aask("What happened at the quay?", qs, llm_db, mode="global", level=1,
                            transport=mock({"map": lambda m: said}))
        assert answer.details["map_batches_failed"] == 0 and "holds anything relevant" in answer.text


async def test_reduce_respects_its_budget(llm_db, simulator):
    settings = make_settings(simulator.base_url, llm={"cache": False},
                             query={"reduce_max_tokens": 60, "map_max_tokens": 300})
    seen: list = []
    answer = await aask("Who is Mira Osk and what did she design?", settings, llm_db, mode="global",
                        level=-1, transport=mock(seen=seen))
    assert answer.details["map_batches"] > 1                     # 300-token batches
    assert answer.details["points_kept"] > answer.details["points_reduced"] >= 1
    points = [b for t, b in seen if t == "reduce"][0]["messages"][-1]["content"]
    points = points.split("<points>")[1].split("</points>")[0].strip()
    assert count_tokens(points) <= 60
    assert answer.details["reduce_context_tokens"] <= 60


@pytest.mark.parametrize("mode", ["local", "global"])
async def test_an_answer_at_its_length_limit_is_still_given(llm_db, simulator, mode):
    settings = make_settings(simulator.base_url, llm={"cache": False}, query={"answer_max_tokens": 12})
    answer = await aask("Who is Mira Osk and what did she design?", settings, llm_db, mode=mode,
                        level=-1 if mode == "global" else None)
    stage = "reduce" if mode == "global" else "answer"
    assert answer.text and answer.llm["by_stage"][stage]["calls"] == 1     # not asked again


def test_pack_points_orders_by_score_and_fits():
    pts = [global_search.Point(description=f"point {i} " + "word " * 10, score=s, batch=i)
           for i, s in enumerate([10, 0, 90, 50, 0, 70])]
    text, used = global_search.pack_points(pts, 60)
    assert [p.score for p in used] == [90, 70, 50][:len(used)] and used
    assert count_tokens(text) <= 60 and all(p.score > 0 for p in used)


def test_pack_batches_stay_within_budget():
    blocks = [(str(i), "word " * (20 + 7 * i)) for i in range(12)] + [("big", "word " * 500)]
    batches = global_search.pack(blocks, 120)
    assert [k for b in batches for k, _ in b] == [k for k, _ in blocks]
    for b in batches:
        assert sum(count_tokens(t) + 1 for _, t in b) <= 120


# --------------------------------------------------------------------------------------------
# Local and basic search
# --------------------------------------------------------------------------------------------
async def test_local_end_to_end(llm_db, qs):
    streamed: list[str] = []
    answer = await aask("Who hired Mira Osk, and what did she design?", qs, llm_db, mode="local",
                        on_delta=streamed.append)
    assert answer.search == "local" and answer.llm["calls"] == 1
    assert answer.llm["by_stage"]["answer"]["calls"] == 1
    assert "".join(streamed) == answer.text
    assert "pagerank" in answer.details["entity_search"]
    assert len(answer.details["entities"]) > qs.query.local_top_k // 2
    check_citations(answer, llm_db)
    assert "council.txt" in answer.documents


def test_an_ask_runs_with_fewer_collections_and_puts_the_thresholds_back(offline_db, monkeypatch):
    # A local ask reads every edge for PageRank: the collector runs as during a sync, then as before.
    import gc

    from streamrag.query import ask
    seen = []
    real = local_search.widen
    monkeypatch.setattr(local_search, "widen", lambda *a, **k: seen.append(gc.get_threshold()) or real(*a, **k))
    before = gc.get_threshold()
    answer = ask("Who hired Mira Osk?", make_settings(""), offline_db, mode="local")
    assert answer.search == "local" and seen and seen[0][0] >= 50_000 > before[0]
    assert gc.get_threshold() == before


async def test_local_context_respects_proportions_and_budget(llm_db, simulator):
    settings = make_settings(simulator.base_url, llm={"cache": False},
                             query={"local_max_tokens": 500, "local_text_share": 0.4,
                                    "local_community_share": 0.2})
    seen: list = []
    answer = await aask("What did Mira Osk and Anton Heller study at the academy?", settings, llm_db,
                        mode="local", transport=mock(seen=seen))
    used, budgets = answer.details["context_tokens"], answer.details["context_budgets"]
    room = sum(budgets.values())   # (the budget less the prompt and the question)
    assert 300 < room < 500
    assert budgets["text"] == int(room * 0.4) and budgets["reports"] == int(room * 0.2)
    for k in budgets:
        assert 0 < used[k] <= budgets[k], (k, used, budgets)
    context = seen[0][1]["messages"][-1]["content"].split("<context>")[1].split("</context>")[0]
    assert count_tokens(context.strip()) <= room
    assert count_message_tokens(seen[0][1]["messages"]) <= 500
    for line in context.strip().splitlines():    # every evidence line starts with its tag
        assert re.match(r"^\[[ELRT]:[^\]]+\] ", line) or line in (
            "Entities, relationships and claims", "Community reports", "Source text", "")


@pytest.mark.parametrize("mode", ["local", "basic"])
async def test_long_question_counts_in_local_max_tokens(llm_db, simulator, mode):
    """The question's own words are part of the prompt query.local_max_tokens holds: a long
    question leaves less room for the context (it went past the budget by the question's size)."""
    settings = make_settings(simulator.base_url, llm={"cache": False}, query={"local_max_tokens": 1500})
    question = "What did Mira Osk study at the academy by the harbor? " + "Say what she learned there. " * 150
    seen: list = []
    answer = await aask(question, settings, llm_db, mode=mode, transport=mock(seen=seen))
    (messages,) = [body["messages"] for task, body in seen if task == "answer"]
    assert answer.details["context_tokens"] and answer.question in messages[-1]["content"]
    assert 1400 < count_message_tokens(messages) <= 1500


async def test_question_leaving_no_room_for_context_is_refused(llm_db, simulator):
    settings = make_settings(simulator.base_url, llm={"cache": False}, query={"local_max_tokens": 600})
    question = "What did Mira Osk study at the academy by the harbor? " + "Say what she learned there. " * 150
    with pytest.raises(UsageError, match="query.local_max_tokens"):
        await aask(question, settings, llm_db, mode="local", transport=mock())


def test_build_local_context_pure():
    ents = [{"id": f"ent-{i}", "name": f"Name {i}", "type": "person", "description": "desc " * 30}
            for i in range(8)]
    rels = [{"id": f"rel-{i}", "source": f"ent-{i}", "target": f"ent-{i + 1}", "source_name": "A",
             "target_name": "B", "description": "rel " * 20, "weight": 1.0, "combined_degree": i}
            for i in range(7)]
    chunks = [{"id": f"chk-{i}", "text": "text " * 120, "hits": i % 3, "rank": i} for i in range(6)]
    reports = [{"community": f"C{i}", "level": i % 2, "title": "t", "summary": "summary " * 40, "hits": i}
               for i in range(5)]
    data = local_search.LocalData(ents, rels, [], chunks, reports)
    ctx = local_search.build_local_context(data, max_tokens=1000, text_share=0.5, community_share=0.15)
    assert ctx.budgets == {"text": 500, "reports": 150, "tables": 350}
    for k, budget in ctx.budgets.items():
        assert 0 < ctx.sections[k] <= budget
    assert count_tokens(ctx.text) <= 1000
    # Chunks mentioning the most selected entities come first; reports with most hits first.
    text_tags = [t for t in ctx.tags if t.startswith("[T:")]
    # chk-2 and chk-5 both mention two entities: the tie goes to the better-ranked entity (2 < 5).
    assert text_tags[0] == "[T:chk-2]"
    assert [t for t in ctx.tags if t.startswith("[R:")][0] == "[R:C4]"



def test_local_context_puts_claims_after_entities_and_relationships_with_both_ends_first():
    """Relationships with both ends among the selected entities come before those reaching
    outside them, whatever their rank or degree; claims follow their subjects' rank."""
    ents = [{"id": f"ent-{i}", "name": f"Name {i}", "type": "person", "description": f"desc {i}"}
            for i in range(3)]

    def rel(rid, source, target, degree, weight=1.0):
        return {"id": rid, "source": source, "target": target, "source_name": source,
                "target_name": target, "description": f"about {rid}", "weight": weight,
                "combined_degree": degree}

    rels = [rel("rel-a", "ent-2", "ent-x", 100),     # one end outside, highest degree
            rel("rel-b", "ent-0", "ent-y", 1),       # one end outside, best rank
            rel("rel-c", "ent-1", "ent-2", 1),       # both ends selected, worst best rank
            rel("rel-d", "ent-0", "ent-1", 5),       # both ends selected, best rank
            rel("rel-e", "ent-0", "ent-z", 9),       # one end outside, best rank, more degree
            rel("rel-f", "ent-z", "ent-0", 9, 2.0)]  # ... and heavier on the same degree
    claims = [{"id": "clm-1", "subject_id": "ent-1", "type": "fraud", "status": "TRUE",
               "description": "Name 1 forged the ledgers."},
              {"id": "clm-2", "subject_id": "ent-0", "type": "theft", "status": "SUSPECTED",
               "description": "Name 0 took the lamp oil."}]
    data = local_search.LocalData(ents, rels, claims, [], [])
    ctx = local_search.build_local_context(data, max_tokens=2000, text_share=0.25, community_share=0.25)
    assert ctx.tags == ["[E:ent-0]", "[E:ent-1]", "[E:ent-2]",
                        "[E:ent-0]", "[E:ent-1]",                        # the claims
                        "[L:rel-d]", "[L:rel-c]",                        # both ends selected
                        "[L:rel-f]", "[L:rel-e]", "[L:rel-b]", "[L:rel-a]"]
    lines = ctx.text.splitlines()
    assert lines[4:6] == ["[E:ent-0] claim (theft, SUSPECTED): Name 0 took the lamp oil.",
                          "[E:ent-1] claim (fraud, TRUE): Name 1 forged the ledgers."]
    assert lines[6] == "[L:rel-d] ent-0 -- ent-1: about rel-d"


def test_a_local_context_section_takes_a_short_line_after_a_long_one_that_did_not_fit():
    """Sections are packed first-fit: a relationship too long for the room left is skipped (most
    are rejected without being encoded) and a shorter one ranked after it still goes in."""
    ents = [{"id": "ent-a", "name": "A", "type": "person", "description": "first"}]
    rels = [{"id": f"rel-{i}", "source": "ent-a", "target": f"ent-{i}", "source_name": "A",
             "target_name": "B", "description": "word " * n, "weight": 1.0, "combined_degree": 9 - i}
            for i, n in enumerate([10, 400, 60, 3])]
    data = local_search.LocalData(ents, rels, [], [], [])
    ctx = local_search.build_local_context(data, max_tokens=200, text_share=0.25, community_share=0.25)
    assert [t for t in ctx.tags if t.startswith("[L:")] == ["[L:rel-0]", "[L:rel-3]"]
    assert ctx.sections["tables"] <= ctx.budgets["tables"] == 100


def test_a_full_text_section_makes_no_line_of_the_chunks_it_has_no_room_for(monkeypatch):
    # A question about two hubs: 3,026 chunks, each cleaned and split whole (0.27 s) to learn
    # that none of the last 3,023 fit. The section takes what adding every line takes: a short
    # chunk after the long ones it had no room for still goes in.
    cleaned = []
    clean = local_search._clean
    monkeypatch.setattr(local_search, "_clean", lambda text: cleaned.append(text) or clean(text))
    ents = [{"id": "ent-a", "name": "A", "type": "person", "description": "first"}]
    chunks = [{"id": f"chk-{i:02d}", "text": ("word " * 300 if i != 30 else "a short\n chunk"), "hits": 1,
               "rank": 0} for i in range(40)]
    data = local_search.LocalData(ents, [], [], chunks, [])
    short_taken = False
    for max_tokens in range(1800, 2000, 9):
        cleaned.clear()
        ctx = local_search.build_local_context(data, max_tokens=max_tokens, text_share=0.5, community_share=0.1)
        every = local_search._Section("Source text", ctx.budgets["text"], "o200k_base")
        for c in chunks:   # every line made and offered
            every.add(f"[T:{c['id']}]", f"[T:{c['id']}] {clean(c['text'])}", cut=True)
        assert [t for t in ctx.tags if t.startswith("[T:")] == every.tags
        assert ctx.text.endswith(every.render()) and ctx.sections["text"] == every.used
        assert sum(text in (c["text"] for c in chunks) for text in cleaned) <= len(every.tags) + 1
        short_taken |= "[T:chk-30]" in every.tags and "[T:chk-29]" not in every.tags
    assert short_taken


def test_a_section_refuses_a_chunk_for_its_words_as_adding_its_line_does():
    import random

    from streamrag.tokens import fewest_tokens

    rng = random.Random(3)
    pieces = ["word", "two words", " ", "\n", "\t", "\n//", "//", "x/y", "\u3000", "", "[T:a b]"]
    for _ in range(3000):
        section = local_search._Section("Source text", rng.randint(0, 80), "o200k_base")
        section.used = min(section.used + rng.randint(0, 60), section.budget) if section.lines else 0
        tag = rng.choice(["[T:chk-1]", "[T:a b]", ""])
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 50)))
        room = section.budget - section.used - 1
        line = f"{tag} {local_search._clean(text)}"
        assert section.refuses(tag, text) == (not section.lines or room < 32 and fewest_tokens(line) > room)


@pytest.fixture(scope="module")
def nameless_db(tmp_path_factory, simulator):
    """An index built through the simulator from one lower-case document: no entity at all."""
    path = tmp_path_factory.mktemp("nameless")
    corpus = path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the cat sat on the mat and it was warm and quiet there.\n"
                                  "nothing else happened at all that day.\n")
    db = path / "index.db"
    anyio.run(lambda: sync([corpus], make_settings(simulator.base_url, index=INDEX), db, root=corpus))
    return db


@pytest.mark.parametrize("mode, question", [("basic", "Zyxwv qwertyuiop?")])
async def test_an_empty_context_is_answered_without_asking_the_model(nameless_db, qs, mode, question):
    store = Store(nameless_db, readonly=True)
    assert store.scalar("SELECT count(*) FROM entities") == 0
    assert store.scalar("SELECT count(*) FROM chunks") >= 1
    store.close()
    seen: list = []
    streamed: list[str] = []
    answer = await aask(question, qs, nameless_db, mode=mode, transport=mock(seen=seen),
                        on_delta=streamed.append)
    text = "Nothing in the index matches this question, so there is no answer to give."
    assert answer.search == mode and answer.text == text and "".join(streamed) == text
    assert seen == [] and answer.llm["calls"] == 0       # no answer call on an empty context
    assert not answer.extractive and answer.documents == [] and answer.citations == []
    assert sum(answer.details["context_tokens"].values()) == 0


NO_ENTITIES = ("he index has no entities, so local search has none to start from. Try `--mode basic`, "
               "which searches the documents' text.")
NAMES_NOTHING = ("his question names nothing for a {} search to look for; ask about something the documents "
                 "name, or ask it with --mode global for an overview of the collection.")


@pytest.mark.parametrize("mode, question, said", [("local", "Where did the cat sit?", NO_ENTITIES),
                                                  ("local", "What is it?", NAMES_NOTHING.format("local")),
                                                  ("basic", "What is it?", NAMES_NOTHING.format("basic"))])
def test_an_empty_context_is_said_with_a_model_as_offline(cli_run, nameless_db, simulator, mode, question, said):
    """A local search of an index of no entity, and a question of no word to search for, are
    told why and what to ask instead, with a model as without one: with a model both were
    "Nothing in the index matches this question", of an index holding documents."""
    common = ("ask", "--db", str(nameless_db), "--mode", mode, question)
    with_model = cli_run(*common, "--api-base", simulator.base_url)
    offline = cli_run(*common)
    assert with_model.returncode == offline.returncode == 0
    assert with_model.stdout.startswith(f"T{said}\n")
    assert offline.stdout.startswith(f"{EXTRACTIVE_LABEL}: t{said}\n")
    answer = json.loads(cli_run(*common, "--api-base", simulator.base_url, "--json").stdout)
    assert answer["answer"] == f"T{said}" and answer["search"] == mode and not answer["extractive"]
    assert answer["llm"]["calls"] == 0 and answer["documents"] == [] and answer["citations"] == []
    assert set(answer["details"]) == set(DETAILS[mode])   # (the shape of the search's details, kept)


@pytest.mark.parametrize("mode", ["local", "global"])
def test_a_redirect_offline_names_what_the_index_lacks_as_a_models_answer_does(cli_run, nameless_db, simulator,
                                                                               mode):
    # Of an index with no entities (local) or no communities (global), a model's redirect came
    # after the CLI's 'Nothing in the index mentions "Zorblax Quintrell": ...' line, the offline
    # one did not say it at all: only stderr and --json's not_in_index named the name.
    common = ("ask", "--db", str(nameless_db), "--mode", mode, "Where did the cat sit, and did Zorblax Quintrell see it?")
    with_model = cli_run(*common, "--api-base", simulator.base_url)
    offline = cli_run(*common)
    assert with_model.returncode == offline.returncode == 0, offline.stderr
    missing = 'Nothing in the index mentions "Zorblax Quintrell"'
    assert with_model.stdout.startswith(missing), with_model.stdout
    assert offline.stdout.startswith(f"{missing}.\n\n{EXTRACTIVE_LABEL}: the index has no "), offline.stdout
    answer = json.loads(cli_run(*common, "--json").stdout)
    assert answer["outcome"] == "redirected" and answer["answer"].startswith(f"{missing}.\n\n"), answer


@pytest.mark.parametrize("model", [False, True])
async def test_outcome_says_a_redirect_or_no_answer_not_answered(nameless_db, offline_db, llm_db, simulator,
                                                                  model):
    # ``ask --json``'s outcome said "answered" of a question naming only names the index lacks (no
    # search made), of "Nothing in the index matches this question", and of an index without
    # entities or communities ("Try `--mode basic`"): a script took each for an answer. Now the
    # search that decides the answer says which it is; a search followed by another (auto,
    # offline: the basic search after a global one of no communities) has the one it gives.
    settings = make_settings(simulator.base_url if model else "", index=INDEX, llm={"cache": False})
    built = llm_db if model else offline_db   # (a model's calls are recorded in the index it reads)
    asked = [(offline_db, "Who is Mira Brandt?", "auto", "no_answer"),
             (nameless_db, "Zyxwv qwertyuiop?", "basic", "no_answer"),
             (nameless_db, "Where did the cat sit?", "local", "redirected"),
             (nameless_db, "Where did the cat sit?", "global", "redirected"),
             (nameless_db, "Where did the cat sit?", "auto", "redirected" if model else "answered"),
             (nameless_db, "What are the main themes?", "basic", "redirected"),
             (nameless_db, "What is it?", "local", "redirected"),
             (built, "Who rebuilt the quay?", "basic", "answered"),
             (built, "What happened at the quay?", "local", "answered")]
    for db, question, mode, outcome in asked:
        answer = await aask(question, settings, db, mode=mode)
        assert answer.outcome == answer.to_json()["outcome"] == outcome, (question, mode, answer.text)
        assert answer.outcome in OUTCOMES, answer.outcome   # the table ask --json's readers are told of
        if outcome != "answered":
            assert answer.documents == [] and answer.citations == [], (question, mode)


async def test_basic_end_to_end(llm_db, qs):
    answer = await aask("Kessel Bridge designed engineer", qs, llm_db, mode="basic")
    assert answer.search == "basic" and answer.llm["calls"] == 1
    assert {c["kind"] for c in answer.citations} == {"chunk"}
    check_citations(answer, llm_db)


@pytest.mark.parametrize("question", [
    'What about "Mira Osk', "NEAR(Mira Osk) AND OR NOT *", "Mira: Osk^ (Port) {Vell} -x",
    "''' \" \\ ; DROP TABLE entities; --", "???", "",
])
def test_fts_queries_never_break_on_user_input(llm_db, question):
    store = Store(llm_db, readonly=True)
    try:
        assert isinstance(local_search.fts_entities(store, question, 5), list)
        assert isinstance(local_search.fts_chunks(store, question, 5), list)
        if question.strip():
            assert choose_mode(store, question)[0] in ("global", "local")
    finally:
        store.close()


# --------------------------------------------------------------------------------------------
# Routing, citations, the empty index, snapshots, accounting
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("question, mode", [
    ("What are the main themes across these documents?", "global"),
    ("Summarize the overall trends", "global"),
    ("Who is Mira Osk?", "local"),
    ("What did Anton Heller say about the Old Quay?", "local"),
    ("How is the weather on Jupiter?", "global"),
    ("What does the resume of Mira Osk say?", "local"),   # the French cue "résumé" made it global
    ("Summarize Mira Osk", "local"),   # (a summary of what it names: a tie of one name and one cue went global)
    ("Give an overview of Anton Heller", "local"),
    ("Quais são os temas principais dos documentos?", "global"),
    ("Quali sono i temi principali?", "global"),
    ("Каковы основные темы?", "global"),
    ("ما هي المواضيع الرئيسية؟", "global"),
    # ... but a question about one thing in words near those cues stays local
    ("Qual é o assunto da visão geral de Mira Osk?", "local"),
    ("Qual è l'argomento principale della lettera di Mira Osk?", "local"),
    ("Какая главная задача у Mira Osk?", "local"),
    ("أين المقر الرئيسي الذي تعمل فيه Mira Osk؟", "local"),
    ("ما موضوع رسالة Mira Osk؟", "local"),
])
def test_auto_routing(llm_db, question, mode):
    store = Store(llm_db, readonly=True)
    try:
        chosen, reason = choose_mode(store, question)
    finally:
        store.close()
    assert chosen == mode and reason


def test_a_name_weighs_once_against_a_cue_however_many_entities_its_parts_are(offline_db):
    # The offline index has "Kessel" and "Kessel Bridge", but no entity of "Lantern Hall"'s
    # parts: the first question went local (two names against one cue), the second global.
    store = Store(offline_db, readonly=True)
    try:
        assert {n for _, n, _ in named_entities(store, "the Kessel Bridge")} == {"Kessel", "Kessel Bridge"}
        chosen = {q: choose_mode(store, q) for q in ("What are the main themes of the Kessel Bridge?",
                                                     "What are the main themes of the Lantern Hall?",
                                                     "What are the main themes of Kessel?")}
        # Two names against one cue still go local; and a name alone, or its words in another order.
        local = [choose_mode(store, q) for q in ("What themes link Mira Osk and Anton Heller?",
                                                 "What did Kessel Bridge do?", "What did Bridge Kessel do?")]
    finally:
        store.close()
    assert {mode for mode, _ in chosen.values()} == {"global"}, chosen   # a tie goes global
    assert chosen["What are the main themes of the Kessel Bridge?"][1] == (
        "the question asks about the collection (themes), and the names it has (Kessel Bridge) do not "
        "outweigh that")
    assert [mode for mode, _ in local] == ["local"] * 3, local
    assert local[1] == local[2] == ("local", "the question names Kessel Bridge")


def test_a_name_is_compared_with_a_longer_one_by_the_words_that_name_it(tmp_path):
    # A Christmas Carol through the simulator has "Up Scrooge" and "Scrooge Scrooge" beside
    # "Scrooge": "Who is Scrooge?" named all three ("up" is a stopword), and "Scrooge" was left
    # out as held in "Up Scrooge": not an anchor of local search, and auto mode said "the
    # question names Up Scrooge". "Up Scrooge" was no part of "Ebenezer Scrooge" either, so the
    # themes of Ebenezer Scrooge's story weighed two names against one cue (local), Scrooge's one.
    names = {"e-es": "Ebenezer Scrooge", "e-s": "Scrooge", "e-up": "Up Scrooge", "e-ss": "Scrooge Scrooge"}
    store = entity_store(tmp_path / "i.db", names, "person")
    try:
        named = {q: named_entities(store, q) for q in ("Who is Scrooge?", "Who is Ebenezer Scrooge?",
                                                       "What did Up Scrooge do?")}
        chosen = [choose_mode(store, q) for q in ("Who is Scrooge?", "What are the themes of Scrooge's story?",
                                                  "What are the themes of Ebenezer Scrooge's story?")]
    finally:
        store.close()
    anchored = {q: sorted(e for e, _ in local_search.anchors(q, [(e, n) for e, n, _c in found]))
                for q, found in named.items()}
    assert "e-s" in anchored["Who is Scrooge?"] and anchored["Who is Ebenezer Scrooge?"] == ["e-es"], anchored
    # ... and of names the same words name, the shorter is inside the longer where the question
    # writes the longer: compared by those words alone, "Scrooge" and "Up Scrooge" were equal,
    # and neither was left out of "What did Up Scrooge do?" ("Bram" of "Who is Bram Tell?").
    assert anchored["What did Up Scrooge do?"] == ["e-up"], anchored
    bram = [("e-b", "Bram"), ("e-bt", "Bram Tell")]
    assert local_search.anchors("Who is Bram Tell?", bram) == [("e-bt", "Bram Tell")]
    assert local_search.anchors("Is Bram the son of Bram Tell?", bram) == bram   # (written apart)
    assert local_search.anchors("Who is Bram?", bram)[0] == ("e-b", "Bram")
    assert chosen == [("local", "the question names Scrooge"),
                      ("global", "the question asks about the collection (themes), and the names it has "
                                 "(Scrooge) do not outweigh that"),
                      ("global", "the question asks about the collection (themes), and the names it has "
                                 "(Ebenezer Scrooge) do not outweigh that")], chosen


def test_a_name_repeating_a_word_is_named_only_where_the_question_writes_it_whole(tmp_path):
    # A Christmas Carol through the simulator had "Scrooge Scrooge" beside "Scrooge": "Who is
    # Scrooge?" named and anchored both, and local search put the slip's sources first with his.
    store = entity_store(tmp_path / "i.db", {"e-s": "Scrooge", "e-ss": "Scrooge Scrooge",
                                             "e-h": "Humbert", "e-hh": "Humbert Humbert"})
    try:
        named = {q: [(e, n) for e, n, _c in named_entities(store, q)] for q in (
            "Who is Scrooge?", "Was Fred fond of Scrooge, as Scrooge was of him?",
            "Who is Humbert Humbert?", "Did Humbert Humbert write to Humbert?")}
    finally:
        store.close()
    anchored = {q: sorted(e for e, _ in local_search.anchors(q, found)) for q, found in named.items()}
    assert anchored == {"Who is Scrooge?": ["e-s"],
                        "Was Fred fond of Scrooge, as Scrooge was of him?": ["e-s"],
                        "Who is Humbert Humbert?": ["e-hh"],   # ("Humbert" inside it, counted)
                        "Did Humbert Humbert write to Humbert?": ["e-h", "e-hh"]}, anchored
    assert not local_search.is_named(["who", "is", "scrooge"], "Scrooge Scrooge")
    assert local_search.is_named(["who", "is", "scrooge", "scrooge"], "Scrooge Scrooge")


def entity_store(path, names: dict[str, str], kind: str = "event", texts: tuple[str, ...] = ()) -> Store:
    """A store at ``path`` holding only the entities ``names`` (id -> name) of type ``kind``,
    their names searchable, and chunks of ``texts`` (``chk-0`` ...), searchable."""
    store = Store(path)
    with store.conn:
        for eid, name in names.items():
            store.conn.execute("INSERT INTO entities(id, name, type, description, mentions) "
                               "VALUES (?, ?, ?, '', 1)", (eid, name, kind))
        store.conn.execute("INSERT INTO entities_fts(id, name, description) "
                           "SELECT id, fts_text(name), fts_text(description) FROM entities")
        for i, text in enumerate(texts):
            store.conn.execute("INSERT INTO chunks(id, text, tokens) VALUES (?, ?, 10)", (f"chk-{i}", text))
            store.conn.execute("INSERT INTO chunks_fts(id, text) VALUES (?, ?)", (f"chk-{i}", text))
    return store


def unknown_names_of(path, names: dict[str, str], texts: tuple[str, ...],
                     questions: tuple[str, ...]) -> dict[str, list[str]]:
    """What unknown_names says of each of ``questions``, asked of an entity_store at ``path``
    holding the persons ``names`` and chunks of ``texts``."""
    from streamrag.question import unknown_names

    store = entity_store(path, names, kind="person", texts=texts)
    try:
        return {q: unknown_names(store, q) for q in questions}
    finally:
        store.close()


def test_auto_mode_counts_a_name_written_apart_from_a_longer_one_that_holds_it(tmp_path):
    # Offline synth_small has "Pellric" and "2032 Pellric Flood": auto mode counted only the
    # longest name, so two names written against one cue were one, and the question went global.
    store = entity_store(tmp_path / "i.db", {"e-p": "Pellric", "e-f": "2032 Pellric Flood"})
    try:
        both = choose_mode(store, "What are the key themes around Pellric and the 2032 Pellric Flood?")
        one = choose_mode(store, "What are the key themes of the 2032 Pellric Flood?")
    finally:
        store.close()
    assert both == ("local", "the question names 2032 Pellric Flood, Pellric") or \
        both == ("local", "the question names Pellric, 2032 Pellric Flood"), both
    assert one == ("global", "the question asks about the collection (themes), and the names it has "
                             "(2032 Pellric Flood) do not outweigh that")   # ("Pellric" only inside it)


def test_a_tie_of_summary_cues_and_a_name_asks_for_a_summary_of_that_thing(tmp_path):
    # Since a name weighs once, one name against one cue is a tie, and ties went global:
    # "Summarize Rosalind Joroux" read the collection's reports, not her neighbourhood. A cue of
    # themes or trends still weighs against a name, and two cues outweigh one name.
    store = entity_store(tmp_path / "i.db", {"e-r": "Rosalind Joroux", "e-j": "Joroux", "e-k": "Kessel",
                                             "e-b": "Kessel Bridge"})
    try:
        chosen = {q: choose_mode(store, q) for q in (
            "Summarize Rosalind Joroux", "Give an overview of the Kessel Bridge", "Zusammenfassung Joroux",
            "What are the main themes of the Kessel Bridge?", "Summarize the main themes of Rosalind Joroux",
            "Summarize the overall trends", "What are the main themes?", "Summarize Zorblax")}
    finally:
        store.close()
    assert chosen.pop("Summarize Rosalind Joroux") == (
        "local", "the question asks for a summary (summarize) of what it names: Rosalind Joroux")
    assert chosen.pop("Give an overview of the Kessel Bridge") == (
        "local", "the question asks for a summary (overview) of what it names: Kessel Bridge")
    assert chosen.pop("Zusammenfassung Joroux")[0] == "local"
    assert {q: mode for q, (mode, _) in chosen.items()} == dict.fromkeys(chosen, "global"), chosen


def test_the_reason_names_the_longest_name_the_question_writes(tmp_path):
    # "tell" is a stopword, so "Bram Tell" and "Bram" are named by the same word, "bram": the
    # reason named the one found first, "Bram", for "Who is Bram Tell?", whichever the index
    # ranked first.
    for order in (("Bram", "Bram Tell"), ("Bram Tell", "Bram")):
        store = entity_store(tmp_path / f"{order[0]}.db", {f"e-{i}": name for i, name in enumerate(order)}, "person")
        try:
            chosen = [choose_mode(store, q) for q in ("Who is Bram Tell?", "Who is Bram?", "What did Tell Bram do?",
                                                      "What are the themes of Bram Tell's story?")]
        finally:
            store.close()
        assert chosen == [("local", "the question names Bram Tell"), ("local", "the question names Bram"),
                          ("local", "the question names Bram"),
                          ("global", "the question asks about the collection (themes), and the names it "
                                     "has (Bram Tell) do not outweigh that")], (order, chosen)


async def test_auto_mode_says_what_it_chose(llm_db, qs):
    answer = await aask("Who is Mira Osk?", qs, llm_db)
    assert answer.requested_mode == "auto" and answer.auto_choice == "local" == answer.mode
    assert "Mira Osk" in answer.auto_reason
    answer = await aask("What are the main themes?", qs, llm_db)
    assert answer.auto_choice == "global" and answer.search == "global_dynamic"


def test_parse_citations_formats():
    text = "A [R:C1] b [R:C2, C3] c [E:ent-1; E:ent-2] d [T:chk-9][L: rel-4] e [R:C1]"
    assert parse_citations(text) == [("R", "C1"), ("R", "C2"), ("R", "C3"), ("E", "ent-1"),
                                      ("E", "ent-2"), ("T", "chk-9"), ("L", "rel-4")]


def test_a_citation_wrapped_across_a_line_end_is_parsed():
    # A model wrapping its lines broke a citation after a separator or the kind's colon: its
    # ids were neither counted nor checked, and a made-up one stayed in the text.
    text = "A [R:C1,\n  C2] b [E:ent-1;\nL:rel-4] c [T:\n chk-9] d [R: C3 ,\r\n C4 ]"
    assert parse_citations(text) == [("R", "C1"), ("R", "C2"), ("E", "ent-1"), ("L", "rel-4"),
                                     ("T", "chk-9"), ("R", "C3"), ("R", "C4")]
    assert citations.drop_citations("Fred came [R:C1,\n C9]. More", {("R", "C9")}) == "Fred came [R:C1]. More"
    assert citations.drop_citations("Fred came [E:x,\n y].", {("E", "x"), ("E", "y")}) == "Fred came."
    assert citations.without_open_citation("Fred came [R:C1,\n C2") == "Fred came"
    # Not across a blank line, nor where a line ends inside the ids: that is prose.
    for prose in ("a [R:C1,\n\nC2] b", "a [E:x\nand y] b", "a [E:\n\nx] b"):
        assert parse_citations(prose) == [], prose
        assert citations.without_open_citation(prose[:-3]) == prose[:-3]


def test_a_streamed_citation_wrapped_across_a_line_end_is_checked_as_the_whole_text():
    text = "Fred [R:C1,\n C7] and Bob [E:e9;\n R:C1] stay [E:e1, e9].\nNext [T:\n t1]."
    whole = citations.Given(["[E:e1]", "[R:C1]", "[T:t1]"]).checked(text)
    assert whole == "Fred [R:C1] and Bob [R:C1] stay [E:e1].\nNext [T:\n t1]."   # (kept as written)
    for size in (1, 2, 3, 5, 8, len(text)):
        out: list[str] = []
        stream = citations.GivenOnly(["[E:e1]", "[R:C1]", "[T:t1]"], out.append)
        for i in range(0, len(text), size):
            stream.feed(text[i:i + size])
        stream.flush()
        assert "".join(out) == whole, size


def shown(messages: list[dict], kind: str) -> str:
    """The id of the first ``kind`` item in the context a model was given."""
    return re.search(rf"\[{kind}:([^\]]+)\]", messages[-1]["content"]).group(1)


async def test_unresolvable_citations_are_dropped(llm_db, qs):
    def fake(m):
        ent = shown(m, "E")
        return f"Mira Osk designed it [E:{ent}] [R:C999]. Also [E:ent-0000000000000000, {ent}] and [T:chk-nope]."

    answer = await aask("Who is Mira Osk?", qs, llm_db, mode="local", transport=mock({"answer": fake}))
    ent = answer.citations[0]["id"]
    assert [c["tag"] for c in answer.citations] == [f"[E:{ent}]"]
    assert set(answer.unresolved) == {"[R:C999]", "[E:ent-0000000000000000]", "[T:chk-nope]"}
    assert "C999" not in answer.text and "chk-nope" not in answer.text and f"[E:{ent}]" in answer.text
    assert answer.documents


async def test_a_citation_of_an_item_the_answer_was_not_given_is_dropped(llm_db, qs):
    # A model's made-up citation, or one a document told it to write, that names a real item
    # of the index it was never shown counted as a source, and listed that item's documents.
    store = Store(llm_db, readonly=True)
    far = store.query("SELECT e.id, e.name FROM entities e WHERE e.name NOT LIKE '%Mira%' "
                      "AND e.name NOT LIKE '%Osk%' ORDER BY e.id")
    store.close()
    given: list[str] = []

    def fake(m):
        context = m[-1]["content"]
        given.append(context)
        outside = next(e["id"] for e in far if e["id"] not in context)
        return f"Mira Osk designed it [E:{shown(m, 'E')}], see also [E:{outside}]."

    streamed: list[str] = []
    answer = await aask("Who is Mira Osk?", qs, llm_db, mode="local", transport=mock({"answer": fake}),
                        on_delta=streamed.append)
    assert "".join(streamed) == answer.text   # the terminal did show it
    assert len(answer.citations) == 1 and answer.citations[0]["id"] in given[0]
    assert len(answer.unresolved) == 1 and answer.unresolved[0][3:-1] not in given[0]
    assert answer.text == f"Mira Osk designed it {answer.citations[0]['tag']}, see also."
    store = Store(llm_db, readonly=True)
    try:
        assert answer.documents == citations.resolve(store, "E", answer.citations[0]["id"])["documents"]
    finally:
        store.close()


async def test_a_given_item_cited_in_another_form_counts(llm_db, qs):
    # [R:8] for C8, [E:ENT-..] in capitals, [E:ent-...] with a full stop caught in it: dropped
    # as naming nothing the answer was given.
    def fake(m):
        ent, comm = shown(m, "E"), shown(m, "R")
        return f"Mira Osk [E:{ent.upper()}] led it [R:{comm[1:].lower() if comm[0] == 'C' else comm}]; see [E:{ent}.]"

    streamed: list[str] = []
    answer = await aask("Who is Mira Osk?", qs, llm_db, mode="local", transport=mock({"answer": fake}),
                        on_delta=streamed.append)
    assert answer.unresolved == [] and [c["kind"] for c in answer.citations] == ["entity", "report"]
    assert "".join(streamed) == answer.text and answer.documents
    # ... and is written as the context wrote it: a client matches the text's tags to citations.
    assert tags_in(answer.text) == {c["tag"] for c in answer.citations}


@pytest.mark.parametrize("seed", range(6))
def test_a_streamed_answer_is_the_checked_text_whatever_its_pieces(seed):
    # Random answers of words, spaces, punctuation, line ends, given, made-up, variant and
    # broken citations, cut anywhere: the stream shows exactly what the answer's text will be.
    # (An open bracket across a line end or another bracket made the two differ: a restarted
    # answer vanished into one "citation".)
    import random

    rng = random.Random(seed)
    atoms = ["Alpha", "beta", " ", "  ", ".", ",", "\n", "- ", "[E:e1]", "[E:E1]", "[E:e1.]", "[E:e9]",
             "[R:C1]", "[R:1]", "[R:C7]", "[E:e1, e9]", "[R:C1; E:e9]", "[T:t1]", "[", "[E:", "[E:e", "]",
             "[L:", "(x)", "[1]", "\t"]
    given = citations.Given(["[E:e1]", "[R:C1]", "[T:t1]"])
    for _ in range(400):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 40)))
        out: list[str] = []
        stream = citations.GivenOnly(["[E:e1]", "[R:C1]", "[T:t1]"], out.append)
        i = 0
        while i < len(text):
            n = rng.randint(1, 9)
            stream.feed(text[i:i + n])
            i += n
        stream.flush()
        assert "".join(out) == given.checked(text), repr(text)


def test_a_restarted_streamed_answer_is_checked_afresh():
    restarted = "\n\n(starts over:)\n\n"
    out: list[str] = []
    stream = citations.GivenOnly(["[R:C8]"], out.append, restarted)
    for piece in ["Alpha is big [R:C", restarted + "Alpha is large [R:", "8] and [E:x] more."]:
        stream.feed(piece)
    stream.flush()
    assert "".join(out) == "Alpha is big [R:C" + restarted + "Alpha is large [R:C8] and more."


def test_a_streamed_answer_loses_what_it_was_not_given_as_its_whole_text_does():
    text = "Mira Osk [E:e1] met Bo [E:e9]. Also [R:C1; R:C7] and [T:t1], [T:t2].\n- item [L:l1]\n"
    given = ["[E:e1]", "[R:C1]", "[T:t1]"]
    whole = citations.drop_citations(text, {("E", "e9"), ("R", "C7"), ("T", "t2"), ("L", "l1")})
    for size in (1, 2, 3, 5, 7, 11, len(text)):
        out: list[str] = []
        stream = citations.GivenOnly(given, out.append)
        for i in range(0, len(text), size):
            stream.feed(text[i:i + size])
        stream.flush()
        assert "".join(out) == whole, size
    assert whole == "Mira Osk [E:e1] met Bo. Also [R:C1] and [T:t1],.\n- item\n"


async def test_dropping_citations_keeps_the_rest_of_the_answer_as_written(llm_db, qs):
    def fake(m):
        ent, rel, comm = shown(m, "E"), shown(m, "L"), shown(m, "R")
        return (f"Mira Osk designed it [E:bogus, L:{rel}]. Also [R:C999; R:{comm}] and [E:{ent}; T:chk-nope].\n"
                "\n"
                "- top item [R:C999]\n"
                "    - nested item [T:chk-nope], still nested\n"
                "\n"
                "```\n"
                "x  =  1 ;   y  =  2\n"
                "```\n"
                "Ratio is 3 : 1 , as written [E:bogus] [T:chk-nope].")

    answer = await aask("Who is Mira Osk?", qs, llm_db, mode="local", transport=mock({"answer": fake}))
    assert set(answer.unresolved) == {"[E:bogus]", "[R:C999]", "[T:chk-nope]"}
    tag = {c["kind"]: c["id"] for c in answer.citations}
    ent, rel, comm = tag["entity"], tag["relationship"], tag["report"]
    assert answer.text == (f"Mira Osk designed it [L:{rel}]. Also [R:{comm}] and [E:{ent}].\n"
                           "\n"
                           "- top item\n"
                           "    - nested item, still nested\n"
                           "\n"
                           "```\n"
                           "x  =  1 ;   y  =  2\n"
                           "```\n"
                           "Ratio is 3 : 1 , as written.")
    assert {c["tag"] for c in answer.citations} == {f"[L:{rel}]", f"[R:{comm}]", f"[E:{ent}]"}


async def test_empty_or_missing_index_says_how_to_build_one(tmp_path, qs):
    with pytest.raises(IndexMissingError, match="streamrag index"):
        await aask("Anything?", qs, tmp_path / "missing.db")
    Store(tmp_path / "empty.db").close()          # schema, nothing published
    with pytest.raises(IndexMissingError, match="empty.*streamrag index"):
        await aask("Anything?", qs, tmp_path / "empty.db")


async def test_a_query_sees_one_snapshot_while_the_index_changes(tmp_path, simulator, qs):
    db = await _abuild(tmp_path, simulator.base_url)
    store = Store(db, readonly=True)
    started_with = store.version
    store.close()

    def publish_meanwhile(messages):
        conn = sqlite3.connect(db, timeout=30)
        with conn:   # another writer publishes a new version while the query runs
            conn.execute("DELETE FROM communities")
            conn.execute("DELETE FROM entities")
            conn.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
        conn.close()
        return ANSWERS["map"](messages)

    answer = await aask("What happened to Mira Osk and the Lantern Hall?", qs, db, mode="global",
                        level=1, transport=mock({"map": publish_meanwhile}))
    assert answer.citations and all(c["resolved"] for c in answer.citations)
    assert not answer.unresolved                   # resolved against the version it started with
    # and it says which that was, so a script can tell (99 was published while it ran)
    assert answer.version == started_with != 99 and answer.to_json()["version"] == started_with


async def test_query_calls_are_recorded_like_indexing_calls(tmp_path, simulator, qs):
    from streamrag.status import gather_status

    db = await _abuild(tmp_path, simulator.base_url)
    before = Store(db, readonly=True)
    n = before.scalar("SELECT count(*) FROM llm_calls")
    before.close()
    answer = await aask("What did the Harbor Council decide?", qs, db, mode="global")
    store = Store(db, readonly=True)
    try:
        rows = store.query("SELECT l.stage, l.run_id, r.command FROM llm_calls l JOIN runs r ON r.id = l.run_id "
                           "WHERE l.id > ?", (n,))
        assert {r["stage"] for r in rows} == {"rate", "map", "reduce"}
        assert {r["command"] for r in rows} == {"ask"} and len(rows) == answer.llm["calls"]
        stages = set(gather_status(store)["llm"]["by_stage"])
        assert {"rate", "map", "reduce"} <= stages
    finally:
        store.close()


# --------------------------------------------------------------------------------------------
# Without an LLM: extractive answers
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, level", [("global", None), ("global", 0), ("local", None),
                                         ("basic", None), ("auto", None)])
async def test_extractive_answers_offline(offline_db, mode, level):
    settings = make_settings("", index=INDEX)
    streamed: list[str] = []
    answer = await aask("Who hired the engineer Mira Osk?", settings, offline_db, mode=mode, level=level,
                        on_delta=streamed.append)
    assert answer.extractive and answer.text.startswith(EXTRACTIVE_LABEL)
    assert "".join(streamed) == answer.text
    assert answer.llm["calls"] == 0
    assert "Mira Osk" in answer.text
    check_citations(answer, offline_db)
    store = Store(offline_db, readonly=True)
    assert store.scalar("SELECT count(*) FROM llm_calls") == 0
    store.close()


@pytest.mark.parametrize("db, mode", [("offline_db", "auto"), ("offline_db", "local"),
                                      ("offline_db", "global"), ("llm_db", "local")])
async def test_the_names_a_question_asks_about_are_worked_out_once_per_ask(offline_db, llm_db, qs, monkeypatch,
                                                                          db, mode):
    """Routing, the search (local's seeds and context, global's communities opened) and the
    documents put first each worked out the question's anchors again: one answer, one reading."""
    real, calls = local_search.anchors, []
    monkeypatch.setattr(local_search, "anchors", lambda *args: calls.append(args) or real(*args))
    settings = qs if db == "llm_db" else make_settings("", index=INDEX)
    answer = await aask("Who hired the engineer Mira Osk?", settings, llm_db if db == "llm_db" else offline_db,
                        mode=mode)
    assert answer.mode == ("local" if mode == "auto" else mode) and answer.documents
    assert len(calls) == 1, calls


@pytest.mark.parametrize("mode", ["local", "basic"])
async def test_an_extractive_answer_that_finds_nothing_lists_no_documents(offline_db, mode):
    answer = await aask("Zyxwv qwertyuiop?", make_settings("", index=INDEX), offline_db, mode=mode)
    assert "nothing in the" in answer.text and answer.documents == [] and answer.citations == []


BACKGROUND = ("Having spent several rainy weekends sorting regional newspaper clippings, committee "
              "minutes, harbour authority bulletins, festival programmes, marathon results, conference "
              "brochures, railway timetables, parish registers, auction catalogues, weather diaries, "
              "shipping manifests, school yearbooks, theatre posters and assorted private letters for "
              "our village history society lecture next spring, one question keeps nagging me.")


def test_a_long_question_keeps_its_names_and_last_words_among_its_terms():
    terms = local_search.query_terms(BACKGROUND + " Who hired the engineer Mira Osk?")
    assert len(terms) == local_search.MAX_TERMS
    assert {"mira", "osk", "engineer", "hired", "nagging"} <= set(terms)   # names, then the last words
    assert "rainy" not in terms and terms.index("nagging") < terms.index("mira")   # in their order


@pytest.mark.parametrize("mode", ["auto", "local", "basic"])
async def test_a_name_after_a_long_background_is_still_searched_for(offline_db, mode):
    # A 40-word background before "Who is Dmitri Quinquay?" pushed the name past the 32 terms
    # kept: auto went global ("matches no entity"), local and basic found other people.
    answer = await aask(BACKGROUND + " Who hired the engineer Mira Osk?", make_settings("", index=INDEX),
                        offline_db, mode=mode)
    assert answer.mode == ("local" if mode == "auto" else mode)
    assert "Mira Osk" in answer.text, answer.text


async def test_an_offline_dynamic_selection_that_falls_back_says_so(offline_db):
    # The README says stderr tells when no report reached the threshold; offline it said nothing.
    said: list[str] = []
    answer = await aask("What did the harbor council decide?", make_settings("", index=INDEX,
                        query={"dynamic_threshold": 5}), offline_db, mode="global", on_status=said.append)
    assert answer.details["fallback"] and answer.details["selected"]
    assert any("reached query.dynamic_threshold (5), so the best-rated" in line for line in said), said


async def test_a_question_naming_someone_no_document_mentions_says_so(offline_db, simulator):
    # "Where was Zorblax Quintrell born?" (his only file deleted) got other people's
    # birthplaces, quoted as the answer.
    offline = make_settings("", index=INDEX)
    answer = await aask("Where was Zorblax Quintrell born, and did Mira Osk meet him?", offline, offline_db)
    assert answer.not_in_index == ["Zorblax Quintrell"] and answer.to_json()["not_in_index"] == answer.not_in_index
    # "I" and a second sentence's first word are no Title Case (it was switched off by them).
    answer = await aask("What should I know about Zorblax Quintrell? Who met him?", offline, offline_db)
    assert answer.not_in_index == ["Zorblax Quintrell"]
    assert answer.text.startswith('Nothing in the index mentions "Zorblax Quintrell": the sentences below '
                                  "match the rest of the question only.\n\n")
    # A name of short words is a name too.
    answer = await aask("Did Mira Osk meet Bo Tan or Li Wu?", offline, offline_db)
    assert answer.not_in_index == ["Bo Tan", "Li Wu"]
    # A question that is the name alone: its first word was taken for a sentence's.
    answer = await aask("Zorblax Quintrell?", offline, offline_db)
    assert answer.not_in_index == ["Zorblax Quintrell"]
    assert (await aask("Mira Osk?", offline, offline_db)).not_in_index == []
    # ... and a sentence that opens on a name ('Quintrell' alone), but not a greeting before one.
    answer = await aask("I read about the harbor. Zorblax Quintrell?", offline, offline_db)
    assert answer.not_in_index == ["Zorblax Quintrell"]
    assert (await aask("Hello. Zorblax?", offline, offline_db)).not_in_index == []
    # A word a question asks with, opening it before a name, is no name the index lacks: "Summarize
    # Mira Osk" said 'Nothing in the index mentions "Summarize"'.
    for question, absent in (("Summarize Mira Osk", []), ("Overview Kessel Bridge?", []),
                             ("I read it. Summarize Mira Osk.", []),
                             ("Summarize Zorblax Quintrell", ["Zorblax Quintrell"]),
                             # ... but a name alone whose first word is such a word keeps it: "Story
                             # Musgrave?" said 'Nothing in the index mentions "Musgrave"'.
                             ("Story Musgrave?", ["Story Musgrave"]), ("Post Malone?", ["Post Malone"]),
                             ("Page Hollis", ["Page Hollis"]), ("I read it. Story Musgrave?", ["Story Musgrave"]),
                             ("Summarize Kessel", []), ("Summarize Kessel. Who is Mira Osk?", [])):
        assert (await aask(question, offline, offline_db)).not_in_index == absent, question
    for question in ("Who hired the engineer Mira Osk?",           # names it has
                     "What Is The Role Of Zorblax In The Harbor?",  # Title Case says nothing
                     "Zorblax hired whom?",                        # nor does a sentence's first word
                     "What do the Councils do on Tuesdays?",       # words it has in another form
                     "Did the USA fund the harbor? Was the CEO paid?",   # short words, acronyms, alone
                     "¿Quién contrató a Mira Osk?",                # a sentence opened with ¿
                     "Wer hat die Ingenieurin Mira Osk eingestellt?",   # German capitalises nouns
                     "Was steht in dem Bericht über die Kosten?",   # ... and shares 'was', 'in' with English
                     "What did the Engineers of the Harbour Councils decide?",   # words it has in other forms
                     "What is the Q3 OKR status?",
                     "Who hired the engineer Mi\u200bra O\u200esk?"):   # as the search reads it
        answer = await aask(question, offline, offline_db)
        assert answer.not_in_index == [] and not answer.text.startswith("Nothing in the index mentions"), question
    # A question of such names only is answered so, with no search: with a model, a whole
    # dynamic global search was paid to find nothing.
    for settings in (offline, make_settings(simulator.base_url, index=INDEX)):
        answer = await aask("Who is Zorblax Quintrell?", settings, offline_db)
        assert answer.search == "none" and not answer.llm.get("calls") and not answer.documents
        assert answer.text.startswith('Nothing in the index mentions "Zorblax Quintrell", and the question')
    # With a model: said on stderr, and in --json.
    said: list[str] = []
    answer = await aask("Did Mira Osk work with Ada Quintrell?", make_settings(simulator.base_url, index=INDEX),
                        offline_db, mode="local", on_status=said.append)
    assert answer.not_in_index == ["Ada Quintrell"]
    assert any(line.startswith("nothing in the index mentions") for line in said), said


async def test_a_question_of_a_missing_name_only_is_not_searched_in_other_languages(offline_db, simulator):
    # "Who is Zorblax Quintrell?" made no search, but "Qui est Zorblax Quintrell ?" was searched
    # as asking "qui est": quoting reports of the best-rated 25 offline, and with a model a whole
    # dynamic global search paid for to find nothing.
    for settings in (make_settings("", index=INDEX), make_settings(simulator.base_url, index=INDEX)):
        for question in ("Qui est Zorblax Quintrell ?", "Wer ist Zorblax Quintrell?",
                         "¿Quién es Zorblax Quintrell?", "Chi è Zorblax Quintrell?",
                         "Quem é Zorblax Quintrell?", "Кто такой Zorblax Quintrell?"):
            answer = await aask(question, settings, offline_db)
            assert answer.search == "none" and not answer.llm.get("calls") and not answer.documents, question
    # Asking more in those languages, the rest is searched: "rencontré", "macht".
    for question in ("Qui a rencontré Zorblax Quintrell ?", "Was macht Zorblax Quintrell?"):
        assert (await aask(question, make_settings("", index=INDEX), offline_db)).search != "none", question


async def test_a_name_whose_words_the_index_has_but_never_together_is_said_missing(offline_db, simulator):
    # "Who is Zeno Ulmard?" of an index with "Zeno Ulmford" and "Greta Ulmard" (never "Zeno
    # Ulmard") quoted facts about the other Zenos, and never said Zeno Ulmard is not in it.
    offline = make_settings("", index=INDEX)
    for settings in (offline, make_settings(simulator.base_url, index=INDEX)):
        answer = await aask("Who is Mira Brandt?", settings, offline_db)
        assert answer.not_in_index == ["Mira Brandt"] and answer.search == "none", answer.text
        assert answer.near_names == {"Mira Brandt": ["Ilse Brandt", "Mira Osk"]}   # (one form of a name)
        assert answer.text == ('Nothing in the index mentions "Mira Brandt" (names it has: Ilse Brandt, '
                               'Mira Osk), and the question asks about nothing else: no search was made.')
        assert answer.to_json()["near_names"] == answer.near_names and not answer.llm.get("calls")
    # Asking more, the rest is searched, not the name's words: no sentence of Lena Varga's.
    answer = await aask("Did Anton Varga meet Mira Osk?", offline, offline_db)
    assert answer.not_in_index == ["Anton Varga"] and answer.search == "local"
    notice, body = answer.text.split("\n\n", 1)
    assert notice == ('Nothing in the index mentions "Anton Varga" (names it has: Lena Varga, Anton Heller): '
                      "the sentences below match the rest of the question only.")
    assert "Mira Osk" in body and "Varga" not in body, body
    said: list[str] = []
    answer = await aask("Did Mira Osk work with Tobias Heller?", make_settings(simulator.base_url, index=INDEX),
                        offline_db, mode="local", on_status=said.append)
    assert 'nothing in the index mentions "Tobias Heller" (names it has: Anton Heller, Tobias Reyn)' in said, said
    # Other forms of names it has: a title more or less, another order, words of a longer name,
    # a name inside a longer run, a possessive; and a name it lacks beside one it has.
    for question, absent in (("What did Dr. Lena Varga teach?", []), ("What did Mr Salo sign?", []),
                             ("Who is Osk Mira?", []), ("What did the Vell Academy students build?", []),
                             ("Did Professor Mira Osk teach?", []), ("What did Mayor Ilse Brandt promise?", []),
                             ("What did Henrik Salo's company announce?", []),
                             ("Who is the Harbor Council's Mira Osk?", []),
                             ("Did Ilse Salo's plan pass? Ask Mira Osk.", ["Ilse Salo"]),
                             ("Was Dr. Anton Varga there?", ["Dr. Anton Varga"])):
        assert (await aask(question, offline, offline_db)).not_in_index == absent, question
    # A word the index lacks is said with the whole name it is written in, whose other words are
    # not searched for: "Who is Mira Zorblax?" said 'Nothing ... "Zorblax"' and quoted Mira Osk.
    answer = await aask("Who is Mira Zorblax?", offline, offline_db)
    assert answer.not_in_index == ["Mira Zorblax"] and answer.search == "none"
    assert answer.near_names == {"Mira Zorblax": ["Mira Osk"]}
    for question, absent in (("Did Mayor Zorblax sign it?", ["Mayor Zorblax"]),
                             ("Who is Mr. Zorblax?", ["Mr. Zorblax"]),   # (a point after a title ends no sentence)
                             ("Did Mira Osk meet Zorblax Brandt?", ["Zorblax Brandt"])):
        assert (await aask(question, offline, offline_db)).not_in_index == absent, question
    # Nor the entities made of the words of two names it lacks: "Did Lena Brandt meet Ilse
    # Varga?" was answered about Lena Varga and Ilse Brandt ("the question names Lena Varga, ...").
    for question in ("Did Lena Brandt meet Ilse Varga?", "Did Lena Brandt meet Ilse Varga at the quay?"):
        answer = await aask(question, offline, offline_db)
        assert answer.not_in_index == ["Lena Brandt", "Ilse Varga"], question
        assert "names" not in answer.auto_reason, answer.auto_reason
        body = answer.text.split("\n\n", 1)[1]
        assert "Lena Varga" not in body and "Varga" not in body, body
    # ... and a question of such names only is said to name only what the index lacks, as its text
    # says (its reason was the global search's, "... so the community reports answer it", beside
    # "no search was made")
    answer = await aask("Who is Lena Brandt?", offline, offline_db)
    assert (answer.search, answer.auto_reason) == ("none", 'the question names only what the index lacks '
                                                   '("Lena Brandt"), so no search was made')
    # So is a short word the index lacks, written with a name's: "Who is Bob Marley?" of an
    # index with no Bob quoted its Gideon Marley and never said Bob Marley is not in it.
    answer = await aask("Who is Bob Varga?", offline, offline_db)
    assert answer.not_in_index == ["Bob Varga"] and answer.search == "none", answer.text
    assert answer.near_names == {"Bob Varga": ["Lena Varga"]}
    for question, absent in (("Did Ilse Brandt meet Ada Salo?", ["Ada Salo"]), ("Ada Salo?", ["Ada Salo"]),
                             ("Did it pass? Ask Mira Osk.", []),   # a sentence's first word may be no name's
                             ("Did Mira Osk Quit?", []),           # nor one after a name
                             ("Who is Dr Varga?", []),      # a title the index lacks is no name
                             ("Who is Tom?", [])):          # nor a short word alone
        assert (await aask(question, offline, offline_db)).not_in_index == absent, question


async def test_names_never_together_are_told_from_names_written_otherwise(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "letters.txt").write_text(
        "The Ulmard Letters\n\nZeno Ulmford chaired the board of the Ostard Water Authority. Greta Ulmard "
        "met Rhea\nBostock at the quay in Ostard.\n\n\"Martha!\" cried Bob Cratchit, and Martha laughed. "
        "Mr. Bostock was late for dinner, and the dinner went cold. Master Peter came in. Master Peter "
        "Cratchit and Mrs. Cratchit sat down; Cratchit smiled.\n")
    offline = make_settings("", index=INDEX)
    await sync([corpus], offline, tmp_path / "index.db", root=corpus)
    answer = await aask("Who is Zeno Ulmard?", offline, tmp_path / "index.db")
    assert answer.near_names == {"Zeno Ulmard": ["Zeno Ulmford", "Greta Ulmard"]} and answer.search == "none"
    # Not a name of one word that a longer one writes ("Master Peter", "Cratchit"), but one with
    # a title beside another's ("Mrs. Cratchit" beside "Bob Cratchit").
    answer = await aask("Who is Rhea Cratchit?", offline, tmp_path / "index.db")
    assert answer.near_names == {"Rhea Cratchit": ["Mrs. Cratchit", "Rhea Bostock", "Bob Cratchit",
                                                   "Master Peter Cratchit"]}
    answer = await aask("Who is Peter Ulmard?", offline, tmp_path / "index.db")
    assert answer.near_names == {"Peter Ulmard": ["Greta Ulmard", "Master Peter Cratchit"]}
    for question, absent in (("Who is Rhea Bostock?", []),         # across a line break
                             ("Who is Martha Cratchit?", []),      # someone of one name, beside the other
                             ("Who is Dr. Bostock?", []),
                             ("What was the Ostard Dinner like?", []),   # a word the texts write in lower case
                             ("Did Greta Ulmford chair it?", ["Greta Ulmford"])):
        assert (await aask(question, offline, tmp_path / "index.db")).not_in_index == absent, question
    # The index's "Martha" is not who "Martha Ulmard" is: not what the question names.
    answer = await aask("Where did Martha Ulmard meet Zeno Ulmford?", offline, tmp_path / "index.db")
    assert answer.not_in_index == ["Martha Ulmard"] and answer.auto_reason == "the question names Zeno Ulmford"


async def test_a_sentence_first_word_copied_with_a_name_is_not_title_case(tmp_path):
    # "What did Up Scrooge do?" (A Christmas Carol's "Up Scrooge went") has "Up", a stopword,
    # capitalised inside a sentence, which was taken for a question in Title Case: no name of
    # it was looked for, and "Did Up Scrooge meet Jacob Cratchit?" never said the index has no
    # Jacob Cratchit. "Up" is no name's word (as "Bob" of "Bob Marley" is): Scrooge is asked about.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "stave.txt").write_text(
        "Marley's Ghost\n\nUp Scrooge went, not caring a button for that. Scrooge locked the door. "
        "Bob Cratchit warmed himself at the candle, and Scrooge watched Bob Cratchit.\n")
    offline = make_settings("", index=INDEX)
    db = tmp_path / "index.db"
    await sync([corpus], offline, db, root=corpus)
    answer = await aask("What did Up Scrooge do?", offline, db)
    assert answer.not_in_index == [] and answer.auto_reason == "the question names Scrooge", answer.auto_reason
    for question, absent in (("Did Up Scrooge meet Jacob Cratchit?", ["Jacob Cratchit"]),
                             ("What did Up Zorblax do?", ["Zorblax"]),
                             ("What did Bob Marley do?", ["Bob Marley"]),
                             # Title Case still says nothing of names
                             ("What Did Zorblax Say?", []), ("What Is the Role of Zorblax?", [])):
        assert (await aask(question, offline, db)).not_in_index == absent, question


def test_a_name_shortened_by_a_word_of_its_middle_is_not_missing(tmp_path):
    # "Who is the Kessel Council?" of texts writing "the Kessel City Council", where no entity
    # holds both words (a model named it "City Council"), was said missing, and nothing about
    # the council was searched for. Words apart in a text (a comma, a word in lower case) are
    # no one name, and "Zeno Ulmard" stays missing: nor are words either side of a sentence's
    # end ("... to Zeno. Ulmard said", which FTS finds as the phrase "zeno ulmard").
    texts = ("The Kessel City Council met on Tuesday; the council hired Osk.",
             "Greta Ulmard spoke to Zeno. Ulmard said nothing, and Nadia\nHarberg left.",
             "Zeno Ulmford, Greta Ulmard and Nadia Harberg met Mr. Marstad in Kessel. Many Council members came.",
             "Port Ashden Heights Chamber of Commerce")
    said = unknown_names_of(tmp_path / "i.db", {"e-c": "City Council", "e-z": "Zeno Ulmford",
                                                "e-g": "Greta Ulmard", "e-n": "Nadia Harberg",
                                                "e-o": "Osk"}, texts, (
        "Who is the Kessel Council?", "What did the Port Chamber do?", "Who is Zeno Ulmard?",
        "Who is Nadia Marstad?", "Who is Greta Harberg?", "Who is the Ulmard Council?",
        "Who is Nadia Harberg?"))
    assert said == {"Who is the Kessel Council?": [], "What did the Port Chamber do?": [],
                    "Who is Zeno Ulmard?": ["Zeno Ulmard"], "Who is Nadia Marstad?": ["Nadia Marstad"],
                    "Who is Greta Harberg?": ["Greta Harberg"],
                    "Who is the Ulmard Council?": ["Ulmard Council"], "Who is Nadia Harberg?": []}, said


def test_a_name_shortened_by_a_word_of_its_middle_is_found_as_the_index_reads_words(tmp_path):
    # "the Kessel City Council's vote" and "the Brünner City Council" hold the whole names of
    # "Kessel Council" and "Brünner Council" (or "Brunner Council": the index folds accents),
    # but a run's words were compared as written, "council's" and "brünner", and both were
    # said missing.
    said = unknown_names_of(tmp_path / "i.db", {"e-c": "City Council", "e-o": "Osk"},
                            ("The Kessel City Council's vote passed; the council hired Osk.",
                             "The Brünner City Council met Osk."), (
        "Who is the Kessel Council?", "Who is the Brünner Council?", "Who is the Brunner Council?",
        "Who is the Kessel Osk?"))
    assert said == {"Who is the Kessel Council?": [], "Who is the Brünner Council?": [],
                    "Who is the Brunner Council?": [], "Who is the Kessel Osk?": ["Kessel Osk"]}, said


async def test_a_question_of_unknown_names_only_answers_json_as_every_answer_does(offline_db):
    # "Zorblax Quintrell?" printed "mode": "auto", "auto_choice": null and "details":
    # {"searched": false}: a mode no other answer has and a key the README does not name.
    from streamrag.ask_command import format_footer

    offline = make_settings("", index=INDEX)
    other = (await aask("Who hired the engineer Mira Osk?", offline, offline_db)).to_json()
    answer = await aask("Zorblax Quintrell?", offline, offline_db)
    shown = answer.to_json()
    assert shown["search"] == "none" and shown.keys() == other.keys()
    assert shown["mode"] in ("global", "local", "basic") and shown["auto_choice"] == shown["mode"]
    assert shown["mode"] == choose_mode_of(offline_db, "Zorblax Quintrell?")[0]
    # (not the reason of the search it would have made: "... so the community reports answer it")
    assert shown["auto_reason"] == 'the question names only what the index lacks ("Zorblax Quintrell"), so no search was made'
    assert shown["answer"].endswith("no search was made.")
    assert shown["details"] == {}
    assert "chosen automatically" not in format_footer(answer)   # (nothing was searched)
    given = (await aask("Zorblax Quintrell?", offline, offline_db, mode="basic")).to_json()
    assert (given["mode"], given["auto_choice"], given["search"], given["details"]) == ("basic", None, "none", {})


def choose_mode_of(db, question: str) -> tuple[str, str]:
    store = Store(db, readonly=True)
    try:
        return choose_mode(store, question)
    finally:
        store.close()


@pytest.mark.parametrize("level", [None, 0])
async def test_an_offline_global_question_matching_no_report_finds_nothing(offline_db, level):
    settings = make_settings("", index=INDEX)
    answer = await aask("What do the reports say about quantum chromodynamics and Kubernetes?", settings,
                        offline_db, mode="global", level=level)
    # (no source text has a word of it: a dynamic search's redirect would name searches that
    # find nothing either, --level N and --mode local)
    assert "nothing in the community reports" in answer.text and "\n- " not in answer.text
    assert answer.outcome == "no_answer"
    assert answer.documents == [] and answer.citations == []
    assert not answer.details.get("broad_fallback")
    for question in ("What do the documents say overall?", "What are the main themes in these news articles?"):
        broad = await aask(question, settings, offline_db, mode="global")
        assert "\n- " in broad.text and broad.documents   # a broad question still gets the largest reports


@pytest.mark.parametrize("level", [None, 0])
async def test_an_offline_global_search_rates_and_picks_by_the_same_words(offline_db, level):
    # Reports were rated without the generic words only, sentences picked without the relation
    # words too: "Summarize the connections across the collection" selected no report.
    settings = make_settings("", index=INDEX)
    plain = await aask("Summarize the collection", settings, offline_db, mode="global", level=level)
    answer = await aask("Summarize the connections across the collection", settings, offline_db,
                        mode="global", level=level)
    assert answer.details["reports"] == plain.details["reports"] > 0
    assert answer.text == plain.text and "\n- " in answer.text and answer.documents


@pytest.mark.parametrize("question", ["Quels sont les thèmes principaux ?", "Was sind die Hauptthemen?",
                                      "¿Cuáles son los temas principales?", "主要主题是什么？",
                                      "주요 주제는 무엇입니까?", "主なテーマは何ですか？", "主題は何ですか",
                                      "Quais são os temas principais?", "Quali sono i temi principali?",
                                      "Каковы основные темы?", "ما هي المواضيع الرئيسية؟",
                                      "Faça um resumo dos textos", "Dimmi i temi principali dei documenti",
                                      "Какие основные темы в документах?", "ما هي أهم المواضيع في النصوص؟",
                                      # their possessives are function words, as "my" is
                                      "Quels sont les thèmes principaux de mes notes ?",
                                      "Qual é o tema principal das minhas notas?",
                                      "Quali sono i temi principali dei miei documenti?",
                                      "Каковы основные темы моих заметок?", "我的文件的主要主题是什么？",
                                      # ... and their words for "what ... is about"
                                      "Worum geht es in meinen Notizen?", "¿De qué tratan mis notas?",
                                      "De quoi parlent mes notes ?", "Was ist das Hauptthema?"])
async def test_an_offline_broad_question_in_another_language_is_answered_as_in_english(offline_db, question):
    # Routed to global (GLOBAL_CUES speaks these languages), but only English words were left
    # out: "quels sont les", the pairs 要主 题是 是什 什么, and no report matched.
    settings = make_settings("", index=INDEX)
    english = await aask("What are the main themes?", settings, offline_db, mode="global")
    answer = await aask(question, settings, offline_db)
    assert answer.mode == "global" and answer.details["reports"] == english.details["reports"] > 0
    assert answer.text == english.text and answer.documents == english.documents
    # ... and one naming what no report has still finds nothing
    absent = await aask(question.rstrip(" ?？") + " Kubernetes quantique chromodynamik 量子色 쿠버네티스?",
                        settings, offline_db, mode="global")
    assert "nothing in the community reports" in absent.text and not absent.documents
    assert absent.outcome == "no_answer"


@pytest.mark.parametrize("question, cues", [
    ("Quais são os temas principais?", "principais, temas"), ("Quali sono i temi principali?", "principali, temi"),
    ("Каковы основные темы?", "основные, темы"), ("ما هي المواضيع الرئيسية؟", "الرئيسية, المواضيع")])
def test_a_broad_question_in_portuguese_italian_russian_or_arabic_is_known_by_its_cue_words(offline_db, question, cues):
    # Global only because no entity matched them: a question whose words matched one went local.
    store = Store(offline_db, readonly=True)
    try:
        assert choose_mode(store, question) == (
            "global", f"the question asks about the collection as a whole ({cues})")
    finally:
        store.close()


async def test_offline_index_answered_by_an_llm(offline_db, qs):
    answer = await aask("Who hired the engineer Mira Osk?", qs, offline_db, mode="local")
    assert not answer.extractive and answer.llm["calls"] == 1
    check_citations(answer, offline_db)


def test_pick_sentences_prefers_rare_question_words():
    passages = [("[R:C1]", "The harbor was busy. The harbor was loud. Mira Osk rebuilt the harbor wall."),
                ("[T:chk-1]", "The harbor closed. Nobody knew why the harbor closed.")]
    picked = pick_sentences("Who rebuilt the harbor wall?", passages, limit=2)
    assert picked[0][:2] == ("Mira Osk rebuilt the harbor wall.", "[R:C1]")


def test_pick_sentences_prefers_sentences_with_more_of_the_question():
    passages = [("[E:e1]", "Scrooge felt connected to nobody at all. Bob sat by the fire. Bob Cratchit "
                           "went home. Scrooge said nothing."),
                ("[E:e2]", "Bob Cratchit is the clerk of Scrooge. Bob Cratchit laughed. Cratchit ate.")]
    picked = pick_sentences("Who is Bob Cratchit and how is he connected to Scrooge?", passages, limit=1)
    assert picked[0][:2] == ("Bob Cratchit is the clerk of Scrooge.", "[E:e2]")


def test_question_words_match_other_forms_of_themselves():
    from streamrag.extractive import stem
    assert stem("operate") == stem("operates") == stem("operations") == stem("operating")
    assert stem("company") == stem("companies") and stem("city") == stem("cities")
    assert stem("run") == stem("runs") == stem("running") and stem("was") == "was"
    passages = [("[E:e1]", "Pellric flooded in May. Pellric is a town. "
                           "From Pellric, Luntane Logistics runs operations across Aurelia.")]
    picked = pick_sentences("Which companies operate in Pellric?", passages, limit=1)
    assert picked[0][0] == "From Pellric, Luntane Logistics runs operations across Aurelia."


def test_the_won_of_wont_is_no_past_of_win():
    # "won't" is parted into "won" and "t", and "won" is "win" (the irregular verbs): "Who won?" of
    # A Christmas Carol, which says of no one that he won, quoted "he won't come and dine with us".
    passages = [("[T:chk-1]", "He won't come and dine with us. Ada won the race at Oslo. Bo said nothing.")]
    sentences = lambda q: [s for s, _tag, _score in pick_sentences(q, passages)]
    assert sentences("Who won?") == sentences("Who won the race?") == ["Ada won the race at Oslo."]
    assert sentences("Who won’t come?") == ["He won't come and dine with us."]   # (as a text writes it)


def test_the_offline_rating_reads_words_by_stem_too():
    from streamrag.extractive import overlap_rating
    report = "Luntane Logistics was criticised for its handling of the flood."
    assert overlap_rating({"criticising", "floods"}, report) == 5.0
    assert overlap_rating({"criticising", "harbour"}, report) == 3.0
    assert overlap_rating({"harbour"}, report) == 0.0


def test_the_offline_rating_finds_a_name_whole_or_not_at_all():
    # "Who is Dmitri Quinquay?" (synth_small) rated Dmitri Iskton's report 3 of 5 for "Dmitri",
    # above the threshold, and read it instead of his own.
    from streamrag.extractive import overlap_rating
    terms, names = {"dmitri", "quinquay"}, ["Dmitri Quinquay"]
    other = "Key entities: Idris Belwin, Dmitri Iskton."
    assert overlap_rating(terms, other) == 3.0                 # a word of two, without the names
    assert overlap_rating(terms, other, names) == 0.0          # half a name is none of it
    assert overlap_rating(terms, "Key entities: Dmitri Quinquay, Lake Kelholmford.", names) == 5.0
    assert overlap_rating(terms, "Lake Kelholmford Marathon 2034.", names, {"Dmitri Quinquay"}) == 5.0
    # A name is one of the question's words, the others count as before.
    both = ({"dmitri", "quinquay", "torvell", "energy"}, ["Dmitri Quinquay", "Torvell Energy"])
    assert overlap_rating(*both[:1], "Galwen Energy and Dmitri Iskton.", both[1]) == 0.0
    assert overlap_rating(*both[:1], "Torvell Energy in Pellric.", both[1]) == 3.0
    assert overlap_rating({"quinquay", "flood"}, "The flood.", ["Quinquay"]) == 3.0


def test_the_offline_rating_compares_a_name_asked_about_as_sentences_are_picked():
    # "Who is Tim?" (A Christmas Carol, global) rated two reports 5 of 5 for their "times", and
    # "Belle" meets "bells" by stem: the sentence picking (``NameKeys``) already told them apart.
    from streamrag.extractive import NameKeys, asked_names, overlap_rating
    tim = NameKeys(asked_names("Who is Tim?"))
    assert overlap_rating({"tim"}, "Scrooge walked there three times.", key=tim) == 0.0
    assert overlap_rating({"tim"}, "Tim's crutch stood by the fire.", key=tim) == 5.0
    belle = NameKeys(asked_names("What did Belle say?"))
    assert overlap_rating({"belle"}, "The bells rang out.", key=belle) == 0.0
    assert overlap_rating({"belle"}, "The bells rang out.") == 5.0   # without the question's names: by stem
    assert overlap_rating({"belle"}, "Belle's father came home.", ["Belle"], key=belle) == 5.0
    assert overlap_rating({"belle", "bells"}, "The bells rang for Belle.", key=belle) == 5.0
    # The other words still meet by stem.
    assert overlap_rating({"belle", "singing"}, "Belle sings.", key=belle) == 5.0


async def test_dynamic_selection_opens_the_communities_holding_a_named_entity():
    tree = _tree(("A", 0, None), ("B", 0, None), ("A1", 1, "A"), ("A2", 1, "A"), ("B1", 1, "B"))

    async def rate(frontier):   # B's summary names half the name; A's never lists its member
        return {n.id: 3.0 if n.id in ("B", "B1") else 0.0 for n in frontier}

    sel = await global_search.dynamic_selection(tree, rate, threshold=2, max_depth=3, named={"A", "A2"})
    assert set(sel.selected) == {"A2", "B1"} and sel.ratings["A"] == 2 and sel.ratings["A2"] == 2
    sel = await global_search.dynamic_selection(tree, rate, threshold=4, max_depth=3, named={"A", "A2"})
    assert sel.selected == ["A2"] and not sel.fallback


async def test_an_offline_global_search_reads_the_communities_of_the_entity_named(offline_db):
    # The rating saw a report's 6 most connected members only: "Who is Ilse Brandt?" never
    # opened the community holding her (rated 0), and "Kessel Chamber of Commerce" read every
    # community naming Kessel.
    settings = make_settings("", index=INDEX)
    con = sqlite3.connect(offline_db)

    def holders(name):
        return {c for (c,) in con.execute(
            "SELECT community_id FROM community_members JOIN entities ON id = entity_id WHERE name = ?",
            (name,))}

    answer = await aask("Who is Ilse Brandt?", settings, offline_db, mode="global")
    assert holders("Ilse Brandt") & set(answer.details["selected"]), answer.details
    for name in ("Kessel Chamber of Commerce", "Vell Maritime Academy", "Port Vell Gazette"):
        answer = await aask(f"What is {name}?", settings, offline_db, mode="global")
        assert answer.details["selected"] and set(answer.details["selected"]) <= holders(name), answer.details
        assert name in answer.text.split("\n- ")[1], answer.text


def test_local_and_basic_search_leave_the_generic_words_out_unless_nothing_else_is_asked():
    from streamrag.question import content_stop
    stop = content_stop("What are the main themes of the Lantern Festival?", ["Lantern Festival"])
    assert local_search.query_terms("What are the main themes of the Lantern Festival?", extra_stop=stop) == [
        "lantern", "festival"]
    # A word of a name the question writes stays one ("Talks" is a generic word).
    stop = content_stop("What were the Climate Accord Talks?", ["Climate Accord Talks"])
    assert "talks" not in stop
    assert content_stop("What are the main themes in these documents?", []) is None   # a broad one
    assert content_stop("Quels sont les thèmes principaux ?", []) is None
    assert content_stop("主要主题是什么？", []) is None
    assert content_stop("What is it?", []) is None                                    # no words at all


def test_a_word_for_the_people_or_the_story_is_generic_only_when_nothing_else_is_asked():
    # "Who are the main characters?" searched "characters", "Summarize everything" "everything":
    # sentences that happened to hold the word were the answer.
    from streamrag.question import content_stop

    for question in ("Who are the main characters?", "Summarize everything", "What is the moral of the story?",
                     "Tell me about the people in my notes", "Where is everyone going?"):
        assert content_stop(question, []) is None, question
    # A generic noun alone, or beside a word of the question's own, is what it asks about: "Where
    # was the key?" was refused by --mode basic as a broad question, "Who was reading a book?"
    # searched "reading" alone (found by a reviewer on A Christmas Carol).
    for question, kept in (("Who is the main character's sister?", ["character", "sister"]),
                           ("What do the people in Camden Town eat?", ["people", "camden", "town", "eat"]),
                           ("What happened to the story's narrator?", ["story", "narrator"]),
                           ("Tell me about Ada's notes", ["ada", "notes"]),
                           ("What events took place in Pellric?", ["events", "took", "place", "pellric"]),
                           ("Where was the key?", ["key"]), ("What was the news?", ["news"]),
                           ("Who was reading a book?", ["reading", "book"]),
                           ("What is the journal about?", ["journal"]),
                           ("Where was the key to the door?", ["key", "door"]),
                           ("What are the main themes of the harbor strike?", ["harbor", "strike"])):
        stop = content_stop(question, [])
        assert stop is not None and local_search.query_terms(question, extra_stop=stop) == kept, question


def test_the_words_for_the_people_or_the_story_of_other_languages_are_generic_only_when_nothing_else_is_asked():
    # "Quels sont les personnages principaux ?" searched "personnages", which no report had, and
    # answered that nothing matched; "Who are the main characters?" got the overview.
    from streamrag.question import content_stop, global_question

    def left(question):
        cut, stop = global_question(question)
        return local_search.query_terms(cut, extra_stop=stop)

    for question in ("Quels sont les personnages principaux ?", "Quelle est la morale de l'histoire ?",
                     "Was ist die Moral der Geschichte?", "Wer sind die Hauptfiguren?",
                     "¿Quiénes son los personajes principales?", "¿Cuál es la moraleja de la historia?",
                     "Quem são os personagens principais?", "Qual é a moral da história?",
                     "Chi sono i personaggi principali?", "Qual è la morale della storia?",
                     "Кто главные персонажи?", "Какова мораль истории?", "Que se passe-t-il ?"):
        assert left(question) == [], question
    for question in ("Quels sont les personnages principaux ?", "Was ist die Moral der Geschichte?",
                     "¿Cuál es la moraleja de la historia?", "Chi sono i personaggi principali?",
                     "Какова мораль истории?"):
        assert content_stop(question, []) is None, question
    # Beside a word of the question's own they are what it asks about, as in English.
    for question, kept in (("Qui est la sœur du personnage principal ?", ["sœur", "personnage"]),
                           ("Que mangent les gens de Camden Town ?", ["mangent", "gens", "camden", "town"]),
                           ("Quelle est l'histoire de Camden Town ?", ["histoire", "camden", "town"]),
                           ("Wer ist die Schwester der Hauptfigur?", ["schwester", "hauptfigur"]),
                           ("¿Qué comen las personas en Camden Town?", ["comen", "personas", "camden", "town"]),
                           ("Quali eventi accaddero a Pellric?", ["eventi", "accaddero", "pellric"])):
        assert left(question) == kept, question
        stop = content_stop(question, [])
        assert stop is not None and local_search.query_terms(question, extra_stop=stop) == kept, question
    # An English question keeps them: "persona" and "moral" are English words too.
    assert left("Who is the persona of Fred?") == ["persona", "fred"]
    assert left("What is the moral?") == [] and left("Who is the Persona?") == ["persona"]


@pytest.mark.parametrize("question", ["Quels sont les personnages principaux ?", "Quelle est la morale de l'histoire ?",
                                      "¿Quiénes son los personajes principales?", "Quem são os personagens principais?",
                                      "Chi sono i personaggi principali?", "Кто главные персонажи?",
                                      "Was ist die Moral der Geschichte?"])
async def test_an_offline_broad_question_about_the_people_or_the_story_in_another_language_gets_the_overview(
        offline_db, question):
    settings = make_settings("", index=INDEX)
    english = await aask("What are the main themes?", settings, offline_db, mode="global")
    answer = await aask(question, settings, offline_db)
    assert answer.mode == "global" and answer.text == english.text and answer.documents == english.documents


@pytest.mark.parametrize("question", ["Who are the main characters?", "Summarize everything",
                                      "What is the moral of the story?", "Give me an overview of everything",
                                      "Tell me about the people in my notes", "What are my journals and letters about?"])
async def test_an_offline_broad_question_about_the_people_or_the_story_gets_the_overview(offline_db, question):
    settings = make_settings("", index=INDEX)
    english = await aask("What are the main themes?", settings, offline_db, mode="global")
    answer = await aask(question, settings, offline_db)
    assert answer.mode == "global" and answer.text == english.text and answer.documents == english.documents
    local = await aask(question, settings, offline_db, mode="local")
    assert "asks about the collection as a whole" in local.text and not local.documents, local.text


async def test_auto_mode_sends_a_question_of_generic_and_function_words_to_global_search(tmp_path):
    # "¿De qué tratan mis notas?" went local for its "de", a word of "Roger de Coverley", and
    # quoted his sentences.
    _folder, settings, db = await offline_index(tmp_path, {
        "ball.txt": "Old Fezziwig danced Roger de Coverley with his wife at the Lunros Hall. Dick Wilkins "
                    "played the fiddle at the Lunros Hall.\n",
        "shop.txt": "Ebenezer Scrooge kept the counting house near the Lunros Hall. Bob Cratchit copied "
                    "letters for Ebenezer Scrooge.\n"})
    store = Store(db, readonly=True)
    try:
        chosen, reason = choose_mode(store, "¿De qué tratan mis notas?")
        assert chosen == "global" and reason.startswith("the question asks about the collection as a whole")
        assert choose_mode(store, "¿Quién bailó Roger de Coverley?")[0] == "local"
    finally:
        store.close()
    english = await aask("What are the main themes?", settings, db, mode="global")
    answer = await aask("¿De qué tratan mis notas?", settings, db)
    assert answer.mode == "global" and answer.text == english.text and answer.documents


async def test_auto_mode_leaves_the_other_languages_function_words_out_of_its_entity_search(tmp_path):
    # "Wer sind die Figuren?" went local: its German "die" matched "... will die" in an entity's
    # description, and the local search (which leaves "die" out) found nothing it asks about.
    _folder, settings, db = await offline_index(tmp_path, {
        "house.txt": "Tiny Tim will die unless Ebenezer Scrooge changes. Bob Cratchit carried Tiny Tim "
                     "home from the Lunros Church.\n",
        "shop.txt": "Ebenezer Scrooge kept the counting house near the Lunros Church. Bob Cratchit copied "
                    "letters for Ebenezer Scrooge.\n"})
    store = Store(db, readonly=True)
    try:
        assert local_search.fts_entities(store, "die", 1)   # (what the question matched)
        for question in ("Wer sind die Figuren?", "Who are the characters?"):
            assert choose_mode(store, question) == (
                "global", "the question matches no entity, so the community reports answer it"), question
        assert choose_mode(store, "Wer ist Ebenezer Scrooge?") == ("local", "the question names Ebenezer Scrooge")
        assert choose_mode(store, "Who will die?")[0] == "local"   # (an English word there)
    finally:
        store.close()
    answer = await aask("Wer sind die Figuren?", settings, db)
    assert answer.mode == "global" and answer.documents, answer.text


async def test_an_offline_local_search_of_a_question_naming_nothing_says_so(offline_db):
    # ask --mode local "What is it?" quoted the opening sentences of the most connected entities.
    settings = make_settings("", index=INDEX)
    for mode in ("local", "basic"):
        answer = await aask("What is it?", settings, offline_db, mode=mode)
        assert "names nothing" in answer.text and "--mode global" in answer.text, answer.text
        assert not answer.documents and not answer.citations and answer.search == mode
    answer = await aask("What is it?", settings, offline_db)
    assert answer.mode == "global" and answer.auto_reason == "the question names nothing, so the community reports answer it"


@pytest.mark.parametrize("mode", ["local", "basic"])
async def test_an_offline_local_or_basic_search_reads_no_generic_word_as_content(tmp_path, mode):
    # ask --mode basic "What are the main themes in these documents?" quoted "TE moved its main
    # offices to Pellric" ('main'), as the answer.
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(DATA / "harbor", corpus)
    (corpus / "brix.txt").write_text("Brix Holdings moved its main offices to Ardent Vale several years "
                                     "ago.\n\nThe main themes of Brix Holdings are trade and shipping.\n")
    db = tmp_path / "index.db"
    settings = make_settings("", index=INDEX)
    await sync([corpus], settings, db, root=corpus)
    answer = await aask("What are the main themes of the Lantern Festival?", settings, db, mode=mode)
    assert "Lantern Festival" in answer.text and "main" not in answer.text, answer.text
    # Nothing asked but the generic words: a question for global search, and said so.
    answer = await aask("What are the main themes in these documents?", settings, db, mode=mode)
    assert "asks about the collection as a whole (main, themes, documents)" in answer.text, answer.text
    assert "--mode global" in answer.text and not answer.documents and answer.search == mode


async def test_a_rating_model_cannot_leave_closed_the_community_of_an_entity_named(llm_db, qs):
    # It sees a report's most connected members only: "Who is Dmitri Quinquay?" (synth_small,
    # the simulator) never read his community when he was not among them, nor did this model.
    def all_zero(messages):
        ids = sorted({t[3:-1] for t in tags_in(messages[-1]["content"].split("<reports>")[1])})
        return "\n".join(f"{i}: 0" for i in ids)

    con = sqlite3.connect(llm_db)
    held = [c for (c,) in con.execute(   # one community a level, the deepest last
        "SELECT m.community_id FROM community_members m JOIN entities e ON e.id = m.entity_id "
        "JOIN communities c ON c.id = m.community_id WHERE e.name = 'Ilse Brandt' ORDER BY c.level")]
    answer = await aask("Who is Ilse Brandt?", qs, llm_db, mode="global",
                        transport=mock({"rate": all_zero}))
    assert answer.details["selected"] == held[-1:], answer.details
    assert all(answer.details["ratings"][c] == qs.query.dynamic_threshold for c in held)
    assert "Ilse Brandt" in answer.text


def test_how_a_question_asks_is_not_what_it_is_about():
    from streamrag.question import RELATION_WORDS
    passages = [("[E:e1]", "A death connected them all. Bob Cratchit thanked Scrooge.")]
    question = "How is Bob Cratchit connected to Scrooge?"
    assert len(pick_sentences(question, passages)) == 2
    assert [p[0] for p in pick_sentences(question, passages, extra_stop=RELATION_WORDS)] == \
        ["Bob Cratchit thanked Scrooge."]


def test_sentences_end_before_a_capital_of_any_script_and_list_items_stand_alone():
    from streamrag.extractive import _shorten, split_sentences

    # Only A-Z counted as a capital: a Russian paragraph was one sentence to quote.
    assert split_sentences("Сергей Лавров прибыл в Москву. Он встретился с министром. Встреча прошла хорошо.") == [
        "Сергей Лавров прибыл в Москву.", "Он встретился с министром.", "Встреча прошла хорошо."]
    assert split_sentences("Le rapport fut signé. Íñigo Núñez, rector, lo firmó ayer.") == [
        "Le rapport fut signé.", "Íñigo Núñez, rector, lo firmó ayer."]
    assert split_sentences("It was cold, etc. and so on. Then it was warm… Later it rained.") == [
        "It was cold, etc. and so on.", "Then it was warm…", "Later it rained."]
    # Lines of a list, a table or a log were run together into one sentence.
    assert split_sentences("Notes:\n- Ada Osk runs the quay\n- Bo Lund sells rope daily\n"
                           "2024-03-06T12:45:45Z ERROR request failed badly") == [
        "Ada Osk runs the quay", "Bo Lund sells rope daily", "2024-03-06T12:45:45Z ERROR request failed badly"]
    assert split_sentences("The harbour was\nfull of ships. Ada\nwatched them.") == [   # wrapped prose
        "The harbour was full of ships.", "Ada watched them."]
    long = ("The port authority said on Monday that the expansion of the container terminal in the "
            "eastern harbour (東京) would be finished by the end of next year after long delays.")
    assert _shorten(long) == long   # one Chinese word made it cut at 120 characters
    assert _shorten("张伟在北京大学工作" * 20) == ("张伟在北京大学工作" * 20)[:120] + " ..."
    assert _shorten("harbor " * 58 + "北京大学工作室") == "harbor " * 58 + "北京大学 ..."   # not mid-word
    for whole in ("中文 " + "COVID-19 " * 40, "港" * 40 + "口" * 40):   # short enough: not touched
        assert _shorten(whole.strip()) == whole.strip()
    assert _shorten("w " * 59 + "internationalization中文说明") == ("w " * 59).strip() + " ..."
    for punctuated in ("，".join(["张伟在北京大学工作多年并且参与了很多重要的研究项目"] * 6) + "。",
                       "Report: " + "张伟在北京大学工作，" * 20):   # the cut was all of it: " ..."
        cut = _shorten(punctuated)
        assert len(cut) > 100 and cut.endswith(" ...") and punctuated.startswith(cut[:-4])
    assert split_sentences("The plan was discussed on page\n12. After that the board voted.") == [
        "The plan was discussed on page 12.", "After that the board voted."]   # wrapped prose


def test_sentences_do_not_end_after_titles_abbreviations_or_initials():
    from streamrag.extractive import split_sentences

    text = ("'Who is it?' asked Mrs. Cratchit, turning round. Mr. Fezziwig and Dr. Lowe met at St. Paul's "
            "gate. Use a viewer, e.g. Gephi for graphs. Ebenezer J. Scrooge kept the counting-house. "
            "It closed in 1843. The next year came.")
    assert split_sentences(text) == [
        "'Who is it?' asked Mrs. Cratchit, turning round.",
        "Mr. Fezziwig and Dr. Lowe met at St. Paul's gate.",
        "Use a viewer, e.g. Gephi for graphs.",
        "Ebenezer J. Scrooge kept the counting-house.",
        "It closed in 1843.",
        "The next year came."]


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------
def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    add_ask_command(sub)
    return parser.parse_args(argv)


def test_cmd_ask_json(llm_db, simulator, capsys):
    args = _parse(["ask", "Who is Mira Osk?", "--json", "--db", str(llm_db),
                   "--api-base", simulator.base_url])
    assert args.func is cmd_ask
    assert cmd_ask(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"question", "mode", "auto_choice", "answer", "citations", "documents", "llm",
            "extractive"} <= set(out)
    assert out["mode"] == "local" and out["auto_choice"] == "local" and out["extractive"] is False
    assert set(out["llm"]) == {"calls", "prompt_tokens", "completion_tokens", "cached", "errors", "cancelled",
                               "by_stage"}
    c = out["citations"][0]
    assert {"tag", "kind", "id", "resolved"} <= set(c) and c["resolved"] is True
    assert ("name" in c) or ("title" in c) or ("path" in c)
    assert out["documents"]


def test_cmd_ask_json_escapes_the_controls_of_a_model_answer_on_a_utf8_output(offline_db, capsys, monkeypatch):
    # On a UTF-8 output --json wrote non-ASCII as it is, and json.dumps escapes C0 alone: a
    # model's U+009B (a one-byte CSI on some terminals), DEL and a mark that reorders the line
    # reached the terminal raw. Escaped, the JSON means the same; letters of any script stay.
    import streamrag.query as query_module

    said = "Mira Osk \x9b2J chairs \x7f the council \u202e, café 港"

    class Said:
        def to_json(self) -> dict:
            return {"answer": said}
    monkeypatch.setattr(query_module, "ask", lambda *args, **kwargs: Said())
    assert cmd_ask(_parse(["ask", "Who is Mira Osk?", "--json", "--db", str(offline_db), "--api-base", ""])) == 0
    out = capsys.readouterr().out
    assert sys.stdout.encoding.lower().replace("-", "") == "utf8"   # (the output --json writes UTF-8 to)
    assert json.loads(out)["answer"] == said and "café 港" in out
    assert not {"\x9b", "\x7f", "\u202e"} & set(out) and "\\u009b2J" in out, out


@pytest.mark.parametrize("flag", [None, "--no-stream", "--json"])
def test_cmd_ask_prints_a_model_answer_after_the_names_the_index_lacks(llm_db, simulator, capsys, flag):
    # With a model the missing name was said on stderr and in --json's not_in_index only: the
    # printed answer, the model's, answered the rest of the question and never said so (an
    # extractive answer's text begins with it). --json's answer stays the model's.
    args = _parse(["ask", "Did Anton Varga meet Mira Osk?", "--db", str(llm_db), "--mode", "local",
                   "--api-base", simulator.base_url] + ([flag] if flag else []))
    assert cmd_ask(args) == 0
    out = capsys.readouterr().out
    note = ('Nothing in the index mentions "Anton Varga" (names it has: Lena Varga, Anton Heller): the '
            'answer below is to the rest of the question only.\n\n')
    if flag == "--json":
        answer = json.loads(out)
        assert answer["not_in_index"] == ["Anton Varga"] and not answer["answer"].startswith("Nothing"), answer
        return
    assert out.startswith(note) and len(out) > len(note) + 20 and "Nothing in the index" not in out[len(note):], out
    # A question naming nothing missing has no note.
    assert cmd_ask(_parse(["ask", "Who is Mira Osk?", "--db", str(llm_db), "--mode", "local",
                           "--api-base", simulator.base_url] + ([flag] if flag else []))) == 0
    assert "Nothing in the index" not in capsys.readouterr().out


def test_cmd_ask_streams_and_ends_with_the_documents(offline_db, capsys, monkeypatch):
    monkeypatch.delenv("STREAMRAG_API_BASE", raising=False)
    args = _parse(["ask", "What are the main themes?", "--db", str(offline_db), "--mode", "global",
                   "--level", "0"])
    assert cmd_ask(args) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(EXTRACTIVE_LABEL)
    assert "Documents:" in captured.out and "global static search at level 0" in captured.out


def test_the_local_search_line_says_its_context_tokens_as_other_figures_are_said(offline_db, capsys, monkeypatch):
    # It said 'local search: 11 entities (bm25 + pagerank), 3880 context tokens', where every
    # other count of tokens has its thousands comma.
    monkeypatch.delenv("STREAMRAG_API_BASE", raising=False)
    common = ["ask", "Who is Mira Osk?", "--db", str(offline_db), "--mode", "local"]
    assert cmd_ask(_parse(common + ["--json"])) == 0
    total = sum(json.loads(capsys.readouterr().out)["details"]["context_tokens"].values())
    assert total >= 1000   # (else there is no comma to write)
    assert cmd_ask(_parse(common)) == 0
    line = [x for x in capsys.readouterr().err.splitlines() if x.startswith("streamrag: local search: ")]
    assert line and line[0].endswith(f"), {total:,} context tokens"), line


@pytest.mark.parametrize("flag", [None, "--no-stream", "--json"])
def test_cmd_ask_prints_no_terminal_escapes_from_document_text(offline_db, capsys, monkeypatch, flag):
    import streamrag.query as query

    text = "Red \x1b[31malert\x1b[0m\x07 and a \x1b]0;pwned\x07title.\r\n- kept\tas is [T:chk-1]"
    pieces = ["Red \x1b[3", "1malert\x1b", "[0m\x07 and a \x1b]0;pw", "ned\x07title.\r\n- kept\tas is [T:chk-1]"]

    def fake_ask(question, settings, db, *, mode, level, on_delta=None, on_status=None, sigterm=False, fresh=False):
        on_status("local search: 1 entities (bm25) named \x1b[2J")
        for piece in pieces:
            if on_delta:
                on_delta(piece)
        return Answer(question=question, requested_mode="local", mode="local", search="local",
                      text=text, documents=["evil\x1b[1;1Hname.txt"], citations=[{"tag": "[T:chk-1]"}])

    monkeypatch.setattr(query, "ask", fake_ask)
    monkeypatch.delenv("STREAMRAG_API_BASE", raising=False)
    args = _parse(["ask", "What?", "--db", str(offline_db)] + ([flag] if flag else []))
    assert cmd_ask(args) == 0
    captured = capsys.readouterr()
    if flag == "--json":      # JSON escapes control characters itself; the answer stays as given
        assert json.loads(captured.out)["answer"] == text
        return
    assert captured.out.startswith("Red alert and a title.\n- kept\tas is [T:chk-1]\n")
    assert "  evil\\x1b[1;1Hname.txt" in captured.out     # a path is shown escaped, as warnings show it
    assert "streamrag: local search: 1 entities (bm25) named \n" in captured.err
    for stream in (captured.out, captured.err):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", stream), repr(stream)


def test_global_search_on_an_index_without_communities_says_so(tmp_path, simulator, capsys, monkeypatch):
    from streamrag.cli import cmd_ask_checked
    from streamrag.query import ask

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the cat sat on the mat and it was warm and quiet there.\n"
                                  "nothing else happened at all that day.\n")
    db = tmp_path / "index.db"
    anyio.run(lambda: sync([corpus], make_settings("", index=INDEX), db, root=corpus))
    store = Store(db, readonly=True)
    assert store.scalar("SELECT count(*) FROM communities") == 0
    store.close()
    monkeypatch.delenv("STREAMRAG_API_BASE", raising=False)
    assert cmd_ask_checked(_parse(["ask", "What are the main themes?", "--db", str(db), "--level", "2"])) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(EXTRACTIVE_LABEL + ": the index has no communities")
    assert "at level" not in captured.out
    assert "[global static search (the index has no communities); extractive" in captured.out
    assert "no communities" in captured.err
    for level in (None, 2):   # with a model: no call is made, and the answer says why
        answer = ask("What are the main themes?", make_settings(simulator.base_url, index=INDEX), db,
                     mode="global", level=level)
        assert answer.text.startswith("The index has no communities") and answer.level is None
        assert answer.llm["calls"] == 0 and answer.documents == []


async def embedded_index(tmp_path, simulator):
    """(folder, settings, db): tests/data/harbor indexed with the simulator's embedding model."""
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(DATA / "harbor", corpus)
    db = tmp_path / "index.db"
    settings = make_settings(simulator.base_url, index=INDEX,
                             llm={"embedding_model": "text-embedding-3-small", "cache": False})
    await sync([corpus], settings, db, root=corpus)
    return corpus, settings, db


async def test_local_and_basic_use_embeddings_when_configured(tmp_path, simulator):
    corpus, settings, db = await embedded_index(tmp_path, simulator)
    local = await aask("Who hired the engineer Mira Osk?", settings, db, mode="local")
    assert local.details["entity_search"].startswith("embedding")
    # (The question's embedding is its own stage: the index's chunks are "embed".)
    assert local.llm["by_stage"]["embed_question"]["calls"] == 1 and "embed" not in local.llm["by_stage"]
    check_citations(local, db)
    basic = await aask("Who hired the engineer Mira Osk?", settings, db, mode="basic")
    assert basic.details["chunk_search"] == "embedding" and basic.details["chunks"]


async def test_a_question_too_long_for_the_embedding_model_says_to_shorten_it(tmp_path, simulator):
    # The question was embedded under the index's stage name ("embed"), so an overflow said to lower
    # index.chunk_size, which no question follows.
    corpus, settings, db = await embedded_index(tmp_path, simulator)
    chat = mock()

    def endpoint(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/embeddings"):
            return httpx.Response(400, json={"error": {"message": "This model's maximum context length is 512 "
                                                                  "tokens, however you requested 1056 tokens"}})
        return chat.handle_request(request)

    with pytest.raises(LLMRequestError) as e:
        # (Within a question's bounds, 1,000 words: more than a 512-token embedding model holds.)
        await aask("Who hired the engineer Mira Osk? " * 150, settings, db, mode="basic",
                   transport=httpx.MockTransport(endpoint))
    said = str(e.value)
    assert "longer than text-embedding-3-small's context allows" in said, said
    assert "; shorten the question (it is embedded whole), or give the model a longer context" in said, said
    assert "chunk_size" not in said


async def test_items_without_a_fresh_vector_are_found_by_bm25_and_said(tmp_path, simulator):
    # An offline update wrote no vector for a new document: with the embedding model set, basic
    # and local search ranked only the vectors there were, and the document was unfindable.
    corpus, settings, db = await embedded_index(tmp_path, simulator)
    (corpus / "museum.txt").write_text("Yrsa Vantolm opened the Brackwater Lantern Museum in March 2035. "
                                       "It shows the lanterns of the old Brackwater lighthouse.\n")
    await sync([corpus], make_settings("", index={**INDEX, "extractor": "nlp"}), db, root=corpus)   # --offline
    store = Store(db, readonly=True)
    try:
        new = store.scalar("SELECT chunk_id FROM document_chunks JOIN documents ON documents.id = doc_id "
                           "WHERE path LIKE '%museum.txt'")
        chunks = store.scalar("SELECT count(*) FROM chunks")
        vectors = store.scalar("SELECT count(*) FROM embeddings WHERE kind = 'chunk'")
    finally:
        store.close()
    said: list[str] = []
    basic = await aask("Who opened the Brackwater Lantern Museum?", settings, db, mode="basic",
                       on_status=said.append)
    assert new in basic.details["chunks"] and any(d.endswith("museum.txt") for d in basic.documents)
    assert basic.details["chunk_search"].startswith("embedding + bm25")
    assert any(f"chunks without an embedding from text-embedding-3-small of their present text: "
               f"{chunks - vectors} of {chunks}" in line and "streamrag index" in line
               for line in said), said
    local = await aask("Who opened the Brackwater Lantern Museum?", settings, db, mode="local")
    assert any(d.endswith("museum.txt") for d in local.documents), local.text


async def test_a_local_search_matching_no_entity_says_its_entities_are_a_fallback(offline_db):
    # ask --mode local of a name the index lacks said 'local search: 15 entities (most connected
    # + pagerank)' and then 'Nothing in the index mentions "Ada Osk"': as if the question found them.
    said: list[str] = []
    settings = make_settings("", index=INDEX)
    answer = await aask("Tell me about Ada Osk and the ghosts", settings, offline_db, mode="local",
                        on_status=said.append)
    assert answer.not_in_index == ["Ada Osk"] and answer.details["entity_search"].startswith("most connected")
    line = next(line for line in said if line.startswith("local search:"))
    assert line.startswith("local search: no entity matches the question, so "), said
    # A question that matches entities is said as before.
    said.clear()
    await aask("Who hired Mira Osk?", settings, offline_db, mode="local", on_status=said.append)
    assert not any("no entity matches" in line for line in said), said


async def test_an_index_built_without_embeddings_says_so_when_asked_with_an_embedding_model(offline_db, simulator):
    # With llm.embedding_model set after the index was built, ask used BM25 without a word.
    said: list[str] = []
    settings = make_settings(simulator.base_url, index=INDEX, llm={"embedding_model": "text-embedding-3-small"})
    answer = await aask("Who hired Mira Osk?", settings, offline_db, mode="local", on_status=said.append)
    assert answer.text and any(line.startswith("no entities have an embedding from text-embedding-3-small")
                               and "streamrag index" in line for line in said), said


def test_a_vector_of_an_older_text_is_not_fresh(llm_db, tmp_path):
    # nearest read every vector of the kind, one of an entity's older description too.
    import shutil

    from streamrag.embeddings import entity_text, fresh_vectors, pack
    from streamrag.ids import text_hash

    db = tmp_path / "copy.db"
    shutil.copy(llm_db, db)
    store = Store(db)
    try:
        rows = store.query("SELECT id, name, description FROM entities ORDER BY id")
        assert fresh_vectors(store, "entity", "m") == (set(), len(rows))   # never embedded with m
        with store.conn:
            for i, r in enumerate(rows):   # every other one of an older description
                text = entity_text(r["name"], r["description"] + (" Once." if i % 2 else ""))
                store.conn.execute("INSERT INTO embeddings(kind, item_id, model, content_hash, vector) "
                                   "VALUES ('entity', ?, 'm', ?, ?)", (r["id"], text_hash(text), pack([1.0, 0.0])))
        fresh, missing = fresh_vectors(store, "entity", "m")
    finally:
        store.close()
    assert fresh == {r["id"] for i, r in enumerate(rows) if i % 2 == 0} and missing == len(rows) // 2


def test_an_answer_that_cites_nothing_does_not_claim_to_rest_on_its_context():
    from streamrag.ask_command import format_footer

    bare = Answer(question="q", requested_mode="local", mode="local", search="local",
                  text="The context does not hold the answer.", documents=["a.txt", "b.txt"])
    assert "cites none" in format_footer(bare) and "\nDocuments:" not in format_footer(bare)
    cited = Answer(question="q", requested_mode="local", mode="local", search="local", text="x [E:a]",
                   citations=[{"tag": "[E:a]", "kind": "E", "id": "a", "resolved": True}], documents=["a.txt"])
    assert "\nDocuments:" in format_footer(cited)


def test_a_document_path_with_control_characters_is_listed_on_one_escaped_line():
    # A file named "evil\x1b[31mRED\nline.txt" was listed as two lines, its escape dropped.
    from streamrag.ask_command import format_footer

    answer = Answer(question="q", requested_mode="local", mode="local", search="local", text="x",
                    extractive=True, documents=["evil\x1b[31mRED\nline.txt", "b.txt"])
    lines = format_footer(answer).splitlines()
    assert "  evil\\x1b[31mRED\\nline.txt" in lines and "  b.txt" in lines


def test_the_footer_lists_the_first_documents_and_counts_the_rest():
    from streamrag.ask_command import FOOTER_DOCUMENTS, format_footer

    paths = [f"doc{i:02d}.txt" for i in range(FOOTER_DOCUMENTS + 5)]
    answer = Answer(question="q", requested_mode="basic", mode="basic", search="basic", text="x",
                    extractive=True, documents=paths)
    lines = format_footer(answer).splitlines()
    assert [line.strip() for line in lines if line.startswith("  doc")] == paths[:FOOTER_DOCUMENTS]
    assert "  ... and 5 more (see --json)" in lines


def test_the_footer_counts_one_llm_call_as_one_call():
    # It said "1 LLM call(s)", where the index summary and watch's lines count their calls in words.
    from streamrag.ask_command import format_footer

    usage = {"calls": 1, "prompt_tokens": 775, "completion_tokens": 287, "cached": 0}
    answer = Answer(question="q", requested_mode="local", mode="local", search="local", text="x", llm=usage)
    assert "1 LLM call, 775 prompt + 287 completion tokens]" in format_footer(answer)
    answer.llm = {**usage, "calls": 3, "cached": 1}
    assert "3 LLM calls, 775 prompt + 287 completion tokens, 1 from cache]" in format_footer(answer)


def test_the_footer_of_an_answer_all_from_the_cache_says_no_call_was_made():
    # "1 LLM call, 0 prompt + 0 completion tokens, 1 from cache" read as a call made for nothing.
    from streamrag.ask_command import format_footer

    answer = Answer(question="q", requested_mode="local", mode="local", search="local", text="x",
                    llm={"calls": 1, "prompt_tokens": 0, "completion_tokens": 0, "cached": 1})
    assert format_footer(answer).endswith("[local search; answered from the cache, no LLM call]")
    answer.llm = {"calls": 3, "prompt_tokens": 0, "completion_tokens": 0, "cached": 3}
    assert format_footer(answer).endswith("[local search; answered from the cache (3 answers), no LLM call]")


@pytest.mark.parametrize("mode", ["local", "global"])
async def test_an_answer_cut_off_at_its_budget_says_so(llm_db, simulator, mode):
    from streamrag.ask_command import format_footer

    short = make_settings(simulator.base_url, index=INDEX, llm={"cache": False},
                          query={"answer_max_tokens": 8})
    answer = await aask("Who hired Mira Osk, and what did she design?", short, llm_db, mode=mode)
    assert answer.cut_off and answer.to_json()["cut_off"] is True
    assert "cut off at query.answer_max_tokens" in format_footer(answer)
    full = await aask("Who hired Mira Osk, and what did she design?",
                      make_settings(simulator.base_url, index=INDEX, llm={"cache": False}), llm_db, mode=mode)
    assert not full.cut_off and "cut off" not in format_footer(full)


async def test_local_search_puts_the_entity_named_in_full_first(tmp_path):
    """BM25 favours short descriptions: "Port Vell Pilots" (one mention) ranked above "Port
    Vell" (twelve) for "Tell me about Port Vell"."""
    folder = tmp_path / "c"
    folder.mkdir()
    lines = [f"Port Vell welcomed trader number {i} from Kessel at dawn, and Port Vell sold grain, rope "
             "and lamp oil to the crews of Blue Heron and Grey Gull." for i in range(12)]
    (folder / "a.txt").write_text("\n\n".join(lines + ["The Port Vell Pilots met once."]) + "\n")
    settings = make_settings()
    db = tmp_path / "i.db"
    await sync([folder], settings, db, root=folder)
    answer = await aask("Tell me about Port Vell", settings, db, mode="local")
    store = Store(db, readonly=True)
    try:
        names = [store.scalar("SELECT name FROM entities WHERE id = ?", (e,))
                 for e in answer.details["entities"][:2]]
    finally:
        store.close()
    assert names == ["Port Vell", "Port Vell Pilots"]


def test_an_answer_is_given_when_another_program_holds_the_write_lock(llm_db, qs, caplog, monkeypatch):
    # ask records its run and caches its calls; with the index's write lock held past the wait
    # it streamed its answer, then failed with exit 1, having waited the index's whole 30 s
    # busy wait (and again for every write). Its writes are bookkeeping: it waits 2 s, once.
    # The waits run out are counted (each makes a busy error), not timed.
    gave_up: list[float | None] = []
    busy_error = Store.busy_error

    def counted(self, e=None, waited=None):
        gave_up.append(waited)
        return busy_error(self, e, waited)

    monkeypatch.setattr(Store, "busy_error", counted)
    holder = sqlite3.connect(llm_db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with caplog.at_level("WARNING", logger="streamrag"):
            answer = anyio.run(lambda: aask("Who is Mira Osk?", qs, llm_db, mode="local"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert answer.text and answer.documents
    said = [r.getMessage() for r in caplog.records if "the rest of this answer is not recorded or cached" in r.getMessage()]
    assert len(said) == 1 and "stayed locked by another process for 2 s" in said[0]
    assert gave_up == [2.0]     # one wait of 2 s, not one per write
    store = Store(llm_db, readonly=True)
    assert store.scalar("SELECT count(*) FROM runs WHERE command = 'ask' AND finished_at IS NULL") == 0
    store.close()


def test_an_answer_not_recorded_under_a_streamrag_writer_says_which_and_what_it_does(llm_db, qs, caplog):
    # The skip said "if another streamrag is writing it, let it finish, else stop the program
    # holding it": no advice for a `watch` that runs for good (and the answer was given by then).
    import os

    from streamrag.store import one_writer

    with one_writer(llm_db, "streamrag watch notes"):
        holder = sqlite3.connect(llm_db, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")   # (watch publishing, or emptying the log)
        try:
            with caplog.at_level("WARNING", logger="streamrag"):
                answer = anyio.run(lambda: aask("Who is Mira Osk?", qs, llm_db, mode="local"))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert answer.text
    said = [r.getMessage() for r in caplog.records if "not recorded or cached" in r.getMessage()]
    assert said == [f"{llm_db}: streamrag watch notes (pid {os.getpid()}) held its write lock past 2 s "
                    "(publishing a version, or emptying the index's write-ahead log after one); the rest of "
                    "this answer is not recorded or cached"]


def test_an_ask_made_while_the_log_is_emptied_is_recorded(tmp_path, simulator, qs, monkeypatch, caplog):
    # After a publish, `watch` and `index` empty a large write-ahead log (``store.bound_wal``),
    # waiting up to 30 s for the queries still reading older versions. The wait held the index's
    # write lock throughout: an ask made meanwhile waited its 2 s to record, gave up, and its
    # answer was paid for again when asked again (24 of 108 asks under a stress test).
    import threading
    import time

    from streamrag import store as store_module

    monkeypatch.setattr(store_module, "WAL_BOUND", 1)
    db = _build(tmp_path, simulator.base_url)
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM entities").fetchone()   # a query of this version ...
    newer = sqlite3.connect(db, isolation_level=None)
    newer.execute("INSERT INTO meta(key, value) VALUES ('pad', hex(randomblob(100000)))")   # ... and a newer one
    newer.close()
    ends = threading.Timer(4, reader.close)   # the query ends in 4 s: longer than ask waits to record
    emptied: list = []
    worker = threading.Thread(target=lambda: emptied.append(store_module.bound_wal(db)))
    ends.start()
    worker.start()
    try:
        time.sleep(0.3)   # (the emptying waits for the query)
        assert worker.is_alive()
        with caplog.at_level("WARNING", logger="streamrag"):
            answer = anyio.run(lambda: aask("Who is Mira Osk?", qs, db, mode="local"))
        assert worker.is_alive()   # (the ask was made while the log was being emptied)
    finally:
        worker.join(30)
        ends.cancel()
        reader.close()
    assert answer.text and answer.llm["calls"]
    assert not [r.getMessage() for r in caplog.records if "not recorded" in r.getMessage()]
    store = Store(db, readonly=True)
    try:
        run = store.query("SELECT id, status FROM runs WHERE command = 'ask'")
        assert [r["status"] for r in run] == ["ok"]
        assert store.scalar("SELECT count(*) FROM llm_calls WHERE run_id = ?", (run[0]["id"],)) == answer.llm["calls"]
    finally:
        store.close()
    assert emptied[0][0], emptied   # and the log was emptied all the same


def test_an_index_read_only_to_the_asker_is_answered_from_unrecorded(llm_db, qs, caplog, monkeypatch):
    # A read-only mount or another user's index: ask opened it for writing to record its run
    # and failed ("attempt to write a readonly database") without answering. Tests run as root,
    # so permissions cannot show it: the check of them says no in their place.
    from streamrag import query

    monkeypatch.setattr(query, "_writable", lambda db: False)
    store = Store(llm_db, readonly=True)
    before = [store.scalar(f"SELECT count(*) FROM {t}") for t in ("runs", "llm_calls", "llm_cache")]
    store.close()
    with caplog.at_level("WARNING", logger="streamrag"):
        answer = anyio.run(lambda: aask("Who is the harbor master?", qs, llm_db, mode="local"))
    assert answer.text and answer.documents and not answer.extractive
    said = [r.getMessage() for r in caplog.records if "not recorded or cached" in r.getMessage()]
    assert said == [f"{llm_db}: the index is read-only to you; this answer is not recorded or cached"]
    store = Store(llm_db, readonly=True)
    assert [store.scalar(f"SELECT count(*) FROM {t}") for t in ("runs", "llm_calls", "llm_cache")] == before
    store.close()


async def test_asking_an_index_being_built_says_who_builds_it(tmp_path):
    # During a watcher's first sync, ask said "is empty; build it with `streamrag index DIR`".
    from streamrag.errors import IndexMissingError
    from streamrag.store import one_writer

    db = tmp_path / "index.db"
    Store(db).close()                       # made, nothing published yet
    with pytest.raises(IndexMissingError, match="is empty; build it with"):
        await aask("What is here?", make_settings(), db)
    with one_writer(db, "streamrag watch notes"):
        with pytest.raises(IndexMissingError, match=r"has nothing published yet: pid \d+: streamrag watch "
                                                    r"notes is building it"):
            await aask("What is here?", make_settings(), db)


# --------------------------------------------------------------------------------------------
# Text in scripts written without spaces (Chinese, Japanese, Thai ...)
# --------------------------------------------------------------------------------------------
ZH_NEWS = ("东京是日本的首都。张伟在北京大学工作，他每天骑自行车上班。\n\n"
           "张伟和李娜一起去了上海，参观了外滩。李娜是一名医生。\n")


async def offline_index(tmp_path, texts: dict[str, str]):
    """(folder, settings, db): ``texts`` (file name -> text) in a folder, indexed offline."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")
    settings, db = make_settings(""), tmp_path / "i.db"
    await sync([folder], settings, db, root=folder)
    return folder, settings, db


async def test_offline_global_search_rates_no_report_for_a_word_sharing_the_stem_of_a_name(tmp_path):
    _folder, settings, db = await offline_index(tmp_path, {
        "tim.txt": "Tiny Tim sat by the fire beside Bob Cratchit. Bob Cratchit loved Tiny Tim.\n",
        "town.txt": "Scrooge walked to Camden Town three times that winter. Fred laughed at Scrooge.\n"})
    answer = await aask("Who is Tim?", settings, db, mode="global")
    # Two communities, Tim's and the town's: the town's "times" is no "Tim".
    assert sorted(answer.details["ratings"].values()) == [0, 5] and len(answer.details["selected"]) == 1
    assert answer.documents == ["tim.txt"] and "Tiny Tim sat by the fire" in answer.text


def _zh_folder(tmp_path):
    folder = tmp_path / "zh"
    folder.mkdir()
    (folder / "zh.txt").write_text(ZH_NEWS, encoding="utf-8")
    (folder / "en.txt").write_text("Ada Osk met Bo Lund in Oslo. Ada Osk runs the Quay Company.\n")
    return folder


async def test_chinese_text_is_found_by_basic_search_and_auto_mode_offline(tmp_path):
    # FTS5 took "张伟在北京大学工作" for one word, so no question found it in any mode.
    folder = _zh_folder(tmp_path)
    settings, db = make_settings(""), tmp_path / "i.db"
    await sync([folder], settings, db, root=folder)
    basic = await aask("张伟在哪里工作?", settings, db, mode="basic")
    assert "张伟在北京大学工作" in basic.text and basic.documents == ["zh.txt"]
    check_citations(basic, db)
    # Offline, the Chinese text gives no entity: auto mode's global search finds nothing, and
    # the source text answers instead - printed once, the answer that stands.
    streamed: list[str] = []
    auto = await aask("张伟在哪里工作?", settings, db, on_delta=streamed.append)
    assert auto.requested_mode == "auto" and auto.search == "basic" and auto.auto_choice == "basic"
    assert "found nothing for it, so the source text answers" in auto.auto_reason
    assert "".join(streamed) == auto.text and "张伟在北京大学工作" in auto.text
    assert auto.documents == ["zh.txt"]
    # Nothing anywhere: the first search's answer stands, and an English question is unchanged.
    nothing = await aask("月亮在哪里?", settings, db)
    assert nothing.search == "global_dynamic" and "nothing in the community reports" in nothing.text
    assert nothing.outcome == "no_answer"
    english = await aask("Who is Ada Osk?", settings, db)
    assert english.search == "local" and english.auto_choice == "local" and "Ada Osk met Bo Lund" in english.text
    asked = await aask("张伟在哪里工作?", settings, db, mode="global")   # a mode asked for is kept
    assert asked.search == "global_dynamic" and "no communities" not in asked.text
    assert "no community report was rated relevant" in asked.text and asked.outcome == "redirected"


async def test_auto_mode_on_an_index_without_communities_does_not_advise_the_search_it_made(tmp_path):
    folder = tmp_path / "zh"
    folder.mkdir()
    (folder / "zh.txt").write_text(ZH_NEWS, encoding="utf-8")
    settings, db = make_settings(""), tmp_path / "i.db"
    await sync([folder], settings, db, root=folder)
    found = await aask("张伟在哪里工作?", settings, db)
    assert found.search == "basic" and "张伟在北京大学工作" in found.text
    assert found.auto_reason == "the global search found nothing for it, so the source text answers"
    nothing = await aask("月亮在哪里?", settings, db)   # it said "Try `--mode basic`", just tried
    assert nothing.search == "basic" and "--mode basic" not in nothing.text
    assert (found.outcome, nothing.outcome) == ("answered", "no_answer")
    assert "nothing in the source text searched matches" in nothing.text
    # (its footer said "so the source text answers" below that answer of nothing)
    assert nothing.auto_reason == ("the global search found nothing for it, so the source text was searched: "
                                   "it has nothing either"), nothing.auto_reason


async def test_auto_mode_falls_back_from_a_global_answer_sharing_one_word_of_the_question(tmp_path):
    # A report's sentence sharing one word ("fall", of "fell") of "Who fell upon his knees?" was
    # auto mode's answer, while the text says who fell upon his knees (A Christmas Carol: "I have
    # seen your nobler aspirations fall off one by one" for "Scrooge fell upon his knees").
    _folder, settings, db = await offline_index(tmp_path, {
        "harvest.txt": "Ada Osk told Bo Lund in Oslo that the harvest would fall short.\n",
        "gate.txt": "It was late. The old porter fell upon his knees at the gate, and wept.\n"})
    asked = await aask("Who fell upon his knees?", settings, db, mode="global")   # (a mode asked for is kept)
    assert asked.search == "global_dynamic" and "the harvest would fall short" in asked.text
    streamed: list[str] = []
    auto = await aask("Who fell upon his knees?", settings, db, on_delta=streamed.append)
    assert auto.search == "basic" and auto.auto_choice == "basic" and auto.documents == ["gate.txt"]
    assert "".join(streamed) == auto.text and "The old porter fell upon his knees" in auto.text
    assert auto.auto_reason == ("the global search's best sentence has 1 of the question's 2 words, the "
                                "source text's 2, so the source text answers")
    check_citations(auto, db)
    # A report's sentence with every word of the question stands. (Offline, a question whose
    # words the reports write as the question does goes local: its entities' descriptions have them.)
    whole = await aask("Who fell?", settings, db)
    assert whole.search == "global_dynamic" and whole.auto_choice == "global"
    assert "the harvest would fall short" in whole.text and whole.documents == ["harvest.txt"]


async def test_auto_mode_keeps_the_overview_of_a_question_global_search_finds_no_words_in(tmp_path):
    # "What is the story about?" asks about the whole collection: global search rates reports by
    # none of its words ("story" is one for the collection) and quotes their overview. Basic
    # search's words have "story", which no report sentence has: its sentence saying "story"
    # (A Christmas Carol: "nothing wonderful can come of the story I am going to relate") was
    # quoted instead, as if it said what the story is about.
    _folder, settings, db = await offline_index(tmp_path, {
        "harvest.txt": "Ada Osk told Bo Lund in Oslo that the harvest would fall short.\n",
        "gate.txt": "It was late. The old porter told a story at the gate, and wept.\n"})
    auto = await aask("What is the story about?", settings, db)
    assert auto.search == "global_dynamic" and auto.auto_choice == "global", auto.auto_reason
    assert "The old porter told a story" not in auto.text


def _zh_extract(messages):
    from streamrag.simulator import section

    if "张伟" not in (section(messages, "text") or ""):
        return ANSWERS["extract"](messages)
    return ("entity | 张伟 | person | 张伟在北京大学工作，每天骑自行车上班。\n"
            "entity | 北京大学 | organization | 张伟工作的大学。\n"
            "entity | 李娜 | person | 李娜是一名医生，和张伟去了上海。\n"
            "relation | 张伟 | 北京大学 | 8 | 张伟在北京大学工作。\n"
            "relation | 张伟 | 李娜 | 6 | 张伟和李娜一起去了上海。\n"
            "done")


async def test_entities_named_in_chinese_are_found_by_local_search(tmp_path):
    folder = _zh_folder(tmp_path)
    settings, db = make_settings("http://model.test/v1", index=INDEX), tmp_path / "i.db"
    transport = mock({"extract": _zh_extract, "glean_check": lambda m: "NO"})
    await sync([folder], settings, db, root=folder, transport=transport)
    store = Store(db, readonly=True)
    try:
        ids = {r["name"]: r["id"] for r in store.query("SELECT id, name FROM entities")}
        assert {"张伟", "李娜", "北京大学"} <= set(ids)
        assert choose_mode(store, "李娜是做什么工作的?") == ("local", "the question names 李娜")
        assert choose_mode(store, "这些文件的主要主题是什么?") == (   # "the main themes of these files"
            "global", "the question asks about the collection as a whole (主要, 主题)")
        for question, cues in (("Quels sont les thèmes principaux ?", "principaux, themes"),
                               ("Was sind die Hauptthemen?", "hauptthemen"),
                               ("¿Cuáles son los temas principales?", "principales, temas")):
            assert choose_mode(store, question) == (
                "global", f"the question asks about the collection as a whole ({cues})"), question
    finally:
        store.close()
    answer = await aask("李娜是做什么工作的?", settings, db, transport=transport)
    assert answer.search == "local" and answer.details["entities"][0] == ids["李娜"]


async def test_an_older_index_of_text_with_invisible_characters_inside_words_is_searched_anew(tmp_path):
    # Questions lost the invisible characters inside words, and an index built before kept the
    # words they split: the Sinhala ශ්‍රී (a zero-width joiner inside) was no longer found.
    from streamrag.store import MIGRATIONS

    folder, settings, db = await offline_index(tmp_path, {
        "a.txt": "Si\u200blas Ostius visited ශ්\u200dරී Lanka with Ada Osk.\n",
        "b.txt": "Mira Osk stayed home all summer long.\n",
    })
    store = Store(db)   # as the schema before left it: words split at those characters
    with store.transaction() as conn:
        for table, cols in (("chunks_fts", ("text",)), ("entities_fts", ("name", "description"))):
            for row in conn.execute(f"SELECT rowid, {', '.join(cols)} FROM {table}").fetchall():
                conn.execute(f"UPDATE {table} SET {', '.join(c + ' = ?' for c in cols)} WHERE rowid = ?",
                             [v.replace("silas", "si las").replace("ශ්රී", "ශ් රී") for v in row[1:]] + [row[0]])
        before = [name for name, _sql in MIGRATIONS].index("fts_invisible")   # (the schema before it)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(before),))
    store.close()
    store = Store(db, readonly=True)   # upgraded, then read
    try:
        for word in ("silas", "ශ්රී"):
            assert [r[0] for r in local_search.fts_chunks(store, word, 5)], word
    finally:
        store.close()


async def test_an_older_index_of_chinese_text_is_made_searchable(tmp_path):
    folder = _zh_folder(tmp_path)
    settings, db = make_settings(""), tmp_path / "i.db"
    await sync([folder], settings, db, root=folder)
    store = Store(db)   # as schema 2 left it: the text as written, the tokenizer's default
    with store.transaction() as conn:
        conn.execute("DROP TABLE chunks_fts")
        conn.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(id UNINDEXED, text)")
        conn.execute("INSERT INTO chunks_fts(id, text) SELECT id, text FROM chunks")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    store.close()
    answer = await aask("张伟在哪里工作?", settings, db, mode="basic")   # upgraded, then read
    assert "张伟在北京大学工作" in answer.text


async def test_an_extractive_answer_lists_first_the_documents_that_hold_its_quotes(tmp_path):
    # A quoted report sentence rests on every document of the community: the file holding the
    # quote was 294th of 791 listed.
    folder, settings, db = await offline_index(tmp_path, {
        f"n{i:03d}.txt": f"Day {i}: Ada Osk visited Oslo with Bo Lund and spoke about harbour number {i} at length.\n"
        for i in range(60)})
    for mode in ("global", "local"):
        answer = await aask("Who visited Oslo on day 42?", settings, db, mode=mode)
        quote = re.search(r"^- (Day \d+):", answer.text, re.MULTILINE)
        assert quote, answer.text
        assert len(answer.documents) == 60
        assert (folder / answer.documents[0]).read_text().startswith(quote.group(1) + ":"), (mode, answer.documents[:3])



async def test_a_quoted_context_line_finds_its_document_past_its_label(tmp_path):
    # A local context line starts with a label ("A -- B: ", "Name (type): ") and an element's
    # description may join sentences of several documents: only the first four words were left
    # out, so the document saying the line was not found and another was listed first.
    folder, settings, db = await offline_index(tmp_path, {
        "a.txt": "Harbor Workers Union -- Esme Coranti chat. Esme Coranti likes tea and long walks.\n",
        "b.txt": "Colleagues at the union describe Esme Coranti, its director, as meticulous.\n",
        "c.txt": "The union was founded in 1921 by dock workers of the old harbor.\n",
    })
    store = Store(db, readonly=True)
    try:
        order = citations.quoted_first(store, [
            ("Harbor Workers Union -- Esme Coranti: Colleagues at the union describe Esme Coranti, its director, "
             "as meticulous. The union was founded in 1921 by dock workers of the old harbor.", "[L:rel-1]"),
            ("Esme Coranti (person): Esme Coranti likes tea and long walks.", "[E:ent-1]")],
            ["a.txt", "b.txt", "c.txt"])
    finally:
        store.close()
    assert order == ["b.txt", "c.txt", "a.txt"]


async def test_a_quoted_stock_phrase_finds_the_document_of_the_one_who_said_it(tmp_path):
    # Each sentence of a context line was looked for by its first 12 words, which a stock quote
    # fills before its speaker's name: every document held them, and the first listed (by path)
    # was not the one that said it.
    said = '"We are confident this is the right step for everyone involved," said {}.\n'
    folder, settings, db = await offline_index(tmp_path, {
        "a.txt": said.format("Ada Osk"), "b.txt": said.format("Bo Tan"), "c.txt": said.format("Cy Lund")})
    store = Store(db, readonly=True)
    try:
        order = citations.quoted_first(store, [
            ('Cy Lund (person): "We are confident this is the right step for everyone involved," said Cy Lund.',
             "[E:ent-1]")], ["a.txt", "b.txt", "c.txt"])
    finally:
        store.close()
    assert order[0] == "c.txt"


async def test_a_quote_of_source_text_lists_its_own_document_first(tmp_path):
    # The phrase search also matched a longer sentence elsewhere ("... Marathon 2034"), and ties
    # went by path: the first document listed did not hold the quote.
    folder, settings, db = await offline_index(tmp_path, {
        "a.txt": "Dorell Semiconductors organised the Lake Marathon 2034 in the rain.\n",
        "b.txt": "Dorell Semiconductors organised the Lake Marathon. It was a fine day.\n",
    })
    store = Store(db, readonly=True)
    try:
        chunk = store.scalar("SELECT dc.chunk_id FROM document_chunks dc JOIN documents d ON d.id = dc.doc_id "
                             "WHERE d.path = 'b.txt'")
        order = citations.quoted_first(store, [("Dorell Semiconductors organised the Lake Marathon.",
                                                f"[T:{chunk}]")], ["a.txt", "b.txt"])
    finally:
        store.close()
    assert order == ["b.txt", "a.txt"]


def test_documents_cited_as_often_come_in_the_order_first_cited(tmp_path):
    # Equally cited documents were listed by file name: a basic answer's first citation could be
    # its 3rd document.
    db = tmp_path / "i.db"
    store = Store(db)
    with store.conn:
        for doc, chunk in (("d1", "c1"), ("d2", "c2"), ("d3", "c3")):
            store.conn.execute("INSERT INTO documents(id, title, path, tokens, chars) VALUES (?, ?, ?, 1, 1)",
                               (doc, doc, f"{doc}.txt"))
            store.conn.execute("INSERT INTO document_chunks(doc_id, idx, chunk_id) VALUES (?, 0, ?)", (doc, chunk))
    try:
        text, cited, dropped, documents = citations.check(
            store, "x [T:c3] y [T:c1] z [T:c2]", ["[T:c1]", "[T:c2]", "[T:c3]"])
    finally:
        store.close()
    assert documents == ["d3.txt", "d1.txt", "d2.txt"] and not dropped


def test_a_citation_cut_in_two_by_the_length_limit_is_dropped():
    from streamrag.citations import without_open_citation

    assert without_open_citation("Scrooge relents [R:C3]. Fred stays [R:C24") == "Scrooge relents [R:C3]. Fred stays"
    assert without_open_citation("He left [") == "He left"
    assert without_open_citation("He left [E") == "He left"
    assert without_open_citation("Whole [R:C3]") == "Whole [R:C3]"
    assert without_open_citation("A list [x] of [T:c1] and more") == "A list [x] of [T:c1] and more"
    assert without_open_citation("list [E: 1\n\n2\n3") == "list [E: 1\n\n2\n3"   # not across lines


@pytest.mark.parametrize("cut_off", [True, False])
def test_a_streamed_citation_is_shown_once_it_closes_and_not_when_cut_in_two(tmp_path, monkeypatch, capsys,
                                                                             cut_off):
    # The terminal showed "... in Paris. [E:ent-960fb" when the length limit cut the answer there.
    from streamrag import query
    from streamrag.cli import main

    pieces = ["Ada met Bram ", "[R:", "C3] in Harlow", " [1]. Then Paris. [E:ent-9", "60fb"]
    if not cut_off:
        pieces.append("] and home.")

    def answering(question, settings, db, *, on_delta=None, **kwargs):
        shown = []
        for piece in pieces:
            on_delta(piece)
            shown.append(capsys.readouterr().out)   # what the terminal has so far
        answering.shown = shown
        return query.Answer(question=question, requested_mode="auto", mode="local", search="local",
                            text="".join(pieces), cut_off=cut_off)

    monkeypatch.setattr(query, "ask", answering)
    monkeypatch.chdir(tmp_path)
    Store(tmp_path / "i.db").close()   # (ask refuses a --db with no index there before asking)
    assert main(["ask", "--db", str(tmp_path / "i.db"), "Where did Ada meet Bram?"]) == 0
    out = "".join(answering.shown) + capsys.readouterr().out
    assert answering.shown[1] == "" and answering.shown[2] == "[R:C3] in Harlow"   # held until it closed
    first_line = out.splitlines()[0]
    if cut_off:
        assert first_line == "Ada met Bram [R:C3] in Harlow [1]. Then Paris."
    else:
        assert first_line == "Ada met Bram [R:C3] in Harlow [1]. Then Paris. [E:ent-960fb] and home."


def test_a_library_callers_sigterm_handler_is_left_alone(offline_db, monkeypatch):
    # query.ask took SIGTERM itself, and on its way out left the default in place of the
    # caller's handler (a server's worker would then die of its next SIGTERM).
    import signal

    from streamrag.query import ask

    monkeypatch.delenv("STREAMRAG_API_BASE", raising=False)
    mine = lambda *_a: None   # noqa: E731
    previous = signal.signal(signal.SIGTERM, mine)
    try:
        ask("What are the main themes?", make_settings(""), offline_db, mode="global")
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


async def test_asking_a_model_built_index_without_an_endpoint_says_so(llm_db, monkeypatch, caplog):
    # Run where the settings file is not found, `ask` answered extractively without a word.
    import logging

    monkeypatch.delenv("STREAMRAG_API_BASE", raising=False)
    with caplog.at_level(logging.WARNING, logger="streamrag"):
        answer = await aask("Who rebuilt the quay?", make_settings(""), llm_db, mode="local")
    assert answer.extractive and answer.text.startswith(EXTRACTIVE_LABEL)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("no endpoint is set (llm.api_base, STREAMRAG_API_BASE or --api-base), though a "
                            "model built this index") for m in said), said


async def test_the_ask_and_the_run_read_built_by_a_model_by_one_rule(offline_db, monkeypatch, caplog):
    # ``pipeline.check_not_downgraded`` and ``aask`` each wrote the "llm-" mark's rule out; one
    # rule now (``index_rows.model_extractor``): told that this offline index is a model's, both
    # say so, the ask its warning, the run its refusal.
    import logging

    from streamrag.errors import ConfigError
    from streamrag.pipeline import check_not_downgraded

    assert index_rows.model_extractor("llm-0123456789ab") and not index_rows.model_extractor("nlp-0123456789ab")
    assert not index_rows.model_extractor(None)
    monkeypatch.delenv("STREAMRAG_API_BASE", raising=False)
    settings = make_settings("")
    store = Store(offline_db, readonly=True)
    try:
        assert not index_rows.built_by_model(store)
        check_not_downgraded(settings, store, offline_db)   # (built offline: nothing to refuse)
        monkeypatch.setattr(index_rows, "model_extractor", lambda extractor: extractor.startswith("nlp-"))
        assert index_rows.built_by_model(store)
        with pytest.raises(ConfigError, match="this index was built with a model, and no endpoint is set"):
            check_not_downgraded(settings, store, offline_db)
    finally:
        store.close()
    with caplog.at_level(logging.WARNING, logger="streamrag"):
        await aask("Who rebuilt the quay?", settings, offline_db, mode="local")
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("no endpoint is set (llm.api_base, STREAMRAG_API_BASE or --api-base), though a "
                            "model built this index") for m in said), said


def test_a_local_context_reads_no_part_of_chunk_texts_past_the_one_it_filled_in():
    # Its text section full on the last chunk of a part read (8, then 16, ...), the next part
    # was read all the same, for nothing.
    for full_after in (3, 8, 24, 25):
        asked: list[str] = []
        taken: list[str] = []

        def read(ids):
            asked.extend(ids)
            return [(i, "text") for i in ids]

        chunks = [{"id": f"chk-{i:02d}"} for i in range(40)]
        for c, _text in local_search._with_texts(chunks, read, until=lambda: len(taken) == full_after):
            taken.append(c["id"])
        assert len(taken) == full_after
        assert len(asked) == min(b for b in (8, 24, 40) if b >= full_after), (full_after, len(asked))


def test_a_local_context_of_chunks_read_as_it_takes_them_is_that_of_their_texts_given():
    # ``load_local_data`` reads no chunk text: the text section reads them a few at a time as it
    # goes, and stops once it has no room for a line of a word. A short chunk after long ones it
    # had no room for still goes in, and a chunk no longer stored is left out.
    ents = [{"id": "ent-a", "name": "A", "type": "person", "description": "first"}]
    texts = {f"chk-{i:02d}": ("word " * 300 if i != 30 else "a short\n chunk") for i in range(40)}
    given = [{"id": c, "text": t, "hits": 1, "rank": 0} for c, t in texts.items() if c != "chk-35"]
    bare = [{"id": c, "hits": 1, "rank": 0} for c in texts]
    stops, short_taken = set(), False
    for max_tokens in range(1800, 2000, 9):
        asked: list[str] = []

        def read(ids):
            asked.extend(ids)
            return [(i, texts[i]) for i in ids if i != "chk-35"]

        whole = local_search.build_local_context(local_search.LocalData(ents, [], [], given, []),
                                                 max_tokens=max_tokens, text_share=0.5, community_share=0.1)
        ctx = local_search.build_local_context(local_search.LocalData(ents, [], [], bare, []),
                                               max_tokens=max_tokens, text_share=0.5, community_share=0.1,
                                               texts=read)
        assert ctx == whole
        assert {t[3:-1] for t in ctx.tags if t.startswith("[T:")} <= set(asked)
        stops.add(len(asked) < len(texts))
        short_taken |= "[T:chk-30]" in ctx.tags
    assert stops == {True, False} and short_taken   # (a section left with room for a short line reads on)


def test_the_entity_a_question_names_anchors_every_section_of_the_local_context():
    """The named entity's relationships, the chunks mentioning it and the reports of its
    communities come before those tying other selected entities together (which came first)."""
    ents = [{"id": f"ent-{i}", "name": f"Name {i}", "type": "person", "description": f"desc {i}"}
            for i in range(3)]

    def rel(rid, source, target, degree):
        return {"id": rid, "source": source, "target": target, "source_name": source,
                "target_name": target, "description": f"about {rid}", "weight": 1.0,
                "combined_degree": degree, "source_type": "person", "target_type": "organization"}

    rels = [rel("rel-both", "ent-1", "ent-2", 50),    # both ends selected, not the anchor
            rel("rel-own", "ent-0", "ent-x", 1)]      # the anchor's own, reaching outside
    chunks = [{"id": "chk-busy", "text": "busy", "hits": 2, "rank": 1, "anchor_hits": 0},
              {"id": "chk-own", "text": "own", "hits": 1, "rank": 0, "anchor_hits": 1}]
    reports = [{"community": "C1", "level": 1, "title": "t", "summary": "s", "hits": 2, "anchor_hits": 0},
               {"community": "C2", "level": 0, "title": "t", "summary": "s", "hits": 1, "anchor_hits": 1}]
    data = local_search.LocalData(ents, rels, [], chunks, reports)
    ctx = local_search.build_local_context(data, max_tokens=2000, text_share=0.25,
                                           community_share=0.25, anchors=["ent-0"])
    assert [t for t in ctx.tags if t[:3] in ("[L:", "[T:", "[R:")] == [
        "[L:rel-own]", "[L:rel-both]", "[R:C2]", "[R:C1]", "[T:chk-own]", "[T:chk-busy]"]
    assert ctx.types == {"ent-0": "person", "ent-1": "person", "ent-2": "organization",
                         "ent-x": "organization", "Name 0": "person", "Name 1": "person",
                         "Name 2": "person"}


def test_pick_sentences_puts_the_named_entitys_facts_before_rare_words_about_others():
    """Every passage of a local context is about the anchor, so its name weighs little by
    rarity: a sentence about someone else sharing one rare question word came first."""
    passages = [("[R:C1]", "Lomden Logistics (organization) leads the region."),
                ("[E:e1]", "Ada Osk chairs the board. Ada Osk likes tea. Ada Osk sings. Ms. Osk rows."),
                ("[E:e2]", "Bo Tan was born in Pellric.")]
    picked = pick_sentences("Which organization was Ada Osk born in?", passages, anchors=["Ada Osk"])
    assert [p[0] for p in picked] == ["Ada Osk chairs the board.", "Ada Osk likes tea.", "Ada Osk sings.",
                                      "Ms. Osk rows.",        # half the name: before the others
                                      "Lomden Logistics (organization) leads the region.",
                                      "Bo Tan was born in Pellric."]


def test_pick_sentences_gives_no_anchor_credit_for_words_of_another_entitys_name():
    """'What did the Ghost of Christmas Past show Scrooge?' ranked a line about the Ghost of
    Christmas Yet third in A Christmas Carol: two of the anchor's three words were in it."""
    types = {"Ghost of Christmas Past": "person", "Ghost of Christmas Yet": "person", "Scrooge": "person",
             "Christmas": "event"}
    passages = [("[E:e2]", "Ghost of Christmas Yet (person): The Ghost of Christmas Yet pointed onward, "
                           "said Scrooge."),
                ("[E:e3]", "Scrooge walked home alone. The Ghost showed Scrooge a boarding school."),
                ("[E:e1]", "Ghost of Christmas Past (person): The Ghost of Christmas Past took Scrooge "
                           "to his old school.")]
    picked = [t for _s, t, _ in pick_sentences("What did the Ghost of Christmas Past show Scrooge?", passages,
                                               anchors=["Ghost of Christmas Past", "Scrooge"], types=types)]
    assert picked[:3] == ["[E:e1]", "[E:e3]", "[E:e2]"], picked
    # Part of the anchor's own name still counts ("the Ghost"), as does the whole name beside another.
    both = ("[E:e4]", "The Ghost of Christmas Past met the Ghost of Christmas Yet.")
    picked = pick_sentences("Ghost of Christmas Past?", [passages[0], both], anchors=["Ghost of Christmas Past"],
                            types=types)
    assert picked[0][1] == "[E:e4]"


def test_pick_sentences_gives_a_name_written_by_its_own_word_the_whole_anchors_credit():
    """A news text names a person in full once, then by surname: "Torquay said at a briefing"
    had half the anchor's credit, so every sentence writing "Kenji Torquay" (saying nothing of a
    briefing) came first. A word of the name no other name has counts for the whole name, but
    not after a title (Mrs. Cratchit is not Bob), nor beside another word (Dmitri Iskton is
    not Dmitri Quinquay), nor in lower case, nor of a name with a stop word ("the Present")."""
    types = {"Kenji Torquay": "person", "Kenji Fenvell": "person", "Torford Heights": "geo"}
    passages = [("[E:e1]", "Kenji Torquay (person): Kenji Torquay grew up in Torford Heights. Kenji Torquay "
                           "spoke at the summit. Kenji Fenvell joined Kenji Torquay in Torford Heights."),
                ("[T:t1]", '"The numbers speak for themselves," Torquay said at a briefing.')]
    first = lambda q, ps, **kw: pick_sentences(q, ps, limit=1, **kw)[0][0]
    assert first("What did Kenji Torquay say at the briefing?", passages, anchors=["Kenji Torquay"],
                 types=types) == '"The numbers speak for themselves," Torquay said at a briefing.'
    # Written after a title, beside a word of no name of the anchor's, or in lower case: half.
    for other in ("Mrs. Torquay said at a briefing.", "Lake Torquay said at a briefing.",
                  "The torquay said at a briefing."):
        got = first("What did Kenji Torquay say at the briefing?", [passages[0], ("[T:t1]", other)],
                    anchors=["Kenji Torquay"], types=types)
        assert got.endswith("Kenji Torquay grew up in Torford Heights."), (other, got)
    ghost = [("[E:e1]", "The Ghost of Christmas Present sat on a throne."),
             ("[T:t1]", "'I will live in the Past, the Present, and the Future!' cried Scrooge.")]
    assert first("What did the Ghost of Christmas Present say of the Future?", ghost,
                 anchors=["Ghost of Christmas Present"]) == "The Ghost of Christmas Present sat on a throne."


def test_pick_sentences_counts_the_whole_name_of_an_anchor_named_by_its_own_word():
    """'What did Priya Halick say at the briefing?' (news41): "Halick said at a briefing" had the
    anchor's whole credit but matched "halick" alone of the question's words, so a sentence
    writing "Priya Halick" and nothing of a briefing came first wherever other people's
    briefings made "briefing" commoner than "priya" (a local context taking a chunk of them)."""
    types = {"Priya Halick": "person", "Zora Veltane": "person", "Tomas Quill": "person"}
    passages = [("[E:e1]", 'Priya Halick (person): "I would not call it a setback," Priya Halick insisted.'),
                ("[L:l1]", '"The numbers speak for themselves," Halick said at a briefing.'),
                ("[T:t1]", "Zora Veltane said at a briefing. Tomas Quill spoke at a briefing. "
                           "Zora Veltane left the briefing early.")]
    picked = pick_sentences("What did Priya Halick say at the briefing?", passages, anchors=["Priya Halick"],
                            types=types)
    assert picked[0][0] == '"The numbers speak for themselves," Halick said at a briefing.', picked


def test_pick_sentences_gives_no_whole_anchors_credit_for_a_letter_of_its_name():
    """A letter of a name ("O" of "Sean O'Brien", "R" of "John R. Ewing") names no one alone: the
    "O" of "O'Neill said at the count" gave Sean O'Brien the whole of his credit, so O'Neill's
    words came before a line filed under O'Brien (named in its label: half), and "R said" before
    "Mr. Ewing said" (a title the extractor drops: whole, as "Ewing said" is)."""
    types = {"Sean O'Brien": "person", "Penmarth": "geo"}
    passages = [("[L:r1]", "Penmarth -- Sean O'Brien: The count in Penmarth ended at midnight."),
                ("[T:t1]", '"Roads come first," O\'Neill said at the count.')]
    got = [s for s, _tag, _score in pick_sentences("What did Sean O'Brien say at the count?", passages,
                                                   anchors=["Sean O'Brien"], types=types)]
    assert got[0].startswith("Penmarth -- Sean O'Brien: "), got
    ewing = [("[E:e1]", "John R. Ewing (person): John R. Ewing runs the ranch."),
             ("[T:t1]", "R said the auction was closed. Mr. Ewing said the auction was over.")]
    got = [s for s, _tag, _score in pick_sentences("What did John R. Ewing say at the auction?", ewing,
                                                   anchors=["John R. Ewing"], types={"John R. Ewing": "person"})]
    assert got.index("Mr. Ewing said the auction was over.") < got.index("R said the auction was closed."), got


def test_pick_sentences_gives_no_whole_anchors_credit_for_a_given_name_opening_a_sentence():
    """At a sentence's start every word is capitalised: "Rose petals covered the steps at the
    council meeting." named Rose Tyler as wholly as her full name does, and came first for "What
    did Rose Tyler say at the council meeting?", before her words; "Mark the date" likewise for
    Mark Fenton. There only the last word of the name (her surname: "Tyler, the chair, ...")
    counts for the whole; a given name opening a sentence counts as itself (half), as before."""
    types = {"Rose Tyler": "person", "Mark Fenton": "person", "Penmarth": "geo"}
    facts = ("[E:e1]", "Rose Tyler (person): Rose Tyler chairs the Penmarth Harbour Trust. Mark Fenton leads "
                       "the Penmarth Ferry Union.")
    text = ("[T:t1]", 'Rose petals covered the steps at the council meeting. "We will rebuild the pier," Tyler '
                      'said at the council meeting. Tyler, the chair, spoke first at the council meeting. "Nobody '
                      'wins a strike," Mr. Fenton told reporters. Mark the date: the ferries run on Monday, '
                      'the operator told reporters.')
    ask = lambda q, anchor: [s for s, _tag, _score in pick_sentences(q, [facts, text], anchors=[anchor], types=types)]
    got = ask("What did Rose Tyler say at the council meeting?", "Rose Tyler")
    assert got[:2] == ['"We will rebuild the pier," Tyler said at the council meeting.',
                       "Tyler, the chair, spoke first at the council meeting."], got
    got = ask("What did Mark Fenton tell reporters?", "Mark Fenton")
    assert got.index('"Nobody wins a strike," Mr. Fenton told reporters.') < got.index(
        "Mark the date: the ferries run on Monday, the operator told reporters."), got


@pytest.mark.parametrize("titled", ["Mr. Pellmont", "Ms. Pellmont", "Dr. Pellmont", "Prof. Pellmont", "Mr Pellmont"])
def test_pick_sentences_gives_a_surname_after_a_title_the_extractor_drops_the_whole_anchors_credit(titled):
    """A title the offline extractor drops from a name ("Mr.", "Ms.", "Dr." ...: "Mr. Fezziwig"
    and "Fezziwig" are one person) gave a surname half the anchor's credit, where the bare
    surname has all of it: "Mr. Pellmont said at a briefing" (gen913) was quoted 8th for "What
    did Valentin Pellmont say at the briefing?" before b283cc6 and not at all after it, every
    sentence writing his full name or his bare surname coming first. A title the extractor keeps
    ("Mrs." a wife's, "Miss" a daughter's, "Captain" ...), another abbreviation or an initial
    still names someone else (half)."""
    types = {"Valentin Pellmont": "person", "Valentin Ostric": "person", "Iskwin Holdings": "organization"}
    facts = ("[E:e1]", "Valentin Pellmont (person): Valentin Pellmont founded Iskwin Holdings. Valentin "
                       "Pellmont hired Valentin Ostric in 2030.")
    first = lambda said: pick_sentences("What did Valentin Pellmont say at the briefing?", [facts, ("[T:t1]", said)],
                                        anchors=["Valentin Pellmont"], types=types, limit=1)[0][0]
    said = f'"The numbers speak for themselves," {titled} said at a briefing.'
    assert first(said) == said
    for other in ("Mrs.", "Miss", "Capt.", "St.", "T."):
        said = f'"The numbers speak for themselves," {other} Pellmont said at a briefing.'
        assert first(said).endswith("Valentin Pellmont founded Iskwin Holdings."), other


@pytest.mark.parametrize("dated", ["The lock opened at last in May.", "The lock opened on May 5 after repairs.",
                                   "The lock opened last May after repairs.", "The lock opened 5 May after repairs."])
def test_pick_sentences_gives_a_month_written_as_a_date_no_whole_anchors_credit(dated):
    """A given name that is a month ("May" of May Holloway, no other name's) counted for her
    whole name wherever a text dated something in May: "The lock opened at last in May." came
    before "May Holloway is the harbour master." for "What did May Holloway say about the lock?".
    A month after a preposition ("in May", "last May") or beside a number counts as itself
    (half); "May" as a name in a sentence's middle still counts whole."""
    types = {"May Holloway": "person", "Penmarth": "geo"}
    ask = lambda q, text: [s for s, _tag, _score in pick_sentences(
        q, [("[T:t1]", text)], anchors=["May Holloway"], types=types)]
    got = ask("What did May Holloway say about the lock?",
              f"May Holloway is the harbour master. May Holloway trained the keepers. {dated}")
    assert got.index("May Holloway is the harbour master.") < got.index(dated), got
    got = ask("What did May Holloway say about the lock gates?",
              "May Holloway is the harbour master. At the quay, May spoke about the lock gates.")
    assert got[0] == "At the quay, May spoke about the lock gates.", got


@pytest.mark.parametrize("said", ['"Keep the gates shut," said May.', "Officials said that May wants the gates shut.",
                                  "The crews listened to May about the gates.",
                                  "The crews argued with May about the gates.",
                                  "The keepers stood beside May about the gates.",
                                  "The keepers spoke about May and the gates."])
def test_pick_sentences_gives_a_month_as_a_name_the_whole_anchors_credit_but_after_a_time_or_place(said):
    """bd68c4ce took a month ending its sentence or after "that" or "to" for a date, and such a
    "May" (of May Holloway, no other name's) had half her credit: '"Keep the gates shut," said
    May.' came after "May Holloway is the harbour master." for a question about the gates; then
    fe298660 dated a month after any preposition of ``sentences.TITLE_SMALL`` but "to" ("with
    May", "beside May", "about May"). Only a preposition of place or time ("in May", "until
    June"), last/next/this or a number make a month a date."""
    types = {"May Holloway": "person", "Penmarth": "geo"}
    got = [s for s, _tag, _score in pick_sentences(
        "What did May Holloway say about the gates?",
        [("[T:t1]", f"May Holloway is the harbour master. May Holloway trained the keepers. {said}")],
        anchors=["May Holloway"], types=types)]
    assert got[0] == said, got


@pytest.mark.parametrize("anchor, own, more, other", [
    ("Mrs. Hallam", "Mrs. Hallam keeps the bakery on the quay.", "",
     "At the market, Mrs. Jones said the bread was late."),
    ("Sir Walter Pennick", "Sir Walter Pennick owns the mill by the weir.", "Sir Walter Pennick built the weir.",
     '"Yes, Sir," the clerk said at the market about the bread.')])
def test_pick_sentences_gives_a_title_alone_no_whole_anchors_credit(anchor, own, more, other):
    """A title was one of the anchor's own words, so a sentence writing it for someone else ("Mrs.
    Jones", "Yes, Sir,") named the anchor as wholly as its full name, and came first for "What did
    Mrs. Hallam say at the market?" by the question's other words. A title names no one alone."""
    types = {anchor: "person", "Penmarth": "geo"}
    got = [s for s, _tag, _score in pick_sentences(
        f"What did {anchor} say at the market about the bread?", [("[T:t1]", f"{own} {more} {other}")],
        anchors=[anchor], types=types)]
    assert got[0] == own, got


@pytest.mark.parametrize("top_k", [10, 1])
async def test_an_offline_local_answer_weighs_a_surname_the_same_whatever_namesakes_its_context_holds(tmp_path, top_k):
    """A surname is the asked person's own word only where no other name has it, and that was
    checked against the context's names: "Brandt said at the regatta" counted for all of Anna
    Brandt with query.local_top_k = 1 (Otto Brandt, of another document, not seeded) and for half
    with 10 (seeded by the question's "Brandt"), so the answer's first sentence depended on the
    setting. The index's names are asked too (``query._namesakes``): half either way."""
    corpus = tmp_path / "news"
    corpus.mkdir()
    (corpus / "anna.txt").write_text(
        "Rowing Club Results\n\nAnna Brandt chairs the Penmarth Rowing Club. Anna Brandt won the single sculls "
        'at the regatta in 2029.\n\n"We sail at dawn," Brandt said at the regatta, where the club rowed in the final.\n')
    (corpus / "otto.txt").write_text("Shipping News\n\nOtto Brandt founded Brandt Shipping in Hamburg in 1998. Otto "
                                     "Brandt owns eleven cargo ships and a yard in Kiel.\n")
    settings = make_settings("", query={"local_top_k": top_k})
    await sync([corpus], settings, tmp_path / "index.db", root=corpus)
    answer = await aask("What did Anna Brandt say at the regatta about sailing at dawn?", settings,
                        tmp_path / "index.db", mode="local")
    quoted = [sentence for sentence, _tag in quotes(answer.text)]
    assert quoted.index("Anna Brandt won the single sculls at the regatta in 2029.") < quoted.index(
        '"We sail at dawn," Brandt said at the regatta, where the club rowed in the final.'), quoted


@pytest.mark.parametrize("mode", ["global", "local"])
@pytest.mark.parametrize("question", ["What is the group around Mira Osk?", "Who is in the community around Henrik Salo?"])
async def test_an_offline_answer_about_a_community_itself_quotes_its_overview(offline_db, question, mode):
    """A question about a community as a whole is answered by its report's overview ("4 entities
    and 6 relationships around ..."), which 85cc390 quoted after every sentence of the documents
    for any question (4th or 6th here, and not at all in 11 of 22 such asks on five corpora).
    A word for a group that is no word of a name the question asks about ranks it as any
    sentence; "Who is Mira Osk?" still gets the documents first
    (test_an_offline_answer_quotes_the_documents_before_a_reports_count_of_members)."""
    from streamrag.reports import OVERVIEW_OPENING
    answer = await aask(question, make_settings(""), offline_db, mode=mode)
    quoted = [sentence for sentence, _tag in quotes(answer.text)]
    assert quoted and OVERVIEW_OPENING.search(quoted[0]), quoted
    assert question.removesuffix("?").split(" around ")[1] in quoted[0], quoted


@pytest.mark.parametrize("mode", ["global", "local"])
async def test_an_offline_answer_about_a_community_asked_in_lower_case_quotes_its_overview(offline_db, mode):
    """A question in lower case has no capitals to tell its names by: the group word is tied to
    the entities it names (global search passes them, ``pick_sentences(named=...)``)."""
    from streamrag.reports import OVERVIEW_OPENING
    answer = await aask("who is in the community around henrik salo?", make_settings(""), offline_db, mode=mode)
    quoted = [sentence for sentence, _tag in quotes(answer.text)]
    assert quoted and OVERVIEW_OPENING.search(quoted[0]) and "Henrik Salo" in quoted[0], quoted


def test_pick_sentences_takes_a_group_word_inside_a_name_asked_about_for_the_name():
    """"Group" of "Yorros Media Group" names the company, not a community: "Who founded Yorros
    Media Group?" quotes the documents before a report's overview; "Which community does Yorros
    Media Group belong to?" asks for the community, and the overview comes first."""
    passages = [("[R:C1]", "Yorros Media Group and Kenji Zanvell: 5 entities and 6 relationships around Yorros Media "
                           "Group (organization) and Kenji Zanvell (person); strongest ties: Kenji Zanvell and "
                           "Yorros Media Group.\n\nKenji Zanvell founded Yorros Media Group in 2020.")]
    first = lambda q, **kw: pick_sentences(q, passages, limit=1, **kw)[0][0]
    for kw in ({}, {"anchors": ["Yorros Media Group"], "types": {"Yorros Media Group": "organization"}}):
        assert first("Who founded Yorros Media Group?", **kw) == "Kenji Zanvell founded Yorros Media Group in 2020."
        assert first("Which community does Yorros Media Group belong to?", **kw).startswith(
            "Yorros Media Group and Kenji Zanvell: 5 entities"), kw


@pytest.mark.parametrize("question, about", [
    ("Which group led the Kelholmmouth Dockworkers Strike?", False),
    ("How did the community react to the Kelholmmouth Dockworkers Strike?", False),
    ("Who owns Galoux Media group?", False), ("What did the group of dockworkers do at the strike?", False),
    ("What is the group around Galoux Media?", True), ("Who is in Galoux Media's circle?", True),
    ("Which community does the Kelholmmouth Dockworkers Strike belong to?", True),
    ("Which cluster is Galoux Media in?", True)])
def test_pick_sentences_quotes_a_reports_overview_first_for_a_group_tied_to_a_name_alone(question, about):
    """b5b3416b ranked an offline report's overview as any sentence for any question with a word
    for a group outside its names, so "Which group led the ... Strike?" or "How did the community
    react to ...?" opened with "5 entities and 6 relationships around ...". A group word must be
    tied to a name the question asks about (around/of X, X's circle, which community does X
    belong to); a group word alone, or of a common noun ("the group of dockworkers"), is none."""
    overview = ("Kelholmmouth Dockworkers Strike and Galoux Media: 5 entities and 6 relationships around "
                "Kelholmmouth Dockworkers Strike (event) and Galoux Media (organization); strongest ties: "
                "Galoux Media and Kelholmmouth Dockworkers Strike.")
    passages = [("[R:C1]", overview + "\n\nThe Kelholmmouth Dockworkers Strike was led by the harbour "
                 "union, and Galoux Media owns the Kelholmmouth Herald.")]
    first = pick_sentences(question, passages, limit=1)[0][0]
    assert first.startswith("Kelholmmouth Dockworkers Strike and Galoux Media: 5 entities") == about, first


def test_pick_sentences_gives_no_whole_anchors_credit_for_a_word_a_namesake_of_the_index_has():
    """``namesakes`` (names of the index outside the context) take a word from the anchor's own
    as the context's names do: with Otto Brandt among them, "Brandt said" is half of Anna's."""
    passages = [("[E:e1]", "Anna Brandt (person): Anna Brandt chairs the Penmarth Rowing Club. Anna Brandt "
                           "won the sculls at the regatta."),
                ("[T:t1]", '"We sail at dawn," Brandt said at the regatta.')]
    first = lambda **kw: pick_sentences("What did Anna Brandt say at the regatta about sailing at dawn?", passages,
                                        anchors=["Anna Brandt"], types={"Anna Brandt": "person"}, limit=1, **kw)[0][0]
    assert first() == '"We sail at dawn," Brandt said at the regatta.'
    assert first(namesakes=["Otto Brandt"]) == "Anna Brandt won the sculls at the regatta."


def test_namesakes_are_read_in_the_asks_snapshot(offline_db, tmp_path):
    """``query._namesakes`` asks the index's names on the ask's own connection, inside its read
    transaction (``Store.snapshot``): a namesake an indexer publishes meanwhile is not mixed into
    an answer read from the version before, and the next ask sees it."""
    from streamrag.query import _namesakes
    from streamrag.terms import fts_text
    db = tmp_path / "index.db"
    with contextlib.closing(sqlite3.connect(offline_db)) as src, contextlib.closing(sqlite3.connect(db)) as dst:
        src.backup(dst)
    store = Store(db, readonly=True)
    try:
        with store.snapshot():
            assert _namesakes(store, ["Mira Osk"], {}) == []
            with contextlib.closing(sqlite3.connect(db)) as writer, writer:
                writer.execute("INSERT INTO entities(id, name, type, description, mentions, degree) "
                               "VALUES ('ent-r8osk', 'Lars Osk', 'person', 'A sailor.', 1, 0)")
                writer.execute("INSERT INTO entities_fts(id, name, description) VALUES ('ent-r8osk', ?, ?)",
                               (fts_text("Lars Osk"), fts_text("A sailor.")))
            assert _namesakes(store, ["Mira Osk"], {}) == []
        with store.snapshot():
            assert _namesakes(store, ["Mira Osk"], {}) == ["Lars Osk"]
    finally:
        store.close()


def test_namesakes_are_looked_up_for_the_anchors_own_words_alone(offline_db, tmp_path):
    """``query._namesakes`` repeated ``extractive.own_words``' choice of words, but for a name with
    a stop word ("Bank of Tavrin", whose words ``own_words`` leaves out) and a title ("Mrs. Tavrin"):
    it looked up "tavrin" and "mrs" and gave namesakes for words ``pick_sentences`` never counts.
    It now looks up the words ``own_words`` gives: none for the phrase, "tavrin" alone for Mrs. Tavrin."""
    from streamrag.query import _namesakes
    from streamrag.terms import fts_text
    db = tmp_path / "index.db"
    with contextlib.closing(sqlite3.connect(offline_db)) as src, contextlib.closing(sqlite3.connect(db)) as dst:
        src.backup(dst)
    with contextlib.closing(sqlite3.connect(db)) as writer, writer:
        for i, name in enumerate(["Lars Tavrin", "Mrs. Quell"]):
            writer.execute("INSERT INTO entities(id, name, type, description, mentions, degree) "
                           "VALUES (?, ?, 'person', 'A sailor.', 1, 0)", (f"ent-h3-{i}", name))
            writer.execute("INSERT INTO entities_fts(id, name, description) VALUES (?, ?, ?)",
                           (f"ent-h3-{i}", fts_text(name), fts_text("A sailor.")))
    store = Store(db, readonly=True)
    try:
        with store.snapshot():
            assert _namesakes(store, ["Bank of Tavrin"], {}) == []
            assert _namesakes(store, ["Mrs. Tavrin"], {}) == ["Lars Tavrin"]
    finally:
        store.close()


def test_a_namesake_is_found_past_fifty_names_of_the_anchors_own_words(offline_db, tmp_path):
    """``query._namesakes`` read 50 names having a word of the anchor's (SQL LIMIT) and filtered
    them after: where those were all the anchor's own forms ("Osk", "Osk Mira", "Mira Osk Osk":
    no namesake), "Lars Osk" after them was never found, and "osk" counted as Mira Osk's own.
    The names are filtered as read now, and up to 50 namesakes kept a word."""
    import itertools

    from streamrag.query import _namesakes
    from streamrag.terms import fts_text
    db = tmp_path / "index.db"
    with contextlib.closing(sqlite3.connect(offline_db)) as src, contextlib.closing(sqlite3.connect(db)) as dst:
        src.backup(dst)
    forms = [" ".join(ws) for n in range(1, 6) for ws in itertools.product(["Mira", "Osk"], repeat=n) if "Osk" in ws]
    forms.remove("Mira Osk")   # (the anchor, in the index already)
    with contextlib.closing(sqlite3.connect(db)) as writer, writer:
        for i, name in enumerate([*forms, "Lars Osk"]):
            writer.execute("INSERT INTO entities(id, name, type, description, mentions, degree) "
                           "VALUES (?, ?, 'person', 'A sailor.', 1, 0)", (f"ent-s{i}", name))
            writer.execute("INSERT INTO entities_fts(id, name, description) VALUES (?, ?, ?)",
                           (f"ent-s{i}", fts_text(name), fts_text("A sailor.")))
    assert len(forms) > 50
    store = Store(db, readonly=True)
    try:
        with store.snapshot():
            assert _namesakes(store, ["Mira Osk"], {}) == ["Lars Osk"]
    finally:
        store.close()


@pytest.mark.parametrize("question", ["Who is Mira Osk?", "Who is Anton Heller?", "Who is Henrik Salo?",
                                      "What is the Lantern Hall?"])
async def test_an_offline_answer_quotes_the_documents_before_a_reports_count_of_members(offline_db, question):
    """An offline report's overview ("4 entities and 6 relationships around Northern Rail
    Company (organization), ...") names each member, so it matched every question naming one
    and, its report's first sentence, was quoted first (40 of 180 answers of synth_small and A
    Christmas Carol): the index's count, where the documents' "Mira Osk previously designed the
    Kessel Bridge ..." answers. It is quoted after them (when there is room)."""
    from streamrag.reports import OVERVIEW_OPENING
    answer = await aask(question, make_settings(""), offline_db, mode="global")
    quoted = [sentence for sentence, _tag in quotes(answer.text)]
    counts = [bool(OVERVIEW_OPENING.search(sentence)) for sentence in quoted]
    assert quoted and not counts[0] and counts == sorted(counts), quoted
    name = question.removeprefix("Who is ").removeprefix("What is the ").rstrip("?")
    assert name in quoted[0], quoted


async def test_offline_local_answers_quote_what_a_person_said_under_their_surname(tmp_path):
    """'What did Priya Halick say at the briefing?' (tests/data/news41, indexed offline): the
    sentence naming her by surname with the briefing was not quoted at all, the eight sentences
    quoted each writing her whole name; nor was the like of four more people's quotes."""
    corpus = tmp_path / "news"
    shutil.copytree(DATA / "news41", corpus)
    settings = make_settings("")
    await sync([corpus], settings, tmp_path / "index.db", root=corpus)
    expected = {
        "What did Priya Halick say at the briefing?":
            '"The numbers speak for themselves," Halick said at a briefing.',
        "What did Viktor Ashvik say at the briefing?":
            '"The numbers speak for themselves," Ashvik said at a briefing.',
        "What did Willa Quinholm write in the letter to staff?":
            '"We owe the public a clear explanation," Quinholm wrote in a letter to staff.',
        "What did Valentin Velton tell reporters?":
            '"This has been a difficult period, but we are moving forward," Velton told reporters.',
        "What did Cassia Zanard say in the interview?":
            '"Nobody expected the scale of what happened," Zanard said in an interview.',
    }
    for question, sentence in expected.items():
        answer = await aask(question, settings, tmp_path / "index.db", mode="local")
        # (the same words under a title the extractor drops, "Ms. Quinholm wrote ...", as good)
        first = re.sub(r"\b(?:Mr|Ms|Dr)\. ", "", answer.text.splitlines()[2])
        assert answer.extractive and first.startswith(f"- {sentence} ["), (question, answer.text)


def test_a_short_name_the_question_writes_apart_from_a_longer_one_is_an_anchor_of_its_own():
    named = [("ent-b", "Kharos Financial Conduct Board"), ("ent-k", "Kharos"), ("ent-c", "Board")]
    asked = lambda q: [e for e, _name in local_search.anchors(q, named)]
    assert asked("Is Kharos home to the Kharos Financial Conduct Board?") == ["ent-b", "ent-k"]
    assert asked("Where is the Kharos Financial Conduct Board?") == ["ent-b"]
    assert asked("Who chairs the Board of Kharos, the financial conduct one?") == ["ent-b"]   # (not a run)
    # ... and the longer name's "Kharos" is then not the place's: the sentence naming both wins.
    passages = [("[E:b]", "The Kharos Financial Conduct Board is home to many clerks."),
                ("[E:k]", "The Kharos Financial Conduct Board sits in Kharos.")]
    picked = pick_sentences("Is Kharos home to the Kharos Financial Conduct Board?", passages,
                            anchors=["Kharos Financial Conduct Board", "Kharos"])
    assert picked[0][1] == "[E:k]"


def test_pick_sentences_finds_the_kind_of_thing_a_question_asks_for():
    """With the context's entity types, "Which organization" and "Where" ask for an entity of
    that type: the anchor's sentence naming one comes first, and a place inside a longer name
    (an event's) is not a place."""
    types = {"Ada Osk": "person", "Galwen Energy": "organization", "Pellric": "geo",
             "2031 Pellric Trade Summit": "event"}
    passages = [("[E:e1]", "There is work to do, Ada Osk said. Ada Osk joined Galwen Energy in 2010. "
                           "Ada Osk spoke at 2031 Pellric Trade Summit. Ada Osk grew up in Pellric.")]
    first = lambda q: pick_sentences(q, passages, limit=1, anchors=["Ada Osk"], types=types)[0][0]
    assert first("Which organization does Ada Osk work for?") == "Ada Osk joined Galwen Energy in 2010."
    assert first("Where was Ada Osk raised?") == "Ada Osk grew up in Pellric."
    assert first("Which organization does Ada Osk work for?") != first("What does Ada Osk work on?")


def test_pick_sentences_quotes_no_one_for_a_question_only_its_question_word_matches():
    """"Who is Zed Quill?" in a context that never names him: 'Who' asks for a person, which
    ranks the sentences matching the question, and matched any sentence naming someone: the
    answer quoted Ada Osk's and Bo Tan's sentences as the most relevant to it."""
    types = {"Ada Osk": "person", "Bo Tan": "person", "Pellric": "geo"}
    passages = [("[E:e1]", "Ada Osk joined Galwen Energy in 2010. Bo Tan grew up in Pellric."),
                ("[E:e2]", "Pellric hosted the trade summit in 2031.")]
    assert pick_sentences("Who is Zed Quill?", passages, types=types) == []
    assert pick_sentences("where is the lighthouse?", passages, types=types) == []
    assert pick_sentences("Who grew up in Pellric?", passages, types=types)[0][0] == "Bo Tan grew up in Pellric."


def test_pick_sentences_without_an_anchor_ranks_the_questions_words_before_the_kind_asked_for():
    """"Who is Mr. Osttane?" names no entity in full (no anchor): a sentence naming a person
    outranked any mix of the question's words, and "... according to Mr. Quinent." (a person,
    and "Mr") came before "Mr. Osttane grew up in Quinrellmouth."."""
    types = {"Quinent": "person", "Dmitri Osttane": "person", "Quinrellmouth": "geo"}
    passages = [("[E:e1]", 'Quinent (person): "Our priority remains the people," according to Mr. Quinent.'),
                ("[L:r1]", "Quinrellmouth -- Dmitri Osttane: Mr. Osttane grew up in Quinrellmouth.")]
    picked = pick_sentences("Who is Mr. Osttane?", passages, types=types)
    assert picked[0][0] == "Quinrellmouth -- Dmitri Osttane: Mr. Osttane grew up in Quinrellmouth."


async def test_an_offline_local_answer_gives_the_named_persons_facts_before_anothers(tmp_path):
    """'Which organization does Ada Osk work for?' listed 'Bo Tan works for Lomden Logistics'
    (the question's words, another person) before Ada Osk's own sentences."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(
        "Ada Osk joined Galwen Energy in 2010. Ada Osk met Bo Tan at the quay. Ada Osk likes tea.\n\n"
        "Bo Tan works for Lomden Logistics. Bo Tan has worked for Lomden Logistics for years. "
        "Lomden Logistics is a firm in Pellric.\n")
    (corpus / "b.txt").write_text("Galwen Energy is an energy company in Pellric. Galwen Energy hired "
                                  "many engineers. Ada Osk and Bo Tan walked to Pellric.\n")
    settings = make_settings("", index=INDEX)
    await sync([corpus], settings, tmp_path / "index.db", root=corpus)
    answer = await aask("Which organization does Ada Osk work for?", settings, tmp_path / "index.db",
                        mode="local")
    bullets = [line for line in answer.text.splitlines() if line.startswith("- ")]
    assert "Ada Osk joined Galwen Energy" in bullets[0]
    ada = [i for i, b in enumerate(bullets) if "Ada Osk" in b]
    lomden = [i for i, b in enumerate(bullets) if "Lomden" in b]
    assert ada and lomden and max(ada) < min(lomden), bullets


def test_a_context_lines_label_counts_less_than_what_its_sentence_says():
    """Every relationship line of the anchor names it in its label ('Ada Osk -- X: '): the
    sentence that names the anchor and an organization itself comes before one that only sits
    under such a label."""
    types = {"Ada Osk": "person", "Lomden Logistics": "organization", "Galwen Energy": "organization"}
    passages = [("[L:r1]", "Ada Osk -- Lomden Logistics: Lomden Logistics was criticised for the flood."),
                ("[L:r2]", "Ada Osk -- Galwen Energy: Dr. Osk serves as director of Galwen Energy.")]
    picked = pick_sentences("Which organization does Ada Osk work for?", passages, anchors=["Ada Osk"],
                            types=types)
    assert picked[0][1] == "[L:r2]"


async def test_an_offline_global_question_keeps_its_words_that_name_what_it_asks_about(tmp_path):
    # English words that are function words elsewhere ("hay", "ensemble") were left out of every
    # question; relation words ("plays") too, though a report has them; and 何 was cut out of the
    # name 何伟 in a Chinese question. Each asked about nothing, and the right report went unquoted.
    _folder, settings, db = await offline_index(tmp_path, {
        "farm.txt": "The Ellison Farm cuts hay every June. Mara Ellison sells the hay to the Brook Stables.\n",
        "theatre.txt": "The Kestrel Theatre staged three plays by Ivo Marsh. Greta Voss directed the plays "
                       "at the Kestrel Theatre.\n",
        "music.txt": "The Lindholm Ensemble played at the Oslo Hall. Carl Holm leads the Lindholm Ensemble.\n",
        "visit.txt": "Anna Berg hosted 何伟 at the Lindholm Museum. Anna Berg and Carl Holm showed 何伟 the "
                     "Lindholm Museum archive.\n",
    })
    for question, quoted in (("What are the main themes about hay?", "sells the hay"),
                             ("Summarize what the collection says about the ensemble.", "Ensemble played"),
                             ("What are the recurring themes of the plays?", "directed the plays"),
                             ("总结何伟的经历", "hosted 何伟")):
        answer = await aask(question, settings, db, mode="global")
        assert quoted in answer.text, (question, answer.text)
    # ... and relation words no report has still ask about the rest (here: the whole collection).
    plain = await aask("Summarize the collection", settings, db, mode="global")
    answer = await aask("Summarize the connections across the collection", settings, db, mode="global")
    assert answer.text == plain.text and answer.documents


async def test_a_cited_report_lists_first_the_documents_of_the_one_the_question_names(tmp_path, simulator, qs):
    # A report rests on every document of its members, all cited once, and ties went by path:
    # 'Who is Pavel Ashberg?' answered from the report on him and his union listed first the
    # union's documents that never name him.
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in {
        "a.txt": "The Harbor Workers Union met at Lunros Hall. The Harbor Workers Union voted on pay.\n",
        "b.txt": "The Harbor Workers Union marched through Lunros Hall on Monday.\n",
        "c.txt": "Pavel Ashberg directs the Harbor Workers Union. Pavel Ashberg grew up near Lunros Hall.\n",
    }.items():
        (folder / name).write_text(text, encoding="utf-8")
    db = tmp_path / "i.db"
    await sync([folder], make_settings(simulator.base_url, index=INDEX), db, root=folder)
    answer = await aask("Who is Pavel Ashberg?", qs, db, mode="global")
    assert [c["kind"] for c in answer.citations] == ["report"], answer.text
    assert answer.documents == ["c.txt", "a.txt", "b.txt"]


def test_documents_of_a_report_come_by_the_entities_named_then_by_its_members_they_give(tmp_path):
    store = Store(tmp_path / "i.db")
    with store.conn:
        sql = store.conn.execute
        for doc, ents in (("d1", ["u"]), ("d2", ["u", "h"]), ("d3", ["p"]), ("d4", ["x"])):
            sql("INSERT INTO documents(id, title, path, tokens, chars) VALUES (?, ?, ?, 1, 1)", (doc, doc, f"{doc}.txt"))
            sql("INSERT INTO document_chunks(doc_id, idx, chunk_id) VALUES (?, 0, ?)", (doc, f"c-{doc}"))
            for e in ents:
                sql("INSERT INTO entity_sources(entity_id, chunk_id, name, type, description) "
                    "VALUES (?, ?, ?, 'x', 'x')", (e, f"c-{doc}", e))
        for e in "uhpx":
            sql("INSERT INTO entities(id, name, type, description, mentions) VALUES (?, ?, 'x', 'x', 1)", (e, e))
        for cid, members in (("C1", "uhp"), ("C2", "x")):
            sql("INSERT INTO reports(key, title, summary, rating, rating_explanation, findings, text, tokens, "
                "elements, created_at) VALUES (?, ?, '', 1, '', '[]', '', 1, '{}', 0)", (f"k{cid}", cid))
            sql("INSERT INTO communities(id, level, size, context_key, report_key) VALUES (?, 0, 1, '', ?)",
                (cid, f"k{cid}"))
            sql("INSERT INTO community_members(community_id, entity_id) SELECT ?, value FROM json_each(?)",
                (cid, json.dumps(list(members))))
    try:
        tags = ["[R:C1]", "[R:C2]"]
        assert citations.check(store, "a [R:C1]", tags, ["p"])[3] == ["d3.txt", "d2.txt", "d1.txt"]
        assert citations.check(store, "a [R:C1]", tags)[3] == ["d2.txt", "d1.txt", "d3.txt"]
        # the documents naming what the question asks about come before the most cited
        assert citations.check(store, "a [R:C2] b [R:C1] [E:x]", tags + ["[E:x]"], ["u"])[3] == [
            "d2.txt", "d1.txt", "d4.txt", "d3.txt"]
    finally:
        store.close()


async def test_the_documents_of_a_name_written_apart_from_a_longer_one_holding_it_come_first(tmp_path):
    # Offline synth_small has "Pellric" and "2032 Pellric Flood": local search anchors on both
    # for "... around Pellric and the 2032 Pellric Flood?", but an answer's documents came first
    # by the longest names only, and those of Pellric alone ranked with those naming neither.
    _folder, _settings, db = await offline_index(tmp_path, {
        "flood.txt": "The 2032 Pellric Flood closed the harbor of Marrow Bay. Traders of Marrow Bay "
                     "lost their stock in the 2032 Pellric Flood.\n",
        "town.txt": "Hana Velberg grew up in Pellric. Zofia Belford was raised in Pellric by a family "
                    "of shopkeepers.\n",
        "bay.txt": "Marrow Bay holds the harbor. Hana Velberg and Zofia Belford met in Marrow Bay. Marrow "
                   "Bay traders met Hana Velberg there.\n"})
    store = Store(db, readonly=True)
    try:
        chunk = dict(store.conn.execute("SELECT d.path, dc.chunk_id FROM documents d "
                                        "JOIN document_chunks dc ON dc.doc_id = d.id").fetchall())
        question = "What are the key themes around Pellric and the 2032 Pellric Flood?"
        assert {name for _e, name, _c in named_entities(store, question)} == {"Pellric", "2032 Pellric Flood"}
    finally:
        store.close()
    # (the one naming neither cited first and most, which comes after those naming what it asks)
    said = (f"Traders met there [T:{chunk['bay.txt']}] [T:{chunk['bay.txt']}]. The flood closed the "
            f"harbor [T:{chunk['flood.txt']}]. Hana Velberg grew up in Pellric [T:{chunk['town.txt']}].")
    settings = make_settings("http://127.0.0.1:9/v1", llm={"cache": False})
    answer = await aask(question, settings, db, mode="local", transport=mock({"answer": lambda m: said}))
    assert len(answer.citations) == 3 and not answer.extractive, answer.text
    assert answer.documents == ["flood.txt", "town.txt", "bay.txt"]


async def test_auto_mode_does_not_list_a_name_held_in_a_longer_one(tmp_path):
    # 'Lake', an entity of its own offline, was listed beside "Lake Kelholmford".
    folder, settings, db = await offline_index(tmp_path, {
        "a.txt": "Ada Osk was born in Lake Kelholmford. Lake Kelholmford is a quiet town. Lake.\n",
        "b.txt": "Bo Lund visited Lake Kelholmford in May. Lake Kelholmford welcomed him.\n"})
    store = Store(db, readonly=True)
    try:
        assert {"Lake", "Lake Kelholmford"} <= {r["name"] for r in store.query("SELECT name FROM entities")}
        assert choose_mode(store, "Who was born in Lake Kelholmford?") == (
            "local", "the question names Lake Kelholmford")
    finally:
        store.close()


def test_a_name_asked_about_meets_its_own_form_not_a_common_word_of_its_stem():
    # "belle" and "bells" both stem to "bell": 'Who is Belle?' (local, A Christmas Carol)
    # quoted "In time the bells ceased ..." as its answer; "Port" met "portly", "Tim" "times".
    bells = ("[T:a]", "In time the bells ceased, and the bakers were shut up for the night.")
    belle = ("[T:b]", "'Belle,' said the husband, turning to his wife with a smile.")
    assert pick_sentences("Who is Belle?", [bells]) == []
    assert [p[1] for p in pick_sentences("Who is Belle?", [bells, belle])] == ["[T:b]"]
    assert [p[1] for p in pick_sentences("What did Belle's husband say?", [bells, belle])] == ["[T:b]"]
    passages = [("[T:a]", "He beheld the portly gentleman with the population list."),
                ("[T:b]", "THEY WERE PORTLY GENTLEMEN, PLEASANT TO BEHOLD IN THE PORT."),
                ("[T:c]", "The Port of Velvell has a population of 9000 people.")]
    assert pick_sentences("What is the population of the Port?", passages)[0][1] == "[T:c]"
    assert [p[1] for p in pick_sentences("Where is the Port?", passages)] == ["[T:b]", "[T:c]"]
    times = [("[T:a]", "Bob went down a slide twenty times in honour of it."),
             ("[T:b]", "Bob took Tiny Tim beside him in a low stool.")]
    assert [p[1] for p in pick_sentences("Who is Tim?", times)] == ["[T:b]"]
    # the name still meets its plural, possessive and other forms where a text writes it as a name
    family = [("[T:a]", "'Here's Martha, mother!' cried the two young Cratchits."),
              ("[T:b]", "Scrooge's nephew came to dinner with the Cratchit family."),
              ("[T:c]", "Nobody had seen the ratchet in the kitchen of the house.")]
    assert {p[1] for p in pick_sentences("What happened to Cratchit?", family)} == {"[T:a]", "[T:b]"}
    assert [p[1] for p in pick_sentences("Who is Scroog?", family)] == ["[T:b]"]
    # a question written in Title Case names nothing by its capitals: its words meet by stem
    assert {p[1] for p in pick_sentences("Where Were The Bells?", [bells, belle])} == {"[T:a]", "[T:b]"}
    # nor does a word opening its sentence; a title's full stop opens none
    assert [p[1] for p in pick_sentences("Bells? Which ones rang?", [bells])] == ["[T:a]"]
    mr = [("[T:a]", "Mrs. Fezziwig danced with the others at the ball."),
          ("[T:b]", "Old Mr. Fezziwig laid down his pen at seven.")]
    assert pick_sentences("What did Mr. Fezziwig do?", mr)[0][1] == "[T:b]"


def test_a_name_in_a_script_without_capitals_counts_as_written_like_a_name(tmp_path):
    # Global search opens the communities of the entities a question names capitalised; a
    # Chinese or Arabic name has no capitals, so its community was never opened (a reviewer).
    store = entity_store(tmp_path / "i.db", {"e1": "张伟", "e2": "محمد", "e3": "Ada Osk", "e4": "Quay"}, "person")
    try:
        assert [(e, cap) for e, _n, cap in named_entities(store, "张伟是谁？")] == [("e1", True)]
        assert [(e, cap) for e, _n, cap in named_entities(store, "من هو محمد؟")] == [("e2", True)]
        assert [(e, cap) for e, _n, cap in named_entities(store, "Who is Ada Osk?")] == [("e3", True)]
        assert [(e, cap) for e, _n, cap in named_entities(store, "What happened at the quay?")] == [("e4", False)]
    finally:
        store.close()


@pytest.mark.parametrize("level", [None, 2])
async def test_long_question_counts_in_map_max_tokens(llm_db, simulator, level):
    """Every rating and map call stays within query.map_max_tokens, the question included (it
    goes out with every batch of reports, and went past the budget by its own size)."""
    settings = make_settings(simulator.base_url, llm={"cache": False}, query={"map_max_tokens": 700})
    question = "What are the main themes across the harbor notes? " + "Say what the council decided. " * 80
    seen: list = []
    answer = await aask(question, settings, llm_db, mode="global", level=level, transport=mock(seen=seen))
    sizes = {task: [count_message_tokens(body["messages"]) for t, body in seen if t == task]
             for task in ("rate", "map")}
    assert answer.details["map_batches"] and sizes["map"], sizes
    assert all(n <= 700 for n in sizes["map"] + sizes["rate"]), sizes


async def test_question_leaving_no_room_for_reports_is_refused(llm_db, simulator):
    settings = make_settings(simulator.base_url, llm={"cache": False}, query={"map_max_tokens": 400})
    question = "What are the main themes across the harbor notes? " + "Say what the council decided. " * 80
    with pytest.raises(UsageError, match="query.map_max_tokens"):
        await aask(question, settings, llm_db, mode="global", transport=mock())


def test_a_name_with_an_apostrophe_is_one_name(tmp_path):
    # "What does Mary O'Brien do?" was read as "Mary", "O" and "Brien": no name, and the answer
    # never said the index has no Mary O'Brien, as it says of "Mary Smith". A name the index
    # has with an apostrophe is still found, and "Scrooge's" is still Scrooge's.
    said = unknown_names_of(tmp_path / "i.db", {"e-k": "Kevin O'Brien", "e-s": "Scrooge"},
                            ("Kevin O'Brien met Scrooge at the quay. Scrooge's nephew waved.",), (
        "What does Mary O'Brien do?", "What does Mary O’Brien do?", "What does Mary D'Arcy do?",
        "What does Mary Smith-Jones do?", "What did Mary O'Brien's sister do?",
        "Who is Kevin O'Brien?", "What did Kevin O'Brien's sister do?", "What did Scrooge's nephew do?"))
    assert said == {"What does Mary O'Brien do?": ["Mary O'Brien"], "What does Mary O’Brien do?": ["Mary O’Brien"],
                    "What does Mary D'Arcy do?": ["Mary D'Arcy"],
                    "What does Mary Smith-Jones do?": ["Mary Smith-Jones"],
                    "What did Mary O'Brien's sister do?": ["Mary O'Brien"],
                    "Who is Kevin O'Brien?": [], "What did Kevin O'Brien's sister do?": [],
                    "What did Scrooge's nephew do?": []}, said


def test_a_possessive_written_in_capitals_is_no_part_of_the_name(tmp_path):
    # "KEVIN O'BRIEN'S SISTER?" read "O'BRIEN'S" as one name, as "O'Brien" is (its parts all
    # capitalised), and said the index has no "O'BRIEN'S SISTER" (synth_small: "ODILE MARARD'S
    # JOB?" said nothing mentions "MARARD'S JOB"). Its "S" is the possessive's, as "s" is.
    said = unknown_names_of(tmp_path / "i.db", {"e-k": "Kevin O'Brien", "e-s": "Scrooge"},
                            ("Kevin O'Brien met Scrooge at the quay. Scrooge's nephew waved.",), (
        "KEVIN O'BRIEN'S SISTER?", "KEVIN O’BRIEN’S SISTER?", "SCROOGE'S NEPHEW?"))
    assert said == {"KEVIN O'BRIEN'S SISTER?": [], "KEVIN O’BRIEN’S SISTER?": [], "SCROOGE'S NEPHEW?": []}, said


async def test_a_missing_name_with_an_apostrophe_is_said_as_any_other(offline_db):
    offline = make_settings("", index=INDEX)
    for name in ("Mary Smith", "Mary O'Brien", "Mary O’Brien"):
        answer = await aask(f"What does {name} do?", offline, offline_db)
        assert (answer.not_in_index, answer.search) == ([name], "none"), name
        assert answer.text.startswith(f'Nothing in the index mentions "{name}"'), answer.text


def test_a_yes_or_no_question_reads_as_english(tmp_path):
    # "Is Scrooge McDuck here?" has no word of _ENGLISH_CUES: a name of one word the index lacks
    # ("McDuck") was left unsaid, as in a German question, whose nouns are capitalised. A
    # question opening on "Is", "Was" ... and a capitalised word is English; "Was ist Liebe?"
    # (a noun after a verb) is not, nor does a name the index has go missing.
    said = unknown_names_of(tmp_path / "i.db", {"e-s": "Scrooge", "e-c": "Christmas Eve"},
                            ("Scrooge sat alone on Christmas Eve.",), (
        "Is Scrooge McDuck here?", "Is Zorblax here?", "Was Zorblax at home?", "Are Scrooge and Zorblax friends?",
        "Is Scrooge here?", "Is Christmas Eve cold?", "Was ist Liebe?", "Is Zorblax here"))
    assert said == {"Is Scrooge McDuck here?": ["Scrooge McDuck"], "Is Zorblax here?": ["Zorblax"],
                    "Was Zorblax at home?": ["Zorblax"], "Are Scrooge and Zorblax friends?": ["Zorblax"],
                    "Is Scrooge here?": [], "Is Christmas Eve cold?": [], "Was ist Liebe?": [],
                    "Is Zorblax here": []}, said


def test_a_name_written_in_lower_case_that_the_index_lacks_is_missing(tmp_path):
    # "who is ada osk?" was never said missing, as "Who is Ada Osk?" is: only capitalised words
    # were read as names, and local search answered from the most connected entities. Words
    # the index has ("scrooge", "change", "marley"), in another form ("ghostly" of "ghost"),
    # words questions ask with ("themes", "summary"), one word alone ("protagonist"), a
    # question that does not read as English, and words the index lacks in a question asking
    # more ("scrooge" beside "zorblax quintrell": a topic, maybe) are no missing name.
    said = unknown_names_of(tmp_path / "i.db", {"e-s": "Scrooge", "e-m": "Jacob Marley"},
                            ("Scrooge would meet the ghost of Jacob Marley, and the change in him was great.",), (
        "who is ada osk?", "Who is Ada Osk?", "did scrooge meet zorblax quintrell?",
        "who are ada osk and zorblax quintrell?",
        "who is ada-osk?", "how does scrooge change?", "who is jacob marley?",
        "what are the main themes?", "what is the overall summary?", "who is the protagonist?",
        "what did the ghostly visitor say?", "wer ist ada osk?"))
    assert said == {"who is ada osk?": ["ada osk"], "Who is Ada Osk?": ["Ada Osk"],
                    "did scrooge meet zorblax quintrell?": [],
                    "who are ada osk and zorblax quintrell?": ["ada osk", "zorblax quintrell"],
                    "who is ada-osk?": ["ada-osk"], "how does scrooge change?": [],
                    "who is jacob marley?": [], "what are the main themes?": [],
                    "what is the overall summary?": [], "who is the protagonist?": [],
                    "what did the ghostly visitor say?": [], "wer ist ada osk?": []}, said


async def test_a_local_question_in_lower_case_says_the_name_missing_as_capitalised(offline_db):
    # The answer to "who is zorblax quintrell?" is the one to "Who is Zorblax Quintrell?", the
    # name as the question writes it: no search, not the most connected entities.
    offline = make_settings("", index=INDEX)
    lower = (await aask("who is zorblax quintrell?", offline, offline_db, mode="local")).to_json()
    capital = (await aask("Who is Zorblax Quintrell?", offline, offline_db, mode="local")).to_json()
    assert (lower["not_in_index"], lower["search"]) == (["zorblax quintrell"], "none")
    assert lower["answer"].startswith('Nothing in the index mentions "zorblax quintrell"'), lower["answer"]
    assert json.dumps(lower).lower() == json.dumps(capital).lower()


async def test_with_a_model_lower_case_words_the_index_lacks_are_searched_as_a_topic(llm_db, qs):
    # "what are the cybersecurity vulnerabilities?" was said missing with no search, as a name
    # is, though a model's search may find the topic in other words. Capitalised names the
    # index lacks are still said missing with no search.
    for question in ("what are the cybersecurity vulnerabilities?", "who is zorblax quintrell?"):
        answer = (await aask(question, qs, llm_db, mode="local")).to_json()
        assert (answer["not_in_index"], answer["search"]) == ([], "local"), (question, answer)
    named = (await aask("Who is Zorblax Quintrell?", qs, llm_db, mode="local")).to_json()
    assert (named["not_in_index"], named["search"]) == (["Zorblax Quintrell"], "none")


async def test_terminal_escapes_in_a_question_are_dropped_before_it_is_read(offline_db):
    # A name pasted in colour ("\x1b[1mSmith\x1b[0m") was read as "1mSmith", no name, and the
    # answer never said the index has no Mary Smith.
    from streamrag.question import checked_question

    assert checked_question("Who\x00 is \x1b]0;a title\x07Mira\x7f \x9b1mOsk?\r\n") == "Who is Mira Osk?"
    offline = make_settings("", index=INDEX)
    answer = await aask("What does Mary \x1b[1mSmith\x1b[0m do?", offline, offline_db)
    assert answer.question == "What does Mary Smith do?"
    assert (answer.not_in_index, answer.search) == (["Mary Smith"], "none")


@pytest.mark.parametrize("control", ["\r", "\v", "\f", "\x1c", "\x85", "\x00", "\x07", "\x7f", "\x9f"])
def test_a_control_character_in_a_question_parts_words_as_white_space_does(control):
    # A lone \r (a line end pasted), \v or \f parted "is" from "Mira"; a BEL, NUL, DEL or C1
    # control was dropped and joined them ("Who isMira Osk?"), though the index reads a
    # document's words parted at any of them (terms.words). Now each parts words.
    from streamrag.question import checked_question
    from streamrag.terms import words

    assert checked_question(f"Who is{control}Mira{control}{control}Osk?") == "Who is Mira Osk?"
    assert words(checked_question(f"Who is{control}Mira Osk?")) == words(f"Who is{control}Mira Osk?")


@pytest.mark.parametrize("model", [False, True])
def test_a_global_level_setting_deeper_than_the_index_is_said(cli_run, llm_db, simulator, tmp_path, model):
    # `--level 9` says it reads the deepest level instead; query.global_level = 9 said nothing.
    config = tmp_path / "streamrag.toml"
    config.write_text("[query]\nglobal_level = 9\n")
    deepest = max(community_levels(llm_db)[0].values())
    api = ("--api-base", simulator.base_url if model else "")
    for level in ((), ("--level", "-1")):
        out = cli_run("ask", "--db", str(llm_db), "--config", str(config), *api, *level, "--mode", "global",
                      "--json", "What did the council decide?")
        assert out.returncode == 0 and json.loads(out.stdout)["level"] == deepest
        assert out.stderr == (f"streamrag: query.global_level 9 is deeper than this index's deepest "
                              f"level ({deepest}); using level {deepest}\n"), out.stderr
    config.write_text(f"[query]\nglobal_level = {deepest}\n")
    out = cli_run("ask", "--db", str(llm_db), "--config", str(config), *api, "--mode", "global", "--json",
                  "What did the council decide?")
    assert out.returncode == 0 and out.stderr == ""


def test_a_level_deeper_than_the_index_is_said_alike_of_the_option_and_the_setting():
    # `--level N` (cli._note_clamped_level) and query.global_level (_note_deep_setting) each
    # wrote the line out; query.deeper_level_line is both's.
    from streamrag.query import deeper_level_line

    assert deeper_level_line("--level", 9, 2) == ("--level 9 is deeper than this index's deepest level (2); "
                                                  "using level 2")
    assert deeper_level_line("query.global_level", 3, 0) == ("query.global_level 3 is deeper than this "
                                                             "index's deepest level (0); using level 0")
    assert [deeper_level_line("--level", level, deepest)
            for level, deepest in ((2, 2), (0, 3), (-1, 0), (4, None))] == [None] * 4


def test_a_broad_question_asked_of_a_local_search_is_pointed_to_global_with_a_model_too(cli_run, llm_db, simulator):
    # Offline, "What are the main themes?" with --mode local says to ask it with --mode global;
    # with a model it was answered from the most connected entities without a word of that.
    # (A basic search finding no passage says it alone: test_an_empty_context_is_said_with_a_model_as_offline.)
    common = ("ask", "--db", str(llm_db), "--mode", "local", "--json", "What are the main themes?")
    offline = json.loads(cli_run(*common, "--api-base", "").stdout)
    prefix = f"{EXTRACTIVE_LABEL}: "
    assert offline["answer"].startswith(prefix) and offline["llm"]["calls"] == 0
    assert "--mode global" in offline["answer"] and "cannot answer" in offline["answer"]
    answer = json.loads(cli_run(*common, "--api-base", simulator.base_url).stdout)
    pointer, _, rest = answer["answer"].partition("\n\n")
    assert pointer.startswith("This question asks about the collection as a whole (main, themes)"), pointer
    assert "--mode global" in pointer and "cannot answer" not in pointer and answer["llm"]["calls"] == 1
    assert rest.strip() and answer["citations"]   # (still answered)
    streamed = cli_run(*common[:-2], common[-1], "--api-base", simulator.base_url)
    assert streamed.stdout.startswith(pointer + "\n\n")
    named = json.loads(cli_run(*common[:-1], "What did the council decide?", "--api-base", simulator.base_url).stdout)
    assert "--mode global" not in named["answer"]   # (a question about something is not told)


def test_an_offline_basic_search_counts_the_tokens_it_read(cli_run, llm_db, simulator):
    # Offline --mode basic gave "context_tokens": {}, where every other search counts them.
    common = ("ask", "--db", str(llm_db), "--mode", "basic", "--json", "What did the council decide?")
    offline = json.loads(cli_run(*common, "--api-base", "").stdout)["details"]
    model = json.loads(cli_run(*common, "--api-base", simulator.base_url).stdout)["details"]
    assert offline["chunks"] and set(offline["context_tokens"]) == set(model["context_tokens"]) == {"text"}
    with sqlite3.connect(llm_db) as conn:
        texts = [conn.execute("SELECT text FROM chunks WHERE id = ?", (c,)).fetchone()[0] for c in offline["chunks"]]
    assert offline["context_tokens"]["text"] == sum(count_tokens(t) for t in texts) > 0
    nothing = json.loads(cli_run(*common[:-1], "Zyxwvq plorf?", "--mode", "basic", "--api-base", "").stdout)
    assert nothing["details"]["chunks"] == [] and nothing["details"]["context_tokens"] == {"text": 0}


async def test_an_offline_basic_search_sums_the_stored_counts_of_its_encoding_without_a_tokenizer(
        tmp_path, monkeypatch):
    # Its count of the text it read built the tokenizer (0.23 s of a 0.38 s ask, 70 MB) to count
    # chunks whose counts are stored. A count of another encoding, or of one not recorded (an
    # index stored before ``chunks.encoding``), is counted, as before.
    import functools

    from streamrag import tokens

    db = await _abuild(tmp_path, "")
    question = "What did the council decide about the harbor and the railway?"

    async def basic(encoding: str) -> dict:
        # (no tokenizer built yet, and no count remembered of a short text)
        monkeypatch.setattr(tokens, "_encodings", {})
        monkeypatch.setattr(tokens, "_count_short", functools.lru_cache(maxsize=64)(tokens.count_uncached))
        monkeypatch.setattr(tokens, "_LIGHT_WORK", 0)   # (a count made is made by the encoder, seen)
        answer = await aask(question, make_settings(index={**INDEX, "encoding": encoding}), db, mode="basic")
        return answer.details

    def texts(chunk_ids: list[str]) -> list[str]:
        with sqlite3.connect(db) as conn:
            return [conn.execute("SELECT text FROM chunks WHERE id = ?", (c,)).fetchone()[0] for c in chunk_ids]

    details = await basic("o200k_base")
    assert len(details["chunks"]) > 1 and tokens._encodings == {}
    o200k = sum(count_tokens(t, "o200k_base") for t in texts(details["chunks"]))
    assert details["context_tokens"] == {"text": o200k}
    other = await basic("cl100k_base")   # (counts of another encoding are not taken)
    assert other["chunks"] == details["chunks"] and set(tokens._encodings) == {"cl100k_base"}
    assert other["context_tokens"] == {"text": sum(count_tokens(t, "cl100k_base") for t in texts(details["chunks"]))}
    assert other["context_tokens"] != details["context_tokens"]
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE chunks SET encoding = NULL")   # (as stored before the column)
    older = await basic("o200k_base")
    assert older == details and set(tokens._encodings) == {"o200k_base"}


def test_the_search_lines_say_one_of_a_thing_in_the_singular(cli_run, llm_db, simulator):
    # 'basic search: 1 chunks (bm25)', as 'local search: 1 entities' and '... level 0: 1 reports'.
    common = ("ask", "--db", str(llm_db), "--api-base", simulator.base_url, "--mode", "basic",
              "What did the critics say?")
    chunks = json.loads(cli_run(*common, "--json").stdout)["details"]["chunks"]
    assert len(chunks) == 1, chunks   # (the question the line is checked on finds one passage)
    line = [x for x in cli_run(*common).stderr.splitlines() if "basic search:" in x]
    assert line == ["streamrag: basic search: 1 chunk (bm25)"], line


# A paragraph naming no one, a chunk of its own at index.chunk_size 50 (``_SMALL``): a short name
# after it is in another chunk than a full name before it, of the same document, and joins it.
_FILLER = ("The fog came pouring in at every chink and keyhole, and was so dense without that the houses "
           "opposite were mere phantoms, and the bells rang out the hours in the frosty air.\n\n")
_SMALL = {"chunk_size": 50, "chunk_overlap": 0}


@contextlib.asynccontextmanager
async def _index_joining(tmp_path, texts: dict[str, str], full: str, short: str):
    """An offline index (``tmp_path``/i.db, chunks of ``_SMALL``) of ``texts`` (file name -> text)
    that joins the name ``short`` to ``full`` (no entity is named ``short``): the index, a
    read-only store of it and ``full``'s entity id."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, text in texts.items():
        (corpus / name).write_text(text)
    db = tmp_path / "i.db"
    await sync([corpus], make_settings("", index=_SMALL), db, root=corpus)
    store = Store(db, readonly=True)
    try:
        assert store.scalar("SELECT count(*) FROM entities WHERE name = ?", (short,)) == 0
        yield db, store, store.scalar("SELECT id FROM entities WHERE name = ?", (full,))
    finally:
        store.close()


async def test_a_short_name_an_offline_index_joined_to_a_full_name_is_asked_about_as_that_one(tmp_path):
    # "Scrooge" (office, street, the ledger's end) is joined to "Ebenezer Scrooge" (the ledger's
    # start): "Who is Scrooge?" names the full name's entity as "Scrooge", and its sentences,
    # where a person named so is the one asked about, come before those of "Uncle Scrooge" (a
    # title and one word: no full name, and no part of the join).
    texts = {"ledger.txt": "Ebenezer Scrooge kept the books of the firm with Jacob Marley.\n\n" + _FILLER
                           + "The clerk watched Scrooge. Scrooge counted the coal.\n",
             "office.txt": "In his cold counting-house sat Scrooge, alone all day.\n",
             "street.txt": "Nobody ever stopped Scrooge in the street to ask the way.\n",
             "nephew.txt": "Fred called on his Uncle Scrooge at Christmas with Topper.\n"}
    async with _index_joining(tmp_path, texts, "Ebenezer Scrooge", "Scrooge") as (db, store, full):
        assert named_entities(store, "Who is Scrooge?") == [(full, "Scrooge", True)]
    answer = await aask("Who is Scrooge?", make_settings(""), db, mode="local")
    quoted = [line for line in answer.text.splitlines() if line.startswith("- ")]
    assert len(quoted) >= 3 and all(f"[E:{full}]" in line for line in quoted[:3]), answer.text


async def test_a_short_name_with_an_apostrophe_joined_to_a_full_name_is_asked_about_as_that_one(tmp_path):
    # "O'Neill" is joined to "Mary O'Neill": the question's words read as names are ("O'Neill"
    # one word) find the join; as letters alone ("O", "Neill") they named no entity, where
    # before the join "O'Neill" named its own.
    texts = {"mary.txt": "Mary O'Neill met Fred in London.\n\n" + _FILLER
                         + "Fred met O'Neill in London. O'Neill laughed with Fred.\n"}
    async with _index_joining(tmp_path, texts, "Mary O'Neill", "O'Neill") as (_, store, full):
        assert named_entities(store, "Who is O'Neill?") == [(full, "O'Neill", True)]
        assert named_entities(store, "Who is O’Neill?") == [(full, "O’Neill", True)]


async def test_a_short_name_with_a_hyphen_joined_to_a_full_name_is_asked_about_as_that_one(tmp_path):
    # "Jean-Luc" is joined to "Jean-Luc Picard": the question's "Jean-Luc" read whole finds the
    # join; as "Jean" and "Luc" it named no entity, where before the join it named its own.
    texts = {"picard.txt": "Jean-Luc Picard met Fred in London.\n\n" + _FILLER
                           + "Fred met Jean-Luc in London. Jean-Luc laughed with Fred.\n"}
    async with _index_joining(tmp_path, texts, "Jean-Luc Picard", "Jean-Luc") as (_, store, full):
        fred = store.scalar("SELECT id FROM entities WHERE name = 'Fred'")
        assert named_entities(store, "Who is Jean-Luc?") == [(full, "Jean-Luc", True)]
        assert named_entities(store, "Did Jean-Luc meet Fred?") == [(fred, "Fred", True), (full, "Jean-Luc", True)]
        assert named_entities(store, "Who is Jean-Luc Picard?") == [(full, "Jean-Luc Picard", True)]


async def test_a_claim_found_by_its_object_is_tagged_with_the_selected_entity(tmp_path):
    # "Acme Corp sued Jane Doe", asked about Jane: the claim's line was tagged with Acme's id, an
    # entity the context does not show, so an answer citing it cited Acme, and one citing nothing
    # was said to rest on Acme's documents (acme.txt, which never names Jane).
    from conftest import chat_answer

    line = ("claim | Acme Corp | Jane Doe | LAWSUIT | TRUE | 2031-03-01 | NONE | Acme Corp sued Jane Doe. | "
            "The lawsuit named Jane Doe.")

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":   # (GET /models, which a run asks first: no listing)
            return httpx.Response(404)
        messages = json.loads(request.content)["messages"]
        task = detect_task(messages)
        if task == "claims":
            return chat_answer(f"{line}\ndone" if "lawsuit" in messages[-1]["content"] else "done")
        return chat_answer(ANSWERS[task](messages))

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "jane.txt").write_text("Jane Doe met Tom Reed in Port Vell. Tom Reed sailed with Jane Doe to Kessel.\n")
    (corpus / "acme.txt").write_text("Acme Corp hired Lena Varga in Dunmore. Lena Varga ran Acme Corp in Dunmore.\n")
    (corpus / "suit.txt").write_text("The lawsuit against Jane Doe was filed in the spring.\n")
    db = tmp_path / "i.db"
    await sync([corpus], make_settings("http://llm.test/v1", index={"extract_claims": True}), db, root=corpus,
               transport=httpx.MockTransport(answer))
    store = Store(db, readonly=True)
    try:
        ids = {r["name"]: r["id"] for r in store.query("SELECT id, name FROM entities")}
        jane = ids["Jane Doe"]
        with store.snapshot():
            data = local_search.load_local_data(store, [jane])
        ctx = local_search.build_local_context(data, max_tokens=4000, text_share=0.3, community_share=0.2)
        shown = [x for x in ctx.text.splitlines() if " claim (" in x]
        assert shown == [f"[E:{jane}] claim (LAWSUIT, TRUE, from 2031-03-01) subject Acme Corp, object Jane Doe: "
                         "Acme Corp sued Jane Doe."]
        assert f"[E:{ids['Acme Corp']}]" not in ctx.tags
        _text, cited, _dropped, documents = citations.check(store, "Acme Corp sued her.", ctx.tags, [jane])
        assert not cited and "acme.txt" not in documents and "suit.txt" in documents, documents
    finally:
        store.close()


def test_a_claims_line_in_a_local_context_takes_the_tag_it_is_given_and_no_other():
    # claim_line(c) (now tagged_claim_line) without a tag fell back to the subject's, the tag a
    # claim found by its object must not carry (an entity the context does not show): a caller
    # that forgot it brought that back. Now the tag is required.
    c = {"id": "clm-1", "subject_id": "ent-acme", "object_id": "ent-jane", "subject_name": "Acme Corp",
         "object_name": "Jane Doe", "type": "LAWSUIT", "status": "TRUE", "description": "Acme Corp sued Jane Doe."}
    with pytest.raises(TypeError):
        local_search.tagged_claim_line(c)   # type: ignore[call-arg]
    tag = local_search.claim_tag(c, {"ent-jane"})
    assert local_search.tagged_claim_line(c, tag) == ("[E:ent-jane] claim (LAWSUIT, TRUE) subject Acme Corp, "
                                                      "object Jane Doe: Acme Corp sued Jane Doe.")


def test_ask_of_an_index_with_nothing_to_read_names_the_failures_command_that_reads_it(cli_run, tmp_path,
                                                                                     monkeypatch):
    # `ask "..." notes` from notes' parent, of an index whose first update published nothing and
    # of one whose last update indexed no file, said "`streamrag status --failures` lists what
    # failed", which run there said "no index found here or in a parent folder". It names the
    # command that reads this index from here, as `index notes` does: that command lists them.
    import shlex

    from conftest import chat_answer, llm_transport, simulated_transport

    transport = llm_transport(monkeypatch, httpx.MockTransport(lambda request: chat_answer("I cannot help.")))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "streamrag.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\nmax_retries = 0\n")
    (notes / "a.txt").write_text("Ada Osk met Bram Lind at the quay in Port Vell.\n")
    api = ("--api-base", "http://llm.test/v1")

    def named_by_ask(*where: str, cwd, said: str, failed: str) -> str:
        out = cli_run("ask", *api, "Who met Bram Lind?", *where, cwd=cwd)
        assert out.returncode == 1 and said in out.stderr, out.stderr
        named = re.findall(r"`(streamrag status --failures[^`]*)` lists what failed", out.stderr)
        assert len(named) == 1, out.stderr
        listed = cli_run(*shlex.split(named[0])[1:], cwd=cwd)
        assert listed.returncode == 0 and f"] {failed}" in listed.stdout, (named, listed.stdout, listed.stderr)
        return named[0]

    assert cli_run("index", "-q", *api, "notes", cwd=tmp_path).returncode == 1   # (every answer unusable)
    unpublished, none_read = "has nothing published yet", "the last update could not index any file it read"
    assert named_by_ask("notes", cwd=tmp_path, said=unpublished, failed="a.txt") == "streamrag status --failures notes"
    assert named_by_ask("--db", "notes/.streamrag/index.db", cwd=tmp_path, said=unpublished,
                        failed="a.txt") == "streamrag status --failures notes"
    assert named_by_ask(cwd=notes, said=unpublished, failed="a.txt") == "streamrag status --failures"
    # Published (a.txt), then its one file replaced by one that fails: a version of no document.
    transport["now"] = simulated_transport()
    assert cli_run("index", "-q", *api, "notes", cwd=tmp_path).returncode == 0
    (notes / "a.txt").unlink()
    (notes / "b.txt").write_text("Cora Vint sailed from Port Vell to Lisbon.\n")
    transport["now"] = httpx.MockTransport(lambda request: httpx.Response(500))
    assert cli_run("index", "-q", *api, "notes", cwd=tmp_path).returncode == 1
    assert named_by_ask("notes", cwd=tmp_path, said=none_read, failed="b.txt") == "streamrag status --failures notes"
    assert named_by_ask(cwd=notes, said=none_read, failed="b.txt") == "streamrag status --failures"
    # An index kept elsewhere, named by --db from another folder: named by --db, as given.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (notes / ".streamrag" / "index.db").rename(tmp_path / "kept.db")
    assert named_by_ask("--db", "../kept.db", cwd=elsewhere, said=none_read,
                        failed="b.txt") == "streamrag status --failures --db ../kept.db"


def test_ask_given_another_settings_file_names_the_index_by_db(cli_run, tmp_path, monkeypatch):
    # `ask --config cfg.toml Q notes` of notes' own index (cfg.toml gives no store.path) named
    # `streamrag status --failures notes`, which reads notes' own streamrag.toml: its store.path
    # named another index ("no index at notes/elsewhere.db"). As `index --config` does, it names
    # the index by --db; export's check too. Given the folder's own file, the folder still.
    import shlex

    from conftest import chat_answer, llm_transport

    llm_transport(monkeypatch, httpx.MockTransport(lambda request: chat_answer("I cannot help.")))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "streamrag.toml").write_text('[store]\npath = "elsewhere.db"\n')
    (tmp_path / "cfg.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\nmax_retries = 0\n")
    (notes / "a.txt").write_text("Ada Osk met Bram Lind at the quay in Port Vell.\n")
    api = ("--api-base", "http://llm.test/v1")
    assert cli_run("index", "-q", *api, "--config", "cfg.toml", "notes", cwd=tmp_path).returncode == 1

    def named(*command: str) -> str:
        out = cli_run(*command, cwd=tmp_path)
        assert out.returncode == 1 and "has nothing published yet" in out.stderr, out.stderr
        said = re.findall(r"`(streamrag status --failures[^`]*)` lists what failed", out.stderr)
        assert len(said) == 1, out.stderr
        listed = cli_run(*shlex.split(said[0])[1:], cwd=tmp_path)
        assert listed.returncode == 0 and "    a.txt" in listed.stdout, (said, listed.stdout, listed.stderr)
        return said[0]

    for command in (("ask", *api, "--config", "cfg.toml", "Who met Bram Lind?", "notes"),
                    ("export", "--config", "cfg.toml", "x.json", "notes")):
        assert " --db " in named(*command)
    (tmp_path / "cfg.toml").write_text("[llm]\nrequests_per_minute = 0\n")
    (notes / "streamrag.toml").write_text((tmp_path / "cfg.toml").read_text())
    assert named("ask", *api, "--config", "notes/streamrag.toml", "Who met Bram Lind?", "notes") \
        == "streamrag status --failures notes"
    # (one rule with index and watch, cli.failures_command_given: they said --db of this one)
    assert named("export", "--config", "notes/streamrag.toml", "x.json", "notes") == "streamrag status --failures notes"
    out = cli_run("index", "-q", *api, "--config", "notes/streamrag.toml", "notes", cwd=tmp_path)
    assert re.findall(r"`(streamrag status --failures[^`]*)` lists", out.stderr) == ["streamrag status --failures notes"], \
        out.stderr


def test_ask_of_an_index_with_nothing_to_read_loads_no_pipeline(cli_run, tmp_path, monkeypatch):
    # The failures command ask names was read from streamrag.pipeline (cli.failures_command's
    # import), which ask loads nowhere else: its error of an index with nothing to read took
    # 0.15 s more processor time (0.35 -> 0.49 s). It is status.FAILURES now.
    from conftest import chat_answer, llm_transport, python_probe

    llm_transport(monkeypatch, httpx.MockTransport(lambda request: chat_answer("I cannot help.")))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "streamrag.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\nmax_retries = 0\n")
    (notes / "a.txt").write_text("Ada Osk met Bram Lind at the quay in Port Vell.\n")
    assert cli_run("index", "-q", "--api-base", "http://llm.test/v1", "notes", cwd=tmp_path).returncode == 1
    lines = python_probe("import sys\nsys.stderr = sys.stdout\nfrom streamrag.cli import main\n"
                         "print('code', main(['ask', '--api-base', '', 'Who met Bram Lind?', 'notes']))\n"
                         "print('pipeline loaded', 'streamrag.pipeline' in sys.modules)", tmp_path)
    assert "code 1" in lines and any("`streamrag status --failures notes` lists what failed" in line
                                     for line in lines), lines
    assert "pipeline loaded False" in lines, lines


def _crowded_meetings(corpus, sentence: str) -> None:
    """Six meeting notes in ``corpus``, each ``sentence`` (formatted with ``others``, five people
    besides Ada Osk in another order each, and ``i``, its number) eight times: chunks mentioning
    many selected entities, which a local context takes first when nothing else orders them."""
    crowd = ["Bram Tell", "Mira Voss", "Olek Harn", "Lena Varga", "Tomas Quill", "Ines Rook"]
    for i in range(6):
        others = " and ".join(crowd[i:] + crowd[:i])
        (corpus / f"meeting_{i}.txt").write_text(sentence.format(others=others, i=i) * 8 + "\n", encoding="utf-8")


async def _local_context_asked(question: str, settings, db, monkeypatch) -> tuple:
    """The local context ``aask`` of ``question`` built (``local_search.build_local_context``),
    and its answer."""
    built: list[local_search.Context] = []
    build = local_search.build_local_context
    monkeypatch.setattr(local_search, "build_local_context", lambda *a, **k: built.append(build(*a, **k)) or built[-1])
    answer = await aask(question, settings, db, mode="local")
    [ctx] = built
    return ctx, answer


async def _home_among_meetings(tmp_path, monkeypatch, meeting: str, home: str, question: str) -> tuple:
    """The local context and answer of ``question`` over six crowded meeting notes
    (``_crowded_meetings`` of ``meeting``) and Ada Osk's home note, ending with ``home`` (as long
    as a meeting's, its sentence last: no room left over, nor a line cut to it, holds it),
    indexed offline into ``tmp_path``."""
    corpus = tmp_path / "notes"
    corpus.mkdir()
    _crowded_meetings(corpus, meeting)
    (corpus / "home.txt").write_text("Ada Osk kept to herself at the quay. " + "the gulls were loud that year. " * 12
                                     + home, encoding="utf-8")
    settings = make_settings("", query={"local_max_tokens": 1200})
    await sync([corpus], settings, tmp_path / "index.db", root=corpus)
    return await _local_context_asked(question, settings, tmp_path / "index.db", monkeypatch)


async def test_a_local_context_takes_the_named_entitys_chunks_that_have_the_questions_words(tmp_path, monkeypatch):
    """'Where did Scrooge live?' (A Christmas Carol, indexed offline): the text section took the
    four of Scrooge's 43 chunks mentioning the most other selected entities, and the one saying
    where he lived, with few others in it, was 21st. Among the named entity's chunks, those
    having the question's words ("live" finding "lived") come first; a word most chunks have
    ("quay" here) orders none."""
    ctx, answer = await _home_among_meetings(
        tmp_path, monkeypatch, "Ada Osk met {others} at the quay on day {i}. ",
        "Ada Osk lived in a narrow house above the quay.\n", "Where did Ada Osk live?")
    assert "narrow house" in ctx.text and ctx.sections["text"] > 0, ctx.text
    assert "narrow house" in answer.text, answer.text


async def test_a_word_most_chunks_have_does_not_order_a_local_contexts_chunks(tmp_path, monkeypatch):
    """'What did Wendell Tavden write in the letter?' (corpusgen seed 11, 200 reports): "letter",
    in 229 of 265 chunks, had BM25 put them in order of their length alone (FTS5 gives a word
    in most documents no weight), and the one with his letter, the longest, left the context.
    Such a word orders none: the chunks mentioning the most selected entities come first."""
    corpus = tmp_path / "notes"
    corpus.mkdir()
    gulls = "the gulls were loud that year. "
    for i in range(5):
        (corpus / f"read_{i}.txt").write_text(f"Ada Osk read a letter at the quay on day {i}. " + gulls * 14,
                                              encoding="utf-8")
    (corpus / "staff.txt").write_text("Ada Osk met Bram Tell, Mira Voss, Olek Harn and Lena Varga at the quay. "
                                      + gulls * 20 + "Ada Osk wrote in a letter that the quay would close.\n",
                                      encoding="utf-8")
    settings = make_settings("", query={"local_max_tokens": 1200})
    await sync([corpus], settings, tmp_path / "index.db", root=corpus)
    ctx, _ = await _local_context_asked("What did Ada Osk write in the letter?", settings, tmp_path / "index.db", monkeypatch)
    assert "quay would close" in ctx.text, ctx.text


async def test_a_local_context_finds_a_words_y_ending_turned_to_i(tmp_path, monkeypatch):
    """'Who did Ada Osk marry?': "marry" is the stem of "married", "marries" and "marry" alike
    (``extractive.stem``: "ied"/"ies" -> "y"), but as an FTS5 prefix "marry*" found no chunk
    saying "married" (none in A Christmas Carol or synth_small, 8 and 3 for "marri*"), so the one
    saying whom she married stayed out of the context; "companies"/"company", "studied"/"study"
    alike."""
    ctx, _ = await _home_among_meetings(
        tmp_path, monkeypatch, "Ada Osk met {others} at the quay on day {i}. ",
        "Ada Osk married a lighthouse keeper from the north.\n", "Who did Ada Osk marry?")
    assert "lighthouse keeper" in ctx.text, ctx.text


async def test_a_local_context_finds_an_irregular_verbs_forms(tmp_path, monkeypatch):
    """'What did Ada Osk buy?': "buy" found "buys" and "buying", not "bought" (no ending rule
    makes it), so the chunk saying what she bought stayed out of the context and the answer.
    A verb stands for its irregular forms too (``extractive.irregular_forms``)."""
    ctx, answer = await _home_among_meetings(
        tmp_path, monkeypatch, "Ada Osk met {others} at the quay on day {i}. ",
        "Ada Osk bought a brass lantern from a pedlar.\n", "What did Ada Osk buy?")
    assert "brass lantern" in ctx.text, ctx.text
    assert answer.text.split("\n")[2].startswith("- Ada Osk bought a brass lantern"), answer.text


async def test_a_local_context_finds_a_name_the_question_writes_by_its_whole_word(tmp_path, monkeypatch):
    """'Who did Belle marry?' (A Christmas Carol; no entity named Belle, so no anchor): "Belle"
    was stemmed to "bell", and "bell*" put first the chunks of church bells ("Bell, dong, ding;
    hammer, clash, clash!" was quoted). A word the question writes as a name is searched whole,
    as ``extractive.NameKeys`` matches it, a plural by its singular."""
    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Ada Osk rang the bell at the quay for the belles and the carters.\n",
                                  encoding="utf-8")
    settings = make_settings("")
    await sync([corpus], settings, tmp_path / "index.db", root=corpus)
    asked: list[list[str]] = []
    holding = local_search.chunks_holding
    monkeypatch.setattr(local_search, "chunks_holding", lambda store, stems: asked.append(list(stems))
                        or holding(store, stems))
    await aask("Whom did Ada Osk see with Belle and the Carters at the bells?", settings, tmp_path / "index.db",
               mode="local")
    # (each word as the index's words it stands for; "Carters": not "cart")
    assert asked and {("belle", "belles"), ("carter", "carters")} <= set(asked[0]), asked
    assert any("bell" in forms for forms in asked[0]), asked


async def test_a_local_context_finds_the_questions_words_by_their_stem_not_as_a_words_start(tmp_path, monkeypatch):
    """'What art did Ada Osk show?': "art", searched as the start of a word, found every chunk
    saying "articles" (as "run" found "rung" and "live" "liver"), and the one saying what art she
    showed stayed out of the context. A word stands for the index's words of its stem."""
    ctx, _ = await _home_among_meetings(
        tmp_path, monkeypatch, "Ada Osk met {others} at the quay on day {i} to read articles. ",
        "Ada Osk showed her art of woven nets to the town.\n", "What art did Ada Osk show?")
    assert "woven nets" in ctx.text, ctx.text


async def test_a_word_most_searchable_chunks_have_orders_none_however_many_chunks_the_index_keeps(tmp_path, monkeypatch):
    """The "more than half the chunks" of ``chunks_holding`` counted the rows of ``chunks``, which
    also holds chunks not published (their extraction failed, or a run stopped before it
    published them): with eight such, "letter", in all six searchable chunks, ordered them again
    by their length alone, and Ada Osk's letter left the context
    (``test_a_word_most_chunks_have_does_not_order_a_local_contexts_chunks``)."""
    corpus = tmp_path / "notes"
    corpus.mkdir()
    gulls = "the gulls were loud that year. "
    for i in range(5):
        (corpus / f"read_{i}.txt").write_text(f"Ada Osk read a letter at the quay on day {i}. " + gulls * 14,
                                              encoding="utf-8")
    (corpus / "staff.txt").write_text("Ada Osk met Bram Tell, Mira Voss, Olek Harn and Lena Varga at the quay. "
                                      + gulls * 20 + "Ada Osk wrote in a letter that the quay would close.\n",
                                      encoding="utf-8")
    settings = make_settings("", query={"local_max_tokens": 1200})
    await sync([corpus], settings, tmp_path / "index.db", root=corpus)
    store = Store(tmp_path / "index.db")
    try:   # (chunks saved, not published)
        store.conn.executemany("INSERT INTO chunks(id, text, tokens) VALUES (?,?,?)",
                               [(f"chk-unpublished{i}", f"The ferry ran late on day {i}.", 8) for i in range(8)])
        store.conn.commit()
    finally:
        store.close()
    ctx, _ = await _local_context_asked("What did Ada Osk write in the letter?", settings, tmp_path / "index.db", monkeypatch)
    assert "quay would close" in ctx.text, ctx.text


async def test_the_chunks_holding_a_word_most_chunks_have_are_not_read(tmp_path):
    """A word in more than half the chunks orders none, and finding that read the ids and BM25
    scores of half the index (a row's id is read with its whole text: 14 ms for a word in half
    of 2,488 chunks, 0.4 for its rowids). It is counted by rowid, and the chunks of the other
    words alone are read."""
    corpus = tmp_path / "notes"
    corpus.mkdir()
    for i in range(6):
        (corpus / f"n_{i}.txt").write_text(f"Ada Osk read a letter at the quay on day {i}.\n"
                                           + ("She married Bram Tell.\n" if i == 0 else ""), encoding="utf-8")
    await sync([corpus], make_settings(""), tmp_path / "index.db", root=corpus)
    store = Store(tmp_path / "index.db")
    statements: list[str] = []
    try:
        store.conn.set_trace_callback(statements.append)
        held = local_search.chunks_holding(store, [("letter", "letters"), ("married", "marry")])
    finally:
        store.close()
    assert len(held) == 1 and list(held.values())[0][0] == 1, held
    read = [s for s in statements if "bm25" in s]
    assert read and not any("letter" in s for s in read), statements


async def test_a_three_letter_word_ending_in_e_does_not_stand_for_the_two_letter_word_before_its_e(tmp_path, monkeypatch):
    """'What ore did Ada Osk show?': a final "e" aside, "ore" stood for "or" too (and "toe" for
    "to", "ate" for "at", "bye" for "by"), which most chunks have: the word ordered none, and the
    chunk saying what ore she showed stayed out of the context. No ending leaves a two-letter
    stem, so a three-letter one keeps its "e"."""
    ctx, _ = await _home_among_meetings(
        tmp_path, monkeypatch, "Ada Osk met {others} or their friends at the quay on day {i}. ",
        "Ada Osk showed her copper ore of the northern hills.\n", "What ore did Ada Osk show?")
    assert "copper ore" in ctx.text, ctx.text
