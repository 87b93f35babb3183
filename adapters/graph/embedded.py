"""The embedded graph store: SQLite (stdlib) + igraph/leidenalg, so a site runs with no server.

Same model as the Neo4j store: documents own chunks, chunks mention entities, and two entities are
related by the number of chunks that mention both (`DocumentGraph.co_mentions`). No table stores
those relations (schema v3): the queries that need them count the chunks two entities share in
`hansa_mentions` (its primary key and entity index serve both directions). Why: one stored row per
entity pair and document, with its indexes and foreign keys, was most of a graph write's time, and
deriving them answers retrieval's expansion faster, not slower (benchmarks/README.md, "The embedded
store derives its relations too").

Leiden: one level. leidenalg (RBConfigurationVertexPartition, resolution = gamma, seeded) runs the
full multi-level algorithm and returns only the final partition; re-running it on the aggregate
graph with the same resolution yields the same partition, so there is no meaningful coarser level to
add. Every `CommunityAssignment` therefore has `communities` of length 1 (level 0, finest and only,
comparable to the last GDS level). `tolerance` stops the iterations (as in GDS) and `max_levels` caps
their number; `theta` and `concurrency` have no leidenalg equivalent (it is single-threaded).

All values reach SQL as parameters; lists of ids are passed as one JSON parameter read with
`json_each`, so no statement is ever built from data and no variable limit applies.
"""
from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Collection, Iterator, Mapping, Sequence

import igraph
import leidenalg

from hansa.adapters.graph import quality, ranking
from hansa.adapters.graph.base import GraphStats, GraphStore, InstallReport, LeidenParams, UninstallReport
from hansa.adapters.graph.validation import check_communities, check_document_graphs, check_leiden_params
from hansa.adapters.records import (
    ChunkHit,
    Community,
    CommunityAssignment,
    CommunityContext,
    DocumentGraph,
)
from hansa.core.checks import Check, Step, run_chain
from hansa.core.errors import BackendError, InputError

# v2: chunk pages, the owning site id; v3: relations derived from the mentions, no table; v4: each
# community's parent (the hierarchy, plugin/hierarchy.py). Older stores are upgraded by install.
SCHEMA_VERSION = 4

