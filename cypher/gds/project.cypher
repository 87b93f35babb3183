// The undirected entity graph Leiden runs on, projected from the mentions (GDS Cypher
// aggregation): two entities are related by the number of chunks that mention both
// (DocumentGraph.co_mentions; no relationship is stored for it). Only related entities are
// projected. `hansa_seed` is the seed community of a seeded run (0 when unset). The rows are
// ordered by entity id: GDS numbers the nodes in the order it meets them, and a seeded Leiden is
// reproducible only on the same numbering (the aggregation's own row order varies between runs).
MATCH (c:HansaChunk)-[:HANSA_MENTIONS]->(a:HansaEntity)
MATCH (c)-[:HANSA_MENTIONS]->(b:HansaEntity)
WHERE a.id < b.id
WITH a, b, count(c) AS chunks
ORDER BY a.id, b.id
WITH gds.graph.project(
  $graph, a, b,
  {
    sourceNodeProperties: {hansa_seed: coalesce(a.hansa_seed, 0)},
    targetNodeProperties: {hansa_seed: coalesce(b.hansa_seed, 0)},
    relationshipProperties: {weight: toFloat(chunks)}
  },
  {undirectedRelationshipTypes: ['*'], readConcurrency: 1}
) AS g
RETURN g.graphName AS name, g.nodeCount AS nodes, g.relationshipCount AS relationships
