// One page of the organization's documents, by id (keyset: ids after $after), with their text.
MATCH (d:{{document}})
WHERE d[$id] IS NOT NULL AND toString(d[$id]) > $after
WITH d, toString(d[$id]) AS id
ORDER BY id
LIMIT $limit
RETURN id, d[$title] AS title, d[$text] AS text, [] AS entities
