"""Pairs that teach the reader what an *unanswerable* question looks like (the second training stage).

Why: the first stage (reader_pairs) teaches "this sentence holds the answer, those sentences do
not", so the reader learns that a sentence sharing the question's words and holding a name or date
answers it. SQuAD 2.0's unanswerable questions were written to defeat exactly that: a question on
the same paragraph, with the same words, one detail changed so that nothing answers it (Rajpurkar
et al. 2018 count entity swaps 21%, antonyms 20%, mutual exclusion 15%, negation 9%). Trained on
stage one alone, the reader scored the best sentence of an unanswerable question almost as high as
an answerable one's (AUROC 0.589 on SQuAD 2.0 dev), and the gateway never abstained. Two sources:

- **Contrast questions** made from fit-split SQuAD v1.1 *train* questions: the question with one
  detail changed (`perturb`: an entity or number of the question that the gold sentence states,
  swapped for one of the same article that it does not; a word swapped for its antonym; a "not"
  after the copula), paired with the gold sentence as a negative, beside the original question's
  positive and one near miss. The same sentence, answering one question and not its twin.
- **Real unanswerable questions**: SQuAD 2.0 dev's, of the *fit* split only, and only on the dev
  articles `trainable_article` admits (half, by a hash of the article): every sentence of the
  paragraph they were written against is a negative. Answerable fit questions on those articles
  give positives, so the article itself teaches nothing. The other half of the dev articles is never
  read in training: evaluation/reader.py reports on them apart (`held_out`), the clean figure.
- **Off-topic sentences that share the question's words** (`off_topic` per question, `reader_train
  --off-topic N`; no shipped stage uses them: a third stage trained with them changed nothing that
  matters, benchmarks/README.md "Questions no site holds"): sentences of *other* articles chosen for the most content words in common with the
  question. Stage one saw one random sentence of another article per question, which shares
  nothing with it; the filler a site sends beside its answer does share words ("train a puppy" ->
  a dog breed's history), and the reader scored such sentences above the descriptive floor, so an
  out-of-scope question was answered with them (`hansa demo -q "How do I bake a tiramisu?"`).
"""
from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any, Sequence

from hansa.core.text import content_words
from hansa.evaluation.datasets import stable_hash
from hansa.evaluation.reader_pairs import Pair, Paragraph, answer_sentence, load_paragraphs, load_questions, question_pairs
from hansa.evaluation.split import split_of

ARTICLE_SALT = "hansa-reader-articles/v1"
TRAIN_ARTICLE_PERCENT = 50  # of the SQuAD 2.0 dev articles whose fit questions training may read
UNANSWERABLE_NEGATIVES = 4  # sentences of the near-miss paragraph per unanswerable question
OFF_TOPIC_DRAWS = 24  # paragraphs of other articles drawn per question; their most overlapping sentences are the negatives

# antonym swaps (both directions): 20% of SQuAD 2.0's unanswerable questions are antonyms (Rajpurkar et al. 2018)
_ANTONYMS = dict(pair for a, b in (
    ("first", "last"), ("largest", "smallest"), ("biggest", "smallest"), ("most", "least"), ("highest", "lowest"),
    ("before", "after"), ("earliest", "latest"), ("increase", "decrease"), ("increased", "decreased"),
    ("north", "south"), ("east", "west"), ("northern", "southern"), ("eastern", "western"), ("older", "younger"),
    ("oldest", "youngest"), ("longest", "shortest"), ("more", "less"), ("lower", "upper"), ("win", "lose"),
    ("won", "lost"), ("best", "worst"), ("major", "minor"), ("positive", "negative"), ("early", "late"),
    ("maximum", "minimum"), ("inside", "outside"), ("above", "below"), ("public", "private"),
    ("allowed", "forbidden"), ("start", "end"), ("began", "ended"), ("accepted", "rejected")) for pair in ((a, b), (b, a)))
_COPULA = re.compile(r"\b(is|was|are|were)\b (?!not\b)")
_STOP = frozenset("the a an in on of and or to for by with at from as is was were are this that it its".split())
_TOKEN = re.compile(r"[A-Za-z][\w'-]*|\d[\d,.]*")


def trainable_article(doc_id: str) -> bool:
    """Whether training may read this SQuAD 2.0 dev article's fit questions (the rule: a salted hash)."""
    return stable_hash(ARTICLE_SALT, doc_id) % 100 < TRAIN_ARTICLE_PERCENT


def read_in_training(question_id: str, doc_id: str) -> bool:
    """Whether stage two trained on this SQuAD 2.0 dev question: fit split, on a trainable article.
    Such questions fit no threshold or floor (the model has seen them) and are reported apart."""
    return split_of(question_id) == "fit" and trainable_article(doc_id)


def _names(text: str) -> list[str]:
    """Capitalized words and numbers: what an entity swap changes."""
    return [t for t in _TOKEN.findall(text) if t[0].isdigit() or t[0].isupper()]


