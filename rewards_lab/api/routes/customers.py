"""Customers and their segments."""

from __future__ import annotations

from rewards_lab.api.routes._binding import Endpoint, serve
from rewards_lab.contract.operations import operation
from rewards_lab.service import customer_tiers, customers, segments

assert operation("list_customers").sorts == customers.CUSTOMER_SORTS
assert operation("customer_tier_history").sorts == customer_tiers.HISTORY_SORTS

BINDINGS: dict[str, Endpoint] = dict(
    [
        serve("create_customer", customers.create_customer),
        serve("list_customers", customers.list_customers),
        serve("get_customer", customers.get_customer),
        serve("update_customer", customers.update_customer),
        serve("customer_segments", segments.customer_segments),
        serve("customer_tier", customer_tiers.customer_tier),
        serve("customer_tier_history", customer_tiers.customer_tier_history),
    ]
)
