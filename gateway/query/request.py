"""Stage 0, the request: what a client may ask, validated once for HTTP and in-process callers.

Contract: a `QueryRequest` that exists is valid (its constructor checks every field), so later
stages never re-check. `QueryRequest` is a model of core/model.py: `from_json` is the HTTP shape (unknown keys
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
from typing import Annotated, Any, ClassVar, Collection, Mapping, Sequence

from pydantic import AfterValidator, Field, StrictStr

from hansa.core.errors import InputError, NotFoundError, VerificationError
from hansa.core.model import FORBID, Wire, int_in, json_int, omitted_when_none
from hansa.core.text import fold
from hansa.core.text import content_words  # the sites' own notion of a content word
from hansa.gateway.trust.registry import REVOKED, SiteRecord
from hansa.sync.wire import MAX_QUESTION_CHARS, NOT_BLANK_RE, RetrieveRequest, SiteId, validate_site_id


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


def _text_value(value: str) -> str:
    if len(value) > MAX_QUESTION_CHARS or not NOT_BLANK_RE.search(value):
        raise ValueError(f"must have 1-{MAX_QUESTION_CHARS} characters, not all whitespace")
    try:
        value.encode("utf-8")  # a lone surrogate escape ("\ud800") parses, then breaks the tokenizer
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode (it holds a lone surrogate escape)") from None
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"query: {what} must be a string")
    try:
        return _text_value(value)
    except ValueError as exc:
        raise InputError(f"query: {what} {exc}") from None


# A question or an earlier turn as the client wrote it (unlike sync.wire.Question, not stripped:
# the trace shows what was asked). The OpenAPI component `Question`.
QueryText = Annotated[StrictStr, AfterValidator(_text_value), Field(
    min_length=1, max_length=MAX_QUESTION_CHARS,
    description=f"At most {MAX_QUESTION_CHARS} characters, at least one of them not whitespace",
    json_schema_extra={"pattern": NOT_BLANK_RE.pattern})]


def _bounded_int(value: Any, what: str, high: int) -> int:
    value = json_int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InputError(f"query: {what} must be an integer in 1..{high}, got {value!r}")
    return value


def _limit(high: int) -> Any:
    """An optional positive integer up to `high`, left out of the JSON while None."""
    return Annotated[int_in(1, high) | None, omitted_when_none()]


@dataclass(frozen=True)
class Budget(Wire):
    """What one query may spend; None: no limit beyond the gateway's own (site timeout, caps)."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "query: budget"
    API_DESCRIPTION: ClassVar[str] = "What one query may spend; an absent key: no limit beyond the gateway's own"

    time_ms: Annotated[_limit(BUDGET_LIMITS["time_ms"]), Field(description="Wall time of the whole query")] = None
    sites: Annotated[_limit(BUDGET_LIMITS["sites"]), Field(description="Sites called, over all rounds")] = None
    bytes: Annotated[_limit(BUDGET_LIMITS["bytes"]), Field(
        description="Request and response bytes exchanged with sites")] = None
    tokens: Annotated[_limit(BUDGET_LIMITS["tokens"]), Field(description="LLM tokens (none are spent without an LLM)")] = None

    def __post_init__(self) -> None:
        for name, high in BUDGET_LIMITS.items():
            value = getattr(self, name)
            if value is not None:
                _bounded_int(value, f"budget.{name}", high)


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


def _no_budget(budget: Budget) -> bool:
    return budget == Budget()


def _empty(value: tuple[str, ...]) -> bool:
    return not value


@dataclass(frozen=True)
class QueryRequest(Wire):
    """The body of POST /v1/query (`from_json`, after the strict JSON loader) and what the CLI
    sends (`to_json`): absent keys are left out, not written as null."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "query"

    question: QueryText
    conversation: Annotated[tuple[QueryText, ...], Field(
        max_length=MAX_CONVERSATION_TURNS, exclude_if=_empty,
        description="The user's earlier turns, oldest first")] = ()
    origin: Annotated[SiteId | None, omitted_when_none(), Field(
        description="The site of the user's own organization: asked first (DGRAG's gate)")] = None
    budget: Annotated[Budget, Field(exclude_if=_no_budget)] = field(default_factory=Budget)
    top_k_sites: Annotated[_limit(MAX_TOP_K_SITES), Field(
        description="How many routed sites to ask (default: the gateway's top_k_sites)")] = None
    top_k: Annotated[_limit(MAX_TOP_K), Field(description="Evidence items each site returns (default 10)")] = None
    # at least one: the check is __post_init__'s, whose refusal says what to do instead
    sites: Annotated[Annotated[tuple[SiteId, ...], Field(
        max_length=MAX_EXPLICIT_SITES, json_schema_extra={"minItems": 1})] | None, omitted_when_none(), Field(
        description="Ask exactly these sites instead of routing (at least one: an empty list is 400; "
                    "leave it out to route)")] = None

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
