"""The typed parts of the OpenAPI document that FastAPI cannot see: request bodies the handlers parse
themselves, success responses in the envelope, the query parameters of lists, the headers of every request and
response, every failure status with the codes it carries, the links between operations, and `servers`.

An operation declares its success response with `responds_model(status, model, shape)` in its `openapi_extra`
(`api.routes` does so from the registry, `contract.operations`): shape "one" is a resource, "list" a list
envelope with `next_cursor` and `has_more`. `finish()` turns those markers into schemas under `components.schemas`, all
generated in one pass by pydantic (request models in validation mode, resources in serialization mode, so a model
used both ways gets an `-Input` and an `-Output` schema where the two differ).

The document is exact (issue 14): what it declares valid is accepted, and what is refused is declared. A refusal
that no JSON Schema can express (a cursor this service never issued, an amount with more decimals than the stored
asset allows, a draft without rules...) is listed per operation in `x-refused-beyond-schema` (code -> the fields
it names), so that a fuzzer (tests/api/test_schemathesis.py) can tell it from a schema that lies.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from rewards_lab.api.deprecations import deprecated_operation
from rewards_lab.api.deprecations import openapi_headers as deprecation_headers
from rewards_lab.api.envelope import API_VERSION, ERROR_ENVELOPE_SCHEMA
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import REGISTRY
from rewards_lab.contract.pagination import DEFAULT_LIMIT, MAX_LIMIT

REF = "#/components/schemas/{model}"
_MARKER = "x-response"
RESPONSE_MODELS: dict[str, type[BaseModel]] = {}
PREFIX = f"/{API_VERSION}"
SERVERS = [
    {
        "url": PREFIX,
        "description": "Sandbox and production share this /v1: the X-Environment header (checked against the key) "
        "chooses the environment.",
    }
]
# Codes any operation can return: the rate limit is counted before anything else, and a fault is always possible.
ALWAYS_POSSIBLE = ("rate_limit_exceeded", "internal_error")
META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["request_id", "version"],
    "properties": {"request_id": {"type": "string"}, "version": {"type": "string", "const": API_VERSION}},
    "additionalProperties": False,
}


def model_of(annotation: Any) -> tuple[type[BaseModel], str]:
    """(model, shape): shape is "one" for a resource, "list" for `Page[M]` or `list[M]`."""
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        return item, "list"
    metadata = getattr(annotation, "__pydantic_generic_metadata__", None)
    if metadata and metadata["origin"] is r.Page:
        return metadata["args"][0], "list"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "one"
    raise TypeError(f"no response model for {annotation!r}")


def responds_model(status: int, model: type[BaseModel], shape: str) -> dict[str, Any]:
    """The marker of a success response of `model` (shape "one" or "list")."""
    RESPONSE_MODELS[model.__name__] = model
    return {_MARKER: {"status": status, "model": model.__name__, "shape": shape}}


def responds_media(status: int, media: tuple[str, ...], headers: dict[str, str]) -> dict[str, Any]:
    """The marker of a success response that is a file in one of `media` (not the envelope), with the headers
    it answers (name -> description)."""
    return {_MARKER: {"status": status, "media": list(media), "headers": headers}}


def query_parameters(
    *names: str, listing: bool = False, sorts: tuple[str, ...] = (), typed: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Declared query parameters: the pagination ones for a list (`sort` names the fields it sorts by, the first
    being the default), then filters (strings unless `typed` gives their schema). An empty `cursor` is the first
    page; any other cursor is one the service issued (`cursor_invalid` otherwise, beyond what a schema says)."""
    parameters: list[dict[str, Any]] = []

    def query(name: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "in": "query", "required": False, "schema": schema}

    if listing:
        sort_schema = {"type": "string", "enum": list(sorts), "default": sorts[0]} if sorts else {"type": "string"}
        parameters += [
            query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}),
            query("cursor", {"type": "string"}),
            query("sort", sort_schema),
            query("direction", {"type": "string", "enum": ["asc", "desc"]}),
        ]
    parameters += [query(name, (typed or {}).get(name, {"type": "string"})) for name in names]
    return {"parameters": parameters}


