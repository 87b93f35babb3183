"""OpenAICompatibleEmbedder through the real protocol: a local llama.cpp server answering
/v1/embeddings (SmolLM2, mean-pooled), a dead port and a mute one."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hansa.adapters.embedder import open_embedder
from hansa.adapters.embedder.local_model import PACKAGED_MODEL_ID
from hansa.adapters.embedder.openai_compat import OpenAICompatibleEmbedder
from hansa.core.config import load_config
from hansa.core.errors import BackendError, ConfigError, InputError

EMBEDDING_ALIAS = "smollm2-135m-embed"  # tests/conftest.py serves the model under this name
TEXTS = [
    "A safe room is a room, preferably below ground, where people shelter from a tornado.",
    "Plastic sheeting and duct tape belong in a disaster supplies kit.",
    "The Federal Reserve raised interest rates to slow inflation.",
    "Bonds pay a fixed coupon until they mature.",
    "",
]


@pytest.mark.llm
def test_vectors_are_unit_rows_in_order_and_batched(embedding_base_url: str) -> None:
    e = OpenAICompatibleEmbedder(embedding_base_url, EMBEDDING_ALIAS, batch_size=2)
    assert e.model_id == "openai-compatible:" + EMBEDDING_ALIAS
    vectors = e.embed(TEXTS)  # three requests of at most two texts
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), e.dim) and e.dim == 576
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    again = OpenAICompatibleEmbedder(embedding_base_url, EMBEDDING_ALIAS, batch_size=64).embed(TEXTS)
    np.testing.assert_allclose(vectors, again, atol=1e-4)  # batching does not reorder or change rows
    single = e.embed_one(TEXTS[2])
    assert float(single @ vectors[2]) > 0.9999 and float(single @ vectors[0]) < 0.9999
    assert e.embed([]).shape == (0, 576)


@pytest.mark.llm
def test_a_wrong_dimension_is_a_clear_error(embedding_base_url: str) -> None:
    e = OpenAICompatibleEmbedder(embedding_base_url, EMBEDDING_ALIAS, dim=384)
    with pytest.raises(BackendError) as err:
        e.embed(["hello"])
    assert "576-dimensional" in str(err.value) and "expected 384" in str(err.value) and "HANSA_EMBEDDER_DIM" in str(err.value)


@pytest.mark.llm
def test_a_refused_model_or_path_is_a_backend_error(embedding_base_url: str) -> None:
    e = OpenAICompatibleEmbedder(embedding_base_url + "/no/such/api", EMBEDDING_ALIAS, max_retries=0)
    with pytest.raises(BackendError) as err:
        e.embed(["hello"])
    assert "/no/such/api" in str(err.value) and "refused" in str(err.value)


@pytest.mark.llm
def test_config_opens_it_in_its_own_space(embedding_base_url: str, tmp_path: Path) -> None:
    cfg = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_EMBEDDER_BACKEND": "openai",
                           "HANSA_EMBEDDER_BASE_URL": embedding_base_url, "HANSA_EMBEDDER_MODEL": EMBEDDING_ALIAS,
                           "HANSA_EMBEDDER_TIMEOUT_S": "20", "HANSA_EMBEDDER_API_KEY": "k"})
    e = open_embedder(cfg)
    assert isinstance(e, OpenAICompatibleEmbedder) and e.base_url == embedding_base_url + "/v1"
    assert e.model_id != PACKAGED_MODEL_ID and e.dim == 576


def test_a_dead_endpoint_fails_fast_naming_it(dead_llm_url: str) -> None:
    e = OpenAICompatibleEmbedder(dead_llm_url, "any", timeout_s=2, max_retries=0)
    with pytest.raises(BackendError) as err:
        e.embed(["hello"])
    assert dead_llm_url + "/v1" in str(err.value) and "cannot reach" in str(err.value)
    with pytest.raises(BackendError):
        e.dim  # noqa: B018  (asking the dimension asks the server)


def test_a_silent_endpoint_times_out(mute_llm_url: str) -> None:
    e = OpenAICompatibleEmbedder(mute_llm_url, "any", timeout_s=0.5, max_retries=0)
    with pytest.raises(BackendError) as err:
        e.embed(["hello"])
    assert "timed out" in str(err.value) and "HANSA_EMBEDDER_TIMEOUT_S" in str(err.value)


def test_bad_settings_and_input_are_refused_before_any_request(dead_llm_url: str, tmp_path: Path) -> None:
    for kwargs in ({"batch_size": 0}, {"dim": -1}, {"dim": True}):
        with pytest.raises((InputError, ConfigError)):
            OpenAICompatibleEmbedder(dead_llm_url, "m", **kwargs)
    with pytest.raises(ConfigError):
        OpenAICompatibleEmbedder(dead_llm_url, "")
    with pytest.raises(ConfigError):
        OpenAICompatibleEmbedder("127.0.0.1:8080", "m")
    e = OpenAICompatibleEmbedder(dead_llm_url, "m", max_retries=0)
    with pytest.raises(InputError):
        e.embed("one string")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):  # the openai backend without a URL
        open_embedder(load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_EMBEDDER_BACKEND": "openai"}))
