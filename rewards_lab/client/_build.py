"""The `Call` of one operation from its arguments by name, each placed where the operation's parameters say.

Path, query, JSON body and Idempotency-Key as `contract/operation_parameters.py` derives them, and the answer's
`data` parsed into the operation's response model.

Every method of `_generated.py` is `build(<operation>, locals())`, and `rewards-lab api` calls it with the
values of its flags: one way to make a request, for any operation of the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, TypeVar
from urllib.parse import quote

from rewards_lab.client._core import Call, Page
from rewards_lab.contract.operation_parameters import Parameter, parameters
from rewards_lab.contract.operations import OPERATIONS, Operation

T = TypeVar("T")


class Unset(Enum):
    """The default of a parameter whose None sends null (`Operation.nulls`): left out, the field is not sent."""

    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset.UNSET
_CACHE: dict[str, tuple[Operation, tuple[Parameter, ...]]] = {}


def _parameters_of(name: str) -> tuple[Operation, tuple[Parameter, ...]]:
    """The operation and its parameters, derived once (again if the registry's entry was replaced)."""
    op = OPERATIONS[name]
    cached = _CACHE.get(name)
    if cached is None or cached[0] is not op:
        cached = _CACHE[name] = (op, parameters(op))
    return cached


def build(name: str, arguments: Mapping[str, Any]) -> Call[Any]:
    """The call of operation `name` with `arguments` (by parameter name; a missing one is left out)."""
    op, found = _parameters_of(name)
    path: dict[str, str] = {}
    query: dict[str, Any] = {}
    body: dict[str, Any] | None = {} if op.request is not None else None
    key: str | None = None
    for parameter in found:
        value = arguments.get(parameter.name, UNSET)
        if value is UNSET or (value is None and parameter.clears is None):
            continue
        value = parameter.wire_value(value)
        if parameter.where == "path":
            path[parameter.wire] = quote(str(value), safe="")
        elif parameter.where in ("query", "page"):
            query[parameter.wire] = value
        elif parameter.where == "key":
            key = value
        elif body is not None:
            body[parameter.wire] = value
    keyed = op.idempotency != "none"
    return Call(
        op.method,
        op.path.format_map(path),
        parser(op),
        params=query,
        body=body,
        idempotent=keyed,
        idempotency_key=key,
        resendable=op.resendable or keyed or op.method == "GET",
        listing=_paged(op),
        download=bool(op.media),
    )


def parser(op: Operation) -> Callable[[Any], Any]:
    """How the call's `data` parses: the response model, or a page of them (a list envelope)."""
    model = op.response
    if model is None:
        return _raw
    return _page(model.model_validate) if _paged(op) else model.model_validate


def _paged(op: Operation) -> bool:
    """The answer is a list envelope (`data`, `next_cursor`, `has_more`): a paged list, a search's hits."""
    return op.listing == "page" or op.shape == "list"


def _raw(data: Any) -> Any:
    return data


def _page(parse: Callable[[Any], T]) -> Callable[[Any], Page[T]]:
    """A list envelope (`data`, `next_cursor`, `has_more`) as a Page of parsed items."""

    def parse_page(body: Any) -> Page[T]:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise TypeError("a list operation returned no list")
        next_cursor = body.get("next_cursor")
        return Page(
            [parse(item) for item in data],
            next_cursor if isinstance(next_cursor, str) else None,
            body.get("has_more") is True,
        )

    return parse_page
