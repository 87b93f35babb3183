"""The gateway's HTTP surface under attack (trust model guarantees 12 and 14): query clients must
authenticate, budgets are per verified identity and cost what a request fans out to, hostile and
oversized bodies get a clear 4xx (never a 5xx or a traceback), and no refused request changes
anything stored: registry, API keys, publication heads, index rows.

Queries run against a gateway over the session's real federation (its registry, index and sites),
with its own key file and small budgets; publications against a gateway with its own Milvus Lite
and registry, fed signed publications built from real embeddings."""
from __future__ import annotations

import base64
import hashlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import GatewayConfig
from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.service import Gateway as GatewayService
from hansa.gateway.trust import admin
from hansa.gateway.trust.registry import SiteRegistry
from hansa.sync.dsse import sign_envelope
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import build_publication
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

MAX_BODY = 256 * 1024  # room for 100k nested brackets, which must be a 400, not a 413
QUERY_BURST = 6
PUBLISH_BURST = 2
SLOW = 0.001  # tokens per second: nothing refills while a test runs
QUESTION = "What does FEMA do after a disaster?"


def _gateway_files(folder: Path) -> dict[str, str]:
    """Digest of every state file a gateway keeps (lock files and Milvus' own files aside)."""
    # Milvus Lite's data path (`*.db`) is a directory whose files its background flush rewrites
    # at any time: skip everything under it, not only names ending in .db.
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(".lock")
            and not any(part.endswith(".db") for part in p.relative_to(folder).parts)}


class Gateway:
    """A gateway service, its HTTP app and test client, and a snapshot of everything it stores."""

    def __init__(self, service: GatewayService, state_dir: Path) -> None:
        self.service = service
        self.app = create_gateway_app(service)
        self.client = self.app.test_client()
        self.state_dir = state_dir
        self.index, self.registry, self.api_keys = service.index, service.registry, service.api_keys

    def snapshot(self) -> tuple[Any, ...]:
        assert self.index.flush(30), "the index's background writer did not finish"
        return (_gateway_files(self.state_dir), _gateway_files(self.api_keys.path.parent), self.index.count(),
                self.index.sites(), [r.to_json() for r in self.registry.list()])

    def post(self, path: str, body: Any, key: str | None = None, **headers: str) -> Any:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return self.client.post(path, data=data, content_type="application/json", headers=headers)


@pytest.fixture(scope="module")
def site_embedder(federation) -> Any:
    return next(iter(federation.sites.values())).ctx.embedder


