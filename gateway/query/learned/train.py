"""Retrain the router from the gateway's outcome log: `hansa gateway router train`.

Why a separate step and not online learning: a model that changes under every query cannot be
reviewed, versioned or rolled back; training is cheap (seconds for 100k rows), so the operator
retrains when the log has grown and the new version applies at the next query (the router re-reads
the file). Training never touches routing state other than the model file.

An evaluation can also train from labelled rows (`router_rows`, `train_from_rows`): every site the
router ranks for a fit-split question, labelled "holds gold evidence" — the noise-free version of
the log's "contributed to the answer", collected without calling a site (`hansa eval --split fit
--calibration-rows`, then `hansa gateway router train --rows`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from hansa.core.errors import InputError
from hansa.gateway.query.learned.features import FEATURE_NAMES
from hansa.gateway.query.learned.model import DEFAULT_L2, RouterModel, fit
from hansa.gateway.query.learned.outcomes import OutcomeLog
from hansa.gateway.query.learned.router import MODEL_FILE, LearnedRouter, index_published

MIN_QUESTIONS = 20


def train_router(home: Path, *, target_recall: float = 0.95, l2: float = DEFAULT_L2,
                 min_questions: int = MIN_QUESTIONS, max_records: int = 50_000) -> tuple[RouterModel, Path]:
    """Fit on `<home>/outcomes*.jsonl`, write `<home>/model.json` (and models/<version>.json)."""
    x, y, groups = OutcomeLog(home, max_records).training_rows()
    questions = len(set(groups))
    if questions < min_questions:
        raise ValueError(f"the outcome log at {home} holds {questions} questions with called sites; "
                         f"at least {min_questions} are needed to train")
    model = fit(x, y, groups, l2=l2, target_recall=target_recall)
    return model, model.save(home / MODEL_FILE)


def summary(model: RouterModel, path: Path) -> dict[str, Any]:
    return {"model": str(path), "version": model.version, "rows": model.rows, "questions": model.questions,
            "positives": model.positives, "threshold": round(model.threshold, 4), "data_digest": model.data_digest,
            "features": list(model.feature_names),
            "weights": {n: round(w, 4) for n, w in zip(model.feature_names, model.weights)}}


def router_rows(gateway: Any, questions: Iterable[Any]) -> list[Any]:
    """One `router` row per site the learned router's features describe, for each answerable
    question (`LabelledQuestion`s): its features by name, labelled "holds gold evidence"; no site
    is called (`QueryEngine.rank`)."""
    from hansa.gateway.query.calibrate import Row
    from hansa.gateway.query.calibration import Example

    router = LearnedRouter.from_model(None, index_published(gateway.index))
    rows = []
    for q in questions:
        if not q.answerable or not q.gold_sites:
            continue
        for s in gateway.engine.rank(q.text, router).considered:
            features = dict(zip(FEATURE_NAMES, getattr(s, "features", ())))
            rows.append(Row("router", Example(features, s.site_id in q.gold_sites, q.id), site=s.site_id))
    return rows


def train_from_rows(rows: Sequence[Any], *, target_recall: float = 0.95, l2: float = DEFAULT_L2,
                    min_questions: int = MIN_QUESTIONS) -> RouterModel:
    """A model fit on `router` rows (router_rows); rows collected under other features are refused."""
    mine = [r for r in rows if r.model == "router"]
    if any(set(r.example.features) != set(FEATURE_NAMES) for r in mine):
        raise InputError(f"router rows must carry exactly the features {list(FEATURE_NAMES)}: "
                         "re-collect them with this version (hansa eval --split fit --calibration-rows)")
    groups = [r.example.question_id for r in mine]
    if len(set(groups)) < min_questions:
        raise InputError(f"{len(set(groups))} questions carry router rows; at least {min_questions} are needed to train")
    x = np.array([[r.example.features[n] for n in FEATURE_NAMES] for r in mine], dtype=np.float64)
    y = np.array([int(r.example.label) for r in mine], dtype=np.int8)
    try:
        return fit(x, y, groups, l2=l2, target_recall=target_recall)
    except ValueError as exc:
        raise InputError(str(exc)) from exc
