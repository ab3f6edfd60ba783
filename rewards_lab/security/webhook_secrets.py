"""Webhook signing secrets at rest: sealed with the database's secret box, opened only to sign.

The current secret is sealed under the context `webhook:<endpoint id>`, a rotated-out secret still in its grace
period under `webhook:<endpoint id>:previous`, so a sealed value copied to another row or column does not open.
Rows written before sealing existed hold plain text: they still sign (the box returns unsealed text as is), and
the database seals them when it opens (`store.webhooks.seal_plaintext_webhook_secrets`, run by
`DuckDBStore.seal_plaintext_secrets`, which then rewrites the file so no copy of the plain text stays on disk).
"""

from __future__ import annotations

from datetime import datetime

from rewards_lab.store.api import Store
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import DueDelivery, EndpointRow
from rewards_lab.store.webhooks import webhook_secret_context


def context(endpoint_id: str, *, previous: bool = False) -> str:
    return webhook_secret_context(endpoint_id, previous=previous)


def seal(database: Store, endpoint_id: str, secret: str, *, previous: bool = False) -> str:
    return database.secret_box.seal(secret, context=context(endpoint_id, previous=previous))


def open_secret(database: Store, endpoint_id: str, stored: str, *, previous: bool = False) -> str:
    return database.secret_box.open(stored, context=context(endpoint_id, previous=previous))


def signing_secrets(database: Store, endpoint: EndpointRow | DueDelivery, now: datetime | None = None) -> list[str]:
    """The secrets that sign a delivery to `endpoint` now (an endpoint, or a due delivery with its endpoint's
    columns): the current one, then the previous one while its grace period runs."""
    endpoint_id = endpoint.endpoint_id if isinstance(endpoint, DueDelivery) else endpoint.id
    found = [open_secret(database, endpoint_id, str(endpoint.signing_secret))]
    previous, expires_at = endpoint.previous_signing_secret, endpoint.previous_secret_expires_at
    if previous and expires_at is not None and expires_at > (now or utcnow()):
        found.append(open_secret(database, endpoint_id, str(previous), previous=True))
    return found
