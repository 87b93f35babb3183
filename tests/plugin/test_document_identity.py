"""Document identity, --sync, delete, --skip-bad and the id migration on a real site (embedded graph,
Milvus Lite, the packaged embedder): ids are SOURCE/path inside the source root, wherever a file is
ingested from, and what leaves the folder leaves the graph and the vectors."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from hansa.core.errors import InputError
from hansa.plugin.communities import build_communities
from hansa.plugin.deletion import delete_documents, refresh_communities
from hansa.plugin.ingest import _build, _write_batch, fingerprint, ingest_paths
from hansa.plugin.install import install_site
from hansa.plugin.migrate import migrate_ids
from hansa.plugin.readers import SourceDocument
from hansa.plugin.site import CHUNKS, SiteContext, chunk_collection
from hansa.plugin.sources import read_roots

FACTS = {
    "lighthouse": "The Brightwater Lighthouse stands on Karsholm Island. Engineer Margaret Ellison designed the "
    "Brightwater Lighthouse in 1874. The Karsholm Harbour Trust owns the Brightwater Lighthouse.",
    "volcano": "Mount Teravik is a stratovolcano on the Hallgrim Peninsula. The Hallgrim Volcano Observatory watches "
    "Mount Teravik. Ingrid Saeter leads the Hallgrim Volcano Observatory.",
    "roastery": "Kettle Ridge Roasters roasts coffee in Ashford Vale. Daniel Okafor roasts the Yirgacheffe beans at "
    "Kettle Ridge Roasters. Kettle Ridge Roasters ships coffee in compostable bags.",
}


@pytest.fixture
def site(tmp_path: Path, make_config) -> Iterator[SiteContext]:
    with SiteContext.open(make_config(tmp_path / "home")) as ctx:
        install_site(ctx)
        yield ctx


def _chunk_doc_ids(ctx: SiteContext) -> set[str]:
    """doc_id of every chunk vector in Milvus (read through a search that returns all rows)."""
    query = ctx.embedder.embed(["anything"])
    hits = ctx.vectors.search(CHUNKS, query, limit=1000, output_fields=["doc_id"])[0]
    return {h.fields["doc_id"] for h in hits}


def _stored(ctx: SiteContext) -> dict[str, str]:
    return ctx.graph.documents_by_source("")


def test_same_file_name_in_two_folders_gets_two_ids(site: SiteContext, tmp_path: Path) -> None:
    for folder, fact in (("a", "lighthouse"), ("b", "volcano")):
        (tmp_path / "dup" / folder).mkdir(parents=True)
        (tmp_path / "dup" / folder / "notes.txt").write_text(FACTS[fact], encoding="utf-8")
    ingest_paths(site, [tmp_path / "dup" / "a"])
    report = ingest_paths(site, [tmp_path / "dup" / "b"])
    assert report.documents_new == 1 and report.documents_changed == 0  # b did not replace a
    assert _stored(site) == {"a/notes.txt": "a:notes.txt", "b/notes.txt": "b:notes.txt"}
    assert _chunk_doc_ids(site) == {"a/notes.txt", "b/notes.txt"}


def test_a_parent_folder_under_the_same_source_does_not_duplicate(site: SiteContext, tmp_path: Path) -> None:
    docs = tmp_path / "dup"
    for folder, fact in (("a", "lighthouse"), ("b", "volcano")):
        (docs / folder).mkdir(parents=True)
        (docs / folder / "notes.txt").write_text(FACTS[fact], encoding="utf-8")
    ingest_paths(site, [docs], source="kb")
    again = ingest_paths(site, [docs / "a"], source="kb")  # a subfolder: same root, same ids
    assert (again.documents_new, again.documents_unchanged) == (0, 1)
    single = ingest_paths(site, [docs / "b" / "notes.txt"], source="kb")  # one file: same id too
    assert (single.documents_new, single.documents_unchanged) == (0, 1)
    assert sorted(_stored(site)) == ["kb/a/notes.txt", "kb/b/notes.txt"]
    assert read_roots(site.cfg.home) == {"kb": docs.resolve()}
    # a folder outside the source's root is refused, naming the root
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.txt").write_text(FACTS["roastery"], encoding="utf-8")
    with pytest.raises(InputError, match=r"source 'kb' is rooted at .*dup"):
        ingest_paths(site, [tmp_path / "elsewhere"], source="kb")
    assert len(_stored(site)) == 2


def test_jsonl_records_keep_their_ids(site: SiteContext, tmp_path: Path) -> None:
    (tmp_path / "feed").mkdir()
    (tmp_path / "feed" / "records.jsonl").write_text(
        "".join(f'{{"id": "rec-{k}", "title": "{k}", "text": "{v}"}}\n' for k, v in FACTS.items()), encoding="utf-8"
    )
    ingest_paths(site, [tmp_path / "feed"])
    assert _stored(site) == {f"rec-{k}": "feed:records.jsonl" for k in FACTS}


def test_sync_removes_what_left_the_folder_from_graph_and_vectors(site: SiteContext, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    for name, text in FACTS.items():
        (docs / f"{name}.txt").write_text(text, encoding="utf-8")
    (docs / "sub" / "feed.jsonl").write_text('{"id": "r1", "text": "Rows one."}\n{"id": "r2", "text": "Rows two."}\n')
    ingest_paths(site, [docs])
    assert len(_stored(site)) == 5

    (docs / "volcano.txt").unlink()
    (docs / "sub" / "feed.jsonl").write_text('{"id": "r1", "text": "Rows one."}\n')
    plain = ingest_paths(site, [docs])  # without --sync nothing is removed
    assert plain.documents_deleted == () and len(_stored(site)) == 5
    # --sync scoped to a subfolder touches only that subfolder
    scoped = ingest_paths(site, [docs / "sub"], source="docs", sync=True)
    assert scoped.documents_deleted == ("r2",)
    report = ingest_paths(site, [docs], sync=True)
    assert report.documents_deleted == ("docs/volcano.txt",)
    assert sorted(_stored(site)) == ["docs/lighthouse.txt", "docs/roastery.txt", "r1"]
    assert _chunk_doc_ids(site) == {"docs/lighthouse.txt", "docs/roastery.txt", "r1"}


def test_sync_never_deletes_a_file_it_could_not_read(site: SiteContext, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in FACTS.items():
        (docs / f"{name}.txt").write_text(text, encoding="utf-8")
    ingest_paths(site, [docs])
    (docs / "volcano.txt").write_bytes(b"\x00 corrupted")
    with pytest.raises(InputError, match="1 bad input; nothing was ingested"):
        ingest_paths(site, [docs], sync=True)
    report = ingest_paths(site, [docs], sync=True, skip_bad=True)
    assert report.documents_deleted == ()
    assert len(report.bad) == 1 and "volcano.txt: binary data" in report.bad[0]
    assert "docs/volcano.txt" in _stored(site)  # the stored version stays until the file is fixed


def test_skip_bad_goes_on_and_unsupported_files_are_reported(site: SiteContext, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(FACTS["lighthouse"], encoding="utf-8")
    (docs / "broken.md").write_bytes(b"\xe9t\xe9 not utf-8")  # Latin-1 (FF FE would be a UTF-16 mark)
    (docs / "table.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    (docs / "page.html").write_text(
        "<html><head><title>Safe Rooms</title><script>var x = 1;</script></head><body><h1>Safe rooms</h1>"
        f"<p>{FACTS['volcano']}</p></body></html>", encoding="utf-8")
    with pytest.raises(InputError, match="broken.md"):
        ingest_paths(site, [docs])
    assert _stored(site) == {}  # default: one bad file, nothing written
    report = ingest_paths(site, [docs], skip_bad=True)
    assert report.documents_new == 2
    assert report.skipped == (str(docs / "table.csv"),)
    assert len(report.bad) == 1 and "broken.md" in report.bad[0] and "UTF-8" in report.bad[0]
    html = site.graph.chunks([h.id for h in site.vectors.search(CHUNKS, site.embedder.embed([FACTS["volcano"]]), limit=1)[0]])[0]
    assert (html.doc_id, html.title) == ("docs/page.html", "Safe Rooms")
    assert "var x" not in html.text and "Ingrid Saeter" in html.text


def test_delete_refreshes_communities_and_forgets_the_document(site: SiteContext, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in FACTS.items():
        (docs / f"{name}.txt").write_text(text, encoding="utf-8")
    ingest_paths(site, [docs])
    build_communities(site)
    before = {c.id: c for c in site.graph.communities()}
    assert any("docs/volcano.txt" in c.doc_ids for c in before.values())

    report = delete_documents(site, ["docs/volcano.txt", "docs/nope.txt"])
    assert report.deleted == ("docs/volcano.txt",) and report.unknown == ("docs/nope.txt",)
    refreshed = refresh_communities(site)
    after = {c.id: c for c in site.graph.communities()}
    assert refreshed is not None and after
    assert not any("docs/volcano.txt" in c.doc_ids for c in after.values())
    # communities that never held the deleted document kept their ids (seeded Leiden)
    untouched = {cid for cid, c in before.items() if "docs/volcano.txt" not in c.doc_ids}
    assert untouched and untouched <= set(after)
    assert "docs/volcano.txt" not in _chunk_doc_ids(site)
    assert site.vectors.count("summaries") == len(after)

    for doc_id in ("docs/lighthouse.txt", "docs/roastery.txt"):  # emptied: every community withdrawn
        delete_documents(site, [doc_id])
    assert refresh_communities(site) is None
    assert site.graph.communities() == [] and site.vectors.count("summaries") == 0


def _legacy_ingest(ctx: SiteContext, folder: Path) -> None:
    """Store documents as hansa did before named sources: id = path relative to the folder given,
    source = the file path as typed."""
    docs = [
        SourceDocument(id=p.relative_to(folder).as_posix(), title=p.stem, text=p.read_text(encoding="utf-8"), source=str(p))
        for p in sorted(folder.rglob("*.txt"))
    ]
    ctx.vectors.ensure_collection(chunk_collection(ctx.embedder.dim))
    _write_batch(ctx, [_build(d, fingerprint(d, ctx), ctx) for d in docs], set())


def test_migrate_ids_moves_a_legacy_site_to_source_ids(site: SiteContext, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "lighthouse.txt").write_text(FACTS["lighthouse"], encoding="utf-8")
    (docs / "sub" / "volcano.txt").write_text(FACTS["volcano"], encoding="utf-8")
    _legacy_ingest(site, docs)
    build_communities(site)
    assert sorted(_stored(site)) == ["lighthouse.txt", "sub/volcano.txt"]

    report = migrate_ids(site, [docs])
    assert report.renamed == {"lighthouse.txt": "docs/lighthouse.txt", "sub/volcano.txt": "docs/sub/volcano.txt"}
    assert _stored(site) == {"docs/lighthouse.txt": "docs:lighthouse.txt", "docs/sub/volcano.txt": "docs:sub/volcano.txt"}
    assert _chunk_doc_ids(site) == {"docs/lighthouse.txt", "docs/sub/volcano.txt"}
    assert report.communities_refreshed
    assert {d for c in site.graph.communities() for d in c.doc_ids} <= {"docs/lighthouse.txt", "docs/sub/volcano.txt"}
    again = migrate_ids(site, [docs])  # a second run changes nothing
    assert again.renamed == {} and again.ingest.documents_unchanged == 2


def test_a_pdf_citation_carries_its_page_and_source(site: SiteContext, tmp_path: Path) -> None:
    from fpdf import FPDF

    from hansa.plugin.retrieval import retrieve
    from hansa.sync.wire import RetrieveRequest

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.set_title("0000764478-19-000009")  # an accession number: no title
    for text in ("Harbour Annual Report\n\n" + FACTS["roastery"], FACTS["lighthouse"], FACTS["volcano"]):
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    (tmp_path / "filings").mkdir()
    pdf.output(str(tmp_path / "filings" / "0000764478-19-000009.pdf"))
    site.cfg.site.chunk_size = 200  # one page per chunk at least
    site.cfg.site.chunk_overlap = 0
    ingest_paths(site, [tmp_path / "filings"])
    answer = retrieve(site, RetrieveRequest(question="Who leads the Hallgrim Volcano Observatory?", top_k=3))
    top = answer.citations[0]
    assert (top.doc_id, top.title) == ("filings/0000764478-19-000009.pdf", "Harbour Annual Report")
    assert (top.page, top.source) == (3, "0000764478-19-000009.pdf")  # the default answer policy: the file's name
    assert answer.to_json()["citations"][0]["page"] == 3


def test_a_pdf_sentence_is_cited_with_its_own_page_when_its_chunk_spans_pages(site: SiteContext, tmp_path: Path) -> None:
    """Issue 34: a sentence was cited with the page its chunk starts on (p.14 for a sentence on p.4).
    Here one chunk holds pages 1 to 3 (short pages, a large chunk); the answer is on page 3."""
    from fpdf import FPDF

    from hansa.plugin.chunking import chunk_text
    from hansa.plugin.readers import read_path
    from hansa.plugin.retrieval import retrieve
    from hansa.sync.wire import RetrieveRequest

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.set_title("Harbour Annual Report")
    for text in (FACTS["roastery"], FACTS["lighthouse"], FACTS["volcano"]):
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    (tmp_path / "filings").mkdir()
    pdf.output(str(tmp_path / "filings" / "report.pdf"))
    site.cfg.site.chunk_size = 4000
    [doc] = read_path(tmp_path / "filings" / "report.pdf")
    [chunk] = chunk_text(doc.id, doc.text, 4000, 0)  # the premise: one chunk, starting on page 1
    assert doc.page_at(chunk.start) == 1 and len(doc.pages) == 3

    ingest_paths(site, [tmp_path / "filings"])
    answer = retrieve(site, RetrieveRequest(question="Who leads the Hallgrim Volcano Observatory?", top_k=3))
    assert answer.answer.startswith("Ingrid Saeter leads the Hallgrim Volcano Observatory"), answer.answer  # page 3's
    [citation] = answer.citations
    assert (citation.doc_id, citation.page) == ("filings/report.pdf", 3)
