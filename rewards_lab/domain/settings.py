"""A programme version's settings as the engine reads them (pure, typed): its spending (caps per customer, budget,
clawback, the expiry of its rewards, the bound on a live event's age), its forecast guards and the override it was
published with.

They are decoded once, by the store, when it reads a version or programme row (`store/settings_json.py` holds their
stored JSON); the engine, the services and the presenters read these types, never that JSON. Each type's `of` reads
its JSON form and `as_json` writes it back, the same form a request carries (`contract/limit_requests.py`,
`contract/guard_requests.py`, `contract/expiry_requests.py`), so a stored value round-trips unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

from rewards_lab.domain.expiry import ExpiryPolicy
from rewards_lab.domain.limits import Budget, Cap, Limit, limit_caps

Clawback = Literal["available", "negative", "none"]
DEFAULT_CLAWBACK: Clawback = "available"
_CLAWBACKS: dict[str, Clawback] = {"available": "available", "negative": "negative", "none": "none"}


@dataclass(frozen=True, slots=True)
class Spending:
    """A version's programme-wide spending settings; the defaults are what every version stored before them meant
    (no caps, no budget, clawback `available`, no expiry of its own, no bound on an event's age)."""

    limits: tuple[Limit, ...] = ()
    budget: Budget | None = None
    clawback: Clawback = DEFAULT_CLAWBACK
    expiry: ExpiryPolicy | None = None  # when its rewards expire (None: as the asset's points do)
    max_event_age_days: int | None = None  # how long before its receipt an event may have occurred (None: any)

    @classmethod
    def of(cls, stored: Mapping[str, Any] | None) -> Spending:
        """The settings of their stored JSON object (None: the defaults)."""
        if not stored:
            return NO_SPENDING
        budget, age = stored.get("budget"), stored.get("max_event_age_days")
        return cls(
            tuple(Limit.of(item) for item in stored.get("limits") or ()),
            None if budget is None else Budget.of(budget),
            clawback_of(stored.get("clawback")),
            ExpiryPolicy.of(stored.get("expiry")),
            None if age is None else int(age),
        )

    @property
    def is_default(self) -> bool:
        """Whether these are the defaults (stored as no settings at all)."""
        return self == NO_SPENDING

    def as_json(self) -> dict[str, Any]:
        """The stored JSON object: limits, budget and clawback always; expiry and the bound on an event's age only
        when set (absent: none, as in every version stored before them)."""
        settings: dict[str, Any] = {
            "limits": [limit.as_json() for limit in self.limits],
            "budget": None if self.budget is None else self.budget.as_json(),
            "clawback": self.clawback,
        }
        if self.expiry is not None:
            settings["expiry"] = self.expiry.as_json()
        if self.max_event_age_days is not None:
            settings["max_event_age_days"] = self.max_event_age_days
        return settings

    def caps(self, decimals: int) -> tuple[Cap, ...]:
        """The programme's caps per customer, then its budget, as the engine checks them (minor units of an asset
        of `decimals`)."""
        budget = () if self.budget is None else (self.budget.cap(decimals),)
        return limit_caps(self.limits, "programme", decimals) + budget

    @property
    def capped(self) -> bool:
        """Whether it has caps or a budget."""
        return bool(self.limits) or self.budget is not None


NO_SPENDING = Spending()


def clawback_of(value: object) -> Clawback:
    """A stored clawback policy (None: the default)."""
    return DEFAULT_CLAWBACK if value is None else _CLAWBACKS[str(value)]


# forecast guards --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class IssuedGuard:
    """The largest total the draft issues in one calendar period of the history may not exceed `max`."""

    metric: ClassVar[str] = "issued"
    period: str
    max: str  # a decimal string of the asset's units

    def as_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "period": self.period, "max": self.max}


@dataclass(frozen=True, slots=True)
class LiabilityDeltaGuard:
    """Draft minus published projected liability at the end of the forecast may not exceed `max`."""

    metric: ClassVar[str] = "liability_delta"
    max: str  # a decimal string of the asset's units (negative: the draft must lower it)

    def as_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "max": self.max}


@dataclass(frozen=True, slots=True)
class CeilingGuard:
    """The supply ceiling may not run out within `min` days of the end of the history."""

    metric: ClassVar[str] = "ceiling_exhausted_within_days"
    min: int

    def as_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "min": self.min}


Guard = IssuedGuard | LiabilityDeltaGuard | CeilingGuard


