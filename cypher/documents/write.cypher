// One row per document, holding its chunks, each holding its mentions ({entity_ids, counts}):
// every node is created where it is first named, so no document or chunk is looked up again and
// the batch costs one round trip. CREATE, not MERGE: earlier versions of these documents were
// deleted in the same transaction, and a chunk id already owned by another document violates the
// uniqueness constraint and fails the whole batch instead of silently moving that chunk.
UNWIND $rows AS row
CREATE (d:HansaDocument {id: row.id, title: row.title, source: row.source, sha256: row.sha256})
WITH d, row
UNWIND row.chunks AS c
CREATE (d)-[:HANSA_HAS_CHUNK]->(chunk:HansaChunk {
  id: c.id, ordinal: c.ordinal, text: c.text, start: c.start, end: c.end, page: c.page
})
WITH chunk, c
UNWIND range(0, size(c.entity_ids) - 1) AS i
MATCH (e:HansaEntity {id: c.entity_ids[i]})
CREATE (chunk)-[:HANSA_MENTIONS {count: c.counts[i]}]->(e)
