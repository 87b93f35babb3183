// Entities without a seed (new since the last run) each start in a community of their own,
// numbered from $base up.
MATCH (e:HansaEntity)
WHERE e.hansa_seed IS NULL
WITH e ORDER BY e.id
WITH collect(e) AS fresh
UNWIND range(0, size(fresh) - 1) AS i
WITH fresh[i] AS e, i
SET e.hansa_seed = $base + i
