// CREATE, not MERGE: earlier versions were deleted in the same transaction, so a clash is a bug.
UNWIND $rows AS row
CREATE (:HansaDocument {id: row.id, title: row.title, source: row.source, sha256: row.sha256})
