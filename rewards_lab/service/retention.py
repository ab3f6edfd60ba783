"""Retention: how long each growing table keeps its rows, and the job that applies it.

| table | kept for (default) | setting |
| --- | --- | --- |
| `request_log` | 90 days | `REWARDS_LAB_RETENTION_REQUEST_LOG_DAYS` |
| `idempotency_keys` | 168 hours (7 days) | `REWARDS_LAB_RETENTION_IDEMPOTENCY_HOURS` |
| finished `webhook_deliveries` with their `webhook_attempts`; dispatched `outbox` | 30 days | `..._WEBHOOK_DAYS` |
| `sessions` (expired or revoked) | 30 days after they ended | `REWARDS_LAB_RETENTION_SESSIONS_DAYS` |
| `auth_audit` | 365 days | `REWARDS_LAB_RETENTION_AUTH_AUDIT_DAYS` |
| `tier_contributions` (counted after the cutoff) | 400 days | `REWARDS_LAB_RETENTION_TIER_CONTRIBUTIONS_DAYS` |

(`..._` is `REWARDS_LAB_RETENTION_`.)

0 keeps a table's rows forever. An Idempotency-Key older than its window is treated as new even before the job
deletes it (`store.idempotency` looks only inside the window), so a client must not reuse a key after 7 days
expecting the original answer. The job runs every `REWARDS_LAB_RETENTION_INTERVAL_S` (3600) seconds inside `serve`
and once with `rewards-lab retention --db PATH`; it deletes `MAX_DELETE_PER_TRANSACTION` rows per transaction so
that the writer is never held for long. Pending webhook deliveries and undispatched outbox messages are never
deleted; ledger, events, customers and everything else financial are never touched. Tier contributions exist so
that a retried event counts nothing twice (and for audit): the windows read their daily sums (`tier_days`, never
pruned), as does the tier history (`tier_changes`, a customer's record, kept like the ledger).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rewards_lab.store import idempotency
from rewards_lab.store.api import Store
from rewards_lab.store.database import utcnow

ENV_PREFIX = "REWARDS_LAB_RETENTION_"
DEFAULT_REQUEST_LOG_DAYS = 90
DEFAULT_IDEMPOTENCY_HOURS = 168
DEFAULT_WEBHOOK_DAYS = 30
DEFAULT_SESSIONS_DAYS = 30
DEFAULT_AUTH_AUDIT_DAYS = 365
DEFAULT_TIER_CONTRIBUTIONS_DAYS = 400  # a year's window and a margin (plan i33 section 4.1)
DEFAULT_INTERVAL_S = 3600
MAX_DELETE_PER_TRANSACTION = 50_000
MAX_WINDOW_DAYS = 36_500  # a hundred years: anything longer is a typo
MAX_CHUNKS_PER_RUN = 1_000  # 50 million rows per table and run, then the next run goes on


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """Each window, or None to keep forever."""

    request_log: timedelta | None = timedelta(days=DEFAULT_REQUEST_LOG_DAYS)
    idempotency_keys: timedelta | None = timedelta(hours=DEFAULT_IDEMPOTENCY_HOURS)
    webhooks: timedelta | None = timedelta(days=DEFAULT_WEBHOOK_DAYS)
    sessions: timedelta | None = timedelta(days=DEFAULT_SESSIONS_DAYS)
    auth_audit: timedelta | None = timedelta(days=DEFAULT_AUTH_AUDIT_DAYS)
    tier_contributions: timedelta | None = timedelta(days=DEFAULT_TIER_CONTRIBUTIONS_DAYS)
    interval_s: float = DEFAULT_INTERVAL_S

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> RetentionSettings:
        """The settings from `REWARDS_LAB_RETENTION_*`; a malformed value raises ValueError naming it."""
        values = os.environ if environ is None else environ

        def window(name: str, default: int, unit: str) -> timedelta | None:
            text = values.get(ENV_PREFIX + name)
            if text is None or text.strip() == "":
                amount = default
            else:
                try:
                    amount = int(text)
                except ValueError:
                    raise ValueError(f"{ENV_PREFIX}{name} must be a whole number of {unit}") from None
                limit = MAX_WINDOW_DAYS * (24 if unit == "hours" else 1)
                if not 0 <= amount <= limit:
                    raise ValueError(f"{ENV_PREFIX}{name} must be between 0 (keep forever) and {limit}")
            if amount == 0:
                return None
            return timedelta(hours=amount) if unit == "hours" else timedelta(days=amount)

        interval_text = values.get(ENV_PREFIX + "INTERVAL_S")
        try:
            interval_s = float(interval_text) if interval_text else float(DEFAULT_INTERVAL_S)
        except ValueError:
            raise ValueError(f"{ENV_PREFIX}INTERVAL_S must be a number of seconds") from None
        if not 1 <= interval_s <= 7 * 86_400:
            raise ValueError(f"{ENV_PREFIX}INTERVAL_S must be between 1 and 604800")
        return cls(
            request_log=window("REQUEST_LOG_DAYS", DEFAULT_REQUEST_LOG_DAYS, "days"),
            idempotency_keys=window("IDEMPOTENCY_HOURS", DEFAULT_IDEMPOTENCY_HOURS, "hours"),
            webhooks=window("WEBHOOK_DAYS", DEFAULT_WEBHOOK_DAYS, "days"),
            sessions=window("SESSIONS_DAYS", DEFAULT_SESSIONS_DAYS, "days"),
            auth_audit=window("AUTH_AUDIT_DAYS", DEFAULT_AUTH_AUDIT_DAYS, "days"),
            tier_contributions=window("TIER_CONTRIBUTIONS_DAYS", DEFAULT_TIER_CONTRIBUTIONS_DAYS, "days"),
            interval_s=interval_s,
        )

    def apply_idempotency_window(self) -> None:
        """Make Idempotency-Key lookups see only keys inside the window (process-wide)."""
        idempotency.set_retention(self.idempotency_keys)


@dataclass(slots=True)
class RetentionReport:
    deleted: dict[str, int] = field(default_factory=dict)  # table -> rows deleted
    at: datetime | None = None
    held_elsewhere: bool = False  # another process sharing the database was running retention: nothing done


def _chunks(database: Store, table: str, cutoff: datetime, limit: int, stop: threading.Event | None) -> int:
    total = 0
    for _ in range(MAX_CHUNKS_PER_RUN):
        if stop is not None and stop.is_set():
            break
        deleted = database.delete_expired(table, cutoff, limit)
        total += deleted
        if deleted < limit:
            break
    return total


def run_once(
    database: Store,
    settings: RetentionSettings,
    *,
    now: datetime | None = None,
    limit: int = MAX_DELETE_PER_TRANSACTION,
    stop: threading.Event | None = None,
) -> RetentionReport:
    """Delete every row past its window (as of `now`, naive UTC), `limit` rows per transaction; `stop` ends the
    run between two transactions. One process at a time (`Store.exclusive`): when another process sharing the
    database runs it, this run does nothing (`held_elsewhere`)."""
    with database.exclusive("retention") as held:
        if not held:
            return RetentionReport(at=now or utcnow(), held_elsewhere=True)
        return _run(database, settings, now or utcnow(), limit, stop)


def _run(
    database: Store, settings: RetentionSettings, at: datetime, limit: int, stop: threading.Event | None
) -> RetentionReport:
    report = RetentionReport(at=at)
    tables: list[tuple[str, timedelta | None]] = [
        ("request_log", settings.request_log),
        ("idempotency_keys", settings.idempotency_keys),
        ("auth_audit", settings.auth_audit),
        ("sessions", settings.sessions),
        ("outbox", settings.webhooks),
        ("tier_contributions", settings.tier_contributions),
    ]
    for table, window in tables:
        report.deleted[table] = 0 if window is None else _chunks(database, table, at - window, limit, stop)
    deliveries = attempts = 0
    if settings.webhooks is not None:
        for _ in range(MAX_CHUNKS_PER_RUN):
            if stop is not None and stop.is_set():
                break
            done, tried = database.delete_finished_deliveries(at - settings.webhooks, limit)
            deliveries, attempts = deliveries + done, attempts + tried
            if done < limit:
                break
    report.deleted["webhook_deliveries"] = deliveries
    report.deleted["webhook_attempts"] = attempts
    return report
