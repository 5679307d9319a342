"""Updates cost what changed: stable community ids, dirty-only reports, a graph equal to a
fresh index, and clustering quality that does not drift with history."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import sqlite3
from pathlib import Path

import httpx
import msgspec
import pytest

from conftest import failing_for, index_snapshot, make_settings
from streamrag.chunker import chunk_document
from streamrag.communities import modularity
from streamrag.config import Settings
from streamrag.graph_state import GraphCache, GraphState
from streamrag.errors import ConfigError, LLMRequestError, LLMUnavailableError
from streamrag.pipeline import sync
from streamrag.records import Document, Relationship
from streamrag.run_progress import Progress
from streamrag.simulator import Simulator, SimulatorConfig
from streamrag.store import Store

pytestmark = pytest.mark.anyio
GENERATED = Path(__file__).parent / "data" / "news41"


@pytest.fixture(scope="module")
def generated() -> Path:
    """41 synthetic news articles (the same 40 as --docs 40, plus one more); see tests/data."""
    return GENERATED


def state(db) -> dict:
    store = Store(db, readonly=True)
    with store.snapshot():
        members: dict[str, set[str]] = {}
        for r in store.query("SELECT community_id, entity_id FROM community_members"):
            members.setdefault(r["community_id"], set()).add(r["entity_id"])
        communities = {r["id"]: (r["level"], r["parent"], frozenset(members.get(r["id"], ())), r["report_key"])
                       for r in store.query("SELECT * FROM communities")}
        contexts = {r["id"]: r["context_key"] for r in store.query("SELECT id, context_key FROM communities")}
        descriptions = {r["id"]: r["description"] for r in store.query("SELECT id, description FROM entities")}
        edges = [(r["source"], r["target"], r["weight"]) for r in store.query("SELECT * FROM relationships")]
    store.close()
    return {"communities": communities, "descriptions": descriptions, "edges": edges, "contexts": contexts}


def folder(generated: Path, dest: Path, docs: range) -> Path:
    dest.mkdir(parents=True)
    for i in docs:
        name = f"doc_{i:05d}.txt"
        shutil.copy2(generated / name, dest / name)
    return dest


@pytest.mark.parametrize("offline", [True, False])
async def test_adding_a_document_rewrites_only_dirty_reports(generated, tmp_path, simulator, offline):
    settings = make_settings("" if offline else simulator.base_url)
    corpus = folder(generated, tmp_path / "c", range(1, 41))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    before = state(db)
    shutil.copy2(generated / "doc_00041.txt", corpus / "doc_00041.txt")
    second = await sync([corpus], settings, db, root=corpus)
    after = state(db)
    assert second.documents_added == 1 and second.chunks_extracted >= 1 and not second.reclustered

    # What the change touched: entities that are new or whose description changed, and both
    # ends of every relationship that is new or changed.
    touched = {e for e, d in after["descriptions"].items() if before["descriptions"].get(e) != d}
    old_edges = {(a, b): w for a, b, w in before["edges"]}
    for a, b, w in after["edges"]:
        if old_edges.get((a, b)) != w:
            touched |= {a, b}
    old, new = before["communities"], after["communities"]

    def dirty(cid: str) -> bool:
        level, parent, members, report = new[cid]
        if cid not in old or old[cid][2] != members or members & touched:
            return True
        return any(new[k][3] != old.get(k, (0, 0, 0, None))[3] for k, v in new.items() if v[1] == cid)

    rewritten = {cid for cid, v in new.items() if old.get(cid, (0, 0, 0, None))[3] != v[3]}
    assert rewritten, "adding a document must change some report"
    assert all(dirty(cid) for cid in rewritten)                     # only dirty ones rewritten
    # A report is rewritten exactly when the context it is written from changed (a touched
    # entity that did not fit a large community's context budget changes nothing there).
    for cid in set(old) & set(new):
        same_context = before["contexts"][cid] == after["contexts"][cid]
        assert (cid not in rewritten) == same_context, cid
    untouched = [cid for cid in old if cid in new and not dirty(cid)]
    assert untouched and all(new[cid][3] == old[cid][3] for cid in untouched)
    # A community whose members did not change keeps its id.
    old_ids = {(v[0], v[2]): cid for cid, v in old.items()}
    for cid, v in new.items():
        if (v[0], v[2]) in old_ids:
            assert old_ids[(v[0], v[2])] == cid
    assert second.reports_generated == len(rewritten) < len(new)


async def test_a_sequence_of_changes_matches_a_fresh_index(generated, tmp_path):
    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 31))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    for step in range(4):
        shutil.copy2(generated / f"doc_{31 + step:05d}.txt", corpus / f"doc_{31 + step:05d}.txt")
        (corpus / f"doc_{2 + step:05d}.txt").unlink()
        victim = corpus / f"doc_{10 + step:05d}.txt"
        victim.write_text(victim.read_text() + "\n\nOfficials said more details would follow.\n")
        (corpus / f"doc_{20 + step:05d}.txt").rename(corpus / f"renamed_{step}.txt")
        await sync([corpus], settings, db, root=corpus)
    incremental = state(db)
    fresh_dir = tmp_path / "fresh"
    shutil.copytree(corpus, fresh_dir)
    fresh_db = tmp_path / "f.db"
    await sync([fresh_dir], settings, fresh_db, root=fresh_dir)
    fresh = state(fresh_db)
    assert incremental["descriptions"] == fresh["descriptions"]
    assert sorted(incremental["edges"]) == sorted(fresh["edges"])

    def partition(s, level):
        return {members for (lvl, _p, members, _r) in s["communities"].values() if lvl == level}

    # Every entity sits in exactly one community of level 0, as in the fresh index...
    level0 = partition(incremental, 0)
    assert set().union(*level0) == set(fresh["descriptions"])
    assert sum(len(m) for m in level0) == len(fresh["descriptions"])
    # ... and the partition kept across updates is about as good as a fresh clustering.
    def as_communities(s):
        from streamrag.records import Community
        return [Community(id=c, level=v[0], parent=v[1], members=sorted(v[2])) for c, v in s["communities"].items()]
    q_inc = modularity(as_communities(incremental), incremental["edges"])
    q_fresh = modularity(as_communities(fresh), fresh["edges"])
    assert q_inc >= q_fresh - 0.02


async def test_a_kept_graph_gives_the_index_a_store_read_gives(generated, tmp_path, monkeypatch):
    # The daemon keeps the graph it published for its next sync. Every take is checked against
    # a read of the store (the check_shortcuts fixture); here the indexes must also be equal.
    taken = []
    take = GraphCache.take
    monkeypatch.setattr(GraphCache, "take", lambda self, store: taken.append(take(self, store)) or taken[-1])
    settings = make_settings()
    corpus, other = (folder(generated, tmp_path / name, range(1, 31)) for name in ("c", "d"))
    cache = GraphCache()
    await sync([corpus], settings, tmp_path / "i.db", root=corpus, graph_cache=cache)
    await sync([other], settings, tmp_path / "j.db", root=other)
    for step in range(4):
        for root in (corpus, other):
            shutil.copy2(generated / f"doc_{31 + step:05d}.txt", root / f"doc_{31 + step:05d}.txt")
            (root / f"doc_{2 + step:05d}.txt").unlink()
            victim = root / f"doc_{10 + step:05d}.txt"
            victim.write_text(victim.read_text() + "\n\nOfficials said more details would follow.\n")
            (root / f"doc_{20 + step:05d}.txt").rename(root / f"renamed_{step}.txt")
        if step == 2:  # another writer publishes in between: the kept graph is stale
            await sync([corpus], settings, tmp_path / "i.db", root=corpus)
        await sync([corpus], settings, tmp_path / "i.db", root=corpus, graph_cache=cache)
        await sync([other], settings, tmp_path / "j.db", root=other)
    assert [t is not None for t in taken] == [False, True, True, False, True]
    assert index_snapshot(tmp_path / "i.db") == index_snapshot(tmp_path / "j.db")
    assert state(tmp_path / "i.db") == state(tmp_path / "j.db")


class _Passes(dict):
    """A graph's elements, counting the passes made over all of them."""

    passes = 0

    def __iter__(self):
        _Passes.passes += 1
        return super().__iter__()

    def values(self):
        _Passes.passes += 1
        return super().values()

    def items(self):
        _Passes.passes += 1
        return super().items()


async def test_a_sync_with_nothing_changed_from_a_kept_graph_passes_over_no_entity_or_relationship(
        generated, tmp_path, monkeypatch):
    # What a sync costs should follow what changed: with nothing changed, none of the 200,000
    # relationships of a 10,000-document index need be looked at (the graph was re-sorted,
    # compared with the published one and grouped by source, on every such run).
    from streamrag.pipeline import Indexer

    monkeypatch.setattr(Indexer, "check_shortcuts", False)   # (the checks read the whole graph)
    take = GraphCache.take

    def watched(self, store):
        kept = take(self, store)
        if kept is not None:
            kept.entities, kept.relationships = _Passes(kept.entities), _Passes(kept.relationships)
        return kept

    monkeypatch.setattr(GraphCache, "take", watched)
    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 21))
    cache = GraphCache()
    first = await sync([corpus], settings, tmp_path / "i.db", root=corpus, graph_cache=cache)
    before = index_snapshot(tmp_path / "i.db")
    _Passes.passes = 0
    again = await sync([corpus], settings, tmp_path / "i.db", root=corpus, graph_cache=cache)
    assert _Passes.passes == 0
    assert (again.published, again.reports_generated, again.entities) == (False, 0, first.entities)
    assert index_snapshot(tmp_path / "i.db") == before


async def test_a_kept_graph_is_clustered_without_its_edges_sorted_again(generated, tmp_path, monkeypatch):
    # The graph Leiden reads was made from every relationship on every update (a quarter of the
    # clustering of 200,000); a kept graph's is made from the published one's and the edges of
    # the entities whose edges moved, and it clusters to the index a store read gives.
    from streamrag import communities
    from streamrag.pipeline import Indexer

    monkeypatch.setattr(Indexer, "check_shortcuts", False)   # (its check makes the graph anew)
    given: list[int] = []
    sorted_pairs = communities.sorted_pairs

    def counted(index, edges, **kw):
        edges = list(edges)
        given.append(len(edges))
        return sorted_pairs(index, edges, **kw)

    monkeypatch.setattr(communities, "sorted_pairs", counted)
    corpus = folder(generated, tmp_path / "c", range(1, 31))
    read = folder(generated, tmp_path / "d", range(1, 31))   # the same, its graph read from the store
    cache = GraphCache()
    await sync([corpus], make_settings(), tmp_path / "i.db", root=corpus, graph_cache=cache)
    await sync([read], make_settings(), tmp_path / "j.db", root=read)
    for target in (corpus, read):
        shutil.copy2(generated / "doc_00031.txt", target / "doc_00031.txt")
        (target / "doc_00004.txt").unlink()
    given.clear()
    kept = await sync([corpus], make_settings(), tmp_path / "i.db", root=corpus, graph_cache=cache)
    assert kept.relationships > 100 and given and max(given) < kept.relationships
    await sync([read], make_settings(), tmp_path / "j.db", root=read)
    assert state(tmp_path / "i.db") == state(tmp_path / "j.db")
    assert index_snapshot(tmp_path / "i.db") == index_snapshot(tmp_path / "j.db")


async def test_a_kept_graph_keeps_each_entitys_relationships_by_source_up_to_date(generated, tmp_path):
    # The report stage builds its contexts from them: added, deleted and changed documents
    # must leave them as a grouping of the published relationships has them.
    from streamrag.graph_state import GraphState

    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 31))
    db = tmp_path / "i.db"
    cache = GraphCache()
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    for step in range(3):
        shutil.copy2(generated / f"doc_{31 + step:05d}.txt", corpus / f"doc_{31 + step:05d}.txt")
        (corpus / f"doc_{2 + step:05d}.txt").unlink()
        victim = corpus / f"doc_{10 + step:05d}.txt"
        victim.write_text(victim.read_text() + "\n\nOfficials said Corin Fenell met Noor Wexell.\n")
        await sync([corpus], settings, db, root=corpus, graph_cache=cache)
        store = Store(db, readonly=True)
        kept = cache.take(store)
        rows = store.query("SELECT id, source FROM relationships ORDER BY id")
        loaded = GraphState.load(store)
        store.close()
        assert kept is not None
        grouped: dict[str, list[str]] = {}
        for row in rows:
            grouped.setdefault(row["source"], []).append(row["id"])
        assert kept.by_source == grouped == loaded.relationships_by_source(), step
        cache.keep(kept, db)


def _reports(db) -> list[tuple]:
    store = Store(db, readonly=True)
    rows = sorted(tuple(v for k, v in r.items() if k != "created_at") for r in store.query("SELECT * FROM reports"))
    store.close()
    return rows


