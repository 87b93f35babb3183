"""Which sentences of a chunk may answer a question, and the text each is scored by.

Why its own module: the split is made twice and must agree exactly — at ingest, where each
candidate's vector is computed once and stored (plugin.sentence_vectors), and at retrieval, which
looks those vectors up by (chunk id, offset) instead of embedding ~40 sentences per request.

Which sentences answer: statements only. FAQ pages are full of questions ("What is a safe room?")
that sit close to the user's question in embedding space yet answer nothing, and lead-ins ("Consider
the following:") or headings say nothing on their own; all are dropped. A sentence opening with an
anaphor ("Its last eruption began in 1912") leans on the sentence before it: it is scored (embedded)
together with that sentence.
"""
from __future__ import annotations

from dataclasses import dataclass

from hansa.core.sentences import sentence_spans

MIN_SENTENCE_WORDS = 5  # headings and fragments ("Kettle Ridge Roasters") state nothing
MAX_SENTENCE_CHARS = 400  # longer "sentences" (tables, unpunctuated text) are cut: no chunk leaks whole

# A sentence opening with one of these words leans on the sentence before it ("Its last eruption
# began in 1912"): it is scored together with that sentence, and brings it along into the answer.
_ANAPHORA = frozenset("it its this these they their theirs he his him she her them that those there such".split())


@dataclass(frozen=True)
class ChunkSentence:
    """One answer candidate of a chunk: its offset, its text, and the previous candidate when this
    one leans on it."""

    position: int
    text: str
    context: "ChunkSentence | None" = None

    @property
    def scored_text(self) -> str:
        """What is embedded for it: with its context, when it has one."""
        return f"{self.context.text} {self.text}" if self.context else self.text


def _states_nothing(sentence: str) -> bool:
    """Headings, fragments, questions and lead-ins ending in ":" are no answer to anything. A line
    without a closing full stop whose words are mostly capitalized is a title ("FEMA: Preparing a
    Safe Room"), however long."""
    if sentence.startswith("#") or len(sentence.split()) < MIN_SENTENCE_WORDS:
        return True
    bare = sentence.rstrip("\"'’”)]")
    if bare.endswith(("?", ":")):
        return True
    if bare.endswith((".", "!", "…")):
        return False
    words = [w for w in sentence.split() if w[0].isalpha()]
    return 2 * sum(w[0].isupper() for w in words) > len(words)


def answer_sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) candidates of a chunk: the chunker's sentences with whitespace folded;
    those that state nothing dropped, over-long ones cut so no chunk can leak whole as one "sentence"."""
    out: list[tuple[int, str]] = []
    for start, end in sentence_spans(text):
        sentence = " ".join(text[start:end].split())
        if _states_nothing(sentence):
            continue
        if len(sentence) > MAX_SENTENCE_CHARS:
            sentence = sentence[:MAX_SENTENCE_CHARS].rsplit(" ", 1)[0] + " …"
        out.append((start, sentence))
    return out


def leans_back(sentence: str) -> bool:
    first = sentence.split(maxsplit=1)[0].strip("\"'“‘(").lower()
    return first in _ANAPHORA


def chunk_sentences(text: str) -> list[ChunkSentence]:
    """The answer candidates of one chunk, in order, each linked to the candidate before it when it
    leans back on it (the context is the previous candidate of the same chunk, never across chunks)."""
    out: list[ChunkSentence] = []
    previous: ChunkSentence | None = None
    for position, sentence in answer_sentences(text):
        previous = ChunkSentence(position, sentence, previous if leans_back(sentence) else None)
        out.append(previous)
    return out
