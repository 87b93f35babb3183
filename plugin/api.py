"""The site's HTTP API: what the gateway calls (`POST /v1/retrieve`) and a health probe.

Why so small: this is the only door into a site's data from outside, so it accepts one bounded,
strictly parsed request shape and answers with the wire types of hansa.sync, nothing else. Every
error is JSON with a status a client can act on; a bug is logged here and answered with a bare 500,
never a traceback. All retrieve requests pass through `_handle_retrieve`, the one place where the
gateway's request signature is checked.

Signed calls (trust model, guarantee 11): a retrieve request must carry an RFC 9421 Ed25519
signature by the federation gateway's key (`[site] gateway_public_key`) over its method, target
URI, body digest, content type and the site it is addressed to, fresh and never seen before;
anything else is refused with 401 before the body is parsed. Every response to an accepted request
(answers and errors alike) is signed with the site's own key and bound to that request, so the
gateway can tell this site's answer to this question from anything else. Replays are caught by a
nonce cache: in memory by default, or the SharedNonceCache every worker process shares
(`hansa site serve` passes it; hansa.plugin.serving). Behind a TLS-terminating proxy, set
`[site] proxy_hops`: the app then trusts that many proxies' X-Forwarded-Proto/-Host/-Port/-For
(werkzeug's ProxyFix), so the target URI the site rebuilds is the `https://` URL the gateway signed.

Tracing: the gateway may send its query id in `X-Hansa-Query-Id`. When present it must be covered
by the request signature (else the request is refused as a downgrade, like any uncovered required
component); once verified it is bound to every log event of the request (hansa.core.logs.bound).
Metrics (plugin/metrics.py) are served at `/metrics` in Prometheus text format.
"""
from __future__ import annotations

import os
import re
import threading
import time
from contextlib import ExitStack
from importlib import resources
from typing import Any

from flask import Flask, Response, g, request
from werkzeug.exceptions import HTTPException

from hansa.core import metrics
from hansa.core.errors import BackendError, ConfigError, HansaError, InputError, VerificationError
from hansa.core.jsonsafe import dumps, loads_strict, require_json_type
from hansa.plugin.answer_policy import AnswerPolicy
from hansa.core.logs import bound, get_logger
from hansa.core.wsgi_server import behind_proxies
from hansa.plugin import metrics as site_metrics
from hansa.plugin.install import load_identity, space_record
from hansa.plugin.retrieval import retrieve
from hansa.plugin.site import CHUNKS, SUMMARIES, SiteContext
from hansa.sync.httpsig import (
    MISDIRECTED,
    QUERY_ID_HEADER,
    RETRIEVE_COMPONENTS,
    RETRIEVE_TRACED_COMPONENTS,
    SITE_HEADER,
    HttpMessage,
    NonceCache,
    SignatureRefused,
    keyring,
    sign_response,
    verify_request,
)
from hansa.sync.keys import load_public_key
from hansa.sync.wire import RetrieveRequest

log = get_logger(__name__)

MAX_REQUEST_BYTES = 64 * 1024  # a question is at most 4000 characters; anything bigger is abuse
JSON_TYPE = "application/json"
QUERY_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")  # what may reach a log line from the gateway


def _json(body: Any, status: int = 200) -> Response:
    return Response(dumps(body), status=status, mimetype=JSON_TYPE)


def _gateway_keys(ctx: SiteContext) -> dict[str, Any]:
    """The federation gateway's key, the only one whose requests this site answers."""
    b64 = ctx.cfg.site.gateway_public_key.strip()
    if not b64:
        raise ConfigError(
            "no gateway key: set [site] gateway_public_key (or HANSA_SITE_GATEWAY_PUBLIC_KEY) to the "
            "federation gateway's public key; this site answers only requests signed with it"
        )
    try:
        return keyring([load_public_key(b64)])
    except VerificationError as exc:
        raise ConfigError(f"[site] gateway_public_key: {exc}") from exc


