"""The action types, one entry each (`ACTIONS`): what a rule's action calls for when the rule matches.

An entry (`ActionKind`) holds, for one type of action (`fixed`, `per`, `reverse`):
- `model`: the contract's request model that validates it on the wire (and `matches`: whether a stored action, its
  JSON, is of this type);
- `build`: the stored action as an `ActionSpec`, the form every engine evaluates (amounts in minor units);
- `outcome`: its evaluation, what it calls for given the number of its `per` field and the value of its reference
  field (the beneficiary's, or a reversal's original);
- `reason`: why it issues what it issues (or nothing), as simulations and the lab explain it;
- `sql`: its amount's SQLGlot form for the replays, one of the forms the replay compiler writes (`AmountSql`);
- `describe`, `label`: how the lab lists it (`amount x 0.05 to referrer_id`) and names it in the rule builder;
- `probes`: the event fields push verification tries it with, and their values.

An issue action with `"multiply": "tier"` (issue 33) is multiplied by the recipient's tier multiplier, which its
caller passes to `outcome` (`domain.tiers`: one exact product, one rounding toward zero); `outcome` and `sql`
refuse such an action without a multiplier, so that an engine that does not know tiers yet never pays it
unmultiplied.

An `ActionSpec` names its entry (`kind`; read from its fields when not given), and `ActionSpec.outcome` is that
entry's. The registry lives in the domain, not beside the operators in the contract: an action's evaluation needs
the domain's money (minor units, rounding toward zero, the ledger's largest amount) and its outcome types, which the
contract may not import; its validation is its request model, which the entry names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple, Protocol, TypeVar

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.limit_requests import ReverseAction
from rewards_lab.contract.request_base import RequestModel
from rewards_lab.contract.rule_requests import FixedAmount, PerRateAmount
from rewards_lab.domain.money import MAX_AMOUNT_MINOR, format_amount, parse_amount, reward_minor
from rewards_lab.domain.tiers import exact_product, multiplied_fixed

BENEFICIARY_MISSING = "beneficiary_missing"
ORIGINAL_MISSING = "original_missing"
FRACTION_INVALID = "fraction_invalid"
MISSING = object()  # a probe's value that leaves its field out of the event
PER_FIELD_VALUES = (Decimal("42.50"), Decimal("0.07"), Decimal("1000"), Decimal("19.99"))
ABSENT_ORIGINAL = "push-verify-absent-original"  # an original no side holds
FRACTION_PROBES = (MISSING, Decimal(-1), "x", Decimal(0), Decimal("12.5"))
SAMPLE_BENEFICIARY = "cus_sample"


@dataclass(frozen=True, slots=True)
class ReversalCall:
    """What a matched reverse action asks for: take back from the event whose external_event_id is `original`,
    a constant `fraction` of each reward, or `numerator` over the original's `of` field, or (neither) all that
    remains."""

    original: str
    fraction: Decimal | None = None
    numerator: Decimal | None = None
    of: str | None = None
    any_customer: bool = False  # take back even when the refund's customer is not the original's


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What one action of a matched rule calls for."""

    action_index: int
    asset_id: str
    decimals: int
    amount_minor: int  # 0 when the action issues nothing
    error_code: str | None = None  # set when the action must be refused (`amount_too_large`, `beneficiary_missing`)
    reason: str = ""  # kept only for a refusal (it becomes the error's message)
    beneficiary: str | None = None  # the customer reference to reward instead of the event's customer
    reversal: ReversalCall | None = None  # a reverse action's call (it issues nothing itself)
    multiplier: Decimal | None = None  # the tier multiplier applied (None: the action is not multiplied)

    @property
    def issues(self) -> bool:
        return self.amount_minor > 0


