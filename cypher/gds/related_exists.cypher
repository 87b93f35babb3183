// Whether any two entities are related: some chunk mentions at least two of them.
RETURN EXISTS { MATCH (c:HansaChunk) WHERE COUNT { (c)-[:HANSA_MENTIONS]->(:HansaEntity) } > 1 } AS related
