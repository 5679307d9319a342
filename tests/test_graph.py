import random

import pytest

from conftest import graph_edges, graph_neighbors, graph_weight
from streamrag import ids
from streamrag.graph import Graph, neighbour_counts, personalized_pagerank
from streamrag.merge import group, mentions_of, merge_entity, merge_relationship
from streamrag.records import (
    ClaimRecord,
    Entity,
    EntityRecord,
    Extraction,
    Relationship,
    RelationshipRecord,
)


def graph_of(entities, relationships):
    """The graph of merged entities and relationships (weight = relationship.weight)."""
    return Graph((e.id for e in entities), ((r.source, r.target, r.weight) for r in relationships))


def merge_all(extractions, entity_types=()):
    """Entities, relationships and claims of a whole set of chunk extractions, merged with the
    pure functions ``graph_state.GraphState.apply`` merges each changed element with."""
    ents, rels, claims = [], [], []
    for chunk_id in sorted(extractions):
        e, r, c = mentions_of(chunk_id, extractions[chunk_id])
        ents += e
        rels += r
        claims += c
    entities = [merge_entity(k, v, entity_types) for k, v in sorted(group(ents).items())]
    relationships = [merge_relationship(k, v) for k, v in sorted(group(rels).items())]
    return entities, relationships, sorted(claims, key=lambda c: c.id)


def provenance(extractions, name):
    """The entity_sources rows (chunk id, name, type, description) the index writes for the
    entity named ``name``: its mentions, one per chunk and description."""
    return sorted((m.chunk_id, m.name, m.type, m.description) for chunk_id in sorted(extractions)
                  for m in mentions_of(chunk_id, extractions[chunk_id])[0] if m.entity_id == ids.entity_id(name))


def entity(eid: str) -> Entity:
    return Entity(id=eid, name=eid.upper(), type="THING", description="", mentions=1)


def rel(a: str, b: str, weight: float = 1.0) -> Relationship:
    a, b = sorted((a, b))
    return Relationship(
        id=f"r-{a}-{b}", source=a, target=b, description="", weight=weight, mentions=1
    )


@pytest.fixture
def two_triangles():
    """Triangles a-b-c and x-y-z joined by the bridge c-x; d stands alone."""
    entities = [entity(e) for e in "abcdxyz"]
    relationships = [
        rel("a", "b", 2), rel("b", "c"), rel("a", "c"),
        rel("x", "y"), rel("y", "z"), rel("x", "z"),
        rel("c", "x", 0.5),
    ]
    return entities, relationships


def test_graph_indexes_sorted_ids_and_weights(two_triangles):
    entities, relationships = two_triangles
    graph = graph_of(reversed(entities), reversed(relationships))
    assert graph.ids == sorted("abcdxyz")
    assert graph.pygraph.num_nodes() == 7 and graph.pygraph.num_edges() == 7
    assert graph_weight(graph, "a", "b") == 2.0 and graph_weight(graph, "b", "a") == 2.0
    assert graph_weight(graph, "a", "z") == 0.0
    assert graph_neighbors(graph, "c") == ["a", "b", "x"]
    assert graph_edges(graph)[0] == ("a", "b", 2.0)
    assert "d" in graph.index and "q" not in graph.index


def test_parallel_edges_are_summed_and_self_loops_left_out():
    graph = Graph("abc", [("a", "b", 1.0), ("b", "a", 2.0), ("a", "a", 5.0), ("b", "c", 1.0)])
    assert graph_neighbors(graph, "a") == ["b"]   # parallel edge merged, self-loop ignored
    assert graph_weight(graph, "a", "b") == 3.0
    assert graph_neighbors(graph, "b") == ["a", "c"]
    with pytest.raises(KeyError):
        graph_neighbors(graph, "zz")


def test_unknown_endpoint_is_an_error():
    with pytest.raises(ValueError, match="unknown entity 'q'"):
        Graph(["a"], [("a", "q", 1.0)])


