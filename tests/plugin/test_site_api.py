"""The site's HTTP API through Flask's test client, on a real small site: signed requests only
(RFC 9421, by the configured gateway key), signed answers, strict parsing, bounded bodies, JSON
errors with actionable statuses, and no chunk text beyond the answer sentences."""
from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Callable

import pytest
from flask.testing import FlaskClient

from hansa.core.config import Config
from hansa.core.errors import ConfigError
from hansa.plugin import api
from hansa.plugin.api import MAX_REQUEST_BYTES, create_site_app
from hansa.plugin.install import install_site
from hansa.plugin.retrieval import answer_sentences
from hansa.plugin.site import SiteContext
from hansa.sync.httpsig import (
    QUERY_ID_HEADER,
    RETRIEVE_COMPONENTS,
    RETRIEVE_TRACED_COMPONENTS,
    SITE_HEADER,
    HttpMessage,
    keyring,
    sign_request,
    verify_response,
)
from hansa.sync.keys import SiteIdentity, load_public_key
from hansa.sync.wire import PartialAnswer

GATEWAY = SiteIdentity.generate()
TARGET = "http://localhost/v1/retrieve"  # what Flask's test client requests


def _with_gateway_key(ctx: SiteContext, key: str = GATEWAY.public_key_b64) -> SiteContext:
    site = dataclasses.replace(ctx.cfg.site, gateway_public_key=key)
    return dataclasses.replace(ctx, cfg=dataclasses.replace(ctx.cfg, site=site))


@pytest.fixture(scope="module")
def client(built_site: SiteContext) -> FlaskClient:
    return create_site_app(_with_gateway_key(built_site)).test_client()


def _signed_headers(body: bytes, content_type: str = "application/json", site_id: str = "acme") -> dict[str, str]:
    headers = {"Content-Type": content_type, SITE_HEADER: site_id}
    return {**headers, **sign_request(GATEWAY, "POST", TARGET, headers, body, components=RETRIEVE_COMPONENTS)}


def _post(client: FlaskClient, body: bytes | str, content_type: str = "application/json") -> Any:
    """POST /v1/retrieve as the gateway does: signed with the gateway key, addressed to this site."""
    data = body.encode() if isinstance(body, str) else body
    return client.post("/v1/retrieve", data=data, headers=_signed_headers(data, content_type))


def _ask(client: FlaskClient, payload: Any) -> Any:
    return _post(client, json.dumps(payload))


def _error(resp: Any, status: int) -> str:
    assert resp.status_code == status, resp.get_data(as_text=True)
    assert resp.mimetype == "application/json"
    body = resp.get_json()
    assert set(body) == {"error"} and body["error"]
    assert "Traceback" not in body["error"]
    return body["error"]


def test_retrieve_answers_with_a_partial_answer(client: FlaskClient) -> None:
    resp = _ask(client, {"question": "Who designed the Brightwater Lighthouse?", "top_k": 3})
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    answer = PartialAnswer.from_json(resp.get_json())
    assert answer.site_id == "acme"
    assert answer.citations[0].doc_id == "docs/lighthouse.md"
    assert "Margaret Ellison" in answer.answer


def test_global_mode_over_http(client: FlaskClient) -> None:
    resp = _ask(client, {"question": "Tell me about the chamber orchestra", "mode": "global"})
    assert resp.status_code == 200
    assert PartialAnswer.from_json(resp.get_json()).citations[0].doc_id == "docs/orchestra.txt"


def _policy_client(ctx: SiteContext, **policy: Any) -> FlaskClient:
    """The same site served under another [site] answer_* policy."""
    site = dataclasses.replace(_with_gateway_key(ctx).cfg.site, **policy)
    return create_site_app(dataclasses.replace(ctx, cfg=dataclasses.replace(ctx.cfg, site=site))).test_client()


BROAD = {"question": "Who designed the Brightwater Lighthouse?", "top_k": 100}


def test_by_default_a_site_lists_only_the_documents_its_sentences_use_and_their_file_names(
        client: FlaskClient) -> None:
    """Issue 32: a top_k of 100 listed every document the site holds, with its folder path."""
    body = _ask(client, BROAD).get_json()
    used = {doc for _, doc, *_ in body["sentences"]}
    assert used and {c["doc_id"] for c in body["citations"]} == used
    assert all(c["source"] == c["doc_id"].rsplit("/", 1)[-1] for c in body["citations"] if "source" in c)
    assert all(":" not in c.get("source", "") for c in body["citations"])
    assert body["citations"][0]["title"]


