MATCH (e:HansaEntity)
WHERE e.hansa_seed IS NOT NULL
REMOVE e.hansa_seed
