// Mapped relations between hansa's own entities (source id < target id), weighted by the number
// of the organization's relationships between the two. Pairs whose entity no mapped document
// mentions are not written (no HansaEntity holds them).
UNWIND $rows AS row
MATCH (a:HansaEntity {id: row.source})
MATCH (b:HansaEntity {id: row.target})
CREATE (a)-[:HANSA_LINKED {weight: row.weight}]->(b)
RETURN count(*) AS written
