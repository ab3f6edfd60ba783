"""What the event worker plans for a batch: each event's issuances (keys, provenance, posting requests), their
recipients, and the report of a batch."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.limits import Grant
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.domain.rules import ActionOutcome
from rewards_lab.engine.reversals import ReversalPlan
from rewards_lab.engine.rule_book import (
    VersionMeta,
)
from rewards_lab.store.interfaces import (
    PendingEvent,
)

log = logging.getLogger(__name__)


ExecutionKey = tuple[str, str, str, int]  # (event, version, rule, action)


BENEFICIARY_NOT_FOUND = "beneficiary_not_found"


@dataclass(slots=True)
class ProcessReport:
    processed: int = 0
    failed: int = 0
    issued: int = 0
    refused: int = 0
    reversed: int = 0  # reverse actions that took back rewards
    waiting: int = 0  # refunds set to wait for their original
    rematched: int = 0  # times the rest of a segment was matched again because a tier moved under it (issue 33)

    def add(self, other: ProcessReport) -> None:
        self.processed += other.processed
        self.failed += other.failed
        self.issued += other.issued
        self.refused += other.refused
        self.reversed += other.reversed
        self.waiting += other.waiting
        self.rematched += other.rematched


@dataclass(frozen=True, slots=True)
class Planned:
    """One issuance an event's rules call for: its execution's key and provenance, and its posting request
    (None when refused before the ledger, or when there is no wallet to post to)."""

    execution_id: str
    version: VersionMeta
    rule_id: str
    action: ActionOutcome
    inputs: str
    request: PostingRequest | None
    recipient: Recipient | None = None  # the beneficiary, when the action names one
    grant: Grant | None = None  # what its caps and budget allowed, when it has any
    reversal: ReversalPlan | None = None  # a reverse action's: what it takes back (set in processing order)


@dataclass(frozen=True, slots=True)
class Recipient:
    """A beneficiary as resolved: its customer and wallet, or the code its action fails with."""

    customer_id: str
    wallet_id: str | None
    error_code: str | None = None


@dataclass(slots=True)
class EventPlan:
    event: PendingEvent
    versions: list[str]
    customer_id: str = ""
    wallet_id: str | None = None
    planned: list[Planned] = field(default_factory=list)
    blocker: ServiceError | None = None  # nothing can be issued: no such customer, or no wallet (no requests made)
    references: list[str] = field(default_factory=list)  # the originals its reverse actions name
