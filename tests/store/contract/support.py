"""Helpers of the store contract tests: a `World` (resources made through the services) on either store."""

from __future__ import annotations

from rewards_lab.contract.scope import Scope
from rewards_lab.service import organizations
from rewards_lab.store.api import Store
from rewards_lab.store.interfaces import TransactionFilter
from tests.conftest import World

NO_TXN_FILTER = TransactionFilter(None, None, None)


def world_of(store: Store) -> World:
    """A new organization's sandbox on `store`, with the services' builders."""
    org = organizations.create_organization(store, "Both stores Ltd")
    return World(store, Scope(org.id, "sandbox"))  # type: ignore[arg-type]  # World is typed on DuckDB's name
