// Rows are grouped by chunk: {chunk_id, entity_ids, counts}; the chunk is looked up once.
UNWIND $rows AS row
MATCH (c:HansaChunk {id: row.chunk_id})
UNWIND range(0, size(row.entity_ids) - 1) AS i
MATCH (e:HansaEntity {id: row.entity_ids[i]})
CREATE (c)-[:HANSA_MENTIONS {count: row.counts[i]}]->(e)
