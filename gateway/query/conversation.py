"""Stage before routing: a follow-up turn made standalone from the conversation, without an LLM.

Why: MTRAG's questions are later turns of conversations ("what about the second one?"), and a last
turn alone often names nothing a site's summaries could match. Routing and retrieval need the topic,
which the earlier turns carry.

How, and why this way: the question keeps its own words and gains up to `carry_words` salient
content words of the user's earlier turns (hansa.core.text.content_words: the retrieval's own
notion of a meaningful word), each word scored by the decayed weight of the turns it appears in
(`decay` ** turns back, summed), ties to the more recent turn. A text rewrite, not a vector mix, so
the same standalone question serves the router (embedded once) and the sites' retrieval requests
(their own lexical and vector search), and shows in the trace. With an LLM, a rewritten question
would read better; it would also cost a model call before routing, on every turn.

Contract: `standalone_question(question, conversation, carry_words, decay) -> str`; the question is
returned unchanged without earlier turns or with `carry_words` 0; the result never exceeds what a
site accepts (MAX_QUESTION_CHARS). `[gateway] conversation_carry_words` / `conversation_decay` are
the defaults; `hansa eval --dataset mtrag --conversation` measures them (benchmarks/).
"""
from __future__ import annotations

from typing import Sequence

from hansa.core.text import fold
from hansa.core.text import content_words  # the sites' own notion of a content word
from hansa.sync.wire import MAX_QUESTION_CHARS


def carried_words(question: str, conversation: Sequence[str], carry_words: int, decay: float) -> list[str]:
    """The earlier turns' salient words the question lacks, best first."""
    if carry_words <= 0 or not conversation:
        return []
    have = content_words(question)
    score: dict[str, float] = {}  # insertion order: most recent turn first, which breaks ties
    for back, turn in enumerate(reversed(conversation)):
        weight = decay ** back
        for word in dict.fromkeys(fold(turn).split()):
            folded = content_words(word)
            if len(folded) != 1:
                continue
            key = next(iter(folded))
            if key not in have:
                score[key] = score.get(key, 0.0) + weight
    ranked = sorted(score, key=lambda w: -score[w])  # stable: equal scores keep recency order
    return ranked[:carry_words]


def standalone_question(question: str, conversation: Sequence[str], carry_words: int, decay: float) -> str:
    words = carried_words(question, conversation, carry_words, decay)
    if not words:
        return question
    return f"{question} {' '.join(words)}"[:MAX_QUESTION_CHARS].strip()