# Every table install creates, children first (uninstall drops them in this order; indexes go along).
TABLES = (
    "hansa_community_members",
    "hansa_communities",
    "hansa_mentions",
    "hansa_entities",
    "hansa_chunks",
    "hansa_documents",
    "hansa_schema_version",
)
# Tables an older schema created and install's upgrade removes; uninstall drops them too, first
# (nothing references them), should it meet a store that was never upgraded.
RETIRED_TABLES = ("hansa_relations",)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hansa_documents (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    source TEXT NOT NULL,
    sha256 TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS hansa_chunks (
    id TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL REFERENCES hansa_documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    page INTEGER
);
CREATE INDEX IF NOT EXISTS hansa_chunks_doc ON hansa_chunks(doc_id, ordinal);
CREATE TABLE IF NOT EXISTS hansa_entities (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS hansa_mentions (
    chunk_id TEXT NOT NULL REFERENCES hansa_chunks(id) ON DELETE CASCADE,
    entity_id TEXT NOT NULL REFERENCES hansa_entities(id),
    count INTEGER NOT NULL,
    PRIMARY KEY (chunk_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS hansa_mentions_entity ON hansa_mentions(entity_id);
CREATE TABLE IF NOT EXISTS hansa_communities (
    id TEXT PRIMARY KEY,
    level INTEGER NOT NULL,
    summary TEXT NOT NULL,
    chunk_ids TEXT NOT NULL,
    doc_ids TEXT NOT NULL,
    rank REAL NOT NULL,
    parent TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS hansa_community_members (
    community_id TEXT NOT NULL REFERENCES hansa_communities(id) ON DELETE CASCADE,
    entity_id TEXT NOT NULL REFERENCES hansa_entities(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    PRIMARY KEY (community_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS hansa_community_members_entity ON hansa_community_members(entity_id);
"""

# Entities the given documents' chunks mention (JSON list ?1): the ones a delete may orphan.
_TOUCHED_ENTITIES = """
SELECT DISTINCT m.entity_id FROM hansa_mentions m JOIN hansa_chunks c ON c.id = m.chunk_id
 WHERE c.doc_id IN (SELECT value FROM json_each(?1))
"""

_DROP_ORPHANS = """
DELETE FROM hansa_entities
 WHERE id IN (SELECT value FROM json_each(?1))
   AND NOT EXISTS (SELECT 1 FROM hansa_mentions m WHERE m.entity_id = hansa_entities.id)
"""

# Every relation: entity pairs (a < b) and the number of chunks that mention both.
_RELATIONS = """
SELECT a.entity_id, b.entity_id, COUNT(*) FROM hansa_mentions a
  JOIN hansa_mentions b ON b.chunk_id = a.chunk_id AND b.entity_id > a.entity_id
 GROUP BY a.entity_id, b.entity_id ORDER BY a.entity_id, b.entity_id
"""

# The relations among a set of entities (JSON list ?1), heaviest first: the set's mentions are read
# once (entity index) and paired by chunk.
_RELATIONS_WITHIN = """
WITH m AS MATERIALIZED (
    SELECT chunk_id, entity_id FROM hansa_mentions WHERE entity_id IN (SELECT value FROM json_each(?1))
)
SELECT a.entity_id, b.entity_id, CAST(COUNT(*) AS REAL) AS w
  FROM m a JOIN m b ON b.chunk_id = a.chunk_id AND b.entity_id > a.entity_id
 GROUP BY a.entity_id, b.entity_id ORDER BY w DESC, a.entity_id, b.entity_id
"""

# Chunks sharing entities with the seeds, scored by the summed weight of the relations that tie
# each shared entity to the seeds' entities (a chunk whose shared entities are central to the
# seeds' context ranks first); ties by the number of shared entities, then chunk id.
# A seed entity's weight is the number of (chunk, other seed entity) pairs it shares a chunk with:
# over every chunk mentioning it, the seed entities that chunk mentions, less itself. The mentions
# of the seed entities (`touched`) are read once and serve both the weights and the scores;
# MATERIALIZED keeps SQLite from reading them again per chunk (a common entity is mentioned by
# thousands).
_EXPAND = """
WITH seeds(id) AS (SELECT DISTINCT value FROM json_each(?1)),
seed_entities(id) AS (
    SELECT DISTINCT entity_id FROM hansa_mentions WHERE chunk_id IN (SELECT id FROM seeds)
),
touched(chunk_id, entity_id) AS MATERIALIZED (
    SELECT chunk_id, entity_id FROM hansa_mentions WHERE entity_id IN (SELECT id FROM seed_entities)
),
chunk_seed_entities(chunk_id, k) AS MATERIALIZED (
    SELECT chunk_id, COUNT(*) FROM touched GROUP BY chunk_id
),
entity_weight(id, w) AS MATERIALIZED (
    SELECT t.entity_id, SUM(c.k - 1) FROM touched t JOIN chunk_seed_entities c ON c.chunk_id = t.chunk_id
     GROUP BY t.entity_id
)
SELECT t.chunk_id, SUM(ew.w) AS score, COUNT(*) AS shared
  FROM touched t JOIN entity_weight ew ON ew.id = t.entity_id
 WHERE t.chunk_id NOT IN (SELECT id FROM seeds)
 GROUP BY t.chunk_id
 ORDER BY score DESC, shared DESC, t.chunk_id
 LIMIT ?2
"""

_CHUNK_ROWS = """
SELECT c.id, c.doc_id, d.title, c.text, c.page, d.source
  FROM hansa_chunks c JOIN hansa_documents d ON d.id = c.doc_id
 WHERE c.id IN (SELECT value FROM json_each(?1))
"""


def _ids(values: Sequence[str]) -> str:
    """One JSON parameter for an id list (read back with json_each)."""
    return json.dumps(list(values))


def _hit(row: Sequence, score: float, via: str) -> ChunkHit:
    """A ChunkHit from a `_CHUNK_ROWS` row."""
    return ChunkHit(chunk_id=row[0], doc_id=row[1], title=row[2], text=row[3], score=score, via=via, page=row[4], source=row[5])


def _initial_membership(names: Sequence[str], seeds: Mapping[str, int] | None) -> list[int] | None:
    """leidenalg's `initial_membership` from seeds: seeded entities keep their community number
    (renumbered densely), every other entity starts in a community of its own."""
    if not seeds:
        return None
    dense: dict[int, int] = {}
    membership: list[int] = []
    for name in names:
        if name in seeds:
            membership.append(dense.setdefault(int(seeds[name]), len(dense)))
        else:
            membership.append(-1)
    fresh = len(dense)
    for i, value in enumerate(membership):
        if value < 0:
            membership[i] = fresh
            fresh += 1
    return membership


def _leiden(graph: igraph.Graph, scale: float, params: LeidenParams, initial: list[int] | None = None) -> list[int]:
    """Leiden iterations until the (generalized) modularity gain drops below `tolerance`, at most
    `max_levels` iterations. Each leidenalg iteration is a full multi-level pass; running to the
    exact fixpoint (n_iterations=-1) costs about twice as long on 100k nodes for a ~1e-6 gain."""
    optimiser = leidenalg.Optimiser()
    optimiser.set_rng_seed(params.seed)
    partition = leidenalg.RBConfigurationVertexPartition(
        graph, weights="weight", resolution_parameter=params.gamma, initial_membership=initial
    )
    for _ in range(params.max_levels):
        gain = optimiser.optimise_partition(partition, n_iterations=1)
        if gain / scale < params.tolerance:  # quality / (2 * total weight) is modularity
            break
    return list(partition.membership)


class EmbeddedGraphStore(GraphStore):
    """A site's knowledge graph in one SQLite file (tables `hansa_*`; other tables are untouched)."""

    backend = "embedded"

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._schema_checked = False
        try:
            # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE ... COMMIT) below.
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL is durable against crashes of this process; the graph is rebuildable
            # from the source documents, so we do not pay an fsync per ingest batch.
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute("PRAGMA temp_store = MEMORY")
        except sqlite3.DatabaseError as exc:
            raise BackendError(
                f"cannot open the embedded graph store at {self.path}: {exc}; "
                "point [graph] path at a writable SQLite file"
            ) from exc

    # -- plumbing ------------------------------------------------------------------------------
    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; any failure rolls everything back (nothing partial is left)."""
        with self._lock:
            self._require_schema()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except sqlite3.IntegrityError as exc:
                self._db.execute("ROLLBACK")
                raise InputError(f"the graph store refused the write ({exc}); nothing was written") from exc
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._require_schema()
            yield self._db

    def _require_schema(self) -> None:
        if self._schema_checked:
            return
        version = self._stored_version()
        if version is None:
            raise BackendError(f"the embedded graph store at {self.path} has no hansa schema: run `hansa install` first")
        if version != SCHEMA_VERSION:
            raise BackendError(
                f"the embedded graph store at {self.path} has schema version {version}, this hansa "
                f"expects {SCHEMA_VERSION}: run `hansa install` with a matching hansa version"
            )
        self._schema_checked = True

    def _stored_version(self) -> int | None:
        try:
            row = self._db.execute("SELECT version FROM hansa_schema_version WHERE id = 1").fetchone()
        except sqlite3.OperationalError:
            return None  # no such table: never installed
        except sqlite3.DatabaseError as exc:
            raise BackendError(f"{self.path} is not a usable SQLite database ({exc})") from exc
        return None if row is None else int(row[0])

    def installed_site(self) -> str | None:
        with self._lock:
            try:
                row = self._db.execute("SELECT site_id FROM hansa_schema_version WHERE id = 1").fetchone()
            except sqlite3.OperationalError:
                return None  # never installed, or a v1 store (no site column yet)
        return None if row is None else row[0]

    def _upgrade_v1(self) -> None:
        """v1 -> v2: chunk pages and the owning site; existing rows keep NULL (no page, unclaimed)."""
        self._db.execute("ALTER TABLE hansa_chunks ADD COLUMN page INTEGER")
        self._db.execute("ALTER TABLE hansa_schema_version ADD COLUMN site_id TEXT")
        self._db.execute("UPDATE hansa_schema_version SET version = 2 WHERE id = 1")

    def _upgrade_v2(self) -> None:
        """v2 -> v3: the stored relations go (their indexes with them); the mentions hold them."""
        for table in RETIRED_TABLES:  # fixed names, never data
            self._db.execute(f"DROP TABLE IF EXISTS {table}")
        self._db.execute("UPDATE hansa_schema_version SET version = 3 WHERE id = 1")

    def _upgrade_v3(self) -> None:
        """v3 -> v4: community parents; stored communities are one level, so each is a top ('')."""
        self._db.execute("ALTER TABLE hansa_communities ADD COLUMN parent TEXT NOT NULL DEFAULT ''")
        self._db.execute("UPDATE hansa_schema_version SET version = 4 WHERE id = 1")

    # -- lifecycle -----------------------------------------------------------------------------
    def install(self, site_id: str | None = None) -> InstallReport:
        with self._lock:
            version = self._stored_version()
            if version is not None and version > SCHEMA_VERSION:
                raise BackendError(
                    f"the embedded graph store at {self.path} was created by a newer hansa "
                    f"(schema {version} > {SCHEMA_VERSION}): upgrade hansa"
                )
            owner = self.installed_site()
            if site_id is not None and owner is not None and owner != site_id:
                raise BackendError(
                    f"the embedded graph store at {self.path} already holds site {owner!r}; one store holds one "
                    f"site: give site {site_id!r} its own [graph] path (or uninstall {owner!r} first)"
                )
            created = version is None or version < SCHEMA_VERSION
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if version is None:
                    self._db.execute(
                        "CREATE TABLE IF NOT EXISTS hansa_schema_version ("
                        "id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL, "
                        "applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP, site_id TEXT)"
                    )
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            self._db.execute(statement)
                    self._db.execute(
                        "INSERT INTO hansa_schema_version (id, version) VALUES (1, ?)", (SCHEMA_VERSION,)
                    )
                else:
                    if version == 1:
                        self._upgrade_v1()
                    if version <= 2:
                        self._upgrade_v2()
                    if version <= 3:
                        self._upgrade_v3()
                if site_id is not None and owner is None:
                    self._db.execute("UPDATE hansa_schema_version SET site_id = ? WHERE id = 1", (site_id,))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            self._schema_checked = False
            self._require_schema()
        return InstallReport(
            backend=self.backend,
            schema_version=SCHEMA_VERSION,
            server_version=sqlite3.sqlite_version,
            gds_version=f"leidenalg {leidenalg.version}",
            created=created,
        )

    def diagnose(self, site_id: str | None = None) -> list[Check]:
        return run_chain([
            Step("graph store reachable", self._readable,
                 "point [graph] path at a readable, writable SQLite file (default <home>/graph.sqlite)"),
            Step("leiden", lambda: f"igraph {igraph.__version__}, leidenalg {leidenalg.version}",
                 "reinstall hansa's dependencies (pip install igraph leidenalg)"),
            Step("graph schema", lambda: self._check_schema(site_id),
                 "run `hansa site install`: it creates the missing tables and keeps the data"),
        ])

    def _readable(self) -> str:
        try:
            with self._lock:
                self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            raise BackendError(f"{self.path} is not a usable SQLite database ({exc})") from exc
        return f"embedded SQLite {sqlite3.sqlite_version} at {self.path}"

    def _check_schema(self, site_id: str | None) -> str:
        with self._lock:
            version = self._stored_version()
            if version is None:
                raise BackendError(f"{self.path} has no hansa schema (never installed here)")
            if version != SCHEMA_VERSION:
                raise BackendError(f"hansa schema version {version} in {self.path}, this hansa expects {SCHEMA_VERSION}")
            owner = self.installed_site()
            present = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if site_id is not None and owner not in (None, site_id):
            raise BackendError(f"{self.path} holds site {owner!r}, not {site_id!r}: one store holds one site")
        missing = [t for t in TABLES if t not in present]
        if missing:
            raise BackendError(f"tables missing from {self.path}: {', '.join(missing)}")
        return f"schema v{version} of site {owner or '(unclaimed)'}, {len(TABLES)} tables present"

    def uninstall(self) -> UninstallReport:
        """Drop the hansa_* tables (and so their indexes); other tables in the file stay."""
        with self._lock:
            site_id = self.installed_site()
            present = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            dropped = [t for t in RETIRED_TABLES + TABLES if t in present]
            rows = 0
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for table in dropped:  # names come from the fixed table lists, never from data
                    rows += int(self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                    self._db.execute(f"DROP TABLE {table}")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            self._schema_checked = False
        return UninstallReport(backend=self.backend, site_id=site_id, nodes=rows, schema=tuple(dropped))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- documents -----------------------------------------------------------------------------
    def document_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        with self._reading() as db:
            rows = db.execute(
                "SELECT id, sha256 FROM hansa_documents WHERE id IN (SELECT value FROM json_each(?))",
                (_ids(doc_ids),),
            ).fetchall()
        return dict(rows)

    def document_chunk_ids(self, doc_ids: Sequence[str]) -> set[str]:
        with self._reading() as db:
            rows = db.execute(
                "SELECT id FROM hansa_chunks WHERE doc_id IN (SELECT value FROM json_each(?))", (_ids(doc_ids),)
            ).fetchall()
        return {row[0] for row in rows}

    def write_documents(self, graphs: Sequence[DocumentGraph]) -> None:
        check_document_graphs(graphs)
        if not graphs:
            return
        doc_ids = _ids(g.document.id for g in graphs)
        with self._transaction() as db:
            touched = [row[0] for row in db.execute(_TOUCHED_ENTITIES, (doc_ids,))]
            db.execute("DELETE FROM hansa_documents WHERE id IN (SELECT value FROM json_each(?))", (doc_ids,))
            db.executemany(
                "INSERT INTO hansa_entities (id, name, kind) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
                ((e.id, e.name, e.kind) for g in graphs for e in g.entities),
            )
            db.executemany(
                "INSERT INTO hansa_documents (id, title, source, sha256) VALUES (?, ?, ?, ?)",
                ((g.document.id, g.document.title, g.document.source, g.document.sha256) for g in graphs),
            )
            db.executemany(
                'INSERT INTO hansa_chunks (id, doc_id, ordinal, text, start, "end", page) VALUES (?, ?, ?, ?, ?, ?, ?)',
                ((c.id, c.doc_id, c.ordinal, c.text, c.start, c.end, c.page) for g in graphs for c in g.chunks),
            )
            db.executemany(
                "INSERT INTO hansa_mentions (chunk_id, entity_id, count) VALUES (?, ?, ?)",
                ((m.chunk_id, m.entity_id, m.count) for g in graphs for m in g.mentions),
            )
            if touched:
                db.execute(_DROP_ORPHANS, (_ids(touched),))

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        if not doc_ids:
            return
        ids = _ids(doc_ids)
        with self._transaction() as db:
            touched = [row[0] for row in db.execute(_TOUCHED_ENTITIES, (ids,))]
            db.execute("DELETE FROM hansa_documents WHERE id IN (SELECT value FROM json_each(?))", (ids,))
            if touched:
                db.execute(_DROP_ORPHANS, (_ids(touched),))

    def documents_by_source(self, prefix: str) -> dict[str, str]:
        with self._reading() as db:
            rows = db.execute(
                "SELECT id, source FROM hansa_documents WHERE substr(source, 1, length(?1)) = ?1", (prefix,)
            ).fetchall()
        return dict(rows)

    def chunks(self, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        with self._reading() as db:
            rows = {row[0]: row for row in db.execute(_CHUNK_ROWS, (_ids(chunk_ids),))}
        return [_hit(rows[cid], 0.0, "vector") for cid in dict.fromkeys(chunk_ids) if cid in rows]

    def chunk_texts(self, after: str | None = None, limit: int = 1000) -> list[tuple[str, str, str]]:
        """`id > ?` with "" for the first page (chunk ids are never empty) keeps it a range
        search on the primary key; `? IS NULL OR id > ?` would scan from the first id each page."""
        if limit < 1:
            return []
        with self._reading() as db:
            rows = db.execute(
                "SELECT id, doc_id, text FROM hansa_chunks WHERE id > ? ORDER BY id LIMIT ?",
                ("" if after is None else after, int(limit)),
            ).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    # -- graph ---------------------------------------------------------------------------------
    def expand(self, chunk_ids: Sequence[str], limit: int = 10) -> list[ChunkHit]:
        """See `_EXPAND`: score = summed weight of relations between each shared entity and the
        seeds' entities (summed over shared entities); ties by shared-entity count, chunk id."""
        if limit < 1 or not chunk_ids:
            return []
        with self._reading() as db:
            ranked = db.execute(_EXPAND, (_ids(chunk_ids), int(limit))).fetchall()
            rows = {row[0]: row for row in db.execute(_CHUNK_ROWS, (_ids(r[0] for r in ranked),))}
        return [_hit(rows[cid], float(score), "graph") for cid, score, _shared in ranked]

    def detect_communities(
        self, params: LeidenParams, seeds: Mapping[str, int] | None = None, within: Collection[str] | None = None
    ) -> list[CommunityAssignment]:
        check_leiden_params(params)
        if seeds and within is not None:
            raise InputError("Leiden runs either seeded or within a set of entities, not both")
        with self._reading() as db:
            edges = db.execute(_RELATIONS).fetchall()
        if within is not None:
            region = set(within)
            total = sum(float(w) for _, _, w in edges)
            degree = sum(float(w) * ((s in region) + (t in region)) for s, t, w in edges)
            edges = [(s, t, w) for s, t, w in edges if s in region and t in region]
            gamma = quality.region_resolution(params.gamma, total, degree, sum(float(w) for _, _, w in edges))
            if not edges:
                return []
            params = replace(params, gamma=gamma)
        if not edges:
            return []
        names = sorted({e for s, t, _ in edges for e in (s, t)})
        index = {name: i for i, name in enumerate(names)}
        graph = igraph.Graph(n=len(names), edges=[(index[s], index[t]) for s, t, _ in edges], directed=False)
        weights = [float(w) for _, _, w in edges]
        graph.es["weight"] = weights
        membership = _leiden(graph, 2.0 * sum(weights), params, _initial_membership(names, seeds))
        return [CommunityAssignment(entity_id=name, communities=(int(c),)) for name, c in zip(names, membership)]

    def document_entities(self, doc_ids: Sequence[str]) -> set[str]:
        with self._reading() as db:
            rows = db.execute(
                "SELECT DISTINCT m.entity_id FROM hansa_chunks c JOIN hansa_mentions m ON m.chunk_id = c.id"
                " WHERE c.doc_id IN (SELECT value FROM json_each(?))",
                (_ids(doc_ids),),
            ).fetchall()
        return {row[0] for row in rows}

    def modularity(self, partition: Mapping[str, int], gamma: float) -> float:
        return self.modularities([partition], gamma)[0]

    def related_entities(self) -> set[str]:
        with self._reading() as db:
            rows = db.execute(
                "SELECT DISTINCT a.entity_id FROM hansa_mentions a"
                " JOIN hansa_mentions b ON b.chunk_id = a.chunk_id AND b.entity_id <> a.entity_id"
            ).fetchall()
        return {row[0] for row in rows}

    def modularities(self, partitions: Sequence[Mapping[str, int]], gamma: float) -> list[float]:
        with self._reading() as db:
            edges = db.execute(_RELATIONS).fetchall()
        return [quality.modularity(edges, partition, gamma) for partition in partitions]

    def replace_communities(self, communities: Sequence[Community]) -> None:
        check_communities(communities)
        members = sorted({e for c in communities for e in c.entity_ids})
        with self._transaction() as db:
            known = {
                row[0]
                for row in db.execute(
                    "SELECT id FROM hansa_entities WHERE id IN (SELECT value FROM json_each(?))", (_ids(members),)
                )
            }
            unknown = [e for e in members if e not in known]
            if unknown:
                raise InputError(
                    f"a community names entity {unknown[0]!r}, which is not in the graph "
                    f"({len(unknown)} unknown): detect communities again after ingest"
                )
            db.execute("DELETE FROM hansa_communities")
            db.executemany(
                "INSERT INTO hansa_communities (id, level, summary, chunk_ids, doc_ids, rank, parent) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    (c.id, c.level, c.summary, json.dumps(list(c.chunk_ids)), json.dumps(list(c.doc_ids)), float(c.rank), c.parent)
                    for c in communities
                ),
            )
            db.executemany(
                "INSERT INTO hansa_community_members (community_id, entity_id, position) VALUES (?, ?, ?)",
                ((c.id, e, i) for c in communities for i, e in enumerate(c.entity_ids)),
            )

    def communities(self) -> list[Community]:
        with self._reading() as db:
            rows = db.execute(
                "SELECT id, level, summary, chunk_ids, doc_ids, rank, parent FROM hansa_communities ORDER BY level, id"
            ).fetchall()
            members: dict[str, list[str]] = {}
            for community_id, entity_id in db.execute(
                "SELECT community_id, entity_id FROM hansa_community_members ORDER BY community_id, position"
            ):
                members.setdefault(community_id, []).append(entity_id)
        return [
            Community(
                id=cid,
                level=level,
                entity_ids=tuple(members.get(cid, ())),
                summary=summary,
                chunk_ids=tuple(json.loads(chunk_ids)),
                doc_ids=tuple(json.loads(doc_ids)),
                rank=rank,
                parent=parent,
            )
            for cid, level, summary, chunk_ids, doc_ids, rank, parent in rows
        ]

    def community_context(
        self, entity_ids: Sequence[str], max_entities: int = 12, max_relations: int = 12, max_chunks: int = 8
    ) -> CommunityContext:
        """Reads the set's names, inner relations and top chunks; `ranking` orders them."""
        ids = _ids(dict.fromkeys(entity_ids))
        with self._reading() as db:
            names = dict(db.execute("SELECT id, name FROM hansa_entities WHERE id IN (SELECT value FROM json_each(?))", (ids,)))
            inside = db.execute(_RELATIONS_WITHIN, (ids,)).fetchall()
            ranked_chunks = db.execute(
                "SELECT chunk_id, COUNT(*) AS n, SUM(count) AS c FROM hansa_mentions"
                " WHERE entity_id IN (SELECT value FROM json_each(?1))"
                " GROUP BY chunk_id ORDER BY n DESC, c DESC, chunk_id LIMIT ?2",
                (ids, max(int(max_chunks), 0)),
            ).fetchall()
            rows = {row[0]: row for row in db.execute(_CHUNK_ROWS, (_ids(r[0] for r in ranked_chunks),))}
        return ranking.community_context(
            names,
            inside,
            (_hit(rows[cid], float(n), "graph") for cid, n, _count in ranked_chunks),
            max_entities,
            max_relations,
        )

    def stats(self) -> GraphStats:
        with self._reading() as db:
            counts = db.execute(
                "SELECT (SELECT COUNT(*) FROM hansa_documents), (SELECT COUNT(*) FROM hansa_chunks),"
                " (SELECT COUNT(*) FROM hansa_entities),"
                " (SELECT COALESCE(SUM(k * (k - 1) / 2), 0) FROM (SELECT COUNT(*) AS k FROM hansa_mentions GROUP BY chunk_id)),"
                " (SELECT COUNT(*) FROM hansa_communities)"
            ).fetchone()
        return GraphStats(*counts)
