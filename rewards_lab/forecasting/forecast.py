"""Forecasting from a replay: issuance over time, per rule, customer and segment, liability, a projection with a
range, the date the supply ceiling runs out, and two versions side by side.

Historic figures are exact: sums of `amount_minor` (integers) shown as `Decimal` in the asset's decimals. The
projection is a statistical estimate and uses floats. Method (docs/decisions.md, "Lab and notebooks"): the daily
issuance of the last `window` days (days without issuance count as zero) is resampled with replacement, `draws`
times, into future paths of `days` days (a seeded day bootstrap); the expected path is the window's mean per day,
the range is the paths' `(1 - level) / 2` and `(1 + level) / 2` quantiles of cumulative issuance per day ahead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

import numpy as np
import pandas as pd

from rewards_lab.domain import segments as seg
from rewards_lab.domain.money import format_amount
from rewards_lab.forecasting.labels import rule_labels
from rewards_lab.forecasting.tables import Table
from rewards_lab.forecasting.tables import table as as_table

ISSUED = "issued"
REVERSED = "reversed"
EXHAUSTED = "asset_supply_exhausted"


def amount(minor: int, decimals: int) -> Decimal:
    """Minor units as an exact Decimal with the asset's decimals ("0.00", not "0E-2")."""
    return Decimal(format_amount(int(minor), decimals))


@dataclass(frozen=True)
class History:
    """The issuance rows of one replay (REPLAY_API.md's columns) and what a forecast needs beside them."""

    issuances: pd.DataFrame
    decimals: int
    ceiling: Decimal | None = None
    opening_supply: Decimal = Decimal(0)
    label: str = "replay"
    rule_labels: dict[int, str] = field(default_factory=dict)  # by position: `1 · Cashback...` (forecasting.labels)
    symbol: str = "points"  # the asset's symbol, for the figures' units (lab.units)
    value_per_unit: Decimal | None = None  # the asset's worth per unit in money, when it has one

    @property
    def issued_rows(self) -> pd.DataFrame:
        return self.issuances[self.issuances["status"] == ISSUED]

    @property
    def reversed_rows(self) -> pd.DataFrame:
        """A reverse action's rows (what refunds took back: `amount_minor` is what the wallets gave)."""
        if "kind" not in self.issuances:
            return self.issuances.iloc[0:0]
        return self.issuances[(self.issuances["kind"] == "reversal") & (self.issuances["status"] == REVERSED)]

    @property
    def has_limits_or_reversals(self) -> bool:
        """Whether the replay had caps, budgets or reversals (its rows carry what they cut and took back)."""
        return "kind" in self.issuances

    def day_range(self) -> pd.DatetimeIndex:
        days = _days(self.issuances)
        if days.empty:
            return pd.DatetimeIndex([], name="day")
        return pd.date_range(days.min(), days.max(), freq="D", name="day")


def _days(frame: pd.DataFrame) -> pd.Series:
    occurred = pd.to_datetime(frame["occurred_at"], utc=True)
    return occurred.dt.tz_convert("UTC").dt.tz_localize(None).dt.normalize()


def _infer_decimals(frame: pd.DataFrame) -> int:
    for minor, value in zip(frame["amount_minor"], frame["amount"], strict=True):
        if int(minor) != 0:
            return max(0, round(math.log10(int(minor) / float(value))))
    return 0


