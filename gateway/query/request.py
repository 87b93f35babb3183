"""Stage 0, the request: what a client may ask, validated once for HTTP and in-process callers.

Contract: a `QueryRequest` that exists is valid (its constructor checks every field), so later
stages never re-check. `QueryRequest.from_json` is the HTTP shape (strict JSON object, unknown keys
refused); `authorize_origin` is the part that needs the registry and the client's key:
unknown origin -> 404, revoked origin -> 403, an origin the client's API key may not speak for
-> 403. Every refusal is an InputError (400) or another HansaError with its own status, never a 500.

Fields (all but `question` optional):
  question      1-4000 characters, not all whitespace, valid Unicode.
  conversation  the user's earlier turns, oldest first (at most MAX_CONVERSATION_TURNS, each a
                question-sized string): their salient words make a follow-up standalone for
                routing and retrieval (`standalone_question`, below).
  origin        the site of the organization the user belongs to (DGRAG: asked first, then the gate
                decides whether to escalate).
  budget        {time_ms, sites, bytes, tokens}, each a positive integer below a sane ceiling:
                time_ms bounds the whole query's wall time, sites the number of sites called,
                bytes the request+response bytes exchanged with sites, tokens LLM tokens (none are
                spent without an LLM). 0, negatives or absurd values are refused (400).
  top_k_sites   at most this many routed sites (default: [gateway] top_k_sites).
  top_k         evidence items per site (default: the site's).
  sites         call exactly these enrolled, non-revoked sites instead of routing (baselines; at least one);
                a budget of fewer sites calls the first of them.

A follow-up turn as a standalone question (`standalone_question`):

Why: MTRAG's questions are later turns of conversations ("what about the second one?"), and a last
turn alone often names nothing a site's summaries could match. Routing and retrieval need the topic,
which the earlier turns carry.

How, and why this way: the question keeps its own words and gains up to `carry_words` salient
content words of the user's earlier turns (hansa.core.text.content_words: the retrieval's own
notion of a meaningful word), each word scored by the decayed weight of the turns it appears in
(`decay` ** turns back, summed), ties to the more recent turn. A text rewrite, not a vector mix, so
the same standalone question serves the router (embedded once) and the sites' retrieval requests
(their own lexical and vector search), and shows in the trace. With an LLM, a rewritten question
would read better; it would also cost a model call before routing, on every turn.

Contract: `standalone_question(question, conversation, carry_words, decay) -> str`; the question is
returned unchanged without earlier turns or with `carry_words` 0; the result never exceeds what a
site accepts (MAX_QUESTION_CHARS). `[gateway] conversation_carry_words` / `conversation_decay` are
the defaults; `hansa eval --dataset mtrag --conversation` measures them (benchmarks/).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Sequence

from hansa.core.errors import InputError, NotFoundError, VerificationError
from hansa.core.model import json_int
from hansa.core.text import fold
from hansa.core.text import content_words  # the sites' own notion of a content word
from hansa.gateway.trust.registry import REVOKED, SiteRecord
from hansa.sync.wire import MAX_QUESTION_CHARS, NOT_BLANK_RE, RetrieveRequest, validate_site_id


def carried_words(question: str, conversation: Sequence[str], carry_words: int, decay: float) -> list[str]:
    """The earlier turns' salient words the question lacks, best first."""
    if carry_words <= 0 or not conversation:
        return []
    have = content_words(question)
    score: dict[str, float] = {}  # insertion order: most recent turn first, which breaks ties
    for back, turn in enumerate(reversed(conversation)):
        weight = decay ** back
        for word in dict.fromkeys(fold(turn).split()):
            folded = content_words(word)
            if len(folded) != 1:
                continue
            key = next(iter(folded))
            if key not in have:
                score[key] = score.get(key, 0.0) + weight
    ranked = sorted(score, key=lambda w: -score[w])  # stable: equal scores keep recency order
    return ranked[:carry_words]


