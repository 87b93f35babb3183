"""Per-question metrics: routing and evidence, answer quality without an LLM judge, abstention.

Answer quality:
- SQuAD short answers: exact match and token F1 exactly as the official SQuAD v1.1/2.0 evaluation
  script computes them (lower-case, drop punctuation and English articles, whitespace tokens; the
  best over the reference answers). Written out here because the official script is not packaged
  and the packaged ports (HF `evaluate`, torchmetrics) pull a model hub or torch training stack in
  for ten lines; the unit tests pin it to hand-checked values.
- "contains a reference answer": the normalized reference occurs as whole tokens inside the
  normalized answer — fair to long extractive answers, which token F1 punishes for their length.
- MTRAG reference responses: token F1 (same normalization) and ROUGE-L from Google's `rouge-score`
  (the reference implementation of ROUGE-1.5.5 in Python), best over references.

Abstention: the gateway may say so explicitly (`abstained: true`, which the query engine adds);
until then an answer abstains when it is empty, starts with "No answer", or cites nothing.
"""
from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)
_CITATION_MARK = re.compile(r"\s*\[[^\[\]]{1,200}\]")  # fusion's "sentence [n]" markers
ABSTAIN_PREFIX = "no answer"


# -- answers --------------------------------------------------------------------------------------

def normalize_answer(text: str) -> str:
    """The official SQuAD normalization: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_text(answer: str) -> str:
    """The answer a user reads, without the citation markers fusion appends to each sentence."""
    return _CITATION_MARK.sub("", answer).strip()


def exact_match(prediction: str, references: Sequence[str]) -> float:
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(r) for r in references)) if references else 0.0


def _f1(pred_tokens: Sequence[str], ref_tokens: Sequence[str]) -> float:
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if not pred_tokens or not ref_tokens:
        return float(pred_tokens == ref_tokens)  # SQuAD 2.0: both empty is a match
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, references: Sequence[str]) -> float:
    """Best SQuAD token F1 of `prediction` against any reference (0 without references)."""
    pred = normalize_answer(prediction).split()
    return max((_f1(pred, normalize_answer(r).split()) for r in references), default=0.0)


def offtopic_share(used_docs: Sequence[str], gold: Sequence[str]) -> float:
    """Share of an answer's sentences (by their documents) from neither a gold passage nor its
    article (SQuAD's passage ids are `<article>#NNN`; elsewhere the passage id itself)."""
    articles = {g.split("#", 1)[0] for g in gold}
    off = [d for d in used_docs if d not in gold and d.split("#", 1)[0] not in articles]
    return len(off) / len(used_docs) if used_docs else 0.0


def contains_answer(prediction: str, references: Sequence[str]) -> float:
    """1.0 when some normalized reference occurs, token-aligned, inside the normalized prediction."""
    pred = f" {normalize_answer(prediction)} "
    return float(any(f" {ref} " in pred for ref in (normalize_answer(r) for r in references) if ref))


@lru_cache(maxsize=1)
def _rouge() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, references: Sequence[str]) -> float:
    """Best ROUGE-L F-measure of `prediction` against any reference (0 without references)."""
    scorer = _rouge()
    return max((scorer.score(r, prediction)["rougeL"].fmeasure for r in references), default=0.0)


def abstained(response: Mapping[str, Any]) -> bool:
    """Did the gateway decline to answer? An explicit `abstained` wins; otherwise an empty answer,
    one starting "No answer", or one without any citation."""
    flag = response.get("abstained")
    if isinstance(flag, bool):
        return flag
    text = str(response.get("answer", "")).strip()
    return not text or text.lower().startswith(ABSTAIN_PREFIX) or not response.get("citations")


def confidence(response: Mapping[str, Any]) -> float:
    """The gateway's confidence in its answer: an explicit `confidence`, else its best citation score."""
    value = response.get("confidence")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return max((float(c.get("score") or 0.0) for c in response.get("citations", [])), default=0.0)


# -- routing and evidence --------------------------------------------------------------------------

def gold_site_recall(asked: Sequence[str], gold_sites: Sequence[str]) -> float:
    return len(set(asked) & set(gold_sites)) / len(set(gold_sites)) if gold_sites else 0.0


def all_gold_sites_called(asked: Sequence[str], gold_sites: Sequence[str]) -> float:
    return float(bool(gold_sites) and set(gold_sites) <= set(asked))


def evidence_recall_at(ranked_docs: Sequence[str], gold: Sequence[str], k: int = 10) -> float:
    return len(set(gold) & set(ranked_docs[:k])) / len(set(gold)) if gold else 0.0


def reciprocal_rank(ranked_docs: Sequence[str], gold: Sequence[str]) -> float:
    wanted = set(gold)
    return next((1.0 / i for i, d in enumerate(ranked_docs, 1) if d in wanted), 0.0)


def recall_at_k_curve(ranked_sites: Sequence[str], gold_sites: Sequence[str], max_k: int) -> list[float]:
    return [gold_site_recall(ranked_sites[:k], gold_sites) for k in range(1, max_k + 1)]


# -- selective answering ----------------------------------------------------------------------------

def risk_coverage(confidences: Sequence[float], correct: Sequence[bool], points: int = 20) -> dict[str, Any]:
    """Answer only the most confident share c of questions: risk(c) = share of those answered wrongly
    (an unanswerable question answered counts as wrong). Returns the curve at `points` coverages and
    AURC, the mean risk over every coverage 1/n..1 (lower is better: a confidence that ranks every
    right answer above every wrong one keeps risk at 0 until the right ones run out)."""
    if len(confidences) != len(correct):
        raise ValueError("confidences and correct must have the same length")
    n = len(confidences)
    if n == 0:
        return {"coverage": [], "risk": [], "aurc": None}
    order = np.argsort(-np.asarray(confidences, dtype=float), kind="stable")
    wrong = 1.0 - np.asarray(correct, dtype=float)[order]
    risk_at = np.cumsum(wrong) / np.arange(1, n + 1)  # risk when answering the top i+1
    cov = np.linspace(1.0 / points, 1.0, points)
    idx = np.clip(np.ceil(cov * n).astype(int) - 1, 0, n - 1)
    return {"coverage": [round(float(c), 3) for c in cov], "risk": [round(float(r), 4) for r in risk_at[idx]],
            "aurc": round(float(risk_at.mean()), 4)}


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """Area under the ROC curve of `scores` separating positives (None when one class is absent): the
    Mann-Whitney U statistic over average ranks (ties count half), as scikit-learn's roc_auc_score
    computes it, without pulling scikit-learn and SciPy into the default install."""
    labels = np.asarray(positive, dtype=bool)
    if labels.all() or not labels.any():
        return None
    values = np.asarray(scores, dtype=float)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    uniques, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    if len(uniques) < len(values):  # tied scores share their average rank
        sums = np.bincount(inverse, weights=ranks)
        ranks = (sums / counts)[inverse]
    pos = int(labels.sum())
    neg = len(labels) - pos
    u = float(ranks[labels].sum()) - pos * (pos + 1) / 2.0
    return round(u / (pos * neg), 4)
