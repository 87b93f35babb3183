"""fuse() does not take a site's word for it: measured relevance, reliability from history, and
contradictions between sites (real embedder; sites are fakes of hansa's own SiteCall/PartialAnswer)."""
from __future__ import annotations

import json

from hansa.gateway.client import OK, SiteCall
from hansa.gateway.query.fusion import fuse
from hansa.gateway.query.reliability import SiteReliability
from hansa.sync.wire import Citation, PartialAnswer

QUESTION = "When did the Virgin Mary reputedly appear to Saint Bernadette Soubirous at Lourdes?"
# squad:University_of_Notre_Dame#000 (SQuAD v1.1, CC BY-SA 4.0)
LOURDES = ("It is a replica of the grotto at Lourdes, France where the Virgin Mary reputedly appeared to Saint "
           "Bernadette Soubirous in 1858.")
GROTTO = "Immediately behind the basilica is the Grotto, a Marian place of prayer and reflection."
SPAM = "Buy cheap watches at example.com today."


def site(site_id: str, confidence: float, sentences: list[tuple], score: float = 0.5) -> SiteCall:
    docs = list(dict.fromkeys(s[1] for s in sentences))
    answer = PartialAnswer(site_id, " ".join(s[0] for s in sentences),
                           tuple(Citation(site_id, d, d.title(), score) for d in docs), confidence, tuple(sentences))
    return SiteCall(site_id, OK, 5.0, 10, 10, answer=answer)


