"""Webhook endpoints and their deliveries (service.webhooks; sent by worker.deliveries)."""

from __future__ import annotations

from rewards_lab.api.routes._binding import Endpoint, serve
from rewards_lab.contract.operations import operation
from rewards_lab.service import webhooks as hooks

assert operation("list_webhooks").sorts == hooks.ENDPOINT_SORTS
assert operation("list_webhook_deliveries").sorts == hooks.DELIVERY_SORTS

BINDINGS: dict[str, Endpoint] = dict(
    [
        serve("create_webhook", hooks.create_webhook),
        serve("list_webhooks", hooks.list_webhooks),
        serve("get_webhook", hooks.get_webhook),
        serve("disable_webhook", hooks.disable_webhook),
        serve("rotate_webhook_secret", hooks.rotate_secret),
        serve("test_webhook", hooks.send_test),
        serve("list_webhook_deliveries", hooks.list_deliveries),
        serve("get_webhook_delivery", hooks.get_delivery),
        serve("replay_webhook_delivery", hooks.replay_delivery),
    ]
)
