"""The gateway's HTTP API: a thin adapter over the `Gateway` service (gateway.service).

Endpoints:
  POST /v1/sites/<site_id>/publications  a site's signed publication (DSSE envelope JSON)
  POST /v1/query                         {"question", "conversation"?, "origin"?, "budget"?,
                                         "top_k_sites"?, "top_k"?, "sites"?} -> answer + trace
                                         (fields: gateway.query.request; "sites": call exactly these
                                         enrolled, active sites instead of the routed ones: baselines)
  GET  /v1/sites                         the registry, with each site's expiry and routability
  GET  /v1/health                        liveness plus index size; "degraded" (still 200) when a
                                         routable site failed its last call
  GET  /metrics                          Prometheus metrics (gateway.metrics), every worker's
  GET  /v1/openapi.json                  the OpenAPI 3.1 description of all of the above
  GET  /admin, /admin/api/state          the read-only admin page and its JSON, behind `[gateway]
                                         admin_key` (gateway.http.admin_page; 404 when no key is set)

What stays here is what belongs to HTTP: query clients authenticate with an API key
(`Authorization: Bearer ...`, hansa.gateway.trust.apikeys) before any body is read; every body must be sent
as application/json (415 otherwise) and is parsed by the strict loader; every failure is JSON with the HansaError's status (a body over
`max_request_bytes` is 413); a bug is a logged 500 with no traceback in the response. Everything
else — verifying publications, routing, calling sites, fusing — is the service's.
"""
from __future__ import annotations

from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from hansa.core import metrics as prometheus
from hansa.core.errors import HansaError
from hansa.core.jsonsafe import dumps, loads_strict, require_json_type
from hansa.core.logs import get_logger
from hansa.gateway.http.admin_auth import LOGIN_BURST, LOGIN_REFILL_PER_S
from hansa.gateway.http.admin_page import create_admin_blueprint
from hansa.gateway.http.admin_state import admin_state
from hansa.gateway.query.call import all_failed
from hansa.gateway.query.request import QueryRequest
from hansa.gateway.http.openai_api import create_openai_blueprint
from hansa.gateway.trust.publishing import PublicationConflict
from hansa.gateway.trust.ratelimit import TokenBucketLimiter
from hansa.gateway.service import Gateway
from hansa.sync.httpsig import QUERY_ID_HEADER
from hansa.sync.wire import validate_site_id

log = get_logger(__name__)


def _json(obj: Any, status: int = 200) -> Response:
    return Response(dumps(obj), status=status, mimetype="application/json")


def _body() -> Any:
    """The request body through the strict loader (415 if not sent as JSON, 413 if over the size cap).

    A body without Content-Length (chunked) is read only up to the cap, and werkzeug returns
    those bytes without complaint: one that fills the cap is refused rather than parsed cut short."""
    require_json_type(request.mimetype, f"{request.method} {request.path}")
    data = request.get_data(cache=False)
    cap = request.max_content_length
    if request.content_length is None and cap is not None and len(data) >= cap:
        raise RequestEntityTooLarge()
    return loads_strict(data)


def create_gateway_app(gateway: Gateway) -> Flask:
    """A Flask app serving `gateway`; the caller owns (and closes) the gateway. The answer, its
    readable citations and the per-site summary are the service's (synthesized when the gateway was
    opened with an LLM); this adapter serializes them."""
    cfg = gateway.cfg
    openapi = gateway.openapi()
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = cfg.max_request_bytes

    @app.errorhandler(HansaError)
    def _hansa_error(exc: HansaError) -> Response:
        resp = _json({"error": str(exc), "kind": type(exc).__name__}, exc.http_status)
        resp.headers.update(getattr(exc, "http_headers", {}))  # Retry-After, WWW-Authenticate
        return resp

    @app.errorhandler(PublicationConflict)
    def _conflict(exc: PublicationConflict) -> Response:
        """A 409 carries the floor and the held set's manifest digest, so a site can resend its
        whole set above it."""
        return _json(exc.body().to_json(), exc.http_status)

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
        validate_site_id(site_id)  # a bad path is refused before its body is read
        return _json(gateway.publish(site_id, _body()))

    @app.post("/v1/query")
    def query() -> Response:
        client = gateway.api_keys.authenticate(request.headers.get("Authorization"))  # before reading any body
        query = QueryRequest.from_json(_body())
        result = gateway.query(query, client)
        query_id = result.trace.query_id or ""
        if all_failed(result.sites, query.budget):  # not a 200 "No answer": the per-site detail says why
            failed = _json({"error": "every called site failed", "kind": "UpstreamError", "sites": result.sites,
                            "query_id": query_id}, 502)
            failed.headers[QUERY_ID_HEADER] = query_id
            return failed
        resp = _json(result.to_json())
        resp.headers[QUERY_ID_HEADER] = query_id
        return resp

    @app.get("/v1/sites")
    def sites() -> Response:
        return _json(gateway.sites_view())

    @app.get("/v1/openapi.json")
    def openapi_spec() -> Response:
        return Response(openapi, mimetype="application/json")

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        from hansa.gateway import metrics as gateway_metrics

        gateway_metrics.SUMMARIES.set(gateway.index.count())
        return Response(prometheus.render(), mimetype=None, content_type=prometheus.CONTENT_TYPE)

    @app.get("/v1/health")
    def health() -> Response:
        return _json(gateway.health())

    app.register_blueprint(create_openai_blueprint(gateway))  # /v1/chat/completions, /v1/models
    login_limits = TokenBucketLimiter("admin-login", LOGIN_BURST, LOGIN_REFILL_PER_S, shared=gateway.shared)
    app.register_blueprint(create_admin_blueprint(cfg.admin_key, lambda: admin_state(gateway), login_limits))
    return app
