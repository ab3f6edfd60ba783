"""Request bodies of the seed's operations. Unknown fields are refused (`field_unknown`), never ignored."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema
from rfc3986_validator import validate_rfc3986  # type: ignore[import-untyped]

from rewards_lab.contract import attributes
from rewards_lab.contract.amounts import MAX_DECIMALS, MAX_THRESHOLD
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.event_age import DEFAULT_MAX_EVENT_AGE_DAYS, MaxEventAgeDays
from rewards_lab.contract.expiry_requests import Expiry
from rewards_lab.contract.guard_requests import DEFAULT_GUARD_WINDOW_DAYS, Guards, GuardWindowDays
from rewards_lab.contract.limit_requests import DEFAULT_CLAWBACK, Budget, Clawback, Limits
from rewards_lab.contract.limits import check_data
from rewards_lab.contract.permissions import Permission
from rewards_lab.contract.request_base import (
    DecimalString,
    EventType,
    FieldName,
    Identifier,
    Rate,
    RequestModel,
    Threshold,
)
from rewards_lab.contract.rule_requests import (
    MAX_RULE_ACTIONS,
    MAX_RULES_CONDITIONS,
    Action,
    Amount,
    Beneficiary,
    Condition,
    ConditionGroup,
    ConditionItem,
    FixedAmount,
    Operator,
    PerRateAmount,
    RuleAction,
    RuleCreate,
    RuleUpdate,
)
from rewards_lab.contract.tier_requests import LevelCode, Tiers
from rewards_lab.contract.time_zones import check_zone_name
from rewards_lab.contract.validation import custom_error

__all__ = [  # re-exported: request models are named `rq.<Model>` throughout
    "MAX_RULE_ACTIONS",
    "MAX_RULES_CONDITIONS",
    "Action",
    "Amount",
    "Beneficiary",
    "Condition",
    "ConditionGroup",
    "ConditionItem",
    "DecimalString",
    "EventType",
    "FieldName",
    "FixedAmount",
    "Identifier",
    "Operator",
    "PerRateAmount",
    "Rate",
    "RequestModel",
    "RuleAction",
    "RuleCreate",
    "RuleUpdate",
    "Threshold",
]

# Python's `\s` spelled out (ECMA-262's `\s`, which the OpenAPI document's pattern is read with, is another set).
_WHITESPACE = r"\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_EMAIL_RE = re.compile(
    rf"^[^@{_WHITESPACE}]{{1,64}}@[A-Za-z0-9](?:[A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?(?:\.[A-Za-z0-9-]{{1,63}})+$"
)
MAX_EVENT_DATA_BYTES = 16_384


# ISO 8601 / RFC 3339 date-times only (a JSON number is not a time, though pydantic would read it as epoch seconds).
_DATE_TIME_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?([Zz]|[+-][0-9]{2}:[0-9]{2})?"
)


def _date_time(value: object) -> object:
    """A string in ISO 8601 (from JSON), or a datetime (from Python callers: the lab, replays); never a number."""
    if isinstance(value, datetime):
        return value
    if value is not None and not (isinstance(value, str) and _DATE_TIME_RE.fullmatch(value)):
        raise custom_error(ServiceError("field_invalid", "must be an ISO 8601 date-time such as 2026-01-31T12:00:00Z"))
    return value


def _in_utc_range(value: datetime) -> datetime:
    """A date-time that stays within years 1-9999 in UTC: `9999-12-31T23:59:59-23:59` is a valid ISO 8601 text,
    but converting it to UTC (as the service stores it) raises OverflowError."""
    if value.tzinfo is not None:
        try:
            value.astimezone(UTC)
        except OverflowError:
            message = "must be a date-time between years 1 and 9999 in UTC"
            raise custom_error(ServiceError("field_invalid", message)) from None
    return value


DateTime = Annotated[datetime, BeforeValidator(_date_time), AfterValidator(_in_utc_range)]


def _free_json(field: str, long_string_code: str = "field_invalid") -> Any:
    """A validator of free-form JSON (`limits.check_data`), run before pydantic looks inside it."""

    def check(value: object) -> object:
        try:
            check_data(value, field, long_string_code)
        except ServiceError as error:
            raise custom_error(error, str(error.details.get("field", field))) from None
        return value

    return BeforeValidator(check)


Name = Annotated[str, Field(min_length=1, max_length=200)]


def _whole_number(value: object) -> object:
    """JSON Schema's `integer` counts 14.0 as 14: an integral number (parsed as a Decimal) becomes an int.
    Anything else goes on to strict int validation, which refuses strings, booleans and fractions."""
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value) if abs(value.adjusted()) < MAX_WHOLE_NUMBER_DIGITS else value
    return value


MAX_WHOLE_NUMBER_DIGITS = 20  # beyond this an "integral" number is no count or size the service takes


def _whole_number_schema(minimum: int, maximum: int) -> WithJsonSchema:
    return WithJsonSchema({"type": "integer", "minimum": minimum, "maximum": maximum})


# Integer fields that also take 14.0 for 14, as their JSON Schema (`integer`) says they do.
Decimals = Annotated[
    int,
    BeforeValidator(_whole_number),
    Field(ge=0, le=MAX_DECIMALS, strict=True),
    _whole_number_schema(0, MAX_DECIMALS),
]
SearchLimit = Annotated[
    int, BeforeValidator(_whole_number), Field(ge=1, le=20, strict=True), _whole_number_schema(1, 20)
]


# A permission code: the JSON Schema names them all (an unknown one is still `permission_unknown`, not a type error).
PermissionCode = Annotated[str, WithJsonSchema({"type": "string", "enum": sorted(p.value for p in Permission)})]


def _email(value: str | None) -> str | None:
    if value is not None and not _EMAIL_RE.fullmatch(value):
        raise custom_error(ServiceError("customer_email_invalid"))
    return value


Email = Annotated[
    str | None,
    AfterValidator(_email),
    WithJsonSchema({"anyOf": [{"type": "string", "pattern": _EMAIL_RE.pattern}, {"type": "null"}]}),
]
Country = Annotated[str | None, Field(pattern=r"^[A-Z]{2}$", description="ISO 3166-1 alpha-2")]


def _attributes_check(check: Any) -> BeforeValidator:
    """A validator of a customer's attributes (`contract.attributes`), naming the offending key's path."""

    def run(value: object) -> object:
        try:
            return check(value)
        except ServiceError as error:
            raise custom_error(error, str(error.details.get("field", attributes.FIELD))) from None

    return BeforeValidator(run)


def _attributes_schema(*, removable: bool) -> dict[str, Any]:
    """What JSON Schema can say of the limits; significant digits, decimal places and the stored size it cannot
    (`api.openapi_doc.REFUSED_BEYOND_SCHEMA`)."""
    bound = int(MAX_THRESHOLD)
    value: list[dict[str, Any]] = [
        {"type": "string", "maxLength": attributes.MAX_ATTRIBUTE_STRING_CHARS},
        {"type": "number", "exclusiveMinimum": -bound, "exclusiveMaximum": bound},
        {"type": "boolean"},
    ]
    if removable:
        value.append({"type": "null"})
    return {
        "type": "object",
        "maxProperties": attributes.MAX_ATTRIBUTES,
        "propertyNames": {"pattern": f"^{attributes.ATTRIBUTE_KEY_RE.pattern}$"},
        "additionalProperties": {"anyOf": value},
    }


def _attributes_patch(value: object) -> object:
    return None if value is None else attributes.check_patch(value)


CustomerAttributes = Annotated[
    dict[str, Any],
    _attributes_check(attributes.check_attributes),
    WithJsonSchema(_attributes_schema(removable=False)),
]
CustomerAttributesPatch = Annotated[
    dict[str, Any] | None,
    _attributes_check(_attributes_patch),
    WithJsonSchema({"anyOf": [_attributes_schema(removable=True), {"type": "null"}]}),
]


class CustomerCreate(RequestModel):
    external_id: Identifier
    email: Email = None
    country: Country = None
    # Free-form facts rules can read (contract/attributes.py); absent is {}.
    attributes: CustomerAttributes = {}


class CustomerUpdate(RequestModel):
    """Edits a customer: an absent field stays as it is, null clears `email` or `country`. `attributes` is an RFC
    7396 merge patch: a key set to null is removed, any other key set; `"attributes": null` removes them all."""

    attributes: CustomerAttributesPatch = None
    email: Email = None
    country: Country = None


class WalletType(StrEnum):
    CUSTOMER = "customer"


class TransferPolicy(StrEnum):
    OPEN = "open"  # sends and receives transfers
    RECEIVE_ONLY = "receive_only"  # receives, never sends
    CLOSED = "closed"  # takes part in no transfer; issue and redeem only


class WalletCreate(RequestModel):
    customer_id: Identifier
    type: WalletType = WalletType.CUSTOMER
    transfer_policy: TransferPolicy = TransferPolicy.OPEN


class AssetType(StrEnum):
    POINTS = "points"
    CREDITS = "credits"
    STAMPS = "stamps"


class AssetCreate(RequestModel):
    name: Name
    symbol: Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9]{0,11}$")]
    type: AssetType
    decimals: Decimals
    supply_ceiling: DecimalString | None = None
    # When its points expire (absent: never; a programme's own expiry overrides it for its rewards), and what
    # one unit is worth in money, for liability reports (absent: not valued).
    expiry: Expiry | None = None
    value_per_unit: DecimalString | None = None


# A schedule bound names an instant: an RFC 3339 date-time WITH its offset (a bare local time would be ambiguous
# beside the programme's timezone). Stored in UTC.
_OFFSET_DATE_TIME_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
DEFAULT_TIMEZONE = "UTC"


def _offset_date_time(value: object) -> object:
    """A string in RFC 3339 with an offset (from JSON), or an aware datetime (from Python callers)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value
    if not (isinstance(value, str) and _OFFSET_DATE_TIME_RE.fullmatch(value)):
        message = "must be an RFC 3339 date-time with an offset such as 2026-01-31T12:00:00Z"
        raise custom_error(ServiceError("field_invalid", message))
    return value


