"""Federation membership as the gateway API enforces it, with real parts: Milvus Lite, the real
embedder, signed publications from hansa.sync, a 2-of-3 federation registry. Each refusal checks
that the summary index and the site's publication floor did not change."""
from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import GatewayConfig
from hansa.gateway.trust import admin
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.service import Gateway
from hansa.gateway.trust.registry import SiteRegistry
from hansa.gateway.trust.documents import SitePolicy
from hansa.sync.keys import SiteIdentity
from hansa.sync.membership import build_join_request, build_key_rotation
from hansa.sync.publication import build_publication
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

GW = "https://gateway.example.org"
TEXTS = ["Harbour cranes unload containers at the quay.", "Tide tables govern when ships may enter the port."]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[dict[str, Any]]:
    root: Path = tmp_path_factory.mktemp("federation-app")
    store = MilvusVectorStore(str(root / "x.db"))
    registry = SiteRegistry(root / "gateway" / "registry.json")
    keys = admin.init_federation(registry, 2, 3, GW)
    cfg = GatewayConfig(top_m_summaries=16, top_k_sites=2, site_timeout_s=2.0, allow_private_addresses=True)
    gw = Gateway.open(cfg, embedder=embedder, vector_store=store, registry=registry)
    app = create_gateway_app(gw)
    records = tuple(
        SummaryRecord(summary_id=f"c{i}", version=1, vector_b64=encode_vector(v),
                      richness=Richness(entities=4, chunks=2, documents=1), level=0)
        for i, v in enumerate(embedder.embed(TEXTS))
    )
    yield {"app": app, "client": app.test_client(), "store": store, "registry": registry, "keys": keys, "cfg": cfg,
           "embedder": embedder, "space": EmbeddingSpace.of(embedder), "records": records,
           "index": gw.index}
    gw.close()
    store.close()


def admit(env, site_id: str, policy: SitePolicy | None = None) -> SiteIdentity:
    identity = SiteIdentity.generate()
    request = build_join_request([identity], site_id, "http://127.0.0.1:9/none", GW)
    admin.change(env["registry"], admin.admission(request, policy), env["keys"][:2])
    return identity


def publish(env, path_site: str, identity: SiteIdentity, named_site: str, sequence: int, records=None) -> Any:
    envelope = build_publication(identity, named_site, sequence, env["space"],
                                 env["records"] if records is None else records, timedelta(hours=1))
    return env["client"].post(f"/v1/sites/{path_site}/publications", data=json.dumps(envelope),
                              content_type="application/json")


def snapshot(env, *sites: str) -> tuple[int, dict[str, int], list[Any]]:
    reg = env["registry"]
    return env["index"].count(), env["index"].sites(sites), [reg.last_sequence(s) for s in sites]


def test_a_revoked_site_is_refused_and_leaves_the_index_at_once(env) -> None:
    a, b = admit(env, "rev-a"), admit(env, "rev-b")
    assert publish(env, "rev-a", a, "rev-a", 1).status_code == 200
    assert publish(env, "rev-b", b, "rev-b", 1).status_code == 200
    assert env["index"].sites(["rev-a", "rev-b"]) == {"rev-a": 2, "rev-b": 2}
    total = env["index"].count()

    # revoked by `hansa gateway revoke` in another process: gone from the next request on
    admin.change(SiteRegistry(env["registry"].path), admin.revocation("rev-a"), env["keys"][1:])
    assert env["client"].get("/v1/health").status_code == 200
    assert env["index"].sites(["rev-a", "rev-b"]) == {"rev-b": 2} and env["index"].count() == total - 2
    view = {s["site_id"]: s for s in env["client"].get("/v1/sites").get_json()["sites"]}
    assert view["rev-a"]["status"] == "revoked" and view["rev-a"]["routable"] is False
    before = snapshot(env, "rev-a")
    resp = publish(env, "rev-a", a, "rev-a", 2)
    assert resp.status_code == 403 and "revoked" in resp.get_json()["error"]
    assert snapshot(env, "rev-a") == before

    # revoked through the gateway's own registry: gone before any request
    admin.revoke(env["registry"], "rev-b", keys=env["keys"][:2])
    assert env["index"].sites(["rev-a", "rev-b"]) == {} and env["index"].count() == total - 4