def standalone_question(question: str, conversation: Sequence[str], carry_words: int, decay: float) -> str:
    words = carried_words(question, conversation, carry_words, decay)
    if not words:
        return question
    return f"{question} {' '.join(words)}"[:MAX_QUESTION_CHARS].strip()


MAX_TOP_K_SITES = 32
MAX_EXPLICIT_SITES = 64
MAX_TOP_K = 100  # evidence items per site, as RetrieveRequest allows
MAX_CONVERSATION_TURNS = 16
# Budget ceilings: far above any sane query, low enough that arithmetic on them stays exact.
BUDGET_LIMITS: Mapping[str, int] = {
    "time_ms": 10 * 60 * 1000,
    "sites": MAX_EXPLICIT_SITES,
    "bytes": 256 * 1024 * 1024,
    "tokens": 10_000_000,
}
QUERY_KEYS = frozenset({"question", "conversation", "origin", "budget", "top_k_sites", "top_k", "sites"})


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"query: {what} must be a string")
    if len(value) > MAX_QUESTION_CHARS or not NOT_BLANK_RE.search(value):
        raise InputError(f"query: {what} must have 1-{MAX_QUESTION_CHARS} characters, not all whitespace")
    try:
        value.encode("utf-8")  # a lone surrogate escape ("\ud800") parses, then breaks the tokenizer
    except UnicodeEncodeError as exc:
        raise InputError(f"query: {what} is not valid Unicode (it holds a lone surrogate escape)") from exc
    return value


def _bounded_int(value: Any, what: str, high: int) -> int:
    value = json_int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InputError(f"query: {what} must be an integer in 1..{high}, got {value!r}")
    return value


@dataclass(frozen=True)
class Budget:
    """What one query may spend; None: no limit beyond the gateway's own (site timeout, caps)."""

    time_ms: int | None = None
    sites: int | None = None
    bytes: int | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        for name, high in BUDGET_LIMITS.items():
            value = getattr(self, name)
            if value is not None:
                _bounded_int(value, f"budget.{name}", high)

    @classmethod
    def from_json(cls, obj: Any) -> "Budget":
        if not isinstance(obj, dict):
            raise InputError(f"query: 'budget' must be an object with keys among {sorted(BUDGET_LIMITS)}")
        extra = set(obj) - set(BUDGET_LIMITS)
        if extra:
            raise InputError(f"query: unknown budget keys {sorted(extra)}; allowed: {sorted(BUDGET_LIMITS)}")
        return cls(**{k: json_int(v) for k, v in obj.items()})

    def to_json(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in BUDGET_LIMITS if getattr(self, k) is not None}


def _explicit_sites(sites: Any) -> tuple[str, ...]:
    """The sites a client named, each once, in its order."""
    if not isinstance(sites, tuple) or len(sites) > MAX_EXPLICIT_SITES:
        raise InputError(f"query: 'sites' must be a list of at most {MAX_EXPLICIT_SITES} site ids")
    if not sites:  # it would call nobody and answer as if the federation knew nothing
        raise InputError("query: 'sites' is empty, so no site would be asked: name at least one "
                         "site, or leave 'sites' out to let the gateway route the question")
    for site_id in sites:
        validate_site_id(site_id)
    return tuple(dict.fromkeys(sites))


