"""The parameters of each operation as a client passes them, derived from its registry entry and request model.

What the Python client's methods take, what `rewards-lab api`'s flags are, and where each value goes on the wire.

One derivation for three readers: `client/_build.py` (the request a call sends), `tools/generate_client.py` (the
typed, documented methods of `client/_generated.py`) and `cli/api.py` (the flags). The rules:

- path parameters come first, positional, in path order; then the body's required fields (model order), also
  positional; then, keyword-only, the body's optional fields, the query parameters besides pagination (a Python
  keyword, or a flag of `rewards-lab api` itself, takes another name: `from` is `since`, `to` is `until`,
  `format` is `file_format`), `limit` and `cursor` on a paged list, and
  `idempotency_key` on an operation that takes one.
- an optional field left out, or None, is not sent; where the registry says null means something
  (`Operation.nulls`: it clears), None sends null and leaving it out is the default.
- a value is sent as given, but for mappings and sequences (copied into a dict or a list) and what
  `operation_docs.CONVENIENCES` says (a parameter taken in a handier form than the wire's).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, WithJsonSchema
from pydantic.fields import FieldInfo

from rewards_lab.contract.operation_docs import CONVENIENCES, DOCS, METHOD_NAMES, SUMMARIES, Convenience
from rewards_lab.contract.operations import Operation

Where = Literal["path", "body", "query", "page", "key"]
# What a value is, as the signature types it and the command line reads it: "object" a JSON object (a mapping),
# "objects" a JSON list of objects, "strings" a list of strings (comma-separated on the command line), "json"
# any JSON value, "int_or_str" a version number or a word (`live`).
Kind = Literal["str", "int", "bool", "object", "objects", "strings", "json", "int_or_str"]
# The query parameters whose names are Python keywords (or read as a pair with one).
PYTHON_NAMES: Mapping[str, str] = {"from": "since", "to": "until", "format": "file_format"}
_STRINGS = (str, datetime, date, Decimal)


@dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter of a client method (and one flag or positional of its command)."""

    name: str  # in Python and on the command line
    wire: str  # in the path, the query or the body
    where: Where
    kind: Kind
    required: bool = False
    clears: str | None = None  # what None (null) does, where it is not the same as leaving the field out
    doc: str | None = None
    choices: tuple[str, ...] = ()  # the values an enum or a Literal allows
    default: Any = None  # what the service takes when the field is left out (for the documentation)
    convert: Callable[[Any], Any] | None = None  # the wire form of a convenience

    def description(self) -> str:
        """Its doc, with the values it allows and the service's default where the doc does not give them."""
        words = [self.doc] if self.doc else []
        if self.choices and not (self.doc and all(choice in self.doc for choice in self.choices)):
            words.append(f"one of {', '.join(self.choices)}")
        if self.default is not None and not (self.doc and "default" in self.doc):
            words.append(f"default {self.default}")
        return "; ".join(words)

    def wire_value(self, value: Any) -> Any:
        """The value as sent: a convenience's wire form; mappings and sequences as plain dicts and lists."""
        if value is None:
            return None
        if self.convert is not None:
            return self.convert(value)
        if self.kind == "object" and isinstance(value, Mapping):
            return dict(value)
        if self.kind in ("objects", "strings") and isinstance(value, Sequence) and not isinstance(value, str):
            return list(value)
        return value  # anything else as given: the service says what is wrong with it


