"""`rewards-lab api ai ...` against a real server: start a conversation, ask in it (a follow-up keeps the customer
the first question named), show it; an unknown service id fails with conversation_not_found."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.test_api_cli import failed, ok
from tests.live_server import LiveServer, start_server


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("api_cli_ai") / "api.duckdb", "Acme")
    yield server
    server.stop()


def test_the_ai_commands_wrap_the_conversation_operations(live: LiveServer) -> None:
    alice = ok(live, "customers", "create", "--external-id", "alice")
    ok(live, "customers", "create", "--external-id", "bob")
    conversation = ok(live, "ai", "start")
    assert conversation["id"].startswith("cnv_") and conversation["turns"] == []
    first = ok(live, "ai", "message", conversation["id"], "--content", "What is alice's balance?")
    assert first["conversation_id"] == conversation["id"] and first["sources"][0]["source"] == alice["id"]
    follow_up = ok(live, "ai", "message", conversation["id"], "--content", "how many wallets?")
    assert follow_up["sources"][0]["source"] == alice["id"]  # the customer the conversation is about
    shown = ok(live, "ai", "conversation", conversation["id"])
    assert [turn["content"] for turn in shown["turns"][::2]] == ["What is alice's balance?", "how many wallets?"]
    assert ok(live, "ai", "search", "--query", "asset paused", "--limit", "1")[0]["title"] == "asset_paused"
    assert "conversation_not_found" in failed(live, "ai", "conversation", "cnv_00000000000000000000000000000000")
