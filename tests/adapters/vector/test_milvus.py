"""MilvusVectorStore against a real Milvus Lite in a per-test data directory, and (the same tests,
parametrized) against a real Milvus server started once per session (`milvus-lite server`, see
tests/conftest.py), emptied before each test. Lite-only behaviour (data paths, the directory lock)
is tested on Lite alone. The port's contract (the tests on the `store` fixture) also runs on the
in-memory store of tests/fakes.py, so the fast tier's fake keeps the promises Milvus keeps.

Tiers: the Milvus variants are marked `integration` through the fixtures' params and the tests
that open Milvus directly by their own marker; the in-memory variants are the fast tier."""
from __future__ import annotations

import logging
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hansa.adapters.vector.base import CollectionSpec, VectorStore
from hansa.adapters.vector.milvus import MilvusVectorStore, grpc_options, quote_literal
from hansa.core.errors import BackendError, ConfigError, InputError, NotFoundError
from tests.fakes import InMemoryVectorStore

# tests/conftest.py: this module marks its Milvus tests itself (params and markers below), so the
# in-memory contract runs in the fast tier although the module imports the Milvus store.
TIERED_BY_TEST = True
INTEGRATION = pytest.mark.integration

FIELDS = {"doc_id": "str", "level": "int", "rank": "float", "meta": "json"}
SPEC = CollectionSpec("chunks", dim=4, fields=FIELDS)
HOSTILE = [
    'x" or doc_id != "',
    "x' or doc_id != '",
    'a\\" or 1 == 1 or \\"',
    "line\nbreak\ttab\\",
    '") or (level >= 0',
]


def unit(rows: list[list[float]]) -> np.ndarray:
    arr = np.asarray(rows, dtype=np.float32)
    return arr / np.linalg.norm(arr, axis=1, keepdims=True)


@pytest.fixture
def lite_path(tmp_path: Path) -> str:
    return str(tmp_path / "nested" / "milvus.db")  # the parent does not exist yet: the store creates it


@pytest.fixture(params=[pytest.param("lite", marks=INTEGRATION), pytest.param("server", marks=INTEGRATION)])
def db_path(request: pytest.FixtureRequest, lite_path: str) -> str:
    """A Milvus Lite data path, or the URI of the session's (emptied) Milvus server."""
    if request.param == "lite":
        return lite_path
    return request.getfixturevalue("milvus_server_uri")  # resolved lazily: `-k lite` starts no server


