"""The admin's life cycle of a site inside an organization's Neo4j + GDS, through the `hansa site`
commands: install, ingest, communities, query, delete (seeded Leiden on GDS), a second site refused
on the same database, and uninstall removing exactly hansa's nodes, constraints, indexes, GDS
projections and Milvus collections while the organization's labels, constraints, indexes and
projections stay as they were."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner, Result
from neo4j import Driver, GraphDatabase

from hansa.cli import main

pytestmark = pytest.mark.neo4j

DB = "neo4j"
CLEAR = "MATCH (n) WHERE n.org_admin = true OR any(l IN labels(n) WHERE l STARTS WITH 'Hansa') DETACH DELETE n"
ORG_SCHEMA = (
    "CREATE CONSTRAINT org_admin_customer_id IF NOT EXISTS FOR (c:Customer) REQUIRE c.id IS UNIQUE",
    "CREATE INDEX org_admin_contract_title IF NOT EXISTS FOR (d:Contract) ON (d.title)",
)
ORG_DATA = """
CREATE (c:Customer {id: 'cust-1', name: 'Karsholm Harbour Trust', org_admin: true})
CREATE (d:Contract {id: 'docs/lighthouse.txt', title: 'Lighthouse lease', org_admin: true})
CREATE (c)-[:SIGNED {year: 2021}]->(d)
"""
ORG_STATE = """
MATCH (n) WHERE n.org_admin = true
OPTIONAL MATCH (n)-[r]->(m)
RETURN labels(n) AS labels, properties(n) AS props, type(r) AS rel, properties(r) AS rel_props
ORDER BY n.id
"""
SCHEMA_NAMES = "SHOW INDEXES YIELD name RETURN name"  # constraints are backed by indexes of the same name
DOCS = {
    "lighthouse.txt": "The Brightwater Lighthouse stands on Karsholm Island. Engineer Margaret Ellison designed the "
    "Brightwater Lighthouse in 1874. The Karsholm Harbour Trust owns the Brightwater Lighthouse.",
    "volcano.txt": "Mount Teravik is a stratovolcano on the Hallgrim Peninsula. The Hallgrim Volcano Observatory "
    "watches Mount Teravik. Ingrid Saeter leads the Hallgrim Volcano Observatory.",
    "roastery.txt": "Kettle Ridge Roasters roasts coffee in Ashford Vale. Daniel Okafor roasts the Yirgacheffe beans "
    "at Kettle Ridge Roasters. Kettle Ridge Roasters ships coffee in compostable bags.",
}


def _rows(driver: Driver, query: str) -> list[dict[str, Any]]:
    records, _, _ = driver.execute_query(query, database_=DB)
    return [r.data() for r in records]


@pytest.fixture
def org(neo4j_uri: str) -> Iterator[Driver]:
    """The organization's database: its own nodes, relationship, constraint, index and GDS graph."""
    with GraphDatabase.driver(neo4j_uri, auth=None) as driver:
        driver.execute_query(CLEAR, database_=DB)
        for statement in ORG_SCHEMA:
            driver.execute_query(statement, database_=DB)
        driver.execute_query(ORG_DATA, database_=DB)
        driver.execute_query("CALL gds.graph.project('org-admin-graph', 'Customer', '*')", database_=DB)
        try:
            yield driver
        finally:
            driver.execute_query("CALL gds.graph.drop('org-admin-graph', false)", database_=DB)
            driver.execute_query(CLEAR, database_=DB)
            for name in ("org_admin_customer_id", "org_admin_contract_title"):
                kind = "CONSTRAINT" if name.endswith("_id") else "INDEX"
                driver.execute_query(f"DROP {kind} {name} IF EXISTS", database_=DB)


def _site(home: Path, site_id: str, neo4j_uri: str, *args: str, ok: bool = True) -> Result:
    env: dict[str, str | None] = {
        "HANSA_SITE_SITE_ID": site_id, "HANSA_GRAPH_BACKEND": "neo4j", "HANSA_NEO4J_URI": neo4j_uri,
        "HANSA_NEO4J_PASSWORD": "", "HANSA_CONFIG": None,
    }
    result = CliRunner().invoke(main, ["--home", str(home), "site", *args], env=env, catch_exceptions=False)
    assert (result.exit_code == 0) == ok, result.output
    return result


