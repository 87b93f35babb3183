"""Replay nonces shared by every worker process of a service (RFC 9421 request verification).

Why: `httpsig.NonceCache` lives in one process's memory, so with several workers a request
accepted by one could be replayed to another. `SharedNonceCache` keeps the nonces in the service's
shared state file (hansa.core.shared_state, SQLite WAL) behind the same interface, `use(key,
until, now)`, with the same guarantees: a nonce is kept until its signature expires, a replay is
refused with `SignatureRefused(REPLAYED)`, and when `capacity` nonces are live the cache refuses
with `ReplayCacheFull` (503) rather than forget one (fail closed).
"""
from __future__ import annotations

from hansa.core.shared_state import ClaimsFull, Replayed, SharedState
from hansa.sync.httpsig import NONCE_CACHE_CAPACITY, REPLAYED, ReplayCacheFull, SignatureRefused


class SharedNonceCache:
    """A drop-in for `httpsig.NonceCache` (`verify_request(..., nonces=...)`) across processes."""

    def __init__(self, state: SharedState, namespace: str = "nonces", capacity: int = NONCE_CACHE_CAPACITY) -> None:
        self.state = state
        self.namespace = namespace
        self.capacity = capacity

    def use(self, key: str, until: float, now: float) -> None:
        """Record `key` as used until `until`; refuse it if any worker used it before."""
        try:
            self.state.claim_once(self.namespace, key, until, now, self.capacity)
        except Replayed:
            raise SignatureRefused(REPLAYED, "this signed request was already received (nonce replayed)") from None
        except ClaimsFull:
            raise ReplayCacheFull("too many signed requests in flight to check for replays; retry shortly") from None

    def __len__(self) -> int:
        return self.state.live_claims(self.namespace)
