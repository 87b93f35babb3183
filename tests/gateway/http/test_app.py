"""The gateway API with real parts: Milvus Lite, the real embedder, signed publications from
hansa.sync, and sites answering over real loopback HTTP. Every refusal also checks that nothing
stored changed (index rows and the registry's record of the site)."""
from __future__ import annotations

import base64
import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
from flask import Flask, Response, request
from werkzeug.serving import make_server

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import Config, GatewayConfig
from hansa.core.errors import BackendError, InputError
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.service import Gateway
from hansa.gateway.index.summaries import SummaryIndex
from hansa.gateway.trust import admin
from hansa.gateway.trust.registry import SiteRegistry
from hansa.sync.dsse import sign_envelope
from hansa.sync.httpsig import HttpMessage, sign_response
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import PUBLICATION_TYPE_V2, build_publication, open_publication
from hansa.sync.vectors import decode_vector, encode_vector
from hansa.sync.wire import (
    PUBLICATION_TYPE,
    EmbeddingSpace,
    Richness,
    SummaryRecord,
    format_utc,
)

MAX_BODY = 256 * 1024
TTL = timedelta(hours=1)

SUMMARIES = {
    # publication mechanics use "misc", far from the routing tests' topics, so identical vectors
    # published by many test sites never crowd the routing tests' sites out of the top-m
    "misc": [
        "Quantum computers manipulate qubits with microwave pulses.",
        "Medieval castles were defended by moats and curtain walls.",
    ],
    "rivers": [
        "Rivers of France: the Rhone and the Saone meet at Lyon and flow south to the Mediterranean.",
        "Alpine glaciers and lakes feed the Rhone river before it enters France.",
    ],
    "kitchen": [
        "French pastry: croissants, butter, laminated dough and baking temperatures.",
        "Lyonnais bouchons serve sausages, quenelles and local wine.",
    ],
}
ANSWERS = {
    "rivers": ("The Rhone flows through Lyon, where the Saone joins it.", "rhone", "The Rhone"),
    "kitchen": ("Bouchons in Lyon serve sausages and quenelles.", "bouchons", "Bouchons"),
}


