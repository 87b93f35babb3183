// Every mapped document's id and element id, in id order: one scan of the label, after which each
// page is read by element id (a seek) instead of scanning the label again for ids after the last.
MATCH (d:{{document}})
WHERE d[$id] IS NOT NULL
RETURN toString(d[$id]) AS id, elementId(d) AS element
ORDER BY id
