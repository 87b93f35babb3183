"""A restarted gateway routes exactly as before and accepts no rollback (issue 11).

Two real processes, one after the other, on the same gateway home (registry.json, Milvus Lite,
publication heads): the first enrolls four sites, applies their signed publications (one site
publishes twice: its second set adds a summary), records the routing of a set of questions
(sites considered, with scores and the summaries that matched, and sites called) and exits; the
second opens a new gateway on the same state, records the routing again — it must be identical —
then is handed the first publication of the site that published twice (a rollback to an older
set, validly signed and unexpired): refused, and the routing still the same afterwards.

Slow-ish: each process loads the ONNX embedder (seconds).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hansa.adapters.embedder import open_embedder
from hansa.core.config import load_config
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import build_publication
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

CHILD = Path(__file__).with_name("restart_child.py")
TOPICS = {
    "rivers": ["The Rhone flows south through Lyon to the Mediterranean.", "Barges carry grain along the Seine."],
    "harbour": ["Cranes unload containers at the quay.", "Tide tables govern when ships may enter the port."],
    "bees": ["Honey bees forage for nectar and pollen.", "A queen bee lays up to two thousand eggs a day."],
    "volcano": ["Lava flows from the crater of Etna.", "Volcanic ash grounded flights across Europe."],
}
ADDED = "Lyon's bridges over the Rhone were rebuilt after the war."  # only in rivers' second set
QUESTIONS = ["Where does the Rhone flow?", "When can ships enter the port?", "How many eggs does a queen lay?",
             "Which volcano erupted?", "Who rebuilt the bridges of Lyon?", "What do barges and cranes carry?"]


def life(home: Path, spec: dict[str, Any], folder: Path, name: str) -> dict[str, Any]:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(CHILD), str(home), str(path)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_a_restarted_gateway_routes_as_before_and_refuses_a_rollback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    embedder = open_embedder(load_config(env={"HANSA_HOME": str(tmp_path / "test")}))
    space = EmbeddingSpace.of(embedder)

    def records(texts: list[str]) -> list[SummaryRecord]:
        return [SummaryRecord(f"c{i}", 1, encode_vector(v), Richness(4, 2, 1), level=0)
                for i, v in enumerate(embedder.embed(texts))]

    enroll, publish, envelopes = [], [], {}
    for site_id, texts in TOPICS.items():
        identity = SiteIdentity.generate()
        enroll.append([site_id, f"https://{site_id}.example.org", identity.public_key_b64])
        sets = [texts] + ([texts + [ADDED]] if site_id == "rivers" else [])
        for sequence, summaries in enumerate(sets, start=1):
            path = tmp_path / f"{site_id}-{sequence}.json"
            path.write_text(json.dumps(build_publication(identity, site_id, sequence, space, records(summaries),
                                                         timedelta(hours=1))), encoding="utf-8")
            publish.append([site_id, str(path)])
            envelopes[(site_id, sequence)] = str(path)
    sites = sorted(TOPICS)

    before = life(home, {"enroll": enroll, "publish": publish, "questions": QUESTIONS, "sites": sites}, tmp_path, "first")
    assert before["last_sequence"] == {"rivers": 2, "harbour": 1, "bees": 1, "volcano": 1}
    assert before["summaries"] == 9
    bridges = next(r for r in before["routing"] if "bridges" in r["question"])
    assert bridges["called"][0] == "rivers" and "c2" in bridges["considered"][0]["summaries"], \
        "the routing recorded must be the second set's (the summary it added matched)"
    assert all(r["called"] for r in before["routing"]), "every question must route somewhere"

    after = life(home, {"questions": QUESTIONS, "sites": sites, "replay": ["rivers", envelopes[("rivers", 1)]]},
                 tmp_path, "second")
    assert after["routing"] == before["routing"], "a restarted gateway must route exactly as before"
    assert after["summaries"] == before["summaries"] and after["last_sequence"] == before["last_sequence"]
    replay = after["replay"]
    assert "refused" in replay, f"a rollback to rivers' first set was accepted: {replay}"
    assert replay["status"] == 409 and "rollback" in replay["error"], replay
    assert after["routing_after_replay"] == before["routing"], "a refused rollback must change nothing"


def test_a_restart_with_another_embedder_refuses_the_old_index(tmp_path: Path, embedder) -> None:  # noqa: ANN001
    """The durable index holds vectors, not texts: reopening it under another model of the same
    dimension would route against the old model's vectors. The gateway refuses, naming both."""
    from hansa.adapters.embedder.onnx import OnnxEmbedder
    from hansa.adapters.vector.milvus import MilvusVectorStore
    from hansa.core.config import Config
    from hansa.core.errors import ConfigError
    from hansa.gateway.trust.registry import SiteRegistry
    from hansa.gateway.service import Gateway

    cfg = Config(home=tmp_path)
    with MilvusVectorStore(str(tmp_path / "milvus.db")) as store:
        Gateway.open(cfg, embedder=embedder, vector_store=store, registry=SiteRegistry(tmp_path / "r.json")).close()
        other = OnnxEmbedder("all-MiniLM-L6-v2-q")  # same model id and dimension, another graph
        with pytest.raises(ConfigError) as err:
            Gateway.open(cfg, embedder=other, vector_store=store, registry=SiteRegistry(tmp_path / "r.json"))
        assert other.model_sha256[:12] in str(err.value) and embedder.model_sha256[:12] in str(err.value)
        Gateway.open(cfg, embedder=embedder, vector_store=store, registry=SiteRegistry(tmp_path / "r.json")).close()


