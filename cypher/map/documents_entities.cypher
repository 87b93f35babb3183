// One page of the organization's documents, by id (keyset: ids after $after), with their text and
// the mapped entities they are linked to by the mention relationship (either direction).
MATCH (d:{{document}})
WHERE d[$id] IS NOT NULL AND toString(d[$id]) > $after
WITH d, toString(d[$id]) AS id
ORDER BY id
LIMIT $limit
RETURN id, d[$title] AS title, d[$text] AS text,
       COLLECT {
         MATCH (d)-[:{{mention}}]-(e:{{entities}})
         WHERE e[$name] IS NOT NULL
         RETURN DISTINCT {name: toString(e[$name]), labels: labels(e)}
       } AS entities