def history(
    source: Any,
    *,
    decimals: int | None = None,
    ceiling: Decimal | int | str | None = None,
    opening_supply: Decimal | int | str | None = None,
    label: str | None = None,
    symbol: str | None = None,
) -> History:
    """A `History` from a ReplayResult, an issuance DataFrame (with these keywords) or a History (returned).
    A ReplayResult gives its asset's symbol and value per unit; a DataFrame's amounts are `points` unless
    `symbol` names them."""
    if isinstance(source, History):
        return source
    asset = getattr(getattr(source, "definition", None), "asset", None)
    worth = getattr(asset, "value_per_unit", None)
    if isinstance(source, pd.DataFrame):
        frame = source
        labels: dict[int, str] = {}
    else:  # a ReplayResult (duck-typed, so that this module does not depend on the replay engine)
        frame = source.to_pandas()
        definition = source.definition
        decimals = definition.asset.decimals if decimals is None else decimals
        ceiling = source.ceiling if ceiling is None else ceiling
        opening_supply = source.opening_supply if opening_supply is None else opening_supply
        label = label or definition.programme.name
        labels = rule_labels(definition.rules)
    return History(
        issuances=frame,
        decimals=_infer_decimals(frame) if decimals is None else decimals,
        ceiling=None if ceiling is None else Decimal(str(ceiling)),
        opening_supply=Decimal(str(opening_supply or 0)),
        label=label or "replay",
        rule_labels=labels,
        symbol=symbol or getattr(asset, "symbol", None) or "points",
        value_per_unit=None if worth is None else Decimal(str(worth)),
    )


# history ------------------------------------------------------------------------------------------------------
def daily(source: Any, by: Literal["asset", "rule", "event_type"] = "asset") -> pd.DataFrame:
    """Issued per day and cumulative, per asset (default), per rule or per event type; every day between the
    history's first and last row is present (zero when nothing was issued)."""
    h = history(source)
    key = {"asset": "asset", "rule": "rule_index", "event_type": "event_type"}[by]
    rows = h.issued_rows.assign(day=_days(h.issued_rows))
    minor = rows.groupby([key, "day"])["amount_minor"].agg(["sum", "count"])
    groups = sorted(h.issuances[key].dropna().unique())
    days = h.day_range()
    full = pd.MultiIndex.from_product([groups, days], names=[key, "day"])
    minor = minor.reindex(full, fill_value=0).reset_index()
    minor["cumulative_minor"] = minor.groupby(key)["sum"].cumsum()
    out = pd.DataFrame(
        {
            "day": minor["day"].dt.date,
            key: minor[key],
            "issued": [amount(m, h.decimals) for m in minor["sum"]],
            "issuances": minor["count"].astype("int64"),
            "cumulative": [amount(m, h.decimals) for m in minor["cumulative_minor"]],
        }
    )
    if h.has_limits_or_reversals:  # what refunds took back, and issuance net of it
        taken = h.reversed_rows.assign(day=_days(h.reversed_rows)).groupby([key, "day"])["amount_minor"].sum()
        back = taken.reindex(full, fill_value=0).to_numpy()
        net = minor["sum"].to_numpy() - back
        out["reversed"] = _amounts(back, h.decimals, out.index)
        out["net"] = _amounts(net, h.decimals, out.index)
        out["net_cumulative"] = _amounts(pd.Series(net).groupby(minor[key]).cumsum(), h.decimals, out.index)
    return out.sort_values(["day", key], kind="stable").reset_index(drop=True)


