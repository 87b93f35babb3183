// Entities no chunk mentions and no relation touches any more (community links go with them).
UNWIND $entity_ids AS entity_id
MATCH (e:HansaEntity {id: entity_id})
WHERE NOT EXISTS { (e)<-[:HANSA_MENTIONS]-(:HansaChunk) }
  AND NOT EXISTS { (e)-[:HANSA_RELATED]-(:HansaEntity) }
DETACH DELETE e
