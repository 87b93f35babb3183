"""Fitting the gate and abstention on labelled questions: collect features through the engine, fit, save.

Why through the engine: the features a model is fit on must be exactly those the gateway computes
at query time (query.assess over signed site answers), so collection runs real queries through
`Gateway.engine` (no rate limits: this is the operator's own batch) with policies that stop where
the features are known:

- gate rows: for each question and each candidate origin site, the origin alone is asked (named
  as the only site) and its assessment is recorded — what the gate sees of it; label = the origin holds
  all of the question's gold evidence, so its answer alone is complete ("in-domain"; an origin holding
  only part of the evidence of a question that spans sites is labelled like an out-of-domain one:
  answering there leaves gold sites unasked). DGRAG's Table 2 escalation rates are the complement on
  each label.
- abstain rows: each question is routed as usual (no origin) and the final assessment recorded;
  label = the question is answerable.
- escalate rows: each answerable question's ranked sites are asked once and the evidence of every
  prefix of the ranking assessed (`step` = its length); label = every gold site is in the prefix. The
  escalation model's threshold and schedule are then chosen by replaying the stopping rule on
  these rows (`replay`): the fewest sites on average at the target gold-site recall.
- reader rows (a gateway with a reader): each question asked as served, the best reader score over
  what its answer read (`reader_best`), label = answerable; the floor is the highest that still
  answers the target share of answerable questions (fit_reader_floor), and the gateway uses it for
  the reader it was fit with.
- tiers rows: each answerable question is ranked by the gateway's tiered router, no site called
  (`QueryEngine.rank`); one row per ranked site with its gap to the leader (`site` names it), label
  = the site holds gold evidence, and one row per gold site the ranking missed (`ranked` 0). The
  tier cut-offs are quantiles of the gold sites' gaps (query.tiers.cutoffs_from_gaps).

Only fit-split questions may be given here (the evaluation's split rule decides); `calibrate()`
fits both models and `Calibration.save` writes the file the gateway loads. Rows are JSON lines
(`{"model", "question_id", "label", "features"}`) so `hansa gateway calibrate --data` can refit
without sites.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, Iterable, Literal, Mapping, Sequence

import numpy as np
from pydantic import Field, StrictBool, StrictInt, StrictStr

from hansa.core.errors import InputError
from hansa.core.model import FORBID, Wire
from hansa.gateway.query.abstain import AbstainDecision, CalibratedAbstainer
from hansa.gateway.query.assess import Assessment
from hansa.gateway.query.gate import CalibratedGate
from hansa.gateway.query.policy import QueryPolicy
from hansa.gateway.query.request import QueryRequest
from hansa.gateway.query.calibration import (EVIDENCE_FEATURES, FEATURES, MODELS, READER_FEATURES, Calibration, Example,
                                              Finite, LogisticModel, examples_digest, fit_model, fit_models,
                                              threshold_keeping)
from hansa.gateway.query.escalate import check_schedule
from hansa.gateway.query.policy import default_abstainer, tiered_router
from hansa.gateway.query.tiers import DEFAULT_QUANTILES, TierCutoffs, cutoffs_from_gaps

DEFAULT_MIN_IN_DOMAIN_ANSWERED = 0.90  # in-domain escalation target is <= 15%: keep a margin on the fit split
DEFAULT_MIN_ANSWERABLE_ANSWERED = 0.92  # answered-answerable target is >= 90%: the same margin
DEFAULT_MIN_RECALL = 0.96  # escalation: gold-site recall target is >= 0.95; the same kind of margin
# Escalation schedules the fit chooses among (distinct sites asked after each round, cumulative),
# checked here as the gateway checks them on load, so a fit can never write one it would refuse.
SCHEDULES = tuple(check_schedule(s) for s in (
    (1, 2, 3, 4, 6, 8, 12, 16), (1, 2, 3, 4, 5, 6, 8, 12), (1, 2, 4, 8, 16), (2, 3, 4, 6, 8, 12, 16),
    (2, 3, 4, 5, 6, 8, 12, 16), (2, 4, 8, 16)))


@dataclass(frozen=True)
class LabelledQuestion:
    id: str
    text: str
    gold_sites: tuple[str, ...] = ()  # sites holding gold evidence (empty: unanswerable)
    answerable: bool = True


# What rows may feed: the logistic models, the tier cut-offs, the learned router
# (gateway.query.learned.train.train_from_rows: `hansa gateway router train --rows`) and the reader's floor
# (`site` holds the reader's sha256).
ROW_KINDS = MODELS + ("tiers", "router", "reader")


@dataclass(frozen=True)
class Row:
    model: str  # one of ROW_KINDS
    example: Example
    origin: str = ""
    step: int = 0  # escalate: how many of the ranking's best sites the row's evidence comes from
    site: str = ""  # tiers, router: the ranked (or missed gold) site the row describes


def _zero(value: int) -> bool:
    return value == 0


def _empty(value: str) -> bool:
    return not value


@dataclass(frozen=True)
class RowRecord(Wire):
    """One line of a rows file (`read_rows`, `write_rows`): a `Row` with its example's keys inline;
    `step` and `site` are left out while unset. `label` and `features` are required."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "row"
    JSON_REQUIRED: ClassVar[tuple[str, ...]] = ("label", "features")

    model: Literal[ROW_KINDS]  # type: ignore[valid-type]
    origin: StrictStr = ""
    question_id: StrictStr = ""
    label: StrictBool = False
    features: Mapping[StrictStr, Finite] = field(default_factory=dict)
    step: Annotated[StrictInt, Field(ge=0, exclude_if=_zero)] = 0
    site: Annotated[StrictStr, Field(exclude_if=_empty)] = ""

    def __post_init__(self) -> None:
        if self.model == "escalate" and self.step < 1:
            raise ValueError("'step' must be a positive whole number (escalate rows need one)")
        if self.model == "tiers" and self.features.get("ranked", 0.0) > 0 and "gap" not in self.features:
            raise ValueError("a tiers row of a ranked site needs its 'gap' feature")
        if self.model == "reader" and "reader_best" not in self.features:
            raise ValueError("a reader row needs its 'reader_best' feature")

    @classmethod
    def of(cls, row: Row) -> "RowRecord":
        e = row.example
        return cls(row.model, row.origin, e.question_id, e.label, dict(e.features), row.step, row.site)

    def row(self) -> Row:
        # features as floats: examples_digest writes them, and 1 would not spell 1.0
        features = {k: float(v) for k, v in self.features.items()}
        return Row(self.model, Example(features, self.label, self.question_id), self.origin, self.step, self.site)


