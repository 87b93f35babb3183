"""A clock a test sets by hand, for anything that takes an injected clock (`SiteRegistry(clock=...)`):
time moves only when the test moves it, and no other code in the process sees the change, which
freezegun's process-wide patching cannot promise."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone


class ManualClock:
    def __init__(self, at: datetime | str | None = None) -> None:
        self.at = self._parse(at) if at is not None else datetime.now(timezone.utc)

    @staticmethod
    def _parse(at: datetime | str) -> datetime:
        return at if isinstance(at, datetime) else datetime.fromisoformat(at.replace("Z", "+00:00"))

    def __call__(self) -> datetime:
        return self.at

    def move_to(self, at: datetime | str) -> None:
        self.at = self._parse(at)

    def advance(self, by: timedelta) -> None:
        self.at += by
