"""A strict JSON loader for everything that arrives over HTTP.

Why not `request.get_json()`: Flask's loader raises RecursionError (a 500) on deeply nested input,
accepts NaN/Infinity and silently keeps the last of duplicate keys — each a way for a peer to reach
undefined behaviour. This loader refuses all of them with InputError (a 400).
"""
from __future__ import annotations

import json
from typing import Any

from hansa.core.errors import InputError, UnsupportedMediaType

MAX_DEPTH = 32
JSON_TYPE = "application/json"


def require_json_type(mimetype: str | None, where: str) -> None:
    """Refuse (415) a body not declared as JSON before reading it. Why: a JSON endpoint that
    parses whatever arrives can be reached by a cross-site HTML form (text/plain needs no CORS
    preflight), and a client that mislabels its body gets a clear answer instead of a guess."""
    if mimetype != JSON_TYPE:
        got = f"Content-Type {mimetype!r}" if mimetype else "no Content-Type"
        raise UnsupportedMediaType(f"{where} takes a JSON body: send it with Content-Type: {JSON_TYPE} (got {got})")


def _no_constants(name: str) -> Any:
    raise InputError(f"invalid JSON: {name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise InputError(f"invalid JSON: number {text[:40]} is out of range")
    return value


def _check_text(value: str) -> str:
    """Lone surrogates (\\ud800) decode in Python but are not Unicode: refuse them at the edge."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError("invalid JSON: a string holds a lone surrogate escape") from exc
    return value


def _check_value(value: Any, max_depth: int) -> None:
    """One iterative walk over the parsed value: nesting depth and every key and string.

    Parsing first (C speed) and walking after is ~10x faster on multi-MB publications than
    scanning the raw text; hostile depth that would exhaust the parser's own recursion is caught
    as RecursionError in loads_strict."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, (dict, list)):
            if depth > max_depth:
                raise InputError(f"invalid JSON: nested deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key, inner in item.items():
                    _check_text(key)
                    if isinstance(inner, (str, dict, list)):
                        stack.append((inner, depth + 1))
            else:
                stack.extend((inner, depth + 1) for inner in item if isinstance(inner, (str, dict, list)))


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"invalid JSON: duplicate key {key!r}")
        out[key] = value
    return out


def loads_strict(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError("invalid JSON: body is not UTF-8") from exc
    try:
        result = json.loads(
            data, parse_constant=_no_constants, parse_float=_finite_float, object_pairs_hook=_no_duplicates
        )
    except RecursionError as exc:
        raise InputError(f"invalid JSON: nested deeper than {max_depth} levels") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise InputError(f"invalid JSON: {exc}") from exc
    _check_value(result, max_depth)
    return result


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON; refuses NaN/Infinity on the way out too."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
