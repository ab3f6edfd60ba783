"""The ledger: issuing, redeeming, transferring, and the transactions they make."""

from __future__ import annotations

from rewards_lab.api.routes._binding import Endpoint, serve
from rewards_lab.contract.operations import operation
from rewards_lab.service import ledger

assert operation("list_transactions").sorts == ledger.TRANSACTION_SORTS

BINDINGS: dict[str, Endpoint] = dict(
    [
        serve("issue", ledger.issue),
        serve("redeem", ledger.redeem),
        serve("transfer", ledger.transfer),
        serve("list_transactions", ledger.list_transactions),
        serve("get_transaction", ledger.get_transaction),
    ]
)
