"""Ports (the ABCs in each sub-package's `base.py`) and the real implementations behind them.

`plugin` (site) and `gateway` depend on these ports, never on a concrete database client, so a
site can run on Neo4j+GDS or the embedded store and Milvus Lite or a Milvus server unchanged.
"""
