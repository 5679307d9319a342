"""Hierarchical Leiden communities, seeded, deterministic and incremental.

Shape of the hierarchy (GraphRAG's semantics, but over the whole graph):
- Level 0 partitions every entity. Leiden runs on the whole graph, so every connected
  component is clustered, not only the largest. Each part is then cut into its connected
  pieces, so a community is always connected; an entity without edges is therefore a
  community of its own. Singletons are honest and stable (a new isolated entity never
  reshuffles another community); grouping unrelated isolates into buckets would give
  communities with nothing to report and ids that shift whenever an isolate arrives.
- A community larger than ``max_cluster_size`` is split at the next level by running Leiden
  on its induced subgraph. A community that is small enough, or that Leiden returns as one
  part, is a leaf: entities reach deeper levels only under split communities.

Why it is deterministic: node ids are sorted before any graph is built, every subgraph is
built from its sorted members and sorted edges, and the optimiser is reseeded before every
run, so a community's split depends only on its own subgraph and not on what ran before.

Why it is incremental: with ``previous``, each (sub)graph starts from the previous partition
at its level. Newcomers start alone and are placed while everyone else stays fixed; parts that
fell apart are cut into their connected pieces. If then no node would gain by moving, that
partition is kept as it is. Otherwise only the nodes that would gain enough by moving
(``MOVE_GAIN``) are re-optimised and every other node keeps its part. Every run ends with local
moves until no node wants to move, so an unchanged input with its own output as ``previous``
gives the same output, and a change reaches only the parts it unsettles. Ids are then matched
to the previous communities (see ``_assign_ids``), so an unchanged community keeps its id and
its report.

Leiden runs ``_MAX_ITERATIONS`` iterations at most: graphs without structure keep improving
by crumbs for dozens of iterations, and the final local moves make the answer a fixed point.
"""

from __future__ import annotations

import bisect
import functools
import importlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from streamrag import ids
from streamrag.graph import sorted_pairs
from streamrag.records import Community

__all__ = ["hierarchical_leiden"]


class _Deferred:
    """A module imported where it is first used, then bound in this one's place. numpy, igraph
    and leidenalg took 0.19 s of every process that imports this module, an update that finds
    nothing changed (0.8 s at 10,000 documents) included, which clusters nothing."""

    def __init__(self, name: str, alias: str) -> None:
        self._name, self._alias = name, alias

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        globals()[self._alias] = module   # (later uses find the module itself)
        return getattr(module, attr)


if TYPE_CHECKING:
    import igraph as ig
    import leidenalg as la
    import numpy as np

    Pairs = np.ndarray | Sequence[tuple[int, int]]   # edges (i, j) of a subgraph: an (edges, 2) array
else:
    ig, la, np = _Deferred("igraph", "ig"), _Deferred("leidenalg", "la"), _Deferred("numpy", "np")


