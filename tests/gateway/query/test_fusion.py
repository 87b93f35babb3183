"""fuse(): extractive fusion of real partial answers with the real embedder, and its attribution."""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pytest

from hansa.gateway.client import ERROR, OK, TIMEOUT, SiteCall
from hansa.gateway.query.fusion import SUPPORT_STEP, fuse
from hansa.gateway.query.route import AnswerCoverage, QuestionWords
from hansa.sync.terms import TermSketch
from hansa.sync.wire import Citation, PartialAnswer

QUESTION = "Which river flows through Lyon?"


def ok_call(site: str, confidence: float, sentences: Sequence[tuple], cited: Sequence[tuple[str, str, float]]) -> SiteCall:
    answer = PartialAnswer(
        site_id=site,
        answer=" ".join(s[0] for s in sentences),
        citations=tuple(Citation(site, d, t, sc) for d, t, sc in cited),
        confidence=confidence,
        sentences=tuple(sentences),
    )
    return SiteCall(site, OK, 12.0, 100, 400, answer=answer)


def failed(site: str, status: str, why: str) -> SiteCall:
    return SiteCall(site, status, 50.0, 100, 0, error=why)


class CountingEmbedder:
    """The real embedder, counting calls: fusion must embed all sentences in one batch."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0
        self.model_id, self.dim = inner.model_id, inner.dim

    def embed(self, texts):
        self.calls += 1
        return self.inner.embed(texts)


def markers(answer: str) -> list[int]:
    return [int(n) for n in re.findall(r"\[(\d+)\]", answer)]


def test_relevant_sentences_win_and_markers_index_the_citations(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    calls = [
        ok_call("geo", 0.9, [("The Rhone flows through Lyon before meeting the Saone.", "rivers"),
                             ("Lyon has a large silk-weaving history.", "history")],
                [("rivers", "Rivers of France", 0.8), ("history", "Lyon history", 0.3)]),
        ok_call("food", 0.4, [("Bouchons serve traditional Lyonnais cuisine.", "bouchons")],
                [("bouchons", "Bouchons", 0.7)]),
        failed("slow", TIMEOUT, "no answer within 2 s"),
    ]
    counting = CountingEmbedder(embedder)
    fused = fuse(q, calls, counting)
    assert counting.calls == 1
    assert fused.note is None
    assert fused.sentences[0].text.startswith("The Rhone flows through Lyon")
    assert fused.sentences[0].site_id == "geo" and fused.sentences[0].doc_id == "rivers"
    weights = [s.weight for s in fused.sentences]
    assert weights == sorted(weights, reverse=True) and all(w > 0 for w in weights)
    # citations: union of both sites', each once, ranked by what the gateway measured (not by the
    # sites' scores: food scored "bouchons" 0.7, but its sentence is further from the question than
    # geo's sentence from "history", scored 0.3)
    assert [(c.site_id, c.doc_id) for c in fused.citations] == [("geo", "rivers"), ("geo", "history"), ("food", "bouchons")]
    # every [n] points at the citation of the sentence it follows
    assert markers(fused.answer) == [s.citation for s in fused.sentences]
    for s in fused.sentences:
        cited = fused.citations[s.citation - 1]
        assert (cited.site_id, cited.doc_id) == (s.site_id, s.doc_id)
        assert f"{s.text} [{s.citation}]" in fused.answer


def test_near_duplicates_keep_the_better_attributed_copy(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    same = "The Rhone river flows through the city of Lyon."
    calls = [
        # more confident, but its sentence points at a document the site does not cite
        ok_call("loud", 0.95, [(same, "uncited-doc")], [("other", "Other", 0.5)]),
        ok_call("careful", 0.6, [(same, "rhone")], [("rhone", "The Rhone", 0.9)]),
    ]
    fused = fuse(q, calls, embedder)
    assert [s.text for s in fused.sentences].count(same) == 1
    (kept,) = [s for s in fused.sentences if s.text == same]
    assert (kept.site_id, kept.doc_id) == ("careful", "rhone")
    assert fused.answer.count(same) == 1


def test_at_most_four_sentences_best_first(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    facts = [
        "The Rhone flows through Lyon.",
        "The Saone joins the Rhone at Lyon.",
        "Lyon lies at the confluence of two rivers.",
        "Barges on the Rhone carried goods to Lyon.",
        "The Rhone rises in the Swiss Alps.",
        "Lyon's old town sits beside the Saone river.",
    ]
    calls = [ok_call("geo", 0.8, [(f, f"d{i}") for i, f in enumerate(facts)], [(f"d{i}", f"D{i}", 0.5) for i in range(len(facts))])]
    fused = fuse(q, calls, embedder)
    assert len(fused.sentences) == 4
    assert len(markers(fused.answer)) == 4


def test_no_site_answered_says_so_and_why(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    fused = fuse(q, [failed("a", TIMEOUT, "no answer within 2 s"), failed("b", ERROR, "HTTP 500")], embedder)
    assert fused.sentences == () and fused.citations == ()
    assert fused.answer.startswith("No answer")
    assert "a: timeout" in fused.note and "b: error (HTTP 500)" in fused.note
    fused = fuse(q, [], embedder)
    assert "no site was asked" in fused.note and fused.answer.startswith("No answer")


def test_answers_with_nothing_relevant_are_reported(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    empty = SiteCall("a", OK, 5.0, 10, 10, answer=PartialAnswer("a", "", (), 0.0))
    zero = ok_call("b", 0.0, [("The Rhone flows through Lyon.", "d")], [("d", "D", 1.0)])
    fused = fuse(q, [empty, zero, failed("c", ERROR, "refused")], embedder)
    assert fused.sentences == ()
    assert "found nothing relevant" in fused.note and "c: error" in fused.note
    assert [(c.site_id, c.doc_id) for c in fused.citations] == [("b", "d")]


def test_a_bare_answer_without_sentences_is_used_under_its_top_citation(embedder) -> None:
    q = embedder.embed_one(QUESTION)
    answer = PartialAnswer("a", "The Rhone flows through Lyon.", (Citation("a", "top", "Top", 0.9),), 0.7)
    fused = fuse(q, [SiteCall("a", OK, 5.0, 10, 10, answer=answer)], embedder)
    assert fused.answer == "The Rhone flows through Lyon. [1]"
    assert fused.citations[0] == Citation("a", "top", "Top", 0.9)
    assert np.isclose(fused.sentences[0].weight, 0.7 * float(embedder.embed_one(answer.answer) @ q), atol=1e-5)


def test_site_relevance_only_lowers_what_the_gateway_measured_and_copies_add_support(embedder) -> None:
    """Sites send each sentence's cosine with the question: the gateway still measures every sentence
    (one batch) and uses the lower of the two; a near-verbatim copy from another site collapses into
    the better-attributed copy and counts as support (one other site: x (1 + SUPPORT_STEP))."""
    q = embedder.embed_one(QUESTION)
    text = "The Rhone flows through Lyon before meeting the Saone."
    history = "Lyon has a large silk-weaving history."
    calls = [
        ok_call("geo", 0.9, [(text, "rivers", 0.5), (history, "history", 0.99)],
                [("rivers", "Rivers of France", 0.8), ("history", "Lyon history", 0.3)]),
        ok_call("maps", 0.5, [("the Rhone flows through Lyon, before meeting the Saone", "atlas", 0.6)],
                [("atlas", "Atlas", 0.6)]),
    ]
    counting = CountingEmbedder(embedder)
    fused = fuse(q, calls, counting)
    assert counting.calls == 1
    measured_text, measured_history = (float(embedder.embed_one(t) @ q) for t in (text, history))
    assert measured_text > 0.5 and measured_history < 0.99  # lowered by the site; overclaimed: measured used
    assert [s.text for s in fused.sentences] == [text, history]
    assert fused.sentences[0].weight == pytest.approx(0.9 * min(0.5, measured_text) * (1 + SUPPORT_STEP), rel=1e-4)
    assert fused.sentences[1].weight == pytest.approx(0.9 * measured_history, rel=1e-4)


def test_a_site_prior_reorders_citations_across_sites_only(embedder) -> None:
    """Two sites cite documents on the question; one scores its own generously. Without a prior that
    site's documents lead; a prior from routing (the other site matched the question better) puts
    the other site's documents first. The documents are the same, only their order changes."""
    q = embedder.embed_one(QUESTION)
    calls = [
        ok_call("loud", 0.9, [("The Rhone flows through Lyon.", "l1"), ("Lyon lies on the Rhone river.", "l2")],
                [("l1", "L1", 0.9), ("l2", "L2", 0.85)]),
        ok_call("quiet", 0.9, [("The Rhone and the Saone meet in Lyon.", "q1"), ("Lyon's rivers are the Rhone and Saone.", "q2")],
                [("q1", "Q1", 0.6), ("q2", "Q2", 0.55)]),
    ]
    plain = [(c.site_id, c.doc_id) for c in fuse(q, calls, embedder).citations]
    weighed = [(c.site_id, c.doc_id) for c in fuse(q, calls, embedder, site_prior={"loud": 0.5, "quiet": 1.0}).citations]
    assert plain.index(("loud", "l1")) < plain.index(("quiet", "q1"))
    assert {site for site, _ in weighed[:2]} == {"quiet"}
    assert sorted(plain) == sorted(weighed)  # the same documents, only their order changes


