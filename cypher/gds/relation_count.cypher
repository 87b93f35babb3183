RETURN COUNT { (:HansaEntity)-[:HANSA_RELATED]->(:HansaEntity) } AS relations
