// One page of the organization's documents, by element id (from map/document_keys), with their
// text; the label and id are checked again, in case a node was deleted since the ids were listed.
MATCH (d:{{document}})
WHERE elementId(d) IN $elements AND d[$id] IS NOT NULL
WITH d, toString(d[$id]) AS id
ORDER BY id
RETURN id, d[$title] AS title, d[$text] AS text, [] AS entities
