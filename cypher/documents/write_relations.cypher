// One relationship per (source, target, document), directed source -> target (source < target);
// the GDS projection reads them undirected and sums parallel weights.
UNWIND $rows AS row
MATCH (a:HansaEntity {id: row.source})
MATCH (b:HansaEntity {id: row.target})
CREATE (a)-[:HANSA_RELATED {doc_id: row.doc_id, weight: row.weight, description: row.description}]->(b)
