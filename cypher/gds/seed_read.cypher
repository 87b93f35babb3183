// The seed partition itself (entities with a relation): the result when Leiden, started from it,
// found no move to make.
MATCH (e:HansaEntity)
WHERE e.hansa_seed IS NOT NULL AND EXISTS { (e)-[:HANSA_RELATED]-(:HansaEntity) }
RETURN e.id AS entity_id, e.hansa_seed AS seed