def limits_and_reversals(source: Any) -> pd.DataFrame:
    """Per day: what the rules called for (`requested`), what caps and budgets cut (in all and by scope: rule
    caps, programme caps, budget), the rewards cut to nothing (`limited`), what was issued, what refunds took back
    (`reversed`) and the net issuance. Empty for a replay without caps, budgets or reversals."""
    h = history(source)
    if not h.has_limits_or_reversals:
        return pd.DataFrame(columns=["day", "requested", "cut", "issued", "reversed", "net"])
    frame = h.issuances.assign(day=_days(h.issuances))
    rewards = frame[frame["kind"] == "issue"]
    cut = rewards["cut_minor"].fillna(0).astype("int64")
    per_day = (
        pd.DataFrame(
            {
                "requested": rewards["requested_minor"].fillna(rewards["amount_minor"]).astype("int64"),
                "issued": rewards["amount_minor"].where(rewards["status"] == ISSUED, 0).astype("int64"),
                "cut": cut,
                "cut_by_rule_caps": cut.where(rewards["cap_scope"] == "rule", 0),
                "cut_by_programme_caps": cut.where(rewards["cap_scope"] == "programme", 0),
                "cut_by_budget": cut.where(rewards["cap_scope"] == "budget", 0),
                "limited": (rewards["status"] == "limited").astype("int64"),
                "day": rewards["day"],
            }
        )
        .groupby("day")
        .sum()
    )
    taken = h.reversed_rows.assign(day=_days(h.reversed_rows)).groupby("day")["amount_minor"].sum()
    per_day = per_day.reindex(h.day_range(), fill_value=0)
    per_day["reversed"] = taken.reindex(h.day_range(), fill_value=0).astype("int64")
    per_day["net"] = per_day["issued"] - per_day["reversed"]
    out = pd.DataFrame({"day": pd.DatetimeIndex(per_day.index).date})
    for column in ("requested", "cut", "cut_by_rule_caps", "cut_by_programme_caps", "cut_by_budget", "issued"):
        out[column] = _amounts(per_day[column], h.decimals, out.index)
    out["limited"] = per_day["limited"].to_numpy()
    out["reversed"] = _amounts(per_day["reversed"], h.decimals, out.index)
    out["net"] = _amounts(per_day["net"], h.decimals, out.index)
    return out


def _amounts(minor: Any, decimals: int, index: pd.Index) -> pd.Series:
    """Minor units as exact Decimals in a column (object dtype: pandas keeps them exact)."""
    return pd.Series([amount(m, decimals) for m in minor], index=index, dtype="object")


def per_rule(source: Any) -> Table:
    """Per rule (its label: position and name, `forecasting.labels`): issued, issuances, failed attempts and customers
    rewarded."""
    h = history(source)
    frame = h.issuances
    ok = frame["status"] == ISSUED
    grouped = frame.assign(
        issued_minor=frame["amount_minor"].where(ok, 0),
        ok=ok,
        failed=~ok,
        rewarded=frame["customer_id"].where(ok),
    ).groupby("rule_index")
    table = grouped.agg(
        issued_minor=("issued_minor", "sum"),
        issuances=("ok", "sum"),
        failed=("failed", "sum"),
        customers=("rewarded", "nunique"),
    ).reset_index()
    table.insert(1, "rule", [h.rule_labels.get(int(i), str(i)) for i in table["rule_index"]])
    table.insert(2, "issued", [amount(m, h.decimals) for m in table.pop("issued_minor")])
    return as_table(table.astype({"issuances": "int64", "failed": "int64", "customers": "int64"}))


