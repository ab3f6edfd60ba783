"""The activity figures customer segments are derived from (read-only)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from rewards_lab.contract.scope import Scope


class SegmentStore(Protocol):
    def event_activity(self, scope: Scope, refs: list[str], since: datetime) -> tuple[datetime | None, int]: ...

    def high_value_assets(
        self, scope: Scope, customer_id: str, since: datetime, quantile: float, min_peers: int
    ) -> list[str]: ...
