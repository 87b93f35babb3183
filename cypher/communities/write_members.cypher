// `position` keeps the member order the caller gave.
UNWIND $rows AS row
MATCH (k:HansaCommunity {id: row.community_id})
MATCH (e:HansaEntity {id: row.entity_id})
CREATE (e)-[:HANSA_IN_COMMUNITY {position: row.position}]->(k)
