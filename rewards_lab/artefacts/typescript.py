"""TypeScript declarations from the OpenAPI document's JSON Schemas (the subset pydantic and our envelope use).

Our own small generator rather than an npm tool: it runs with the package (no network, no Node at export time),
its output depends only on the document (byte-for-byte reproducible), and it knows the envelope, so responses
read as `Envelope<Customer>` and `ListEnvelope<Customer>`. The generated file is checked with `tsc --noEmit`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rewards_lab.artefacts._document import parameters
from rewards_lab.contract.errors import REGISTRY, ErrorType

_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_REF_PREFIX = "#/components/schemas/"
HAND_WRITTEN = ("ErrorEnvelope", "Meta")  # written below with the registry's codes, not from their schemas


def type_name(ref: str) -> str:
    """A schema name as a TypeScript identifier (`Page_Customer_` stays; `Action-Output` becomes ActionOutput)."""
    name = ref.removeprefix(_REF_PREFIX)
    return re.sub(r"[^A-Za-z0-9_$]", "", name.title() if "-" in name else name) or "Unnamed"


def _key(name: str) -> str:
    return name if _IDENTIFIER.fullmatch(name) else json.dumps(name)


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _union(parts: list[str]) -> str:
    unique = list(dict.fromkeys(parts))
    return " | ".join(unique) if unique else "never"


def _array(item: str) -> str:
    return f"({item})[]" if (" | " in item or " & " in item) else f"{item}[]"


def ts_type(schema: Any, indent: str = "") -> str:
    """The TypeScript type of one JSON Schema."""
    if schema is True or schema == {}:
        return "unknown"
    if schema is False:
        return "never"
    if "$ref" in schema:
        return type_name(schema["$ref"])
    if "const" in schema:
        return _literal(schema["const"])
    if "enum" in schema:
        return _union([_literal(value) for value in schema["enum"]])
    for combinator, joiner in (("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")):
        if combinator in schema:
            parts = [ts_type(part, indent) for part in schema[combinator]]
            if joiner == " | ":
                return _union(parts)
            return joiner.join(f"({part})" if " | " in part else part for part in dict.fromkeys(parts))
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([ts_type({**schema, "type": one}, indent) for one in kind])
    if kind == "string":
        return "string"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        return _array(ts_type(schema.get("items", {}), indent))
    if kind == "object" or "properties" in schema:
        return _object(schema, indent)
    return "unknown"


def _object(schema: dict[str, Any], indent: str) -> str:
    properties: dict[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties", True if not properties else False)
    if not properties:
        value = "unknown" if extra is True else ts_type(extra, indent)
        return f"{{ [key: string]: {value} }}" if extra is not False else "Record<string, never>"
    required = set(schema.get("required", []))
    inner = indent + "  "
    lines = ["{"]
    for name, property_schema in properties.items():
        description = property_schema.get("description") if isinstance(property_schema, dict) else None
        if description:
            lines.append(f"{inner}/** {description.strip()} */")
        optional = "" if name in required else "?"
        lines.append(f"{inner}{_key(name)}{optional}: {ts_type(property_schema, inner)};")
    if extra not in (False, None):
        lines.append(f"{inner}[key: string]: unknown;")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def _declaration(name: str, schema: dict[str, Any]) -> str:
    doc = f"/** {schema['description'].strip()} */\n" if schema.get("description") else ""
    body = ts_type(schema)
    if body.startswith("{\n"):
        return f"{doc}export interface {name} {body}\n"
    return f"{doc}export type {name} = {body};\n"


def _response_type(spec: dict[str, Any]) -> str:
    for status, response in sorted(spec.get("responses", {}).items()):
        if not status.startswith("2"):
            continue
        schema = response.get("content", {}).get("application/json", {}).get("schema", {})
        data = schema.get("properties", {}).get("data", {})
        if "$ref" in data:
            return f"Envelope<{type_name(data['$ref'])}>"
        if data.get("type") == "array" and "$ref" in data.get("items", {}):
            return f"ListEnvelope<{type_name(data['items']['$ref'])}>"
        return ts_type(schema, "    ")
    return "unknown"


def _operations(document: dict[str, Any], prefix: str) -> list[str]:
    lines = ["/** Every operation: `METHOD /path` (relative to the base URL ending in /v1) to its parts. */"]
    lines.append("export interface Operations {")
    for path, item in document["paths"].items():
        for method, spec in item.items():
            relative = path.removeprefix(prefix) or "/"
            body = spec.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            declared = parameters(document, spec)

            def params(where: str, declared: list[dict[str, Any]] = declared) -> str:
                chosen = [p for p in declared if p["in"] == where]
                if not chosen:
                    return "Record<string, never>"
                fields = "; ".join(
                    f"{_key(p['name'])}{'' if p.get('required') else '?'}: {ts_type(p.get('schema', {}))}"
                    for p in chosen
                )
                return f"{{ {fields} }}"

            lines.append(f"  {json.dumps(f'{method.upper()} {relative}')}: {{")
            lines.append(f"    path: {params('path')};")
            lines.append(f"    query: {params('query')};")
            lines.append(f"    headers: {params('header')};")
            lines.append(f"    body: {ts_type(body) if body else 'never'};")
            lines.append(f"    response: {_response_type(spec)};")
            permission = spec.get("x-permission")
            lines.append(f"    permission: {_literal(permission) if permission else 'null'};")
            lines.append(f"    idempotent: {_literal(spec.get('x-idempotent', 'none'))};")
            lines.append(f"    errors: {_union([_literal(code) for code in spec.get('x-error-codes', [])])};")
            lines.append("  };")
    lines.append("}")
    return lines


def generate(document: dict[str, Any], prefix: str = "/v1") -> str:
    """The whole declaration file for `document`."""
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    out = [
        f"// {document['info']['title']} {document['info']['version']}: TypeScript types.",
        "// Generated by `rewards-lab contract export` from the service's OpenAPI document. Do not edit.",
        "",
        'export type Environment = "sandbox" | "production";',
        "",
        "export interface Meta {",
        "  request_id: string;",
        f"  version: {_literal(document['info']['version'])};",
        "}",
        "",
        "/** A success: one resource. */",
        "export interface Envelope<T> {",
        "  data: T;",
        "  meta: Meta;",
        "}",
        "",
        "/** A success: one page of a list (cursor pagination). */",
        "export interface ListEnvelope<T> {",
        "  data: T[];",
        "  next_cursor: string | null;",
        "  has_more: boolean;",
        "  meta: Meta;",
        "}",
        "",
        f"export type ErrorType = {_union([_literal(t.value) for t in ErrorType])};",
        "",
        f"export type ErrorCode =\n  | {chr(10).join(['  | ' + _literal(c) for c in sorted(REGISTRY)]).lstrip(' |')};",
        "",
        "export interface ApiError {",
        "  type: ErrorType;",
        "  code: ErrorCode;",
        "  message: string;",
        "  /** `field` names the offending request field where there is one. */",
        "  details: { field?: string; [key: string]: unknown };",
        "}",
        "",
        "/** A failure. */",
        "export interface ErrorEnvelope {",
        "  error: ApiError;",
        "  meta: Meta;",
        "}",
        "",
    ]
    for name in sorted(schemas):
        if name in HAND_WRITTEN:
            continue
        out.append(_declaration(type_name(name), schemas[name]))
    out += _operations(document, prefix)
    return "\n".join(out) + "\n"
