"""`Gateway`: the gateway's one composition root — build it once, use it from HTTP, CLI, eval, tests.

Why: the gateway used to be assembled in four places and reached through a Flask app's
`extensions` dict from nine; each caller had its own idea of what a gateway is made of. Now
`Gateway.open(cfg, ...)` wires the parts (registry, summary index, publication owner, query engine,
transport, rate limits, API keys, signing identity) and every caller holds the same object:

    gw = Gateway.open(cfg)                          # what `hansa gateway serve` runs
    gw = Gateway.open(cfg, embedder=e, vector_store=s, registry=r)       # tests, LocalFederation
    gw = Gateway.open(cfg, ..., transport=InProcessSiteTransport(identity, apps))  # fast unit tier
    app = create_gateway_app(gw)                    # Flask: a thin HTTP adapter over it
    gw.query(QueryRequest(question="..."), client="eval", policy=QueryPolicy(...))
    gw.close()

What `open` builds itself it also closes (the embedder and vector store it opened from `cfg`); what
the caller passes in stays the caller's to close. The summary index is always the gateway's: it is
rebuilt from its durable copy on open and flushed on close.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.vector.base import VectorStore
from hansa.core.config import Config, GatewayConfig
from hansa.core.errors import ConfigError
from hansa.gateway.apikeys import ApiKeyStore, open_api_keys
from hansa.gateway.client import gateway_identity
from hansa.gateway.engine import Calibration, QueryEngine, QueryPolicy, QueryRequest, QueryResult, load_calibration
from hansa.gateway.history import HISTORY_FILE, SiteHistory
from hansa.gateway.index import SummaryIndex
from hansa.gateway.publishing import SitePublications
from hansa.gateway.ratelimit import TokenBucketLimiter
from hansa.gateway.registry import SiteRegistry, utc_now
from hansa.gateway.reliability import SiteReliability
from hansa.gateway.transport import HttpSiteTransport, SiteTransport
from hansa.sync.keys import SiteIdentity
from hansa.sync.wire import EmbeddingSpace


def calibration_path(cfg: GatewayConfig, gateway_dir: Path) -> Path:
    """Where the gate's calibration lives: `[gateway] calibration_file`, relative to the gateway home."""
    return gateway_dir / cfg.calibration_file  # an absolute setting replaces gateway_dir


