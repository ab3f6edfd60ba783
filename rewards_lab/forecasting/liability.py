"""Outstanding liability from a replay: what customers hold, how fast it leaves, and what it will be.

**History (exact).** Per UTC day, in minor units: `issued` (rewards issued), `reversed` (what refunds took back
from the wallets: the replay's `reversals`, else its reversal rows), `redeemed` (the replay's `redemptions` that
were `redeemed`, when the replay was given `redemptions=`; else nothing) and `expired` (an `expired` relation or
frame of the replay when it has one, with `amount_minor` and a time column; else nothing). Liability at the end
of a day = opening supply + everything issued so far - redeemed - expired - reversed.

**Model (fitted on the last `window` days, default all).** Points leave the liability by redemption and by
expiry. Each day's *exposure* is what could leave that day: the liability at the start of the day plus what the
day issued net of reversals. The daily redemption rate is redeemed / exposure summed over the window, the
expiry rate likewise (rates per point-day, the maximum-likelihood estimate of a constant hazard). Breakage, the
share of what leaves that leaves by expiry rather than redemption, is expiry / (redemption + expiry).

**Projection.** Day by day: `L(t) = (L(t-1) + I(t)) x (1 - redemption rate - expiry rate)`, the issuance `I`
the window's mean net issuance per day for the middle path. Issuance stops at the asset's supply ceiling
(supply = issued - reversed - redeemed - expired: expired points give room back, as in the ledger). The range is a
bootstrap over days: `draws` times, the window's days are resampled with replacement to refit both rates, and
each future day's issuance is drawn from the window's days; `low` and `high` are the `(1 - level) / 2` and
`(1 + level) / 2` quantiles of the paths per day ahead. Valued in money when the asset has a `value_per_unit`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

from rewards_lab.forecasting.forecast import History, amount, history

FLOWS = ("issued", "reversed", "redeemed", "expired")
_TIME_COLUMNS = ("expired_at", "expires_at", "occurred_at")


def _frame(relation: Any) -> pd.DataFrame | None:
    """A DuckDB relation, a Spark DataFrame or a pandas DataFrame as pandas (None: absent)."""
    if relation is None:
        return None
    if isinstance(relation, pd.DataFrame):
        return relation
    if hasattr(relation, "df"):  # DuckDB
        frame: pd.DataFrame = relation.df()
        return frame
    if hasattr(relation, "toPandas"):  # Spark
        collected: pd.DataFrame = relation.toPandas()
        return collected
    raise TypeError(f"cannot read {type(relation).__name__} as a table")


def _utc_days(values: pd.Series) -> pd.Series:
    return pd.to_datetime(values, utc=True).dt.tz_convert("UTC").dt.tz_localize(None).dt.normalize()


def _per_day(frame: pd.DataFrame | None, minor: str = "amount_minor", time: str = "occurred_at") -> pd.Series:
    if frame is None or frame.empty:
        return pd.Series(dtype="int64")
    return frame.groupby(_utc_days(frame[time]))[minor].sum().astype("int64")


def _expired(source: Any) -> pd.Series:
    """What expired per day, from the replay's `expired` table when it has one (FIFO expiry of a history)."""
    frame = _frame(getattr(source, "expired", None))
    if frame is None or frame.empty:
        return pd.Series(dtype="int64")
    time = next((c for c in _TIME_COLUMNS if c in frame.columns), None)
    if time is None or "amount_minor" not in frame.columns:
        raise ValueError(f"an expired table needs amount_minor and one of {', '.join(_TIME_COLUMNS)}")
    return _per_day(frame, time=time)


@dataclass(frozen=True)
class LiabilityHistory:
    """Per day (UTC): the flows and the liability at the end of the day, exact (Decimal in the asset's units;
    `value` in money when a value per unit is known)."""

    frame: pd.DataFrame  # day, issued, reversed, redeemed, expired, liability[, value]
    minor: pd.DataFrame  # the same flows and liability in minor units (int64), indexed by day
    decimals: int
    opening_supply: Decimal
    ceiling: Decimal | None
    value_per_unit: Decimal | None
    label: str
    symbol: str = "points"  # the asset's symbol, for the figures' units (lab.units)

    @property
    def closing(self) -> Decimal:
        """The liability at the end of the last day."""
        return amount(int(self.minor["liability"].iloc[-1]), self.decimals) if len(self.minor) else self.opening_supply

    @property
    def supply_minor(self) -> int:
        """Outstanding supply as the ceiling counts it at the end: issued - reversed - redeemed - expired."""
        opening = int(self.opening_supply.scaleb(self.decimals))
        flows = self.minor
        left = flows["reversed"].sum() + flows["redeemed"].sum() + flows["expired"].sum()
        return opening + int(flows["issued"].sum() - left)


