"""The site-side records that cross the graph-store and vector-store ports.

Frozen dataclasses: a record is a value, built once by the ingest pipeline and then only read.
Ids are deterministic (content/name hashes) so that re-ingesting the same input is a no-op.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations


@dataclass(frozen=True)
class Document:
    id: str  # the jsonl record's `id`, or "<source>/<path inside the source>" (plugin.sources)
    title: str
    source: str  # "<source>:<path inside the source>": provenance, and what `ingest --sync` scopes by
    # The ingest fingerprint (hansa.plugin.ingest.fingerprint): SHA-256 over the extracted text, the
    # title, the chunk size and overlap, the extractor version and the embedding model id. A changed
    # hash means "replace", an equal one "skip", so a new setting re-indexes the document.
    sha256: str


@dataclass(frozen=True)
class Chunk:
    id: str  # f"{doc_id}#{ordinal}" hashed; see plugin.chunking
    doc_id: str
    ordinal: int
    text: str
    start: int  # character offsets into the document text: provenance a reviewer can check
    end: int
    page: int | None = None  # 1-based page the chunk starts on (PDFs); None for unpaged text


@dataclass(frozen=True)
class Entity:
    id: str  # normalized key (lowercased, folded whitespace), stable across documents
    name: str  # a display form as first seen
    kind: str = "concept"  # "proper", "acronym", "concept" (NLP mode) or an LLM-given type


@dataclass(frozen=True)
class Mention:
    chunk_id: str
    entity_id: str
    count: int = 1


@dataclass(frozen=True)
class DocumentGraph:
    """Everything one document contributes to the site's graph: written (or replaced) atomically."""

    document: Document
    chunks: tuple[Chunk, ...]
    entities: tuple[Entity, ...]
    mentions: tuple[Mention, ...]

    def co_mentions(self) -> dict[tuple[str, str], int]:
        """The document's entity relations: each pair of entities (ordered ids, a < b) mentioned in
        one chunk, with the number of its chunks that mention both (GraphRAG's co-occurrence).

        Why derived, not stored with the graph: every pair of a chunk's ~15 entities is ~95
        relations per chunk, which made them most of what a site wrote at ingest. Both stores
        derive them from the stored mentions where they read or project them, so they always agree
        with what the chunks mention; this is the reference their tests and benchmarks hold them to."""
        by_chunk: dict[str, list[str]] = {}
        for m in self.mentions:
            by_chunk.setdefault(m.chunk_id, []).append(m.entity_id)
        pairs: Counter[tuple[str, str]] = Counter()
        for ids in by_chunk.values():
            pairs.update(combinations(sorted(set(ids)), 2))
        return dict(pairs)

    def co_mention_count(self) -> int:
        """The summed weight of `co_mentions` (pairs counted once per chunk that mentions both),
        without building the pairs: what ingest reports and GraphStore.stats counts as relations."""
        per_chunk = Counter(m.chunk_id for m in self.mentions)
        return sum(k * (k - 1) // 2 for k in per_chunk.values())


@dataclass(frozen=True)
class CommunityAssignment:
    """One entity's community per Leiden level; index 0 is the finest level (GDS's order)."""

    entity_id: str
    communities: tuple[int, ...]


@dataclass(frozen=True)
class Community:
    id: str  # stable across runs when membership is unchanged: hash of sorted member ids
    level: int
    entity_ids: tuple[str, ...]
    summary: str = ""
    chunk_ids: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    rank: float = 0.0  # richness: how much knowledge the community holds (used by routing)
    # The community one level coarser that holds this one (plugin/hierarchy.py); "": the top level.
    parent: str = ""


@dataclass(frozen=True)
class ChunkHit:
    """A chunk found by retrieval, with the document it cites."""

    chunk_id: str
    doc_id: str
    title: str
    text: str
    score: float
    via: str = "vector"  # "vector" or "graph" (reached by expansion)
    page: int | None = None  # the chunk's first page (PDFs), cited with the document
    source: str = ""  # the document's "<source>:<path>", cited with it


@dataclass(frozen=True)
class CommunityContext:
    """What an extractive summarizer needs to describe a community, read from the graph store."""

    community_id: str
    entities: tuple[tuple[str, str, float], ...]  # (entity id, name, degree within community)
    relations: tuple[tuple[str, str, float], ...]  # (name a, name b, summed weight)
    chunks: tuple[ChunkHit, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class VectorHit:
    id: str
    score: float  # similarity, higher is closer (cosine / inner product on unit vectors)
    fields: dict = field(default_factory=dict)
