// The schema version recorded by `install` and the site that claimed the database (null when
// hansa was never installed here, or, for the site, before schema v2).
OPTIONAL MATCH (s:HansaSchema {id: $schema_id})
RETURN s.version AS version, s.site_id AS site_id
