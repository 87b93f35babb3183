// Entities related to another (a chunk mentions both, or a mapped relation links them), in id
// order: each its own community when Leiden, started from singletons, found no move to make.
MATCH (e:HansaEntity)
WHERE EXISTS { (e)<-[:HANSA_MENTIONS]-(:HansaChunk)-[:HANSA_MENTIONS]->(o:HansaEntity) WHERE o <> e }
   OR EXISTS { (e)-[:HANSA_LINKED]-(:HansaEntity) }
RETURN e.id AS entity_id
ORDER BY entity_id
