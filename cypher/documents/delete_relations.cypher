// Relations are stored per source document: this removes exactly the documents' contribution
// (found through the hansa_related_doc_id index).
UNWIND $doc_ids AS doc_id
MATCH (:HansaEntity)-[r:HANSA_RELATED {doc_id: doc_id}]->(:HansaEntity)
DELETE r
