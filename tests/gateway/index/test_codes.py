"""Summary vectors held as int8 codes (gateway/index/codes.py): what quantising costs in scores and
ranking, that the index scores against the codes, that a restart rebuilds the very same index from
the durable copy (real Milvus Lite), and how heads of the previous format are read.

The kill -9 drills of the migration from float32 rows: tests/gateway/test_crash_drills.py."""
from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from hansa.adapters.vector.base import CollectionSpec
from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.errors import InputError
from hansa.core.jsonsafe import dumps
from hansa.gateway.index.codes import directions, quantise
from hansa.gateway.index.durable import (
    COLLECTION,
    LEGACY_COLLECTION,
    DurableStore,
    HeadFile,
    StoredHead,
    read_head,
    row_key,
    stored_codes,
)
from hansa.gateway.index.head_mirror import HeadMirror
from hansa.gateway.index.summaries import SummaryIndex
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import build_publication, open_publication, summary_sha256
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

DIM = 384
SPACE = EmbeddingSpace("test-model", DIM)
SHA = "ab" * 32


def units(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# -- the quantiser (fast) ------------------------------------------------------------------------------


def test_codes_use_the_whole_int8_range_and_keep_each_direction() -> None:
    v = units(2000, 1)
    codes = quantise(v)
    assert codes.dtype == np.int8 and codes.shape == v.shape
    assert (np.abs(codes.astype(np.int16)).max(axis=1) == 127).all()  # a per-vector scale: every peak at 127
    assert np.array_equal(quantise(v * 4), codes)  # the length carries nothing (x4: exact in float)
    d = directions(codes)
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, rtol=1e-6)
    assert (d * v).sum(axis=1).min() >= 0.9999  # so |d - v| <= 0.0142 and a cosine moves by at most that


def test_int8_scores_agree_with_float32_ranking_on_random_unit_vectors() -> None:
    """Random 384-d vectors are near-orthogonal (scores within ±0.2, gaps of thousandths): a harder
    case for ranking than real summaries. Tolerance: every score within 0.005 of float32's
    (measured: 0.002), 95% of each top 10 shared (measured: 99%), and the best match the same
    whenever float32's lead over the second is more than twice the largest score error."""
    v, q = units(2000, 2), units(200, 3)
    exact, coded = q @ v.T, q @ directions(quantise(v)).T
    error = np.abs(exact - coded).max()
    assert error <= 0.005
    top_exact, top_coded = np.argsort(-exact, axis=1)[:, :10], np.argsort(-coded, axis=1)[:, :10]
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top_exact, top_coded)]) >= 0.95
    ordered = np.sort(exact, axis=1)[:, ::-1]
    clear = ordered[:, 0] - ordered[:, 1] > 2 * error
    assert clear.sum() >= 50 and (top_exact[clear, 0] == top_coded[clear, 0]).all()


@pytest.mark.parametrize("bad", [np.zeros((1, DIM)), np.full((1, DIM), np.nan), np.ones(DIM)])
def test_a_vector_without_a_direction_is_refused(bad: np.ndarray) -> None:
    with pytest.raises(InputError):
        quantise(bad)


def test_all_zero_codes_are_refused() -> None:
    with pytest.raises(InputError, match="all-zero"):
        directions(np.zeros((1, DIM), np.int8))


# -- heads of the previous format (fast) ---------------------------------------------------------------


def _head_json(fmt: object) -> dict[str, object]:
    head = HeadFile.of(StoredHead("acme", 3, "2030-01-01T00:00:00Z", SHA, SHA, {"c1": (1, SHA, 0, 2)})).to_json()
    return {**head, "format": fmt}


def test_a_format_1_head_is_read_as_one_whose_rows_are_float32_and_written_back_as_format_1() -> None:
    old = read_head(_head_json(1), "acme.json")
    assert old.legacy and old.rows == {"c1": (1, SHA, 0, 2)}
    assert HeadFile.of(old).to_json()["format"] == 1  # rewritten as what its rows are (e.g. removing orphans)
    assert not read_head(_head_json(2), "acme.json").legacy


@pytest.mark.parametrize("fmt", [0, 3, "2", True])
def test_a_head_of_an_unknown_format_is_refused_naming_the_field(fmt: object) -> None:
    with pytest.raises(InputError, match=r"acme\.json: 'format'"):
        read_head(_head_json(fmt), "acme.json")


# -- the index and its durable copy (Milvus Lite) ------------------------------------------------------


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[MilvusVectorStore]:
    with MilvusVectorStore(str(tmp_path / "milvus.db")) as s:
        yield s


def _publish(index: SummaryIndex, identity: SiteIdentity, site: str, vectors: np.ndarray) -> list[SummaryRecord]:
    records = [SummaryRecord(f"c{i}", 1, encode_vector(v), Richness(3, 2, 1), level=0) for i, v in enumerate(vectors)]
    envelope = build_publication(identity, site, 1, SPACE, records, timedelta(hours=1))
    index.commit(index.plan(open_publication(envelope, site, [identity.public_key], SPACE), None))
    return records


