"""The gateway's HTTP API, built by a factory so every test and process gets its own state.

Endpoints:
  POST /v1/sites/<site_id>/publications  a site's signed publication (DSSE envelope JSON)
  POST /v1/query                         {"question", "top_k_sites"?, "top_k"?, "sites"?} -> answer + trace
                                         ("sites": call exactly these enrolled, active sites instead of
                                         the routed ones: baselines and oracles for evaluation)
  GET  /v1/sites                         the registry, with each site's expiry and routability
  GET  /v1/health                        liveness plus index size
  GET  /v1/openapi.json                  the OpenAPI 3.1 description of all of the above

Query clients authenticate with an API key (`Authorization: Bearer ...`, hansa.gateway.apikeys);
queries are metered per key and publications per verified site by token buckets whose cost is the
fan-out (hansa.gateway.ratelimit).

Every body is parsed by the strict loader; every failure is JSON with the HansaError's status
(a body over `max_request_bytes` is 413); a bug is a logged 500 with no traceback in the response.
"""
from __future__ import annotations

import re
import threading
import time
from importlib import resources
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.vector.base import VectorStore
from hansa.core.config import Config, GatewayConfig
from hansa.core.errors import ConflictError, HansaError, InputError, NotFoundError, VerificationError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.gateway.apikeys import ApiKeyStore, open_api_keys
from hansa.gateway.client import call_sites, gateway_identity
from hansa.gateway.fusion import fuse
from hansa.gateway.index import SummaryIndex
from hansa.gateway.ratelimit import TokenBucketLimiter
from hansa.gateway.registry import REVOKED, SiteRecord, SiteRegistry, utc_now
from hansa.gateway.router import score_sites, select_sites
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import open_publication
from hansa.sync.wire import MAX_QUESTION_CHARS, EmbeddingSpace, RetrieveRequest, validate_site_id, json_int

log = get_logger(__name__)

MAX_TOP_K_SITES = 32
MAX_EXPLICIT_SITES = 64
MAX_TOP_K = 100  # evidence items per site, as RetrieveRequest allows
_QUERY_KEYS = {"question", "top_k_sites", "top_k", "sites"}
# A question must hold a character that is whitespace neither to Python's str.strip nor to JSON
# Schema's (ECMA-262) \s, so the OpenAPI spec's pattern and this check accept exactly the same set.
_NOT_BLANK = re.compile(r"[^\s\u001c-\u001f\u0085\ufeff]")


def _json(obj: Any, status: int = 200) -> Response:
    return Response(dumps(obj), status=status, mimetype="application/json")


def _body() -> Any:
    """The request body through the strict loader (413 first if it is over the size cap).

    A body without Content-Length (chunked) is read only up to the cap, and werkzeug returns
    those bytes without complaint: one that fills the cap is refused rather than parsed cut short."""
    data = request.get_data(cache=False)
    cap = request.max_content_length
    if request.content_length is None and cap is not None and len(data) >= cap:
        raise RequestEntityTooLarge()
    return loads_strict(data)


def _int_option(obj: dict[str, Any], key: str, default: int, high: int) -> int:
    value = json_int(obj.get(key, default))
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InputError(f"query: {key!r} must be an integer in 1..{high}")
    return value


