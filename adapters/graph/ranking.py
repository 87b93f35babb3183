"""How a community's context is ranked, once either store has read the raw rows.

Why one module: the embedded store and Neo4j must hand the summarizer the same context for the
same graph, so only the reading differs between them; the ordering lives here.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from hansa.adapters.records import ChunkHit, CommunityContext


def community_context(
    names: Mapping[str, str],
    relations: Sequence[tuple[str, str, float]],
    chunks: Iterable[ChunkHit],
    max_entities: int,
    max_relations: int,
) -> CommunityContext:
    """Entities by weighted degree inside the set (ties by id); relations inside the set by
    summed weight (ties by ids); chunks by how many of the set's entities they mention (ties by
    total mention count, then chunk id). `community_id` is left empty: the caller knows it.

    `names` maps the set's entity ids to names; `relations` are (source, target, summed weight)
    inside the set, already in that order; `chunks` come already ranked and limited."""
    degree = dict.fromkeys(names, 0.0)
    for source, target, weight in relations:
        degree[source] += weight
        degree[target] += weight
    top = sorted(degree.items(), key=lambda item: (-item[1], item[0]))[: max(int(max_entities), 0)]
    return CommunityContext(
        community_id="",
        entities=tuple((eid, names[eid], float(d)) for eid, d in top),
        relations=tuple((names[s], names[t], float(w)) for s, t, w in relations[: max(int(max_relations), 0)]),
        chunks=tuple(chunks),
    )
