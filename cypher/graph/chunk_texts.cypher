// One keyset page of chunk texts by id. $after is "" for the first page (chunk ids are never
// empty) and the page is cut before the document match: a range seek on the HansaChunk.id
// uniqueness index reading `limit` chunks (`$after IS NULL OR ...` scans every chunk per page).
MATCH (c:HansaChunk)
WHERE c.id > $after
WITH c
ORDER BY c.id
LIMIT $limit
MATCH (d:HansaDocument)-[:HANSA_HAS_CHUNK]->(c)
RETURN c.id AS chunk_id, d.id AS doc_id, c.text AS text
ORDER BY chunk_id
