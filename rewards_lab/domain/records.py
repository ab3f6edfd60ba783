"""What a reward execution records of a reverse action (pure, typed): its original and, per reward taken back, the
target, what the wallet gave and the transaction (the cut a cap made is `domain.limits.CapCut`).

The engine makes these; the store keeps them as JSON (`store/settings_json.py`) and gives them back decoded; the
presenters show them (amounts in minor units here, formatted there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


@dataclass(frozen=True, slots=True)
class RewardTaken:
    """One reward a reverse action took back from: its execution and transaction, whose wallet, what was due
    back (`target_minor`), what the wallet gave (`taken_minor`) and the reversal's transaction (None: nothing
    posted)."""

    original_execution_id: str
    original_transaction_id: str | None
    customer_id: str
    wallet_id: str | None
    target_minor: int
    taken_minor: int
    transaction_id: str | None

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> RewardTaken:
        return cls(
            stored["original_execution_id"],
            stored["original_transaction_id"],
            stored["customer_id"],
            stored["wallet_id"],
            int(stored["target_minor"]),
            int(stored["taken_minor"]),
            stored["transaction_id"],
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "original_execution_id": self.original_execution_id,
            "original_transaction_id": self.original_transaction_id,
            "customer_id": self.customer_id,
            "wallet_id": self.wallet_id,
            "target_minor": self.target_minor,
            "taken_minor": self.taken_minor,
            "transaction_id": self.transaction_id,
        }


@dataclass(frozen=True, slots=True)
class ReversalRecord:
    """A reverse action's detail: the original event (its id None when unknown), the fraction applied (None: all
    that remained), the clawback policy and the rewards taken back."""

    original_event_id: str | None
    original_external_event_id: str
    fraction: Decimal | None
    clawback: str
    rewards: tuple[RewardTaken, ...]

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> ReversalRecord:
        fraction = stored["fraction"]
        return cls(
            stored["original_event_id"],
            stored["original_external_event_id"],
            None if fraction is None else Decimal(str(fraction)),
            stored["clawback"],
            tuple(RewardTaken.of(item) for item in stored["rewards"]),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "original_event_id": self.original_event_id,
            "original_external_event_id": self.original_external_event_id,
            "fraction": None if self.fraction is None else str(self.fraction),
            "clawback": self.clawback,
            "rewards": [reward.as_json() for reward in self.rewards],
        }
