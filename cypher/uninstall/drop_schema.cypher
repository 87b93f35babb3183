// Exactly the constraints and indexes schema/constraints creates (and their backing indexes);
// an organization's own schema is never named here.
DROP CONSTRAINT hansa_document_id IF EXISTS
;
DROP CONSTRAINT hansa_chunk_id IF EXISTS
;
DROP CONSTRAINT hansa_entity_id IF EXISTS
;
DROP CONSTRAINT hansa_community_id IF EXISTS
;
DROP CONSTRAINT hansa_schema_id IF EXISTS
;
DROP INDEX hansa_related_doc_id IF EXISTS
;
