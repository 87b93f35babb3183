"""Heads mirrored into Milvus (gateway/index/head_mirror.py) and a follower index that loads them: the
primary and the follower share one real Milvus Lite store here (in one process); across processes
and a Milvus server, tests/gateway/index/test_gateway_replicas.py."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import GatewayConfig
from hansa.core.errors import ConfigError
from hansa.gateway.index.durable import COLLECTION as SUMMARIES
from hansa.gateway.index.durable import StoredHead
from hansa.gateway.index.head_mirror import COLLECTION as HEADS
from hansa.gateway.index.head_mirror import PART_CHARS, HeadMirror
from hansa.gateway.index.summaries import SummaryIndex
from hansa.gateway.trust.registry import SiteRegistry
from hansa.gateway.service import Gateway
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import build_publication, open_publication
from hansa.sync.terms import TermSketch
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

SPACE = EmbeddingSpace("test-model", 8)
SHA = "ab" * 32


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[MilvusVectorStore]:
    with MilvusVectorStore(str(tmp_path / "milvus.db")) as s:
        yield s


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=SPACE.dim).astype(np.float32)
    return v / np.linalg.norm(v)


class Site:
    def __init__(self, site_id: str) -> None:
        self.site_id, self.identity = site_id, SiteIdentity.generate()

    def publish(self, index: SummaryIndex, sequence: int, seeds: list[int]) -> None:
        records = [SummaryRecord(f"c{s}", 1, encode_vector(unit(s)), Richness(3, 2, 1), level=0) for s in seeds]
        envelope = build_publication(self.identity, self.site_id, sequence, SPACE, records, timedelta(hours=1))
        pub = open_publication(envelope, self.site_id, [self.identity.public_key], SPACE)
        index.commit(index.plan(pub, None))
        assert index.flush(30)


def test_a_head_larger_than_one_field_reads_back_whole(store: MilvusVectorStore) -> None:
    mirror = HeadMirror(store)
    rows = {f"c{i}": (1, SHA, 0, i) for i in range(2000)}  # ~80 kB of JSON: several parts
    terms = TermSketch(40, 2, np.arange(0, 30_000, 3, dtype=np.uint32), np.full(10_000, 2, dtype=np.uint16))
    head = StoredHead("acme", 7, "2030-01-01T00:00:00Z", SHA, SHA, rows, orphans=("x/y",), terms=terms)
    mirror.write(head)
    pointer = mirror.pointers()["acme"]
    assert pointer.sequence == 7 and pointer.parts > 1 and pointer.parts * PART_CHARS > 80_000
    back = mirror.read(pointer)
    assert back is not None and back.rows == rows and back.orphans == ()  # a follower never deletes
    assert back.terms is not None and np.array_equal(back.terms.keys, terms.keys)
    # the next head replaces the parts: nothing of the old one is left
    mirror.write(StoredHead("acme", 8, "2030-01-01T00:00:00Z", SHA, SHA, {"c1": (1, SHA, 0, 1)}))
    assert len(store.fields(HEADS, ["kind"])) == 2  # one pointer, one part
    assert mirror.read(pointer) is None  # the old pointer names parts that are gone: not half a head


def test_a_part_that_does_not_match_its_pointer_is_not_read(store: MilvusVectorStore) -> None:
    mirror = HeadMirror(store)
    mirror.write(StoredHead("acme", 1, "2030-01-01T00:00:00Z", SHA, SHA, {"c1": (1, SHA, 0, 1)}))
    pointer = mirror.pointers()["acme"]
    [part_id] = pointer.part_ids()
    store.upsert(HEADS, [part_id], np.array([[1.0, 0.0]], np.float32),
                 [{"site_id": "acme", "kind": "part", "sequence": 1, "sha256": pointer.sha256, "parts": 1,
                   "part": {"text": '{"tampered": true}'}}])
    assert mirror.read(pointer) is None


def test_a_follower_takes_newer_sets_only_and_drops_what_the_primary_purged(store: MilvusVectorStore,
                                                                           tmp_path: Path) -> None:
    primary = SummaryIndex(store, SPACE, tmp_path / "heads", mirror=HeadMirror(store))
    follower = SummaryIndex(store, SPACE, mirror=HeadMirror(store), follower=True)
    acme, beta = Site("acme"), Site("beta")
    acme.publish(primary, 1, [1, 2])
    beta.publish(primary, 1, [3])
    assert sorted(follower.follow()) == ["acme", "beta"]
    assert follower.sites() == {"acme": 2, "beta": 1}
    assert follower.search(unit(3), 1)[0].site_id == "beta"
    assert follower.follow() == []  # nothing newer: one pointer query, nothing loaded
    acme.publish(primary, 2, [4])
    assert follower.follow(keep=lambda site: site != "acme") == []  # revoked here: not taken
    assert follower.follow() == ["acme"] and follower.sites()["acme"] == 1
    assert follower.search(unit(4), 1)[0].summary_id == "c4"
    primary.remove_site("beta")  # revoked at the primary: purged there, mirror first
    assert primary.flush(30)
    follower.follow()
    assert follower.sites() == {"acme": 1}
    rows = store.count(SUMMARIES)
    follower.close()
    assert store.count(SUMMARIES) == rows  # a follower writes nothing
    primary.close()


def test_a_starting_primary_mirrors_its_head_files_again(store: MilvusVectorStore, tmp_path: Path) -> None:
    """A crash between a head file's switch and its mirror leaves the mirror behind: the primary's
    next start rewrites it from the files (and drops a site it no longer holds)."""
    primary = SummaryIndex(store, SPACE, tmp_path / "heads", mirror=HeadMirror(store))
    Site("acme").publish(primary, 1, [1])
    primary.close()
    mirror = HeadMirror(store)
    mirror.remove("acme")
    mirror.write(StoredHead("ghost", 1, "2030-01-01T00:00:00Z", SHA, SHA, {}))
    restarted = SummaryIndex(store, SPACE, tmp_path / "heads", mirror=HeadMirror(store))
    restarted.restore(lambda site: True)
    assert sorted(mirror.pointers()) == ["acme"]
    follower = SummaryIndex(store, SPACE, mirror=mirror, follower=True)
    assert follower.restore(lambda site: True)["loaded"] == ["acme"]
    restarted.close()


def test_a_follower_needs_a_milvus_server_and_says_so(store: MilvusVectorStore, tmp_path: Path, embedder: Any) -> None:
    registry = SiteRegistry(tmp_path / "gateway" / "registry.json")
    with pytest.raises(ConfigError, match="Milvus server"):
        Gateway.open(GatewayConfig(role="follower"), embedder=embedder, vector_store=store, registry=registry)
