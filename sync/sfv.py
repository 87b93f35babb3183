"""Structured Field Values for HTTP (RFC 8941): the dictionaries, inner lists and items that
`Signature-Input`, `Signature` and `Content-Digest` are made of.

Why our own and strict: a signature base contains the *serialized* signature parameters, so the
signer and the verifier must serialize the same parsed value to the same bytes; one small parser
and serializer used by both sides guarantees that. Parsing follows RFC 8941 §4.2 with two
deliberate refusals where the RFC lets a later value win: a duplicate dictionary key or a
duplicate parameter is an error (two `sig1=` members must never mean "whichever came last").
Byte sequences must be canonical padded base64. RFC 9651's Dates and Display Strings are not
RFC 8941 (which RFC 9421 builds on) and are refused.

Why not `http-sf` (or the inactive `http-sfv`): docs/decisions/0001-http-message-signatures.md.
hansa needs the two refusals above, which the libraries do not make by default, and only Items and
Dictionaries; tests/sync/test_sfv_interop.py runs this parser through the official
structured-field test suite and against both libraries (it found one bug here: a tab between
dictionary members, which is valid, was refused).
"""
from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Mapping, Union

from hansa.core.errors import InputError


class Token(str):
    """An sf-token (e.g. `*`, `text/html`), distinct from an sf-string when serialized."""


BareItem = Union[bool, int, Decimal, str, Token, bytes]
Params = dict[str, BareItem]


@dataclass(frozen=True)
class Item:
    value: BareItem
    params: Params = field(default_factory=dict)


@dataclass(frozen=True)
class InnerList:
    items: tuple[Item, ...]
    params: Params = field(default_factory=dict)


Member = Union[Item, InnerList]

MAX_INTEGER = 999_999_999_999_999
MAX_FIELD_CHARS = 16 * 1024  # our fields are a few hundred bytes; anything this big is abuse
_KEY_FIRST = set("abcdefghijklmnopqrstuvwxyz*")
_KEY_REST = _KEY_FIRST | set("0123456789_-.")
_TCHAR = set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_TOKEN_FIRST = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ*")
_TOKEN_REST = _TCHAR | set(":/")
_B64 = re.compile(r"[A-Za-z0-9+/=]*")
_STRING = re.compile(r'"((?:[ !#-\[\]-~]|\\["\\])*)"')  # the common case in one step; errors by the loop
_ESCAPE = re.compile(r"\\(.)")
_KEY = re.compile(r"[a-z*][a-z0-9_\-.*]*")


class SFError(InputError):
    """A header that is not a valid structured field (RFC 8941)."""


# -- parsing -------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str, what: str) -> None:
        if not isinstance(text, str):
            raise SFError(f"{what}: expected a string")
        if len(text) > MAX_FIELD_CHARS:
            raise SFError(f"{what}: longer than {MAX_FIELD_CHARS} characters")
        if not (text.isascii() and text.replace("\t", " ").isprintable()):  # SP..~ and HTAB only
            raise SFError(f"{what}: only visible ASCII, spaces and tabs are allowed in a structured field")
        self.s = text.strip(" ")
        self.i = 0
        self.what = what

    def fail(self, message: str) -> SFError:
        return SFError(f"{self.what}: {message} at offset {self.i} (RFC 8941)")

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip(self, chars: str) -> None:
        while self.i < len(self.s) and self.s[self.i] in chars:
            self.i += 1

    def dictionary(self) -> dict[str, Member]:
        out: dict[str, Member] = {}
        while self.i < len(self.s):
            key = self.key()
            if key in out:
                raise self.fail(f"duplicate dictionary key {key!r}")
            if self.peek() == "=":
                self.i += 1
                out[key] = self.item_or_inner_list()
            else:
                out[key] = Item(True, self.parameters())
            self.skip(" \t")
            if self.i >= len(self.s):
                return out
            if self.peek() != ",":
                raise self.fail("expected ',' between dictionary members")
            self.i += 1
            self.skip(" \t")
            if self.i >= len(self.s):
                raise self.fail("trailing comma")
        return out

    def item_or_inner_list(self) -> Member:
        if self.peek() == "(":
            return self.inner_list()
        return self.item()

    def inner_list(self) -> InnerList:
        self.i += 1  # "("
        items: list[Item] = []
        while self.i < len(self.s):
            self.skip(" ")
            if self.peek() == ")":
                self.i += 1
                return InnerList(tuple(items), self.parameters())
            items.append(self.item())
            if self.peek() not in (" ", ")"):
                raise self.fail("expected ' ' or ')' in an inner list")
        raise self.fail("unterminated inner list")

    def item(self) -> Item:
        value = self.bare_item()
        return Item(value, self.parameters())

    def parameters(self) -> Params:
        params: Params = {}
        while self.peek() == ";":
            self.i += 1
            self.skip(" ")
            key = self.key()
            if key in params:
                raise self.fail(f"duplicate parameter {key!r}")
            value: BareItem = True
            if self.peek() == "=":
                self.i += 1
                value = self.bare_item()
            params[key] = value
        return params

    def key(self) -> str:
        match = _KEY.match(self.s, self.i)
        if not match:
            raise self.fail("a key must start with a lowercase letter or '*'")
        self.i = match.end()
        return match.group()

    def bare_item(self) -> BareItem:
        ch = self.peek()
        if ch == "-" or ch.isdigit():
            return self.number()
        if ch == '"':
            return self.string()
        if ch and ch in _TOKEN_FIRST:
            return self.token()
        if ch == ":":
            return self.byte_sequence()
        if ch == "?":
            return self.boolean()
        raise self.fail("expected an item")

    def number(self) -> int | Decimal:
        start = self.i
        if self.peek() == "-":
            self.i += 1
        if not self.peek().isdigit():
            raise self.fail("expected a digit")
        is_decimal = False
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch.isdigit():
                self.i += 1
            elif ch == "." and not is_decimal:
                if self.i - start > 12 + (self.s[start] == "-"):
                    raise self.fail("decimal with more than 12 integer digits")
                is_decimal = True
                self.i += 1
            else:
                break
            if (not is_decimal and self.i - start > 15 + (self.s[start] == "-")) or (
                is_decimal and self.i - start > 16 + (self.s[start] == "-")
            ):
                raise self.fail("number too long")
        text = self.s[start:self.i]
        if not is_decimal:
            return int(text)
        if text.endswith(".") or len(text.split(".", 1)[1]) > 3:
            raise self.fail("a decimal needs 1 to 3 fractional digits")
        return Decimal(text)

    def string(self) -> str:
        match = _STRING.match(self.s, self.i)
        if match:
            self.i = match.end()
            text = match.group(1)
            return _ESCAPE.sub(r"\1", text) if "\\" in text else text
        self.i += 1  # opening quote
        out: list[str] = []
        while self.i < len(self.s):
            ch = self.s[self.i]
            self.i += 1
            if ch == "\\":
                if self.i >= len(self.s) or self.s[self.i] not in '"\\':
                    raise self.fail("only \\\" and \\\\ are escapes in a string")
                out.append(self.s[self.i])
                self.i += 1
            elif ch == '"':
                return "".join(out)
            elif ch == "\t":  # let through above only as whitespace between dictionary members
                raise self.fail("a string holds visible ASCII and spaces only")
            else:
                out.append(ch)
        raise self.fail("unterminated string")

    def token(self) -> Token:
        start = self.i
        while self.i < len(self.s) and self.s[self.i] in _TOKEN_REST:
            self.i += 1
        return Token(self.s[start:self.i])

    def byte_sequence(self) -> bytes:
        end = self.s.find(":", self.i + 1)
        if end < 0:
            raise self.fail("unterminated byte sequence")
        text = self.s[self.i + 1:end]
        if not _B64.fullmatch(text):
            raise self.fail("a byte sequence holds standard base64 only")
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise self.fail(f"invalid base64 ({exc})") from exc
        if base64.b64encode(raw).decode("ascii") != text:
            raise self.fail("base64 is not canonical (padding or trailing bits)")
        self.i = end + 1
        return raw

    def boolean(self) -> bool:
        value = self.s[self.i + 1:self.i + 2]
        if value not in ("0", "1"):
            raise self.fail("a boolean is ?0 or ?1")
        self.i += 2
        return value == "1"