def idempotency_header(*, required: bool) -> dict[str, Any]:
    """The Idempotency-Key header of a write that declares idempotency (required on financial writes)."""
    return {
        "name": "Idempotency-Key",
        "in": "header",
        "required": required,
        "schema": {"type": "string", "minLength": 1, "maxLength": 255},
    }


def _envelope(model: str, shape: str) -> dict[str, Any]:
    ref = {"$ref": REF.format(model=model)}
    if shape == "one":
        return {
            "type": "object",
            "required": ["data", "meta"],
            "properties": {"data": ref, "meta": {"$ref": REF.format(model="Meta")}},
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "required": ["data", "next_cursor", "has_more", "meta"],
        "properties": {
            "data": {"type": "array", "items": ref},
            "next_cursor": {"type": ["string", "null"]},
            "has_more": {"type": "boolean"},
            "meta": {"$ref": REF.format(model="Meta")},
        },
        "additionalProperties": False,
    }


def _header(name: str, schema: dict[str, Any], description: str, *, required: bool) -> dict[str, Any]:
    return {"name": name, "in": "header", "required": required, "description": description, "schema": schema}


ENVIRONMENTS = ["sandbox", "production"]
HEADER_PARAMETERS: dict[str, dict[str, Any]] = {
    "OrganizationId": _header(
        "X-Organization-ID",
        {"type": "string"},
        "The organization the request acts on; checked against the key or session (`organization_mismatch`).",
        required=True,
    ),
    "Environment": _header(
        "X-Environment",
        {"type": "string", "enum": ENVIRONMENTS},
        "sandbox or production; an API key acts in one (`environment_mismatch`), a session in the one named.",
        required=True,
    ),
    "RequestId": _header(
        "X-Request-ID",
        {"type": "string"},
        "Your correlation id, echoed in X-Request-ID and meta.request_id when it is 1-128 characters of "
        "`A-Z a-z 0-9 . _ : -`; otherwise (or when absent) the service makes one.",
        required=False,
    ),
    "SdkVersion": _header(
        "X-SDK-Version",
        {"type": "string"},
        "Sent by official SDKs (e.g. `rewards-lab-python/0.1.0`) so that deprecations can be aimed at versions.",
        required=False,
    ),
}
LOGIN_ORGANIZATION = _header(
    "X-Organization-ID",
    {"type": "string"},
    "Optional at login: when sent, the account must belong to this organization (`organization_mismatch`).",
    required=False,
)
RESPONSE_HEADERS: dict[str, dict[str, Any]] = {
    "X-Request-ID": {
        "description": "The request's id (yours when it was sane, else the service's); also in meta.request_id.",
        "required": True,
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:\\-]{1,128}$"},
    },
    "RateLimit-Limit": {
        "description": "Requests allowed per one-minute window (the plan's; the Public plan's per address before "
        "authentication).",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    },
    "RateLimit-Remaining": {
        "description": "Requests left in the current window.",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    },
    "RateLimit-Reset": {
        "description": "Seconds until the window ends.",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    },
}
# Refusals no JSON Schema can express, by code: the fields (`[]` for any index) whose value the service refuses
# for a reason outside the schema: stored state, another resource, the environment, or numeric rules (significant
# digits) that JSON Schema cannot state. `*` means any field, `name.*` any field inside `name`, `name[]*` any element
# of the list `name` or field inside one. An operation lists
# those among its codes.
REFUSED_BEYOND_SCHEMA: dict[str, tuple[str, ...]] = {
    "cursor_invalid": ("cursor",),  # only the service issues cursors
    "amount_too_many_decimals": ("*",),  # the asset's decimals
    "amount_too_large": ("*",),  # the asset's decimals and the ledger's integer range
    "transfer_same_wallet": ("to_wallet_id",),
    "rule_asset_mismatch": ("*",),
    "programme_draft_empty": ("*",),
    "webhook_url_invalid": ("url",),  # the environment's scheme rule and the addresses a webhook may reach
    "period_invalid": ("from", "to", "since", "until"),  # the order of from and to (or since and until), the length
    "event_payload_too_large": ("data",),  # the serialized size of the data
    "permission_escalation": ("permissions",),
    # a condition's value must suit its operator (docs/rules.md), and the conditions' depth and count are bounded
    # tiers: a level above the base needs `entry`; GET /customers/{id}/tier needs `program_id` when several
    # programmes of the tenant have tiers (stored state)
    "field_required": ("conditions[]*", "tiers.*", "program_id"),
    "field_invalid": (
        "conditions[].value",  # rates and thresholds: at most 10 decimal places and 15 significant digits
        "conditions[]*",
        "actions[].amount.rate",
        "actions[].fraction",  # a constant fraction: at most 6 decimal places
        "actions[].multiply",  # `tier`: only in a programme that has tiers (stored state)
        "tier",  # a simulation's level: a code of the simulated version's tiers (stored state)
        "attributes",  # a customer's attributes: their stored size, and their count after a PATCH's merge
        "attributes.*",  # an attribute number's decimal places and significant digits (contract/attributes.py)
        "Authorization",  # POST /auth/logout ends a session, and is refused to an API key
        "timezone",  # a zone name this system's zoneinfo knows (the list varies with the tz database)
        "ends_at",  # after starts_at, which a PATCH may leave to the draft's
        "version",  # a path segment: a published version's number or `live`, never `draft`
        "occurred_at",  # an event's time: at most 5 minutes ahead of the service's clock
        "after",  # GET /events/export resumes after an event of the tenant's, named by its external_event_id
        # A programme's tiers (contract/tier_requests.py): codes unique, thresholds increasing along the levels,
        # the review fitting the window, a level's name not only white space; null refused while a rule uses them.
        "tiers",
        "tiers.*",
    ),
}


