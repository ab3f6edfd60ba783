"""Push a programme file to a real `rewards-lab serve`: plan, apply, push again (no change), interrupted push and
resume (the answer of the Nth write lost after the server committed it), a tampered remote, permission and
environment errors with their codes, and verify comparing live and lab simulations."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rewards_lab.client import ApiConnectionError, AuthorizationError, RetryPolicy, RewardsClient
from rewards_lab.contract import resources as r
from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme, save_programme
from rewards_lab.lab.push import apply, make_plan, push
from rewards_lab.lab.push_verify import sample_events, verify
from tests.live_server import LiveServer, cli, start_server

SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"
FAST = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.02)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("push") / "push.duckdb", "Acme")
    yield server
    server.stop()


def variant(tag: str, rate: str | None = None) -> ProgrammeDefinition:
    """The spring programme under its own symbol and name, so that tests share one server without meeting."""
    data = load_programme(SPRING).payload()
    data["asset"]["symbol"] = f"S{tag}"
    data["programme"]["name"] = f"Spring {tag}"
    if rate is not None:
        data["rules"][0]["actions"][0]["amount"]["rate"] = rate
    return ProgrammeDefinition.model_validate(data)


def client(live: LiveServer, environment: str = "sandbox", key: str | None = None, **kwargs: object) -> RewardsClient:
    return RewardsClient(
        live.base_url,
        key or live.keys[environment],
        live.organization_id,
        environment,
        **kwargs,  # type: ignore[arg-type]
    )


def live_state(
    api: RewardsClient, definition: ProgrammeDefinition
) -> tuple[list[r.Asset], list[r.Programme], list[r.ProgrammeVersion]]:
    assets = [a for a in api.iter_assets() if a.symbol == definition.asset.symbol]
    programmes = [p for p in api.iter_programmes() if p.name == definition.programme.name]
    versions = list(api.iter_versions(programmes[0].id)) if programmes else []
    return assets, programmes, versions


def assert_pushed_once(api: RewardsClient, definition: ProgrammeDefinition) -> None:
    assets, programmes, versions = live_state(api, definition)
    assert [a.status for a in assets] == ["active"]
    assert len(programmes) == 1 and programmes[0].asset_id == assets[0].id
    published = [v for v in versions if v.status == "published"]
    draft = [v for v in versions if v.status == "draft"]
    assert [v.number for v in published] == [1]
    assert len(published[0].rules) == len(definition.rules) == len(draft[0].rules)


def test_push_then_push_again_changes_nothing(live: LiveServer) -> None:
    definition = variant("A")
    with client(live) as api:
        plan = make_plan(definition, api)
        kinds = [step.kind for step in plan.steps]
        assert kinds == ["create_asset", "activate_asset", "create_programme", *["add_rule"] * 3, "publish"]
        assert plan.to_dict()["steps"][3]["fingerprint"] == definition.rules[0].fingerprint()
        assert "+ create asset SA" in plan.text() and "^ publish the draft as version 1" in plan.text()
        result = apply(plan, api)
        assert len(result.executed) == 7 and result.rounds == 1
        assert_pushed_once(api, definition)
        again = make_plan(definition, api)
        assert not again.changes and not again.blockers
        assert "No changes" in again.text() and len(again.matches) == 4
        assert not push(definition, api).changed
        assert_pushed_once(api, definition)


@pytest.mark.parametrize("lost_write", range(1, 8))
def test_interrupted_push_resumes_without_duplicates(live: LiveServer, lost_write: int) -> None:
    """The Nth write reaches the server and commits; its answer and everything after is lost (as when the
    process dies). Re-running the push completes it, and nothing exists twice."""
    definition = variant(f"I{lost_write}")

    class Cut(httpx.BaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.HTTPTransport()
            self.writes = 0

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if self.writes >= lost_write:
                raise httpx.ConnectError("the push process is gone", request=request)
            response = self.inner.handle_request(request)
            response.read()
            if request.method != "GET":
                self.writes += 1
                if self.writes == lost_write:
                    raise httpx.ReadError("answer lost", request=request)
            return response

        def close(self) -> None:
            self.inner.close()

    cut = Cut()
    with client(live, http_client=httpx.Client(transport=cut), retry=FAST, sleep=lambda s: None) as api:
        with pytest.raises(ApiConnectionError):
            push(definition, api)
    assert cut.writes == lost_write
    with client(live) as api:
        resumed = make_plan(definition, api)
        assert len(resumed.steps) == 7 - lost_write  # exactly what was not done yet
        apply(resumed, api)
        assert_pushed_once(api, definition)
        assert not make_plan(definition, api).changes


def test_tampered_remote_shows_in_the_plan_and_is_undone(live: LiveServer) -> None:
    definition = variant("T")
    with client(live) as api:
        push(definition, api)
        _, programmes, _ = live_state(api, definition)
        by_hand = api.create_rule(programmes[0].id, "order.completed", [{"type": "issue", "amount": {"fixed": "99"}}])
        plan = make_plan(definition, api)
        assert [(s.kind, s.rule_id) for s in plan.steps] == [("remove_rule", by_hand.id)]
        assert f"- remove rule {by_hand.id} from the draft" in plan.text()
        assert "published version 1 holds the file's rules" in plan.text()
        apply(plan, api)
        assert not make_plan(definition, api).changes
        # a changed file: the old rule leaves the draft, the new one enters, version 2 is published
        changed = variant("T", rate="0.07")
        plan = make_plan(changed, api)
        assert sorted(s.kind for s in plan.steps) == ["add_rule", "publish", "remove_rule"]
        apply(plan, api)
        _, _, versions = live_state(api, changed)
        assert [v.number for v in versions if v.status == "published"] == [1, 2]
        assert verify(changed, api).ok


class NoPublish(httpx.BaseTransport):
    """The network fails for publish requests only: the push stops with its rules in the draft."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/publish"):
            raise httpx.ConnectError("unreachable", request=request)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def test_rule_deleted_by_hand_is_added_again_under_a_fresh_key(live: LiveServer) -> None:
    """Re-adding a rule to the same draft replays the first push's idempotent answer (the rule since deleted by
    hand); apply sees the draft still differs and adds it again under the next round's key."""
    definition = variant("D")
    with client(live, http_client=httpx.Client(transport=NoPublish()), retry=FAST, sleep=lambda s: None) as api:
        with pytest.raises(ApiConnectionError):
            push(definition, api)
    with client(live) as api:
        _, programmes, versions = live_state(api, definition)
        draft = next(v for v in versions if v.status == "draft")
        api.delete_rule(draft.rules[0].id)
        plan = make_plan(definition, api)
        assert [s.kind for s in plan.steps] == ["add_rule", "publish"]
        result = apply(plan, api)
        assert result.rounds == 2
        assert_pushed_once(api, definition)


