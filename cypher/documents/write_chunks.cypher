// CREATE, not MERGE: a chunk id already owned by another document violates the uniqueness
// constraint and fails the whole batch instead of silently moving that chunk.
UNWIND $rows AS row
MATCH (d:HansaDocument {id: row.doc_id})
CREATE (d)-[:HANSA_HAS_CHUNK]->(:HansaChunk {
  id: row.id, ordinal: row.ordinal, text: row.text, start: row.start, end: row.end, page: row.page
})
