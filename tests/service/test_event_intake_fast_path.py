"""The intake's fast path (one INSERT, no read first) and the hot path's rendering, against the careful forms."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from rewards_lab import presenters
from rewards_lab.api.context import request_id_from
from rewards_lab.contract import jsonutil
from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id, new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.service import event_intake, event_queries, ledger, organizations, programmes
from rewards_lab.store.database import Database
from rewards_lab.store.interfaces import StoredEvent
from tests.conftest import World


def _body(external_id: str, **fields: Any) -> rq.EventCreate:
    values: dict[str, Any] = {"type": "order.completed", "external_event_id": external_id, "customer_id": "c1"}
    return rq.EventCreate.model_validate(values | fields)


def _store(db: Database, groups: list[tuple[Scope, list[rq.EventCreate]]]) -> list[list[StoredEvent | ServiceError]]:
    return event_intake.store_events(
        db, [(scope, [event_intake.prepare_event(b) for b in bodies]) for scope, bodies in groups]
    )


def _count(db: Database) -> int:
    (count,) = db.reader().execute("SELECT count(*) FROM events").fetchone() or (0,)
    return int(count)


def test_a_retry_of_a_stored_event_sends_the_batch_down_the_careful_path(db: Database, scope: Scope) -> None:
    (first,) = _store(db, [(scope, [_body("a", data={"n": 1}), _body("b", data={"n": 2})])])
    assert _count(db) == 2
    stored_a = first[0]
    assert isinstance(stored_a, StoredEvent)
    # "a" again (same payload), "b" with another payload, two new ids: the INSERT of all four is refused by the
    # unique index, nothing of it stays, and the careful path answers each one.
    (again,) = _store(db, [(scope, [_body("a", data={"n": 1}), _body("b", data={"n": 3}), _body("c"), _body("d")])])
    assert _count(db) == 4
    retried, mismatch, new_c, new_d = again
    assert isinstance(retried, StoredEvent) and retried.id == stored_a.id
    assert isinstance(mismatch, ServiceError) and mismatch.code == "event_duplicate_mismatch"
    assert isinstance(new_c, StoredEvent) and isinstance(new_d, StoredEvent)
    stored_ids = {row[0] for row in db.reader().execute("SELECT external_event_id FROM events").fetchall()}
    assert stored_ids == {"a", "b", "c", "d"}


def test_one_statement_stores_many_tenants_and_duplicates_inside_the_batch(db: Database, scope: Scope) -> None:
    other = Scope(organizations.create_organization(db, "Other").id, "production")
    same_id_in_both = [(scope, [_body("x"), _body("x"), _body("x", data={"n": 9})]), (other, [_body("x")])]
    mine, theirs = _store(db, same_id_in_both)
    assert isinstance(mine[0], StoredEvent) and isinstance(mine[1], StoredEvent) and mine[0].id == mine[1].id
    assert isinstance(mine[2], ServiceError) and mine[2].code == "event_duplicate_mismatch"
    assert isinstance(theirs[0], StoredEvent) and theirs[0].id != mine[0].id  # tenants never share an event
    rows = db.reader().execute("SELECT organization_id, environment FROM events ORDER BY id").fetchall()
    assert rows == [tuple(scope.params), tuple(other.params)]
    # Each answer is the row as stored (built, not read back).
    assert event_queries.get_event(db, scope, mine[0].id) == presenters.event(mine[0])


def test_the_hot_path_rendering_equals_the_models(db: Database, scope: Scope) -> None:
    bodies = [
        _body("plain"),
        _body("numbers", data={"amount": Decimal("42.50"), "big": Decimal("1E+5"), "n": 3, "f": Decimal("-0.001")}),
        _body("text", data={"name": 'Zoë "quoted" \\ \u2603', "nested": {"list": [1, None, True, "x"]}}),
        _body("when", occurred_at=datetime(2026, 11, 20, 10, 0, 0, 123456, tzinfo=UTC)),
    ]
    (stored,) = _store(db, [(scope, bodies)])
    rows = [row for row in stored if isinstance(row, StoredEvent)]
    assert len(rows) == len(bodies)
    read_back = [db.reader().execute("SELECT * FROM events WHERE id = ?", [row.id]).fetchone() for row in rows]
    assert all(read_back)
    failed = rows[0]._replace(status="failed", error_code="wallet_not_found", error_message="no wallet")
    processed = rows[1]._replace(status="processed", attempts=1, processed_at=datetime(2026, 11, 21, 8, 30))
    for row in [*rows, failed, processed]:
        fast = jsonutil.dumps({"data": presenters.event_fields(row)})
        model = jsonutil.dumps({"data": presenters.event(row).model_dump(mode="python")})
        assert fast == model
        assert f'{{"data":{presenters.event_text(row)}}}' == model  # the text the hot path writes


def test_ids_stay_increasing_and_unique_across_many_random_starts() -> None:
    made = [new_id("event") for _ in range(3000)] + new_ids("event", 500) + [new_id("event") for _ in range(600)]
    assert made == sorted(made) and len(set(made)) == len(made)


def test_request_ids_made_by_the_service_are_unique_tokens() -> None:
    made = {request_id_from("") for _ in range(2000)}
    assert len(made) == 2000
    assert all(re.fullmatch(r"req_[0-9a-f]{32}", value) for value in made)
    assert request_id_from("client-chosen.id:1") == "client-chosen.id:1"
    assert request_id_from("bad id with spaces").startswith("req_")


def test_batches_follow_each_newly_published_version_and_old_events_keep_theirs(world: World) -> None:
    """Compiled rules of published versions are kept between batches; a new version is read when it goes live,
    and an event evaluated against the old version is replayed against that one."""
    wallet = world.wallet(world.customer("shopper"))
    asset = world.asset()
    programme = world.programme(asset)
    rule = world.rule(programme, amount={"fixed": "1.00"})
    programmes.publish(world.db, world.scope, programme.id)
    event_intake.submit_event(world.db, world.scope, _body("v1-event", customer_id="shopper"))
    event_processing.process_all(world.db)
    changed = {"actions": [{"type": "issue", "amount": {"fixed": "5.00"}}]}
    programmes.update_rule(world.db, world.scope, rule.id, validate(rq.RuleUpdate, changed))
    programmes.publish(world.db, world.scope, programme.id)
    event_intake.submit_event(world.db, world.scope, _body("v2-event", customer_id="shopper"))
    event_processing.process_all(world.db)
    balances = ledger.wallet_balances(world.db, world.scope, wallet.id).balances
    assert balances[0].balance == "6.00"  # 1.00 under the first version, then 5.00 under the second
    versions = [
        row[0]
        for row in world.db.reader()
        .execute("SELECT version_number FROM reward_executions ORDER BY external_event_id")
        .fetchall()
    ]
    assert versions == [1, 2]


def test_the_shared_encoders_write_and_read_what_simplejson_s_functions_do() -> None:
    """jsonutil keeps one encoder and decoder (simplejson builds one per call for non-default options)."""
    import hashlib

    import simplejson

    value = {
        "amount": Decimal("42.50"),
        "list": [1, None, True, 'q"\\\u2603', Decimal("1E+5")],
        "aware": datetime(2026, 1, 1, 10, tzinfo=UTC),
        "naive": datetime(2026, 1, 1, 10),
        "nested": {"z": 1, "a": Decimal("-0.001")},
    }
    text = simplejson.dumps(value, use_decimal=True, separators=(",", ":"), default=jsonutil._default)
    assert jsonutil.dumps(value) == text
    assert repr(jsonutil.loads(text.encode())) == repr(simplejson.loads(text, use_decimal=True))
    canonical = simplejson.dumps(
        jsonutil._canonical(value), use_decimal=True, sort_keys=True, separators=(",", ":"), default=str
    )
    assert jsonutil.canonical_hash(value) == hashlib.sha256(canonical.encode()).hexdigest()
