// Entities that the given documents mention: the candidates for orphan removal once the documents
// are gone or replaced (an entity's relations are its co-mentions, so they go with its mentions).
UNWIND $doc_ids AS doc_id
MATCH (:HansaDocument {id: doc_id})-[:HANSA_HAS_CHUNK]->(:HansaChunk)-[:HANSA_MENTIONS]->(e:HansaEntity)
RETURN DISTINCT e.id AS id
