// One auto-commit round trip on the site database: is the server up and the database there? (never retried)
RETURN 1 AS ok
