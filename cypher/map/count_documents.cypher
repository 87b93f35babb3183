// The mapped documents: how many nodes carry the label, how many an id, how many distinct ids.
MATCH (d:{{document}})
RETURN count(d) AS nodes, count(d[$id]) AS with_id, count(DISTINCT toString(d[$id])) AS ids
