// The subgraph of Leiden's entity graph (gds/project) that the entities $entity_ids induce: only
// their pairs, weighted as there. What a local community refresh re-clusters (plugin/communities.py).
// The entities related inside the set come first, alone and ordered by id, for the reason
// gds/project gives; no seed property (a run within a set is never seeded).
CALL () {
  CALL () {
    MATCH (a:HansaEntity) WHERE a.id IN $entity_ids
    MATCH (a)<-[:HANSA_MENTIONS]-(:HansaChunk)-[:HANSA_MENTIONS]->(b:HansaEntity)
    WHERE b <> a AND b.id IN $entity_ids
    RETURN DISTINCT a
    UNION
    MATCH (a:HansaEntity)-[:HANSA_LINKED]-(b:HansaEntity)
    WHERE a.id IN $entity_ids AND b.id IN $entity_ids
    RETURN a
  }
  WITH a
  ORDER BY a.id
  RETURN a, null AS b, 0.0 AS weight
  UNION ALL
  MATCH (a:HansaEntity) WHERE a.id IN $entity_ids
  MATCH (a)<-[:HANSA_MENTIONS]-(c:HansaChunk)-[:HANSA_MENTIONS]->(b:HansaEntity)
  WHERE a.id < b.id AND b.id IN $entity_ids
  RETURN a, b, toFloat(count(c)) AS weight
  UNION ALL
  MATCH (a:HansaEntity)-[l:HANSA_LINKED]->(b:HansaEntity)
  WHERE a.id IN $entity_ids AND b.id IN $entity_ids
  RETURN a, b, toFloat(l.weight) AS weight
}
WITH gds.graph.project(
  $graph, a, b,
  {relationshipProperties: {weight: weight}},
  {undirectedRelationshipTypes: ['*'], readConcurrency: 1}
) AS g
RETURN g.graphName AS name, g.nodeCount AS nodes, g.relationshipCount AS relationships
