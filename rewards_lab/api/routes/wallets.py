"""Wallets: opening, listing, balances, freezing."""

from __future__ import annotations

from rewards_lab.api.routes._binding import Endpoint, serve
from rewards_lab.contract.operations import operation
from rewards_lab.service import customers, ledger, lots

assert operation("list_wallets").sorts == customers.WALLET_SORTS
assert operation("list_wallet_lots").sorts == lots.LOT_SORTS

BINDINGS: dict[str, Endpoint] = dict(
    [
        serve("create_wallet", customers.create_wallet),
        serve("list_wallets", customers.list_wallets),
        serve("get_wallet", customers.get_wallet),
        serve("wallet_balances", ledger.wallet_balances),
        serve("list_wallet_lots", lots.list_lots),
        serve("freeze_wallet", customers.freeze_wallet),
        serve("unfreeze_wallet", customers.unfreeze_wallet),
    ]
)
