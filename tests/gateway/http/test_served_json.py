"""The JSON a served query answer carries is a public contract: its keys and values must not move
when the code that writes them does (issue 33 item 2 moves the query request onto the model layer).

`data/served-answers.json` was written by the code before that change (`HANSA_WRITE_SERVED=1`
rewrites it, for a deliberate contract change only). What only a clock, the loopback port or
chance decides (times, bytes, the query id) and the floats that scoring constants decide (scores,
features: others tune them) are compared by type; everything else (every key, string, integer, boolean, list length and the
request's echo in the trace) is compared exactly."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import GatewayConfig
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.service import Gateway
from hansa.gateway.trust import admin
from hansa.gateway.trust.registry import SiteRegistry
from hansa.sync.publication import build_publication
from hansa.sync.wire import EmbeddingSpace
from hansa.sync.keys import SiteIdentity
from tests.gateway.http.test_app import FOOD_Q, RIVER_Q, TTL, LoopbackSites, records, sites_http  # noqa: F401 (fixtures)

FIXTURE = Path(__file__).parent / "data" / "served-answers.json"
MEASURED = {"bytes_in", "bytes_out", "ms", "latency_ms"}
# The requests: routed, with an origin (the gate), a budget, explicit sites, a refusal.
REQUESTS: list[dict[str, Any]] = [
    {"question": RIVER_Q, "top_k_sites": 1},
    {"question": FOOD_Q, "origin": "rivers-s", "budget": {"time_ms": 60000.0, "sites": 2}, "top_k": 3},
    {"question": RIVER_Q, "sites": ["kitchen-s", "kitchen-s", "rivers-s"], "conversation": ["Tell me about France."]},
    {"question": RIVER_Q, "budget": {"sites": 0}},
    {"question": RIVER_Q, "extra": 1},
]


def normalized(value: Any, key: str = "") -> Any:
    if key in MEASURED or key.endswith("_ms") or (key == "spent" and isinstance(value, dict)):
        return f"<measured {type(value).__name__}>"
    if key == "query_id" and isinstance(value, str) and re.fullmatch("[0-9a-f]{32}", value):
        return "<32 hex digits>"  # fresh per query
    if key == "given":  # the request's budget, echoed: exact
        return value
    if isinstance(value, dict):
        return {k: normalized(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, float):
        return "<float>"
    return value


def serve(tmp_path: Path, embedder, sites_http: LoopbackSites, records) -> list[Any]:
    store = MilvusVectorStore(str(tmp_path / "x.db"))
    registry = SiteRegistry(tmp_path / "registry.json")
    cfg = GatewayConfig(top_m_summaries=16, top_k_sites=2, site_timeout_s=5.0, allow_private_addresses=True)
    gw = Gateway.open(cfg, embedder=embedder, vector_store=store, registry=registry)
    try:
        client = create_gateway_app(gw).test_client()
        auth = {"Authorization": "Bearer " + gw.api_keys.create("served-json")}
        for site in ("rivers-s", "kitchen-s"):
            me = SiteIdentity.generate()
            admin.enroll(registry, site, sites_http.url(site), [me.public_key_b64])
            sites_http.identities[site] = me
            env = build_publication(me, site, 1, EmbeddingSpace.of(embedder), records[site.split("-")[0]], TTL)
            assert client.post(f"/v1/sites/{site}/publications", json=env, headers=auth).status_code == 200
        out = []
        for body in REQUESTS:
            resp = client.post("/v1/query", json=body, headers=auth)
            out.append({"status": resp.status_code, "body": normalized(resp.get_json())})
        return out
    finally:
        gw.close()
        store.close()


def test_served_answers_keep_their_json(tmp_path: Path, embedder, sites_http, records) -> None:
    served = serve(tmp_path, embedder, sites_http, records)
    if os.environ.get("HANSA_WRITE_SERVED") == "1":
        FIXTURE.parent.mkdir(exist_ok=True)
        FIXTURE.write_text(json.dumps(served, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert served == json.loads(FIXTURE.read_text(encoding="utf-8"))
