// The undirected entity graph Leiden runs on, projected from the mentions (GDS Cypher
// aggregation): two entities are related by the number of chunks that mention both
// (DocumentGraph.co_mentions; no relationship is stored for it), plus the weight of a mapped
// relation between them (HANSA_LINKED, written by `hansa site map` from the organization's own
// relationships; a pair both co-mentioned and linked is two parallel relationships, which Leiden
// and quality.modularity weigh as their sum). Only related entities are projected. `hansa_seed`
// is the seed community of a seeded run (0 when unset).
// The related entities come first, alone and ordered by id, read on one thread: GDS numbers the
// nodes in the order it meets them, and a seeded Leiden is reproducible only on the same numbering.
// The pairs then follow in whatever order the aggregation yields them (their order changes nothing:
// the same Leiden result for pairs shuffled at random), which spares sorting ~20 pairs per entity.
CALL () {
  CALL () {
    MATCH (c:HansaChunk) WHERE COUNT { (c)-[:HANSA_MENTIONS]->() } > 1
    MATCH (c)-[:HANSA_MENTIONS]->(a:HansaEntity)
    RETURN a
    UNION
    MATCH (a:HansaEntity)-[:HANSA_LINKED]-(:HansaEntity)
    RETURN a
  }
  WITH a
  ORDER BY a.id
  RETURN a, null AS b, 0.0 AS weight
  UNION ALL
  MATCH (c:HansaChunk)-[:HANSA_MENTIONS]->(a:HansaEntity)
  MATCH (c)-[:HANSA_MENTIONS]->(b:HansaEntity)
  WHERE a.id < b.id
  RETURN a, b, toFloat(count(c)) AS weight
  UNION ALL
  MATCH (a:HansaEntity)-[l:HANSA_LINKED]->(b:HansaEntity)
  RETURN a, b, toFloat(l.weight) AS weight
}
WITH gds.graph.project(
  $graph, a, b,
  {
    sourceNodeProperties: {hansa_seed: coalesce(a.hansa_seed, 0)},
    targetNodeProperties: {hansa_seed: coalesce(b.hansa_seed, 0)},
    relationshipProperties: {weight: weight}
  },
  {undirectedRelationshipTypes: ['*'], readConcurrency: 1}
) AS g
RETURN g.graphName AS name, g.nodeCount AS nodes, g.relationshipCount AS relationships
