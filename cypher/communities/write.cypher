UNWIND $rows AS row
CREATE (:HansaCommunity {
  id: row.id, level: row.level, summary: row.summary,
  chunk_ids: row.chunk_ids, doc_ids: row.doc_ids, rank: row.rank, parent: row.parent
})