def _status_responses(codes: list[str]) -> dict[str, dict[str, Any]]:
    """One failure response per HTTP status, its schema the envelope narrowed to the codes of that status."""
    by_status: dict[int, list[str]] = {}
    for code in codes:
        by_status.setdefault(REGISTRY[code].http_status, []).append(code)
    responses = {}
    for status, status_codes in sorted(by_status.items()):
        types = sorted({REGISTRY[code].type.value for code in status_codes})
        narrowed = {
            "type": "object",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {"type": {"enum": types}, "code": {"enum": sorted(status_codes)}},
                }
            },
        }
        responses[str(status)] = {
            "description": "Failure: " + ", ".join(f"`{code}`" for code in sorted(status_codes)),
            "content": {
                "application/json": {"schema": {"allOf": [{"$ref": REF.format(model="ErrorEnvelope")}, narrowed]}}
            },
        }
    return responses


def _links(paths: dict[str, Any]) -> None:
    """Stateful links (OpenAPI `links`): from each operation that makes a resource to every operation whose path
    parameters its answer (and its own path) fills, e.g. POST /webhooks -> GET /webhooks/{webhook_id}."""
    for path, item in paths.items():
        for method, spec in item.items():
            source = LINK_SOURCES.get((path, method))
            if source is None:
                continue
            success = next(status for status in spec["responses"] if status.startswith("2"))
            links: dict[str, Any] = {}
            for target_path, target_item in paths.items():
                needed = set(re.findall(r"{(\w+)}", target_path))
                from_answer = {name for name, value in source.items() if value.startswith("$response")}
                if not needed or not needed <= set(source) or not needed & from_answer:
                    continue
                for target_method, target in target_item.items():
                    if (target_path, target_method) == (path, method):
                        continue
                    # By operationId: an operationRef would be a JSON pointer holding the path's `{` and `}`,
                    # which a URI reference may not contain (spectral's oas3-schema refuses it).
                    links[target["operationId"]] = {
                        "operationId": target["operationId"],
                        "parameters": {name: source[name] for name in sorted(needed)},
                    }
            if links:
                spec["responses"][success]["links"] = dict(sorted(links.items()))


