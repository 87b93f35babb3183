"""What only the Neo4j + GDS store must guarantee, beyond the shared GraphStore contract.

An organization runs hansa inside its own Neo4j: its nodes (even ones named Document or Entity,
with ids that collide with ours) must survive every hansa operation byte for byte, and nothing
a document says may ever be executed as Cypher. These tests read the database directly.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from neo4j import Driver, GraphDatabase

from hansa.adapters.graph.base import GraphStats, LeidenParams
from hansa.adapters.graph.embedded import EmbeddedGraphStore
from hansa.adapters.graph.neo4j_gds import SCHEMA_VERSION, Neo4jGraphStore
from hansa.adapters.records import Chunk, Community, Document, DocumentGraph, Entity, Mention
from hansa.core.config import SiteConfig
from hansa.core.errors import BackendError
from hansa.plugin.communities import final_partition

pytestmark = pytest.mark.neo4j

DB = "neo4j"
# Test-side housekeeping: hansa's namespaced data plus the "organization" nodes these tests add.
CLEAR = "MATCH (n) WHERE n.org_fixture = true OR any(l IN labels(n) WHERE l STARTS WITH 'Hansa') DETACH DELETE n"
FOREIGN_NODES = """
MATCH (n) WHERE none(l IN labels(n) WHERE l STARTS WITH 'Hansa')
RETURN elementId(n) AS id, labels(n) AS labels, properties(n) AS props ORDER BY id
"""
FOREIGN_RELS = """
MATCH (a)-[r]->(b) WHERE NOT type(r) STARTS WITH 'HANSA_'
RETURN elementId(r) AS id, type(r) AS type, properties(r) AS props, elementId(a) AS a, elementId(b) AS b ORDER BY id
"""
# The organization's own graph: labels and ids that look like ours but are not namespaced.
ORG_GRAPH = """
CREATE (d:Document {id: 'doc1', title: 'their doc', org_fixture: true})
CREATE (e:Entity {id: 'alpha', name: 'their alpha', org_fixture: true})
CREATE (c:Chunk:Community {id: 'c1', org_fixture: true})
CREATE (p:Person {name: 'Ada', org_fixture: true})-[:KNOWS {since: 1843}]->(q:Person {name: 'Charles', org_fixture: true})
CREATE (d)-[:MENTIONS {count: 3}]->(e)
CREATE (e)-[:RELATED {weight: 100.0, doc_id: 'doc1'}]->(p)
CREATE (e)-[:HAS_CHUNK]->(c)
"""


def graph(doc_id: str, chunks: dict[str, list[str]], title: str = "", text: str = "") -> DocumentGraph:
    """A self-contained DocumentGraph (chunk -> entity ids it mentions: two entities relate with the
    number of chunks that mention both)."""
    chunk_records = tuple(
        Chunk(id=cid, doc_id=doc_id, ordinal=i, text=text or f"text of {cid}", start=0, end=len(text or cid)) for i, cid in enumerate(chunks)
    )
    mentions = tuple(Mention(chunk_id=cid, entity_id=e) for cid, ids in chunks.items() for e in ids)
    used = dict.fromkeys(m.entity_id for m in mentions)
    return DocumentGraph(
        document=Document(id=doc_id, title=title or f"title of {doc_id}", source=f"src/{doc_id}", sha256=hashlib.sha256(doc_id.encode()).hexdigest()),
        chunks=chunk_records,
        entities=tuple(Entity(id=e, name=e.upper()) for e in used),
        mentions=mentions,
    )


def ring_of_cliques(cliques: int = 6, size: int = 4) -> list[DocumentGraph]:
    """Cliques joined in a ring by weaker edges: several plausible partitions, so an unseeded or
    parallel Leiden could disagree with itself, and enough structure for more than one level."""
    docs = []
    for k in range(cliques):
        members = [f"k{k}m{i}" for i in range(size)]
        link = [members[0], f"k{(k + 1) % cliques}m{size - 1}"]  # one chunk: weight 1 against the cliques' 2
        docs.append(graph(f"ring{k}", {f"ring{k}a": members, f"ring{k}b": members, f"ring{k}link": link}))
    return docs


def planted_groups(groups: int = 30, size: int = 10, seed: int = 3) -> list[DocumentGraph]:
    """`groups` dense random groups (one document each, edge probability 0.5, weights 1-3: as many
    chunks mention the pair) and one document of 40 weak links between random groups (one chunk
    each): a graph whose right answer is the groups."""
    rng = np.random.default_rng(seed)
    docs = []
    for g in range(groups):
        ids = [f"g{g}e{i}" for i in range(size)]
        pairs = [(a, b, int(rng.integers(1, 4))) for i, a in enumerate(ids) for b in ids[i + 1 :] if rng.random() < 0.5]
        docs.append(graph(f"group{g}", {f"group{g}c{n}-{k}": [a, b] for n, (a, b, w) in enumerate(pairs) for k in range(w)}))
    links = {}
    for n in range(40):
        g1, g2 = rng.choice(groups, 2, replace=False)
        links[f"link{n}"] = [f"g{g1}e{rng.integers(size)}", f"g{g2}e{rng.integers(size)}"]
    docs.append(graph("links", links))
    return docs


@pytest.fixture(scope="module")
def driver(neo4j_uri: str) -> Iterator[Driver]:
    with GraphDatabase.driver(neo4j_uri, auth=None) as d:
        yield d


@pytest.fixture
def clean(driver: Driver) -> Iterator[None]:
    driver.execute_query(CLEAR, database_=DB)
    yield
    driver.execute_query(CLEAR, database_=DB)


@pytest.fixture
def store(neo4j_uri: str, clean: None) -> Iterator[Neo4jGraphStore]:
    """A Neo4j store on a database holding no hansa data (not installed yet)."""
    s = Neo4jGraphStore(neo4j_uri, "neo4j", "", DB)
    try:
        yield s
    finally:
        s.close()


def foreign_snapshot(driver: Driver) -> tuple:
    nodes = driver.execute_query(FOREIGN_NODES, database_=DB).records
    rels = driver.execute_query(FOREIGN_RELS, database_=DB).records
    return [r.data() for r in nodes], [r.data() for r in rels]


def test_install_is_idempotent_and_reports_gds_2_13(store: Neo4jGraphStore, driver: Driver) -> None:
    first = store.install()
    again = store.install()
    assert (first.created, again.created) == (True, False)
    assert first.backend == again.backend == "neo4j"
    assert first.schema_version == again.schema_version == SCHEMA_VERSION
    assert again.server_version.startswith("5.26.")
    assert again.gds_version.startswith("2.13.")

    constraints = {r["name"] for r in driver.execute_query("SHOW CONSTRAINTS YIELD name", database_=DB).records}
    assert {"hansa_document_id", "hansa_chunk_id", "hansa_entity_id", "hansa_community_id", "hansa_schema_id"} <= constraints
    indexes = {r["name"] for r in driver.execute_query("SHOW INDEXES YIELD name", database_=DB).records}
    assert "hansa_related_doc_id" not in indexes  # schema v3 stores no relations (they are derived)
    versions = driver.execute_query("MATCH (s:HansaSchema) RETURN s.version AS v", database_=DB).records
    assert [r["v"] for r in versions] == [SCHEMA_VERSION]


def test_a_newer_schema_or_a_missing_install_is_refused(store: Neo4jGraphStore, neo4j_uri: str, driver: Driver) -> None:
    with pytest.raises(BackendError, match="hansa install"):
        store.stats()  # never installed
    store.install()
    driver.execute_query("MATCH (s:HansaSchema) SET s.version = $v", v=SCHEMA_VERSION + 1, database_=DB)
    with pytest.raises(BackendError, match="newer"):
        store.install()
    with Neo4jGraphStore(neo4j_uri, "neo4j", "", DB) as other, pytest.raises(BackendError, match="schema version"):
        other.stats()


def test_a_v2_database_is_upgraded_by_install_its_stored_relations_removed(
        store: Neo4jGraphStore, neo4j_uri: str, driver: Driver) -> None:
    """Schema v2 stored one HANSA_RELATED relationship per entity pair and document (with an index
    on doc_id); v3 derives relations from the mentions. Install removes the stored ones, their
    index and nothing else, and the site's communities come out of the mentions alone."""
    driver.execute_query(ORG_GRAPH, database_=DB)
    before = foreign_snapshot(driver)
    store.install("site-a")
    docs = ring_of_cliques(cliques=3)
    store.write_documents(docs)
    fresh = store.detect_communities(LeidenParams(seed=5, concurrency=1))
    # make it a v2 database: its version, its relation index, a stored relation per pair and document
    driver.execute_query("MATCH (s:HansaSchema) SET s.version = 2", database_=DB)
    driver.execute_query("CREATE INDEX hansa_related_doc_id IF NOT EXISTS FOR ()-[r:HANSA_RELATED]-() ON (r.doc_id)",
                         database_=DB)
    for g in docs:
        rows = [{"a": a, "b": b, "w": float(n)} for (a, b), n in g.co_mentions().items()]
        driver.execute_query("UNWIND $rows AS row MATCH (a:HansaEntity {id: row.a}), (b:HansaEntity {id: row.b}) "
                             "CREATE (a)-[:HANSA_RELATED {doc_id: $doc, weight: row.w, description: ''}]->(b)",
                             rows=rows, doc=g.document.id, database_=DB)
    with Neo4jGraphStore(neo4j_uri, "neo4j", "", DB) as other, pytest.raises(BackendError, match="schema version 2"):
        other.stats()

    report = store.install("site-a")
    assert report.created is True and report.schema_version == SCHEMA_VERSION == 3
    related = driver.execute_query("MATCH ()-[r:HANSA_RELATED]->() RETURN count(r) AS n", database_=DB).records
    assert related[0]["n"] == 0
    indexes = {r["name"] for r in driver.execute_query("SHOW INDEXES YIELD name", database_=DB).records}
    assert "hansa_related_doc_id" not in indexes
    assert store.stats() == GraphStats(documents=3, chunks=9, entities=12, relations=39, communities=0)
    assert store.detect_communities(LeidenParams(seed=5, concurrency=1)) == fresh  # numbers included
    assert foreign_snapshot(driver) == before


