// A site claims the database once; a claim is never moved to another site (install refuses first).
MERGE (s:HansaSchema {id: $schema_id})
SET s.version = $version, s.applied_at = datetime(), s.site_id = coalesce(s.site_id, $site_id)
