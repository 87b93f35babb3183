"""`Gateway`: the gateway's one composition root — build it once, use it from HTTP, CLI, eval, tests.

Why: the gateway used to be assembled in four places and reached through a Flask app's
`extensions` dict from nine; each caller had its own idea of what a gateway is made of. Now
`Gateway.open(cfg, ...)` wires the parts (registry, summary index, publication owner, query engine,
transport, rate limits, API keys, signing identity) and every caller holds the same object:

    gw = Gateway.open(cfg, llm=open_llm(cfg))       # what `hansa gateway serve` runs
    gw = Gateway.open(cfg, embedder=e, vector_store=s, registry=r)       # tests, federation/local.py
    gw = Gateway.open(cfg, ..., transport=InProcessSiteTransport(identity, apps))  # fast unit tier
    app = create_gateway_app(gw)                    # Flask: a thin HTTP adapter over it
    gw.query(QueryRequest(question="..."), client="eval", policy=QueryPolicy(...))
    gw.close()

What `open` builds itself it also closes (the embedder and vector store it opened from `cfg`); what
the caller passes in stays the caller's to close. With `llm` (hansa.adapters.llm.LLM) every query's
answer is synthesized from the fused evidence and checked (query/synthesize.py); without it, the
answer is extractive. Either way `query()` returns the final answer with readable citations. The summary index is always the gateway's: it is
rebuilt from its durable copy on open and flushed on close.
"""
from __future__ import annotations

import fcntl
import json
import threading
import time
from contextlib import ExitStack
from dataclasses import replace
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.embedder.memo import MemoEmbedder
from hansa.adapters.embedder.scale import scale_of, scaled_gateway
from hansa.adapters.vector.base import VectorStore
from hansa.core.config import Config, GatewayConfig
from hansa.core.errors import ConfigError, HansaError
from hansa.core.files import write_json_atomic
from hansa.core.logs import get_logger
from hansa.core.shared_state import ChangeWatcher, SharedState
from hansa.gateway.trust.apikeys import ApiKeyStore, open_api_keys
from hansa.gateway.client import gateway_identity
from hansa.gateway.query.calibration import Calibration, load_calibration
from hansa.gateway.query.engine import QueryEngine, QueryResult
from hansa.gateway.query.policy import QueryPolicy
from hansa.gateway.query.request import QueryRequest
from hansa.gateway.index.head_mirror import HeadMirror
from hansa.gateway.query.reliability import HISTORY_FILE, SiteHistory
from hansa.gateway.index.summaries import SummaryIndex
from hansa.gateway.trust.publishing import SitePublications
from hansa.gateway.client import new_query_id, query_scope
from hansa.gateway.trust.ratelimit import RateLimited, TokenBucketLimiter
from hansa.gateway.recent_queries import RecentQueries, query_record
from hansa.gateway.trust.registry import REVOKED, SiteRegistry, utc_now
from hansa.gateway.query.conduct import SiteConduct
from hansa.gateway.query.reliability import SiteReliability
from hansa.gateway.transport import HttpSiteTransport, SiteTransport
from hansa.sync.keys import SiteIdentity
from hansa.sync.wire import EmbeddingSpace

log = get_logger(__name__)
ROUTING_KEY = "routing"  # the shared-state key bumped when any worker changes what is routable
PUBLISH_FLUSH_S = 30.0  # a worker waits this long for a publication to be durable before announcing it


def calibration_path(cfg: GatewayConfig, gateway_dir: Path) -> Path:
    """Where the gate's calibration lives: `[gateway] calibration_file`, relative to the gateway home."""
    return gateway_dir / cfg.calibration_file  # an absolute setting replaces gateway_dir


class FollowerRefusal(HansaError):
    """A publication sent to a follower replica: only the primary accepts publications."""

    http_status = 503


SPACE_FILE = "embedding-space"  # JSON, but not *.json: the durable store reads every *.json there as a site head
INDEX_DIR = "publications"
STAGED_DIR = "publications-next"  # the sets published with [gateway] next_embedder, not routed yet
RETIRED_PREFIX = "publications-retired-"


def _held_space(state_dir: Path) -> EmbeddingSpace | None:
    path = state_dir / SPACE_FILE
    if not path.is_file():
        return None
    try:
        return EmbeddingSpace.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, HansaError) as exc:
        raise ConfigError(f"{path} is damaged ({exc}): restore it, or remove it to accept the configured embedder") from exc


