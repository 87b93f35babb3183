"""The graph-store port and its two implementations: Neo4j+GDS and embedded (SQLite + leidenalg)."""
from hansa.adapters.graph.base import GraphStore, LeidenParams

__all__ = ["GraphStore", "LeidenParams", "open_graph_store"]


def open_graph_store(cfg):  # cfg: hansa.core.config.Config
    """Open the graph store the configuration names; the caller closes it."""
    if cfg.graph.backend == "neo4j":
        from hansa.adapters.graph.neo4j_gds import Neo4jGraphStore

        return Neo4jGraphStore(cfg.neo4j.uri, cfg.neo4j.user, cfg.neo4j.password, cfg.neo4j.database)
    from hansa.adapters.graph.embedded import EmbeddedGraphStore

    return EmbeddedGraphStore(cfg.graph_path)
