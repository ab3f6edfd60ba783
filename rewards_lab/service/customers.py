"""Customers, keyed by the client's external id, and their wallets.

A customer is named by its id or by its external_id wherever a request names one (`customer_id` of events, of
wallets and of filters). The rule is unambiguous: a reference equal to a customer's id names that customer, and
otherwise the customer with that external_id. An external_id shaped like a customer id (`cus_` and 32 hex digits)
is refused when a customer is created, so no external_id can ever shadow another customer's id (see
docs/decisions.md, "Customers, wallets and assets").
"""

from __future__ import annotations

import re
from typing import Any

from rewards_lab import presenters
from rewards_lab.contract import attributes
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import PREFIXES, new_id
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.states import wallet_transition
from rewards_lab.engine.notifications import emit
from rewards_lab.service.writes import run_write
from rewards_lab.store.api import Store, reader
from rewards_lab.store.interfaces import CustomerFilter, CustomerRow, Repositories, WalletFilter

CUSTOMER_SORTS = ("created_at", "external_id")
WALLET_SORTS = ("created_at",)
# The shape of the ids this service gives customers (`contract.ids`): an external_id may not take it.
CUSTOMER_ID_SHAPE = re.compile(rf"{PREFIXES['customer']}_[0-9a-f]{{32}}")


def check_external_id(external_id: str) -> None:
    """Refuse an external_id that has the shape of a customer id: it could name another customer."""
    if CUSTOMER_ID_SHAPE.fullmatch(external_id):
        raise ServiceError(
            "field_invalid",
            "external_id must not have the shape of a customer id (cus_ and 32 hex digits)",
            field="external_id",
        )


def create_customer(
    database: Store, scope: Scope, body: rq.CustomerCreate, *, idempotency_key: str | None = None
) -> r.Customer:
    check_external_id(body.external_id)

    def write(uow: Repositories) -> r.Customer:
        existing = uow.customers.get_by_external_id(scope, body.external_id)
        if existing is not None:
            raise ServiceError("customer_already_exists", field="external_id", customer_id=existing.id)
        stored = attributes.to_json(body.attributes)
        row = uow.customers.add(scope, new_id("customer"), body.external_id, body.email, body.country, stored)
        return presenters.customer(row)

    return run_write(
        database,
        scope,
        "customers.create",
        _creation_request(body),
        write,
        r.Customer,
        idempotency_key=idempotency_key,
        status_code=201,
    )


def _creation_request(body: rq.CustomerCreate) -> dict[str, Any]:
    """What an Idempotency-Key binds a creation to. Without attributes it is the body as it was hashed before
    attributes existed (a key used then still matches its retry); with them, the attributes as exact numbers (a
    JSON-mode dump would make the number 1 and the string "1" one request)."""
    request = body.model_dump(mode="json", exclude={"attributes"})
    if body.attributes:
        request["attributes"] = body.attributes
    return request


def customer_row(uow: Repositories, scope: Scope, reference: str) -> CustomerRow:
    """A customer by id, else by external id: the two ways clients name one (`resolve_many`'s rule: an id wins)."""
    row = uow.customers.get(scope, reference) or uow.customers.get_by_external_id(scope, reference)
    if row is None:
        raise ServiceError("customer_not_found", customer_id=reference)
    return row


def get_customer(database: Store, scope: Scope, reference: str) -> r.Customer:
    return presenters.customer(customer_row(reader(database), scope, reference))


def update_customer(
    database: Store, scope: Scope, reference: str, body: rq.CustomerUpdate, *, idempotency_key: str | None = None
) -> r.Customer:
    """Edit the customer `reference` names (its id, else its external_id, as GET /customers/{id}): a field left
    out stays, `email` or `country` null clears it, `attributes` is merged (RFC 7396, `attributes.merge`)."""
    sent = body.model_fields_set

    def write(uow: Repositories) -> r.Customer:
        row = customer_row(uow, scope, reference)
        merged = attributes.from_json(row.attributes)
        if "attributes" in sent:
            merged = {} if body.attributes is None else attributes.merge(merged, body.attributes)
        updated = uow.customers.update(
            scope,
            row.id,
            email=body.email if "email" in sent else row.email,
            country=body.country if "country" in sent else row.country,
            attributes=attributes.to_json(merged),
        )
        return presenters.customer(updated)

    # Only what was sent counts: `{}` and `{"email": null}` are different requests.
    request = {"customer": reference, **body.model_dump(mode="python", exclude_unset=True)}
    return run_write(database, scope, "customers.update", request, write, r.Customer, idempotency_key=idempotency_key)


def list_customers(
    database: Store, scope: Scope, page: PageRequest, *, external_id: str | None = None
) -> r.Page[r.Customer]:
    sort = check_page_request(page, CUSTOMER_SORTS)
    rows = reader(database).customers.page(scope, page, sort, CustomerFilter(external_id))
    return presenters.page(r.Page[r.Customer], rows, presenters.customer)


def create_wallet(
    database: Store, scope: Scope, body: rq.WalletCreate, *, idempotency_key: str | None = None
) -> r.Wallet:
    def write(uow: Repositories) -> r.Wallet:
        customer = customer_row(uow, scope, body.customer_id)
        row = uow.wallets.add(scope, new_id("wallet"), customer.id, body.type.value, body.transfer_policy.value)
        return presenters.wallet(row)

    return run_write(
        database,
        scope,
        "wallets.create",
        body,
        write,
        r.Wallet,
        idempotency_key=idempotency_key,
        status_code=201,
    )


def get_wallet(database: Store, scope: Scope, wallet_id: str) -> r.Wallet:
    row = reader(database).wallets.get(scope, wallet_id)
    if row is None:
        raise ServiceError("wallet_not_found", wallet_id=wallet_id)
    return presenters.wallet(row)


def list_wallets(
    database: Store,
    scope: Scope,
    page: PageRequest,
    *,
    customer_id: str | None = None,
    status: str | None = None,
) -> r.Page[r.Wallet]:
    sort = check_page_request(page, WALLET_SORTS)
    rows = reader(database).wallets.page(scope, page, sort, WalletFilter(customer_id, status))
    return presenters.page(r.Page[r.Wallet], rows, presenters.wallet)


def _wallet_transition(
    database: Store, scope: Scope, wallet_id: str, action: str, idempotency_key: str | None
) -> r.Wallet:
    def write(uow: Repositories) -> r.Wallet:
        row = uow.wallets.get(scope, wallet_id)
        if row is None:
            raise ServiceError("wallet_not_found", wallet_id=wallet_id)
        uow.wallets.set_status(scope, wallet_id, wallet_transition(action, row.status))
        updated = uow.wallets.get(scope, wallet_id)
        assert updated is not None
        wallet = presenters.wallet(updated)
        if action == "freeze":
            emit(uow, scope, "wallet.frozen", wallet_id, wallet)
        return wallet

    return run_write(
        database, scope, f"wallets.{action}:{wallet_id}", {}, write, r.Wallet, idempotency_key=idempotency_key
    )


def freeze_wallet(database: Store, scope: Scope, wallet_id: str, *, idempotency_key: str | None = None) -> r.Wallet:
    """A frozen wallet cannot transact at all (`wallet_frozen`); emits `wallet.frozen`."""
    return _wallet_transition(database, scope, wallet_id, "freeze", idempotency_key)


def unfreeze_wallet(database: Store, scope: Scope, wallet_id: str, *, idempotency_key: str | None = None) -> r.Wallet:
    return _wallet_transition(database, scope, wallet_id, "unfreeze", idempotency_key)
