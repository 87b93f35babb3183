// The names of every constraint in the database (doctor: are hansa's all there?).
SHOW CONSTRAINTS YIELD name
RETURN name
