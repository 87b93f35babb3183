"""Which kind of answer a question asks for: a fact (a name, a date, a number) or a description.

Why: the reader (gateway/query/reading.py) was trained on SQuAD, whose questions ask for a short
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
