// In-memory GDS graphs hansa projected (named with $prefix) in this database, e.g. left by a crash.
CALL gds.graph.list() YIELD graphName, database
WHERE graphName STARTS WITH $prefix AND database = $database
RETURN graphName AS name
