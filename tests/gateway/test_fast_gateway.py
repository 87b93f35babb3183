"""The gateway in the fast tier: routing, the query engine, fusion and the HTTP surface, with no
federation built. The gateway's own code runs for real (Flask app, API keys, registry, signed
publications, the summary index, router, engine, fusion, rate limits); its ports are played by
tests/fakes.py: a hash embedder, an in-memory vector store and scripted sites whose replies are
still signed with each site's key and verified by the gateway. The same behaviours on real sites,
Milvus and the ONNX embedder: test_engine.py, test_app.py, test_http_surface.py (integration tier)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pytest

from hansa.core.config import GatewayConfig
from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.trust.registry import SiteRegistry
from hansa.gateway.trust import admin
from hansa.gateway.service import Gateway
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import build_publication
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import Citation, EmbeddingSpace, PartialAnswer, Richness, SummaryRecord
from tests.fakes import STRANGER, UNSIGNED, HashEmbedder, InMemoryVectorStore, Reply, ScriptedSiteTransport, hang

EMBEDDER = HashEmbedder()
SUMMARIES = {
    "rivers": "The river Rhone flows through Lyon, where the river Saone joins it, then south to the sea.",
    "kitchen": "Lyonnais bouchons serve sausages, quenelles and local wine.",
    "castles": "Medieval castles were defended by moats and curtain walls.",
}
SITE_KEYS = {site: SiteIdentity.generate() for site in SUMMARIES}
RIVER_Q = "Which river flows through Lyon?"
RIVER_SENTENCE = "The Rhone river flows through Lyon."


def answer(site_id: str, sentence: str, doc_id: str) -> PartialAnswer:
    return PartialAnswer(site_id, sentence, (Citation(site_id, doc_id, doc_id.title(), 0.9),), 0.8, ((sentence, doc_id),))


ANSWERS = {
    "rivers": Reply(answer("rivers", RIVER_SENTENCE, "rhone")),
    "kitchen": Reply(answer("kitchen", "Bouchons serve quenelles and sausages.", "bouchons")),
    "castles": Reply(answer("castles", "Castles had moats.", "moats")),
}


@dataclass
class FakeFederation:
    """A real gateway (service + HTTP app) whose sites are scripted."""

    service: Gateway
    transport: ScriptedSiteTransport
    key: str  # an API key for /v1/query

    def __post_init__(self) -> None:
        self.client = create_gateway_app(self.service).test_client()

    def query(self, body: Mapping[str, Any] | bytes, key: str | None = "", **kw: Any) -> Any:
        headers = {} if key is None else {"Authorization": f"Bearer {key or self.key}"}
        if isinstance(body, bytes):
            return self.client.post("/v1/query", data=body, content_type="application/json", headers=headers, **kw)
        return self.client.post("/v1/query", json=body, headers=headers, **kw)


def open_gateway(root: Path, replies: Mapping[str, Reply | Sequence[Reply]], summaries: Mapping[str, str] = SUMMARIES,
                 llm: Any = None, keys: Mapping[str, SiteIdentity] = SITE_KEYS, **cfg: Any) -> FakeFederation:
    """`keys`: each site's enrolled key (other sites than SUMMARIES' need their own)."""
    registry = SiteRegistry(root / "gateway" / "registry.json")
    me = SiteIdentity.generate()
    transport = ScriptedSiteTransport(me, keys, replies)
    service = Gateway.open(GatewayConfig(**{"top_k_sites": 1, "site_timeout_s": 5.0, **cfg}), embedder=EMBEDDER,
                           vector_store=InMemoryVectorStore(), registry=registry, transport=transport, identity=me,
                           api_keys=ApiKeyStore(root / "gateway" / API_KEYS_FILE), llm=llm)
    fed = FakeFederation(service, transport, service.api_keys.create("fast-tests"))
    space = EmbeddingSpace.of(EMBEDDER)
    for site, text in summaries.items():  # each site enrolls and publishes one signed summary
        admin.enroll(registry, site, f"https://{site}.example", [keys[site].public_key_b64])
        record = SummaryRecord("c0", 1, encode_vector(EMBEDDER.embed_one(text)), Richness(5, 3, 2), level=0)
        envelope = build_publication(keys[site], site, 1, space, [record], timedelta(hours=1))
        resp = fed.client.post(f"/v1/sites/{site}/publications", json=envelope)
        assert resp.status_code == 200, resp.get_json()
    return fed


@pytest.fixture
def fed(tmp_path: Path) -> Iterator[FakeFederation]:
    f = open_gateway(tmp_path, ANSWERS)
    yield f
    f.service.close()


# -- routing --------------------------------------------------------------------------------------
def test_a_question_is_routed_only_to_the_site_whose_published_summary_matches(fed: FakeFederation) -> None:
    resp = fed.query({"question": RIVER_Q})
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    trace = body["trace"]
    assert trace["selection"] == "routed" and trace["sites_called"] == ["rivers"]
    assert trace["sites_considered"][0]["site_id"] == "rivers"
    assert [r.question for r in fed.transport.asked("rivers")] == [RIVER_Q]
    assert fed.transport.asked("kitchen") == [] and fed.transport.asked("castles") == []
    assert body["citations"][0]["site_id"] == "rivers" and body["citations"][0]["doc_id"] == "rhone"
    assert RIVER_SENTENCE in body["answer"]

    food = fed.query({"question": "Where are quenelles and sausages served?"}).get_json()
    assert food["trace"]["sites_called"] == ["kitchen"]


def test_explicit_sites_are_called_as_named_and_unknown_ones_are_404(fed: FakeFederation) -> None:
    body = fed.query({"question": RIVER_Q, "sites": ["castles", "castles"]}).get_json()
    assert body["trace"]["selection"] == "explicit" and body["trace"]["sites_called"] == ["castles"]
    assert fed.transport.asked("rivers") == []
    assert fed.query({"question": RIVER_Q, "sites": ["nobody"]}).status_code == 404
    empty = fed.query({"question": RIVER_Q, "sites": []})
    assert empty.status_code == 400 and "'sites' is empty" in empty.get_json()["error"]


# -- the engine and fusion ------------------------------------------------------------------------
def test_fusion_puts_the_relevant_sites_sentence_first_and_keeps_each_citation_with_its_site(fed: FakeFederation) -> None:
    body = fed.query({"question": RIVER_Q, "sites": ["kitchen", "rivers"]}).get_json()
    assert [p["status"] for p in body["trace"]["per_site"]] == ["ok", "ok"]
    # the reader's span leads ("Rhone [1]. "; the span's edges are the model's), then the sentence that holds it
    short = body["short_answer"]
    assert "Rhone" in short and short in RIVER_SENTENCE and body["answer"].startswith(f"{short} [1]. {RIVER_SENTENCE} [1]")
    first = body["citations"][0]
    assert (first["site_id"], first["doc_id"], first["n"], first["used"]) == ("rivers", "rhone", 1, True)
    assert {(c["site_id"], c["doc_id"]) for c in body["citations"]} <= {("rivers", "rhone"), ("kitchen", "bouchons")}
    assert body["sites"]["successful"] == 2 and body["sites"]["partial"] is False


def test_a_site_that_hangs_is_a_timeout_and_the_answer_comes_from_the_others(tmp_path: Path) -> None:
    fed = open_gateway(tmp_path, {**ANSWERS, "castles": hang()}, site_timeout_s=0.5)
    try:
        body = fed.query({"question": RIVER_Q, "sites": ["rivers", "castles"]}).get_json()
    finally:
        fed.service.close()
    statuses = {p["site_id"]: p["status"] for p in body["trace"]["per_site"]}
    assert statuses == {"rivers": "ok", "castles": "timeout"}
    assert body["sites"]["timed_out"] == 1 and body["sites"]["partial"] is True
    assert RIVER_SENTENCE in body["answer"]


@pytest.mark.parametrize("signed_by", [UNSIGNED, STRANGER])
def test_a_reply_the_sites_key_did_not_sign_never_reaches_the_answer(tmp_path: Path, signed_by: str) -> None:
    forged = Reply(answer("rivers", "The Rhone flows uphill through Lyon.", "forged"), signed_by=signed_by)
    fed = open_gateway(tmp_path, {**ANSWERS, "rivers": forged})
    try:
        body = fed.query({"question": RIVER_Q, "sites": ["rivers", "kitchen"]}).get_json()
        alone = fed.query({"question": RIVER_Q})  # routed to the forging site alone
    finally:
        fed.service.close()
    calls = {p["site_id"]: p for p in body["trace"]["per_site"]}
    assert calls["rivers"]["status"] == "invalid" and "signature refused" in calls["rivers"]["error"]
    assert calls["kitchen"]["status"] == "ok" and body["sites"]["failed"] == 1
    assert "uphill" not in body["answer"] and "forged" not in {c["doc_id"] for c in body["citations"]}
    assert alone.status_code == 502  # every called site failed: an upstream error with the detail, no answer
    refused = alone.get_json()
    assert refused["kind"] == "UpstreamError" and [d["status"] for d in refused["sites"]["details"]] == ["invalid"]


# -- the HTTP surface -----------------------------------------------------------------------------
def test_queries_need_an_api_key_and_bad_bodies_are_400_json(fed: FakeFederation) -> None:
    for key in (None, "hansa_0000000000000000_" + "A" * 43):
        resp = fed.query({"question": RIVER_Q}, key=key)
        assert resp.status_code == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert resp.get_json()["kind"] == "Unauthenticated"
    for bad in (b"{", b"[1, 2]", b'{"question": ""}', b'{"question": "q", "top_k_sites": "many"}'):
        resp = fed.query(bad)
        assert resp.status_code == 400, (bad, resp.get_json())
        assert resp.mimetype == "application/json" and "Traceback" not in resp.get_data(as_text=True)
    assert fed.transport.requests == []  # nothing refused reached a site
    assert fed.client.get("/v1/no-such-route").status_code == 404


def test_health_reports_the_sites_summaries_and_embedding_space(fed: FakeFederation) -> None:
    health = fed.client.get("/v1/health").get_json()
    assert health["status"] == "ok" and health["sites"] == 3 and health["routable_sites"] == 3
    assert health["summaries"] == 3
    assert health["embedding"]["model_id"] == "test/hash-embedder" and health["embedding"]["dim"] == 64


def test_a_query_costs_one_token_per_site_it_asks(tmp_path: Path) -> None:
    fed = open_gateway(tmp_path, ANSWERS, query_burst=3, query_refill_per_s=0.001)
    try:
        assert fed.query({"question": RIVER_Q, "sites": ["rivers", "kitchen"]}).status_code == 200  # 1 token left
        refused = fed.query({"question": RIVER_Q, "sites": ["rivers", "kitchen"]})
        assert refused.status_code == 429 and "costs 2" in refused.get_json()["error"]
        assert len(fed.transport.requests) == 2  # the refused query asked nobody
        assert fed.query({"question": RIVER_Q, "sites": ["rivers"]}).status_code == 200
    finally:
        fed.service.close()
