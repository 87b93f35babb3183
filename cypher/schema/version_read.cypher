// The schema version recorded by `install`, or null when hansa was never installed here.
OPTIONAL MATCH (s:HansaSchema {id: $schema_id})
RETURN s.version AS version