def hierarchical_leiden(
    entity_ids: Iterable[str],
    edges: Iterable[tuple[str, str, float]] | GraphEdges,
    *,
    max_cluster_size: int = 10,
    seed: int = 42,
    resolution: float = 1.0,
    previous: Sequence[Community] | None = None,
    new_id: Callable[[], str] | None = None,
    changed: Iterable[str] | None = None,
) -> list[Community]:
    """Cluster entities into a hierarchy of communities, sorted by (level, first member).

    ``edges`` are undirected (source id, target id, weight); parallel edges are summed,
    self-loops and weights <= 0 are ignored, an unknown endpoint raises ValueError; or they
    are a ``GraphEdges`` of these entities, made already.
    With ``previous`` the run starts from those communities and keeps their ids where the
    membership survives; fresh ids come from ``new_id`` (default: "C<n>" counting up from
    one above the largest number among the previous ids; pass a counter kept in the store
    if an id retired in an earlier run must never come back). Without ``previous`` the ids
    are C0, C1, ... in output order.

    ``changed``, with ``previous`` clustered by the same settings: the entities that are new or
    have an edge added, removed or reweighted since. A previous community with the same members,
    none of them changed, has the same subgraph, so its previous split (a fixed point of the
    warm start) is taken as it is instead of being computed again. None: compute every split.
    """
    if max_cluster_size < 1:
        raise ValueError(f"max_cluster_size must be at least 1, got {max_cluster_size}")
    nodes = sorted(set(entity_ids))
    if not nodes:
        return []
    index = {eid: i for i, eid in enumerate(nodes)}
    graph_edges = _Edges(index, edges)

    prev_label: list[dict[int, str]] = []  # per level: node index -> previous community id
    for c in previous or ():
        while len(prev_label) <= c.level:
            prev_label.append({})
        # (members no longer in the graph land on None, dropped below: no Python loop per member)
        prev_label[c.level].update(zip(map(index.get, c.members), itertools.repeat(c.id)))
    for labels in prev_label:
        labels.pop(None, None)

    kept_split = _KeptSplits(previous, index, prev_label, changed) if previous and changed is not None else None
    clusters: list[_Cluster] = []
    everyone = list(range(len(nodes)))
    # (parent cluster position, members to partition, the previous community they are, if known)
    frontier: list[tuple[int | None, list[int], Community | None]] = [(None, everyone, None)]
    level = 0
    while frontier:
        labels = prev_label[level] if level < len(prev_label) else {}
        next_frontier = []
        for parent, members, was in frontier:
            parts = kept_split.get(level, members, was) if kept_split and parent is not None else None
            if parts is None:
                parts = [(part, None) for part in _leiden_parts(
                    members, graph_edges, labels, seed, resolution,
                    rounds=1 if parent is None else _MAX_SETTLE_ROUNDS)]
            if parent is not None and len(parts) < 2:
                continue  # cannot be split further: the parent stays a leaf
            for part, origin in parts:
                clusters.append(_Cluster(level, part, parent, origin))
                if len(part) > max_cluster_size:
                    next_frontier.append((len(clusters) - 1, part, origin))
        frontier = next_frontier
        level += 1

    return _assign_ids(clusters, nodes, previous or (), new_id)


def settings_key(max_cluster_size: int, seed: int, resolution: float) -> str:
    """The settings a partition depends on: a partition made with others is clustered afresh."""
    return ids.digest(max_cluster_size, seed, resolution)


_MAX_ITERATIONS = 2     # Leiden iterations per run, at most (leidenalg's default)
_MAX_MOVE_PASSES = 10   # local-move passes to reach a fixed point, at most
_CONVERGED = 1e-6       # an iteration gaining less than this share of the quality ends the run
_MAX_SETTLE_ROUNDS = 10  # re-optimisations of unsettled parts, at most (see _settle)


class _Cluster:
    __slots__ = ("level", "members", "parent", "origin")

    def __init__(self, level: int, members: list[int], parent: int | None, origin: Community | None = None):
        self.level = level
        self.members = members  # node indices, ascending (so sorted by id)
        self.parent = parent    # position of the parent in the cluster list
        self.origin = origin    # a previous community of this level with these members, sorted


class _KeptSplits:
    """The previous split of a community whose subgraph cannot have changed."""

    def __init__(self, previous: Sequence[Community], index: dict[str, int],
                 prev_label: list[dict[int, str]], changed: Iterable[str]) -> None:
        self.prev_label = prev_label
        self.dirty = {index[e] for e in changed if e in index}
        self.size = {c.id: len(c.members) for c in previous}
        self.children: dict[str, list[Community]] = {}
        for c in previous:
            if c.parent is not None:
                self.children.setdefault(c.parent, []).append(c)
        self.index = index

    def get(self, level: int, members: list[int], was: Community | None = None,
            ) -> list[tuple[list[int], Community | None]] | None:
        """The parts of ``members`` at ``level``, each with the previous community it is
        (when its members are sorted), when they are a previous community at ``level - 1``,
        unchanged, that was split; else None. ``was``: the previous community ``members`` are,
        a part of a split taken so: its members were found unchanged with its parent's, and
        are not looked at again (every member of every kept community was, on every update)."""
        above = self.prev_label[level - 1] if level - 1 < len(self.prev_label) else {}
        parent = above.get(members[0])
        if parent is None or self.size.get(parent) != len(members) or not self.children.get(parent):
            return None
        if (was is None or was.id != parent) and any(m in self.dirty or above.get(m) != parent for m in members):
            return None
        parts = []
        try:
            for child in self.children[parent]:
                part = list(map(self.index.__getitem__, child.members))
                in_order = child.level == level and part == sorted(part)   # (then its members are sorted by id too)
                parts.append((part if in_order else sorted(part), child if in_order else None))
        except KeyError:   # a member left the graph (then the sizes would differ; be safe)
            return None
        if sum(len(part) for part, _ in parts) != len(members):
            return None
        return sorted(parts, key=lambda g: g[0][0])


