// Every mapped relation (plugin/graph_map.py): replaced as a whole by each `hansa site map`.
MATCH (:HansaEntity)-[l:HANSA_LINKED]->(:HansaEntity)
DELETE l
