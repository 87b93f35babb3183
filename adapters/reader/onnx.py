"""The packaged reader on ONNX Runtime: a cross-encoder that scores (question, sentence) and points
at the answer's words, without torch.

Files (a model directory; the package ships one in `model/`, made by `python -m
hansa.evaluation.reader_train`): `reader.json` names the graph and tokenizer with their sha256 and
size, the token cap and the calibration the gateway ships (floor, floors per kind of question); every file is
checked against it before use, so a truncated or swapped graph is refused naming the file and the
command that makes it, never replaced by a weaker judgement in silence.

Reading: pairs are tokenized "[CLS] question [SEP] sentence [SEP]" (the sentence truncated at the
cap), run in micro-batches of similar token length (plan_batches), `answers` passes through a
sigmoid, and the span is the best (start, end) over the sentence's tokens at most MAX_SPAN_TOKENS
apart, mapped back to the sentence's characters by the tokenizer's offsets.

Why micro-batches: the graph's cost is about linear in the tokens it is fed, padding included, and
one batch of a pool padded to its longest pair fed about twice the pairs' own tokens (20 SQuAD
sentences: 87 tokens a row padded, 45 real); a run of its own for every pair pays ONNX Runtime's
fixed cost per run instead. The graph is dynamically quantized (one int8 scale per activation
tensor, padding rows included), so a pair's score moves with the pairs it is read with, under any
batching: micro-batches move scores as much as reading the same sentences in a pool of 8 or of 20
already did (benchmarks/README.md, "The reader", gives both).
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

from hansa.adapters.reader.base import Reading
from hansa.core.errors import BackendError
from hansa.core.files import file_sha256

PACKAGED_DIR = Path(__file__).resolve().parent / "model"
META = "reader.json"
MAX_SPAN_TOKENS = 30
BATCH = 32  # pairs per run at most
# ONNX Runtime's fixed cost of one run, in tokens' worth of the graph's work (~1 ms against ~0.1 ms a
# token on one core of the 2-core bench machine, fit over batch shapes): plan_batches pads a pair
# rather than start a run for it when padding costs fewer tokens than this
RUN_COST_TOKENS = 12
PADDED_RUN_COST = 10**9  # plan_batches then makes the fewest runs: the one padded batch of before
TRAIN_COMMAND = ("python -m hansa.evaluation.reader_train --squad ../shared/datasets/squad --out BASE, then "
                 "python -m hansa.evaluation.reader_train --squad ../shared/datasets/squad --stage contrast --init BASE "
                 "--questions 4000 --lr 2e-5 --out DIR, then "
                 "python -m hansa.evaluation.reader DIR --squad ../shared/datasets/squad --write, then "
                 "python -m hansa.evaluation.reader_kinds DIR --squad ../shared/datasets/squad "
                 "--mtrag ../shared/datasets/mtrag --write (the floors per kind of question)")

_CACHE: dict[tuple[str, int, int], tuple[Any, Any]] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class ReaderFiles:
    graph: Path
    tokenizer: Path
    meta: dict[str, Any]

    @property
    def sha256(self) -> str:
        return str(self.meta["graph"]["sha256"])


def load_files(model_dir: Path | str | None = None, *, verify: bool = True) -> ReaderFiles:
    """The model directory's files, each checked against reader.json (size, then sha256: hashed
    once per version of the file, so building another reader on it does not read ~23 MB again)."""
    root = Path(model_dir) if model_dir else PACKAGED_DIR
    meta_path = root / META
    if not meta_path.is_file():
        raise BackendError(f"no reader at {root}: {meta_path} is missing; make one with {TRAIN_COMMAND}")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        entries = {k: meta[k] for k in ("graph", "tokenizer")}
        paths = {k: root / str(v["file"]) for k, v in entries.items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise BackendError(f"{meta_path} is not a reader description ({exc}); make one with {TRAIN_COMMAND}") from exc
    for key, path in paths.items():
        want = entries[key]
        if not path.is_file():
            raise BackendError(f"the reader's {key} {path} is missing; make it with {TRAIN_COMMAND}")
        if verify and (path.stat().st_size != int(want["size"]) or file_sha256(path) != want["sha256"]):
            raise BackendError(f"the reader's {key} {path} does not match {meta_path} (sha256 {want['sha256']}): "
                               f"it is truncated or was replaced; reinstall hansa or remake it with {TRAIN_COMMAND}")
    return ReaderFiles(paths["graph"], paths["tokenizer"], meta)


def _runtime(files: ReaderFiles, threads: int, max_length: int = 0) -> tuple[Any, Any]:
    """The session and tokenizer, shared by every reader on the same graph, threads and token cap
    (`max_length` 0: the model's own, reader.json's `max_length`)."""
    max_length = max_length or int(files.meta.get("max_length", 96))
    key = (str(files.graph), threads, max_length)
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            if threads:
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
            try:
                session = ort.InferenceSession(str(files.graph), options, providers=["CPUExecutionProvider"])
                tokenizer = Tokenizer.from_file(str(files.tokenizer))
            except Exception as exc:  # onnxruntime and tokenizers raise their own types: all mean "cannot load"
                raise BackendError(f"cannot load the reader ({files.graph}): {exc}; remake it with {TRAIN_COMMAND}") from exc
            tokenizer.enable_truncation(max_length=max_length, strategy="only_second")
            tokenizer.no_padding()  # read() pads each micro-batch to its own longest pair
            found = _CACHE[key] = (session, tokenizer)
    return found


def best_spans(start: np.ndarray, end: np.ndarray, allowed: np.ndarray,
               max_tokens: int = MAX_SPAN_TOKENS) -> np.ndarray:
    """Per row, (i, j) with i <= j < i + max_tokens, both `allowed`, maximizing start[i] + end[j];
    (-1, -1) for a row with no allowed token. Ties go to the smallest i, then the smallest j.

    Every row at once over a (rows, tokens, max_tokens) window rather than a tokens x tokens table
    per row: the window holds only the pairs a span may be."""
    start, end, allowed = np.atleast_2d(start), np.atleast_2d(end), np.atleast_2d(allowed)
    rows, width = start.shape
    s = np.where(allowed, start, -np.inf)
    e = np.where(allowed, end, -np.inf)
    tail = np.full((rows, max_tokens - 1), -np.inf, dtype=e.dtype)
    windows = np.lib.stride_tricks.sliding_window_view(np.concatenate([e, tail], axis=1), max_tokens, axis=1)
    flat = np.argmax((s[:, :, None] + windows).reshape(rows, -1), axis=1)
    spans = np.stack([flat // max_tokens, flat // max_tokens + flat % max_tokens], axis=1)
    spans[~allowed.any(axis=1)] = -1
    return spans


def best_span(start: np.ndarray, end: np.ndarray, allowed: np.ndarray, max_tokens: int = MAX_SPAN_TOKENS) -> tuple[int, int]:
    """best_spans for one row."""
    i, j = best_spans(start, end, allowed, max_tokens)[0]
    return int(i), int(j)


def plan_batches(lengths: Sequence[int], run_cost: int = RUN_COST_TOKENS, max_batch: int = BATCH) -> list[list[int]]:
    """The indices of `lengths` in runs that cost the fewest tokens' worth, each run charged
    `run_cost` plus its rows times its longest row: runs are consecutive in order of length
    (longest first), found by dynamic programming over the cut points. A `run_cost` above
    `max_batch` times the longest length gives the fewest runs, each padded to its longest: for up
    to `max_batch` pairs the one padded batch the reader ran before micro-batches; a negative one
    reads every pair alone (a score then independent of the other pairs, at ~1 ms a pair)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    n = len(order)
    cost = [0.0] + [float("inf")] * n  # cost[k]: the cheapest plan of the k longest
    cut = [0] * (n + 1)
    for k in range(1, n + 1):
        for first in range(max(0, k - max_batch), k):
            c = cost[first] + run_cost + (k - first) * lengths[order[first]]
            if c < cost[k]:
                cost[k], cut[k] = c, first
    runs: list[list[int]] = []
    k = n
    while k > 0:
        runs.append(order[cut[k]:k])
        k = cut[k]
    return runs[::-1]