def test_the_answer_policy_caps_sentences_and_citations_and_can_withhold_titles(built_site: SiteContext) -> None:
    listing = _policy_client(built_site, answer_unused_documents=True, answer_max_citations=3)
    body = _ask(listing, BROAD).get_json()
    assert len(body["citations"]) == 3  # unused documents allowed, but never more than the cap
    assert len({doc for _, doc, *_ in body["sentences"]}) < 3
    strict = _policy_client(built_site, answer_max_sentences=1, answer_max_citations=1, answer_titles=False)
    body = _ask(strict, BROAD).get_json()
    assert len(body["sentences"]) == 1 and len(body["citations"]) == 1
    assert body["citations"][0]["title"] == "" and body["citations"][0]["doc_id"] == body["sentences"][0][1]
    assert body["answer"] == body["sentences"][0][0]


def test_hidden_sources_leave_no_path_and_relative_ones_the_path_inside_the_source(built_site: SiteContext) -> None:
    hidden = _ask(_policy_client(built_site, answer_sources="hidden"), BROAD).get_json()
    cited = [c["doc_id"] for c in hidden["citations"]]
    assert cited and all("source" not in c for c in hidden["citations"])
    assert all(doc.startswith("docs/") and "~" in doc and doc != "docs/lighthouse.md" for doc in cited)
    assert {doc for _, doc, *_ in hidden["sentences"]} <= set(cited)  # sentences still point at citations
    assert any(doc.startswith("docs/lighthouse.md~") for doc in cited)
    relative = _ask(_policy_client(built_site, answer_sources="relative"), BROAD).get_json()
    assert relative["citations"][0] == {**relative["citations"][0], "doc_id": "docs/lighthouse.md",
                                        "source": "docs:lighthouse.md"}


@pytest.mark.parametrize(("policy", "key"), [({"answer_sources": "absolute"}, "answer_sources"),
                                              ({"answer_max_citations": 0}, "answer_max_citations"),
                                              ({"answer_max_sentences": 0}, "answer_max_sentences")])
def test_a_bad_answer_policy_stops_the_site_before_it_serves(built_site: SiteContext, policy: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        _policy_client(built_site, **policy)


def test_the_body_holds_no_chunk_text_beyond_the_answer(client: FlaskClient, corpus: dict[str, str]) -> None:
    resp = _ask(client, {"question": "What happens at the Rosengarten Concert Hall?", "top_k": 10})
    raw = resp.get_data(as_text=True)
    chosen = {text for text, *_ in resp.get_json()["sentences"]}
    assert chosen
    leaked = [s for text in corpus.values() for _, s in answer_sentences(text) if s not in chosen and s in raw]
    assert leaked == []
    assert set(resp.get_json()) == {"site_id", "answer", "citations", "confidence", "sentences"}


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'{"question": "a", "question": "b"}',  # duplicate keys
        b'{"question": "a", "top_k": NaN}',
        b"\xff\xfe not utf-8",
        b"",
    ],
)
def test_malformed_json_is_400(client: FlaskClient, body: bytes) -> None:
    assert "invalid JSON" in _error(_post(client, body), 400)


def test_deep_nesting_is_400_not_a_crash(client: FlaskClient) -> None:
    depth = 20_000  # 40 kB: under the size cap, far over the depth cap
    assert "nested deeper" in _error(_post(client, "[" * depth + "]" * depth), 400)


def test_oversized_body_is_413(client: FlaskClient) -> None:
    body = json.dumps({"question": "x" * (MAX_REQUEST_BYTES + 10)})
    assert str(MAX_REQUEST_BYTES) in _error(_post(client, body), 413)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"question": 5}, "wrong type"),
        ({"question": "lighthouse", "top_k": "3"}, "wrong type"),
        ({"question": "lighthouse", "top_k": True}, "wrong type"),
        ({"question": "lighthouse", "top_k": 0}, "top_k"),
        ({"question": "lighthouse", "mode": "drift"}, "mode"),
        ({"question": "   "}, "question"),
        ({"question": "lighthouse", "extra": 1}, "unknown keys"),
        ({}, "missing 'question'"),
        (["question", "lighthouse"], "expected a JSON object"),
        ("lighthouse", "expected a JSON object"),
    ],
)
def test_wrong_shapes_and_types_are_400(client: FlaskClient, payload: Any, message: str) -> None:
    assert message in _error(_post(client, json.dumps(payload)), 400)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_non_json_content_type_is_415(client: FlaskClient, content_type: str) -> None:
    message = _error(_post(client, '{"question": "x"}', content_type=content_type), 415)
    assert "Content-Type: application/json" in message and repr(content_type) in message


def test_unknown_routes_and_methods_answer_json(client: FlaskClient) -> None:
    assert "/v1/retrieve" in _error(client.get("/v1/nope"), 404)
    assert "GET" in _error(client.get("/v1/retrieve"), 405)


