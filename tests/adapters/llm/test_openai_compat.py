"""OpenAICompatibleLLM through the real OpenAI protocol: a local SmolLM2 server, a dead port, a mute one."""
from __future__ import annotations

import pytest

from hansa.adapters.llm.openai_compat import OpenAICompatibleLLM, api_base
from hansa.core.errors import BackendError, ConfigError, InputError

ASK = [
    {"role": "system", "content": "You answer in one short sentence."},
    {"role": "user", "content": "What is the capital of France?"},
]


@pytest.mark.llm
def test_empty_model_means_the_first_listed_one(llm_base_url: str, llm_model: str) -> None:
    llm = OpenAICompatibleLLM(llm_base_url)
    assert llm.base_url == llm_base_url + "/v1"
    assert llm.model_id == llm_model


@pytest.mark.llm
def test_complete_returns_the_assistant_text_deterministically(llm_base_url: str, llm_model: str) -> None:
    llm = OpenAICompatibleLLM(llm_base_url + "/v1", model=llm_model, timeout_s=60)
    first = llm.complete(ASK, max_tokens=24, temperature=0.0)
    assert isinstance(first, str) and first.strip()
    assert "paris" in first.lower()
    assert llm.complete(ASK, max_tokens=24, temperature=0.0) == first


@pytest.mark.llm
def test_max_tokens_bounds_the_answer(llm_base_url: str) -> None:
    llm = OpenAICompatibleLLM(llm_base_url)
    short = llm.complete([{"role": "user", "content": "Write a long story about the sea."}], max_tokens=3)
    assert 0 < len(short.split()) <= 3


@pytest.mark.llm
def test_http_errors_become_backend_errors(llm_base_url: str, llm_model: str) -> None:
    llm = OpenAICompatibleLLM(llm_base_url + "/no/such/api", model=llm_model, max_retries=0)
    with pytest.raises(BackendError) as err:
        llm.complete(ASK, max_tokens=4)
    assert "/no/such/api" in str(err.value)


def test_bad_messages_are_refused_before_any_request(dead_llm_url: str) -> None:
    llm = OpenAICompatibleLLM(dead_llm_url, model="any", max_retries=0)  # a request would fail
    for messages in ([], [{"role": "tool", "content": "x"}], [{"role": "user"}], [{"role": "user", "content": 3}]):
        with pytest.raises(InputError):
            llm.complete(messages)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        llm.complete(ASK, max_tokens=0)


def test_a_dead_endpoint_is_a_backend_error_naming_it(dead_llm_url: str) -> None:
    url = dead_llm_url
    llm = OpenAICompatibleLLM(url, model="any", timeout_s=2, max_retries=0)
    with pytest.raises(BackendError) as err:
        llm.complete(ASK)
    assert url + "/v1" in str(err.value) and "cannot reach" in str(err.value)
    with pytest.raises(BackendError):
        OpenAICompatibleLLM(url, timeout_s=2, max_retries=0).model_id  # model discovery fails the same way


def test_a_silent_endpoint_times_out_as_a_backend_error(mute_llm_url: str) -> None:
    llm = OpenAICompatibleLLM(mute_llm_url, model="any", timeout_s=0.5, max_retries=0)
    with pytest.raises(BackendError) as err:
        llm.complete(ASK)
    assert "timed out" in str(err.value)


def test_api_base_normalization() -> None:
    assert api_base("http://127.0.0.1:8080") == "http://127.0.0.1:8080/v1"
    assert api_base("http://127.0.0.1:8080/") == "http://127.0.0.1:8080/v1"
    assert api_base("https://api.example.com/openai/v1/") == "https://api.example.com/openai/v1"
    for bad in ("127.0.0.1:8080", "ftp://host/v1", "http://"):
        with pytest.raises(ConfigError):
            api_base(bad)