def liability_history(source: Any, *, value_per_unit: Decimal | str | None = None) -> LiabilityHistory:
    """Issued - redeemed - expired - reversed per day, from a ReplayResult (DuckDB or Spark), a forecast History
    or an issuance DataFrame. `value_per_unit` defaults to the replayed file's `asset.value_per_unit` (or the
    History's)."""
    h: History = history(source)
    if value_per_unit is None:
        value_per_unit = h.value_per_unit
    reversals = _frame(getattr(source, "reversals", None))
    if reversals is not None and "taken_minor" in reversals.columns:
        reversed_ = _per_day(reversals, "taken_minor")
    else:
        reversed_ = _per_day(h.reversed_rows)
    redemptions = _frame(getattr(source, "redemptions", None))
    if redemptions is not None and not redemptions.empty:
        redemptions = redemptions[redemptions["status"] == "redeemed"]
    flows = {
        "issued": _per_day(h.issued_rows),
        "reversed": reversed_,
        "redeemed": _per_day(redemptions),
        "expired": _expired(source),
    }
    days = pd.concat([pd.Series(s.index) for s in flows.values()] + [pd.Series(h.day_range())])
    index = pd.date_range(days.min(), days.max(), freq="D", name="day") if len(days) else pd.DatetimeIndex([])
    minor = pd.DataFrame({name: s.reindex(index, fill_value=0).astype("int64") for name, s in flows.items()})
    opening = int(h.opening_supply.scaleb(h.decimals))
    net = minor["issued"] - minor["redeemed"] - minor["expired"] - minor["reversed"]
    minor["liability"] = opening + net.cumsum()
    frame = pd.DataFrame({"day": pd.DatetimeIndex(minor.index).date})
    for column in (*FLOWS, "liability"):
        frame[column] = pd.Series([amount(m, h.decimals) for m in minor[column]], dtype="object")
    unit = None if value_per_unit is None else Decimal(str(value_per_unit))
    if unit is not None:
        frame["value"] = pd.Series([value * unit for value in frame["liability"]], dtype="object")
    return LiabilityHistory(frame, minor, h.decimals, h.opening_supply, h.ceiling, unit, h.label, h.symbol)


@dataclass(frozen=True)
class LiabilityModel:
    """Daily rates per point outstanding, fitted on `window` days, with the bootstrap's `level` range."""

    redemption_rate: float
    expiry_rate: float
    redemption_range: tuple[float, float]
    expiry_range: tuple[float, float]
    breakage: float | None  # expiry / (redemption + expiry); None when nothing left the liability
    breakage_range: tuple[float, float] | None
    mean_daily_issuance: float  # net of reversals, in the asset's units
    window: int
    level: float
    draws: int
    method: str

    def describe(self) -> str:
        """One line: the rates with their ranges, and breakage."""
        low, high = self.redemption_range
        breakage = "none observed" if self.breakage is None else f"{self.breakage:.1%}"
        return (
            f"redeemed {self.redemption_rate:.4%} a day ({low:.4%} to {high:.4%}), expired {self.expiry_rate:.4%} "
            f"a day, breakage {breakage}; mean net issuance {self.mean_daily_issuance:,.2f} a day"
        )


@dataclass(frozen=True)
class LiabilityForecast:
    """The history, the fitted model and the projection (floats in the asset's units: day, low, mid, high and,
    with a value per unit, value_low, value_mid, value_high)."""

    history: LiabilityHistory
    model: LiabilityModel
    projection: pd.DataFrame

    @property
    def end(self) -> dict[str, float]:
        """low, mid and high liability on the last projected day."""
        last = self.projection.iloc[-1]
        return {band: float(last[band]) for band in ("low", "mid", "high")}