class LoopbackSites:
    """Sites as real HTTP servers: /<site>/v1/retrieve answers a fixed partial answer, signed with
    the site's enrolled key and bound to the gateway's request (RFC 9421), as a real site does."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.identities: dict[str, SiteIdentity] = {}
        app = Flask("loopback-sites")

        @app.post("/<site>/v1/retrieve")
        def retrieve(site: str) -> Response:
            self.asked.append(site)
            body = json.loads(request.get_data())
            sentence, doc, title = ANSWERS[site.split("-")[0]]  # "rivers-a" answers as a rivers site
            answer = {
                "site_id": site,
                "answer": sentence,
                "citations": [{"site_id": site, "doc_id": doc, "title": title, "score": 0.9}],
                "confidence": 0.8,
                "sentences": [[sentence, doc]],
            }
            assert set(body) == {"question", "top_k", "mode"}
            resp = Response(json.dumps(answer), mimetype="application/json")
            signed = HttpMessage.request(request.method, request.url, request.headers)
            resp.headers.update(sign_response(self.identities[site], 200, resp.headers, resp.get_data(), signed))
            return resp

        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, site: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/{site}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def sites_http() -> Iterator[LoopbackSites]:
    s = LoopbackSites()
    yield s
    s.close()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[dict[str, Any]]:
    root: Path = tmp_path_factory.mktemp("gateway")
    store = MilvusVectorStore(str(root / "x.db"))
    registry = SiteRegistry(root / "gateway" / "registry.json")
    cfg = GatewayConfig(top_m_summaries=16, top_k_sites=2, site_timeout_s=5.0, max_request_bytes=MAX_BODY,
                        allow_private_addresses=True)
    gw = Gateway.open(cfg, embedder=embedder, vector_store=store, registry=registry)
    app = create_gateway_app(gw)
    space = EmbeddingSpace.of(embedder)
    key = gw.api_keys.create("test-app")
    yield {"app": app, "client": app.test_client(), "store": store, "registry": registry, "cfg": cfg,
           "space": space, "index": gw.index, "gateway": gw, "auth": f"Bearer {key}"}
    gw.close()  # its index's background writer uses the store
    store.close()


@pytest.fixture(scope="module")
def records(embedder) -> dict[str, tuple[SummaryRecord, ...]]:
    out = {}
    for site, texts in SUMMARIES.items():
        vecs = embedder.embed(texts)
        out[site] = tuple(
            SummaryRecord(summary_id=f"c{i}", version=1, vector_b64=encode_vector(v),
                          richness=Richness(entities=5 + i, chunks=3, documents=2), level=0)
            for i, v in enumerate(vecs)
        )
    return out


def enroll(env, site: str, url: str = "http://127.0.0.1:9/none") -> SiteIdentity:
    identity = SiteIdentity.generate()
    admin.enroll(env["registry"], site, url, [identity.public_key_b64])
    return identity


def envelope(env, identity: SiteIdentity, site: str, sequence: int, recs, now: datetime | None = None) -> dict:
    return build_publication(identity, site, sequence, env["space"], recs, TTL, now=now)


def post(env, path: str, body: Any) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return env["client"].post(path, data=data, content_type="application/json", headers={"Authorization": env["auth"]})


def publish(env, site: str, env_obj: Any) -> Any:
    return post(env, f"/v1/sites/{site}/publications", env_obj)


def snapshot(env, site: str) -> tuple[int, dict[str, int], Any]:
    reg = env["registry"]
    rec = next((r for r in reg.list() if r.site_id == site), None)
    return env["index"].count(), env["index"].sites([r.site_id for r in reg.list()]), rec


def test_a_signed_publication_is_accepted_and_indexed(env, records) -> None:
    me = enroll(env, "site-ok")
    before = env["index"].count()
    resp = publish(env, "site-ok", envelope(env, me, "site-ok", 1, records["misc"]))
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    assert body["accepted"] == 2 and body["sequence"] == 1 and body["site_id"] == "site-ok"
    assert env["index"].count() == before + 2
    rec = env["registry"].get("site-ok")
    assert (rec.last_sequence, rec.summary_count, rec.expires) == (1, 2, body["expires"])


def test_a_republication_replaces_the_whole_set(env, records) -> None:
    me = enroll(env, "site-swap")
    assert publish(env, "site-swap", envelope(env, me, "site-swap", 1, records["misc"])).status_code == 200
    c0, c1 = records["misc"]
    newer = (SummaryRecord("c0", 2, c1.vector_b64, c0.richness),)  # c0 kept with a new vector, c1 gone
    assert publish(env, "site-swap", envelope(env, me, "site-swap", 2, newer)).status_code == 200
    assert env["index"].sites(["site-swap"]) == {"site-swap": 1}
    assert sorted(env["index"].current("site-swap").rows) == ["c0"]
    hits = [h for h in env["index"].search(decode_vector(c1.vector_b64, env["space"].dim), 16) if h.site_id == "site-swap"]
    assert [(h.summary_id, round(h.score, 4)) for h in hits] == [("c0", 1.0)]
    assert publish(env, "site-swap", envelope(env, me, "site-swap", 3, ())).status_code == 200
    assert env["index"].sites(["site-swap"]) == {}


def _tamper(env_obj: dict) -> dict:
    payload = json.loads(base64.b64decode(env_obj["payload"]))
    payload["sequence"] += 100
    return {**env_obj, "payload": base64.b64encode(json.dumps(payload).encode()).decode()}


def _reissued(env_obj: dict) -> bytes:
    payload = json.loads(base64.b64decode(env_obj["payload"]))
    later = datetime.fromisoformat(payload["expires"][:-1]) + timedelta(hours=1)  # other bytes, a lifetime allowed
    payload["expires"] = later.strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(payload).encode()


REFUSALS = {
    "unsigned": (lambda e, me, other: {**e, "signatures": []}, 403),
    "tampered": (lambda e, me, other: _tamper(e), 403),
    "wrong key": (lambda e, me, other: sign_envelope(PUBLICATION_TYPE_V2, base64.b64decode(e["payload"]), other), 403),
    "wrong type": (lambda e, me, other: sign_envelope("application/json", base64.b64decode(e["payload"]), me), 403),
    "retired type": (lambda e, me, other: sign_envelope(PUBLICATION_TYPE, base64.b64decode(e["payload"]), me), 403),
    # the same sequence again with other bytes (an exact resend is answered as already accepted)
    "same sequence other bytes": (lambda e, me, other: sign_envelope(PUBLICATION_TYPE_V2, _reissued(e), me), 409),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_forged_or_replayed_publications_change_nothing(env, records, case: str) -> None:
    site = "site-" + case.replace(" ", "-")
    me, other = enroll(env, site), SiteIdentity.generate()
    first = envelope(env, me, site, 5, records["misc"])
    assert publish(env, site, first).status_code == 200
    before = snapshot(env, site)
    make, status = REFUSALS[case]
    resp = publish(env, site, make(first, me, other))
    assert resp.status_code == status, resp.get_json()
    assert resp.get_json()["error"]
    assert snapshot(env, site) == before


def test_rollback_to_a_lower_sequence_is_refused(env, records) -> None:
    me = enroll(env, "site-rollback")
    old = envelope(env, me, "site-rollback", 1, records["misc"][:1])
    assert publish(env, "site-rollback", envelope(env, me, "site-rollback", 2, records["misc"])).status_code == 200
    before = snapshot(env, "site-rollback")
    resp = publish(env, "site-rollback", old)
    assert resp.status_code == 409 and "rollback" in resp.get_json()["error"]
    assert snapshot(env, "site-rollback") == before


def test_unenrolled_spoofed_and_expired_publications_are_refused(env, records) -> None:
    me = enroll(env, "site-real")
    # enrolled before the snapshot: enrolling re-signs the registry, which moves every record's
    # trusted_until (the registry's expiry) to a later second
    enroll(env, "site-victim")
    stranger = SiteIdentity.generate()
    before = snapshot(env, "site-real")
    resp = publish(env, "ghost", envelope(env, stranger, "ghost", 1, records["misc"]))
    assert resp.status_code == 403 and "not enrolled" in resp.get_json()["error"]
    # a publication signed by site-real for its own namespace, posted as another enrolled site
    resp = publish(env, "site-victim", envelope(env, me, "site-real", 1, records["misc"]))
    assert resp.status_code == 403
    expired = envelope(env, me, "site-real", 1, records["misc"], now=datetime.now(timezone.utc) - 2 * TTL)
    resp = publish(env, "site-real", expired)
    assert resp.status_code == 403 and "expired" in resp.get_json()["error"]
    resp = publish(env, "Bad..Id", envelope(env, me, "site-real", 1, records["misc"]))
    assert resp.status_code == 400 and "site id" in resp.get_json()["error"]
    assert snapshot(env, "site-real") == before


def test_malformed_deep_and_oversized_bodies(env, records) -> None:
    me = enroll(env, "site-bodies")
    before = snapshot(env, "site-bodies")
    for path in ("/v1/sites/site-bodies/publications", "/v1/query"):
        assert post(env, path, b"{not json").status_code == 400
        deep = post(env, path, b"[" * 100_000 + b"]" * 100_000)
        assert deep.status_code == 400 and "nested" in deep.get_json()["error"]
        big = post(env, path, b'{"question": "' + b"x" * (MAX_BODY + 10) + b'"}')
        assert big.status_code == 413 and big.get_json()["error"]
        assert post(env, path, b'{"a": 1, "a": 2}').status_code == 400
    for bad in ({"question": 3}, {"question": "q", "extra": 1}, {"question": "q", "top_k_sites": 0},
                {"question": "q", "top_k": "5"}, {"question": " "}, ["question"]):
        resp = post(env, "/v1/query", bad)
        assert resp.status_code == 400, bad
        assert resp.get_json()["kind"] == "InputError"
    assert post(env, "/v1/query", b'{"question": NaN}').status_code == 400
    assert snapshot(env, "site-bodies") == before
    assert env["client"].get("/v1/nothing").status_code == 404
    assert env["client"].get("/v1/nothing").get_json()["error"]


RIVER_Q = "Which river flows through Lyon to the Mediterranean?"
FOOD_Q = "Where can I eat quenelles and sausages?"


def federation(env, records, sites_http: LoopbackSites, suffix: str) -> tuple[str, str]:
    """A rivers site and a kitchen site of this test's own, enrolled at loopback URLs and published."""
    names = (f"rivers-{suffix}", f"kitchen-{suffix}")
    for site in names:
        me = enroll(env, site, sites_http.url(site))
        sites_http.identities[site] = me
        resp = publish(env, site, envelope(env, me, site, 1, records[site.split("-")[0]]))
        assert resp.status_code == 200, resp.get_json()
    return names