OffsetDateTime = Annotated[datetime, BeforeValidator(_offset_date_time), AfterValidator(_in_utc_range)]
Timezone = Annotated[
    str,
    Field(min_length=1, max_length=64, description="IANA timezone name", examples=["Europe/London"]),
    AfterValidator(check_zone_name),
]
Description = Annotated[str, Field(max_length=2000)]


class ProgrammeCreate(RequestModel):
    name: Name
    asset_id: Identifier
    description: Description | None = None
    # The first draft's schedule (see ProgrammeUpdate).
    timezone: Timezone = DEFAULT_TIMEZONE
    starts_at: OffsetDateTime | None = None
    ends_at: OffsetDateTime | None = None
    # The first draft's caps, budget and clawback policy (see ProgrammeUpdate).
    limits: Limits = []
    budget: Budget | None = None
    clawback: Clawback = DEFAULT_CLAWBACK
    expiry: Expiry | None = None  # the first draft's expiry of its rewards (see ProgrammeUpdate)
    # How many days before its receipt a live event may have occurred and still be rewarded; absent: the default
    # (contract.event_age), null: no bound (backfills).
    max_event_age_days: MaxEventAgeDays | None = DEFAULT_MAX_EVENT_AGE_DAYS
    # The first draft's forecast guards (contract.guard_requests), checked by the server before publishing, and
    # how many days of stored events before the publication the check replays.
    guards: Guards = []
    guard_window_days: GuardWindowDays = DEFAULT_GUARD_WINDOW_DAYS
    # The first draft's tiers: status levels customers earn, keep and lose (contract.tier_requests); stored and
    # versioned, not yet applied to rewards (issue 33).
    tiers: Tiers | None = None