def promote_staged(gateway_dir: Path, space: EmbeddingSpace, store: VectorStore) -> bool:
    """At start: when the configured embedder is the one a staged index was built for, the staged
    sets become the index and the old space's rows and heads are dropped. True when it promoted.

    Crash-safe by order: (1) the index directory is renamed to a retired name, (2) the staged one
    to the index's name (the switch), (3) the retired rows are deleted and (4) its directory; a
    start after a crash between any two steps finds either a staged index to promote or a retired
    one to finish dropping."""
    index_dir, staged = gateway_dir / INDEX_DIR, gateway_dir / STAGED_DIR
    if not staged.exists() and not any(gateway_dir.glob(RETIRED_PREFIX + "*")):
        return False
    with open(gateway_dir / ".index.lock", "a+b") as lock:  # worker processes start together: one promotes
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _promote_locked(gateway_dir, index_dir, staged, space, store)


def _promote_locked(gateway_dir: Path, index_dir: Path, staged: Path, space: EmbeddingSpace, store: VectorStore) -> bool:
    import shutil

    from hansa.gateway.index.durable import DurableStore

    promoted = False
    if _held_space(staged) == space:
        if index_dir.exists():
            index_dir.rename(gateway_dir / f"{RETIRED_PREFIX}{time.time_ns()}")
        staged.rename(index_dir)
        promoted = True
        log.warning("gateway.index_promoted", model_id=space.model_id, model_sha256=space.model_sha256,
                    sites=len(list(index_dir.glob("*.json"))))
    for retired in sorted(gateway_dir.glob(RETIRED_PREFIX + "*")):
        old = DurableStore(store, space.dim, retired)
        for head in old.heads():
            old.delete_rows([*head.keys().values(), *head.orphans], legacy=head.legacy)
        shutil.rmtree(retired)
    return promoted


def open_staged_index(cfg: GatewayConfig, store: VectorStore, current: EmbeddingSpace, gateway_dir: Path,
                      next_embedder: Embedder | None) -> SummaryIndex | None:
    """The staged index for `[gateway] next_embedder` (a primary with a durable store only), or None."""
    if next_embedder is None:
        return None
    if cfg.role == "follower":
        raise ConfigError("[gateway] next_embedder is staged by the primary; a follower routes what the primary serves")
    space = EmbeddingSpace.of(next_embedder)
    if space == current:
        raise ConfigError(f"[gateway] next_embedder {cfg.next_embedder!r} is the embedder the gateway already runs")
    if space.dim != current.dim:
        raise ConfigError(f"[gateway] next_embedder has dimension {space.dim}, the current one {current.dim}: "
                          "a staged index shares the durable collection, so it must have the same dimension")
    check_index_space(gateway_dir / STAGED_DIR, space)
    return SummaryIndex(store, space, gateway_dir / STAGED_DIR)


def check_index_space(state_dir: Path, space: EmbeddingSpace) -> None:
    """Refuse to reload a durable index made in another embedding space than the configured one.

    Why: the durable copy holds vectors, not texts; an embedder swapped for another of the same
    dimension would otherwise route questions against another model's vectors, silently. The
    first start (or one from before this file existed) records the space."""
    path = state_dir / SPACE_FILE
    held = _held_space(state_dir)
    if held is not None:
        if held != space:
            raise ConfigError(
                f"the gateway's index in {state_dir} holds publications made with {held.describe()}, but the configured "
                f"embedder is {space.describe()}: set [embedder] model back; to move without a gap, stage the new "
                f"one first with [gateway] next_embedder (docs/configuration.md, \"Choosing the embedder\"); or "
                f"move {state_dir} aside to start an empty index in the new space (sites then republish)")
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, space.to_json())


def open_index(cfg: GatewayConfig, store: VectorStore, space: EmbeddingSpace, gateway_dir: Path) -> SummaryIndex:
    """The summary index for this gateway's `[gateway] role` (docs/production.md, "Replicas on several hosts")."""
    if cfg.role != "follower":
        promote_staged(gateway_dir, space, store)
        check_index_space(gateway_dir / INDEX_DIR, space)
    if cfg.role == "follower":
        if not store.shared:
            raise ConfigError("[gateway] role = \"follower\" follows a primary through a Milvus server it shares: "
                              "set [milvus] uri to that server (http://host:19530), not a Milvus Lite file")
        return SummaryIndex(store, space, mirror=HeadMirror(store), follower=True)
    return SummaryIndex(store, space, gateway_dir / INDEX_DIR, mirror=HeadMirror(store) if store.shared else None)


