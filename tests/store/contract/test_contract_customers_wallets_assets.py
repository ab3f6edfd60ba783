"""Customers, wallets and assets on both stores: pages over every row in both directions by each sort, text in
the C collation's order (byte order: `B` < `Z` < `_` < `a` < `é`), list parameters (empty ones too), updates."""

from __future__ import annotations

import pytest

from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store
from rewards_lab.store.interfaces import AssetFilter, CustomerFilter, NewAsset, WalletFilter

# Python orders str by code point, which is UTF-8's byte order: the C collation's.
NAMES = ["b", "B", "a", "_x", "Z9", "é", "Ω", "10", "9", "a b", "a-b", "ab", "A", "zz", "e", "É"]


def _every_page(fetch, limit: int) -> list[str]:  # type: ignore[no-untyped-def]
    seen, cursor = [], None
    while True:
        page = fetch(cursor, limit)
        assert len(page.rows) <= limit
        seen += [row.id for row in page.rows]
        if not page.has_more:
            assert page.next_cursor is None
            return seen
        cursor = page.next_cursor


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_customers_are_paged_over_every_row_in_the_c_collations_order(
    store: Store, scope: Scope, direction: str
) -> None:
    with store.unit_of_work() as uow:
        made = {uow.customers.add(scope, new_id("customer"), name, None, None).id: name for name in NAMES}
    reader = store.reader_repositories()
    rows = {row.id: row for row in (reader.customers.get(scope, i) for i in made) if row is not None}
    by_name = sorted(made, key=lambda i: made[i], reverse=direction == "desc")
    by_time = sorted(made, key=lambda i: (rows[i].created_at, i), reverse=direction == "desc")
    for sort, expected in (("external_id", by_name), ("created_at", by_time)):
        for limit in (1, 3, 16, 17):

            def fetch(cursor, limit, sort=sort):  # type: ignore[no-untyped-def]
                request = PageRequest(limit=limit, cursor=cursor, sort=sort, direction=direction)  # type: ignore[arg-type]
                return reader.customers.page(scope, request, sort, CustomerFilter())

            assert _every_page(fetch, limit) == expected, (sort, limit)
    only = reader.customers.page(scope, PageRequest(), "created_at", CustomerFilter(external_id="é")).rows
    assert [made[c.id] for c in only] == ["é"]


def test_customers_resolve_by_id_or_external_id_and_update(store: Store, scope: Scope) -> None:
    with store.unit_of_work() as uow:
        first = uow.customers.add(scope, new_id("customer"), "ext-1", "a@example.com", "GB", '{"tier": "gold"}')
        second = uow.customers.add(scope, new_id("customer"), "ext-2", None, None)
    reader = store.reader_repositories()
    assert reader.customers.resolve_many(scope, []) == {}
    resolved = reader.customers.resolve_many(scope, [first.id, "ext-2", "absent"])
    assert {key: row.id for key, row in resolved.items()} == {first.id: first.id, "ext-2": second.id}
    assert reader.customers.get_by_external_id(scope, "ext-1") == first
    assert (first.email, first.country, first.attributes) == ("a@example.com", "GB", '{"tier": "gold"}')
    with store.unit_of_work() as uow:
        updated = uow.customers.update(scope, first.id, email=None, country="FR", attributes="{}")
    assert (updated.email, updated.country, updated.attributes, updated.created_at) == (
        None,
        "FR",
        "{}",
        first.created_at,
    )
    assert store.reader_repositories().customers.get(Scope(scope.organization_id, "production"), first.id) is None


def test_wallets_lists_and_the_reward_wallet_of_each_customer(store: Store, scope: Scope) -> None:
    with store.unit_of_work() as uow:
        people = [uow.customers.add(scope, new_id("customer"), f"w-{n}", None, None).id for n in range(3)]
        wallets = [uow.wallets.add(scope, new_id("wallet"), people[n % 3], "customer", "open").id for n in range(7)]
        uow.wallets.set_status(scope, wallets[1], "frozen")
    reader = store.reader_repositories()
    assert reader.wallets.get_many(scope, []) == {} and reader.wallets.reward_wallets(scope, []) == {}
    assert sorted(reader.wallets.get_many(scope, wallets[:3] + ["wal_absent"])) == sorted(wallets[:3])
    rewarded = reader.wallets.reward_wallets(scope, people)
    assert {c: w.id for c, w in rewarded.items()} == {
        person: min(w for n, w in enumerate(wallets) if n % 3 == i) for i, person in enumerate(people)
    }
    frozen = reader.wallets.page(scope, PageRequest(), "created_at", WalletFilter(status="frozen")).rows
    assert [w.id for w in frozen] == [wallets[1]]
    for direction in ("asc", "desc"):

        def fetch(cursor, limit, direction=direction):  # type: ignore[no-untyped-def]
            request = PageRequest(limit=limit, cursor=cursor, direction=direction)  # type: ignore[arg-type]
            return reader.wallets.page(scope, request, "created_at", WalletFilter(customer_id=people[0]))

        rows = [reader.wallets.get(scope, w) for w in wallets[0::3]]
        keys = sorted(((r.created_at, r.id) for r in rows if r is not None), reverse=direction == "desc")
        assert _every_page(fetch, 2) == [i for _, i in keys]


def test_assets_are_paged_by_symbol_and_name_in_the_c_collations_order(store: Store, scope: Scope) -> None:
    symbols = ["PTS", "Pts", "pts", "ZED", "_X", "A1"]
    with store.unit_of_work() as uow:
        made = {}
        for n, symbol in enumerate(symbols):
            asset_id = new_id("asset")
            accounts = (new_id("account"), new_id("account"))
            row = uow.assets.add(scope, asset_id, NewAsset(f"name {symbol}", symbol, "points", n % 3), accounts)
            made[asset_id] = row
    reader = store.reader_repositories()
    assert reader.assets.get_many(scope, []) == {}
    assert reader.assets.get_many(scope, list(made)) == made
    lower = next(i for i, r in made.items() if r.symbol == "pts")
    assert reader.assets.symbol_in_use(scope, "pts", "") is False  # a draft holds no symbol
    with store.unit_of_work() as uow:
        uow.assets.set_status(scope, lower, "active", activated=True)
    reader = store.reader_repositories()
    assert reader.assets.symbol_in_use(scope, "pts", "") is True  # exact: "PTS" and "Pts" are other symbols
    assert reader.assets.symbol_in_use(scope, "PTS", "") is False
    assert reader.assets.symbol_in_use(scope, "pts", lower) is False
    active = reader.assets.get(scope, lower)
    assert active is not None and active.status == "active" and active.activated_at is not None
    for sort, key in (("symbol", lambda i: made[i].symbol), ("name", lambda i: made[i].name)):
        for direction in ("asc", "desc"):

            def fetch(cursor, limit, sort=sort, direction=direction):  # type: ignore[no-untyped-def]
                request = PageRequest(limit=limit, cursor=cursor, sort=sort, direction=direction)  # type: ignore[arg-type]
                return reader.assets.page(scope, request, sort, AssetFilter())

            assert _every_page(fetch, 4) == sorted(made, key=key, reverse=direction == "desc"), (sort, direction)