class ProgrammeUpdate(RequestModel):
    """Edits the programme and its DRAFT version's schedule; absent fields stay as they are. `starts_at` and
    `ends_at` bound the event times the version rewards (starts_at <= t < ends_at); null clears a bound. A null
    `timezone` is the default, UTC; a null `description` clears it. Published versions keep their schedule."""

    # A name cannot be cleared: absent keeps it, and the document says null is not a name (no null default).
    name: Annotated[
        Name | None,
        WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 200}),
        Field(json_schema_extra=lambda schema: schema.pop("default", None)),
    ] = None
    description: Description | None = None
    timezone: Timezone | None = None
    starts_at: OffsetDateTime | None = None
    ends_at: OffsetDateTime | None = None
    # The draft's caps per customer across the programme's rules, its budget across all customers (null: none)
    # and what a reversal does when the points are spent (null: the default, "available").
    limits: Limits | None = None
    budget: Budget | None = None
    clawback: Clawback | None = None
    # When the draft's rewards expire (null: as the asset's points do). Publishing a version with an expiry makes
    # the asset track lots.
    expiry: Expiry | None = None
    # How many days before its receipt a live event may have occurred and still be rewarded (null: no bound, for
    # backfills); older events are processed without the programme's rewards (`event_too_old`).
    max_event_age_days: MaxEventAgeDays | None = None
    # The draft's forecast guards (null: none), checked by the server before publishing (contract.guard_requests),
    # and the days of stored events the check replays (null: the default, 90). Removing or loosening guards, or
    # shortening the window, needs rewards.guards.override.
    guards: Guards | None = None
    guard_window_days: GuardWindowDays | None = None
    # The draft's tiers (null: none; refused while a draft rule uses them).
    tiers: Tiers | None = None