def test_neighbour_counts_count_distinct_neighbours(two_triangles):
    entities, relationships = two_triangles
    counts = neighbour_counts(relationships + [rel("b", "a"), rel("d", "d")])  # a repeat, a loop
    assert counts == {"a": 2, "b": 2, "c": 3, "x": 3, "y": 2, "z": 2}
    graph = graph_of(entities, relationships)
    assert counts == {e: len(graph_neighbors(graph, e)) for e in graph.ids if graph_neighbors(graph, e)}


def test_personalized_pagerank_ranks_the_seed_neighbourhood_first(two_triangles):
    entities, relationships = two_triangles
    graph = graph_of(entities, relationships)
    ranked = personalized_pagerank(graph, {"a": 1.0})
    assert ranked[0][0] == "a"
    assert {eid for eid, _ in ranked[:3]} == set("abc")
    scores = dict(ranked)
    assert min(scores[e] for e in "abc") > max(scores[e] for e in "xyzd")
    assert scores["x"] > scores["z"]        # the bridge end is closer than the far side
    assert abs(sum(scores.values()) - 1.0) < 1e-6
    assert personalized_pagerank(graph, {"a": 1.0}, top_k=2) == ranked[:2]


def test_personalized_pagerank_seed_weights_and_unknown_seeds(two_triangles):
    entities, relationships = two_triangles
    graph = graph_of(entities, relationships)
    assert personalized_pagerank(graph, {"nobody": 1.0, "a": 0.0}) == []
    ranked = personalized_pagerank(graph, {"a": 0.1, "y": 1.0, "nobody": 5.0})
    assert ranked[0][0] == "y"


def test_personalized_pagerank_is_order_independent():
    rng = random.Random(3)
    ids = [f"e{i:03d}" for i in range(60)]
    edges = {tuple(sorted(rng.sample(ids, 2))) for _ in range(150)}
    edges = [(a, b, float(rng.randint(1, 5))) for a, b in sorted(edges)]
    first = personalized_pagerank(Graph(ids, edges), {"e001": 1.0, "e007": 0.5}, top_k=10)
    rng.shuffle(ids)
    rng.shuffle(edges)
    flipped = [(b, a, w) for a, b, w in edges]
    second = personalized_pagerank(Graph(ids, flipped), {"e007": 0.5, "e001": 1.0}, top_k=10)
    assert [e for e, _ in first] == [e for e, _ in second]
    assert all(abs(s1 - s2) < 1e-9 for (_, s1), (_, s2) in zip(first, second))



# ---------------------------------------------------------------------------- merging extractions


def ex(entities=(), relationships=(), claims=()):
    return Extraction(entities=[EntityRecord(*e) for e in entities],
                      relationships=[RelationshipRecord(*r) for r in relationships],
                      claims=list(claims))


def test_merged_entity_name_descriptions_and_mentions_count_chunks_not_lines():
    extractions = {
        "chk-1": ex([("ada osk", "person", "A clerk."), ("ada osk", "person", "Keeps the ledger.")]),
        "chk-2": ex([("Ada Osk", "person", "Works at the quay.")]),
    }
    [entity], _rels, _claims = merge_all(extractions)
    # One vote per chunk for each surface form: 1 to 1, so the alphabetical first wins.
    assert entity.name == "Ada Osk"
    assert entity.mentions == 2
    assert entity.description.splitlines() == ["A clerk.", "Keeps the ledger.", "Works at the quay."]
    assert provenance(extractions, "Ada Osk") == [("chk-1", "ada osk", "person", "A clerk."),
                                                  ("chk-1", "ada osk", "person", "Keeps the ledger."),
                                                  ("chk-2", "Ada Osk", "person", "Works at the quay.")]


def test_merged_entity_type_is_the_typed_majority_then_the_configured_order():
    def merged_type(types, entity_types=()):
        extractions = {f"chk-{k}": ex([("Port Vell", t, f"Said {k}.")]) for k, t in enumerate(types)}
        [entity], _r, _c = merge_all(extractions, entity_types)
        return entity.type

    assert merged_type(["person", "geo"], ("person", "geo")) == "person"
    assert merged_type(["geo", "person"], ("person", "geo")) == "person"
    assert merged_type(["geo", "person"]) == "geo"
    assert merged_type(["Person", "person", "GEO"]) == "person"   # casing is one type
    assert merged_type([""]) == "unknown"


