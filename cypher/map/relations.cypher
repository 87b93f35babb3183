// The organization's relationships of the mapped types between mapped entities, counted per
// ordered pair of names (hansa keys entities by normalized name and sums both directions).
MATCH (a:{{entities}})-[r:{{relations}}]->(b:{{entities}})
WHERE a[$name] IS NOT NULL AND b[$name] IS NOT NULL AND a <> b
RETURN toString(a[$name]) AS a, toString(b[$name]) AS b, count(r) AS relationships
