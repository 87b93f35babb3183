"""The site's durable outbox: a signed publication is written to disk first, then delivered.

Why: between signing a publication and the gateway's answer, anything can fail — the gateway is
down or overloaded (5xx, 429), the connection drops, the site process dies. The publication is
written to `<home>/outbox/<sequence>.json` (atomically) *before* the first attempt, so a crash
leaves it there and the next `hansa site publish` resends those exact bytes — never a re-signed
copy under a new sequence, unless the gateway says the set it builds on has changed. An entry
leaves the outbox when the gateway accepted it, or refused it for good.

Delivery retries what can succeed later (no answer, a timeout, 5xx, 429) a bounded number of
times per run, with exponential backoff and full jitter ("AWS Architecture Blog: Exponential
Backoff and Jitter"), honouring a `Retry-After` up to the cap; it never follows a redirect
(a publication goes to the configured gateway or nowhere) and reads at most 1 MiB of an answer.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import requests

from hansa.core.errors import BackendError, ConfigError, InputError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.core.logs import get_logger
from hansa.core.files import write_bytes_atomic

log = get_logger(__name__)

OUTBOX_DIRNAME = "outbox"
ENTRY_FORMAT = 1
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0  # the gateway verifies and indexes the set before it answers
MAX_RESPONSE_BYTES = 1024 * 1024
RETRYABLE = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts per delivery (per run) and the backoff between them: full jitter,
    uniform(0, min(max_delay_s, base_delay_s * 2**n)) before attempt n + 1."""

    attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ConfigError("retry policy: attempts must be >= 1 and delays >= 0")

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** attempt)
        wait = rng.uniform(0, ceiling)
        if retry_after is not None:  # the server knows better when it will have room, up to our cap
            wait = max(wait, min(retry_after, self.max_delay_s))
        return wait


@dataclass(frozen=True)
class Answer:
    """The gateway's final answer to one delivery (after retries): status and JSON body."""

    status: int
    body: dict[str, Any]

    @property
    def accepted(self) -> bool:
        return 200 <= self.status < 300


@dataclass(frozen=True)
class OutboxEntry:
    """One publication waiting for its answer, with what the site commits once it is accepted."""

    path: Path
    sequence: int
    url: str
    envelope: Mapping[str, Any]
    expires: str  # of the publication: once past, resending is pointless
    manifest_sha256: str
    commit: Mapping[str, Any]  # the site's publish state after acceptance (plugin.publish)

    def body(self) -> bytes:
        return dumps(self.envelope)


class Outbox:
    """The `<home>/outbox/` folder: one JSON file per pending publication, oldest first."""

    def __init__(self, home: Path) -> None:
        self.folder = Path(home) / OUTBOX_DIRNAME

    def _path(self, sequence: int) -> Path:
        return self.folder / f"{sequence:020d}.json"

    def put(self, sequence: int, url: str, envelope: Mapping[str, Any], expires: str, manifest_sha256: str,
            commit: Mapping[str, Any]) -> OutboxEntry:
        path = self._path(sequence)
        write_bytes_atomic(path, dumps({
            "format": ENTRY_FORMAT, "sequence": sequence, "url": url, "envelope": dict(envelope),
            "expires": expires, "manifest_sha256": manifest_sha256, "commit": dict(commit),
        }))
        return OutboxEntry(path, sequence, url, envelope, expires, manifest_sha256, commit)

    def pending(self) -> list[OutboxEntry]:
        """Entries by sequence; a damaged file is a ConfigError naming it (never silently lost)."""
        if not self.folder.is_dir():
            return []
        return list(self._read_all())

    def _read_all(self) -> Iterator[OutboxEntry]:
        for path in sorted(self.folder.glob("*.json")):
            try:
                obj = loads_strict(path.read_bytes())
                if not isinstance(obj, dict) or obj.get("format") != ENTRY_FORMAT:
                    raise InputError("not a hansa outbox entry")
                yield OutboxEntry(path, int(obj["sequence"]), str(obj["url"]), dict(obj["envelope"]),
                                  str(obj["expires"]), str(obj["manifest_sha256"]), dict(obj["commit"]))
            except (InputError, KeyError, TypeError, ValueError, OSError) as exc:
                raise ConfigError(
                    f"outbox entry {path} is damaged ({exc}): move it aside and publish again "
                    "(the next publication then carries the whole set)"
                ) from exc

    def remove(self, entry: OutboxEntry) -> None:
        entry.path.unlink(missing_ok=True)


def _read_answer(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_RESPONSE_BYTES:
        return {"error": f"gateway response larger than {MAX_RESPONSE_BYTES} bytes (ignored)"}
    try:
        value = loads_strict(raw) if raw else {}
    except InputError:
        return {"error": raw[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"response": value}


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:  # an HTTP date: not worth parsing for a bounded wait
        return None


def post_once(url: str, body: bytes) -> tuple[int, dict[str, Any], Mapping[str, str]]:
    """One POST without redirects; BackendError when no HTTP answer came back."""
    try:
        with requests.post(
            url,
            data=body,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
            allow_redirects=False,
            stream=True,
        ) as resp:
            raw = resp.raw.read(MAX_RESPONSE_BYTES + 1, decode_content=True)
            return resp.status_code, _read_answer(raw), dict(resp.headers)
    except requests.RequestException as exc:
        raise BackendError(f"could not reach the gateway at {url}: {exc}") from exc


def deliver(
    url: str,
    body: bytes,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> Answer:
    """POST `body` until the gateway gives a final answer or the attempts run out.

    Returns the final answer (2xx, or a refusal the caller interprets); raises BackendError when
    every attempt failed transiently, and at once for a redirect (never followed)."""
    rng = rng or random.Random()
    last = ""
    for attempt in range(policy.attempts):
        retry_after = None
        try:
            status, answer, headers = post_once(url, body)
        except BackendError as exc:
            last = str(exc)
        else:
            if 300 <= status < 400:
                raise BackendError(
                    f"the gateway answered {status} with a redirect to {headers.get('Location', '')!r}; "
                    "publications are never sent on to another address: configure the gateway's final URL"
                )
            if status not in RETRYABLE:
                return Answer(status, answer)
            last = f"HTTP {status}: {answer.get('error') or 'no detail'}"
            retry_after = _retry_after(headers.get("Retry-After"))
        if attempt + 1 < policy.attempts:
            wait = policy.delay(attempt, rng, retry_after)
            log.info("outbox.retry", url=url, attempt=attempt + 1, of=policy.attempts, wait_s=round(wait, 3), why=last)
            sleep(wait)
    raise BackendError(f"delivery to {url} failed {policy.attempts} time(s); last: {last}")
