// Relations inside the entity set: each pair (source < target) weighs the number of chunks that
// mention both (DocumentGraph.co_mentions) plus the weight of a mapped relation (HANSA_LINKED).
CALL (){
  UNWIND $entity_ids AS entity_id
  MATCH (a:HansaEntity {id: entity_id})<-[:HANSA_MENTIONS]-(:HansaChunk)-[:HANSA_MENTIONS]->(b:HansaEntity)
  WHERE a.id < b.id AND b.id IN $entity_ids
  RETURN a.id AS source, b.id AS target, 1.0 AS w
  UNION ALL
  UNWIND $entity_ids AS entity_id
  MATCH (a:HansaEntity {id: entity_id})-[l:HANSA_LINKED]->(b:HansaEntity)
  WHERE b.id IN $entity_ids
  RETURN a.id AS source, b.id AS target, toFloat(l.weight) AS w
}
RETURN source, target, sum(w) AS weight
ORDER BY weight DESC, source, target
