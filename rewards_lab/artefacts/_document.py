"""Reading the OpenAPI document the way both generators need: an operation's parameters with `$ref`s resolved
(the request headers every operation shares live once under `components.parameters`)."""

from __future__ import annotations

from typing import Any

_PARAMETER_REF = "#/components/parameters/"


def parameters(document: dict[str, Any], spec: dict[str, Any]) -> list[dict[str, Any]]:
    shared: dict[str, Any] = document.get("components", {}).get("parameters", {})
    resolved = []
    for parameter in spec.get("parameters", []):
        ref = parameter.get("$ref")
        resolved.append(shared[ref.removeprefix(_PARAMETER_REF)] if isinstance(ref, str) else parameter)
    return resolved