def test_query_routes_to_the_site_whose_summaries_match(env, records, sites_http: LoopbackSites) -> None:
    rivers, kitchen = federation(env, records, sites_http, "q")
    resp = post(env, "/v1/query", {"question": RIVER_Q, "top_k_sites": 1})
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    trace = body["trace"]
    assert trace["sites_called"] == [rivers]
    assert trace["sites_considered"][0]["site_id"] == rivers
    assert trace["sites_considered"][0]["summaries"][0] == "c0"
    assert [p["site_id"] for p in trace["per_site"]] == [rivers] and trace["per_site"][0]["status"] == "ok"
    assert trace["bytes_in"] > 0 and trace["bytes_out"] > 0
    for key in ("routing_ms", "fusion_ms", "total_ms"):
        assert trace[key] >= 0
    # the default reader's span leads, then the sentence that holds it
    assert body["short_answer"] == "Rhone"
    assert body["answer"] == "Rhone [1]. The Rhone flows through Lyon, where the Saone joins it. [1]"
    assert body["citations"] == [{"site_id": rivers, "doc_id": "rhone", "title": "The Rhone", "score": 0.9, "n": 1,
                                  "used": True, "snippet": "The Rhone flows through Lyon, where the Saone joins it."}]
    assert body["sites"] == {"total": 1, "successful": 1, "skipped": 0, "failed": 0, "timed_out": 0, "partial": False,
                             "details": trace["per_site"]}

    assert post(env, "/v1/query", {"question": FOOD_Q, "top_k_sites": 1}).get_json()["trace"]["sites_called"] == [kitchen]
    assert trace["selection"] == "routed"

    # explicit sites (evaluation baselines, oracles): called as named, routing only traced
    named = post(env, "/v1/query", {"question": RIVER_Q, "sites": [kitchen, kitchen]}).get_json()
    assert named["trace"]["sites_called"] == [kitchen] and named["trace"]["selection"] == "explicit"
    assert named["trace"]["sites_considered"][0]["site_id"].startswith("rivers-")
    assert named["citations"][0]["site_id"] == kitchen
    empty = post(env, "/v1/query", {"question": RIVER_Q, "sites": []})  # asks nobody: refused, not "no answer"
    assert empty.status_code == 400 and "'sites' is empty" in empty.get_json()["error"]
    assert "leave 'sites' out" in empty.get_json()["error"]
    assert post(env, "/v1/query", {"question": RIVER_Q, "sites": ["nobody"]}).status_code == 404
    assert post(env, "/v1/query", {"question": RIVER_Q, "sites": ["../x"]}).status_code == 400
    assert post(env, "/v1/query", {"question": RIVER_Q, "sites": "rivers-q"}).status_code == 400

    both = post(env, "/v1/query", {"question": RIVER_Q, "top_k_sites": 2}).get_json()
    assert set(both["trace"]["sites_called"]) <= {rivers, kitchen, "rivers-x", "kitchen-x"}
    assert both["trace"]["sites_called"][0].startswith("rivers-")


