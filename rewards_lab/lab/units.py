"""The unit of a programme's amounts, as figures and messages write them: the asset's symbol (`STAR`; `points`
when nothing names the asset) and, when the asset has a `value_per_unit`, what an amount is worth in money.

Amounts are written with thousands separators and no trailing zeros on whole numbers (`1,000,000 STAR`,
`14,168.80 STAR`); an axis gets the same through `Thousands`, a tick formatter that never falls back to
matplotlib's offset or scientific corner (`1e6`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from matplotlib.ticker import Formatter

DEFAULT_SYMBOL = "points"


def grouped(value: Any, decimals: int | None = None) -> str:
    """A number with thousands separators: whole numbers without decimals (`1,000,000`), others with theirs
    (`14,168.80`), or with exactly `decimals` when given."""
    if decimals is not None:
        text = f"{float(value):,.{decimals}f}"
    elif isinstance(value, Decimal):
        text = f"{value.quantize(Decimal(1)):,f}" if value == value.to_integral_value() else f"{value:,f}"
    else:
        number = float(value)
        text = f"{number:,.0f}" if number.is_integer() else f"{number:,.2f}"
    return "0" if text in ("-0", "-0.0", "-0.00") else text


@dataclass(frozen=True)
class Unit:
    """What an amount of the asset is written in: its symbol, and its worth in money when known."""

    symbol: str = DEFAULT_SYMBOL
    value_per_unit: Decimal | None = None

    @property
    def money(self) -> str:
        """How a money axis names its unit: the asset has a value per unit but no currency."""
        if self.value_per_unit is None:
            raise ValueError(f"the asset {self.symbol} has no value_per_unit to value amounts in money")
        return f"money at {grouped(self.value_per_unit)} per {self.symbol}"

    def label(self, what: str, *, money: bool = False) -> str:
        """An axis label: `liability (STAR)`, `liability (money at 0.01 per STAR)`."""
        return f"{what} ({self.money if money else self.symbol})"

    def amount(self, value: Any, *, money: bool = False) -> str:
        """An amount with its unit: `1,000,000 STAR`; in money, the value per unit applied: `10,000 in money`."""
        if money:
            if self.value_per_unit is None:
                raise ValueError(f"the asset {self.symbol} has no value_per_unit to value amounts in money")
            return f"{grouped(Decimal(str(value)) * self.value_per_unit)} in money"
        return f"{grouped(value)} {self.symbol}"


def unit_of(source: Any) -> Unit:
    """The unit of a forecast History, a LiabilityHistory or a replay result (anything with `symbol` and
    `value_per_unit`, or a `definition.asset`); `points` for anything else."""
    asset = getattr(getattr(source, "definition", None), "asset", None)
    holder = asset if asset is not None else source
    symbol = getattr(holder, "symbol", None) or DEFAULT_SYMBOL
    value = getattr(holder, "value_per_unit", None)
    return Unit(str(symbol), None if value is None else Decimal(str(value)))


class Thousands(Formatter):
    """Tick labels with thousands separators and as many decimals as the tick spacing needs (`940,000`,
    `0.05`). Setting it replaces the ScalarFormatter, so no offset or `1e6` corner is ever drawn."""

    def __init__(self) -> None:
        self._ticks: list[float] = []

    def set_locs(self, locs: Any) -> None:
        self._ticks = [float(v) for v in locs]

    def __call__(self, x: float, pos: int | None = None) -> str:
        return grouped(x, self._decimals())

    def _decimals(self) -> int:
        """The fewest decimals (at most 6) that write every tick exactly: 0 for 940,000, 3 for 0.025."""
        locs = [v for v in self._ticks if math.isfinite(v)]
        for decimals in range(7):
            if all(abs(v - round(v, decimals)) <= 1e-9 * max(1.0, abs(v)) for v in locs):
                return decimals
        return 6

    def get_offset(self) -> str:
        return ""


def amount_axis(axis: Any, unit: Unit, what: str, *, money: bool = False) -> None:
    """An amount axis (`axes.yaxis`, `axes.xaxis`, a colorbar's axis): thousands separators, no offset, and
    the unit in its label."""
    axis.set_major_formatter(Thousands())
    axis.set_label_text(unit.label(what, money=money))
