// GDS node ids of a Leiden run -> entity ids (the projection holds only related entities).
UNWIND $node_ids AS node_id
WITH node_id, gds.util.asNode(node_id) AS e
WHERE e:HansaEntity
RETURN node_id, e.id AS entity_id