class Gateway:
    """The gateway service. Attributes: `cfg` (GatewayConfig), `registry`, `index`, `space`,
    `embedder`, `transport`, `api_keys`, `identity`, `publications`, `engine`, `calibration`, `router` (the
    configured learned router, or None for the engine's summary matching), `history` (which sites
    answers cite: a tier signal, `site-history.json`), `query_limits`, `publish_limits`.
    Thread-safe for concurrent queries and publications."""

    def __init__(self, cfg: GatewayConfig, *, embedder: Embedder, index: SummaryIndex, registry: SiteRegistry,
                 transport: SiteTransport, api_keys: ApiKeyStore, identity: SiteIdentity,
                 calibration: Calibration | None = None, resources_to_close: ExitStack | None = None,
                 reliability: SiteReliability | None = None) -> None:
        self.cfg = cfg
        self.embedder = embedder
        self.index = index
        self.space = index.space
        self.registry = registry
        self.transport = transport
        self.api_keys = api_keys
        self.identity = identity
        self.query_limits = TokenBucketLimiter("query", cfg.query_burst, cfg.query_refill_per_s)
        self.publish_limits = TokenBucketLimiter("publication", cfg.publish_burst, cfg.publish_refill_per_s)
        self.publications = SitePublications(registry, index, self.publish_limits)
        self.calibration = calibration or Calibration()
        self.reliability = reliability
        self.history = SiteHistory(registry.path.parent / HISTORY_FILE)  # tier signal; survives restarts
        self.engine = QueryEngine(cfg, embedder, index, registry, transport, self.calibration, reliability,
                                  self.history)
        # The router HTTP queries get: None keeps the engine's default (summary matching).
        self.router = None
        if cfg.router == "learned":
            from hansa.gateway.learned.router import open_router

            self.router = open_router(cfg, index, registry.path.parent)
        self._owned = resources_to_close or ExitStack()
        self._closed = False

    @classmethod
    def open(
        cls,
        cfg: Config | GatewayConfig,
        *,
        embedder: Embedder | None = None,
        vector_store: VectorStore | None = None,
        registry: SiteRegistry | None = None,
        transport: SiteTransport | Callable[[SiteIdentity, GatewayConfig], SiteTransport] | None = None,
        api_keys: ApiKeyStore | None = None,
        identity: SiteIdentity | None = None,
    ) -> "Gateway":
        """Wire a gateway. `cfg` is the whole Config (the defaults of every omitted part come from
        it: `<home>/gateway` state, the configured embedder and Milvus) or only its GatewayConfig
        (then embedder, vector_store and registry must be given).

        `api_keys` and `identity` default to the files beside the registry (`api-keys.json`,
        `keys/`); `transport` to signed HTTP with the gateway's identity. A callable `transport`
        is given the identity and config (for transports that sign with the gateway's key)."""
        full = cfg if isinstance(cfg, Config) else None
        gcfg = cfg.gateway if isinstance(cfg, Config) else cfg
        owned = ExitStack()
        try:
            if registry is None:
                if full is None:
                    raise ConfigError("Gateway.open: give a registry, or the whole Config to open <home>/gateway's")
                registry = SiteRegistry(full.home / "gateway" / "registry.json")
            if embedder is None:
                if full is None:
                    raise ConfigError("Gateway.open: give an embedder, or the whole Config to open the configured one")
                from hansa.adapters.embedder import open_embedder

                embedder = open_embedder(full)
            if vector_store is None:
                if full is None:
                    raise ConfigError("Gateway.open: give a vector store, or the whole Config to open Milvus")
                from hansa.adapters.vector.milvus import MilvusVectorStore

                vector_store = owned.enter_context(MilvusVectorStore(
                    full.milvus_uri, token=full.milvus.token, prefix=full.milvus.collection_prefix))
            gateway_dir = registry.path.parent
            api_keys = api_keys if api_keys is not None else open_api_keys(gateway_dir)
            identity = identity if identity is not None else gateway_identity(gateway_dir)
            if transport is None:
                transport = HttpSiteTransport(identity, gcfg.allow_private_addresses)
            elif isinstance(transport, type) or not hasattr(transport, "call"):  # a factory
                transport = transport(identity, gcfg)
            space = EmbeddingSpace(model_id=embedder.model_id, dim=embedder.dim)
            # The summary index lives in memory, rebuilt from its durable copy (Milvus rows + head
            # files) by SitePublications, which purges sets of sites revoked while we were down.
            index = SummaryIndex(vector_store, space, gateway_dir / "publications")
            calibration = load_calibration(calibration_path(gcfg, gateway_dir))
            reliability = SiteReliability.open(gateway_dir, half_life_s=gcfg.reliability_half_life_hours * 3600.0)
            owned.callback(reliability.close)
            gw = cls(gcfg, embedder=embedder, index=index, registry=registry, transport=transport,  # type: ignore[arg-type]
                     api_keys=api_keys, identity=identity, calibration=calibration, resources_to_close=owned,
                     reliability=reliability)
        except BaseException:
            owned.close()
            raise
        return gw

    # -- the two things a gateway does --------------------------------------------------------------

    def query(self, request: QueryRequest, client: str, *, policy: QueryPolicy | None = None) -> QueryResult:
        """Answer `request` for `client` (an API key name; the rate-limit identity and the key whose
        origin allow-list applies). `policy` picks router/gate/refiner in-process (never from HTTP)."""
        self.registry.poll()  # a registry change made by another process applies from this query
        self.query_limits.charge(client, request.fan_out(self.cfg.top_k_sites))
        if self.router is not None and (policy is None or policy.router is None):
            policy = replace(policy or QueryPolicy(), router=self.router)
        return self.engine.run(request, policy=policy, allowed_origins=self.api_keys.allowed_origins(client))

    def publish(self, site_id: str, envelope: Any) -> dict[str, Any]:
        """Accept a site's signed publication (see gateway.publishing.SitePublications.publish)."""
        self.registry.poll()
        return self.publications.publish(site_id, envelope)

    # -- views ----------------------------------------------------------------------------------------

    def sites_view(self) -> dict[str, Any]:
        """The registry as operators see it: every site with its expiry and routability."""
        now = utc_now()
        learned = {r["site_id"]: r for r in self.reliability.view()} if self.reliability else {}
        return {"sites": [{**r.view(now), **({"reliability": learned[r.site_id]} if r.site_id in learned else {})}
                          for r in self.registry.list()]}

    def health(self) -> dict[str, Any]:
        records = self.registry.list()
        now = utc_now()
        return {"status": "ok", "sites": len(records), "routable_sites": sum(r.is_routable(now) for r in records),
                "summaries": self.index.count(), "embedding": self.space.to_json()}

    @staticmethod
    def openapi() -> bytes:
        return resources.files("hansa.gateway").joinpath("openapi.json").read_bytes()

    def close(self, timeout: float | None = 30.0) -> bool:
        """Let the index's durable write-behind finish, then close what `open` opened. Idempotent.
        Returns whether everything committed reached the durable copy."""
        if self._closed:
            return True
        self._closed = True
        try:
            self.history.save()
            return self.index.close(timeout)
        finally:
            self._owned.close()

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
