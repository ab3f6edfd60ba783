"""The typed parts of the OpenAPI document that FastAPI cannot see: request bodies the handlers parse
themselves, success responses in the envelope, and the query parameters of lists.

An operation declares its success response with `responds(status, annotation)` in its `openapi_extra`: the
annotation is a resource model, `Page[Model]` or `list[Model]` (both answered as a list envelope with
`next_cursor` and `has_more`). `finish()` turns those markers into schemas under `components.schemas`, all
generated in one pass by pydantic (request models in validation mode, resources in serialization mode, so a model
used both ways gets an `-Input` and an `-Output` schema where the two differ).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from rewards_lab.api.envelope import API_VERSION, ERROR_ENVELOPE_SCHEMA
from rewards_lab.contract import resources as r
from rewards_lab.contract.pagination import DEFAULT_LIMIT, MAX_LIMIT

REF = "#/components/schemas/{model}"
_MARKER = "x-response"
RESPONSE_MODELS: dict[str, type[BaseModel]] = {}
# Operations whose handlers this module does not touch (POST /events is tuned for throughput elsewhere).
TYPED_ELSEWHERE: dict[tuple[str, str], tuple[int, type[BaseModel], str]] = {
    ("/v1/events", "post"): (202, r.Event, "one")
}
META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["request_id", "version"],
    "properties": {"request_id": {"type": "string"}, "version": {"type": "string", "const": API_VERSION}},
    "additionalProperties": False,
}


def _model_of(annotation: Any) -> tuple[type[BaseModel], str]:
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


def responds(status: int, annotation: Any) -> dict[str, Any]:
    """The marker of an operation's success response (merged into its `openapi_extra`)."""
    model, shape = _model_of(annotation)
    RESPONSE_MODELS[model.__name__] = model
    return {_MARKER: {"status": status, "model": model.__name__, "shape": shape}}


def responds_like(service: Callable[..., Any], status: int) -> dict[str, Any]:
    """The marker from a service function's return annotation."""
    return responds(status, typing.get_type_hints(service)["return"])


def query_parameters(*names: str, listing: bool = False, sorts: tuple[str, ...] = ()) -> dict[str, Any]:
    """Declared query parameters: the pagination ones for a list (`sort` names the fields it sorts by, the first
    being the default), then string filters."""
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
    parameters += [query(name, {"type": "string"}) for name in names]
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


def finish(document: dict[str, Any], request_models: dict[str, type[BaseModel]]) -> None:
    """Schemas of every request and response model, typed success responses, one error envelope."""
    inputs = sorted(request_models.items())
    outputs = sorted(RESPONSE_MODELS.items()) + [
        (model.__name__, model) for _, model, _ in TYPED_ELSEWHERE.values() if model.__name__ not in RESPONSE_MODELS
    ]
    keys, definitions = models_json_schema(
        [(model, "validation") for _, model in inputs] + [(model, "serialization") for _, model in outputs],
        ref_template=REF,
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas.update(definitions.get("$defs", {}))
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
    failure = {
        "description": "Failure: the envelope's error (its code is one of x-error-codes)",
        "content": {"application/json": {"schema": {"$ref": REF.format(model="ErrorEnvelope")}}},
    }
    for path, item in document["paths"].items():
        for method, spec in item.items():
            marker = spec.pop(_MARKER, None)
            responses: dict[str, Any] = spec["responses"]
            responses.pop("422", None)  # FastAPI's own shape: never sent by this service
            responses["default"] = failure
            if marker is None and (path, method) in TYPED_ELSEWHERE:
                status, model, shape = TYPED_ELSEWHERE[(path, method)]
                marker = {"status": status, "model": model.__name__, "shape": shape}
            if marker is None:
                continue
            if marker["status"] != 200:
                responses.pop("200", None)
            responses[str(marker["status"])] = {
                "description": "Success: the envelope's data",
                "content": {"application/json": {"schema": _envelope(output_names[marker["model"]], marker["shape"])}},
            }