@dataclass(frozen=True, slots=True)
class ActionSpec:
    asset_id: str
    decimals: int
    fixed_minor: int | None = None
    per: str | None = None
    rate: Decimal | None = None
    beneficiary: str | None = None  # the field naming the customer to reward (None: the event's customer)
    # A reverse action (issue 18): the field naming the original event, and its fraction: a constant, or `per`
    # (this event's field) over `fraction_of` (the original's field); neither: the whole of what remains.
    reverse_of: str | None = None
    fraction: Decimal | None = None
    fraction_of: str | None = None
    any_customer: bool = False  # a refund by another customer than the original's takes back too
    kind: str | None = None  # its entry in ACTIONS (None: the one its fields say)
    multiply: bool = False  # `"multiply": "tier"`: its amount is multiplied by the recipient's tier multiplier

    @property
    def reference_field(self) -> str | None:
        """The field whose value the action needs per event: its beneficiary, or a reversal's original."""
        return self.beneficiary or self.reverse_of

    @property
    def entry(self) -> ActionKind:
        """Its type's entry."""
        if self.kind is not None:
            return ACTIONS[self.kind]
        return ACTIONS["reverse" if self.reverse_of is not None else "fixed" if self.fixed_minor is not None else "per"]

    def outcome(
        self, index: int, number: Decimal | None, beneficiary: Any = None, multiplier: Decimal | None = None
    ) -> ActionOutcome:
        """What the action calls for, given the number of its `per` field (ignored for a fixed amount), the value
        of its reference field (the beneficiary's or, for a reversal, the original's; ignored without) and, for an
        action that multiplies, the recipient's tier multiplier (ignored otherwise)."""
        return self.entry.outcome(self, index, number, beneficiary, multiplier)

    def product(self, number: Decimal, multiplier: Decimal | None = None) -> str:
        times = "" if multiplier is None else f" x tier {multiplier}"
        return f"{self.per} = {number} x rate {self.rate}{times}"


def number_of(value: Any) -> Decimal | None:
    """The number a value read holds, or None (an amount's `per` field must be a number)."""
    return value if isinstance(value, Decimal) and not isinstance(value, bool) else None


def why_not_a_number(name: str, value: Any) -> str:
    """Why a field read holds no number (for an explanation)."""
    if value is None:
        return f"field '{name}' is missing"
    return f"field '{name}' is not a number ({type(value).__name__})"


A = TypeVar("A", covariant=True)


class AmountSql(Protocol[A]):
    """The amount forms the replay compiler writes in SQL, exactly as `outcome` computes them."""

    def fixed(self, minor: int) -> A:
        """A constant amount in minor units."""

    def product(self, field: str, rate: Decimal) -> A:
        """A field's number times a rate, rounded toward zero to the asset's decimals (refused when too large)."""

    def nothing(self) -> A:
        """No amount: the action issues nothing itself (a reversal takes back in its own pass)."""


class Probe(NamedTuple):
    """An event field push verification sets to each of `values` in turn (MISSING: left out), every other sample
    carrying `base` (MISSING: whatever the conditions need); `within_conditions`: values an `eq` condition on the
    field would refuse are skipped."""

    field: str
    values: tuple[Any, ...]
    base: Any = MISSING
    within_conditions: bool = False


@dataclass(frozen=True)
class ActionKind:
    """Everything about one type of action (see the module)."""

    name: str
    label: str  # the rule builder's choice
    model: type[RequestModel]
    matches: Callable[[Mapping[str, Any]], bool]
    build: Callable[[Mapping[str, Any], str, int, str], ActionSpec]  # (stored action, asset id, decimals, where)
    outcome: Callable[[ActionSpec, int, Decimal | None, Any, Decimal | None], ActionOutcome]
    reason: Callable[[ActionSpec, ActionOutcome, Any, Any], str]  # (action, outcome, `per` read, reference read)
    sql: Callable[[ActionSpec, AmountSql[Any]], Any]
    describe: Callable[[Mapping[str, Any]], str]  # the stored action (Python values) as the lab lists it
    probes: Callable[[Mapping[str, Any]], list[Probe]]


# issue actions: an amount, to the event's customer or a beneficiary -------------------------------------------
def _issue(amount: str) -> Callable[[Mapping[str, Any]], bool]:
    def matches(action: Mapping[str, Any]) -> bool:
        return action.get("type") != "reverse" and amount in (action.get("amount") or {})

    return matches


def _multiplies(action: Mapping[str, Any]) -> bool:
    return action.get("multiply") == "tier"