def test_untyped_relation_ends_do_not_outvote_the_typed_mention():
    extractions = {
        "chk-1": ex([("Ada", "person", "A clerk.")]),
        "chk-2": ex(relationships=[("Ada", "Bo", "Ada pays Bo.", 5)]),
        "chk-3": ex(relationships=[("Ada", "Cy", "Ada knows Cy.", 5)]),
    }
    entities, rels, _c = merge_all(extractions)
    by_name = {e.name: e for e in entities}
    assert by_name["Ada"].type == "person" and by_name["Ada"].mentions == 3
    # A relation end nobody listed still becomes an entity, supported by its chunk.
    assert by_name["Bo"].type == "unknown" and provenance(extractions, "Bo") == [("chk-2", "Bo", "", "")]
    assert len(rels) == 2


def test_merged_relationship_weight_sums_chunks_and_keeps_the_strongest_repeat():
    extractions = {
        # the same statement twice in one chunk: the stronger one counts, once
        "chk-1": ex(relationships=[("Ada", "Bo", "Ada pays Bo.", 3), ("Bo", "Ada", "Ada pays Bo.", 8),
                                   ("Ada", "Bo", "Bo owes Ada.", 2)]),
        "chk-2": ex(relationships=[("ada", "bo", "Ada pays Bo.", 4)]),
        "chk-3": ex(relationships=[("Ada", "ada.", "Talks to herself.", 9)]),   # a self-loop
    }
    entities, [rel], _c = merge_all(extractions)
    assert {e.name for e in entities} == {"Ada", "Bo"}
    assert rel.weight == pytest.approx((8 + 2 + 4) / 10)
    assert rel.mentions == 2
    assert rel.description.splitlines() == ["Ada pays Bo.", "Bo owes Ada."]
    assert rel.id == ids.relationship_id(ids.entity_id("Bo"), ids.entity_id("Ada"))


def test_merged_claims_are_sorted_by_id_and_a_blank_object_is_none():
    def claim(subject, obj, description):
        return ClaimRecord(subject, obj, "fraud", "TRUE", None, None, description, "")

    claims = [claim("Ada", "Bo", f"Claim {k}.") for k in range(8)] + [claim("Ada", "--", "No object.")]
    _e, _r, merged = merge_all({"chk-1": ex(claims=claims)})
    assert [c.id for c in merged] == sorted(c.id for c in merged)
    assert len(merged) == 9
    [blank] = [c for c in merged if c.description == "No object."]
    assert blank.object_id is None
    assert {c.object_id for c in merged} - {None} == {ids.entity_id("Bo")}


def test_a_claim_about_names_no_entity_line_gave_makes_them_entities_of_its_chunk():
    # The claims call names a subject the extraction missed: the claim was stored with a
    # subject_id no entity had, so no report or answer (which find claims by subject) showed it.
    trust = ClaimRecord("Quay  Trust", "Harbor Council", "LAWSUIT", "TRUE", None, None,
                        "The Quay Trust sued the council.", "")
    extractions = {"chk-1": ex([("Mira Osk", "person", "A clerk.")], claims=[trust]),
                   "chk-2": ex([("Harbor Council", "organization", "Runs the port.")])}
    entities, _rels, [claim] = merge_all(extractions)
    by_id = {e.id: e for e in entities}
    assert by_id[claim.subject_id].name == "Quay Trust" and by_id[claim.subject_id].mentions == 1
    assert by_id[claim.object_id].name == "Harbor Council" and by_id[claim.object_id].mentions == 2
    assert provenance(extractions, "Quay Trust") == [("chk-1", "Quay Trust", "", "")]


