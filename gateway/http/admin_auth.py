"""Who may see the admin page: the holder of `[gateway] admin_key`, and nobody else.

Why a key of its own: client API keys (hansa.gateway.trust.apikeys) let a front end ask questions; the
admin page shows every client's questions and every site's state, which no query client should
read. So the admin key is a separate secret, set in the configuration (better: the environment,
HANSA_GATEWAY_ADMIN_KEY), never shaped like a client key, and compared in constant time (digests
of equal length, `hmac.compare_digest`).

How it travels — never in a URL, so never in an access log:
- scripts send `Authorization: Bearer <admin key>`;
- a browser posts the key once through the login form and gets a session cookie: the key's own
  signature over the login time (itsdangerous, the signer Flask itself uses), HttpOnly,
  SameSite=Strict, Secure over HTTPS, scoped to /admin, valid `SESSION_TTL_S`. Nothing is stored
  server-side, so every worker accepts it, and changing the admin key ends every session.

A session's age is read from an injected clock (the real UTC clock by default), so a test ages a
session by moving its own clock rather than the whole process's.
"""
from __future__ import annotations

import hashlib
import hmac

from itsdangerous import BadSignature, TimestampSigner, URLSafeTimedSerializer

from hansa.core.errors import ConfigError, HansaError
from hansa.gateway.trust.apikeys import KEY_PREFIX
from hansa.gateway.trust.registry import Clock, utc_now

MIN_ADMIN_KEY_CHARS = 24
SESSION_COOKIE = "hansa_admin"
SESSION_TTL_S = 8 * 3600
# Login attempts per client address (every worker's, with shared state): guessing a random key is
# hopeless anyway, but a passphrase chosen by a person should not meet an unlimited guesser.
LOGIN_BURST = 10
LOGIN_REFILL_PER_S = 1 / 30
_SESSION_SALT = "hansa-admin-session/v1"
_SESSION_SUBJECT = "admin"


class AdminUnauthenticated(HansaError):
    """No admin credential, or a wrong one: send `Authorization: Bearer <admin key>` or log in."""

    http_status = 401
    http_headers = {"WWW-Authenticate": 'Bearer realm="hansa-admin"'}


def _signer(clock: Clock) -> type[TimestampSigner]:
    """itsdangerous's timestamp signer, reading the time from `clock`."""

    class ClockedSigner(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(clock().timestamp())

    return ClockedSigner


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class AdminKey:
    """The configured admin key: checks a presented key, a bearer header, and session cookies."""

    def __init__(self, key: str, clock: Clock = utc_now) -> None:
        if len(key) < MIN_ADMIN_KEY_CHARS:
            raise ConfigError(f"[gateway] admin_key must have at least {MIN_ADMIN_KEY_CHARS} characters "
                              "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
        if key.startswith(KEY_PREFIX):
            raise ConfigError("[gateway] admin_key must not be a client API key (hansa_...): use a secret of its own")
        self._digest = _digest(key)
        self._sessions = URLSafeTimedSerializer(key, salt=_SESSION_SALT, signer=_signer(clock))

    def matches(self, presented: str | None) -> bool:
        """Constant-time: equal-length digests, so neither content nor length leaks through timing."""
        return presented is not None and hmac.compare_digest(_digest(presented), self._digest)

    def bearer_matches(self, authorization: str | None) -> bool:
        scheme, _, credential = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and self.matches(credential.strip())

    def new_session(self) -> str:
        return self._sessions.dumps(_SESSION_SUBJECT)

    def session_valid(self, token: str | None) -> bool:
        if not token:
            return False
        try:
            return self._sessions.loads(token, max_age=SESSION_TTL_S) == _SESSION_SUBJECT
        except BadSignature:  # includes SignatureExpired
            return False
