// The names of every index in the database (doctor: are hansa's all there?).
SHOW INDEXES YIELD name
RETURN name
