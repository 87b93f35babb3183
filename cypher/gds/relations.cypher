// The weighted entity graph Leiden runs on (as gds/project derives it): each co-mentioned pair
// once, weighted by the number of chunks that mention both, and each mapped relation (HANSA_LINKED)
// with its weight. Read to score a partition's modularity (a pair in both is summed there).
MATCH (c:HansaChunk)-[:HANSA_MENTIONS]->(a:HansaEntity)
MATCH (c)-[:HANSA_MENTIONS]->(b:HansaEntity)
WHERE a.id < b.id
RETURN a.id AS a, b.id AS b, toFloat(count(c)) AS weight
UNION ALL
MATCH (a:HansaEntity)-[l:HANSA_LINKED]->(b:HansaEntity)
RETURN a.id AS a, b.id AS b, toFloat(l.weight) AS weight
