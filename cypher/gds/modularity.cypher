// The sums a partition's generalized modularity is made of (adapters/graph/quality.py, from_sums),
// on the entity graph gds/project derives, summed in the database instead of reading every
// relation out: $labels maps entity id -> community number (as a string key), and an entity it
// does not name counts as a community of its own. A chunk that mentions k entities, n of them in
// one community, holds k(k-1)/2 co-mentioned pairs, n(n-1)/2 of them inside that community, and
// adds k-1 to the weighted degree of each of the n; a mapped relation (HANSA_LINKED) adds its
// weight to the total, to each end's degree, and inside when both ends share a community.
CALL () {
  MATCH (c:HansaChunk)-[:HANSA_MENTIONS]->(e:HansaEntity)
  WITH c, coalesce('c' + toString($labels[e.id]), 'e' + e.id) AS community
  WITH c, community, count(*) AS n
  WITH c, collect([community, n]) AS groups, sum(n) AS k
  UNWIND groups AS g
  RETURN g[0] AS community, toFloat(g[1] * (k - 1)) AS degree,
         toFloat(g[1] * (g[1] - 1)) / 2.0 AS inside
  UNION ALL
  MATCH (a:HansaEntity)-[l:HANSA_LINKED]->(b:HansaEntity)
  WITH toFloat(l.weight) AS w, coalesce('c' + toString($labels[a.id]), 'e' + a.id) AS ca,
       coalesce('c' + toString($labels[b.id]), 'e' + b.id) AS cb
  UNWIND [[ca, CASE WHEN ca = cb THEN w ELSE 0.0 END], [cb, 0.0]] AS side
  RETURN side[0] AS community, w AS degree, side[1] AS inside
}
WITH community, sum(degree) AS degree, sum(inside) AS inside
RETURN sum(degree) / 2.0 AS total, sum(inside) AS inside, sum(degree * degree) AS squared_degrees
