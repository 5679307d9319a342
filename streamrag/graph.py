"""The entity graph: an undirected, weighted view of entities and relationships.

Design notes:
- Node indices follow sorted entity ids, so the same records always give the same graph
  whatever order they arrive in; every list this module returns is sorted too.
- Relationships are undirected. Several relationships between one pair (should the store
  ever hold them) are summed into one edge; a relationship of an entity with itself is kept
  out of the graph, since it says nothing about neighbourhoods. ``degree`` is the number of
  distinct neighbours, the figure GraphRAG ranks entities and relationships by.
- A relationship whose endpoint is not among the entities is a bug upstream (the store keeps
  them consistent), so it raises rather than growing a phantom node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import rustworkx as rx

from streamrag.records import Entity, Relationship


class Graph:
    """An undirected weighted rustworkx graph over entity ids."""

    def __init__(self, entity_ids: Iterable[str], edges: Iterable[tuple[str, str, float]]):
        self.ids: list[str] = sorted(set(entity_ids))
        self.index: dict[str, int] = {eid: i for i, eid in enumerate(self.ids)}
        n = len(self.ids)
        weights = pair_weights(self.index, edges)
        self.pygraph: rx.PyGraph = rx.PyGraph(multigraph=True)  # pairs are summed above
        self.pygraph.add_nodes_from(self.ids)
        self.pygraph.add_edges_from([(key // n, key % n, weights[key]) for key in sorted(weights)])
        self._directed: rx.PyDiGraph | None = None

    @classmethod
    def from_records(cls, entities: Iterable[Entity], relationships: Iterable[Relationship]) -> Graph:
        """Build the graph of merged entities and relationships (weight = relationship.weight)."""
        return cls(
            (e.id for e in entities),
            ((r.source, r.target, r.weight) for r in relationships),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self.index

    def degree(self, entity_id: str) -> int:
        """Number of distinct neighbours of an entity (KeyError if unknown)."""
        return len(self.pygraph.neighbors(self.index[entity_id]))

    def neighbors(self, entity_id: str) -> list[str]:
        """Ids of the distinct neighbours of an entity, sorted."""
        return sorted(self.ids[i] for i in self.pygraph.neighbors(self.index[entity_id]))

    def weight(self, a: str, b: str) -> float:
        """Summed weight of the edge between two entities; 0.0 when there is none."""
        i, j = self.index[a], self.index[b]
        return self.pygraph.get_edge_data(i, j) if self.pygraph.has_edge(i, j) else 0.0

    def edges(self) -> list[tuple[str, str, float]]:
        """Every edge once as (smaller id, larger id, weight), sorted."""
        out = []
        for (i, j), w in zip(self.pygraph.edge_list(), self.pygraph.edges()):
            a, b = sorted((self.ids[i], self.ids[j]))
            out.append((a, b, w))
        out.sort()
        return out

    def directed(self) -> rx.PyDiGraph:
        """Both directions of every edge, built once (rustworkx's PageRank wants a digraph)."""
        if self._directed is None:
            self._directed = self.pygraph.to_directed()
        return self._directed


def pair_weights(index: Mapping[str, int], edges: Iterable[tuple[str, str, float]], *,
                 positive_only: bool = False) -> dict[int, float]:
    """Summed weight per undirected pair of node indices, keyed ``i * len(index) + j`` with
    i < j (sorting one integer per pair is much faster than a tuple). Self-loops are left out,
    and with ``positive_only`` so is every edge whose weight is not above 0. An endpoint not in
    ``index`` is a bug upstream: ValueError."""
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
        if i == j or (positive_only and not weight > 0):
            continue
        key = i * n + j if i < j else j * n + i
        summed[key] = summed.get(key, 0.0) + weight
    return summed


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
    alpha: float = 0.85,
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
        alpha=alpha,
        weight_fn=float,
        personalization=personalization,
        max_iter=200,
    )
    ranked = sorted(((graph.ids[i], s) for i, s in scores.items()), key=lambda p: (-p[1], p[0]))
    return ranked if top_k is None else ranked[:top_k]
