// Chunks by id with their document; the caller restores the requested order.
UNWIND $chunk_ids AS chunk_id
MATCH (d:HansaDocument)-[:HANSA_HAS_CHUNK]->(c:HansaChunk {id: chunk_id})
RETURN c.id AS chunk_id, d.id AS doc_id, d.title AS title, c.text AS text, c.page AS page, d.source AS source