def _random_edit(rnd: random.Random, roots: tuple[Path, Path], generated: Path, step: int) -> list:
    """One step of random edits, made alike in both folders: documents added, deleted, renamed,
    appended to, cut, replaced by another's text, a name shouted (the entity's shown name
    changes) and two names related the other way round (a relationship's source changes)."""
    names = sorted(p.name for p in generated.iterdir())
    ops = []
    for _ in range(rnd.randint(1, 3)):
        present = sorted(p.name for p in roots[0].iterdir() if p.is_file())
        op = rnd.choice(["add", "delete", "append", "rename", "shout", "cut", "replace", "flip"])
        if op == "add":
            if absent := [n for n in names if n not in present]:
                ops.append(("add", rnd.choice(absent), "", 0.0))
        elif present:
            ops.append((op, rnd.choice(present), rnd.choice(names), rnd.random()))
    for root in roots:
        for op, name, other, r in ops:
            path = root / name
            if op == "add":
                shutil.copy2(generated / name, path)
                continue
            if not path.exists():
                continue
            pick, text = random.Random(r), path.read_text()
            if op == "delete":
                path.unlink()
            elif op == "rename":
                path.rename(root / f"r{step}_{name}")
            elif op == "append":
                path.write_text(text + "\n\n" + pick.choice((generated / other).read_text().split("\n\n")) + "\n")
            elif op == "cut":
                paragraphs = text.split("\n\n")
                if len(paragraphs) > 2:
                    del paragraphs[pick.randrange(1, len(paragraphs))]
                path.write_text("\n\n".join(paragraphs))
            elif op == "replace":
                path.write_text((generated / other).read_text())
            elif op == "shout" and (words := sorted(set(re.findall(r"\b[A-Z][a-z]{3,}\b", text)))):
                w = pick.choice(words).upper()
                path.write_text(text + "\n\n" + f"The council thanked {w}. Then {w} spoke. Later {w} left. " * 2)
            elif op == "flip" and len(two := sorted(set(re.findall(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", text)))) > 1:
                x, y = pick.sample(two, 2)
                path.write_text(text + "\n\n" + f"{y} praised {x} for the work. {y} met {x} again.\n")
    return ops


@pytest.mark.parametrize("seed,offline", [(3, True), (8, True), (5, False)])
async def test_random_changes_give_a_kept_graph_the_index_a_store_read_gives(generated, tmp_path, simulator,
                                                                            monkeypatch, seed, offline):
    # A daemon's syncs start from the graph it kept (GraphCache), whose degrees, weights,
    # relationships by source, order and partition are brought up to date from what each run
    # merged; `index` reads them from the store. After any sequence of changes, settings changes
    # and --recluster, both must publish the same index: entities, relationships, provenance,
    # claims, communities with their ids, report keys and contexts, and reports.
    from streamrag.pipeline import Indexer

    monkeypatch.setattr(Indexer, "check_shortcuts", not offline)   # (offline: the daemon's own path)
    rnd = random.Random(seed)
    base = "" if offline else simulator.base_url
    claims = {} if offline else {"extract_claims": True}
    settings = make_settings(base, index=claims)
    kept, read = (folder(generated, tmp_path / name, range(1, 16)) for name in ("k", "r"))
    cache = GraphCache()
    await sync([kept], settings, tmp_path / "k.db", root=kept, graph_cache=cache)
    await sync([read], settings, tmp_path / "r.db", root=read)
    for step in range(7):
        ops = _random_edit(rnd, (kept, read), generated, step)
        if rnd.random() < 0.25:
            index = {"leiden_resolution": rnd.choice([1.0, 0.6]), "max_cluster_size": rnd.choice([10, 6]),
                     "summary_max_descriptions": rnd.choice([10, 2]), "report_max_input_tokens": rnd.choice([6000, 800]),
                     "report_min_members": rnd.choice([3, 1]), "recluster_drift": rnd.choice([0.02, 0.0])}
            settings = make_settings(base, index={**index, **claims})
            ops.append(("settings", index))
        recluster = rnd.random() < 0.15
        await sync([kept], settings, tmp_path / "k.db", root=kept, graph_cache=cache, recluster=recluster)
        await sync([read], settings, tmp_path / "r.db", root=read, recluster=recluster)
        k, r = tmp_path / "k.db", tmp_path / "r.db"
        assert index_snapshot(k) == index_snapshot(r), (step, ops)
        assert state(k) == state(r), (step, ops)
        assert _reports(k) == _reports(r), (step, ops)


async def test_recluster_gives_the_fresh_partition_with_old_ids(generated, tmp_path):
    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 31))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    ids_before = set(state(db)["communities"])
    shutil.copy2(generated / "doc_00031.txt", corpus / "doc_00031.txt")
    result = await sync([corpus], settings, db, root=corpus, recluster=True)
    assert result.reclustered
    got = await same_partition_as_fresh(corpus, settings, db, tmp_path)
    assert len(ids_before & set(got["communities"])) > 0.5 * len(ids_before)


async def same_partition_as_fresh(corpus: Path, settings, db: Path, tmp_path: Path) -> dict:
    """Asserts the communities at ``db`` (ids aside) are those of a fresh index of a copy of
    ``corpus`` with ``settings``; returns the state at ``db``."""
    fresh_dir = tmp_path / "fresh"
    shutil.copytree(corpus, fresh_dir)
    await sync([fresh_dir], settings, tmp_path / "f.db", root=fresh_dir)
    got, fresh = state(db), state(tmp_path / "f.db")
    shape = lambda s: sorted((v[0], tuple(sorted(v[2]))) for v in s["communities"].values())  # noqa: E731
    assert shape(got) == shape(fresh)
    return got


async def test_new_clustering_settings_give_the_fresh_partition_with_old_ids(generated, tmp_path):
    # A changed leiden_resolution was warm-started from the old settings' partition, which it
    # mostly kept; only --recluster gave what a fresh index with the new settings has.
    corpus = folder(generated, tmp_path / "c", range(1, 31))
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    ids_before = set(state(db)["communities"])
    finer = make_settings(index={"leiden_resolution": 2.0})
    result = await sync([corpus], finer, db, root=corpus)
    assert result.reclustered
    got = await same_partition_as_fresh(corpus, finer, db, tmp_path)
    assert ids_before & set(got["communities"])
    assert not (await sync([corpus], finer, db, root=corpus)).reclustered   # then as usual


async def test_regen_threshold_keeps_reports_of_small_changes(generated, tmp_path, simulator):
    strict = make_settings(simulator.base_url)
    lenient = make_settings(simulator.base_url, index={"report_regen_threshold": 0.5})
    results = {}
    for name, settings in (("strict", strict), ("lenient", lenient)):
        corpus = folder(generated, tmp_path / name, range(1, 31))
        db = tmp_path / f"{name}.db"
        await sync([corpus], settings, db, root=corpus)
        shutil.copy2(generated / "doc_00031.txt", corpus / "doc_00031.txt")
        results[name] = await sync([corpus], settings, db, root=corpus)
    assert results["lenient"].reports_generated < results["strict"].reports_generated


async def test_regen_threshold_keeps_no_report_naming_an_entity_an_edit_withdrew(generated, tmp_path, simulator):
    # Under the threshold, a report whose context lost one entity of many was kept as it was:
    # an edit taking a name out of the only document naming it left its large community's report,
    # written from the entity's line (here C5 of 22 members), and on synth_small one titled with
    # the name, which global search went on quoting while ask said nothing in the index names it.
    settings = make_settings(simulator.base_url, index={"report_regen_threshold": 0.5})
    corpus = folder(generated, tmp_path / "c", range(1, 31))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    store = Store(db, readonly=True)
    with store.snapshot():
        # An entity one document names, in the largest community (its share of the context is
        # least), and part of no other's name.
        gone, name, path = next((r["id"], r["name"], r["path"]) for r in store.query(
            "SELECT e.id, e.name, min(d.path) AS path, max(c.size) AS size FROM entities e"
            " JOIN entity_sources s ON s.entity_id = e.id JOIN document_chunks dc ON dc.chunk_id = s.chunk_id"
            " JOIN documents d ON d.id = dc.doc_id JOIN community_members m ON m.entity_id = e.id"
            " JOIN communities c ON c.id = m.community_id WHERE e.name LIKE '% %'"
            " AND NOT EXISTS (SELECT 1 FROM entities o WHERE o.id != e.id AND instr(o.name, e.name))"
            " GROUP BY e.id HAVING count(DISTINCT d.id) = 1 ORDER BY size DESC, e.id"))
    store.close()
    doc = corpus / path
    doc.write_text(doc.read_text().replace(name, "the official"))
    await sync([corpus], settings, db, root=corpus)
    store = Store(db, readonly=True)
    with store.snapshot():
        assert not list(store.query("SELECT id FROM entities WHERE name = ?", (name,)))
        naming = [r["id"] for r in store.query(   # (by its name, or its line in the context)
            "SELECT c.id FROM communities c JOIN reports r ON r.key = c.report_key"
            " WHERE instr(r.text, ?) OR instr(r.elements, ?)", (name, gone))]
    store.close()
    assert naming == []


@pytest.mark.parametrize("refusal", [
    {"json": {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}},
    {"json": {"error": {"message": "Limit reached for requests per day"}}, "headers": {"retry-after": "30000"}},
], ids=["no-quota", "daily-limit"])
async def test_a_refusal_every_call_would_get_stops_the_run_at_the_first(corpus, tmp_path, sim_settings, refusal):
    db = tmp_path / "i.db"
    await sync([corpus], sim_settings, db, root=corpus)
    before = index_snapshot(db)
    for doc in corpus.glob("*.txt"):
        doc.write_text(doc.read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")
    seen = []

    def refuse(request):
        if request.method == "GET":   # (GET /models, which a run asks first: no listing)
            return httpx.Response(404)
        seen.append(request)
        return httpx.Response(429, **refusal)
    settings = make_settings("http://llm.test/v1", index={"chunk_size": 80, "chunk_overlap": 10},
                             pipeline={"extract_workers": 1})
    with pytest.raises(LLMRequestError, match="Nothing was published"):
        await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(refuse))
    assert len(seen) == 1 and index_snapshot(db) == before


async def test_an_index_a_model_built_is_not_rebuilt_offline_for_want_of_an_endpoint(corpus, tmp_path, sim_settings):
    db = tmp_path / "i.db"
    await sync([corpus], sim_settings, db, root=corpus)
    before = index_snapshot(db)
    (corpus / "new.txt").write_text("Quillon Marbeck opened a ferry office in Port Vell.\n")
    no_endpoint = make_settings("", index={"chunk_size": 80, "chunk_overlap": 10})
    with pytest.raises(ConfigError, match="built with a model, and no endpoint is set now .* pass --offline"):
        await sync([corpus], no_endpoint, db, root=corpus)
    assert index_snapshot(db) == before
    # Meant: --offline (index.extractor = "nlp") rebuilds it offline; then no endpoint is needed.
    offline = make_settings("", index={"chunk_size": 80, "chunk_overlap": 10, "extractor": "nlp"})
    assert (await sync([corpus], offline, db, root=corpus)).offline
    assert (await sync([corpus], no_endpoint, db, root=corpus)).documents_added == 0


async def test_a_new_file_none_of_whose_chunks_is_extracted_is_left_for_the_next_run(corpus, tmp_path,
                                                                                    sim_settings):
    # It was published as a document no search could find, and counted as one (a watched
    # folder's new files during an outage).
    db = tmp_path / "i.db"
    published = await sync([corpus], sim_settings, db, root=corpus)
    before = index_snapshot(db)
    (corpus / "late.txt").write_text("Quillon Marbeck opened a ferry office in Port Vell.\n")
    with Simulator(SimulatorConfig(fault_rate=1.0, timeout_s=0)) as failing:
        broken = make_settings(failing.base_url, index={"chunk_size": 80, "chunk_overlap": 10},
                               llm={"max_retries": 0})
        result = await sync([corpus], broken, db, root=corpus)
    assert result.failed_items >= 1 and result.documents == published.documents
    assert any(w.startswith("late.txt: none of its chunks could be extracted") for w in result.warnings)
    assert index_snapshot(db) == before and "late.txt" not in document_titles(db)
    again = await sync([corpus], sim_settings, db, root=corpus)   # the endpoint is back: read again
    assert again.documents_added == 1 and again.failures == 0 and "late.txt" in document_titles(db)


async def test_the_calls_a_run_cancelled_as_it_gave_up_are_recorded_as_cancelled(corpus, tmp_path):
    # A soak tester's endpoint answering HTTP 500 got 186 requests while llm_calls held 12
    # calls: those still under way when the run gave up were cancelled, and not recorded.
    import anyio

    from streamrag.status import gather_status

    seen: list[httpx.Request] = []

    async def failing_then_slow(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":   # (GET /models, which a run asks first: no listing)
            return httpx.Response(404)
        seen.append(request)
        if len(seen) > 3:
            await anyio.sleep(3600)   # still under way when the third failure stops the run
        return httpx.Response(500, json={"error": {"message": "boom"}})

    db = tmp_path / "i.db"
    settings = make_settings("http://llm.test/v1", index={"chunk_size": 80, "chunk_overlap": 10},
                             llm={"max_retries": 0})
    with anyio.fail_after(20), pytest.raises(LLMUnavailableError, match="Nothing was published"):
        await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(failing_then_slow))
    store = Store(db, readonly=True)
    try:
        llm = gather_status(store)["llm"]
    finally:
        store.close()
    assert len(seen) > 3
    # One request a call (no retries): each is a call recorded, the cancelled ones as such.
    assert llm["calls"] == len(seen) and llm["errors"] == 3, (len(seen), llm)
    assert llm["cancelled"] == len(seen) - 3, (len(seen), llm)


async def test_a_run_against_an_endpoint_failing_every_try_does_not_wait_for_its_hung_tries(
        corpus, tmp_path, monkeypatch):
    """Every request fails (HTTP 500, garbage, cut-off answers, hangs): once HOPELESS_TRIES
    tries all failed over HOPELESS_S, the run stops, the hung tries cut short. (It waited for
    each hung try and the retries after it: 150 s for 3 small files with 30 s hangs.) A hang
    here lasts an hour and a try may wait 120 s for its answer, so a run that waited for even
    one hung try would meet the guard; one that cuts them short ends in seconds."""
    import anyio

    import streamrag.endpoint_health as endpoint_health

    # No span of time asked of the failed tries: HOPELESS_S 1.0 let a fast run meet its 12
    # failures within a second, its tries in flight all hung then, and nothing more came.
    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    with Simulator(SimulatorConfig(fault_rate=1.0, timeout_s=3600)) as failing:
        settings = make_settings(failing.base_url, index={"chunk_size": 80, "chunk_overlap": 10},
                                 llm={"request_timeout_s": 120})
        with anyio.move_on_after(100) as guard:
            with pytest.raises(LLMUnavailableError, match="failed every one of the"):
                await sync([corpus], settings, tmp_path / "i.db", root=corpus)
        assert not guard.cancelled_caught, f"still waiting after 100 s: {failing.stats()}"
        assert failing.faults.get("timeout")   # (tries did hang)


async def test_a_flaky_endpoint_is_not_taken_for_one_failing_every_try(corpus, tmp_path, monkeypatch):
    """With 30% of requests failing, some try is answered usably long before HOPELESS_TRIES
    have failed (even with no HOPELESS_S): the run retries, and extracts every chunk."""
    import streamrag.endpoint_health as endpoint_health

    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.0)
    with Simulator(SimulatorConfig(fault_rate=0.3, timeout_s=0.2, seed=3)) as flaky:
        settings = make_settings(flaky.base_url, index={"chunk_size": 80, "chunk_overlap": 10},
                                 llm={"max_retries": 6})
        result = await sync([corpus], settings, tmp_path / "i.db", root=corpus)
        assert sum(flaky.faults.values()) >= 10
    assert result.chunks_extracted == result.chunks > 0


async def test_tries_that_time_out_connecting_are_no_sign_of_an_endpoint_failing_everything(
        corpus, tmp_path, monkeypatch):
    """A host that does not take connections for a while (restarting, its backlog full) times
    out connecting: a timeout, no answer, and no sign of an endpoint failing every request
    (HOPELESS_TRIES). (Counted as HTTP errors, 13 of them over HOPELESS_S ended the run.)"""
    import streamrag.endpoint_health as endpoint_health

    monkeypatch.setattr(endpoint_health, "HOPELESS_S", 0.05)
    real = httpx.AsyncHTTPTransport()
    timed_out = [0]

    class Unreachable(httpx.AsyncBaseTransport):   # for its first 13 tries, then answering
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if timed_out[0] < 13:
                timed_out[0] += 1
                raise httpx.ConnectTimeout("timed out", request=request)
            return await real.handle_async_request(request)

    with Simulator(SimulatorConfig()) as sim:
        settings = make_settings(sim.base_url, index={"chunk_size": 80, "chunk_overlap": 10},
                                 llm={"max_retries": 6})
        result = await sync([corpus], settings, tmp_path / "i.db", root=corpus, transport=Unreachable())
    assert timed_out[0] == 13
    assert result.chunks_extracted == result.chunks > 0


def document_titles(db: Path) -> dict[str, str]:
    store = Store(db, readonly=True)
    try:
        return {r["path"]: r["title"] for r in store.query("SELECT path, title FROM documents")}
    finally:
        store.close()


async def test_an_edit_whose_extraction_fails_keeps_the_previous_version(corpus, tmp_path, sim_settings):
    db = tmp_path / "i.db"
    published = await sync([corpus], sim_settings, db, root=corpus)
    before = index_snapshot(db)
    victim = sorted(corpus.glob("*.txt"))[0]
    titles = document_titles(db)
    # (The new first line is the new version's title.)
    victim.write_text("Ferry news\n\n" + victim.read_text() + "\n\nQuillon Marbeck opened a ferry office.\n")

    # Nothing listens at the endpoint: the run stops before publishing, and says so.
    down = make_settings("http://127.0.0.1:9/v1", index={"chunk_size": 80, "chunk_overlap": 10},
                         llm={"max_retries": 0})
    with pytest.raises(LLMUnavailableError, match="Nothing was published"):
        await sync([corpus], down, db, root=corpus)
    assert index_snapshot(db) == before
    # The endpoint answers, but only with errors: what worked is published, and the edited file
    # keeps its previous version until its new chunks can be extracted. (HTTP 500s every time: the
    # simulator's faults at fault_rate 1.0 are of four kinds, by a hash of each attempt, and a run
    # whose every attempt was a dropped connection never reached the endpoint: 02e18e9's one more
    # ask of a cut answer moved the retried run's attempts onto such faults.)
    def failing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": {"message": "internal error", "type": "server_error"}})

    broken = make_settings("http://127.0.0.1:9/v1", index={"chunk_size": 80, "chunk_overlap": 10},
                           llm={"max_retries": 0})
    result = await sync([corpus], broken, db, root=corpus, transport=httpx.MockTransport(failing))
    # ... and again, as watch retries an outage
    retried = await sync([corpus], broken, db, root=corpus, transport=httpx.MockTransport(failing))
    assert result.failures >= 1 and any(victim.name in w and "previous version" in w for w in result.warnings)
    assert index_snapshot(db) == before        # nothing the old version said was dropped
    assert document_titles(db) == titles       # ... and it is shown as it was (it took the new title)
    store = Store(db, readonly=True)
    failed = [r["message"] for r in store.query("SELECT message FROM failures WHERE run_id = ? AND stage = "
                                                "'extract'", (result.run_id,))]
    store.close()
    # Each names the file and which chunk of it (it named a chunk id and a document id).
    assert failed and all(m.startswith(f"{victim.name} (chunk ") for m in failed), failed
    # ... and nothing published changed, so no version was made (each retry made one).
    assert result.version == retried.version == published.version

    again = await sync([corpus], sim_settings, db, root=corpus)   # the endpoint is back
    assert again.failures == 0 and not again.warnings
    assert document_titles(db)[victim.name] == "Ferry news"
    store = Store(db, readonly=True)
    try:
        assert store.scalar("SELECT count(*) FROM entities WHERE name = 'Quillon Marbeck'") == 1
    finally:
        store.close()


async def test_new_summary_settings_redo_the_summaries(corpus, tmp_path, simulator):
    old = make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10,
                                                    "summary_join_tokens": 0, "summary_max_descriptions": 0})
    new = make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10,
                                                    "summary_join_tokens": 150, "summary_max_descriptions": 2})
    db = tmp_path / "i.db"
    await sync([corpus], old, db, root=corpus)
    await sync([corpus], new, db, root=corpus)
    await sync([corpus], new, tmp_path / "f.db", root=corpus)
    assert state(db)["descriptions"] == state(tmp_path / "f.db")["descriptions"]
    assert state(db)["descriptions"] != {}