def open_reader(name: str) -> "OnnxReader | None":
    """What a `reader` setting names: "none" (or empty) -> None, "packaged" -> the shipped model,
    anything else -> that model directory."""
    key = name.strip().lower()
    if key in ("", "none", "off"):
        return None
    return OnnxReader(None if key == "packaged" else Path(name).expanduser())


class OnnxReader:
    """The Reader port on a model directory (default: the packaged reader)."""

    def __init__(self, model_dir: Path | str | None = None, *, threads: int = 0,
                 run_cost: int = RUN_COST_TOKENS, max_length: int = 0) -> None:
        """`run_cost`: plan_batches' charge per run; PADDED_RUN_COST reads in the fewest padded
        batches, as the reader did before micro-batches (scripts/bench_reading.py measures both).
        `max_length`: a token cap below the model's own, for measuring what a shorter cap costs
        (scripts/bench_reading.py --cap); 0, the default, reads as the model was calibrated."""
        self.files = load_files(model_dir)
        self.meta = self.files.meta
        self.name = str(self.meta.get("name", "hansa-reader"))
        self.model_sha256 = self.files.sha256
        self._threads = threads
        self._run_cost = run_cost
        self._max_length = max_length

    @property
    def calibration(self) -> dict[str, Any]:
        """What the fit-split calibration chose: `floor`, and `floors` per kind of question."""
        return dict(self.meta.get("calibration", {}))

    def read(self, question: str, sentences: Sequence[str]) -> list[Reading]:
        if not sentences:
            return []
        session, tokenizer = _runtime(self.files, self._threads, self._max_length)
        sep, pad = tokenizer.token_to_id("[SEP]"), tokenizer.token_to_id("[PAD]") or 0
        out: list[Reading] = [Reading(0.0)] * len(sentences)
        todo = [i for i, s in enumerate(sentences) if s and s.strip()]
        encodings = tokenizer.encode_batch([(question, sentences[i]) for i in todo])
        for run in plan_batches([len(e.ids) for e in encodings], self._run_cost):
            width = max(len(encodings[r].ids) for r in run)
            ids = np.full((len(run), width), pad, dtype=np.int64)
            types = np.zeros_like(ids)  # padding's token type is 0, as the tokenizer pads
            mask = np.zeros_like(ids)
            for row, r in enumerate(run):
                n = len(encodings[r].ids)
                ids[row, :n], types[row, :n], mask[row, :n] = encodings[r].ids, encodings[r].type_ids, 1
            answers, start, end = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
            probs = 1.0 / (1.0 + np.exp(-answers.astype(np.float64)))
            spans = best_spans(start, end, (types == 1) & (mask == 1) & (ids != sep))
            for row, r in enumerate(run):
                i, (a, b) = todo[r], spans[row]
                if a < 0:
                    out[i] = Reading(float(probs[row]))
                    continue
                lo, hi = encodings[r].offsets[a][0], encodings[r].offsets[b][1]
                out[i] = Reading(float(probs[row]), sentences[i][lo:hi], lo, hi)
        return out