def test_permission_error_is_surfaced_with_its_code_and_a_full_key_completes(live: LiveServer) -> None:
    definition = variant("P")
    with client(live) as admin:
        limited = admin.create_api_key(
            "no publish", ["assets.view", "assets.edit", "rewards.view", "rewards.edit"]
        ).secret
    with client(live, key=limited) as api, pytest.raises(AuthorizationError) as denied:
        push(definition, api)
    assert denied.value.code == "permission_denied" and denied.value.http_status == 403
    assert denied.value.details["permission"] == "rewards.activate"
    with client(live) as api:
        assert [s.kind for s in make_plan(definition, api).steps] == ["publish"]
        push(definition, api)
        assert_pushed_once(api, definition)


def test_verify_finds_no_difference_and_reports_one_when_there_is(live: LiveServer) -> None:
    definition = variant("V")
    with client(live) as api:
        push(definition, api)
        report = verify(definition, api)
        assert report.ok and report.checks == sum(len(sample_events(rule)) for rule in definition.rules)
        assert "no difference" in report.text()
        other = variant("V", rate="0.06")  # not what is live
        mismatch = verify(other, api)
    assert not mismatch.ok and {d.rule_index for d in mismatch.differences} == {0}
    assert all(d.live == "rule missing" for d in mismatch.differences)


def test_text_operators_push_and_verify_with_samples_on_both_sides_of_each(live: LiveServer) -> None:
    data = variant("T").payload()
    text = [("email", "ends_with", "@shop.fr"), ("coupon", "starts_with", "SPRING"), ("note", "contains", "vip")]
    conditions = [{"field": field, "operator": operator, "value": value} for field, operator, value in text]
    rule = {
        "event_type": "order.completed",
        "conditions": conditions,
        "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
    }
    data["rules"].append(rule)
    definition = ProgrammeDefinition.model_validate(data)
    samples = sample_events(definition.rules[-1])
    base = samples[0]  # every condition holds: each field at its operator's passing value
    assert (base["email"], base["coupon"], base["note"]) == ("@shop.fr", "SPRING", ["vip"])
    assert any(event.get("coupon") == "~SPRING" for event in samples)  # one that does not start with it
    assert any(event.get("email") == "@shop.fr~" for event in samples)  # one that does not end with it
    with client(live) as api:
        push(definition, api)
        report = verify(definition, api)
    assert report.ok, report.text()