def _routes(index: SummaryIndex, probes: np.ndarray) -> list[list[tuple[str, str, float]]]:
    return [[(h.site_id, h.summary_id, h.score) for h in index.search(p, 20)] for p in probes]


def test_the_index_scores_the_codes_and_a_restart_rebuilds_the_same_index(store: MilvusVectorStore,
                                                                          tmp_path: Path) -> None:
    sites = {f"s{i}": units(60, 10 + i) for i in range(3)}
    probes = units(12, 99)
    index = SummaryIndex(store, SPACE, tmp_path / "heads")
    records = {s: _publish(index, SiteIdentity.generate(), s, v) for s, v in sites.items()}
    assert index.flush(30)
    before = _routes(index, probes)
    index.close()

    # what the router scores: the cosine with the codes' directions, not with the float32 vectors
    coded = {(s, f"c{i}"): d for s, v in sites.items() for i, d in enumerate(directions(quantise(v)))}
    for probe, route in zip(probes, before):
        for site, sid, score in route:
            assert score == pytest.approx(float(coded[(site, sid)] @ probe), abs=1e-6)
    # what the durable copy holds: the codes byte for byte, one byte per dimension
    for site, recs in records.items():
        keys = [row_key(site, r.summary_id, 1, summary_sha256(r)) for r in recs]
        held = store.fields(COLLECTION, ["codes"], ids=keys)
        assert np.array_equal(np.array([held[k]["codes"] for k in keys], dtype=np.int8), quantise(sites[site]))

    restarted = SummaryIndex(store, SPACE, tmp_path / "heads")
    assert sorted(restarted.restore(lambda site: True)["loaded"]) == sorted(sites)
    assert _routes(restarted, probes) == before  # the same hits, the same scores, bit for bit
    restarted.close()


def _previous_format(store: MilvusVectorStore, vectors: np.ndarray) -> StoredHead:
    """A format-1 head of site acme and its float32 rows, as the previous version stored them."""
    rows = {f"c{i}": (1, f"{i:064x}", 0, 1) for i in range(len(vectors))}
    head = StoredHead("acme", 4, "2030-01-01T00:00:00Z", SHA, SHA, rows, legacy=True)
    store.ensure_collection(CollectionSpec(LEGACY_COLLECTION, dim=DIM, index="FLAT", fields={
        "site_id": "str", "summary_id": "str", "level": "int", "richness": "int"}))
    store.upsert(LEGACY_COLLECTION, list(head.keys().values()), vectors,
                 [{"site_id": "acme", "summary_id": sid} for sid in head.keys()])
    return head


def test_a_set_saved_over_a_previous_format_one_carries_its_rows_over_as_codes(store: MilvusVectorStore,
                                                                               tmp_path: Path) -> None:
    """A worker that loaded a format-1 set another process wrote, then takes a delta on it: the rows
    it carries over are written as codes too, and the float32 rows go."""
    vectors = units(4, 8)
    old = _previous_format(store, vectors)
    durable = DurableStore(store, DIM, tmp_path / "heads")
    new_rows = {**{sid: r for sid, r in old.rows.items() if sid != "c0"}, "c9": (1, "9" * 64, 0, 1)}
    new = StoredHead("acme", 5, old.expires, SHA, SHA, new_rows)
    fresh = units(1, 9)
    durable.save(new, old, {new.keys()["c9"]: quantise(fresh)[0]})
    codes = stored_codes(store, new, DIM)
    assert set(codes) == {"c1", "c2", "c3", "c9"}
    assert np.array_equal(np.stack([codes[f"c{i}"] for i in (1, 2, 3)]), quantise(vectors[1:]))
    assert np.array_equal(codes["c9"], quantise(fresh)[0])
    assert store.fields(LEGACY_COLLECTION, ["site_id"]) == {}  # the site's float32 rows are gone
    assert [h.sequence for h in durable.heads()] == [5] and not durable.heads()[0].legacy


def test_a_follower_reads_a_previous_format_primary_s_float32_rows(store: MilvusVectorStore) -> None:
    """A replica upgraded before its primary: the mirrored head is of format 1 and its rows float32."""
    vectors = units(5, 7)
    head = _previous_format(store, vectors)
    mirror = HeadMirror(store)
    mirror.write(head)
    assert json.loads(dumps(HeadFile.of(head).to_json()))["format"] == 1
    follower = SummaryIndex(store, SPACE, mirror=mirror, follower=True)
    assert follower.follow() == ["acme"]
    hits = follower.search(vectors[2], 1)
    assert hits[0].summary_id == "c2" and hits[0].score == pytest.approx(1.0, abs=1e-4)
    follower.close()
