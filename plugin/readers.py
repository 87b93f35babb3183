"""Turn files and folders into plain-text documents, refusing anything we could not read faithfully.

Why so strict: everything downstream (chunk offsets, content hashes, provenance shown to a reviewer)
assumes the text is exactly what the file says. A silently mis-decoded or half-parsed file would
become wrong answers with confident citations, so each failure is an InputError naming the file
(and line or byte offset) and what to do about it. `read_paths` collects every problem before
raising, so one run tells the user about all bad files at once.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from hansa.core.errors import InputError
from hansa.core.jsonsafe import loads_strict
from hansa.core.logs import get_logger
from hansa.plugin.sources import Origin, resolve_origins

log = get_logger(__name__)

TEXT_EXTENSIONS = (".txt", ".md", ".rst")
HTML_EXTENSIONS = (".html", ".htm")
SUPPORTED_EXTENSIONS = (".htm", ".html", ".jsonl", ".md", ".pdf", ".rst", ".txt")
# Byte-order marks, longest first (UTF-32 LE starts with UTF-16 LE's mark): a file that carries
# one says its encoding, so reading it is not guessing. Python's utf-16/utf-32 codecs drop the mark.
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32", "UTF-32"),
    (b"\x00\x00\xfe\xff", "utf-32", "UTF-32"),
    (b"\xef\xbb\xbf", "utf-8-sig", "UTF-8"),
    (b"\xff\xfe", "utf-16", "UTF-16"),
    (b"\xfe\xff", "utf-16", "UTF-16"),
)
MAX_TITLE_CHARS = 200
# Between a PDF's pages: a paragraph break holding a form feed, the page-break character (pdftotext
# writes it too). Why in the text: a chunk then knows where its pages turn, so a sentence is cited
# with its own page, not the page its chunk starts on (issue 34), without storing page maps.
PAGE_BREAK_CHAR = "\f"
PAGE_BREAK = f"\n{PAGE_BREAK_CHAR}\n"
MAX_DOC_ID_BYTES = 512  # ids travel as vector-store fields and citations: keep them bounded
MAX_PROBLEMS_SHOWN = 50  # a folder of 10,000 bad files should not produce a 10,000-line message


@dataclass(frozen=True)
class SourceDocument:
    """One document as read: `id` is the jsonl id or "<source>/<path>" (plugin.sources)."""

    id: str
    title: str
    text: str
    source: str  # "<source>:<path inside the source>": where a citation leads back to
    # (offset in `text`, 1-based page number) where each non-empty page starts (PDFs only; pages
    # are joined by PAGE_BREAK)
    pages: tuple[tuple[int, int], ...] = ()

    def page_at(self, offset: int) -> int | None:
        """The page holding character `offset`, or None for unpaged documents."""
        page = None
        for start, number in self.pages:
            if start > offset:
                break
            page = number
        return page


def page_within(first_page: int | None, text: str, offset: int) -> int | None:
    """The page of `text[offset]` in a passage (a chunk) whose text starts on `first_page`: one
    more for every page break before it. None for unpaged documents."""
    return None if first_page is None else first_page + text.count(PAGE_BREAK_CHAR, 0, offset)


@dataclass(frozen=True)
class ReadResult:
    """What a read produced: the documents, the files left out as unsupported, and (with
    `skip_bad`) the problems that were skipped instead of aborting."""

    documents: list[SourceDocument]
    skipped: list[str] = field(default_factory=list)  # unsupported files inside folders (paths)
    bad: list[str] = field(default_factory=list)  # problems skipped past (empty unless skip_bad)
    bad_sources: frozenset[str] = frozenset()  # `source` values of files with a problem: never synced away


class _Problems:
    """Collects per-file failures so the user sees every bad input in one message."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.sources: set[str] = set()

    def add(self, message: str, source: str | None = None) -> None:
        self.items.append(message)
        if source is not None:
            self.sources.add(source)

    def raise_if_any(self) -> None:
        if not self.items:
            return
        shown = self.items[:MAX_PROBLEMS_SHOWN]
        more = len(self.items) - len(shown)
        lines = "\n".join(f"  - {m}" for m in shown) + (f"\n  - ... and {more} more" if more else "")
        noun = "input" if len(self.items) == 1 else "inputs"
        raise InputError(f"{len(self.items)} bad {noun}; nothing was ingested. Fix or remove them and re-run:\n{lines}")