def test_unreachable_server_and_wrong_uri_are_backend_errors() -> None:
    with Neo4jGraphStore("bolt://127.0.0.1:1", "neo4j", "x", DB) as unreachable:
        with pytest.raises(BackendError, match="cannot reach Neo4j"):
            unreachable.install()


@pytest.mark.parametrize("first_use", ["install", "installed_site", "stats", "diagnose"])
def test_a_refused_port_fails_at_once_with_one_line_whatever_runs_first(first_use: str) -> None:
    """Issue 34: a refused Bolt port used to be retried as a transaction for 30 s (each try logged
    by the driver) before the error; every first use now checks the server once, unretried."""
    with Neo4jGraphStore("bolt://127.0.0.1:1", "neo4j", "x", DB) as unreachable:
        started = time.monotonic()
        if first_use == "diagnose":
            checks = unreachable.diagnose("site-a")
            message = checks[0].detail
            assert checks[0].failed
        else:
            with pytest.raises(BackendError) as raised:
                getattr(unreachable, first_use)()
            message = str(raised.value)
        elapsed = time.monotonic() - started
    assert "cannot reach Neo4j at bolt://127.0.0.1:1" in message and "\n" not in message, message
    assert elapsed < 10, f"{first_use} took {elapsed:.1f} s to report a refused port"