@dataclass(frozen=True)
class _SkipFusion:
    """Collection only: the assessment is all we need; abstaining skips fusing an answer."""

    name: str = "collect-features"

    def judge(self, question: str, assessment: Assessment) -> AbstainDecision:
        return AbstainDecision(True, 0.0, "collecting features")


def _features(a: Assessment) -> dict[str, float]:
    return {n: float(getattr(a, n)) for n in FEATURES}


def gate_rows(gateway: Any, questions: Iterable[LabelledQuestion], origins: Sequence[str]) -> list[Row]:
    """One row per (answerable question, origin): the origin's own assessment, labelled "the origin
    holds all of the question's gold evidence" (see the module docstring)."""
    policy = QueryPolicy(name="collect-gate", abstainer=_SkipFusion())
    rows = []
    for q in questions:
        if not q.answerable or not q.gold_sites:
            continue
        for origin in origins:
            # the origin alone, named explicitly: the same features the gate computes for it (its
            # calls, its best summary among the question's top-m matches, and every routable site
            # ranked as when routed: query.route ranks named sites the same way)
            result = gateway.engine.run(QueryRequest(question=q.text, sites=(origin,)), policy=policy)
            rows.append(Row("gate", Example(_features(result.assessment), set(q.gold_sites) == {origin}, q.id), origin))
    return rows


