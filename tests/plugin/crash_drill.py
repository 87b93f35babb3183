"""What the `kill -9` drills share (test_crash_drills*.py): run a hansa process that dies at a crash
point, and read a site's whole state so a crashed-then-rerun site can be compared with a clean one.

Kept out of the conftest because it is a helper, not a fixture; the drills load it by path
(`--import-mode=importlib` gives test folders no package to import from).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from hansa.core.config import Config
from hansa.core.crash_points import ENV
from hansa.plugin.chunking import chunk_text
from hansa.plugin.readers import read_origins
from hansa.plugin.site import CHUNKS, SUMMARIES, SiteContext
from hansa.plugin.sources import resolve_origins

DRIVER = Path(__file__).with_name("crash_driver.py")
TIMEOUT_S = 600


def hansa(*args: str) -> list[str]:
    return [sys.executable, "-c", "from hansa.cli import main; main()", *args]


def driver(*args: str) -> list[str]:
    return [sys.executable, str(DRIVER), *args]


def run(command: list[str], env: Mapping[str, str], crash: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `command` with `env` over this process's environment; with `crash`, it must die by
    SIGKILL at that crash point (a drill whose process survives proves nothing), else succeed."""
    environ = {**os.environ, "HF_HUB_OFFLINE": "1", **env}
    environ.pop("HANSA_CONFIG", None)
    environ.pop(ENV, None)
    if crash:
        environ[ENV] = crash
    proc = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=TIMEOUT_S)
    if crash:
        assert proc.returncode == -signal.SIGKILL, (
            f"{crash}: expected death by SIGKILL, got exit {proc.returncode}:\n{proc.stderr[-3000:]}")
    else:
        assert proc.returncode == 0, f"{' '.join(command[3:])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc


def expected_chunk_ids(cfg: Config, folder: Path) -> set[str]:
    """The chunk ids a complete ingest of `folder` stores: read and chunked as ingest does."""
    docs = read_origins(resolve_origins([folder], None, {})).documents
    site = cfg.site
    return {c.id for doc in docs for c in chunk_text(doc.id, doc.text, site.chunk_size, site.chunk_overlap)}


def _rounded(vectors: Mapping[str, np.ndarray]) -> dict[str, tuple[float, ...]]:
    return {k: tuple(np.round(np.asarray(v, dtype=np.float64), 5)) for k, v in sorted(vectors.items())}


def site_state(cfg: Config, chunk_ids: set[str]) -> dict[str, Any]:
    """Everything a site stores, in a comparable form: documents with their fingerprints, chunks in
    the graph and in Milvus (with the vectors), communities with their summaries and summary
    vectors, and the collections' row counts — a count above the ids found is an orphan row."""
    with SiteContext.open(cfg) as ctx:
        stats = ctx.graph.stats()
        docs = ctx.graph.documents_by_source("")
        communities = ctx.graph.communities()
        ids = [c.id for c in communities]
        has_chunks = ctx.vectors.collection_owner(CHUNKS) is not None
        has_summaries = ctx.vectors.collection_owner(SUMMARIES) is not None
        return {
            "stats": stats,
            "documents": ctx.graph.document_hashes(sorted(docs)),
            "graph_chunks": sorted(c.chunk_id for c in ctx.graph.chunks(sorted(chunk_ids))),
            "chunk_vectors": _rounded(ctx.vectors.get(CHUNKS, sorted(chunk_ids))) if has_chunks else {},
            "chunk_rows": ctx.vectors.count(CHUNKS) if has_chunks else 0,
            "communities": sorted((c.id, c.level, c.entity_ids, c.summary, c.chunk_ids, c.doc_ids, c.rank)
                                  for c in communities),
            "summary_vectors": _rounded(ctx.vectors.get(SUMMARIES, ids)) if has_summaries and ids else {},
            "summary_rows": ctx.vectors.count(SUMMARIES) if has_summaries else 0,
        }


def assert_consistent(state: Mapping[str, Any]) -> None:
    """What must hold on any site at rest, crashed or not: every graph chunk has its vector and no
    vector lacks its chunk; every community has its summary vector and no summary vector is stray."""
    assert sorted(state["chunk_vectors"]) == state["graph_chunks"], "graph chunks and chunk vectors differ"
    assert state["chunk_rows"] == len(state["graph_chunks"]) == state["stats"].chunks, "orphan chunk vectors"
    assert sorted(state["summary_vectors"]) == sorted(c[0] for c in state["communities"]), "a summary lacks its vector"
    assert state["summary_rows"] == len(state["communities"]), "stray summary vectors"
