"""Bring your own graph (`hansa site map`) on an organization graph of >= 10k nodes in a real Neo4j + GDS.

The organization's graph (built untimed, under labels `Bench*` of its own): the first
`--paragraphs` SQuAD paragraphs in file order (CC BY-SA 4.0; `../shared/datasets/squad`) as
`BenchDoc {uid, title, text}`; their articles as `BenchTopic {name}`; the names hansa's rule-based
extractor spots in each paragraph as `BenchEntity {name}` (standing in for an organization's
curated entities); `(doc)-[:BENCH_MENTIONS]->(topic|entity)`, `(entity)-[:BENCH_PART_OF]->(topic)`
once per entity and article it appears in, and `(topic)-[:BENCH_SEE_ALSO]->(next topic)`.

Timed, through the site's own functions: `map_graph` (read-only read, chunk, embed, write) and
`build_communities` (GDS Leiden over co-mentions + mapped relations, summaries, embeddings); then
`publish_summaries --out`, `--questions` SQuAD questions whose paragraph is mapped (hit@3: the
paragraph cited among the first three), and `uninstall_site`. The organization's node and
relationship counts and a SHA-256 over every label, property and endpoint are taken before and
after each step and must be identical (the run fails otherwise).

    python scripts/bench_byograph.py [--smoke] [--paragraphs 1500] [--questions 100] [--neo4j-uri URI]
                                     [--out benchmarks/byograph.json]
"""
from __future__ import annotations

import gzip
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from benchlib import Stopwatch, progress, rate  # noqa: E402

DB = "neo4j"
CLEAR = "MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Bench') CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS"
ORG_NODES = ("MATCH (n) WHERE none(l IN labels(n) WHERE l STARTS WITH 'Hansa') "
             "RETURN elementId(n) AS id, labels(n) AS labels, properties(n) AS props ORDER BY id")
ORG_RELS = ("MATCH (a)-[r]->(b) WHERE NOT type(r) STARTS WITH 'HANSA_' "
            "RETURN elementId(r) AS id, type(r) AS type, properties(r) AS props, elementId(a) AS a, elementId(b) AS b ORDER BY id")
BATCH = 2000


def organization(paragraphs: int) -> dict[str, list[dict[str, Any]]]:
    from hansa.core.entities import chunk_entities

    docs = benchlib.squad_documents(paragraphs)
    topics: dict[str, None] = {}
    entities: dict[str, str] = {}  # key -> name as first seen
    mentions, part_of = [], set()
    for d in docs:
        topics.setdefault(d["title"])
        mentions.append({"doc": d["id"], "name": d["title"], "label": "topic"})
        for key, name, _, _ in chunk_entities(d["text"]):
            name = entities.setdefault(key, name)
            mentions.append({"doc": d["id"], "name": name, "label": "entity"})
            part_of.add((name, d["title"]))
    names = list(topics)
    return {
        "docs": [{"uid": d["id"], "title": d["title"], "text": d["text"]} for d in docs],
        "topics": [{"name": t} for t in names],
        "entities": [{"name": n} for n in entities.values() if n not in topics],
        "mentions": mentions,
        "part_of": [{"a": a, "b": b} for a, b in sorted(part_of) if a != b],
        "see_also": [{"a": a, "b": b} for a, b in zip(names, names[1:])],
    }


CREATE = [
    ("docs", "UNWIND $rows AS d CREATE (:BenchDoc {uid: d.uid, title: d.title, text: d.text})"),
    ("topics", "UNWIND $rows AS t CREATE (:BenchTopic {name: t.name})"),
    ("entities", "UNWIND $rows AS e CREATE (:BenchEntity {name: e.name})"),
    ("mentions", "UNWIND $rows AS m MATCH (d:BenchDoc {uid: m.doc}) "
                 "CALL (m) { MATCH (t:BenchTopic {name: m.name}) RETURN t AS e UNION MATCH (x:BenchEntity {name: m.name}) RETURN x AS e } "
                 "MERGE (d)-[:BENCH_MENTIONS]->(e)"),
    ("part_of", "UNWIND $rows AS p MATCH (t:BenchTopic {name: p.b}) "
                "CALL (p) { MATCH (x:BenchEntity {name: p.a}) RETURN x AS e UNION MATCH (x:BenchTopic {name: p.a}) RETURN x AS e } "
                "CREATE (e)-[:BENCH_PART_OF]->(t)"),
    ("see_also", "UNWIND $rows AS s MATCH (a:BenchTopic {name: s.a}) MATCH (b:BenchTopic {name: s.b}) CREATE (a)-[:BENCH_SEE_ALSO]->(b)"),
]
INDEXES = ["CREATE INDEX bench_doc_uid IF NOT EXISTS FOR (n:BenchDoc) ON (n.uid)",
           "CREATE INDEX bench_topic_name IF NOT EXISTS FOR (n:BenchTopic) ON (n.name)",
           "CREATE INDEX bench_entity_name IF NOT EXISTS FOR (n:BenchEntity) ON (n.name)"]
