// One relationship per (source, target, document), directed source -> target (source < target);
// the GDS projection reads them undirected and sums parallel weights.
// Rows are grouped by (document, source): {doc_id, source, targets, weights, descriptions}, so the
// source entity is looked up once per group (measured: about half the server CPU of one row per
// relationship, and a third of the bytes; benchmarks/README.md, ingest).
UNWIND $rows AS row
MATCH (a:HansaEntity {id: row.source})
UNWIND range(0, size(row.targets) - 1) AS i
MATCH (b:HansaEntity {id: row.targets[i]})
CREATE (a)-[:HANSA_RELATED {doc_id: row.doc_id, weight: row.weights[i], description: row.descriptions[i]}]->(b)
