"""Stage (after refine, before fuse): abstain — does the federation hold an answer at all?

Why: stitching the best sentences of weak evidence answers every question, "hi" included. When no
site asked holds good evidence, the honest answer is to say so, with what was searched, so the
user knows the federation was asked and came back empty (not that something failed).

Contract: `judge(question, assessment) -> AbstainDecision`, cheap, never raises. `score` is the
confidence that the evidence answers the question (higher: answer), exposed as the response's
`confidence` so the evaluation can draw risk-coverage curves and AUROC; `abstain` is the decision.

- `EvidenceRule` (the default, no calibration): abstain only when nothing could answer — the
  question has no content word (nothing to look for: "hi", "ok?") or no site offered a passage.
  Its score is the best passage's relevance (uncalibrated).
- `CalibratedAbstainer`: the same rule, then a logistic model over the final assessment
  (query.calibration, fit on answerable vs unanswerable fit-split questions): abstain below the
  model's threshold; its score is the model's probability.
- `read_abstain` (a gateway with a reader whose calibration holds `read_abstain`): after fusion,
  a logistic model over the final assessment and the reader's best score; below its threshold
  the answer is withdrawn.
- `shares_no_word` (the engine applies it to the final answer, `[gateway]
  abstain_without_question_words`): abstain when the best passages hold none of the question's
  content words, whichever abstainer judged.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Protocol, Sequence

from hansa.gateway.query.assess import Assessment
from hansa.gateway.query.calibration import LogisticModel
from hansa.core.text import content_words  # the sites' own notion of a content word

NO_ANSWER = "The federation holds no answer to this question"
# Why a question none of whose content words appears in the best passages is not answered
# (`[gateway] abstain_without_question_words`): the sites hold nothing on it, and what they sent is
# their nearest filler ("How do I bake a tiramisu?" -> a court's "You can follow the instructions
# in this guide."), which neither cosine nor the reader tells apart from an answer well enough
# (benchmarks/README.md, "Questions no site holds"). Only for the final answer: an origin whose
# passages share no word is left to the gate, whose fit (calibrate.py) reads the same features.
NO_SHARED_WORD = "no passage the sites returned holds a word of the question"


def shares_no_word(question: str, assessment: Assessment) -> AbstainDecision | None:
    """An abstention when the best passages hold none of the question's content words (None
    when they hold some, or when nothing came back: the abstainers say so themselves)."""
    if assessment.passages and assessment.coverage == 0.0 and content_words(question):
        return AbstainDecision(True, 0.0, NO_SHARED_WORD)
    return None


@dataclass(frozen=True)
class AbstainDecision:
    abstain: bool
    score: float  # confidence that the evidence answers the question (higher: answer)
    reason: str
    threshold: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"abstain": self.abstain, "score": round(self.score, 4), "reason": self.reason}
        if self.threshold is not None:
            out["threshold"] = round(self.threshold, 4)
        return out


class Abstainer(Protocol):
    name: str

    def judge(self, question: str, assessment: Assessment) -> AbstainDecision: ...


def _nothing_to_answer(question: str, assessment: Assessment) -> AbstainDecision | None:
    if not content_words(question):
        return AbstainDecision(True, 0.0, "the question has no content word to look for")
    if assessment.passages == 0:
        return AbstainDecision(True, 0.0, "no site offered any evidence")
    return None


@dataclass(frozen=True)
class EvidenceRule:
    name: str = "evidence-rule"

    def judge(self, question: str, assessment: Assessment) -> AbstainDecision:
        return _nothing_to_answer(question, assessment) or AbstainDecision(
            False, assessment.best_relevance, "evidence found (no calibrated abstention model)")


@dataclass(frozen=True)
class CalibratedAbstainer:
    model: LogisticModel
    name: str = "calibrated"

    def judge(self, question: str, assessment: Assessment) -> AbstainDecision:
        rule = _nothing_to_answer(question, assessment)
        if rule is not None:
            return AbstainDecision(True, rule.score, rule.reason, self.model.threshold)
        p = self.model.probability(assessment)
        if p < self.model.threshold:
            return AbstainDecision(True, p, "the best evidence is below the calibrated threshold", self.model.threshold)
        return AbstainDecision(False, p, "the evidence is confident enough", self.model.threshold)


def read_abstain(model: LogisticModel, assessment: Assessment, reading: Mapping[str, object]) -> AbstainDecision:
    """After reading, for a calibration with `read_abstain`: the model over the final evidence and
    the reader's best score (gateway.query.calibrate.fit_reader_abstain) decides."""
    values = {**asdict(assessment), "reader_best": float(reading.get("best", 0.0))}  # type: ignore[arg-type]
    p = model.score(values)
    if p < model.threshold:
        return AbstainDecision(True, p, "the evidence and the reader's score are below the calibrated threshold",
                               model.threshold)
    return AbstainDecision(False, p, "the reader supports the answer (calibrated)", model.threshold)


def no_answer_text(sites_asked: Sequence[str], best_relevance: float) -> str:
    """What an abstaining answer says: plainly no answer, and what was searched."""
    if not sites_asked:
        return f"{NO_ANSWER}: no site was asked."
    names = ", ".join(sites_asked)
    noun = "site" if len(sites_asked) == 1 else "sites"
    return f"{NO_ANSWER}. Searched {len(sites_asked)} {noun} ({names}); the best evidence scored {best_relevance:.2f}."


def budget_cut_text(sites_cut: Sequence[str], time_ms: int) -> str:
    """What an answer says when the query's own time budget cut every call: not an abstention.

    Why apart from `no_answer_text`: "the federation holds no answer" would tell the user the
    sites were asked and came back empty, when none of them had the time to say anything."""
    noun = "site" if len(sites_cut) == 1 else "sites"
    return (f"No answer: the query's time budget ({time_ms} ms) ran out before any site answered; it cut the "
            f"call to every {noun} asked ({', '.join(sites_cut)}). This is not an absence of an answer: "
            "ask again with a larger budget.time_ms.")
