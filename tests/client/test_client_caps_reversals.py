"""Caps, budgets, clawback and reverse actions (issue 18) through `rewards_lab.client` and `rewards-lab api`
against a real `rewards-lab serve`: what each sends, and the typed resources the server's answers parse into
(programme spending, rule caps, reverse actions, limited and reversed executions)."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from typing import Any
from unittest import mock

import httpx
import pytest

from rewards_lab.cli.main import main
from rewards_lab.client import RewardsClient, ValidationError
from rewards_lab.contract import resources as r
from rewards_lab.contract.limit_requests import AmountLimit, Budget, CountLimit, FractionOf, ReverseAction
from tests.live_server import LiveServer, start_server

POLL_TIMEOUT_S = 20.0
REVERSE = {"type": "reverse", "original": {"field": "order_id"}, "fraction": {"field": "refund", "of": "amount"}}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("client_caps") / "caps.duckdb", "Acme")
    yield server
    server.stop()


class Recorder:
    """The JSON bodies the client sent, by path."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, str, Any]] = []

    def http(self) -> httpx.Client:
        def record(request: httpx.Request) -> None:
            body = json.loads(request.content) if request.content else None
            self.bodies.append((request.method, request.url.path, body))

        return httpx.Client(event_hooks={"request": [record]})

    def last(self, method: str, suffix: str) -> Any:
        return next(body for m, path, body in reversed(self.bodies) if m == method and path.endswith(suffix))


def _client(live: LiveServer, recorder: Recorder | None = None) -> RewardsClient:
    http = recorder.http() if recorder else None
    return RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox", http_client=http)


def _processed(api: RewardsClient, event_id: str) -> r.Event:
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while (event := api.get_event(event_id)).status == "received":
        assert time.monotonic() < deadline, event
        time.sleep(0.05)
    assert event.status == "processed", event
    return event


def test_the_client_sends_caps_budgets_clawback_and_reverse_actions_and_parses_what_comes_back(
    live: LiveServer,
) -> None:
    recorder = Recorder()
    with _client(live, recorder) as api:
        asset = api.activate_asset(api.create_asset("Capped", "CAPC", "points", 2).id)
        programme = api.create_programme(
            "Capped",
            asset.id,
            limits=[{"per": "customer", "period": "month", "max_amount": "25"}],
            budget={"period": "month", "max_amount": "1000"},
            clawback="none",
        )
        assert programme.limits == [AmountLimit(period="month", max_amount="25")]
        assert programme.budget == Budget(period="month", max_amount="1000")
        assert programme.clawback == "none"
        # Only what is given is sent: None clears the budget, the caps stay.
        updated = api.update_programme(programme.id, budget=None, clawback="negative")
        assert recorder.last("PATCH", programme.id) == {"budget": None, "clawback": "negative"}
        assert (updated.limits, updated.budget, updated.clawback) == (programme.limits, None, "negative")
        earn = api.create_rule(
            programme.id,
            "shop.order",
            [{"type": "issue", "amount": {"per": "amount", "rate": "0.1"}}],
            limits=[{"period": "day", "max_count": 1}],
        )
        assert earn.limits == [CountLimit(period="day", max_count=1)]
        assert api.update_rule(earn.id, limits=[]).limits == []
        assert recorder.last("PATCH", earn.id) == {"limits": []}
        refund = api.create_rule(programme.id, "shop.refund", [REVERSE])
        (action,) = refund.actions
        assert isinstance(action, ReverseAction) and action.fraction == FractionOf(field="refund", of="amount")
        with pytest.raises(ValidationError) as refused:
            api.create_rule(programme.id, "shop.order", [{**REVERSE, "fraction": 2}])
        assert refused.value.details["field"] == "actions[0].fraction"
        api.publish(programme.id)

        customer = api.create_customer("capped-client")
        api.create_wallet(customer.id)
        orders = [
            _processed(api, api.submit_event("shop.order", f"cc-o{i}", customer.id, data={"amount": amount}).id)
            for i, amount in enumerate((200, 100))
        ]
        first, second = (api.list_executions(event_id=order.id).data[0] for order in orders)
        assert (first.amount, first.requested_amount, first.limited) == ("20.00", None, None)
        # 20.00 of the month's 25.00 cap is used: the second order's 10.00 is cut to 5.00
        assert (second.status, second.amount, second.requested_amount) == ("issued", "5.00", "10.00")
        assert isinstance(second.limited, r.LimitCut)
        assert (second.limited.scope, second.limited.period, second.limited.cut) == ("programme", "month", "5.00")
        refunded = _processed(
            api, api.submit_event("shop.refund", "cc-r0", customer.id, data={"order_id": "cc-o0", "refund": 50}).id
        )
        (reversal,) = api.list_executions(event_id=refunded.id).data
        assert reversal.status == "reversed" and isinstance(reversal.reversal, r.Reversal)
        assert (reversal.reversal.original_external_event_id, reversal.reversal.fraction) == ("cc-o0", "0.25")
        assert (reversal.reversal.target, reversal.reversal.clawback) == ("5.00", "negative")
        assert api.list_executions(event_id=orders[0].id).data[0].reversed_amount == "5.00"