async def test_one_description_per_summary_gives_a_fresh_indexs_descriptions_as_mentions_come_and_go(
        generated, tmp_path):
    # An element's lone description is kept whole; one of several (summary_max_descriptions = 1
    # keeps one) is held to the summary's budget. An update that gave an element a second
    # description, or took it away, kept what it had.
    settings = make_settings(index={"summary_max_descriptions": 1, "summary_max_tokens": 8})
    corpus = folder(generated, tmp_path / "c", range(1, 9))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    for step, name in enumerate(["delete", "add"]):
        if name == "add":
            for i in range(4, 9):
                shutil.copy2(generated / f"doc_{i:05d}.txt", corpus / f"doc_{i:05d}.txt")
        else:
            for i in range(4, 9):
                (corpus / f"doc_{i:05d}.txt").unlink()
        await sync([corpus], settings, db, root=corpus)
        fresh = tmp_path / f"fresh{step}"
        shutil.copytree(corpus, fresh)
        await sync([fresh], settings, tmp_path / f"f{step}.db", root=fresh)
        incremental, again = state(db)["descriptions"], state(tmp_path / f"f{step}.db")["descriptions"]
        assert incremental and {e: d for e, d in incremental.items() if again.get(e) != d} == {}, name


def _graph(db) -> tuple[dict, list, int]:
    s = state(db)
    store = Store(db, readonly=True)
    try:
        live = store.scalar("SELECT count(*) FROM live_chunks")
    finally:
        store.close()
    return s["descriptions"], sorted(s["edges"]), live


async def test_new_chunk_settings_given_through_one_file_reach_the_rest_on_the_next_run(corpus, tmp_path):
    small = make_settings(index={"chunk_size": 80, "chunk_overlap": 10})
    large = make_settings(index={"chunk_size": 120, "chunk_overlap": 10})
    db = tmp_path / "i.db"
    await sync([corpus], small, db, root=corpus)
    one = sorted(corpus.glob("*.txt"))[0]
    await sync([one], large, db, root=corpus)        # only that file is recut...
    await sync([corpus], large, db, root=corpus)     # ... the others on the next full run
    await sync([corpus], large, tmp_path / "f.db", root=corpus)
    assert _graph(db) == _graph(tmp_path / "f.db")
    assert _token_counts(db) == _token_counts(tmp_path / "f.db")   # a document's tokens follow its chunks


def _token_counts(db) -> dict[str, int]:
    store = Store(db, readonly=True)
    try:
        return {r["id"]: r["tokens"] for r in store.query("SELECT id, tokens FROM documents")}
    finally:
        store.close()


async def test_new_chunks_that_cannot_be_extracted_keep_what_the_document_said(corpus, tmp_path, simulator):
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10}),
               db, root=corpus)
    victim = sorted(corpus.glob("*.txt"))[0]
    before = _said_by(db, victim.name)
    marker = " ".join(victim.read_text().split()[:4])
    settings = make_settings(simulator.base_url, index={"chunk_size": 120, "chunk_overlap": 10},
                             llm={"max_retries": 0})
    async with failing_for(marker, simulator.base_url) as transport:
        result = await sync([corpus], settings, db, root=corpus, transport=transport)
    assert result.failures >= 1
    assert any(victim.name in w and "new chunk settings" in w for w in result.warnings)
    assert _said_by(db, victim.name) == before     # its old chunks, and what they said, are still indexed

    again = await sync([corpus], settings, db, root=corpus)    # the endpoint answers again
    assert again.failures == 0 and not again.warnings
    await sync([corpus], settings, tmp_path / "f.db", root=corpus)
    assert _graph(db) == _graph(tmp_path / "f.db")


def _said_by(db, path: str) -> tuple[list, list]:
    """A file's chunks and the entity provenance rows they contribute."""
    store = Store(db, readonly=True)
    try:
        chunks = [r["chunk_id"] for r in store.query(
            "SELECT dc.chunk_id FROM document_chunks dc JOIN files f ON f.doc_id = dc.doc_id "
            "WHERE f.path = ? ORDER BY dc.idx", (path,))]
        rows = sorted(tuple(r.values()) for r in store.query(
            f"SELECT * FROM entity_sources WHERE chunk_id IN ({','.join('?' * len(chunks))})", chunks))
    finally:
        store.close()
    assert chunks and rows
    return chunks, rows


async def test_a_rows_new_title_replaces_the_old_one(tmp_path):
    folder_ = tmp_path / "rows"
    folder_.mkdir()
    rows = folder_ / "data.jsonl"
    rows.write_text('{"title": "Old Title", "text": "Mara Lind runs the Harbor Council."}\n')
    db = tmp_path / "i.db"
    await sync([folder_], make_settings(), db, root=folder_)
    rows.write_text('{"title": "New Title", "text": "Mara Lind runs the Harbor Council."}\n')
    await sync([folder_], make_settings(), db, root=folder_)
    store = Store(db, readonly=True)
    try:
        assert [r["title"] for r in store.query("SELECT title FROM documents")] == ["New Title"]
    finally:
        store.close()


async def test_a_documents_title_and_path_come_from_one_file_as_in_a_fresh_index(tmp_path):
    # One text in two files with different titles: the title followed the file read last while
    # the path stayed with the first (found by a fuzzer comparing updates with fresh indexes).
    docs = tmp_path / "docs"
    docs.mkdir()
    text = "Ada Osk met Bram Tell at the Quay Office in Harlow.\n"
    (docs / "a.md").write_text(text)

    async def shown(db: Path) -> list[tuple[str, str]]:
        await sync([docs], make_settings(), db, root=docs)
        store = Store(db, readonly=True)
        try:
            return [(r["title"], r["path"]) for r in store.query("SELECT title, path FROM documents")]
        finally:
            store.close()

    db = tmp_path / "i.db"
    await shown(db)
    (docs / "b.md").write_text("---\ntitle: Copy Title\n---\n" + text)
    assert await shown(db) == await shown(tmp_path / "fresh1.db") == [("Ada Osk met Bram Tell at the Quay "
                                                                         "Office in Harlow.", "a.md")]
    (docs / "a.md").unlink()   # b.md, unchanged, is not read again by the update
    assert await shown(db) == await shown(tmp_path / "fresh2.db") == [("Copy Title", "b.md")]


async def test_a_text_field_no_row_has_keeps_what_the_rows_gave(tmp_path):
    # A misspelt index.text_field published an index with 0 documents (exit 0): every row file
    # "had no such field" and left. The setting, not the file, is the likelier mistake.
    folder_ = tmp_path / "rows"
    folder_.mkdir()
    (folder_ / "data.jsonl").write_text('{"body": "Mara Lind runs the Harbor Council."}\n'
                                        '{"body": "Henrik Salo built the Kessel Bridge."}\n')
    (folder_ / "note.txt").write_text("Cora Vey sailed from Harlow to Mintby with Ada Osk.\n")
    db = tmp_path / "i.db"
    first = await sync([folder_], make_settings(index={"text_field": "body"}), db, root=folder_)
    before = index_snapshot(db)
    typo = await sync([folder_], make_settings(index={"text_field": "bdy"}), db, root=folder_)
    assert typo.documents == 3 and typo.documents_removed == 0 and typo.failures == 1
    # Every file is read again (the setting changed), and the same chunks are no new version:
    # one was published on every run.
    assert not typo.published and typo.version == first.version
    assert [w for w in typo.warnings if "data.jsonl: no 'bdy' field in any row" in w
            and w.endswith("what was indexed from it stays")]
    after = index_snapshot(db)
    for key in ("entities", "relationships", "documents"):
        assert after[key] == before[key], key
    again = await sync([folder_], make_settings(index={"text_field": "bdy"}), db, root=folder_)
    assert again.documents == 3 and again.failures == 1   # said on every run, not only the first
    assert not again.published and again.version == first.version
    # A file whose rows really lost the field leaves like any other file that changed.
    (folder_ / "data.jsonl").write_text('{"note": "nothing here"}\n')
    gone = await sync([folder_], make_settings(index={"text_field": "body"}), db, root=folder_)
    assert gone.documents == 1 and gone.documents_removed == 2


async def test_a_relationship_summary_follows_its_entitys_new_name(tmp_path, simulator, monkeypatch):
    """Summaries are written under the entities' names; when more mentions now spell an entity
    "VELO" than "Velo", its relationships' summaries are written again, as a fresh index would."""
    import streamrag.pipeline as pipeline

    async def naming_summary(llm, name, descriptions, settings, counts=None):
        return f"{name}: " + " ".join(descriptions), None
    monkeypatch.setattr(pipeline, "summarize", naming_summary)
    settings = make_settings(simulator.base_url)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("The ferry firm Velo hired Bram Lind at the quay in Port Vell. "
                                  "Later Velo praised Bram Lind for the repairs.\n")
    (corpus / "b.txt").write_text("Bram Lind and the firm Velo signed the harbour lease together. "
                                  "Bram Lind paid Velo in silver.\n")
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    (corpus / "c.txt").write_text("The firm VELO inspected the Blue Heron at Kessel. Then VELO later "
                                  "met Mira Tal.\n")
    (corpus / "d.txt").write_text("The council thanked VELO for the harbour plan. Then VELO spoke at "
                                  "the hall.\n")
    await sync([corpus], settings, db, root=corpus)
    fresh = tmp_path / "fresh"
    shutil.copytree(corpus, fresh, ignore=shutil.ignore_patterns(".streamrag"))
    await sync([fresh], settings, tmp_path / "f.db", root=fresh)
    incremental, rebuilt = index_snapshot(db), index_snapshot(tmp_path / "f.db")
    names = {e[0] for e in rebuilt["entities"].values()}
    assert "VELO" in names and "Velo" not in names        # the name did change
    assert any(r[2].startswith(("VELO and", "Bram Lind and VELO")) for r in rebuilt["relationships"].values())
    assert incremental["relationships"] == rebuilt["relationships"]
    assert incremental == rebuilt


async def test_an_unchanged_graph_keeps_its_partition_and_every_report(generated, tmp_path, monkeypatch):
    """A run that changes nothing in the graph neither re-runs Leiden (which could still move a
    few nodes, and each report they touch would be paid again) nor rewrites a report."""
    import streamrag.pipeline as pipeline

    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 31))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    (corpus / "doc_00007.txt").unlink()
    await sync([corpus], settings, db, root=corpus)
    before = state(db)

    def no_leiden(*args, **kwargs):
        raise AssertionError("Leiden ran on an unchanged graph")
    monkeypatch.setattr(pipeline, "hierarchical_leiden", no_leiden)
    (corpus / "doc_00009.txt").rename(corpus / "renamed.txt")    # a rename changes no element
    again = await sync([corpus], settings, db, root=corpus)
    assert again.reports_generated == 0 and not again.reclustered
    assert state(db)["communities"] == before["communities"]


def _graph_reads(monkeypatch) -> list[int]:
    """A spy on ``GraphState.load``: one entry per read of the published graph."""
    reads: list[int] = []
    load = GraphState.load.__func__

    def counted(cls, store):
        reads.append(1)
        return load(cls, store)
    monkeypatch.setattr(GraphState, "load", classmethod(counted))
    return reads


