import random

import pytest

from streamrag.graph import Graph, neighbour_counts, personalized_pagerank
from streamrag.records import Entity, Relationship


def entity(eid: str) -> Entity:
    return Entity(id=eid, name=eid.upper(), type="THING", description="", sources=[], mentions=1)


def rel(a: str, b: str, weight: float = 1.0) -> Relationship:
    a, b = sorted((a, b))
    return Relationship(
        id=f"r-{a}-{b}", source=a, target=b, description="", weight=weight, sources=[], mentions=1
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
    graph = Graph.from_records(reversed(entities), reversed(relationships))
    assert graph.ids == sorted("abcdxyz")
    assert graph.pygraph.num_nodes() == 7 and graph.pygraph.num_edges() == 7
    assert graph.weight("a", "b") == 2.0 and graph.weight("b", "a") == 2.0
    assert graph.weight("a", "z") == 0.0
    assert graph.neighbors("c") == ["a", "b", "x"]
    assert graph.edges()[0] == ("a", "b", 2.0)
    assert "d" in graph and "q" not in graph


def test_degree_counts_distinct_neighbours():
    graph = Graph("abc", [("a", "b", 1.0), ("b", "a", 2.0), ("a", "a", 5.0), ("b", "c", 1.0)])
    assert graph.degree("a") == 1           # parallel edge merged, self-loop ignored
    assert graph.weight("a", "b") == 3.0
    assert graph.degree("b") == 2
    with pytest.raises(KeyError):
        graph.degree("zz")


def test_unknown_endpoint_is_an_error():
    with pytest.raises(ValueError, match="unknown entity 'q'"):
        Graph(["a"], [("a", "q", 1.0)])


def test_neighbour_counts_count_distinct_neighbours(two_triangles):
    entities, relationships = two_triangles
    counts = neighbour_counts(relationships + [rel("b", "a"), rel("d", "d")])  # a repeat, a loop
    assert counts == {"a": 2, "b": 2, "c": 3, "x": 3, "y": 2, "z": 2}
    graph = Graph.from_records(entities, relationships)
    assert counts == {e: graph.degree(e) for e in graph.ids if graph.degree(e)}


def test_personalized_pagerank_ranks_the_seed_neighbourhood_first(two_triangles):
    entities, relationships = two_triangles
    graph = Graph.from_records(entities, relationships)
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
    graph = Graph.from_records(entities, relationships)
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