def _explicit_sites(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_EXPLICIT_SITES:
        raise InputError(f"query: 'sites' must be a list of at most {MAX_EXPLICIT_SITES} site ids")
    out: list[str] = []
    for site_id in value:
        if validate_site_id(site_id) not in out:
            out.append(site_id)
    return out


def _parse_query(obj: Any, default_sites: int) -> tuple[RetrieveRequest, int, list[str] | None]:
    if not isinstance(obj, dict):
        raise InputError('query: send a JSON object like {"question": "..."}')
    extra = set(obj) - _QUERY_KEYS
    if extra:
        raise InputError(f"query: unknown keys {sorted(extra)}; allowed: {sorted(_QUERY_KEYS)}")
    question = obj.get("question")
    if not isinstance(question, str):
        raise InputError("query: 'question' must be a string")
    if len(question) > MAX_QUESTION_CHARS or not _NOT_BLANK.search(question):
        raise InputError(f"query: 'question' must have 1-{MAX_QUESTION_CHARS} characters, not all whitespace")
    try:
        question.encode("utf-8")  # a lone surrogate escape ("\ud800") parses, then breaks the tokenizer
    except UnicodeEncodeError as exc:
        raise InputError("query: 'question' is not valid Unicode (it holds a lone surrogate escape)") from exc
    top_k_sites = _int_option(obj, "top_k_sites", default_sites, MAX_TOP_K_SITES)
    explicit = _explicit_sites(obj["sites"]) if "sites" in obj else None
    wire: dict[str, Any] = {"question": question}
    if "top_k" in obj:
        wire["top_k"] = _int_option(obj, "top_k", 10, MAX_TOP_K)
    req = RetrieveRequest.from_json(wire)
    return req, top_k_sites, explicit


def _check_explicit(explicit: list[str], records: dict[str, SiteRecord]) -> None:
    """Named sites must be enrolled and not revoked; an expired publication only affects routing."""
    for site_id in explicit:
        rec = records.get(site_id)
        if rec is None:
            raise NotFoundError(f"query: site {site_id!r} is not enrolled")
        if rec.status == REVOKED:
            raise VerificationError(f"query: site {site_id!r} is revoked")


def _fan_out(top_k_sites: int, explicit: list[str] | None) -> int:
    """What a query costs: one token per site it may ask (at least one: embedding is not free)."""
    return max(1, top_k_sites if explicit is None else len(explicit))


def _exclusion(rec: SiteRecord | None) -> str:
    if rec is None:
        return "not enrolled"
    if rec.status == REVOKED:
        return "revoked"
    return "publication expired"


def create_gateway_app(
    cfg: Config | GatewayConfig,
    embedder: Embedder,
    vector_store: VectorStore,
    registry: SiteRegistry,
    api_keys: ApiKeyStore | None = None,
    identity: SiteIdentity | None = None,
) -> Flask:
    """`cfg` is the whole Config (its [gateway] section is used) or just the GatewayConfig.

    `api_keys` defaults to the key file beside the registry (`<home>/gateway/api-keys.json`)."""
    if isinstance(cfg, Config):
        cfg = cfg.gateway
    if api_keys is None:
        api_keys = open_api_keys(registry.path.parent)
    if identity is None:  # the key every call to a site is signed with (`<home>/gateway/keys`)
        identity = gateway_identity(registry.path.parent)
    query_limits = TokenBucketLimiter("query", cfg.query_burst, cfg.query_refill_per_s)
    publish_limits = TokenBucketLimiter("publication", cfg.publish_burst, cfg.publish_refill_per_s)
    openapi = resources.files("hansa.gateway").joinpath("openapi.json").read_bytes()
    space = EmbeddingSpace(model_id=embedder.model_id, dim=embedder.dim)
    # The summary index lives in memory, rebuilt from its durable copy (Milvus rows + head files);
    # sets of sites revoked or removed while the gateway was down (e.g. by the CLI) are purged.
    index = SummaryIndex(vector_store, space, registry.path.parent / "publications")
    active = {rec.site_id for rec in registry.list() if rec.status != REVOKED}
    index.restore(lambda site_id: site_id in active)
    registry.on_untrusted(index.remove_site)  # revoked (or all keys replaced) from now on: rows go at once
    publish_lock = threading.Lock()  # sequence check -> index swap -> record, one site at a time

    app = Flask(__name__)
    app.before_request(registry.poll)  # a registry change made by another process applies from this request
    app.config["MAX_CONTENT_LENGTH"] = cfg.max_request_bytes
    app.extensions["hansa.gateway"] = {"index": index, "registry": registry, "space": space, "api_keys": api_keys,
                                       "query_limits": query_limits, "publish_limits": publish_limits}

    @app.errorhandler(HansaError)
    def _hansa_error(exc: HansaError) -> Response:
        resp = _json({"error": str(exc), "kind": type(exc).__name__}, exc.http_status)
        resp.headers.update(getattr(exc, "http_headers", {}))  # Retry-After, WWW-Authenticate
        return resp

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Response:
        message = (f"request body too large: at most {cfg.max_request_bytes} bytes" if exc.code == 413
                   else exc.description or exc.name)
        resp = _json({"error": message, "kind": exc.name}, exc.code or 500)
        resp.headers.update({k: v for k, v in exc.get_headers() if k.lower() == "allow"})  # 405 says what is
        return resp

    @app.errorhandler(Exception)
    def _bug(exc: Exception) -> Response:
        log.exception("gateway.bug", path=request.path)
        return _json({"error": "internal error; the gateway log has the details", "kind": "InternalError"}, 500)

    @app.post("/v1/sites/<site_id>/publications")
    def publish(site_id: str) -> Response:
        """Verify, check against the floor and the held set, record the floor, swap the set in.

        A resend of the publication in force is answered as accepted (`replay`); a 409 carries the
        floor and the held set's manifest digest, so a site can resend its whole set above it."""
        validate_site_id(site_id)
        envelope = _body()
        keys = registry.keys_for(site_id)
        pub = open_publication(envelope, site_id, keys, space)
        publish_limits.charge(pub.site_id, 1)  # keyed by the verified signer, never by the URL alone
        with publish_lock:
            try:
                if index.is_replay(pub):
                    held = index.current(site_id)
                    return _json({"site_id": site_id, "sequence": pub.sequence, "accepted": len(held.rows) if held else 0,
                                  "expires": pub.expires, "changed": 0, "withdrawn": 0, "replay": True})
                registry.check_sequence(site_id, pub.sequence, len(pub.manifest))  # + site policy
                plan = index.plan(pub, registry.last_sequence(site_id))
                rec = registry.record_publication(site_id, pub.sequence, pub.expires, len(plan.new.rows))
                index.commit(plan)  # if this fails the old set stays, above a raised floor: resend in full
            except ConflictError as exc:
                held = index.current(site_id)
                return _json({"error": str(exc), "kind": type(exc).__name__,
                              "current_sequence": registry.last_sequence(site_id),
                              "current_manifest_sha256": held.manifest_sha256 if held else None}, 409)
        log.info("publication.accepted", site_id=site_id, sequence=pub.sequence, summaries=len(plan.new.rows),
                 changed=plan.changed, withdrawn=plan.withdrawn)
        return _json({"site_id": site_id, "sequence": rec.last_sequence, "accepted": len(plan.new.rows),
                      "expires": rec.expires, "changed": plan.changed, "withdrawn": plan.withdrawn, "replay": False})

    @app.post("/v1/query")
    def query() -> Response:
        t0 = time.perf_counter()
        client = api_keys.authenticate(request.headers.get("Authorization"))  # before reading any body
        req, top_k_sites, explicit = _parse_query(_body(), cfg.top_k_sites)
        query_limits.charge(client, _fan_out(top_k_sites, explicit))
        question_vector = embedder.embed_one(req.question)
        hits = index.search(question_vector, cfg.top_m_summaries)
        now = utc_now()
        records = {r.site_id: r for r in registry.list()}
        routable = {sid for sid, r in records.items() if r.is_routable(now)}
        considered = score_sites(hits, routable)
        if explicit is None:
            called = [s.site_id for s in select_sites(considered, top_k_sites, cfg.site_margin)]
        else:
            _check_explicit(explicit, records)
            called = explicit
        excluded = sorted({h.site_id for h in hits} - routable)
        t1 = time.perf_counter()
        calls = call_sites(
            [(site_id, records[site_id].url, records[site_id].public_keys) for site_id in called],
            req,
            cfg.site_timeout_s,
            identity=identity,
            allow_private_addresses=cfg.allow_private_addresses,
        )
        t2 = time.perf_counter()
        fused = fuse(question_vector, calls, embedder)
        t3 = time.perf_counter()
        trace: dict[str, Any] = {
            "sites_considered": [s.to_json() for s in considered],
            "sites_excluded": [{"site_id": sid, "reason": _exclusion(records.get(sid))} for sid in excluded],
            "sites_called": called,
            "selection": "routed" if explicit is None else "explicit",
            "per_site": [c.trace_json() for c in calls],
            "routing_ms": round((t1 - t0) * 1000, 1),  # includes embedding the question
            "calls_ms": round((t2 - t1) * 1000, 1),
            "fusion_ms": round((t3 - t2) * 1000, 1),
            "total_ms": round((t3 - t0) * 1000, 1),
            "bytes_out": sum(c.bytes_out for c in calls),
            "bytes_in": sum(c.bytes_in for c in calls),
        }
        if fused.note:
            trace["note"] = fused.note
        return _json({"answer": fused.answer, "citations": [c.to_json() for c in fused.citations], "trace": trace})

    @app.get("/v1/sites")
    def sites() -> Response:
        now = utc_now()
        return _json({"sites": [r.view(now) for r in registry.list()]})

    @app.get("/v1/openapi.json")
    def openapi_spec() -> Response:
        return Response(openapi, mimetype="application/json")

    @app.get("/v1/health")
    def health() -> Response:
        records = registry.list()
        now = utc_now()
        return _json(
            {
                "status": "ok",
                "sites": len(records),
                "routable_sites": sum(r.is_routable(now) for r in records),
                "summaries": index.count(),
                "embedding": space.to_json(),
            }
        )

    return app