def _copied(db: Path, to: Path) -> Path:
    """A copy of the index ``db``, its log's pages in it."""
    with contextlib.closing(sqlite3.connect(db)) as source, contextlib.closing(sqlite3.connect(to)) as copy:
        source.backup(copy)
    return to


def _rows(db: Path) -> dict[str, list]:
    """The rows of the tables a query or the next run reads, and the marks but their dates."""
    tables = ("files", "documents", "document_chunks", "chunks", "live_chunks", "entities", "relationships",
              "claims", "communities", "community_members", "reports", "answers", "embeddings")
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
        rows["meta"] = sorted(r for r in conn.execute("SELECT key, value FROM meta")
                              if r[0] not in ("published_at", "pruned_at"))
    return rows


def _said(result) -> dict:
    return {k: v for k, v in msgspec.structs.asdict(result).items() if k not in ("run_id", "wall_s")}


@pytest.mark.parametrize("edit", ["none", "renamed and touched"])
async def test_a_run_with_nothing_to_redo_reads_no_graph_and_publishes_what_reading_it_did(
        generated, tmp_path, monkeypatch, edit):
    """`index` run again with no file changed read the whole graph back (1.2 s of an index of
    10,000 documents) to publish nothing: it is not read now, and the run says and publishes
    what reading it said and published (a rename's new path makes a version; a touched file's
    new stamp is kept and makes none)."""
    from streamrag.pipeline import Indexer

    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 16))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    read_db = _copied(db, tmp_path / "read.db")
    if edit != "none":
        (corpus / "doc_00009.txt").rename(corpus / "renamed.txt")
        os.utime(corpus / "doc_00003.txt", (1_000_000_000, 1_000_000_000))
    read_progress, unread_progress = Progress(), Progress()
    read_stages, unread_stages = _stages(read_progress), _stages(unread_progress)
    with monkeypatch.context() as m:   # (the run as it was: the graph read, every stage run)
        m.setattr(Indexer, "_nothing_to_redo", lambda *args: False, raising=False)
        read = await sync([corpus], settings, read_db, root=corpus, progress=read_progress)
    reads = _graph_reads(monkeypatch)
    unread = await sync([corpus], settings, db, root=corpus, progress=unread_progress)
    assert reads == []
    assert _said(unread) == _said(read) and unread.published == (edit != "none")
    assert _rows(db) == _rows(read_db)
    # (the stages a watch says, and the counts a progress display shows, as the full run's)
    assert unread_stages == read_stages and "reporting" in read_stages
    assert (unread_progress.counts, unread_progress.totals) == (read_progress.counts, read_progress.totals)


def _stages(progress: Progress) -> list[str]:
    """The stages ``progress`` goes through, each once in a row, as they are set."""
    seen: list[str] = []
    progress.listeners.append(lambda p: seen.append(p.stage) if not seen or seen[-1] != p.stage else None)
    return seen


@pytest.mark.parametrize("pending", ["summary retry", "report answers unusable", "stand-in report",
                                     "degrees uncounted", "new summary settings", "new report settings",
                                     "new clustering settings", "recluster"])
async def test_a_run_with_no_file_changed_still_does_what_is_pending(generated, tmp_path, monkeypatch, pending):
    """What a run with no file changed does to the graph, reading it: the summaries to try again
    and the report answers unusable on runs in a row, a community shown with another report
    than its context's (a stand-in, an older one kept), degrees to recount, new settings of
    summaries, reports or clustering, --recluster."""
    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 11))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        entity, = conn.execute("SELECT id FROM entities ORDER BY id LIMIT 1").fetchone()
        community, other = conn.execute(
            "SELECT c.id, o.report_key FROM communities c JOIN communities o "
            "ON o.report_key != c.context_key ORDER BY c.id, o.id LIMIT 1").fetchone()
        if pending == "summary retry":
            conn.execute("UPDATE meta SET value = ? WHERE key = 'summary_fallbacks'", (json.dumps([entity]),))
        elif pending == "report answers unusable":
            conn.execute("UPDATE meta SET value = ? WHERE key = 'report_unusable'", (json.dumps({"gone/800": 1}),))
        elif pending == "stand-in report":
            conn.execute("UPDATE communities SET report_key = ? WHERE id = ?", (other, community))
        elif pending == "degrees uncounted":
            conn.execute("DELETE FROM meta WHERE key = 'degrees'")
    changed = {"new summary settings": {"summary_max_tokens": 120}, "new report settings":
               {"report_max_input_tokens": 3000}, "new clustering settings": {"leiden_resolution": 0.5}}
    reads = _graph_reads(monkeypatch)
    again = await sync([corpus], make_settings(index=changed.get(pending, {})), db, root=corpus,
                       recluster=pending == "recluster")
    assert reads == [1]
    with contextlib.closing(sqlite3.connect(db)) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        stand_ins = conn.execute("SELECT count(*) FROM communities WHERE report_key != context_key").fetchone()
    assert (meta["summary_fallbacks"], meta["report_unusable"], meta["degrees"]) == ("[]", "{}", "1")
    assert stand_ins == (0,)
    assert again.reclustered == (pending in ("new clustering settings", "recluster"))


async def test_a_run_with_no_file_changed_makes_the_vectors_missing(generated, tmp_path, monkeypatch, simulator):
    """A vector a run could not make (the embedding call failed) is made by the next run, though
    no file changed; with every vector made, that run reads no graph."""
    settings = make_settings(simulator.base_url, llm={"embedding_model": "text-embedding-3-small"})
    corpus = folder(generated, tmp_path / "c", range(1, 6))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        made = sorted(conn.execute("SELECT kind, item_id, content_hash FROM embeddings"))
        conn.execute("DELETE FROM embeddings WHERE item_id IN (SELECT id FROM entities ORDER BY id LIMIT 1)")
    reads = _graph_reads(monkeypatch)
    await sync([corpus], settings, db, root=corpus)
    assert reads == [1]
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert sorted(conn.execute("SELECT kind, item_id, content_hash FROM embeddings")) == made
    await sync([corpus], settings, db, root=corpus)
    assert reads == [1]


def _writes_sizes_otherwise(monkeypatch) -> None:
    """The extractive report builder of another streamrag: a new EXTRACTIVE_VERSION, and every
    report's text other than this one's (its sizes said otherwise)."""
    import streamrag.reports as reports

    monkeypatch.setattr(reports, "EXTRACTIVE_VERSION", "extractive-other")
    monkeypatch.setattr(reports, "_sizes", lambda members, internal: f"{len(members)} members, {len(internal)} ties")


async def test_a_new_extractive_report_builder_rewrites_an_offline_index_once(generated, tmp_path, monkeypatch):
    """An offline index's reports are the extractive builder's: when it changes (a new
    EXTRACTIVE_VERSION) the next run builds every report again, once, and writes those whose
    text changed: all of them here, none when it writes them as before. (An unchanged community
    kept the old builder's report for good, or with its shortcuts checked, failed the run; then
    every report was written again and a version published, none of them changed.)"""
    import streamrag.reports as reports

    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 11))
    db = tmp_path / "i.db"
    with monkeypatch.context() as other:
        _writes_sizes_otherwise(other)
        first = await sync([corpus], settings, db, root=corpus)
    again = await sync([corpus], settings, db, root=corpus)
    assert again.reports_generated == again.reports == first.reports > 0
    assert again.version == first.version + 1
    monkeypatch.setattr(reports, "EXTRACTIVE_VERSION", "extractive-next")   # (written as before)
    same = await sync([corpus], settings, db, root=corpus)
    assert same.reports_generated == 0 and same.reports == again.reports and same.version == again.version
    assert (await sync([corpus], settings, db, root=corpus)).reports_generated == 0


async def test_a_new_extractive_report_builder_rewrites_only_the_extractive_reports_of_a_model_index(
        generated, tmp_path, simulator, monkeypatch):
    """In a model-built index the communities held below index.report_min_members have
    extractive reports: a new EXTRACTIVE_VERSION rewrites those (free), and keeps every report
    the model wrote, without a call. (They kept the old builder's text for good, or with the
    shortcuts checked, failed the run.)"""
    import streamrag.reports as reports

    def shown(db) -> dict[str, tuple[str, bool]]:
        store = Store(db, readonly=True)
        rows = store.query("SELECT c.id, c.report_key, r.extractive FROM communities c "
                           "JOIN reports r ON r.key = c.report_key")
        store.close()
        return {r["id"]: (r["report_key"], bool(r["extractive"])) for r in rows}

    settings = make_settings(simulator.base_url, index={"report_min_members": 4})
    corpus = folder(generated, tmp_path / "c", range(1, 11))
    db = tmp_path / "i.db"
    with monkeypatch.context() as other:
        _writes_sizes_otherwise(other)
        first = await sync([corpus], settings, db, root=corpus)
    before = shown(db)
    held = {c for c, (_key, extractive) in before.items() if extractive}
    assert held and len(held) < len(before)
    asked = simulator.stats()["requests"]
    again = await sync([corpus], settings, db, root=corpus)
    after = shown(db)
    assert simulator.stats()["requests"] == asked and sum(s["calls"] for s in again.llm.values()) == 0
    assert {c for c in after if after[c][0] != before[c][0]} == held
    assert {c for c, (_key, extractive) in after.items() if extractive} == held
    assert again.reports_generated == len(held) and again.version == first.version + 1
    assert (await sync([corpus], settings, db, root=corpus)).reports_generated == 0
    # A builder that writes them as before: they are built again, none written, no version.
    monkeypatch.setattr(reports, "EXTRACTIVE_VERSION", "extractive-next")
    same = await sync([corpus], settings, db, root=corpus)
    assert shown(db) == after and same.reports_generated == 0 and same.version == again.version
    assert simulator.stats()["requests"] == asked


async def test_the_first_update_after_a_fresh_index_keeps_an_unchanged_partition(generated, tmp_path,
                                                                                  monkeypatch):
    """The partition's Leiden settings are recorded by the very first run, so the next run on
    an unchanged graph already keeps the partition instead of running Leiden again."""
    import streamrag.pipeline as pipeline

    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 21))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    before = state(db)

    def no_leiden(*args, **kwargs):
        raise AssertionError("Leiden ran on an unchanged graph")
    monkeypatch.setattr(pipeline, "hierarchical_leiden", no_leiden)
    again = await sync([corpus], settings, db, root=corpus)
    assert again.reports_generated == 0 and state(db)["communities"] == before["communities"]


async def test_the_drift_check_waits_for_enough_change(generated, tmp_path, monkeypatch):
    """The fresh clustering that checks the kept partition for drift runs once the updates since
    the last check changed 5% of the entities, not on every update."""
    import streamrag.pipeline as pipeline

    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 41))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    runs: list[bool] = []            # per Leiden call: warm-started (True) or fresh
    real = pipeline.hierarchical_leiden

    def counted(*args, **kwargs):
        runs.append(kwargs.get("previous") is not None)
        return real(*args, **kwargs)
    monkeypatch.setattr(pipeline, "hierarchical_leiden", counted)
    entities = Store(db, readonly=True)
    total = entities.scalar("SELECT count(*) FROM entities")
    entities.close()
    fresh_runs = []
    for i in range(1, 6):             # small edits, a few entities each
        victim = corpus / f"doc_{i:05d}.txt"
        surname = ("Quellan", "Quellor", "Quellis", "Quellum", "Quellet")[i - 1]   # a new name each time
        victim.write_text(victim.read_text() + f"\n\nOfficials said Tomas {surname} would attend.\n")
        runs.clear()
        await sync([corpus], settings, db, root=corpus)
        fresh_runs.append(runs.count(False))
        assert runs.count(True) == 1  # the warm start runs every time
    since = Store(db, readonly=True)
    pending = int(since.get_meta("changed_since_fresh"))
    since.close()
    assert 0 in fresh_runs and 1 in fresh_runs     # some updates skipped the check, others ran it
    assert pending < 0.05 * total                   # what the skipping ones changed is carried over


async def test_communities_with_one_context_keep_their_own_extractive_reports(generated, tmp_path, simulator):
    """Past a tiny context budget many communities share one (empty) context; their extractive
    reports still differ, so each is stored under its own key, and with several report workers
    no parent is built from a child report that was never stored. (A later sync, with every
    unchanged community's context checked by the autouse fixture, found such parents.)"""
    corpus = folder(generated, tmp_path / "c", range(1, 42))
    settings = make_settings(simulator.base_url,
                             index={"report_max_input_tokens": 120, "max_cluster_size": 2,
                                    "report_min_members": 50},
                             pipeline={"report_workers": 8})
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    store = Store(db, readonly=True)
    shown = store.query("SELECT c.id, r.title FROM communities c JOIN reports r ON r.key = c.report_key")
    names: dict[str, set[str]] = {}
    for r in store.query("SELECT m.community_id, e.name FROM community_members m "
                         "JOIN entities e ON e.id = m.entity_id"):
        names.setdefault(r["community_id"], set()).add(r["name"])
    store.close()
    # Each community shows its own report: its title names its own members.
    wrong = [r["id"] for r in shown if not any(n in r["title"] for n in names.get(r["id"], ()))]
    assert len(shown) > 20 and wrong == []
    (corpus / "zz_new.txt").write_text("Orlan Pekk visited Tessaly Marsh. Orlan Pekk praised Tessaly Marsh.\n")
    await sync([corpus], settings, db, root=corpus)


async def test_claims_enter_a_tight_report_context_in_one_order_whatever_the_history(generated, tmp_path, simulator):
    # A context that runs out of budget among an entity's claims must take the same ones in every
    # run: they were taken in load order, and a run appends its new claims after the loaded ones.
    settings = make_settings(simulator.base_url, index={
        "extract_claims": True, "report_max_input_tokens": 300, "chunk_size": 120, "chunk_overlap": 10,
        "max_cluster_size": 2, "report_min_members": 5})
    corpus = folder(generated, tmp_path / "c", range(1, 13))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    for step in range(6):  # the check_shortcuts fixture rebuilds every context counted as unchanged
        shutil.copy2(generated / f"doc_{13 + step:05d}.txt", corpus / f"doc_{13 + step:05d}.txt")
        victim = corpus / f"doc_{2 + step:05d}.txt"
        victim.write_text(victim.read_text() + "\n\nOfficials said more details would follow.\n")
        await sync([corpus], settings, db, root=corpus)


