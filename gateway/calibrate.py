"""Fitting the gate and abstention on labelled questions: collect features through the engine, fit, save.

Why through the engine: the features a model is fit on must be exactly those the gateway computes
at query time (engine.assess over signed site answers), so collection runs real queries through
`Gateway.engine` (no rate limits: this is the operator's own batch) with policies that stop where
the features are known:

- gate rows: for each question and each candidate origin site, the origin alone is asked (named
  as the only site) and its assessment is recorded — what the gate sees of it; label = the origin holds gold
  evidence (in-domain). DGRAG's Table 2 escalation rates are the complement on each label.
- abstain rows: each question is routed as usual (no origin) and the final assessment recorded;
  label = the question is answerable.

Only fit-split questions may be given here (the evaluation's split rule decides); `calibrate()`
fits both models and `Calibration.save` writes the file the gateway loads. Rows are JSON lines
(`{"model", "question_id", "label", "features"}`) so `hansa gateway calibrate --data` can refit
without sites.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hansa.core.errors import InputError
from hansa.gateway.engine import (AbstainDecision, Assessment, CalibratedAbstainer, CalibratedGate, QueryPolicy,
                                  QueryRequest)
from hansa.gateway.engine.calibration import FEATURES, MODELS, Calibration, Example, fit_model

DEFAULT_MIN_IN_DOMAIN_ANSWERED = 0.90  # in-domain escalation target is <= 15%: keep a margin on the fit split
DEFAULT_MIN_ANSWERABLE_ANSWERED = 0.92  # answered-answerable target is >= 90%: the same margin


@dataclass(frozen=True)
class LabelledQuestion:
    id: str
    text: str
    gold_sites: tuple[str, ...] = ()  # sites holding gold evidence (empty: unanswerable)
    answerable: bool = True


@dataclass(frozen=True)
class Row:
    model: str  # "gate" or "abstain"
    example: Example
    origin: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "origin": self.origin, **self.example.to_json()}

    @classmethod
    def from_json(cls, obj: Any) -> "Row":
        if not isinstance(obj, dict) or obj.get("model") not in MODELS:
            raise InputError(f"each row needs 'model' in {MODELS}")
        return cls(obj["model"], Example.from_json(obj), str(obj.get("origin", "")))


@dataclass(frozen=True)
class _SkipFusion:
    """Collection only: the assessment is all we need; abstaining skips fusing an answer."""

    name: str = "collect-features"

    def judge(self, question: str, assessment: Assessment) -> AbstainDecision:
        return AbstainDecision(True, 0.0, "collecting features")


def _features(a: Assessment) -> dict[str, float]:
    return {n: float(getattr(a, n)) for n in FEATURES}


def gate_rows(gateway: Any, questions: Iterable[LabelledQuestion], origins: Sequence[str]) -> list[Row]:
    """One row per (answerable question, origin): the origin's own assessment, labelled in-domain."""
    policy = QueryPolicy(name="collect-gate", abstainer=_SkipFusion())
    rows = []
    for q in questions:
        if not q.answerable or not q.gold_sites:
            continue
        for origin in origins:
            # the origin alone, named explicitly: the same features the gate computes for it
            # (its calls, and its best summary among the question's top-m matches)
            result = gateway.engine.run(QueryRequest(question=q.text, sites=(origin,)), policy=policy)
            rows.append(Row("gate", Example(_features(result.assessment), origin in q.gold_sites, q.id), origin))
    return rows


def abstain_rows(gateway: Any, questions: Iterable[LabelledQuestion], top_k_sites: int | None = None) -> list[Row]:
    """One row per question: the routed answer's assessment, labelled answerable."""
    policy = QueryPolicy(name="collect-abstain", abstainer=_SkipFusion())
    return [Row("abstain", Example(_features(gateway.engine.run(QueryRequest(question=q.text, top_k_sites=top_k_sites),
                                                                 policy=policy).assessment), q.answerable, q.id))
            for q in questions]


def calibrate(rows: Sequence[Row], *, min_in_domain_answered: float = DEFAULT_MIN_IN_DOMAIN_ANSWERED,
              min_answerable_answered: float = DEFAULT_MIN_ANSWERABLE_ANSWERED, note: str = "") -> Calibration:
    """Fit each model that has rows of both labels (the other stays absent: its safe default), on
    the rows with evidence (rows without any passage are decided by rule before any model)."""
    models: dict[str, Any] = {}
    targets = {"gate": min_in_domain_answered, "abstain": min_answerable_answered}
    for name in MODELS:
        # a row without any passage is decided by rule (escalate / abstain), not by the model
        examples = [r.example for r in rows if r.model == name and r.example.features.get("passages", 0) > 0]
        labels = {e.label for e in examples}
        if labels == {True, False}:
            models[name] = fit_model(examples, min_positive_rate=targets[name], note=note)
    if not models:
        raise InputError("no model could be fit: each needs rows with both labels")
    return Calibration(**models, source="fitted")


def read_rows(path: Path) -> list[Row]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    rows = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                rows.append(Row.from_json(json.loads(line)))
            except (ValueError, InputError) as exc:
                raise InputError(f"{path}:{n}: {exc}") from exc
    return rows


def write_rows(path: Path, rows: Iterable[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in rows), encoding="utf-8")


def rates(calibration: Calibration, rows: Sequence[Row]) -> dict[str, Any]:
    """DGRAG's Table 2 and the abstention targets on `rows` (use report-split rows to report):
    escalation of in-domain / out-of-domain origins; abstention on unanswerable, answers on answerable."""
    out: dict[str, Any] = {}
    gate = CalibratedGate(calibration.gate) if calibration.gate is not None else None
    abstain = CalibratedAbstainer(calibration.abstain) if calibration.abstain is not None else None

    def share(examples: list[Example], decide: Callable[[Assessment], bool]) -> float | None:
        return round(sum(decide(assessment_of(e)) for e in examples) / len(examples), 4) if examples else None

    if gate is not None:
        g = [r.example for r in rows if r.model == "gate"]
        escalates = lambda a: not gate.decide(a).answer  # noqa: E731
        out["escalation_in_domain"] = share([e for e in g if e.label], escalates)
        out["escalation_out_of_domain"] = share([e for e in g if not e.label], escalates)
        out["gate_rows"] = len(g)
    if abstain is not None:
        a = [r.example for r in rows if r.model == "abstain"]
        # rows carry no question text; a question without content words abstains before any model
        abstains = lambda x: abstain.judge("question", x).abstain  # noqa: E731
        out["abstain_unanswerable"] = share([e for e in a if not e.label], abstains)
        out["answered_answerable"] = share([e for e in a if e.label], lambda x: not abstains(x))
        out["abstain_rows"] = len(a)
    return out


def assessment_of(example: Example) -> Assessment:
    return Assessment(**{n: example.features.get(n, 0.0) for n in FEATURES})  # type: ignore[arg-type]
