"""The gateway reads: which offered sentences answer the question, by a reader the gateway owns.

Why: cosine similarity to the question says a sentence is *about* the question, not that it
*answers* it; off-topic filler from the same site, a misinformation sentence one word away from the
truth and a near-miss paragraph all score alike. A cross-encoder trained here for this
(adapters/reader; its card, adapters/reader/model/README.md, is written by evaluation/reader.py) reads each (question, sentence).

How fusion uses it (gateway.query.fusion): cosine (cheap, already measured to verify claims) picks a pool
of the POOL best candidates; the reader reads those of the pool that are about the question
(cosine at least `topic`, [gateway] topic_floor); its probability replaces cosine as the
relevance, and a sentence below the floor, or below RELATIVE of the best sentence's score, or off
the topic, weighs nothing: it fills no slot, takes no side in a conflict, and when no sentence
reaches the floor the gateway abstains (engine). A site's own score is never used to raise anything.

Why both: the reader judges whether a sentence *answers*, cosine whether it is *about* the question,
and each fails where the other holds. Trained on SQuAD, where every sentence it saw came from the
question's own article, the reader never learned to refuse a sentence on another topic that is
shaped like an answer: it scored "keeping the cash in a savings account would be a better choice"
0.51 for "What items should I keep in the safe room?" (`hansa demo`), a sentence MiniLM puts at
cosine 0.22, against 0.38-0.48 for the question's own passages.

The floor depends on the kind of question (`question_kind`, below): the reader, trained on
SQuAD's factoid questions, scores the sentences that answer "what does X do?" or "how do I ...?" far
lower than a sentence holding a name or a date, so the model's calibration holds a floor per kind
(`floors`, fit on the fit split by evaluation/reader_kinds.py) and each query reads at its kind's.

Configured by `[gateway] reader` ("packaged": the shipped model; "none": no reader; or a model
directory) and `[gateway] reader_floor` (negative: the model's own fit-split calibration, per kind;
a value in 0..1: that one floor for every question).

Which kind of answer a question asks for (`question_kind`): a fact (a name, a date, a number) or a description.

Why: the reader was trained on SQuAD, whose questions ask for a short
fact written in one sentence; it scores such a sentence high. A question that asks what something
does, how to do something or why ("What does FEMA do?", "How do I appeal?") is answered by
sentences that describe, and the reader scores even the right ones low (MTRAG's best gold sentence
often sits under 0.2). One floor fit on factoid questions refuses descriptive answers, so the
reader's calibration holds a floor per kind, each fit on questions of its kind (evaluation/
reader_kinds.py), and this rule decides which floor a question gets.

The rule is deliberately small, lexical and deterministic (no model: it must cost nothing and give
the fit and the gateway the same answer), read on the lower-cased words of the question's last
sentence that asks something, from its first question word ("got it. how much ...", "Sole
proprietorship or S-Corp, what should I do?"):
- descriptive: it starts with "why", "tell", another imperative verb (IMPERATIVES: "explain",
  "describe", ...), a yes/no auxiliary ("can", "is", "should", ...), or "how" not followed by a
  quantity word ("how many/much/long/old/..." stay factoid); or it asks "what does/should ... do",
  "what happens", "what (is|are) the difference/benefit/purpose/..." (DESCRIBED) or for a
  definition ("what is an identifier?": at most DEFINITION_WORDS words, no relation such as "of");
  or it has no question word at all (a topic typed as a query: "capital gains tax on stocks");
- factoid: everything else ("who", "when", "where", "which", "what year", "how many", "what is the
  capital of ...").
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from hansa.adapters.reader.base import Reader, Reading
from hansa.core.errors import ConfigError, InputError

if TYPE_CHECKING:
    from hansa.gateway.query.calibration import LogisticModel


FACTOID = "factoid"
DESCRIPTIVE = "descriptive"
KINDS = (FACTOID, DESCRIPTIVE)

_WORD = re.compile(r"[a-z0-9]+")  # "what's" -> "what", "s"
_SENTENCE = re.compile(r"[.!?]+")
# "how" + one of these asks for an amount or a degree: a fact
QUANTITY = frozenset("many much long old far big large small tall often few high deep wide fast early late soon "
                     "heavy hot cold".split())
AUXILIARIES = frozenset("can could should would will shall may might must is are was were do does did has have "
                        "had am isn aren don doesn".split())
# openers that ask for a description: "why" and imperative verbs
IMPERATIVES = frozenset("why explain describe tell list give show compare summarize summarise define help outline "
                        "walk discuss elaborate clarify".split())
QUESTION_WORDS = frozenset("who whom whose when where which what why how".split())
# what + is/are + (the|a) + one of these asks for a description
DESCRIBED = frozenset("difference differences benefit benefits advantage advantages disadvantage disadvantages "
                      "purpose purposes role roles function reason reasons way ways process steps step procedure "
                      "requirements rules impact effect effects point meaning".split())
# a definition ("what is an identifier?") names no relation; "what is the capital of France?" does
RELATIONS = frozenset("of for in on at by from to with as".split())
DEFINITION_WORDS = 4


def question_kind(question: str) -> str:
    """FACTOID or DESCRIPTIVE for a question (the rule in the module docstring)."""
    words = _asked(question)
    if not words:
        return FACTOID
    first, rest = words[0], words[1:]
    if first in IMPERATIVES or first in AUXILIARIES:
        return DESCRIPTIVE
    if first == "how":
        return FACTOID if rest and rest[0] in QUANTITY else DESCRIPTIVE
    if first == "what" and _what_describes(rest):
        return DESCRIPTIVE
    return FACTOID if first in QUESTION_WORDS else DESCRIPTIVE


def _asked(question: str) -> list[str]:
    """The words of the question's last sentence, from its first question word when it opens with
    something else ("got it. how much ...", "Sole proprietorship or S-Corp, what should I do?")."""
    sentences = [w for w in (_WORD.findall(s) for s in _SENTENCE.split(question.lower())) if w]
    asking = [w for w in sentences if w[0] in AUXILIARIES | IMPERATIVES or QUESTION_WORDS.intersection(w)]
    words = (asking or sentences or [[]])[-1]  # "St. Elizabeth" splits a sentence: the asking part counts
    if words and words[0] not in QUESTION_WORDS | AUXILIARIES | IMPERATIVES:
        at = next((i for i, w in enumerate(words) if w in QUESTION_WORDS), None)
        return words[at:] if at is not None else words
    return words


def _what_describes(rest: list[str]) -> bool:
    """After "what": "does X do", "should I do", "happens", "is the
    difference/purpose/...", or a definition ("what is an identifier")."""
    if not rest:
        return False
    if rest[0] in ("happens", "happened") or (rest[0] in AUXILIARIES and "do" in rest[1:]):
        return True
    if rest[0] not in ("is", "are", "was", "were", "s"):
        return False
    body = [w for w in rest[1:] if w not in ("the", "a", "an", "some", "main", "key")]
    if body and body[0] in DESCRIBED:
        return True
    return 0 < len(body) <= DEFINITION_WORDS and not RELATIONS.intersection(body)


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
    # a sentence measured below this cosine to the question is not about it: it supports nothing
    # ([gateway] topic_floor, in the embedder's units; applied by gateway.query.fusion)
    topic: float = 0.0
    # Abstention after reading that ships with the reader's calibration (its card's `abstain`, fit by
    # evaluation/reader_abstain.py over scale-free features): used when the gateway's own calibration
    # holds no `read_abstain` for this reader (engine._read_abstain)
    abstain: "LogisticModel | None" = None

    def for_question(self, question: str) -> "ReadingStage":
        """This stage at the floor of the question's kind (itself when no kind has its own floor)."""
        kind = question_kind(question)
        chosen = self.floors.get(kind)
        return self if chosen is None else replace(self, floor=float(chosen), kind=kind)

    def read(self, question: str, sentences: Sequence[str]) -> list[Reading]:
        return self.reader.read(question, list(sentences))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.reader.name, "model_sha256": self.reader.model_sha256, "floor": round(self.floor, 4),
                "pool": self.pool, "relative": self.relative, "topic": self.topic,
                **({"kind": self.kind} if self.kind else {})}