class GraphEdges:
    """The graph ``hierarchical_leiden`` clusters, made once: its entity ids sorted, and every
    edge as (i, j) with i < j, sorted, with its summed weight (``graph.sorted_pairs``, self-loops
    and weights <= 0 left out), as arrays.

    An update's is made from the published graph's (``updated``) from the edges of the entities
    whose edges moved, not from every relationship: on an offline index of 10,000 documents
    (200,000 relationships) the graph was made again on every update, about a quarter of its
    clustering."""

    def __init__(self, nodes: list[str], first: np.ndarray, second: np.ndarray, weights: np.ndarray) -> None:
        self.nodes = nodes        # entity ids, sorted: node i is nodes[i]
        self.first = first        # smaller end of each edge (int64), edges in (first, second) order
        self.second = second
        self.weights = weights    # float64

    @classmethod
    def of(cls, nodes: list[str], edges: Iterable[tuple[str, str, float]]) -> GraphEdges:
        """The graph of ``edges`` among ``nodes`` (sorted, distinct)."""
        first, second, weights = sorted_pairs({eid: i for i, eid in enumerate(nodes)}, edges, positive_only=True)
        return cls(nodes, np.array(first, dtype=np.int64), np.array(second, dtype=np.int64),
                   np.array(weights, dtype=np.float64))

    def updated(self, nodes: list[str], rewired: Iterable[str],
                edges_of_rewired: Iterable[tuple[str, str, float]]) -> GraphEdges:
        """The graph among ``nodes`` (sorted, distinct) once the entities ``rewired`` have had
        edges added, removed or reweighted (a deleted entity among them), and no other edge
        moved: every edge between two others kept (renumbered), and ``edges_of_rewired``, every
        edge now with an end among them, added. The arrays ``of`` makes of every edge: an
        edge's id is its pair of entities, so no edge is both kept and added."""
        index = {eid: i for i, eid in enumerate(nodes)}
        renumber = np.fromiter((index.get(eid, -1) for eid in self.nodes), dtype=np.int64, count=len(self.nodes))
        rewired = set(rewired)
        out = renumber < 0   # an entity left, or an end of an edge that moved
        for eid in rewired:
            k = bisect.bisect_left(self.nodes, eid)
            if k < len(self.nodes) and self.nodes[k] == eid:
                out[k] = True
        kept = ~(out[self.first] | out[self.second])
        added = GraphEdges.of(nodes, (e for e in edges_of_rewired if e[0] in rewired or e[1] in rewired))
        n = len(nodes)
        # (renumbering keeps the order of what is kept: only the edges added are sorted in)
        keys = np.concatenate((renumber[self.first[kept]] * n + renumber[self.second[kept]],
                               added.first * n + added.second))
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        return GraphEdges(nodes, keys // n, keys % n, np.concatenate((self.weights[kept], added.weights))[order])

    def same(self, other: GraphEdges) -> bool:
        """Whether ``other`` is this graph (tests: an updated one against one made anew)."""
        return self.nodes == other.nodes and all(
            np.array_equal(a, b) for a, b in ((self.first, other.first), (self.second, other.second),
                                              (self.weights, other.weights)))


class _Edges:
    """The graph once: every edge as (i, j) with i < j, sorted, with its summed weight."""

    def __init__(self, index: dict[str, int], edges: Iterable[tuple[str, str, float]] | GraphEdges) -> None:
        n = self.n = len(index)
        if not isinstance(edges, GraphEdges):
            made = GraphEdges.of(list(index), edges)
        elif edges.nodes == list(index):
            made = edges
        else:
            raise ValueError("the graph's edges were made for other entities")
        self.weights = made.weights.tolist()
        self.pairs = np.stack((made.first, made.second), axis=1)  # node i's edges
        self._run_start = np.searchsorted(self.pairs[:, 0], np.arange(n + 1))   # to higher nodes: one run
        self._position = np.full(n, -1, dtype=np.int64)   # scratch for ``induced``

    def induced(self, members: list[int]) -> tuple[np.ndarray, list[float]]:
        """The edges among ``members`` (ascending), numbered by position in ``members``: an
        (edges, 2) array in the order of (first end, second end), and their weights."""
        if len(members) == self.n:  # everyone: the whole graph, as it is
            return self.pairs, self.weights
        nodes = np.asarray(members, dtype=np.int64)
        starts = self._run_start[nodes]
        counts = self._run_start[nodes + 1] - starts
        total = int(counts.sum())
        if not total:
            return np.empty((0, 2), dtype=np.int64), []
        # every edge of every member's run, the runs in member order
        at = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(total)
        self._position[nodes] = np.arange(len(nodes))
        try:
            other = self._position[self.pairs[at, 1]]
        finally:
            self._position[nodes] = -1
        inside = other >= 0
        first = np.repeat(np.arange(len(nodes)), counts)[inside]
        kept = at[inside].tolist()
        weights = self.weights
        return np.stack((first, other[inside]), axis=1), [weights[k] for k in kept]


def _leiden_parts(
    members: list[int],
    graph_edges: _Edges,
    previous: dict[int, str],
    seed: int,
    resolution: float,
    rounds: int,
) -> list[list[int]]:
    """Leiden on the subgraph induced by ``members``, cut into connected parts, then settled
    by at most ``rounds`` re-optimisations (see ``_settle``; the first level needs only one,
    since no update keeps it as it was).

    Returns lists of node indices, each ascending, ordered by their smallest member.
    """
    pairs, weights = graph_edges.induced(members)
    if not len(pairs):
        return [[node] for node in members]

    graph = ig.Graph(n=len(members), edges=pairs.tolist())
    labels = [previous.get(node) for node in members]
    if all(label is None for label in labels):
        membership = _connected(_optimise(graph, weights, None, seed, resolution), pairs, graph)
        if rounds > 1:
            membership = _settle(graph, weights, membership, pairs, seed, resolution, rounds)
    else:
        membership = _settle(graph, weights, _warm_start(weights, labels, resolution, pairs, graph), pairs,
                             seed, resolution, rounds)

    groups: dict[int, list[int]] = {}
    for k, label in enumerate(membership):
        groups.setdefault(label, []).append(members[k])
    return sorted(groups.values(), key=lambda g: g[0])


def _settle(graph: ig.Graph, weights: list[float], membership: list[int], pairs: Pairs,
            seed: int, resolution: float, rounds: int) -> list[int]:
    """``membership`` re-optimised where a node wants to move, until none does (at most
    ``rounds`` times).

    Only the nodes that want to move are free; every other node stays where it was (a free node
    may still join its part). Freeing the whole part of such a node let Leiden move every member
    it could gain a crumb on, below ``MOVE_GAIN``: on a 10,000-document index, one added
    document gave two nodes an edge that made them want to move, their two parts were
    re-optimised, and 18 entities moved (35 of the 64 reports rewritten for it were of
    communities it does not touch). One round may not be enough: a node can want to move once
    its neighbours have, and cutting parts into connected pieces can unsettle a node. The
    answer must be settled, because the next run keeps an unchanged community's split as it is
    (``_KeptSplits``) on the promise that a warm start would return it unchanged. The first
    level is never kept that way, and settling it could take several passes over the whole
    graph, so it gets one round, as before.
    """
    for _ in range(rounds):
        unstable = _unstable(membership, pairs, weights, resolution)
        if not unstable:
            break
        free = set(unstable)
        fixed = [v not in free for v in range(len(membership))]
        membership = _connected(_optimise(graph, weights, membership, seed, resolution, fixed=fixed), pairs,
                                graph)
    return membership


def _optimise(
    graph: ig.Graph,
    weights: list[float],
    initial: list[int] | None,
    seed: int,
    resolution: float,
    fixed: list[bool] | None = None,
) -> list[int]:
    if fixed is not None and initial is not None and any(fixed):
        return _optimise_free(graph, weights, initial, fixed, seed, resolution)
    partition = la.RBConfigurationVertexPartition(
        graph, initial_membership=initial, weights=weights, resolution_parameter=resolution
    )
    _improve(partition, seed, fixed)
    return list(partition.membership)


def _optimise_free(graph: ig.Graph, weights: list[float], membership: list[int], fixed: list[bool],
                   seed: int, resolution: float) -> list[int]:
    """Leiden moving only the nodes not ``fixed``: on the graph with every part of fixed nodes
    contracted to one node, which stays in its part (a free node may still join it).

    The contraction keeps the quality of every partition it can express (leidenalg's own
    aggregation), so this is the run with the fixed nodes pinned, at the size of what may move:
    on a 200,000-edge graph with a few hundred free nodes, 3 s became a tenth of that.
    """
    coarse_label: dict[tuple[bool, int], int] = {}
    coarse = [coarse_label.setdefault((True, label) if pin else (False, v), len(coarse_label))
              for v, (label, pin) in enumerate(zip(membership, fixed))]
    fine = la.RBConfigurationVertexPartition(
        graph, initial_membership=coarse, weights=weights, resolution_parameter=resolution
    )
    aggregate = _aggregate(fine)  # its node k is community k of ``fine``
    member_of: dict[int, int] = {}
    for v, k in enumerate(fine.membership):
        member_of.setdefault(k, v)
    number: dict[int, int] = {}
    aggregate.set_membership([number.setdefault(membership[member_of[k]], len(number))
                              for k in range(len(member_of))])
    _improve(aggregate, seed, [fixed[member_of[k]] for k in range(len(member_of))])
    coarse_membership = aggregate.membership  # (a property that copies the list on each read)
    return [coarse_membership[k] for k in fine.membership]


def _aggregate(fine: la.RBConfigurationVertexPartition) -> la.RBConfigurationVertexPartition:
    """``fine.aggregate_partition()`` without its leak: leidenalg (0.12 among others) hands the
    aggregate graph's edge, weight and node-size lists to Python with a reference too many
    (``Py_BuildValue("lOOOO", ...)`` in ``_MutableVertexPartition_get_py_igraph``), so they are
    never freed, and ``watch`` grew by about 1.3 MB every 100 changes of a 200-document folder.

    The same C aggregate (so the same clusters), wrapped as ``aggregate_partition`` wraps it
    but for its ``graph``, edgeless here: the optimiser, the membership and the quality read
    only the C partition. A leidenalg without that function gets its own ``aggregate_partition``."""
    if not _private_aggregate_works():
        return fine.aggregate_partition()
    return _private_aggregate(fine)


def _private_aggregate(fine: la.RBConfigurationVertexPartition) -> la.RBConfigurationVertexPartition:
    """The aggregate of ``fine`` made through leidenalg's private C module (see ``_aggregate``)."""
    c_leiden = la._c_leiden
    collapsed = c_leiden._MutableVertexPartition_aggregate_partition(fine._partition)
    n = len(c_leiden._MutableVertexPartition_get_membership(collapsed))
    out = la.RBConfigurationVertexPartition(ig.Graph(n=n), resolution_parameter=fine.resolution_parameter)
    out._partition = collapsed
    out._update_internal_membership()
    return out


@functools.cache
def _private_aggregate_works() -> bool:
    """Whether this leidenalg's private parts make the aggregate its ``aggregate_partition``
    makes (membership, quality and re-optimisation read only the C partition): checked once a
    process on a small graph, so that another leidenalg (the pin has no upper bound) falls back
    to its own way, leak and all, instead of clustering otherwise."""
    try:
        graph = ig.Graph.Famous("Zachary")
        fine = la.RBConfigurationVertexPartition(graph, initial_membership=[v % 5 for v in range(34)])
        ours, theirs = _private_aggregate(fine), fine.aggregate_partition()
        return ours.membership == theirs.membership and math.isclose(ours.quality(), theirs.quality())
    except Exception:   # (missing, renamed or changed: not ours to use)
        return False


def _improve(partition: la.RBConfigurationVertexPartition, seed: int, fixed: list[bool] | None) -> None:
    optimiser = la.Optimiser()
    optimiser.set_rng_seed(seed)
    for _ in range(_MAX_ITERATIONS):
        gain = optimiser.optimise_partition(partition, n_iterations=1, is_membership_fixed=fixed)
        if gain <= _CONVERGED * max(1.0, abs(partition.quality())):
            break
    # Finish with local moves until no node wants to move: the answer is then a fixed point
    # that ``_unstable`` recognises on the next run, even when the budget cut Leiden short.
    # (leidenalg's queue can leave a node or two behind, hence the loop).
    for _ in range(_MAX_MOVE_PASSES):
        if optimiser.move_nodes(partition, is_membership_fixed=fixed) <= 0:
            break


def _warm_start(
    weights: list[float],
    labels: list[str | None],
    resolution: float,
    pairs: Pairs,
    graph: ig.Graph | None = None,
) -> list[int]:
    """The previous partition, with newcomers placed and every part made connected.

    Nodes keep their previous community; newcomers start alone and are then moved where they
    fit best while the others stay fixed.
    """
    number: dict[str, int] = {}
    initial = []
    newcomer = []
    for k, label in enumerate(labels):
        newcomer.append(label is None)
        initial.append(len(labels) + k if label is None else number.setdefault(label, len(number)))
    renumber: dict[int, int] = {}
    initial = [renumber.setdefault(x, len(renumber)) for x in initial]  # labels < node count
    if any(newcomer):
        initial = _place(initial, newcomer, pairs, weights, resolution)
    return _connected(initial, pairs, graph)


def _place(membership: list[int], newcomer: list[bool], pairs: Pairs,
           weights: list[float], resolution: float) -> list[int]:
    """Each newcomer moved to the neighbouring part it adds most quality to (the gain
    ``_unstable`` uses), in node order, until none moves; everyone else stays.

    Local moves of the newcomers only: running Leiden on the whole graph with every other node
    fixed cost a second and a half of a small update to a 200,000-edge graph.
    """
    membership = list(membership)
    node, other, w = _both_ways(pairs, weights)
    strength = np.bincount(node, weights=w, minlength=len(membership))
    links: dict[int, list[tuple[int, float]]] = {v: [] for v, new in enumerate(newcomer) if new}
    for k in np.flatnonzero(np.asarray(newcomer)[node]).tolist():   # in edge order
        links[int(node[k])].append((int(other[k]), float(w[k])))
    two_m = 2 * sum(weights)
    part = dict(enumerate(np.bincount(membership, weights=strength).tolist()))
    strength = strength.tolist()
    tolerance = 1e-9 * two_m
    for _ in range(_MAX_MOVE_PASSES):
        moved = False
        for v in sorted(links):
            own, k_v = membership[v], strength[v]
            to: dict[int, float] = {}
            for u, w in links[v]:
                to[membership[u]] = to.get(membership[u], 0.0) + w
            part[own] -= k_v
            best, best_gain = own, to.get(own, 0.0) - resolution * k_v * part[own] / two_m
            for label in sorted(to):
                gain = to[label] - resolution * k_v * part[label] / two_m
                if gain > best_gain + tolerance:
                    best, best_gain = label, gain
            part[best] += k_v
            if best != own:
                membership[v] = best
                moved = True
        if not moved:
            break
    return membership


def _connected(membership: list[int], pairs: Pairs, graph: ig.Graph | None = None) -> list[int]:
    """Cut every part into its connected pieces; a piece is labelled by its smallest node.
    ``graph``, when given, has the edges ``pairs`` in that order (it saves building one)."""
    n = len(membership)
    if not len(pairs):
        return list(range(n))
    ends = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    label = np.asarray(membership)
    inside = label[ends[:, 0]] == label[ends[:, 1]]
    if graph is not None:
        pieces = graph.subgraph_edges(np.flatnonzero(inside).tolist(), delete_vertices=False)
    else:
        pieces = ig.Graph(n=n, edges=ends[inside].tolist())
    piece = np.asarray(pieces.connected_components().membership)
    _, first = np.unique(piece, return_index=True)  # the smallest node of each piece
    return first[piece].tolist()


# A kept partition is re-optimised only where a node would gain more than this share of its own
# strength by moving: tiny gains are not worth rewriting the reports of the parts involved.
MOVE_GAIN = 0.05


def _unstable(
    membership: list[int], pairs: Pairs, weights: list[float], resolution: float
) -> list[int]:
    """Nodes that would raise the quality by moving to a neighbouring part or leaving alone.

    The same gain leidenalg's move phase uses: w(v, D) - w(v, C - v) - γ k_v (K_D - K_C + k_v) / 2m.
    Worked out with numpy, every sum in edge order (as a loop over the edges would add them),
    so the floats are those of the loop: a node's fate does not depend on how it was computed.
    """
    n = len(membership)
    if not len(pairs):
        return []
    label = np.asarray(membership, dtype=np.int64)
    node, other, w = _both_ways(pairs, weights)
    strength = np.bincount(node, weights=w, minlength=n)
    parts = int(label.max()) + 1
    keys, where = np.unique(node * parts + label[other], return_inverse=True)
    to_part = np.bincount(where, weights=w)          # weight from a node to a part
    key_node, key_part = keys // parts, keys % parts
    two_m = 2 * sum(weights)
    part_strength = np.bincount(label, weights=strength, minlength=parts)
    tolerance = 1e-9 * two_m
    k_v = strength[key_node]
    own = key_part == label[key_node]
    to_own = np.zeros(n)
    to_own[key_node[own]] = to_part[own]
    best = np.zeros(n)  # alone
    gain = to_part[~own] - resolution * k_v[~own] * part_strength[key_part[~own]] / two_m
    np.maximum.at(best, key_node[~own], gain)
    stay = to_own - resolution * strength * (part_strength[label] - strength) / two_m
    return np.flatnonzero(best - stay > tolerance + MOVE_GAIN * strength).tolist()


def _both_ways(pairs: Pairs, weights: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each edge (a, b, w) as (a, b, w) then (b, a, w), in edge order: sums over these arrays
    (``np.bincount`` adds in array order) equal those of a loop over the edges."""
    ends = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    node = ends.reshape(-1)               # a0, b0, a1, b1, ...
    other = ends[:, ::-1].reshape(-1)     # b0, a0, b1, a1, ...
    return node, other, np.repeat(np.asarray(weights, dtype=float), 2)


def _number(cid: str) -> int:
    match = re.search(r"(\d+)$", cid)
    return int(match.group(1)) if match else -1


def _assign_ids(
    clusters: list[_Cluster],
    nodes: list[str],
    previous: Sequence[Community],
    new_id: Callable[[], str] | None,
) -> list[Community]:
    """Give each cluster an id, keeping previous ids where the membership survived.

    Level by level (so parents have their ids before their children): a new community may
    keep the id of a previous community of the same level if it holds a strict majority of
    that community's members (counted as they were, so a community that lost most of its
    entities to deletion is retired). The new communities of a level are disjoint, so at most
    one can hold such a majority; the only contest is a new community that absorbed the
    majorities of several old ones. It keeps the id of the one it shares most members with
    (then: same parent id, smaller symmetric difference, smaller id number); the parent is
    only a tie-break, so a community keeps its id when its parent was renamed. Each old id
    is used at most once; everything unmatched gets ``new_id()`` in order of (level, smallest
    member id), which must not return an id still in use.
    """
    if new_id is None:
        counter = itertools.count(max((_number(c.id) for c in previous), default=-1) + 1)
        new_id = lambda: f"C{next(counter)}"  # noqa: E731

    old_by_level: dict[int, dict[str, Community]] = {}
    for c in previous:
        old_by_level.setdefault(c.level, {})[c.id] = c

    ids: list[str | None] = [None] * len(clusters)
    by_level: dict[int, list[int]] = {}
    for pos, cluster in enumerate(clusters):
        by_level.setdefault(cluster.level, []).append(pos)

    for level in sorted(by_level):
        positions = sorted(by_level[level], key=lambda p: clusters[p].members[0])
        old = old_by_level.get(level, {})
        # A community with exactly the members of an old one keeps its id: it holds all of them,
        # and the communities of a level are disjoint, so none other holds a share of them (most
        # of an update's communities; counting each one's overlaps took a tenth of a second).
        by_first = {c.members[0]: c for c in old.values() if c.members}   # (members sorted: by the smallest)
        unmatched = []
        for pos in positions:
            members = clusters[pos].members
            if clusters[pos].origin is not None:   # a previous community's split, taken as it was
                ids[pos] = clusters[pos].origin.id
                continue
            match = by_first.get(nodes[members[0]])
            if match is not None and len(match.members) == len(members) \
                    and match.members == [nodes[n] for n in members]:
                ids[pos] = match.id
            else:
                unmatched.append(pos)
        kept = {ids[pos] for pos in positions if ids[pos] is not None}
        owner = {eid: c.id for c in old.values() if c.id not in kept for eid in c.members}
        candidates = []
        for pos in unmatched:
            cluster = clusters[pos]
            parent_id = None if cluster.parent is None else ids[cluster.parent]
            overlaps = Counter(owner[nodes[n]] for n in cluster.members if nodes[n] in owner)
            for old_id, shared in overlaps.items():
                old_size = len(old[old_id].members)
                if 2 * shared > old_size:
                    candidates.append((
                        -shared,
                        old[old_id].parent != parent_id,
                        old_size + len(cluster.members) - 2 * shared,
                        _number(old_id),
                        old_id,
                        pos,
                    ))
        candidates.sort()  # each old id has at most one candidate, so no tie reaches pos
        used: set[str] = set()
        for *_, old_id, pos in candidates:
            if ids[pos] is None and old_id not in used:
                ids[pos] = old_id
                used.add(old_id)
        for pos in positions:
            if ids[pos] is None:
                ids[pos] = new_id()

    out = [
        Community(
            id=ids[pos],
            level=cluster.level,
            parent=None if cluster.parent is None else ids[cluster.parent],
            members=list(cluster.origin.members) if cluster.origin is not None else [nodes[n] for n in cluster.members],
        )
        for pos, cluster in enumerate(clusters)
    ]
    out.sort(key=lambda c: (c.level, c.members[0]))
    return out


def relabel(communities: Sequence[Community], previous: Sequence[Community],
            new_id: Callable[[], str] | None = None) -> list[Community]:
    """``communities`` (from any run) with ids matched to ``previous`` by the same majority rule
    ``hierarchical_leiden`` uses, so a partition computed from scratch keeps stable ids too."""
    nodes = sorted({m for c in communities for m in c.members})
    index = {eid: i for i, eid in enumerate(nodes)}
    position = {c.id: i for i, c in enumerate(communities)}
    clusters = [_Cluster(c.level, sorted(index[m] for m in c.members),
                         None if c.parent is None else position[c.parent]) for c in communities]
    return _assign_ids(clusters, nodes, previous, new_id)


def modularity(communities: Sequence[Community], edges: Iterable[tuple[str, str, float]],
               *, resolution: float = 1.0) -> float:
    """Weighted modularity of the top-level partition (entities in none count as singletons)."""
    label = {m: c.id for c in communities if c.level == 0 for m in c.members}
    total = 0.0
    inside: dict[str, float] = {}
    strength: dict[str, float] = {}
    for a, b, w in edges:
        if a == b or w <= 0:
            continue
        total += w
        for node in (a, b):
            key = label.get(node, node)
            strength[key] = strength.get(key, 0.0) + w
        if label.get(a, a) == label.get(b, b):
            inside[label.get(a, a)] = inside.get(label.get(a, a), 0.0) + w
    if total == 0:
        return 0.0
    return sum(inside.values()) / total - resolution * sum(s * s for s in strength.values()) / (4 * total * total)


FRESH_CHECK_SHARE = 0.05
"""A fresh clustering, which checks a warm one for drift and costs seconds on a large graph,
runs once the entities changed since the last check reach this share of the graph."""


def updated_partition(old: list[Community], *, warm: Callable[[list[Community]], list[Community]],
                      fresh: Callable[[], list[Community]], edges: Callable[[], list[tuple[str, str, float]]],
                      resolution: float, drift_allowed: float, entities: int, since_check: int,
                      changed: int, same_graph: bool, recluster: bool,
                      new_id: Callable[[], str]) -> tuple[list[Community], bool, int]:
    """The partition an update publishes, from the published one ``old`` (not empty), as the
    run's clustering step and the estimate of it both work it out: ``old`` itself for the same
    graph (Leiden run again could still move a few nodes, and every report they touch would be
    paid for again for nothing); else ``warm(old)``, Leiden from it, unless a fresh clustering
    (``fresh()``, checked once ``since_check`` + ``changed`` entities reach
    ``FRESH_CHECK_SHARE`` of ``entities``) is better by more than ``drift_allowed`` in
    modularity, or ``recluster``: then the fresh one, its ids matched to the old ones.
    ``edges()``: the graph's edges, for the modularity (made only when it is worked out).

    Returns the partition, whether it is a fresh one, and the entities changed since the last
    check once this one is published."""
    if not recluster and same_graph:
        return old, False, since_check
    if not recluster:
        kept = warm(old)
        moved = since_check + changed
        if moved < FRESH_CHECK_SHARE * entities:
            return kept, False, moved
    found = fresh()
    if not recluster:
        drift = modularity(found, edges(), resolution=resolution) - modularity(kept, edges(), resolution=resolution)
        if drift <= drift_allowed:
            return kept, False, 0
    return relabel(found, old, new_id), True, 0
