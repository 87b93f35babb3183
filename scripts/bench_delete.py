"""Deleting a site's documents from its graph store (`hansa site delete`, `ingest --sync`): Neo4j
as hansa does it now, against the statements it ran before (kept here), and the embedded store.

Data: the first `--passages` SQuAD paragraphs in file order (CC BY-SA 4.0; `../shared/datasets/squad`),
read, chunked and extracted untimed, then written through the store's `write_documents` in
ingest's 64-document batches (untimed). Timed: one `delete_documents` call for every document in
one transaction, which also removes the entities no chunk mentions any more.

Arms (each on a store just written, the same graph):
- `neo4j_by_id`: the statements before this benchmark existed: orphaned entities looked up by id
  through the unique index, after the documents' deletion in the same transaction. Neo4j's index
  seeks in a transaction cost time in proportion to what it has already deleted, so this grows
  with the square of the site's size.
- `neo4j`: the store's own `delete_documents` (entities looked up by the element ids read before
  anything is deleted).
- `embedded`: the embedded store's `delete_documents`.
Each arm must leave no document, chunk or entity behind (checked with `stats()`).

    python scripts/bench_delete.py [--smoke] [--passages 10000] [--out benchmarks/delete.json]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from bench_ingest import BATCH_DOCS, document_graphs, site_config, write_corpus  # noqa: E402
from benchlib import Stopwatch, progress, rate  # noqa: E402

# Before: entities by id, looked up through the unique index after the deletes (see the docstring).
BY_ID_TOUCHED = """
UNWIND $doc_ids AS doc_id
MATCH (:HansaDocument {id: doc_id})-[:HANSA_HAS_CHUNK]->(:HansaChunk)-[:HANSA_MENTIONS]->(e:HansaEntity)
RETURN DISTINCT e.id AS id
"""
BY_ID_DROP_ORPHANS = """
UNWIND $entity_ids AS entity_id
MATCH (e:HansaEntity {id: entity_id})
WHERE NOT EXISTS { (e)<-[:HANSA_MENTIONS]-(:HansaChunk) }
DETACH DELETE e
"""


def delete_by_id(store: Any, doc_ids: list[str]) -> None:
    from hansa.adapters.graph.neo4j_gds import BATCH_ROWS
    from hansa.cypher import load

    def work(tx: Any) -> None:
        touched = [r["id"] for r in tx.run(BY_ID_TOUCHED, doc_ids=doc_ids)]
        tx.run(load("documents/delete"), doc_ids=doc_ids).consume()
        for start in range(0, len(touched), BATCH_ROWS):
            tx.run(BY_ID_DROP_ORPHANS, entity_ids=touched[start:start + BATCH_ROWS]).consume()

    store._write(work, "deleting documents (before)")


def arm(name: str, backend: str, corpus: Path, uri: str | None, workdir: Path) -> dict[str, Any]:
    from hansa.plugin.site import SiteContext

    ctx = SiteContext.open(site_config(workdir / name, backend, uri))
    try:
        ctx.graph.install()
        _, docs, graphs = document_graphs(ctx, corpus)
        with Stopwatch() as write:
            for i in range(0, len(graphs), BATCH_DOCS):
                ctx.graph.write_documents(graphs[i:i + BATCH_DOCS])
        before = ctx.graph.stats()
        doc_ids = [d.id for d in docs]
        with Stopwatch() as sw:
            if name == "neo4j_by_id":
                delete_by_id(ctx.graph, doc_ids)
            else:
                ctx.graph.delete_documents(doc_ids)
        after = ctx.graph.stats()
    finally:
        ctx.close()
    left = {"documents": after.documents, "chunks": after.chunks, "entities": after.entities}
    if any(left.values()):
        raise RuntimeError(f"{name}: the delete left {left}")
    progress(f"{name}: {len(doc_ids)} documents deleted in {sw.seconds:.2f} s")
    return {"documents": len(doc_ids), "chunks": before.chunks, "entities": before.entities,
            "write_seconds": round(write.seconds, 3), "delete_seconds": round(sw.seconds, 3),
            "documents_deleted_per_s": rate(len(doc_ids), sw.seconds), "left": left}


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("delete", __doc__.split("\n\n")[0])
    p.add_argument("--passages", type=int, default=None, help="SQuAD paragraphs (default 10000; smoke 200)")
    p.add_argument("--neo4j-uri", default=None, help="use this running Neo4j + GDS instead of starting one")
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    n = args.passages or (200 if args.smoke else 10000)
    report = benchlib.Report("delete", args.smoke, libraries=("neo4j", "igraph", "leidenalg"))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-delete-") as tmp:
        workdir = Path(tmp)
        corpus = workdir / "corpus.jsonl"
        report.params = {"corpus": "squad", "passages": write_corpus(corpus, n, "squad"), "batch_docs": BATCH_DOCS}
        results["embedded"] = arm("embedded", "embedded", corpus, None, workdir)
        server: dict[str, Any] = {}
        with benchlib.neo4j(args.neo4j_uri, server) as uri:
            for name in ("neo4j_by_id", "neo4j"):
                results[name] = arm(name, "neo4j", corpus, uri, workdir)
        server.pop("pid", None)
        report.results["server"] = server
    report.results["delete"] = results
    report.ratios["neo4j_vs_neo4j_by_id:delete_seconds"] = benchlib.ratio(
        results["neo4j"]["delete_seconds"], results["neo4j_by_id"]["delete_seconds"])
    report.ratios["neo4j_vs_embedded:delete_seconds"] = benchlib.ratio(
        results["neo4j"]["delete_seconds"], results["embedded"]["delete_seconds"])
    if args.smoke:
        report.note("smoke run: a site too small to show the by-id statements' growth")
    if args.neo4j_uri:
        report.note("Neo4j was given (--neo4j-uri): its store may have held other data while measuring")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
