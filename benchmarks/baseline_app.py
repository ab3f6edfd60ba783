"""The issue's reference point: a plain FastAPI endpoint that inserts one row into DuckDB per request.

Run with uvicorn (benchmarks/events_http.py does): `BASELINE_DB=path uvicorn benchmarks.baseline_app:app`.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import duckdb
from fastapi import FastAPI

app = FastAPI()
_connection = duckdb.connect(os.environ.get("BASELINE_DB", "baseline.duckdb"))
_connection.execute("CREATE TABLE IF NOT EXISTS events (external_event_id VARCHAR PRIMARY KEY, body VARCHAR)")
_lock = threading.Lock()


@app.post("/v1/events", status_code=202)
def submit(payload: dict[str, Any]) -> dict[str, Any]:
    with _lock:  # one DuckDB connection; each INSERT is its own committed transaction
        _connection.execute(
            "INSERT INTO events VALUES (?, ?)", [str(payload["external_event_id"]), json.dumps(payload)]
        )
    return {"data": {"external_event_id": payload["external_event_id"]}}
