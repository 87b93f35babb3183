UNWIND $doc_ids AS doc_id
MATCH (:HansaDocument {id: doc_id})-[:HANSA_HAS_CHUNK]->(c:HansaChunk)
RETURN c.id AS id