DROP_INDEXES = ["DROP INDEX bench_doc_uid IF EXISTS", "DROP INDEX bench_topic_name IF EXISTS",
                "DROP INDEX bench_entity_name IF EXISTS"]


def clear(driver: Any) -> None:
    """The benchmark's own organization data (auto-commit: CALL ... IN TRANSACTIONS)."""
    with driver.session(database=DB) as session:
        session.run(CLEAR).consume()


def snapshot(driver: Any) -> dict[str, Any]:
    nodes, _, _ = driver.execute_query(ORG_NODES, database_=DB)
    rels, _, _ = driver.execute_query(ORG_RELS, database_=DB)
    payload = json.dumps([[r.data() for r in nodes], [r.data() for r in rels]], sort_keys=True, default=str)
    return {"nodes": len(nodes), "relationships": len(rels), "sha256": hashlib.sha256(payload.encode()).hexdigest()}


def site_config(home: Path, uri: str) -> Any:
    from hansa.core.config import Config

    cfg = Config(home=home)
    cfg.site.site_id = "bench-byograph"
    cfg.graph.backend = "neo4j"
    cfg.neo4j.uri = uri
    cfg.milvus.uri = str(home / "milvus.db")
    m = cfg.site.graph_map
    m.document_label, m.document_id, m.document_title, m.document_text = "BenchDoc", "uid", "title", "text"
    m.entity_labels, m.entity_name, m.mention_type = ["BenchEntity", "BenchTopic"], "name", "BENCH_MENTIONS"
    m.relation_types = ["BENCH_PART_OF", "BENCH_SEE_ALSO"]
    return cfg


