UNWIND $doc_ids AS doc_id
MATCH (d:HansaDocument {id: doc_id})
RETURN d.id AS id, d.sha256 AS sha256
