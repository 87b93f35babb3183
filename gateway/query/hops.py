"""Stage (after fuse, with a reader): second hops — ask about what the first answer named.

Why: a two-hop question ("Where was the author of X born?") is answered by a sentence that shares
few words with it; the first round finds the bridge ("X was written by Y") and nothing that answers.
Re-asking the question's own words never finds the second paragraph; asking about Y does.

Rule (engine.QueryEngine._second_hops): while the reader supports no answer, the budget allows and
`[gateway] second_hops` rounds remain, the entities of the best-read sentence that the question
does not hold (core.entities, names first) become a follow-up. The names alone are routed over the
summaries (what the second paragraph is about); the sites selected that were not asked yet (else
the best-ranked one not asked) get the question plus the names. The answer is then read against
that follow-up, so the reader sees the bridge. It stops when the reader supports an answer,
nothing new is named, or no site is left to ask.
"""
from __future__ import annotations

from hansa.core.entities import PROPER, ACRONYM, chunk_entities
from hansa.core.text import content_words

MAX_BRIDGE_ENTITIES = 3


def bridge_entities(question: str, sentence: str, limit: int = MAX_BRIDGE_ENTITIES) -> list[str]:
    """Names in `sentence` the question does not already hold (proper names and acronyms first)."""
    asked = content_words(question)
    found = []
    for _, name, kind, _ in chunk_entities(sentence):
        words = content_words(name)
        if not words or words <= asked:
            continue
        found.append((0 if kind in (PROPER, ACRONYM) else 1, len(found), name))
    return [name for _, _, name in sorted(found)[:limit]]
