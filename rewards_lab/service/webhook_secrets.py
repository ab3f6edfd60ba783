"""Webhook signing secrets at rest: sealed with the database's secret box, opened only to sign.

The current secret is sealed under the context `webhook:<endpoint id>`, a rotated-out secret still in its grace
period under `webhook:<endpoint id>:previous`, so a sealed value copied to another row or column does not open.
Rows written before sealing existed hold plain text: they still sign (the box returns unsealed text as is) and
`seal_plaintext_secrets` seals them, which the delivery worker runs when it starts.
"""

from __future__ import annotations

from datetime import datetime

from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.queries import Row
from rewards_lab.store.secret_box import is_sealed
from rewards_lab.store.uow import unit_of_work


def context(endpoint_id: str, *, previous: bool = False) -> str:
    return f"webhook:{endpoint_id}:previous" if previous else f"webhook:{endpoint_id}"


def seal(database: Database, endpoint_id: str, secret: str, *, previous: bool = False) -> str:
    return database.secret_box.seal(secret, context=context(endpoint_id, previous=previous))


def open_secret(database: Database, endpoint_id: str, stored: str, *, previous: bool = False) -> str:
    return database.secret_box.open(stored, context=context(endpoint_id, previous=previous))


def signing_secrets(database: Database, endpoint: Row, now: datetime | None = None) -> list[str]:
    """The secrets that sign a delivery to `endpoint` now: the current one, then the previous one while its
    grace period runs. `endpoint` has `endpoint_id` (or `id`), `signing_secret` and the previous-secret columns."""
    endpoint_id = str(endpoint.get("endpoint_id") or endpoint["id"])
    found = [open_secret(database, endpoint_id, str(endpoint["signing_secret"]))]
    previous, expires_at = endpoint.get("previous_signing_secret"), endpoint.get("previous_secret_expires_at")
    if previous and expires_at is not None and expires_at > (now or utcnow()):
        found.append(open_secret(database, endpoint_id, str(previous), previous=True))
    return found


def seal_plaintext_secrets(database: Database) -> int:
    """Seal every webhook secret still stored in plain text (a database from before sealing); returns how many
    endpoints changed. Idempotent, and a no-op (no write lock) when everything is sealed."""
    from rewards_lab.store.uow import reader

    if not reader(database).webhooks.endpoints_with_plaintext_secrets():
        return 0
    changed = 0
    with unit_of_work(database) as uow:
        for row in uow.webhooks.endpoints_with_plaintext_secrets():
            current = str(row["signing_secret"])
            previous = row["previous_signing_secret"]
            sealed_current = current if is_sealed(current) else seal(database, row["id"], current)
            sealed_previous = previous
            if previous is not None and not is_sealed(str(previous)):
                sealed_previous = seal(database, row["id"], str(previous), previous=True)
            uow.webhooks.store_sealed_secrets(row["id"], sealed_current, sealed_previous)
            changed += 1
    return changed