def test_answer_coverage_puts_first_the_site_whose_answer_uses_the_questions_words(embedder) -> None:
    """Routing favoured a site whose answer is about rivers in general; the other site's answer
    names Lyon. Without coverage the favoured site's documents lead; weighed by how much of the
    question each answer uses (the rare "lyon" most), the other's do. Same documents, new order."""
    question = "Which river flows through Lyon?"
    q = embedder.embed_one(question)
    calls = [
        ok_call("general", 0.9, [("The river flows through the city centre.", "g1")], [("g1", "G1", 0.7), ("g2", "G2", 0.69)]),
        ok_call("lyon", 0.9, [("The Rhone river flows through Lyon.", "l1")], [("l1", "L1", 0.7), ("l2", "L2", 0.69)]),
    ]
    sketches = {"general": TermSketch.from_documents([("a", "river city"), ("b", "river flows")], 1),
                "lyon": TermSketch.from_documents([("c", "river Rhone Lyon"), ("d", "river flows")], 1)}
    prior = {"general": 1.0, "lyon": 0.5}
    plain = fuse(q, calls, embedder, site_prior=prior)
    coverage = AnswerCoverage.weighing(QuestionWords.of(question, sketches), 1.0)
    weighed = fuse(q, calls, embedder, site_prior=prior, coverage=coverage)
    assert weighed.site_coverage["lyon"] == 1.0 > weighed.site_coverage["general"] > 0.0 and not plain.site_coverage
    assert plain.citations[0].site_id == "general" and weighed.citations[0].site_id == "lyon"
    assert sorted((c.site_id, c.doc_id) for c in plain.citations) == sorted((c.site_id, c.doc_id) for c in weighed.citations)
