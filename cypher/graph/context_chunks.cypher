// Chunks mentioning most of the entity set; ties by total mention count, then chunk id.
UNWIND $entity_ids AS entity_id
MATCH (e:HansaEntity {id: entity_id})<-[m:HANSA_MENTIONS]-(c:HansaChunk)
WITH c, count(DISTINCT e) AS entities, sum(m.count) AS mentions
ORDER BY entities DESC, mentions DESC, c.id
LIMIT $limit
MATCH (d:HansaDocument)-[:HANSA_HAS_CHUNK]->(c)
RETURN c.id AS chunk_id, d.id AS doc_id, d.title AS title, c.text AS text, c.page AS page, d.source AS source, entities, mentions
ORDER BY entities DESC, mentions DESC, chunk_id