def test_site_a_cannot_publish_for_site_b(env) -> None:
    a, b = admit(env, "ns-a"), admit(env, "ns-b")
    before = snapshot(env, "ns-a", "ns-b")
    for path_site, signer, named in (
        ("ns-b", a, "ns-b"),  # A's key, B's name, B's path
        ("ns-b", a, "ns-a"),  # A's own content sent into B's namespace
        ("ns-a", b, "ns-b"),  # B's content sent into A's namespace
        ("ns-a", b, "ns-a"),  # B's key claiming to be A
    ):
        resp = publish(env, path_site, signer, named, 1)
        assert resp.status_code == 403, (path_site, named, resp.get_json())
        assert snapshot(env, "ns-a", "ns-b") == before
    assert publish(env, "ns-a", a, "ns-a", 1).status_code == 200  # its own namespace: accepted
    assert env["index"].sites(["ns-a", "ns-b"]) == {"ns-a": 2}


@pytest.mark.parametrize("path_site", ["..%2Fx", "..", "Acme", "%D0%B0cme", "acme%0A", "ns-a%20"])
def test_traversing_and_spoofed_ids_in_the_path_are_refused(env, path_site: str) -> None:
    before = snapshot(env, "ns-a", "ns-b")
    envelope = build_publication(SiteIdentity.generate(), "ns-a", 9, env["space"], env["records"], timedelta(hours=1))
    resp = env["client"].post(f"/v1/sites/{path_site}/publications", data=json.dumps(envelope),
                              content_type="application/json")
    assert resp.status_code in (400, 404), resp.get_data()
    assert snapshot(env, "ns-a", "ns-b") == before


def test_rotation_replaces_the_keys_and_resets_the_floor(env) -> None:
    old = admit(env, "rot-a")
    assert publish(env, "rot-a", old, "rot-a", 5).status_code == 200
    new = SiteIdentity.generate()
    rotation = build_key_rotation(old, [old.public_key_b64], [new], "rot-a")
    admin.change(env["registry"], admin.rotation("rot-a", rotation), env["keys"][:2])
    assert env["index"].sites(["rot-a"]) == {}  # signed by keys no longer trusted: dropped at once
    before = snapshot(env, "rot-a")
    assert before[2] == [None]
    assert publish(env, "rot-a", old, "rot-a", 6).status_code == 403  # the old key is out
    assert snapshot(env, "rot-a") == before
    assert publish(env, "rot-a", new, "rot-a", 1).status_code == 200  # a fresh floor for the new keys
    assert publish(env, "rot-a", new, "rot-a", 0, env["records"][:1]).status_code == 409  # and it holds
    assert env["index"].sites(["rot-a"]) == {"rot-a": 2} and env["registry"].last_sequence("rot-a") == 1


def test_the_site_policy_caps_what_a_publication_may_carry(env) -> None:
    capped = admit(env, "cap-a", SitePolicy(max_summaries=1))
    before = snapshot(env, "cap-a")
    resp = publish(env, "cap-a", capped, "cap-a", 1)
    assert resp.status_code == 400 and "max_summaries" in resp.get_json()["error"]
    assert snapshot(env, "cap-a") == before
    assert publish(env, "cap-a", capped, "cap-a", 2, env["records"][:1]).status_code == 200


def test_a_restarted_gateway_keeps_floors_and_membership(env) -> None:
    site = admit(env, "restart-a")
    assert publish(env, "restart-a", site, "restart-a", 3).status_code == 200
    registry = SiteRegistry(env["registry"].path)
    restarted = Gateway.open(env["cfg"], embedder=env["embedder"], vector_store=env["store"], registry=registry)
    app = create_gateway_app(restarted)
    envelope = build_publication(site, "restart-a", 2, env["space"], env["records"][:1], timedelta(hours=1))
    resp = app.test_client().post("/v1/sites/restart-a/publications", data=json.dumps(envelope),
                                  content_type="application/json")
    assert resp.status_code == 409 and "replay or rollback" in resp.get_json()["error"]
    assert registry.registry.version == env["registry"].registry.version
    assert {s["site_id"] for s in app.test_client().get("/v1/sites").get_json()["sites"]} >= {"restart-a", "ns-a"}
    restarted.close()
