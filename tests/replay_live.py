"""The live engine's side of the replay tests with caps, budgets, reversals and redemptions (issue 18), in process
over a real DuckDB file, and the replays' side in the same shape, so that the tests compare like with like.

The live side creates the programme (its timezone, window, caps, budget, clawback and bound on an event's age)
and its rules through the service layer, customers alice, bob and carol with wallets (and a `house` customer
holding the opening supply), submits the events in occurred_at order (ties in input order), each received when it
occurred (as a replay takes them), and processes them; a redemption at time t is made with
`service.ledger.redeem` once every event at or before t is submitted and processed. Refunds still waiting for
an original that never came are then let out of their wait (as if the seven days had passed) and fail.

With expiry (the programme's or the asset's, issue 19) the expiry worker runs as an ideal one would:
`expire_due(as_of=t)` before the events of each time t (submitted and processed together) and before each
redemption at t, and at the end at `as_of`; the outcome then holds every customer's lots.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from rewards_lab.contract import jsonutil
from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.money import format_amount
from rewards_lab.engine import event_processing
from rewards_lab.engine.expiry import expire_due
from rewards_lab.service import assets, customers, event_intake, ledger, organizations, programmes
from rewards_lab.store.database import Database
from rewards_lab.store.uow import unit_of_work
from rewards_lab.store.verification import verify_ledger

CUSTOMERS = ("alice", "bob", "carol")
Row = tuple[Any, ...]


@dataclass
class Outcome:
    """What an engine did, in comparable form: execution rows keyed by (event, rule, action), the rewards each
    reverse action took back, every customer's balance (minor units, by customer id) and the redemptions'."""

    rows: list[Row]  # (external_event_id, rule, action, amount_minor, status, error_code, customer_id, cut)
    items: list[Row]  # (refund, rule, action, original, original rule, original action, customer, target, taken)
    balances: dict[str, int]
    redeemed: list[bool]
    # with expiry: (customer, issued_at, expires_at, amount, remaining, expired) per lot (naive UTC, minor units)
    lots: list[Row] = field(default_factory=list)

    def sorted(self) -> Outcome:
        return Outcome(
            sorted(self.rows, key=repr),
            sorted(self.items, key=repr),
            self.balances,
            self.redeemed,
            sorted(self.lots, key=repr),
        )


@dataclass
class Live:
    outcome: Outcome
    customers: pd.DataFrame  # the customers table exported from the live service
    submitted: list[dict[str, Any]]  # the events as submitted (a reference `@id:name` is that customer's id)


def _programme_body(definition: ProgrammeDefinition, asset_id: str) -> dict[str, Any]:
    settings = definition.programme.model_dump(
        mode="json",
        include={"timezone", "starts_at", "ends_at", "limits", "budget", "clawback", "expiry", "max_event_age_days"},
    )
    return {"name": "Replayed", "asset_id": asset_id, **settings}


def run_live(
    path: Path,
    definition: ProgrammeDefinition,
    stream: list[dict[str, Any]],
    redemptions: list[dict[str, Any]],
    opening: int = 0,
    as_of: datetime | None = None,
) -> Live:
    """The live engine over `stream` and `redemptions` (dicts of customer_id, amount (minor units),
    occurred_at); `opening` minor units issued to `house` first. `as_of` (aware): with expiry, until when the
    worker runs (None: the last event or redemption)."""
    expiring = definition.programme.expiry is not None or definition.asset.expiry is not None
    database = Database(path)
    try:
        org = organizations.create_organization(database, "Replayed")
        scope = Scope(org.id, "sandbox")
        asset_body = validate(rq.AssetCreate, definition.asset.model_dump(mode="python", exclude_none=True))
        asset = assets.activate_asset(database, scope, assets.create_asset(database, scope, asset_body).id)
        programme = programmes.create_programme(
            database, scope, validate(rq.ProgrammeCreate, _programme_body(definition, asset.id))
        )
        rule_index = {}
        for index, rule in enumerate(definition.rules):
            body = {"program_id": programme.id, **rule.model_dump(mode="python")}
            rule_index[programmes.create_rule(database, scope, validate(rq.RuleCreate, body)).id] = index
        programmes.publish(database, scope, programme.id)
        wallets, exported = {}, []
        for name in (*CUSTOMERS, "house"):
            customer = customers.create_customer(database, scope, validate(rq.CustomerCreate, {"external_id": name}))
            wallet = customers.create_wallet(database, scope, validate(rq.WalletCreate, {"customer_id": customer.id}))
            wallets[customer.id] = wallet.id
            if name != "house":
                exported.append({"id": customer.id, "external_id": name})
        ids = {row["external_id"]: row["id"] for row in exported}
        stream = [_with_ids(event, ids) for event in stream]
        house = next(c for c in wallets if c not in ids.values())
        if opening:
            body = {"wallet_id": wallets[house], "amount": format_amount(opening, asset.decimals), "reason": "o"}
            ledger.issue(database, scope, asset.id, validate(rq.IssueRequest, body))
        ordered = sorted(stream, key=lambda e: e["occurred_at"])  # stable: ties keep input order
        spends = sorted(enumerate(redemptions), key=lambda item: item[1]["occurred_at"])
        redeemed: dict[int, bool] = {}
        sent = 0
        submit = _submit_expiring if expiring else _submit
        for index, spend in spends:
            upto = sent
            while upto < len(ordered) and ordered[upto]["occurred_at"] <= spend["occurred_at"]:
                upto += 1
            submit(database, scope, ordered[sent:upto])
            sent = upto
            if expiring:
                expire_due(database, as_of=_naive(spend["occurred_at"]))
            wallet = wallets[ids.get(spend["customer_id"], spend["customer_id"])]
            body = {"wallet_id": wallet, "amount": format_amount(spend["amount"], asset.decimals), "reference": "r"}
            try:
                ledger.redeem(database, scope, asset.id, validate(rq.RedemptionRequest, body))
                redeemed[index] = True
            except ServiceError as error:
                assert error.code == "insufficient_balance", error
                redeemed[index] = False
        submit(database, scope, ordered[sent:])
        with unit_of_work(database) as uow:  # refunds whose original never came: their wait is over
            waiting = uow.con.execute(
                "SELECT id, waiting_for FROM events WHERE status = 'received' AND waiting_for IS NOT NULL"
            ).fetchall()
            uow.events.wait(scope, {row[0]: row[1] for row in waiting}, datetime(2000, 1, 1))
        event_processing.process_all(database)
        moments = [e["occurred_at"] for e in ordered] + [r["occurred_at"] for r in redemptions]
        end = as_of if as_of is not None else max(moments, default=None)
        if expiring and end is not None:
            expire_due(database, as_of=_naive(end))
        reader = database.reader()
        executions = reader.execute(
            "SELECT id, external_event_id, rule_id, action_index, amount_minor, status, error_code, customer_id, "
            "limited, reversal FROM reward_executions ORDER BY id"
        ).fetchall()
        balances = {}
        for customer, wallet in wallets.items():
            held = ledger.wallet_balances(database, scope, wallet).balances
            if customer != house:
                balances[customer] = sum(int(Decimal(b.balance).scaleb(b.decimals)) for b in held)
        lots = reader.execute(
            "SELECT w.customer_id, l.issued_at, l.expires_at, l.amount_minor, l.remaining_minor, l.expired_minor "
            "FROM lots l JOIN wallets w ON w.id = l.wallet_id WHERE w.customer_id <> ?",
            [house],
        ).fetchall()
        report = verify_ledger(reader)
        assert report.ok, report.problems
    finally:
        database.close()
    by_id = {row[0]: (row[1], rule_index[row[2]], row[3]) for row in executions}
    rows, items = [], []
    for _, event, rule, action, amount, status, code, customer, limited, reversal in executions:
        cut = None
        if limited is not None:
            found = jsonutil.loads(limited)
            cut = (found["scope"], found["period"], found["period_start"], int(found["cut_minor"]))
        rows.append((event, rule_index[rule], action, int(amount), status, code, customer, cut))
        for item in jsonutil.loads(reversal)["rewards"] if reversal else []:
            original = by_id[item["original_execution_id"]]
            taken = int(item["taken_minor"])
            items.append(
                (event, rule_index[rule], action, *original, item["customer_id"], int(item["target_minor"]), taken)
            )
    nonzero = {customer: balance for customer, balance in balances.items() if balance}
    found = [(c, i, x, int(a), int(r), int(e)) for c, i, x, a, r, e in lots]
    outcome = Outcome(rows, items, nonzero, [redeemed[index] for index in range(len(redemptions))], found)
    return Live(outcome, pd.DataFrame(exported), stream)


def _with_ids(event: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """A reference `@id:name` (the beneficiary field `ref`, or the event's customer) as that customer's id."""
    reference = event["data"].get("ref")
    if isinstance(reference, str) and reference.startswith("@id:"):
        event = {**event, "data": {**event["data"], "ref": ids[reference.removeprefix("@id:")]}}
    customer = event["customer_id"]
    if isinstance(customer, str) and customer.startswith("@id:"):
        event = {**event, "customer_id": ids[customer.removeprefix("@id:")]}
    return event


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


def _submit_expiring(database: Database, scope: Scope, events: list[dict[str, Any]]) -> None:
    """The events of each time together, the expiry worker run at that time before them."""
    for _, group in itertools.groupby(events, key=lambda e: e["occurred_at"]):
        at_t = list(group)
        expire_due(database, as_of=_naive(at_t[0]["occurred_at"]))
        _submit(database, scope, at_t)


def _submit(database: Database, scope: Scope, events: list[dict[str, Any]]) -> None:
    """Each event received when it occurred, as a replay takes it (so a programme's max_event_age_days, counted
    from receipt, holds none of them back: docs/replay.md)."""
    if not events:
        return
    for at, group in itertools.groupby(events, key=lambda e: e["occurred_at"]):
        bodies = [validate(rq.EventCreate, event) for event in group]
        results = event_intake.submit_events(database, scope, bodies, received_at=_naive(at))
        assert all(not isinstance(result, Exception) for result in results)
    event_processing.process_all(database)


def replayed_outcome(result: Any, spark: bool = False) -> Outcome:
    """An engine's result (DuckDB's ReplayResult or Spark's) in the live outcome's form."""
    issuances = (result.to_arrow() if spark else result.issuances.to_arrow_table()).to_pylist()
    reversals = (result.reversals.toArrow() if spark else result.reversals.to_arrow_table()).to_pylist()
    redemptions = (result.redemptions.toArrow() if spark else result.redemptions.to_arrow_table()).to_pylist()
    rows = []
    for row in issuances:
        cut = None
        if row.get("cap_scope") is not None:
            start = row["cap_period_start"].isoformat()
            cut = (row["cap_scope"], row["cap_period"], start, int(row["cut_minor"]))
        rows.append(
            (
                row["external_event_id"],
                row["rule_index"],
                row["action_index"],
                int(row["amount_minor"]),
                row["status"],
                row["error_code"],
                row["customer_id"],
                cut,
            )
        )
    items = [
        (
            row["external_event_id"],
            row["rule_index"],
            row["action_index"],
            row["original_external_event_id"],
            row["original_rule_index"],
            row["original_action_index"],
            row["customer_id"],
            int(row["target_minor"]),
            int(row["taken_minor"]),
        )
        for row in reversals
    ]
    lots_frame = result.lots.toArrow() if spark else result.lots.to_arrow_table()
    lots = [
        (
            row["customer_id"],
            _naive(row["issued_at"]),
            None if row["expires_at"] is None else _naive(row["expires_at"]),
            int(row["amount_minor"]),
            int(row["remaining_minor"]),
            int(row["expired_minor"]),
        )
        for row in lots_frame.to_pylist()
    ]
    frame = result.per_customer()
    decimals = result.definition.asset.decimals
    balances = {
        str(customer): int(Decimal(balance).scaleb(decimals))
        for customer, balance in zip(frame["customer_id"], frame["balance"], strict=True)
        if Decimal(balance) != 0
    }
    return Outcome(rows, items, balances, [row["status"] == "redeemed" for row in redemptions], lots)


def redemptions_frame(redemptions: list[dict[str, Any]], decimals: int) -> pd.DataFrame:
    """The redemptions as the replay reads them (amounts as decimal strings)."""
    return pd.DataFrame(
        {
            "customer_id": [r["customer_id"] for r in redemptions],
            "amount": [format_amount(r["amount"], decimals) for r in redemptions],
            "occurred_at": [r["occurred_at"] for r in redemptions],
        },
        columns=["customer_id", "amount", "occurred_at"],
    )
