// Entities merge by id across documents and keep the name and kind they were first seen with.
UNWIND $rows AS row
MERGE (e:HansaEntity {id: row.id})
ON CREATE SET e.name = row.name, e.kind = row.kind