async def test_a_partition_that_drifted_is_replaced_by_the_fresh_one_with_its_old_ids(generated, tmp_path,
                                                                                    monkeypatch):
    """When the fresh clustering beats the kept partition by more than index.recluster_drift,
    the update publishes the fresh one (ids matched to the old communities); otherwise the kept
    one stays."""
    import streamrag.communities as communities_module

    monkeypatch.setattr(communities_module, "FRESH_CHECK_SHARE", 0.0)   # check on every update
    settings = make_settings()
    corpus = folder(generated, tmp_path / "c", range(1, 41))
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    victim = corpus / "doc_00003.txt"
    victim.write_text(victim.read_text() + "\n\nOfficials said Tomas Quell would attend.\n")
    calm = await sync([corpus], settings, db, root=corpus)
    assert not calm.reclustered                 # a small edit: the fresh run is no better
    before = state(db)["communities"]

    real = communities_module.modularity
    calls = []

    def fresh_looks_better(communities, edges, **kwargs):
        calls.append(1)   # drift = modularity(fresh) - modularity(kept): the first call is fresh's
        return real(communities, edges, **kwargs) + (1.0 if len(calls) % 2 else 0.0)
    monkeypatch.setattr(communities_module, "modularity", fresh_looks_better)
    victim.write_text(victim.read_text() + "\n\nOfficials said Mara Quell would attend too.\n")
    drifted = await sync([corpus], settings, db, root=corpus)
    assert drifted.reclustered and calls
    after = state(db)["communities"]

    fresh_dir = tmp_path / "fresh"
    shutil.copytree(corpus, fresh_dir, ignore=shutil.ignore_patterns(".streamrag"))
    fresh_db = tmp_path / "f.db"
    await sync([fresh_dir], settings, fresh_db, root=fresh_dir)
    assert index_snapshot(db)["partition"] == index_snapshot(fresh_db)["partition"]
    kept_ids = {cid for cid, v in after.items() if cid in before and before[cid][2] == v[2]}
    assert kept_ids   # communities the fresh run found as they were keep their ids


@pytest.mark.parametrize("claims", [False, True])
async def test_an_update_that_takes_its_shortcuts_publishes_what_checking_them_publishes(
        corpus, tmp_path, simulator, monkeypatch, claims):
    """Tests check every shortcut an update takes (the autouse fixture rebuilds each report
    context counted as unchanged); a user's run takes them unchecked. Both must publish the
    same index, every report they point at must be stored, and the graph, claims and
    provenance must equal a fresh index of the final folder."""
    from streamrag.pipeline import Indexer

    settings = make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10,
                                                        "extract_claims": claims})
    published = {}
    for checked in (True, False):
        monkeypatch.setattr(Indexer, "check_shortcuts", checked)
        work = tmp_path / f"work_{checked}"
        shutil.copytree(corpus, work)
        db = tmp_path / f"{checked}.db"
        kept = GraphCache()   # as the daemon runs (checked: every take is compared with the store)
        await sync([work], settings, db, root=work, graph_cache=kept)
        guild = (work / "guild.txt").read_text()
        (work / "guild.txt").write_text(guild.replace("Lantern Hall", "Harbor Chapel"))
        (work / "railway.txt").unlink()
        (work / "new.txt").write_text("Captain Oskar Lind sailed the Blue Heron from Port Vell to Kessel.\n")
        await sync([work], settings, db, root=work, graph_cache=kept)
        (work / "festival.md").rename(work / "fest.md")
        (work / "new.txt").write_text("Captain Oskar Lind sold the Blue Heron to the Kessel Guild.\n")
        last = await sync([work], settings, db, root=work, graph_cache=kept)
        assert last.claims == len(index_snapshot(db)["claims"]), checked
        store = Store(db, readonly=True)
        missing = store.scalar("SELECT count(*) FROM communities WHERE report_key IS NOT NULL AND "
                               "report_key NOT IN (SELECT key FROM reports)")
        store.close()
        assert missing == 0, checked
        published[checked] = (state(db), index_snapshot(db))
    assert published[True] == published[False]

    fresh_dir = tmp_path / "fresh"
    shutil.copytree(tmp_path / "work_False", fresh_dir, ignore=shutil.ignore_patterns(".streamrag"))
    fresh_db = tmp_path / "fresh.db"
    await sync([fresh_dir], settings, fresh_db, root=fresh_dir)
    fresh, incremental = index_snapshot(fresh_db), published[False][1]
    for key in ("entities", "relationships", "entity_sources", "relationship_sources", "claims", "documents"):
        assert incremental[key] == fresh[key], key
    assert bool(incremental["claims"]) == claims


async def test_a_summary_unusable_on_three_runs_in_a_row_is_not_asked_again(corpus, tmp_path, monkeypatch):
    # A fuzzer's folder made a description the model copied into every summary answer, which
    # the check rejects: every run paid three calls again, published a version and exited 1.
    from streamrag import pipeline
    from streamrag.errors import LLMOutputError

    real = pipeline.summarize
    asked: list[str] = []
    target: list[str] = []

    async def summarize(llm, name, descriptions, settings, counts=None):
        if not target:
            target.append(name)   # the first element summarized stands for the unlucky one
        if name == target[0]:
            asked.append(name)
            raise LLMOutputError(f"{name}: no usable answer in 3 tries")
        return await real(llm, name, descriptions, settings, counts)

    monkeypatch.setattr(pipeline, "summarize", summarize)
    db = tmp_path / "i.db"
    runs = [await sync([corpus], make_settings(), db, root=corpus) for _ in range(4)]
    assert len(asked) == 3                                   # the first run and two more
    assert [r.failed_items for r in runs] == [1, 1, 0, 0]    # the third is settled: exit 0
    assert [r.failures for r in runs] == [1, 1, 1, 0]
    assert not runs[2].warnings   # (a failure, not a file that could not be read)
    # The runs counting up to settling it change nothing a query sees: no new version (each
    # published one, only the count differing).
    assert [r.version for r in runs] == [1, 1, 1, 1] and not any(r.published for r in runs[1:])
    # New summary settings ask every element afresh.
    await sync([corpus], make_settings(index={"summary_max_tokens": 120}), db, root=corpus)
    assert len(asked) == 4


def restored(folder_: Path, backup: Path) -> None:
    """``folder_`` restored from a backup as `cp -a` makes one and copies it back: the same
    paths and bytes and modification times, new status-change times."""
    shutil.copytree(folder_, backup)   # (shutil.copy2: times kept, to the nanosecond)
    shutil.rmtree(folder_)
    shutil.copytree(backup, folder_)


async def test_a_folder_restored_with_cp_a_costs_no_call_and_is_said_unchanged(corpus, tmp_path, sim_settings):
    # Every file is read again (its change stamp is new) and holds the text indexed: nothing is
    # asked of the model, and the run says its documents are unchanged, read again for that.
    db = tmp_path / "i.db"
    first = await sync([corpus], sim_settings, db, root=corpus)

    def calls() -> int:
        store = Store(db, readonly=True)
        try:
            return store.scalar("SELECT count(*) FROM llm_calls")
        finally:
            store.close()

    before = calls()
    restored(corpus, tmp_path / "backup")
    again = await sync([corpus], sim_settings, db, root=corpus)
    assert calls() == before
    assert (again.documents_added, again.documents_removed, again.documents_unchanged,
            again.documents_new_times) == (0, 0, first.documents, first.documents)
    (corpus / "guild.txt").write_text((corpus / "guild.txt").read_text() + "\nAda Osk joined.\n")
    (corpus / "railway.txt").touch()
    edited = await sync([corpus], sim_settings, db, root=corpus)
    assert (edited.documents_added, edited.documents_edited, edited.documents_removed,
            edited.documents_new_times) == (0, 1, 0, 1)
    assert (await sync([corpus], sim_settings, db, root=corpus)).documents_new_times == 0   # not read


async def test_rows_read_anew_after_a_cp_a_restore_are_read_again_not_added_and_removed(tmp_path):
    # A restore and a reading change in one run said "5 added, 5 removed" of rows nobody
    # edited; in place, "5 read again". A row edited to the same size is still an edit.
    folder_ = tmp_path / "rows"
    folder_.mkdir()
    rows = [{"body": f"Mara Lind{i} runs the Harbor Council {i}.", "text": f"Henrik Salo{i} built the Kessel Bridge {i}."}
            for i in range(5)]
    (folder_ / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder_ / "note.txt").write_text("Cora Vey sailed from Harlow to Mintby with Ada Osk.\n")
    (folder_ / "same_size.jsonl").write_text(json.dumps({"body": "Ada Osk sailed.", "text": "Bram Tell rowed."}) + "\n")
    db = tmp_path / "i.db"
    await sync([folder_], make_settings(index={"text_field": "body"}), db, root=folder_)
    restored(folder_, tmp_path / "backup")
    (folder_ / "same_size.jsonl").write_text(json.dumps({"body": "Ada Osk sailed.", "text": "Bram Tell waded."}) + "\n")
    again = await sync([folder_], make_settings(index={"text_field": "text"}), db, root=folder_)
    assert (again.documents_added, again.documents_edited, again.documents_removed, again.documents_read_again,
            again.documents_unchanged, again.documents_new_times) == (0, 1, 0, 5, 1, 1)


async def test_a_graph_read_back_holds_each_entity_id_once(generated, tmp_path):
    # A CLI update reads the whole graph back: a relationship's ends are its entities' own id
    # strings, not two more copies per relationship (28 MB of the graph of 10,000 documents).
    from streamrag.graph_state import GraphState

    corpus = folder(generated, tmp_path / "c", range(1, 11))
    await sync([corpus], make_settings(), tmp_path / "i.db", root=corpus)
    store = Store(tmp_path / "i.db", readonly=True)
    loaded = GraphState.load(store)
    store.close()
    ids = {eid: eid for eid in loaded.entities}
    assert loaded.relationships
    for r in loaded.relationships.values():
        assert r.source is ids[r.source] and r.target is ids[r.target]


