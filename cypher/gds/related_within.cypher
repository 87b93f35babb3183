// The entities of $entity_ids related to another of them, in id order: each its own community when
// Leiden on their subgraph (gds/project_within), started from singletons, found no move to make.
MATCH (e:HansaEntity)
WHERE e.id IN $entity_ids
  AND (EXISTS { (e)<-[:HANSA_MENTIONS]-(:HansaChunk)-[:HANSA_MENTIONS]->(o:HansaEntity) WHERE o <> e AND o.id IN $entity_ids }
       OR EXISTS { (e)-[:HANSA_LINKED]-(o:HansaEntity) WHERE o.id IN $entity_ids })
RETURN e.id AS entity_id
ORDER BY entity_id
