// Entities with at least one relation, in id order: each its own community when Leiden, started
// from singletons, found no move to make.
MATCH (e:HansaEntity)
WHERE EXISTS { (e)-[:HANSA_RELATED]-(:HansaEntity) }
RETURN e.id AS entity_id
ORDER BY entity_id