def _cli(live: LiveServer, *args: str) -> Any:
    """`rewards-lab api ...` in-process (the same entry point as the command), its JSON output."""
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox"]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"REWARDS_API_KEY": live.keys["sandbox"]}), redirect_stdout(out):
        with redirect_stderr(err):
            status = main(["api", *args, *target])
    assert status == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_the_command_line_edits_caps_budgets_clawback_and_reverse_rules(live: LiveServer) -> None:
    asset = _cli(live, "assets", "create", "--name", "Cli", "--symbol", "CAPL", "--decimals", "0")
    _cli(live, "assets", "activate", asset["id"])
    limits = '[{"period": "week", "max_amount": "50"}]'
    budget = '{"period": "day", "max_amount": "100"}'
    programme = _cli(
        live,
        "programmes",
        "create",
        "--name",
        "Cli caps",
        "--asset-id",
        asset["id"],
        "--limits",
        limits,
        "--budget",
        budget,
        "--clawback",
        "available",
    )
    assert programme["limits"] == [{"per": "customer", "period": "week", "max_amount": "50"}]
    assert programme["budget"] == {"period": "day", "max_amount": "100"}
    cleared = _cli(live, "programmes", "update", programme["id"], "--clear-budget", "--clawback", "none")
    assert (cleared["budget"], cleared["clawback"], cleared["limits"]) == (None, "none", programme["limits"])
    assert _cli(live, "programmes", "update", programme["id"], "--clear-limits")["limits"] == []
    rule = _cli(
        live,
        "rules",
        "create",
        "--program-id",
        programme["id"],
        "--event-type",
        "cli.order",
        "--actions",
        '[{"type": "issue", "amount": {"fixed": "3"}}]',
        "--limits",
        '[{"period": "day", "max_count": 2}]',
    )
    assert rule["limits"] == [{"per": "customer", "period": "day", "max_count": 2}]
    reverse = '[{"type": "reverse", "original": {"field": "order_id"}, "fraction": "0.5"}]'
    refund = _cli(
        live, "rules", "create", "--program-id", programme["id"], "--event-type", "cli.refund", "--actions", reverse
    )
    assert refund["actions"] == [{"type": "reverse", "original": {"field": "order_id"}, "fraction": "0.5"}]
    edited = _cli(live, "rules", "update", rule["id"], "--limits", '[{"period": "month", "max_amount": "4"}]')
    assert edited["limits"] == [{"per": "customer", "period": "month", "max_amount": "4"}]
    _cli(live, "programmes", "publish", programme["id"])
    _cli(live, "customers", "create", "--external-id", "cli-capped")
    customer = _cli(live, "customers", "list", "--external-id", "cli-capped")[0]
    _cli(live, "wallets", "create", "--customer-id", customer["id"])
    with _client(live) as api:
        for index in range(2):
            _processed(api, api.submit_event("cli.order", f"cli-o{index}", customer["id"]).id)
        _processed(api, api.submit_event("cli.refund", "cli-r0", customer["id"], data={"order_id": "cli-o0"}).id)
    executions = _cli(live, "executions", "list", "--customer-id", customer["id"], "--all")
    by_status = {e["status"]: e for e in executions}
    assert sorted(by_status) == ["issued", "reversed"]
    issued = [e for e in executions if e["status"] == "issued"]
    # 3 then 1 (the month's cap of 4); the refund takes back half of the first reward: floor(3 x 0.5) = 1
    assert sorted((e["amount"], e["requested_amount"]) for e in issued) == [("1", "3"), ("3", None)]
    assert by_status["reversed"]["reversal"]["target"] == "1"
    assert sorted(e["reversed_amount"] or "0" for e in issued) == ["0", "1"]
