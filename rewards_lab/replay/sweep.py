"""Sweeps: one programme over a grid of parameter values, against the same history, in one vectorised pass.

Each grid point is the programme file with the grid's values set at their paths (for example
"rules[0].actions[0].amount.rate"), validated like any programme file. All points are compiled and run as ONE
DuckDB statement (the compiled rules of every point, tagged with the point's number): the events are read once
per statement and every point is set-based. The supply ceiling is then enforced per point in processing order
(numpy), exactly as the replay does, which gives issuance, liability and the day the ceiling was first hit.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme
from rewards_lab.domain.ceiling import resolve, room_under
from rewards_lab.domain.money import parse_ceiling, to_decimal
from rewards_lab.domain.schedule import DAY_US
from rewards_lab.replay.compiler import DUCKDB, CompiledProgramme, compile_programme, referenced_fields, rule_specs
from rewards_lab.replay.customers import joined, open_customers
from rewards_lab.replay.engine import candidate_selects, definition_of, evaluation, parse_supply, quiet_connection
from rewards_lab.replay.inputs import EventSource, open_events
from rewards_lab.replay.limits_plan import has_features
from rewards_lab.replay.order import order_events
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.expiry import expiry_plan
from rewards_lab.replay.plan.layout import layout
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.run import evaluated

_PATH_PART = re.compile(r"([A-Za-z_]+)((?:\[\d+\])*)")
_EPOCH = np.datetime64("1970-01-01", "D")


def _path(key: str) -> list[str | int]:
    """ "rules[0].conditions[1].value" -> ["rules", 0, "conditions", 1, "value"]."""
    parts: list[str | int] = []
    for piece in key.split("."):
        match = _PATH_PART.fullmatch(piece)
        if match is None:
            raise ServiceError("field_invalid", f"grid key {key!r} is not a path such as rules[0].amount", field=key)
        parts.append(match.group(1))
        parts += [int(index) for index in re.findall(r"\[(\d+)\]", match.group(2))]
    return parts


def _exact_sum(values: np.ndarray) -> int:
    """The exact sum of non-negative int64 amounts (int64 when it cannot overflow, else Python integers)."""
    if len(values) == 0:
        return 0
    if int(values.max()) * len(values) < 2**63:
        return int(values.sum())
    return sum(int(v) for v in values.tolist())


def with_values(definition: ProgrammeDefinition, values: dict[str, Any]) -> ProgrammeDefinition:
    """The definition with each path set to its value, validated (errors name the grid key)."""
    payload = definition.payload()
    for key, value in values.items():
        node: Any = payload
        path = _path(key)
        try:
            for part in path[:-1]:
                node = node[part]
            last = path[-1]
            if isinstance(node, list) and not (isinstance(last, int) and 0 <= last < len(node)):
                raise IndexError(last)
            node[last] = value  # a dict key may be new: validation refuses unknown fields
        except (KeyError, IndexError, TypeError):
            raise ServiceError("field_invalid", f"grid key {key!r} names nothing in the programme", field=key) from None
    return parse_programme(payload, "<sweep>")


def sweep(
    events: Any,
    programme: ProgrammeDefinition | str | Path,
    grid: dict[str, Sequence[Any]],
    *,
    opening_supply: Decimal | int | str = 0,
    customers: Any = None,
) -> pd.DataFrame:
    """One row per grid point: the grid's values (a column per key), then issued, issuances, failed,
    liability (opening supply + issued) and exhausted_on (the day of the first asset_supply_exhausted, or None).
    `customers`: the customers table, as for `replay`."""
    started = time.perf_counter()
    keys, points, definitions = grid_points(definition_of(programme), grid)
    if any(has_features(d) or expiry_plan(d) is not None for d in definitions):  # caps ... expiry: point by point
        rows = [
            featured_point(events, definition, dict(zip(keys, point, strict=True)), opening_supply, customers)
            for point, definition in zip(points, definitions, strict=True)
        ]
        return sweep_frame(keys, rows, started)
    con = quiet_connection()
    con.execute("SET TimeZone = 'UTC'")
    source = open_events(con, events, "__sweep_events")  # reads CSV and JSON lines in file order
    con.execute("SET preserve_insertion_order = false")  # from here every order is explicit
    if customers is not None:
        source.customers = open_customers(con, customers, "__sweep")
    fields = list(dict.fromkeys(f for d in definitions for f in referenced_fields(rule_specs(d))))
    from_sql = source.prepare(fields)
    plans = [compile_programme(d, source, DUCKDB) for d in definitions]
    order_events(con, source, joined(con, "__sweep", from_sql, plans, source.customers), "__sweep")  # one FROM
    selects = [
        f"SELECT {g} AS g, seq, day, m FROM ({select})"
        for g, plan in enumerate(plans)
        for _, select in candidate_selects(plan, "__sweep_ordered")
    ]
    con.execute("CREATE TEMP TABLE __sweep_candidates (g INTEGER, seq BIGINT, day INTEGER, m BIGINT)")
    if selects:
        con.execute("INSERT INTO __sweep_candidates " + " UNION ALL ".join(selects))
    for g, plan in enumerate(plans):
        _fallback(con, source, plan, g)
    fetched = con.sql("SELECT g, seq, day, m FROM __sweep_candidates ORDER BY g, seq").fetchnumpy()
    con.close()
    g_all, day_all, m_all = (np.asarray(fetched[c], dtype=np.int64) for c in ("g", "day", "m"))
    bounds = np.searchsorted(g_all, np.arange(len(points) + 1))
    rows = []
    for g, definition in enumerate(definitions):
        decimals = definition.asset.decimals
        amounts, days = m_all[bounds[g] : bounds[g + 1]], day_all[bounds[g] : bounds[g + 1]]
        too_large = int(np.count_nonzero(amounts < 0))
        positive, positive_days = amounts[amounts > 0], days[amounts > 0]
        opening = parse_supply(opening_supply, decimals)
        room = room_under(parse_ceiling(definition.asset.supply_ceiling, decimals, "asset.supply_ceiling"), opening)
        exhausted_on = None
        if room is None:
            issued_minor, issued_count = _exact_sum(positive), len(positive)
        else:
            first, after = resolve(positive, room)
            issued_minor = _exact_sum(positive[:first]) + _exact_sum(positive[after])
            issued_count = first + len(after)
            if first < len(positive):
                exhausted_on = (_EPOCH + int(positive_days[first])).astype(object)
        counts = (issued_count, len(positive) - issued_count + too_large)
        rows.append(
            point_row(dict(zip(keys, points[g], strict=True)), decimals, issued_minor, counts, opening, exhausted_on)
        )
    return sweep_frame(keys, rows, started)


def _fallback(con: duckdb.DuckDBPyConnection, source: EventSource, plan: CompiledProgramme, g: int) -> None:
    """Point g's exotic events through the plan's live evaluation (rewards_lab.replay.plan.run.evaluated), their
    outcomes added to `__sweep_candidates`."""
    from rewards_lab.replay.engines.duckdb import DuckDBExecutor  # imports the engine

    if plan.exotic_sql is None:
        return
    prefix = f"__sweep_{g}"
    con.execute(f"CREATE OR REPLACE TEMP VIEW {schema.ORDERED.on(prefix)} AS SELECT * FROM __sweep_ordered")
    lookup = None
    if source.customers is not None and plan.joins_customers:  # `joined` built the sweep's lookup
        lookup = source.customers.lookup_spec(plan.reads_customers)
        table = schema.CUSTOMERS_LOOKUP.on(prefix)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT * FROM {source.customers.lookup}")
    reading, evaluate = evaluation(source, plan)
    executor = DuckDBExecutor(con)
    try:
        context = Context(prefix, plan, layout(plan), "duckdb", "", 0, lookup=lookup, reading=reading)
        _, found = evaluated(executor, context, evaluate)
        if found:
            con.execute(
                f"INSERT INTO __sweep_candidates SELECT {g}, f.pos * {plan.slots} + f.slot, "
                f"CAST(epoch_us(e.occurred_at) // {DAY_US} AS INTEGER), f.m "
                f"FROM {schema.FALLBACK_ROWS.on(prefix)} f JOIN __sweep_ordered e ON e.__pos = f.pos"
            )
    finally:
        executor.close()


def featured_point(
    events: Any,
    definition: ProgrammeDefinition,
    values: dict[str, Any],
    opening_supply: Decimal | int | str,
    customers: Any,
) -> dict[str, Any]:
    """A grid point of a programme with caps, budgets, reversals or expiry: its own replay (liability net of
    reversals and of what expired)."""
    from rewards_lab.replay.engine import replay

    result = replay(events, definition, opening_supply=opening_supply, customers=customers)
    totals = result.totals()
    decimals = definition.asset.decimals
    query = result.issuances_query()
    ((exhausted_on,),) = result.con.sql(
        f"SELECT min(CAST(occurred_at AS DATE)) FROM ({query}) WHERE error_code = 'asset_supply_exhausted'"
    ).fetchall()
    issued = int(Decimal(totals["issued"]).scaleb(decimals))
    reversed_ = int(Decimal(totals.get("reversed", 0)).scaleb(decimals))
    reversed_ += int(Decimal(totals.get("expired", 0)).scaleb(decimals))  # out of the liability alike
    opening = parse_supply(opening_supply, decimals)
    counts = (int(totals["issuances"]), int(totals["failed"]))
    return point_row(values, decimals, issued, counts, opening, exhausted_on, reversed_)


def grid_points(
    base: ProgrammeDefinition, grid: dict[str, Sequence[Any]]
) -> tuple[list[str], list[tuple[Any, ...]], list[ProgrammeDefinition]]:
    """The grid's keys, its points (every combination of values) and the programme at each point."""
    keys = list(grid)
    points = list(itertools.product(*(list(grid[key]) for key in keys)))
    return keys, points, [with_values(base, dict(zip(keys, point, strict=True))) for point in points]


def point_row(
    values: dict[str, Any],
    decimals: int,
    issued_minor: int,
    counts: tuple[int, int],
    opening_minor: int,
    exhausted_on: Any,
    reversed_minor: int = 0,
) -> dict[str, Any]:
    """One grid point's row: its values, issued, issuances, failed, liability (opening supply + issued - what
    reversals took back and what expired: `reversed_minor` holds both) and exhausted_on."""
    issued = to_decimal(issued_minor, decimals)
    return {
        **values,
        "issued": issued,
        "issuances": counts[0],
        "failed": counts[1],
        "liability": to_decimal(opening_minor + issued_minor - reversed_minor, decimals),
        "exhausted_on": exhausted_on,
    }


def sweep_frame(keys: list[str], rows: list[dict[str, Any]], started: float) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[*keys, "issued", "issuances", "failed", "liability", "exhausted_on"])
    frame.attrs["seconds"] = time.perf_counter() - started
    return frame
