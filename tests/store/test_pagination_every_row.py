"""Keyset pagination shows every row exactly once, in one order, whatever the sort field, its NULLs and ties, the
direction and the page size (issue 14, item 6: with `sort=occurred_at`, events without one never appeared)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import SORT_KINDS, PageRequest
from rewards_lab.contract.validation import validate
from rewards_lab.service import (
    assets,
    customers,
    event_intake,
    event_queries,
    ledger,
    programmes,
    request_log,
    webhooks,
)
from rewards_lab.store.queries import paginate
from tests.conftest import World

_START = datetime(2026, 1, 1)
_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "occurred_at": st.sampled_from([_START + timedelta(minutes=m) for m in range(4)]),
    "name": st.sampled_from(["", "a", "b", "ab"]),
    "amount_minor": st.integers(-(2**70), 2**70) | st.sampled_from([0, 1, 2]),
}
_TYPES = {"occurred_at": "TIMESTAMP", "name": "VARCHAR", "amount_minor": "HUGEINT"}


def _walk(con: duckdb.DuckDBPyConnection, sort: str, direction: str, limit: int) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(200):  # bounded: at most 60 rows, pages of at least one
        page = paginate(
            con,
            list_name="rows",
            select_sql="SELECT * FROM rows WHERE true",
            params=[],
            page=PageRequest(limit=limit, cursor=cursor, direction=direction),  # type: ignore[arg-type]
            sort=sort,
        )
        seen += [row["id"] for row in page.rows]
        assert page.has_more == (page.next_cursor is not None)
        if not page.has_more:
            return seen
        cursor = page.next_cursor
    raise AssertionError("paging never ended")


def _expected(rows: list[tuple[str, Any]], direction: str) -> list[str]:
    """ASC NULLS LAST then id; DESC is its exact reverse."""
    ordered = sorted(rows, key=lambda row: (row[1] is None, row[1] if row[1] is not None else 0, row[0]))
    ids = [row[0] for row in ordered]
    return ids if direction == "asc" else ids[::-1]


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    sort=st.sampled_from(sorted(_VALUES)),
    direction=st.sampled_from(["asc", "desc"]),
    limit=st.integers(1, 7),
    size=st.integers(0, 60),
)
def test_every_row_once_in_order_whatever_the_nulls_and_ties(
    data: st.DataObject, sort: str, direction: str, limit: int, size: int
) -> None:
    values = data.draw(st.lists(st.none() | _VALUES[sort], min_size=size, max_size=size), label="values")
    rows = [(f"id_{index:03d}", value) for index, value in enumerate(values)]
    with duckdb.connect(":memory:") as con:
        con.execute(f"CREATE TABLE rows (id VARCHAR PRIMARY KEY, {sort} {_TYPES[sort]})")
        if rows:
            con.executemany("INSERT INTO rows VALUES (?, ?)", rows)
        assert _walk(con, sort, direction, limit) == _expected(rows, direction)


def test_events_by_occurred_at_show_every_event_once(world: World) -> None:
    """The reproduction: events with and without `occurred_at`, ties included, through the service."""
    made = []
    for index in range(9):
        body: dict[str, Any] = {"type": "t", "external_event_id": f"e-{index}", "customer_id": "c-1"}
        if index % 3:
            body["occurred_at"] = f"2026-01-0{1 + index % 2}T00:00:00Z"
        made.append(event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, body)).id)
    for sort in event_queries.EVENT_SORTS:
        for direction in ("asc", "desc"):
            for limit in (1, 2, 4, 100):
                seen: list[str] = []
                cursor = None
                for _ in range(20):
                    page = event_queries.list_events(
                        world.db,
                        world.scope,
                        PageRequest(limit, cursor, sort, direction),  # type: ignore[arg-type]
                    )
                    seen += [event.id for event in page.data]
                    if not page.has_more:
                        break
                    cursor = page.next_cursor
                assert sorted(seen) == sorted(made) and len(seen) == len(made), (sort, direction, limit)


@pytest.mark.parametrize(
    "sorts",
    [
        customers.CUSTOMER_SORTS,
        customers.WALLET_SORTS,
        assets.ASSET_SORTS,
        ledger.TRANSACTION_SORTS,
        programmes.PROGRAMME_SORTS,
        event_queries.EVENT_SORTS,
        event_queries.EXECUTION_SORTS,
        webhooks.ENDPOINT_SORTS,
        webhooks.DELIVERY_SORTS,
        request_log.LOG_SORTS,
    ],
)
def test_every_sort_field_has_a_declared_kind(sorts: tuple[str, ...]) -> None:
    """A cursor's value is checked against its sort field's kind: every list's sort fields have one."""
    assert set(sorts) <= set(SORT_KINDS)


def test_a_cursor_of_another_process_key_is_refused(world: World) -> None:
    for index in range(3):
        world.customer(f"k-{index}")
    page = customers.list_customers(world.db, world.scope, PageRequest(limit=1))
    assert page.next_cursor
    other = PageRequest(limit=1, cursor=page.next_cursor, cursor_key=b"k" * 32)
    with pytest.raises(ServiceError) as caught:
        customers.list_customers(world.db, world.scope, other)
    assert caught.value.code == "cursor_invalid" and caught.value.details["field"] == "cursor"
    empty = customers.list_customers(world.db, world.scope, PageRequest(limit=1, cursor=""))
    assert empty.data == customers.list_customers(world.db, world.scope, PageRequest(limit=1)).data
