"""Two gateway workers over one home: what one accepts, the other routes at its next request.

Real parts: two `Gateway` services (as two gunicorn workers would open them) over one registry file,
one shared-state file (SQLite WAL) and one Milvus Lite store, the real embedder, signed publications
and a registry revocation. The "site" is a small WSGI app reached through the in-process transport:
it records what the gateway sent it (to check the signed query id) and answers unsigned, so every
call to it fails verification — which is what drives `/v1/health` to `degraded`."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import GatewayConfig
from hansa.core.shared_state import SharedState
from hansa.gateway.trust import admin
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.query.request import QueryRequest
from hansa.gateway.trust.registry import SiteRegistry
from hansa.gateway.service import Gateway
from hansa.gateway.transport import InProcessSiteTransport
from hansa.sync.httpsig import QUERY_ID_HEADER, RETRIEVE_TRACED_COMPONENTS, NonceCache, keyring, verify_request
from hansa.sync.keys import SiteIdentity, load_public_key
from hansa.sync.publication import build_publication
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

SITE = "rivers"
TEXT = "Rivers of France: the Rhone and the Saone meet at Lyon and flow south to the Mediterranean."
QUESTION = "Which river flows through Lyon to the Mediterranean?"


class RecordingSite:
    """A WSGI 'site' that keeps the request headers it got and answers 200 without a signature."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        headers = {k[5:].replace("_", "-").title(): v for k, v in environ.items() if k.startswith("HTTP_")}
        headers["Content-Type"] = environ.get("CONTENT_TYPE", "")
        headers["Content-Length"] = environ.get("CONTENT_LENGTH", "")
        self.requests.append((headers, body))
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]


@pytest.fixture()
def pair(tmp_path: Path, embedder) -> Iterator[dict[str, Any]]:
    store = MilvusVectorStore(str(tmp_path / "milvus.db"))
    site_app = RecordingSite()
    cfg = GatewayConfig(top_m_summaries=16, publish_burst=100, query_burst=6, query_refill_per_s=0.001)
    registry_path = tmp_path / "gateway" / "registry.json"
    SiteRegistry(registry_path)  # the federation files, before the workers open them
    opened = []
    for _ in range(2):
        state = SharedState(tmp_path / "state.sqlite")
        gw = Gateway.open(cfg, embedder=embedder, vector_store=store, registry=SiteRegistry(registry_path),
                          transport=lambda identity, _cfg: InProcessSiteTransport(identity, {SITE: site_app}),
                          shared=state)
        opened.append((gw, state))
    site = SiteIdentity.generate()
    admin.enroll(opened[0][0].registry, SITE, "https://rivers.example.org", [site.public_key_b64])
    yield {"a": opened[0][0], "b": opened[1][0], "site": site, "site_app": site_app, "embedder": embedder}
    for gw, state in opened:
        gw.close()
        state.close()
    store.close()


def publication(pair: dict[str, Any], sequence: int) -> dict[str, Any]:
    embedder = pair["embedder"]
    vector = embedder.embed([TEXT])[0]
    records = [SummaryRecord("c1", sequence, encode_vector(vector), Richness(5, 3, 2), level=0)]
    return build_publication(pair["site"], SITE, sequence, EmbeddingSpace.of(embedder),
                             records, timedelta(hours=1))


def routed_sites(gw: Gateway) -> list[str]:
    """The sites a question is routed to (and called) by `gw`, read from its trace."""
    result = gw.query(QueryRequest(question=QUESTION, top_k_sites=1), client="tester")
    return [call.site_id for call in result.calls]


def test_a_publication_in_one_worker_is_routable_from_the_other_at_its_next_request(pair) -> None:
    a, b = pair["a"], pair["b"]
    assert routed_sites(b) == []  # nothing published yet
    a.publish(SITE, publication(pair, 1))
    assert b.index.current(SITE) is None  # b has not had a request since
    assert routed_sites(b) == [SITE]
    assert b.index.current(SITE).sequence == 1
    a.publish(SITE, publication(pair, 2))
    assert b.health()["summaries"] == 1 and b.index.current(SITE).sequence == 2


def test_a_revocation_in_one_worker_applies_in_the_other_at_its_next_request(pair) -> None:
    a, b = pair["a"], pair["b"]
    a.publish(SITE, publication(pair, 1))
    assert routed_sites(b) == [SITE]
    admin.revoke(a.registry, SITE)
    assert routed_sites(b) == []
    assert b.index.current(SITE) is None and b.health()["summaries"] == 0


def test_rate_limit_buckets_are_shared_between_workers(pair) -> None:
    from hansa.gateway.trust.ratelimit import RateLimited

    a, b = pair["a"], pair["b"]
    a.query(QueryRequest(question=QUESTION, top_k_sites=2), client="c")
    b.query(QueryRequest(question=QUESTION, top_k_sites=2), client="c")
    a.query(QueryRequest(question=QUESTION, top_k_sites=2), client="c")
    with pytest.raises(RateLimited):  # a burst of 6 tokens between the two workers, not 6 each
        b.query(QueryRequest(question=QUESTION, top_k_sites=2), client="c")


