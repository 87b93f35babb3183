// Relations inside the entity set, parallel ones (one per document) summed.
UNWIND $entity_ids AS entity_id
MATCH (a:HansaEntity {id: entity_id})-[r:HANSA_RELATED]->(b:HansaEntity)
WHERE b.id IN $entity_ids
RETURN a.id AS source, b.id AS target, sum(r.weight) AS weight
ORDER BY weight DESC, source, target
