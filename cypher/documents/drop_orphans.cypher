// Entities no chunk mentions any more (their relations and community links go with them), by the
// element ids documents/touched_entities read in this transaction. Not by id: an index seek in a
// transaction that has already deleted many nodes costs time in proportion to those deletions, so
// deleting a 10,000-document site spent 124 s here (benchmarks/README.md, "Deleting documents").
UNWIND $element_ids AS element_id
MATCH (e:HansaEntity)
WHERE elementId(e) = element_id AND NOT EXISTS { (e)<-[:HANSA_MENTIONS]-(:HansaChunk) }
DETACH DELETE e
