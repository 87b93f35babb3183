// Ids of the entities the given documents mention: where an edit touched the entity graph (what a
// local community refresh re-clusters, plugin/communities.py).
UNWIND $doc_ids AS doc_id
MATCH (:HansaDocument {id: doc_id})-[:HANSA_HAS_CHUNK]->(:HansaChunk)-[:HANSA_MENTIONS]->(e:HansaEntity)
RETURN DISTINCT e.id AS entity_id
