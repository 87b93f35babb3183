"""Bring your own graph (`[site.graph_map]`, `hansa site map`) on a real Neo4j + GDS.

An "organization" graph is created under labels unique to this module (documents with text,
persons and organizations, mentions, employment and partnership relationships, and unrelated nodes
beside them); the site maps it, builds communities, publishes, answers a question whose answer is
only in one mapped document's text, re-maps (a no-op), follows a change, and uninstalls. The
organization's nodes, relationships and every property are compared, by count and by a checksum,
before and after each step. The session's Neo4j is shared: the module removes its own data and
hansa's before and after itself.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from neo4j import Driver

from hansa.cli import main
from hansa.core.config import load_config
from hansa.core.errors import BackendError, ConfigError
from hansa.plugin.retrieval import retrieve
from hansa.plugin.site import SiteContext
from hansa.sync.wire import RetrieveRequest

pytestmark = pytest.mark.neo4j

SITE_ID = "byograph-test"
DB = "neo4j"
PREFIX = "ByoT"  # every label of the organization's fixture starts with it
CLEAR = (f"MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH '{PREFIX}' OR l STARTS WITH 'Hansa') "
         "DETACH DELETE n")
ORG_NODES = """
MATCH (n) WHERE none(l IN labels(n) WHERE l STARTS WITH 'Hansa')
RETURN elementId(n) AS id, labels(n) AS labels, properties(n) AS props ORDER BY id
"""
ORG_RELS = """
MATCH (a)-[r]->(b) WHERE NOT type(r) STARTS WITH 'HANSA_'
RETURN elementId(r) AS id, type(r) AS type, properties(r) AS props, elementId(a) AS a, elementId(b) AS b ORDER BY id
"""
# Hansa relationships that touch a node outside hansa's namespace: there must never be one.
CROSSING = """
MATCH (a)-[r]-(b) WHERE type(r) STARTS WITH 'HANSA_' AND none(l IN labels(b) WHERE l STARTS WITH 'Hansa')
RETURN count(r) AS n
"""
ANSWER_DOC = "doc-lighthouse"
ANSWER_TEXT = ("The Karsholm lighthouse was rebuilt in 1887 by the engineer Margit Vasquez after the winter storm "
               "destroyed its lantern room. Its new lens was cast in Paris and carried up the coast by rail.")
QUESTION = "Who rebuilt the Karsholm lighthouse?"

FIRST = ["Alma", "Bruno", "Carla", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kira", "Lars"]
LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Brennan", "Castillo", "Novak", "Haddad", "Ferreira", "Kowalski"]
TOPICS = ["harbour dredging", "wind turbines", "grain exports", "rail freight", "fish stocks", "port tariffs",
          "ferry schedules", "cold storage", "ship repair", "customs software"]
ORG_WORDS = ["Maritime", "Logistics", "Holdings", "Shipping", "Energy", "Trading"]


def _organization(seed: int = 7) -> dict[str, Any]:
    """A deterministic organization graph: 10 clusters, each 8 people and 4 companies around a topic;
    300 documents that mention 2-4 of a cluster's entities by name (and sometimes one by a
    relationship only); employment and partnership relationships inside clusters, a few across."""
    rng = random.Random(seed)
    names = [f"{f} {l}" for f in FIRST for l in LAST]
    rng.shuffle(names)
    clusters = []
    for c, topic in enumerate(TOPICS):
        people = names[c * 8:(c + 1) * 8]
        companies = [f"{w} {topic.split()[0].title()} {c}" for w in rng.sample(ORG_WORDS, 4)]
        clusters.append((topic, people, companies))
    docs, mentions = [], []
    for i in range(300):
        topic, people, companies = clusters[i % len(clusters)]
        named = rng.sample(people, 2) + rng.sample(companies, 1)
        text = (f"{named[0]} met {named[1]} to review {topic} with {named[2]}. "
                f"The meeting on {topic} set targets for the next quarter, and {named[1]} will report back. "
                f"Notes filed under item {i}.")
        linked = list(named)
        if i % 7 == 0:
            linked.append(rng.choice([p for p in people if p not in named]))  # named in no text: a relationship only
        docs.append({"uid": f"doc-{i:04d}", "headline": f"Minutes {i}: {topic}", "body": text})
        mentions += [{"doc": f"doc-{i:04d}", "name": n} for n in linked]
    docs.append({"uid": ANSWER_DOC, "headline": "Karsholm lighthouse history", "body": ANSWER_TEXT})
    mentions.append({"doc": ANSWER_DOC, "name": "Margit Vasquez"})
    people = [{"name": p} for _, ps, _ in clusters for p in ps] + [{"name": "Margit Vasquez"}, {"name": "Unmentioned Person"}]
    companies = [{"name": o} for _, _, os in clusters for o in os]
    works = [{"a": p, "b": rng.choice(os)} for _, ps, os in clusters for p in ps]
    partners = [{"a": os[0], "b": os[1]} for _, _, os in clusters] + [{"a": os[2], "b": os[3]} for _, _, os in clusters]
    partners += [{"a": clusters[c][2][0], "b": clusters[(c + 1) % len(clusters)][2][0]} for c in range(3)]
    works.append({"a": "Unmentioned Person", "b": clusters[0][2][0]})
    return {"docs": docs, "mentions": mentions, "people": people, "companies": companies, "works": works,
            "partners": partners}


CREATE_ORG = [
    ("UNWIND $docs AS d CREATE (:ByoTDoc {uid: d.uid, headline: d.headline, body: d.body, classification: 'internal'})", "docs"),
    ("UNWIND $people AS p CREATE (:ByoTPerson:ByoTAgent {name: p.name, since: date('2019-03-01')})", "people"),
    ("UNWIND $companies AS o CREATE (:ByoTCompany {name: o.name, vat: 'EU' + toString(size(o.name))})", "companies"),
    ("UNWIND $mentions AS m MATCH (d:ByoTDoc {uid: m.doc}) MATCH (e {name: m.name}) WHERE e:ByoTPerson OR e:ByoTCompany "
     "CREATE (d)-[:BYOT_MENTIONS {confidence: 0.9}]->(e)", "mentions"),
    ("UNWIND $works AS w MATCH (a:ByoTPerson {name: w.a}) MATCH (b:ByoTCompany {name: w.b}) "
     "CREATE (a)-[:BYOT_WORKS_FOR {role: 'staff'}]->(b)", "works"),
    ("UNWIND $partners AS p MATCH (a:ByoTCompany {name: p.a}) MATCH (b:ByoTCompany {name: p.b}) "
     "CREATE (a)-[:BYOT_PARTNER_OF]->(b)", "partners"),
]
# Beside the mapped graph: documents hansa cannot use (no text, a list for text), and nodes it must not read.
EXTRA_ORG = """
CREATE (:ByoTDoc {uid: 'doc-empty', headline: 'Empty'})
CREATE (:ByoTDoc {uid: 'doc-list', headline: 'List', body: ['not', 'text']})
CREATE (a:ByoTAudit {at: datetime('2024-01-02T03:04:05Z'), who: 'dba'})
WITH a MATCH (d:ByoTDoc {uid: 'doc-0001'}) CREATE (a)-[:BYOT_REVIEWED {ok: true}]->(d)
"""

GRAPH_MAP = """
[site.graph_map]
document_label = "ByoTDoc"
document_id = "uid"
document_title = "headline"
document_text = "body"
entity_labels = ["ByoTPerson", "ByoTCompany"]
entity_name = "name"
mention_type = "BYOT_MENTIONS"
relation_types = ["BYOT_WORKS_FOR", "BYOT_PARTNER_OF"]
batch_docs = 64
"""


def _rows(driver: Driver, query: str, **params: Any) -> list[dict[str, Any]]:
    records, _, _ = driver.execute_query(query, parameters_=params, database_=DB)
    return [record.data() for record in records]


def _snapshot(driver: Driver) -> tuple[int, int, str]:
    """(nodes, relationships, checksum of every label, type, property and endpoint) outside hansa's namespace."""
    nodes, rels = _rows(driver, ORG_NODES), _rows(driver, ORG_RELS)
    digest = hashlib.sha256(json.dumps([nodes, rels], sort_keys=True, default=str).encode()).hexdigest()
    return len(nodes), len(rels), digest


