"""Incremental publications at the gateway, with real parts: the Flask app, Milvus Lite as the
durable store, the real embedder, a real registry and signed publications from hansa.sync.

Each step checks what routing then sees (the summary index searched with real question vectors);
each refusal checks the error and that the index, the held set and the floor did not change."""
from __future__ import annotations

import base64
import json
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import GatewayConfig
from hansa.gateway.index.ann import AnnIndex
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.service import Gateway as GatewayService
from hansa.gateway.index.durable import COLLECTION, row_key
from hansa.gateway.index.summaries import SummaryIndex
from hansa.gateway.trust.registry import SiteRegistry
from hansa.sync.dsse import sign_envelope
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import (
    PUBLICATION_TYPE_V2,
    PublicationHead,
    build_publication,
    open_publication,
    summary_sha256,
)
from hansa.gateway.trust import admin
from hansa.gateway.query.route import SummaryRouter, site_term_scores
from hansa.sync.terms import TermSketch
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord, canonical_json

TTL = timedelta(hours=1)
TOPICS = {
    "rivers": "Rivers of France: the Rhone and the Saone meet at Lyon and flow south to the Mediterranean.",
    "kitchen": "Lyonnais bouchons serve sausages, quenelles and local wine.",
    "pastry": "French pastry: croissants, butter, laminated dough and baking temperatures.",
    "castles": "Medieval castles were defended by moats and curtain walls.",
    "quantum": "Quantum computers manipulate qubits with microwave pulses.",
}
QUESTIONS = {
    "rivers": "Which river flows through Lyon to the Mediterranean?",
    "kitchen": "Where can I eat quenelles and sausages?",
    "pastry": "How is croissant dough laminated with butter?",
    "castles": "How did moats protect a medieval castle?",
}


@pytest.fixture(scope="module")
def vectors(embedder) -> dict[str, np.ndarray]:
    names = list(TOPICS)
    return dict(zip(names, embedder.embed([TOPICS[n] for n in names])))


@pytest.fixture(scope="module")
def questions(embedder) -> dict[str, np.ndarray]:
    names = list(QUESTIONS)
    return dict(zip(names, embedder.embed([QUESTIONS[n] for n in names])))


class Gateway:
    """A gateway app on a home directory, restartable on the same home and Milvus Lite store."""

    def __init__(self, root: Path, embedder: Any) -> None:
        self.root, self.embedder = root, embedder
        self.store = MilvusVectorStore(str(root / "x.db"))
        self.registry = SiteRegistry(root / "gateway" / "registry.json")
        self.space = EmbeddingSpace.of(embedder)
        self.start()

    def start(self) -> None:
        cfg = GatewayConfig(top_m_summaries=16, max_request_bytes=1024 * 1024, publish_burst=1000)
        self.service = GatewayService.open(cfg, embedder=self.embedder, vector_store=self.store,
                                           registry=SiteRegistry(self.registry.path))
        self.app = create_gateway_app(self.service)
        self.client = self.app.test_client()
        self.index: SummaryIndex = self.service.index

    def restart(self) -> None:
        assert self.service.close()  # the durable copy is up to date, as after a clean shutdown
        self.start()

    def post(self, site: str, body: Any) -> Any:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.client.post(f"/v1/sites/{site}/publications", data=data, content_type="application/json")

    def close(self) -> None:
        self.service.close()
        self.store.close()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[Gateway]:
    g = Gateway(tmp_path_factory.mktemp("publications"), embedder)
    yield g
    g.close()


