"""Turn files and folders into plain-text documents, refusing anything we could not read faithfully.

Why so strict: everything downstream (chunk offsets, content hashes, provenance shown to a reviewer)
assumes the text is exactly what the file says. A silently mis-decoded or half-parsed file would
become wrong answers with confident citations, so each failure is an InputError naming the file
(and line or byte offset) and what to do about it. `read_paths` collects every problem before
raising, so one run tells the user about all bad files at once.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from hansa.core.errors import InputError
from hansa.core.jsonsafe import loads_strict
from hansa.core.logs import get_logger

log = get_logger(__name__)

TEXT_EXTENSIONS = (".txt", ".md")
SUPPORTED_EXTENSIONS = (".jsonl", ".md", ".pdf", ".txt")
MAX_DOC_ID_BYTES = 512  # ids travel as vector-store fields and citations: keep them bounded
MAX_PROBLEMS_SHOWN = 50  # a folder of 10,000 bad files should not produce a 10,000-line message


@dataclass(frozen=True)
class SourceDocument:
    """One document as read: `id` is the jsonl id or the path relative to the root given."""

    id: str
    title: str
    text: str
    source: str  # file path (and line for jsonl): where a citation leads back to


class _Problems:
    """Collects per-file failures so the user sees every bad input in one message."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, message: str) -> None:
        self.items.append(message)

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
    """UTF-8 only, refusing binary data: guessing an encoding would corrupt text silently."""
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InputError(f"{where}: binary data (NUL byte at offset {nul}), not a text file; give text, Markdown, JSONL or PDF")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); re-save the file as UTF-8"
        ) from exc
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


def _read_text(path: Path, doc_id: str) -> list[SourceDocument]:
    text = _decode_text(_read_bytes(path), str(path))
    title = (_markdown_title(text) if path.suffix.lower() == ".md" else None) or path.stem
    return [SourceDocument(id=doc_id, title=title, text=text, source=str(path))]


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


def _read_jsonl(path: Path, _doc_id: str, problems: _Problems) -> list[SourceDocument]:
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
            problems.add(message if message.startswith(where) else f"{where}: {message}")
            continue
        if doc_id in first_line:
            problems.add(f"{where}: duplicate id {doc_id!r} (first on line {first_line[doc_id]}); ids must be unique")
            continue
        first_line[doc_id] = number
        docs.append(SourceDocument(id=doc_id, title=title, text=body, source=f"{path}:{number}"))
    return docs


def _read_pdf(path: Path, doc_id: str) -> list[SourceDocument]:
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
    text = _normalize_newlines("\n\n".join(p.strip() for p in pages if p.strip()))
    if not text.strip():
        raise InputError(f"{path}: PDF has no extractable text (scanned images?); run OCR first")
    return [SourceDocument(id=doc_id, title=title or path.stem, text=text, source=str(path))]


def _read_one(path: Path, doc_id: str, problems: _Problems) -> list[SourceDocument]:
    suffix = path.suffix.lower()
    if suffix in TEXT_EXTENSIONS:
        return _read_text(path, doc_id)
    if suffix == ".jsonl":
        return _read_jsonl(path, doc_id, problems)
    if suffix == ".pdf":
        return _read_pdf(path, doc_id)
    raise InputError(f"{path}: unsupported file type {suffix or '(none)'!r}; supported: {', '.join(SUPPORTED_EXTENSIONS)}")


def _walk(root: Path) -> Iterable[Path]:
    """Supported files under `root`, sorted, skipping hidden entries (.git, .DS_Store...)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            if os.path.splitext(name)[1].lower() in SUPPORTED_EXTENSIONS:
                yield Path(dirpath) / name


def _collect(path: Path, problems: _Problems) -> list[SourceDocument]:
    def guarded(fn: Callable[[], list[SourceDocument]]) -> list[SourceDocument]:
        try:
            return fn()
        except InputError as exc:
            problems.add(str(exc))
            return []

    if path.is_dir():
        files = list(_walk(path))
        if not files:
            problems.add(f"{path}: no supported files in this directory; supported: {', '.join(SUPPORTED_EXTENSIONS)}")
            return []
        docs: list[SourceDocument] = []
        for file in files:
            doc_id = file.relative_to(path).as_posix()
            docs.extend(guarded(lambda: _read_one(file, doc_id, problems)))
        return sorted(docs, key=lambda d: d.id)
    if not path.exists():
        problems.add(f"{path}: no such file or directory")
        return []
    return guarded(lambda: _read_one(path, path.name, problems))


def read_paths(paths: Sequence[Path]) -> list[SourceDocument]:
    """All documents under `paths`, or one InputError listing every problem (nothing half-read).

    Document ids must be unique across all inputs: two inputs claiming one id would overwrite each
    other in the graph, which the user must decide about, not us."""
    problems = _Problems()
    if not paths:
        raise InputError("no input paths given; name files or directories to ingest")
    docs: list[SourceDocument] = []
    for path in paths:
        docs.extend(_collect(Path(path), problems))
    seen: dict[str, str] = {}
    for doc in docs:
        if len(doc.id.encode("utf-8")) > MAX_DOC_ID_BYTES:
            problems.add(f"{doc.source}: document id {doc.id[:60]!r}... is longer than {MAX_DOC_ID_BYTES} bytes; use a shorter id or path")
        elif doc.id in seen:
            problems.add(f"duplicate document id {doc.id!r}: in {seen[doc.id]} and {doc.source}; ids must be unique")
        else:
            seen[doc.id] = doc.source
    problems.raise_if_any()
    log.debug("read.done", documents=len(docs), inputs=len(paths))
    return docs


def read_path(path: Path) -> list[SourceDocument]:
    """One file or a whole directory (recursive, sorted, deterministic)."""
    return read_paths([path])