def questions(mapped: set[str], limit: int) -> list[dict[str, Any]]:
    out = []
    with gzip.open(benchlib.dataset_dir("squad") / "questions.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            if q.get("answerable") and q.get("context_passage") in mapped:
                out.append(q)
                if len(out) >= limit:
                    break
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("byograph", __doc__.split("\n\n")[0])
    p.add_argument("--paragraphs", type=int, default=None, help="SQuAD paragraphs as documents (default 1500; smoke 150: three articles)")
    p.add_argument("--questions", type=int, default=None, help="SQuAD questions asked (default 100; smoke 5)")
    p.add_argument("--neo4j-uri", default=None, help="use this running Neo4j + GDS instead of starting one")
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    n = args.paragraphs or (150 if args.smoke else 1500)
    n_questions = args.questions or (5 if args.smoke else 100)
    report = benchlib.Report("byograph", args.smoke, libraries=("neo4j", "graphdatascience", "pymilvus"))
    from neo4j import GraphDatabase

    from hansa.plugin.communities import build_communities
    from hansa.plugin.graph_map import map_graph
    from hansa.plugin.install import install_site
    from hansa.plugin.publish import publish_summaries
    from hansa.plugin.retrieval import retrieve
    from hansa.plugin.site import SiteContext
    from hansa.plugin.uninstall import uninstall_site
    from hansa.sync.wire import RetrieveRequest

    org = organization(n)
    report.params = {"corpus": "squad", "paragraphs": len(org["docs"]), "questions": n_questions,
                     "labels": ["BenchDoc", "BenchEntity", "BenchTopic"], "relation_types": ["BENCH_PART_OF", "BENCH_SEE_ALSO"]}
    server: dict[str, Any] = {}
    steps: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-byograph-") as tmp, benchlib.neo4j(args.neo4j_uri, server) as uri, \
            GraphDatabase.driver(uri, auth=None) as driver:
        clear(driver)
        try:
            with Stopwatch() as build:
                for statement in INDEXES:
                    driver.execute_query(statement, database_=DB)
                for key, statement in CREATE:
                    rows = org[key]
                    for start in range(0, len(rows), BATCH):
                        driver.execute_query(statement, parameters_={"rows": rows[start:start + BATCH]}, database_=DB)
            before = snapshot(driver)
            progress(f"organization graph: {before['nodes']} nodes, {before['relationships']} relationships "
                     f"({build.seconds:.1f} s)")
            unchanged: dict[str, bool] = {}
            ctx = SiteContext.open(site_config(Path(tmp) / "home", uri))
            try:
                install_site(ctx)
                with Stopwatch() as sw:
                    mapped = map_graph(ctx)
                unchanged["map"] = snapshot(driver) == before
                steps["map"] = {"seconds": round(sw.seconds, 3), "documents_per_s": rate(mapped.documents_new, sw.seconds),
                                **{k: v for k, v in vars(mapped).items() if not isinstance(v, tuple)},
                                "documents_deleted": len(mapped.documents_deleted)}
                progress(f"map: {mapped.documents_new} documents, {mapped.chunks} chunks in {sw.seconds:.1f} s")
                with Stopwatch() as sw:
                    again = map_graph(ctx)
                steps["remap"] = {"seconds": round(sw.seconds, 3), "documents_unchanged": again.documents_unchanged,
                                  "documents_new": again.documents_new, "documents_changed": again.documents_changed}
                with Stopwatch() as sw:
                    built = build_communities(ctx)
                unchanged["communities"] = snapshot(driver) == before
                stats = ctx.graph.stats()
                steps["communities"] = {"seconds": round(sw.seconds, 3), "communities": built.communities,
                                        "graph": vars(stats)}
                progress(f"communities: {built.communities} in {sw.seconds:.1f} s")
                published = publish_summaries(ctx, out=Path(tmp) / "publication.json")
                unchanged["publish"] = snapshot(driver) == before
                steps["publish"] = {"summaries": published.summaries,
                                    "bytes": (Path(tmp) / "publication.json").stat().st_size}
                asked = questions({d["uid"] for d in org["docs"]}, n_questions)
                hits, times = 0, []
                for q in asked:
                    with Stopwatch() as sw:
                        answer = retrieve(ctx, RetrieveRequest(question=q["question"], top_k=3))
                    times.append(sw.seconds)
                    hits += any(c.doc_id == f"graph/{q['context_passage']}" for c in answer.citations[:3])
                unchanged["retrieval"] = snapshot(driver) == before
                steps["retrieval"] = {"questions": len(asked), "hit_at_3": round(hits / len(asked), 3) if asked else None,
                                      "latency_s": benchlib.percentiles(times) if times else None}
                with Stopwatch() as sw:
                    removed = uninstall_site(ctx, withdraw=False)
                unchanged["uninstall"] = snapshot(driver) == before
                steps["uninstall"] = {"seconds": round(sw.seconds, 3), "hansa_nodes_removed": removed.graph.nodes}
            finally:
                ctx.close()
            left, _, _ = driver.execute_query(
                "MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') RETURN count(n) AS n", database_=DB)
        finally:
            clear(driver)
            for statement in DROP_INDEXES:
                driver.execute_query(statement, database_=DB)
    server.pop("pid", None)
    report.results = {"server": server, "organization": {**before, "build_seconds": round(build.seconds, 3)},
                      "steps": steps, "organization_unchanged": unchanged, "hansa_nodes_left": left[0]["n"]}
    if not all(unchanged.values()) or left[0]["n"]:
        raise SystemExit(f"the organization's graph changed or hansa left nodes: {unchanged}, left {left[0]['n']}")
    report.target("organization nodes mapped", ">= 10000", before["nodes"], before["nodes"] >= 10_000)
    report.target("organization unchanged after map, communities, publish, retrieval, uninstall", "identical",
                  unchanged, all(unchanged.values()))
    if args.smoke:
        report.note("smoke run: a graph far below 10k nodes")
    if args.neo4j_uri:
        report.note("Neo4j was given (--neo4j-uri): its store may have held other data while measuring")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
