"""fuse() verifies what it uses instead of measuring every sentence: the same answer as measuring
all of them for honest sites, at fewer embeddings, and a site that lies about some sentences is
caught and fully measured (real embedder; sites are fakes of hansa's own SiteCall/PartialAnswer)."""
from __future__ import annotations

import pytest

from hansa.gateway.query.fusion import fuse
from hansa.gateway.query.reliability import SiteReliability

from .test_fusion_trust import GROTTO, LOURDES, QUESTION, SPAM, site

# Sentences from SQuAD v1.1's University_of_Notre_Dame article (CC BY-SA 4.0) and unrelated filler.
NOTRE_DAME = [
    LOURDES,
    GROTTO,
    "Atop the Main Building's gold dome is a golden statue of the Virgin Mary.",
    "Immediately in front of the Main Building and facing it, is a copper statue of Christ with arms upraised.",
    "Next to the Main Building is the Basilica of the Sacred Heart.",
    "At the end of the main drive is a simple, modern stone statue of Mary.",
]
OTHER = [
    "The roastery roasts its Ethiopian beans at 212 degrees Celsius for eleven minutes.",
    "The Brightwater Lighthouse was completed in 1874 after four years of work.",
    "Keepers lived in the cottages beside the tower until the light was automated in 1986.",
    "Visitors can climb the 142 steps of the tower on summer weekends.",
    "The cooperative sells green coffee beans from the Sidama region.",
    "Ships can see the white flash from 22 nautical miles away.",
]


def honest(embedder, q, site_id: str, texts: list[str], confidence: float = 0.7):
    """A site that reports the cosine it measured, best first, as a real site does."""
    claims = [(t, f"{site_id}-{n}", round(float(embedder.embed_one(t) @ q), 6)) for n, t in enumerate(texts)]
    return site(site_id, confidence, sorted(claims, key=lambda c: -c[2]))


def federation(embedder, q):
    return [honest(embedder, q, "nd1", NOTRE_DAME[:3]), honest(embedder, q, "other1", OTHER[:3], 0.4),
            honest(embedder, q, "nd2", NOTRE_DAME[3:]), honest(embedder, q, "other2", OTHER[3:], 0.4)]


def test_honest_sites_get_the_answer_measuring_everything_gives_at_fewer_embeddings(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    calls = federation(embedder, q)
    everything = fuse(q, calls, embedder, eager_below=10**6)
    verified = fuse(q, calls, embedder, eager_below=0)
    assert everything.measured == 12
    assert verified.measured < everything.measured
    assert [(s.text, s.site_id, s.doc_id) for s in verified.sentences] == [(s.text, s.site_id, s.doc_id) for s in everything.sentences]
    assert [s.weight for s in verified.sentences] == pytest.approx([s.weight for s in everything.sentences], abs=1e-5)
    assert [(c.site_id, c.doc_id) for c in verified.citations] == [(c.site_id, c.doc_id) for c in everything.citations]
    assert verified.answer == everything.answer


def test_a_site_lying_about_its_lesser_sentences_is_caught_and_fully_measured(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    # Its best claim is true (and spot-checked); the spam below it claims more than any honest sentence.
    true_claim = float(embedder.embed_one(LOURDES) @ q)
    liar = site("liar", 1.0, [(LOURDES, "nd", true_claim), (SPAM, "w1", true_claim - 0.01),
                              (f"{SPAM} Free shipping.", "w2", true_claim - 0.02), (f"{SPAM} Last chance.", "w3", 0.05)],
                score=1.0)
    calls = [liar, *federation(embedder, q)[1:]]
    rel = SiteReliability(None)
    fused = fuse(q, calls, embedder, eager_below=0, reliability=rel)
    assert all("example.com" not in s.text for s in fused.sentences)
    assert fused.sentences[0].text == LOURDES
    assert fused.measured >= 4 + 3  # every liar sentence, once caught, plus the others' spot checks
    assert rel.record("liar").failures == 1 and rel.record("nd2").failures == 0
    # the same outcome as measuring everything
    everything = fuse(q, calls, embedder, eager_below=10**6)
    assert [s.text for s in fused.sentences] == [s.text for s in everything.sentences]


def test_a_sentence_without_a_claim_is_always_measured(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    unclaimed = site("old", 1.0, [(SPAM, "w"), (GROTTO, "g")])  # a site that reports no relevance
    calls = [unclaimed, *federation(embedder, q)]
    fused = fuse(q, calls, embedder, eager_below=0)
    assert all(s.text != SPAM for s in fused.sentences)
    assert fused.measured >= 2 + 4