def test_expired_and_revoked_sites_drop_out_of_routing(env, records, sites_http: LoopbackSites, embedder) -> None:
    rivers, kitchen = federation(env, records, sites_http, "x")
    reg = env["registry"]
    # the current publication's expiry passes (as recorded by the registry): no longer routable
    past = format_utc(datetime.now(timezone.utc) - timedelta(minutes=1))
    current = reg.get(rivers)
    reg.record_publication(rivers, current.last_sequence + 1, past, current.summary_count)
    trace = post(env, "/v1/query", {"question": RIVER_Q, "top_k_sites": 3}).get_json()["trace"]
    assert rivers not in trace["sites_called"]
    assert {"site_id": rivers, "reason": "publication expired"} in trace["sites_excluded"]
    view = {s["site_id"]: s for s in env["client"].get("/v1/sites").get_json()["sites"]}
    assert view[rivers]["expired"] is True and view[rivers]["routable"] is False
    assert view[kitchen]["routable"] is True

    # revocation: immediately unroutable, publishing refused, rows purged at once (guarantee 10)
    before = env["index"].count()
    assert env["index"].sites([kitchen]) == {kitchen: 2}
    admin.revoke(reg, kitchen)
    assert env["index"].sites([kitchen]) == {}
    assert env["index"].count() == before - 2
    body = post(env, "/v1/query", {"question": FOOD_Q, "top_k_sites": 3}).get_json()
    assert kitchen not in body["trace"]["sites_called"]
    resp = publish(env, kitchen, {"payloadType": PUBLICATION_TYPE, "payload": "", "signatures": []})
    assert resp.status_code == 403 and "revoked" in resp.get_json()["error"]
    assert post(env, "/v1/query", {"question": FOOD_Q, "sites": [kitchen]}).status_code == 403
    Gateway.open(env["cfg"], embedder=embedder, vector_store=env["store"], registry=reg).close()  # a restart keeps it out
    assert env["index"].sites([kitchen]) == {}