def _rates(flows: pd.DataFrame, opening: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per day: exposure (liability at the start + net issuance), redeemed, expired, net issuance (floats)."""
    start = np.concatenate([[opening], flows["liability"].to_numpy()[:-1]]).astype("float64")
    net_issued = (flows["issued"] - flows["reversed"]).to_numpy(dtype="float64")
    exposure = np.maximum(start + net_issued, 0.0)
    return exposure, flows["redeemed"].to_numpy("float64"), flows["expired"].to_numpy("float64"), net_issued


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    ratio: np.ndarray = np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)
    return ratio


def _paths(
    start: float, supply: float, ceiling: float | None, issuance: np.ndarray, redeem: np.ndarray, expire: np.ndarray
) -> np.ndarray:
    """Liability paths (draws x days, minor units) from `start`: each day's issuance joins it (cut so that the
    supply stays under the ceiling), then the shares `redeem` and `expire` (one per path) of it leave; both give
    supply back (expired points leave circulation, as in the ledger)."""
    draws, days = issuance.shape
    level = np.full(draws, start)
    held = np.full(draws, supply)
    out = np.empty((draws, days))
    for day in range(days):
        issued = issuance[:, day]
        if ceiling is not None:
            issued = np.minimum(issued, np.maximum(ceiling - held, 0.0))
        exposed = np.maximum(level + issued, 0.0)
        redeemed = exposed * redeem
        expired = exposed * expire
        level = exposed - redeemed - expired
        held = held + issued - redeemed - expired
        out[:, day] = level
    return out


def _breakage(redeem: float, expire: float) -> float | None:
    return None if redeem + expire <= 0 else expire / (redeem + expire)


def forecast_liability(
    source: Any,
    *,
    days: int = 90,
    window: int | None = None,
    draws: int = 1000,
    level: float = 0.9,
    seed: int = 0,
    value_per_unit: Decimal | str | None = None,
) -> LiabilityForecast:
    """The liability history of a replay, the redemption and expiry rates fitted on its last `window` days (all
    by default) and the liability `days` ahead with its `level` range (the module's docstring has the method)."""
    if days < 1 or draws < 1 or (window is not None and window < 1) or not 0 < level < 1:
        raise ValueError("days, window and draws must be positive and level between 0 and 1")
    past = source if isinstance(source, LiabilityHistory) else liability_history(source, value_per_unit=value_per_unit)
    if past.minor.empty:
        return _nothing_happened(past, days, level, draws)
    opening = int(past.opening_supply.scaleb(past.decimals))
    exposure, redeemed, expired, net_issued = (a[-window:] if window else a for a in _rates(past.minor, opening))
    n = exposure.size
    redeem = float(redeemed.sum() / exposure.sum()) if exposure.sum() > 0 else 0.0
    expire = float(expired.sum() / exposure.sum()) if exposure.sum() > 0 else 0.0
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n, size=(draws, n))  # the day bootstrap: each row one resample of the window's days
    weights = exposure[picks].sum(axis=1)
    redeem_b = np.minimum(_ratio(redeemed[picks].sum(axis=1), weights), 1.0)
    expire_b = np.minimum(_ratio(expired[picks].sum(axis=1), weights), 1.0 - redeem_b)
    issuance = net_issued[rng.integers(0, n, size=(draws, days))]
    scale = 10.0**-past.decimals
    ceiling = None if past.ceiling is None else float(past.ceiling.scaleb(past.decimals))
    start, supply = float(past.minor["liability"].iloc[-1]), float(past.supply_minor)
    paths = _paths(start, supply, ceiling, issuance, redeem_b, expire_b) * scale
    middle = _paths(
        start, supply, ceiling, np.full((1, days), net_issued.mean()), np.array([redeem]), np.array([expire])
    )
    low_q, high_q = (1 - level) / 2, (1 + level) / 2
    last_day = past.minor.index[-1].date()
    projection = pd.DataFrame(
        {
            "day": [last_day + timedelta(days=i) for i in range(1, days + 1)],
            "low": np.quantile(paths, low_q, axis=0),
            "mid": middle[0] * scale,
            "high": np.quantile(paths, high_q, axis=0),
        }
    )
    if past.value_per_unit is not None:
        for band in ("low", "mid", "high"):
            projection[f"value_{band}"] = projection[band] * float(past.value_per_unit)
    breakage_b = _ratio(expire_b, redeem_b + expire_b)
    leaving = (redeem_b + expire_b) > 0
    model = LiabilityModel(
        redemption_rate=redeem,
        expiry_rate=expire,
        redemption_range=_band(redeem_b, low_q, high_q),
        expiry_range=_band(expire_b, low_q, high_q),
        breakage=_breakage(redeem, expire),
        breakage_range=_band(breakage_b[leaving], low_q, high_q) if leaving.any() else None,
        mean_daily_issuance=float(net_issued.mean()) * scale,
        window=n,
        level=level,
        draws=draws,
        method=(
            f"rates per point-day over the last {n} days (redeemed and expired / exposure); {draws} day-bootstrap "
            f"resamples for the {level:.0%} range; issuance drawn from the same days, stopped at the ceiling"
        ),
    )
    return LiabilityForecast(past, model, projection)


def _nothing_happened(past: LiabilityHistory, days: int, level: float, draws: int) -> LiabilityForecast:
    """A replay that issued, redeemed and expired nothing: the liability stays the opening supply (the days
    ahead are unknown: the history has no day)."""
    flat = float(past.opening_supply)
    projection = pd.DataFrame({"day": [None] * days, "low": flat, "mid": flat, "high": flat})
    if past.value_per_unit is not None:
        for band in ("low", "mid", "high"):
            projection[f"value_{band}"] = flat * float(past.value_per_unit)
    method = "nothing was issued, redeemed or expired in the history: the liability stays the opening supply"
    model = LiabilityModel(0.0, 0.0, (0.0, 0.0), (0.0, 0.0), None, None, 0.0, 0, level, draws, method)
    return LiabilityForecast(past, model, projection)


def _band(values: np.ndarray, low: float, high: float) -> tuple[float, float]:
    return float(np.quantile(values, low)), float(np.quantile(values, high))
