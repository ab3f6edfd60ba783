"""Turning pydantic validation failures into registered errors that name the offending field."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from rewards_lab.contract.errors import REGISTRY, ServiceError

ModelT = TypeVar("ModelT", bound=BaseModel)

_PYDANTIC_TO_CODE = {
    "missing": "field_required",
    "extra_forbidden": "field_unknown",
}


_BRANCH_LABELS = {
    "FixedAmount",
    "PerRateAmount",
    "fixed_amount",
    "per_rate_amount",
    "condition",
    "any_group",
    "all_group",
    "not_group",
    "issue_action",
    "reverse_action",
    "fraction_constant",
    "fraction_of",
    "amount_limit",
    "count_limit",
    "issued_guard",
    "liability_delta_guard",
    "ceiling_exhausted_within_days_guard",
    "points_metric",
    "sum_metric",
    "count_metric",
    "rolling_window",
    "calendar_window",
    "anniversary_window",
    "lifetime_window",
}


def field_path(loc: tuple[int | str, ...]) -> str:
    """('rules', 0, 'actions', 1, 'amount') -> 'rules[0].actions[1].amount'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith("function-") or part in _BRANCH_LABELS:
            continue  # union branch labels pydantic inserts; the client never wrote them
        else:
            path += f".{part}" if path else part
    return path


def to_service_error(error: ValidationError, prefix: str = "") -> ServiceError:
    """The first validation failure as a ServiceError; all of them are listed in `details.errors`."""
    problems: list[dict[str, Any]] = []
    first_details: dict[str, Any] = {}
    for item in error.errors(include_url=False, include_input=False):
        code = item["type"] if item["type"] in REGISTRY else _PYDANTIC_TO_CODE.get(item["type"], "field_invalid")
        ctx = item.get("ctx", {})
        field = str(ctx.get("service_field") or field_path(tuple(item["loc"])))  # ctx: see custom_error
        suffix = str(ctx.get("service_suffix", ""))  # an element inside the model that refused (rule_requests)
        if suffix:
            field = f"{field}{suffix}" if suffix.startswith("[") or not field else f"{field}.{suffix}"
        if prefix:
            field = f"{prefix}.{field}" if field else prefix
        message = str(item["msg"]).removeprefix("Value error, ")
        problems.append({"code": code, "field": field, "message": message})
        if len(problems) == 1:
            first_details = dict(ctx.get("service_details") or {})
    first = problems[0]
    message = f"{first['field']}: {first['message']}"
    return ServiceError(first["code"], message, **first_details, field=first["field"], errors=problems)


def validate(model: type[ModelT], data: Any, prefix: str = "") -> ModelT:
    """Validate python data (e.g. JSON parsed with parse_float=Decimal) into a request model."""
    if not isinstance(data, dict):
        raise ServiceError("field_invalid", "the body must be a JSON object", field=prefix or "body")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise to_service_error(error, prefix) from None


def custom_error(error: ServiceError, field: str | None = None) -> PydanticCustomError:
    """Re-raise a domain ServiceError inside a pydantic validator, keeping its registered code. `field`, when
    given, is the full path to report (e.g. `data.a.b` inside free-form JSON) instead of the validator's own."""
    message = error.message.replace("{", "(").replace("}", ")")
    context: dict[str, Any] = {} if field is None else {"service_field": field}
    extra = {key: value for key, value in error.details.items() if key != "field"}
    if extra:  # kept on the ServiceError `to_service_error` makes (e.g. a limit's name and value)
        context["service_details"] = extra
    return PydanticCustomError(error.code, message, context or None)


def parse_instant(value: str | None, field: str) -> datetime | None:
    """An ISO 8601 date-time (an offset, or naive meaning UTC) as naive UTC."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(UTC).replace(tzinfo=None)  # OverflowError past year 9999 (or before 1)
    except (ValueError, OverflowError):
        raise ServiceError("period_invalid", f"{field} must be an ISO 8601 date-time", field=field) from None
    return parsed
