// hansa schema, version 3. Each statement runs on its own (schema commands cannot share a
// transaction) and is idempotent. Community edition has uniqueness constraints only.
CREATE CONSTRAINT hansa_document_id IF NOT EXISTS FOR (n:HansaDocument) REQUIRE n.id IS UNIQUE
;
CREATE CONSTRAINT hansa_chunk_id IF NOT EXISTS FOR (n:HansaChunk) REQUIRE n.id IS UNIQUE
;
CREATE CONSTRAINT hansa_entity_id IF NOT EXISTS FOR (n:HansaEntity) REQUIRE n.id IS UNIQUE
;
CREATE CONSTRAINT hansa_community_id IF NOT EXISTS FOR (n:HansaCommunity) REQUIRE n.id IS UNIQUE
;
CREATE CONSTRAINT hansa_schema_id IF NOT EXISTS FOR (n:HansaSchema) REQUIRE n.id IS UNIQUE
