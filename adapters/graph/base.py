"""The graph-store port: what a site needs from a property graph with community detection.

Two implementations pass one contract test suite (tests/adapters/graph/test_contract.py):
Neo4j 5.x + GDS (production; Cypher lives in hansa.cypher) and an embedded store (SQLite +
igraph/leidenalg) so that `hansa demo` needs no server.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Collection, Mapping, Sequence

from hansa.core.checks import Check
from hansa.core.errors import BackendError
from hansa.adapters.records import (
    ChunkHit,
    Community,
    CommunityAssignment,
    CommunityContext,
    DocumentGraph,
)


@dataclass(frozen=True)
class LeidenParams:
    gamma: float = 1.0  # resolution: higher gives more, smaller communities
    max_levels: int = 10
    theta: float = 0.01
    tolerance: float = 1e-4
    seed: int = 42  # with concurrency 1, runs are reproducible
    concurrency: int = 1


@dataclass(frozen=True)
class InstallReport:
    backend: str  # "neo4j" or "embedded"
    schema_version: int
    server_version: str  # Neo4j version, or the SQLite library version
    gds_version: str  # GDS version, or "leidenalg <version>" for the embedded store
    created: bool  # False when the schema was already at this version (idempotent re-run)


@dataclass(frozen=True)
class GraphStats:
    documents: int
    chunks: int
    entities: int
    # Entity pairs mentioned together, counted once per chunk that mentions both (the summed
    # weight of the co-occurrence relations): both stores count it without enumerating pairs.
    # On Neo4j, plus the summed weight of mapped relations (`replace_links`, `hansa site map`).
    relations: int
    communities: int


@dataclass(frozen=True)
class UninstallReport:
    backend: str
    site_id: str | None  # the site the store was installed for (None: never installed, or before v2)
    nodes: int  # Hansa* nodes (Neo4j) or hansa_* rows (embedded) removed
    schema: tuple[str, ...]  # constraints/indexes (Neo4j) or tables (embedded) dropped
    projections: tuple[str, ...] = ()  # GDS in-memory graphs dropped (Neo4j)


class GraphStore(ABC):
    """A site's knowledge graph. Namespaced (labels `Hansa*` / tables `hansa_*`): the
    organization's own data in the same database is never read or written by a store (`hansa
    site map` reads it through adapters/graph/neo4j_source.py, which cannot write)."""

    backend: str

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    def install(self, site_id: str | None = None) -> InstallReport:
        """Check the server (and GDS), apply the schema (constraints, schema version). Idempotent.

        `site_id` claims the store for one site: a store already claimed by another site is
        refused (BackendError naming it) before anything is changed, because every node in it
        would otherwise be published under the wrong identity. Raises BackendError with a clear
        message when the server or GDS is missing/too old."""

    @abstractmethod
    def installed_site(self) -> str | None:
        """The site id the store was installed for (None when not installed or not claimed)."""

    @abstractmethod
    def uninstall(self) -> UninstallReport:
        """Remove exactly what `install` and the site's jobs created (hansa nodes/rows, schema,
        projections) and nothing else; safe on a store that was never installed."""

    @abstractmethod
    def diagnose(self, site_id: str | None = None) -> list[Check]:
        """`hansa site doctor`'s checks of this store, in order (reachable, server and Leiden
        versions, schema and its constraints/indexes, claimed by `site_id`); never raises for a
        problem of the store: a problem is a failed check with its fix."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "GraphStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents -------------------------------------------------------------------------
    @abstractmethod
    def document_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """sha256 stored for each known document id (unknown ids are absent): skip unchanged input."""

    @abstractmethod
    def document_chunk_ids(self, doc_ids: Sequence[str]) -> set[str]:
        """Ids of the chunks stored for these documents: the vectors a re-ingest replaces."""

    @abstractmethod
    def write_documents(self, graphs: Sequence[DocumentGraph]) -> None:
        """Write a batch of documents atomically (one transaction): each replaces any earlier
        version of the same document id (its chunks and mentions, so its relations), entities are
        merged by id. Values only ever reach queries as parameters."""

    @abstractmethod
    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        """Remove documents with their chunks, mentions and relations; drop orphaned entities."""

    @abstractmethod
    def documents_by_source(self, prefix: str) -> dict[str, str]:
        """{document id: source} of every document whose `source` starts with `prefix` (all
        documents for ""): what `ingest --sync` compares the files against."""

    @abstractmethod
    def chunks(self, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        """Chunks by id with their document title (score 0), in the order given; unknown ids skipped."""

    @abstractmethod
    def chunk_texts(self, after: str | None = None, limit: int = 1000) -> list[tuple[str, str, str]]:
        """Up to `limit` stored chunks as (chunk id, document id, text), by chunk id ascending,
        only ids strictly after `after` (None: from the start); [] when `limit` < 1. Keyset pages:
        the site reads its whole corpus (term statistics for routing) without holding it at once."""

    # -- graph -----------------------------------------------------------------------------
    @abstractmethod
    def expand(self, chunk_ids: Sequence[str], limit: int = 10) -> list[ChunkHit]:
        """Chunks that share entities with the seed chunks (not the seeds themselves), ranked by
        the summed relation weight of shared entities; `via="graph"`. A relation's weight is the
        number of chunks that mention both entities (`DocumentGraph.co_mentions`)."""

    @abstractmethod
    def detect_communities(
        self, params: LeidenParams, seeds: Mapping[str, int] | None = None, within: Collection[str] | None = None
    ) -> list[CommunityAssignment]:
        """Run Leiden on the undirected entity graph weighted by summed co-occurrence; every
        entity that has at least one relation gets an assignment. Isolated entities are left out.

        `seeds` (entity id -> community number) starts Leiden from an earlier partition (GDS
        `seedProperty`, leidenalg `initial_membership`): after a small change most entities keep
        their community, so most summaries keep their ids and are not re-published. Entities
        without a seed start alone.

        `within` (entity ids; not with `seeds`) runs Leiden on the subgraph those entities induce,
        at the resolution that weighs it as the whole graph's modularity at `params.gamma` does
        (`quality.region_resolution`): a local refresh re-clusters only what an edit touched. Only
        entities related to another one inside the set get an assignment."""

    @abstractmethod
    def document_entities(self, doc_ids: Sequence[str]) -> set[str]:
        """Ids of the entities the given documents mention (unknown documents add none): where an
        edit touched the entity graph, so what a local community refresh re-clusters."""

    @abstractmethod
    def related_entities(self) -> set[str]:
        """Ids of the entities related to another one: those an unseeded `detect_communities` run
        assigns. What a local community refresh needs of the whole graph (an entity that lost its
        last relation leaves its community), without running Leiden over it."""

    @abstractmethod
    def modularity(self, partition: Mapping[str, int], gamma: float) -> float:
        """Generalized modularity (resolution `gamma`) of `partition` (entity id -> community number)
        on the entity graph `detect_communities` runs on (adapters/graph/quality.py); related entities
        the partition leaves out count as communities of their own. What lets an incremental run be
        checked against a full one on either backend."""

    def modularities(self, partitions: Sequence[Mapping[str, int]], gamma: float) -> list[float]:
        """`modularity` of each partition. The embedded store reads the entity graph once for all of
        them (every read is a scan of all relations); Neo4j sums each one in the database."""
        return [self.modularity(partition, gamma) for partition in partitions]

    @abstractmethod
    def replace_communities(self, communities: Sequence[Community]) -> None:
        """Replace all stored communities (and their membership links) in one transaction."""

    @abstractmethod
    def communities(self) -> list[Community]:
        """Stored communities, ordered by (level, id)."""

    @abstractmethod
    def community_context(
        self, entity_ids: Sequence[str], max_entities: int = 12, max_relations: int = 12, max_chunks: int = 8
    ) -> CommunityContext:
        """Top entities (by weighted degree inside the set), top relations and the chunks that
        mention most of the set: the raw material of an extractive summary."""

    @abstractmethod
    def stats(self) -> GraphStats: ...

    # -- mapped relations (plugin/graph_map.py) ----------------------------------------------
    def replace_links(self, links: Sequence[tuple[str, str, int]]) -> int:
        """Replace every mapped relation (entity id, entity id, weight > 0) in one transaction:
        relations an organization's own graph states, taken into Leiden, summaries and stats beside
        the co-mentions. Pairs naming an entity not in the store are left out; returns how many
        were written. Only the Neo4j store maps an organization's graph, so this default refuses."""
        raise BackendError(
            f"the {self.backend} graph store cannot hold mapped relations: mapping an organization's graph "
            "([site.graph_map]) needs [graph] backend = 'neo4j'"
        )
