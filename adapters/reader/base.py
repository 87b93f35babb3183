"""The reader port: does this sentence answer this question, and with which words?

Why a port: the gateway's judgements after routing (which sentences fill an answer, whether to
abstain, which side of a conflict answers the question, what a second hop asks) rest on it, and a
site ranks its own candidate sentences with the same reader. The shipped implementation is a small
cross-encoder trained here (onnx.py, model card in model/README.md); tests use a double of this port.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Reading:
    score: float  # probability that the sentence answers the question, in [0, 1]
    span: str = ""  # the answer's words within the sentence ("" when the reader gives none)
    start: int = -1  # the span's characters in the sentence (-1 without a span)
    end: int = -1


class Reader(Protocol):
    name: str
    model_sha256: str

    def read(self, question: str, sentences: Sequence[str]) -> list[Reading]:
        """One Reading per sentence, in order; never raises for ordinary text (empty -> score 0)."""
        ...
