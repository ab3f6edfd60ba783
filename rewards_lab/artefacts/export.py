"""`rewards-lab contract export`: write the OpenAPI document and everything generated from it into one folder.

The document is the one the service serves (`create_app(...).openapi()`, built over an in-memory database), so
the artefacts cannot drift from the routes: a test regenerates them and compares bytes with the committed ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rewards_lab.artefacts import postman, typescript

OPENAPI = "openapi.json"
COLLECTION = "postman/rewards-lab.postman_collection.json"
ENVIRONMENTS = {name: f"postman/rewards-lab-{name}.postman_environment.json" for name in ("sandbox", "production")}
TYPES = "typescript/rewards-lab.ts"


def served_document() -> dict[str, Any]:
    from rewards_lab.api.app import create_app
    from rewards_lab.store.database import DuckDBStore

    with DuckDBStore(":memory:") as database:
        return create_app(database, run_worker=False).openapi()


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def render(document: dict[str, Any]) -> dict[str, str]:
    """Relative path -> file content, for every artefact."""
    files = {
        OPENAPI: _json(document),
        COLLECTION: _json(postman.generate(document)),
        TYPES: typescript.generate(document),
    }
    files.update({path: _json(postman.environment(name)) for name, path in ENVIRONMENTS.items()})
    return files


def export(out: Path, document: dict[str, Any] | None = None) -> list[Path]:
    """Write every artefact under `out`; returns the paths written."""
    written = []
    for relative, content in render(document or served_document()).items():
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        written.append(target)
    return written
