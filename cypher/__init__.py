"""Every Cypher statement hansa runs, as `.cypher` files shipped with the package.

Why files: a DBA can read, review and profile exactly what hansa sends to their database without
reading Python, and no statement is ever assembled from data (values arrive only as `$params`;
labels, types and property keys are written literally in the files).

Layout: `<folder>/<name>.cypher`, addressed as "folder/name" (e.g. `load("schema/constraints")`).
A file holds one statement. A file may hold several statements that must run one after another
(only `schema/` does, because schema commands cannot share a transaction): each statement is then
ended by a line containing only `;`. Lines starting with `//` are comments and are kept.
"""
from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files

__all__ = ["load", "statements"]

_NAME = re.compile(r"[a-z0-9_]+(/[a-z0-9_]+)*")
_SEPARATOR = re.compile(r"^[ \t]*;[ \t]*$", re.MULTILINE)


@lru_cache(maxsize=None)
def load(name: str) -> str:
    """The text of `cypher/<name>.cypher` (one statement); raises KeyError for an unknown name."""
    if not _NAME.fullmatch(name):
        raise KeyError(f"invalid Cypher file name {name!r}: use lowercase 'folder/name' without extension")
    resource = files(__name__).joinpath(f"{name}.cypher")
    if not resource.is_file():
        raise KeyError(f"no Cypher file {name!r} in hansa.cypher")
    text = resource.read_text(encoding="utf-8").strip()
    if not text:
        raise KeyError(f"Cypher file {name!r} is empty")
    return text


def statements(name: str) -> list[str]:
    """The statements of a multi-statement file, split on lines holding only `;`."""
    return [part.strip() for part in _SEPARATOR.split(load(name)) if part.strip()]
