"""One `graph_store` fixture, parametrized over both GraphStore implementations.

Every contract test runs on the embedded store (a fresh SQLite file per test) and on the real
Neo4j + GDS from the session fixture `neo4j_uri` (cleared of hansa data before each test).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from hansa.adapters.graph.base import GraphStore

# Only hansa's namespaced data is removed: an organization's own nodes would be left alone.
CLEAR_HANSA = "MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') DETACH DELETE n"


def _clear_neo4j(uri: str) -> None:
    from neo4j import GraphDatabase

    with GraphDatabase.driver(uri, auth=None) as driver:
        driver.execute_query(CLEAR_HANSA, database_="neo4j")


def _open(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> GraphStore:
    if backend == "embedded":
        from hansa.adapters.graph.embedded import EmbeddedGraphStore

        return EmbeddedGraphStore(tmp_path / "graph.sqlite")
    # Resolved lazily so that `-k embedded` runs without starting Neo4j.
    uri = request.getfixturevalue("neo4j_uri")
    _clear_neo4j(uri)
    from hansa.adapters.graph.neo4j_gds import Neo4jGraphStore

    return Neo4jGraphStore(uri, "neo4j", "", "neo4j")


@pytest.fixture(params=["embedded", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def graph_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    """An installed, empty graph store of each backend."""
    store = _open(request.param, request, tmp_path)
    try:
        store.install()
        yield store
    finally:
        store.close()
