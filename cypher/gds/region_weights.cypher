// What quality.region_resolution weighs a set's subgraph by: the whole entity graph's total
// relation weight, the summed whole-graph weighted degree of the entities $entity_ids, and the
// weight of the relations among them. A chunk that mentions k entities, r of them in the set, holds
// k(k-1)/2 co-mentioned pairs, r(k-1) pair ends in the set and r(r-1)/2 pairs inside it; a mapped
// relation (HANSA_LINKED) counts its weight once in the total, once per end in the set, and inside
// when both ends are.
CALL () {
  MATCH (c:HansaChunk)-[:HANSA_MENTIONS]->(e:HansaEntity)
  WITH c, count(e) AS k, count(CASE WHEN e.id IN $entity_ids THEN 1 END) AS r
  RETURN toFloat(sum(k * (k - 1))) / 2.0 AS mentioned,
         toFloat(sum(r * (k - 1))) AS mentioned_degree,
         toFloat(sum(r * (r - 1))) / 2.0 AS mentioned_inside
}
CALL () {
  OPTIONAL MATCH (a:HansaEntity)-[l:HANSA_LINKED]->(b:HansaEntity)
  WITH toFloat(coalesce(l.weight, 0)) AS w,
       CASE WHEN a.id IN $entity_ids THEN 1 ELSE 0 END AS ia,
       CASE WHEN b.id IN $entity_ids THEN 1 ELSE 0 END AS ib
  RETURN sum(w) AS linked, sum(w * (ia + ib)) AS linked_degree, sum(w * ia * ib) AS linked_inside
}
RETURN mentioned + linked AS total, mentioned_degree + linked_degree AS degree,
       mentioned_inside + linked_inside AS inside
