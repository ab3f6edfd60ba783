"""Assets and their states."""

from __future__ import annotations

from rewards_lab.api.routes._binding import Endpoint, serve
from rewards_lab.contract.operations import operation
from rewards_lab.service import assets

assert operation("list_assets").sorts == assets.ASSET_SORTS

BINDINGS: dict[str, Endpoint] = dict(
    [
        serve("create_asset", assets.create_asset),
        serve("list_assets", assets.list_assets),
        serve("get_asset", assets.get_asset),
        serve("activate_asset", assets.activate_asset),
        serve("pause_asset", assets.pause_asset),
        serve("resume_asset", assets.resume_asset),
    ]
)