@pytest.fixture(scope="module")
def organization(driver: Driver) -> dict[str, Any]:
    org = _organization()
    for query, key in CREATE_ORG:
        driver.execute_query(query, parameters_={key: org[key]}, database_=DB)
    driver.execute_query(EXTRA_ORG, database_=DB)
    return org


def _env(neo4j_uri: str) -> dict[str, str]:
    return {"HANSA_SITE_SITE_ID": SITE_ID, "HANSA_GRAPH_BACKEND": "neo4j", "HANSA_NEO4J_URI": neo4j_uri,
            "HANSA_NEO4J_PASSWORD": ""}


def _home(tmp_path: Path, mapping: str = GRAPH_MAP) -> Path:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "hansa.toml").write_text(mapping, encoding="utf-8")
    return home


def _run(home: Path, neo4j_uri: str, *args: str, ok: bool = True) -> Result:
    env: dict[str, str | None] = {**_env(neo4j_uri), "HANSA_CONFIG": None}
    result = CliRunner().invoke(main, ["--home", str(home), "site", *args], env=env, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def _json(result: Result) -> dict[str, Any]:
    """The --json object a command printed on stdout (log lines go to stderr)."""
    return json.loads(result.stdout)


def _config(home: Path, neo4j_uri: str):
    return load_config(env={"HANSA_HOME": str(home), **_env(neo4j_uri)})


def test_mapped_graph_builds_communities_answers_and_leaves_the_organization_untouched(
        driver: Driver, organization: dict[str, Any], neo4j_uri: str, tmp_path: Path) -> None:
    before = _snapshot(driver)
    assert before[0] >= 300 + 120 + 5 and before[1] >= 1000  # a non-trivial graph
    home = _home(tmp_path)

    def untouched(step: str) -> None:
        assert _snapshot(driver) == before, f"{step} changed the organization's graph"
        assert _rows(driver, CROSSING)[0]["n"] == 0, f"{step} linked hansa's nodes to the organization's"

    _run(home, neo4j_uri, "install")
    untouched("install")

    report = _json(_run(home, neo4j_uri, "map", "--no-progress", "--json"))
    untouched("map")
    assert report["documents_seen"] == 303 and report["documents_new"] == 301
    assert report["documents_skipped"] == 2 and report["documents_without_id"] == 0
    assert sorted(s.split(":")[0] for s in report["skipped"]) == ["doc-empty", "doc-list"]
    # 120 cluster entities + Margit Vasquez; "Unmentioned Person" has no document, so no node
    assert report["entities"] == 121
    assert report["mentions_unplaced"] == len(range(0, 300, 7))  # the relationship-only mentions
    assert report["relations_read"] == len(organization["works"]) + len(organization["partners"])
    assert report["relations_written"] == report["relations_read"] - 1  # the unmentioned person's job is left out
    docs = {r["id"]: r for r in _rows(driver, "MATCH (d:HansaDocument) RETURN d.id AS id, d.title AS title, d.source AS source")}
    assert len(docs) == 301 and docs[f"graph/{ANSWER_DOC}"]["title"] == "Karsholm lighthouse history"
    assert docs[f"graph/{ANSWER_DOC}"]["source"] == f"graph:{ANSWER_DOC}"
    entity = _rows(driver, "MATCH (e:HansaEntity {id: 'margit vasquez'}) RETURN e.name AS name, e.kind AS kind")
    assert entity == [{"name": "Margit Vasquez", "kind": "ByoTPerson"}]
    links = _rows(driver, "MATCH (:HansaEntity)-[l:HANSA_LINKED]->(:HansaEntity) RETURN count(l) AS n, sum(l.weight) AS w")[0]
    assert links["n"] == report["relations_written"] and links["w"] == report["relations_read"] - 1

    built = _json(_run(home, neo4j_uri, "communities", "--no-progress", "--json"))
    assert built["communities"] >= 5
    untouched("communities")
    # The mapped relations shape the communities: a company and its employees (related only by
    # BYOT_WORKS_FOR when no minutes name them together) mostly share a community.
    members = {r["e"]: r["c"] for r in _rows(driver, "MATCH (e:HansaEntity)-[:HANSA_IN_COMMUNITY]->(c:HansaCommunity) "
                                                   "WHERE c.level = 0 RETURN e.id AS e, c.id AS c")}
    pairs = [(w["a"].lower(), w["b"].lower()) for w in organization["works"] if w["a"] != "Unmentioned Person"]
    together = sum(1 for a, b in pairs if a in members and members.get(a) == members.get(b))
    assert together >= 0.6 * len(pairs), (together, len(pairs))

    envelope = tmp_path / "publication.json"
    out = _run(home, neo4j_uri, "publish", "--out", str(envelope)).output
    assert "sequence: 1" in out and envelope.is_file()
    untouched("publish")

    with SiteContext.open(_config(home, neo4j_uri)) as ctx:
        answer = retrieve(ctx, RetrieveRequest(question=QUESTION, top_k=3))
    assert answer.citations and answer.citations[0].doc_id == f"graph/{ANSWER_DOC}", answer.citations
    assert any("1887" in s[0] and "Margit Vasquez" in s[0] for s in answer.sentences), answer.sentences
    untouched("retrieval")

    again = _json(_run(home, neo4j_uri, "map", "--no-progress", "--json"))
    assert again["documents_unchanged"] == 301 and again["documents_new"] == again["documents_changed"] == 0
    assert again["chunks"] == 0 and again["relations_written"] == report["relations_written"]
    untouched("re-map")

    _run(home, neo4j_uri, "uninstall", "--yes", "--no-withdraw")
    untouched("uninstall")
    assert _rows(driver, "MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') RETURN count(n) AS n")[0]["n"] == 0
    assert _rows(driver, "MATCH ()-[r]->() WHERE type(r) STARTS WITH 'HANSA_' RETURN count(r) AS n")[0]["n"] == 0


def test_a_changed_organization_graph_is_followed(driver: Driver, organization: dict[str, Any], neo4j_uri: str,
                                                  tmp_path: Path) -> None:
    """A document whose text changed is rewritten, one removed leaves the site, the rest is skipped."""
    home = _home(tmp_path)
    _run(home, neo4j_uri, "install")
    try:
        _run(home, neo4j_uri, "map", "--no-progress", "--json")
        # The organization changes its own data (the test plays the organization here).
        driver.execute_query("MATCH (d:ByoTDoc {uid: 'doc-0002'}) SET d.body = d.body + ' Amended: Lars Okafor joined.'", database_=DB)
        driver.execute_query("MATCH (d:ByoTDoc {uid: 'doc-0003'}) SET d:ByoTArchived REMOVE d:ByoTDoc", database_=DB)
        before = _snapshot(driver)
        report = _json(_run(home, neo4j_uri, "map", "--no-progress", "--json"))
        assert _snapshot(driver) == before
        assert report["documents_changed"] == 1 and report["documents_new"] == 0
        assert report["documents_unchanged"] == 299 and report["documents_deleted"] == ["graph/doc-0003"]
        text = _rows(driver, "MATCH (:HansaDocument {id: 'graph/doc-0002'})-[:HANSA_HAS_CHUNK]->(c) RETURN c.text AS t")
        assert any("Amended" in r["t"] for r in text)
    finally:
        _run(home, neo4j_uri, "uninstall", "--yes", "--no-withdraw")
        driver.execute_query("MATCH (d:ByoTArchived {uid: 'doc-0003'}) SET d:ByoTDoc REMOVE d:ByoTArchived", database_=DB)
        driver.execute_query("MATCH (d:ByoTDoc {uid: 'doc-0002'}) SET d.body = replace(d.body, ' Amended: Lars Okafor joined.', '')",
                             database_=DB)


@pytest.mark.parametrize("setting, value, expected", [
    ("document_label", "ByoTMissing", r"no node has label 'ByoTMissing'.*ByoTDoc"),
    ("document_text", "content", r"no 'ByoTDoc' node has property 'content'.*body.*headline"),
    ("mention_type", "BYOT_CITES", r"no relationship has type 'BYOT_CITES'.*BYOT_MENTIONS"),
    ("entity_name", "label", r"no 'ByoTPerson' node has property 'label'.*name"),
])
def test_a_mapping_the_database_does_not_hold_is_refused_by_name(
        driver: Driver, organization: dict[str, Any], neo4j_uri: str, tmp_path: Path,
        setting: str, value: str, expected: str) -> None:
    before = _snapshot(driver)
    mapping = re.sub(rf'^{setting} = .*$', f'{setting} = "{value}"', GRAPH_MAP, flags=re.M)
    home = _home(tmp_path, mapping)
    _run(home, neo4j_uri, "install")
    try:
        result = _run(home, neo4j_uri, "map", "--no-progress", ok=False)
        assert result.exit_code == 1 and re.search(expected, result.output), result.output
        assert _rows(driver, "MATCH (d:HansaDocument) RETURN count(d) AS n")[0]["n"] == 0
        doctor = _run(home, neo4j_uri, "doctor", ok=False).output
        assert re.search(r"graph map.*" + expected, doctor), doctor
    finally:
        _run(home, neo4j_uri, "uninstall", "--yes", "--no-withdraw")
    assert _snapshot(driver) == before


def test_the_reader_refuses_a_write_and_nothing_is_written(driver: Driver, organization: dict[str, Any],
                                                           neo4j_uri: str, tmp_path: Path) -> None:
    """The guard the read-only claim rests on can fail: a writing statement through the reader is
    refused (the server's READ access mode), and the graph is unchanged."""
    from hansa.adapters.graph.neo4j_source import OrgGraphSource

    before = _snapshot(driver)
    cfg = _config(_home(tmp_path), neo4j_uri)
    with OrgGraphSource(cfg.neo4j, cfg.site.graph_map) as source:
        with pytest.raises(BackendError):
            source._read("MATCH (d:ByoTDoc {uid: 'doc-0001'}) SET d.body = 'overwritten' RETURN d", "probing")
        with pytest.raises(BackendError):
            source._read("CREATE (:ByoTProbe) RETURN 1", "probing")
        assert "303 ByoTDoc documents" in source.check()
    assert _snapshot(driver) == before


def test_the_embedded_store_is_refused_with_the_fix(tmp_path: Path) -> None:
    from hansa.plugin.graph_map import map_graph

    home = _home(tmp_path)
    cfg = load_config(env={"HANSA_HOME": str(home), "HANSA_SITE_SITE_ID": SITE_ID})
    assert cfg.graph.backend == "embedded" and cfg.site.graph_map.enabled
    with SiteContext.open(cfg) as ctx:
        with pytest.raises(ConfigError, match=r"backend is 'embedded'.*backend = 'neo4j'"):
            map_graph(ctx)


def test_a_source_name_bound_to_files_is_refused(driver: Driver, organization: dict[str, Any], neo4j_uri: str,
                                                 tmp_path: Path) -> None:
    from hansa.plugin.sources import save_roots

    home = _home(tmp_path)
    _run(home, neo4j_uri, "install")
    try:
        save_roots(home, {"graph": tmp_path / "docs"})
        result = _run(home, neo4j_uri, "map", "--no-progress", ok=False)
        assert result.exit_code == 1 and "source 'graph' already names the files ingested from" in result.output
        assert _rows(driver, "MATCH (d:HansaDocument) RETURN count(d) AS n")[0]["n"] == 0
    finally:
        _run(home, neo4j_uri, "uninstall", "--yes", "--no-withdraw")
