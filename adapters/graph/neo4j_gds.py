"""The production graph store: Neo4j 5.x with the Graph Data Science plugin (2.13+).

Data model (labels and types are namespaced so an organization's own graph in the same database
is never read or written):

    (:HansaDocument {id, title, source, sha256})-[:HANSA_HAS_CHUNK]->(:HansaChunk {id, ordinal, text, start, end})
    (:HansaChunk)-[:HANSA_MENTIONS {count}]->(:HansaEntity {id, name, kind})
    (:HansaEntity)-[:HANSA_IN_COMMUNITY {position}]->(:HansaCommunity {id, level, summary, chunk_ids, doc_ids, rank})
    (:HansaChunk {..., page})                                   page: the 1-based PDF page the chunk starts on (schema v2)
    (:HansaSchema {id: "hansa", version, applied_at, site_id})  one site per database (schema v2)
    (:HansaEntity)-[:HANSA_LINKED {weight}]->(:HansaEntity)     source id < target id: a relation mapped
                                                                from the organization's own graph (`hansa site map`)

Two entities are related by the number of chunks that mention both (`DocumentGraph.co_mentions`).
No relationship stores that (schema v3): the queries that need relations derive them from
HANSA_MENTIONS, and Leiden's projection aggregates them (`gds/project`, a GDS Cypher aggregation).
Why: every pair of a chunk's ~15 entities was ~95 stored relationships per chunk, most of a site's
ingest writes (benchmarks/README.md, "Site ingest and graph writes"); the mentions already hold them.

Every statement is a file in `hansa.cypher`; values reach Neo4j only as parameters. Leiden runs
through the `graphdatascience` client over Bolt (OpenGDS has no Arrow server) on that undirected
projection, dropped again in `finally`.

A seeded run (incremental communities) keeps only Leiden's first level: GDS 2.13 writes every level
of a seeded run through the seed map it built for the starting partition
(`LeidenDendrogramManager.updateOutputDendrogram` -> `SeedCommunityManager.mapToSeed`), but from the
second level on the community ids are those of the aggregated graph, which that map does not hold:
unrelated communities come out under one seed value. On 300 SQuAD paragraphs, seeded from an
unseeded run's own partition, level 0 held that partition (136 communities) while a later level put
2,359 of 4,068 entities into one disconnected community; republished round after round, a site fell
from 136 communities to 2 (issue 34). The first level, local moves from the seeds, is mapped right:
after a small change the seeds are already near a local optimum, and plugin/communities.py checks
the result against an unseeded run anyway.
"""
from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping, Sequence, TypeVar

import neo4j
from neo4j import GraphDatabase, ManagedTransaction, NotificationDisabledClassification
from neo4j.exceptions import AuthError, ConstraintError, DriverError, Neo4jError, ServiceUnavailable, SessionExpired

from hansa.adapters.graph import quality, ranking
from hansa.adapters.graph.base import GraphStats, GraphStore, InstallReport, LeidenParams, UninstallReport
from hansa.adapters.graph.validation import check_communities, check_document_graphs, check_leiden_params
from hansa.adapters.records import ChunkHit, Community, CommunityAssignment, CommunityContext, DocumentGraph, Entity
from hansa.core.checks import Check, Step, run_chain
from hansa.core.errors import BackendError, InputError
from hansa.cypher import load, statements

# v2: chunk pages, the owning site id (v1 databases are upgraded by install: data unchanged).
# v3: relations derived from the mentions; install removes a v2 database's stored HANSA_RELATED.
SCHEMA_VERSION = 3
SCHEMA_ID = "hansa"
PROJECTION_PREFIX = "hansa-"  # every GDS graph hansa projects is named so (uninstall drops leftovers)
SEED_PROPERTY = "hansa_seed"  # set only for the length of a seeded Leiden run
BATCH_ROWS = 5000  # rows per UNWIND: large enough to amortize round trips, small enough for the heap
MIN_GDS = (2, 13)  # what graphdatascience>=2.2 requires
GDS_MAX_CONCURRENCY = 4  # OpenGDS refuses more
# A refused or unroutable server must fail in seconds, not after the driver's 30 s of retried
# transactions (`max_transaction_retry_time`) on top of its 30 s connection timeout (issue 34: 71 s).
CONNECT_TIMEOUT_S = 5.0

