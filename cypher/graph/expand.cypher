// Chunks sharing entities with the seed chunks. Each shared entity weighs the summed weight of
// the relations tying it to the seeds' entities, a relation weighing the chunks that mention both
// (DocumentGraph.co_mentions: an entity central to the seeds' context counts most); a chunk scores
// the sum over its shared entities. Ties: more shared entities, then id.
UNWIND $chunk_ids AS seed_id
MATCH (:HansaChunk {id: seed_id})-[:HANSA_MENTIONS]->(e:HansaEntity)
WITH collect(DISTINCT e) AS seed_entities
UNWIND seed_entities AS e
OPTIONAL MATCH (e)<-[:HANSA_MENTIONS]-(:HansaChunk)-[:HANSA_MENTIONS]->(other:HansaEntity)
WHERE other IN seed_entities AND other <> e
WITH e, toFloat(count(other)) AS weight
MATCH (e)<-[:HANSA_MENTIONS]-(c:HansaChunk)
WHERE NOT c.id IN $chunk_ids
WITH c, sum(weight) AS score, count(e) AS shared
ORDER BY score DESC, shared DESC, c.id
LIMIT $limit
MATCH (d:HansaDocument)-[:HANSA_HAS_CHUNK]->(c)
RETURN c.id AS chunk_id, d.id AS doc_id, d.title AS title, c.text AS text, c.page AS page, d.source AS source, score, shared
ORDER BY score DESC, shared DESC, chunk_id
