// Documents with their chunks (and so their mentions); unknown ids are ignored.
UNWIND $doc_ids AS doc_id
MATCH (d:HansaDocument {id: doc_id})
OPTIONAL MATCH (d)-[:HANSA_HAS_CHUNK]->(c:HansaChunk)
WITH d, collect(c) AS chunks
FOREACH (c IN chunks | DETACH DELETE c)
DETACH DELETE d