def test_health_reports_identity_space_and_counts(client: FlaskClient, built_site: SiteContext) -> None:
    resp = client.get("/v1/health")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["site_id"] == "acme" and body["status"] == "ok"
    assert body["embedding"] == {"model_id": built_site.embedder.model_id, "dim": 384,
                                 "model_sha256": built_site.embedder.model_sha256}
    assert body["graph_backend"] == "embedded"
    stats = built_site.graph.stats()
    assert body["counts"]["documents"] == stats.documents == 4
    assert body["counts"]["chunk_vectors"] == stats.chunks
    assert body["counts"]["communities"] == body["counts"]["summary_vectors"] > 0


def test_a_failing_backend_is_503_with_its_message(tmp_path: Path, make_config: Callable[..., Config]) -> None:
    ctx = SiteContext.open(make_config(tmp_path, HANSA_SITE_GATEWAY_PUBLIC_KEY=GATEWAY.public_key_b64))
    try:
        install_site(ctx)
        app_client = create_site_app(ctx).test_client()
        ctx.vectors.close()  # the real store, really gone
        message = _error(_ask(app_client, {"question": "anything"}), 503)
        assert "closed" in message
    finally:
        ctx.close()


def test_a_bug_is_a_bare_500(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: SiteContext, req: Any) -> PartialAnswer:
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setattr(api, "retrieve", broken)
    message = _error(_ask(client, {"question": "anything"}), 500)
    assert "secret" not in message and "RuntimeError" not in message


# --- signed calls (trust model guarantee 11); refusals over real HTTP: tests/gateway/test_signed_calls.py
def _nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(ctx: SiteContext, req: Any) -> PartialAnswer:
        raise AssertionError("retrieval ran for a request that was not accepted")

    monkeypatch.setattr(api, "retrieve", must_not_run)