def open_reading(reader: str, floor: float = -1.0, pool: int = POOL, relative: float = -1.0,
                 topic: float = 0.0) -> ReadingStage | None:
    """The reading stage `[gateway] reader` names, or None for "none". A missing or corrupt model is
    an error naming the file and the command that makes it (adapters.reader.onnx), never a fallback.

    `floor` and `relative` negative: the model's own calibration (scores are in one model's units,
    so a share fit for one reader is wrong for another); `relative` falls back to RELATIVE for a
    model whose calibration holds none."""
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
    # the card's abstention belongs with the card's floors: it was fit counting what they refuse
    abstain = packaged_abstain(calibration, model.model_sha256) if floor < 0 else None
    share = float(calibration.get("relative", RELATIVE)) if relative < 0 else float(relative)
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"[gateway] reader_relative_floor must lie in 0..1 (or be negative: the model's calibration), "
                          f"not {share}")
    if not 0.0 <= topic <= 1.0:
        raise ConfigError(f"[gateway] topic_floor must lie in 0..1 (a cosine; 0: off), not {topic}")
    return ReadingStage(model, chosen, pool, share, floors, abstain=abstain, topic=topic)


def packaged_abstain(calibration: Mapping[str, Any], model_sha256: str) -> "LogisticModel | None":
    """The card's abstention model, or None when the card holds none. One fit for another reader, or
    malformed, is an error naming the command that remakes it: the card ships with the model, so
    either is a broken package, not a configuration to fall back from."""
    from hansa.gateway.query.calibration import LogisticModel

    if calibration.get("abstain") is None:
        return None
    remake = "remake it with python -m hansa.evaluation.reader_abstain --data ROWS --write"
    try:
        model = LogisticModel.from_json(calibration["abstain"])
    except InputError as exc:
        raise ConfigError(f"the reader's calibration `abstain` is malformed ({exc}): {remake}") from exc
    if model.fit.get("model_sha256") != model_sha256:
        raise ConfigError(f"the reader's calibration `abstain` was fit for another reader "
                          f"({model.fit.get('model_sha256')!r}, not {model_sha256!r}): {remake}")
    return model