def abstain_rows(gateway: Any, questions: Iterable[LabelledQuestion], top_k_sites: int | None = None) -> list[Row]:
    """One row per question: the routed answer's assessment, labelled answerable."""
    policy = QueryPolicy(name="collect-abstain", abstainer=_SkipFusion())
    return [Row("abstain", Example(_features(gateway.engine.run(QueryRequest(question=q.text, top_k_sites=top_k_sites),
                                                                 policy=policy).assessment), q.answerable, q.id))
            for q in questions]


def reader_rows(gateway: Any, questions: Iterable[LabelledQuestion], top_k_sites: int | None = None) -> list[Row]:
    """One row per question with the gateway's reader: the best reader score over what the served
    answer read (`reader_best`), labelled answerable (fit_reader_floor)."""
    reading = gateway.engine.reading
    if reading is None:
        raise InputError("reader rows need a gateway with a reader ([gateway] reader = \"packaged\")")
    rows = []
    for q in questions:
        result = gateway.engine.run(QueryRequest(question=q.text, top_k_sites=top_k_sites))
        read = result.fused.reading or {}
        # the final assessment's features too, and whether the answer was served (abstention fit jointly
        # with the reader's score: fit_reader_abstain)
        evidence = _features(result.assessment) if result.assessment is not None else {"passages": 0.0}
        features = {**evidence, "reader_best": float(read.get("best", 0.0)), "answered": 0.0 if result.abstained else 1.0}
        rows.append(Row("reader", Example(features, q.answerable, q.id), site=reading.reader.model_sha256))
    return rows


def fit_reader_floor(rows: Sequence[Row], min_answerable_answered: float, note: str = "") -> tuple[float, dict[str, Any]] | None:
    """The highest floor that still answers `min_answerable_answered` of the answerable questions
    (a question whose best reader score reaches the floor is answered), with its fit rates; None
    without answerable reader rows. Rows of one reader only (their `site` holds its sha256)."""
    mine = [r for r in rows if r.model == "reader"]
    shas = {r.site for r in mine}
    if len(shas) > 1:
        raise InputError(f"reader rows of {len(shas)} different readers: collect them with one")
    answerable = sorted((r.example.features["reader_best"] for r in mine if r.example.label), reverse=True)
    if not answerable:
        return None
    keep = max(1, math.ceil(min_answerable_answered * len(answerable)))
    floor = answerable[keep - 1]
    unanswerable = [r.example.features["reader_best"] for r in mine if not r.example.label]
    fit = {"model_sha256": next(iter(shas)), "min_answerable_answered": min_answerable_answered,
           "answered_answerable": round(sum(b >= floor for b in answerable) / len(answerable), 4),
           "abstain_unanswerable": round(sum(b < floor for b in unanswerable) / len(unanswerable), 4) if unanswerable else None,
           "answerable_rows": len(answerable), "unanswerable_rows": len(unanswerable), "note": note}
    return round(float(floor), 6), fit


