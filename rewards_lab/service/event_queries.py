"""Reading events and reward executions (the list and get operations of /v1/events and /v1/executions)."""

from __future__ import annotations

from rewards_lab import presenters
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store, reader
from rewards_lab.store.interfaces import EventFilter, ExecutionFilter

EVENT_SORTS = ("received_at", "occurred_at")
EXECUTION_SORTS = ("created_at",)


def get_event(database: Store, scope: Scope, event_id: str) -> r.Event:
    row = reader(database).events.get(scope, event_id)
    if row is None:
        raise ServiceError("event_not_found", event_id=event_id)
    return presenters.event(row)


def list_events(
    database: Store,
    scope: Scope,
    page: PageRequest,
    *,
    status: str | None = None,
    type: str | None = None,
    customer_id: str | None = None,
) -> r.Page[r.Event]:
    sort = check_page_request(page, EVENT_SORTS)
    uow = reader(database)
    references: list[str] | None = None
    if customer_id:  # the customer's events, whichever of its two names each event used (an id wins)
        customer = uow.customers.resolve_many(scope, [customer_id]).get(customer_id)
        references = sorted({customer.id, customer.external_id}) if customer else [customer_id]
    rows = uow.events.page(scope, page, sort, EventFilter(status, type, references))
    return presenters.page(r.Page[r.Event], rows, presenters.event)


def list_executions(
    database: Store,
    scope: Scope,
    page: PageRequest,
    *,
    customer_id: str | None = None,
    event_id: str | None = None,
    program_id: str | None = None,
    status: str | None = None,
) -> r.Page[r.RewardExecution]:
    uow = reader(database)
    sort = check_page_request(page, EXECUTION_SORTS)
    if customer_id:
        customer = uow.customers.resolve_many(scope, [customer_id]).get(customer_id)
        customer_id = customer.id if customer else customer_id
    rows = uow.executions.page(
        scope,
        page,
        sort,
        ExecutionFilter(customer_id=customer_id, event_id=event_id, program_id=program_id, status=status),
    )
    assets = uow.assets.get_many(scope, sorted({x.asset_id for x in rows.rows}))
    decimals = {asset_id: int(asset.decimals) for asset_id, asset in assets.items()}
    return presenters.page(r.Page[r.RewardExecution], rows, lambda x: presenters.execution(x, decimals[x.asset_id]))
