UNWIND $entity_ids AS entity_id
MATCH (e:HansaEntity {id: entity_id})
RETURN e.id AS id, e.name AS name
