"""A Postman collection (format v2.1) from the OpenAPI document: every operation, in one folder per resource
area, with the service's headers, an example body for each write, and collection variables for the base URL,
the key, the organization and the environment. Deterministic: the collection id is derived from the title."""

from __future__ import annotations

import json
import uuid
from typing import Any

from rewards_lab.artefacts._document import parameters

POSTMAN_SCHEMA = "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"
VARIABLES = {
    "baseUrl": "http://127.0.0.1:8000/v1",
    "apiKey": "",
    "organizationId": "",
    "environment": "sandbox",
}
# Example values by field name, so that example bodies read like the seed's standard loop.
EXAMPLE_VALUES: dict[str, Any] = {
    "external_id": "user-42",
    "email": "ada@example.com",
    "country": "GB",
    "name": "Stars",
    "symbol": "STAR",
    "decimals": 2,
    "amount": "10.00",
    "reason": "welcome grant",
    "reference": "order-1001",
    "event_type": "order.completed",
    "external_event_id": "order-1001",
    "url": "https://example.com/webhooks/rewards",
    "query": "why was a reward refused",
    "content": "what does asset_paused mean",
    "password": "correct horse battery staple",
    "totp_code": "123456",
    "fixed": "10",
    "per": "amount",
    "rate": 0.05,
    "field": "amount",
    "value": 20,
}


class _Examples:
    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas

    def of(self, schema: Any, name: str = "", depth: int = 0) -> Any:
        """An example value that satisfies `schema` (required fields only, first choice of every union)."""
        if not isinstance(schema, dict) or depth > 12:
            return None
        if "$ref" in schema:
            return self.of(self.schemas[schema["$ref"].rsplit("/", 1)[1]], name, depth + 1)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return schema["enum"][0]
        for combinator in ("anyOf", "oneOf", "allOf"):
            if combinator in schema:
                options = [o for o in schema[combinator] if o.get("type") != "null"] or schema[combinator]
                return self.of(options[0], name, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if name in EXAMPLE_VALUES and kind in ("string", "integer", "number", None):
            return EXAMPLE_VALUES[name]
        if name.endswith("_id") and kind == "string":
            return "{{" + name + "}}"  # a Postman variable: the id of a resource created earlier
        if kind == "object" or "properties" in schema:
            required = schema.get("required", [])
            return {
                key: self.of(value, key, depth + 1)
                for key, value in schema.get("properties", {}).items()
                if key in required
            }
        if kind == "array":
            return [self.of(schema.get("items", {}), name, depth + 1)]
        if kind == "string":
            return f"{name or 'value'}"
        if kind == "integer":
            return int(schema.get("minimum", 1))
        if kind == "number":
            return schema.get("minimum", 1)
        if kind == "boolean":
            return False
        return None


def _request(
    path: str, method: str, spec: dict[str, Any], prefix: str, examples: _Examples, parameters: list[dict[str, Any]]
) -> dict[str, Any]:
    relative = path.removeprefix(prefix)
    segments = [f":{s[1:-1]}" if s.startswith("{") and s.endswith("}") else s for s in relative.strip("/").split("/")]
    query = [
        {"key": p["name"], "value": str(p.get("schema", {}).get("default", "")), "disabled": True}
        for p in parameters
        if p["in"] == "query"
    ]
    # A public operation (logging in: `security: []`, the registry's `public`) has no tenant headers and no auth.
    gated = spec.get("security") != []
    headers = []
    if gated:
        headers += [
            {"key": "X-Organization-ID", "value": "{{organizationId}}"},
            {"key": "X-Environment", "value": "{{environment}}"},
        ]
    if any(p["in"] == "header" and p["name"] == "Idempotency-Key" for p in parameters):
        headers.append({"key": "Idempotency-Key", "value": "{{$guid}}"})
    raw_url = "{{baseUrl}}/" + "/".join(segments)
    request: dict[str, Any] = {
        "method": method.upper(),
        "header": headers,
        "url": {
            "raw": raw_url,
            "host": ["{{baseUrl}}"],
            "path": segments,
            **({"query": query} if query else {}),
            **(
                {"variable": [{"key": s[1:], "value": ""} for s in segments if s.startswith(":")]}
                if any(s.startswith(":") for s in segments)
                else {}
            ),
        },
        "description": _description(spec),
    }
    if not gated:
        request["auth"] = {"type": "noauth"}
    body = spec.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        request["header"].append({"key": "Content-Type", "value": "application/json"})
        request["body"] = {
            "mode": "raw",
            "raw": json.dumps(examples.of(body), indent=2),
            "options": {"raw": {"language": "json"}},
        }
    return {"name": f"{method.upper()} {relative}", "request": request}


def _description(spec: dict[str, Any]) -> str:
    permission = spec.get("x-permission", "none (no principal needed)")
    lines = [
        f"Permission: `{permission}`. Idempotency-Key: {spec.get('x-idempotent', 'none')}.",
        f"Error codes: {', '.join(spec.get('x-error-codes', []))}.",
    ]
    if spec.get("deprecated"):
        lines.insert(0, "Deprecated: every answer carries Deprecation, Sunset and Link headers.")
    return "\n\n".join(lines)


def generate(document: dict[str, Any], prefix: str = "/v1") -> dict[str, Any]:
    examples = _Examples(document.get("components", {}).get("schemas", {}))
    folders: dict[str, list[dict[str, Any]]] = {}
    for path, item in document["paths"].items():
        area = path.removeprefix(prefix).strip("/").split("/")[0] or "root"
        for method, spec in item.items():
            request = _request(path, method, spec, prefix, examples, parameters(document, spec))
            folders.setdefault(area, []).append(request)
    title = document["info"]["title"]
    return {
        "info": {
            "_postman_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"rewards-lab/{title}/{document['info']['version']}")),
            "name": f"{title} ({document['info']['version']})",
            "description": "Generated by `rewards-lab contract export` from the service's OpenAPI document.",
            "schema": POSTMAN_SCHEMA,
        },
        "auth": {"type": "bearer", "bearer": [{"key": "token", "value": "{{apiKey}}", "type": "string"}]},
        "variable": [{"key": key, "value": value, "type": "string"} for key, value in VARIABLES.items()],
        "item": [{"name": area, "item": requests} for area, requests in sorted(folders.items())],
    }


def environment(name: str = "sandbox") -> dict[str, Any]:
    """A Postman environment file with the same variables (fill in the key and the organization)."""
    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"rewards-lab/environment/{name}")),
        "name": f"rewards-lab {name}",
        "values": [
            {
                "key": key,
                "value": name if key == "environment" else value,
                "type": "secret" if key == "apiKey" else "default",
                "enabled": True,
            }
            for key, value in VARIABLES.items()
        ],
    }
