"""The packaged reader on ONNX Runtime: a cross-encoder that scores (question, sentence) and points
at the answer's words, without torch.

Files (a model directory; the package ships one in `model/`, made by `python -m
hansa.evaluation.reader_train`): `reader.json` names the graph and tokenizer with their sha256 and
size, the token cap and the calibration the gateway ships (floor, floors per kind of question); every file is
checked against it before use, so a truncated or swapped graph is refused naming the file and the
command that makes it, never replaced by a weaker judgement in silence.

Reading: pairs are tokenized "[CLS] question [SEP] sentence [SEP]" (the sentence truncated at the
cap), run in batches of similar length, `answers` passes through a sigmoid, and the span is the
best (start, end) over the sentence's tokens at most MAX_SPAN_TOKENS apart, mapped back to the
sentence's characters by the tokenizer's offsets.
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
BATCH = 32
TRAIN_COMMAND = ("python -m hansa.evaluation.reader_train --squad ../shared/datasets/squad --out BASE, then "
                 "python -m hansa.evaluation.reader_train --squad ../shared/datasets/squad --stage contrast --init BASE "
                 "--questions 4000 --lr 2e-5 --out DIR, then "
                 "python -m hansa.evaluation.reader DIR --squad ../shared/datasets/squad --write, then "
                 "python -m hansa.evaluation.reader_kinds DIR --squad ../shared/datasets/squad "
                 "--mtrag ../shared/datasets/mtrag --write (the floors per kind of question)")

_CACHE: dict[tuple[str, int], tuple[Any, Any]] = {}
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


def _runtime(files: ReaderFiles, threads: int) -> tuple[Any, Any]:
    key = (str(files.graph), threads)
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
            tokenizer.enable_truncation(max_length=int(files.meta.get("max_length", 96)), strategy="only_second")
            pad = tokenizer.token_to_id("[PAD]")
            tokenizer.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
            found = _CACHE[key] = (session, tokenizer)
    return found


def best_span(start: np.ndarray, end: np.ndarray, allowed: np.ndarray, max_tokens: int = MAX_SPAN_TOKENS) -> tuple[int, int]:
    """(i, j), i <= j < i + max_tokens, both `allowed`, maximizing start[i] + end[j]; (-1, -1) if none."""
    idx = np.flatnonzero(allowed)
    if idx.size == 0:
        return -1, -1
    s, e = start[idx], end[idx]
    total = s[:, None] + e[None, :]
    gap = idx[None, :] - idx[:, None]
    total = np.where((gap >= 0) & (gap < max_tokens), total, -np.inf)
    i, j = np.unravel_index(int(np.argmax(total)), total.shape)
    return int(idx[i]), int(idx[j])


def open_reader(name: str) -> "OnnxReader | None":
    """What a `reader` setting names: "none" (or empty) -> None, "packaged" -> the shipped model,
    anything else -> that model directory."""
    key = name.strip().lower()
    if key in ("", "none", "off"):
        return None
    return OnnxReader(None if key == "packaged" else Path(name).expanduser())


class OnnxReader:
    """The Reader port on a model directory (default: the packaged reader)."""

    def __init__(self, model_dir: Path | str | None = None, *, threads: int = 0) -> None:
        self.files = load_files(model_dir)
        self.meta = self.files.meta
        self.name = str(self.meta.get("name", "hansa-reader"))
        self.model_sha256 = self.files.sha256
        self._threads = threads

    @property
    def calibration(self) -> dict[str, Any]:
        """What the fit-split calibration chose: `floor`, and `floors` per kind of question."""
        return dict(self.meta.get("calibration", {}))

    def read(self, question: str, sentences: Sequence[str]) -> list[Reading]:
        if not sentences:
            return []
        session, tokenizer = _runtime(self.files, self._threads)
        out: list[Reading] = [Reading(0.0)] * len(sentences)
        todo = [i for i, s in enumerate(sentences) if s and s.strip()]
        todo.sort(key=lambda i: -len(sentences[i]))
        for at in range(0, len(todo), BATCH):
            batch = todo[at:at + BATCH]
            encodings = tokenizer.encode_batch([(question, sentences[i]) for i in batch])
            feed = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}
            answers, start, end = session.run(None, feed)
            probs = 1.0 / (1.0 + np.exp(-answers.astype(np.float64)))
            for row, i in enumerate(batch):
                enc = encodings[row]
                allowed = np.array([t == 1 and m == 1 and tok != "[SEP]" for t, m, tok in
                                    zip(enc.type_ids, enc.attention_mask, enc.tokens)])
                a, b = best_span(start[row], end[row], allowed)
                if a < 0:
                    out[i] = Reading(float(probs[row]))
                    continue
                lo, hi = enc.offsets[a][0], enc.offsets[b][1]
                out[i] = Reading(float(probs[row]), sentences[i][lo:hi], lo, hi)
        return out
