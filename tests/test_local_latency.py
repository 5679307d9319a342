"""The faster graph build and PageRank ranking behind local search give the same numbers."""

import random

import pytest

from conftest import graph_edges, python_probe
from streamrag.graph import Graph, in_key_order, pair_weights, personalized_pagerank, sorted_pairs


def reference(index, edges, positive_only=False):
    """What Graph built before: pair_weights, sorted by key."""
    n = len(index)
    summed = pair_weights(index, [e for e in edges if not positive_only or float(e[2]) > 0])
    keys = sorted(summed)
    return [k // n for k in keys], [k % n for k in keys], [summed[k] for k in keys]


def random_edges(rng, ids, count, *, duplicates, weights=(0.1, 0.2, 0.25, 1, 2.5, 1 / 3)):
    out = []
    for _ in range(count):
        a, b = rng.choice(ids), rng.choice(ids)
        out.append((a, b, rng.choice(weights)))
    if duplicates:  # the same pair again, either way round
        out += [(b, a, w + 0.1) for a, b, w in rng.sample(out, count // 5)]
    return out


@pytest.mark.parametrize("duplicates", [False, True])
def test_sorted_pairs_equals_pair_weights_sorted(duplicates):
    rng = random.Random(7)
    ids = [f"e{k:03d}" for k in range(60)]
    index = {e: i for i, e in enumerate(ids)}
    for _ in range(20):
        edges = random_edges(rng, ids, rng.randint(1, 300), duplicates=duplicates)
        assert sorted_pairs(index, edges) == reference(index, edges)
        assert sorted_pairs(index, iter(edges)) == reference(index, edges)  # any iterable


def test_sorted_pairs_positive_only_equals_pair_weights_sorted():
    # What clustering builds its graph from: edges whose weight is not above 0 left out, and
    # several edges of one pair (either way round) summed in input order, to the last bit.
    rng = random.Random(11)
    ids = [f"e{k:03d}" for k in range(40)]
    index = {e: i for i, e in enumerate(ids)}
    for _ in range(20):
        edges = random_edges(rng, ids, rng.randint(1, 300), duplicates=True,
                             weights=(0.1, 0.3, 1 / 3, 0.0, -1.0, 2.5, float("nan")))
        assert sorted_pairs(index, edges, positive_only=True) == reference(index, edges, True)


def test_sorted_pairs_self_loops_empty_and_integer_weights():
    index = {"a": 0, "b": 1, "c": 2}
    assert sorted_pairs(index, []) == ([], [], [])
    assert sorted_pairs(index, [("a", "a", 1.0)]) == ([], [], [])
    first, second, weights = sorted_pairs(index, [("c", "a", 2), ("b", "a", 1)])
    assert (first, second, weights) == ([0, 0], [1, 2], [1.0, 2.0])
    assert all(type(w) is float for w in weights)


def test_sorted_pairs_unknown_endpoint_raises_or_is_dropped():
    index = {"a": 0, "b": 1, "c": 2}
    edges = [("a", "b", 1.0), ("a", "ghost", 5.0), ("c", "b", 2.0)]
    with pytest.raises(ValueError, match="ghost"):
        sorted_pairs(index, edges)
    assert sorted_pairs(index, edges, drop_unknown=True) == ([0, 1], [1, 2], [1.0, 2.0])
    assert sorted_pairs(index, [("x", "y", 1.0)], drop_unknown=True) == ([], [], [])
    with pytest.raises(ValueError):
        Graph("abc", edges)
    assert graph_edges(Graph("abc", edges, drop_unknown=True)) == [("a", "b", 1.0), ("b", "c", 2.0)]


def test_sorted_pairs_of_edges_in_key_order_and_of_edges_out_of_it():
    # Edges already in key order are taken as they come; one out of order, a pair twice, a
    # self-loop, a larger index first or an unknown end anywhere is sorted and summed as before.
    rng = random.Random(5)
    ids = [f"e{k:03d}" for k in range(50)]
    index = {e: i for i, e in enumerate(ids)}
    for _ in range(20):
        pairs = sorted({tuple(sorted(rng.sample(ids, 2))) for _ in range(rng.randint(1, 200))})
        edges = [(a, b, rng.choice((0.1, 1 / 3, 2))) for a, b in pairs]
        first, second, _w = reference(index, edges)
        assert in_key_order(first, second, len(index))
        assert sorted_pairs(index, edges) == reference(index, edges)
        k = rng.randrange(len(edges))
        a, b, w = edges[k]
        for spoilt in (edges + [edges[k]], [(b, a, w)] + edges, edges + [(a, a, 1.0)], edges[::-1],
                       edges + [(a, "ghost", 1.0)]):
            i = [index.get(e[0], -1) for e in spoilt]
            j = [index.get(e[1], -1) for e in spoilt]
            assert not in_key_order(i, j, len(index)) or spoilt == edges[::-1] == edges
            known = [e for e in spoilt if e[1] in index]
            assert sorted_pairs(index, spoilt, drop_unknown=True) == reference(index, known)


def test_a_local_ask_does_not_load_numpy(cli_run, corpus):
    # A local ask ranked by PageRank: its graph's edges come in order from the index
    # (local_search.GRAPH_EDGES), so numpy, 0.1 s of an ask's process, is not loaded to sort them.
    assert cli_run("index", "-q", "--offline", ".", cwd=corpus).returncode == 0
    probe = ("import json, sys, io, contextlib; from streamrag.cli import main; out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out): code = main(['ask', 'Who is Mira Osk?', '--mode', 'local', '--json'])\n"
             "print(code, json.loads(out.getvalue())['details']['entity_search'], "
             "sorted(m for m in ('rustworkx', 'numpy') if m in sys.modules))")
    lines = python_probe(probe, corpus)
    assert lines[-1] == "0 bm25 + pagerank ['rustworkx']", lines[-3:]


def test_the_graph_edges_are_read_from_an_index_in_their_order(tmp_path):
    # Not every relationship row read and sorted: the index on both ends (and the weight) alone.
    from streamrag.local_search import GRAPH_EDGES
    from streamrag.store import Store

    store = Store(tmp_path / "x.db")
    try:
        plan = [r[3] for r in store.conn.execute("EXPLAIN QUERY PLAN " + GRAPH_EDGES)]
    finally:
        store.close()
    assert plan == ["SCAN relationships USING COVERING INDEX relationships_pair"], plan


def slow_ranking(graph, seeds):
    """The ranking as personalized_pagerank sorted it before: every score, tuples sorted in Python."""
    import rustworkx as rx

    personalization = {graph.index[e]: float(w) for e, w in sorted(seeds.items()) if e in graph.index}
    scores = rx.pagerank(graph.directed(), alpha=0.85, weight_fn=float,
                         personalization=personalization, max_iter=200)
    return sorted(((graph.ids[i], s) for i, s in scores.items()), key=lambda p: (-p[1], p[0]))


def test_pagerank_ranking_keeps_order_and_ties_by_id():
    # a star: every leaf ties with every other, so only the id orders them
    ids = ["hub"] + [f"leaf{k:02d}" for k in range(30, 0, -1)]
    graph = Graph(ids, [("hub", leaf, 1.0) for leaf in ids[1:]])
    ranked = personalized_pagerank(graph, {"hub": 1.0})
    assert ranked == slow_ranking(graph, {"hub": 1.0})
    assert [e for e, _ in ranked[1:]] == sorted(ids[1:])
    assert personalized_pagerank(graph, {"hub": 1.0}, top_k=4) == ranked[:4]
    assert personalized_pagerank(graph, {"hub": 1.0}, top_k=0) == []


def test_pagerank_ranking_matches_the_plain_sort_on_random_graphs():
    rng = random.Random(11)
    ids = [f"n{k:03d}" for k in range(80)]
    for _ in range(10):
        edges = random_edges(rng, ids, 150, duplicates=False)
        graph = Graph(ids, edges)
        seeds = {e: rng.choice([1.0, 0.5, 1e-3]) for e in rng.sample(ids, 3)}
        assert personalized_pagerank(graph, seeds) == slow_ranking(graph, seeds)
        assert personalized_pagerank(graph, seeds, top_k=7) == slow_ranking(graph, seeds)[:7]


def test_the_directed_graph_holds_each_pair_both_ways_in_key_order():
    # rustworkx sums each node's out-weights in edge order, so the PageRank's figures (and the
    # order of near ties) depend on it: each pair of sorted_pairs, smaller index first, then back
    rng = random.Random(5)
    ids = [f"n{k:03d}" for k in range(60)]
    edges = random_edges(rng, ids, 200, duplicates=True)
    graph = Graph(ids, edges)
    sources, targets, weights = sorted_pairs(graph.index, edges)
    expected = [e for i, j, w in zip(sources, targets, weights) for e in ((i, j, w), (j, i, w))]
    assert list(graph.directed().weighted_edge_list()) == expected
    assert list(graph.pygraph.weighted_edge_list()) == list(zip(sources, targets, weights))