_ID = "$response.body#/data/id"
# Operations that make (or answer with) a resource: path parameter -> where its value comes from.
LINK_SOURCES: dict[tuple[str, str], dict[str, str]] = {
    ("/customers", "post"): {"customer_id": _ID},
    ("/wallets", "post"): {"wallet_id": _ID, "customer_id": "$response.body#/data/customer_id"},
    ("/assets", "post"): {"asset_id": _ID},
    ("/reward-programs", "post"): {"program_id": _ID, "asset_id": "$response.body#/data/asset_id"},
    ("/reward-rules", "post"): {"rule_id": _ID, "program_id": "$response.body#/data/program_id"},
    ("/events", "post"): {"event_id": _ID},
    ("/webhooks", "post"): {"webhook_id": _ID},
    ("/webhooks/{webhook_id}/test", "post"): {"webhook_id": "$request.path.webhook_id", "delivery_id": _ID},
    ("/developer/api-keys", "post"): {"key_id": _ID},
    **{
        (f"/assets/{{asset_id}}/{move}", "post"): {"transaction_id": _ID, "asset_id": "$request.path.asset_id"}
        for move in ("issue", "redemptions", "transfers")
    },
}


def _relative_paths(document: dict[str, Any]) -> None:
    """Paths relative to the server URL (`/v1`), which `servers` names."""
    document["paths"] = {path.removeprefix(PREFIX) or "/": item for path, item in document["paths"].items()}
    document["servers"] = SERVERS


def _merge_mode_twins(schemas: dict[str, Any], keys: dict[Any, Any]) -> None:
    """One schema for a model that reads and writes the same: pydantic names a recursive model's schemas
    `X-Input` and `X-Output` (its refs differ by mode even when nothing else does), which are no identifiers in
    the TypeScript types. Twins equal once their refs are renamed become `X`; refs everywhere follow."""
    renamed: dict[str, str] = {}
    for name in [n for n in schemas if n.endswith("-Input")]:
        base = name.removesuffix("-Input")
        twin = f"{base}-Output"
        if twin in schemas and base not in schemas:
            renamed[name], renamed[twin] = base, base
    if not renamed:
        return

    def rename(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: (_renamed_ref(value, renamed) if key == "$ref" else rename(value)) for key, value in node.items()
            }
        if isinstance(node, list):
            return [rename(item) for item in node]
        return node

    merged = {renamed.get(name, name): rename(schema) for name, schema in schemas.items() if name not in renamed}
    for name, base in renamed.items():
        candidate = rename(schemas[name])
        if merged.setdefault(base, candidate) != candidate:
            raise AssertionError(f"{base}: the input and output schemas differ")
    schemas.clear()
    schemas.update(merged)
    for key, value in keys.items():
        keys[key] = rename(value)


def _renamed_ref(ref: str, renamed: dict[str, str]) -> str:
    head, _, name = ref.rpartition("/")
    return f"{head}/{renamed.get(name, name)}"


