// Entities related to another (a chunk mentions both), in id order: each its own community when
// Leiden, started from singletons, found no move to make.
MATCH (e:HansaEntity)
WHERE EXISTS { (e)<-[:HANSA_MENTIONS]-(:HansaChunk)-[:HANSA_MENTIONS]->(o:HansaEntity) WHERE o <> e }
RETURN e.id AS entity_id
ORDER BY entity_id
