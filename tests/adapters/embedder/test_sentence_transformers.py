"""The real all-MiniLM-L6-v2 from the installed package, loaded offline once for the module."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from hansa.adapters.embedder.sentence_transformers import (
    PACKAGED_MODEL_ID,
    SentenceTransformerEmbedder,
    packaged_model_dir,
    resolve_model,
)
from hansa.core.errors import BackendError, InputError


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder("all-MiniLM-L6-v2", batch_size=4)


def test_identity_and_dimension(embedder: SentenceTransformerEmbedder) -> None:
    assert embedder.model_id == PACKAGED_MODEL_ID
    assert embedder.dim == 384
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_vectors_are_float32_unit_rows(embedder: SentenceTransformerEmbedder) -> None:
    texts = [f"passage number {i} about shipping routes" for i in range(9)]  # > batch_size: several batches
    vectors = embedder.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (9, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(embedder.embed_one(texts[3]), vectors[3], atol=1e-5)


def test_empty_input_has_the_right_shape(embedder: SentenceTransformerEmbedder) -> None:
    vectors = embedder.embed([])
    assert vectors.shape == (0, 384) and vectors.dtype == np.float32


def test_semantic_sanity(embedder: SentenceTransformerEmbedder) -> None:
    cat, kitten, market = embedder.embed(["cat", "kitten", "stock market"])
    assert float(cat @ kitten) > float(cat @ market) + 0.2


def test_non_strings_are_refused(embedder: SentenceTransformerEmbedder) -> None:
    with pytest.raises(InputError):
        embedder.embed(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(InputError):
        embedder.embed("a single string")


def test_both_names_resolve_to_the_packaged_files_without_network() -> None:
    model_dir = packaged_model_dir()
    assert (model_dir / "model.safetensors").is_file()
    for name in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        assert resolve_model(name) == (model_dir, PACKAGED_MODEL_ID)


def test_a_local_directory_is_used_as_given(embedder: SentenceTransformerEmbedder, tmp_path: Path) -> None:
    local = tmp_path / "my-minilm"
    local.mkdir()
    for item in packaged_model_dir().iterdir():  # links, not copies: 90 MB of weights stay put
        (local / item.name).symlink_to(item)
    other = SentenceTransformerEmbedder(str(local))
    assert other.model_id == "my-minilm" and other.path == local.resolve()
    np.testing.assert_allclose(other.embed(["harbour"]), embedder.embed(["harbour"]), atol=1e-5)


def test_instances_share_one_loaded_model(embedder: SentenceTransformerEmbedder) -> None:
    again = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    assert again._model() is embedder._model()


@pytest.mark.parametrize("name", ["BAAI/bge-small-en-v1.5", "all-mpnet-base-v2", ""])
def test_unknown_models_explain_that_nothing_is_downloaded(name: str) -> None:
    with pytest.raises(BackendError) as err:
        SentenceTransformerEmbedder(name)
    assert "never downloads" in str(err.value) and "HANSA_EMBEDDER_MODEL" in str(err.value)


def test_a_directory_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BackendError):
        SentenceTransformerEmbedder(str(tmp_path))


def test_bad_batch_size_is_refused() -> None:
    with pytest.raises(InputError):
        SentenceTransformerEmbedder(batch_size=0)
