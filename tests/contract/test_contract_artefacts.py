"""The committed client artefacts (clients/) are exactly what `rewards-lab contract export` makes from the served
OpenAPI document; the TypeScript compiles (tsc --noEmit, strict) with a client's typical use; the generators'
pieces behave on small schemas; every Postman request and example body matches the contract."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rewards_lab.api.routes import REQUEST_MODELS
from rewards_lab.artefacts import export, postman, typescript
from rewards_lab.contract.validation import validate

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "clients"
TSC = CLIENTS / "typescript" / "node_modules" / ".bin" / "tsc"
SPECTRAL_DIR = ROOT / "tools" / "spectral"
SPECTRAL = SPECTRAL_DIR / "node_modules" / ".bin" / "spectral"
SPECTRAL_ERROR = 0  # spectral's JSON severities: 0 error, 1 warning, 2 information, 3 hint


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return export.served_document()


def test_committed_artefacts_are_what_the_export_makes_now(document: dict[str, Any], tmp_path: Path) -> None:
    written = export.export(tmp_path, document)
    assert {p.relative_to(tmp_path).as_posix() for p in written} == set(export.render(document))
    stale = [
        p.relative_to(tmp_path).as_posix()
        for p in written
        if not (CLIENTS / p.relative_to(tmp_path)).is_file()
        or (CLIENTS / p.relative_to(tmp_path)).read_bytes() != p.read_bytes()
    ]
    assert not stale, f"stale client artefacts {stale}: run `rewards-lab contract export --out clients`"


def test_the_typescript_types_compile_with_a_clients_use() -> None:
    if not TSC.exists():
        if os.environ.get("CI"):
            pytest.fail("tsc is missing: `make setup` installs it with npm (clients/typescript/package.json)")
        pytest.skip("tsc not installed here (make setup installs it when npm is available)")
    files = [CLIENTS / export.TYPES, ROOT / "tests" / "typescript" / "usage.ts"]
    options = ["--noEmit", "--strict", "--target", "es2020", "--module", "es2020", "--moduleResolution", "bundler"]
    result = subprocess.run([str(TSC), *options, *map(str, files)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_spectral_finds_no_error_in_the_exported_document(document: dict[str, Any], tmp_path: Path) -> None:
    """@stoplight/spectral-cli (pinned in tools/spectral/package-lock.json, installed by `make setup`) with the
    `spectral:oas` ruleset on the document as exported: no error (warnings, e.g. operations without tags, are
    style). Skipped only where npm itself is absent, as the TypeScript check is."""
    if not SPECTRAL.exists():
        if shutil.which("npm") is None and not os.environ.get("CI"):
            pytest.skip("npm not installed here: spectral cannot be installed")
        pytest.fail("spectral is missing: `make setup` installs it with npm (tools/spectral/package.json)")
    (exported,) = (p for p in export.export(tmp_path, document) if p.name == "openapi.json")
    command = [str(SPECTRAL), "lint", str(exported), "--ruleset", str(SPECTRAL_DIR / ".spectral.yaml"), "-f", "json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    start = result.stdout.find("[")
    assert start >= 0, result.stdout + result.stderr  # spectral could not run: say why
    findings = json.loads(result.stdout[start:])
    errors = [
        f"{f['code']} at {'/'.join(map(str, f['path']))}: {f['message']}"
        for f in findings
        if f["severity"] == SPECTRAL_ERROR
    ]
    assert errors == [], "\n".join(errors[:20])
    assert result.returncode == 0, result.stderr


def test_typescript_types_of_small_schemas() -> None:
    ts = typescript.ts_type
    assert ts({"type": "string"}) == "string" and ts({"type": "integer"}) == "number" and ts({}) == "unknown"
    assert ts({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "string | null"
    assert ts({"type": ["string", "null"]}) == "string | null"
    assert ts({"enum": ["asc", "desc"]}) == '"asc" | "desc"' and ts({"const": "v1"}) == '"v1"'
    assert ts({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}) == "(string | number)[]"
    assert ts({"$ref": "#/components/schemas/Customer"}) == "Customer"
    assert ts({"type": "object", "additionalProperties": {"type": "integer"}}) == "{ [key: string]: number }"
    assert ts({"type": "object"}) == "{ [key: string]: unknown }"
    obj = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "note": {"type": "string", "description": "free text"}},
        "required": ["id"],
        "additionalProperties": False,
    }
    assert ts(obj) == "{\n  id: string;\n  /** free text */\n  note?: string;\n}"
    assert typescript.type_name("#/components/schemas/Action-Output") == "ActionOutput"


def test_the_typescript_file_declares_every_schema_and_operation(document: dict[str, Any]) -> None:
    source = typescript.generate(document)
    for name in document["components"]["schemas"]:
        assert f"export interface {name} " in source or f"export type {name} =" in source, name
    for path, item in document["paths"].items():
        for method in item:
            assert f'"{method.upper()} {path.removeprefix("/v1")}": {{' in source


def test_postman_has_every_operation_its_headers_and_valid_example_bodies(document: dict[str, Any]) -> None:
    collection = postman.generate(document)
    assert collection["info"]["schema"].endswith("/v2.1.0/collection.json")
    assert {v["key"] for v in collection["variable"]} == {"baseUrl", "apiKey", "organizationId", "environment"}
    assert collection["auth"]["bearer"][0]["value"] == "{{apiKey}}"
    requests = {item["name"]: item["request"] for folder in collection["item"] for item in folder["item"]}
    operations = [(m, p, spec) for p, item in document["paths"].items() for m, spec in item.items()]
    assert len(requests) == len(operations)
    for method, path, spec in operations:
        request = requests[f"{method.upper()} {path.removeprefix('/v1')}"]
        headers = {h["key"]: h["value"] for h in request["header"]}
        if path.removeprefix("/v1") != "/auth/login":
            assert (
                headers["X-Organization-ID"] == "{{organizationId}}" and headers["X-Environment"] == "{{environment}}"
            )
        assert ("Idempotency-Key" in headers) == (spec.get("x-idempotent", "none") != "none"), path
        assert request["url"]["raw"].startswith("{{baseUrl}}/")
        body = spec.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body is not None:
            model = REQUEST_MODELS[body["$ref"].rsplit("/", 1)[1]]
            validate(model, json.loads(request["body"]["raw"]))  # the service itself would accept it
    environments = [postman.environment(name) for name in ("sandbox", "production")]
    assert [e["values"][3]["value"] for e in environments] == ["sandbox", "production"]


def test_every_paginated_list_declares_its_sort_fields_and_pagination(document: dict[str, Any]) -> None:
    lists = 0
    for path, item in document["paths"].items():
        for method, spec in item.items():
            parameters = {p["name"]: p for p in spec.get("parameters", []) if p.get("in") == "query"}
            if "cursor" not in parameters:
                continue
            lists += 1
            assert method == "get" and "offset" not in parameters, path
            sort = parameters["sort"]["schema"]
            assert sort["enum"] and sort["default"] == sort["enum"][0], path
            assert parameters["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 100, "default": 25}
    assert lists >= 8
