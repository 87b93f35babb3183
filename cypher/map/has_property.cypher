// Whether any node of the label holds the property $key, and the keys a sample of them holds
// (what an error names when the mapping's property is absent).
RETURN EXISTS { MATCH (n:{{label}}) WHERE n[$key] IS NOT NULL } AS present,
       COLLECT { MATCH (n:{{label}}) WITH n LIMIT 1000 UNWIND keys(n) AS k RETURN DISTINCT k ORDER BY k } AS keys
