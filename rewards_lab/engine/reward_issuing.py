"""Issuing a batch's decided rewards: the postings through the one posting path, their lots, the executions
recorded and the webhooks written."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from rewards_lab import presenters
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.event_age import EVENT_TOO_OLD
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import format_amount
from rewards_lab.engine.batch_plan import (
    EventPlan,
    ProcessReport,
)
from rewards_lab.engine.event_matching import (
    event_time,
)
from rewards_lab.engine.lot_book import LotTerms
from rewards_lab.engine.notifications import outbox_messages
from rewards_lab.engine.postings import apply_postings
from rewards_lab.engine.reversals import give_back_taken, reversal_record
from rewards_lab.store.interfaces import (
    EventOutcome,
    ExecutionRecord,
    Repositories,
)

log = logging.getLogger(__name__)


def lot_terms_of(plans: list[EventPlan]) -> dict[str, LotTerms]:
    """What only the worker knows of its postings' lots (used where the asset tracks lots): a reward is issued at
    its event's time under its programme's expiry policy (the lot book applies it, else the asset's); a reversal
    takes first from the lots of the reward it takes back."""
    terms: dict[str, LotTerms] = {}
    for plan in plans:
        issued_at = event_time(plan.event).replace(tzinfo=None)
        for planned in plan.planned:
            if planned.request is not None:
                version = planned.version
                terms[planned.request.transaction_id] = LotTerms(issued_at, version.expiry, version.timezone)
            elif planned.reversal is not None:
                for item in planned.reversal.items:
                    terms[item.request.transaction_id] = LotTerms(first=(item.original.transaction_id or "",))
    return terms


def issue_planned(uow: Repositories, scope: Scope, plans: list[EventPlan]) -> ProcessReport:
    requests = []
    for plan in plans:
        for planned in plan.planned:
            if planned.request is not None:
                requests.append(planned.request)
            elif planned.reversal is not None:
                requests.extend(item.request for item in planned.reversal.items)
    decision = apply_postings(uow, scope, requests, lot_terms=lambda: lot_terms_of(plans))  # made only if needed
    rejected = {request.transaction_id: error for request, error in decision.rejected}
    taken: dict[str, int] = {}  # a reversal's transaction -> what the wallet gave (a refused one gave nothing)
    reversals = [planned.reversal for plan in plans for planned in plan.planned if planned.reversal is not None]
    if reversals:
        taken = {p.transaction_id: p.amount_minor for p in decision.accepted if p.kind == "reversal"}
        give_back_taken(uow, scope, reversals, taken)  # the counters get back what the wallets gave
    report = ProcessReport()
    records: list[ExecutionRecord] = []
    issued: list[tuple[ExecutionRecord, int]] = []
    reversed_: list[tuple[ExecutionRecord, int]] = []
    outcomes: list[EventOutcome] = []
    for plan in plans:
        event = plan.event
        refused_when_planned: ServiceError | None = None  # the first, else the ledger's first refusal
        refused_by_ledger: ServiceError | None = None
        for planned in plan.planned:
            action, request, recipient = planned.action, planned.request, planned.recipient
            status, code, transaction_id = "failed", action.error_code, None
            customer_id = plan.customer_id if recipient is None else recipient.customer_id
            wallet_id = plan.wallet_id if recipient is None else recipient.wallet_id
            grant, reversal = planned.grant, planned.reversal
            amount_minor = action.amount_minor if grant is None else grant.amount_minor
            if code is None and reversal is not None and reversal.error is not None:  # original_not_found, ...
                code = reversal.error.code
                action = replace(action, error_code=code, reason=reversal.error.message)
            if code is None and recipient is not None and recipient.error_code is not None:
                code = recipient.error_code
                why = f"no customer has the id or external id '{recipient.customer_id}' named by the beneficiary"
                action = replace(action, error_code=code, reason=why)
            if code == EVENT_TOO_OLD:  # older than its programme takes live events: processed, nothing issued
                status, amount_minor = "limited", 0
            elif code is not None:  # refused when planned (amount_too_large, beneficiary_missing / _not_found)
                report.refused += 1
                refused_when_planned = refused_when_planned or ServiceError(code, action.reason)
            elif reversal is not None:  # what the wallets gave back, after the clawback policy
                status, customer_id, wallet_id = "reversed", reversal.customer_id or plan.customer_id, None
                amount_minor = sum(taken.get(item.request.transaction_id, 0) for item in reversal.items)
                report.reversed += 1
            elif grant is not None and grant.amount_minor == 0:  # a cap or the budget let nothing through
                status = "limited"
            elif request is None and recipient is not None:  # a beneficiary without a wallet
                code = "wallet_not_found"
                refused_when_planned = refused_when_planned or ServiceError(
                    code, "the beneficiary has no wallet to receive the reward", customer_id=customer_id
                )
            elif request is None:
                code = plan.blocker.code if plan.blocker else "wallet_not_found"
            elif request.transaction_id in rejected:
                refusal = rejected[request.transaction_id]
                code, refused_by_ledger = refusal.code, refused_by_ledger or refusal
                report.refused += 1
            else:
                status, transaction_id = "issued", request.transaction_id
                report.issued += 1
            record = ExecutionRecord(
                planned.execution_id,
                event.id,
                event.external_event_id,
                customer_id,
                planned.version.program_id,
                planned.version.version_id,
                planned.version.number,
                planned.rule_id,
                action.action_index,
                action.asset_id,
                wallet_id,
                amount_minor,
                status,
                code,
                transaction_id,
                planned.inputs,
                None if grant is None or grant.cut is None else action.amount_minor,
                None if grant is None else grant.cut,
                () if grant is None else grant.keys,
                None if reversal is None or code is not None else reversal_record(reversal, taken),
            )
            records.append(record)
            if status == "issued":
                issued.append((record, action.decimals))
            elif status == "reversed" and reversal is not None and reversal.items:
                reversed_.append((record, action.decimals))
        error = plan.blocker or refused_when_planned or refused_by_ledger
        status = "failed" if error else "processed"
        message = error.message if error else None
        outcomes.append(EventOutcome(event.id, status, error.code if error else None, message, plan.versions))
        report.failed += status == "failed"
        report.processed += status == "processed"
    # An event's executions are written in the transaction that counts its attempt, so an event never attempted
    # has none: its records are plainly inserted (DuckDB's ON CONFLICT costs several times an INSERT and grows
    # with the table); only a retried event's records may replace earlier ones.
    retried = {plan.event.id for plan in plans if plan.event.attempts > 0}
    uow.executions.insert_many(scope, [record for record in records if record.event_id not in retried])
    uow.executions.upsert_many(scope, [record for record in records if record.event_id in retried])
    uow.outbox.add_many(scope, outbox_messages("reward.issued", [(r.id, issued_payload(r, d)) for r, d in issued]))
    if reversed_:
        payloads = [(r.id, reversed_payload(r, d)) for r, d in reversed_]
        uow.outbox.add_many(scope, outbox_messages("reward.reversed", payloads))
    uow.events.mark_many(scope, outcomes)
    return report


def reversed_payload(record: ExecutionRecord, decimals: int) -> dict[str, Any]:
    """The `reward.reversed` webhook's body: the reverse action's execution and what it took back, reward by
    reward (the same `reversal` object as the execution resource)."""
    assert record.reversal is not None
    body = issued_payload(record, decimals)
    body["reversal"] = presenters.reversal(record.reversal, decimals).model_dump(mode="json")
    return body


def issued_payload(record: ExecutionRecord, decimals: int) -> dict[str, Any]:
    return {
        "execution_id": record.id,
        "event_id": record.event_id,
        "external_event_id": record.external_event_id,
        "customer_id": record.customer_id,
        "wallet_id": record.wallet_id,
        "program_id": record.program_id,
        "program_version": record.version_number,
        "rule_id": record.rule_id,
        "action_index": record.action_index,
        "asset_id": record.asset_id,
        "amount": format_amount(record.amount_minor, decimals),
        "transaction_id": record.transaction_id,
    }
