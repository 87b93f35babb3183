// The weighted entity graph Leiden runs on (as gds/project derives it): each related pair once,
// weighted by the number of chunks that mention both. Read to score a partition's modularity.
MATCH (c:HansaChunk)-[:HANSA_MENTIONS]->(a:HansaEntity)
MATCH (c)-[:HANSA_MENTIONS]->(b:HansaEntity)
WHERE a.id < b.id
RETURN a.id AS a, b.id AS b, toFloat(count(c)) AS weight
