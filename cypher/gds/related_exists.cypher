// Whether any two entities are related: some chunk mentions at least two of them, or a mapped
// relation links two.
RETURN EXISTS { MATCH (c:HansaChunk) WHERE COUNT { (c)-[:HANSA_MENTIONS]->(:HansaEntity) } > 1 }
    OR EXISTS { MATCH (:HansaEntity)-[:HANSA_LINKED]->(:HansaEntity) } AS related