def perturb(question: str, sentence: str, article_names: Sequence[str], rng: random.Random) -> str | None:
    """The question with one detail changed so that `sentence` (which answers it) no longer does;
    None when no rule applies. Entity swap first, then antonym, then negation."""
    in_sentence = set(_TOKEN.findall(sentence))
    asked = _TOKEN.findall(question)
    swappable = [t for i, t in enumerate(asked) if i > 0 and t in in_sentence and (t[0].isupper() or t[0].isdigit())]
    if swappable:
        old = rng.choice(swappable)
        pool = sorted({n for n in article_names if n not in in_sentence and n not in asked
                       and n[0].isdigit() == old[0].isdigit() and n.lower() not in _STOP})
        if pool:
            return re.sub(rf"(?<![\w]){re.escape(old)}(?![\w])", rng.choice(pool), question, count=1)
    words = question.split(" ")
    flips = [i for i, w in enumerate(words) if w.lower().strip("?,.") in _ANTONYMS
             and _ANTONYMS[w.lower().strip("?,.")] not in sentence.lower()]
    if flips:
        i = rng.choice(flips)
        bare = words[i].lower().strip("?,.")
        words[i] = words[i].lower().replace(bare, _ANTONYMS[bare])
        return " ".join(words)
    if _COPULA.search(question):
        return _COPULA.sub(lambda m: f"{m.group(1)} not ", question, count=1)
    return None



def contrast_pairs(squad_dir: Path, max_questions: int, seed: int = 13, max_dev: int = 0,
                   off_topic: int = 0) -> list[Pair]:
    """Stage two's pairs (the module docstring): up to `max_questions` fit-split train questions with
    their perturbed twins and `off_topic` sentences of other articles each, then (up to `max_dev`; 0:
    all) the trainable dev articles' fit questions."""
    paragraphs = load_paragraphs(squad_dir)
    by_doc: dict[str, list[Paragraph]] = {}
    for p in paragraphs.values():
        by_doc.setdefault(p.doc_id, []).append(p)
    rows = load_questions(squad_dir)
    rng = random.Random(seed)
    train = [r for r in rows if r["source"] == "squad1.1-train" and r["answerable"] and split_of(r["id"]) == "fit"]
    rng.shuffle(train)
    out: list[Pair] = []
    names_of: dict[str, list[str]] = {}
    # other articles' paragraphs, of v1.1 train articles only: the dev articles stay unread (held out)
    train_docs = {paragraphs[r["gold_passages"][0]].doc_id for r in train}
    pool = [p for p in paragraphs.values() if p.sentences and p.doc_id in train_docs] if off_topic else []
    for r in train[:max_questions] if max_questions else train:
        gold = paragraphs[r["gold_passages"][0]]
        found = answer_sentence(gold, r["answers"])
        if found is None:
            continue
        article = by_doc[gold.doc_id]
        if gold.doc_id not in names_of:
            names_of[gold.doc_id] = [n for p in article for n in _names(p.text)]
        twin = perturb(r["question"], gold.sentences[found[0]], names_of[gold.doc_id], rng)
        out += question_pairs(r["question"], r["answers"], gold, article, [], in_paragraph=1, in_article=0)
        if twin is not None:
            out.append(Pair(twin, gold.sentences[found[0]], 0))
        out += [Pair(r["question"], s, 0) for s in off_topic_sentences(r["question"], gold.doc_id, pool, off_topic, rng)]
    out += dev_pairs(rows, paragraphs, by_doc, max_dev)
    rng.shuffle(out)
    return out


def off_topic_sentences(question: str, doc_id: str, pool: Sequence[Paragraph], n: int, rng: random.Random) -> list[str]:
    """`n` sentences of other articles sharing the most content words with `question`, among the
    sentences of OFF_TOPIC_DRAWS paragraphs drawn at random from `pool`."""
    if n <= 0 or not pool:
        return []
    words = set(content_words(question))
    drawn = [pool[rng.randrange(len(pool))] for _ in range(OFF_TOPIC_DRAWS)]
    candidates = [s for p in drawn if p.doc_id != doc_id for s in p.sentences]
    candidates.sort(key=lambda s: -len(words & set(content_words(s))))
    return candidates[:n]


def dev_pairs(rows: Sequence[dict[str, Any]], paragraphs: dict[str, Paragraph],
              by_doc: dict[str, list[Paragraph]], limit: int = 0) -> list[Pair]:
    """Fit-split SQuAD 2.0 dev questions on trainable articles: unanswerable ones against their
    near-miss paragraph's sentences (negatives), answerable ones as in stage one."""
    out: list[Pair] = []
    taken = 0
    for r in rows:
        if not r["source"].endswith("squad2.0-dev"):
            continue
        doc = paragraphs[r["context_passage"]].doc_id
        if not read_in_training(r["id"], doc):
            continue
        if limit and taken == limit:
            break
        taken += 1
        if r["answerable"]:
            gold = paragraphs[r["gold_passages"][0]]
            out += question_pairs(r["question"], r["answers"], gold, by_doc[doc], [], in_paragraph=1, in_article=0)
        else:
            words = set(content_words(r["question"]))
            near = sorted(paragraphs[r["context_passage"]].sentences, key=lambda s: -len(words & set(content_words(s))))
            out += [Pair(r["question"], s, 0) for s in near[:UNANSWERABLE_NEGATIVES]]
    return out
