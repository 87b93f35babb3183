// The organization's node labels (read-only procedure): what a mapping may name.
CALL db.labels() YIELD label
RETURN label
ORDER BY label