async def test_a_graph_read_back_reads_community_members_from_an_index_alone(generated, tmp_path):
    # A CLI update reads every community's members: in an order an index alone gives them
    # sorted, not by an index that looks each row up in the table (twice the time at 10,000
    # documents); each community's members sorted either way.
    from streamrag import index_rows

    corpus = folder(generated, tmp_path / "c", range(1, 11))
    await sync([corpus], make_settings(), tmp_path / "i.db", root=corpus)
    store = Store(tmp_path / "i.db", readonly=True)
    said: list[str] = []
    store.conn.set_trace_callback(said.append)
    loaded = index_rows.load_communities(store)
    store.conn.set_trace_callback(None)
    rows = store.conn.execute("SELECT community_id, entity_id FROM community_members").fetchall()
    plans = [" ".join(str(step[-1]) for step in store.conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
             for sql in said if "community_members" in sql]
    store.close()
    expected: dict[str, list[str]] = {}
    for cid, eid in rows:
        expected.setdefault(cid, []).append(eid)
    assert loaded and {c.id: c.members for c, _context, _report in loaded} == \
        {cid: sorted(members) for cid, members in expected.items()}
    assert plans and all("COVERING INDEX" in plan for plan in plans), plans


async def test_a_publish_writes_with_a_larger_page_cache_and_gives_it_back(generated, tmp_path, monkeypatch):
    # The provenance rows' index by chunk takes them at random places: with SQLite's 2 MB the
    # pages of a large publish went in and out of the cache. A daemon's connection keeps 2 MB.
    from streamrag import index_rows

    seen: dict[str, int] = {}
    write_chunks, publish = index_rows._write_chunks, index_rows.publish

    def writing(store, *args):
        seen["writing"] = store.scalar("PRAGMA cache_size")
        return write_chunks(store, *args)

    def published(store, *args):
        seen["before"] = store.scalar("PRAGMA cache_size")
        version = publish(store, *args)
        seen["after"] = store.scalar("PRAGMA cache_size")
        return version

    monkeypatch.setattr(index_rows, "_write_chunks", writing)
    monkeypatch.setattr(index_rows, "publish", published)
    monkeypatch.setattr(index_rows, "PUBLISH_CACHE_BYTES_PER_ROW", 1 << 20)   # (a small corpus, sized as a large one)
    corpus = folder(generated, tmp_path / "c", range(1, 4))
    await sync([corpus], make_settings(), tmp_path / "i.db", root=corpus)
    assert seen == {"before": -2000, "writing": -64 * 1024, "after": -2000}


def test_a_publish_cache_holds_the_chunk_index_of_the_rows_it_adds():
    from streamrag.index_rows import publish_cache_kib

    assert publish_cache_kib(0) == publish_cache_kib(10_000) == 2000   # an update: SQLite's default
    assert 16 * 1024 <= publish_cache_kib(483_000) <= 20 * 1024       # 10,000 documents' first index
    assert publish_cache_kib(1_450_000) == 56_640                     # 30,000 documents'
    assert publish_cache_kib(10_000_000) == 64 * 1024


def _rows_of_chunks(db: Path) -> tuple[dict[str, str], list[tuple], int, dict[str, list]]:
    """The full-text rows (id -> text), the chunks a search finds with their ranks, the bytes
    of the full-text table's index, and the provenance rows (with their rowids)."""
    store = Store(db, readonly=True)
    with store.snapshot():
        rows = dict(store.conn.execute("SELECT id, text FROM chunks_fts"))
        found = store.conn.execute("SELECT id, round(bm25(chunks_fts), 9) FROM chunks_fts "
                                   "WHERE chunks_fts MATCH 'said OR officials' ORDER BY 2, id").fetchall()
        size = store.scalar("SELECT sum(length(block)) FROM chunks_fts_data")
        sources = {table: store.conn.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid").fetchall()
                   for table in ("entity_sources", "relationship_sources")}
    store.close()
    return rows, found, size, sources


async def test_removing_most_chunks_leaves_the_rows_a_fresh_index_has_deleting_none_a_row_at_a_time(
        generated, tmp_path, monkeypatch):
    # FTS5 deletes a row by tokenizing its text again and writing a tombstone for each word,
    # and a provenance row's delete changes pages of its table and two indexes: removing most
    # of an index (a big file deleted) wrote more than the rows that stay hold. Those are set
    # aside and the tables made again: the same rows, rowids and ranks, and no tombstones
    # (which made the full-text index 4x a fresh index's here).
    from streamrag import index_rows

    corpus = folder(generated, tmp_path / "c", range(1, 31))
    db = tmp_path / "i.db"
    settings = make_settings()
    await sync([corpus], settings, db, root=corpus)
    *_, before = _rows_of_chunks(db)
    for i in range(1, 26):
        (corpus / f"doc_{i:05d}.txt").unlink()
    said: list[str] = []
    publish = index_rows.publish

    def traced(store, *args):
        store.conn.set_trace_callback(said.append)
        try:
            return publish(store, *args)
        finally:
            store.conn.set_trace_callback(None)

    monkeypatch.setattr(index_rows, "publish", traced)
    second = await sync([corpus], settings, db, root=corpus)
    assert second.documents_removed == 25
    one_at_a_time = re.compile(r"DELETE FROM (chunks_fts|entity_sources|relationship_sources) WHERE")
    assert said and not [s for s in said if one_at_a_time.match(s)]
    rows, found, size, sources = _rows_of_chunks(db)
    for table, kept in sources.items():   # (their rowids too: the next rows' follow them)
        assert kept and set(kept) < set(before[table])
    fresh = tmp_path / "fresh"
    shutil.copytree(corpus, fresh)
    await sync([fresh], settings, tmp_path / "f.db", root=fresh)
    fresh_rows, fresh_found, fresh_size, fresh_sources = _rows_of_chunks(tmp_path / "f.db")
    assert rows == fresh_rows and found == fresh_found and found
    assert size <= fresh_size
    for table, kept in sources.items():
        assert sorted(r[1:] for r in kept) == sorted(r[1:] for r in fresh_sources[table])


async def test_a_publish_that_removes_many_provenance_rows_writes_with_a_larger_page_cache(
        generated, tmp_path, monkeypatch):
    # Removed rows are everywhere in the provenance tables: with 2 MB, deleting those of a 25 MB
    # file sent their pages out of the cache and back, writing 240 MB more than the WAL's 39 MB.
    from streamrag import index_rows

    seen: list[int] = []
    write_chunks = index_rows._write_chunks

    def writing(store, *args):
        seen.append(store.scalar("PRAGMA cache_size"))
        return write_chunks(store, *args)

    corpus = folder(generated, tmp_path / "c", range(1, 4))
    await sync([corpus], make_settings(), tmp_path / "i.db", root=corpus)
    monkeypatch.setattr(index_rows, "_write_chunks", writing)
    monkeypatch.setattr(index_rows, "PUBLISH_CACHE_BYTES_PER_ROW", 1 << 20)   # (a small corpus, sized as a large one)
    (corpus / "doc_00001.txt").unlink()
    second = await sync([corpus], make_settings(), tmp_path / "i.db", root=corpus)
    assert second.documents_removed == 1 and second.documents_added == 0
    assert seen == [-64 * 1024]


def _units_spans(monkeypatch) -> list[int]:
    """The characters each cut's units span (``chunker._units``), as cuts are made."""
    from streamrag import chunker

    spans: list[int] = []
    units = chunker._units

    def counted(*args, **kwargs):
        made = units(*args, **kwargs)
        spans.append(made.end[-1] - made.start[0])
        return made

    monkeypatch.setattr(chunker, "_units", counted)
    return spans


def _chunk_ids(db: Path) -> list[str]:
    """The chunk ids of the index's one document, in order."""
    store = Store(db, readonly=True)
    try:
        return [r["chunk_id"] for r in store.query("SELECT chunk_id FROM document_chunks ORDER BY idx")]
    finally:
        store.close()


def _cut_whole(text: str, **sizes) -> list[str]:
    from streamrag import chunker
    from streamrag.records import Document

    return [c.id for c in chunker.chunk_document(Document(id="d", path="x.txt", title="", text=text),
                                                 encoding="o200k_base", **sizes)]


_WORDS = "harbor council ferry strike vote river bridge mayor budget cargo port trade".split()


def _journal(corpus: Path, seed: int, lead: str = "") -> Path:
    """``corpus``/journal.txt: 900 paragraphs of 40 random words, each after ``lead``, made by
    ``seed``: a big file (over 200,000 characters), cut around its changes."""
    rng = random.Random(seed)
    big = corpus / "journal.txt"
    big.write_text("\n\n".join(lead + " ".join(rng.choices(_WORDS, k=40)) + "." for _ in range(900)) + "\n")
    return big


async def test_a_big_file_changed_is_cut_again_around_its_change(tmp_path, monkeypatch):
    # A log or a journal that grows, or a big file edited in one place: the chunks before and
    # after the change are kept from its previous version (``chunker.cut_document``), its units
    # made from a few chunks before the change to a few after, not of the whole text; the index
    # is a fresh one's.
    rng = random.Random(5)
    paragraphs = [f"Note {i}. " + " ".join(rng.choices(_WORDS, k=rng.randint(20, 60))) + "." for i in range(3000)]
    corpus = tmp_path / "notes"
    corpus.mkdir()
    log = corpus / "log.txt"
    log.write_text("\n\n".join(paragraphs) + "\n")
    settings = make_settings(index={"chunk_size": 300, "chunk_overlap": 30})
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    spans = _units_spans(monkeypatch)
    texts = [log.read_text() + "\nThe Mayor signed the ferry accord at the harbor.\n"]
    middle = texts[0].index("Note 1500.")
    texts.append(texts[0][:middle] + "A new line about the bridge vote. " + texts[0][middle:])
    texts.append("Notes of the harbor council.\n\n" + texts[1])
    for text in texts:
        spans.clear()
        log.write_text(text)
        await sync([corpus], settings, db, root=corpus)
        assert len(spans) == 1 and spans[0] < len(text) / 20, (spans, len(text))
        fresh = tmp_path / f"fresh{len(text)}"
        shutil.copytree(corpus, fresh)
        await sync([fresh], settings, tmp_path / f"f{len(text)}.db", root=fresh)
        assert index_snapshot(db) == index_snapshot(tmp_path / f"f{len(text)}.db")
        assert _chunk_ids(db) == _cut_whole(text, chunk_size=300, overlap=30)


async def _indexed_log(tmp_path, *, seed: int):
    """A folder holding one log of 12,000 lines (no blank line: one paragraph), indexed with
    chunks of 300 tokens: (folder, log, settings, index)."""
    rng = random.Random(seed)
    words = "GET POST /api/items /login 200 404 user=alice user=bob took ms retry Mr. cache".split()
    corpus = tmp_path / "logs"
    corpus.mkdir()
    log = corpus / "server.txt"
    log.write_text("\n".join(f"12:{i // 60:02d}:{i % 60:02d} " + " ".join(rng.choices(words, k=rng.randint(4, 14)))
                             for i in range(12000)) + "\n")
    settings = make_settings(index={"chunk_size": 300, "chunk_overlap": 30})
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    return corpus, log, settings, db


async def test_a_log_of_lines_that_grows_is_cut_again_from_near_its_end(tmp_path, monkeypatch):
    # A log has no blank lines: it is one paragraph, cut at its lines. Its units are made from a
    # line a few chunks before the end (``chunker._resume_point``), not from its first line.
    corpus, log, settings, db = await _indexed_log(tmp_path, seed=6)
    spans = _units_spans(monkeypatch)
    text = log.read_text() + "13:00:00 POST /login 200 user=carol took 12 ms\n"
    log.write_text(text)
    await sync([corpus], settings, db, root=corpus)
    assert len(spans) == 1 and spans[0] < len(text) / 20, (spans, len(text))
    assert _chunk_ids(db) == _cut_whole(text, chunk_size=300, overlap=30)


async def test_a_log_of_lines_edited_in_its_middle_is_cut_again_around_its_change(tmp_path, monkeypatch):
    # One paragraph of lines, one word changed in its middle: its units are made from a line a
    # few chunks before the change to one a few after it (``chunker._sentence_after``), not to
    # the log's end; the index is a fresh one's.
    corpus, log, settings, db = await _indexed_log(tmp_path, seed=7)
    spans = _units_spans(monkeypatch)
    text = log.read_text()
    at = text.index(" user=alice ", len(text) // 2)
    text = text[:at] + " user=carol " + text[at + len(" user=alice "):]
    log.write_text(text)
    await sync([corpus], settings, db, root=corpus)
    assert len(spans) == 1 and spans[0] < len(text) / 20, (spans, len(text))
    assert _chunk_ids(db) == _cut_whole(text, chunk_size=300, overlap=30)
    fresh = tmp_path / "fresh"
    shutil.copytree(corpus, fresh)
    await sync([fresh], settings, tmp_path / "f.db", root=fresh)
    assert index_snapshot(db) == index_snapshot(tmp_path / "f.db")


async def test_a_kept_chunk_of_a_big_file_lacking_its_extraction_is_extracted_from_its_text(tmp_path):
    # The chunks a changed big file keeps are read back without their text, their extractions
    # looked for at once: one whose extraction is missing (an earlier run failed on it) is
    # extracted from its text read then, before the change and after it alike, as a fresh index does.
    corpus = tmp_path / "notes"
    corpus.mkdir()
    big = _journal(corpus, 9, lead="Mayor Ilse Varn of Korth spoke. ")
    settings = make_settings(index={"chunk_size": 300, "chunk_overlap": 30})
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    lost = _chunk_ids(db)[2:4] + _chunk_ids(db)[-4:-2]   # (kept: far from the end and from the start)
    store = Store(db)
    try:
        with store.conn:
            store.conn.execute(f"DELETE FROM extractions WHERE chunk_id IN ({','.join('?' * len(lost))})", lost)
    finally:
        store.close()
    text = big.read_text()
    middle = text.index("Mayor", len(text) // 2)
    big.write_text(text[:middle] + "The ferry accord was signed. " + text[middle:])
    result = await sync([corpus], settings, db, root=corpus)
    assert set(lost) <= set(_chunk_ids(db)) and len(lost) < result.chunks_extracted < 20
    fresh = tmp_path / "fresh"
    shutil.copytree(corpus, fresh)
    await sync([fresh], settings, tmp_path / "f.db", root=fresh)
    assert index_snapshot(db) == index_snapshot(tmp_path / "f.db")
    stored = []
    for path in (db, tmp_path / "f.db"):
        store = Store(path, readonly=True)
        try:
            stored.append(store.query(f"SELECT chunk_id, result FROM extractions WHERE chunk_id IN "
                                      f"({','.join('?' * len(lost))}) ORDER BY chunk_id", lost))
        finally:
            store.close()
    assert len(stored[0]) == len(lost) and stored[0] == stored[1]


async def test_a_big_file_s_chunk_spans_go_with_its_versions_and_with_it(tmp_path):
    # Where a big file's chunks lie is recorded for its next change to be cut around; the
    # records of a version replaced, or of a file removed, went with nothing testing it.
    corpus = tmp_path / "notes"
    corpus.mkdir()
    big = _journal(corpus, 8)
    (corpus / "small.txt").write_text("The Mayor met the Harbor Council about the ferry strike.\n")
    settings = make_settings(index={"chunk_size": 300, "chunk_overlap": 30})
    db = tmp_path / "i.db"

    def spans_by_doc() -> dict[str, tuple[int, int]]:
        store = Store(db, readonly=True)
        try:
            return {r["doc_id"]: (r["spans"], store.scalar("SELECT count(*) FROM document_chunks WHERE doc_id = ?",
                                                          (r["doc_id"],)))
                    for r in store.query("SELECT doc_id, count(*) AS spans FROM chunk_spans GROUP BY doc_id")}
        finally:
            store.close()

    def doc_of(name: str) -> str:
        store = Store(db, readonly=True)
        try:
            return store.scalar("SELECT doc_id FROM files WHERE path = ?", (name,))
        finally:
            store.close()

    await sync([corpus], settings, db, root=corpus)
    first = spans_by_doc()
    assert list(first) == [doc_of("journal.txt")] and first[doc_of("journal.txt")][0] == first[doc_of("journal.txt")][1] > 50
    big.write_text(big.read_text() + "\nThe Mayor signed the ferry accord.\n")
    await sync([corpus], settings, db, root=corpus)
    second = spans_by_doc()
    assert list(second) == [doc_of("journal.txt")] != list(first)   # (the old version's rows gone)
    big.unlink()
    await sync([corpus], settings, db, root=corpus)
    assert spans_by_doc() == {}


def _extractions_kept(db: Path, now: float) -> set[str]:
    """The chunks whose extractions a prune at ``now`` (store.keep_unused_days 30) keeps."""
    from streamrag import index_rows

    store = Store(db)
    try:
        with store.transaction():
            store.conn.execute("DELETE FROM meta WHERE key = 'pruned_at'")   # (due whatever the day)
            index_rows.prune(store, 30, now)
        return {c for (c,) in store.conn.execute("SELECT chunk_id FROM extractions")}
    finally:
        store.close()


def _made_long_ago(db: Path) -> list[tuple]:
    """Dates every extraction 40 days back, as if the index were that old; its rows, sorted."""
    import time

    conn = sqlite3.connect(db)
    try:
        with conn:
            conn.execute("UPDATE extractions SET created_at = ?", (time.time() - 40 * 86400,))
        return conn.execute("SELECT * FROM extractions ORDER BY chunk_id, extractor").fetchall()
    finally:
        conn.close()


async def test_a_chunk_that_leaves_is_dated_apart_and_kept_from_when_it_left(tmp_path):
    # Its leaving was dated in each of its extraction rows, whose update changed a page of its
    # own: removing a 25 MB file rewrote 4,574 of them, 18 of the 19.8 MB of WAL it wrote.
    import time

    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "a.txt").write_text("The Mayor met the Harbor Council about the ferry strike.\n")
    (corpus / "b.txt").write_text("Quorra Vell opened a ferry office by the River Gate.\n")
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    made = _made_long_ago(db)
    left_at = time.time()
    (corpus / "b.txt").unlink()
    await sync([corpus], make_settings(), db, root=corpus)
    store = Store(db, readonly=True)
    try:
        rows = store.conn.execute("SELECT * FROM extractions ORDER BY chunk_id, extractor").fetchall()
        live = {c for (c,) in store.conn.execute("SELECT chunk_id FROM live_chunks")}
    finally:
        store.close()
    assert rows == made   # not one written
    gone = {r[0] for r in made} - live
    assert gone and live
    day = 86400.0
    assert _extractions_kept(db, left_at + 29 * day) == gone | live   # made 40 days ago, left 29
    assert _extractions_kept(db, left_at + 31 * day) == live          # left 31 days ago
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM extractions_left").fetchone() == (0,)   # (dates gone with them)
    conn.close()


async def test_a_chunk_that_left_and_came_back_is_not_pruned(tmp_path):
    import time

    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "a.txt").write_text("The Mayor met the Harbor Council about the ferry strike.\n")
    back = corpus / "b.txt"
    back.write_text("Quorra Vell opened a ferry office by the River Gate.\n")
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    made = {r[0] for r in _made_long_ago(db)}
    text = back.read_text()
    back.unlink()
    await sync([corpus], make_settings(), db, root=corpus)
    conn = sqlite3.connect(db)
    left = {c for (c,) in conn.execute("SELECT chunk_id FROM extractions_left")}
    assert left and left < made
    back.write_text(text)
    await sync([corpus], make_settings(), db, root=corpus)
    assert conn.execute("SELECT count(*) FROM extractions_left").fetchone() == (0,)   # live again: no date
    assert {c for (c,) in conn.execute("SELECT chunk_id FROM live_chunks")} == made
    conn.close()
    assert _extractions_kept(db, time.time() + 31 * 86400) == made


async def test_extractions_of_an_extractor_left_behind_are_kept_from_when_it_was(tmp_path):
    # A settings change extracts every chunk again: each leaves under the old extractor and
    # comes back under the new one in the same run, and the old extractions are kept (a change
    # undone costs nothing) from then, though made long ago.
    import time

    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "a.txt").write_text("The Mayor met the Harbor Council about the ferry strike.\n")
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    made = {r[:2] for r in _made_long_ago(db)}
    changed_at = time.time()
    await sync([corpus], make_settings(index={"entity_types": ["person", "organization"]}), db, root=corpus)
    conn = sqlite3.connect(db)
    live = set(conn.execute("SELECT chunk_id, extractor FROM live_chunks"))
    conn.close()
    assert live and not live & made and {c for c, _ in live} == {c for c, _ in made}
    day = 86400.0
    assert {c for c, _ in made} == _extractions_kept(db, changed_at + 29 * day)
    conn = sqlite3.connect(db)
    assert set(conn.execute("SELECT chunk_id, extractor FROM extractions")) == made | live
    conn.close()
    _extractions_kept(db, changed_at + 31 * day)
    conn = sqlite3.connect(db)
    assert set(conn.execute("SELECT chunk_id, extractor FROM extractions")) == live
    conn.close()


