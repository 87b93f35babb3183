"""The site's HTTP API through Flask's test client, on a real small site: signed requests only
(RFC 9421, by the configured gateway key), signed answers, strict parsing, bounded bodies, JSON
errors with actionable statuses, and no chunk text beyond the answer sentences."""
from __future__ import annotations

import dataclasses
import json
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
from hansa.sync.httpsig import RETRIEVE_COMPONENTS, SITE_HEADER, HttpMessage, keyring, sign_request, verify_response
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


def test_a_non_json_content_type_is_400(client: FlaskClient) -> None:
    assert "application/json" in _error(_post(client, '{"question": "x"}', content_type="text/plain"), 400)


def test_unknown_routes_and_methods_answer_json(client: FlaskClient) -> None:
    assert "/v1/retrieve" in _error(client.get("/v1/nope"), 404)
    assert "GET" in _error(client.get("/v1/retrieve"), 405)


def test_health_reports_identity_space_and_counts(client: FlaskClient, built_site: SiteContext) -> None:
    resp = client.get("/v1/health")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["site_id"] == "acme" and body["status"] == "ok"
    assert body["embedding"] == {"model_id": built_site.embedder.model_id, "dim": 384}
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
