"""What every OpenAI-compatible client in hansa shares: the base URL rule and the error mapping.

Both the LLM port (chat completions) and the embedder port (`/v1/embeddings`) talk to servers such
as vLLM, TEI, llama.cpp or Ollama through the `openai` client; a dead, slow or refusing endpoint
must surface the same way from both: a BackendError naming the endpoint and the setting to check.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit

from hansa.core.errors import BackendError, ConfigError

T = TypeVar("T")


def api_base(base_url: str, setting: str = "LLM base_url") -> str:
    """`http://host:port` -> `http://host:port/v1`; a URL that already has a path is kept as given."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{setting} {base_url!r} must be an http(s) URL such as http://127.0.0.1:8080/v1")
    trimmed = base_url.rstrip("/")
    return trimmed if parts.path.strip("/") else trimmed + "/v1"


def request(call: Callable[[], T], *, what: str, service: str, base: str, env: str) -> T:
    """`call()`, with the openai client's errors turned into BackendErrors a person can act on.

    `service` names the endpoint ("LLM", "embedding"), `env` the HANSA_<SECTION> prefix of its settings."""
    import openai

    try:
        return call()
    except openai.APITimeoutError as exc:
        raise BackendError(f"the {service} endpoint {base} timed out ({what}); raise {env}_TIMEOUT_S or check the server") from exc
    except openai.APIConnectionError as exc:
        raise BackendError(f"cannot reach the {service} endpoint {base} ({what}): {exc}; check {env}_BASE_URL and that the server runs") from exc
    except openai.APIStatusError as exc:
        raise BackendError(f"the {service} endpoint {base} refused {what} with HTTP {exc.status_code}: {exc.message}") from exc
    except openai.OpenAIError as exc:
        raise BackendError(f"the {service} endpoint {base} failed ({what}): {exc}") from exc


def client(base: str, api_key: str, timeout_s: float, max_retries: int) -> Any:
    """An `openai.OpenAI` client; local servers need no key, so an empty one is sent as a placeholder."""
    import openai

    return openai.OpenAI(base_url=base, api_key=api_key or "not-needed", timeout=float(timeout_s), max_retries=max_retries)
