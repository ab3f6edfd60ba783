"""The client's methods are the registry's operations: the checked-in `client/_generated.py` is what
tools/generate_client.py makes now, every documented operation has a typed, documented method on both clients,
and a new field or operation reaches a method and the wire with no other edit. Without a server: the `Call`s the
methods build are compared, not sent."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_origin

import pytest

from rewards_lab.client import AsyncRewardsClient, RewardsClient
from rewards_lab.client import _generated as generated
from rewards_lab.client._build import UNSET, build
from rewards_lab.contract import operation_docs as docs
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.operation_parameters import has_method, method_name, parameters
from rewards_lab.contract.operations import OPERATIONS, Operation

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("generate_client", ROOT / "tools" / "generate_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _module(text: str) -> types.ModuleType:
    """The generated text as a module, to look at its functions."""
    module = types.ModuleType("fresh_generated")
    exec(compile(text, "fresh_generated", "exec"), module.__dict__)
    return module


@pytest.fixture
def client() -> Iterator[RewardsClient]:
    with RewardsClient("http://127.0.0.1:9/v1", "key", "org_1", "sandbox") as api:
        yield api


def test_the_checked_in_module_is_a_fresh_generation() -> None:
    text = (ROOT / "rewards_lab" / "client" / "_generated.py").read_text(encoding="utf-8")
    assert _generator().render() == text, "run `python tools/generate_client.py` and commit"


def test_every_documented_operation_is_a_method_of_both_clients_and_every_paged_list_an_iterator() -> None:
    documented = [op for op in OPERATIONS.values() if op.documented]
    assert [op for op in OPERATIONS.values() if has_method(op)] == documented
    for op in documented:
        for cls in (RewardsClient, AsyncRewardsClient):
            assert callable(getattr(cls, method_name(op))), (cls, op.name)
            if op.listing == "page":
                assert callable(getattr(cls, f"iter_{method_name(op).removeprefix('list_')}")), (cls, op.name)


def test_methods_show_their_real_parameters_types_and_documentation(client: RewardsClient) -> None:
    signature = inspect.signature(client.create_programme)
    assert list(signature.parameters)[:2] == ["name", "asset_id"]
    assert signature.parameters["limits"].annotation == "Sequence[Mapping[str, Any]] | None"
    assert signature.parameters["max_event_age_days"].default is UNSET  # None sends null: no bound
    assert signature.return_annotation == "resources.Programme"
    assert "caps per customer" in (client.create_programme.__doc__ or "")
    assert "None: remove the draft's budget" in (client.update_programme.__doc__ or "")
    iterator = inspect.signature(client.iter_customers)
    assert "external_id" in iterator.parameters and iterator.return_annotation == "Iterator[resources.Customer]"
    awaited = inspect.signature(AsyncRewardsClient("http://x/v1", "k", "org", "sandbox").get_customer)
    assert awaited.return_annotation == "Awaitable[resources.Customer]"
    assert inspect.signature(RewardsClient.get_rule).parameters.keys() == {"rule_id"}  # on the class: the builder


def test_what_the_methods_send() -> None:
    """Left out: not sent; None: not sent, but null where the registry says null clears (`Operation.nulls`)."""
    assert generated.create_wallet("cus_1").body == {"customer_id": "cus_1"}
    assert generated.update_programme("prg_1", name=None, budget=None, clawback="none").body == {
        "budget": None,
        "clawback": "none",
    }
    assert generated.update_rule("rul_1", limits=None, priority=None).body == {}
    assert generated.update_rule("rul_1", name=None, limits=()).body == {"name": None, "limits": []}
    assert generated.create_programme("P", "ast_1").body == {"name": "P", "asset_id": "ast_1"}
    assert generated.create_programme("P", "ast_1", max_event_age_days=None).body["max_event_age_days"] is None
    assert generated.publish("prg_1").body == {}
    assert generated.publish("prg_1", guard_override="agreed").body == {"guard_override": {"reason": "agreed"}}
    restore = generated.restore_version("prg/1", 3, idempotency_key="k")
    assert (restore.path, restore.idempotent, restore.idempotency_key) == (
        "/reward-programs/prg%2F1/versions/3/restore",
        True,
        "k",
    )
    logs = generated.list_logs(since="2026-01-01", status="4xx", limit=5)
    assert logs.params == {"status": "4xx", "from": "2026-01-01", "limit": 5} and logs.listing and logs.resendable
    simulated = generated.simulate_programme("prg_1", {"type": "t"}, version=2)
    assert (simulated.params, simulated.idempotent, simulated.resendable) == ({"version": "2"}, False, True)
    assert not generated.create_api_key("k", ["customers.view"]).resendable  # a second key would be made
    versions = generated.list_versions("prg_1", limit=2)
    assert versions.params == {"limit": 2} and versions.listing  # paged like every list
    assert versions.parse({"data": [], "next_cursor": None, "has_more": False}).data == []
    assert generated.delete_rule("rul_1").parse == r.Rule.model_validate  # the registry's response model


def _with_nickname(monkeypatch: pytest.MonkeyPatch) -> None:
    class CustomerCreateWithNickname(rq.CustomerCreate):
        nickname: str | None = None

    entry = dataclasses.replace(OPERATIONS["create_customer"], request=CustomerCreateWithNickname)
    monkeypatch.setitem(OPERATIONS, "create_customer", entry)


def test_a_new_optional_field_is_a_keyword_that_reaches_the_body_with_no_other_edit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _with_nickname(monkeypatch)
    fresh = _module(_generator().render())
    keyword = inspect.signature(fresh.create_customer).parameters["nickname"]
    assert (keyword.kind, keyword.default, keyword.annotation) == (inspect.Parameter.KEYWORD_ONLY, None, "str | None")
    assert fresh.create_customer("ext-1", nickname="Ace").body == {"external_id": "ext-1", "nickname": "Ace"}
    assert build("create_customer", {"external_id": "ext-1"}).body == {"external_id": "ext-1"}


class TierCreate(rq.RequestModel):
    name: str
    threshold: int | None = None


def test_a_new_operation_is_a_method_with_no_other_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    tiers = Operation("create_tier", "POST", "/tiers", None, request=TierCreate, response=r.Asset, status=201)
    monkeypatch.setitem(OPERATIONS, "create_tier", dataclasses.replace(tiers, idempotency="optional"))
    fresh = _module(_generator().render())
    signature = inspect.signature(fresh.create_tier)
    assert list(signature.parameters) == ["name", "threshold", "idempotency_key"]
    assert signature.return_annotation == "Call[resources.Asset]"
    call = fresh.create_tier("Gold", threshold=500)
    assert (call.method, call.path, call.body, call.idempotent) == (
        "POST",
        "/tiers",
        {"name": "Gold", "threshold": 500},
        True,
    )
    assert isinstance(fresh.Operations.__dict__["create_tier"], generated.Operation)


def test_the_documentation_tables_name_what_exists() -> None:
    assert set(docs.SUMMARIES) <= set(OPERATIONS) and set(docs.METHOD_NAMES) <= set(OPERATIONS)
    for name, described in docs.DOCS.items():
        assert set(described) <= {p.name for p in parameters(OPERATIONS[name])}, name
    for name, parameter in docs.CONVENIENCES:
        assert parameter in {p.name for p in parameters(OPERATIONS[name])}, (name, parameter)


def _nullable(annotation: Any) -> bool:
    return get_origin(annotation) is not None and type(None) in getattr(annotation, "__args__", ())


def test_a_field_whose_null_is_not_its_default_says_what_null_does() -> None:
    """Null and absence differ there, so the client must be able to send null: `Operation.nulls` says so."""
    for op in OPERATIONS.values():
        for name, info in op.request.model_fields.items() if op.request else ():
            if _nullable(info.annotation) and not info.is_required() and info.get_default() is not None:
                assert name in op.nulls, (op.name, name)
