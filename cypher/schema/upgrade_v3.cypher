// v2 -> v3: entity relations are derived from the mentions (DocumentGraph.co_mentions), no longer
// stored. Removes the stored HANSA_RELATED relationships in batches (auto-commit only, as
// uninstall/delete_nodes), then their index. Idempotent; touches nothing of the organization's.
MATCH (:HansaEntity)-[r:HANSA_RELATED]->(:HansaEntity)
CALL (r) { DELETE r } IN TRANSACTIONS OF 10000 ROWS
;
DROP INDEX hansa_related_doc_id IF EXISTS