def finish(document: dict[str, Any], request_models: dict[str, type[BaseModel]]) -> None:
    """Schemas of every request and response model, typed success responses, one error envelope, headers,
    failures by status, links, servers."""
    _relative_paths(document)
    inputs = sorted(request_models.items())
    outputs = sorted(RESPONSE_MODELS.items())
    keys, definitions = models_json_schema(
        [(model, "validation") for _, model in inputs] + [(model, "serialization") for _, model in outputs],
        ref_template=REF,
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas.update(definitions.get("$defs", {}))
    _merge_mode_twins(schemas, keys)
    # Each request model under its own name, as the operations refer to it.
    for name, model in inputs:
        ref = keys[(model, "validation")]["$ref"].rsplit("/", 1)[1]
        if ref != name:
            schemas[name] = schemas[ref]
    output_names = {name: keys[(model, "serialization")]["$ref"].rsplit("/", 1)[1] for name, model in outputs}
    document["components"]["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key (systems) or a session token from POST /auth/login (people).",
        }
    }
    document["security"] = [{"bearer": []}]
    schemas["Meta"] = META_SCHEMA
    schemas["ErrorEnvelope"] = ERROR_ENVELOPE_SCHEMA
    components = document["components"]
    components["parameters"] = HEADER_PARAMETERS
    components["headers"] = RESPONSE_HEADERS | deprecation_headers()
    failure = {
        "description": "Any other failure (404 `route_not_found` for a path that does not exist, 405 "
        "`method_not_allowed` with `Allow` for a method the path does not have), in the envelope",
        "content": {"application/json": {"schema": {"$ref": REF.format(model="ErrorEnvelope")}}},
    }
    shared: dict[str, Any] = {}
    for path, item in document["paths"].items():
        for method, spec in item.items():
            marker = spec.pop(_MARKER, None)
            responses: dict[str, Any] = spec["responses"]
            responses.pop("422", None)  # FastAPI's own shape: never sent by this service
            if marker is not None and "media" in marker:
                responses[str(marker["status"])] = _file_response(marker)
            elif marker is not None:
                if marker["status"] != 200:
                    responses.pop("200", None)
                responses[str(marker["status"])] = {
                    "description": "Success: the envelope's data",
                    "content": {
                        "application/json": {"schema": _envelope(output_names[marker["model"]], marker["shape"])}
                    },
                }
            _declare_headers_and_failures(path, method, spec, failure, shared)
    components["responses"] = dict(sorted(shared.items()))
    _links(document["paths"])


def _file_response(marker: dict[str, Any]) -> dict[str, Any]:
    """A success that is a file: each media type a binary string, the operation's own headers beside ours
    (`_declare_headers_and_failures` adds those, keeping these)."""
    binary = {"schema": {"type": "string", "format": "binary"}}
    headers = {name: {"description": words, "schema": {"type": "string"}} for name, words in marker["headers"].items()}
    return {
        "description": "Success: the file",
        "content": {media: dict(binary) for media in marker["media"]},
        "x-headers": headers,
    }


def _declare_headers_and_failures(
    path: str, method: str, spec: dict[str, Any], failure: dict[str, Any], shared: dict[str, Any]
) -> None:
    """Request headers as parameters, failures by status with their codes, response headers on every answer."""
    codes = sorted(set(spec.get("x-error-codes", [])) | set(ALWAYS_POSSIBLE))
    spec["x-error-codes"] = codes
    beyond = {code: list(REFUSED_BEYOND_SCHEMA[code]) for code in codes if code in REFUSED_BEYOND_SCHEMA}
    if beyond:
        spec["x-refused-beyond-schema"] = beyond
    public = spec.get("security") == []  # logging in: no principal yet
    ours = [LOGIN_ORGANIZATION] if public else [{"$ref": "#/components/parameters/OrganizationId"}]
    if not public:
        ours.append({"$ref": "#/components/parameters/Environment"})
    ours += [{"$ref": "#/components/parameters/RequestId"}, {"$ref": "#/components/parameters/SdkVersion"}]
    spec["parameters"] = [*spec.get("parameters", []), *ours]
    responses: dict[str, Any] = spec["responses"]
    responses.update(_status_responses(codes))
    responses["default"] = failure
    headers = {name: {"$ref": f"#/components/headers/{name}"} for name in RESPONSE_HEADERS}
    if deprecated_operation(path, method) is not None:
        headers |= {name: {"$ref": f"#/components/headers/{name}"} for name in deprecation_headers()}
    for status, response in list(responses.items()):
        own = response.pop("x-headers", {}) if isinstance(response, dict) else {}
        responses[status] = {**response, "headers": {**own, **headers}}
        if status[0] in "345":  # failures repeat across operations: each distinct one is written once
            responses[status] = _shared_response(shared, status, responses[status])


def _shared_response(shared: dict[str, Any], status: str, response: dict[str, Any]) -> dict[str, str]:
    """A `$ref` to `components.responses`, named by status and a digest of the response (stable across runs)."""
    digest = hashlib.sha256(json.dumps(response, sort_keys=True).encode()).hexdigest()[:10]
    name = f"Failure{status}-{digest}"
    shared.setdefault(name, response)
    return {"$ref": f"#/components/responses/{name}"}
