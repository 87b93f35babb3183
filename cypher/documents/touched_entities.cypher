// Entities that the given documents mention: the candidates for orphan removal once the documents
// are gone or replaced (an entity's relations are its co-mentions, so they go with its mentions).
// Element ids, read before anything is deleted, are valid until the transaction ends; orphan
// removal looks entities up by them (documents/drop_orphans says why).
UNWIND $doc_ids AS doc_id
MATCH (:HansaDocument {id: doc_id})-[:HANSA_HAS_CHUNK]->(:HansaChunk)-[:HANSA_MENTIONS]->(e:HansaEntity)
RETURN DISTINCT elementId(e) AS element_id