def _multiplier_of(action: ActionSpec, multiplier: Decimal | None) -> Decimal | None:
    """The multiplier an action applies (None: it does not multiply); refused when it multiplies and none is
    known (an engine without tiers must not pay the unmultiplied amount)."""
    if not action.multiply:
        return None
    if multiplier is None:
        raise ServiceError(
            "field_invalid",
            'multiply: "tier" needs the recipient\'s tier, which this engine does not know yet (issue 33)',
            field="multiply",
        )
    return multiplier


def _refuse_multiplied_sql(action: ActionSpec) -> None:
    """The replay's SQL has no tiers yet (issue 33, increments T6/T7): it refuses rather than pay unmultiplied."""
    if action.multiply:
        _multiplier_of(action, None)


def _beneficiary_of(action: Mapping[str, Any]) -> str | None:
    named = action.get("beneficiary")
    return None if not named else str(named["field"])


def _to_beneficiary(action: ActionSpec, found: ActionOutcome, beneficiary: Any) -> ActionOutcome:
    """An issue action's outcome with its beneficiary: refused when its field names no customer."""
    if action.beneficiary is None or not found.issues:
        return found
    index = found.action_index
    if not isinstance(beneficiary, str) or not beneficiary:
        reason = f"refused: the beneficiary field '{action.beneficiary}' {_no_reference('customer', beneficiary)}"
        return ActionOutcome(index, action.asset_id, action.decimals, 0, BENEFICIARY_MISSING, reason)
    amount, times = found.amount_minor, found.multiplier
    return ActionOutcome(index, action.asset_id, action.decimals, amount, beneficiary=beneficiary, multiplier=times)


def _no_reference(what: str, value: Any) -> str:
    if value is None:
        return "is missing"
    return f"holds no {what} reference ({type(value).__name__})"


def _to_whom(reason: str, outcome: ActionOutcome, action: ActionSpec) -> str:
    if outcome.beneficiary is None:
        return reason
    return f"{reason}, to the beneficiary {action.beneficiary} = '{outcome.beneficiary}'"


def _issue_text(action: Mapping[str, Any], amount: str) -> str:
    beneficiary = _beneficiary_of(action)
    amount = f"{amount} x tier" if _multiplies(action) else amount
    return amount if beneficiary is None else f"{amount} to {beneficiary}"


def _beneficiary_probes(action: Mapping[str, Any]) -> list[Probe]:
    """A beneficiary that names nobody usable fails its action alike on both sides."""
    beneficiary = _beneficiary_of(action)
    return [] if beneficiary is None else [Probe(beneficiary, (7, MISSING), SAMPLE_BENEFICIARY)]


# fixed ----------------------------------------------------------------------------------------------------------
def _fixed_build(action: Mapping[str, Any], asset_id: str, decimals: int, where: str) -> ActionSpec:
    minor = parse_amount(action["amount"]["fixed"], decimals, f"{where}.amount.fixed")
    beneficiary = _beneficiary_of(action)
    return ActionSpec(asset_id, decimals, fixed_minor=minor, beneficiary=beneficiary, multiply=_multiplies(action))


def _fixed_outcome(
    action: ActionSpec, index: int, _number: Decimal | None, beneficiary: Any, multiplier: Decimal | None
) -> ActionOutcome:
    assert action.fixed_minor is not None
    times = _multiplier_of(action, multiplier)
    minor = action.fixed_minor if times is None else multiplied_fixed(action.fixed_minor, times)
    if minor > MAX_AMOUNT_MINOR:
        written = format_amount(action.fixed_minor, action.decimals)
        reason = f"refused: fixed {written} x tier {times} is more than the ledger can hold in one amount"
        return ActionOutcome(index, action.asset_id, action.decimals, 0, "amount_too_large", reason, multiplier=times)
    found = ActionOutcome(index, action.asset_id, action.decimals, minor, multiplier=times)
    return _to_beneficiary(action, found, beneficiary)


