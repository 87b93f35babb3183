"""Contract tests of tests/fakes.py: each fake keeps the promises of the port it plays, so the fast
tier's tests that use them test hansa, not the fake. (The in-memory vector store runs the Milvus
store's own contract: tests/adapters/vector/test_milvus.py, its `memory` variants.)"""
from __future__ import annotations

import time

import numpy as np
import pytest

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.vector.base import CollectionSpec
from hansa.core.errors import InputError
from hansa.gateway.client import ERROR, INVALID, OK, TIMEOUT, SiteCall, SiteTarget
from hansa.sync.keys import SiteIdentity
from hansa.sync.wire import Citation, EmbeddingSpace, PartialAnswer, RetrieveRequest
from tests.fakes import STRANGER, UNSIGNED, HashEmbedder, InMemoryVectorStore, Reply, ScriptedSiteTransport, hang


# -- HashEmbedder: the Embedder port ------------------------------------------------------------------
def test_hash_embedder_rows_are_unit_float32_of_its_dim_and_deterministic() -> None:
    emb = HashEmbedder()
    texts = ["The Rhone flows to Lyon.", "", "!!!", "quenelles"]
    vectors = emb.embed(texts)
    assert isinstance(emb, Embedder) and emb.dim == 64 and emb.model_id == "test/hash-embedder"
    assert vectors.dtype == np.float32 and vectors.shape == (4, 64) and vectors.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(vectors, HashEmbedder().embed(texts))  # another instance, same space
    np.testing.assert_array_equal(emb.embed_queries(texts), vectors)  # symmetric, as the port's default
    np.testing.assert_array_equal(emb.embed_one("quenelles"), vectors[3])
    assert emb.embed([]).shape == (0, 64)
    assert EmbeddingSpace.of(emb) == EmbeddingSpace("test/hash-embedder", 64, model_sha256="")


def test_hash_embedder_puts_texts_sharing_words_nearer_than_unrelated_ones() -> None:
    emb = HashEmbedder()
    q, near, far = emb.embed(["Which river flows through Lyon?", "The river Rhone flows through Lyon.",
                              "Croissant dough is laminated with butter."])
    assert float(q @ near) > 0.5 > float(q @ far)


def test_hash_embedder_refuses_what_every_embedder_refuses() -> None:
    emb = HashEmbedder()
    with pytest.raises(InputError, match="not one string"):
        emb.embed("a bare string")
    with pytest.raises(InputError, match="text #1"):
        emb.embed(["ok", 3])  # type: ignore[list-item]


# -- ScriptedSiteTransport: the SiteTransport port ----------------------------------------------------
GATEWAY = SiteIdentity.generate()
KEYS = {s: SiteIdentity.generate() for s in ("a", "b", "c")}


# -- InMemoryVectorStore: what Milvus cannot check ------------------------------------------------------
def test_the_in_memory_store_refuses_an_insert_of_a_stored_id_and_writes_nothing() -> None:
    """`insert` is the caller's promise that no id is stored (a Milvus server would keep both
    rows); the fake checks it, so fast-tier callers that break it fail."""
    store = InMemoryVectorStore()
    store.ensure_collection(CollectionSpec("chunks", dim=2))
    store.insert("chunks", ["a"], np.array([[1.0, 0.0]], dtype=np.float32), flush=False)
    with pytest.raises(InputError, match="'a'"):
        store.insert("chunks", ["b", "a"], np.array([[0.0, 1.0], [0.0, 1.0]], dtype=np.float32))
    assert store.count("chunks") == 1 and store.get("chunks", ["b"]) == {}
    store.upsert("chunks", ["a"], np.array([[0.0, 1.0]], dtype=np.float32))
    np.testing.assert_allclose(store.get("chunks", ["a"])["a"], [0.0, 1.0])


def target(site_id: str) -> SiteTarget:
    return SiteTarget(site_id, f"https://{site_id}.example", [KEYS[site_id].public_key_b64])


def answer(site_id: str, text: str = "an answer", cites: str | None = None) -> PartialAnswer:
    return PartialAnswer(site_id, text, (Citation(cites or site_id, f"{site_id}-doc", "Doc", 0.9),), 0.8,
                         ((text, f"{site_id}-doc"),))


REQUEST = RetrieveRequest("Which river flows through Lyon?", top_k=3)


def test_one_call_per_target_in_order_and_ok_only_when_signed_by_the_registry_key() -> None:
    transport = ScriptedSiteTransport(GATEWAY, KEYS, {
        "a": Reply(answer("a")),
        "b": Reply(answer("b"), signed_by=UNSIGNED),
        "c": Reply(answer("c"), signed_by=STRANGER),
    })
    calls = transport.call([target("c"), target("a"), target("b")], REQUEST, 5.0)
    assert [c.site_id for c in calls] == ["c", "a", "b"]
    assert [c.status for c in calls] == [INVALID, OK, INVALID]
    assert calls[1].answer == answer("a") and calls[1].bytes_in > 0 and calls[1].bytes_out > 0
    assert all("signature refused" in (c.error or "") for c in (calls[0], calls[2]))
    assert transport.asked("a") == [REQUEST]


def test_invalid_bodies_foreign_citations_and_oversized_answers_are_invalid() -> None:
    transport = ScriptedSiteTransport(GATEWAY, KEYS, {
        "a": Reply(b'{"not": "an answer"}'),
        "b": Reply(answer("b", cites="a")),  # cites another site's document
        "c": Reply(answer("c", text="x" * 5000)),
    })
    a, b, c = transport.call([target("a"), target("b"), target("c")], REQUEST, 5.0, max_response_bytes=2000)
    assert (a.status, b.status, c.status) == (INVALID, INVALID, INVALID)
    assert "not a valid partial answer" in (a.error or "")
    assert "other site(s) ['a']" in (b.error or "")
    assert "larger than 2000 bytes" in (c.error or "")


def test_a_hanging_site_is_a_timeout_by_the_deadline_and_errors_never_raise() -> None:
    transport = ScriptedSiteTransport(GATEWAY, KEYS, {"a": hang(), "b": Reply(answer("b"), status=500)})
    t0 = time.monotonic()
    a, b, c = transport.call([target("a"), target("b"), target("c")], REQUEST, 0.3)
    assert time.monotonic() - t0 < 2.0
    assert (a.status, b.status, c.status) == (TIMEOUT, ERROR, ERROR)
    assert "HTTP 500" in (b.error or "") and "no scripted reply" in (c.error or "")


def test_per_target_requests_scripted_sequences_and_early_answers_reach_on_answer() -> None:
    seen: list[SiteCall] = []
    transport = ScriptedSiteTransport(GATEWAY, KEYS, {
        "a": [Reply(answer("a", "first")), Reply(lambda req: answer("a", f"asked {req.mode}"))],
        "b": Reply(answer("b"), delay_s=0.3),
    })
    first = transport.call([target("a"), target("b")], [REQUEST, RetrieveRequest("q", mode="global")], 5.0,
                           on_answer=seen.append)
    assert [c.status for c in first] == [OK, OK] and first[0].answer.answer == "first"
    assert [c.site_id for c in seen] == ["a"]  # the early answer, told while b was awaited; the last gets no hook
    assert transport.asked("b") == [RetrieveRequest("q", mode="global")]
    [again] = transport.call([target("a")], RetrieveRequest("q", mode="global"), 5.0)
    assert again.answer is not None and again.answer.answer == "asked global"
