"""Write the OpenAPI components of the wire types from the models (sync/wire.py, the gateway's
publication answers in gateway/trust/publishing.py, the query request in gateway/query/request.py),
or check them.

Why: the site API's request and answer shapes (plugin/openapi.json) and the embedding space the
gateway shows (gateway/http/openapi.json) were kept by hand beside the parsers and could drift from
what the code accepts. Now the models are the one source: this script replaces each listed
component with the JSON Schema pydantic derives from its class, in place, leaving the rest of each
hand-written document (paths, prose, other components) and its layout untouched. CI runs
`--check` (tests/scripts/test_openapi_components.py), which prints a diff and fails when a
committed document differs from what the models say.

    python scripts/openapi_components.py           # rewrite the components
    python scripts/openapi_components.py --check   # exit 1 with a diff if they are stale
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path
from typing import Any, Sequence

from hansa.core.model import json_schemas, type_schema
from hansa.gateway.query.request import Budget, QueryRequest, QueryText
from hansa.gateway.trust.publishing import PublicationAccepted, PublicationConflictBody
from hansa.sync.wire import Citation, EmbeddingSpace, PartialAnswer, RetrieveRequest, SiteId

REF_TEMPLATE = "#/components/schemas/{model}"
# document (relative to the repository root) -> the wire classes, and the named field types, whose
# components it carries. A class's component is named by its `COMPONENT`, else by the class.
DOCUMENTS: dict[str, tuple[list[type], dict[str, Any]]] = {
    "plugin/openapi.json": ([RetrieveRequest, Citation, PartialAnswer], {}),
    "gateway/http/openapi.json": ([EmbeddingSpace, PublicationAccepted, PublicationConflictBody, QueryRequest, Budget],
                                  {"SiteId": SiteId, "Question": QueryText}),
}


def regenerate(text: str, classes: list[type], types: dict[str, Any], where: str) -> str:
    """`text` with the listed components replaced by the models' schemas (same indentation)."""
    schemas = json_schemas(classes, REF_TEMPLATE)
    for cls in classes:
        text = _replace_component(text, getattr(cls, "COMPONENT", cls.__name__), schemas[cls.__name__], where)
    for name, tp in types.items():
        text = _replace_component(text, name, type_schema(tp), where)
    json.loads(text)  # still one valid JSON document
    return text


def _replace_component(text: str, name: str, schema: dict[str, Any], where: str) -> str:
    schemas_at = re.search(r'^( *)"schemas": \{', text, flags=re.M)
    if schemas_at is None:
        raise SystemExit(f"{where}: no components.schemas object")
    indent = schemas_at.group(1) + "  "
    member = re.compile(rf'^{indent}"{re.escape(name)}": ', flags=re.M).search(text, schemas_at.end())
    if member is None:
        raise SystemExit(f"{where}: add a placeholder component {name!r} (\"{name}\": {{}}) under components.schemas")
    _, end = json.JSONDecoder().raw_decode(text, member.end())
    return text[:member.end()] + _render(schema, indent) + text[end:]


def _render(value: Any, indent: str, width: int = 110) -> str:
    """JSON as the hand-written documents lay it out: a value on one line when it fits, else one
    member per line."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(indent) + len(flat) <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    inner = indent + "  "
    if isinstance(value, list):
        items = [_render(item, inner, width) for item in value]
        return "[\n" + ",\n".join(inner + item for item in items) + "\n" + indent + "]"
    members = [f"{json.dumps(key)}: {_render(item, inner, width)}" for key, item in value.items()]
    return "{\n" + ",\n".join(inner + member for member in members) + "\n" + indent + "}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff if a document is stale")
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                   help="the repository root holding the documents (default: this checkout)")
    args = p.parse_args(argv)
    stale = False
    for relative, (classes, types) in DOCUMENTS.items():
        path = args.root / relative
        text = path.read_text(encoding="utf-8")
        fresh = regenerate(text, classes, types, relative)
        if fresh == text:
            continue
        if args.check:
            stale = True
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), fresh.splitlines(True),
                                                       f"{relative} (committed)", f"{relative} (from the models)"))
        else:
            path.write_text(fresh, encoding="utf-8")
            print(f"wrote {relative}")
    if stale:
        print("\nthe OpenAPI components differ from the models: run python scripts/openapi_components.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
