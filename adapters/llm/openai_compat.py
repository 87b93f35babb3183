"""Any OpenAI-compatible chat endpoint behind the LLM port (vLLM, llama.cpp, Ollama, a hosted API).

Local servers usually need no key and serve a single model, so both are optional: an empty key is
sent as a placeholder and an empty model name means "the first model the endpoint lists".
Retries are few and timeouts explicit: every LLM stage has an extractive fallback, so failing fast
with a clear BackendError is worth more than waiting out a dead endpoint.
"""
from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

from hansa.adapters.llm.base import LLM, Completion, estimate_tokens
from hansa.adapters.openai_api import api_base, client, request
from hansa.core.errors import BackendError, InputError

__all__ = ["OpenAICompatibleLLM", "api_base"]

ROLES = ("system", "user", "assistant")


class OpenAICompatibleLLM(LLM):
    def __init__(self, base_url: str, model: str = "", api_key: str = "", timeout_s: float = 60, *, max_retries: int = 1) -> None:
        self._base = api_base(base_url)
        self._model = model
        self._model_lock = threading.Lock()
        self._client = client(self._base, api_key, timeout_s, max_retries)

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
        return request(call, what=what, service="LLM", base=self._base, env="HANSA_LLM")

    def complete(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 512, temperature: float = 0.0) -> str:
        return self.chat(messages, max_tokens=max_tokens, temperature=temperature).text

    def chat(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = 512, temperature: float = 0.0) -> Completion:
        """The text and the endpoint's own `usage` counts (estimated from words only when it sends none)."""
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
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        prompt, completion = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
        if isinstance(prompt, int) and isinstance(completion, int):
            return Completion(text, prompt, completion, estimated=False)
        return Completion(text, *estimate_tokens(payload, text), estimated=True)
