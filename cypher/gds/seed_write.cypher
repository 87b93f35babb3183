// Seeds for an incremental Leiden run (GDS seedProperty): an earlier community number per entity.
UNWIND $rows AS row
MATCH (e:HansaEntity {id: row.entity_id})
SET e.hansa_seed = row.seed