def test_site_lifecycle_in_an_organizations_database(org: Driver, neo4j_uri: str, tmp_path: Path) -> None:
    org_before = _rows(org, ORG_STATE)
    schema_before = {r["name"] for r in _rows(org, SCHEMA_NAMES)}
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    home_a, home_b = tmp_path / "a", tmp_path / "b"

    _site(home_a, "harbour", neo4j_uri, "install")
    _site(home_a, "harbour", neo4j_uri, "ingest", "--no-progress", str(docs))
    _site(home_a, "harbour", neo4j_uri, "communities", "--no-progress")
    asked = json.loads(_site(home_a, "harbour", neo4j_uri, "query", "--json", "Who leads the Hallgrim Volcano Observatory?").stdout)
    assert asked["citations"][0]["doc_id"] == "docs/volcano.txt"
    assert asked["citations"][0]["source"] == "volcano.txt" and "Ingrid Saeter" in asked["answer"]

    # a second site on the same database is refused, naming the first; nothing changes
    hansa_nodes = _rows(org, "MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') RETURN count(n) AS n")
    refused = _site(home_b, "other-site", neo4j_uri, "install", ok=False)
    assert "already holds site 'harbour'" in refused.output and "other-site" in refused.output
    assert _rows(org, "MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') RETURN count(n) AS n") == hansa_nodes

    # delete: graph, vectors, and communities refreshed with seeded GDS Leiden
    deleted = _site(home_a, "harbour", neo4j_uri, "delete", "--no-progress", "docs/volcano.txt")
    assert "deleted: docs/volcano.txt" in deleted.output and "communities refreshed" in deleted.output
    assert _rows(org, "MATCH (d:HansaDocument) RETURN d.id AS id ORDER BY id") == [
        {"id": "docs/lighthouse.txt"}, {"id": "docs/roastery.txt"}]
    held = _rows(org, "MATCH (c:HansaCommunity) UNWIND c.doc_ids AS d RETURN DISTINCT d")
    assert held and {"d": "docs/volcano.txt"} not in held
    assert _rows(org, "MATCH (e:HansaEntity) WHERE e.hansa_seed IS NOT NULL RETURN count(e) AS n") == [{"n": 0}]
    again = json.loads(_site(home_a, "harbour", neo4j_uri, "query", "--json", "Who leads the Hallgrim Volcano Observatory?").stdout)
    assert "docs/volcano.txt" not in {c["doc_id"] for c in again["citations"]}

    # a projection left behind by a crashed run is hansa's to drop; the organization's is not
    org.execute_query("CALL gds.graph.project('hansa-leiden-leftover', 'HansaEntity', '*')", database_=DB)
    result = _site(home_a, "harbour", neo4j_uri, "uninstall", "--yes")
    assert "graph.projections: hansa-leiden-leftover" in result.output and "collections: chunks, summaries" in result.output
    assert _rows(org, "MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') RETURN count(n) AS n") == [{"n": 0}]
    assert _rows(org, "MATCH ()-[r]->() WHERE type(r) STARTS WITH 'HANSA_' RETURN count(r) AS n") == [{"n": 0}]
    schema_after = {r["name"] for r in _rows(org, SCHEMA_NAMES)}
    assert not any(name.startswith("hansa_") for name in schema_after)
    assert schema_after == {n for n in schema_before if not n.startswith("hansa_")}
    assert {"org_admin_customer_id", "org_admin_contract_title"} <= schema_after
    assert _rows(org, ORG_STATE) == org_before
    graphs = {r["graphName"] for r in _rows(org, "CALL gds.graph.list() YIELD graphName RETURN graphName")}
    assert "org-admin-graph" in graphs and not any(g.startswith("hansa-") for g in graphs)
    assert not (home_a / "site.json").exists() and (home_a / "keys" / "site-ed25519.pem").exists()  # key kept
    status = _site(home_a, "harbour", neo4j_uri, "status")
    assert "installed: no" in status.output

    # the database is free: the other site installs now
    _site(home_b, "other-site", neo4j_uri, "install")
    _site(home_b, "other-site", neo4j_uri, "uninstall", "--yes", "--delete-keys")
    assert not (home_b / "keys" / "site-ed25519.pem").exists()
