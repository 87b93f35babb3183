"""Retrieval on a real small site: the right document is cited, the answer is extractive and
attributable, global mode answers from communities, and an empty site answers with nothing."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hansa.plugin.retrieval import MAX_SENTENCE_CHARS, answer_sentences, confidence_from_similarity, retrieve
from hansa.plugin.site import CHUNKS, SUMMARIES, SiteContext
from hansa.sync.wire import PartialAnswer, RetrieveRequest

SITE_ID = "acme"  # as configured by the fixtures in conftest.py


def _folded(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    ("question", "doc_id", "fact"),
    [
        ("Who designed the Brightwater Lighthouse?", "lighthouse.md", "Margaret Ellison"),
        ("How long are the Ethiopian Yirgacheffe beans roasted?", "roastery.txt", "eleven minutes"),
        ("When did Mount Teravik last erupt?", "volcano.md", "1912"),
        ("Which prize did the Lindenfeld recordings of the Brandenburg Concertos win?", "orchestra.txt", "Edison Prize"),
    ],
)
def test_local_answer_cites_the_document_that_holds_it(built_site: SiteContext, question: str, doc_id: str, fact: str) -> None:
    answer = retrieve(built_site, RetrieveRequest(question=question, top_k=3))
    assert answer.site_id == SITE_ID
    assert answer.citations[0].doc_id == doc_id
    assert fact in answer.answer
    assert answer.sentences and answer.sentences[0][1] == doc_id
    assert answer.confidence >= 0.5


def test_citations_are_unique_ranked_bounded_and_titled(built_site: SiteContext) -> None:
    answer = retrieve(built_site, RetrieveRequest(question="Who owns the Brightwater Lighthouse?", top_k=2))
    assert 1 <= len(answer.citations) <= 2
    doc_ids = [c.doc_id for c in answer.citations]
    assert len(set(doc_ids)) == len(doc_ids)
    scores = [c.score for c in answer.citations]
    assert scores == sorted(scores, reverse=True)
    assert answer.citations[0].title == "Brightwater Lighthouse"
    assert all(c.site_id == SITE_ID for c in answer.citations)


def test_answer_is_made_only_of_sentences_from_cited_documents(built_site: SiteContext, corpus: dict[str, str]) -> None:
    answer = retrieve(built_site, RetrieveRequest(question="What does the Hallgrim Volcano Observatory do?", top_k=4))
    assert answer.answer == " ".join(text for text, _ in answer.sentences)
    assert 1 <= len(answer.sentences) <= 6
    cited = {c.doc_id for c in answer.citations}
    for text, doc_id in answer.sentences:
        assert doc_id in cited
        assert text in _folded(corpus[doc_id])
    # What goes over the wire is the wire type, and it round-trips.
    assert PartialAnswer.from_json(json.loads(json.dumps(answer.to_json()))) == answer


def test_no_chunk_text_leaves_beyond_the_answer_sentences(built_site: SiteContext, corpus: dict[str, str]) -> None:
    answer = retrieve(built_site, RetrieveRequest(question="Tell me about the Karsholm Harbour Trust", top_k=10))
    body = json.dumps(answer.to_json())
    chosen = {text for text, _ in answer.sentences}
    for doc_id, text in corpus.items():
        for _, sentence in answer_sentences(text):
            if sentence not in chosen:
                assert sentence not in body, f"unchosen sentence of {doc_id} leaked: {sentence!r}"


def test_an_unrelated_question_gets_low_confidence(built_site: SiteContext) -> None:
    related = retrieve(built_site, RetrieveRequest(question="Who designed the Brightwater Lighthouse?"))
    unrelated = retrieve(built_site, RetrieveRequest(question="What is the boiling point of liquid nitrogen?"))
    assert unrelated.confidence < 0.3 < 0.7 < related.confidence
    if unrelated.confidence == 0.0:
        assert unrelated.answer == "" and unrelated.sentences == ()


def test_global_mode_answers_from_the_best_matching_communities(built_site: SiteContext) -> None:
    question = "Who leads the volcano observatory and what does it monitor?"
    assert built_site.vectors.count(SUMMARIES) > 0
    query = built_site.embedder.embed_one(question)
    best = built_site.vectors.search(SUMMARIES, query[None, :], limit=1)[0][0]
    community = {c.id: c for c in built_site.graph.communities()}[best.id]

    answer = retrieve(built_site, RetrieveRequest(question=question, top_k=3, mode="global"))
    assert answer.citations and answer.citations[0].doc_id in community.doc_ids
    assert answer.citations[0].doc_id == "volcano.md"
    assert "Ingrid Saeter" in answer.answer
    assert answer.confidence > 0.3


def test_expanded_chunks_are_scored_like_vector_hits(built_site: SiteContext) -> None:
    """Every cited score is the cosine of the question with a stored chunk vector of that document."""
    question = "Where does Kettle Ridge Roasters buy its green beans?"
    answer = retrieve(built_site, RetrieveRequest(question=question, top_k=4))
    query = built_site.embedder.embed_one(question)
    hits = built_site.vectors.search(CHUNKS, query[None, :], limit=100, output_fields=["doc_id"])[0]
    best_per_doc: dict[str, float] = {}
    for hit in hits:
        best_per_doc[hit.fields["doc_id"]] = max(best_per_doc.get(hit.fields["doc_id"], -1.0), hit.score)
    for citation in answer.citations:
        assert citation.score == pytest.approx(best_per_doc[citation.doc_id], abs=1e-3)


@pytest.mark.parametrize("mode", ["local", "global"])
def test_an_empty_site_answers_with_nothing(empty_site: SiteContext, mode: str) -> None:
    answer = retrieve(empty_site, RetrieveRequest(question="Who designed the lighthouse?", mode=mode))
    assert answer == PartialAnswer(site_id=SITE_ID, answer="", citations=(), confidence=0.0, sentences=())


def test_confidence_mapping_is_monotone_and_clipped() -> None:
    sims = np.linspace(-1.0, 1.0, 41)
    values = [confidence_from_similarity(float(s)) for s in sims]
    assert values == sorted(values)
    assert values[0] == 0.0 and values[-1] == 1.0
    assert all(0.0 <= v <= 1.0 for v in values)
    assert 0.0 < confidence_from_similarity(0.5) < 1.0


def test_answer_sentences_skip_headings_and_cut_runaway_text() -> None:
    text = "# A Heading Of Five Words Here\n\nShort one.\n\nThis sentence is long enough to count. " + "word " * 300
    sentences = [s for _, s in answer_sentences(text)]
    assert sentences[0] == "This sentence is long enough to count."
    assert len(sentences) == 2
    assert len(sentences[1]) <= MAX_SENTENCE_CHARS + 2 and sentences[1].endswith("…")
