RETURN COUNT { (n) WHERE n:HansaDocument OR n:HansaChunk OR n:HansaEntity OR n:HansaCommunity OR n:HansaSchema } AS nodes
