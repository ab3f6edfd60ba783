"""The operation registry (`contract.operations`) is the one declaration of /v1: the served routes and the
OpenAPI document agree with it entry by entry, and it stays pure data (no server package behind it)."""

from __future__ import annotations

import ast
from pathlib import Path

from rewards_lab.api.routes import readiness_router, router
from rewards_lab.artefacts.export import served_document
from rewards_lab.contract.operations import OPERATIONS

SERVER_PACKAGES = ("rewards_lab.api", "rewards_lab.service", "rewards_lab.store", "rewards_lab.domain")


def test_every_operation_is_one_route_and_every_route_an_operation() -> None:
    routes = {route.name: route for route in (*router.routes, *readiness_router.routes)}  # type: ignore[attr-defined]
    assert list(routes) == list(OPERATIONS)
    for name, op in OPERATIONS.items():
        assert (routes[name].path, routes[name].methods) == (op.path, {op.method})  # type: ignore[attr-defined]


def test_the_document_declares_what_the_registry_says() -> None:
    paths = served_document()["paths"]
    documented = [op for op in OPERATIONS.values() if op.documented]
    assert sum(len(item) for item in paths.values()) == len(documented)
    for op in documented:
        spec = paths[op.path][op.method.lower()]
        assert spec.get("x-permission") == (op.permission.value if op.permission else None)
        assert spec["x-idempotent"] == op.idempotency
        assert set(op.error_codes) <= set(spec["x-error-codes"])
        assert bool(spec.get("deprecated")) == op.deprecated
        assert str(op.status) in spec["responses"]


def test_the_registry_imports_no_server_package() -> None:
    source = Path(__file__).parents[2] / "rewards_lab" / "contract" / "operations.py"
    imported = [node.module for node in ast.walk(ast.parse(source.read_text())) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name and name.startswith(SERVER_PACKAGES)]


def test_every_collection_pages_the_same_way() -> None:
    """The seed: every collection paginates the same way (`limit`, `cursor`; `next_cursor`, `has_more`). A GET that
    answers a list is a paged listing with its sort fields, and its document takes `limit` and `cursor`."""
    document = served_document()
    collections = [op for op in OPERATIONS.values() if op.method == "GET" and op.response_shape == "list"]
    assert {"list_api_keys", "list_versions"} <= {op.name for op in collections}
    for op in collections:
        assert op.listing == "page" and op.sorts, op.name
        entry = document["paths"][op.path]["get"]
        names = {parameter.get("name") for parameter in entry.get("parameters", [])}  # the rest are $refs
        assert {"limit", "cursor", "sort", "direction"} <= names, (op.name, names)
