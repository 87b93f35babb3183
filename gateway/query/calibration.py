"""Calibrated confidences for the gate, abstention and escalation: a logistic model over Assessment features.

Why a logistic regression: the features (query.assess) are few and roughly monotone in "the
evidence answers the question", and what the gate and abstention need is a *probability* whose
threshold can be set to a target rate (in-domain escalation, answerable coverage) on the fit split.
gateway.query.logistic fits it (scikit-learn's objective, class-balanced, without scikit-learn);
scoring at query time is one dot product in numpy.

The calibration file (JSON, `[gateway] calibration_file` in the gateway home) holds one model per
decision, each with everything needed to score and to know what it was fit on:

    {"version": 1,
     "gate":    {"features": [...], "mean": [...], "scale": [...], "coefficients": [...],
                 "intercept": b, "threshold": t, "fit": {"digest": "sha256:...", "size": n, ...}},
     "abstain": {... the same shape ...},
     "escalate": {... the same shape ...}, "escalate_schedule": [1, 2, 3, 4, 6, 8, 12, 16],
     "tiers":   {"high_gap": h, "moderate_gap": m, "potential_gap": p, ..., "fit": {...}}}

`escalate` is P(the sites asked so far hold all the evidence) over what every site asked returned, and
the schedule the cumulative number of sites the rounds grow through (query.escalate). `tiers` are
SCOUT-RAG's tier cut-offs (query.tiers.TierCutoffs) fit on the fit split's gold sites; without
them the tiered router keeps its gaps around `[gateway] site_margin`.

The file's shape is `CalibrationFile`, a model of core/model.py: unknown keys, wrong types and
non-finite numbers are refused naming the field ("calibration: 'gate.threshold': ..."). A
`Calibration` is what the gateway uses; `Calibration.from_json`/`to_json` go through the file.

Loading never raises: a missing, unreadable or malformed file (or one naming a feature the gateway
does not compute) yields `Calibration()` — no models, so the gate always escalates and abstention
falls back to its evidence rule — and one clear log line saying why.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Mapping, Sequence

import numpy as np
from pydantic import Field, StrictFloat, StrictInt

from hansa.core.errors import InputError
from hansa.core.model import FORBID, Wire, omitted_when_none
from hansa.gateway.query.assess import Assessment
from hansa.gateway.query.tiers import TierCutoffs
from hansa.gateway.query.logistic import balanced_weights, fit_logistic

log = logging.getLogger(__name__)

VERSION = 1
CALIBRATION_FILE = "gate-calibration.json"
# Features added after fit rows were first committed: a model weighs one only when every row it is
# fit on carries it (rows collected before it existed do not, and 0.0 in its place would be false).
LATER_FEATURES = ("weighted_coverage", "routing_deficit")
# What a model may weigh: Assessment's numeric fields (counts included: "how many passages").
FEATURES = ("best_relevance", "margin", "coverage", "agreement", "best_summary", "sites_answered", "passages",
            "routing_gap", "relevance_gain", "coverage_gain", "sites_since_best") + LATER_FEATURES
# The gate and abstention read the evidence in hand; escalation also what the newest round added.
EVIDENCE_FEATURES = FEATURES[:8] + LATER_FEATURES
# What only a gateway with a reader knows, after fusion: the best reader score over what its answer
# read. Abstention fit jointly on the evidence and this (`Calibration.read_abstain`) judges then.
READER_FEATURES = ("reader_best",)
# What does not grow with the federation (how many sites, passages, how routing spreads): a model over
# these and the reader's score can travel between federations, so the reader's card ships one fit on
# two data sets' fit rows (evaluation/reader_abstain.py) for gateways that fit none of their own.
SCALE_FREE_FEATURES = ("best_relevance", "margin", "coverage", "agreement")
MODELS = ("gate", "abstain", "escalate")

Feature = Literal[FEATURES + READER_FEATURES]  # type: ignore[valid-type]
Finite = Annotated[StrictFloat, Field(allow_inf_nan=False)]  # an integer is a number too
Probability = Annotated[Finite, Field(ge=0.0, le=1.0)]
# What a model, the tiers or the reader's floor were fit on (gateway.query.calibrate): provenance
# for people, free-form; the gateway reads only `model_sha256` there (the reader a floor or
# `read_abstain` was fit with: another reader ignores them).
Fit = Mapping[str, Any]


def feature_vector(assessment: Assessment, names: Sequence[str]) -> np.ndarray:
    return np.array([float(getattr(assessment, n)) for n in names], dtype=np.float64)


@dataclass(frozen=True)
class LogisticModel(Wire):
    """P(positive | features) = sigmoid(coefficients . (x - mean) / scale + intercept)."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "model"

    features: Annotated[tuple[Feature, ...], Field(min_length=1)]
    mean: tuple[Finite, ...]
    scale: tuple[Annotated[Finite, Field(gt=0.0)], ...]
    coefficients: tuple[Finite, ...]
    intercept: Finite
    threshold: Probability
    fit: Fit = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.features)
        for key in ("mean", "scale", "coefficients"):
            if len(getattr(self, key)) != n:
                raise ValueError(f"{key!r} must hold one number per feature ({n})")

    def probability(self, assessment: Assessment) -> float:
        return self._sigmoid(feature_vector(assessment, self.features))

    def score(self, values: Mapping[str, float]) -> float:
        """The probability from named values (a feature absent counts 0.0): for features no
        Assessment holds (READER_FEATURES) and for fit rows."""
        return self._sigmoid(np.array([float(values.get(n, 0.0)) for n in self.features], dtype=np.float64))

    def _sigmoid(self, raw: np.ndarray) -> float:
        x = (raw - np.asarray(self.mean)) / np.asarray(self.scale)
        z = float(np.dot(np.asarray(self.coefficients), x) + self.intercept)
        return 1.0 / (1.0 + math.exp(-max(min(z, 500.0), -500.0)))