def test_a_missing_database_is_named_with_what_to_do(neo4j_uri: str) -> None:
    with Neo4jGraphStore(neo4j_uri, "neo4j", "", "nosuchdb") as store:
        for attempt in (store.install, store.installed_site):
            with pytest.raises(BackendError, match="no usable database 'nosuchdb'.*HANSA_NEO4J_DATABASE.*Enterprise"):
                attempt()
        first = store.diagnose("site-a")[0]
        assert first.failed and "no usable database" in first.detail, first
    with pytest.raises(BackendError, match="Bolt URI"):
        Neo4jGraphStore("http://127.0.0.1:7474", "neo4j", "x", DB)


INJECTIONS = [
    "x'}) MATCH (n) DETACH DELETE n //",
    'x"}) WITH 1 AS x MATCH (n:Person) SET n.name = "pwned" //',
    "`) CALL dbms.components() YIELD name RETURN name //",
    "$rows {id: 'evil'}; DROP CONSTRAINT hansa_chunk_id; MATCH (n) DELETE n",
    "\\u0027}) CREATE (:Evil) //",
]


def test_cypher_injection_is_stored_verbatim_and_changes_nothing_else(store: Neo4jGraphStore, driver: Driver) -> None:
    driver.execute_query(ORG_GRAPH, database_=DB)
    store.install()
    before = foreign_snapshot(driver)
    graphs = [
        graph(f"{s} doc", {f"{s} chunk": [f"{s} e1", f"{s} e2"]}, title=s, text=s)
        for s in INJECTIONS
    ]
    store.write_documents(graphs)

    n = len(INJECTIONS)
    assert store.stats() == GraphStats(documents=n, chunks=n, entities=2 * n, relations=n, communities=0)
    hits = store.chunks([g.chunks[0].id for g in graphs])
    assert [(h.doc_id, h.title, h.text) for h in hits] == [(f"{s} doc", s, s) for s in INJECTIONS]
    assert foreign_snapshot(driver) == before
    labels = {r["l"] for r in driver.execute_query("MATCH (n) UNWIND labels(n) AS l RETURN DISTINCT l", database_=DB).records}
    assert "Evil" not in labels
    constraints = {r["name"] for r in driver.execute_query("SHOW CONSTRAINTS YIELD name", database_=DB).records}
    assert "hansa_chunk_id" in constraints


