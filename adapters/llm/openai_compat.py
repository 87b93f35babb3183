"""Any OpenAI-compatible chat endpoint behind the LLM port (vLLM, llama.cpp, Ollama, a hosted API).

Local servers usually need no key and serve a single model, so both are optional: an empty key is
sent as a placeholder and an empty model name means "the first model the endpoint lists".
Retries are few and timeouts explicit: every LLM stage has an extractive fallback, so failing fast
with a clear BackendError is worth more than waiting out a dead endpoint.
"""
from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from hansa.adapters.llm.base import LLM
from hansa.core.errors import BackendError, ConfigError, InputError

ROLES = ("system", "user", "assistant")


def api_base(base_url: str) -> str:
    """`http://host:port` -> `http://host:port/v1`; a URL that already has a path is kept as given."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"LLM base_url {base_url!r} must be an http(s) URL such as http://127.0.0.1:8080/v1")
    trimmed = base_url.rstrip("/")
    return trimmed if parts.path.strip("/") else trimmed + "/v1"


class OpenAICompatibleLLM(LLM):
    def __init__(self, base_url: str, model: str = "", api_key: str = "", timeout_s: float = 60, *, max_retries: int = 1) -> None:
        import openai

        self._base = api_base(base_url)
        self._model = model
        self._model_lock = threading.Lock()
        self._client = openai.OpenAI(
            base_url=self._base, api_key=api_key or "not-needed", timeout=float(timeout_s), max_retries=max_retries
        )

    @property
    def base_url(self) -> str:
        return self._base

    @property
    def model_id(self) -> str:  # type: ignore[override]
        """The configured model, else the endpoint's first listed one (asked once)."""
        with self._model_lock:
            if not self._model:
                models = self._request("list models", lambda: self._client.models.list())
                ids = [m.id for m in models.data]
                if not ids:
                    raise BackendError(f"the LLM endpoint {self._base} lists no models: set HANSA_LLM_MODEL")
                self._model = ids[0]
            return self._model

    def _request(self, what: str, call: Any) -> Any:
        import openai

        try:
            return call()
        except openai.APITimeoutError as exc:
            raise BackendError(f"the LLM endpoint {self._base} timed out ({what}); raise HANSA_LLM_TIMEOUT_S or check the server") from exc
        except openai.APIConnectionError as exc:
            raise BackendError(f"cannot reach the LLM endpoint {self._base} ({what}): {exc}; check HANSA_LLM_BASE_URL and that the server runs") from exc
        except openai.APIStatusError as exc:
            raise BackendError(f"the LLM endpoint {self._base} refused {what} with HTTP {exc.status_code}: {exc.message}") from exc
        except openai.OpenAIError as exc:
            raise BackendError(f"the LLM endpoint {self._base} failed ({what}): {exc}") from exc

    def complete(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 512, temperature: float = 0.0) -> str:
        payload = []
        for i, message in enumerate(messages):
            role, content = message.get("role"), message.get("content")
            if role not in ROLES or not isinstance(content, str):
                raise InputError(f"message #{i} needs role in {ROLES} and string content, got {dict(message)!r}")
            payload.append({"role": role, "content": content})
        if not payload:
            raise InputError("complete() needs at least one message")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise InputError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        model = self.model_id
        response = self._request(
            "chat completion",
            lambda: self._client.chat.completions.create(
                model=model, messages=payload, max_tokens=max_tokens, temperature=float(temperature)
            ),
        )
        if not response.choices:
            raise BackendError(f"the LLM endpoint {self._base} returned no choices for model {model!r}")
        return response.choices[0].message.content or ""
