"""The router's model: logistic regression on standardized site features, fit and stored here.

Why logistic regression in numpy, hand-written: the hot path scores ~16 sites x 15 features per
question (microseconds as one matrix-vector product; no torch import in the gateway), its output
is a calibrated probability by construction (it minimizes log-loss on the logged outcomes), and
Newton's method (IRLS) on this convex problem is exact and deterministic: the same log gives the
same weights, bit for bit (gateway.query.logistic, which the gate's calibration fits with too).
RAGRoute uses a 2-layer MLP on raw embeddings; with features this few an MLP buys nothing.

On disk (`model.json`, one JSON document): the weights, the standardization, the selection
threshold, FEATURE_NAMES as trained, the training data's sha256 digest, size and positives, and a
sha256 `checksum` over all of it. `version` is derived from the data digest and the fit settings,
so a model names the data it came from. `load_model` returns None (and logs why) for a missing,
unreadable, tampered or incompatible file: routing then falls back to summary matching.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, ClassVar, Sequence

import numpy as np
from pydantic import Field, StrictFloat, StrictInt, StrictStr

from hansa.core.logs import get_logger
from hansa.core.model import FORBID, Wire
from hansa.gateway.query.learned.features import FEATURE_NAMES
from hansa.gateway.query.logistic import fit_logistic

log = get_logger(__name__)

FORMAT = "hansa-router-logreg/1"
DEFAULT_L2 = 1.0


Finite = Annotated[StrictFloat, Field(allow_inf_nan=False)]  # an integer is a number too
Numbers = tuple[Finite, ...]
Total = Annotated[StrictInt, Field(ge=0)]


@dataclass(frozen=True)
class RouterModel(Wire):
    """The model as `model.json` holds it, beside its `format` and `checksum` (`save`, `load_model`)."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "router model"

    version: StrictStr
    feature_names: tuple[StrictStr, ...]
    weights: Numbers
    bias: Finite
    mean: Numbers
    scale: tuple[Annotated[Finite, Field(gt=0.0)], ...]
    threshold: Finite  # call a site when its probability is at least this
    l2: Finite
    data_digest: StrictStr  # sha256 of the training rows (features + labels + question groups)
    rows: Total
    questions: Total
    positives: Total
    target_recall: Finite

    def __post_init__(self) -> None:
        n = len(self.feature_names)
        if any(len(getattr(self, key)) != n for key in ("weights", "mean", "scale")):
            raise ValueError(f"weights, mean and scale must hold one number per feature ({n})")

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """P(site contributes) for each row of x (n x features)."""
        z = ((np.asarray(x, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)) @ np.asarray(self.weights)
        return 1.0 / (1.0 + np.exp(-(z + self.bias)))

    def document(self) -> dict[str, Any]:
        """The file's JSON: the model, its format and the checksum over both."""
        doc = {"format": FORMAT, **self.to_json()}
        doc["checksum"] = _checksum(doc)
        return doc

    def save(self, path: Path) -> Path:
        """Write atomically to `path` and keep a copy under `<dir>/models/<version>.json` (the
        model history: any earlier version can be restored by copying it back)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self.document(), indent=1, sort_keys=True) + "\n"
        history = path.parent / "models" / f"{self.version}.json"
        history.parent.mkdir(exist_ok=True)
        for target in (history, path):
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".model-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
            os.replace(tmp, target)
        return path


def _checksum(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def data_digest(x: np.ndarray, y: np.ndarray, groups: Sequence[str]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(list(FEATURE_NAMES)).encode())
    h.update(np.ascontiguousarray(x, dtype="<f8").tobytes())
    h.update(np.ascontiguousarray(y, dtype="<i1").tobytes())
    # the grouping's shape (row -> first-seen question index), not the digests themselves: those
    # are keyed per gateway (outcomes.py), and the same data must give the same version anywhere
    first: dict[str, int] = {}
    h.update(np.asarray([first.setdefault(g, len(first)) for g in groups], dtype="<i8").tobytes())
    return h.hexdigest()


def calibrate_threshold(p: np.ndarray, y: np.ndarray, groups: Sequence[str], target_recall: float) -> float:
    """The highest threshold at which, per question, the share of its contributing sites with
    probability >= threshold averages at least `target_recall` (questions with no contributing
    site are left out). Why per question: the gateway's goal is gold-site recall per question."""
    by_q: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_q.setdefault(g, []).append(i)
    pos_sets = [np.array([p[i] for i in idx if y[i] == 1]) for idx in by_q.values()]
    pos_sets = [s for s in pos_sets if len(s)]
    if not pos_sets:
        return 0.5
    for t in sorted({float(v) for s in pos_sets for v in s}, reverse=True):
        recall = float(np.mean([np.mean(s >= t) for s in pos_sets]))
        if recall >= target_recall:
            return t
    return 0.0


def fit(x: np.ndarray, y: np.ndarray, groups: Sequence[str], *, l2: float = DEFAULT_L2,
        target_recall: float = 0.95) -> RouterModel:
    """Fit on rows x (features, FEATURE_NAMES order), labels y (1: the site contributed) and the
    question each row belongs to (`groups`, for the threshold). Deterministic."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(FEATURE_NAMES) or len(y) != len(x) or len(groups) != len(x):
        raise ValueError(f"fit: need n x {len(FEATURE_NAMES)} features with n labels and n groups")
    if len(x) == 0 or y.min() == y.max():
        raise ValueError("fit: the log needs both sites that contributed and sites that did not")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0  # a constant feature carries nothing; keep it harmless
    coef, bias = fit_logistic((x - mean) / scale, y, l2)
    digest = data_digest(x, y, groups)
    version = "lr-" + hashlib.sha256(f"{digest}:{l2}:{target_recall}".encode()).hexdigest()[:12]
    model = RouterModel(version, FEATURE_NAMES, tuple(float(v) for v in coef), bias,
                        tuple(float(v) for v in mean), tuple(float(v) for v in scale), 0.5, l2, digest,
                        len(x), len(set(groups)), int(y.sum()), target_recall)
    threshold = calibrate_threshold(model.probabilities(x), y, groups, target_recall)
    return replace(model, threshold=threshold)


def load_model(path: Path) -> RouterModel | None:
    """The model at `path`, or None — with one log line saying why — when it is missing,
    unreadable, tampered with (checksum) or trained on other features."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} document")
        if doc.get("checksum") != _checksum(doc):
            raise ValueError("checksum mismatch (corrupt or edited)")
        model = RouterModel.from_json({k: v for k, v in doc.items() if k not in ("format", "checksum")}, str(path))
        if model.feature_names != FEATURE_NAMES:
            raise ValueError(f"trained on features {list(model.feature_names)}, this gateway computes {list(FEATURE_NAMES)}")
        return model
    except FileNotFoundError:
        log.info("router.model_missing", path=str(path), fallback="summary matching")
    except Exception as exc:  # noqa: BLE001 - any defect in the file means: do not use it
        log.warning("router.model_unusable", path=str(path), reason=str(exc)[:300], fallback="summary matching")
    return None