def test_no_routable_site_gives_an_explained_empty_answer(tmp_path: Path, embedder) -> None:
    store = MilvusVectorStore(str(tmp_path / "x.db"))
    try:
        gw = Gateway.open(Config(home=tmp_path), embedder=embedder, vector_store=store,
                          registry=SiteRegistry(tmp_path / "r.json"))  # whole Config
        app = create_gateway_app(gw)
        auth = {"Authorization": "Bearer " + gw.api_keys.create("test-empty")}
        body = app.test_client().post("/v1/query", json={"question": "anything?"}, headers=auth).get_json()
        assert body["answer"].startswith("No answer") and body["citations"] == []
        assert body["trace"]["sites_called"] == [] and "no site was asked" in body["trace"]["note"]
        health = app.test_client().get("/v1/health").get_json()
        assert health == {"status": "ok", "sites": 0, "routable_sites": 0, "summaries": 0,
                          "embedding": {"model_id": embedder.model_id, "dim": embedder.dim, "encoding": "f32le-b64",
                                        "model_sha256": embedder.model_sha256},
                          "role": "primary"}
        gw.close()
    finally:
        store.close()


def test_index_refuses_vectors_of_another_space(env, records, tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="384-d"):
        SummaryIndex(env["store"], EmbeddingSpace(env["space"].model_id, env["space"].dim + 1), tmp_path)
    other = EmbeddingSpace("another-model", env["space"].dim)
    me = SiteIdentity.generate()
    payload = open_publication(build_publication(me, "site-ok", 99, other, records["rivers"], TTL), "site-ok",
                               [me.public_key], other)
    before = env["index"].count()
    with pytest.raises(InputError, match="another-model"):
        env["index"].plan(payload, None)
    assert env["index"].count() == before
