"""The tier worker's rounds (issue 33; reports/i33-tiers-plan.md section 4.3): customers whose review or grace end
has come are re-evaluated at those instants (`domain.tiers.apply_due`: the window just ended judged, kept, grace
started, or downgraded one level or straight to the level earned, per the programme's policy), with a history row
per change and a `tier.changed` webhook per downgrade.

`review_due` is idempotent and crash-safe like `engine.expiry.expire_due`: the customers due are found outside the
write lock, grouped by tenant; each tenant's share of a round is one unit of work that reads them again
(`TierRepository.due_among`: an event batch may have reviewed or upgraded them since; on PostgreSQL only the rows it
could lock), applies what is due, and writes the state, the history and the outbox together, or nothing. A review
moves `review_at` past itself in that same transaction, so a second run finds nothing due; a crash before the
commit leaves it due. The event worker applies the same reviews, by the same functions, to the customers its
events involve (`engine.tier_book`), so whichever comes first applies each review once. `as_of` (default now) lets
the differential tests run it as the ideal worker.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from rewards_lab.contract.scope import EnvironmentName, Scope
from rewards_lab.engine.rule_book import LiveRuleBook, VersionMeta
from rewards_lab.engine.tier_book import TierBook
from rewards_lab.store.api import Store, reader, unit_of_work
from rewards_lab.store.database import utcnow

ROUND = 1000  # customers per round (a calendar year end reviews every holder of a programme at one instant)
DueKey = tuple[str, str, str, str]  # (organization, environment, programme, customer)


@dataclass
class TierReport:
    customers: int = 0  # customers reviewed
    changes: Counter[str] = field(default_factory=Counter)  # history rows written, by kind
    skipped: int = 0  # due, but left for later (held by another unit of work, or no live tiered version)


def review_due(database: Store, as_of: datetime | None = None, round_size: int = ROUND) -> TierReport:
    """Apply every review and grace end due by `as_of` (naive UTC; default now), round after round."""
    moment = as_of or utcnow()
    report = TierReport()
    skipped: set[DueKey] = set()
    while True:
        due = [key for key in reader(database).tiers.due(moment, round_size + len(skipped)) if key not in skipped]
        if not due:
            report.skipped = len(skipped)
            return report
        tenants: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for organization_id, environment, program_id, customer_id in due[:round_size]:
            tenants[(organization_id, environment)][program_id].append(customer_id)
        for (organization_id, environment), programmes in tenants.items():
            scope = Scope(organization_id, cast(EnvironmentName, environment))
            reviewed = _review(database, scope, programmes, moment, report)
            for program_id, customer_ids in programmes.items():
                for customer_id in customer_ids:
                    if (program_id, customer_id) not in reviewed:  # not again this call
                        skipped.add((organization_id, environment, program_id, customer_id))


def _review(
    database: Store, scope: Scope, programmes: dict[str, list[str]], moment: datetime, report: TierReport
) -> set[tuple[str, str]]:
    """One tenant's due customers in one unit of work; returns the (programme, customer) pairs reviewed."""
    reviewed: set[tuple[str, str]] = set()
    with unit_of_work(database) as uow:
        metas = _live_models(LiveRuleBook(uow, scope), set(programmes))
        if not metas:
            return reviewed
        book = TierBook(uow, scope, metas)
        for program_id in sorted(metas):
            rows = uow.tiers.due_among(scope, program_id, programmes[program_id], moment)
            book.review(program_id, rows, moment)
            reviewed.update((program_id, customer_id) for customer_id in rows)
        book.save()
        database.fault("after_tiers")  # crash tests park here: state, history and outbox written, not committed
        report.changes.update(change.kind for _, _, change, _, _ in book.pending.changes)
    report.customers += len(reviewed)
    return reviewed


def _live_models(book: LiveRuleBook, program_ids: set[str]) -> dict[str, VersionMeta]:
    """The live version of each of these programmes that has tiers (a paused programme, or one whose live version
    dropped its tiers, has none: its holders stay as they are until it has)."""
    rows = book.uow.programmes.live_versions(book.scope)
    live = {row.program_id: row.id for row in rows if row.program_id in program_ids}
    book.load(sorted(live.values()))
    return {program_id: book.meta[v] for program_id, v in live.items() if book.meta[v].tier_model is not None}