def test_apply_lets_each_extraction_go_once_its_mentions_are_taken(tmp_path):
    # A first index of 10,000 documents held every extraction (165 MB) beside its mentions
    # to the end of the run, though nothing read them after the merge.
    from streamrag.config import Settings
    from streamrag.graph_state import Change, GraphState
    from streamrag.records import EntityRecord, Extraction, RelationshipRecord
    from streamrag.store import Store

    extractions = {f"chk-{i}": Extraction(
        entities=[EntityRecord("Ada", "person", "Ada wrote."), EntityRecord("Bo", "person", "Bo read.")],
        relationships=[RelationshipRecord("Ada", "Bo", "Ada wrote to Bo.")]) for i in range(3)}
    change = Change(added_docs=set(), removed_docs=set(), kept_docs=set(), doc_chunks={}, live=set(extractions),
                    added_chunks=set(extractions), removed_chunks=set(), extractions=extractions)
    store = Store(tmp_path / "index.db")
    try:
        state = GraphState.load(store)
        state.apply(store, change, Settings())
    finally:
        store.close()
    assert change.extractions == {}
    assert len(state.entity_mentions_added) == 6 and len(state.relationship_mentions_added) == 3
    assert {e.name for e in state.entities.values()} == {"Ada", "Bo"} and len(state.relationships) == 1


def test_mentions_of_chunks_share_one_copy_of_equal_strings():
    """A first index holds every mention until it publishes: with ``shared``, the ids, names and
    descriptions equal across mentions (and chunks) are one string each, and the mentions are
    those made without it."""
    said = "Ada Vance met Bo Lind and Cy Moor at the Quay."
    extraction = Extraction(
        entities=[EntityRecord(name=n, type="person", description=said) for n in ("Ada Vance", "Bo Lind", "Cy Moor")],
        relationships=[RelationshipRecord(source=a, target=b, description=said, strength=5)
                       for a, b in (("Ada Vance", "Bo Lind"), ("Ada Vance", "Cy Moor"), ("Bo Lind", "Cy Moor"))])
    # (decoded from the store, each chunk's strings are its own: copies, not one object)
    copy = Extraction(
        entities=[EntityRecord(name="".join(e.name), type="".join(e.type), description="".join(e.description))
                  for e in extraction.entities],
        relationships=[RelationshipRecord(source="".join(r.source), target="".join(r.target),
                                          description="".join(r.description), strength=r.strength)
                       for r in extraction.relationships])
    shared: dict[str, str] = {}
    e1, r1, _ = mentions_of("chk-1", extraction, shared)
    e2, r2, _ = mentions_of("chk-2", copy, shared)
    assert (e1, r1, e2, r2) == (mentions_of("chk-1", extraction)[:2] + mentions_of("chk-2", copy)[:2])
    descriptions = {id(m.description) for m in e1 + e2 + r1 + r2}
    assert len(descriptions) == 1
    assert len({id(m.type) for m in e1 + e2}) == 1
    assert {id(m.relationship_id) for m in r1} == {id(m.relationship_id) for m in r2}
    assert {id(m.name) for m in e1} == {id(m.name) for m in e2}


def test_the_descriptions_after_a_change_are_those_of_the_mentions_then():
    # A hub's descriptions after an edit, from those before and the mentions removed, added and
    # kept, are what the distinct descriptions of its mentions now are (repeats across chunks,
    # empty ones, a description unsaid by one chunk and said by another).
    from streamrag.merge import descriptions_after, unique_descriptions

    rng = random.Random(5)
    pool = ["", "a", "b", "The river rose.", "The river rose again.", "x" * 3, "Ölfeld", "z"]
    for _ in range(2000):
        old = [(f"c{rng.randrange(8)}", rng.choice(pool)) for _ in range(rng.randrange(12))]
        removed = {f"c{i}" for i in range(8) if rng.random() < 0.3}
        kept = [d for c, d in old if c not in removed]
        said = [rng.choice(pool) for _ in range(rng.randrange(4))]
        after = descriptions_after(unique_descriptions(d for _c, d in old),
                                   (d for c, d in old if c in removed), said, kept)
        assert after == unique_descriptions(kept + said), (old, removed, said)
