"""The one owner of per-site publication state: `SitePublications`.

A site's publication state has two parts that must move together: its *floor* (the last accepted
sequence, in the registry's state file) and its *set* (the summaries the index serves, a SiteSet).
They used to be written from the Flask closure under an app-level lock, with revocation wired to the
index elsewhere. Now only this class writes either, so every rule about them lives in one place:

- Why the floor stays in the registry: it is a trust fact, not content. It must survive restarts
  and crashes exactly (guarantee: no rollback), be reset only by a signed key rotation and kept by
  a revocation, and be committed atomically with the signed registry it belongs to. The registry's
  state file is written synchronously under a file lock; the index's durable copy is a
  write-behind cache that may lag a crash. So the registry is the authority on *what may be
  accepted*, the index on *what is served*, and this class is the only writer of both.
- Order of a publication (one site at a time, under `_lock`): verify (before parse) -> charge the
  site's rate limit -> replay? -> floor check + policy -> plan against the held set -> raise the
  floor -> swap the set in. If the swap fails, the old set stays under a raised floor and the site
  resends in full: never a mix, never a rollback.
- Revocation (or all keys replaced): the registry tells this class, which drops the site's set at
  once; on start, sets of sites revoked while the gateway was down are purged.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, ClassVar

from pydantic import Field, StrictBool, StrictStr

from hansa.core.crash_points import crash_point
from hansa.core.errors import ConflictError, InputError
from hansa.core.logs import get_logger
from hansa.core.model import FORBID, Wire
from hansa.gateway.index.summaries import SummaryIndex
from hansa.gateway.trust.ratelimit import TokenBucketLimiter
from hansa.gateway.trust.registry import REVOKED, SiteRegistry
from hansa.sync.publication import open_publication
from hansa.sync.wire import Count, SiteId, UtcTimestamp, parse_utc, validate_site_id

log = get_logger(__name__)


@dataclass(frozen=True)
class PublicationAccepted(Wire):
    """What the gateway answers a site whose publication it took (HTTP 200)."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "publication accepted"

    site_id: SiteId
    sequence: Count
    accepted: Annotated[Count, Field(description="Summaries now indexed for the site")]
    expires: UtcTimestamp
    changed: Annotated[Count, Field(description="Summaries added or replaced by this publication")]
    withdrawn: Annotated[Count, Field(description="Summaries this publication removed")]
    replay: Annotated[StrictBool, Field(
        description="True when this was a resend of the publication already in force")]


@dataclass(frozen=True)
class PublicationConflictBody(Wire):
    """What a refused publication's 409 carries: what the site needs to resend above the floor.
    Documented as the `PublicationConflict` component (`COMPONENT`)."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = "publication conflict"
    COMPONENT: ClassVar[str] = "PublicationConflict"

    error: Annotated[StrictStr, Field(min_length=1)]
    kind: Annotated[StrictStr, Field(min_length=1)]
    current_sequence: Annotated[Count | None, Field(description="The site's floor: publish above it")]
    current_manifest_sha256: Annotated[StrictStr | None, Field(
        description="Digest of the manifest of the set in force")]


class PublicationConflict(ConflictError):
    """A publication refused against the site's floor or held set; carries what the site needs to
    resend above it (the floor and the held set's manifest digest)."""

    def __init__(self, message: str, current_sequence: int | None, current_manifest_sha256: str | None) -> None:
        super().__init__(message)
        self.current_sequence = current_sequence
        self.current_manifest_sha256 = current_manifest_sha256

    def body(self) -> PublicationConflictBody:
        return PublicationConflictBody(str(self), "ConflictError", self.current_sequence, self.current_manifest_sha256)


class SitePublications:
    """Accepts sites' signed publications into the registry's floors and the summary index."""

    def __init__(self, registry: SiteRegistry, index: SummaryIndex, limits: TokenBucketLimiter,
                 max_lifetime: timedelta = timedelta(days=30), staged: SummaryIndex | None = None) -> None:
        self.registry = registry
        self.index = index
        self.staged = staged  # publications in the next embedder's space go here, not routed until it is promoted
        self.limits = limits
        self.max_lifetime = max_lifetime  # [gateway] max_publication_lifetime_days
        self._lock = threading.Lock()  # sequence check -> index swap -> record, one site at a time
        active = {rec.site_id for rec in registry.list() if rec.status != REVOKED}
        index.restore(lambda site_id: site_id in active)
        if staged is not None:
            staged.restore(lambda site_id: site_id in active)
        registry.on_untrusted(self._untrusted)  # revoked (or all keys replaced) from now on

    def _untrusted(self, site_id: str) -> None:
        self.index.remove_site(site_id)
        if self.staged is not None:
            self.staged.remove_site(site_id)

    def publish(self, site_id: str, envelope: Any) -> dict[str, Any]:
        """Verify `envelope` as a publication of `site_id` and make it the site's set.

        Returns the acceptance record; a resend of the publication in force is accepted again
        (`replay`). Raises VerificationError (bad signature, unknown or revoked site), InputError
        (malformed, over policy), RateLimited, or PublicationConflict (409: replay of another
        content, rollback, a delta on a base the gateway no longer holds)."""
        validate_site_id(site_id)
        pub = open_publication(envelope, site_id, self.registry.keys_for(site_id), self.index.space,
                               also=(self.staged.space,) if self.staged is not None else ())
        index = self.staged if self.staged is not None and pub.embedding == self.staged.space else self.index
        self.limits.charge(pub.site_id, 1)  # keyed by the verified signer, never by the URL alone
        _check_lifetime(pub.site_id, pub.issued_at, pub.expires, self.max_lifetime)
        with self._lock:
            try:
                if index.is_replay(pub):
                    held = index.current(site_id)
                    return PublicationAccepted(site_id, pub.sequence, len(held.rows) if held else 0, pub.expires,
                                               0, 0, True).to_json()
                self.registry.check_sequence(site_id, pub.sequence, len(pub.manifest))  # + site policy
                plan = index.plan(pub, self.registry.last_sequence(site_id))
                rec = self.registry.record_publication(site_id, pub.sequence, pub.expires, len(plan.new.rows))
                crash_point("gateway.after_floor")
                index.commit(plan)
                crash_point("gateway.after_commit")  # if this fails the old set stays, above a raised floor: resend in full
            except ConflictError as exc:
                held = index.current(site_id)
                raise PublicationConflict(str(exc), self.registry.last_sequence(site_id),
                                          held.manifest_sha256 if held else None) from exc
        log.info("publication.accepted", site_id=site_id, sequence=pub.sequence, summaries=len(plan.new.rows),
                 changed=plan.changed, withdrawn=plan.withdrawn)
        return PublicationAccepted(site_id, rec.last_sequence, len(plan.new.rows), rec.expires, plan.changed,  # type: ignore[arg-type]
                                   plan.withdrawn, False).to_json()


def _check_lifetime(site_id: str, issued_at: str, expires: str, limit: timedelta) -> None:
    """Refuse a publication signed to stay in force longer than the gateway allows: one valid for
    a century would keep a departed or compromised site routable long after anyone noticed."""
    lifetime = parse_utc(expires, "publication expires") - parse_utc(issued_at, "publication issued_at")
    if lifetime > limit:
        raise InputError(
            f"publication from {site_id!r} is valid for {_days(lifetime)} days ({issued_at} to {expires}), "
            f"longer than this gateway's maximum of {_days(limit)} days ([gateway] max_publication_lifetime_days): "
            "sign it with a shorter [site] publication_ttl_hours"
        )


def _days(span: timedelta) -> str:
    return f"{span.total_seconds() / 86400:g}"