def run_push(live: LiveServer, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REWARDS_API_KEY": key}
    base = ["push", *args, "--base-url", live.base_url, "--org", live.organization_id]
    return subprocess.run(cli(*base), env=env, capture_output=True, text=True, timeout=120)


def test_push_command_plans_applies_and_refuses_the_wrong_environment(live: LiveServer, tmp_path: Path) -> None:
    path = save_programme(variant("C"), tmp_path / "c.json")
    planned = run_push(live, live.keys["sandbox"], str(path), "--env", "sandbox", "--plan-only")
    assert planned.returncode == 0, planned.stderr
    assert "+ create asset SC" in planned.stdout and "7 change(s)" in planned.stdout
    as_json = run_push(live, live.keys["sandbox"], str(path), "--env", "sandbox", "--plan-only", "--json")
    steps = json.loads(as_json.stdout)["plan"]["steps"]
    assert [s["kind"] for s in steps][:3] == ["create_asset", "activate_asset", "create_programme"]
    applied = run_push(live, live.keys["sandbox"], str(path), "--env", "sandbox", "--yes")
    assert applied.returncode == 0, applied.stderr
    assert "Applied 7 step(s)" in applied.stdout and "no difference" in applied.stdout
    again = run_push(live, live.keys["sandbox"], str(path), "--env", "sandbox", "--yes")
    assert again.returncode == 0 and "No changes" in again.stdout
    wrong = run_push(live, live.keys["sandbox"], str(path), "--env", "production", "--yes")
    assert wrong.returncode == 1
    assert "authorization_error environment_mismatch" in wrong.stderr
    assert "belongs to sandbox, not production" in wrong.stderr
    with client(live, "production") as production:
        assert [a for a in production.iter_assets() if a.symbol == "SC"] == []  # nothing pushed there
    no_key = subprocess.run(
        cli("push", str(path), "--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox"),
        env={k: v for k, v in os.environ.items() if k != "REWARDS_API_KEY"},
        capture_output=True,
        text=True,
    )
    assert no_key.returncode == 2 and "REWARDS_API_KEY" in no_key.stderr


def test_killed_push_process_is_completed_by_running_it_again(live: LiveServer, tmp_path: Path) -> None:
    """A real `rewards-lab push` process killed with SIGKILL as soon as its programme appears on the live side
    (mid-push: its rules and the publish are still to come); running the command again completes the push."""
    definition = variant("K")
    path = save_programme(definition, tmp_path / "k.json")
    env = {**os.environ, "REWARDS_API_KEY": live.keys["sandbox"]}
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox", "--yes"]
    process = subprocess.Popen(cli("push", str(path), *target), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with client(live) as api:
        deadline = time.monotonic() + 60
        while not live_state(api, definition)[1] and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        process.kill()
        process.communicate()
        again = run_push(live, live.keys["sandbox"], str(path), "--env", "sandbox", "--yes")
        assert again.returncode == 0, again.stderr
        assert "no difference" in again.stdout, again.stdout
        assert_pushed_once(api, definition)


@pytest.mark.parametrize("name", sorted(p.name for p in SPRING.parent.glob("*.json")))
def test_every_example_programme_pushes_and_verifies(live: LiveServer, name: str) -> None:
    definition = load_programme(SPRING.parent / name)
    with client(live, "production") as api:  # production of the same organization: its own symbols
        push(definition, api)
        assert not make_plan(definition, api).changes
        report = verify(definition, api)
    assert report.ok, report.text()
    assert report.checks >= 3 * len(definition.rules)


def test_the_schedule_priority_and_beneficiaries_are_pushed_and_a_changed_window_republishes(live: LiveServer) -> None:
    data = load_programme(SPRING.parent / "december_campaign.json").payload()
    data["asset"]["symbol"], data["programme"]["name"] = "XSCH", "December schedule"
    definition = ProgrammeDefinition.model_validate(data)
    with client(live) as api:
        push(definition, api)
        (programme,) = [p for p in api.iter_programmes() if p.name == "December schedule"]
        (published,) = [v for v in api.iter_versions(programme.id) if v.status == "published"]
        assert (published.timezone, published.starts_at, published.ends_at) == (
            "Europe/Paris",
            definition.programme.starts_at,
            definition.programme.ends_at,
        )
        assert [(rule.priority, rule.stop_processing) for rule in published.rules] == [(0, True), (1, False)]
        data["programme"]["ends_at"] = "2027-01-07T00:00:00+01:00"  # the campaign runs a week longer
        longer = ProgrammeDefinition.model_validate(data)
        plan = make_plan(longer, api)
        assert [step.kind for step in plan.steps] == ["update_schedule", "publish"]
        push(longer, api)
        assert not make_plan(longer, api).changes
        versions = [v for v in api.iter_versions(programme.id) if v.status == "published"]
        assert [v.ends_at for v in versions] == [definition.programme.ends_at, longer.programme.ends_at]