def fit_reader_abstain(rows: Sequence[Row], min_answerable_answered: float, note: str = "",
                       evidence: Sequence[str] = EVIDENCE_FEATURES) -> LogisticModel | None:
    """Abstention for a gateway with a reader, fit on reader rows that carry the final evidence
    (reader_rows): P(answerable) over the evidence features and the reader's best score, at the
    highest threshold that, on top of what the served gateway already refused (`answered` 0: the
    reader's floors, the shared-word rule), still answers `min_answerable_answered` of the
    answerable rows. None when the rows cannot fit it (older reader rows without the evidence,
    one label only, or served answers already below the target: nothing left to refuse).

    Why jointly and not the reader's floor alone: on SQuAD 2.0's unanswerables the reader's score
    barely separates (benchmarks/README.md, "The reader"), and the evidence-only model (`abstain`)
    cannot run where the reader's verdict replaces it; together they see both. `evidence`: the
    evidence features it weighs (SCALE_FREE_FEATURES for a model meant for other federations)."""
    mine = [r for r in rows if r.model == "reader" and "answered" in r.example.features
            and r.example.features.get("passages", 0) > 0]
    if {r.example.label for r in mine} != {True, False}:
        return None
    shas = {r.site for r in mine}
    if len(shas) > 1:
        raise InputError(f"reader rows of {len(shas)} different readers: collect them with one")
    served, total = _served(rows)
    if not served or len(served) < min_answerable_answered * total:
        return None
    model = fit_model([r.example for r in mine], min_positive_rate=min_answerable_answered,
                      features=tuple(evidence) + READER_FEATURES, note=note)
    threshold = reader_abstain_threshold(model, rows, min_answerable_answered)
    assert threshold is not None  # served rows exist, checked above
    return replace(model, threshold=threshold,
                   fit={**model.fit, "model_sha256": next(iter(shas)),
                        "threshold_rule": "answers min_answerable_answered of the answerable reader rows, "
                        "on top of those the served gateway refused", "served_answered": len(served),
                        "answerable_rows": total})


def _served(rows: Sequence[Row]) -> tuple[list[Example], int]:
    """The answerable reader rows the served gateway answered (with passages), and how many answerable
    reader rows there are (a row without passages is refused too)."""
    served = [r.example for r in rows if r.model == "reader" and r.example.label and "answered" in r.example.features
              and r.example.features.get("passages", 0) > 0 and r.example.features["answered"] > 0]
    return served, sum(1 for r in rows if r.model == "reader" and r.example.label)


def reader_abstain_threshold(model: LogisticModel, rows: Sequence[Row], min_answerable_answered: float) -> float | None:
    """The highest threshold at which `model` still answers `min_answerable_answered` of the rows'
    answerable questions, on top of those the served gateway refused; None without served rows."""
    served, total = _served(rows)
    if not served:
        return None
    keep = min(1.0, min_answerable_answered * total / len(served))
    return min(float(threshold_keeping(np.array([model.score(e.features) for e in served]), keep)), 1.0)


def escalate_rows(gateway: Any, questions: Iterable[LabelledQuestion], max_sites: int = 16) -> list[Row]:
    """Rows of every prefix of the routing ranking (answerable questions): the best `max_sites`
    ranked sites are asked once, in one round, and the evidence of the first n of them is assessed
    as the engine would after asking exactly those (Routing.assess), labelled "every gold site is
    among them" (one gold site: it is asked; several, as MTRAG's questions spanning sites: all
    are, so escalation learns to go on until the evidence is complete). Asking once and assessing
    prefixes gives the same features as asking round by round, at one call per site."""
    from hansa.gateway.query.route import SummaryRouter

    cfg = gateway.cfg
    # every ranked site, in the ranking of the gateway's router (its margin lifted)
    policy = QueryPolicy(name="collect-escalate", abstainer=_SkipFusion(),
                         router=SummaryRouter(margin=float("inf"), lexical_weight=cfg.lexical_weight))
    rows = []
    for q in questions:
        if not q.answerable or not q.gold_sites:
            continue
        result = gateway.engine.run(QueryRequest(question=q.text, top_k_sites=max_sites), policy=policy)
        ranked = [s.site_id for s in result.routing.considered][:max_sites]
        for n in range(1, len(ranked) + 1):
            prefix = set(ranked[:n])
            a = result.routing.assess(q.text, [c for c in result.calls if c.site_id in prefix])
            rows.append(Row("escalate", Example(_features(a), set(q.gold_sites) <= prefix, q.id), step=n))
    return rows


