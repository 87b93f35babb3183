"""Every Cypher statement hansa runs, as `.cypher` files shipped with the package.

Why files: a DBA can read, review and profile exactly what hansa sends to their database without
reading Python, and no statement is ever assembled from data (values arrive only as `$params`;
labels, types and property keys are written literally in the files).

Layout: `<folder>/<name>.cypher`, addressed as "folder/name" (e.g. `load("schema/constraints")`).
A file holds one statement. A file may hold several statements that must run one after another
(only `schema/` does, because schema commands cannot share a transaction): each statement is then
ended by a line containing only `;`. Lines starting with `//` are comments and are kept.

One exception to "written literally": `map/` holds templates for reading an organization's own
graph (plugin/graph_map.py), whose labels and relationship types an admin names in the config.
Cypher has no parameters for those (Neo4j 5.26), so `render` fills `{{name}}` placeholders, and
only with identifiers matching IDENTIFIER, each backtick-quoted: nothing else can reach the text.
Values, property keys included, still arrive as `$params`.
"""
from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files

__all__ = ["load", "render", "statements"]

_NAME = re.compile(r"[a-z0-9_]+(/[a-z0-9_]+)*")
_SEPARATOR = re.compile(r"^[ \t]*;[ \t]*$", re.MULTILINE)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")  # as hansa.core.config checks [site.graph_map]
_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")


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


def render(name: str, **identifiers: str | list[str] | tuple[str, ...]) -> str:
    """`load(name)` with each `{{key}}` replaced by its identifier, backtick-quoted; a list or tuple
    becomes a label/type alternation (`A`|`B`). Raises ValueError for an identifier that is not
    plain (IDENTIFIER), an empty list, or a placeholder left without a value (or a value without one)."""
    text = load(name)
    wanted = set(_PLACEHOLDER.findall(text))
    if wanted != set(identifiers):
        raise ValueError(f"Cypher template {name!r} takes {sorted(wanted)}, got {sorted(identifiers)}")
    quoted: dict[str, str] = {}
    for key, value in identifiers.items():
        names = [value] if isinstance(value, str) else list(value)
        if not names:
            raise ValueError(f"Cypher template {name!r}: no identifier for {{{{{key}}}}}")
        for ident in names:
            if not isinstance(ident, str) or not IDENTIFIER.fullmatch(ident):
                raise ValueError(f"Cypher template {name!r}: {ident!r} is not a plain identifier")
        quoted[key] = "|".join(f"`{ident}`" for ident in names)
    return _PLACEHOLDER.sub(lambda m: quoted[m.group(1)], text)
