"""Document identity an admin controls: a named *source* and the path inside it.

Why: ids used to be paths relative to whatever folder `ingest` was given, so `ingest dup/a` and
`ingest dup/b` (each with notes.txt) overwrote each other, and ingesting the same files from the
parent folder stored them twice. Now every ingest argument belongs to a source (`--source NAME`,
by default the folder's own name, or a file's folder's name), each source is bound to one root
folder the first time it is used (<home>/sources.json), and a file's id is
`<source>/<path inside the root>` wherever it is ingested from: `ingest docs` and
`ingest docs/policies --source docs` name docs/policies/leave.md alike. A JSONL record keeps the
`id` it carries (the admin chose it). A document's `source` field is `<source>:<path inside the
root>` (for JSONL: of the .jsonl file): provenance cited with answers, and what `ingest --sync`
compares against.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hansa.core.errors import ConfigError, InputError
from hansa.core.files import write_json_atomic

SOURCES_FILENAME = "sources.json"
SOURCE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Origin:
    """One ingest argument resolved: the `path` given, its source name and that source's root."""

    path: Path
    source: str
    root: Path

    def relative(self, file: Path) -> str:
        """The path of `file` inside the source root, with '/' separators (symlinks are not
        followed: a link is named where it lies, like any file)."""
        return _absolute(file).relative_to(self.root).as_posix()

    def doc_id(self, file: Path) -> str:
        return f"{self.source}/{self.relative(file)}"

    def source_of(self, file: Path) -> str:
        return f"{self.source}:{self.relative(file)}"

    @property
    def scope(self) -> str:
        """The `source` prefix of every document under `path` (what --sync may remove)."""
        resolved = self.path
        if resolved == self.root:
            return f"{self.source}:"
        inside = resolved.relative_to(self.root).as_posix()
        return f"{self.source}:{inside}/" if resolved.is_dir() else f"{self.source}:{inside}"


def validate_source_name(name: str) -> str:
    if not isinstance(name, str) or not SOURCE_NAME_RE.fullmatch(name):
        raise InputError(
            f"invalid source name {name!r}: use 1-64 letters, digits, '.', '_' or '-' (starting with a letter or "
            "digit); name it with --source NAME"
        )
    return name


def sources_file(home: Path) -> Path:
    return home / SOURCES_FILENAME


def read_roots(home: Path) -> dict[str, Path]:
    """{source name: root folder} bound so far (empty for a new site)."""
    path = sources_file(home)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {validate_source_name(k): Path(v) for k, v in data["roots"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, InputError) as exc:
        raise ConfigError(f"{path} is damaged ({exc}); restore it from a backup (it maps source names to folders)") from exc


def save_roots(home: Path, roots: dict[str, Path]) -> None:
    write_json_atomic(sources_file(home), {"roots": {k: str(v) for k, v in sorted(roots.items())}})


def _absolute(path: Path) -> Path:
    """Absolute and normalized ('..' folded) without following symlinks."""
    return Path(os.path.abspath(path))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_origins(paths: Sequence[Path], source: str | None, roots: dict[str, Path]) -> list[Origin]:
    """Each path's source and root. A source already bound keeps its root: a path outside it is
    refused (it would get ids that collide or duplicate). A new source is bound to the folder
    given (for several paths under one --source: their common folder)."""
    if not paths:
        raise InputError("no input paths given; name files or directories to ingest")
    resolved = [_absolute(Path(p)) for p in paths]
    folders = [p if p.is_dir() else p.parent for p in resolved]
    names = [validate_source_name(source)] * len(paths) if source else [
        _default_name(given, folder) for given, folder in zip(paths, folders)
    ]
    new_roots: dict[str, Path] = {}
    for name, folder in zip(names, folders):
        if name not in roots:
            new_roots[name] = Path(os.path.commonpath([new_roots[name], folder])) if name in new_roots else folder
    origins = []
    for given, path, name in zip(paths, resolved, names):
        root = roots.get(name) or new_roots[name]
        if not _inside(path, root):
            raise InputError(
                f"{given}: source {name!r} is rooted at {root}, and this path lies outside it; ingest it under "
                f"another --source NAME (a document's id is '<source>/<path inside the source root>')"
            )
        origins.append(Origin(path=path, source=name, root=root))
    return origins


def _default_name(given: Path, folder: Path) -> str:
    name = folder.name
    if not SOURCE_NAME_RE.fullmatch(name):
        raise InputError(
            f"{given}: the folder name {name!r} cannot name a source; give one with --source NAME "
            "(letters, digits, '.', '_' or '-')"
        )
    return name


def bind(home: Path, origins: Sequence[Origin]) -> None:
    """Record the roots of sources used for the first time (called once input was read cleanly)."""
    roots = read_roots(home)
    changed = False
    for origin in origins:
        if origin.source not in roots:
            roots[origin.source] = origin.root
            changed = True
    if changed:
        save_roots(home, roots)