def tier_rows(gateway: Any, questions: Iterable[LabelledQuestion]) -> list[Row]:
    """Rows of the tiered router's ranking (answerable questions), no site called: each ranked site's
    gap to the leader and score, labelled "holds gold evidence", and each gold site it did not
    rank (`ranked` 0: no gap reaches it). `lexical_weight` records the term blend the gaps were
    measured under: cut-offs fit at one weight mean little at another."""
    router = tiered_router(gateway)
    rows = []
    for q in questions:
        if not q.answerable or not q.gold_sites:
            continue
        considered = gateway.engine.rank(q.text, router).considered
        for s in considered:
            features = {"ranked": 1.0, "gap": float(getattr(s, "gap", 0.0)), "score": float(s.score),
                        "lexical_weight": float(router.lexical_weight)}
            rows.append(Row("tiers", Example(features, s.site_id in q.gold_sites, q.id), site=s.site_id))
        missed = sorted(set(q.gold_sites) - {s.site_id for s in considered})
        rows += [Row("tiers", Example({"ranked": 0.0}, True, q.id), site=site) for site in missed]
    return rows


def fit_tiers(rows: Sequence[Row], quantiles: Sequence[float] = DEFAULT_QUANTILES,
              note: str = "") -> tuple[TierCutoffs, dict[str, Any]] | None:
    """Tier cut-offs from the tiers rows' gold sites (cutoffs_from_gaps), and what they were fit on;
    None without a ranked gold site."""
    tiers = [r for r in rows if r.model == "tiers"]
    gold = [r for r in tiers if r.example.label]
    gaps = [r.example.features["gap"] for r in gold if r.example.features.get("ranked", 0.0) > 0]
    if not gaps:
        return None
    weights = sorted({r.example.features["lexical_weight"] for r in tiers if "lexical_weight" in r.example.features})
    cutoffs = cutoffs_from_gaps(gaps, quantiles=quantiles)
    digest = examples_digest([replace(r.example, question_id=f"{r.example.question_id}/{r.site}") for r in tiers],
                             ("ranked", "gap"))
    fit = {"digest": digest, "questions": len({r.example.question_id for r in tiers}), "gold_sites": len(gold),
           "gold_sites_unranked": len(gold) - len(gaps), "quantiles": list(quantiles),
           "lexical_weight": weights[0] if len(weights) == 1 else weights, "split": "fit", "note": note}
    return cutoffs, fit


def tier_rates(cutoffs: TierCutoffs, rows: Sequence[Row]) -> dict[str, Any]:
    """What the cut-offs do on tiers rows: the share of gold sites (and of questions with all their
    gold sites) within moderate_gap — asked in the first tiered round, before its cap of k sites —
    and within potential_gap (reachable by refinement), with the sites per question each asks."""
    per_q: dict[str, list[Row]] = {}
    for r in rows:
        if r.model == "tiers":
            per_q.setdefault(r.example.question_id, []).append(r)
    if not per_q:
        return {}

    def within(r: Row, gap: float) -> bool:
        f = r.example.features
        return f.get("ranked", 0.0) > 0 and f["gap"] <= gap and f.get("score", 1.0) > cutoffs.min_score

    out: dict[str, Any] = {"tier_questions": len(per_q)}
    for name, gap in (("moderate", cutoffs.moderate_gap), ("potential", cutoffs.potential_gap)):
        gold = [within(r, gap) for q in per_q.values() for r in q if r.example.label]
        out[f"tier_gold_sites_within_{name}"] = round(sum(gold) / len(gold), 4) if gold else None
        out[f"tier_all_gold_within_{name}"] = round(
            sum(all(within(r, gap) for r in q if r.example.label) for q in per_q.values()) / len(per_q), 4)
        out[f"tier_sites_within_{name}"] = round(
            sum(sum(within(r, gap) for r in q) for q in per_q.values()) / len(per_q), 3)
    return out