def test_a_lying_site_never_outranks_an_honest_on_topic_site(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    honest_rel = float(embedder.embed_one(LOURDES) @ q)
    calls = [
        site("liar", 1.0, [(SPAM, "watches", 1.0)], score=1.0),
        site("honest", 0.5, [(LOURDES, "notre-dame", honest_rel)], score=0.6),
    ]
    rel = SiteReliability(None)
    fused = fuse(q, calls, embedder, reliability=rel)
    assert fused.sentences[0].site_id == "honest"
    assert all(s.text != SPAM for s in fused.sentences)  # measured as off-topic: weight 0
    assert [c.site_id for c in fused.citations] == ["honest", "liar"]  # its 1.0 score is capped by what was measured
    assert fused.answer.startswith(LOURDES)
    # claiming relevance the gateway did not measure is recorded against the liar; the honest site
    # made the answer, but nothing independent of it confirmed its sentence: no success (issue 32)
    assert rel.record("liar").failures == 1 and rel.record("honest").successes == 0


def test_site_scores_only_lower_a_sentence_never_raise_it(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    loud = fuse(q, [site("a", 1.0, [(GROTTO, "g", 1.0)])], embedder)
    quiet = fuse(q, [site("a", 1.0, [(GROTTO, "g", 0.1)])], embedder)
    silent = fuse(q, [site("a", 1.0, [(GROTTO, "g")])], embedder)
    assert loud.sentences[0].weight == silent.sentences[0].weight  # 1.0 claimed: the measurement stands
    assert quiet.sentences[0].weight < loud.sentences[0].weight  # 0.1 claimed: lowered to it


def test_sources_that_disagree_are_reported_and_the_majority_value_is_stated(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    wrong = LOURDES.replace("1858", "1878")
    calls = [site("a", 0.8, [(LOURDES, "nd")]), site("b", 0.7, [(LOURDES, "nd-copy")]),
             site("c", 0.9, [(wrong, "nd")])]
    fused = fuse(q, calls, embedder)
    assert all(s.text != wrong for s in fused.sentences)
    (conflict,) = fused.conflicts
    assert conflict.winner.value == "1858" and conflict.winner.sites == ("a", "b")
    assert conflict.sides[1].sites == ("c",) and conflict.sides[1].documents == (("c", "nd"),)
    assert "Sources disagree" in fused.answer and "1858" in fused.answer
    assert json.loads(json.dumps(fused.conflicts_json()))[0]["winner"] == "1858"
    # the losing copy's document drops below the agreeing ones in the evidence
    assert fused.citations[-1].site_id == "c"


def test_a_site_that_keeps_contradicting_the_majority_loses_weight(embedder, tmp_path) -> None:
    q = embedder.embed_one(QUESTION)
    wrong = LOURDES.replace("1858", "1878")
    rel = SiteReliability.open(tmp_path)
    history = []
    for _ in range(6):
        history.append(rel.weights(["contrarian", "a"])["contrarian"])
        fuse(q, [site("a", 0.8, [(LOURDES, "nd")]), site("b", 0.8, [(LOURDES, "nd")]),
                 site("contrarian", 0.8, [(wrong, "nd")])], embedder, reliability=rel)
    assert history == sorted(history, reverse=True) and history[-1] < history[0] - 0.2
    rel.close()
    rel = SiteReliability.open(tmp_path)  # a restart keeps the record
    w = rel.weights(["contrarian", "a"])
    assert w["contrarian"] < w["a"]
    # one against one now: the record decides, and the contrarian's copy leaves the answer
    fused = fuse(q, [site("a", 0.8, [(LOURDES, "nd")]), site("contrarian", 0.8, [(wrong, "nd")])], embedder,
                 reliability=rel)
    assert fused.conflicts[0].winner.sites == ("a",)
    assert [s.site_id for s in fused.sentences] == ["a"]
    assert "weigh more" in fused.conflicts[0].reason


def test_the_measured_batch_is_bounded_and_shared_fairly(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    flood = site("flood", 1.0, [(f"{SPAM} Offer number {i}.", f"w{i}", 1.0) for i in range(30)])
    calls = [flood, site("honest", 0.6, [(LOURDES, "nd")])]

    class Counting:
        model_id, dim = embedder.model_id, embedder.dim
        sizes: list[int] = []

        def embed(self, texts):
            self.sizes.append(len(texts))
            return embedder.embed(texts)

    counting = Counting()
    fused = fuse(q, calls, counting, max_measured=4)
    assert counting.sizes == [4]
    assert fused.sentences[0].site_id == "honest"


def test_reliability_grows_only_when_another_site_confirms_in_its_own_words(embedder) -> None:
    """A near-verbatim copy confirms nothing (anyone can copy public text, as a member capturing
    routing did, issue 32); the same claim in another site's own words does."""
    q = embedder.embed_one(QUESTION)
    own_words = "The Virgin Mary reputedly appeared to Saint Bernadette Soubirous at Lourdes, France in 1858."
    rel = SiteReliability(None)
    fuse(q, [site("a", 0.9, [(LOURDES, "grotto", 0.6)]), site("copy", 0.9, [(LOURDES, "grotto-copy", 0.6)])],
         embedder, reliability=rel)
    assert rel.record("a").successes == 0 and rel.record("copy").successes == 0
    fuse(q, [site("a", 0.9, [(LOURDES, "grotto", 0.6)]), site("b", 0.9, [(own_words, "apparitions", 0.6)])],
         embedder, reliability=rel)
    assert rel.record("a").successes == 1 and rel.record("b").successes == 1


def test_a_context_sentence_reported_at_its_picks_relevance_is_not_an_overclaim(embedder) -> None:
    """Sites send the sentence a pick leans on with the pick's relevance (plugin.retrieval); the
    gateway judges the two together, so an honest site is not charged for it, while the same
    claim on a sentence of another document is."""
    q = embedder.embed_one(QUESTION)
    pick = float(embedder.embed_one(LOURDES) @ q)
    assert pick - float(embedder.embed_one(GROTTO) @ q) > 0.25  # alone, the context falls far short
    rel = SiteReliability(None)
    fuse(q, [site("honest", 0.9, [(GROTTO, "nd", pick), (LOURDES, "nd", pick)])], embedder, reliability=rel)
    assert rel.record("honest").failures == 0
    fuse(q, [site("liar", 0.9, [(GROTTO, "other", pick), (LOURDES, "nd", pick)])], embedder, reliability=rel)
    assert rel.record("liar").failures == 1


def test_a_doctored_copy_that_agrees_on_all_but_the_changed_claim_confirms_nothing(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    doctored = ("A replica of the grotto at Lourdes, France, where the Virgin Mary reputedly appeared to Saint "
                "Bernadette Soubirous in 1865, stands here.")
    rel = SiteReliability(None)
    fused = fuse(q, [site("a", 0.9, [(LOURDES, "grotto", 0.6)]), site("liar", 0.9, [(doctored, "grotto", 0.6)])],
                 embedder, reliability=rel)
    assert fused.conflicts  # the year is disputed
    assert rel.record("a").successes == 0 and rel.record("liar").successes == 0


def test_the_overclaim_bound_is_the_embedders(embedder) -> None:
    """A claim 0.2 above what the gateway measured is within MiniLM's bound (0.25) and beyond bge's
    (scales.toml: the same bound in bge's narrower cosine units): the gateway judges a site by the
    scale of the model it measures with."""
    from hansa.adapters.embedder.scale import scale_for
    from tests.fakes import RelabelledEmbedder

    bge = RelabelledEmbedder(embedder, "BAAI/bge-small-en-v1.5")
    assert scale_for(bge.model_id).overclaim < 0.2 < scale_for(embedder.model_id).overclaim
    q = embedder.embed_one(QUESTION)
    claim = float(embedder.embed_one(LOURDES) @ q) + 0.2
    for measuring, failures in ((embedder, 0), (bge, 1)):
        rel = SiteReliability(None)
        fuse(q, [site("eager", 0.9, [(LOURDES, "nd", claim)])], measuring, reliability=rel)
        assert rel.record("eager").failures == failures