def create_site_app(ctx: SiteContext, *, nonces: Any = None) -> Flask:
    """A Flask app serving one opened, installed site; the caller owns (and closes) `ctx`.

    `nonces`: the replay cache (`use(key, until, now)`); default one in this process's memory,
    `hansa.sync.nonce_store.SharedNonceCache` when several worker processes serve the site."""
    gateway_keys = _gateway_keys(ctx)
    identity = load_identity(ctx)  # signs every answer
    nonces = NonceCache() if nonces is None else nonces
    AnswerPolicy.from_config(ctx.cfg.site)  # a bad [site] answer_* key stops the site here, not per request
    app = Flask("hansa.site")
    app.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    app.wsgi_app = behind_proxies(app.wsgi_app, ctx.cfg.site.proxy_hops, "[site] proxy_hops")  # type: ignore[method-assign]
    # One request at a time touches the stores: the embedded graph and Milvus Lite are not meant to
    # be shared across threads, and on a 2-core site the embedder is the bottleneck anyway.
    lock = threading.Lock()

    def _handle_retrieve() -> Response:
        body = request.get_data(cache=False)  # raises 413 beyond MAX_CONTENT_LENGTH
        query_id = request.headers.get(QUERY_ID_HEADER)
        required = RETRIEVE_COMPONENTS if query_id is None else RETRIEVE_TRACED_COMPONENTS
        verify_request(request.method, request.url, request.headers, body, gateway_keys, nonces, required=required)
        addressed = request.headers.get(SITE_HEADER)
        if addressed != ctx.site_id:
            raise SignatureRefused(MISDIRECTED, f"the request is addressed to site {addressed!r}, not to this site")
        g.signed_request = HttpMessage.request(request.method, request.url, request.headers)
        if query_id is not None:
            if not QUERY_ID_RE.match(query_id):
                raise InputError(f"{QUERY_ID_HEADER} must be 1..128 characters of letters, digits and . _ : -")
            g.log_scope.enter_context(bound(query_id=query_id))
        require_json_type(request.mimetype, "POST /v1/retrieve")
        req = RetrieveRequest.from_json(_object(loads_strict(body)))
        with lock:
            answer = retrieve(ctx, req)
        return _json(answer.to_json())

    @app.before_request
    def start_request() -> None:
        g.started = time.perf_counter()
        g.log_scope = ExitStack()  # fields bound for this request's log events; closed at teardown

    @app.teardown_request
    def end_request(exc: BaseException | None) -> None:
        scope = g.pop("log_scope", None)
        if scope is not None:
            scope.close()

    @app.post("/v1/retrieve")
    def retrieve_endpoint() -> Response:
        return _handle_retrieve()

    @app.after_request
    def count_retrieve(response: Response) -> Response:
        """One metric sample and one log event per retrieve call, whatever its outcome."""
        if request.path == "/v1/retrieve":
            seconds = time.perf_counter() - g.get("started", time.perf_counter())
            site_metrics.RETRIEVE_REQUESTS.labels(status=str(response.status_code)).inc()
            site_metrics.RETRIEVE_SECONDS.observe(seconds)
            log.info("site_api.retrieve", status=response.status_code, ms=round(seconds * 1000, 1), pid=os.getpid())
        return response

    @app.after_request
    def sign_answer(response: Response) -> Response:
        """Bind every response to an accepted request to that request, errors included."""
        signed_request = g.get("signed_request")
        if signed_request is None or response.is_streamed:
            return response
        response.headers.update(
            sign_response(identity, response.status_code, response.headers, response.get_data(), signed_request)
        )
        return response

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        return Response(metrics.render(), mimetype=None, content_type=metrics.CONTENT_TYPE)

    @app.get("/v1/openapi.json")
    def openapi_spec() -> Response:
        return Response(resources.files("hansa.plugin").joinpath("openapi.json").read_bytes(), mimetype=JSON_TYPE)

    @app.get("/v1/health")
    def health() -> Response:
        with lock:
            stats = ctx.graph.stats()
            counts = {
                "documents": stats.documents,
                "chunks": stats.chunks,
                "entities": stats.entities,
                "relations": stats.relations,
                "communities": stats.communities,
                "chunk_vectors": ctx.vectors.count(CHUNKS),
                "summary_vectors": ctx.vectors.count(SUMMARIES),
            }
        return _json(
            {
                "status": "ok",
                "site_id": ctx.site_id,
                "embedding": space_record(ctx.embedder),
                "graph_backend": ctx.graph.backend,
                "counts": counts,
            }
        )

    @app.errorhandler(HansaError)
    def hansa_error(err: HansaError) -> Response:
        if isinstance(err, SignatureRefused):
            site_metrics.SIGNATURE_REFUSALS.labels(reason=err.reason).inc()
            claimed = request.headers.get(QUERY_ID_HEADER)  # unverified: logged apart from query_id
            log.warning("site_api.refused_request", reason=err.reason, error=str(err),
                        **({"claimed_query_id": claimed[:128]} if claimed else {}))
        if isinstance(err, BackendError):
            log.warning("site_api.backend_error", path=request.path, error=str(err))
        return _json({"error": str(err)}, err.http_status)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        status = err.code or 500
        messages = {
            404: f"no such endpoint: {request.path}; the site serves POST /v1/retrieve and GET /v1/health",
            405: f"method {request.method} is not allowed on {request.path}",
            413: f"request body too large: at most {MAX_REQUEST_BYTES} bytes",
        }
        return _json({"error": messages.get(status, err.description or err.name)}, status)

    @app.errorhandler(Exception)
    def unexpected(err: Exception) -> Response:
        log.error("site_api.internal_error", path=request.path, error=type(err).__name__, exc_info=err)
        return _json({"error": "internal error; the site's log has the details"}, 500)

    return app


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError("retrieve request: expected a JSON object")
    return value
