MATCH (k:HansaCommunity)
DETACH DELETE k
