"""Retrain the router from the gateway's outcome log: `hansa gateway router train`.

Why a separate step and not online learning: a model that changes under every query cannot be
reviewed, versioned or rolled back; training is cheap (seconds for 100k rows), so the operator
retrains when the log has grown and the new version applies at the next query (the router re-reads
the file). Training never touches routing state other than the model file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hansa.gateway.learned.model import DEFAULT_L2, RouterModel, fit
from hansa.gateway.learned.outcomes import OutcomeLog
from hansa.gateway.learned.router import MODEL_FILE

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