def test_a_staged_embedder_takes_over_at_restart_with_no_empty_index(tmp_path: Path, embedder) -> None:  # noqa: ANN001
    """`[gateway] next_embedder`: publications made with the next embedder are verified and kept
    aside while routing uses the current one; a restart on the next embedder routes the staged sets
    at once (no window where the index is empty) and drops the old space's rows."""
    from hansa.adapters.embedder.onnx import OnnxEmbedder
    from hansa.adapters.vector.milvus import MilvusVectorStore
    from hansa.core.config import GatewayConfig
    from hansa.core.errors import InputError
    from hansa.gateway.index.durable import COLLECTION
    from hansa.gateway.trust import admin
    from hansa.gateway.trust.registry import SiteRegistry
    from hansa.gateway.service import STAGED_DIR, Gateway

    nxt = OnnxEmbedder("all-MiniLM-L6-v2-q")
    me = SiteIdentity.generate()
    registry = SiteRegistry(tmp_path / "gateway" / "registry.json")
    admin.enroll(registry, "rivers", "http://127.0.0.1:9/none", [me.public_key_b64])

    def envelope(model, sequence: int) -> dict[str, Any]:  # noqa: ANN001
        recs = [SummaryRecord(f"c{i}", sequence, encode_vector(v), Richness(4, 2, 1), level=0)
                for i, v in enumerate(model.embed(TOPICS["rivers"]))]
        return build_publication(me, "rivers", sequence, EmbeddingSpace.of(model), recs, timedelta(hours=1))

    question = "Where does the Rhone flow?"
    with MilvusVectorStore(str(tmp_path / "milvus.db")) as store:
        gw = Gateway.open(GatewayConfig(next_embedder="all-MiniLM-L6-v2-q"), embedder=embedder, vector_store=store,
                          registry=registry)
        gw.publish("rivers", envelope(embedder, 1))
        assert gw.publish("rivers", envelope(nxt, 2))["accepted"] == 2  # the re-embedded site's set: staged
        assert gw.index.current("rivers").sequence == 1 and gw.staged.current("rivers").sequence == 2
        assert {h.site_id for h in gw.index.search(embedder.embed_query(question), 4)} == {"rivers"}  # still routed
        with pytest.raises(InputError):  # a third space is refused as before
            gw.publish("rivers", envelope(OnnxEmbedder("bge-small-en-v1.5-q"), 3))
        assert gw.close()
        gw = Gateway.open(GatewayConfig(), embedder=nxt, vector_store=store, registry=registry)
        assert gw.index.current("rivers").sequence == 2 and gw.staged is None
        assert {h.site_id for h in gw.index.search(nxt.embed_query(question), 4)} == {"rivers"}
        assert gw.close()
        assert not (tmp_path / "gateway" / STAGED_DIR).exists()
        assert store.count(COLLECTION) == 2  # the old space's rows were dropped with its heads