def test_an_unsigned_request_is_401_and_nothing_runs(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    _nothing_runs(monkeypatch)
    assert "not signed" in _error(client.post("/v1/retrieve", json={"question": "lighthouse"}), 401)


def test_a_request_for_another_site_or_body_is_401(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    _nothing_runs(monkeypatch)
    body = b'{"question": "lighthouse"}'
    other = client.post("/v1/retrieve", data=body, headers=_signed_headers(body, site_id="globex"))
    assert "addressed to site 'globex'" in _error(other, 401)
    swapped = client.post("/v1/retrieve", data=b'{"question": "orchestra"}', headers=_signed_headers(body))
    assert "Content-Digest" in _error(swapped, 401)
    headers = _signed_headers(body)
    headers["Signature-Input"] = headers["Signature-Input"].replace(' "hansa-site"', "")
    assert "downgrade" in _error(client.post("/v1/retrieve", data=body, headers=headers), 401)


def test_answers_and_errors_to_accepted_requests_are_signed_and_bound(client: FlaskClient, built_site: SiteContext) -> None:
    site_keys = keyring([load_public_key(SiteIdentity.load(built_site.identity_dir).public_key_b64)])
    for payload, status in (({"question": "Who designed the Brightwater Lighthouse?"}, 200), ({"question": 5}, 400)):
        data = json.dumps(payload).encode()
        headers = _signed_headers(data)
        resp = client.post("/v1/retrieve", data=data, headers=headers)
        assert resp.status_code == status
        verified = verify_response(status, resp.headers, resp.get_data(), site_keys, HttpMessage.request("POST", TARGET, headers))
        assert verified.covered[-1] == '"signature";req;key="hansa"'


def test_health_is_not_signed(client: FlaskClient) -> None:
    resp = client.get("/v1/health")
    assert resp.status_code == 200 and "Signature" not in resp.headers


@pytest.mark.parametrize(("key", "message"), [("", "gateway_public_key"), ("bm90IGEga2V5", "32 raw bytes")])
def test_a_site_without_a_valid_gateway_key_does_not_serve(built_site: SiteContext, key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        create_site_app(_with_gateway_key(built_site, key))


# -- tracing, metrics, reverse proxy (issue 11) -------------------------------------------------------
def _traced_headers(body: bytes, query_id: str, covered: tuple[str, ...] = RETRIEVE_TRACED_COMPONENTS) -> dict[str, str]:
    headers = {"Content-Type": "application/json", SITE_HEADER: "acme", QUERY_ID_HEADER: query_id}
    return {**headers, **sign_request(GATEWAY, "POST", TARGET, headers, body, components=covered)}


def test_the_gateways_query_id_is_on_every_log_event_of_the_request(client: FlaskClient,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    body = json.dumps({"question": "Who designed the Brightwater Lighthouse?"}).encode()
    with caplog.at_level(logging.INFO, logger="hansa"):
        resp = client.post("/v1/retrieve", data=body, headers=_traced_headers(body, "q-7f3a.1"))
    assert resp.status_code == 200
    events = {r.getMessage(): r for r in caplog.records if r.name.startswith("hansa")}
    assert {"retrieve.done", "site_api.retrieve"} <= set(events), sorted(events)
    assert all(getattr(r, "query_id", None) == "q-7f3a.1" for r in events.values())
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="hansa"):
        client.post("/v1/retrieve", data=body, headers=_signed_headers(body))  # untraced: nothing left bound
    assert caplog.records and not [r for r in caplog.records if hasattr(r, "query_id")]


def test_a_query_id_outside_the_signature_is_refused(client: FlaskClient, caplog: pytest.LogCaptureFixture) -> None:
    body = b'{"question": "lighthouse"}'
    with caplog.at_level(logging.WARNING, logger="hansa"):
        resp = client.post("/v1/retrieve", data=body, headers=_traced_headers(body, "forged", RETRIEVE_COMPONENTS))
    assert "x-hansa-query-id" in _error(resp, 401)
    refusal = next(r for r in caplog.records if r.getMessage() == "site_api.refused_request")
    assert refusal.reason == "coverage" and refusal.claimed_query_id == "forged" and not hasattr(refusal, "query_id")
    swapped = _traced_headers(body, "q-1")
    swapped[QUERY_ID_HEADER] = "q-2"
    assert "does not verify" in _error(client.post("/v1/retrieve", data=body, headers=swapped), 401)


def test_a_malformed_query_id_is_400(client: FlaskClient) -> None:
    body = b'{"question": "lighthouse"}'
    resp = client.post("/v1/retrieve", data=body, headers=_traced_headers(body, "two words"))
    assert "X-Hansa-Query-Id" in _error(resp, 400)


def _sample(text: str, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return 0.0


def test_metrics_count_retrieves_by_status_latency_and_refusals_by_reason(client: FlaskClient) -> None:
    before = client.get("/metrics").get_data(as_text=True)
    body = json.dumps({"question": "Who leads the Hallgrim Volcano Observatory?"}).encode()
    headers = _signed_headers(body)
    assert client.post("/v1/retrieve", data=body, headers=headers).status_code == 200
    assert client.post("/v1/retrieve", data=body, headers=headers).status_code == 401  # replayed
    assert client.post("/v1/retrieve", data=b"{", headers=_signed_headers(b"{")).status_code == 400
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp.content_type.startswith("text/plain")
    after = resp.get_data(as_text=True)

    def grew(name: str, **labels: str) -> float:
        return _sample(after, name, **labels) - _sample(before, name, **labels)

    assert grew("hansa_site_retrieve_requests_total", status="200") == 1
    assert grew("hansa_site_retrieve_requests_total", status="401") == 1
    assert grew("hansa_site_retrieve_requests_total", status="400") == 1
    assert grew("hansa_site_signature_refusals_total", reason="replayed") == 1
    assert grew("hansa_site_retrieve_seconds_count") == 3
    assert grew("hansa_site_retrieve_seconds_sum") > 0


@pytest.mark.parametrize("hops, status", [(0, 401), (1, 200)])
def test_behind_a_tls_proxy_the_signed_https_url_is_rebuilt_only_from_trusted_hops(built_site: SiteContext, hops: int,
                                                                                   status: int) -> None:
    """The gateway signs https://acme.example/v1/retrieve; the proxy forwards plain HTTP to the
    site with X-Forwarded-Proto/-Host. Only with [site] proxy_hops = 1 does the site believe them."""
    ctx = _with_gateway_key(built_site)
    ctx = dataclasses.replace(ctx, cfg=dataclasses.replace(ctx.cfg, site=dataclasses.replace(ctx.cfg.site, proxy_hops=hops)))
    proxied = create_site_app(ctx).test_client()
    body = json.dumps({"question": "Who designed the Brightwater Lighthouse?"}).encode()
    headers = {"Content-Type": "application/json", SITE_HEADER: "acme"}
    headers.update(sign_request(GATEWAY, "POST", "https://acme.example/v1/retrieve", headers, body,
                                components=RETRIEVE_COMPONENTS))
    headers.update({"X-Forwarded-Proto": "https", "X-Forwarded-Host": "acme.example", "X-Forwarded-For": "203.0.113.9"})
    resp = proxied.post("/v1/retrieve", data=body, headers=headers, base_url="http://10.0.0.5:8701")
    assert resp.status_code == status, resp.get_data(as_text=True)


def test_proxy_hops_must_be_a_count(built_site: SiteContext) -> None:
    ctx = _with_gateway_key(built_site)
    ctx = dataclasses.replace(ctx, cfg=dataclasses.replace(ctx.cfg, site=dataclasses.replace(ctx.cfg.site, proxy_hops=-1)))
    with pytest.raises(ConfigError, match="proxy_hops"):
        create_site_app(ctx)
