"""The `Store` Protocol's units: a unit of work is atomic and unseen until it commits; a snapshot sees one
committed state; readiness's probe and the checkpoint work."""

from __future__ import annotations

import pytest

from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store
from rewards_lab.store.interfaces import CustomerFilter


def test_a_unit_of_work_commits_whole_or_not_at_all(store: Store) -> None:
    kept, dropped = new_id("organization"), new_id("organization")
    with store.unit_of_work() as uow:
        uow.organizations.add(kept, "Kept Ltd", "business", None)
    with pytest.raises(RuntimeError), store.unit_of_work() as uow:
        uow.organizations.add(dropped, "Dropped Ltd", "business", None)
        assert uow.organizations.get(dropped) is not None  # seen inside its own transaction
        raise RuntimeError("abandon")
    reader = store.reader_repositories()
    assert reader.organizations.get(kept) is not None
    assert reader.organizations.get(dropped) is None
    with store.snapshot_repositories() as snap:
        assert snap.organizations.get(kept) is not None
    assert store.probe_write(5.0) is True
    store.checkpoint()


def test_an_open_unit_of_work_is_not_seen_by_readers_until_it_commits(store: Store) -> None:
    pending = new_id("organization")
    with store.unit_of_work() as uow:
        uow.organizations.add(pending, "Pending Ltd", "business", 60)
        assert store.reader_repositories().organizations.get(pending) is None
    row = store.reader_repositories().organizations.get(pending)
    assert row is not None and (row.name, row.plan, row.rate_limit_per_minute) == ("Pending Ltd", "business", 60)


def test_a_snapshot_sees_one_committed_state(store: Store, scope: Scope) -> None:
    def add(external_id: str) -> None:
        with store.unit_of_work() as uow:
            uow.customers.add(scope, new_id("customer"), external_id, None, None)

    add("first")
    with store.snapshot_repositories() as snap:
        before = snap.customers.page(scope, PageRequest(limit=10), "created_at", CustomerFilter(None)).rows
        add("second")  # committed meanwhile
        again = snap.customers.page(scope, PageRequest(limit=10), "created_at", CustomerFilter(None)).rows
    assert [c.external_id for c in before] == [c.external_id for c in again] == ["first"]
    now = store.reader_repositories().customers.page(scope, PageRequest(limit=10), "created_at", CustomerFilter(None))
    assert [c.external_id for c in now.rows] == ["first", "second"]
