"""Customers and their segments."""

from __future__ import annotations

from rewards_lab.api.routes._binding import Endpoint, serve
from rewards_lab.contract.operations import operation
from rewards_lab.service import customers, segments

assert operation("list_customers").sorts == customers.CUSTOMER_SORTS

BINDINGS: dict[str, Endpoint] = dict(
    [
        serve("create_customer", customers.create_customer),
        serve("list_customers", customers.list_customers),
        serve("get_customer", customers.get_customer),
        serve("update_customer", customers.update_customer),
        serve("customer_segments", segments.customer_segments),
    ]
)
