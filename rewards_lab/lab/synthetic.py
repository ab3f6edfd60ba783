"""Realistic synthetic event histories, generated column-wise with numpy and pyarrow (no Python per row).

Seeded and parameterised by size. Customers' activity is heavy-tailed (a few customers place many orders), spend
is log-normal, volume grows over the period with a weekly cycle and a daily rhythm, and events come out in
`occurred_at` order (as a history export would), timestamps to the second so that ties occur.
The data columns are the ones the example programmes in data/programmes/ read: `amount` (DECIMAL(12, 2)),
`photos`, `channel_code`, `size`, `drinks`, `cabin_class` (integers); a column is null where the event type
does not carry it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

DEFAULT_TYPES = ("order.completed", "customer.signed_up", "review.posted", "referral.converted")
ALL_TYPES = (*DEFAULT_TYPES, "booking.completed")
# Relative frequency of each event type.
_TYPE_WEIGHTS = {
    "order.completed": 0.72,
    "customer.signed_up": 0.10,
    "review.posted": 0.13,
    "referral.converted": 0.05,
    "booking.completed": 0.15,
}
_DATA_COLUMNS = ("amount", "photos", "channel_code", "size", "drinks", "cabin_class")


def _ids(prefix: str, numbers: np.ndarray, width: int) -> pa.Array:
    text = pc.utf8_lpad(pc.cast(pa.array(numbers), pa.string()), width=width, padding="0")
    return pc.binary_join_element_wise(pa.scalar(prefix), text, "")


def _decimal_cents(cents: np.ndarray, valid: np.ndarray) -> pa.Array:
    """A DECIMAL(12, 2) array from integer cents, built from its 128-bit buffer (exact, vectorised)."""
    words = np.zeros((len(cents), 2), dtype=np.int64)
    words[:, 0] = cents
    words[:, 1] = np.where(cents < 0, -1, 0)
    validity = pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(pa.decimal128(12, 2), len(cents), [validity, pa.py_buffer(words.tobytes())])


def _ints(values: np.ndarray, valid: np.ndarray) -> pa.Array:
    return pa.array(values.astype(np.int32), mask=~valid)


def _timestamps(rng: np.random.Generator, n: int, start: datetime, days: int) -> np.ndarray:
    """Seconds since the epoch: growing volume, quieter weekends, busy lunchtimes and evenings."""
    day = np.arange(days)
    weekday = (np.datetime64(start.date()) + day).astype("datetime64[D]").view("int64") % 7  # 0 = Thursday
    weekly = np.where(np.isin(weekday, (2, 3)), 0.75, 1.0)  # Saturday, Sunday
    growth = 1.0 + 0.6 * day / max(days - 1, 1)
    weights = weekly * growth
    chosen = rng.choice(days, size=n, p=weights / weights.sum())
    peak = rng.choice(2, size=n, p=(0.45, 0.55))
    hour = np.where(peak == 0, rng.normal(12.5, 1.5, n), rng.normal(19.0, 2.5, n)) % 24
    seconds = (hour * 3600).astype(np.int64)
    base = int(start.replace(tzinfo=UTC).timestamp()) if start.tzinfo is None else int(start.timestamp())
    return np.sort(base + chosen.astype(np.int64) * 86_400 + seconds)


def generate_events(
    n_events: int,
    n_customers: int,
    *,
    seed: int = 0,
    start: str | datetime = "2026-01-01",
    days: int = 90,
    types: Sequence[str] = DEFAULT_TYPES,
) -> pa.Table:
    """`n_events` events of `n_customers` customers over `days` days from `start` (UTC), as a pyarrow Table.

    Columns: external_event_id, type, customer_id, occurred_at (timestamp UTC), then the data columns.
    The same arguments always give the same table.
    """
    if n_events < 0 or n_customers < 1 or days < 1:
        raise ValueError("n_events must be >= 0, n_customers and days >= 1")
    unknown = [t for t in types if t not in _TYPE_WEIGHTS]
    if unknown or not types:
        raise ValueError(f"types must be among {ALL_TYPES}")
    moment = datetime.fromisoformat(start) if isinstance(start, str) else start
    rng = np.random.default_rng(seed)

    weights = np.array([_TYPE_WEIGHTS[t] for t in types])
    kind = rng.choice(len(types), size=n_events, p=weights / weights.sum())
    # Heavy-tailed activity: rank r of n customers is drawn with density ~ r^(-2/3); ids are shuffled over ranks.
    rank = np.minimum((rng.random(n_events) ** 3 * n_customers).astype(np.int64), n_customers - 1)
    customer = rng.permutation(n_customers)[rank]
    seconds = _timestamps(rng, n_events, moment, days)

    def is_type(name: str) -> np.ndarray:
        return kind == types.index(name) if name in types else np.zeros(n_events, dtype=bool)

    orders, bookings, reviews = is_type("order.completed"), is_type("booking.completed"), is_type("review.posted")
    spend = np.exp(rng.standard_normal(n_events, dtype=np.float32) * np.where(bookings, 0.8, 0.9).astype(np.float32))
    spend *= np.where(bookings, np.float32(np.exp(5.5)), np.float32(np.exp(3.0)))
    if n_events:  # spend drifts up over the period
        spend *= 1.0 + 0.25 * (seconds - seconds[0]).astype(np.float32) / max(int(seconds[-1] - seconds[0]), 1)
    cents = np.minimum(np.round(spend * 100), 10**12 - 1).astype(np.int64)
    has_amount = orders | bookings
    columns = {
        "amount": _decimal_cents(np.where(has_amount, cents, 0), has_amount),
        "photos": _ints(rng.geometric(0.5, n_events) - 1, reviews),
        "channel_code": _ints(rng.choice(3, size=n_events, p=(0.5, 0.3, 0.2)) + 1, orders),
        "size": _ints(rng.integers(1, 5, n_events), orders),
        "drinks": _ints(rng.geometric(0.55, n_events), orders),
        "cabin_class": _ints(rng.choice(3, size=n_events, p=(0.7, 0.2, 0.1)) + 1, bookings),
    }
    width = max(len(str(max(n_events - 1, 0))), 8)
    return pa.table(
        {
            "external_event_id": _ids("evt_", np.arange(n_events), width),
            "type": pa.DictionaryArray.from_arrays(pa.array(kind.astype(np.int32)), list(types)).cast(pa.string()),
            "customer_id": _ids("cust_", customer, max(len(str(n_customers - 1)), 7)),
            "occurred_at": pa.array(seconds * 1_000_000, pa.timestamp("us", tz="UTC")),
            **{name: columns[name] for name in _DATA_COLUMNS},
        }
    )


CHANNELS = ("store", "web", "app")  # channel_code 1, 2, 3
COUNTRIES = ("GB", "FR", "DE", "BE", "ES")
TIERS = ("bronze", "silver", "gold")


def with_rule_fields(events: pa.Table, *, seed: int = 0, referral_share: float = 0.3) -> pa.Table:
    """`generate_events`' table with the string fields the richer example programmes read: `channel` (the name of
    `channel_code`) and, on sign-ups, a `referrer_id` naming an earlier customer for `referral_share` of them.
    Drawn from a generator of its own, so the other columns stay exactly those of `generate_events`."""
    rng = np.random.default_rng([seed, 17])
    codes = events.column("channel_code").to_numpy(zero_copy_only=False)
    valid = ~np.isnan(codes.astype(np.float64)) if codes.dtype.kind == "f" else np.ones(len(codes), dtype=bool)
    names = np.array(CHANNELS, dtype=object)[np.nan_to_num(codes.astype(np.float64), nan=1).astype(np.int64) - 1]
    channel = pa.array(np.where(valid, names, None), pa.string())
    signups = pc.equal(events.column("type"), "customer.signed_up").to_numpy(zero_copy_only=False)
    referred = signups & (rng.random(events.num_rows) < referral_share)
    customers = events.column("customer_id").to_numpy(zero_copy_only=False)
    pool = np.unique(customers) if len(customers) else np.array(["cust_0000000"], dtype=object)
    referrer = pool[rng.integers(0, len(pool), events.num_rows)]
    referrer_id = pa.array(np.where(referred & (referrer != customers), referrer, None), pa.string())
    return events.append_column("channel", channel).append_column("referrer_id", referrer_id)


def generate_customers(n_customers: int, *, seed: int = 0) -> pa.Table:
    """The customers of `generate_events(..., n_customers)` as a replay customers table: `id` (the events'
    `customer_id`), `country`, and the attribute `tier` (mostly bronze, a few gold)."""
    rng = np.random.default_rng([seed, 23])
    numbers = np.arange(n_customers)
    return pa.table(
        {
            "id": _ids("cust_", numbers, max(len(str(n_customers - 1)), 7)),
            "country": pa.array(np.array(COUNTRIES, dtype=object)[rng.choice(len(COUNTRIES), n_customers)]),
            "tier": pa.array(np.array(TIERS, dtype=object)[rng.choice(3, n_customers, p=(0.7, 0.22, 0.08))]),
        }
    )


def with_refunds(
    events: pa.Table, *, seed: int = 0, share: float = 0.05, partial_share: float = 0.4, twice_share: float = 0.1
) -> pa.Table:
    """`events` with a refund stream: `share` of the orders (`order.completed`) are refunded by an
    `order.refunded` event of the same customer, hours to days later, naming the order in `order_id` and the
    money given back in `refund_amount` (the whole order, or part of it for `partial_share` of them); a
    `twice_share` of the refunded orders get a second partial refund. The result is in time order, refunds after
    their orders; a column the other type lacks is null. Drawn from a generator of its own."""
    rng = np.random.default_rng([seed, 29])
    orders = pc.equal(events.column("type"), "order.completed").to_numpy(zero_copy_only=False)
    chosen = np.flatnonzero(orders & (rng.random(events.num_rows) < share))
    again = chosen[rng.random(len(chosen)) < twice_share]
    picked = np.concatenate([chosen, again])
    amounts = events.column("amount").take(pa.array(picked)).to_pylist()
    partial = rng.random(len(picked)) < partial_share
    percent = np.where(partial | (np.arange(len(picked)) >= len(chosen)), rng.integers(10, 60, len(picked)), 100)
    refunded = [None if a is None else (a * int(p) / 100).quantize(a) for a, p in zip(amounts, percent, strict=True)]
    delay = (rng.exponential(36.0, len(picked)) * 3_600_000_000).astype(np.int64) + 60_000_000
    occurred = events.column("occurred_at").take(pa.array(picked)).cast(pa.int64()).to_numpy(zero_copy_only=False)
    order_ids = events.column("external_event_id").take(pa.array(picked))
    refunds = {
        "external_event_id": pa.array([f"ref_{i:08d}" for i in range(len(picked))], pa.string()),
        "type": pa.array(["order.refunded"] * len(picked), pa.string()),
        "customer_id": events.column("customer_id").take(pa.array(picked)),
        "occurred_at": pa.array(occurred + delay, pa.int64()).cast(events.schema.field("occurred_at").type),
        "order_id": order_ids,
        "refund_amount": pa.array(refunded, events.schema.field("amount").type),
    }
    base = events.append_column("order_id", pa.nulls(events.num_rows, pa.string()))
    base = base.append_column("refund_amount", pa.nulls(events.num_rows, events.schema.field("amount").type))
    columns = [refunds[f.name] if f.name in refunds else pa.nulls(len(picked), f.type) for f in base.schema]
    merged = pa.concat_tables([base, pa.table(columns, schema=base.schema)])
    return merged.take(pc.sort_indices(merged, sort_keys=[("occurred_at", "ascending")]))


def redemptions(
    source: Any, *, seed: int = 0, share: float = 0.4, mean_delay_days: float = 20.0, partial_share: float = 0.5
) -> pd.DataFrame:
    """A redemption stream for a replayed history (a ReplayResult or forecast History): `share` of the rewards
    issued are spent by their customer an exponential delay later (mean `mean_delay_days`), the whole reward or,
    for `partial_share` of them, 20 to 80% of it; spends after the history's last event are left out. Columns
    as a replay's `redemptions=` takes them (customer_id, amount, occurred_at), in time order."""
    from rewards_lab.forecasting import forecast

    h = forecast.history(source)
    rows = h.issued_rows
    rng = np.random.default_rng([seed, 31])
    chosen = rows[rng.random(len(rows)) < share]
    percent = np.where(rng.random(len(chosen)) < partial_share, rng.integers(20, 81, len(chosen)), 100)
    minor = chosen["amount_minor"].to_numpy(dtype="int64") * percent // 100
    delay = pd.to_timedelta(rng.exponential(mean_delay_days, len(chosen)) * 86_400, unit="s").round("s")
    occurred = pd.to_datetime(chosen["occurred_at"], utc=True).reset_index(drop=True) + pd.Series(delay)
    frame = pd.DataFrame(
        {
            "customer_id": chosen["customer_id"].to_numpy(),
            "amount": [str(forecast.amount(int(m), h.decimals)) for m in minor],
            "occurred_at": occurred,
        }
    )
    last = pd.to_datetime(h.issuances["occurred_at"], utc=True).max()
    kept = frame[(frame["occurred_at"] <= last).to_numpy() & (minor > 0)]
    return kept.sort_values("occurred_at", kind="stable").reset_index(drop=True)
