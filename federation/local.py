"""A whole federation on this machine: N sites and a gateway, each a real HTTP server on loopback.

Why one builder: `hansa demo`, `hansa eval` and the end-to-end tests must exercise exactly the
path a real deployment takes — install, ingest, Leiden communities, signed publication, routed
signed-off HTTP calls — and differ only in data and questions.
"""
from __future__ import annotations

import dataclasses
import json
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import requests

from hansa.core.config import Config, load_config
from hansa.core.serving import BackgroundServer

API_KEY_NAME = "local-federation"
# One local client asks hundreds of evaluation questions, some of every site at once: its budget
# must not be what a benchmark measures (the limiter still runs and is charged).
_LOCAL_LIMITS = {"HANSA_GATEWAY_QUERY_BURST": "100000", "HANSA_GATEWAY_QUERY_REFILL_PER_S": "100000"}


def role_config(home: Path, **env: str) -> Config:
    """A site's or the gateway's configuration: its own home, everything else default."""
    return load_config(env={"HANSA_HOME": str(home), **env})


@dataclass
class SiteHandle:
    site_id: str
    ctx: Any  # hansa.plugin.site.SiteContext
    server: BackgroundServer
    info: dict[str, Any] = field(default_factory=dict)


class LocalFederation:
    """Build with `LocalFederation(workdir, {site_id: [{"id","title","text"}, ...]})` as a context
    manager; `.gateway_url`, `.sites`, `.gateway_service` (the hansa.gateway.service.Gateway, for
    in-process queries) and `.gateway_app` (its Flask adapter) are available inside, and
    `.query(body)` asks the gateway over HTTP as an authenticated client (`.api_key`)."""

    def __init__(
        self,
        workdir: Path,
        documents: Mapping[str, Sequence[Mapping[str, str]]],
        progress: Callable[[str], None] = lambda msg: None,
        gateway_tap: Callable[[Any], Any] | None = None,
        site_env: Mapping[str, str] | None = None,
        gateway_env: Mapping[str, str] | None = None,
        site_cache: Any | None = None,
        serving_embedder: Callable[[Any], Any] | None = None,
        llm: Any = None,
        gateway_transport: Callable[[Any, Any], Any] | None = None,
        site_app: Callable[[str, Any], Any] | None = None,
    ) -> None:
        """`site_cache` (a hansa.evaluation.sitecache.SiteCache): build each site into the cache, or
        reuse the cached build of identical content and configuration (`hansa eval`).
        `serving_embedder`: wraps each built site's embedder for serving only (scripts/bench_load.py
        memoizes it, so real sites answer in time and the drill loads the gateway, not site CPU).
        `llm` (the LLM port): the gateway synthesizes its answers with it (None: extractive answers).
        `gateway_transport(identity, config)`: the gateway's SiteTransport (None: signed HTTP).
        `site_app(site_id, ctx)`: the WSGI app served for a site, or None for hansa's own
        (scripts/bench_adversarial.py serves an enrolled site that lies with it)."""
        self.workdir = workdir
        self.site_cache = site_cache
        self.serving_embedder = serving_embedder
        self.documents = documents
        self.progress = progress
        self.gateway_tap = gateway_tap
        self.site_env = dict(site_env or {})
        self.gateway_env = dict(gateway_env or {})
        self.llm = llm
        self.gateway_transport = gateway_transport
        self.site_app = site_app
        self.sites: dict[str, SiteHandle] = {}
        self.setup_seconds = 0.0
        self._stack = ExitStack()

    def __enter__(self) -> "LocalFederation":
        try:
            self._build()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _build(self) -> None:
        from hansa.adapters.vector.milvus import MilvusVectorStore
        from hansa.gateway.trust.apikeys import open_api_keys
        from hansa.gateway.http.app import create_gateway_app
        from hansa.gateway.client import gateway_identity
        from hansa.gateway.service import Gateway
        from hansa.gateway.trust import admin
        from hansa.gateway.trust.registry import SiteRegistry
        from hansa.plugin.api import create_site_app
        from hansa.plugin.publish import publish_summaries
        from hansa.sync.keys import SiteIdentity

        t0 = time.perf_counter()
        # The gateway's signing key first: every site answers only requests signed with it.
        gateway_key = gateway_identity(self.workdir / "gateway").public_key_b64
        for site_id, docs in sorted(self.documents.items()):
            ctx, info = self._open_site(site_id, docs, gateway_key)
            if self.serving_embedder is not None:
                ctx = dataclasses.replace(ctx, embedder=self.serving_embedder(ctx.embedder))
            app = self.site_app(site_id, ctx) if self.site_app else None
            server = self._stack.enter_context(BackgroundServer(app or create_site_app(ctx)))
            self.sites[site_id] = SiteHandle(site_id, ctx, server, {"url": server.url, **info})

        gw_home = self.workdir / "gateway"
        gw_home.mkdir(parents=True, exist_ok=True)
        self.gateway_config = role_config(
            gw_home, **{"HANSA_GATEWAY_ALLOW_PRIVATE_ADDRESSES": "true", **_LOCAL_LIMITS, **self.gateway_env})
        self.registry = SiteRegistry(gw_home / "registry.json")
        self.api_key = open_api_keys(gw_home).create(API_KEY_NAME)
        for site_id, handle in self.sites.items():
            identity = SiteIdentity.load(handle.ctx.identity_dir)
            admin.enroll(self.registry, site_id, handle.server.url, [identity.public_key_b64])
        embedder = next(iter(self.sites.values())).ctx.embedder  # one model per process, shared
        self.gateway_vectors = self._stack.enter_context(
            MilvusVectorStore(self.gateway_config.milvus_uri, prefix=self.gateway_config.milvus.collection_prefix)
        )
        # closes before the vector store does: the durable write-behind finishes first
        self.gateway_service = self._stack.enter_context(
            Gateway.open(self.gateway_config, embedder=embedder, vector_store=self.gateway_vectors, registry=self.registry,
                        llm=self.llm, transport=self.gateway_transport))
        # what the gateway runs with (the embedder's cosine-unit defaults applied), for callers that read it
        self.gateway_config.gateway = self.gateway_service.cfg
        self.gateway_app = create_gateway_app(self.gateway_service)
        app = self.gateway_tap(self.gateway_app) if self.gateway_tap else self.gateway_app
        self.gateway = self._stack.enter_context(BackgroundServer(app))
        for site_id, handle in self.sites.items():
            self.progress(f"site {site_id}: publish signed summaries to the gateway")
            published = publish_summaries(handle.ctx, self.gateway.url)
            handle.info["published_summaries"] = getattr(published, "summaries", None)
            handle.info["publication_bytes"] = getattr(published, "bytes", None)
        self.setup_seconds = time.perf_counter() - t0

    def _open_site(self, site_id: str, docs: Sequence[Mapping[str, str]], gateway_key: str) -> tuple[Any, dict[str, Any]]:
        """An opened, served-ready site: built here (install, ingest, Leiden communities and
        summaries), or reused from the site cache when an identical build is complete there."""
        from hansa.plugin.communities import build_communities
        from hansa.plugin.ingest import ingest_paths
        from hansa.plugin.install import install_site
        from hansa.plugin.site import SiteContext

        env = {"HANSA_SITE_SITE_ID": site_id, "HANSA_SITE_GATEWAY_PUBLIC_KEY": gateway_key, **self.site_env}
        home = self.workdir / site_id
        if self.site_cache is not None:
            home = self.site_cache.slot(site_id, self.site_cache.digest(site_id, docs, role_config(home, **env)))
            built = self.site_cache.complete(home)
            if built is not None:
                self.site_cache.reuse(home)
                self.progress(f"site {site_id}: reused from the site cache ({home.name})")
                ctx = self._stack.enter_context(SiteContext.open(role_config(home, **env)))
                return ctx, {**built, "cached": True}
            self.site_cache.prepare(home)
        t0 = time.perf_counter()
        docs_dir = home / "docs"
        docs_dir.mkdir(parents=True, exist_ok=True)
        (docs_dir / f"{site_id}.jsonl").write_text(
            "".join(json.dumps({"id": d["id"], "title": d["title"], "text": d["text"]}, ensure_ascii=False) + "\n"
                    for d in docs),
            encoding="utf-8",
        )
        # Built in its own context, closed (so every store has flushed) before the cache marker is
        # written; the served context opens afterwards. Building may embed through the cache;
        # serving keeps the plain embedder, so query-time latencies are never flattered by cache hits.
        with SiteContext.open(role_config(home, **env)) as ctx:
            builder = dataclasses.replace(ctx, embedder=self.site_cache.embedder(ctx.embedder)) if self.site_cache else ctx
            self.progress(f"site {site_id}: install, ingest {len(docs)} documents")
            install_site(builder)
            ingest = ingest_paths(builder, [docs_dir])
            self.progress(f"site {site_id}: Leiden communities and summaries")
            comm = build_communities(builder)
        info = {
            "documents": len(docs),
            "chunks": getattr(ingest, "chunks", None),
            "communities": getattr(comm, "communities", None),
            "build_seconds": round(time.perf_counter() - t0, 2),
        }
        if self.site_cache is not None:
            self.site_cache.mark_complete(home, info)
        ctx = self._stack.enter_context(SiteContext.open(role_config(home, **env)))
        return ctx, {**info, "cached": False}

    @property
    def gateway_url(self) -> str:
        return self.gateway.url

    def query(self, body: Mapping[str, Any], timeout: float = 120.0) -> requests.Response:
        """POST /v1/query with this federation's API key; the caller judges the status."""
        return requests.post(f"{self.gateway_url}/v1/query", json=dict(body), timeout=timeout,
                             headers={"Authorization": f"Bearer {self.api_key}"})
