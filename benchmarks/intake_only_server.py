"""`rewards-lab serve` without its event and delivery workers, for benchmarks/events_http.py --intake-only.

Events are authenticated, deduplicated, stored durably and answered exactly as by the real server; nothing
processes them. Never a deployment: its events stay `received`.

    python benchmarks/intake_only_server.py --db PATH --port N [--log-level warning]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rewards_lab.api.app import create_app  # noqa: E402
from rewards_lab.store.database import Database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    with Database(args.db) as database:  # the same server as `rewards-lab serve`, but run_worker=False
        app = create_app(database, run_worker=False)
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level=args.log_level, access_log=False)


if __name__ == "__main__":
    main()