async def test_a_graph_read_back_leaves_relationship_descriptions_in_the_store(generated, tmp_path, monkeypatch):
    # An update reads the descriptions of the relationships it merges, publishes or shows in a
    # report, not every one (34 MB of text in the graph of 10,000 documents).
    from streamrag import index_rows

    corpus = folder(generated, tmp_path / "c", range(1, 11))
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    store = Store(db, readonly=True)
    published = {r["id"]: r["description"] for r in store.query("SELECT id, description FROM relationships")}
    loaded = GraphState.load(store)
    assert published and all(r.description is None for r in loaded.relationships.values())
    # (as its type says: msgspec, checking the fields, takes one so read back as a Relationship)
    unread = next(iter(loaded.relationships.values()))
    assert msgspec.convert(msgspec.to_builtins(unread), Relationship) == unread
    some = sorted(published)[::4]   # (looked up by id; all of them are read in one pass)
    loaded.describe(store, some + ["rel-not-there"])
    assert {rid: r.description for rid, r in loaded.relationships.items() if r.description is not None} == \
        {rid: published[rid] for rid in some}
    loaded.describe(store, list(published))
    store.close()
    assert {rid: r.description for rid, r in loaded.relationships.items()} == published

    read: list[str] = []
    descriptions = index_rows.relationship_descriptions
    monkeypatch.setattr(index_rows, "relationship_descriptions",
                        lambda store, ids, **how: read.extend(ids) or descriptions(store, ids, **how))
    victim = corpus / "doc_00003.txt"
    victim.write_text(victim.read_text() + "\n\nOfficials said Corin Fenell met Noor Wexell.\n")
    await sync([corpus], make_settings(), db, root=corpus)
    assert read and len(read) == len(set(read)) < len(published)   # (each read once, and not all)


def _graph_rows(db) -> dict:
    """The graph with its provenance (``index_snapshot``'s), not its communities."""
    snap = index_snapshot(db)
    return {k: snap[k] for k in ("entities", "relationships", "entity_sources", "relationship_sources")}


# A paragraph with no name, of a chunk of its own at index.chunk_size 50 (``_SMALL``): the
# paragraphs around it are chunks of their own. A short name joins a full name a document says
# beside it (``joins``), in another chunk (the extractor joins them within one).
_FILLER = ("The fog came pouring in at every chink and keyhole, and was so dense without that the houses "
           "opposite were mere phantoms, and the bells rang out the hours in the frosty air.\n\n")
_SMALL = {"chunk_size": 50, "chunk_overlap": 0}
_SCROOGE = {
    "ledger.txt": "Ebenezer Scrooge kept the books of the firm in Cornhill with Jacob Marley.\n\n" + _FILLER
                  + "Fred waited for Scrooge at the door. Scrooge counted the money twice.\n",
    "office.txt": "Scrooge sat in his counting-house. Bob Cratchit copied letters beside Scrooge.\n",
    "supper.txt": "Scrooge took his melancholy dinner in the tavern. Fred came to dine with Scrooge.\n",
}


def _scrooge_folder(tmp_path: Path) -> tuple[Settings, Path, Path]:
    """The files of ``_SCROOGE`` in ``tmp_path/c``: the settings (chunks of ``_SMALL``), the
    folder, and the path of its index (not made)."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, text in _SCROOGE.items():
        (corpus / name).write_text(text)
    return make_settings(index=_SMALL), corpus, tmp_path / "i.db"


async def _fresh_graph_rows(corpus: Path, settings: Settings, copy: Path) -> dict:
    """``_graph_rows`` of a fresh index of ``corpus`` as it is now, copied to ``copy`` (its index
    beside it, ``copy`` with ".db")."""
    shutil.copytree(corpus, copy)
    await sync([copy], settings, copy.with_suffix(".db"), root=copy)
    return _graph_rows(copy.with_suffix(".db"))


@pytest.mark.parametrize("kept", [False, True])
async def test_a_short_name_joins_its_full_name_and_splits_off_and_rejoins_as_it_comes_and_goes(tmp_path, kept):
    # "Scrooge" alone (office, supper, the ledger's last paragraph) is "Ebenezer Scrooge" (the
    # ledger's first) while the ledger is indexed: its mentions merged under the full name.
    # Deleted, the short name is an entity of its own again; back, it joins again: each time the
    # index of the folder as it now is.
    settings, corpus, db = _scrooge_folder(tmp_path)
    cache = GraphCache() if kept else None
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    joined = _graph_rows(db)
    names = {v[0]: v[3] for v in joined["entities"].values()}
    assert names["Ebenezer Scrooge"] == 4 and "Scrooge" not in names   # (mentions: 4 chunks)
    ledger = (corpus / "ledger.txt").read_text()
    (corpus / "ledger.txt").unlink()
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    alone = _graph_rows(db)
    assert {v[0] for v in alone["entities"].values()} >= {"Scrooge"} and \
        "Ebenezer Scrooge" not in {v[0] for v in alone["entities"].values()}
    assert alone == await _fresh_graph_rows(corpus, settings, tmp_path / "without")
    (corpus / "ledger.txt").write_text(ledger)
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    assert _graph_rows(db) == joined == await _fresh_graph_rows(corpus, settings, tmp_path / "with")


async def test_an_offline_index_published_before_names_were_joined_joins_them_on_its_next_run(tmp_path, monkeypatch):
    # An index of an earlier streamrag has no joins kept (no name_joins): its next run, even one
    # with no file changed, looks at every name once, as a fresh index does.
    settings, corpus, db = _scrooge_folder(tmp_path)
    with monkeypatch.context() as m:
        m.setattr("streamrag.joins.joins", lambda names, documents, titles=None, opened=None, types=None: {})
        await sync([corpus], settings, db, root=corpus)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DELETE FROM meta WHERE key = 'name_joins'")
    assert "Scrooge" in {v[0] for v in _graph_rows(db)["entities"].values()}
    second = await sync([corpus], settings, db, root=corpus)
    assert second.published
    assert _graph_rows(db) == await _fresh_graph_rows(corpus, settings, tmp_path / "fresh")
    assert "Scrooge" not in {v[0] for v in _graph_rows(db)["entities"].values()}


async def test_joins_follow_the_full_names_as_they_come_and_go_as_a_fresh_index_has_them(tmp_path):
    # "Cratchit" joins "Bob Cratchit"; a second full name ending with it splits the join; with
    # the first gone it joins the second; renamed and edited, the index is a fresh one's each time.
    # (Each full name's file says "Cratchit" too: the join asks for a document saying both.)
    settings = make_settings(index=_SMALL)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "bob.txt").write_text("Bob Cratchit carried Tiny Tim home through the snow.\n\n" + _FILLER
                                    + "Martha sat with Cratchit by the fire. Cratchit sang to Martha.\n")
    (corpus / "door.txt").write_text("At the door of the house stood Mr. Cratchit, tired and cold.\n")
    db = tmp_path / "i.db"
    steps = [
        lambda: None,
        lambda: (corpus / "belinda.txt").write_text("Belinda Cratchit laid the cloth with Martha.\n\n" + _FILLER
                                                    + "Peter carried the goose to Cratchit. Cratchit carved it.\n"),
        lambda: (corpus / "bob.txt").unlink(),
        lambda: (corpus / "door.txt").rename(corpus / "porch.txt"),
        lambda: (corpus / "belinda.txt").write_text("Martha laid the cloth alone.\n"),
    ]
    shown = []
    for i, step in enumerate(steps):
        step()
        await sync([corpus], settings, db, root=corpus)
        assert _graph_rows(db) == await _fresh_graph_rows(corpus, settings, tmp_path / f"fresh{i}"), i
        shown.append(sorted(v[0] for v in _graph_rows(db)["entities"].values() if "Cratchit" in v[0]))
    assert shown == [["Bob Cratchit"], ["Belinda Cratchit", "Bob Cratchit", "Cratchit"], ["Belinda Cratchit"],
                     ["Belinda Cratchit"], ["Cratchit"]]


async def test_a_model_index_joins_no_name(tmp_path, simulator):
    settings = make_settings(simulator.base_url)
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, text in _SCROOGE.items():
        (corpus / name).write_text(text)
    await sync([corpus], settings, tmp_path / "i.db", root=corpus)
    names = {v[0] for v in _graph_rows(tmp_path / "i.db")["entities"].values()}
    assert {"Scrooge", "Ebenezer Scrooge"} <= names, names
    with contextlib.closing(sqlite3.connect(tmp_path / "i.db")) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'name_joins'").fetchone() == ("{}",)


async def _short_name_appended(tmp_path, file: str, text: str, appended: str, short: str,
                                cache: GraphCache | None = None) -> None:
    """Indexes ``text`` as ``file`` (chunks of ``_SMALL``), then the same with ``appended`` after
    it, naming ``short``: the index equals a fresh index of the result, and ``short`` is joined
    (no entity of its own)."""
    settings = make_settings(index=_SMALL)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / file).write_text(text)
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    (corpus / file).write_text(text + appended)
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    assert short not in {v[0] for v in _graph_rows(db)["entities"].values()}
    assert _graph_rows(db) == await _fresh_graph_rows(corpus, settings, tmp_path / "fresh")


@pytest.mark.parametrize("kept", [False, True])
async def test_a_short_name_with_an_apostrophe_joins_the_full_name_an_earlier_run_indexed(tmp_path, kept):
    # "O'Neill" added after "Mary O'Neill" was indexed: the full names holding the short name's
    # word are looked up in the full-text table, which splits "o neill" where the name's key,
    # "oneill", has no break; the join was missed ("O'Neill" stayed apart, unlike a fresh index).
    # (Said in her document, in a chunk of its own: her chunk is the one indexed before.)
    await _short_name_appended(tmp_path, "mary.txt", "Mary O'Neill met Scrooge in London.\n\n" + _FILLER,
                               "Fred met O'Neill in London. O'Neill laughed with Fred.\n", "O'Neill",
                               GraphCache() if kept else None)


async def test_a_short_name_joins_a_full_name_written_with_an_apostrophe_it_has_not(tmp_path):
    # "ONeill" is keyed as "O'Neill" is ("oneill"): a fresh index joins it to "Mary O'Neill"; the
    # full-text table holds her name as "mary o neill", so looking up "oneill" missed her.
    await _short_name_appended(tmp_path, "mary.txt", "Mary O'Neill met Scrooge in London.\n\n" + _FILLER,
                               "Fred met ONeill in London. ONeill laughed with Fred.\n", "ONeill")


@pytest.mark.parametrize("short", ["Strauß", "Strauss"])
async def test_a_short_name_joins_a_full_name_the_full_text_table_writes_uncasefolded(tmp_path, short):
    # "Strauß" and "Strauss" are keyed "strauss" (case-folded); the full-text table holds
    # "johann strauß" (lower-cased): looking up the key alone missed the full name a fresh index
    # joins them to.
    await _short_name_appended(tmp_path, "johann.txt", "Johann Strauß met Fred in Vienna.\n\n" + _FILLER,
                               f"Fred met {short} in Vienna. {short} laughed with Fred.\n", short)


@pytest.mark.parametrize("kept", [False, True])
async def test_a_document_recut_into_chunks_other_files_hold_is_joined_as_a_fresh_index_joins_it(tmp_path, kept):
    # A chunk overlap set gives the document's second chunk the first one's last words, "Scrooge
    # Holdings" with them: its "Scrooge" is the firm's within that chunk, and no document says the
    # lone "Scrooge" (of the office paragraph, a file of its own) as a person beside "Ebenezer
    # Scrooge" any more. Each chunk of the document before and after is live in another file
    # ("tail.txt" is its second chunk), so the run adds and removes none: the join the document's
    # published chunks made was kept. (The tail said "by Ebenezer Scrooge.": its "Scrooge", his
    # within that chunk, says both since joins.RULE 8, and the join no longer moved.)
    ledger = ("Fred walked through the fog to the market and bought bread and candles for the long winter "
              "night ahead. The coins were counted by Ebenezer Scrooge in the office of Scrooge Holdings.")
    office = "Fred met Scrooge at the office door. Scrooge sat down by the small fire and read."
    overlap = {"chunk_size": 50, "chunk_overlap": 10}
    settings = make_settings(index=overlap)
    [first, second] = [c.text for c in chunk_document(Document(id="d", path="d", title="d", text=f"{ledger}\n\n{office}"),
                                                      chunk_size=50, overlap=10, encoding=settings.index.encoding)]
    assert first == ledger and second.startswith("in the office of Scrooge Holdings.") and second.endswith(office)
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, text in {"both.txt": f"{ledger}\n\n{office}", "ledger.txt": ledger, "office.txt": office,
                       "tail.txt": second}.items():
        (corpus / name).write_text(text)
    db, cache = tmp_path / "i.db", GraphCache() if kept else None
    await sync([corpus], make_settings(index=_SMALL), db, root=corpus, graph_cache=cache)
    assert "Scrooge" not in {v[0] for v in _graph_rows(db)["entities"].values()}   # joined through both.txt
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    fresh = tmp_path / "fresh"
    shutil.copytree(corpus, fresh)
    await sync([fresh], settings, tmp_path / "f.db", root=fresh)
    assert "Scrooge" in {v[0] for v in _graph_rows(tmp_path / "f.db")["entities"].values()}
    assert _graph_rows(db) == _graph_rows(tmp_path / "f.db")


# Short documents whose names stress the joins: a short name with no, one and two full names
# (Cratchit: Bob, Belinda), first names and last names (Ebenezer, Scrooge), a title and one word
# (Uncle Scrooge, Mr. Cratchit), a short name that is a person here and a place or firm there
# (Marley), full names that come and go, names differing in case or punctuation only (SCROOGE,
# O'Neill and ONeill, Strauß, D'Arcy-O'Neill and DArcy-ONeill). Appended to one another (at
# index.chunk_size 50, ``_SMALL``; ``_FILLER`` a chunk of its own), a file's names are in chunks of
# their own, and a short name joins a full name another chunk of its document says.
_JOINS_POOL = [
    "Ebenezer Scrooge kept the books of the firm in Cornhill with Jacob Marley.\n",
    "Scrooge sat in his counting-house. Bob Cratchit copied letters beside Scrooge.\n",
    "Fred met SCROOGE in London. SCROOGE gave Fred a coin.\n",
    "Uncle Scrooge walked with Fred through London. Fred asked Uncle Scrooge for money.\n",
    "Scrooge McDuck swam in his money bin with Donald Duck in Duckburg.\n",
    "Jacob Marley met Ebenezer at the door. Ebenezer walked home alone.\n",
    "Bob Cratchit carried Tiny Tim home through the snow.\n",
    "Belinda Cratchit laid the cloth with Martha Cratchit.\n",
    "At the door of the house stood Mr. Cratchit, tired and cold. Cratchit met Fred.\n",
    "Marley was dead to begin with. Scrooge signed the register for Marley.\n",
    "The ship sailed from Marley to Cornhill. Travellers from Marley came to London.\n",
    "The Marley Company paid Fred. Marley Company bought houses in Cornhill.\n",
    "Mary O'Neill met Scrooge in London. O'Neill laughed at Scrooge.\n",
    "Fred met ONeill in London. ONeill laughed with Fred.\n",
    "Fred met O'Neill in London. O'Neill laughed with Fred.\n",
    "Johann Strauß met Fred in Vienna. Fred met Strauß again.\n",
    "Fred danced with Strauß in Vienna. Strauß laughed with Fred.\n",
    "Miss Belinda wrote to Fred. Belinda sang with Fred.\n",
    "Anna D'Arcy-O'Neill met Scrooge in London. Scrooge bowed to Anna.\n",
    "Fred met DArcy-ONeill in London. DArcy-ONeill laughed with Fred.\n",
    "Fred met D'Arcy-O'Neill in Vienna. D'Arcy-O'Neill danced with Fred.\n",
    "Mary DArcy-ONeill met Fred in Vienna. Fred bowed to Mary.\n",
    _FILLER,
]


def _pool_text(rnd: random.Random) -> str:
    """One to three pool documents, one after the other."""
    return "\n".join(rnd.choice(_JOINS_POOL) for _ in range(rnd.randint(1, 3)))


def _files(root: Path) -> list[str]:
    """The folder's files, as paths relative to it ("s0.txt", "a/c/n3.txt")."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# Full names a file may be named for (``titled``): its document's title says it (``joins``).
