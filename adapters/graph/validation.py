"""Input checks every GraphStore runs before it touches its database.

Why one module: both stores must refuse the same malformed input with the same message, before
any write starts, so that a bad batch leaves nothing partial behind on either backend.
"""
from __future__ import annotations

import math
from typing import Sequence

from hansa.adapters.graph.base import LeidenParams
from hansa.adapters.records import Community, DocumentGraph
from hansa.core.errors import InputError


def check_document_graphs(graphs: Sequence[DocumentGraph]) -> None:
    """Raise InputError naming the first inconsistency in a batch of document graphs.

    A graph must be self-contained: its chunks and mentions belong to its document, and every
    entity it mentions is listed in it (and every listed entity is mentioned)."""
    seen_docs: set[str] = set()
    seen_chunks: set[str] = set()
    for graph in graphs:
        doc_id = graph.document.id
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError("a document has an empty id: give every document a non-empty string id")
        if doc_id in seen_docs:
            raise InputError(f"document {doc_id!r} appears twice in one batch: write each document once")
        seen_docs.add(doc_id)
        chunk_ids = _check_chunks(graph, seen_chunks)
        entity_ids = _check_entities(graph)
        used = _check_mentions(graph, chunk_ids, entity_ids)
        unused = sorted(entity_ids - used)
        if unused:
            raise InputError(
                f"document {doc_id!r} lists entity {unused[0]!r} that none of its mentions uses: drop unused "
                "entities before writing"
            )


def _check_chunks(graph: DocumentGraph, seen_chunks: set[str]) -> set[str]:
    doc_id = graph.document.id
    ids: set[str] = set()
    for chunk in graph.chunks:
        if not chunk.id:
            raise InputError(f"document {doc_id!r} has a chunk with an empty id")
        if chunk.doc_id != doc_id:
            raise InputError(
                f"chunk {chunk.id!r} says it belongs to {chunk.doc_id!r} but was given with document {doc_id!r}"
            )
        if chunk.id in seen_chunks:
            raise InputError(f"chunk id {chunk.id!r} appears twice in one batch: chunk ids must be unique")
        seen_chunks.add(chunk.id)
        ids.add(chunk.id)
    return ids


def _check_entities(graph: DocumentGraph) -> set[str]:
    ids: set[str] = set()
    for entity in graph.entities:
        if not entity.id:
            raise InputError(f"document {graph.document.id!r} has an entity with an empty id")
        if entity.id in ids:
            raise InputError(f"document {graph.document.id!r} lists entity {entity.id!r} twice")
        ids.add(entity.id)
    return ids


def _check_mentions(graph: DocumentGraph, chunk_ids: set[str], entity_ids: set[str]) -> set[str]:
    doc_id = graph.document.id
    pairs: set[tuple[str, str]] = set()
    for m in graph.mentions:
        if m.chunk_id not in chunk_ids:
            raise InputError(f"document {doc_id!r} has a mention in chunk {m.chunk_id!r}, which is not one of its chunks")
        if m.entity_id not in entity_ids:
            raise InputError(f"document {doc_id!r} mentions entity {m.entity_id!r} without listing it in its entities")
        if m.count < 1:
            raise InputError(f"mention of {m.entity_id!r} in chunk {m.chunk_id!r} has count {m.count}: counts start at 1")
        if (m.chunk_id, m.entity_id) in pairs:
            raise InputError(f"entity {m.entity_id!r} is mentioned twice in chunk {m.chunk_id!r}: sum the counts into one mention")
        pairs.add((m.chunk_id, m.entity_id))
    return {entity for _, entity in pairs}


def check_communities(communities: Sequence[Community]) -> None:
    """Raise InputError for duplicate ids, negative levels, communities without members, or a parent
    link that is not to a community one level up holding the child's members."""
    ids: set[str] = set()
    for c in communities:
        if not c.id:
            raise InputError("a community has an empty id: use the hash of its sorted member ids")
        if c.id in ids:
            raise InputError(f"community {c.id!r} appears twice: community ids must be unique")
        ids.add(c.id)
        if c.level < 0:
            raise InputError(f"community {c.id!r} has level {c.level}: levels start at 0 (finest)")
        if not c.entity_ids:
            raise InputError(f"community {c.id!r} has no member entities")
        if len(set(c.entity_ids)) != len(c.entity_ids):
            raise InputError(f"community {c.id!r} lists a member entity twice")
    by_id = {c.id: c for c in communities}
    for c in communities:
        if not c.parent:
            continue
        parent = by_id.get(c.parent)
        if parent is None or parent.level != c.level + 1:
            raise InputError(f"community {c.id!r} (level {c.level}) names parent {c.parent!r}, which is not a "
                             f"community of level {c.level + 1} in the same set")
        if not set(c.entity_ids) <= set(parent.entity_ids):
            raise InputError(f"community {c.id!r} has members its parent {c.parent!r} lacks: a parent holds "
                             "the union of its children's members")


def check_leiden_params(params: LeidenParams) -> None:
    """Raise InputError for parameters Leiden cannot use (before any projection is built)."""
    if not (math.isfinite(params.gamma) and params.gamma > 0):
        raise InputError(f"Leiden gamma must be a finite number > 0, got {params.gamma!r}")
    if params.max_levels < 1:
        raise InputError(f"Leiden max_levels must be >= 1, got {params.max_levels}")