_BOLT_SCHEMES = frozenset({"bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc"})
_DROPPED = re.compile(r"^DROP (?:CONSTRAINT|INDEX) (\w+)", re.MULTILINE)  # the name a drop statement names

T = TypeVar("T")


def _batches(rows: Sequence[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), BATCH_ROWS):
        yield list(rows[start : start + BATCH_ROWS])


def _run_batched(tx: ManagedTransaction, name: str, rows: Sequence[dict[str, Any]]) -> None:
    query = load(name)
    for batch in _batches(rows):
        tx.run(query, rows=batch).consume()


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def expected_schema() -> list[tuple[str, str]]:
    """(CONSTRAINT | INDEX, name) of everything `schema/constraints` creates, read from the file."""
    found = [re.search(r"^CREATE (CONSTRAINT|INDEX) (\w+) IF NOT EXISTS", s, re.M) for s in statements("schema/constraints")]
    return [(m.group(1), m.group(2)) for m in found if m]


class Neo4jGraphStore(GraphStore):
    """A site's knowledge graph in a Neo4j database (labels `Hansa*`, types `HANSA_*`)."""

    backend = "neo4j"

    def __init__(self, uri: str, user: str, password: str, database: str = "neo4j") -> None:
        self.uri = uri
        self.database = database
        scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
        if scheme not in _BOLT_SCHEMES:
            raise BackendError(
                f"Neo4j URI {uri!r} is not a Bolt URI: use bolt://host:7687 or neo4j://host:7687 "
                "(+s / +ssc for TLS); the GDS client needs Bolt"
            )
        try:
            self._driver = GraphDatabase.driver(
                uri,
                auth=(user, password),
                # "label does not exist" warnings are expected on an empty database: not news.
                notifications_disabled_classifications=[NotificationDisabledClassification.UNRECOGNIZED],
                user_agent="hansa",
                connection_timeout=CONNECT_TIMEOUT_S,
                connection_acquisition_timeout=2 * CONNECT_TIMEOUT_S,
            )
        except (ValueError, DriverError) as exc:
            raise BackendError(f"invalid Neo4j URI {uri!r} ({exc}): use bolt://host:7687 or neo4j://host:7687") from exc
        self._gds: Any = None
        self._schema_checked = False
        self._reachable = False

    # -- plumbing ------------------------------------------------------------------------------
    @contextmanager
    def _backend(self, action: str) -> Iterator[None]:
        """Turn "Neo4j is unreachable / refused us" into a BackendError a person can act on."""
        try:
            yield
        except AuthError as exc:
            raise BackendError(
                f"Neo4j at {self.uri} refused the credentials while {action}: check [neo4j] user and password"
            ) from exc
        except (ServiceUnavailable, SessionExpired) as exc:
            reason = " ".join(str(exc).split())  # the driver's message spans lines: keep the error on one
            raise BackendError(
                f"cannot reach Neo4j at {self.uri} while {action} ({reason}): start Neo4j "
                "(for development: scripts/neo4j-dev) or fix [neo4j] uri (HANSA_NEO4J_URI)"
            ) from exc

    def _session(self) -> neo4j.Session:
        """A session on the site's database, after one unretried check that the server and the
        database answer. Why: the driver retries a transaction that cannot connect for 30 s,
        logging each try; an admin with a wrong URI or database should get one clear line at once."""
        if not self._reachable:
            self._verify()
        return self._driver.session(database=self.database)

    def _verify(self) -> None:
        """An auto-commit statement (never retried) on the site's database, inside `_backend`'s errors."""
        with self._backend("connecting"), self._driver.session(database=self.database) as session:
            try:
                session.run(load("server/ping")).consume()
            except Neo4jError as exc:
                if "database" not in (exc.code or "").lower():
                    raise
                raise BackendError(
                    f"Neo4j at {self.uri} has no usable database {self.database!r} ({exc.message}): fix [neo4j] "
                    "database (HANSA_NEO4J_DATABASE), or create it (CREATE DATABASE needs Neo4j Enterprise; on "
                    "Community the one database is 'neo4j', so each site needs its own Neo4j server)"
                ) from exc
        self._reachable = True

    def _read(self, work: Callable[[ManagedTransaction], T], action: str) -> T:
        self._require_schema()
        with self._backend(action), self._session() as session:
            return session.execute_read(work)

    def _write(self, work: Callable[[ManagedTransaction], T], action: str) -> T:
        """One managed write transaction: all or nothing (retried as a whole on transient errors)."""
        self._require_schema()
        with self._backend(action), self._session() as session:
            return session.execute_write(work)

    def _query(self, name: str, action: str, **params: Any) -> list[neo4j.Record]:
        """One read statement in its own transaction."""
        return self._read(lambda tx: list(tx.run(load(name), **params)), action)

    def _stored_schema(self) -> tuple[int | None, str | None]:
        """(schema version, owning site id) as recorded by install; (None, None) before it."""
        with self._backend("reading the schema version"), self._session() as session:
            record = session.execute_read(lambda tx: tx.run(load("schema/version_read"), schema_id=SCHEMA_ID).single())
        if record is None or record["version"] is None:
            return None, None
        return int(record["version"]), record["site_id"]

    def _stored_version(self) -> int | None:
        return self._stored_schema()[0]

    def installed_site(self) -> str | None:
        return self._stored_schema()[1]

    def _require_schema(self) -> None:
        if self._schema_checked:
            return
        version = self._stored_version()
        if version is None:
            raise BackendError(
                f"Neo4j database {self.database!r} at {self.uri} has no hansa schema: run `hansa install` first"
            )
        if version != SCHEMA_VERSION:
            raise BackendError(
                f"Neo4j database {self.database!r} has hansa schema version {version}, this hansa expects "
                f"{SCHEMA_VERSION}: run `hansa install` with a matching hansa version"
            )
        self._schema_checked = True

    # -- lifecycle -----------------------------------------------------------------------------
    def install(self, site_id: str | None = None) -> InstallReport:
        self._verify()
        server_version = self._check_server()
        gds_version = self._check_gds()
        stored, owner = self._stored_schema()
        if stored is not None and stored > SCHEMA_VERSION:
            raise BackendError(
                f"Neo4j database {self.database!r} holds hansa schema version {stored}, newer than this "
                f"hansa's {SCHEMA_VERSION}: upgrade hansa"
            )
        if site_id is not None and owner is not None and owner != site_id:
            raise BackendError(
                f"Neo4j database {self.database!r} at {self.uri} already holds hansa site {owner!r}; one database "
                f"holds one site: give site {site_id!r} its own database ([neo4j] database), or uninstall "
                f"{owner!r} first (`hansa site uninstall` with its configuration)"
            )
        with self._backend("applying the schema"), self._session() as session:
            if stored is not None and stored < 3:
                for statement in statements("schema/upgrade_v3"):
                    session.run(statement).consume()  # auto-commit: batched deletes, then a schema command
            for statement in statements("schema/constraints"):
                session.run(statement).consume()  # schema commands: one auto-commit transaction each
            session.execute_write(
                lambda tx: tx.run(
                    load("schema/version_write"), schema_id=SCHEMA_ID, version=SCHEMA_VERSION, site_id=site_id
                ).consume()
            )
        self._schema_checked = False
        self._require_schema()
        return InstallReport(
            backend=self.backend,
            schema_version=SCHEMA_VERSION,
            server_version=server_version,
            gds_version=gds_version,
            created=stored is None or stored < SCHEMA_VERSION,
        )

    def _check_server(self) -> str:
        with self._backend("checking the server"), self._session() as session:
            record = session.run(load("server/components")).single()
        version = "" if record is None else str(record["version"])
        if _version_tuple(version)[:1] != (5,):
            raise BackendError(
                f"Neo4j {version or '(unknown version)'} at {self.uri} is not supported: hansa needs Neo4j 5.x "
                "(5.26 LTS) with the Graph Data Science plugin 2.13"
            )
        return version

    def _check_gds(self) -> str:
        with self._backend("checking GDS"), self._session() as session:
            try:
                version = str(session.run(load("server/gds_version")).single()["version"])
                leiden = int(session.run(load("server/gds_leiden")).single()["procedures"])
            except Neo4jError as exc:
                if "gds." not in (exc.message or ""):
                    raise
                raise BackendError(
                    f"the Graph Data Science (GDS) plugin is not installed in Neo4j at {self.uri} ({exc.message}): "
                    "install the GDS plugin 2.13.x (it matches Neo4j 5.26) into the plugins directory and set "
                    "dbms.security.procedures.unrestricted=gds.*"
                ) from exc
        if _version_tuple(version)[:2] < MIN_GDS:
            raise BackendError(
                f"GDS {version} in Neo4j at {self.uri} is too old or unidentified: install GDS 2.13.x "
                "(a version of 'unknown' means GDS's proc-sysinfo jar is not first on the classpath)"
            )
        if leiden == 0:
            raise BackendError(
                f"GDS {version} is installed but its Leiden procedures are not available: allow them with "
                "dbms.security.procedures.unrestricted=gds.*"
            )
        return version

    def diagnose(self, site_id: str | None = None) -> list[Check]:
        return run_chain([
            Step("neo4j reachable", self._connectivity,
                 "start Neo4j (development: scripts/neo4j-dev), or fix [neo4j] uri, user and password (HANSA_NEO4J_PASSWORD)"),
            Step("neo4j version", lambda: f"Neo4j {self._check_server()}",
                 "hansa needs Neo4j 5.x (5.26 LTS); point [neo4j] uri at one"),
            Step("gds plugin", lambda: f"GDS {self._check_gds()} with Leiden",
                 "install GDS 2.13.x in Neo4j's plugins directory and set dbms.security.procedures.unrestricted=gds.*"),
            Step("graph schema", lambda: self._check_schema(site_id),
                 "run `hansa site install`: it re-creates missing constraints and indexes and keeps the data"),
        ])

    def _connectivity(self) -> str:
        self._verify()
        return f"{self.uri}, database {self.database!r}"

    def _check_schema(self, site_id: str | None) -> str:
        """The stored schema version, its owner and every constraint/index `schema/constraints` creates."""
        version, owner = self._stored_schema()
        if version is None:
            raise BackendError(f"database {self.database!r} has no hansa schema (never installed here)")
        if version != SCHEMA_VERSION:
            raise BackendError(f"hansa schema version {version} in database {self.database!r}, this hansa expects {SCHEMA_VERSION}")
        if site_id is not None and owner not in (None, site_id):
            raise BackendError(f"database {self.database!r} holds site {owner!r}, not {site_id!r}: one database holds one site")
        with self._backend("listing constraints and indexes"), self._session() as session:
            present = {"CONSTRAINT": {r["name"] for r in session.run(load("server/constraint_names"))},
                       "INDEX": {r["name"] for r in session.run(load("server/index_names"))}}
        missing = [f"{kind.lower()} {name}" for kind, name in expected_schema() if name not in present[kind]]
        if missing:
            raise BackendError(f"missing from database {self.database!r}: {', '.join(missing)}")
        return f"schema v{version} of site {owner or '(unclaimed)'}, {len(expected_schema())} constraints/indexes present"

    def uninstall(self) -> UninstallReport:
        """Drop hansa's GDS projections, delete Hansa* nodes (in batches), then hansa's own
        constraints and indexes, named one by one in `uninstall/drop_schema`."""
        site_id = self.installed_site()
        projections: list[str] = []
        with self._backend("uninstalling"), self._session() as session:
            try:
                names = [r["name"] for r in session.run(load("gds/projections"), prefix=PROJECTION_PREFIX, database=self.database)]
            except Neo4jError:
                names = []  # no GDS: nothing can have been projected
            for name in names:
                projections.extend(r["name"] for r in session.run(load("gds/drop_projection"), graph=name))
            nodes = int(session.run(load("uninstall/count_nodes")).single()["nodes"])
            session.run(load("uninstall/delete_nodes")).consume()
            dropped: list[str] = []
            for statement in statements("uninstall/drop_schema"):
                summary = session.run(statement).consume()
                if summary.counters.constraints_removed or summary.counters.indexes_removed:
                    dropped.append(_DROPPED.search(statement).group(1))  # type: ignore[union-attr]
        self._schema_checked = False
        return UninstallReport(
            backend=self.backend, site_id=site_id, nodes=nodes, schema=tuple(dropped), projections=tuple(projections)
        )

    def close(self) -> None:
        self._gds = None  # the client borrows our driver and never closes it
        self._driver.close()

    # -- documents -----------------------------------------------------------------------------
    def document_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        if not doc_ids:
            return {}
        records = self._query("documents/hashes", "reading document hashes", doc_ids=list(dict.fromkeys(doc_ids)))
        return {r["id"]: r["sha256"] for r in records}

    def document_chunk_ids(self, doc_ids: Sequence[str]) -> set[str]:
        if not doc_ids:
            return set()
        records = self._query("documents/chunk_ids", "reading chunk ids", doc_ids=list(dict.fromkeys(doc_ids)))
        return {r["id"] for r in records}

    def write_documents(self, graphs: Sequence[DocumentGraph]) -> None:
        check_document_graphs(graphs)
        if not graphs:
            return
        doc_ids = [g.document.id for g in graphs]
        entities: dict[str, Entity] = {}
        for e in (e for g in graphs for e in g.entities):
            entities.setdefault(e.id, e)  # first seen wins, in the batch as in the store (MERGE ... ON CREATE)

        def work(tx: ManagedTransaction) -> None:
            # Only stored documents have anything to remove: a batch of new ones skips the three
            # removal statements (one cheap index read instead).
            stored = [r["id"] for r in tx.run(load("documents/hashes"), doc_ids=doc_ids)]
            touched = _remove_documents(tx, stored) if stored else []
            _run_batched(tx, "documents/write_entities", [{"id": e.id, "name": e.name, "kind": e.kind} for e in entities.values()])
            _run_batched(tx, "documents/write", _document_rows(graphs))
            _drop_orphans(tx, touched)

        try:
            self._write(work, "writing documents")
        except ConstraintError as exc:
            raise InputError(
                f"Neo4j refused the batch ({exc.message}): a chunk id is already used by another document; "
                "chunk ids must be unique across documents. Nothing was written"
            ) from exc

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        if not doc_ids:
            return
        ids = list(dict.fromkeys(doc_ids))

        def work(tx: ManagedTransaction) -> None:
            _drop_orphans(tx, _remove_documents(tx, ids))

        self._write(work, "deleting documents")

    def documents_by_source(self, prefix: str) -> dict[str, str]:
        return {r["id"]: r["source"] for r in self._query("documents/by_source", "listing documents", prefix=prefix)}

    def chunks(self, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        if not chunk_ids:
            return []
        wanted = list(dict.fromkeys(chunk_ids))
        found = {r["chunk_id"]: r for r in self._query("graph/chunks", "reading chunks", chunk_ids=wanted)}
        return [_hit(found[cid], 0.0, "vector") for cid in wanted if cid in found]

    def chunk_texts(self, after: str | None = None, limit: int = 1000) -> list[tuple[str, str, str]]:
        if limit < 1:
            return []
        records = self._query(
            "graph/chunk_texts", "reading chunk texts", after="" if after is None else after, limit=int(limit)
        )
        return [(r["chunk_id"], r["doc_id"], r["text"]) for r in records]

    # -- graph ---------------------------------------------------------------------------------
    def expand(self, chunk_ids: Sequence[str], limit: int = 10) -> list[ChunkHit]:
        if limit < 1 or not chunk_ids:
            return []
        records = self._query(
            "graph/expand", "expanding chunks", chunk_ids=list(dict.fromkeys(chunk_ids)), limit=int(limit)
        )
        return [_hit(r, float(r["score"]), "graph") for r in records]

    def detect_communities(
        self, params: LeidenParams, seeds: Mapping[str, int] | None = None, within: Collection[str] | None = None
    ) -> list[CommunityAssignment]:
        check_leiden_params(params)
        if seeds and within is not None:
            raise InputError("Leiden runs either seeded or within a set of entities, not both")
        region = sorted(set(within)) if within is not None else None
        projection: dict[str, Any] = {}
        if region is not None:
            weights = self._query("gds/region_weights", "weighing the entities to re-cluster", entity_ids=region)[0]
            gamma = quality.region_resolution(params.gamma, weights["total"], weights["degree"], weights["inside"])
            if gamma <= 0:
                return []  # no relation inside the set
            params = replace(params, gamma=gamma)
            projection = {"name": "gds/project_within", "entity_ids": region}
        elif not self._query("gds/related_exists", "looking for related entities")[0]["related"]:
            return []
        gds = self._gds_client()
        name = f"{PROJECTION_PREFIX}leiden-{uuid.uuid4().hex}"
        seeded: dict[str, Any] = {}
        if seeds:
            self._write_seeds(seeds)
            seeded = {"seed_property": SEED_PROPERTY}
        try:
            with self._backend("running Leiden"), self._gds_refusal("Leiden"), self._no_move(seeds, region) as unchanged:
                self._query(projection.pop("name", "gds/project"), "projecting the entity graph", graph=name, **projection)
                try:
                    frame = gds.leiden.stream(
                        gds.graph.get(name),
                        relationship_weight_property="weight",
                        include_intermediate_communities=True,
                        gamma=float(params.gamma),
                        max_levels=1 if seeds else int(params.max_levels),  # see the module doc
                        theta=float(params.theta),
                        tolerance=float(params.tolerance),
                        random_seed=int(params.seed),
                        concurrency=max(1, min(int(params.concurrency), GDS_MAX_CONCURRENCY)),
                        **seeded,
                    )
                finally:
                    self._query("gds/drop_projection", "dropping the projection", graph=name)
            if unchanged:
                return unchanged
        finally:
            if seeds:
                self._write(lambda tx: tx.run(load("gds/seed_clear")).consume(), "clearing Leiden seeds")
        levels = {int(row.nodeId): tuple(int(c) for c in row.intermediateCommunityIds) for row in frame.itertuples()}
        if seeds:  # one level asked for; never a mislabelled later one (module doc)
            levels = {node: ids[:1] for node, ids in levels.items()}
        linked = self._query("gds/linked_entities", "mapping Leiden results", node_ids=list(levels))
        # Index 0 is the finest level (GDS's order), as CommunityAssignment documents.
        return [CommunityAssignment(entity_id=r["entity_id"], communities=levels[r["node_id"]]) for r in linked]

    def document_entities(self, doc_ids: Sequence[str]) -> set[str]:
        if not doc_ids:
            return set()
        records = self._query("documents/entities", "reading the documents' entities", doc_ids=list(dict.fromkeys(doc_ids)))
        return {r["entity_id"] for r in records}

    @contextmanager
    def _no_move(self, seeds: Mapping[str, int] | None, region: list[str] | None = None) -> Iterator[list[CommunityAssignment]]:
        """GDS 2.13 fails with a NullPointerException (no dendrogram) when Leiden finds no move to
        make in its first iteration (e.g. a high gamma on a small graph, or seeds that are already
        a local optimum): its start partition is then the result. Yields a list that holds that
        partition in this case (empty otherwise): the seeds, or every related entity (of `region`,
        for a run within it) alone."""
        result: list[CommunityAssignment] = []
        try:
            yield result
        except Neo4jError as exc:
            if "dendrogramManager" not in (exc.message or ""):
                raise
            if seeds:
                rows = self._query("gds/seed_read", "reading Leiden seeds")
                result.extend(CommunityAssignment(entity_id=r["entity_id"], communities=(int(r["seed"]),)) for r in rows)
            else:
                rows = (self._query("gds/related_entities", "reading related entities") if region is None else
                        self._query("gds/related_within", "reading related entities", entity_ids=region))
                result.extend(CommunityAssignment(entity_id=r["entity_id"], communities=(i,)) for i, r in enumerate(rows))

    def _write_seeds(self, seeds: Mapping[str, int]) -> None:
        """Seed values on every entity: the given communities (renumbered densely), fresh ones above."""
        dense: dict[int, int] = {}
        rows = [{"entity_id": e, "seed": dense.setdefault(int(c), len(dense))} for e, c in sorted(seeds.items())]

        def work(tx: ManagedTransaction) -> None:
            tx.run(load("gds/seed_clear")).consume()
            _run_batched(tx, "gds/seed_write", rows)
            tx.run(load("gds/seed_fresh"), base=len(dense)).consume()

        self._write(work, "writing Leiden seeds")

    @contextmanager
    def _gds_refusal(self, algorithm: str) -> Iterator[None]:
        """A failed GDS procedure call (memory guard, bad configuration) is a backend refusal."""
        try:
            yield
        except Neo4jError as exc:
            raise BackendError(
                f"GDS refused to run {algorithm} in Neo4j at {self.uri} ({exc.message}); if it says the "
                "call exceeds free memory, give the Neo4j JVM more heap (server.memory.heap.max_size)"
            ) from exc

    def _gds_client(self) -> Any:
        """The GDS client over our own driver, made once. `arrow=False`: OpenGDS has no Arrow
        server, and skipping the probe saves a round trip (graphdatascience>=2.2 would fall back)."""
        if self._gds is None:
            from graphdatascience import GraphDataScience

            with self._backend("connecting the GDS client"):
                self._gds = GraphDataScience(self._driver, database=self.database, arrow=False, show_progress=False)
        return self._gds

    def modularity(self, partition: Mapping[str, int], gamma: float) -> float:
        return self.modularities([partition], gamma)[0]

    def modularities(self, partitions: Sequence[Mapping[str, int]], gamma: float) -> list[float]:
        """Each partition's sums are taken in the database (gds/modularity): the partition goes in as
        a parameter, three numbers come back, where reading every co-mentioned pair out over Bolt
        took 3.5 s of a 15 s refresh on a 200-paragraph SQuAD site."""
        out = []
        for partition in partitions:
            row = self._query("gds/modularity", "scoring a partition",
                              labels={str(e): int(c) for e, c in partition.items()})[0]
            out.append(quality.from_sums(float(row["total"] or 0.0), float(row["inside"] or 0.0),
                                         float(row["squared_degrees"] or 0.0), gamma))
        return out

    def related_entities(self) -> set[str]:
        return {r["entity_id"] for r in self._query("gds/related_entities", "reading related entities")}

    def replace_communities(self, communities: Sequence[Community]) -> None:
        check_communities(communities)
        members = sorted({e for c in communities for e in c.entity_ids})

        def work(tx: ManagedTransaction) -> None:
            unknown = tx.run(load("communities/unknown_entities"), entity_ids=members).single()["unknown"]
            if unknown:
                raise InputError(
                    f"a community names entity {sorted(unknown)[0]!r}, which is not in the graph "
                    f"({len(unknown)} unknown): detect communities again after ingest"
                )
            tx.run(load("communities/clear")).consume()
            _run_batched(
                tx,
                "communities/write",
                [
                    {
                        "id": c.id,
                        "level": int(c.level),
                        "summary": c.summary,
                        "chunk_ids": list(c.chunk_ids),
                        "doc_ids": list(c.doc_ids),
                        "rank": float(c.rank),
                        "parent": c.parent,
                    }
                    for c in communities
                ],
            )
            _run_batched(
                tx,
                "communities/write_members",
                [{"community_id": c.id, "entity_id": e, "position": i} for c in communities for i, e in enumerate(c.entity_ids)],
            )

        self._write(work, "replacing communities")

    def communities(self) -> list[Community]:
        return [
            Community(
                id=r["id"],
                level=int(r["level"]),
                entity_ids=tuple(r["entity_ids"]),
                summary=r["summary"],
                chunk_ids=tuple(r["chunk_ids"] or ()),
                doc_ids=tuple(r["doc_ids"] or ()),
                rank=float(r["rank"]),
                parent=r["parent"],
            )
            for r in self._query("communities/read", "reading communities")
        ]

    def community_context(
        self, entity_ids: Sequence[str], max_entities: int = 12, max_relations: int = 12, max_chunks: int = 8
    ) -> CommunityContext:
        """Reads the set's names, inner relations and top chunks; `ranking` orders them."""
        ids = list(dict.fromkeys(entity_ids))

        def work(tx: ManagedTransaction) -> tuple[dict[str, str], list[neo4j.Record], list[neo4j.Record]]:
            names = {r["id"]: r["name"] for r in tx.run(load("graph/context_entities"), entity_ids=ids)}
            inside = list(tx.run(load("graph/context_relations"), entity_ids=ids))
            chunks = list(tx.run(load("graph/context_chunks"), entity_ids=ids, limit=max(int(max_chunks), 0)))
            return names, inside, chunks

        names, inside, chunk_rows = self._read(work, "reading community context")
        return ranking.community_context(
            names,
            [(r["source"], r["target"], r["weight"]) for r in inside],
            (_hit(r, float(r["entities"]), "graph") for r in chunk_rows),
            max_entities,
            max_relations,
        )

    def replace_links(self, links: Sequence[tuple[str, str, int]]) -> int:
        rows: dict[tuple[str, str], int] = {}
        for a, b, weight in links:
            if not a or not b or a == b or int(weight) < 1:
                raise InputError(f"mapped relation ({a!r}, {b!r}, {weight!r}): two different entity ids and a weight >= 1")
            key = (a, b) if a < b else (b, a)
            rows[key] = rows.get(key, 0) + int(weight)
        payload = [{"source": a, "target": b, "weight": w} for (a, b), w in sorted(rows.items())]

        def work(tx: ManagedTransaction) -> int:
            tx.run(load("graph/links_clear")).consume()
            query = load("graph/links_write")
            return sum(int(tx.run(query, rows=batch).single()["written"]) for batch in _batches(payload))

        return self._write(work, "writing mapped relations")

    def stats(self) -> GraphStats:
        r = self._query("graph/stats", "counting the graph")[0]
        return GraphStats(r["documents"], r["chunks"], r["entities"], r["relations"], r["communities"])


def _remove_documents(tx: ManagedTransaction, doc_ids: list[str]) -> list[str]:
    """Delete documents (chunks and mentions, so their relations); return the element ids of the
    entities they touched, for `_drop_orphans` in the same transaction."""
    touched = [r["element_id"] for r in tx.run(load("documents/touched_entities"), doc_ids=doc_ids)]
    tx.run(load("documents/delete"), doc_ids=doc_ids).consume()
    return touched


def _document_rows(graphs: Sequence[DocumentGraph]) -> list[dict[str, Any]]:
    """Documents with their chunks, and each chunk with the entities it mentions
    (`documents/write`): the nesting lets one statement create them all, looking up only the
    entities (written just before)."""
    mentions: dict[str, tuple[list[str], list[int]]] = {}
    for m in (m for g in graphs for m in g.mentions):
        ids, counts = mentions.setdefault(m.chunk_id, ([], []))
        ids.append(m.entity_id)
        counts.append(m.count)
    none: tuple[list[str], list[int]] = ([], [])
    return [
        {
            "id": g.document.id, "title": g.document.title, "source": g.document.source, "sha256": g.document.sha256,
            "chunks": [
                {
                    "id": c.id, "ordinal": c.ordinal, "text": c.text, "start": c.start, "end": c.end, "page": c.page,
                    "entity_ids": mentions.get(c.id, none)[0], "counts": mentions.get(c.id, none)[1],
                }
                for c in g.chunks
            ],
        }
        for g in graphs
    ]


def _drop_orphans(tx: ManagedTransaction, element_ids: Iterable[str]) -> None:
    ids = list(element_ids)
    for start in range(0, len(ids), BATCH_ROWS):
        tx.run(load("documents/drop_orphans"), element_ids=ids[start : start + BATCH_ROWS]).consume()


def _hit(record: neo4j.Record, score: float, via: str) -> ChunkHit:
    return ChunkHit(
        chunk_id=record["chunk_id"], doc_id=record["doc_id"], title=record["title"], text=record["text"],
        score=score, via=via, page=record["page"], source=record["source"] or "",
    )