@dataclass(frozen=True)
class Calibration:
    gate: LogisticModel | None = None
    abstain: LogisticModel | None = None
    # P(the sites asked so far hold all the evidence), and the cumulative site counts the rounds grow
    # through (query.escalate); absent: the gateway asks one routed round
    escalate: LogisticModel | None = None
    escalate_schedule: tuple[int, ...] = ()
    # SCOUT-RAG's tier cut-offs fit on the fit split (None: the tiered router's own, around the margin)
    tiers: TierCutoffs | None = None
    tiers_fit: Mapping[str, Any] = field(default_factory=dict)  # what they were fit on
    # The reader's floor fit on the organization's own questions (gateway.query.calibrate.fit_reader_floor;
    # None: the model card's floor), with the reader it was fit for: another model ignores it.
    reader_floor: float | None = None
    reader_fit: Mapping[str, Any] = field(default_factory=dict)
    source: str = "defaults"  # where it came from (a path, or why the defaults apply)
    # P(answerable | the final evidence and the reader's best score), for a gateway with a reader
    # (gateway.query.calibrate.fit_reader_abstain): it judges after fusion, where `abstain` cannot
    # (the reader's verdict replaces the evidence-only abstainer's there).
    read_abstain: LogisticModel | None = None

    def floor_for(self, model_sha256: str) -> float | None:
        """The fitted floor when it was fit with this reader, else None."""
        return self.reader_floor if self.reader_floor is not None and self.reader_fit.get("model_sha256") == model_sha256 \
            else None

    def to_json(self) -> dict[str, Any]:
        """The calibration file's JSON (`CalibrationFile`)."""
        tiers = TiersRecord(**self.tiers.to_json(), fit=dict(self.tiers_fit)) if self.tiers is not None else None
        reader = ReaderRecord(self.reader_floor, dict(self.reader_fit)) if self.reader_floor is not None else None
        schedule = self.escalate_schedule if self.escalate is not None else None
        return CalibrationFile(VERSION, self.gate, self.abstain, self.escalate, schedule, tiers, reader,
                               self.read_abstain).to_json()

    @classmethod
    def from_json(cls, obj: Any, source: str = "") -> "Calibration":
        """What a calibration file's JSON says (InputError naming the field when it is malformed)."""
        from hansa.gateway.query.escalate import DEFAULT_SCHEDULE, check_schedule

        file = CalibrationFile.from_json(obj)
        schedule = file.escalate_schedule if file.escalate_schedule is not None else DEFAULT_SCHEDULE
        return cls(file.gate, file.abstain, file.escalate, check_schedule(schedule) if file.escalate else (),
                   file.tiers.cutoffs() if file.tiers else None, dict(file.tiers.fit) if file.tiers else {},
                   file.reader.floor if file.reader else None, dict(file.reader.fit) if file.reader else {},
                   source, file.read_abstain)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)


