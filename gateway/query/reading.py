"""The gateway reads: which offered sentences answer the question, by a reader the gateway owns.

Why: cosine similarity to the question says a sentence is *about* the question, not that it
*answers* it; off-topic filler from the same site, a misinformation sentence one word away from the
truth and a near-miss paragraph all score alike. A cross-encoder trained here for this
(adapters/reader; its card, adapters/reader/model/README.md, is written by evaluation/reader.py) reads each (question, sentence).

How fusion uses it (gateway.query.fusion): cosine (cheap, already measured to verify claims) picks a pool
of the POOL best candidates; the reader reads the pool; its probability replaces cosine as the
relevance, and a sentence below the floor, or below RELATIVE of the best sentence's score, weighs
nothing: it fills no slot, takes no side in a conflict, and when no sentence reaches the floor the
gateway abstains (engine). A site's own score
is never used to raise anything.

The floor depends on the kind of question (gateway/query/question_kind.py): the reader, trained on
SQuAD's factoid questions, scores the sentences that answer "what does X do?" or "how do I ...?" far
lower than a sentence holding a name or a date, so the model's calibration holds a floor per kind
(`floors`, fit on the fit split by evaluation/reader_kinds.py) and each query reads at its kind's.

Configured by `[gateway] reader` ("packaged": the shipped model; "none": no reader; or a model
directory) and `[gateway] reader_floor` (negative: the model's own fit-split calibration, per kind;
a value in 0..1: that one floor for every question).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from hansa.adapters.reader.base import Reader, Reading
from hansa.core.errors import ConfigError
from hansa.gateway.query.question_kind import question_kind

POOL = 12  # sentences read per question: 4 answer slots and their competitors (cost: reading_ms)
# A sentence beside the best one must score at least this share of the best one's score: the floor
# alone (fit so that 0.92 of answerable questions keep an answer) sits low, and filler just above it
# would fill the answer's other slots. 0.5 was set, not fit.
RELATIVE = 0.5


@dataclass(frozen=True)
class ReadingStage:
    reader: Reader
    floor: float  # a sentence whose reader score is below this supports nothing
    pool: int = POOL
    relative: float = RELATIVE  # ... nor one below this share of the best sentence's score
    floors: Mapping[str, float] = field(default_factory=dict)  # per kind of question; a kind without one: `floor`
    kind: str = ""  # the kind of question whose floor `floor` is (for_question), "" before

    def for_question(self, question: str) -> "ReadingStage":
        """This stage at the floor of the question's kind (itself when no kind has its own floor)."""
        kind = question_kind(question)
        chosen = self.floors.get(kind)
        return self if chosen is None else replace(self, floor=float(chosen), kind=kind)

    def read(self, question: str, sentences: Sequence[str]) -> list[Reading]:
        return self.reader.read(question, list(sentences))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.reader.name, "model_sha256": self.reader.model_sha256, "floor": round(self.floor, 4),
                "pool": self.pool, "relative": self.relative, **({"kind": self.kind} if self.kind else {})}


def open_reading(reader: str, floor: float = -1.0, pool: int = POOL, relative: float = RELATIVE) -> ReadingStage | None:
    """The reading stage `[gateway] reader` names, or None for "none". A missing or corrupt model is
    an error naming the file and the command that makes it (adapters.reader.onnx), never a fallback."""
    from hansa.adapters.reader.onnx import open_reader

    model = open_reader(reader)
    if model is None:
        return None
    calibration = model.calibration
    chosen = float(calibration.get("floor", 0.5)) if floor < 0 else float(floor)
    floors = {str(k): float(v) for k, v in dict(calibration.get("floors", {})).items()} if floor < 0 else {}
    if not 0.0 <= chosen <= 1.0:
        raise ConfigError(f"[gateway] reader_floor must lie in 0..1 (or be negative: the model's calibration), not {floor}")
    if any(not 0.0 <= v <= 1.0 for v in floors.values()):
        raise ConfigError(f"the reader's calibration floors {floors} must lie in 0..1: remake them with "
                          "python -m hansa.evaluation.reader_kinds DIR --squad ... --mtrag ... --write")
    if pool < 1:
        raise ConfigError(f"[gateway] reader_pool must be 1 or more, not {pool}")
    if not 0.0 <= relative <= 1.0:
        raise ConfigError(f"[gateway] reader_relative_floor must lie in 0..1, not {relative}")
    return ReadingStage(model, chosen, pool, relative, floors)
