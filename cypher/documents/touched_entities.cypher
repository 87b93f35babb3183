// Entities that the given documents mention or relate: the candidates for orphan removal once
// the documents are gone or replaced.
UNWIND $doc_ids AS doc_id
MATCH (:HansaDocument {id: doc_id})-[:HANSA_HAS_CHUNK]->(:HansaChunk)-[:HANSA_MENTIONS]->(e:HansaEntity)
RETURN DISTINCT e.id AS id
UNION
UNWIND $doc_ids AS doc_id
MATCH (a:HansaEntity)-[:HANSA_RELATED {doc_id: doc_id}]->(b:HansaEntity)
UNWIND [a.id, b.id] AS id
RETURN DISTINCT id
