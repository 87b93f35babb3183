// Entities no chunk mentions any more (their relations and community links go with them).
UNWIND $entity_ids AS entity_id
MATCH (e:HansaEntity {id: entity_id})
WHERE NOT EXISTS { (e)<-[:HANSA_MENTIONS]-(:HansaChunk) }
DETACH DELETE e
