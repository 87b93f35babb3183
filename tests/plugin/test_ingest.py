"""`ingest_paths` on the real embedded graph store, Milvus Lite and the packaged embedder."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pytest

from hansa.adapters.graph.embedded import EmbeddedGraphStore
from hansa.adapters.records import DocumentGraph
from hansa.core.config import load_config
from hansa.core.errors import ConfigError, InputError
from hansa.plugin.chunking import chunk_text
from hansa.plugin.ingest import STAGES, fingerprint, ingest_paths
from hansa.plugin.readers import read_path
from hansa.plugin.site import CHUNKS, SiteContext, chunk_collection

PASSAGES = 6


@pytest.fixture(scope="module")
def passages(shared_dir: Path) -> list[dict[str, str]]:
    """The first few distinct MTRAG gold passages (real text from four domains), deterministic."""
    seen: dict[str, dict[str, str]] = {}
    path = shared_dir / "datasets" / "mtrag" / "mtragun-human" / "generation_tasks" / "reference.jsonl"
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            for context in json.loads(line)["contexts"]:
                seen.setdefault(context["document_id"], {"id": context["document_id"], "title": "mtrag", "text": context["text"]})
            if len(seen) >= PASSAGES:
                return list(seen.values())[:PASSAGES]
    raise AssertionError("the MTRAG reference file has too few passages")


@pytest.fixture()
def site(tmp_path: Path) -> Iterator[SiteContext]:
    cfg = load_config(env={"HANSA_HOME": str(tmp_path / "home")})
    with SiteContext.open(cfg) as ctx:
        ctx.graph.install()
        ctx.vectors.ensure_collection(chunk_collection(ctx.embedder.dim))  # what `site install` does
        yield ctx


def _write_jsonl(path: Path, rows: Sequence[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _corpus(root: Path, passages: list[dict[str, str]]) -> Path:
    _write_jsonl(root / "passages.jsonl", passages)
    (root / "guides").mkdir(parents=True)
    (root / "guides" / "keys.md").write_text(
        "# Key Protect\nIBM Key Protect stores root keys. Rotate a root key in Key Protect every year.\n",
        encoding="utf-8",
    )
    (root / "notes.txt").write_text("The Federal Reserve sets interest rates. Banks follow the Federal Reserve.", encoding="utf-8")
    return root


def test_ingest_writes_graph_and_vectors_with_provenance_then_reingest_is_noop(
    site: SiteContext, tmp_path: Path, passages: list[dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = _corpus(tmp_path / "docs", passages)
    report = ingest_paths(site, [root], progress=True)
    assert "ingest" in capsys.readouterr().err  # the tqdm bar went to stderr
    docs = read_path(root)
    assert (report.documents_seen, report.documents_new, report.documents_changed, report.documents_unchanged) == (
        len(docs), len(docs), 0, 0,
    )
    stats = site.graph.stats()
    assert stats.documents == len(docs)
    assert report.chunks == stats.chunks == site.vectors.count(CHUNKS) > 0
    import resource  # the report's peak memory is the process's own, as the kernel kept it
    assert report.peak_rss_mib == pytest.approx(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, abs=64)
    assert report.peak_rss_mib > 10
    assert report.entities == stats.entities > 0
    assert report.relations == stats.relations > 0
    assert report.chunks_per_s > 0
    assert tuple(report.stage_seconds) == STAGES and min(report.stage_seconds.values()) >= 0
    assert report.stage_seconds["embed"] > 0 and report.stage_seconds["graph_write"] > 0
    assert sum(report.stage_seconds.values()) <= report.seconds + 0.01  # parts of the timed whole

    cfg = site.cfg.site
    for doc in docs:
        expected = chunk_text(doc.id, doc.text, cfg.chunk_size, cfg.chunk_overlap)
        stored = site.graph.chunks([c.id for c in expected])
        assert [h.text for h in stored] == [doc.text[c.start:c.end] for c in expected]  # provenance
        assert {h.doc_id for h in stored} == {doc.id} and {h.title for h in stored} == {doc.title}
        assert site.graph.document_hashes([doc.id]) == {doc.id: fingerprint(doc, site)}
        vectors = site.vectors.get(CHUNKS, [c.id for c in expected])
        assert set(vectors) == {c.id for c in expected}
        fresh = site.embedder.embed([expected[0].text])[0]
        assert float(np.dot(vectors[expected[0].id], fresh)) > 0.999
        hits = site.vectors.search(CHUNKS, fresh[None, :], limit=3, where={"doc_id": doc.id}, output_fields=["doc_id"])[0]
        assert hits[0].id == expected[0].id and {h.fields["doc_id"] for h in hits} == {doc.id}

    again = ingest_paths(site, [root])
    assert (again.documents_seen, again.documents_new, again.documents_changed, again.documents_unchanged) == (
        len(docs), 0, 0, len(docs),
    )
    assert again.chunks == again.entities == again.relations == 0
    assert site.graph.stats() == stats and site.vectors.count(CHUNKS) == stats.chunks


def test_a_changed_document_replaces_its_chunks(site: SiteContext, tmp_path: Path, passages: list[dict[str, str]]) -> None:
    path = _write_jsonl(tmp_path / "docs" / "p.jsonl", passages)
    ingest_paths(site, [path])
    target = passages[0]
    cfg = site.cfg.site
    old_ids = [c.id for c in chunk_text(target["id"], target["text"], cfg.chunk_size, cfg.chunk_overlap)]
    edited = [dict(target, text="Completely new text about Leiden communities and the Milvus vector database.")] + passages[1:]
    _write_jsonl(path, edited)

    report = ingest_paths(site, [path])
    assert (report.documents_new, report.documents_changed, report.documents_unchanged) == (0, 1, len(passages) - 1)
    new_ids = [c.id for c in chunk_text(target["id"], edited[0]["text"], cfg.chunk_size, cfg.chunk_overlap)]
    assert report.chunks == len(new_ids)
    assert site.vectors.get(CHUNKS, old_ids) == {}
    assert site.graph.chunks(old_ids) == []
    assert set(site.vectors.get(CHUNKS, new_ids)) == set(new_ids)
    assert [h.text for h in site.graph.chunks(new_ids)] == [edited[0]["text"]]
    assert site.vectors.count(CHUNKS) == site.graph.stats().chunks
    mentioning = site.graph.community_context(["leiden", "vector database"], max_chunks=5).chunks
    assert [c.chunk_id for c in mentioning] == new_ids  # the new text's entities are in the graph


def test_changed_settings_reindex_everything(site: SiteContext, tmp_path: Path, passages: list[dict[str, str]]) -> None:
    path = _write_jsonl(tmp_path / "p.jsonl", passages[:3])
    first = ingest_paths(site, [path])
    site.cfg.site.chunk_size = 400
    second = ingest_paths(site, [path])
    assert second.documents_changed == 3 and second.chunks > first.chunks
    assert site.vectors.count(CHUNKS) == site.graph.stats().chunks == second.chunks


def test_a_bad_file_among_good_ones_writes_nothing(site: SiteContext, tmp_path: Path, passages: list[dict[str, str]]) -> None:
    root = _corpus(tmp_path / "docs", passages[:2])
    (root / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    other = _write_jsonl(tmp_path / "more" / "extra.jsonl", [{"id": "ok", "text": "fine"}])
    other.write_text(other.read_text(encoding="utf-8") + '{"id": "ok2"}\n', encoding="utf-8")
    with pytest.raises(InputError) as err:
        ingest_paths(site, [root, other])
    message = str(err.value)
    assert "2 bad inputs; nothing was ingested" in message
    assert "binary.txt" in message and "extra.jsonl, line 2" in message
    assert site.graph.stats().documents == 0
    assert site.vectors.count(CHUNKS) == 0


def test_hostile_ids_and_text_are_stored_as_data(site: SiteContext, tmp_path: Path) -> None:
    hostile_id = "x\"}) MATCH (n) DETACH DELETE n //' or 1=1; --"
    text = (
        "Robert'); DROP TABLE hansa_documents;-- met Mallory at Acme Corp. doc_id == \"a\" or id in [\"b\"]. "
        "<script>alert(1)</script> ${jndi:ldap://x} \u202eRTL\u202c Ünïcödé Straße."
    )
    path = _write_jsonl(tmp_path / "h.jsonl", [{"id": hostile_id, "title": "'); --", "text": text}, {"id": "plain", "text": "Acme Corp hired Mallory."}])
    report = ingest_paths(site, [path])
    assert report.documents_new == 2
    [chunk] = chunk_text(hostile_id, text, site.cfg.site.chunk_size, site.cfg.site.chunk_overlap)
    [hit] = site.graph.chunks([chunk.id])
    assert (hit.doc_id, hit.title, hit.text) == (hostile_id, "'); --", text)
    query = site.embedder.embed([text])
    hits = site.vectors.search(CHUNKS, query, limit=5, where={"doc_id": hostile_id}, output_fields=["doc_id"])[0]
    assert [h.id for h in hits] == [chunk.id] and hits[0].fields["doc_id"] == hostile_id
    assert site.graph.stats().documents == 2
    assert ingest_paths(site, [path]).documents_unchanged == 2


class _CrashingGraph(EmbeddedGraphStore):
    """The real embedded store, failing its first document write: a crash at the commit point."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.crashed = False

    def write_documents(self, graphs: Sequence[DocumentGraph]) -> None:
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("simulated crash before the graph commit")
        super().write_documents(graphs)


