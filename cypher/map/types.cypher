// The organization's relationship types (read-only procedure): what a mapping may name.
CALL db.relationshipTypes() YIELD relationshipType
RETURN relationshipType AS type
ORDER BY type