_TITLES = ["Ebenezer Scrooge", "Bob Cratchit", "Belinda Cratchit", "Jacob Marley", "Mary O'Neill", "Johann Strauß",
           "Anna D'Arcy-O'Neill", "Scrooge McDuck"]


def _titled(titles: random.Random | None, step: int, plain: str, text: str = "") -> tuple[str, str]:
    """A new file's name (``plain`` as it is, else three times in four a full name's, in a folder of
    the step's) and its text (``text``; under a full name's, its first or last word said before
    it, and half the time the name a heading above), drawn from ``titles``: a random of its own,
    so that the changes drawn without it are drawn alike."""
    if titles is None or titles.random() < 0.25:
        return plain, text
    title = titles.choice(_TITLES)
    short = titles.choice([title.split()[0], title.split()[-1]])
    said = f"Fred met {short} in London. {short} laughed with Fred.\n\n{text}" if text else text
    return f"t{step}/{title}.txt", (f"# {title}\n\n{said}" if said and titles.random() < 0.5 else said)


def _join_change(rnd: random.Random, roots: tuple[Path, ...], step: int, titles: random.Random | None = None) -> tuple:
    """One change, made alike in every folder: pool documents added, a file deleted, renamed,
    given other text or some appended, a file's copy added, a file cut in two (its first lines
    kept, the rest a new file's) or two made one (the second's text appended to the first's, the
    second deleted). A copy appended to, a cut or a merge leaves chunks in other documents than
    they were in, most of them neither added nor removed. With ``titles``, a new or renamed file
    may be named for a full name, its text put under it as a heading (``_titled``)."""
    present = _files(roots[0])
    op = rnd.choice(["add", "add", "delete", "rename", "replace", "append", "append", "copy", "cut", "merge"]) \
        if present else "add"
    name, other = rnd.choice(present or [""]), rnd.choice(present or [""])
    text = _pool_text(rnd)
    lines = (roots[0] / name).read_text().splitlines(keepends=True) if present else []
    at = rnd.randint(1, max(1, len(lines) - 1))
    new, added = _titled(titles, step, f"d{step}.txt", text)
    renamed = _titled(titles, step, f"r{step}_{Path(name).name}")[0] if op == "rename" else ""
    for root in roots:
        (root / new).parent.mkdir(parents=True, exist_ok=True)
        if op in ("add", "copy"):
            (root / new).write_text(added if op == "add" else (root / other).read_text())
        elif op == "delete":
            (root / name).unlink()
        elif op == "rename":
            (root / name).parent.joinpath(renamed).parent.mkdir(parents=True, exist_ok=True)
            (root / name).rename((root / name).parent / renamed)
        elif op == "cut" and len(lines) > 1:
            (root / name).write_text("".join(lines[:at]))
            (root / new).write_text("".join(lines[at:]))
        elif op == "merge" and other != name:
            (root / name).write_text((root / name).read_text() + (root / other).read_text())
            (root / other).unlink()
        elif op in ("replace", "append"):
            (root / name).write_text(text if op == "replace" else (root / name).read_text() + "\n" + text)
    return op, name, other, at, text


def _subfolder_change(rnd: random.Random, roots: tuple[Path, ...], step: int) -> tuple:
    """One change among subfolders, made alike in every folder: a file moved into one, pool
    documents added in one, or a file's copy put in one ("dup": the test syncs the copy, then
    gives one of the two other text or appends to it, ``_dup_edit``)."""
    present = _files(roots[0])
    op = rnd.choice(["move", "add_in", "dup", "dup"]) if present else "add_in"
    name, sub = rnd.choice(present or [""]), rnd.choice(["a", "b", "a/c"])
    text = _pool_text(rnd)
    for root in roots:
        (root / sub).mkdir(parents=True, exist_ok=True)
        if op == "move":
            (root / name).rename(root / sub / f"m{step}_{Path(name).name}")
        elif op == "add_in":
            (root / sub / f"n{step}.txt").write_text(text)
        else:
            (root / sub / f"c{step}.txt").write_text((root / name).read_text())
    return op, name, sub, text


def _dup_edit(rnd: random.Random, roots: tuple[Path, ...], step: int, dup: tuple) -> tuple:
    """One of the two copies ``_subfolder_change``'s "dup" made given other text or appended to."""
    _op, name, sub, _text = dup
    which, replace, text = rnd.choice([name, f"{sub}/c{step}.txt"]), rnd.random() < 0.5, _pool_text(rnd)
    for root in roots:
        (root / which).write_text(text if replace else (root / which).read_text() + "\n" + text)
    return "edit", which, replace, text


# Chunkings a run may change to: every chunk cut again, the joins looked at over the new chunks.
_JOIN_SIZES = [_SMALL, {"chunk_size": 80, "chunk_overlap": 0}, {"chunk_size": 50, "chunk_overlap": 10}]


@pytest.mark.parametrize("seed, subfolders, titled", [(7, False, False), (13, False, False), (17, False, False),
                                                      (56, False, False), (23, True, False), (48, True, False),
                                                      (59, True, False), (9, False, True), (4, True, True),
                                                      (95, True, True)])
async def test_random_changes_join_names_as_a_fresh_index_joins_them(tmp_path, seed, subfolders, titled):
    # After each of 5-15 changes, synced one at a time by `index` (the graph read from the
    # store) and by a daemon (the graph it kept), the entities, relationships with their weights
    # and sources, claims and the joins `ask` reads (meta name_joins) are those of a fresh index
    # of the folder. (13 and 17 found a join of D'Arcy-O'Neill's missed, 56 one kept through a
    # document cut in two; 200 seeds pass. A join is made at 511 of their 2,120 steps, a chunk
    # held by two documents at 350.) With ``subfolders``, half the changes are among
    # subfolders (a move, an add, a copy synced then one of the two edited), and a run may
    # change the chunk size (a reviewer's checker: 400 seeds passed). With ``titled``, new and
    # renamed files may be named for a full name, which their documents' titles then say, and
    # put it as a heading above their text (``_titled``; drawn apart, the changes are as without).
    # (95 with subfolders kept a join of a document a titled file was edited away from, its copy
    # holding it on.)
    rnd = random.Random(seed)
    titles = random.Random(f"titles {seed}") if titled else None
    settings = make_settings(index=_SMALL)
    roots = (tmp_path / "index", tmp_path / "kept")
    for root in roots:
        root.mkdir()
    for i, text in enumerate(_pool_text(rnd) for _ in range(rnd.randint(0, 5))):
        for root in roots:
            (root / f"s{i}.txt").write_text(text)
    cache = GraphCache()

    def graph(db: Path) -> dict:
        snap = index_snapshot(db)
        store = Store(db, readonly=True)
        try:
            joined = store.get_meta("name_joins")
        finally:
            store.close()
        return {**{k: snap[k] for k in ("entities", "relationships", "entity_sources", "relationship_sources",
                                        "claims")}, "name_joins": joined}

    async def sync_both() -> None:
        await sync([roots[0]], settings, tmp_path / "index.db", root=roots[0])
        await sync([roots[1]], settings, tmp_path / "kept.db", root=roots[1], graph_cache=cache)

    ops = []
    for step in range(-1, rnd.randint(5, 15)):
        if step >= 0 and subfolders and rnd.random() < 0.5:
            ops.append(_subfolder_change(rnd, roots, step))
            if ops[-1][0] == "dup":
                await sync_both()
                ops.append(_dup_edit(rnd, roots, step, ops[-1]))
        elif step >= 0:
            ops.append(_join_change(rnd, roots, step, titles))
        if step >= 0 and subfolders and rnd.random() < 0.15:
            size = rnd.choice(_JOIN_SIZES)
            settings = make_settings(index=size)
            ops.append(("chunking", size))
        await sync_both()
        fresh = tmp_path / f"fresh{step}"
        shutil.copytree(roots[0], fresh)
        await sync([fresh], settings, tmp_path / f"fresh{step}.db", root=fresh)
        want = graph(tmp_path / f"fresh{step}.db")
        assert graph(tmp_path / "index.db") == want, ops
        assert graph(tmp_path / "kept.db") == want, ops


# A claim about an outsider naming a member as its object ("Acme Corp sued Jane Doe") is about
# the member too: her communities' reports show it, though Acme's communities are others.
_SUED = ("claim | Acme Corp | Jane Doe | LAWSUIT | {status} | 2031-03-01 | NONE | Acme Corp sued Jane Doe "
         "over the {what}. | The lawsuit named Jane Doe.")
_CLAIM_DOCS = {
    "jane.txt": "Jane Doe met Tom Reed in Port Vell. Tom Reed sailed with Jane Doe from Port Vell to Kessel.\n",
    "acme.txt": "Acme Corp hired Lena Varga in Dunmore. Lena Varga ran the Dunmore office of Acme Corp.\n",
    "guild.txt": "Oskar Lind led the Blue Heron Guild in Norwick. Mara Quell joined Oskar Lind in Norwick.\n",
}


def _suits_answered() -> httpx.MockTransport:
    """The simulator's answers, but a claims call of a chunk telling of a lawsuit gets the claim
    ``_SUED`` (its status and what it was over read from the chunk), others none."""
    from conftest import chat_answer
    from streamrag.simulator import ANSWERS, detect_task

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(404)
        messages = json.loads(request.content)["messages"]
        task = detect_task(messages)
        if task != "claims":
            return chat_answer(ANSWERS[task](messages))
        text = messages[-1]["content"]
        if "lawsuit" not in text:
            return chat_answer("done")
        line = _SUED.format(status="FALSE" if "dismissed" in text else "TRUE",
                            what="mill" if "mill" in text else "cargo")
        return chat_answer(f"{line}\ndone")
    return httpx.MockTransport(answer)


def _reports_by_partition(db) -> dict:
    """(level, members) -> (context key, report key, the claims its report's context shows)."""
    store = Store(db, readonly=True)
    try:
        members: dict[str, list[str]] = {}
        for r in store.query("SELECT community_id, entity_id FROM community_members ORDER BY entity_id"):
            members.setdefault(r["community_id"], []).append(r["entity_id"])
        return {(r["level"], tuple(members.get(r["id"], ()))): (r["context_key"], r["report_key"],
                                                               tuple(json.loads(r["elements"])["claims"]))
                for r in store.query("SELECT c.id, c.level, c.context_key, c.report_key, r.elements "
                                     "FROM communities c JOIN reports r ON r.key = c.report_key")}
    finally:
        store.close()


@pytest.mark.parametrize("kept", [False, True])
async def test_a_claim_naming_a_member_as_its_object_is_in_her_reports_as_a_fresh_index_has_them(tmp_path, kept):
    # Her communities' reports show it, and an update leaves them as a fresh index of the same
    # folder writes them: the claim added, changed, its subject renamed, and deleted.
    settings = make_settings("http://llm.test/v1", index={"extract_claims": True, "report_min_members": 1})
    transport = _suits_answered()
    cache = GraphCache() if kept else None
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, text in _CLAIM_DOCS.items():
        (corpus / name).write_text(text)
    await sync([corpus], settings, tmp_path / "i.db", root=corpus, transport=transport, graph_cache=cache)
    # (Acme's documents spelling it ACME Corp outnumber those spelling it Acme Corp: its name is
    # theirs, and the claim's line in Jane's communities names it so)
    press = {f"press{i}.txt": f"In Dunmore, ACME Corp opened depot {i}.\n" for i in range(3)}
    steps = [("add", {"suit.txt": "The lawsuit over the cargo was filed in the spring.\n"}),
             ("modify", {"suit.txt": "The lawsuit over the mill was filed in the spring.\n"}),
             ("modify", {"suit.txt": "The lawsuit over the mill was dismissed in the autumn.\n"}),
             ("rename", press),
             ("delete", {"suit.txt": None})]
    for step, (what, files) in enumerate(steps):
        for name, text in files.items():
            if text is None:
                (corpus / name).unlink()
            else:
                (corpus / name).write_text(text)
        await sync([corpus], settings, tmp_path / "i.db", root=corpus, transport=transport, graph_cache=cache)
        fresh = tmp_path / f"fresh{step}"
        shutil.copytree(corpus, fresh, ignore=shutil.ignore_patterns(".streamrag"))
        await sync([fresh], settings, tmp_path / f"f{step}.db", root=fresh, transport=transport)
        incremental, want = _reports_by_partition(tmp_path / "i.db"), _reports_by_partition(tmp_path / f"f{step}.db")
        assert incremental == want, (step, what)   # (the same communities, each with the same report)
        store = Store(tmp_path / "i.db", readonly=True)
        try:
            ids = {r["name"]: r["id"] for r in store.query("SELECT id, name FROM entities")}
            claims = [r["id"] for r in store.query("SELECT id FROM claims")]
        finally:
            store.close()
        acme = ids.get("ACME Corp" if step >= 3 else "Acme Corp")   # (renamed from step 3 on)
        assert acme is not None, ids
        assert len(claims) == (0 if what == "delete" else 1), (step, what)
        janes = [k for k in incremental if ids["Jane Doe"] in k[1]]
        assert janes and all(acme not in k[1] for k in janes)   # (her communities are not Acme's)
        for k in janes:
            assert incremental[k][2] == tuple(claims), (step, what, k)
