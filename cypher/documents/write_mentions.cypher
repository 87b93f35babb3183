UNWIND $rows AS row
MATCH (c:HansaChunk {id: row.chunk_id})
MATCH (e:HansaEntity {id: row.entity_id})
CREATE (c)-[:HANSA_MENTIONS {count: row.count}]->(e)