def _fixed_reason(action: ActionSpec, outcome: ActionOutcome, _value: Any, _reference: Any) -> str:
    assert action.fixed_minor is not None
    written = f"fixed {format_amount(action.fixed_minor, action.decimals)}"
    if outcome.multiplier is not None and not outcome.reason:
        amount = format_amount(outcome.amount_minor, action.decimals)
        written = f"{written} x tier {outcome.multiplier} = {amount} (rounded toward zero)"
        if not outcome.issues:
            written = f"issues nothing: {written.removesuffix(' (rounded toward zero)')}, less than one minor unit"
    return _to_whom(outcome.reason or written, outcome, action)


def _fixed_sql(action: ActionSpec, amounts: AmountSql[Any]) -> Any:
    assert action.fixed_minor is not None
    _refuse_multiplied_sql(action)
    return amounts.fixed(action.fixed_minor)


FIXED = ActionKind(
    "fixed",
    "fixed amount",
    FixedAmount,
    _issue("fixed"),
    _fixed_build,
    _fixed_outcome,
    _fixed_reason,
    _fixed_sql,
    lambda action: _issue_text(action, action["amount"]["fixed"]),
    _beneficiary_probes,
)


# per: a field's number times a rate -----------------------------------------------------------------------------
def _per_build(action: Mapping[str, Any], asset_id: str, decimals: int, _where: str) -> ActionSpec:
    amount = action["amount"]
    rate = Decimal(str(amount["rate"]))
    return ActionSpec(
        asset_id,
        decimals,
        per=str(amount["per"]),
        rate=rate,
        beneficiary=_beneficiary_of(action),
        multiply=_multiplies(action),
    )


def _per_outcome(
    action: ActionSpec, index: int, number: Decimal | None, beneficiary: Any, multiplier: Decimal | None
) -> ActionOutcome:
    times = _multiplier_of(action, multiplier)
    if number is None:
        nothing = ActionOutcome(index, action.asset_id, action.decimals, 0, multiplier=times)
        return _to_beneficiary(action, nothing, beneficiary)
    assert action.rate is not None
    rate = action.rate if times is None else exact_product(action.rate, times)  # one product, one rounding
    minor = reward_minor(number, rate, action.decimals)
    if minor > MAX_AMOUNT_MINOR:  # the reason names the number as written (42.5 and 42.50 differ here)
        reason = f"refused: {action.product(number, times)} is more than the ledger can hold in one amount"
        return ActionOutcome(index, action.asset_id, action.decimals, 0, "amount_too_large", reason, multiplier=times)
    found = ActionOutcome(index, action.asset_id, action.decimals, max(minor, 0), multiplier=times)
    return _to_beneficiary(action, found, beneficiary)


def _per_reason(action: ActionSpec, outcome: ActionOutcome, value: Any, _reference: Any) -> str:
    number = number_of(value)
    if number is None:
        reason = f"issues nothing: {why_not_a_number(str(action.per), value)}"
    elif outcome.error_code is not None:
        reason = outcome.reason
    elif not outcome.issues:
        reason = f"issues nothing: {action.product(number, outcome.multiplier)} rounds down to less than one minor unit"
    else:
        amount = format_amount(outcome.amount_minor, action.decimals)
        reason = f"{action.product(number, outcome.multiplier)} = {amount} (rounded toward zero)"
    return _to_whom(reason, outcome, action)


def _per_sql(action: ActionSpec, amounts: AmountSql[Any]) -> Any:
    assert action.per is not None and action.rate is not None
    _refuse_multiplied_sql(action)
    return amounts.product(action.per, action.rate)


def _per_probes(action: Mapping[str, Any]) -> list[Probe]:
    """Values that exercise rounding, and the field missing."""
    field = str(action["amount"]["per"])
    return [Probe(field, (*PER_FIELD_VALUES, MISSING), within_conditions=True), *_beneficiary_probes(action)]


PER = ActionKind(
    "per",
    "per field x rate",
    PerRateAmount,
    _issue("per"),
    _per_build,
    _per_outcome,
    _per_reason,
    _per_sql,
    lambda action: _issue_text(action, f"{action['amount']['per']} x {action['amount']['rate']}"),
    _per_probes,
)