@pytest.fixture(params=[pytest.param("lite", marks=INTEGRATION), pytest.param("server", marks=INTEGRATION), "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    """The port under test: Milvus Lite, the session's Milvus server, or tests/fakes.py's in-memory store."""
    if request.param == "memory":
        s = InMemoryVectorStore()
    elif request.param == "lite":
        s = MilvusVectorStore(str(tmp_path / "nested" / "milvus.db"))
    else:
        s = MilvusVectorStore(request.getfixturevalue("milvus_server_uri"))
    s.ensure_collection(SPEC)
    yield s
    s.close()


def test_ensure_collection_is_idempotent_and_refuses_another_dim(store: VectorStore) -> None:
    store.upsert("chunks", ["a"], unit([[1, 0, 0, 0]]))
    store.ensure_collection(SPEC)  # again: no error, data kept
    assert store.count("chunks") == 1
    with pytest.raises(BackendError) as err:
        store.ensure_collection(CollectionSpec("chunks", dim=8, fields=FIELDS))
    assert "4-d" in str(err.value) and "8-d" in str(err.value)
    assert store.count("chunks") == 1


@INTEGRATION
def test_processes_creating_one_collection_at_once_on_a_fresh_server_all_open_it(milvus_server_uri: str) -> None:
    """gunicorn's workers open one Milvus server together: each finds the collection missing and
    creates it; the losers must open what the winner made, not fail to boot (found by the
    production block now in docs/production.md, tests/test_readme_production_path.py)."""
    import threading

    workers = 6
    stores = [MilvusVectorStore(milvus_server_uri) for _ in range(workers)]
    start = threading.Barrier(workers)
    errors: list[BaseException] = []

    def open_collection(store: MilvusVectorStore) -> None:
        start.wait()
        try:
            store.ensure_collection(SPEC)
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=open_collection, args=(s,)) for s in stores]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        stores[0].upsert("chunks", ["a"], unit([[1, 0, 0, 0]]), [{"doc_id": "d", "level": 0, "rank": 0.5, "meta": {}}])
        assert set(stores[-1].get("chunks", ["a"])) == {"a"}  # one collection, seen by every store
    finally:
        for s in stores:
            s.close()


def test_ensure_collection_rejects_bad_specs(store: VectorStore) -> None:
    for spec in (
        CollectionSpec("bad name", dim=4),
        CollectionSpec("c", dim=0),
        CollectionSpec("c", dim=4, metric="L2"),
        CollectionSpec("c", dim=4, index="DISKANN"),
        CollectionSpec("c", dim=4, fields={"vector": "str"}),
        CollectionSpec("c", dim=4, fields={"x": "blob"}),
    ):
        with pytest.raises(InputError):
            store.ensure_collection(spec)


def test_upsert_replaces_rows_by_id(store: VectorStore) -> None:
    store.upsert("chunks", ["a", "b"], unit([[1, 0, 0, 0], [0, 1, 0, 0]]), [{"doc_id": "d1", "level": 1}, {"doc_id": "d1"}])
    store.upsert("chunks", ["a"], unit([[0, 0, 1, 0]]), [{"doc_id": "d2", "level": 7, "rank": 0.5, "meta": {"k": [1, 2]}}])
    assert store.count("chunks") == 2
    got = store.get("chunks", ["a", "b", "missing"])
    assert set(got) == {"a", "b"}
    np.testing.assert_allclose(got["a"], [0, 0, 1, 0], atol=1e-6)
    [[hit]] = store.search("chunks", unit([[0, 0, 1, 0]]), 1, output_fields=["doc_id", "level", "rank", "meta"])
    assert hit.id == "a"
    assert hit.fields == {"doc_id": "d2", "level": 7, "rank": 0.5, "meta": {"k": [1, 2]}}


def test_upsert_validates_everything_before_writing(store: VectorStore) -> None:
    good = unit([[1, 0, 0, 0], [0, 1, 0, 0]])
    bad_calls = [
        (["a", "b"], unit([[1, 0, 0, 0, 0], [0, 1, 0, 0, 0]]), None),  # wrong dim
        (["a"], good, None),  # count mismatch
        (["a", "a"], good, None),  # duplicate ids
        (["a", ""], good, None),  # empty id
        (["a", "b"], np.array([[1, 0, 0, 0], [np.nan, 0, 0, 0]], dtype=np.float32), None),
        (["a", "b"], good, [{"doc_id": "ok"}, {"nope": 1}]),  # unknown field
        (["a", "b"], good, [{"doc_id": "ok"}, {"level": "3"}]),  # wrong type
        (["a", "b"], good, [{"doc_id": "ok"}, {"doc_id": "x" * 2000}]),  # too long
    ]
    for ids, vectors, fields in bad_calls:
        with pytest.raises(InputError):
            store.upsert("chunks", ids, vectors, fields)
    assert store.count("chunks") == 0


def test_upsert_batches_large_inputs(store: VectorStore) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(2500, 4)).astype(np.float32)
    store.upsert("chunks", [f"r{i}" for i in range(2500)], vectors, [{"level": i} for i in range(2500)])
    assert store.count("chunks") == 2500
    np.testing.assert_allclose(store.get("chunks", ["r2499"])["r2499"], vectors[2499], rtol=1e-6)


def test_unflushed_upserts_are_read_and_replaced_like_flushed_ones(store: VectorStore) -> None:
    """Ingest writes many small groups with flush=False and seals once: the rows must be counted,
    read, searched and replaced by id before the flush exactly as after it."""
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(40, 4)).astype(np.float32)
    for start in range(0, 40, 8):
        store.upsert("chunks", [f"r{i}" for i in range(start, start + 8)], vectors[start:start + 8],
                     [{"doc_id": f"d{i // 8}"} for i in range(start, start + 8)], flush=False)
    store.upsert("chunks", ["r3"], unit([[0, 0, 0, 1]]), [{"doc_id": "moved"}], flush=False)
    for _ in ("before", "after"):
        assert store.count("chunks") == 40
        np.testing.assert_allclose(store.get("chunks", ["r39"])["r39"], vectors[39], rtol=1e-6)
        [[hit]] = store.search("chunks", unit([[0, 0, 0, 1]]), 1, output_fields=["doc_id"])
        assert (hit.id, hit.fields["doc_id"]) == ("r3", "moved")
        store.flush("chunks")
    with pytest.raises(NotFoundError):
        store.flush("never_created")


def test_inserted_rows_are_read_searched_and_replaced_like_upserted_ones(store: VectorStore) -> None:
    """Ingest inserts the rows of documents with no stored version (no per-id lookup, no delete):
    they must be counted, read, searched and filtered as upserted rows are, sealed or not, and an
    upsert of one of them afterwards replaces it (an edited document's unchanged chunk)."""
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(24, 4)).astype(np.float32)
    for start in range(0, 24, 8):
        store.insert("chunks", [f"r{i}" for i in range(start, start + 8)], vectors[start:start + 8],
                     [{"doc_id": f"d{i // 8}", "level": i} for i in range(start, start + 8)], flush=False)
    assert store.count("chunks") == 24
    np.testing.assert_allclose(store.get("chunks", ["r17"])["r17"], vectors[17], rtol=1e-6)
    assert set(store.fields("chunks", ["level"], where={"doc_id": "d1"})) == {f"r{i}" for i in range(8, 16)}
    store.flush("chunks")
    store.upsert("chunks", ["r5"], unit([[0, 0, 1, 0]]), [{"doc_id": "edited"}], flush=False)
    store.insert("chunks", ["new"], unit([[0, 1, 0, 0]]), [{"doc_id": "d9"}])
    assert store.count("chunks") == 25
    [[hit]] = store.search("chunks", unit([[0, 0, 1, 0]]), 1, output_fields=["doc_id", "level"])
    assert (hit.id, hit.fields["doc_id"], hit.fields["level"]) == ("r5", "edited", 0)
    store.delete("chunks", where={"doc_id": "d0"})
    assert store.count("chunks") == 18 and store.get("chunks", ["r0", "r5", "new"]).keys() == {"r5", "new"}
    with pytest.raises(InputError):
        store.insert("chunks", ["x", "x"], unit([[1, 0, 0, 0], [0, 1, 0, 0]]))
    with pytest.raises(InputError):
        store.insert("chunks", ["y"], unit([[1, 0, 0, 0]]), [{"unknown": 1}])
    assert store.count("chunks") == 18  # refused inserts wrote nothing


def test_delete_by_ids_and_by_where(store: VectorStore) -> None:
    ids = ["plain", "quote'single", 'quote"double', "back\\slash"]
    store.upsert("chunks", ids, unit(np.eye(4).tolist()), [{"doc_id": "d1"}, {"doc_id": "d2"}, {"doc_id": "d2"}, {"doc_id": "d3", "level": 2}])
    store.delete("chunks", ids=["quote'single", "back\\slash", "never-stored"])
    assert set(store.get("chunks", ids)) == {"plain", 'quote"double'}
    store.delete("chunks", where={"doc_id": "d2"})
    assert set(store.get("chunks", ids)) == {"plain"}
    store.delete("chunks", ids=[])
    assert store.count("chunks") == 1
    with pytest.raises(InputError):
        store.delete("chunks")
    with pytest.raises(InputError):
        store.delete("chunks", where={"id": "plain"})  # only the spec's scalar fields are filterable


def test_delete_by_ids_and_where_together_needs_both(store: VectorStore) -> None:
    store.upsert("chunks", ["a", "b"], unit([[1, 0, 0, 0], [0, 1, 0, 0]]), [{"doc_id": "d1"}, {"doc_id": "d2"}])
    store.delete("chunks", ids=["a", "b"], where={"doc_id": "d2"})
    assert set(store.get("chunks", ["a", "b"])) == {"a"}


def test_fields_by_ids_by_where_or_of_every_row(store: VectorStore) -> None:
    ids = ["plain", "quote'single", "third"]
    store.upsert("chunks", ids, unit(np.eye(4)[:3].tolist()), [{"doc_id": "d1", "level": 1}, {"doc_id": "d2"}, {"doc_id": "d2", "level": 3}])
    assert store.fields("chunks", ["doc_id"]) == {"plain": {"doc_id": "d1"}, "quote'single": {"doc_id": "d2"}, "third": {"doc_id": "d2"}}
    assert store.fields("chunks", ["level"], where={"doc_id": "d2"}) == {"quote'single": {"level": 0}, "third": {"level": 3}}
    assert store.fields("chunks", ["doc_id", "level"], ids=["third", "never-stored"], where={"doc_id": "d2"}) == {
        "third": {"doc_id": "d2", "level": 3}}
    assert store.fields("chunks", ["doc_id"], ids=[]) == {}
    with pytest.raises(InputError, match="unknown fields"):
        store.fields("chunks", ["vector"])


def test_int8_fields_round_trip_byte_for_byte_and_are_checked(store: VectorStore) -> None:
    spec = CollectionSpec("codes", dim=2, fields={"site_id": "str", "codes": "int8[384]"})
    store.ensure_collection(spec)
    store.ensure_collection(spec)  # an existing int8[384] field is recognised as one
    with pytest.raises(BackendError, match="384-d"):  # codes of another length: another embedder
        store.ensure_collection(CollectionSpec("codes", dim=2, fields={"site_id": "str", "codes": "int8[385]"}))
    codes = np.random.default_rng(3).integers(-128, 128, (2, 384)).astype(np.int8)
    codes[0, :2] = (-128, 127)  # both ends of the range
    store.upsert("codes", ["a", "b", "c"], np.tile([1.0, 0.0], (3, 1)),
                 [{"site_id": "s", "codes": codes[0]}, {"site_id": "s", "codes": codes[1].tolist()}, {"site_id": "t"}])
    got = store.fields("codes", ["codes"], ids=["a", "b", "c"])
    assert np.array_equal(np.asarray(got["a"]["codes"], dtype=np.int8), codes[0])
    assert np.array_equal(np.asarray(got["b"]["codes"], dtype=np.int8), codes[1])
    assert list(got["c"]["codes"]) == [0] * 384  # not given: zeros
    for bad in ([128] * 384, [-129] * 384, [0.5] * 384, np.zeros(383, np.int8), np.zeros((2, 384), np.int8)):
        with pytest.raises(InputError, match="codes"):
            store.upsert("codes", ["d"], np.array([[1.0, 0.0]]), [{"codes": bad}])
    assert set(store.fields("codes", ["site_id"])) == {"a", "b", "c"}  # nothing of a refused upsert written
    with pytest.raises(InputError, match="cannot filter"):
        store.fields("codes", ["site_id"], where={"codes": "x"})
    for kind in ("int8[0]", "int8[4097]", "int8", "int8[]"):
        with pytest.raises(InputError, match="kind"):
            store.ensure_collection(CollectionSpec("other", dim=2, fields={"codes": kind}))


def test_search_orders_best_first_with_cosine_scores(store: VectorStore) -> None:
    vectors = unit([[1, 0, 0, 0], [0.9, 0.1, 0, 0], [0.5, 0.5, 0.5, 0], [0, 0, 0, 1], [-1, 0, 0, 0]])
    ids = ["v0", "v1", "v2", "v3", "v4"]
    store.upsert("chunks", ids, vectors, [{"doc_id": "even" if i % 2 == 0 else "odd"} for i in range(5)])
    queries = unit([[1, 0.05, 0, 0], [0.1, 0, 0.2, 1]])
    results = store.search("chunks", queries, limit=3)
    expected_scores = queries @ vectors.T
    for q, hits in enumerate(results):
        order = np.argsort(-expected_scores[q])[:3]
        assert [h.id for h in hits] == [ids[i] for i in order]
        np.testing.assert_allclose([h.score for h in hits], expected_scores[q][order], atol=1e-5)
    [filtered] = store.search("chunks", queries[:1], limit=5, where={"doc_id": "odd"}, output_fields=["doc_id"])
    assert [h.id for h in filtered] == ["v1", "v3"]
    assert all(h.fields == {"doc_id": "odd"} for h in filtered)
    with pytest.raises(InputError):
        store.search("chunks", queries, limit=0)
    with pytest.raises(InputError):
        store.search("chunks", queries, limit=3, output_fields=["secret"])
    with pytest.raises(InputError):
        store.search("chunks", unit([[1, 0, 0]]), limit=3)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_filter_values_match_only_themselves(store: VectorStore, hostile: str) -> None:
    store.upsert("chunks", ["target", "other"], unit([[1, 0, 0, 0], [0.9, 0.1, 0, 0]]), [{"doc_id": hostile}, {"doc_id": "x"}])
    [hits] = store.search("chunks", unit([[1, 0, 0, 0]]), limit=5, where={"doc_id": hostile}, output_fields=["doc_id"])
    assert [(h.id, h.fields["doc_id"]) for h in hits] == [("target", hostile)]
    store.delete("chunks", where={"doc_id": hostile})
    assert set(store.get("chunks", ["target", "other"])) == {"other"}


def test_a_list_of_filter_values_matches_any_of_them_and_only_them(store: VectorStore) -> None:
    """Ingest deletes a replaced version's sentence rows by chunk id in one call (a filtered delete
    is one scan of the collection on Milvus); hostile values stay literals in a list too, and a
    list longer than one request's worth is deleted in parts."""
    docs = [*HOSTILE, "plain", "kept"]
    store.upsert("chunks", [f"r{i}" for i in range(len(docs))], unit(np.eye(4)[[i % 4 for i in range(len(docs))]].tolist()),
                 [{"doc_id": d, "level": i} for i, d in enumerate(docs)])
    assert set(store.fields("chunks", ["doc_id"], where={"doc_id": [HOSTILE[0], "plain", "absent"]})) == {"r0", f"r{len(HOSTILE)}"}
    assert set(store.fields("chunks", ["doc_id"], where={"doc_id": ("kept",), "level": [len(docs) - 1, 0]})) == {f"r{len(docs) - 1}"}
    store.delete("chunks", where={"doc_id": [*HOSTILE, "plain", "never-stored"]})
    assert set(store.fields("chunks", ["doc_id"])) == {f"r{len(docs) - 1}"}
    with pytest.raises(InputError):
        store.delete("chunks", where={"doc_id": []})  # would match nothing: a caller's slip, refused
    with pytest.raises(InputError):
        store.delete("chunks", where={"doc_id": ["kept", 7]})
    many = [f"m{i}" for i in range(2100)]
    store.upsert("chunks", many, np.tile(unit([[1, 0, 0, 0]]), (len(many), 1)), [{"doc_id": f"d{i}"} for i in range(len(many))])
    store.delete("chunks", where={"doc_id": [f"d{i}" for i in range(2050)]})
    assert store.count("chunks") == 1 + 50 and set(store.get("chunks", ["m2049", "m2050"])) == {"m2050"}


def test_hostile_field_names_are_refused(store: VectorStore) -> None:
    store.upsert("chunks", ["a"], unit([[1, 0, 0, 0]]), [{"doc_id": "d"}])
    for name in ('doc_id == "d" or doc_id', "meta", "vector", "level or 1"):
        with pytest.raises(InputError):
            store.search("chunks", unit([[1, 0, 0, 0]]), 1, where={name: "d"})
    with pytest.raises(InputError):
        store.search("chunks", unit([[1, 0, 0, 0]]), 1, where={"level": "1 or 1 == 1"})
    assert store.count("chunks") == 1


def test_quote_literal_round_trips_every_special_character() -> None:
    assert quote_literal('a"b') == '"a\\"b"'
    assert quote_literal("a\\b\n") == '"a\\\\b\\n"'


def test_int_and_float_filters(store: VectorStore) -> None:
    store.upsert("chunks", ["a", "b"], unit([[1, 0, 0, 0], [0, 1, 0, 0]]), [{"level": 1, "rank": 0.25}, {"level": 2, "rank": 0.5}])
    [hits] = store.search("chunks", unit([[1, 1, 0, 0]]), 5, where={"level": 2})
    assert [h.id for h in hits] == ["b"]
    [hits] = store.search("chunks", unit([[1, 1, 0, 0]]), 5, where={"rank": 0.25})
    assert [h.id for h in hits] == ["a"]


@pytest.mark.parametrize("index", ["FLAT", "IVF_FLAT", "HNSW", "AUTOINDEX"])
def test_every_supported_index_answers(db_path: str, index: str) -> None:
    rng = np.random.default_rng(1)
    vectors = unit(rng.normal(size=(300, 8)).tolist())
    with MilvusVectorStore(db_path) as s:
        s.ensure_collection(CollectionSpec("idx", dim=8, index=index, metric="IP"))
        s.upsert("idx", [f"r{i}" for i in range(300)], vectors)
        [hits] = s.search("idx", vectors[17:18], limit=3)
        assert hits[0].id == "r17"
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_reopen_after_close_keeps_data_and_searches(db_path: str) -> None:
    with MilvusVectorStore(db_path) as s:
        s.ensure_collection(SPEC)
        s.upsert("chunks", ["a", "b"], unit([[1, 0, 0, 0], [0, 1, 0, 0]]), [{"doc_id": "d1"}, {"doc_id": "d2"}])
    with MilvusVectorStore(db_path) as s:  # no ensure_collection: the store must load it itself
        assert s.count("chunks") == 2
        [hits] = s.search("chunks", unit([[0, 1, 0, 0]]), 1, where={"doc_id": "d2"}, output_fields=["doc_id"])
        assert [(h.id, h.fields) for h in hits] == [("b", {"doc_id": "d2"})]
        with pytest.raises(BackendError):
            s.ensure_collection(CollectionSpec("chunks", dim=3, fields=FIELDS))


@INTEGRATION
def test_two_stores_on_one_path_in_one_process_share_it(lite_path: str) -> None:
    first = MilvusVectorStore(lite_path)
    second = MilvusVectorStore(lite_path)
    first.ensure_collection(SPEC)
    first.upsert("chunks", ["a"], unit([[1, 0, 0, 0]]))
    first.close()  # the other store still uses the directory
    assert second.count("chunks") == 1
    second.close()
    with pytest.raises(BackendError):
        second.count("chunks")


def test_prefix_separates_collections(db_path: str) -> None:
    with MilvusVectorStore(db_path, prefix="one_") as one, MilvusVectorStore(db_path, prefix="two_") as two:
        one.ensure_collection(SPEC)
        one.upsert("chunks", ["a"], unit([[1, 0, 0, 0]]))
        with pytest.raises(NotFoundError):
            two.count("chunks")


def test_drop_removes_the_collection(store: VectorStore) -> None:
    store.upsert("chunks", ["a"], unit([[1, 0, 0, 0]]))
    store.drop("chunks")
    store.drop("chunks")  # dropping a missing collection is fine
    with pytest.raises(NotFoundError):
        store.count("chunks")


@INTEGRATION
def test_lite_path_must_end_in_db(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        MilvusVectorStore(str(tmp_path / "milvus"))


@INTEGRATION
def test_locked_data_dir_names_the_problem_and_the_fix(lite_path: str) -> None:
    holder = textwrap.dedent(
        """
        import sys
        from hansa.adapters.vector.milvus import MilvusVectorStore
        store = MilvusVectorStore(sys.argv[1])
        print("ready", flush=True)
        sys.stdin.read()
        store.close()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder, lite_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with pytest.raises(BackendError) as err:
            MilvusVectorStore(lite_path)
        message = str(err.value)
        assert "locked by another process" in message
        assert "milvus-lite server" in message and "HANSA_MILVUS_URI" in message
    finally:
        proc.communicate(input="", timeout=60)
    with MilvusVectorStore(lite_path) as s:  # once the other process is gone the directory opens
        s.ensure_collection(SPEC)


@INTEGRATION
def test_an_unreachable_server_is_a_backend_error_naming_it() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    with pytest.raises(BackendError) as err:
        MilvusVectorStore(uri, timeout_s=3)
    assert uri in str(err.value)


def test_a_collection_records_its_owner_and_refuses_another(store: VectorStore) -> None:
    """One collection prefix holds one site: the owner is stored with the collection (a property)."""
    assert store.collection_owner("owned") is None  # absent
    store.ensure_collection(CollectionSpec(name="owned", dim=2, fields={"doc_id": "str"}, owner="site-a"))
    assert store.collection_owner("owned") == "site-a"
    store.ensure_collection(CollectionSpec(name="owned", dim=2, fields={"doc_id": "str"}, owner="site-a"))  # idempotent
    store.ensure_collection(CollectionSpec(name="owned", dim=2, fields={"doc_id": "str"}))  # no claim: no check
    with pytest.raises(BackendError, match="belongs to site 'site-a', not 'site-b'"):
        store.ensure_collection(CollectionSpec(name="owned", dim=2, fields={"doc_id": "str"}, owner="site-b"))
    store.ensure_collection(CollectionSpec(name="legacy", dim=2))
    assert store.collection_owner("legacy") == ""  # created without an owner
    store.drop("owned")
    assert store.collection_owner("owned") is None


@INTEGRATION
def test_an_index_file_a_crash_cut_short_is_rebuilt_and_no_row_is_lost(lite_path: str, caplog: pytest.LogCaptureFixture) -> None:
    """Milvus Lite writes each segment's index sidecar in place; a process killed mid-write leaves
    it truncated and every later load failed (seen in the kill -9 drills). The store rebuilds the
    sidecars from the intact data files, says so once, and loses nothing."""
    store = MilvusVectorStore(lite_path)
    store.ensure_collection(SPEC)
    vecs = unit([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]])
    store.upsert("chunks", ["a", "b", "c"], vecs, [{"doc_id": d, "level": 0, "rank": 0.0, "meta": {}} for d in "abc"])
    assert store.search("chunks", vecs[:1], limit=1)[0][0].id == "a"  # loaded: the sidecar is written
    store.close()
    sidecars = sorted(Path(lite_path).glob("collections/*/partitions/*/indexes/*.idx"))
    assert sidecars, "Milvus Lite's layout changed: no index sidecar where the repair looks for one"
    with open(sidecars[0], "r+b") as f:
        f.truncate(10)  # cut short, as a kill mid-write leaves it
    reopened = MilvusVectorStore(lite_path)
    try:
        with caplog.at_level("WARNING"):
            hits = reopened.search("chunks", vecs[1:2], limit=3)[0]
        assert [h.id for h in hits][0] == "b" and {h.id for h in hits} == {"a", "b", "c"}
        assert reopened.count("chunks") == 3
        assert "milvus_lite.index_files_rebuilt" in caplog.text
    finally:
        reopened.close()


@pytest.mark.parametrize("uri, embedded, idle_pings", [
    ("/tmp/site/milvus.db", True, False),  # Milvus Lite in this process
    ("http://127.0.0.1:19530", False, False),  # `milvus-lite server` on this host
    ("http://localhost:19530", False, False),
    ("http://[::1]:19530", False, False),
    ("https://milvus.example.org:19530", False, True),  # a remote server keeps pymilvus's keepalive
    ("http://10.0.0.7:19530", False, True),
])
def test_idle_keepalive_pings_are_off_only_over_loopback(uri: str, embedded: bool, idle_pings: bool) -> None:
    """A loopback Lite server answers pymilvus's idle pings with GOAWAY "too_many_pings", after which
    the connection pymilvus keeps for the URI fails to reconnect (CI, session 23)."""
    options = grpc_options(uri, embedded)
    assert (options == {}) is idle_pings
    if not idle_pings:
        assert options == {"grpc_options": {"grpc.keepalive_permit_without_calls": 0}}


@INTEGRATION
def test_creating_a_collection_on_milvus_lite_logs_no_grpc_error(lite_path: str, caplog: pytest.LogCaptureFixture) -> None:
    """Milvus Lite refuses pymilvus's AllocTimestamp (the wait for a new collection's index): grpc
    logged that refusal as an ERROR with a traceback at every collection creation, in the demo too."""
    store = MilvusVectorStore(lite_path)
    try:
        with caplog.at_level(logging.INFO, logger="grpc._server"):
            store.ensure_collection(CollectionSpec(name="quiet", dim=4))
        assert store.count("quiet") == 0
    finally:
        store.close()
    assert [r for r in caplog.records if r.name == "grpc._server"] == []
    other = logging.LogRecord("grpc._server", logging.ERROR, __file__, 1, "Exception calling application", None,
                              (ValueError, ValueError("a real failure"), None))
    assert all(f.filter(other) for f in logging.getLogger("grpc._server").filters)  # other errors still show
