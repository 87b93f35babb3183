"""The real all-MiniLM-L6-v2 from the installed package, loaded offline once for the module."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from hansa.adapters.embedder import open_embedder
from hansa.adapters.embedder.local_model import PACKAGED_MODEL_ID, packaged_model_dir, resolve_model
from hansa.adapters.embedder.sentence_transformers import (
    SentenceTransformerEmbedder,
    cpu_has_native_bf16,
    resolve_precision,
)
from hansa.core.config import load_config
from hansa.core.errors import BackendError, ConfigError, InputError


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


PRECISION_TEXTS = [
    "The Brightwater Lighthouse stands on the northern cliffs of Karsholm Island.",
    "Kettle Ridge Roasters buys green beans from cooperatives in Sidama and Huila.",
    "Mount Teravik last erupted in 1912 and covered the village of Solvik in ash.",
    "A safe room is a room, preferably below ground, where people shelter from a tornado.",
    "The Federal Reserve raised interest rates to slow inflation.",
    "How do I reset the password of my cloud account?",
    "Plastic sheeting and duct tape belong in a disaster supplies kit.",
    "Harrison Ford reprised the role of Indiana Jones in 2008.",
    "An index fund tracks a market index at low cost.",
    "Seismometers on the crater rim record every tremor.",
    "cat",
    "Bonds pay a fixed coupon until they mature.",
    "The orchestra tours Japan every other spring with thirty-two players.",
    "Create a virtual private cloud and attach a public gateway to its subnet.",
    "Flu vaccines matter most for older adults, young children and pregnant women.",
    "Wet towels under a door are used when you are in a room from which you can not escape and a fire is "
    "on the other side; that is not what needs to be done when you shelter in place during an emergency.",
    "Lighthouse keepers lived in cottages beside the tower until 1986.",
    "Dividends are taxed differently from capital gains in many countries.",
    "Visitors climb 142 steps to reach the lamp room.",
    "The roastery ships its coffee in compostable bags.",
]


def test_bf16_vectors_stay_in_the_fp32_space() -> None:
    """Same model_id, so a bf16 site must be comparable with an fp32 gateway: each vector matches."""
    fp32 = SentenceTransformerEmbedder(precision="fp32", batch_size=8)
    bf16 = SentenceTransformerEmbedder(precision="bf16", batch_size=8)
    assert (fp32.precision, bf16.precision) == ("fp32", "bf16")
    assert fp32.model_id == bf16.model_id == PACKAGED_MODEL_ID and fp32.dim == bf16.dim
    a, b = fp32.embed(PRECISION_TEXTS), bf16.embed(PRECISION_TEXTS)
    assert b.dtype == np.float32 and b.shape == (20, 384)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(a * b, axis=1)
    assert cosines.min() > 0.999, cosines
    assert not np.array_equal(a, b)  # bf16 really ran: its rounding leaves a trace


def test_auto_precision_follows_the_cpu_flags(tmp_path: Path) -> None:
    with_bf16 = tmp_path / "bf16"
    with_bf16.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n\nprocessor\t: 1\n")
    with_amx = tmp_path / "amx"
    with_amx.write_text("flags\t\t: fpu avx2 amx_tile amx_bf16\n")
    without = tmp_path / "plain"
    without.write_text("flags\t\t: fpu sse2 avx2 avx512f\nbugs\t\t: avx512_bf16_is_not_a_flag_here\n")
    assert cpu_has_native_bf16(with_bf16) and cpu_has_native_bf16(with_amx)
    assert not cpu_has_native_bf16(without) and not cpu_has_native_bf16(tmp_path / "absent")
    native = cpu_has_native_bf16()
    assert resolve_precision("auto", "cpu") == ("bf16" if native else "fp32")
    assert resolve_precision("auto", "cuda") == "fp32"  # the flags describe the CPU only
    assert resolve_precision("fp32", "cpu") == "fp32" and resolve_precision("bf16", "cpu") == "bf16"


@pytest.mark.parametrize("precision", ["fp16", "BF16", "", "float32"])
def test_an_unknown_precision_is_a_config_error(precision: str) -> None:
    with pytest.raises(ConfigError) as err:
        SentenceTransformerEmbedder(precision=precision)
    assert "auto, fp32, bf16" in str(err.value) and "HANSA_EMBEDDER_PRECISION" in str(err.value)


def test_the_configured_precision_reaches_the_embedder(tmp_path: Path) -> None:
    env = {"HANSA_HOME": str(tmp_path), "HANSA_EMBEDDER_BACKEND": "sentence-transformers"}
    cfg = load_config(env={**env, "HANSA_EMBEDDER_PRECISION": "fp32"})
    assert open_embedder(cfg).precision == "fp32"
    assert load_config(env={"HANSA_HOME": str(tmp_path)}).embedder.precision == "auto"
    with pytest.raises(ConfigError):
        open_embedder(load_config(env={**env, "HANSA_EMBEDDER_PRECISION": "int8"}))