def parameters(op: Operation) -> tuple[Parameter, ...]:
    """Every parameter of `op`, in signature order (required positional ones first)."""
    docs = DOCS.get(op.name, {})
    found = [_described(Parameter(name, name, "path", "str", required=True), op, docs) for name in op.path_parameters]
    fields = list(op.request.model_fields.items()) if op.request is not None else []
    for name, info in sorted(fields, key=lambda item: not item[1].is_required()):  # stable: model order within
        kind, choices = kind_of(info.annotation)
        found.append(
            _described(
                Parameter(
                    name,
                    info.alias or name,
                    "body",
                    kind,
                    required=info.is_required(),
                    clears=op.nulls.get(name),
                    doc=info.description or _schema_description(info),
                    choices=choices,
                    default=_default(info),
                ),
                op,
                docs,
            )
        )
    for wire in op.filters:
        found.append(_described(Parameter(PYTHON_NAMES.get(wire, wire), wire, "query", "str"), op, docs))
    if op.listing == "page":
        found.append(Parameter("limit", "limit", "page", "int", doc="page size (1-100)"))
        found.append(Parameter("cursor", "cursor", "page", "str", doc="cursor from a previous page"))
    if op.idempotency != "none":
        doc = "the Idempotency-Key to send (default: a fresh one, reused on retries)"
        found.append(Parameter("idempotency_key", "Idempotency-Key", "key", "str", doc=doc))
    return tuple(found)


def _described(parameter: Parameter, op: Operation, docs: Mapping[str, str]) -> Parameter:
    """The parameter with its documentation (`operation_docs.DOCS` over the model's description) and any convenience."""
    convenience: Convenience | None = CONVENIENCES.get((op.name, parameter.name))
    doc = docs.get(parameter.name, parameter.doc)
    if convenience is None:
        return replace(parameter, doc=doc)
    return replace(parameter, doc=doc, kind=convenience.kind, convert=convenience.wire, choices=())


def kind_of(annotation: Any) -> tuple[Kind, tuple[str, ...]]:
    """The kind of a request model field's type (Annotated metadata and None dropped), and its choices."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return kind_of(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        members = [member for member in get_args(annotation) if member is not type(None)]
        kinds = {kind_of(member) for member in members}
        if len(kinds) == 1:
            return kinds.pop()
        return ("object", ()) if all(kind == "object" for kind, _ in kinds) else ("json", ())
    if origin is Literal:
        values = get_args(annotation)
        return (
            ("str", tuple(str(value) for value in values)) if all(isinstance(v, str) for v in values) else ("json", ())
        )
    if origin in (list, tuple, set, frozenset):
        (item, *_) = get_args(annotation) or (Any,)
        inner, _ = kind_of(item)
        return ("strings", ()) if inner == "str" else ("objects", ()) if inner == "object" else ("json", ())
    if origin is dict or annotation is dict:
        return "object", ()
    if isinstance(annotation, type):
        if issubclass(annotation, Enum):
            return "str", tuple(str(member.value) for member in annotation)
        if issubclass(annotation, bool):
            return "bool", ()
        if issubclass(annotation, int):
            return "int", ()
        if issubclass(annotation, _STRINGS):
            return "str", ()
        if issubclass(annotation, BaseModel):
            return "object", ()
    return "json", ()


def _default(info: FieldInfo) -> Any:
    """A body field's default when it says something (not None, not an empty list or object)."""
    if info.is_required():
        return None
    default = info.get_default(call_default_factory=True)
    return (default.value if isinstance(default, Enum) else default) or None


def _schema_description(info: FieldInfo) -> str | None:
    """The description a field's type gives its JSON Schema (`WithJsonSchema`), where the field gives none."""
    pending: list[Any] = [info.annotation, *info.metadata]
    while pending:
        item = pending.pop(0)
        if isinstance(item, WithJsonSchema) and isinstance(item.json_schema, dict):
            description = item.json_schema.get("description")
            if isinstance(description, str):
                return description
        if get_origin(item) in (Annotated, Union, types.UnionType):
            pending += get_args(item)  # an Annotated's are its type, then its metadata
    return None


def method_name(op: Operation) -> str:
    """The client method that calls `op` (its `iter_` twin pages through a list)."""
    return METHOD_NAMES.get(op.name, op.name)


def summary(op: Operation) -> str:
    """One line: the method's docstring opens with it and it is the command's help."""
    text = SUMMARIES.get(op.name) or op.name.replace("_", " ")
    return f"{text} (deprecated: use {op.replacement})" if op.replacement else text


def has_method(op: Operation) -> bool:
    """Every documented operation; the health probes are for load balancers, outside the document."""
    return op.documented
