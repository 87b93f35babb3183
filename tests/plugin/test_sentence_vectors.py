"""Answer-sentence vectors stored at ingest: a request embeds only its question, chooses exactly the
sentences query-time embedding chose, a site ingested before them still answers and is backfilled
by `ingest`, and deletes and uninstall take them along (real embedder, Milvus Lite)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from hansa.adapters.embedder.base import Embedder
from hansa.adapters.records import Chunk
from hansa.plugin.deletion import delete_documents
from hansa.plugin.ingest import _build, _write_batch, fingerprint, ingest_paths
from hansa.plugin.install import install_site
from hansa.plugin.readers import SourceDocument
from hansa.plugin.retrieval import retrieve
from hansa.plugin.sentence_vectors import rows
from hansa.plugin.site import CHUNKS, SENTENCES, SiteContext
from hansa.plugin.uninstall import uninstall_site
from hansa.sync.wire import PartialAnswer, RetrieveRequest

from .conftest import site_config, write_corpus

QUESTIONS = (
    "Who designed the Brightwater Lighthouse?",
    "How far away can ships see the lighthouse flash?",
    "Where does Kettle Ridge Roasters buy its green beans?",
    "At what temperature are the Ethiopian beans roasted?",
    "What time is it on Mars?",
)


class CountingEmbedder(Embedder):
    """The site's real embedder, counting the texts it is asked to embed per call."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.model_id, self.dim, self.model_sha256 = inner, inner.model_id, inner.dim, inner.model_sha256
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return self.inner.embed(texts)

    def warm(self) -> None:
        self.inner.warm()


def _answers(ctx: SiteContext, mode: str = "local") -> list[PartialAnswer]:
    return [retrieve(ctx, RetrieveRequest(question=q, top_k=5, mode=mode)) for q in QUESTIONS]


def _same(a: Sequence[PartialAnswer], b: Sequence[PartialAnswer]) -> None:
    for x, y in zip(a, b, strict=True):
        assert [s[:2] for s in x.sentences] == [s[:2] for s in y.sentences]
        assert x.answer == y.answer and x.citations == y.citations
        assert x.confidence == pytest.approx(y.confidence, abs=1e-3)
        assert [s[2] for s in x.sentences] == pytest.approx([s[2] for s in y.sentences], abs=1e-4)


@pytest.fixture()
def site(tmp_path: Path):
    docs = write_corpus(tmp_path / "docs")
    with SiteContext.open(site_config(tmp_path / "home")) as ctx:
        install_site(ctx)
        ctx.embedder = CountingEmbedder(ctx.embedder)
        ingest_paths(ctx, [docs])
        yield ctx, docs


def test_a_request_embeds_only_its_question_and_chooses_what_query_time_embedding_chose(site) -> None:
    ctx, docs = site
    assert ctx.vectors.count(SENTENCES) > ctx.vectors.count(CHUNKS)
    ctx.embedder.calls.clear()
    stored = _answers(ctx)
    assert ctx.embedder.calls == [1] * len(QUESTIONS)  # the question, nothing else
    assert any(a.sentences for a in stored)

    # A site ingested before sentence vectors were stored: the same answers, embedded per request.
    ctx.vectors.drop(SENTENCES)
    before = _answers(ctx)
    assert max(ctx.embedder.calls[len(QUESTIONS):]) > 1
    _same(stored, before)

    # `ingest` on the unchanged folder backfills them; requests embed only the question again.
    report = ingest_paths(ctx, [docs])
    assert report.documents_unchanged == report.documents_seen and report.chunks == 0
    assert ctx.vectors.count(SENTENCES) == len(rows(_stored_chunks(ctx))[0])
    ctx.embedder.calls.clear()
    _same(stored, _answers(ctx))
    assert ctx.embedder.calls == [1] * len(QUESTIONS)


def _stored_chunks(ctx: SiteContext) -> list[Chunk]:
    """Every chunk the site holds (the corpus is small: one search returns them all)."""
    ids = [h.id for h in ctx.vectors.search(CHUNKS, np.ones((1, ctx.embedder.dim), dtype=np.float32), limit=1000)[0]]
    assert len(ids) == ctx.vectors.count(CHUNKS)
    return [Chunk(c.chunk_id, c.doc_id, 0, c.text, 0, len(c.text)) for c in ctx.graph.chunks(ids)]


def test_deleting_a_document_or_uninstalling_removes_its_sentence_vectors(site) -> None:
    ctx, _ = site
    doc_id = "docs/lighthouse.md"
    chunks = [c for c in _stored_chunks(ctx) if c.doc_id == doc_id]
    ids = rows(chunks)[0]
    assert ids and set(ctx.vectors.get(SENTENCES, ids)) == set(ids)
    total = ctx.vectors.count(SENTENCES)
    delete_documents(ctx, [doc_id])
    assert ctx.vectors.get(SENTENCES, ids) == {}
    assert ctx.vectors.count(SENTENCES) == total - len(ids) > 0
    result = uninstall_site(ctx)
    assert SENTENCES in result.collections and ctx.vectors.collection_owner(SENTENCES) is None


NEW_DOCS = {
    "harbour.txt": "The harbour master in Port Ellis opens the sea lock at six every morning.",
    "bakery.txt": "Marrow Lane Bakery bakes its rye loaves in a wood-fired oven built in 1911.",
    "orchard.txt": "The Hollin orchard grows forty varieties of pear on its southern slope.",
}


def test_ingest_asks_milvus_about_the_sentence_collection_once_not_per_batch(site, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Ingest knows the collection exists once it stored rows into it: its flush after the last
    batch does not ask Milvus again, whatever the number of batches."""
    ctx, _ = site
    asked: list[str] = []
    real = ctx.vectors.collection_owner
    monkeypatch.setattr(ctx.vectors, "collection_owner", lambda name: asked.append(name) or real(name))

    def ingest(folder: str, batch_docs: int) -> int:
        for name, text in NEW_DOCS.items():
            (tmp_path / folder).mkdir(exist_ok=True)
            (tmp_path / folder / name).write_text(text.replace("The ", f"The {folder} "), encoding="utf-8")
        asked.clear()
        report = ingest_paths(ctx, [tmp_path / folder], batch_docs=batch_docs)
        assert report.documents_new == len(NEW_DOCS)
        return asked.count(SENTENCES)

    assert ingest("together", batch_docs=64) == ingest("apart", batch_docs=1)
    assert ctx.vectors.count(SENTENCES) == len(rows(_stored_chunks(ctx))[0])  # every batch's rows were stored


def test_a_batch_without_answer_sentences_needs_no_sentence_collection(site) -> None:
    """Nothing stored, nothing to seal: a batch whose chunks state nothing (a heading, a fragment)
    stores its chunks on a site whose sentence collection is gone."""
    ctx, _ = site
    ctx.vectors.drop(SENTENCES)
    doc = SourceDocument(id="notes/hours.md", title="hours", text="# Kettle Ridge Roasters\n\nOpening hours", source="notes")
    graph = _build(doc, fingerprint(doc, ctx), ctx)
    assert graph.chunks and not rows(graph.chunks)[0]
    before = ctx.vectors.count(CHUNKS)
    _write_batch(ctx, [graph], set())
    assert ctx.vectors.count(CHUNKS) == before + len(graph.chunks)
    assert ctx.vectors.collection_owner(SENTENCES) is None