def test_the_organizations_own_graph_is_untouched(store: Neo4jGraphStore, driver: Driver) -> None:
    driver.execute_query(ORG_GRAPH, database_=DB)
    before = foreign_snapshot(driver)

    store.install()
    docs = [graph("doc1", {"c1": ["alpha", "beta"]}), graph("doc2", {"c2": ["beta", "gamma"]})]
    store.write_documents(docs)
    assignments = store.detect_communities(LeidenParams())
    # the projection saw only hansa entities: the org's Entity 'alpha' and its RELATED edge are not in it
    assert {a.entity_id for a in assignments} == {"alpha", "beta", "gamma"}
    store.replace_communities([Community(id="k", level=0, entity_ids=("alpha", "beta", "gamma"))])
    store.write_documents([graph("doc1", {"c1": ["alpha", "delta"]})])  # replace
    store.delete_documents(["doc1", "doc2"])

    assert store.stats() == GraphStats(0, 0, 0, 0, 1)
    assert foreign_snapshot(driver) == before


def test_batches_larger_than_one_unwind_are_written_whole(store: Neo4jGraphStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import hansa.adapters.graph.neo4j_gds as module

    monkeypatch.setattr(module, "BATCH_ROWS", 3)  # every row list below spans several UNWIND batches
    store.install()
    docs = ring_of_cliques(cliques=3)
    store.write_documents(docs)
    # relations: per clique two chunks of 4 entities (6 pairs each) and one link chunk (1 pair)
    assert store.stats() == GraphStats(documents=3, chunks=9, entities=12, relations=39, communities=0)
    communities = [Community(id=f"k{i}", level=0, entity_ids=tuple(e.id for e in g.entities)) for i, g in enumerate(docs)]
    store.replace_communities(communities)
    assert store.communities() == communities
    store.delete_documents([g.document.id for g in docs])
    assert store.stats() == GraphStats(0, 0, 0, 0, 3)


def test_leiden_is_reproducible_with_a_seed_and_levels_nest(store: Neo4jGraphStore, driver: Driver) -> None:
    store.install()
    store.write_documents(ring_of_cliques())
    params = LeidenParams(gamma=0.1, seed=1234, concurrency=1)  # low resolution: cliques merge on a 2nd level
    first = sorted(store.detect_communities(params), key=lambda a: a.entity_id)
    second = sorted(store.detect_communities(params), key=lambda a: a.entity_id)
    assert first == second  # identical, community numbers included
    assert len(first) == 24

    depth = len(first[0].communities)
    assert depth >= 2 and all(len(a.communities) == depth for a in first)
    for level in range(depth - 1):  # level 0 is the finest: each fine community sits in one coarser one
        parent: dict[int, int] = {}
        for a in first:
            assert parent.setdefault(a.communities[level], a.communities[level + 1]) == a.communities[level + 1]

    projections = driver.execute_query("CALL gds.graph.list() YIELD graphName RETURN graphName", database_=DB).records
    assert [r["graphName"] for r in projections if r["graphName"].startswith("hansa-")] == []


def test_a_seeded_leiden_does_not_depend_on_the_order_the_pairs_arrive_in(
    store: Neo4jGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gds/project` sorts the entities, not the ~20x more pairs: GDS numbers the nodes as it meets
    them, and the entities come first. Shuffling the pairs must change nothing, community numbers
    included (the aggregation's own order varies between runs, and sorting every pair is the cost
    this spares)."""
    import hansa.adapters.graph.neo4j_gds as module

    store.install()
    store.write_documents(planted_groups())
    params = LeidenParams(seed=7, concurrency=1)
    shipped = sorted(store.detect_communities(params), key=lambda a: a.entity_id)
    pairs = "RETURN a, b, toFloat(count(c)) AS weight"
    assert pairs in module.load("gds/project")
    shuffled = module.load("gds/project").replace(pairs, "WITH a, b, toFloat(count(c)) AS weight ORDER BY rand() RETURN a, b, weight")
    real_load = module.load
    monkeypatch.setattr(module, "load", lambda name: shuffled if name == "gds/project" else real_load(name))
    for _ in range(3):
        assert sorted(store.detect_communities(params), key=lambda a: a.entity_id) == shipped


def test_the_published_level_cuts_the_graph_as_the_embedded_store_does(store: Neo4jGraphStore, tmp_path: Path) -> None:
    """A site publishes Leiden's final partition (plugin/communities.py). GDS also reports finer
    levels; publishing its finest made a Neo4j site publish 12x the embedded store's communities
    on 10,000 SQuAD paragraphs. At the site's default resolution both backends must agree."""
    docs = planted_groups()
    store.install()
    store.write_documents(docs)
    with EmbeddedGraphStore(tmp_path / "graph.sqlite") as embedded:
        embedded.install()
        embedded.write_documents(docs)
        params = LeidenParams(gamma=SiteConfig().leiden_gamma, seed=SiteConfig().leiden_seed)
        reference = final_partition(embedded.detect_communities(params))
    assignments = store.detect_communities(params)
    published = final_partition(assignments)
    assert len(reference) == 30  # the planted groups
    assert abs(len(published) - len(reference)) <= 3, (len(published), len(reference))
    finest = {a.communities[0] for a in assignments}
    assert len(finest) > len(published)  # what publishing GDS's first level would have sent


def test_a_refused_leiden_call_is_a_backend_error_and_drops_the_projection(store: Neo4jGraphStore, driver: Driver) -> None:
    store.install()
    store.write_documents(ring_of_cliques(cliques=2))
    with pytest.raises(BackendError, match="tolerance"):
        store.detect_communities(LeidenParams(tolerance=-1.0))
    projections = driver.execute_query("CALL gds.graph.list() YIELD graphName RETURN graphName", database_=DB).records
    assert [r["graphName"] for r in projections if r["graphName"].startswith("hansa-")] == []


def test_mapped_relations_join_leiden_summaries_and_stats(store: Neo4jGraphStore, driver: Driver, tmp_path: Path) -> None:
    """`replace_links` (hansa site map): a relation the organization's graph states weighs in beside
    the co-mentions, in the projection Leiden runs on, the modularity, the summaries' relations and
    stats; it is replaced whole, and pairs naming an entity the store lacks are left out."""
    from hansa.adapters.graph import quality

    store.install()
    # Two cliques no chunk joins: Leiden cannot put them together ...
    store.write_documents([graph("left", {"l1": ["a", "b", "c"], "l2": ["a", "b", "c"]}),
                           graph("right", {"r1": ["x", "y", "z"], "r2": ["x", "y", "z"]})])
    params = LeidenParams(gamma=1.0, seed=1)
    apart = {a.entity_id: a.communities[-1] for a in store.detect_communities(params)}
    assert apart["a"] != apart["x"]
    co_mentioned = store.stats().relations
    # ... until mapped relations tie them, heavier than the cliques themselves.
    written = store.replace_links([("a", "x", 5), ("x", "a", 2), ("b", "y", 7), ("c", "nobody", 3)])
    assert written == 2  # (a, x) summed over both directions; 'nobody' is not in the store
    rows = driver.execute_query("MATCH (s:HansaEntity)-[l:HANSA_LINKED]->(t:HansaEntity) RETURN s.id AS s, t.id AS t, "
                                "l.weight AS w ORDER BY s", database_=DB).records
    assert [(r["s"], r["t"], r["w"]) for r in rows] == [("a", "x", 7), ("b", "y", 7)]
    assert store.stats().relations == co_mentioned + 14
    joined = {a.entity_id: a.communities[-1] for a in store.detect_communities(params)}
    assert joined["a"] == joined["x"] and joined["b"] == joined["y"]
    edges = [(s, t, 2.0) for s, t in [("a", "b"), ("a", "c"), ("b", "c"), ("x", "y"), ("x", "z"), ("y", "z")]]
    edges += [("a", "x", 7.0), ("b", "y", 7.0)]
    assert store.modularity(joined, 1.0) == pytest.approx(quality.modularity(edges, joined, 1.0))
    context = store.community_context(["a", "b", "x", "y"])
    assert ("A", "X", 7.0) in context.relations and ("B", "Y", 7.0) in context.relations
    # Replaced whole: an empty set removes them, and the cliques are apart again.
    assert store.replace_links([]) == 0
    assert store.stats().relations == co_mentioned
    again = {a.entity_id: a.communities[-1] for a in store.detect_communities(params)}
    assert again["a"] != again["x"]
    with EmbeddedGraphStore(tmp_path / "graph.sqlite") as embedded:
        with pytest.raises(BackendError, match="backend = 'neo4j'"):
            embedded.replace_links([("a", "x", 1)])
