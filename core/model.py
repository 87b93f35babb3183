"""The model layer: what crosses a boundary or reaches a disk is a frozen dataclass whose field
types say what JSON it accepts, validated by pydantic v2 (docs/decisions/0002-model-layer.md).

Why dataclasses and not pydantic models: the classes stay plain values (positional construction,
`dataclasses.replace`, no validation cost when hansa builds one itself); pydantic only reads their
annotations, to parse a peer's JSON and to write the JSON Schema the OpenAPI documents carry.

Strictness is per field (`StrictStr`, `StrictFloat`, `int_in`) rather than model-wide, because
pydantic's strict mode refuses a dict for a dataclass and a list for a tuple when validating Python
objects, which is what a decoded JSON body is. Unknown keys are refused (`extra="forbid"`), and
every refusal is an `InputError` naming the document and the field.
"""
from __future__ import annotations

import functools
from typing import Annotated, Any, ClassVar, Mapping, TypeVar

from pydantic import BeforeValidator, ConfigDict, Field, GetCoreSchemaHandler, Strict, TypeAdapter, ValidationError
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from hansa.core.errors import InputError

# Each wire dataclass sets `__pydantic_config__ = FORBID`: unknown keys are an error, never ignored.
FORBID = ConfigDict(extra="forbid")


def json_int(value: Any) -> Any:
    """JSON has one number type: `5.0` is the integer 5 (JSON Schema, hence our OpenAPI specs,
    says so), while `5.5`, `true` and `"5"` are not integers. Returns the int, or the value as is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def int_in(low: int, high: int) -> Any:
    """An integer in low..high as JSON counts integers (see `json_int`); bools are refused.

    The bounds sit inside the before-validator so the JSON Schema says `minimum`/`maximum`."""
    return Annotated[int, Strict(), Field(ge=low, le=high), BeforeValidator(json_int)]


def omitted_when_none() -> Any:
    """Field metadata: the key is left out of `to_json()` while the value is None, so an optional
    key added later keeps the bytes older peers (and signed digests) have."""
    return Field(exclude_if=_is_none)


def _is_none(value: Any) -> bool:
    return value is None


T = TypeVar("T", bound="Wire")


@functools.cache
def adapter(cls: type) -> TypeAdapter[Any]:
    """One validator and serializer per class, built on first use (not at import)."""
    return TypeAdapter(cls)


class Wire:
    """Mixin of a wire dataclass: `from_json` validates a decoded JSON object, `to_json` writes one.

    `WHERE` names the document in errors ("partial answer: 'confidence': ..."); a caller that
    knows better (the file and entry a record came from) passes `where`. `JSON_REQUIRED` lists
    keys a peer must send although the Python field has a default (the default serves hansa's
    own constructors), wherever the class is nested; the generated JSON Schema lists them as
    required too.

    A class may keep a `__post_init__` for what no field type says (keys that must be distinct,
    a list sorted by id): pydantic runs it after the fields validate, and hansa's own
    constructors run it too; it raises InputError naming the document itself."""

    WHERE: ClassVar[str] = "document"
    JSON_REQUIRED: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        return adapter(type(self)).dump_python(self, mode="json", by_alias=True)

    @classmethod
    def from_json(cls: type[T], obj: Mapping[str, Any], where: str | None = None) -> T:
        where = where or cls.WHERE
        if not isinstance(obj, Mapping):
            raise InputError(f"{where}: expected an object")
        try:
            return adapter(cls).validate_python(obj)
        except ValidationError as exc:
            raise InputError(f"{where}: {describe(exc)}") from None

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """The dataclass's schema, behind a check for the `JSON_REQUIRED` keys: pydantic's own
        notion of required follows the Python defaults, and the check must hold where the class
        is nested too (a registry's site entries), not only where `from_json` is called."""
        schema = handler(source)
        required = cls.JSON_REQUIRED
        if not required:
            return schema

        def require(value: Any) -> Any:
            if isinstance(value, Mapping):
                for key in required:
                    if key not in value:
                        raise PydanticCustomError("json_required", "missing {key}", {"key": repr(key)})
            return value

        return core_schema.no_info_before_validator_function(require, schema)


def describe(exc: ValidationError) -> str:
    """pydantic's first error as one line naming the field (`citations[0].page`).

    Of a union's errors (a sentence is a pair or a triple) the deepest is the one that says what is
    wrong with the branch the value was meant for."""
    errors = exc.errors(include_url=False)
    error = max(errors, key=lambda e: len(e["loc"]))
    path = _path(error["loc"])
    kind, message = error["type"], error["msg"]
    if kind == "missing":
        return f"missing {path!r}"
    if kind in ("unexpected_keyword_argument", "extra_forbidden"):
        extra = sorted(_path(e["loc"]) for e in errors if e["type"] == kind)
        return f"unknown keys {extra}"
    if kind == "value_error":
        message = message.removeprefix("Value error, ")
    elif kind.endswith("_type"):
        # what a decoded JSON body holds is a list, not the tuple it becomes
        message = message.replace("a valid tuple", "an array").replace("a valid dictionary", "an object")
        return f"{path!r} has the wrong type ({message[0].lower() + message[1:]})"
    return f"{path!r}: {message[0].lower() + message[1:]}" if path else message


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "[" in part or part.startswith("constrained-"):
            continue  # a union branch's name, not a key
        else:
            out += f".{part}" if out else part
    return out


def json_schemas(classes: list[type], ref_template: str) -> dict[str, dict[str, Any]]:
    """The JSON Schema of each class (and of the classes it nests: list those too, to describe
    them), keyed by class name, with references as `ref_template` spells them: what an OpenAPI
    document's components carry.

    Titles are dropped and a class's docstring is not its description (docstrings say why, for
    readers of the code); `API_DESCRIPTION` is, where set. `JSON_REQUIRED` keys are required."""
    out: dict[str, dict[str, Any]] = {}
    for cls in classes:
        schema = adapter(cls).json_schema(by_alias=True, ref_template=ref_template)
        for name, sub in {**schema.pop("$defs", {}), cls.__name__: schema}.items():
            out[name] = _tidy(sub)
    for schema in out.values():
        schema.pop("description", None)
    for cls in classes:
        schema = out[cls.__name__]
        description = getattr(cls, "API_DESCRIPTION", "")
        if description:
            schema["description"] = description
        extra = [key for key in schema["properties"] if key in getattr(cls, "JSON_REQUIRED", ())]
        schema["required"] = [key for key in schema["properties"] if key in {*schema.get("required", ()), *extra}]
    return out


def type_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of a named field type (`SiteId`), for a component that is not a class."""
    return _tidy(TypeAdapter(tp).json_schema())


def _tidy(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_tidy(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        out[key] = {name: _tidy(sub) for name, sub in value.items()} if key == "properties" else _tidy(value)
    return out