@pytest.fixture(scope="module")
def gw(federation, site_embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    cfg = GatewayConfig(top_k_sites=2, site_timeout_s=10.0, max_request_bytes=MAX_BODY, allow_private_addresses=True,
                        query_burst=QUERY_BURST, query_refill_per_s=SLOW)
    keys = ApiKeyStore(tmp_path_factory.mktemp("keys") / API_KEYS_FILE)
    service = GatewayService.open(cfg, embedder=site_embedder, vector_store=federation.gateway_vectors,
                                  registry=federation.registry, api_keys=keys)
    yield Gateway(service, federation.registry.path.parent)
    service.close()


@pytest.fixture(scope="module")
def pub_gw(site_embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("publications")
    store = MilvusVectorStore(str(root / "x.db"))
    cfg = GatewayConfig(max_request_bytes=MAX_BODY, publish_burst=PUBLISH_BURST, publish_refill_per_s=SLOW)
    service = GatewayService.open(cfg, embedder=site_embedder, vector_store=store,
                                  registry=SiteRegistry(root / "gateway" / "registry.json"))
    yield Gateway(service, root / "gateway")
    service.close()  # its index's background writer uses the store
    store.close()


@pytest.fixture(scope="module")
def summaries(site_embedder) -> tuple[SummaryRecord, ...]:
    vectors = site_embedder.embed(["Disaster relief grants for households.", "Flood insurance claims."])
    return tuple(SummaryRecord(summary_id=f"c{i}", version=1, vector_b64=encode_vector(v),
                               richness=Richness(entities=4, chunks=3, documents=2), level=0)
                 for i, v in enumerate(vectors))


def _space(embedder: Any) -> EmbeddingSpace:
    return EmbeddingSpace.of(embedder)


def _enrolled(gateway: Gateway, site_id: str) -> SiteIdentity:
    me = SiteIdentity.generate()
    admin.enroll(gateway.registry, site_id, "https://example.org/" + site_id, [me.public_key_b64])
    return me


def _publication(me: SiteIdentity, site_id: str, sequence: int, space: EmbeddingSpace, recs) -> dict[str, Any]:
    return build_publication(me, site_id, sequence, space, recs, timedelta(hours=1))


def _resigned(envelope: dict[str, Any], me: SiteIdentity, edit) -> dict[str, Any]:
    """The same publication with its payload edited, then validly signed again by the site."""
    payload = json.loads(base64.b64decode(envelope["payload"]))
    edit(payload)
    return sign_envelope(envelope["payloadType"], json.dumps(payload).encode(), me)


def _error(resp: Any, status: int, kind: str | None = None) -> dict[str, Any]:
    assert resp.status_code == status, (resp.status_code, resp.data[:300])
    assert resp.mimetype == "application/json"
    body = resp.get_json()
    assert set(body) >= {"error", "kind"} and body["error"], body
    assert "Traceback" not in resp.get_data(as_text=True)
    if kind is not None:
        assert body["kind"] == kind, body
    return body


# -- authentication (guarantee 14) ---------------------------------------------------------------
def test_queries_need_a_valid_unrevoked_api_key(gw: Gateway) -> None:
    key = gw.api_keys.create("auth-client")
    before = gw.snapshot()
    for headers in ({}, {"Authorization": "Basic YWxpY2U6cHc="}, {"Authorization": "Bearer"},
                    {"Authorization": "Bearer hansa_0000000000000000_" + "A" * 43},
                    {"Authorization": "Bearer " + key[:-1] + ("B" if key[-1] != "B" else "C")},
                    {"Authorization": "Bearer " + "k" * 10_000}):
        resp = gw.post("/v1/query", {"question": QUESTION}, **headers)
        _error(resp, 401, "Unauthenticated")
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    # authentication comes before the body is even read: a stranger's hostile body is just a 401
    _error(gw.post("/v1/query", b"[" * 100_000), 401)
    _error(gw.post("/v1/query", b"x" * (MAX_BODY + 1)), 401)
    assert gw.snapshot() == before

    resp = gw.post("/v1/query", {"question": QUESTION, "top_k_sites": 1}, key)
    assert resp.status_code == 200, resp.get_json()

    gw.api_keys.revoke("auth-client")  # as `hansa gateway api-key revoke` would, on a running gateway
    before = gw.snapshot()
    body = _error(gw.post("/v1/query", {"question": QUESTION}, key), 403, "VerificationError")
    assert "revoked" in body["error"]
    assert gw.snapshot() == before


# -- rate limits keyed by verified identity, cost = fan-out (guarantee 12) -----------------------
def test_a_query_costs_one_token_per_site_it_asks(gw: Gateway, federation) -> None:
    key, other = gw.api_keys.create("meter-a"), gw.api_keys.create("meter-b")
    both = sorted(federation.sites)
    resp = gw.post("/v1/query", {"question": QUESTION, "sites": both}, key)  # 2 tokens: 4 left
    assert resp.status_code == 200, resp.get_json()
    assert [c["site_id"] for c in resp.get_json()["trace"]["per_site"]] == both
    assert all(c["status"] == "ok" for c in resp.get_json()["trace"]["per_site"])
    assert gw.post("/v1/query", {"question": QUESTION, "top_k_sites": 3}, key).status_code == 200  # 3: 1 left

    before = gw.snapshot()
    refused = gw.post("/v1/query", {"question": QUESTION, "top_k_sites": 2}, key)
    body = _error(refused, 429, "RateLimited")
    assert "costs 2" in body["error"] and "meter-a" in body["error"]
    assert 0.9 / SLOW <= int(refused.headers["Retry-After"]) <= 1 / SLOW  # one token short, barely refilled
    assert gw.snapshot() == before
    # the refusal took nothing: the last token still buys a one-site question
    assert gw.post("/v1/query", {"question": QUESTION, "sites": both[:1]}, key).status_code == 200
    body = _error(gw.post("/v1/query", {"question": QUESTION, "sites": []}, key), 400, "InputError")
    assert "'sites' is empty" in body["error"]  # asking nobody is bad input, refused before any charge

    # another client's budget is its own
    assert gw.post("/v1/query", {"question": QUESTION, "sites": both}, other).status_code == 200
    # a fan-out no budget can ever pay is bad input, not a 429 to retry forever
    body = _error(gw.post("/v1/query", {"question": QUESTION, "top_k_sites": QUERY_BURST + 1}, other), 400)
    assert "fewer sites" in body["error"]


def test_publications_are_metered_per_verified_site(pub_gw: Gateway, site_embedder, summaries) -> None:
    space = _space(site_embedder)
    me, neighbour = _enrolled(pub_gw, "metered"), _enrolled(pub_gw, "neighbour")
    for seq in range(1, PUBLISH_BURST + 1):
        resp = pub_gw.post("/v1/sites/metered/publications", _publication(me, "metered", seq, space, summaries))
        assert resp.status_code == 200, resp.get_json()
    before = pub_gw.snapshot()
    resp = pub_gw.post("/v1/sites/metered/publications", _publication(me, "metered", 9, space, summaries[:1]))
    _error(resp, 429, "RateLimited")
    assert int(resp.headers["Retry-After"]) >= 1
    assert pub_gw.snapshot() == before
    assert pub_gw.registry.last_sequence("metered") == PUBLISH_BURST

    # forgeries sent in the neighbour's name are refused unverified and cost the neighbour nothing
    forger = SiteIdentity.generate()
    for seq in range(1, 6):
        _error(pub_gw.post("/v1/sites/neighbour/publications",
                           _publication(forger, "neighbour", seq, space, summaries)), 403)
    for seq in range(1, PUBLISH_BURST + 1):
        resp = pub_gw.post("/v1/sites/neighbour/publications", _publication(neighbour, "neighbour", seq, space, summaries))
        assert resp.status_code == 200, resp.get_json()


# -- hostile bodies (guarantee 12) ---------------------------------------------------------------
HOSTILE_BYTES = {
    "not json": b"{not json",
    "empty": b"",
    "deep arrays": b"[" * 100_000 + b"]" * 100_000,
    "deep objects": b'{"a":' * 40_000 + b"1" + b"}" * 40_000,
    "NaN": b'{"question": NaN}',
    "Infinity": b'{"question": "q", "top_k": Infinity}',
    "-Infinity": b'{"question": "q", "top_k_sites": -Infinity}',
    "overflowing float": b'{"question": "q", "top_k": 1e400}',
    "duplicate keys": b'{"question": "a", "question": "b"}',
    "invalid UTF-8": b'{"question": "\xff\xfe"}',
    "lone surrogate": b'{"question": "\\ud800 what?"}',
    "huge integer": b'{"question": "q", "top_k": ' + b"9" * 5000 + b"}",
    "array": b'["question"]',
    "string": b'"question"',
    "null": b"null",
}
HOSTILE_QUERIES = {
    "unknown key": {"question": QUESTION, "extra": 1},
    "no question": {"top_k": 3},
    "question not a string": {"question": 3},
    "question null": {"question": None},
    "question too long": {"question": "x" * 4001},
    "question too long after padding": {"question": " " + "x" * 4000},
    "blank question": {"question": " \t\n\u3000\x1c\x85"},
    "byte-order mark only": {"question": "\ufeff"},
    "top_k zero": {"question": QUESTION, "top_k": 0},
    "top_k too big": {"question": QUESTION, "top_k": 101},
    "top_k fraction": {"question": QUESTION, "top_k": 2.5},
    "top_k bool": {"question": QUESTION, "top_k": True},
    "top_k string": {"question": QUESTION, "top_k": "5"},
    "top_k_sites too big": {"question": QUESTION, "top_k_sites": 33},
    "top_k_sites negative": {"question": QUESTION, "top_k_sites": -1},
    "sites not a list": {"question": QUESTION, "sites": "govt"},
    "sites too many": {"question": QUESTION, "sites": [f"s{i}" for i in range(65)]},
    "site id traversal": {"question": QUESTION, "sites": ["../govt"]},
    "site id spoofed by case": {"question": QUESTION, "sites": ["GOVT"]},
    "site id not a string": {"question": QUESTION, "sites": [7]},
}


@pytest.mark.parametrize("case", sorted(HOSTILE_BYTES) + sorted(HOSTILE_QUERIES))
def test_hostile_query_bodies_are_400_and_change_nothing(gw: Gateway, case: str) -> None:
    key = gw.api_keys.create("hostile-" + hashlib.sha256(case.encode()).hexdigest()[:12])
    before = gw.snapshot()
    body = HOSTILE_BYTES.get(case, HOSTILE_QUERIES.get(case))
    _error(gw.post("/v1/query", body, key), 400, "InputError")
    assert gw.snapshot() == before


def test_whole_number_floats_are_integers_as_json_schema_says(gw: Gateway, federation) -> None:
    key = gw.api_keys.create("floats")
    resp = gw.post("/v1/query", {"question": QUESTION, "top_k": 3.0, "top_k_sites": 1.0}, key)
    assert resp.status_code == 200, resp.get_json()
    assert len(resp.get_json()["trace"]["sites_called"]) <= 1


@pytest.fixture(scope="module")
def hostile_target(pub_gw: Gateway) -> str:
    _enrolled(pub_gw, "hostile-target")
    return "hostile-target"


@pytest.mark.parametrize("case", sorted(HOSTILE_BYTES))
def test_hostile_publication_bodies_are_refused_and_change_nothing(pub_gw: Gateway, hostile_target: str, case: str) -> None:
    before = pub_gw.snapshot()
    resp = pub_gw.post(f"/v1/sites/{hostile_target}/publications", HOSTILE_BYTES[case])
    assert resp.status_code in (400, 403), (case, resp.status_code, resp.data[:200])
    _error(resp, resp.status_code)
    assert pub_gw.snapshot() == before


def test_wrong_vector_dimensions_are_400_and_change_nothing(pub_gw: Gateway, site_embedder, summaries) -> None:
    space = _space(site_embedder)
    me = _enrolled(pub_gw, "dims")
    first = _publication(me, "dims", 1, space, summaries)
    assert pub_gw.post("/v1/sites/dims/publications", first).status_code == 200
    before = pub_gw.snapshot()

    def claim_fewer_dims(p: dict[str, Any]) -> None:
        p["sequence"] = 2
        p["embedding"]["dim"] = site_embedder.dim - 1

    def truncate_vectors(p: dict[str, Any]) -> None:
        p["sequence"] = 3
        raw = base64.b64decode(p["summaries"]["vectors"])
        p["summaries"]["vectors"] = base64.b64encode(raw[:-4]).decode()

    for envelope in (_resigned(first, me, claim_fewer_dims), _resigned(first, me, truncate_vectors)):
        _error(pub_gw.post("/v1/sites/dims/publications", envelope), 400, "InputError")
    assert pub_gw.snapshot() == before


# -- size caps (guarantee 12) --------------------------------------------------------------------
def test_oversized_bodies_are_413_json_on_both_apps(gw: Gateway, pub_gw: Gateway, federation) -> None:
    from hansa.plugin.api import MAX_REQUEST_BYTES, create_site_app

    key = gw.api_keys.create("big")
    before, pub_before = gw.snapshot(), pub_gw.snapshot()
    big = b'{"question": "' + b"x" * MAX_BODY + b'"}'
    body = _error(gw.post("/v1/query", big, key), 413)
    assert str(MAX_BODY) in body["error"]
    _error(pub_gw.post("/v1/sites/anyone/publications", big), 413)
    # no Content-Length (chunked upload, as werkzeug's server passes it on): the cap holds while
    # streaming too, instead of the body being silently cut at the cap and parsed
    padded = b'{"question": "' + QUESTION.encode() + b'"}' + b" " * MAX_BODY
    streamed = gw.client.post("/v1/query", data=padded, content_type="application/json",
                              headers={"Authorization": f"Bearer {key}", "Transfer-Encoding": "chunked"},
                              environ_overrides={"wsgi.input_terminated": True})
    assert streamed.request.content_length is None
    _error(streamed, 413)
    assert gw.snapshot() == before and pub_gw.snapshot() == pub_before

    site = create_site_app(federation.sites["govt"].ctx).test_client()
    resp = site.post("/v1/retrieve", data=b"x" * (MAX_REQUEST_BYTES + 1), content_type="application/json")
    assert resp.status_code == 413 and resp.get_json()["error"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_bodies_not_sent_as_json_are_415_and_change_nothing(gw: Gateway, pub_gw: Gateway, site_embedder,
                                                              summaries, content_type: str | None) -> None:
    site_id = "plain-" + (content_type or "none").replace("/", "-").replace(".", "-")[:40]
    key = gw.api_keys.create(site_id)
    query = json.dumps({"question": QUESTION, "top_k_sites": 1}).encode()
    before = gw.snapshot()
    for path in ("/v1/query", "/v1/chat/completions"):
        body = {"messages": [{"role": "user", "content": QUESTION}], "model": "hansa-federation"}
        data = query if path == "/v1/query" else json.dumps(body).encode()
        resp = gw.client.post(path, data=data, content_type=content_type, headers={"Authorization": f"Bearer {key}"})
        assert resp.status_code == 415, (path, resp.data[:300])
        message = resp.get_json()["error"]
        message = message["message"] if isinstance(message, dict) else message  # the OpenAI shape
        assert "Content-Type: application/json" in message and path in message
    assert gw.snapshot() == before

    me = _enrolled(pub_gw, site_id)
    envelope = json.dumps(_publication(me, site_id, 1, _space(site_embedder), summaries[:1])).encode()
    before = pub_gw.snapshot()
    resp = pub_gw.client.post(f"/v1/sites/{site_id}/publications", data=envelope, content_type=content_type)
    body = _error(resp, 415, "UnsupportedMediaType")
    assert "Content-Type: application/json" in body["error"]
    assert pub_gw.snapshot() == before
    assert pub_gw.post(f"/v1/sites/{site_id}/publications", json.loads(envelope)).status_code == 200  # as JSON: fine


def test_unknown_routes_and_methods_are_json(gw: Gateway) -> None:
    _error(gw.client.get("/v1/nothing"), 404)
    resp = gw.client.get("/v1/query")
    _error(resp, 405)
    assert "POST" in resp.headers["Allow"]


def test_both_apps_serve_their_openapi_documents(gw: Gateway, federation) -> None:
    from hansa.plugin.api import create_site_app

    spec = gw.client.get("/v1/openapi.json").get_json()
    assert spec["openapi"].startswith("3.1")
    assert {"/v1/query", "/v1/sites/{site_id}/publications", "/v1/sites", "/v1/health", "/v1/openapi.json"} <= set(spec["paths"])
    assert spec["paths"]["/v1/query"]["post"]["security"] == [{"bearerAuth": []}]
    routes = {str(r) for r in gw.app.url_map.iter_rules()} - {"/static/<path:filename>"}
    documented = {p.replace("{", "<").replace("}", ">") for p in spec["paths"]}
    assert routes <= documented, routes - documented
    site_app = create_site_app(federation.sites["govt"].ctx)
    site = site_app.test_client().get("/v1/openapi.json").get_json()
    assert site["openapi"].startswith("3.1")
    assert {str(r) for r in site_app.url_map.iter_rules()} - {"/static/<path:filename>"} == set(site["paths"])
