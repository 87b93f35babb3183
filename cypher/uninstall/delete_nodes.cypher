// Auto-commit only (CALL ... IN TRANSACTIONS; the scope clause needs Neo4j 5.23+): batches keep a
// large site within the heap. Hansa nodes carry only HANSA_* relationships, so DETACH removes
// nothing of the organization's.
MATCH (n)
WHERE n:HansaDocument OR n:HansaChunk OR n:HansaEntity OR n:HansaCommunity OR n:HansaSchema
CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS
