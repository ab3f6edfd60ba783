"""Exact JSON: numbers are parsed as Decimal and written back digit for digit (never through a float)."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import simplejson


def loads(text: str | bytes) -> Any:
    return simplejson.loads(text, use_decimal=True)


def dumps(value: Any) -> str:
    return str(simplejson.dumps(value, use_decimal=True, separators=(",", ":"), default=str))


def _canonical(value: Any) -> Any:
    if isinstance(value, Decimal):
        normal = value.normalize()
        return int(normal) if normal == normal.to_integral_value() else normal
    if isinstance(value, float):
        return _canonical(Decimal(repr(value)))
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def canonical_hash(value: Any) -> str:
    """A hash equal for equal JSON values: keys sorted, numbers compared by value (42.50 == 42.5)."""
    text = simplejson.dumps(_canonical(value), use_decimal=True, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