class SimulationRequest(RequestModel):
    """The seed's shape: `event` holds `type` and the event's data fields as one flat object. `occurred_at` (the
    time rules read as `occurred_at.*`; now when absent) and `customer_id` (whose attributes, country and
    segments rules read as `customer.*`) are optional."""

    event: Annotated[
        dict[str, Any],
        _free_json("event"),
        WithJsonSchema(
            {
                "type": "object",
                "description": "The event's `type` and its data fields, side by side.",
                "required": ["type"],
                "properties": {"type": {"type": "string", "minLength": 1}},
                "additionalProperties": True,
            }
        ),
    ]
    occurred_at: DateTime | None = None
    customer_id: Identifier | None = None
    # A level code of the version's tiers: simulate as if the event's customer held it (progress at its entry).
    tier: LevelCode | None = None


class EventCreate(RequestModel):
    type: EventType
    external_event_id: Identifier
    customer_id: Identifier
    occurred_at: Annotated[
        DateTime | None,
        Field(
            description="When the event happened (absent: when it is received). At most 5 minutes ahead of the "
            "service's clock; a programme's max_event_age_days bounds how long before its receipt it may be."
        ),
    ] = None
    data: Annotated[dict[str, Any], _free_json("data", "event_payload_too_large")] = {}


class IssueRequest(RequestModel):
    wallet_id: Identifier
    amount: DecimalString
    reason: Annotated[str, Field(min_length=1, max_length=500)]


class RedemptionRequest(RequestModel):
    wallet_id: Identifier
    amount: DecimalString
    reference: Annotated[str, Field(min_length=1, max_length=500)]


class TransferRequest(RequestModel):
    from_wallet_id: Identifier
    to_wallet_id: Identifier
    amount: DecimalString
    reference: Annotated[str, Field(max_length=500)] | None = None


def _uri(value: str) -> str:
    """An RFC 3986 URI, by the rule JSON Schema's `format: uri` is checked with (the document declares it): no
    spaces, control or non-ASCII characters, well-formed percent escapes. Scheme and host rules are the service's."""
    if not validate_rfc3986(value, rule="URI"):
        raise custom_error(ServiceError("webhook_url_invalid", "the URL is not a valid URI (RFC 3986)"))
    return value


WEBHOOK_EVENT_KINDS = (
    "reward.issued",
    "asset.paused",
    "wallet.frozen",
    "reward.reversed",
    "points.expired",
    "tier.changed",
)


class WebhookCreate(RequestModel):
    """The seed's shape: `url` and the event kinds to deliver. The signing secret is returned once."""

    url: Annotated[
        str,
        Field(min_length=8, max_length=2000),
        AfterValidator(_uri),
        # The scheme rule (http or https, any case); which hosts an environment allows is beyond a schema.
        WithJsonSchema(
            {
                "type": "string",
                "minLength": 8,
                "maxLength": 2000,
                "format": "uri",
                "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://",
            }
        ),
    ]
    events: Annotated[
        list[Annotated[str, WithJsonSchema({"type": "string", "enum": list(WEBHOOK_EVENT_KINDS)})]],
        Field(min_length=1, max_length=len(WEBHOOK_EVENT_KINDS)),
    ]


WEBHOOK_ROTATION_GRACE_S = 24 * 3600  # default: the previous secret signs for a day after a rotation
WEBHOOK_ROTATION_MAX_GRACE_S = 7 * 24 * 3600


class WebhookSecretRotate(RequestModel):
    """A new signing secret; the previous one keeps signing for `grace_period_s` seconds (0: stops at once).
    The body may be empty."""

    grace_period_s: Annotated[
        int,
        BeforeValidator(_whole_number),
        Field(ge=0, le=WEBHOOK_ROTATION_MAX_GRACE_S, strict=True),
        _whole_number_schema(0, WEBHOOK_ROTATION_MAX_GRACE_S),
    ] = WEBHOOK_ROTATION_GRACE_S


class ApiKeyCreate(RequestModel):
    """A new key of the caller's organization and environment, holding at most the caller's permissions."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    permissions: Annotated[list[PermissionCode], Field(min_length=1, max_length=100)]


class KnowledgeSearch(RequestModel):
    query: Annotated[str, Field(min_length=1, max_length=500)]
    limit: SearchLimit = 5


class MessageCreate(RequestModel):
    content: Annotated[str, Field(min_length=1, max_length=4000)]
