// `relations`: entity pairs mentioned together, counted once per chunk that mentions both (the
// summed co-occurrence weight), from each chunk's mention count alone; plus the summed weight of
// the mapped relations (HANSA_LINKED: the organization's relationships, `hansa site map`).
CALL () {
  MATCH (c:HansaChunk)
  WITH COUNT { (c)-[:HANSA_MENTIONS]->(:HansaEntity) } AS k
  RETURN sum(k * (k - 1) / 2) AS mentioned
}
CALL () {
  OPTIONAL MATCH (:HansaEntity)-[l:HANSA_LINKED]->(:HansaEntity)
  RETURN coalesce(sum(l.weight), 0) AS linked
}
RETURN COUNT { (:HansaDocument) } AS documents,
       COUNT { (:HansaChunk) } AS chunks,
       COUNT { (:HansaEntity) } AS entities,
       mentioned + linked AS relations,
       COUNT { (:HansaCommunity) } AS communities
