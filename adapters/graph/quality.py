"""Generalized modularity of a partition of the entity graph: the quality Leiden maximizes.

Why the stores share one function: an incremental (seeded) community run is judged against a
full run by this number (plugin/communities.py falls back to the full run when the seeded one
drifted), so both backends must score a partition exactly alike, whatever engine found it. The
embedded store scores it from its relations (`modularity`); Neo4j sums the same terms in the
database and ends in `from_sums`, as `modularity` does.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np


def modularity(edges: Iterable[tuple[str, str, float]], partition: Mapping[str, int], gamma: float) -> float:
    """Q = sum over communities of  w_in / m  -  gamma * (K / 2m)^2, on the undirected weighted graph
    `edges` (each pair once): the objective of leidenalg's RBConfigurationVertexPartition and of GDS
    Leiden at resolution `gamma`. An entity the partition does not name counts as a community of
    its own (e.g. one left out of every published community); 0.0 for a graph without edges."""
    labels: dict[str, int] = {}
    fresh = max(partition.values(), default=-1) + 1

    def label(entity: str) -> int:
        found = partition.get(entity)
        if found is not None:
            return int(found)
        if entity not in labels:
            nonlocal fresh
            labels[entity] = fresh
            fresh += 1
        return labels[entity]

    rows = [(label(a), label(b), float(w)) for a, b, w in edges]
    if not rows:
        return 0.0
    ca, cb, weight = (np.asarray(col) for col in zip(*rows))
    _, dense = np.unique(np.concatenate([ca, cb]), return_inverse=True)
    degree = np.bincount(dense, weights=np.concatenate([weight, weight]))  # K per community
    return from_sums(float(weight.sum()), float(weight[ca == cb].sum()), float(np.sum(degree**2)), gamma)


def from_sums(total: float, inside: float, squared_degrees: float, gamma: float) -> float:
    """Q from its three sums: the total relation weight m, the weight inside communities, and the
    sum over communities of their squared summed degree K^2. What a store that sums them where the
    graph lives (Neo4j: cypher/gds/modularity.cypher) scores a partition by, without reading the
    relations out; 0.0 for a graph without edges."""
    if total <= 0:
        return 0.0
    return inside / total - float(gamma) * squared_degrees / (2.0 * total) ** 2


def region_resolution(gamma: float, total: float, degree: float, inside: float) -> float:
    """The resolution at which Leiden on a region's own subgraph weighs its null model as the whole
    graph's modularity at `gamma` does; 0.0 when the region holds no relation.

    Why: a local refresh (plugin/communities.py) re-clusters only the entities an edit touched and
    keeps every other community as it is, so the objective is the site-wide Q with the rest fixed.
    Q's null term for two region entities is gamma * k_i * k_j / 2m with their whole-graph degrees
    k and total weight m (`total`); on the subgraph Leiden sees degrees k' and total m' (`inside`).
    Scaling each k' by the region's K / K' (`degree`: the summed whole-graph degree of its entities;
    K' = 2m') gives gamma' = gamma * K^2 / (4 m' m). A region cut off from the rest (K = K') gets
    gamma * m'/m, which is exact; otherwise its entities' edges out of the region are spread over
    them in proportion to their degree inside, the one approximation (the caller checks the result
    against a full run anyway)."""
    if inside <= 0 or total <= 0:
        return 0.0
    return float(gamma) * float(degree) ** 2 / (4.0 * float(inside) * float(total))
