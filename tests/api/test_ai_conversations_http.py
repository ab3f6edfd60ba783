"""Support conversations over a real server on 127.0.0.1: stored and returned, follow-ups that keep their context
and cite the tenant's records, `conversation_not_found` for another tenant's conversation, and `ai.use` checked."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.http_helpers import ok
from tests.http_helpers import refused as error
from tests.live_server import LiveServer, two_tenant_server

PROCESS_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict[str, Any]]]:
    yield from two_tenant_server(tmp_path_factory.mktemp("ai") / "service.duckdb")


def _world(http: httpx.Client) -> dict[str, str]:
    """alice, a STAR asset, a published rule (orders of at least 20 earn 10%), and two processed orders."""
    customer = ok(http.post("/customers", json={"external_id": "alice"}), 201)
    ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)
    asset = ok(http.post("/assets", json={"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"), 200)
    programme = ok(http.post("/reward-programs", json={"name": "Spring", "asset_id": asset["id"]}), 201)
    rule = {
        "program_id": programme["id"],
        "event_type": "order.completed",
        "conditions": [{"field": "amount", "operator": "gte", "value": 20}],
        "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 0.1}}],
    }
    ok(http.post("/reward-rules", json=rule), 201)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    ids = {"customer": customer["id"], "programme": programme["id"]}
    for external_id, amount in (("o-1", 42), ("o-2", 5)):
        event = {"type": "order.completed", "external_event_id": external_id, "customer_id": "alice"}
        ids[external_id] = ok(http.post("/events", json={**event, "data": {"amount": amount}}), 202)["id"]
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    while any(ok(http.get(f"/events/{ids[e]}"), 200)["status"] == "received" for e in ("o-1", "o-2")):
        assert time.monotonic() < deadline, "the worker did not process the events"
        time.sleep(0.1)
    return ids


def _sources(message: dict[str, Any]) -> list[str]:
    return [hit["source"] for hit in message["sources"]]


def test_a_conversation_is_stored_and_follow_ups_keep_their_context(
    servers: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, _ = servers
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        ids = _world(http)
        conversation = ok(http.post("/ai/conversations"), 201)
        assert conversation["id"].startswith("cnv_") and conversation["turns"] == []
        path = f"/ai/conversations/{conversation['id']}"
        first = ok(http.post(f"{path}/messages", json={"content": "Why did order o-2 get no points?"}), 201)
        assert first["conversation_id"] == conversation["id"]
        assert _sources(first)[:2] == [ids["o-2"], f"{ids['programme']} v1"]
        assert "amount = 5 >= 20 does not hold" in first["content"]
        why = ok(http.post(f"{path}/messages", json={"content": "why?"}), 201)
        assert _sources(why)[0] == ids["o-2"]
        other_event = ok(http.post(f"{path}/messages", json={"content": "and o-1?"}), 201)
        assert _sources(other_event)[0] == ids["o-1"] and "issued 4.20" in other_event["content"]
        balance = ok(http.post(f"{path}/messages", json={"content": "what is that customer's balance?"}), 201)
        assert _sources(balance)[0] == ids["customer"] and "4.20 STAR" in balance["content"]
        stored = ok(http.get(path), 200)
        assert [turn["role"] for turn in stored["turns"]] == ["user", "assistant"] * 4
        assert [turn["content"] for turn in stored["turns"][::2]] == [
            "Why did order o-2 get no points?",
            "why?",
            "and o-1?",
            "what is that customer's balance?",
        ]
        assert stored["turns"][3]["content"] == why["content"] and stored["turns"][3]["sources"] == why["sources"]
        assert stored["updated_at"] >= stored["created_at"]
        error(http.get("/ai/conversations/cnv_00000000000000000000000000000000"), 404, "conversation_not_found")
        unknown = http.post("/ai/conversations/cnv_00000000000000000000000000000000/messages", json={"content": "hi"})
        error(unknown, 404, "conversation_not_found")


def test_a_client_named_conversation_is_created_by_its_first_message(
    servers: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, _ = servers
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        error(http.get("/ai/conversations/desk-7"), 404, "conversation_not_found")
        reply = ok(http.post("/ai/conversations/desk-7/messages", json={"content": "what does asset_paused mean"}), 201)
        assert reply["conversation_id"] == "desk-7" and reply["sources"][0]["title"] == "asset_paused"
        assert len(ok(http.get("/ai/conversations/desk-7"), 200)["turns"]) == 2


def test_another_tenants_conversation_is_not_found(servers: tuple[LiveServer, dict[str, Any]]) -> None:
    live, other = servers
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        mine = ok(http.post("/ai/conversations"), 201)["id"]
        ok(http.post("/ai/conversations/shared-name/messages", json={"content": "rate limits?"}), 201)
    keys = other["api_keys"]
    assert isinstance(keys, dict)
    theirs = {
        "Authorization": f"Bearer {keys['sandbox']}",
        "X-Organization-ID": str(other["organization_id"]),
        "X-Environment": "sandbox",
    }
    with httpx.Client(base_url=live.base_url, headers=theirs, timeout=10) as http:
        error(http.get(f"/ai/conversations/{mine}"), 404, "conversation_not_found")
        error(http.post(f"/ai/conversations/{mine}/messages", json={"content": "hi"}), 404, "conversation_not_found")
        error(http.get("/ai/conversations/shared-name"), 404, "conversation_not_found")
        # The same client name in another tenant is another conversation: it never sees the first one's turns.
        ok(http.post("/ai/conversations/shared-name/messages", json={"content": "webhook retries?"}), 201)
        assert len(ok(http.get("/ai/conversations/shared-name"), 200)["turns"]) == 2
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        turns = ok(http.get("/ai/conversations/shared-name"), 200)["turns"]
        assert [turn["content"] for turn in turns[::2]] == ["rate limits?"]


def test_the_ai_permission_is_checked(servers: tuple[LiveServer, dict[str, Any]]) -> None:
    live, _ = servers
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        conversation = ok(http.post("/ai/conversations"), 201)["id"]
        key = ok(http.post("/developer/api-keys", json={"name": "viewer", "permissions": ["customers.view"]}), 201)
    headers = {**live.headers(), "Authorization": f"Bearer {key['secret']}"}
    with httpx.Client(base_url=live.base_url, headers=headers, timeout=10) as http:
        for response in (
            http.post("/ai/conversations"),
            http.get(f"/ai/conversations/{conversation}"),
            http.post(f"/ai/conversations/{conversation}/messages", json={"content": "hi"}),
        ):
            assert error(response, 403, "permission_denied")["details"]["permission"] == "ai.use"