@dataclass(frozen=True)
class TiersRecord(Wire):
    """SCOUT-RAG's tier cut-offs as the file holds them (query.tiers.TierCutoffs, whose own
    `to_json` rounds them), with what they were fit on. The three gaps are required; the weights
    default to TierCutoffs' own."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "tiers"

    high_gap: Finite
    moderate_gap: Finite
    potential_gap: Finite
    min_score: Finite = TierCutoffs.min_score
    w_richness: Finite = TierCutoffs.w_richness
    w_history: Finite = TierCutoffs.w_history
    fit: Fit = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cutoffs()  # TierCutoffs' own rule on the gaps' order (a ValueError)

    def cutoffs(self) -> TierCutoffs:
        return TierCutoffs(**{name: getattr(self, name) for name in TierCutoffs.__dataclass_fields__})


@dataclass(frozen=True)
class ReaderRecord(Wire):
    """The reader's floor fit on the organization's own questions, with the reader it was fit for."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "reader"

    floor: Probability
    fit: Fit = field(default_factory=dict)


@dataclass(frozen=True)
class CalibrationFile(Wire):
    """The calibration file: what is absent is left out, not written as null (a null reads as
    absent, as it always did). `escalate_schedule` absent: query.escalate's default."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "calibration"

    version: Literal[1]  # VERSION
    gate: Annotated[LogisticModel | None, omitted_when_none()] = None
    abstain: Annotated[LogisticModel | None, omitted_when_none()] = None
    escalate: Annotated[LogisticModel | None, omitted_when_none()] = None
    escalate_schedule: Annotated[tuple[StrictInt, ...] | None, omitted_when_none()] = None
    tiers: Annotated[TiersRecord | None, omitted_when_none()] = None
    reader: Annotated[ReaderRecord | None, omitted_when_none()] = None
    read_abstain: Annotated[LogisticModel | None, omitted_when_none()] = None


def read_calibration(path: Path) -> Calibration:
    """The calibration at `path`, or InputError saying why it is unusable — for callers that named the
    file on purpose (`hansa eval --calibration`), where falling back to defaults would measure the
    wrong gateway without a word."""
    try:
        return Calibration.from_json(json.loads(path.read_text(encoding="utf-8")), source=str(path))
    except (OSError, ValueError, InputError) as exc:
        raise InputError(f"calibration {path} is unusable: {exc}") from exc


def load_calibration(path: Path) -> Calibration:
    """The calibration at `path`, or the safe defaults (no models) with one log line saying why: a
    gateway keeps serving (gate escalating, abstention on its evidence rule) rather than refuse to start.

    Why no packaged default here: every model here reads features whose scale is the federation's
    (sites that answered, passages, summary match); `read_abstain` fit on SQuAD 16's and MTRAG 16's
    fit rows over them refused an answerable question of a two-site federation (benchmarks/README.md,
    "Abstention after reading"), so each federation fits its own. What ships instead is the reader's
    card's abstention over scale-free features (gateway.query.reading, `ReadingStage.abstain`), which
    a calibration's `read_abstain` for the same reader replaces."""
    if not path.is_file():
        log.info("gate calibration %s not found: the gate always escalates, abstention uses its evidence rule", path)
        return Calibration(source=f"defaults ({path} not found)")
    try:
        cal = read_calibration(path)
    except InputError as exc:
        log.warning("%s: falling back to defaults — the gate always escalates, abstention uses its "
                    "evidence rule", exc)
        return Calibration(source=f"defaults ({path} unusable)")
    log.info("gate calibration loaded from %s (gate: %s, abstain: %s, escalate: %s, tiers: %s, read_abstain: %s)", path,
             cal.gate is not None, cal.abstain is not None, cal.escalate is not None, cal.tiers is not None,
             cal.read_abstain is not None)
    return cal


