"""The site's composition root: one place that turns configuration into opened ports.

Every site job (install, ingest, communities, publish, serve) works on a `SiteContext`, so the
choice of backend (Neo4j+GDS or embedded; Milvus Lite or server) is made once, from config.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hansa.adapters.embedder import Embedder, open_embedder
from hansa.adapters.graph import GraphStore, open_graph_store
from hansa.adapters.llm import LLM, open_llm
from hansa.adapters.reader.base import Reader
from hansa.adapters.vector import CollectionSpec, VectorStore
from hansa.core.config import Config
from hansa.core.errors import ConfigError
from hansa.sync.wire import validate_site_id

# Milvus collections of a site (names without the configured prefix).
CHUNKS = "chunks"  # one row per chunk: id, vector, doc_id
SUMMARIES = "summaries"  # one row per community: id, vector, level
SENTENCES = "sentences"  # one row per answer-candidate sentence: id "<chunk id>:<offset>", vector, doc_id
COLLECTIONS = (CHUNKS, SUMMARIES, SENTENCES)  # every collection a site owns (install, uninstall)


def chunk_collection(dim: int, owner: str = "") -> CollectionSpec:
    return CollectionSpec(name=CHUNKS, dim=dim, fields={"doc_id": "str"}, owner=owner)


def sentence_collection(dim: int, owner: str = "") -> CollectionSpec:
    """Answer-candidate sentence vectors, computed once at ingest (plugin.sentence_vectors). FLAT:
    they are only ever read by id, never searched, so an ANN index would cost memory for nothing."""
    return CollectionSpec(name=SENTENCES, dim=dim, fields={"doc_id": "str", "chunk_id": "str"}, index="FLAT", owner=owner)


def summary_collection(dim: int, owner: str = "") -> CollectionSpec:
    return CollectionSpec(name=SUMMARIES, dim=dim, fields={"level": "int"}, owner=owner)


@dataclass
class SiteContext:
    cfg: Config
    graph: GraphStore
    vectors: VectorStore
    embedder: Embedder
    llm: LLM | None
    reader: Reader | None = None  # [site] reader: ranks answer sentences (plugin.retrieval)

    @property
    def site_id(self) -> str:
        if not self.cfg.site.site_id:
            raise ConfigError("no site id: set [site] site_id in hansa.toml or HANSA_SITE_SITE_ID")
        return validate_site_id(self.cfg.site.site_id)

    @property
    def identity_dir(self) -> Path:
        return self.cfg.keys_dir

    @classmethod
    def open(cls, cfg: Config) -> "SiteContext":
        from hansa.adapters.vector.milvus import MilvusVectorStore

        cfg.home.mkdir(parents=True, exist_ok=True)
        graph = open_graph_store(cfg)
        try:
            vectors = MilvusVectorStore(cfg.milvus_uri, token=cfg.milvus.token, prefix=cfg.milvus.collection_prefix)
        except BaseException:
            graph.close()
            raise
        from hansa.adapters.reader.onnx import open_reader

        return cls(cfg=cfg, graph=graph, vectors=vectors, embedder=open_embedder(cfg), llm=open_llm(cfg),
                   reader=open_reader(cfg.site.reader))

    def close(self) -> None:
        try:
            self.vectors.close()
        finally:
            self.graph.close()

    def __enter__(self) -> "SiteContext":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
