"""The community hierarchy: coarser levels above the published partition, each community with its parent.

Level 0 is the partition a site has always published (Leiden's final partition, small ones merged:
plugin/communities.py). Each coarser level clusters the level below it as a graph of its own:
communities are nodes, the summed entity-relation weight between two communities is the edge, and
leidenalg's Leiden (modularity, fixed seed) groups them. Why on the aggregated graph rather than
GDS's intermediate levels: the small graph is clustered by the same library on both stores (Neo4j +
GDS and the embedded store), so both cut the same hierarchy, and GDS's seeded runs mislabel their
later levels (plugin/communities.py). GraphRAG's global search and DGRAG route over such levels.

Levels stop at `[site] community_levels`, or when a level holds at most TOP_COMMUNITIES communities,
or when clustering merges nothing (every group would hold one child). A parent's members are the
union of its children's, so every level partitions the same entities.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import igraph
import leidenalg

from hansa.core.errors import ConfigError

TOP_COMMUNITIES = 4  # a level this small is the top: coarser still says nothing a router can use
MAX_LEVELS = 16

Links = Mapping[str, Mapping[str, float]]


def check_levels(levels: object) -> int:
    """`[site] community_levels`, checked: how many levels a site builds (1: the published partition only)."""
    if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= MAX_LEVELS:
        raise ConfigError(f"[site] community_levels must be an integer in [1, {MAX_LEVELS}], not {levels!r} "
                          "(1 publishes Leiden's partition alone)")
    return levels


def cluster(nodes: Sequence[str], links: Links, seed: int) -> list[list[str]]:
    """Groups of `nodes` (ids, in a fixed order) by Leiden on the weighted graph `links`: each group
    sorted, groups ordered by their first id, so the result never depends on label numbers."""
    index = {n: i for i, n in enumerate(nodes)}
    edges, weights = [], []
    for a in nodes:
        for b, w in links.get(a, {}).items():
            if b in index and index[a] < index[b] and w > 0:
                edges.append((index[a], index[b]))
                weights.append(float(w))
    graph = igraph.Graph(n=len(nodes), edges=edges)
    partition = leidenalg.find_partition(graph, leidenalg.ModularityVertexPartition,
                                         weights=weights or None, seed=seed)
    groups: dict[int, list[str]] = {}
    for node, label in zip(nodes, partition.membership):
        groups.setdefault(label, []).append(node)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])


def _lift(links: Links, parent_of: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """The links between parents: their children's links summed, links inside a parent dropped."""
    out: dict[str, dict[str, float]] = {}
    for a, row in links.items():
        for b, w in row.items():
            pa, pb = parent_of.get(a), parent_of.get(b)
            if pa is not None and pb is not None and pa != pb:
                out.setdefault(pa, {})
                out[pa][pb] = out[pa].get(pb, 0.0) + w
    return out


@dataclass(frozen=True)
class Parent:
    id: str
    level: int
    children: tuple[str, ...]  # ids of the level below, sorted
    members: frozenset[str]  # entities: the union of the children's


def coarser_levels(finest: Mapping[str, frozenset[str]], links: Links, levels: int, seed: int,
                   name: Callable[[frozenset[str], int], str]) -> list[list[Parent]]:
    """Above the `finest` communities (id -> member entities, linked by `links`), up to `levels - 1`
    coarser levels, finest first; `name(members, level)` gives a parent its id."""
    out: list[list[Parent]] = []
    members: dict[str, frozenset[str]] = dict(finest)
    nodes = sorted(members)
    current: Links = links
    while len(out) + 1 < levels and len(nodes) > TOP_COMMUNITIES:
        groups = cluster(nodes, current, seed)
        if len(groups) == len(nodes):
            break  # nothing merges: a coarser level would repeat this one
        level = len(out) + 1
        parents = []
        for g in groups:
            union = frozenset().union(*(members[c] for c in g))
            parents.append(Parent(name(union, level), level, tuple(g), union))
        out.append(parents)
        parent_of = {c: p.id for p in parents for c in p.children}
        current = _lift(current, parent_of)
        members = {p.id: p.members for p in parents}
        nodes = sorted(members)
    return out