class Site:
    """A publishing site: its identity, its records, and the head the gateway last accepted."""

    def __init__(self, gw: Gateway, site_id: str) -> None:
        self.site_id, self.gw = site_id, gw
        self.identity = SiteIdentity.generate()
        admin.enroll(gw.registry, site_id, "http://127.0.0.1:9/none", [self.identity.public_key_b64])
        self.head: PublicationHead | None = None

    def envelope(self, sequence: int, records: Any, base: PublicationHead | None = None,
                 now: datetime | None = None, ttl: timedelta = TTL, terms: TermSketch | None = None) -> dict[str, Any]:
        return build_publication(self.identity, self.site_id, sequence, self.gw.space, records, ttl, now=now, base=base,
                                 terms=terms)

    def publish(self, sequence: int, records: Any, delta: bool = True, terms: TermSketch | None = None) -> Any:
        resp = self.gw.post(self.site_id, self.envelope(sequence, records, self.head if delta else None, terms=terms))
        if resp.status_code == 200:
            self.head = PublicationHead(sequence, {r.summary_id: (r.version, summary_sha256(r)) for r in records})
        return resp

    def sign(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Sign a payload as this site (bypassing build_publication's own checks)."""
        return sign_envelope(PUBLICATION_TYPE_V2, canonical_json(payload), self.identity)


def rec(vectors: dict[str, np.ndarray], sid: str, topic: str, version: int = 1, entities: int = 5) -> SummaryRecord:
    return SummaryRecord(sid, version, encode_vector(vectors[topic]), Richness(entities, 3, 2), level=0)


def payload_of(envelope: dict[str, Any]) -> dict[str, Any]:
    return json.loads(base64.b64decode(envelope["payload"]))


def best(gw: Gateway, question: np.ndarray, site: str) -> list[str]:
    """The site's summaries among the question's top hits, best first: what routing scores on."""
    return [h.summary_id for h in gw.index.search(question, 256) if h.site_id == site]


def state(gw: Gateway, site: str) -> tuple[Any, ...]:
    """Everything a refusal must leave alone: the index, the site's held set and its floor."""
    held = gw.index.current(site)
    rows = None if held is None else sorted((sid, r[1], r[2]) for sid, r in held.rows.items())
    return gw.index.count(), rows, None if held is None else held.sequence, gw.registry.last_sequence(site)


# -- the incremental round trip -------------------------------------------------------------------

def test_add_change_and_withdraw_by_delta(gw: Gateway, vectors, questions) -> None:
    site = Site(gw, "inc-a")
    v1 = [rec(vectors, "c0", "rivers"), rec(vectors, "c1", "kitchen")]
    resp = site.publish(1, v1)
    assert resp.status_code == 200, resp.get_json()
    assert resp.get_json() | {"expires": None} == {"site_id": "inc-a", "sequence": 1, "accepted": 2, "expires": None,
                                                   "changed": 2, "withdrawn": 0, "replay": False}
    assert best(gw, questions["rivers"], "inc-a")[0] == "c0"
    assert best(gw, questions["kitchen"], "inc-a")[0] == "c1"
    assert "c2" not in best(gw, questions["castles"], "inc-a")

    # change c1 (kitchen -> pastry) and add c2 (castles): only those two travel
    v2 = [v1[0], rec(vectors, "c1", "pastry", version=2), rec(vectors, "c2", "castles")]
    envelope = site.envelope(2, v2, site.head)
    sent = payload_of(envelope)
    assert sent["summaries"]["ids"] == ["c1", "c2"] and sent["tombstones"] == [] and sent["base"]["sequence"] == 1
    resp = gw.post("inc-a", envelope)
    assert resp.status_code == 200, resp.get_json()
    assert (resp.get_json()["accepted"], resp.get_json()["changed"], resp.get_json()["withdrawn"]) == (3, 2, 0)
    site.head = PublicationHead(2, {r.summary_id: (r.version, summary_sha256(r)) for r in v2})
    assert best(gw, questions["pastry"], "inc-a")[0] == "c1"
    assert best(gw, questions["castles"], "inc-a")[0] == "c2"
    assert best(gw, questions["rivers"], "inc-a")[0] == "c0"  # carried over untouched
    assert {sid: r[1] for sid, r in gw.index.current("inc-a").rows.items()} == {"c0": 1, "c1": 2, "c2": 1}

    # withdraw c0 by tombstone: the river question no longer finds this site's river summary
    v3 = v2[1:]
    envelope = site.envelope(3, v3, site.head)
    assert payload_of(envelope)["summaries"]["ids"] == [] and payload_of(envelope)["tombstones"] == ["c0"]
    resp = gw.post("inc-a", envelope)
    assert resp.status_code == 200 and resp.get_json()["withdrawn"] == 1 and resp.get_json()["accepted"] == 2
    assert "c0" not in best(gw, questions["rivers"], "inc-a")
    assert gw.index.sites(["inc-a"]) == {"inc-a": 2}
    assert gw.registry.get("inc-a").summary_count == 2 and gw.registry.last_sequence("inc-a") == 3

    # the durable copy follows: exactly the current rows, old versions and withdrawn rows gone
    assert gw.index.flush(30)
    current = [row_key("inc-a", sid, r[1], r[2]) for sid, r in gw.index.current("inc-a").rows.items()]
    assert sorted(gw.store.get(COLLECTION, current)) == sorted(current)
    old = [row_key("inc-a", r.summary_id, r.version, summary_sha256(r)) for r in v1]
    assert gw.store.get(COLLECTION, old) == {}


def test_an_exact_resend_is_accepted_once_and_changes_nothing(gw: Gateway, vectors) -> None:
    site = Site(gw, "inc-resend")
    envelope = site.envelope(1, [rec(vectors, "c0", "rivers")])
    assert gw.post("inc-resend", envelope).status_code == 200
    before = state(gw, "inc-resend")
    again = gw.post("inc-resend", envelope)  # e.g. the site never got the first answer
    assert again.status_code == 200 and again.get_json()["replay"] is True and again.get_json()["changed"] == 0
    assert state(gw, "inc-resend") == before


# -- refusals -------------------------------------------------------------------------------------

def test_mix_and_match_is_refused(gw: Gateway, vectors, questions) -> None:
    site = Site(gw, "inc-mix")
    n1 = [rec(vectors, "c0", "rivers"), rec(vectors, "c1", "kitchen")]
    assert site.publish(1, n1).status_code == 200
    before = state(gw, "inc-mix")
    n2 = [n1[0], rec(vectors, "c1", "pastry", version=2)]
    good = payload_of(site.envelope(2, n2, site.head))

    # publication 1's c1 (kitchen, version 1) replayed into publication 2, whose manifest says v2
    mixed = json.loads(json.dumps(good))
    old_c1 = payload_of(site.envelope(1, n1))["summaries"]
    for column in ("ids", "versions", "levels", "entities", "chunks", "documents", "texts"):
        mixed["summaries"][column] = [old_c1[column][1]]
    mixed["summaries"]["vectors"] = encode_vector(vectors["kitchen"])
    resp = gw.post("inc-mix", site.sign(mixed))
    assert resp.status_code == 400 and "version 1 but the manifest says 2" in resp.get_json()["error"]
    mixed["summaries"]["versions"] = [2]  # claim v2, but with v1's bytes
    resp = gw.post("inc-mix", site.sign(mixed))
    assert resp.status_code == 400 and "does not match its manifest sha256" in resp.get_json()["error"]
    assert state(gw, "inc-mix") == before

    # a delta that lists c1 v2 but sends no piece: the held c1 (v1) would be mixed into set 2
    carried = json.loads(json.dumps(good))
    carried["summaries"] = payload_of(site.envelope(2, [], None))["summaries"]
    resp = gw.post("inc-mix", site.sign(carried))
    assert resp.status_code == 400 and "no piece was sent" in resp.get_json()["error"]
    assert state(gw, "inc-mix") == before
    assert best(gw, questions["kitchen"], "inc-mix")[0] == "c1"  # still publication 1's c1


def test_a_piece_not_in_the_manifest_is_refused(gw: Gateway, vectors) -> None:
    site = Site(gw, "inc-extra")
    assert site.publish(1, [rec(vectors, "c0", "rivers")]).status_code == 200
    before = state(gw, "inc-extra")
    sneaky = payload_of(site.envelope(2, [rec(vectors, "c0", "rivers"), rec(vectors, "c9", "castles")], site.head))
    sneaky["manifest"].pop("c9")
    resp = gw.post("inc-extra", site.sign(sneaky))
    assert resp.status_code == 400 and "'c9' is not in the manifest" in resp.get_json()["error"]
    assert state(gw, "inc-extra") == before


def test_a_delta_on_a_set_the_gateway_does_not_hold_is_409_with_its_sequence(gw: Gateway, vectors) -> None:
    site = Site(gw, "inc-stale")
    s1 = [rec(vectors, "c0", "rivers")]
    assert site.publish(1, s1).status_code == 200
    held = gw.index.current("inc-stale")
    before = state(gw, "inc-stale")
    elsewhere = PublicationHead(1, {"cx": (1, "0" * 64)})  # the site believes in another set
    resp = gw.post("inc-stale", site.envelope(2, s1 + [rec(vectors, "c1", "castles")], elsewhere))
    body = resp.get_json()
    assert resp.status_code == 409 and "send the whole set" in body["error"]
    assert (body["current_sequence"], body["current_manifest_sha256"]) == (1, held.manifest_sha256)
    assert state(gw, "inc-stale") == before
    # what the site does next: its whole set, above the gateway's sequence
    assert site.publish(body["current_sequence"] + 2, s1 + [rec(vectors, "c1", "castles")], delta=False).status_code == 200
    assert gw.index.sites(["inc-stale"]) == {"inc-stale": 2}


def test_a_publication_valid_longer_than_the_gateway_allows_is_refused(gw: Gateway, vectors) -> None:
    site = Site(gw, "inc-century")
    assert gw.service.cfg.max_publication_lifetime_days == 30  # the default
    before = state(gw, "inc-century")
    resp = gw.post("inc-century", site.envelope(1, [rec(vectors, "c0", "rivers")], ttl=timedelta(days=36525)))
    body = resp.get_json()
    assert resp.status_code == 400 and body["kind"] == "InputError", body
    assert "valid for 36525 days" in body["error"] and "maximum of 30 days" in body["error"]
    assert "max_publication_lifetime_days" in body["error"] and "publication_ttl_hours" in body["error"]
    assert state(gw, "inc-century") == before and gw.registry.last_sequence("inc-century") is None
    # exactly the maximum is allowed, and the site publishes as usual
    resp = gw.post("inc-century", site.envelope(1, [rec(vectors, "c0", "rivers")], ttl=timedelta(days=30)))
    assert resp.status_code == 200, resp.get_json()


def test_versions_never_go_back(gw: Gateway, vectors) -> None:
    site = Site(gw, "inc-versions")
    assert site.publish(1, [rec(vectors, "c0", "rivers", version=3)]).status_code == 200
    before = state(gw, "inc-versions")
    for older in (rec(vectors, "c0", "rivers", version=2), rec(vectors, "c0", "castles", version=3)):
        resp = gw.post("inc-versions", site.envelope(2, [older]))  # even as a full set
        assert resp.status_code == 409, resp.get_json()
        assert "rollback" in resp.get_json()["error"] or "different bytes" in resp.get_json()["error"]
        assert state(gw, "inc-versions") == before


def test_a_failure_inside_the_swap_leaves_the_old_complete_set(gw: Gateway, vectors, questions,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    site = Site(gw, "inc-crash")
    s1 = [rec(vectors, "c0", "rivers"), rec(vectors, "c1", "kitchen")]
    assert site.publish(1, s1).status_code == 200
    held = gw.index.current("inc-crash")
    count = gw.index.count()

    def crash(*args: Any) -> None:
        raise RuntimeError("power cut inside the swap")

    # the new rows are already in FAISS when the old ones are being removed: then it fails
    monkeypatch.setattr(AnnIndex, "_remove", staticmethod(crash))
    s2 = [rec(vectors, "c0", "castles", version=2), rec(vectors, "c2", "pastry")]
    resp = gw.post("inc-crash", site.envelope(2, s2, site.head))
    monkeypatch.undo()
    assert resp.status_code == 500
    assert gw.index.current("inc-crash") is held and gw.index.count() == count  # old set, complete
    assert best(gw, questions["rivers"], "inc-crash")[0] == "c0" and best(gw, questions["kitchen"], "inc-crash")[0] == "c1"
    assert "c2" not in best(gw, questions["pastry"], "inc-crash")
    # the floor was recorded before the swap: the same publication again is refused with the
    # gateway's sequence and the manifest it still holds, so the site resends its whole set
    resp = gw.post("inc-crash", site.envelope(2, s2, site.head))
    assert resp.status_code == 409
    assert (resp.get_json()["current_sequence"], resp.get_json()["current_manifest_sha256"]) == (2, held.manifest_sha256)
    assert site.publish(3, s2, delta=False).status_code == 200
    assert best(gw, questions["castles"], "inc-crash")[0] == "c0"


def test_rollback_and_same_sequence_other_bytes_are_refused_also_after_a_restart(gw: Gateway, vectors, questions) -> None:
    site = Site(gw, "inc-floor")
    first = site.envelope(1, [rec(vectors, "c0", "rivers")])
    assert gw.post("inc-floor", first).status_code == 200
    site.head = PublicationHead(1, {"c0": (1, summary_sha256(rec(vectors, "c0", "rivers")))})
    second = site.envelope(2, [rec(vectors, "c0", "rivers"), rec(vectors, "c1", "castles")], site.head)
    assert gw.post("inc-floor", second).status_code == 200
    other_second = site.envelope(2, [rec(vectors, "c0", "rivers"), rec(vectors, "c1", "pastry")], site.head)

    for restarted in (False, True):
        if restarted:
            gw.restart()
            assert gw.index.current("inc-floor").sequence == 2  # rebuilt from Milvus + its head
            assert best(gw, questions["castles"], "inc-floor")[0] == "c1"
        before = state(gw, "inc-floor")
        resp = gw.post("inc-floor", first)
        assert resp.status_code == 409 and "rollback" in resp.get_json()["error"]
        assert resp.get_json()["current_sequence"] == 2
        resp = gw.post("inc-floor", other_second)
        assert resp.status_code == 409 and "different bytes" in resp.get_json()["error"]
        assert state(gw, "inc-floor") == before
        again = gw.post("inc-floor", second)
        assert again.status_code == 200 and again.get_json()["replay"] is True
        assert state(gw, "inc-floor") == before


def test_an_expired_site_drops_out_of_routing_and_is_reported(gw: Gateway, vectors, questions) -> None:
    site = Site(gw, "inc-expiring")
    ttl = timedelta(seconds=3)
    own = SummaryRecord("c0", 1, encode_vector(questions["rivers"]), Richness(5, 3, 2))  # the nearest of all
    resp = gw.post("inc-expiring", site.envelope(1, [own], ttl=ttl))
    assert resp.status_code == 200
    router = SummaryRouter(gw.service.cfg.site_margin, gw.service.cfg.lexical_weight)

    def ranked() -> Any:  # what routing sees, calling no site (the enrolled URLs lead nowhere)
        return gw.service.engine.rank(QUESTIONS["rivers"], router)

    assert "inc-expiring" in {s.site_id for s in ranked().considered}
    time.sleep(ttl.total_seconds() + 0.5)
    routing = ranked()
    assert "inc-expiring" not in {s.site_id for s in routing.considered}
    assert {"site_id": "inc-expiring", "reason": "publication expired"} in routing.excluded
    view = {s["site_id"]: s for s in gw.client.get("/v1/sites").get_json()["sites"]}
    assert view["inc-expiring"]["expired"] is True and view["inc-expiring"]["routable"] is False
    assert gw.index.sites(["inc-expiring"]) == {"inc-expiring": 1}  # kept: a fresh publication revives it


def test_a_crash_while_persisting_restarts_on_the_old_set(gw: Gateway, vectors, questions,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The durable switch is one head-file replace: a crash before it restarts on the old set,
    and the rows written for the new one are deleted at start (they were announced as orphans)."""
    from hansa.gateway.index.durable import DurableStore

    site = Site(gw, "inc-persist")
    s1 = [rec(vectors, "c0", "rivers")]
    assert site.publish(1, s1).status_code == 200
    assert gw.index.flush(30)
    real_write = DurableStore.write_head
    calls: list[int] = []

    def crash_at_switch(self: DurableStore, head: Any) -> None:
        calls.append(head.sequence)
        if head.sequence == 2:
            raise OSError("disk full at the switch")
        real_write(self, head)

    monkeypatch.setattr(DurableStore, "write_head", crash_at_switch)
    s2 = [rec(vectors, "c0", "castles", version=2)]
    assert site.publish(2, s2).status_code == 200
    assert not gw.index.flush(3)  # the write keeps failing (and is retried)
    new_key = row_key("inc-persist", "c0", 2, summary_sha256(s2[0]))
    assert list(gw.store.get(COLLECTION, [new_key])) == [new_key]  # written, but not switched to
    gw.index.close(flush=False)  # the process dies: nothing more is written
    monkeypatch.undo()
    gw.start()
    assert gw.index.current("inc-persist").sequence == 1
    assert best(gw, questions["rivers"], "inc-persist")[0] == "c0"
    assert gw.store.get(COLLECTION, [new_key]) == {}  # the orphan is gone
    # the registry's floor is 2, the held set 1: the site's next delta is refused, its full set taken
    resp = gw.post("inc-persist", site.envelope(3, s2, site.head))
    assert resp.status_code == 409 and resp.get_json()["current_sequence"] == 2
    site.head = None
    assert site.publish(4, s2, delta=False).status_code == 200


# -- atomicity under concurrent searches ----------------------------------------------------------

@pytest.mark.parametrize("ann", ["flat", "ivf"])
def test_searches_see_the_old_set_or_the_new_one_never_a_mix(ann: str, embedder) -> None:
    dim = embedder.dim
    rng = np.random.default_rng(3)
    space = EmbeddingSpace.of(embedder)
    index = SummaryIndex(None, space, ann=AnnIndex(dim, ivf_threshold=64 if ann == "ivf" else 10**6, background=True))
    me = SiteIdentity.generate()
    centre = rng.standard_normal(dim).astype(np.float32)
    noise = [centre + 0.3 * rng.standard_normal(dim).astype(np.float32) for _ in range(24)]
    filler = [rng.standard_normal(dim).astype(np.float32) for _ in range(100)]
    sets = {
        name: [SummaryRecord(f"{name}{i}", 1, encode_vector(v), Richness(1, 1, 1)) for i, v in enumerate(vs)]
        for name, vs in (("a", noise[:12]), ("b", noise[12:]))
    }
    other = [SummaryRecord(f"f{i}", 1, encode_vector(v), Richness(1, 1, 1)) for i, v in enumerate(filler)]
    filler_id = SiteIdentity.generate()
    fpub = open_publication(build_publication(filler_id, "filler", 1, space, other, TTL), "filler",
                            [filler_id.public_key], space)
    index.commit(index.plan(fpub, None))
    seen: list[set[str]] = []
    stop = threading.Event()

    def search() -> None:
        while not stop.is_set():
            hits = index.search(centre, 40)
            seen.append({h.summary_id[0] for h in hits if h.site_id == "flip"})

    reader = threading.Thread(target=search)
    reader.start()
    try:
        floor = None
        for sequence in range(1, 41):
            name = "a" if sequence % 2 else "b"
            pub = open_publication(build_publication(me, "flip", sequence, space, sets[name], TTL), "flip",
                                   [me.public_key], space)
            index.commit(index.plan(pub, floor))
            floor = sequence
    finally:
        stop.set()
        reader.join()
    index.ann.join(30)
    assert len(seen) > 10
    assert all(s <= {"a"} or s <= {"b"} for s in seen), [s for s in seen if len(s) > 1][:3]
    assert {h.summary_id[0] for h in index.search(centre, 40) if h.site_id == "flip"} == {"b"}
    if ann == "ivf":
        assert index.ann.kind == "ivf" and len(index.ann) == 112


def _sketch(*texts: str) -> TermSketch:
    return TermSketch.from_documents([(f"d{i}", t) for i, t in enumerate(texts)], 1)


def test_term_statistics_are_held_with_the_set_they_came_with_and_survive_a_restart(gw: Gateway, vectors) -> None:
    lyon, paris = Site(gw, "terms-lyon"), Site(gw, "terms-paris")
    assert lyon.publish(1, [rec(vectors, "a", "rivers")], terms=_sketch("quenelles of Lyon", "Lyon bouchons")).status_code == 200
    assert paris.publish(1, [rec(vectors, "b", "pastry")], terms=_sketch("croissants in Paris")).status_code == 200
    sites = {"terms-lyon", "terms-paris"}
    scores = site_term_scores("Where are quenelles served in Lyon?", gw.index, sites)
    assert scores["terms-lyon"] > scores["terms-paris"] == 0.0
    # a delta carries the whole new sketch; the set it describes and the sketch switch together
    assert lyon.publish(2, [rec(vectors, "a", "rivers")], terms=_sketch("croissants", "croissants again")).status_code == 200
    assert gw.index.current("terms-lyon").terms.documents == 2
    scores = site_term_scores("Where are quenelles served in Lyon?", gw.index, sites)
    assert set(scores.values()) == {0.0}
    gw.restart()
    held = gw.index.term_sketches(sites)
    assert held["terms-lyon"].documents == 2 and held["terms-paris"].documents == 1
    assert held["terms-paris"].keys.tolist() == _sketch("croissants in Paris").keys.tolist()
    # a publication without term statistics leaves the site routed by its summaries alone
    assert paris.publish(2, [rec(vectors, "b", "pastry")]).status_code == 200
    assert set(gw.index.term_sketches(sites)) == {"terms-lyon"}
    gw.restart()
    assert set(gw.index.term_sketches(sites)) == {"terms-lyon"}


def test_malformed_term_statistics_are_refused_and_change_nothing(gw: Gateway, vectors) -> None:
    site = Site(gw, "terms-bad")
    assert site.publish(1, [rec(vectors, "a", "castles")], terms=_sketch("moats", "walls")).status_code == 200
    payload = payload_of(site.envelope(2, [rec(vectors, "a", "castles")], terms=_sketch("moats")))
    payload["terms"]["count"] += 1
    resp = gw.post(site.site_id, site.sign(payload))
    assert resp.status_code == 400 and "terms" in resp.get_json()["error"]
    held = gw.index.current(site.site_id)
    assert held.sequence == 1 and held.terms.documents == 2


def test_a_head_purged_while_a_gateway_lists_them_is_skipped_and_a_damaged_one_set_aside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under load, a gateway opening (a restart, another worker) listed a revoked site's head that
    the revocation then deleted; reading it failed and setting it aside as damaged failed too, so
    the gateway could not open. A vanished head is no set; a damaged one is renamed and reported."""
    from hansa.gateway.index.durable import DurableStore

    with MilvusVectorStore(str(tmp_path / "milvus.db")) as store:
        durable = DurableStore(store, 4, tmp_path / "heads")
        gone, damaged = tmp_path / "heads" / "revoked.json", tmp_path / "heads" / "broken.json"
        gone.write_text("{}")
        damaged.write_text("not json")
        read_bytes = Path.read_bytes

        def racing_purge(self: Path) -> bytes:
            if self == gone:  # the revocation deletes the file after the listing saw it
                self.unlink()
            return read_bytes(self)

        monkeypatch.setattr(Path, "read_bytes", racing_purge)
        assert durable.heads() == []
        assert not gone.exists() and not (tmp_path / "heads" / "revoked.json.damaged").exists()
        assert (tmp_path / "heads" / "broken.json.damaged").exists() and not damaged.exists()
