RETURN COUNT { (:HansaDocument) } AS documents,
       COUNT { (:HansaChunk) } AS chunks,
       COUNT { (:HansaEntity) } AS entities,
       COUNT { (:HansaEntity)-[:HANSA_RELATED]->(:HansaEntity) } AS relations,
       COUNT { (:HansaCommunity) } AS communities