def parse_dictionary(text: str, what: str = "structured field") -> dict[str, Member]:
    """Parse an sf-dictionary; `what` names the header in error messages."""
    return _Parser(text, what).dictionary()


def parse_item(text: str, what: str = "structured field") -> Item:
    parser = _Parser(text, what)
    item = parser.item()
    if parser.i != len(parser.s):
        raise parser.fail("unexpected characters after the item")
    return item


# -- serialization -------------------------------------------------------------------------------
def serialize_bare_item(value: BareItem) -> str:
    if isinstance(value, bool):
        return "?1" if value else "?0"
    if isinstance(value, int):
        if abs(value) > MAX_INTEGER:
            raise SFError(f"integer {value} is out of range for a structured field")
        return str(value)
    if isinstance(value, Decimal):
        rounded = value.quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN)
        integer = abs(int(rounded))
        if integer >= 10**12:
            raise SFError(f"decimal {value} is out of range for a structured field")
        text = format(rounded, "f").rstrip("0")
        return text + "0" if text.endswith(".") else text
    if isinstance(value, Token):
        if not value or value[0] not in _TOKEN_FIRST or any(ch not in _TOKEN_REST for ch in value):
            raise SFError(f"{value!r} is not a valid token")
        return str(value)
    if isinstance(value, str):
        if any(not 0x20 <= ord(ch) <= 0x7E for ch in value):
            raise SFError("a structured-field string holds visible ASCII and spaces only")
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return ":" + base64.b64encode(value).decode("ascii") + ":"
    raise SFError(f"cannot serialize {type(value).__name__} as a structured-field item")


def _check_key(key: str) -> str:
    if not key or key[0] not in _KEY_FIRST or any(ch not in _KEY_REST for ch in key):
        raise SFError(f"{key!r} is not a valid structured-field key")
    return key


def serialize_params(params: Mapping[str, BareItem]) -> str:
    return "".join(
        f";{_check_key(k)}" if v is True else f";{_check_key(k)}={serialize_bare_item(v)}"
        for k, v in params.items()
    )


def serialize_item(item: Item) -> str:
    return serialize_bare_item(item.value) + serialize_params(item.params)


def serialize_inner_list(inner: InnerList) -> str:
    return "(" + " ".join(serialize_item(i) for i in inner.items) + ")" + serialize_params(inner.params)


def serialize_member(member: Member) -> str:
    if isinstance(member, InnerList):
        return serialize_inner_list(member)
    return serialize_item(member)


def serialize_dictionary(members: Mapping[str, Member]) -> str:
    parts = []
    for key, member in members.items():
        _check_key(key)
        if isinstance(member, Item) and member.value is True:
            parts.append(key + serialize_params(member.params))
        else:
            parts.append(f"{key}={serialize_member(member)}")
    return ", ".join(parts)
