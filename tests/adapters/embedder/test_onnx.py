"""The ONNX Runtime embedder against the reference sentence-transformers model, on real MTRAG text.

The default is the catalog's all-MiniLM-L6-v2 (an ONNX graph from Maven Central, fetched once into
the per-user cache); a local sentence-transformers directory is exported once into the cache, as a
site does on first use, so the suite pays each once per model version, not per test.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hansa.adapters.embedder import open_embedder
from hansa.adapters.embedder.local_model import PACKAGED_MODEL_ID, model_digest, packaged_model_dir
from hansa.adapters.embedder.onnx import OnnxEmbedder, mean_pool, token_batches
from hansa.adapters.embedder.onnx_export import META, cache_key, cached_graph
from hansa.adapters.embedder.sentence_transformers import SentenceTransformerEmbedder
from hansa.evaluation.mtrag import load_passages, load_questions
from hansa.core.config import load_config
from hansa.core.errors import BackendError, ConfigError, InputError


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder(batch_size=8)


@pytest.fixture(scope="module")
def real_texts(shared_dir: Path) -> list[str]:
    """Long passages (up to 2,400 characters: past the 256-token truncation) and short questions."""
    root = shared_dir / "datasets" / "mtrag"
    per_domain = load_passages(root)
    passages = [p.text for domain in sorted(per_domain) for p in per_domain[domain][:6]]
    questions = [q.text for q in load_questions(root)[:12]]
    odd = ["cat", "", "   padded   ", "UPPER case and ünïcödé, 中文", "word " * 400]
    return passages + questions + odd


def test_same_vectors_as_sentence_transformers(onnx: OnnxEmbedder, real_texts: list[str]) -> None:
    reference = SentenceTransformerEmbedder(precision="fp32", batch_size=8)
    assert (onnx.model_id, onnx.dim) == (reference.model_id, reference.dim) == (PACKAGED_MODEL_ID, 384)
    assert max(map(len, real_texts)) > 2000  # some texts are truncated at 256 word pieces
    a, b = onnx.embed(real_texts), reference.embed(real_texts)
    assert a.dtype == np.float32 and a.shape == (len(real_texts), 384) and a.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(a * b, axis=1)
    assert cosines.min() >= 0.999, (cosines.min(), real_texts[int(np.argmin(cosines))][:80])


def test_a_batch_gives_each_text_its_single_vector(onnx: OnnxEmbedder, real_texts: list[str]) -> None:
    texts = real_texts[::3]
    batch = onnx.embed(texts)  # padded to the longest text of each batch of 8
    single = np.stack([onnx.embed_one(t) for t in texts])
    np.testing.assert_allclose(batch, single, atol=1e-5)
    assert onnx.embed([]).shape == (0, 384)


def test_a_token_budget_gives_the_same_vectors_in_smaller_calls(onnx: OnnxEmbedder, real_texts: list[str]) -> None:
    """Cut to 300 padded tokens per call, long passages go one by one and short ones together:
    every text still gets the vector it gets in batches of 8 (each batch padded only to its own
    longest text)."""
    budgeted = OnnxEmbedder(batch_size=64, batch_tokens=300)
    np.testing.assert_allclose(budgeted.embed(real_texts), onnx.embed(real_texts), atol=1e-5)


def test_token_batches_keep_both_bounds_and_every_text_once() -> None:
    lengths = [12, 256, 30, 256, 5, 9, 9, 700]
    batches = token_batches(lengths, max_texts=3, max_tokens=512)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert batches[0] == [7]  # longer than the budget: alone, not dropped
    assert [lengths[b[0]] for b in batches] == sorted((lengths[b[0]] for b in batches), reverse=True)
    for b in batches:
        assert len(b) <= 3 and (len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 512)
        assert lengths[b[0]] == max(lengths[i] for i in b)  # longest first: the batch's padded width
    assert token_batches([], 8, 512) == []


def test_mean_pooling_ignores_padding() -> None:
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    np.testing.assert_allclose(mean_pool(hidden, np.array([[1, 1, 0]])), [[2.0, 3.0]])
    assert np.all(mean_pool(hidden, np.array([[0, 0, 0]])) == 0)  # no token: zero, not NaN


def test_bad_input_is_refused(onnx: OnnxEmbedder) -> None:
    with pytest.raises(InputError):
        onnx.embed("one string")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        onnx.embed(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(InputError):
        OnnxEmbedder(batch_size=0)
    with pytest.raises(InputError, match="batch_tokens"):
        OnnxEmbedder(batch_tokens=0)


def test_a_cold_cache_exports_in_a_child_and_this_process_never_imports_torch(tmp_path: Path) -> None:
    """From an empty cache: the export runs in a child process, lands atomically under the model's
    digest, and the process that embeds never imports torch (nor transformers)."""
    cache = tmp_path / "onnx-cache"
    code = (
        "import sys\n"
        "from hansa.core.config import load_config\n"
        "from hansa.adapters.embedder import open_embedder\n"
        f"env = {{'HANSA_HOME': {str(tmp_path)!r}, 'HANSA_EMBEDDER_BACKEND': 'onnx', 'HANSA_EMBEDDER_CACHE_DIR': {str(cache)!r},"
        f" 'HANSA_EMBEDDER_MODEL': {str(packaged_model_dir())!r}}}\n"
        "e = open_embedder(load_config(env=env))\n"
        "v = e.embed(['a question about safe rooms'])\n"
        "print(type(e).__name__, v.shape[1], sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["OnnxEmbedder", "384", "[]"]
    entries = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert [p.name for p in entries] == [cache_key(packaged_model_dir(), "fp32")]
    meta = json.loads((entries[0] / META).read_text(encoding="utf-8"))
    assert meta["model_sha256"] == model_digest(packaged_model_dir()) and meta["variant"] == "fp32"
    assert not [p for p in cache.iterdir() if p.name.startswith(".export-")]  # no half-written export left


def test_the_cache_key_follows_the_model_files(tmp_path: Path) -> None:
    """Other weights or another tokenizer never reuse a cached graph; a half-written entry is ignored."""
    model = packaged_model_dir()
    copy = tmp_path / "model"
    shutil.copytree(model, copy, ignore=shutil.ignore_patterns("model.safetensors"))
    (copy / "model.safetensors").symlink_to(model / "model.safetensors")
    assert cache_key(copy, "fp32") == cache_key(model, "fp32") != cache_key(model, "int8")
    tok = json.loads((copy / "tokenizer.json").read_text(encoding="utf-8"))
    tok["truncation"]["max_length"] = 64
    (copy / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    changed = cache_key(copy, "fp32")
    assert changed != cache_key(model, "fp32")
    cache = tmp_path / "cache"
    (cache / changed).mkdir(parents=True)
    (cache / changed / "model.onnx").write_bytes(b"half")  # no export.json: an interrupted export
    assert cached_graph(copy, cache, "fp32") is None
    (cache / changed / META).write_text("{}")
    assert cached_graph(copy, cache, "fp32") == cache / changed / "model.onnx"


def test_config_selects_the_backend_and_keeps_the_space(tmp_path: Path) -> None:
    env = {"HANSA_HOME": str(tmp_path)}
    onnx = open_embedder(load_config(env={**env, "HANSA_EMBEDDER_BACKEND": "onnx"}))
    st = open_embedder(load_config(env={**env, "HANSA_EMBEDDER_BACKEND": "sentence-transformers"}))
    assert isinstance(onnx, OnnxEmbedder) and isinstance(st, SentenceTransformerEmbedder)
    assert (onnx.model_id, onnx.dim) == (st.model_id, st.dim)
    assert onnx.model_sha256 != st.model_sha256  # the same model, other files: a federation uses one backend
    assert isinstance(open_embedder(load_config(env=env)), OnnxEmbedder)  # the measured default
    tuned = open_embedder(load_config(env={**env, "HANSA_EMBEDDER_THREADS": "1", "HANSA_EMBEDDER_CACHE_DIR": str(tmp_path / "c"),
                                           "HANSA_EMBEDDER_BATCH_TOKENS": "1024"}))
    assert (tuned._threads, tuned.cache_dir, tuned._batch_tokens) == (1, tmp_path / "c", 1024)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError):
        load_config(env={**env, "HANSA_EMBEDDER_BACKEND": "torch"})
    with pytest.raises(ConfigError):
        open_embedder(load_config(env={**env, "HANSA_EMBEDDER_BACKEND": "onnx", "HANSA_EMBEDDER_PRECISION": "bf16"}))


def test_a_model_onnx_cannot_pool_is_refused_at_construction(tmp_path: Path) -> None:
    model = tmp_path / "cls-model"
    shutil.copytree(packaged_model_dir(), model, ignore=shutil.ignore_patterns("model.safetensors"))
    pooling = model / "1_Pooling" / "config.json"
    cfg = json.loads(pooling.read_text(encoding="utf-8"))
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(cfg), encoding="utf-8")
    with pytest.raises(BackendError) as err:
        OnnxEmbedder(str(model))
    assert "sentence-transformers" in str(err.value)


@pytest.mark.parametrize("name", ["bge-small-en-v1.5-q", "e5-small-v2-q"])
def test_catalog_models_follow_their_declared_recipe(name: str, real_texts: list[str]) -> None:
    """Pooling and the query/passage prefixes come from the catalog, not from callers: each vector
    equals the graph's output pooled and prefixed as the model declares."""
    from hansa.adapters.embedder.onnx import cls_pool
    from hansa.adapters.embedder.memo import MemoEmbedder

    e = OnnxEmbedder(name, batch_size=8)
    session, tokenizer = e._runtime()
    text = real_texts[0]

    def by_hand(prefix: str) -> np.ndarray:
        enc = tokenizer.encode(prefix + text)
        feed = {k: np.array([v], dtype=np.int64) for k, v in
                (("input_ids", enc.ids), ("attention_mask", enc.attention_mask), ("token_type_ids", enc.type_ids))}
        (hidden,) = session.run(None, feed)
        pooled = (cls_pool if e.recipe.pooling == "cls" else mean_pool)(hidden, feed["attention_mask"])[0]
        return pooled / np.linalg.norm(pooled)

    query, passage = e.embed_query(text), e.embed_one(text)
    np.testing.assert_allclose(query, by_hand(e.recipe.query_prefix), atol=1e-5)
    np.testing.assert_allclose(passage, by_hand(e.recipe.passage_prefix), atol=1e-5)
    assert (float(query @ passage) < 0.999) == bool(e.recipe.query_prefix)  # e5: two sides; bge: one
    memo = MemoEmbedder(e)
    np.testing.assert_allclose(memo.embed_query(text), query, atol=1e-6)  # cached per side, never mixed
    np.testing.assert_allclose(memo.embed_one(text), passage, atol=1e-6)
    np.testing.assert_allclose(memo.embed_query(text), query, atol=1e-6)


def test_cls_pooling_reads_the_first_token() -> None:
    from hansa.adapters.embedder.onnx import cls_pool

    hidden = np.array([[[1.0, 2.0], [3.0, 4.0]]], dtype=np.float32)
    np.testing.assert_allclose(cls_pool(hidden, np.array([[1, 1]])), [[1.0, 2.0]])