def per_customer(source: Any) -> pd.DataFrame:
    """Per customer who earned anything: issued and issuances, largest first (ties by customer id)."""
    h = history(source)
    rows = h.issued_rows
    table = rows.groupby("customer_id")["amount_minor"].agg(["sum", "count"]).reset_index()
    table = table.sort_values(["sum", "customer_id"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return pd.DataFrame(
        {
            "customer_id": table["customer_id"],
            "issued": [amount(m, h.decimals) for m in table["sum"]],
            "issuances": table["count"].astype("int64"),
        }
    )


def segment_of_customers(
    source: Any, events: pd.DataFrame | None = None, as_of: datetime | None = None
) -> pd.DataFrame:
    """Each customer's segments as `domain.segments.classify` defines them, evaluated at `as_of` (default: the
    last event of the history). A replay knows no sign-up dates: a customer's first event stands for its
    creation. Activity comes from `events` (customer_id, occurred_at) when given, else from the issuance rows;
    high value compares the customers' issuance over the last 90 days, as the live service does."""
    h = history(source)
    activity = (events if events is not None else h.issuances)[["customer_id", "occurred_at"]].copy()
    activity["at"] = _days_exact(activity["occurred_at"])
    now = as_of or activity["at"].max().to_pydatetime()
    recent_from = now - seg.ACTIVE_WITHIN
    stats = activity.groupby("customer_id")["at"].agg(["min", "max"])
    recent = activity[activity["at"] >= recent_from].groupby("customer_id").size()
    high_value = _high_value(h, now)
    rows = []
    for customer, first, last in zip(stats.index, stats["min"], stats["max"], strict=True):
        facts = seg.Activity(
            created_at=first.to_pydatetime(),
            last_event_at=last.to_pydatetime(),
            events_last_30_days=int(recent.get(customer, 0)),
            high_value_assets=("asset",) if customer in high_value else (),
        )
        rows += [{"customer_id": customer, "segment": code} for code, _ in seg.classify(now, facts)]
    return pd.DataFrame(rows, columns=["customer_id", "segment"])


def _days_exact(values: pd.Series) -> pd.Series:
    return pd.to_datetime(values, utc=True).dt.tz_convert("UTC").dt.tz_localize(None)


def _high_value(h: History, now: datetime) -> set[str]:
    rows = h.issued_rows
    rows = rows[_days_exact(rows["occurred_at"]) >= now - seg.HIGH_VALUE_WINDOW]
    totals = rows.groupby("customer_id")["amount_minor"].sum()
    if len(totals) < seg.HIGH_VALUE_MIN_PEERS:
        return set()
    cutoff = totals.astype("float64").quantile(seg.HIGH_VALUE_QUANTILE)  # linear, as DuckDB's quantile_cont
    return set(totals[totals.astype("float64") >= cutoff].index)


SEGMENTS_OVERLAP = (
    "A customer can be in several segments (new and active, say): each segment counts all that its customers "
    "were issued, so the shares add up to more than 100%."
)


def per_segment(source: Any, events: pd.DataFrame | None = None, as_of: datetime | None = None) -> Table:
    """Issued per segment (a customer can be in several: new and active, say), with customers and share (of all
    that was issued: segments overlap, so shares add up to more than 100%; the table says so under it)."""
    h = history(source)
    members = segment_of_customers(h, events, as_of)
    issued = h.issued_rows.groupby("customer_id")["amount_minor"].sum()
    members["minor"] = members["customer_id"].map(issued).fillna(0).astype("int64")
    table = members.groupby("segment").agg(customers=("customer_id", "nunique"), minor=("minor", "sum"))
    table = table.reindex([code for code in seg.SEGMENT_NAMES if code in table.index]).reset_index()
    total = int(issued.sum())
    out = pd.DataFrame(
        {
            "segment": table["segment"],
            "name": [seg.SEGMENT_NAMES[code] for code in table["segment"]],
            "customers": table["customers"].astype("int64"),
            "issued": [amount(m, h.decimals) for m in table["minor"]],
            "share": [float(m) / total if total else 0.0 for m in table["minor"]],
        }
    )
    return as_table(out, caption=SEGMENTS_OVERLAP, percent=("share",))


def liability(source: Any) -> pd.DataFrame:
    """Outstanding supply at the end of each day: opening supply + everything issued so far, net of what refunds
    took back, and the headroom left under the ceiling (None without a ceiling). Redemptions and expiry are
    `forecasting.liability`'s (issued - redeemed - expired - reversed, with its redemption and breakage model)."""
    h = history(source)
    days = daily(h)
    cumulative = days["net_cumulative"] if "net_cumulative" in days else days["cumulative"]
    outstanding = [h.opening_supply + c for c in cumulative]
    headroom = [None if h.ceiling is None else h.ceiling - value for value in outstanding]
    return pd.DataFrame({"day": days["day"], "issued": days["issued"], "liability": outstanding, "headroom": headroom})


# projection ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Projection:
    """Projected liability per day ahead (floats): expected, and the `level` range from the day bootstrap."""

    frame: pd.DataFrame  # day, expected, low, high
    mean_daily: float
    sd_daily: float
    window: int
    level: float
    draws: int
    method: str


def _daily_minor(h: History) -> np.ndarray:
    """Issuance per day (minor units), net of what refunds took back."""
    rows, back = h.issued_rows, h.reversed_rows
    per_day = rows.groupby(_days(rows))["amount_minor"].sum().reindex(h.day_range(), fill_value=0)
    taken = back.groupby(_days(back))["amount_minor"].sum().reindex(h.day_range(), fill_value=0)
    return np.asarray(per_day - taken, dtype="float64")


def _bootstrap_paths(sample: np.ndarray, days: int, draws: int, seed: int) -> np.ndarray:
    """`draws` x `days` cumulative sums of days drawn with replacement from `sample`."""
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.choice(sample, size=(draws, days), replace=True), axis=1)


def project(
    source: Any, *, days: int = 30, window: int = 28, draws: int = 2000, level: float = 0.9, seed: int = 0
) -> Projection:
    """Liability over the next `days` days, capped at the ceiling. Needs at least one day of history."""
    h = history(source)
    if days < 1 or window < 1 or draws < 1 or not 0 < level < 1:
        raise ValueError("days, window and draws must be positive and level between 0 and 1")
    per_day = _daily_minor(h)
    if per_day.size == 0:
        raise ValueError("the history has no issuance rows to project from")
    sample = per_day[-window:]
    scale = 10.0**-h.decimals
    paths = _bootstrap_paths(sample, days, draws, seed) * scale
    start = float(h.opening_supply) + float(per_day.sum()) * scale
    ahead = np.arange(1, days + 1)
    last_day = h.day_range()[-1].date()
    frame = pd.DataFrame(
        {
            "day": [last_day + timedelta(days=int(i)) for i in ahead],
            "expected": start + float(sample.mean()) * scale * ahead,
            "low": start + np.quantile(paths, (1 - level) / 2, axis=0),
            "high": start + np.quantile(paths, (1 + level) / 2, axis=0),
        }
    )
    if h.ceiling is not None:  # the ledger refuses issuance beyond the ceiling: liability stops there
        for column in ("expected", "low", "high"):
            frame[column] = frame[column].clip(upper=float(h.ceiling))
    method = (
        f"day bootstrap: the last {sample.size} days' issuance resampled with replacement, {draws} paths, "
        f"{level:.0%} range"
    )
    return Projection(
        frame, float(sample.mean()) * scale, float(sample.std()) * scale, int(sample.size), level, draws, method
    )


@dataclass(frozen=True)
class Exhaustion:
    """When the ceiling runs out. `kind`: "historic" (a replayed issuance was refused with
    asset_supply_exhausted on `on`), "projected" (expected day, with `earliest`/`latest` the range of the
    bootstrap paths), "not_within" (not within `horizon_days` even on the fastest paths), or "no_ceiling"."""

    kind: Literal["historic", "projected", "not_within", "no_ceiling"]
    on: date | None = None
    earliest: date | None = None
    latest: date | None = None
    horizon_days: int | None = None

    def describe(self) -> str:
        if self.kind == "no_ceiling":
            return "the asset has no supply ceiling"
        if self.kind == "historic":
            return f"the ceiling was reached on {self.on} (issuance refused with {EXHAUSTED})"
        if self.kind == "not_within":
            return f"the ceiling is not reached within {self.horizon_days} days"
        latest = "after the horizon" if self.latest is None else str(self.latest)
        return f"the ceiling would be reached on {self.on} (range {self.earliest} to {latest})"


def exhaustion(
    source: Any, *, window: int = 28, draws: int = 2000, level: float = 0.9, seed: int = 0, horizon_days: int = 3650
) -> Exhaustion:
    h = history(source)
    if h.ceiling is None:
        return Exhaustion("no_ceiling")
    refused = h.issuances[(h.issuances["status"] != ISSUED) & (h.issuances["error_code"] == EXHAUSTED)]
    if not refused.empty:
        return Exhaustion("historic", on=_days(refused).min().date())
    per_day = _daily_minor(h)
    if per_day.size == 0:
        return Exhaustion("not_within", horizon_days=horizon_days)
    scale = 10.0**-h.decimals
    headroom_minor = (float(h.ceiling) - float(h.opening_supply)) / scale - float(per_day.sum())
    sample = per_day[-window:]
    last_day = h.day_range()[-1].date()
    mean = float(sample.mean())
    expected = None if mean <= 0 else max(1, math.ceil(headroom_minor / mean))  # at the ceiling: the next day
    if expected is None or expected > horizon_days:
        return Exhaustion("not_within", horizon_days=horizon_days)
    horizon = min(horizon_days, 3 * expected + 30)  # paths slower than this count as "later than the horizon"
    reached = _bootstrap_paths(sample, horizon, draws, seed) >= headroom_minor
    first = np.where(reached.any(axis=1), reached.argmax(axis=1) + 1, np.inf)  # day ahead each path runs out
    low, high = np.quantile(first, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")

    def when(ahead: float) -> date | None:
        return None if not np.isfinite(ahead) else last_day + timedelta(days=int(ahead))

    return Exhaustion("projected", on=when(expected), earliest=when(low), latest=when(high), horizon_days=horizon_days)


# what-if -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """Two replays of the same history side by side: `a` (e.g. the published version) and `b` (the draft)."""

    labels: tuple[str, str]
    totals: pd.DataFrame  # metric, a, b, difference
    daily: pd.DataFrame  # day, cumulative a, cumulative b, difference
    by_event_type: pd.DataFrame  # event_type, issued a, issued b, difference
    symbol: str = "points"  # the asset's symbol (both replays issue the same asset)


def _totals(h: History) -> dict[str, Any]:
    ok = h.issuances["status"] == ISSUED
    issued = amount(int(h.issuances.loc[ok, "amount_minor"].sum()), h.decimals)
    return {
        "issued": issued,
        "issuances": int(ok.sum()),
        "failed": int((~ok).sum()),
        "customers rewarded": int(h.issuances.loc[ok, "customer_id"].nunique()),
        "closing liability": h.opening_supply + issued,
    }


def compare(a: Any, b: Any, labels: tuple[str, str] | None = None) -> Comparison:
    """How much more (positive difference) or less the second replay issues than the first."""
    ha, hb = history(a), history(b)
    names = labels or (ha.label, hb.label)
    if names[0] == names[1]:
        names = (f"{names[0]} (a)", f"{names[1]} (b)")
    ta, tb = _totals(ha), _totals(hb)
    totals = pd.DataFrame(
        [{"metric": k, names[0]: ta[k], names[1]: tb[k], "difference": tb[k] - ta[k]} for k in ta],
    )
    da = daily(ha).set_index("day")["cumulative"]
    db = daily(hb).set_index("day")["cumulative"]
    side = pd.concat([da.rename(names[0]), db.rename(names[1])], axis=1).sort_index().ffill()
    for name, h in zip(names, (ha, hb), strict=True):  # before a replay's first day it had issued nothing
        side[name] = pd.Series(
            [x if isinstance(x, Decimal) else amount(0, h.decimals) for x in side[name]], index=side.index, dtype=object
        )
    side = side.reset_index()
    side["difference"] = [y - x for x, y in zip(side[names[0]], side[names[1]], strict=True)]
    ea, eb = _by_type(ha), _by_type(hb)
    types = sorted(set(ea) | set(eb))
    zero_a, zero_b = amount(0, ha.decimals), amount(0, hb.decimals)
    by_type = pd.DataFrame(
        [
            {
                "event_type": t,
                names[0]: ea.get(t, zero_a),
                names[1]: eb.get(t, zero_b),
                "difference": eb.get(t, zero_b) - ea.get(t, zero_a),
            }
            for t in types
        ],
        columns=["event_type", names[0], names[1], "difference"],
    )
    return Comparison(names, totals, side, by_type, ha.symbol)


def _by_type(h: History) -> dict[str, Decimal]:
    sums = h.issuances.assign(minor=h.issuances["amount_minor"].where(h.issuances["status"] == ISSUED, 0))
    grouped = sums.groupby("event_type")["minor"].sum()
    return {str(k): amount(int(v), h.decimals) for k, v in grouped.items()}