def guard_of(stored: Mapping[str, Any]) -> Guard:
    """A guard of its JSON form (its `metric` says which)."""
    metric = stored["metric"]
    if metric == IssuedGuard.metric:
        return IssuedGuard(str(stored["period"]), str(stored["max"]))
    if metric == LiabilityDeltaGuard.metric:
        return LiabilityDeltaGuard(str(stored["max"]))
    if metric == CeilingGuard.metric:
        return CeilingGuard(int(stored["min"]))
    raise ValueError(f"unknown guard metric {metric!r}")


def guards_of(stored: Sequence[Mapping[str, Any]] | None) -> tuple[Guard, ...]:
    """A version's guards of their stored JSON list (None: none)."""
    return tuple(guard_of(item) for item in stored or ())


@dataclass(frozen=True, slots=True)
class GuardOverride:
    """Why a version was published although a guard failed, who said so and when (aware)."""

    reason: str
    given_by: str
    given_at: datetime

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> GuardOverride:
        return cls(str(stored["reason"]), str(stored["given_by"]), datetime.fromisoformat(str(stored["given_at"])))

    def as_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "given_by": self.given_by, "given_at": self.given_at.isoformat()}


# tiers (issue 33) ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TierLevel:
    """One level as written: thresholds as decimal strings of the metric's units (None: the base; `retain` None:
    its `entry`), the multiplier as written (None: 1)."""

    code: str
    name: str
    entry: str | None = None
    retain: str | None = None
    multiplier: str | None = None

    def as_json(self) -> dict[str, Any]:
        written = {"entry": self.entry, "retain": self.retain, "multiplier": self.multiplier}
        return {"code": self.code, "name": self.name, **{k: v for k, v in written.items() if v is not None}}


@dataclass(frozen=True, slots=True)
class Tiers:
    """A version's tier model (contract.tier_requests.Tiers, validated): `metric` and `window` in their JSON forms
    (a metric's conditions are read by the engines that count it), the review schedule, the downgrade policy and
    the levels, base first."""

    metric: Mapping[str, Any]
    window: Mapping[str, Any]
    levels: tuple[TierLevel, ...]
    review_period: str | None = None  # a calendar review's period (None: at the window's end)
    downgrade_to: Literal["earned", "one_level"] = "earned"
    grace_days: int = 0

    @classmethod
    def of(cls, stored: Mapping[str, Any] | None) -> Tiers | None:
        """The model of its stored JSON object (None: the version has no tiers)."""
        if not stored:
            return None
        review = stored.get("review") or {}
        downgrade = stored.get("downgrade") or {}
        levels = tuple(
            TierLevel(
                str(level["code"]),
                str(level["name"]),
                *(None if level.get(k) is None else str(level[k]) for k in ("entry", "retain", "multiplier")),
            )
            for level in stored["levels"]
        )
        to: Literal["earned", "one_level"] = "one_level" if downgrade.get("to") == "one_level" else "earned"
        period = review.get("period") if review.get("at") == "calendar" else None
        return cls(
            dict(stored["metric"]), dict(stored["window"]), levels, period, to, int(downgrade.get("grace_days", 0))
        )

    def as_json(self) -> dict[str, Any]:
        """The stored JSON object, as the request model writes it (defaults left out), so that `of` round-trips."""
        settings: dict[str, Any] = {"metric": dict(self.metric), "window": dict(self.window)}
        if self.review_period is not None:
            settings["review"] = {"at": "calendar", "period": self.review_period}
        if (self.downgrade_to, self.grace_days) != ("earned", 0):
            settings["downgrade"] = {"to": self.downgrade_to, "grace_days": self.grace_days}
        settings["levels"] = [level.as_json() for level in self.levels]
        return settings

    @property
    def metric_type(self) -> str:
        return str(self.metric["type"])

    @property
    def event_types(self) -> tuple[str, ...]:
        """The event types a `sum`/`count` metric counts (its `less` part's too); none for `points`."""
        parts = [self.metric, self.metric.get("less")]
        return tuple(str(part["event_type"]) for part in parts if isinstance(part, Mapping) and "event_type" in part)

    def metric_decimals(self, asset_decimals: int) -> int:
        """The places of the metric's units: the asset's for `points`, the metric's for `sum`, none for `count`."""
        if self.metric_type == "points":
            return asset_decimals
        return int(self.metric.get("decimals", 2)) if self.metric_type == "sum" else 0