class Gateway:
    """The gateway service. Attributes: `cfg` (GatewayConfig), `registry`, `index`, `space`,
    `embedder`, `transport`, `api_keys`, `identity`, `publications`, `engine`, `calibration`, `router` (the
    configured learned router, or None for the engine's summary matching), `history` (which sites
    answers cite: a tier signal, `site-history.json`), `recent_queries` (the admin page's ring of
    answered queries and their traces: every worker's with `shared`), `query_limits`, `publish_limits`.
    Thread-safe for concurrent queries and publications."""

    def __init__(self, cfg: GatewayConfig, *, embedder: Embedder, index: SummaryIndex, registry: SiteRegistry,
                 transport: SiteTransport, api_keys: ApiKeyStore, identity: SiteIdentity,
                 calibration: Calibration | None = None, resources_to_close: ExitStack | None = None,
                 reliability: SiteReliability | None = None, shared: SharedState | None = None,
                 llm: Any = None, staged: SummaryIndex | None = None, conduct: SiteConduct | None = None) -> None:
        self.cfg = cfg
        if cfg.embedding_memo_entries > 0 and not isinstance(embedder, MemoEmbedder):
            embedder = MemoEmbedder(embedder, cfg.embedding_memo_entries)  # questions and measured sentences
        self.embedder = embedder
        self.index = index
        self.space = index.space
        self.registry = registry
        self.transport = transport
        self.api_keys = api_keys
        self.identity = identity
        # With `shared` (several worker processes): rate-limit buckets live in the shared file, and a
        # change of what is routable made by one worker is reloaded by the others at their next request.
        self.shared = shared
        self.query_limits = TokenBucketLimiter("query", cfg.query_burst, cfg.query_refill_per_s, shared=shared)
        self.publish_limits = TokenBucketLimiter("publication", cfg.publish_burst, cfg.publish_refill_per_s,
                                                 shared=shared)
        self._routing = ChangeWatcher(shared, ROUTING_KEY) if shared is not None else None
        # `staged`: the sets published with [gateway] next_embedder, kept but not routed (open_staged_index)
        self.staged = staged
        self.publications = SitePublications(registry, index, self.publish_limits,
                                             timedelta(days=cfg.max_publication_lifetime_days), staged=staged)
        if shared is not None:
            registry.on_untrusted(lambda site_id: shared.bump(ROUTING_KEY))
        # The last call to each site: (status, at); /v1/health and sites_view() report it.
        self._last_calls: dict[str, dict[str, str]] = {}
        self._last_lock = threading.Lock()
        self.recent_queries = RecentQueries(cfg.recent_queries, shared)
        self.calibration = calibration or Calibration()
        self.reliability = reliability
        self.history = SiteHistory(registry.path.parent / HISTORY_FILE)  # tier signal; survives restarts
        self.engine = QueryEngine(cfg, embedder, index, registry, transport, self.calibration, reliability,
                                  self.history, llm=llm, conduct=conduct)
        self.conduct = self.engine.conduct
        # The router HTTP queries get: None keeps the engine's default (summary matching).
        self.router = None
        if cfg.router == "learned" or cfg.strategy == "learned":
            from hansa.gateway.query.learned.router import open_router

            self.router = open_router(cfg, index, registry.path.parent, embedder=embedder)
        # The policy HTTP queries run with ([gateway] strategy; None: the engine's defaults).
        from hansa.gateway.query.policy import named_policy

        self.policy = None if cfg.strategy == "learned" else named_policy(cfg.strategy, self)
        self._owned = resources_to_close or ExitStack()
        self._closed = False
        self._followed_at = time.monotonic()  # a follower's index was loaded from the mirror at open

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
        shared: SharedState | None = None,
        llm: Any = None,
    ) -> "Gateway":
        """Wire a gateway. `cfg` is the whole Config (the defaults of every omitted part come from
        it: `<home>/gateway` state, the configured embedder and Milvus) or only its GatewayConfig
        (then embedder, vector_store and registry must be given).

        `api_keys` and `identity` default to the files beside the registry (`api-keys.json`,
        `keys/`); `transport` to signed HTTP with the gateway's identity. A callable `transport`
        is given the identity and config (for transports that sign with the gateway's key).
        `shared`: the state the service's worker processes share (`<home>/state.sqlite`), or None
        for one process. `llm`: the answer writer (hansa.adapters.llm.open_llm(cfg)), or None for
        extractive answers; the caller owns it."""
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

                embedder = open_embedder(full)  # __init__ keeps its embeddings ([gateway] embedding_memo_entries)
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
            if full is not None:  # settings in cosine units the operator left out: the embedder's
                gcfg = scaled_gateway(gcfg, full.explicit, scale_of(embedder))
            space = EmbeddingSpace.of(embedder)
            # The summary index lives in memory, rebuilt from its durable copy (Milvus rows + head
            # files) by SitePublications, which purges sets of sites revoked while we were down. On
            # a Milvus server a primary mirrors its heads there; a follower loads what it mirrored.
            index = open_index(gcfg, vector_store, space, gateway_dir)
            staged = None
            if gcfg.next_embedder:
                from hansa.adapters.embedder.catalog import require_model
                from hansa.adapters.embedder.onnx import OnnxEmbedder

                require_model(gcfg.next_embedder)  # a catalog name: every member can fetch the same files
                next_embedder = OnnxEmbedder(gcfg.next_embedder, cache_dir=full.onnx_cache_dir if full else None)
                staged = open_staged_index(gcfg, vector_store, space, gateway_dir, next_embedder)
            calibration = load_calibration(calibration_path(gcfg, gateway_dir))
            reliability = SiteReliability.open(gateway_dir, half_life_s=gcfg.reliability_half_life_hours * 3600.0,
                                               standing=gcfg.dispute_standing)
            owned.callback(reliability.close)
            conduct = SiteConduct.for_gateway(gcfg, gateway_dir)
            owned.callback(conduct.close)
            gw = cls(gcfg, embedder=embedder, index=index, registry=registry, transport=transport,  # type: ignore[arg-type]
                     api_keys=api_keys, identity=identity, calibration=calibration, resources_to_close=owned,
                     reliability=reliability, shared=shared, llm=llm, staged=staged, conduct=conduct)
        except BaseException:
            owned.close()
            raise
        return gw

    @property
    def llm(self) -> Any:
        """The LLM that writes answers (None: extractive answers). Settable: the engine reads it per query."""
        return self.engine.llm

    @llm.setter
    def llm(self, llm: Any) -> None:
        self.engine.llm = llm

    # -- the two things a gateway does --------------------------------------------------------------

    def query(self, request: QueryRequest, client: str, *, policy: QueryPolicy | None = None) -> QueryResult:
        """Answer `request` for `client` (an API key name; the rate-limit identity and the key whose
        origin allow-list applies). `policy` picks router/gate/refiner in-process (never from HTTP)."""
        with query_scope(new_query_id()) as query_id:
            from hansa.gateway import metrics

            try:
                self.sync()
                try:
                    self.query_limits.charge(client, request.fan_out(self.cfg.top_k_sites))
                except RateLimited:
                    metrics.RATE_LIMITED.labels(limit="query").inc()
                    raise
                policy = policy or self.policy
                if self.router is not None and (policy is None or policy.router is None):
                    policy = replace(policy or QueryPolicy(), router=self.router)
                result = self.engine.run(request, policy=policy, allowed_origins=self.api_keys.allowed_origins(client),
                                         query_id=query_id)
            except Exception as exc:
                if not isinstance(exc, HansaError) or exc.http_status >= 500:
                    metrics.QUERIES.labels(outcome="error").inc()
                raise
            self._remember_calls(result.calls)
            self.recent_queries.add(query_record(result, request.question, client, request.origin))
            metrics.record_query(result.trace, result.calls)
            log.info("query.answered", sites=len(result.calls), outcome=metrics.query_outcome(result.trace, result.calls))
            return result

    def publish(self, site_id: str, envelope: Any) -> dict[str, Any]:
        """Accept a site's signed publication (see gateway.trust.publishing.SitePublications.publish)."""
        from hansa.gateway import metrics

        self.sync()
        try:
            if self.index.follower:
                raise FollowerRefusal("this gateway is a follower replica and accepts no publications: "
                                      "publish to the federation's primary gateway")
            accepted = self.publications.publish(site_id, envelope)
        except RateLimited:
            metrics.RATE_LIMITED.labels(limit="publication").inc()
            metrics.PUBLICATIONS.labels(result="refused", reason="RateLimited").inc()
            raise
        except HansaError as exc:
            metrics.PUBLICATIONS.labels(result="refused", reason=type(exc).__name__).inc()
            raise
        metrics.PUBLICATIONS.labels(result="accepted", reason="replay" if accepted.get("replay") else "new").inc()
        if self.shared is not None and not accepted.get("replay"):
            # other workers reload from the durable copy: it must hold the set before they are told
            if not self.index.flush(PUBLISH_FLUSH_S):
                log.warning("publication.not_durable_yet", site_id=site_id)
            self.shared.bump(ROUTING_KEY)
        return accepted

    def sync(self) -> None:
        """Apply what other processes changed: the registry (revocations, floors) and, when the
        shared routing version moved, the site sets other workers accepted; a follower, every
        `follow_interval_s`, the sets its primary mirrored. Runs before each request."""
        self.registry.poll()
        following = self.index.follower and time.monotonic() - self._followed_at >= self.cfg.follow_interval_s
        if following or (self._routing is not None and self._routing.changed()):
            if following:
                self._followed_at = time.monotonic()
            trusted = {r.site_id for r in self.registry.list() if r.status != REVOKED}
            self.index.refresh_from_durable(keep=trusted.__contains__)

    def _remember_calls(self, calls: Any) -> None:
        at = utc_now().isoformat().replace("+00:00", "Z")
        with self._last_lock:
            for call in calls:
                self._last_calls[call.site_id] = {"status": call.status, "at": at}

    def last_call(self, site_id: str) -> dict[str, str] | None:
        """This process's last call to `site_id`: {status, at}, or None if never called."""
        with self._last_lock:
            found = self._last_calls.get(site_id)
            return dict(found) if found else None

    # -- views ----------------------------------------------------------------------------------------

    def sites_view(self) -> dict[str, Any]:
        """The registry as operators see it: every site with its expiry and routability."""
        self.sync()
        now = self.registry.clock()
        learned = {r["site_id"]: r for r in self.reliability.view()} if self.reliability else {}
        conduct = {s: v.to_json() for s, v in self.conduct.view().items()}
        records = self.registry.list()
        terms = self.index.term_sketches([r.site_id for r in records])
        return {"sites": [{**r.view(now), "last_call": self.last_call(r.site_id),
                           # words in the site's published term statistics (None: it publishes none)
                           "terms": len(terms[r.site_id]) if r.site_id in terms else None,
                           **({"reliability": learned[r.site_id]} if r.site_id in learned else {}),
                           # what its answers showed against its claims (gateway.query.conduct)
                           **({"conduct": conduct[r.site_id]} if r.site_id in conduct else {})}
                          for r in records]}

    def health(self) -> dict[str, Any]:
        self.sync()
        records = self.registry.list()
        now = self.registry.clock()
        routable = [r for r in records if r.is_routable(now)]
        # degraded (still 200): a routable site's last call from this process did not succeed
        unreachable = {r.site_id: last for r in routable
                       if (last := self.last_call(r.site_id)) is not None and last["status"] != "ok"}
        out: dict[str, Any] = {
            "status": "degraded" if unreachable else "ok", "sites": len(records), "routable_sites": len(routable),
            "summaries": self.index.count(), "embedding": self.space.to_json(), "role": self.cfg.role}
        if unreachable:
            out["unreachable_sites"] = unreachable
        return out

    @staticmethod
    def openapi() -> bytes:
        return resources.files("hansa.gateway.http").joinpath("openapi.json").read_bytes()

    def close(self, timeout: float | None = 30.0) -> bool:
        """Let the index's durable write-behind finish, then close what `open` opened. Idempotent.
        Returns whether everything committed reached the durable copy."""
        if self._closed:
            return True
        self._closed = True
        try:
            self.history.save()
            staged_ok = self.staged.close(timeout) if self.staged is not None else True
            return self.index.close(timeout) and staged_ok
        finally:
            self._owned.close()

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