def scored_steps(rows: Sequence[Row], model: LogisticModel) -> dict[str, dict[int, tuple[float, bool]]]:
    """Escalate rows as {question: {step: (confidence, label)}}; a step without passages has
    confidence 0 (the rule never stops on no evidence)."""
    out: dict[str, dict[int, tuple[float, bool]]] = {}
    for r in rows:
        if r.model == "escalate":
            e = r.example
            p = model.probability(assessment_of(e)) if e.features.get("passages", 0) > 0 else 0.0
            out.setdefault(e.question_id, {})[r.step] = (p, e.label)
    return out


def replay(scored: Mapping[str, Mapping[int, tuple[float, bool]]], threshold: float,
           schedule: Sequence[int]) -> dict[str, float]:
    """The escalation rule replayed on scored rows (scored_steps): per question, stop after the
    first scheduled round whose confidence reaches `threshold`, else after the last round its rows
    reach. Returns the share of questions whose gold sites were all asked (`recall`) and the mean
    number of sites asked (`sites`)."""
    hits, sites = 0, 0
    for steps in scored.values():
        last = max(steps)
        for n in [k for k in schedule if k < last] + [last]:
            p, label = steps[n] if n in steps else steps[min(k for k in steps if k >= n)]
            if n == last or p >= threshold:
                hits += label
                sites += n
                break
    total = len(scored)
    return {"recall": hits / total if total else 0.0, "sites": sites / total if total else 0.0, "questions": total}


