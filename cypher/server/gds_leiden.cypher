// How many Leiden procedures GDS registered (0 if the procedures are not allowed to load).
CALL gds.list('gds.leiden.') YIELD name
RETURN count(name) AS procedures
