// GDS node ids of a Leiden run -> entity ids, keeping only entities with at least one relation
// (the projection holds every HansaEntity; isolated ones get no community).
UNWIND $node_ids AS node_id
WITH node_id, gds.util.asNode(node_id) AS e
WHERE e:HansaEntity AND EXISTS { (e)-[:HANSA_RELATED]-(:HansaEntity) }
RETURN node_id, e.id AS entity_id