def test_a_crash_before_the_graph_commit_is_repaired_by_rerunning(
    site: SiteContext, tmp_path: Path, passages: list[dict[str, str]]
) -> None:
    path = _write_jsonl(tmp_path / "p.jsonl", passages[:3])
    real_graph = site.graph
    site.graph = _CrashingGraph(site.cfg.graph_path)
    try:
        with pytest.raises(RuntimeError, match="simulated crash"):
            ingest_paths(site, [path])
        assert site.graph.stats().documents == 0  # not committed: not ingested
        assert site.vectors.count(CHUNKS) > 0  # vectors were written before the crash
        report = ingest_paths(site, [path])
    finally:
        site.graph.close()
        site.graph = real_graph
    assert report.documents_new == 3
    assert site.vectors.count(CHUNKS) == site.graph.stats().chunks == report.chunks  # no duplicates left


def test_bad_arguments(site: SiteContext, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Some text.", encoding="utf-8")
    with pytest.raises(InputError, match="batch_docs"):
        ingest_paths(site, [tmp_path / "a.txt"], batch_docs=0)
    site.cfg.site.chunk_overlap = site.cfg.site.chunk_size
    with pytest.raises(ConfigError, match="chunk_overlap"):
        ingest_paths(site, [tmp_path / "a.txt"])
    assert site.graph.stats().documents == 0


def test_progress_moves_per_long_document_with_the_chunk_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 34: progress moved once per batch of 64 documents (0/36 for eleven minutes). A document
    of EMBED_GROUP_CHUNKS chunks or more is embedded on its own and counted as soon as it is stored."""
    from hansa.core import logs, progress
    from hansa.plugin import ingest

    monkeypatch.setattr(progress, "EVERY_S", 0.0)  # every step an event, to count them
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(4):
        sentences = [f"Harbour {n} keeps lantern number {i} lit through the winter night." for i in range(40)]
        (docs / f"harbour{n}.txt").write_text(" ".join(sentences), encoding="utf-8")
    cfg = load_config(env={"HANSA_HOME": str(tmp_path / "home"), "HANSA_SITE_CHUNK_SIZE": "140",
                           "HANSA_SITE_CHUNK_OVERLAP": "0"})
    logs.configure("info", as_json=True)
    try:
        with SiteContext.open(cfg) as ctx:
            ctx.graph.install()
            report = ingest_paths(ctx, [docs], progress=True)
    finally:
        logs.configure("info", as_json=False)
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]  # all JSON under --log-json
    steps = [e for e in events if e["event"] == "ingest.progress"]
    assert [e["done"] for e in steps] == [1, 2, 3, 4] and all(e["total"] == 4 for e in steps)
    assert report.chunks >= 4 * ingest.EMBED_GROUP_CHUNKS and steps[-1]["chunks"] == report.chunks
    assert all(e["chunks_per_s"] > 0 for e in steps)


def _harbour(n: int, sentences: int = 40) -> str:
    """A document of several chunks at the default chunk size."""
    return " ".join(f"Harbour {n} keeps lantern number {i} lit through the winter night." for i in range(sentences))


def test_ingest_inserts_new_documents_upserts_replaced_ones_and_seals_once(
    site: SiteContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34 (Milvus Lite's vector write below 1,000 chunks/s): rows of documents with no stored
    version are inserted (an upsert looks every id up first), a replaced document's are upserted
    (its unchanged chunk keeps its id and must be replaced, not written twice), and a collection is
    not flushed per batch (each flush sealed a segment that Lite merged and indexed again): with
    fewer than SEAL_ROWS rows, once, after the last graph commit."""
    from hansa.plugin import ingest
    from hansa.plugin.sentence_vectors import SENTENCES

    monkeypatch.setattr(ingest, "EMBED_GROUP_CHUNKS", 2)  # several groups per batch
    calls: list[tuple[str, str, bool, tuple[str, ...]]] = []
    insert, upsert, flush, write = site.vectors.insert, site.vectors.upsert, site.vectors.flush, site.graph.write_documents

    def spy(name: str, real):  # type: ignore[no-untyped-def]
        def call(collection: str, ids, vectors, fields=None, *, flush: bool = True) -> None:  # type: ignore[no-untyped-def]
            calls.append((name, collection, flush, tuple(ids)))
            real(collection, ids, vectors, fields, flush=flush)
        return call

    monkeypatch.setattr(site.vectors, "insert", spy("insert", insert))
    monkeypatch.setattr(site.vectors, "upsert", spy("upsert", upsert))
    monkeypatch.setattr(site.vectors, "flush", lambda collection: calls.append(("flush", collection, True, ())) or flush(collection))
    monkeypatch.setattr(site.graph, "write_documents", lambda graphs: calls.append(("graph", "", True, ())) or write(graphs))
    docs = tmp_path / "docs" / "harbours.jsonl"
    rows = [{"id": f"harbour{n}", "text": _harbour(n)} for n in range(5)]
    _write_jsonl(docs, rows)

    first = ingest_paths(site, [docs], batch_docs=2)
    writes = [c for c in calls if c[0] in ("insert", "upsert")]
    assert {c[0] for c in writes} == {"insert"} and not any(sealed for _, _, sealed, _ in writes)
    assert {c[1] for c in writes} == {CHUNKS, SENTENCES} and len(writes) >= 6
    assert [c[:2] for c in calls if c[0] not in ("insert", "upsert")] == [("graph", "")] * 3 + [("flush", CHUNKS), ("flush", SENTENCES)]
    assert site.vectors.count(CHUNKS) == first.chunks

    cfg = site.cfg.site
    before = [c.id for c in chunk_text("harbour0", _harbour(0), cfg.chunk_size, cfg.chunk_overlap)]
    edited = _harbour(0, 44)  # four more sentences: the first chunk is unchanged, the last are new
    after = [c.id for c in chunk_text("harbour0", edited, cfg.chunk_size, cfg.chunk_overlap)]
    assert before[0] == after[0] and set(before) != set(after)
    _write_jsonl(docs, [{"id": "harbour0", "text": edited}, *rows[1:], {"id": "harbour9", "text": _harbour(9)}])
    calls.clear()
    second = ingest_paths(site, [docs], batch_docs=64)
    assert (second.documents_new, second.documents_changed) == (1, 1)
    chunk_writes = {name: {i for c in calls if c[:2] == (name, CHUNKS) for i in c[3]} for name in ("insert", "upsert")}
    assert chunk_writes["upsert"] == set(after)  # the kept first chunk among them: replaced in place
    assert chunk_writes["insert"] and not chunk_writes["insert"] & set(after)  # the new document's
    sentence_ids = {name: {i for c in calls if c[:2] == (name, SENTENCES) for i in c[3]} for name in ("insert", "upsert")}
    assert {i.split(":")[0] for i in sentence_ids["upsert"]} <= set(after) and sentence_ids["insert"]
    assert {i.split(":")[0] for i in sentence_ids["insert"]} == chunk_writes["insert"]
    assert site.vectors.get(CHUNKS, [i for i in before if i not in after]) == {}
    assert site.vectors.count(CHUNKS) == site.graph.stats().chunks == first.chunks - len(before) + len(after) + len(chunk_writes["insert"])
    assert [c[:2] for c in calls if c[0] == "flush"] == [("flush", CHUNKS), ("flush", SENTENCES)]


def test_the_sealer_flushes_a_collection_every_seal_rows_and_both_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounded unsealed rows: Lite's flush turns every unsealed row into Python objects at once, so
    one flush of a whole site's rows raised the ingest's peak memory; a flush per batch cost a
    segment each (merged and indexed again). A collection is flushed once SEAL_ROWS of its rows
    are waiting, and each collection that was written to once more at the end."""
    from types import SimpleNamespace

    from hansa.plugin import ingest
    from hansa.plugin.sentence_vectors import SENTENCES

    monkeypatch.setattr(ingest, "SEAL_ROWS", 100)
    flushed: list[str] = []
    stages: dict[str, float] = {}
    sealer = ingest.Sealer(SimpleNamespace(vectors=SimpleNamespace(flush=flushed.append)), stages)  # type: ignore[arg-type]
    sealer.wrote(10, 60)
    sealer.wrote(40, 39)  # 50 chunk rows and 99 sentence rows waiting
    assert flushed == []
    sealer.wrote(0, 1)
    assert flushed == [SENTENCES] and stages["vector_write"] >= 0
    sealer.wrote(50, 0)
    assert flushed == [SENTENCES, CHUNKS]
    sealer.seal()  # nothing waiting: nothing to flush
    sealer.wrote(5, 0)
    sealer.seal()
    assert flushed == [SENTENCES, CHUNKS, CHUNKS]  # the sentence collection has nothing waiting: not asked
    sealer.wrote(1, 1)
    sealer.seal()
    assert flushed[3:] == [CHUNKS, SENTENCES]


def test_inserts_never_write_a_stored_id_through_edits_crashes_and_settings_changes(tmp_path: Path) -> None:
    """The in-memory store refuses an insert of a stored id (a Milvus server would keep both rows;
    Milvus Lite hides the second), so this run fails if ingest inserts where it must upsert: an
    edited document keeping a chunk, a rerun after a crash before the graph commit (its rows were
    written, the intent file names them), a new embedding model (every id kept, every vector new)."""
    from hansa.adapters.graph import open_graph_store
    from hansa.plugin.sentence_vectors import SENTENCES
    from tests.fakes import HashEmbedder, InMemoryVectorStore

    cfg = load_config(env={"HANSA_HOME": str(tmp_path / "home")})
    cfg.home.mkdir(parents=True)
    graph = open_graph_store(cfg)
    site = SiteContext(cfg=cfg, graph=graph, vectors=InMemoryVectorStore(), embedder=HashEmbedder(), llm=None)
    try:
        graph.install()
        docs = tmp_path / "docs" / "harbours.jsonl"
        rows = [{"id": f"harbour{n}", "text": _harbour(n)} for n in range(3)]
        _write_jsonl(docs, rows)
        real_write = graph.write_documents

        def crash(graphs):  # type: ignore[no-untyped-def]
            raise RuntimeError("simulated crash before the graph commit")

        graph.write_documents = crash  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="simulated crash"):
            ingest_paths(site, [docs])
        assert site.vectors.count(CHUNKS) > 0 and graph.stats().documents == 0
        graph.write_documents = real_write  # type: ignore[method-assign]
        first = ingest_paths(site, [docs])
        assert first.documents_new == 3 and site.vectors.count(CHUNKS) == graph.stats().chunks

        _write_jsonl(docs, [{"id": "harbour0", "text": _harbour(0, 44)}, *rows[1:]])
        assert ingest_paths(site, [docs]).documents_changed == 1
        site.embedder = HashEmbedder(dim=64)
        site.embedder.model_id = "test/hash-embedder-2"  # type: ignore[misc]
        again = ingest_paths(site, [docs])
        assert again.documents_changed == 3 and again.chunks == graph.stats().chunks == site.vectors.count(CHUNKS)
        named = {row["chunk_id"] for row in site.vectors.fields(SENTENCES, ["chunk_id"]).values()}
        assert named == set(site.vectors.fields(CHUNKS, ["doc_id"]))  # no old version's sentence is left
    finally:
        site.close()
