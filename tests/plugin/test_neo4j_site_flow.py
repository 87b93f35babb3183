"""The admin workflow on the production backend: `hansa site install → ingest → communities →
publish --out → status` through the real root command, with the graph in a real Neo4j + GDS and
the vectors in Milvus Lite, on ~30 MTRAG passages.

The site lives inside "the organization's" Neo4j, next to data hansa must never touch: a node and a
relationship created before install (one of them a `Document` whose id equals an ingested passage's)
must come out of every step exactly as they went in. The session's Neo4j is shared, so this module
clears hansa's namespaced data (and its own organization fixture) before and after itself.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from neo4j import Driver

from hansa.adapters.graph.base import LeidenParams
from hansa.cli import main
from hansa.core.config import Config, load_config
from hansa.plugin.install import load_identity
from hansa.plugin.retrieval import retrieve
from hansa.plugin.communities import summary_vectors
from hansa.sync.terms import TermSketch
from hansa.plugin.site import CHUNKS, SUMMARIES, SiteContext
from hansa.sync.publication import open_publication
from hansa.sync.vectors import decode_vector
from hansa.sync.wire import EmbeddingSpace, RetrieveRequest

pytestmark = pytest.mark.neo4j

SITE_ID = "govt-neo"
DB = "neo4j"
PER_DOMAIN = 6
# The govt FAQ passages on safe rooms (MTRAG), so one question has a known answer in this corpus.
SAFE_ROOM_DOCS = (
    "c8db6e06ff46669e-50302-52227",
    "06dcac21ce5f8eb1-0-2278",
    "7d4d64e7f6aff125-3194-5132",
    "c8db6e06ff46669e-48670-50814",
    "7d4d64e7f6aff125-1590-3637",
)
# Questions of the demo set (cli/data/demo_questions.jsonl) whose gold passages are in the corpus.
QUESTIONS = (
    ("What is a safe room?", frozenset(SAFE_ROOM_DOCS)),
    ("what is the difference between primary and archaeological sources", frozenset({"806502664_349-964-0-615", "806502664_5333-5957-0-624"})),
    ("Which one is more important, Market Cap or NAV?", frozenset({"416727-0-1356", "418610-0-264"})),
)

CLEAR = "MATCH (n) WHERE n.org_fixture = true OR any(l IN labels(n) WHERE l STARTS WITH 'Hansa') DETACH DELETE n"
# The organization's own data, created before hansa is installed. The Document shares its id with a
# passage hansa ingests: only the Hansa* namespace may tell the two apart.
ORG_DATA = """
CREATE (d:Document {id: $doc_id, title: 'Records retention policy', owner: 'legal', org_fixture: true})
CREATE (c:Customer {id: 'cust-7', name: 'Karsholm Harbour Trust', org_fixture: true})
CREATE (c)-[:SIGNED {on: date('2021-04-01'), pages: 12}]->(d)
"""
NON_HANSA_NODES = """
MATCH (n) WHERE none(l IN labels(n) WHERE l STARTS WITH 'Hansa')
RETURN elementId(n) AS id, labels(n) AS labels, properties(n) AS props ORDER BY id
"""
NON_HANSA_RELS = """
MATCH (a)-[r]->(b) WHERE NOT type(r) STARTS WITH 'HANSA_'
RETURN elementId(r) AS id, type(r) AS type, properties(r) AS props, elementId(a) AS a, elementId(b) AS b ORDER BY id
"""
ORG_LINKS = "MATCH (n {org_fixture: true})-[r]-(m) RETURN type(r) AS type, labels(m) AS labels"
HANSA_NODES = """
MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') AND NOT n:HansaSchema
RETURN labels(n) AS labels, properties(n) AS props
"""
HANSA_RELS = """
MATCH (a)-[r]->(b) WHERE type(r) STARTS WITH 'HANSA_'
RETURN type(r) AS type, a.id AS a, b.id AS b, properties(r) AS props
"""
COMMUNITIES = """
MATCH (c:HansaCommunity)
OPTIONAL MATCH (e:HansaEntity)-[:HANSA_IN_COMMUNITY]->(c)
RETURN c.id AS id, c.summary AS summary, c.level AS level, collect(e.id) AS members
"""


def _rows(driver: Driver, query: str, **params: Any) -> list[dict[str, Any]]:
    records, _, _ = driver.execute_query(query, parameters_=params, database_=DB)
    return [record.data() for record in records]


def _canonical(rows: list[dict[str, Any]]) -> list[str]:
    """Order-independent, comparable form of query rows (lists inside sorted, values as JSON)."""
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)


@pytest.fixture(scope="module")
def passages(mtrag_passages: dict[str, list[dict[str, str]]], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """~30 passages: the first of each MTRAG domain plus the safe-room FAQ, as one jsonl file."""
    rows = [row for domain in sorted(mtrag_passages) for row in mtrag_passages[domain][:PER_DOMAIN]]
    rows += [row for row in mtrag_passages["govt"] if row["id"] in SAFE_ROOM_DOCS and row not in rows]
    path = tmp_path_factory.mktemp("neo4j-corpus") / "passages.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return {"path": path, "ids": {row["id"] for row in rows}, "text": {row["id"]: row["text"] for row in rows}}


def _env(neo4j_uri: str) -> dict[str, str]:
    return {
        "HANSA_SITE_SITE_ID": SITE_ID,
        "HANSA_GRAPH_BACKEND": "neo4j",
        "HANSA_NEO4J_URI": neo4j_uri,
        "HANSA_NEO4J_PASSWORD": "",
    }


def _run(home: Path, neo4j_uri: str, *args: str) -> Result:
    env: dict[str, str | None] = {**_env(neo4j_uri), "HANSA_CONFIG": None}
    result = CliRunner().invoke(main, ["--home", str(home), "site", *args], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _config(home: Path, neo4j_uri: str) -> Config:
    return load_config(env={"HANSA_HOME": str(home), **_env(neo4j_uri)})


def _field(output: str, name: str) -> int:
    return int(re.search(rf"^  {name}: (\d+)$", output, re.M).group(1))


def test_site_workflow_on_neo4j_gds(driver: Driver, neo4j_uri: str, passages: dict[str, Any], tmp_path: Path) -> None:
    home = tmp_path / "home"
    doc_count = len(passages["ids"])
    assert 25 <= doc_count <= 35
    driver.execute_query(ORG_DATA, parameters_={"doc_id": SAFE_ROOM_DOCS[0]}, database_=DB)
    org_nodes, org_rels = _rows(driver, NON_HANSA_NODES), _rows(driver, NON_HANSA_RELS)
    assert len(org_nodes) == 2 and len(org_rels) == 1

    def organization_untouched(step: str) -> None:
        assert _rows(driver, NON_HANSA_NODES) == org_nodes, f"{step} changed the organization's nodes"
        assert _rows(driver, NON_HANSA_RELS) == org_rels, f"{step} changed the organization's relationships"
        assert _canonical(_rows(driver, ORG_LINKS)) == _canonical(
            [{"type": "SIGNED", "labels": ["Document"]}, {"type": "SIGNED", "labels": ["Customer"]}]
        ), f"{step} linked hansa data to the organization's nodes"

    # 1. install: the Neo4j + GDS backend is what the site runs on
    out = _run(home, neo4j_uri, "install").output
    assert f"site {SITE_ID} installed" in out
    assert re.search(r"graph: neo4j 5\.\d+\S* \(2\.\d+\.\d+\)", out), out  # Neo4j 5 with GDS 2
    organization_untouched("install")

    # 2. ingest
    out = _run(home, neo4j_uri, "ingest", "--no-progress", str(passages["path"])).output
    assert _field(out, "documents_new") == doc_count and _field(out, "chunks") > doc_count
    organization_untouched("ingest")
    assert _rows(driver, "MATCH (d:HansaDocument) RETURN count(d) AS n")[0]["n"] == doc_count
    assert {r["id"] for r in _rows(driver, "MATCH (d:HansaDocument) RETURN d.id AS id")} == passages["ids"]

    # 3. communities: GDS Leiden, stored as HansaCommunity nodes, summaries embedded into Milvus
    out = _run(home, neo4j_uri, "communities", "--no-progress").output
    communities = _field(out, "communities")
    assert communities >= 2
    organization_untouched("communities")
    stored = _rows(driver, COMMUNITIES)
    assert len(stored) == communities
    assert all(c["level"] == 0 and c["summary"] and c["members"] for c in stored)
    assert not _rows(driver, "CALL gds.graph.list() YIELD graphName RETURN graphName")  # projection dropped

    with SiteContext.open(_config(home, neo4j_uri)) as ctx:
        assert ctx.graph.backend == "neo4j"
        # Every stored community is made of whole communities of Leiden's final level, the one a site
        # publishes (small ones merged in). GDS's finer levels need not nest in it.
        leiden: dict[int, set[str]] = {}
        for a in ctx.graph.detect_communities(LeidenParams(gamma=ctx.cfg.site.leiden_gamma, seed=ctx.cfg.site.leiden_seed)):
            leiden.setdefault(a.communities[-1], set()).add(a.entity_id)
        owner = {e: c["id"] for c in stored for e in c["members"]}
        for group in leiden.values():
            assert len({owner.get(e) for e in group}) == 1, "a Leiden community was split across stored communities"
        assert set(owner) <= set().union(*leiden.values())
        # The summaries are in Milvus, one vector per community, as `[site] summary_vector` makes it.
        assert ctx.vectors.count(SUMMARIES) == communities
        vectors = ctx.vectors.get(SUMMARIES, [c["id"] for c in stored])
        by_id = {c.id: c for c in ctx.graph.communities()}
        fresh = summary_vectors(ctx, [by_id[c["id"]] for c in stored])
        assert all(float(np.dot(vectors[c["id"]], fresh[i])) > 0.999 for i, c in enumerate(stored))
        identity = load_identity(ctx)
        space = EmbeddingSpace.of(ctx.embedder)

    # 4. publish --out: the envelope verifies with the site's key and carries exactly those vectors
    envelope = tmp_path / "publication.json"
    out = _run(home, neo4j_uri, "publish", "--out", str(envelope)).output
    assert "sequence: 1" in out and f"summaries: {communities}" in out
    organization_untouched("publish")
    publication = open_publication(envelope.read_bytes(), SITE_ID, [identity.public_key], space, now=datetime.now(timezone.utc))
    assert publication.sequence == 1
    assert {r.summary_id for r in publication.summaries} == set(vectors)
    for record in publication.summaries:
        np.testing.assert_array_equal(decode_vector(record.vector_b64, space.dim), vectors[record.summary_id])
        assert record.text is None  # default policy: no summary text leaves the site
    # term statistics, read from Neo4j page by page, counted per document as the embedded store counts them
    assert publication.terms is not None and publication.terms.documents == doc_count
    with SiteContext.open(_config(home, neo4j_uri)) as ctx:
        corpus = [(doc, text) for _, doc, text in ctx.graph.chunk_texts(limit=100_000)]
    expected = TermSketch.from_documents(corpus, 2)
    assert publication.terms.keys.tolist() == expected.keys.tolist() and len(expected) > 0
    assert publication.terms.dfs.tolist() == expected.dfs.tolist()

    # 5. status reads the Neo4j-backed site
    out = _run(home, neo4j_uri, "status").output
    assert f"site: {SITE_ID}" in out and "graph (neo4j):" in out
    assert f"{doc_count} documents" in out and f"{communities} communities" in out
    assert f"{communities} summaries" in out and "last publication: sequence 1" in out
    organization_untouched("status")

    # Re-ingesting the same input changes nothing: not the graph (communities included), not Milvus.
    graph_before = (_canonical(_rows(driver, HANSA_NODES)), _canonical(_rows(driver, HANSA_RELS)))
    with SiteContext.open(_config(home, neo4j_uri)) as ctx:
        chunk_vectors_before = ctx.vectors.count(CHUNKS)
    out = _run(home, neo4j_uri, "ingest", "--no-progress", str(passages["path"])).output
    assert _field(out, "documents_unchanged") == doc_count
    assert _field(out, "documents_new") == _field(out, "documents_changed") == _field(out, "chunks") == 0
    assert (_canonical(_rows(driver, HANSA_NODES)), _canonical(_rows(driver, HANSA_RELS))) == graph_before
    organization_untouched("re-ingest")

    # Retrieval on the Neo4j-backed site cites the passage that answers.
    with SiteContext.open(_config(home, neo4j_uri)) as ctx:
        assert ctx.vectors.count(CHUNKS) == chunk_vectors_before
        for question, gold in QUESTIONS:
            answer = retrieve(ctx, RetrieveRequest(question=question, top_k=3))
            assert answer.citations[0].doc_id in gold, (question, answer.citations)
            assert answer.sentences and answer.confidence > 0.3
            for text, doc_id, *_ in answer.sentences:
                assert text in " ".join(passages["text"][doc_id].split())
    organization_untouched("retrieval")
