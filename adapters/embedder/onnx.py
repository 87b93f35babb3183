"""all-MiniLM-L6-v2 (or any mean-pooled sentence-transformers model) on ONNX Runtime, without torch.

Why: the same vectors as sentence-transformers, at a fraction of the start-up time and memory and
at a lower per-query latency (benchmarks/embed.json). A process on this path imports only
onnxruntime, the `tokenizers` fast tokenizer and numpy; the graph is exported once per model
version, in a child process, into a digest-keyed cache (onnx_export.py).

The pipeline reproduces sentence-transformers' Transformer -> Pooling(mean) -> Normalize modules:
truncation at the model's max_seq_length (256 word pieces), padding to the longest text of a
batch, mean over the attention mask (sum / max(count, 1e-9)) and L2 normalization. `model_id` and
`dim` are those of the sentence-transformers backend, so a site on ONNX and a gateway on
sentence-transformers (or the reverse) share one embedding space; tests/adapters/embedder/test_onnx.py
holds every vector to cosine >= 0.999 of the reference.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Sequence

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no tokenizer thread pools surviving a fork

import numpy as np

from hansa.adapters.embedder.base import Embedder, checked_texts, unit_rows
from hansa.adapters.embedder.local_model import max_seq_length, mean_pooled_dim, resolve_model
from hansa.adapters.embedder.onnx_export import INPUTS, VARIANTS, default_cache_dir, ensure_exported
from hansa.core.errors import BackendError, InputError

_RUNTIMES: dict[tuple[str, int], tuple[Any, Any]] = {}  # (graph, threads) -> (InferenceSession, Tokenizer)
_RUNTIMES_LOCK = threading.Lock()


def _open_runtime(graph: Path, model_dir: Path, threads: int) -> tuple[Any, Any]:
    """One session and tokenizer per graph and thread count, shared by every instance in the process."""
    key = (str(graph), threads)
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3  # errors only: the terminal is the admin's
            # No spin-waiting between ops: on small shared machines spinning threads steal the cores
            # the site's other work (and the other thread of the same run) needs.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            if threads:
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
            try:
                session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
                tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            except Exception as exc:  # onnxruntime and tokenizers raise their own types; all mean "cannot load"
                raise BackendError(f"cannot load the ONNX embedder ({graph}, {model_dir}): {exc}") from exc
            tokenizer.enable_truncation(max_length=max_seq_length(model_dir))
            pad_id = tokenizer.token_to_id("[PAD]")
            tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")  # to the longest
            runtime = _RUNTIMES[key] = (session, tokenizer)
    return runtime


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling: the average of the unmasked token vectors."""
    weights = mask[:, :, None].astype(np.float32)
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)


class OnnxEmbedder(Embedder):
    def __init__(self, model: str = "all-MiniLM-L6-v2", *, cache_dir: str | os.PathLike[str] | None = None, batch_size: int = 64,
                 variant: str = "fp32", threads: int = 0) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"embedder batch_size must be a positive integer, got {batch_size!r}")
        if variant not in VARIANTS:
            raise InputError(f"ONNX variant {variant!r} is not one of {', '.join(VARIANTS)}")
        self._path, self.model_id = resolve_model(model)
        dim = mean_pooled_dim(self._path)
        if dim is None:
            raise BackendError(
                f"{self._path} is not a Transformer + mean Pooling model, the only kind the ONNX backend runs: "
                f"set HANSA_EMBEDDER_BACKEND=sentence-transformers"
            )
        self.dim = dim
        self._cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._batch_size = batch_size
        self._variant = variant
        self._threads = threads
        self._graph: Path | None = None

    @property
    def variant(self) -> str:
        return self._variant

    @property
    def path(self) -> Path:
        return self._path

    def _runtime(self) -> tuple[Any, Any]:
        if self._graph is None:  # first use: export (once per model version) or find the cached graph
            self._graph = ensure_exported(self._path, self._cache_dir, self._variant)
        return _open_runtime(self._graph, self._path, self._threads)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = checked_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session, tokenizer = self._runtime()
        # Longest first, as sentence-transformers batches: similar lengths pad little.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            batch = order[start:start + self._batch_size]
            encodings = tokenizer.encode_batch([texts[i] for i in batch])
            feed = {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
            }
            assert tuple(feed) == INPUTS
            (hidden,) = session.run(None, feed)
            out[batch] = mean_pool(hidden, feed["attention_mask"])
        return unit_rows(out)
