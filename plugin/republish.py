"""A serving site keeps its publication fresh: `hansa site serve` re-publishes in the background.

Why: every publication expires (`[site] publication_ttl_hours`, 7 days by default) and the gateway
drops an expired site from routing, so a site nobody re-publishes silently leaves the federation;
and after `hansa site communities` rebuilt the summaries, the gateway routes on the old ones until
someone publishes. So while the site serves, a thread checks every `[site] republish_check_s`
seconds and publishes when
- no accepted publication is known (never published to this gateway),
- less than `[site] republish_remaining_share` of the TTL remains before the accepted one expires, or
- the current summaries differ from the set the gateway accepted last.
It publishes through `publish_summaries`, the path `hansa site publish` takes (durable outbox,
deltas, retries), so a publication it leaves pending is resent by the next attempt of either. A
failed attempt is logged and tried again at the next check; the thread stops with the server.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

from hansa.core.errors import ConfigError, HansaError
from hansa.core.logs import get_logger
from hansa.plugin.outbox import RetryPolicy
from hansa.plugin.publish import PublishResult, accepted_expiry, publish_summaries, summaries_changed
from hansa.plugin.site import SiteContext

log = get_logger(__name__)

# Fewer, shorter retries than an interactive publish: the next check is the retry.
BACKGROUND_RETRY = RetryPolicy(attempts=3, base_delay_s=0.5, max_delay_s=5.0)


@dataclass(frozen=True)
class RepublishPolicy:
    """When to re-publish: see the module docstring."""

    ttl: timedelta
    remaining_share: float = 0.5
    check_s: float = 60.0

    def __post_init__(self) -> None:
        if self.ttl <= timedelta(0):
            raise ConfigError("[site] publication_ttl_hours must be positive")
        if not 0.0 < self.remaining_share < 1.0:
            raise ConfigError(
                f"[site] republish_remaining_share must be between 0 and 1 (exclusive), got {self.remaining_share!r}"
            )
        if not self.check_s > 0:
            raise ConfigError(f"[site] republish_check_s must be positive, got {self.check_s!r}")

    @classmethod
    def from_config(cls, ctx: SiteContext) -> "RepublishPolicy":
        site = ctx.cfg.site
        return cls(ttl=timedelta(hours=site.publication_ttl_hours), remaining_share=site.republish_remaining_share,
                   check_s=site.republish_check_s)


def due(ctx: SiteContext, policy: RepublishPolicy, now: datetime) -> str | None:
    """Why the site should publish now ("unpublished", "expiring", "changed"), or None."""
    expires = accepted_expiry(ctx)
    if expires is None:
        return "unpublished"
    if expires - now < policy.ttl * policy.remaining_share:
        return "expiring"
    if summaries_changed(ctx):
        return "changed"
    return None


class Republisher:
    """The background thread: `start()` once, `stop()` when the server stops."""

    def __init__(
        self,
        ctx: SiteContext,
        gateway_url: str,
        policy: RepublishPolicy,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        retry: RetryPolicy = BACKGROUND_RETRY,
        turn: Callable[[], bool] = lambda: True,
    ) -> None:
        if not gateway_url:
            raise ConfigError("re-publishing needs the gateway: set [site] gateway_url (HANSA_SITE_GATEWAY_URL)")
        self.ctx, self.gateway_url, self.policy = ctx, gateway_url, policy
        self._clock, self._retry = clock, retry
        self._turn = turn  # whether this process checks now (several server workers take turns)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.results: list[PublishResult] = []  # what it published, oldest first (for status and tests)
        self.last_error: str | None = None

    def check(self) -> PublishResult | None:
        """One check: publish if due. Errors are logged and kept, never raised (the server goes on)."""
        try:
            reason = due(self.ctx, self.policy, self._clock())
            if reason is None:
                return None
            log.info("republish.due", site_id=self.ctx.site_id, reason=reason)
            result = publish_summaries(self.ctx, gateway_url=self.gateway_url, retry=self._retry)
        except HansaError as exc:
            self.last_error = str(exc)
            log.warning("republish.failed", site_id=self.ctx.site_id, error=str(exc))
            return None
        self.last_error = None
        self.results.append(result)
        return result

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._turn():
                self.check()
            self._stop.wait(self.policy.check_s)

    def start(self) -> "Republisher":
        if self._thread is not None:
            raise RuntimeError("the republisher is already running")
        self._thread = threading.Thread(target=self._run, name="hansa-republish", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the thread to stop and wait for it (a publication under way finishes first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def __enter__(self) -> "Republisher":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
