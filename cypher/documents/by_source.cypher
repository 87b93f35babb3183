// Documents whose source ("<source>:<path>") starts with $prefix: the scope of `ingest --sync`.
MATCH (d:HansaDocument)
WHERE d.source STARTS WITH $prefix
RETURN d.id AS id, d.source AS source