def fit_escalation(rows: Sequence[Row], *, min_recall: float = DEFAULT_MIN_RECALL, max_sites: float | None = None,
                   schedules: Sequence[Sequence[int]] = SCHEDULES, note: str = "") -> tuple[LogisticModel, tuple[int, ...]]:
    """Fit P(every gold site is among the sites asked) on every prefix row with evidence, then pick the
    schedule and threshold by replaying the rule on these (fit-split) rows: the fewest sites on
    average while reaching `min_recall` (if none reaches it, the highest recall); or, given
    `max_sites`, the highest recall asking at most that many sites on average (a budget)."""
    examples = [r.example for r in rows if r.model == "escalate" and r.example.features.get("passages", 0) > 0]
    base = fit_model(examples, min_positive_rate=0.5, note=note)  # its threshold is replaced below
    scored = scored_steps(rows, base)
    probs = sorted({p for steps in scored.values() for p, _ in steps.values()})
    grid = probs[:: max(1, len(probs) // 400)] + [1.01]
    best: tuple[Any, ...] | None = None
    for schedule in schedules:
        for t in grid:
            got = replay(scored, t, schedule)
            if max_sites is not None:
                ok = got["sites"] <= max_sites
                key = (ok, got["recall"] if ok else -got["sites"], -got["sites"])
            else:
                ok = got["recall"] >= min_recall
                key = (ok, -got["sites"] if ok else got["recall"], -got["sites"])
            if best is None or key > best[0]:
                best = (key, t, tuple(schedule), got)
    assert best is not None
    _, threshold, schedule, got = best
    fit = {k: v for k, v in base.fit.items() if k not in ("min_positive_rate", "positive_rate", "negative_rejected")}
    fit.update({"min_recall": None if max_sites is not None else min_recall, "max_sites": max_sites,
                "replayed_recall": round(got["recall"], 4),
                "replayed_sites": round(got["sites"], 3), "questions": got["questions"]})
    return replace(base, threshold=min(float(threshold), 1.0), fit=fit), schedule


def calibrate(rows: Sequence[Row], *, min_in_domain_answered: float = DEFAULT_MIN_IN_DOMAIN_ANSWERED,
              min_answerable_answered: float = DEFAULT_MIN_ANSWERABLE_ANSWERED,
              min_recall: float = DEFAULT_MIN_RECALL, max_sites: float | None = None,
              tier_quantiles: Sequence[float] = DEFAULT_QUANTILES, onto: Calibration | None = None,
              note: str = "", reader_floor: bool = False) -> Calibration:
    """Fit each model that has rows of both labels, and the tier cut-offs given tiers rows with a
    ranked gold site, on the rows with evidence (rows without any passage are decided by rule
    before any model). What the rows cannot fit stays as in `onto` (a calibration fit before, so
    tiers can be added to it without re-collecting its rows), else absent: its safe default."""
    models: dict[str, Any] = {}
    tiers = fit_tiers(rows, tier_quantiles, note=note)
    if tiers is not None:
        models["tiers"], models["tiers_fit"] = tiers
    targets = {"gate": min_in_domain_answered, "abstain": min_answerable_answered}
    for name in ("gate", "abstain"):
        # a row without any passage is decided by rule (escalate / abstain), not by the model
        examples = [r.example for r in rows if r.model == name and r.example.features.get("passages", 0) > 0]
        labels = {e.label for e in examples}
        if labels == {True, False}:
            models[name] = fit_model(examples, min_positive_rate=targets[name], features=EVIDENCE_FEATURES, note=note)
    labels = {r.example.label for r in rows if r.model == "escalate" and r.example.features.get("passages", 0) > 0}
    if labels == {True, False}:
        models["escalate"], models["escalate_schedule"] = fit_escalation(rows, min_recall=min_recall,
                                                                         max_sites=max_sites, note=note)
    # reader rows with the evidence fit abstention after reading; the one floor (`reader_floor`, or
    # rows collected before they carried the evidence) replaces the card's floors per kind instead
    joint = None if reader_floor else fit_reader_abstain(rows, min_answerable_answered, note=note)
    if joint is not None:
        models["read_abstain"] = joint
    floor = fit_reader_floor(rows, min_answerable_answered, note=note) if joint is None else None
    if floor is not None:
        models["reader_floor"], models["reader_fit"] = floor
    if not models:
        raise InputError("no model could be fit: each needs rows with both labels (tier cut-offs: a ranked gold site; "
                         "the reader's floor: answerable reader rows)")
    return replace(onto, **models, source="fitted") if onto is not None else Calibration(**models, source="fitted")


# The shares of in-domain fit asks `balance_gate` tries: 0.80, 0.805, ..., 0.95.
GATE_SHARES = tuple(round(0.80 + 0.005 * i, 3) for i in range(31))


def balance_gate(calibration: Calibration, rows: Sequence[Row], max_in_domain: float,
                 min_out_of_domain: float, note: str = "") -> Calibration:
    """Re-choose the gate's threshold for two targets at once (DGRAG's Table 2: escalate at most
    `max_in_domain` of in-domain asks, at least `min_out_of_domain` of out-of-domain ones): of the
    GATE_SHARES, the share of in-domain fit asks to answer whose fit rates, decided as served
    (`rates`), leave the most room to the nearer target; ties go to the larger share (fewer calls).
    Why not one share for all federations: where both targets can be met depends on how well the
    evidence separates the two kinds of asks, which differs per federation (SQuAD's 16 sites: 0.92)."""
    examples = [r.example for r in rows if r.model == "gate" and r.example.features.get("passages", 0) > 0]
    if {e.label for e in examples} != {True, False}:
        raise InputError("balancing the gate needs gate rows of both labels")
    best: tuple[tuple[float, float], Calibration] | None = None
    gates = fit_models(examples, min_positive_rates=GATE_SHARES, features=EVIDENCE_FEATURES, note=note)
    for share, gate in zip(GATE_SHARES, gates):
        candidate = replace(calibration, gate=gate)
        got = rates(candidate, rows)
        slack = min(max_in_domain - got["escalation_in_domain"], got["escalation_out_of_domain"] - min_out_of_domain)
        if best is None or (round(slack, 6), share) > best[0]:
            best = ((round(slack, 6), share), candidate)
    assert best is not None
    (slack, _), chosen = best
    assert chosen.gate is not None
    fit = {**chosen.gate.fit, "targets": {"max_in_domain": max_in_domain, "min_out_of_domain": min_out_of_domain},
           "slack": slack}
    return replace(chosen, gate=replace(chosen.gate, fit=fit))


def read_rows(path: Path) -> list[Row]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    rows = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                rows.append(RowRecord.from_json(json.loads(line)).row())
            except (ValueError, InputError) as exc:
                raise InputError(f"{path}:{n}: {exc}") from exc
    return rows


def write_rows(path: Path, rows: Iterable[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(RowRecord.of(r).to_json()) + "\n" for r in rows), encoding="utf-8")


def rates(calibration: Calibration, rows: Sequence[Row]) -> dict[str, Any]:
    """DGRAG's Table 2 and the abstention targets on `rows` (use report-split rows to report), for
    each model the calibration holds and the rows have rows of (tier cut-offs: tier_rates):
    escalation of in-domain / out-of-domain origins — by the gate rows' label: an origin whose
    evidence alone is complete, and every other (another domain's site, or one holding part of the
    evidence of a question that spans sites) — decided as the engine decides (the gate, then
    an origin whose answer the abstainer would refuse escalates: engine.run); abstention on
    unanswerable, answers on answerable."""
    out: dict[str, Any] = {}
    gate = CalibratedGate(calibration.gate) if calibration.gate is not None else None
    abstain = CalibratedAbstainer(calibration.abstain) if calibration.abstain is not None else None
    # rows carry no question text; a question without content words abstains before any model
    serving_abstainer = default_abstainer(calibration)

    def share(examples: list[Example], decide: Callable[[Assessment], bool]) -> float | None:
        return round(sum(decide(assessment_of(e)) for e in examples) / len(examples), 4) if examples else None

    if gate is not None and any(r.model == "gate" for r in rows):
        g = [r.example for r in rows if r.model == "gate"]
        escalates = lambda a: not gate.decide(a).answer or serving_abstainer.judge("question", a).abstain  # noqa: E731
        out["escalation_in_domain"] = share([e for e in g if e.label], escalates)
        out["escalation_out_of_domain"] = share([e for e in g if not e.label], escalates)
        out["gate_rows"] = len(g)
    if calibration.escalate is not None and any(r.model == "escalate" for r in rows):
        got = replay(scored_steps(rows, calibration.escalate), calibration.escalate.threshold,
                     calibration.escalate_schedule)
        out["escalation_gold_site_recall"] = round(got["recall"], 4)
        out["escalation_sites_per_question"] = round(got["sites"], 3)
        out["escalate_questions"] = got["questions"]
    if abstain is not None and any(r.model == "abstain" for r in rows):
        a = [r.example for r in rows if r.model == "abstain"]
        abstains = lambda x: abstain.judge("question", x).abstain  # noqa: E731
        out["abstain_unanswerable"] = share([e for e in a if not e.label], abstains)
        out["answered_answerable"] = share([e for e in a if e.label], lambda x: not abstains(x))
        out["abstain_rows"] = len(a)
    read = calibration.read_abstain
    mine = [r.example for r in rows if r.model == "reader" and "answered" in r.example.features]
    if read is not None and mine:
        answers = lambda e: e.features["answered"] > 0 and read.score(e.features) >= read.threshold  # noqa: E731
        out["read_abstain_unanswerable"] = round(sum(not answers(e) for e in mine if not e.label)
                                                 / max(1, sum(not e.label for e in mine)), 4)
        out["read_answered_answerable"] = round(sum(answers(e) for e in mine if e.label)
                                                / max(1, sum(e.label for e in mine)), 4)
        out["reader_rows"] = len(mine)
    if calibration.tiers is not None:
        out.update(tier_rates(calibration.tiers, rows))
    return out


def assessment_of(example: Example) -> Assessment:
    return Assessment(**{n: example.features.get(n, 0.0) for n in FEATURES})  # type: ignore[arg-type]
