// The seed partition itself (related entities): the result when Leiden, started from it, found
// no move to make.
MATCH (e:HansaEntity)
WHERE e.hansa_seed IS NOT NULL
  AND (EXISTS { (e)<-[:HANSA_MENTIONS]-(:HansaChunk)-[:HANSA_MENTIONS]->(o:HansaEntity) WHERE o <> e }
       OR EXISTS { (e)-[:HANSA_LINKED]-(:HansaEntity) })
RETURN e.id AS entity_id, e.hansa_seed AS seed