# reverse: take back what an original event issued ---------------------------------------------------------------
def reverse_spec(action: Mapping[str, Any], asset_id: str, decimals: int, _where: str = "") -> ActionSpec:
    """A stored reverse action as an ActionSpec: its fraction's field is read as `per`."""
    fraction = action.get("fraction")
    original = str(action["original"]["field"])
    anyone = bool(action.get("any_customer", False))
    if isinstance(fraction, Mapping):
        of = str(fraction["of"])
        return ActionSpec(
            asset_id, decimals, per=str(fraction["field"]), reverse_of=original, fraction_of=of, any_customer=anyone
        )
    constant = None if fraction is None else Decimal(str(fraction))
    return ActionSpec(asset_id, decimals, reverse_of=original, fraction=constant, any_customer=anyone)


def _reverse_outcome(
    action: ActionSpec, index: int, number: Decimal | None, original: Any, _multiplier: Decimal | None
) -> ActionOutcome:
    if not isinstance(original, str) or not original:
        reason = f"refused: the original field '{action.reverse_of}' {_no_reference('event', original)}"
        return ActionOutcome(index, action.asset_id, action.decimals, 0, ORIGINAL_MISSING, reason)
    if action.fraction_of is not None and (number is None or number < 0):
        shape = "is missing or not a number" if number is None else f"is negative ({number})"
        reason = f"refused: the fraction's field '{action.per}' {shape}"
        return ActionOutcome(index, action.asset_id, action.decimals, 0, FRACTION_INVALID, reason)
    numerator = number if action.fraction_of else None
    call = ReversalCall(original, action.fraction, numerator, action.fraction_of, action.any_customer)
    return ActionOutcome(index, action.asset_id, action.decimals, 0, reversal=call)


def _reverse_reason(action: ActionSpec, outcome: ActionOutcome, value: Any, original: Any) -> str:
    if outcome.error_code is not None:
        return outcome.reason
    if action.fraction_of is not None:
        return (
            f"takes back {action.per} = {number_of(value)} over the original's {action.fraction_of} of what event "
            f"'{original}' issued"
        )
    if action.fraction is not None:
        return f"takes back {action.fraction} of what event '{original}' issued"
    return f"takes back what remains of what event '{original}' issued"


def _reverse_describe(action: Mapping[str, Any]) -> str:
    """`take back what order_id issued`, `take back 0.5 of what order_id issued`, `take back refund_amount/amount
    of what order_id issued`, `... (a refund by any customer)`."""
    fraction = action.get("fraction")
    share = (
        ""
        if fraction is None
        else f"{fraction['field']}/{fraction['of']} of "
        if isinstance(fraction, Mapping)
        else f"{fraction} of "
    )
    anyone = " (a refund by any customer)" if action.get("any_customer") else ""
    return f"take back {share}what {action['original']['field']} issued{anyone}"


def _reverse_probes(action: Mapping[str, Any]) -> list[Probe]:
    """A refund naming an absent original, without one, naming it by a number; and its fraction field absent,
    negative, not a number, zero and a share."""
    probes = [Probe(str(action["original"]["field"]), (ABSENT_ORIGINAL, 7, MISSING), ABSENT_ORIGINAL)]
    fraction = action.get("fraction")
    if isinstance(fraction, Mapping):
        probes.append(Probe(str(fraction["field"]), FRACTION_PROBES, Decimal(1)))
    return probes


REVERSE = ActionKind(
    "reverse",
    "take back (reverse)",
    ReverseAction,
    lambda action: action.get("type") == "reverse",
    reverse_spec,
    _reverse_outcome,
    _reverse_reason,
    lambda _action, amounts: amounts.nothing(),
    _reverse_describe,
    _reverse_probes,
)


# the registry ---------------------------------------------------------------------------------------------------
ACTIONS: dict[str, ActionKind] = {kind.name: kind for kind in (FIXED, PER, REVERSE)}


def action_kind(action: Mapping[str, Any]) -> ActionKind:
    """The entry of a stored action (its JSON, or a model's Python dump)."""
    for kind in ACTIONS.values():
        if kind.matches(action):
            return kind
    raise ValueError(f"no action type matches {sorted(action)}")
