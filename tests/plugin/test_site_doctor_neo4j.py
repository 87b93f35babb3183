"""`hansa site doctor` on the real Neo4j + GDS: every graph check passes after install (Neo4j 5.x,
GDS with Leiden, hansa's constraints and index), a dropped constraint fails the schema check with
the fix (and install repairs it), and an unreachable server fails first and skips the rest."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from neo4j import GraphDatabase

from hansa.cli import main

pytestmark = pytest.mark.neo4j

GRAPH_CHECKS = ("neo4j reachable", "neo4j version", "gds plugin", "graph schema")


def site(home: Path, uri: str, *args: str) -> Result:
    env = {"HANSA_SITE_SITE_ID": "doctor-site", "HANSA_GRAPH_BACKEND": "neo4j", "HANSA_NEO4J_URI": uri,
           "HANSA_NEO4J_PASSWORD": "", "HANSA_CONFIG": None, "HANSA_SITE_GATEWAY_URL": None}
    return CliRunner().invoke(main, ["--home", str(home), "site", *args], env=env, catch_exceptions=False)


def graph_checks(result: Result) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads(result.stdout)["checks"] if c["name"] in GRAPH_CHECKS}


def test_doctor_on_neo4j_and_gds(neo4j_uri: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert site(home, neo4j_uri, "install").exit_code == 0
    try:
        found = graph_checks(site(home, neo4j_uri, "doctor", "--json"))
        assert [c["status"] for c in found.values()] == ["pass"] * 4, found
        assert found["neo4j version"]["detail"].startswith("Neo4j 5.")
        assert found["gds plugin"]["detail"].startswith("GDS 2.") and "Leiden" in found["gds plugin"]["detail"]
        assert found["graph schema"]["detail"] == "schema v3 of site doctor-site, 5 constraints/indexes present"

        with GraphDatabase.driver(neo4j_uri, auth=None) as driver:
            driver.execute_query("DROP CONSTRAINT hansa_chunk_id", database_="neo4j")
        broken = site(home, neo4j_uri, "doctor")
        assert broken.exit_code == 1
        assert "FAIL  graph schema: missing from database 'neo4j': constraint hansa_chunk_id" in broken.stdout
        assert "fix: run `hansa site install`" in broken.stdout
        assert site(home, neo4j_uri, "install").exit_code == 0  # the fix it names
        assert graph_checks(site(home, neo4j_uri, "doctor", "--json"))["graph schema"]["status"] == "pass"
    finally:
        assert site(home, neo4j_uri, "uninstall", "--yes").exit_code == 0


def test_an_unreachable_neo4j_fails_first_and_skips_the_rest(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"bolt://127.0.0.1:{sock.getsockname()[1]}"
    res = site(tmp_path / "home", dead, "doctor", "--json")
    assert res.exit_code == 1
    found = graph_checks(res)
    assert found["neo4j reachable"]["status"] == "fail" and f"cannot reach Neo4j at {dead}" in found["neo4j reachable"]["detail"]
    assert [found[n]["status"] for n in GRAPH_CHECKS[1:]] == ["skip"] * 3
