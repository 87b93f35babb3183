"""`read_path` / `read_paths` on real files of every supported format, and every refusal."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fpdf import FPDF

from hansa.core.errors import InputError
from hansa.plugin.readers import SUPPORTED_EXTENSIONS, read_path, read_paths


def _pdf(path: Path, pages: list[str], title: str | None = None) -> Path:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    if title:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def test_txt_title_is_the_stem_and_text_is_exact(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_bytes("Line one.\r\nLine two — ünïcode.\n".encode("utf-8"))
    [doc] = read_path(tmp_path / "notes.txt")
    # a file's source defaults to its folder's name; the id is <source>/<path inside it>
    assert (doc.id, doc.title) == (f"{tmp_path.name}/notes.txt", "notes")
    assert doc.text == "Line one.\nLine two — ünïcode.\n"  # newlines normalized, nothing else
    assert doc.source == f"{tmp_path.name}:notes.txt"


def test_md_title_is_the_first_h1(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("Intro line\n## Not this\n# Pricing Guide\ntext\n# Later\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("no heading here\n", encoding="utf-8")
    docs = read_paths([tmp_path], source="kb")
    assert [(d.id, d.title) for d in docs] == [("kb/a.md", "Pricing Guide"), ("kb/b.md", "b")]


def test_utf8_bom_is_not_part_of_the_text(tmp_path: Path) -> None:
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfHello")
    assert read_path(tmp_path / "bom.txt")[0].text == "Hello"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_text_with_a_byte_order_mark_is_read_in_that_encoding(tmp_path: Path, encoding: str) -> None:
    """Issue 34: Windows tools save UTF-16 with a BOM; it was refused as binary (its NUL bytes)."""
    text = "# Safe rooms\r\nKeep water — and a torch — in the safe room.\r\n"
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}.get(encoding, b"")
    (tmp_path / "notes.md").write_bytes(bom + text.encode(encoding))
    [doc] = read_path(tmp_path / "notes.md")
    assert doc.text == "# Safe rooms\nKeep water — and a torch — in the safe room.\n" and doc.title == "Safe rooms"


def test_utf16_without_its_mark_or_cut_short_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "nomark.txt").write_bytes("Hello".encode("utf-16-le"))
    (tmp_path / "cut.txt").write_bytes(b"\xff\xfe" + "Hello".encode("utf-16-le")[:-1])
    with pytest.raises(InputError) as err:
        read_path(tmp_path)
    assert f"{tmp_path / 'nomark.txt'}: binary data" in str(err.value) and "byte-order mark" in str(err.value)
    assert f"{tmp_path / 'cut.txt'}: not valid UTF-16" in str(err.value)


def test_restructuredtext_is_read_as_text_titled_by_its_first_section(tmp_path: Path) -> None:
    (tmp_path / "guide.rst").write_text(
        ".. comment: not a title\n\n==========\nSafe Rooms\n==========\n\nKeep water in the safe room.\n\n"
        "Supplies\n--------\n\nA torch.\n", encoding="utf-8")
    (tmp_path / "plain.rst").write_text("Just a paragraph\nwith two lines.\n\n----\n", encoding="utf-8")
    (tmp_path / "short.rst").write_text("A long heading here\n===\n\nbody\n", encoding="utf-8")
    docs = {d.id.rsplit("/", 1)[1]: d for d in read_path(tmp_path)}
    assert docs["guide.rst"].title == "Safe Rooms" and "Keep water in the safe room." in docs["guide.rst"].text
    assert docs["plain.rst"].title == "plain"  # a transition (a lone line of punctuation) is no title
    assert docs["short.rst"].title == "short"  # an underline shorter than the text is not a title


def test_jsonl_records(tmp_path: Path) -> None:
    lines = [
        {"id": "p-1", "title": "First", "text": "Alpha text."},
        {"id": 7, "text": "Integer id, no title.", "extra": [1, 2]},
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    docs = read_path(path)
    assert [(d.id, d.title, d.text) for d in docs] == [
        ("p-1", "First", "Alpha text."),
        ("7", "7", "Integer id, no title."),
    ]
    # records keep the id they carry; their source is the .jsonl file inside its source
    assert docs[0].source == docs[1].source == f"{tmp_path.name}:docs.jsonl"


def test_pdf_pages_are_joined_and_metadata_title_used(tmp_path: Path) -> None:
    path = _pdf(tmp_path / "report.pdf", ["The Federal Reserve sets rates.", "Second page about banks."], title="Annual Report")
    [doc] = read_path(path)
    assert doc.title == "Annual Report"
    assert "The Federal Reserve sets rates." in doc.text and "Second page about banks." in doc.text
    assert doc.text.index("Federal") < doc.text.index("Second page")
    assert "\r" not in doc.text


def test_fifty_page_pdf(tmp_path: Path) -> None:
    path = _pdf(tmp_path / "long.pdf", [f"Page number {i} talks about topic {i}." for i in range(50)])
    [doc] = read_path(path)
    assert doc.title == "long"
    for i in (0, 25, 49):
        assert f"Page number {i} talks about topic {i}." in doc.text


def test_directory_is_recursive_sorted_with_relative_posix_ids(tmp_path: Path) -> None:
    (tmp_path / "z.txt").write_text("zed", encoding="utf-8")
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "sub" / "deeper" / "a.md").write_text("# A\nbody", encoding="utf-8")
    (tmp_path / "sub" / "b.txt").write_text("bee", encoding="utf-8")
    (tmp_path / "sub" / "ignored.csv").write_text("x,y", encoding="utf-8")  # unsupported: skipped in folders
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "secret.txt").write_text("never read", encoding="utf-8")
    docs = read_paths([tmp_path], source="kb")
    assert [d.id for d in docs] == ["kb/sub/b.txt", "kb/sub/deeper/a.md", "kb/z.txt"]
    assert read_paths([tmp_path], source="kb") == docs  # deterministic


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("bin.txt", b"abc\x00def", "binary data (NUL byte at offset 3)"),
        ("bin.md", b"\x00", "binary data (NUL byte at offset 0)"),
        ("latin1.txt", "café".encode("latin-1"), "not valid UTF-8 (byte 0xe9 at offset 3)"),
        ("empty.txt", b"", "empty file"),
        ("blank.md", b"  \n\t\n", "empty file"),
        ("empty.jsonl", b"\n\n", "empty file"),
        ("broken.pdf", b"%PDF-1.4 this is not a pdf", "not a readable PDF"),
        ("zero.pdf", b"", "empty file"),
    ],
)
def test_bad_files_are_refused_with_a_clear_message(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        read_path(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_pdf_without_text_is_refused(tmp_path: Path) -> None:
    pdf = FPDF()
    pdf.add_page()  # a page with no text at all, like a scan without OCR
    pdf.output(str(tmp_path / "scan.pdf"))
    with pytest.raises(InputError, match="no extractable text"):
        read_path(tmp_path / "scan.pdf")


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"id": "a", "text": "x"', "invalid JSON"),
        ('["a", "b"]', "must be a JSON object"),
        ('{"title": "t", "text": "x"}', '"id" is required'),
        ('{"id": "", "text": "x"}', '"id" is required'),
        ('{"id": true, "text": "x"}', '"id" is required'),
        ('{"id": "a"}', '"text" is required'),
        ('{"id": "a", "text": "   "}', '"text" is required'),
        ('{"id": "a", "text": 5}', '"text" is required'),
        ('{"id": "a", "text": "x", "title": 3}', '"title" must be a string'),
        ('{"id": "a", "id": "b", "text": "x"}', "duplicate key"),
        ('{"id": "a", "text": NaN}', "NaN is not allowed"),
    ],
)
def test_bad_jsonl_line_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "ok", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_path(path)
    assert f"{path}, line 2" in str(err.value)
    assert message in str(err.value)


def test_duplicate_jsonl_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "x", "text": "a"}\n{"id": "y", "text": "b"}\n{"id": "x", "text": "c"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"line 3: duplicate id 'x' \(first on line 1\)"):
        read_path(path)


def test_duplicate_ids_across_inputs_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": "same", "text": "a"}\n', encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"id": "same", "text": "b"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="duplicate document id 'same'"):
        read_path(tmp_path)


def test_over_long_ids_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "x" * 600, "text": "a"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="longer than 512 bytes"):
        read_path(tmp_path)


def test_unsupported_extension_given_explicitly(tmp_path: Path) -> None:
    (tmp_path / "table.csv").write_text("a,b\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_path(tmp_path / "table.csv")
    assert "unsupported file type '.csv'" in str(err.value)
    assert ", ".join(SUPPORTED_EXTENSIONS) in str(err.value)


def test_empty_directory_and_directory_without_supported_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.csv").write_text("1", encoding="utf-8")
    for folder in ("empty", "other"):
        with pytest.raises(InputError) as err:
            read_path(tmp_path / folder)
        assert "no supported files" in str(err.value)
        assert ".jsonl, .md, .pdf, .rst, .txt" in str(err.value)


def test_missing_and_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        read_path(tmp_path / "nope.txt")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("good", encoding="utf-8")
    os.symlink(tmp_path / "gone.txt", folder / "dangling.txt")  # listed, but cannot be opened
    with pytest.raises(InputError) as err:
        read_path(folder)
    assert f"{folder / 'dangling.txt'}: cannot read file" in str(err.value)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("fine", encoding="utf-8")
    (tmp_path / "bad1.txt").write_bytes(b"\x00\x01")
    (tmp_path / "bad2.md").write_bytes(b"\xff\xfe")
    (tmp_path / "bad3.jsonl").write_text('{"id": "a", "text": "x"}\nnot json\n{"id": "b"}\n', encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_paths([tmp_path, tmp_path / "missing.md"])
    message = str(err.value)
    assert message.startswith("5 bad inputs; nothing was ingested")
    for fragment in ("bad1.txt", "bad2.md", "bad3.jsonl, line 2", "bad3.jsonl, line 3", "missing.md"):
        assert fragment in message
    assert "good.txt" not in message


def test_no_paths_at_all() -> None:
    with pytest.raises(InputError, match="no input paths"):
        read_paths([])


# -- PDF provenance, HTML, skipped and bad files ------------------------------------------------
def test_pdf_pages_are_recorded_for_every_offset(tmp_path: Path) -> None:
    path = _pdf(tmp_path / "r.pdf", ["Alpha page text.", "", "Gamma page text."], title="Quarterly Report")
    [doc] = read_path(path)
    assert [number for _, number in doc.pages] == [1, 3]  # the blank page 2 holds no text
    assert doc.page_at(doc.text.index("Alpha")) == 1
    assert doc.page_at(doc.text.index("Gamma")) == 3
    assert doc.text[doc.pages[1][0]:].startswith("Gamma")


@pytest.mark.parametrize(
    "metadata, first_line, expected",
    [
        ("Annual Report 2019", "Something else entirely", "Annual Report 2019"),
        ("0000764478-19-000009", "Form 10-K Annual Report", "Form 10-K Annual Report"),  # accession number
        ("Microsoft Word - Budget Plan.docx", "Budget Plan for the City", "Budget Plan for the City"),
        (None, "Safe Room Design Guide", "Safe Room Design Guide"),
        ("filing", "12", "filing"),  # the file's own name is no title; a bare number is no heading
    ],
)
def test_pdf_title_from_metadata_or_first_heading(tmp_path: Path, metadata: str | None, first_line: str, expected: str) -> None:
    path = _pdf(tmp_path / "filing.pdf", [f"{first_line}\nThe body of the filing states facts."], title=metadata)
    assert read_path(path)[0].title == expected


def test_html_is_read_to_text_with_its_title(tmp_path: Path) -> None:
    page = tmp_path / "faq.htm"
    page.write_bytes(
        """<!doctype html><html><head><meta charset="windows-1252"><title> FEMA: Safe
        Rooms </title><style>p {color: red}</style></head><body><nav>Home | About</nav>
        <h1>Safe rooms</h1><p>A safe room is a <b>hardened</b> structure.</p>
        <script>alert('never')</script><ul><li>Water</li><li>Radio</li></ul><p>Caf\xe9 owners agree.</p>
        </body></html>""".encode("cp1252")
    )
    [doc] = read_paths([page], source="web")
    assert (doc.id, doc.title, doc.source) == ("web/faq.htm", "FEMA: Safe Rooms", "web:faq.htm")
    assert "A safe room is a hardened structure." in doc.text  # inline markup keeps the sentence whole
    assert "Café owners agree." in doc.text  # the declared charset is honoured
    assert "alert" not in doc.text and "color: red" not in doc.text
    assert "\n\nWater\n\nRadio\n\n" in doc.text  # block elements stay apart for the chunker


def test_html_without_text_is_a_bad_input(tmp_path: Path) -> None:
    (tmp_path / "empty.html").write_text("<html><head><title>t</title></head><body><script>x()</script></body></html>")
    with pytest.raises(InputError, match="empty.html: HTML page has no text"):
        read_path(tmp_path / "empty.html")


def test_unsupported_files_in_folders_are_listed_and_bad_ones_skipped_on_request(tmp_path: Path) -> None:
    from hansa.plugin.readers import read_origins
    from hansa.plugin.sources import resolve_origins

    (tmp_path / "ok.txt").write_text("fine", encoding="utf-8")
    (tmp_path / "sheet.csv").write_text("a,b", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"\x00")
    (tmp_path / "rows.jsonl").write_text('{"id": "r1", "text": "x"}\nnot json\n', encoding="utf-8")
    origins = resolve_origins([tmp_path], "kb", {})
    with pytest.raises(InputError, match="2 bad inputs"):
        read_origins(origins)
    result = read_origins(origins, skip_bad=True)
    assert [d.id for d in result.documents] == ["kb/ok.txt", "r1"]  # good lines of a bad JSONL stay
    assert result.skipped == [str(tmp_path / "sheet.csv")]
    assert len(result.bad) == 2 and result.bad_sources == {"kb:bad.txt", "kb:rows.jsonl"}