def test_one_signed_query_id_per_question_and_a_degraded_health(pair) -> None:
    a = pair["a"]
    a.publish(SITE, publication(pair, 1))
    assert a.health()["status"] == "ok"  # never called yet: nothing known to be down
    client = create_gateway_app(a).test_client()
    key = a.api_keys.create("tester-http")
    resp = client.post("/v1/query", json={"question": QUESTION, "top_k_sites": 1}, headers={"Authorization": f"Bearer {key}"})
    # the site answers unsigned, so its one call is invalid: every called site failed, a 502
    assert resp.status_code == 502, resp.get_json()
    query_id = resp.headers[QUERY_ID_HEADER]
    assert len(query_id) == 32 and resp.get_json()["query_id"] == query_id
    headers, body = pair["site_app"].requests[-1]
    assert headers[QUERY_ID_HEADER] == query_id
    verify_request("POST", f"https://rivers.example.org/v1/retrieve", headers, body,
                   keyring([load_public_key(a.identity.public_key_b64)]), NonceCache(),
                   required=RETRIEVE_TRACED_COMPONENTS)  # the id is covered by the gateway's signature
    again = client.post("/v1/query", json={"question": QUESTION, "top_k_sites": 1}, headers={"Authorization": f"Bearer {key}"})
    assert again.headers[QUERY_ID_HEADER] != query_id
    # the site answered without a signature: its last call failed, so health is degraded (still 200)
    health = client.get("/v1/health")
    assert health.status_code == 200
    body_json = health.get_json()
    assert body_json["status"] == "degraded" and body_json["unreachable_sites"][SITE]["status"] == "invalid"
    site_view = next(s for s in client.get("/v1/sites").get_json()["sites"] if s["site_id"] == SITE)
    assert site_view["last_call"]["status"] == "invalid" and site_view["last_call"]["at"].endswith("Z")


def scrape(client: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics, parsed by prometheus_client's own parser: {(sample name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp.content_type.startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(resp.get_data(as_text=True)) for s in family.samples}


def test_metrics_count_real_queries_publications_and_refusals(pair) -> None:
    from hansa.gateway.trust.ratelimit import RateLimited

    a = pair["a"]
    client = create_gateway_app(a).test_client()
    before = scrape(client)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    a.query(QueryRequest(question=QUESTION, top_k_sites=1), client="m")  # nothing published: no site asked
    assert client.post(f"/v1/sites/{SITE}/publications", json=publication(pair, 2)).status_code == 200
    assert client.post(f"/v1/sites/{SITE}/publications", json=publication(pair, 1)).status_code == 409  # rollback
    a.query(QueryRequest(question=QUESTION, top_k_sites=1), client="m")  # the site's answer fails verification
    with pytest.raises(RateLimited):
        for _ in range(10):
            a.query(QueryRequest(question=QUESTION, top_k_sites=2), client="m")
    after = scrape(client)
    assert delta("hansa_gateway_queries_total", outcome="no_sites") == 1
    assert delta("hansa_gateway_queries_total", outcome="error") >= 2  # every call to the site fails
    assert delta("hansa_gateway_publications_total", result="accepted", reason="new") == 1
    assert delta("hansa_gateway_publications_total", result="refused", reason="PublicationConflict") == 1
    assert delta("hansa_gateway_rate_limited_total", limit="query") == 1
    assert delta("hansa_gateway_site_calls_total", site=SITE, status="invalid") >= 2
    assert delta("hansa_gateway_site_call_seconds_count", site=SITE) >= 2
    assert after[("hansa_gateway_summaries", ())] == 1


def test_every_worker_admin_page_shows_every_workers_recent_queries(pair) -> None:
    """The recent queries (and each site's recent calls) live in the shared state: every worker's
    admin page shows them. Health and `last_call` stay the answering worker's own."""
    from hansa.gateway.http.admin_state import admin_state

    a, b = pair["a"], pair["b"]
    a.publish(SITE, publication(pair, 1))
    asked = a.query(QueryRequest(question=QUESTION, top_k_sites=1), client="tester")
    seen_by_b = admin_state(b)
    assert seen_by_b["shared"] is True
    assert [q["query_id"] for q in seen_by_b["recent_queries"]] == [asked.trace.query_id]
    assert seen_by_b["recent_queries"][0]["question"] == QUESTION and seen_by_b["recent_queries"][0]["client"] == "tester"
    site = next(s for s in seen_by_b["sites"] if s["site_id"] == SITE)
    assert [c["status"] for c in site["recent_calls"]] == ["invalid"]  # a's call, as b shows it
    assert site["key_ids"] == [pair["site"].keyid]
    assert site["last_call"] is None and seen_by_b["health"]["status"] == "ok"  # b itself never called it
    assert admin_state(a)["health"]["status"] == "degraded"