# -- fitting ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Example:
    """One labelled row: an assessment's features and whether it is a positive (gate: the origin's
    answer suffices, i.e. the origin holds all of the question's gold evidence (gateway.query.calibrate;
    the committed MTRAG rows up to mtrag16_fit_v2.jsonl label "holds some of it"); abstain: the
    question is answerable)."""

    features: Mapping[str, float]
    label: bool
    question_id: str = ""  # in a rows file, a line of gateway.query.calibrate.RowRecord


def examples_digest(examples: Sequence[Example], names: Sequence[str]) -> str:
    h = hashlib.sha256()
    for e in sorted(examples, key=lambda e: (e.question_id, e.label, tuple(e.features.get(n, 0.0) for n in names))):
        h.update(json.dumps([e.question_id, e.label, [round(e.features.get(n, 0.0), 6) for n in names]]).encode())
    return "sha256:" + h.hexdigest()


def threshold_keeping(positive_scores: np.ndarray, rate: float) -> float:
    """The highest threshold that keeps at least `rate` of the positives at or above it: keep
    ceil(rate * n) of them, and the threshold is the smallest of the kept (highest) scores."""
    pos = np.sort(np.asarray(positive_scores, dtype=np.float64))
    keep = max(1, math.ceil(rate * len(pos) - 1e-9))
    return float(pos[len(pos) - keep])


def fit_model(examples: Sequence[Example], *, min_positive_rate: float, features: Sequence[str] = FEATURES,
              split: str = "fit", note: str = "") -> LogisticModel:
    """Fit P(label) on `examples` and pick the *highest* threshold that still keeps at least
    `min_positive_rate` of the positives at or above it (gate: 0.85 -> in-domain escalation at most
    15%; abstain: 0.90 -> answer at least 90% of answerable questions). A higher threshold can only
    reject more negatives, so this is the most selective threshold meeting the positives' target.
    Of LATER_FEATURES, only those every example carries are weighed."""
    return fit_models(examples, min_positive_rates=(min_positive_rate,), features=features, split=split, note=note)[0]


def fit_models(examples: Sequence[Example], *, min_positive_rates: Sequence[float], features: Sequence[str] = FEATURES,
               split: str = "fit", note: str = "") -> list[LogisticModel]:
    """fit_model for several rates at once: one fit (it does not depend on the rate), one threshold
    per rate, in the order given."""
    if any(n not in FEATURES + READER_FEATURES for n in features):
        raise InputError(f"features must be drawn from {FEATURES + READER_FEATURES}")
    names = tuple(n for n in features if n not in LATER_FEATURES or all(n in e.features for e in examples))
    labels = np.array([e.label for e in examples], dtype=bool)
    if labels.all() or not labels.any():
        raise InputError("calibration needs both positive and negative examples")
    if not min_positive_rates or any(not 0.0 < r <= 1.0 for r in min_positive_rates):
        raise InputError("min_positive_rate must lie in (0, 1]")
    x = np.array([[e.features.get(n, 0.0) for n in names] for e in examples], dtype=np.float64)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    coef, bias = fit_logistic((x - mean) / scale, labels, l2=1.0, sample_weight=balanced_weights(labels))
    model = LogisticModel(names, tuple(mean.tolist()), tuple(scale.tolist()), tuple(coef.tolist()), bias, 0.5)
    probs = np.array([model.score(e.features) for e in examples])
    neg = probs[~labels]
    digest = examples_digest(examples, names)
    out = []
    for rate in min_positive_rates:
        threshold = threshold_keeping(probs[labels], rate)
        fit = {"digest": digest, "size": len(examples), "positives": int(labels.sum()),
               "split": split, "min_positive_rate": rate,
               "positive_rate": round(float((probs[labels] >= threshold).mean()), 4),
               "negative_rejected": round(float((neg < threshold).mean()), 4), "note": note}
        out.append(replace(model, threshold=threshold, fit=fit))
    return out
