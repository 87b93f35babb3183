"""`kill -9` drills on what admins run: the graph in a real Neo4j + GDS and the vectors in a real
Milvus server (the session fixtures). Ingest is killed between two committed batches (the third
document's vectors written, its graph transaction never run), then community building is killed
between its summary vectors and the graph's community set; each command is run again and the site
must equal a clean run's on the same servers.

The session's Neo4j and Milvus are shared: the site is uninstalled from both between the runs.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Callable

import pytest

from hansa.core.config import Config
from hansa.plugin.site import CHUNKS, SUMMARIES, SiteContext

_spec = importlib.util.spec_from_file_location("crash_drill", Path(__file__).with_name("crash_drill.py"))
drill = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drill)  # type: ignore[union-attr]

pytestmark = pytest.mark.neo4j

SITE_ID = "acme"


def _server_env(home: Path, neo4j_uri: str, milvus_uri: str) -> dict[str, str]:
    return {"HANSA_HOME": str(home), "HANSA_SITE_SITE_ID": SITE_ID, "HANSA_GRAPH_BACKEND": "neo4j",
            "HANSA_NEO4J_URI": neo4j_uri, "HANSA_NEO4J_PASSWORD": "", "HANSA_MILVUS_URI": milvus_uri}


def _uninstall(cfg: Config) -> None:
    """Leave the shared servers as the next test expects them: no hansa data, no collections."""
    with SiteContext.open(cfg) as ctx:
        ctx.graph.uninstall()
        for name in (CHUNKS, SUMMARIES):
            if ctx.vectors.collection_owner(name) is not None:
                ctx.vectors.drop(name)


def test_ingest_and_communities_killed_on_neo4j_and_a_milvus_server(
        neo4j_uri: str, milvus_server_uri: str, tmp_path: Path, corpus: dict[str, str],
        make_config: Callable[..., Config]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for doc_id, text in corpus.items():
        (docs / Path(doc_id).name).write_text(text, encoding="utf-8")
    states: dict[str, Any] = {}
    for run in ("clean", "crashed"):
        env = _server_env(tmp_path / run, neo4j_uri, milvus_server_uri)
        cfg = make_config(tmp_path / run, **{k: v for k, v in env.items() if k not in ("HANSA_HOME", "HANSA_SITE_SITE_ID")})
        assert cfg.graph.backend == "neo4j" and cfg.milvus_uri == milvus_server_uri
        chunk_ids = drill.expected_chunk_ids(cfg, docs)
        ingest = drill.driver("ingest", "1", str(docs))
        communities = drill.hansa("site", "communities", "--no-progress")
        try:
            drill.run(drill.hansa("site", "install"), env)
            if run == "crashed":
                drill.run(ingest, env, crash="ingest.after_vectors@3")
                partial = drill.site_state(cfg, chunk_ids)
                assert partial["stats"].documents == 2
                assert set(partial["graph_chunks"]) < set(partial["chunk_vectors"])  # the 3rd's vectors, no chunks
            drill.run(ingest, env)
            states[f"{run}_ingested"] = drill.site_state(cfg, chunk_ids)
            if run == "crashed":
                drill.run(communities, env, crash="communities.after_vectors")
                partial = drill.site_state(cfg, chunk_ids)
                assert partial["communities"] == [] and partial["summary_rows"] > 0  # vectors written, set not
            drill.run(communities, env)
            states[run] = drill.site_state(cfg, chunk_ids)
        finally:
            _uninstall(cfg)
    drill.assert_consistent(states["crashed"])
    assert states["crashed_ingested"] == states["clean_ingested"]
    assert states["crashed"] == states["clean"]
