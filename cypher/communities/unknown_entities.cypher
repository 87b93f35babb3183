// Member ids that are not entities of the graph (a community must only name existing entities).
UNWIND $entity_ids AS entity_id
OPTIONAL MATCH (e:HansaEntity {id: entity_id})
WITH entity_id, e
WHERE e IS NULL
RETURN collect(entity_id) AS unknown
