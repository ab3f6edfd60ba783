"""The support assistant over a real DuckDB file: answers from the tenant's records with their sources, follow-ups
that keep the earlier turns' context, conversations stored per tenant, and `conversation_not_found`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.ai_eval import Names, seed
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.service import conversations
from rewards_lab.store.database import Database


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Database, Names]]:
    database = Database(tmp_path_factory.mktemp("support") / "shop.duckdb")
    names = seed(database)
    yield database, names
    database.close()


def ask(shop: tuple[Database, Names], conversation: str, question: str) -> r.AssistantMessage:
    database, names = shop
    body = validate(rq.MessageCreate, {"content": names.fill(question)})
    return conversations.conversation_message(database, names.scope, conversation, body)


def cited(message: r.AssistantMessage) -> list[str]:
    return [hit.source for hit in message.sources]


def test_an_event_that_issued_nothing_is_explained_by_its_rules_reasons(shop: tuple[Database, Names]) -> None:
    _, names = shop
    reply = ask(shop, "nothing", "Why did order o-2 get no points?")
    assert cited(reply)[:2] == [names.resolve("{event:o-2}"), names.resolve("{version:spring:3}")]
    assert "is processed" in reply.content
    assert "amount = 12.00 >= 20 does not hold" in reply.content  # the condition's own reason, with the value
    other_type = ask(shop, "nothing-2", "Why did news-1 earn nothing?")
    assert "No live programme had a rule for events of type newsletter.signup" in other_type.content


def test_an_issued_event_cites_its_execution_and_the_values_its_rule_read(shop: tuple[Database, Names]) -> None:
    database, names = shop
    reply = ask(shop, "issued", "What did event o-1 issue?")
    execution_id = (
        database.reader()
        .execute("SELECT id FROM reward_executions WHERE event_id = ?", [names.resolve("{event:o-1}")])
        .fetchone()
    )
    assert execution_id is not None
    assert cited(reply)[:3] == [names.resolve("{event:o-1}"), names.resolve("{version:spring:3}"), execution_id[0]]
    assert "issued 2.12" in reply.content and '"amount":"42.50"' in reply.content
    pending = ask(shop, "pending", "What happened to event o-5?")
    assert "is received" in pending.content and "not been processed yet" in pending.content


def test_a_balance_answer_gives_the_next_expiry_and_cites_customer_and_wallet(shop: tuple[Database, Names]) -> None:
    _, names = shop
    reply = ask(shop, "balance", "When do alice's points expire?")
    assert cited(reply)[:2] == [names.resolve("{customer:alice}"), names.resolve("{wallet:alice}")]
    assert "2.12 STAR" in reply.content and "of which 2.12 expires next, at 2027-" in reply.content
    none = ask(shop, "balance-2", "dave's balance please")
    assert cited(none)[0] == names.resolve("{customer:dave}") and "0 wallet(s)" in none.content


def test_the_version_live_at_a_time_follows_the_publication_times(shop: tuple[Database, Names]) -> None:
    _, names = shop
    for day, number in (("2026-02-01", 1), ("2026-03-01", 2), ("2026-05-31", 2), ("2026-06-02", 3)):
        reply = ask(shop, f"live-{day}", f"Which version of Spring launch was live on {day}?")
        assert cited(reply)[0] == names.resolve(f"{{version:spring:{number}}}"), day
    before = ask(shop, "live-before", "Was Referral bonus live on 2026-01-01?")
    assert cited(before)[0] == names.resolve("{programme:referral}")
    assert "No version of programme Referral bonus" in before.content


def test_follow_ups_keep_the_earlier_turns_context(shop: tuple[Database, Names]) -> None:
    _, names = shop
    first = ask(shop, "follow", "Why did o-4 issue nothing?")
    assert cited(first)[0] == names.resolve("{event:o-4}")
    why = ask(shop, "follow", "why?")  # names nothing: the same event
    assert cited(why)[0] == names.resolve("{event:o-4}") and "19.99 >= 20 does not hold" in why.content
    balance = ask(shop, "follow", "what is that customer's balance?")  # the event's customer: carol
    assert cited(balance)[0] == names.resolve("{customer:carol}")
    other = ask(shop, "follow", "and customer bob?")
    assert cited(other)[0] == names.resolve("{customer:bob}") and "6.00 STAR" in other.content
    fresh = ask(shop, "fresh", "why?")  # another conversation has no context: the documentation answers
    assert names.resolve("{event:o-4}") not in cited(fresh)


def test_conversations_are_stored_in_order_and_per_tenant(shop: tuple[Database, Names]) -> None:
    database, names = shop
    ask(shop, "stored", "What is alice's balance?")
    ask(shop, "stored", "and customer bob?")
    stored = conversations.get_conversation(database, names.scope, "stored")
    assert [(t.role, t.content) for t in stored.turns[::2]] == [
        ("user", "What is alice's balance?"),
        ("user", "and customer bob?"),
    ]
    assert [t.role for t in stored.turns] == ["user", "assistant", "user", "assistant"]
    assert stored.turns[3].sources[0].source == names.resolve("{customer:bob}")
    other = Scope(names.scope.organization_id, "production")  # the same tenant's other environment
    with pytest.raises(ServiceError) as missing:
        conversations.get_conversation(database, other, "stored")
    assert missing.value.code == "conversation_not_found"


def test_a_service_id_must_exist_and_a_client_name_is_created_by_its_first_message(
    shop: tuple[Database, Names],
) -> None:
    database, names = shop
    created = conversations.create_conversation(database, names.scope)
    assert created.id.startswith("cnv_") and created.turns == []
    ask(shop, created.id, "What is alice's balance?")
    assert len(conversations.get_conversation(database, names.scope, created.id).turns) == 2
    with pytest.raises(ServiceError) as unknown:
        ask(shop, "cnv_0000000000000000000000000000dead", "What is alice's balance?")
    assert unknown.value.code == "conversation_not_found"
    other = Scope(names.scope.organization_id, "production")
    body = validate(rq.MessageCreate, {"content": "hello"})
    with pytest.raises(ServiceError) as foreign:  # another scope's service id is not found there
        conversations.conversation_message(database, other, created.id, body)
    assert foreign.value.code == "conversation_not_found"


def test_another_tenants_records_are_never_cited(tmp_path: Path) -> None:
    with Database(tmp_path / "two.duckdb") as database:
        names = seed(database)  # the seed's other tenant has its own alice and o-1
        other_ids = {
            row[0]
            for row in database.reader()
            .execute(
                "SELECT id FROM customers WHERE organization_id <> ? UNION ALL "
                "SELECT id FROM events WHERE organization_id <> ?",
                [names.scope.organization_id] * 2,
            )
            .fetchall()
        }
        assert len(other_ids) == 2
        for question in ("What is alice's balance?", "What did event o-1 issue?"):
            reply = conversations.conversation_message(
                database, names.scope, "iso", validate(rq.MessageCreate, {"content": question})
            )
            assert not other_ids & set(cited(reply)), question
