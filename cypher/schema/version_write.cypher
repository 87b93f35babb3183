MERGE (s:HansaSchema {id: $schema_id})
SET s.version = $version, s.applied_at = datetime()
