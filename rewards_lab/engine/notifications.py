"""Webhook kinds written to the outbox inside the transaction of the change that causes them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rewards_lab.contract import jsonutil
from rewards_lab.contract.ids import new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.store.interfaces import Repositories

WEBHOOK_KINDS = (
    "reward.issued",
    "asset.paused",
    "wallet.frozen",
    "reward.reversed",
    "points.expired",
    "tier.changed",
)


def outbox_message(kind: str, resource_id: str, resource: BaseModel | dict[str, Any]) -> tuple[str, str, str, str]:
    body = resource.model_dump(mode="json") if isinstance(resource, BaseModel) else resource
    return outbox_messages(kind, [(resource_id, body)])[0]


def outbox_messages(kind: str, resources: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, str, str]]:
    """`outbox_message` for many resources of one kind, their ids made in one call (the event worker's form)."""
    ids = new_ids("outbox", len(resources))
    return [(i, kind, resource_id, jsonutil.dumps(body)) for i, (resource_id, body) in zip(ids, resources, strict=True)]


def emit(uow: Repositories, scope: Scope, kind: str, resource_id: str, resource: BaseModel | dict[str, Any]) -> None:
    assert kind in WEBHOOK_KINDS, kind
    uow.outbox.add_many(scope, [outbox_message(kind, resource_id, resource)])
