"""The server's interpreter settings while it serves (api/runtime.py): the start-up heap frozen out of the
collector's full collections, a shorter GIL switch interval; both given back when it stops."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path

from rewards_lab.api.app import create_app
from rewards_lab.api.runtime import SWITCH_INTERVAL_S
from rewards_lab.store.database import Database


def test_the_start_up_heap_is_frozen_and_the_gil_shared_sooner_while_serving_and_given_back_after(
    tmp_path: Path,
) -> None:
    seen: dict[str, float] = {}

    async def serve_once() -> None:
        with Database(tmp_path / "runtime.duckdb") as database:
            app = create_app(database, run_worker=False)
            async with app.router.lifespan_context(app):
                seen["frozen"] = gc.get_freeze_count()
                seen["interval"] = sys.getswitchinterval()
            seen["frozen_after"] = gc.get_freeze_count()
            seen["interval_after"] = sys.getswitchinterval()

    gc.unfreeze()
    before = sys.getswitchinterval()
    asyncio.run(serve_once())
    # Everything the process had made by then: the app, its models and registry (about 100k objects or more).
    assert seen["frozen"] > 50_000
    assert seen["interval"] == SWITCH_INTERVAL_S < before
    assert seen["frozen_after"] == 0
    assert seen["interval_after"] == before
