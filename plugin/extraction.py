"""A document's slice of the knowledge graph: its chunks, the entities they name, their mentions.

Entities are spotted by hansa.core.entities (no language model). Relations are co-occurrence within a
chunk; their weight is the number of chunks in which both entities appear. They follow from the
mentions, so the graph stores derive them (`DocumentGraph.co_mentions`). Capping each chunk to its
most salient entities keeps the number of pairs bounded per chunk, so relations grow linearly with
the text.
"""
from __future__ import annotations

from typing import Sequence

from hansa.adapters.records import Chunk, Document, DocumentGraph, Entity, Mention
from hansa.core.entities import (  # noqa: F401  (EXTRACTOR_VERSION, normalize: what a site's graph is keyed by)
    EXTRACTOR_VERSION,
    KIND_RANK,
    MAX_ENTITIES_PER_CHUNK,
    chunk_entities,
    normalize,
)


def document_graph(document: Document, chunks: Sequence[Chunk], limit: int = MAX_ENTITIES_PER_CHUNK) -> DocumentGraph:
    """Everything one document contributes: its chunks, entities and mentions (its relations are
    the mentions' co-occurrences)."""
    entities: dict[str, Entity] = {}
    mentions: list[Mention] = []
    for chunk in chunks:
        found = chunk_entities(chunk.text, limit)
        for key, name, kind, count in found:
            known = entities.get(key)
            if known is None or KIND_RANK[kind] > KIND_RANK[known.kind]:
                entities[key] = Entity(id=key, name=name, kind=kind)
            mentions.append(Mention(chunk_id=chunk.id, entity_id=key, count=count))
    return DocumentGraph(
        document=document,
        chunks=tuple(chunks),
        entities=tuple(entities[k] for k in sorted(entities)),
        mentions=tuple(mentions),
    )
