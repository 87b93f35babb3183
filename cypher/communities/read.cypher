MATCH (k:HansaCommunity)
OPTIONAL MATCH (e:HansaEntity)-[m:HANSA_IN_COMMUNITY]->(k)
WITH k, e, m
ORDER BY m.position
WITH k, collect(e.id) AS entity_ids
RETURN k.id AS id, k.level AS level, k.summary AS summary, k.chunk_ids AS chunk_ids,
       k.doc_ids AS doc_ids, k.rank AS rank, coalesce(k.parent, '') AS parent, entity_ids
ORDER BY level, id