@dataclass(frozen=True)
class QueryRequest:
    question: str
    conversation: tuple[str, ...] = ()
    origin: str | None = None
    budget: Budget = field(default_factory=Budget)
    top_k_sites: int | None = None
    top_k: int | None = None
    sites: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("conversation", "sites"):  # lists are welcome; the request keeps tuples (frozen)
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        _text(self.question, "'question'")
        if not isinstance(self.conversation, tuple) or len(self.conversation) > MAX_CONVERSATION_TURNS:
            raise InputError(f"query: 'conversation' must be a list of at most {MAX_CONVERSATION_TURNS} earlier turns")
        for i, turn in enumerate(self.conversation):
            _text(turn, f"conversation[{i}]")
        if self.origin is not None:
            validate_site_id(self.origin)
        if not isinstance(self.budget, Budget):
            raise InputError("query: 'budget' must be a Budget")
        if self.top_k_sites is not None:
            _bounded_int(self.top_k_sites, "'top_k_sites'", MAX_TOP_K_SITES)
        if self.top_k is not None:
            _bounded_int(self.top_k, "'top_k'", MAX_TOP_K)
        if self.sites is not None:
            object.__setattr__(self, "sites", _explicit_sites(self.sites))

    @classmethod
    def from_json(cls, obj: Any) -> "QueryRequest":
        """The body of POST /v1/query (already through the strict JSON loader)."""
        if not isinstance(obj, dict):
            raise InputError('query: send a JSON object like {"question": "..."}')
        extra = set(obj) - QUERY_KEYS
        if extra:
            raise InputError(f"query: unknown keys {sorted(extra)}; allowed: {sorted(QUERY_KEYS)}")
        conversation = obj.get("conversation", [])
        if not isinstance(conversation, list):
            raise InputError("query: 'conversation' must be a list of earlier user turns (strings)")
        sites = obj.get("sites")
        if sites is not None and not isinstance(sites, list):
            raise InputError(f"query: 'sites' must be a list of at most {MAX_EXPLICIT_SITES} site ids")
        origin = obj.get("origin")
        if origin is not None and not isinstance(origin, str):
            raise InputError("query: 'origin' must be a site id (a string)")
        return cls(
            question=obj.get("question"),  # type: ignore[arg-type]  # checked in __post_init__
            conversation=tuple(conversation),
            origin=origin,
            budget=Budget.from_json(obj["budget"]) if "budget" in obj else Budget(),
            top_k_sites=json_int(obj["top_k_sites"]) if "top_k_sites" in obj else None,
            top_k=json_int(obj["top_k"]) if "top_k" in obj else None,
            sites=tuple(sites) if sites is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"question": self.question}
        if self.conversation:
            out["conversation"] = list(self.conversation)
        for key in ("origin", "top_k_sites", "top_k"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.budget.to_json():
            out["budget"] = self.budget.to_json()
        if self.sites is not None:
            out["sites"] = list(self.sites)
        return out

    def retrieve_request(self, mode: str = "local") -> RetrieveRequest:
        """What each site is asked (the question; the site's default top_k unless given)."""
        wire: dict[str, Any] = {"question": self.question, "mode": mode}
        if self.top_k is not None:
            wire["top_k"] = self.top_k
        return RetrieveRequest.from_json(wire)

    def fan_out(self, default_sites: int) -> int:
        """The most sites this request may call: what a rate limiter charges (at least one)."""
        n = len(self.sites) if self.sites is not None else (self.top_k_sites or default_sites)
        if self.origin is not None and self.sites is None:
            n += 1  # the origin is asked besides the routed sites
        if self.budget.sites is not None:
            n = min(n, self.budget.sites)
        return max(1, n)


def check_sites(site_ids: Collection[str], records: Mapping[str, SiteRecord]) -> None:
    """Named sites must be enrolled (404) and not revoked (403); an expired publication only
    affects routing."""
    for site_id in site_ids:
        rec = records.get(site_id)
        if rec is None:
            raise NotFoundError(f"query: site {site_id!r} is not enrolled")
        if rec.status == REVOKED:
            raise VerificationError(f"query: site {site_id!r} is revoked")


def authorize_origin(request: QueryRequest, records: Mapping[str, SiteRecord],
                     allowed_origins: Collection[str] | None) -> None:
    """The origin must be enrolled (404), not revoked (403), and one the client's API key may speak
    for (403; `allowed_origins` None: the key is not limited to origins)."""
    origin = request.origin
    if origin is None:
        return
    rec = records.get(origin)
    if rec is None:
        raise NotFoundError(f"query: origin {origin!r} is not an enrolled site")
    if rec.status == REVOKED:
        raise VerificationError(f"query: origin {origin!r} is revoked; its answers are refused")
    if allowed_origins is not None and origin not in allowed_origins:
        raise VerificationError(f"query: this API key may not speak for origin {origin!r}")
