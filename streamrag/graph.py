"""The entity graph: an undirected, weighted view of entities and relationships.

Design notes:
- Node indices follow sorted entity ids, so the same records always give the same graph
  whatever order they arrive in; every list this module returns is sorted too.
- Relationships are undirected. Several relationships between one pair (should the store
  ever hold them) are summed into one edge; a relationship of an entity with itself is kept
  out of the graph, since it says nothing about neighbourhoods. An entity's degree
  (``neighbour_counts``) is the number of distinct neighbours, the figure GraphRAG ranks
  entities and relationships by.
- numpy is loaded only to sort and sum edges that do not come in order already: a local ask's
  whole cost is a process (``local_search.widen`` reads the edges in order), and importing it
  took a tenth of a second of it.
- A relationship whose endpoint is not among the entities is a bug upstream (the store keeps
  them consistent), so it raises rather than growing a phantom node.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from itertools import islice, repeat
from operator import add, itemgetter, lt, mul

import rustworkx as rx

from streamrag.records import Relationship

# The chance a walk follows an edge rather than jumping back to a seed: PageRank's usual 0.85,
# which no caller or setting has asked to change.
PAGERANK_ALPHA = 0.85


class Graph:
    """An undirected weighted rustworkx graph over entity ids."""

    def __init__(self, entity_ids: Iterable[str], edges: Iterable[tuple[str, str, float]], *,
                 drop_unknown: bool = False):
        """``drop_unknown``: leave out an edge naming an entity not in ``entity_ids`` rather than
        raise (a reader whose snapshot may hold such a row)."""
        self.ids: list[str] = sorted(set(entity_ids))
        self.index: dict[str, int] = {eid: i for i, eid in enumerate(self.ids)}
        sources, targets, weights = sorted_pairs(self.index, edges, drop_unknown=drop_unknown)
        self.pygraph: rx.PyGraph = rx.PyGraph(multigraph=True)  # pairs are summed above
        self.pygraph.add_nodes_from(self.ids)
        # from an iterator, and no list of edge indices back: add_edges_from(list(...)) took
        # twice as long for 202,659 edges (0.057 -> 0.025 s), the same edges in the same order
        self.pygraph.extend_from_weighted_edge_list(zip(sources, targets, weights))
        self._directed: rx.PyDiGraph | None = None

    def directed(self) -> rx.PyDiGraph:
        """Both directions of every edge, built once (rustworkx's PageRank wants a digraph)."""
        if self._directed is None:
            self._directed = self.pygraph.to_directed()
        return self._directed


def pair_weights(index: Mapping[str, int], edges: Iterable[tuple[str, str, float]]) -> dict[int, float]:
    """Summed weight per undirected pair of node indices, keyed ``i * len(index) + j`` with
    i < j (sorting one integer per pair is much faster than a tuple). Self-loops are left out.
    An endpoint not in ``index`` is a bug upstream: ValueError."""
    n = len(index)
    summed: dict[int, float] = {}
    for source, target, weight in edges:
        i, j = index.get(source), index.get(target)
        if i is None or j is None:
            raise ValueError(
                f"edge {source!r} -- {target!r} names unknown entity {source if i is None else target!r}; "
                "every relationship endpoint must be one of the entities given"
            )
        weight = float(weight)
        if i == j:
            continue
        key = i * n + j if i < j else j * n + i
        summed[key] = summed.get(key, 0.0) + weight
    return summed


def sorted_pairs(index: Mapping[str, int], edges: Iterable[tuple[str, str, float]], *,
                 drop_unknown: bool = False, positive_only: bool = False,
                 ) -> tuple[list[int], list[int], list[float]]:
    """The edges of ``pair_weights(index, edges)`` in ascending key order, as three lists:
    smaller node index, larger node index, summed weight. The same numbers (every weight a
    ``float``, duplicates summed in input order), worked out with numpy: half the time of
    pair_weights and a sort on 200,000 edges. ``positive_only`` leaves out every edge whose
    weight is not above 0; ``drop_unknown`` an edge with an endpoint not in ``index``, instead
    of raising ValueError. Edges already in that order, each once and smaller index first, are
    taken as they are (``in_key_order``), without numpy."""
    rows = edges if isinstance(edges, list) else list(edges)
    if not rows:
        return [], [], []
    first = list(map(index.get, map(itemgetter(0), rows)))  # C loops: no Python per edge
    second = list(map(index.get, map(itemgetter(1), rows)))
    if not positive_only and None not in first and None not in second and in_key_order(first, second, len(index)):
        return first, second, list(map(float, map(itemgetter(2), rows)))
    import numpy as np

    if None in first or None in second:
        if not drop_unknown:
            pair_weights(index, rows)  # raises, naming the unknown entity
        known = [k for k, (i, j) in enumerate(zip(first, second)) if i is not None and j is not None]
        first, second = [first[k] for k in known], [second[k] for k in known]
        rows = [rows[k] for k in known]
        if not rows:
            return [], [], []
    n = len(index)
    i = np.array(first, dtype=np.int64)
    j = np.array(second, dtype=np.int64)
    w = np.array(list(map(float, map(itemgetter(2), rows))), dtype=np.float64)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    keep = lo != hi  # self-loops are left out
    if positive_only:
        keep &= w > 0
    keys, w = (lo * n + hi)[keep], w[keep]
    order = np.argsort(keys, kind="stable")   # several edges of one pair stay in input order
    keys, w = keys[order], w[order]
    if keys.size > 1 and bool((keys[1:] == keys[:-1]).any()):
        # several edges between one pair: summed one by one in that order, as pair_weights does
        keys, where = np.unique(keys, return_inverse=True)
        w = np.bincount(where, weights=w)
    return (keys // n).tolist(), (keys % n).tolist(), w.tolist()


def in_key_order(first: list[int], second: list[int], n: int) -> bool:
    """Whether the pairs ``(first[k], second[k])`` of node indices below ``n`` are each smaller
    index first, and their keys (``pair_weights``) strictly ascending: the order ``sorted_pairs``
    gives, no self-loop and no pair twice. (C loops: 25 ms for 200,000 edges.)"""
    if not all(map(lt, first, second)):
        return False
    keys = list(map(add, map(mul, first, repeat(n)), second))
    return all(map(lt, keys, islice(keys, 1, None)))


def neighbour_counts(relationships: Iterable[Relationship]) -> dict[str, int]:
    """Entity id -> number of distinct neighbours (self-loops left out; entities with none are
    absent). The degree the pipeline stores, counted without building a graph."""
    pairs = {(a, b) if a < b else (b, a) for r in relationships if (a := r.source) != (b := r.target)}
    out: dict[str, int] = {}
    for a, b in pairs:
        out[a] = out.get(a, 0) + 1
        out[b] = out.get(b, 0) + 1
    return out


def personalized_pagerank(
    graph: Graph,
    seeds: Mapping[str, float],
    top_k: int | None = None,
) -> list[tuple[str, float]]:
    """Entities ranked by PageRank personalised to ``seeds`` (id -> weight), best first.

    Seeds that are not in the graph or have a weight <= 0 are ignored; with no usable seed the
    answer is empty. Seeds themselves are included (they usually rank first). Ties are broken by
    id, so the order is deterministic. Edge weights steer the walk.
    """
    personalization = {
        graph.index[eid]: float(w)
        for eid, w in sorted(seeds.items())
        if eid in graph.index and w > 0 and math.isfinite(w)
    }
    if not personalization:
        return []
    scores = rx.pagerank(
        graph.directed(),
        alpha=PAGERANK_ALPHA,
        weight_fn=float,
        personalization=personalization,
        max_iter=200,
    )
    # best score first, ties by id: node indices follow sorted ids, so by index
    def best(item: tuple[int, float]) -> tuple[float, int]:
        return -item[1], item[0]

    if top_k is None or any(map(math.isnan, scores.values())):
        # (a NaN gives no order to pick the best by: the plain sort, as it always was)
        ranked = sorted(scores.items(), key=best)[:top_k]
    else:
        ranked = heapq.nsmallest(top_k, scores.items(), key=best)
    ids = graph.ids
    return [(ids[i], s) for i, s in ranked]