def _normalize_newlines(text: str) -> str:
    """One newline convention, so the same document hashes (and chunks) alike on every platform."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _decode_text(raw: bytes, where: str) -> str:
    """UTF-8, or the encoding a byte-order mark names (UTF-16/32 as Windows tools save text);
    anything else is refused: guessing an encoding would corrupt text silently."""
    codec, name = next(((c, n) for bom, c, n in _BOMS if raw.startswith(bom)), ("utf-8", "UTF-8"))
    if codec == "utf-8":
        nul = raw.find(b"\x00")
        if nul >= 0:
            raise InputError(
                f"{where}: binary data (NUL byte at offset {nul}), not a text file; give text, Markdown, JSONL or "
                "PDF (UTF-16 text needs its byte-order mark)"
            )
    try:
        text = raw.decode(codec)
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where}: not valid {name} (byte 0x{raw[exc.start]:02x} at offset {exc.start}); re-save the file as UTF-8"
        ) from exc
    if "\x00" in text:
        raise InputError(f"{where}: binary data (a NUL character in {name} text), not a text file")
    text = _normalize_newlines(text)
    if not text.strip():
        raise InputError(f"{where}: empty file (no text); remove it or add content")
    return text


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read file ({exc.strerror or exc}); check that it exists and is readable") from exc


def _markdown_title(text: str) -> str | None:
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("# ") and stripped[2:].strip():
            return stripped[2:].strip()
    return None


_RST_ADORNMENT = re.compile(r"""([!-/:-@\[-`{-~])\1+""")  # one punctuation character repeated: = - ~ ^ * # ...


def _rst_title(text: str) -> str | None:
    """The first reStructuredText section title: a line underlined (and maybe overlined) by one
    repeated punctuation character at least as long as the title. Why not docutils: the text is
    indexed as written (markup included, like Markdown's); only the title needs the structure."""
    lines = text.split("\n")
    for index in range(len(lines) - 1):
        title, under = lines[index].strip(), lines[index + 1].rstrip()
        if title and not _RST_ADORNMENT.fullmatch(title) and _RST_ADORNMENT.fullmatch(under) and len(under) >= len(title):
            return title[:MAX_TITLE_CHARS]
    return None


_TITLE_RULES: dict[str, Callable[[str], str | None]] = {".md": _markdown_title, ".rst": _rst_title}


def _read_text(path: Path, doc_id: str, source: str) -> list[SourceDocument]:
    text = _decode_text(_read_bytes(path), str(path))
    rule = _TITLE_RULES.get(path.suffix.lower())
    title = (rule(text) if rule else None) or path.stem
    return [SourceDocument(id=doc_id, title=title, text=text, source=source)]


# Elements that end a line of text: their content becomes its own paragraph.
_HTML_BLOCKS = (
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "figure", "footer",
    "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table",
    "td", "th", "tr", "ul",
)
_HTML_DROP = ("script", "style", "noscript", "template", "svg", "head", "iframe", "object", "form")
_INLINE_SPACE = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n{3,}")


def _read_html(path: Path, doc_id: str, source: str) -> list[SourceDocument]:
    """BeautifulSoup (a well-kept parser that honours the page's declared charset) with the stdlib
    html.parser backend: no native dependency. Scripts, styles and forms are dropped; block
    elements become paragraphs so sentences and headings stay apart for the chunker."""
    from bs4 import BeautifulSoup

    raw = _read_bytes(path)
    if not raw.strip():
        raise InputError(f"{path}: empty file (no HTML)")
    soup = BeautifulSoup(raw, "html.parser")
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text(" ").split()) if title_tag else ""
    if not title:
        heading = soup.find("h1")
        title = " ".join(heading.get_text(" ").split()) if heading else ""
    for tag in soup.find_all(_HTML_DROP):
        tag.decompose()
    for tag in soup.find_all(_HTML_BLOCKS):
        tag.insert_before("\n\n")
        tag.insert_after("\n\n")
    lines = (_INLINE_SPACE.sub(" ", line).strip() for line in _normalize_newlines(soup.get_text()).split("\n"))
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    if not text:
        raise InputError(f"{path}: HTML page has no text; remove it or add content")
    return [SourceDocument(id=doc_id, title=title[:MAX_TITLE_CHARS] or path.stem, text=text, source=source)]


def _jsonl_record(obj: object, where: str) -> tuple[str, str, str]:
    if not isinstance(obj, dict):
        raise InputError(f'{where}: each line must be a JSON object like {{"id": "...", "title": "...", "text": "..."}}')
    raw_id = obj.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or (isinstance(raw_id, str) and not raw_id.strip()):
        raise InputError(f'{where}: "id" is required and must be a non-empty string (or an integer)')
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f'{where}: "text" is required and must be a non-empty string')
    title = obj.get("title", "")
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise InputError(f'{where}: "title" must be a string when given')
    doc_id = str(raw_id)
    return doc_id, title.strip() or doc_id, _normalize_newlines(text)


def _read_jsonl(path: Path, source: str, problems: _Problems) -> list[SourceDocument]:
    """Each bad line is its own problem (file + line), so a big file is fixed in one pass."""
    text = _decode_text(_read_bytes(path), str(path))
    docs: list[SourceDocument] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            doc_id, title, body = _jsonl_record(loads_strict(line), where)
        except InputError as exc:
            message = str(exc)
            problems.add(message if message.startswith(where) else f"{where}: {message}", source)
            continue
        if doc_id in first_line:
            problems.add(f"{where}: duplicate id {doc_id!r} (first on line {first_line[doc_id]}); ids must be unique", source)
            continue
        first_line[doc_id] = number
        docs.append(SourceDocument(id=doc_id, title=title, text=body, source=source))
    return docs


_ACCESSION_LIKE = re.compile(r"^[\W\d_]+$")  # "0000764478-19-000009": no letters at all
_AUTHORING_PREFIXES = ("Microsoft Word - ", "Microsoft PowerPoint - ", "Microsoft Excel - ")
_FILE_LIKE = re.compile(r"\.(docx?|pptx?|xlsx?|pdf|odt|rtf|txt|indd|qxd)$", re.IGNORECASE)


def _usable_title(candidate: str, path: Path) -> str:
    """A metadata title worth showing, or "": not an accession number, file name or tool stamp."""
    title = " ".join(candidate.split())
    for prefix in _AUTHORING_PREFIXES:
        if title.startswith(prefix):
            title = title[len(prefix):]
    if not title or _ACCESSION_LIKE.fullmatch(title) or _FILE_LIKE.search(title):
        return ""
    if title.lower() in (path.stem.lower(), path.name.lower(), "untitled"):
        return ""
    return title[:MAX_TITLE_CHARS]


def _first_heading(text: str, path: Path) -> str:
    """The first line of the first page if it reads like a title (two words or more, short, no
    closing full stop); lines without words (page numbers, accession numbers) are passed over."""
    for line in text.split("\n")[:40]:
        candidate = " ".join(line.split())
        if candidate.endswith((".", ",", ";")):  # a sentence, not a heading: no title from the text
            return ""
        if 3 <= len(candidate) <= MAX_TITLE_CHARS and sum(w[:1].isalpha() for w in candidate.split()) >= 2:
            return _usable_title(candidate, path)
    return ""


def _read_pdf(path: Path, doc_id: str, source: str) -> list[SourceDocument]:
    """pypdfium2 (PDFium, the Chrome engine): fast and tolerant of real-world PDFs."""
    import pypdfium2 as pdfium

    raw = _read_bytes(path)
    if not raw.strip():
        raise InputError(f"{path}: empty file (0 bytes of PDF)")
    try:
        pdf = pdfium.PdfDocument(raw)
    except pdfium.PdfiumError as exc:
        raise InputError(f"{path}: not a readable PDF ({exc}); check the file or export it again") from exc
    try:
        pages: list[str] = []
        for index in range(len(pdf)):
            page = pdf[index]
            try:
                textpage = page.get_textpage()
                try:
                    pages.append(textpage.get_text_bounded())
                finally:
                    textpage.close()
            finally:
                page.close()
        title = (pdf.get_metadata_dict(skip_empty=True).get("Title") or "").strip()
    except pdfium.PdfiumError as exc:
        raise InputError(f"{path}: PDF could not be parsed ({exc}); check the file or export it again") from exc
    finally:
        pdf.close()
    parts: list[str] = []
    starts: list[tuple[int, int]] = []
    offset = 0
    for number, page_text in enumerate(pages, start=1):
        page_text = _normalize_newlines(page_text).replace(PAGE_BREAK_CHAR, " ").strip()
        if not page_text:
            continue
        if parts:
            offset += len(PAGE_BREAK)
        starts.append((offset, number))
        parts.append(page_text)
        offset += len(page_text)
    text = PAGE_BREAK.join(parts)
    if not text.strip():
        raise InputError(f"{path}: PDF has no extractable text (scanned images?); run OCR first")
    title = _usable_title(title, path) or _first_heading(parts[0], path) or path.stem
    return [SourceDocument(id=doc_id, title=title, text=text, source=source, pages=tuple(starts))]


def _read_one(path: Path, origin: Origin, problems: _Problems) -> list[SourceDocument]:
    suffix = path.suffix.lower()
    doc_id, source = origin.doc_id(path), origin.source_of(path)
    try:
        if suffix in TEXT_EXTENSIONS:
            return _read_text(path, doc_id, source)
        if suffix in HTML_EXTENSIONS:
            return _read_html(path, doc_id, source)
        if suffix == ".jsonl":
            return _read_jsonl(path, source, problems)
        if suffix == ".pdf":
            return _read_pdf(path, doc_id, source)
        raise InputError(f"{path}: unsupported file type {suffix or '(none)'!r}; supported: {', '.join(SUPPORTED_EXTENSIONS)}")
    except InputError as exc:
        problems.add(str(exc), source)
        return []


def _walk(root: Path) -> Iterable[Path]:
    """Every file under `root`, sorted, skipping hidden entries (.git, .DS_Store...)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith("."):
                yield Path(dirpath) / name


def _supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_EXTENSIONS


def _collect(origin: Origin, problems: _Problems, skipped: list[str]) -> list[SourceDocument]:
    path = origin.path
    if path.is_dir():
        files = list(_walk(path))
        skipped.extend(str(f) for f in files if not _supported(f))
        files = [f for f in files if _supported(f)]
        if not files:
            problems.add(f"{path}: no supported files in this directory; supported: {', '.join(SUPPORTED_EXTENSIONS)}")
            return []
        docs: list[SourceDocument] = []
        for file in files:
            docs.extend(_read_one(file, origin, problems))
        return sorted(docs, key=lambda d: d.id)
    if not path.exists():
        problems.add(f"{path}: no such file or directory")
        return []
    return _read_one(path, origin, problems)


def read_origins(origins: Sequence[Origin], skip_bad: bool = False) -> ReadResult:
    """All documents under the resolved ingest arguments.

    Default: one InputError listing every problem (nothing half-read). With `skip_bad`, problems
    are returned in `bad` and reading goes on without those files (or JSONL lines). Unsupported
    files inside folders are never an error: they are listed in `skipped`. Document ids must be
    unique across all inputs: two inputs claiming one id would overwrite each other in the
    graph, which the user must decide about, not us."""
    problems = _Problems()
    skipped: list[str] = []
    docs: list[SourceDocument] = []
    for origin in origins:
        docs.extend(_collect(origin, problems, skipped))
    seen: dict[str, str] = {}
    kept: list[SourceDocument] = []
    for doc in docs:
        if len(doc.id.encode("utf-8")) > MAX_DOC_ID_BYTES:
            problems.add(f"{doc.source}: document id {doc.id[:60]!r}... is longer than {MAX_DOC_ID_BYTES} bytes; use a shorter id or path", doc.source)
        elif doc.id in seen:
            problems.add(f"duplicate document id {doc.id!r}: in {seen[doc.id]} and {doc.source}; ids must be unique", doc.source)
        else:
            seen[doc.id] = doc.source
            kept.append(doc)
    if not skip_bad:
        problems.raise_if_any()
    log.debug("read.done", documents=len(kept), inputs=len(origins), skipped=len(skipped), bad=len(problems.items))
    return ReadResult(documents=kept, skipped=skipped, bad=list(problems.items), bad_sources=frozenset(problems.sources))


def read_paths(paths: Sequence[Path], source: str | None = None, skip_bad: bool = False) -> list[SourceDocument]:
    """Documents under `paths`, each path its own source by default (named after its folder)."""
    return read_origins(resolve_origins([Path(p) for p in paths], source, {}), skip_bad=skip_bad).documents


def read_path(path: Path) -> list[SourceDocument]:
    """One file or a whole directory (recursive, sorted, deterministic)."""
    return read_paths([path])
