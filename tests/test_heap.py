"""The server freezes its start-up heap out of the collector's full collections while it serves (api/heap.py)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

from rewards_lab.api.app import create_app
from rewards_lab.store.database import Database


def test_the_start_up_heap_is_frozen_while_serving_and_given_back_after(tmp_path: Path) -> None:
    seen: dict[str, int] = {}

    async def serve_once() -> None:
        with Database(tmp_path / "heap.duckdb") as database:
            app = create_app(database, run_worker=False)
            async with app.router.lifespan_context(app):
                seen["serving"] = gc.get_freeze_count()
            seen["stopped"] = gc.get_freeze_count()

    gc.unfreeze()
    asyncio.run(serve_once())
    # Everything the process had made by then: the app, its models and registry (about 100k objects or more).
    assert seen["serving"] > 50_000
    assert seen["stopped"] == 0
