"""Any OpenAI-compatible `/v1/embeddings` endpoint behind the embedder port (TEI, vLLM, Ollama,
llama.cpp, a hosted API).

Why: a site with a GPU server already running an embedding model should not embed again on its
CPU. The vectors come from another implementation (another model, or the same weights with other
truncation and pooling), so `model_id` is `openai-compatible:<model>`: never the local backends'
id, so the gateway refuses to mix them with a sentence-transformers or ONNX space. Sites and a
gateway that name the same served model share it.

Requests are batched (`batch_size` texts each), bounded by a timeout and few retries (a dead
endpoint fails fast with a BackendError naming it), and every answer is checked: one vector per
input, in order, all of the expected dimension (configured, or the first answer's). Rows are
L2-normalized here, whatever the server does, so inner product stays cosine.
"""
from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from hansa.adapters.embedder.base import Embedder, checked_texts, unit_rows
from hansa.adapters.openai_api import api_base, client, request
from hansa.core.errors import BackendError, ConfigError, InputError

MODEL_ID_PREFIX = "openai-compatible:"


class OpenAICompatibleEmbedder(Embedder):
    def __init__(self, base_url: str, model: str, api_key: str = "", *, timeout_s: float = 30, batch_size: int = 64,
                 dim: int = 0, max_retries: int = 1) -> None:
        if not model:
            raise ConfigError("the OpenAI-compatible embedder needs the served model's name: set HANSA_EMBEDDER_MODEL")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"embedder batch_size must be a positive integer, got {batch_size!r}")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise ConfigError(f"embedder dim must be 0 (ask the server) or a positive integer, got {dim!r}")
        self._base = api_base(base_url, "embedder base_url")
        self._model = model
        self.model_id = MODEL_ID_PREFIX + model
        self._batch_size = batch_size
        self._dim = dim
        self._dim_lock = threading.Lock()
        self._client = client(self._base, api_key, timeout_s, max_retries)

    @property
    def base_url(self) -> str:
        return self._base

    @property
    def dim(self) -> int:  # type: ignore[override]
        """The configured dimension, else the one the endpoint answers with (asked once)."""
        if not self._dim:
            self.embed(["dimension probe"])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = checked_texts(texts)
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self._batch_size):
            rows.append(self._batch(texts[start:start + self._batch_size]))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return unit_rows(np.concatenate(rows))

    def _batch(self, texts: list[str]) -> np.ndarray:
        # Most servers refuse an empty input string; a lone space embeds as "nothing" the same way.
        payload = [text if text.strip() else " " for text in texts]
        response: Any = request(
            lambda: self._client.embeddings.create(model=self._model, input=payload, encoding_format="float"),
            what=f"embeddings for {len(payload)} texts", service="embedding", base=self._base, env="HANSA_EMBEDDER",
        )
        data = sorted(getattr(response, "data", None) or [], key=lambda item: item.index)
        if [item.index for item in data] != list(range(len(payload))):
            raise BackendError(
                f"the embedding endpoint {self._base} answered {len(data)} vectors for {len(payload)} texts "
                f"(model {self._model!r}): indexes {[item.index for item in data][:8]}..."
            )
        try:
            vectors = np.asarray([item.embedding for item in data], dtype=np.float32)
        except (TypeError, ValueError) as exc:  # ragged or non-numeric rows
            raise BackendError(f"the embedding endpoint {self._base} returned malformed vectors: {exc}") from exc
        if vectors.ndim != 2 or not np.isfinite(vectors).all():
            raise BackendError(f"the embedding endpoint {self._base} returned vectors that are ragged or not finite")
        with self._dim_lock:
            if not self._dim:
                self._dim = int(vectors.shape[1])
        if vectors.shape[1] != self._dim:
            raise BackendError(
                f"the embedding endpoint {self._base} returned {vectors.shape[1]}-dimensional vectors for model "
                f"{self._model!r}, expected {self._dim}: check HANSA_EMBEDDER_MODEL and HANSA_EMBEDDER_DIM"
            )
        return vectors
