// `relations`: entity pairs mentioned together, counted once per chunk that mentions both (the
// summed co-occurrence weight), from each chunk's mention count alone.
CALL () {
  MATCH (c:HansaChunk)
  WITH COUNT { (c)-[:HANSA_MENTIONS]->(:HansaEntity) } AS k
  RETURN sum(k * (k - 1) / 2) AS relations
}
RETURN COUNT { (:HansaDocument) } AS documents,
       COUNT { (:HansaChunk) } AS chunks,
       COUNT { (:HansaEntity) } AS entities,
       relations,
       COUNT { (:HansaCommunity) } AS communities
