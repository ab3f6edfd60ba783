"""The outputs of a replay without caps, budgets, reversals or redemptions: the `issuances` view and the
summaries (totals, daily, per customer), as DuckDB SQL over the plan's tables (`schema`), read from `cells`
(per day and slot) and `ceiling_kept` rather than from the issuance rows.

Each function returns the canonical DuckDB text: the DuckDB result runs it as it is (the replay paths not yet on
the plan read the same tables), the plan's Spark result renders it (`spark`). `amount(minor)` turns SQL of minor
units into the exact DECIMAL(38, decimals).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from functools import partial
from typing import Any

from rewards_lab.domain.money import to_decimal
from rewards_lab.replay.compiler import BENEFICIARY_MISSING, DUCKDB, NOT_FOUND_BASE, TOO_LARGE, string
from rewards_lab.replay.inputs import literal
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.layout import Layout
from rewards_lab.replay.plan.reversals import holder_sql
from rewards_lab.replay.plan.rules import unnested
from rewards_lab.replay.plan.sql import Engine, parse, render

Amount = Callable[[str], str]
EPOCH = "DATE '1970-01-01'"  # day number 0 (domain.limits.day_number, LIFETIME_START)
ADDED_COLUMNS = (  # with caps, budgets, reversals or redemptions: the issuance table's columns after ISSUANCE_COLUMNS
    "kind",
    "requested_amount",
    "requested_minor",
    "cap_scope",
    "cap_period",
    "cap_period_start",
    "cut_amount",
    "cut_minor",
)


def decimal_sql(decimals: int, minor: str) -> str:
    """SQL: the exact DECIMAL(38, decimals) of SQL of minor units."""
    unit = format(Decimal(1).scaleb(-decimals), "f")
    return f"CAST({minor} AS DECIMAL(38, 0)) * CAST({literal(unit)} AS DECIMAL(38, {decimals}))"


def amount_sql(decimals: int) -> Amount:
    return lambda minor: decimal_sql(decimals, minor)


def spark(sql: str) -> str:
    """An output's DuckDB text rendered for Spark."""
    return render(parse(sql), "spark")


def on(sql: str, engine: Engine) -> str:
    return sql if engine == "duckdb" else spark(sql)


def issued_cells(name: str, boundary: int | None) -> str:
    """SQL: issued amount and count per (day, slot), rows with at least one issuance."""
    cells, kept, slots = (t.on(name) for t in (schema.CELLS, schema.CEILING_KEPT, schema.SLOTS))
    before = f"SELECT day, slot, p AS issued, n FROM {cells} WHERE n > 0"
    if boundary is None:
        return before
    return (
        f"{before} AND day < {boundary} UNION ALL SELECT q.day, s.slot, sum(CAST(q.m AS HUGEINT)), count(*) "
        f"FROM {kept} q JOIN {slots} s ON s.k = q.k AND s.i = q.i GROUP BY q.day, s.slot"
    )


def totals_sql(name: str, boundary: int | None, amount: Amount) -> str:
    """SQL: one row (issued as an exact DECIMAL, issued count, candidate count, refusals as too large, as
    beneficiary_missing, as beneficiary_not_found)."""
    cells = issued_cells(name, boundary)
    return (
        f"SELECT {amount(f'(SELECT coalesce(sum(issued), 0) FROM ({cells}))')} AS issued, "
        f"(SELECT coalesce(sum(n), 0) FROM ({cells})) AS issuances, coalesce(sum(n), 0) AS candidates, "
        f"coalesce(sum(x), 0) AS x, coalesce(sum(y), 0) AS y, coalesce(sum(z), 0) AS z FROM {schema.CELLS.on(name)}"
    )


def plain_totals(row: Sequence[Any]) -> dict[str, Any]:
    """The totals (issued, issuances, failed, failed_by_code) of `totals_sql`'s row."""
    issued_count, candidates = int(row[1]), int(row[2])
    codes = {
        "amount_too_large": int(row[3]),
        "asset_supply_exhausted": candidates - issued_count,
        "beneficiary_missing": int(row[4]),
        "beneficiary_not_found": int(row[5]),
    }
    return {
        "issued": row[0],
        "issuances": issued_count,
        "failed": sum(codes.values()),
        "failed_by_code": {code: count for code, count in codes.items() if count},
    }


def daily_sql(name: str, boundary: int | None, asset: str, amount: Amount, expired: str | None = None) -> str:
    """SQL: day (UTC), asset, rule_index, issued, cumulative, issuances[, expired: `expired`'s (day, slot, x)]."""
    cells, column, total = issued_cells(name, boundary), "", ""
    if expired is not None:
        cells = (
            f"SELECT day, slot, issued, n, 0 AS x FROM ({cells}) UNION ALL SELECT day, slot, 0, 0, x FROM ({expired})"
        )
        column, total = f", {amount('x')} AS expired", ", sum(d.x) AS x"
    return f"""
        SELECT DATE '1970-01-01' + day AS day, {DUCKDB.render(string(asset))} AS asset, rule_index,
               {amount("issued")} AS issued,
               {amount("sum(issued) OVER (PARTITION BY rule_index ORDER BY day)")} AS cumulative,
               CAST(issuances AS BIGINT) AS issuances{column}
        FROM (
            SELECT d.day, s.rule_index, sum(d.issued) AS issued, sum(d.n) AS issuances{total}
            FROM ({cells}) d
            JOIN (SELECT DISTINCT slot, rule_index FROM {schema.SLOTS.on(name)}) s ON s.slot = d.slot
            GROUP BY d.day, s.rule_index
        ) ORDER BY day, rule_index"""


def per_customer_rows(lay: Layout, name: str, boundary: int | None, wide: bool = False) -> str:
    """SQL: customer_id, issued (minor units), issuances of every customer seen (issuances may be 0, or NULL
    when all the customer's events are of types without rules). `wide`: sum in HUGEINT (Spark's sum of BIGINTs
    is a BIGINT; DuckDB's is a HUGEINT already)."""
    amounts, kept = schema.AMOUNTS.on(name), schema.CEILING_KEPT.on(name)
    if lay.beneficiary_fields:  # an event's amounts may go to several customers: one row per amount
        each = unnested(lay, amounts)
        rows = f"SELECT customer_id, greatest(m, 0) AS v, CAST(m > 0 AS INTEGER) AS c FROM ({each})"
        if boundary is not None:
            rows = (
                f"{rows} WHERE day < {boundary} UNION ALL SELECT u.customer_id, q.m, 1 FROM {kept} q "
                f"JOIN ({each}) u ON u.pos = q.pos AND u.i = q.i"
            )
    else:
        rows = f"SELECT customer_id, {lay.event_total()} AS v, {lay.event_count()} AS c FROM {amounts}"
        if boundary is not None:
            rows += (
                f" WHERE day < {boundary} UNION ALL SELECT p.customer_id, q.m, 1 FROM {kept} q "
                f"JOIN {amounts} p ON p.pos = q.pos"
            )
    v = "CAST(v AS HUGEINT)" if wide else "v"
    return f"SELECT customer_id, sum({v}) AS issued, sum(c) AS issuances FROM ({rows}) GROUP BY customer_id"


def per_customer_sql(
    lay: Layout,
    name: str,
    boundary: int | None,
    amount: Amount,
    top: int | None,
    expired: str | None = None,
    wide: bool = False,
) -> str:
    """SQL: customer_id, issued, issuances[, expired, balance: `expired`'s (holder, x)] of every customer issued
    anything; with `top`, the `top` largest, largest first (ties by customer id); `wide` as for
    `per_customer_rows`."""
    inner = per_customer_rows(lay, name, boundary, wide)
    order = "" if top is None else f" ORDER BY c.issued DESC, c.customer_id LIMIT {top}"
    columns, join = "", ""
    if expired is not None:  # also what expired, and the balance it leaves
        x = "coalesce(x.x, 0)"
        columns = f", {amount(x)} AS expired, {amount(f'c.issued - {x}')} AS balance"
        join = f" LEFT JOIN ({expired}) x ON x.holder = c.customer_id"
    return f"""
        SELECT c.customer_id, {amount("c.issued")} AS issued,
               CAST(c.issuances AS BIGINT) AS issuances{columns}
        FROM ({inner}) c{join} WHERE c.issuances > 0{order}"""


def issuances_sql(
    lay: Layout,
    name: str,
    boundary: int | None,
    asset: str,
    amount: Amount,
    positions: tuple[int, int] | None = None,
) -> str:
    """SQL of the `issuances` view: one row per attempted issuance (rewards_lab.replay.engine.ISSUANCE_COLUMNS);
    `positions` (from, to): only those events."""
    ordered, amounts = schema.ORDERED.on(name), schema.AMOUNTS.on(name)
    kept_table, slots = schema.CEILING_KEPT.on(name), schema.SLOTS.on(name)
    events = (
        ordered
        if positions is None
        else f"(SELECT * FROM {ordered} WHERE __pos >= {positions[0]} AND __pos < {positions[1]})"
    )
    kept = "" if boundary is None else f"LEFT JOIN {kept_table} q ON q.pos = p.pos AND q.i = p.i"
    ok = "p.m > 0" if boundary is None else f"(p.m > 0 AND (p.day < {boundary} OR q.pos IS NOT NULL))"
    symbol = DUCKDB.render(string(asset))
    minor, codes = "greatest(p.m, 0)", f"WHEN p.m = {TOO_LARGE} THEN 'amount_too_large'"
    where = "" if positions is None else f" WHERE p.pos >= {positions[0]} AND p.pos < {positions[1]}"
    each = unnested(lay, amounts, where, beneficiaries=False)
    if lay.beneficiary_fields:  # the customer of each amount; a beneficiary's refusals keep their codes
        minor = f"CASE WHEN p.m < {NOT_FOUND_BASE} THEN {NOT_FOUND_BASE} - p.m ELSE greatest(p.m, 0) END"
        codes += (
            f" WHEN p.m = {BENEFICIARY_MISSING} THEN 'beneficiary_missing'"
            f" WHEN p.m < {NOT_FOUND_BASE} THEN 'beneficiary_not_found'"
        )
        each = unnested(lay, amounts, where)
    return f"""
        SELECT p.pos * {lay.slots} + s.slot AS seq, e.external_event_id, p.customer_id, s.event_type, e.occurred_at,
               s.rule_index, s.action_index, {symbol} AS asset, {amount(minor)} AS amount,
               {minor} AS amount_minor, CASE WHEN {ok} THEN 'issued' ELSE 'failed' END AS status,
               CASE {codes} WHEN NOT {ok} THEN 'asset_supply_exhausted' END AS error_code
        FROM ({each}) p
        JOIN {slots} s ON s.k = p.k AND s.i = p.i
        JOIN {events} e ON e.__pos = p.pos
        {kept}"""


def redemptions_sql(name: str, asset: str, amount: Amount) -> str:
    """SQL: the redemptions (`redemptions`) in input order, each `redeemed` or `refused` (the balance could not
    cover it) as the pass decided (`redeemed`: the pass's outcome of kind r)."""
    red, out = schema.REDEMPTIONS.on(name), schema.REDEEMED.on(name)
    return f"""
        SELECT r.idx, r.holder AS customer_id, CAST(make_timestamp(r.t) AS TIMESTAMPTZ) AS occurred_at,
               {DUCKDB.render(string(asset))} AS asset, {amount("r.amount")} AS amount, r.amount AS amount_minor,
               CASE WHEN o.accepted THEN 'redeemed' ELSE 'refused' END AS status
        FROM {red} r LEFT JOIN {out} o ON o.idx = r.idx ORDER BY r.idx"""


def reversals_sql(slots: int, name: str, asset: str, amount: Amount, clawback: str) -> str:
    """SQL: one row per reward a reverse action took back (or tried to), in processing order of the actions
    (`slots`: the programme's rule actions, seq = pos * slots + slot)."""
    taken, rad = schema.TAKEN.on(name), schema.DECISIONS.on(name)
    ordered, slots_table = schema.ORDERED.on(name), schema.SLOTS.on(name)
    return f"""
        SELECT t.seq, e.external_event_id, e.occurred_at, s.rule_index, s.action_index,
               t.reward AS original_seq, o.external_event_id AS original_external_event_id,
               os.rule_index AS original_rule_index, os.action_index AS original_action_index,
               t.holder AS customer_id, {DUCKDB.render(string(asset))} AS asset,
               {amount("t.target")} AS target_amount, t.target AS target_minor,
               {amount("t.taken")} AS taken_amount, t.taken AS taken_minor,
               {amount("t.target - t.taken")} AS shortfall_amount, t.target - t.taken AS shortfall_minor,
               {DUCKDB.render(string(clawback))} AS clawback
        FROM {taken} t JOIN {rad} a ON a.seq = t.seq
        JOIN {ordered} e ON e.__pos = a.pos JOIN {slots_table} s ON s.slot = a.slot
        JOIN {ordered} o ON o.__pos = t.reward // {slots}
        JOIN {slots_table} os ON os.slot = t.reward % {slots}
        ORDER BY t.seq, t.reward"""


def featured_issuances_sql(
    base: str,
    name: str,
    asset: str,
    amount: Amount,
    lookup: str | None,
    positions: tuple[int, int] | None = None,
) -> str:
    """SQL: the set-based issuance rows (`base`: `issuances_sql`) with the pass's decisions (`decided_rewards`),
    then one row per reverse action (kind `reversal`: `amount` what the wallets gave back, `requested_amount` the
    target); the customer is the holder (`lookup`: the customers' `__ref` -> `__cid`; of a reversal: the original
    event's customer; of a failed reverse action: the refund's)."""
    holder, join = holder_sql("b.customer_id", lookup)
    refund_holder, refund_join = holder_sql("e.customer_id", lookup)
    dec, rad, taken_table = (t.on(name) for t in (schema.DECIDED_REWARDS, schema.DECISIONS, schema.TAKEN))
    ordered, slots = schema.ORDERED.on(name), schema.SLOTS.on(name)
    if positions is not None:
        ordered = f"(SELECT * FROM {ordered} WHERE __pos >= {positions[0]} AND __pos < {positions[1]})"
    symbol = DUCKDB.render(string(asset))
    taken, target = "coalesce(t.taken, 0)", "coalesce(t.target, 0)"
    return f"""
        SELECT b.seq, b.external_event_id, {holder} AS customer_id, b.event_type, b.occurred_at, b.rule_index,
               b.action_index, b.asset, CASE WHEN d.seq IS NULL THEN b.amount ELSE {amount("d.g")} END AS amount,
               CAST(CASE WHEN d.seq IS NULL THEN b.amount_minor ELSE d.g END AS BIGINT) AS amount_minor,
               coalesce(d.status, b.status) AS status,
               CASE WHEN d.seq IS NULL THEN b.error_code ELSE d.error_code END AS error_code,
               'issue' AS kind, b.amount AS requested_amount, CAST(b.amount_minor AS BIGINT) AS requested_minor,
               d.cut_scope AS cap_scope, d.cut_period AS cap_period, {EPOCH} + d.cut_start AS cap_period_start,
               {amount("d.cut_minor")} AS cut_amount, d.cut_minor
        FROM ({base}) b LEFT JOIN {dec} d ON d.seq = b.seq {join}
        UNION ALL
        SELECT a.seq, e.external_event_id, CASE WHEN a.code IS NULL THEN a.oholder ELSE {refund_holder} END,
               s.event_type, e.occurred_at, s.rule_index,
               s.action_index, {symbol}, {amount(taken)}, CAST({taken} AS BIGINT),
               CASE WHEN a.code IS NULL THEN 'reversed' ELSE 'failed' END, a.code, 'reversal', {amount(target)},
               CAST({target} AS BIGINT), NULL, NULL, NULL, NULL, NULL
        FROM {rad} a JOIN {ordered} e ON e.__pos = a.pos JOIN {slots} s ON s.slot = a.slot
        LEFT JOIN (SELECT seq, sum(target) AS target, sum(taken) AS taken FROM {taken_table} GROUP BY seq) t
            ON t.seq = a.seq
        {refund_join}"""


# with caps, budgets, reversals or redemptions: the set-based summaries above, with the pass's corrections
# (`corrections`: rewards cut, skipped or refused), what reversals took (`taken`) and what redemptions spent, so
# that no summary reads the issuance rows themselves. Sums are of HUGEINTs (Spark's sum of BIGINTs is a BIGINT).
def corrections_sql(slots: int, name: str) -> str:
    """SQL of `corrections`: the pass's decisions (`decided_rewards`) with their UTC day and slot."""
    dec, amounts = schema.DECIDED_REWARDS.on(name), schema.AMOUNTS.on(name)
    return (
        f"SELECT d.*, p.day AS day, CAST(d.seq % {slots} AS INTEGER) AS slot "
        f"FROM {dec} d JOIN {amounts} p ON p.pos = d.seq // {slots}"
    )


def featured_totals_sql(name: str, boundary: int | None) -> str:
    """SQL: one row of minor-unit totals and counts: issued, issuances, requested, candidates, too large,
    beneficiary missing, not found, refused by the ceiling in the pass, limited, cut, taken back, its target,
    reversals, redemptions covered, what they spent, redemptions given."""
    cells, corr = issued_cells(name, boundary), schema.CORRECTIONS.on(name)
    cand, taken, rad = schema.CELLS.on(name), schema.TAKEN.on(name), schema.DECISIONS.on(name)
    red, out = schema.REDEMPTIONS.on(name), schema.REDEEMED.on(name)
    granted = "CAST(CASE WHEN status = 'issued' THEN g ELSE 0 END - requested AS HUGEINT)"
    return f"""
        SELECT
            (SELECT coalesce(sum(issued), 0) FROM ({cells})) + (SELECT coalesce(sum({granted}), 0) FROM {corr}),
            (SELECT coalesce(sum(n), 0) FROM ({cells}))
                - coalesce((SELECT count_if(status <> 'issued') FROM {corr}), 0),
            (SELECT coalesce(sum(p), 0) FROM {cand}),
            (SELECT coalesce(sum(n), 0) FROM {cand}),
            (SELECT coalesce(sum(x), 0) FROM {cand}),
            (SELECT coalesce(sum(y), 0) FROM {cand}),
            (SELECT coalesce(sum(z), 0) FROM {cand}),
            coalesce((SELECT count_if(status = 'failed') FROM {corr}), 0),
            coalesce((SELECT count_if(status = 'limited') FROM {corr}), 0),
            (SELECT coalesce(sum(CAST(cut_minor AS HUGEINT)), 0) FROM {corr}),
            (SELECT coalesce(sum(CAST(taken AS HUGEINT)), 0) FROM {taken}),
            (SELECT coalesce(sum(CAST(target AS HUGEINT)), 0) FROM {taken}),
            coalesce((SELECT count_if(code IS NULL) FROM {rad}), 0),
            coalesce((SELECT count_if(o.accepted) FROM {red} r JOIN {out} o ON o.idx = r.idx), 0),
            (SELECT coalesce(sum(CAST(r.amount AS HUGEINT)), 0) FROM {red} r JOIN {out} o ON o.idx = r.idx
                WHERE o.accepted),
            coalesce((SELECT count(*) FROM {red}), 0)"""


def featured_totals(
    row: Sequence[Any], failed: Iterable[tuple[str, int]], boundary: int | None, decimals: int
) -> dict[str, Any]:
    """The totals of a featured replay from `featured_totals_sql`'s row and `failed_actions_sql`'s rows: also what
    was requested and cut, limited, reversed (and its target and shortfall), the net issuance and what was
    redeemed."""
    issued, issuances, requested, candidates, too_large, missing, not_found = (int(v) for v in row[:7])
    exhausted, limited, cut, taken, target, reversed_, redeemed_count, redeemed, redemptions = (int(v) for v in row[7:])
    if boundary is not None:  # the ceiling, set-based, refused what it did not issue
        exhausted = candidates - issuances
    codes = {
        "amount_too_large": too_large,
        "asset_supply_exhausted": exhausted,
        "beneficiary_missing": missing,
        "beneficiary_not_found": not_found,
    }
    codes.update({str(code): int(count) for code, count in failed})
    decimal = partial(to_decimal, decimals=decimals)
    return {
        "issued": decimal(issued),
        "issuances": issuances,
        "failed": sum(codes.values()),
        "failed_by_code": {code: count for code, count in codes.items() if count},
        "requested": decimal(requested),
        "cut": decimal(cut),
        "limited": limited,
        "reversed": decimal(taken),
        "reversal_target": decimal(target),
        "shortfall": decimal(target - taken),
        "reversals": reversed_,
        "net": decimal(issued - taken),
        "redeemed": decimal(redeemed),
        "redemptions": redeemed_count,
        "redemptions_refused": redemptions - redeemed_count,
    }


def failed_actions_sql(name: str) -> str:
    """SQL: (code, count) of the reverse actions that failed."""
    rad = schema.DECISIONS.on(name)
    return f"SELECT code, count(*) AS n FROM {rad} WHERE code IS NOT NULL GROUP BY code ORDER BY code"


def featured_daily_sql(
    slots: int, name: str, boundary: int | None, asset: str, amount: Amount, expired: str | None = None
) -> str:
    """SQL: per UTC day and rule, what was issued (and its running total), requested, cut by caps and budgets,
    skipped (`limited`), taken back by reversals (on the day the refund is processed, from the rule that issued
    the reward) and the net issuance with its running total; with `expired` (SQL of (day, slot, x) cells,
    rewards_lab.replay.plan.expiry.expired_cells) also what expired."""
    symbol = DUCKDB.render(string(asset))
    corr, cand, taken = schema.CORRECTIONS.on(name), schema.CELLS.on(name), schema.TAKEN.on(name)
    rad, slots_table = schema.DECISIONS.on(name), schema.SLOTS.on(name)
    named, zero = ("", "") if expired is None else (", CAST(0 AS HUGEINT) AS xp", ", 0")
    cells = f"""
        SELECT day, slot, CAST(issued AS HUGEINT) AS issued, n, CAST(0 AS HUGEINT) AS req, CAST(0 AS HUGEINT) AS cut,
               0 AS lim, CAST(0 AS HUGEINT) AS rev{named} FROM ({issued_cells(name, boundary)})
        UNION ALL SELECT day, slot, 0, 0, p, 0, 0, 0{zero} FROM {cand} WHERE n > 0
        UNION ALL SELECT day, slot, CASE WHEN status = 'issued' THEN g ELSE 0 END - requested,
                         -CAST(status <> 'issued' AS INTEGER), 0, coalesce(cut_minor, 0),
                         CAST(status = 'limited' AS INTEGER), 0{zero} FROM {corr}
        UNION ALL SELECT a.pday, CAST(t.reward % {slots} AS INTEGER), 0, 0, 0, 0, 0, t.taken{zero}
                  FROM {taken} t JOIN {rad} a ON a.seq = t.seq"""
    column, total, kept = "", "", ""
    if expired is not None:
        cells += f"\n        UNION ALL SELECT day, slot, 0, 0, 0, 0, 0, 0, x FROM ({expired})"
        column, total, kept = f", {amount('xp')} AS expired", ", sum(c.xp) AS xp", " OR xp > 0"
    window = "OVER (PARTITION BY rule_index ORDER BY day)"
    return f"""
        SELECT {EPOCH} + day AS day, {symbol} AS asset, rule_index, {amount("issued")} AS issued,
               {amount(f"sum(issued) {window}")} AS cumulative, CAST(issuances AS BIGINT) AS issuances,
               {amount("req")} AS requested, {amount("cut")} AS cut, CAST(lim AS BIGINT) AS limited,
               {amount("rev")} AS reversed, {amount("issued - rev")} AS net,
               {amount(f"sum(issued - rev) {window}")} AS net_cumulative{column}
        FROM (
            SELECT c.day, s.rule_index, sum(c.issued) AS issued, sum(c.n) AS issuances, sum(c.req) AS req,
                   sum(c.cut) AS cut, sum(c.lim) AS lim, sum(c.rev) AS rev{total}
            FROM ({cells}) c JOIN (SELECT DISTINCT slot, rule_index FROM {slots_table}) s ON s.slot = c.slot
            GROUP BY c.day, s.rule_index
        ) WHERE req > 0 OR rev > 0{kept} ORDER BY day, rule_index"""


def featured_per_customer_sql(
    lay: Layout,
    name: str,
    boundary: int | None,
    lookup: str | None,
    amount: Amount,
    top: int | None,
    expired: str | None = None,
) -> str:
    """SQL: per customer (its holder; `lookup`: `__ref` -> `__cid`, None: the reference), what was issued, taken
    back and redeemed, and the balance it leaves; with `expired` (SQL of (holder, x)) also what expired, which the
    balance is net of."""
    holder, join = holder_sql("c.customer_id", lookup)
    corr, taken = schema.CORRECTIONS.on(name), schema.TAKEN.on(name)
    red, out = schema.REDEMPTIONS.on(name), schema.REDEEMED.on(name)
    named, zero = ("", "") if expired is None else (", CAST(0 AS HUGEINT) AS xp", ", 0")
    parts = f"""
        SELECT {holder} AS holder, CAST(c.issued AS HUGEINT) AS issued, coalesce(c.issuances, 0) AS n,
               CAST(0 AS HUGEINT) AS rev, CAST(0 AS HUGEINT) AS red{named}
            FROM ({per_customer_rows(lay, name, boundary, wide=True)}) c {join}
        UNION ALL SELECT holder, CASE WHEN status = 'issued' THEN g ELSE 0 END - requested,
                         -CAST(status <> 'issued' AS INTEGER), 0, 0{zero} FROM {corr}
        UNION ALL SELECT holder, 0, 0, taken, 0{zero} FROM {taken}
        UNION ALL SELECT r.holder, 0, 0, 0, r.amount{zero} FROM {red} r JOIN {out} o ON o.idx = r.idx
                  WHERE o.accepted"""
    column, total, less = "", "", ""
    if expired is not None:
        parts += f"\n        UNION ALL SELECT holder, 0, 0, 0, 0, x FROM ({expired})"
        column, total, less = f", {amount('c.xp')} AS expired", ", sum(xp) AS xp", " - c.xp"
    order = "" if top is None else f" ORDER BY c.issued DESC, c.customer_id LIMIT {top}"
    return f"""
        SELECT c.customer_id, {amount("c.issued")} AS issued, CAST(c.issuances AS BIGINT) AS issuances,
               {amount("c.rev")} AS reversed, {amount("c.issued - c.rev")} AS net, {amount("c.red")} AS redeemed,
               {amount(f"c.issued - c.rev - c.red{less}")} AS balance{column}
        FROM (SELECT holder AS customer_id, sum(issued) AS issued, sum(n) AS issuances, sum(rev) AS rev,
                     sum(red) AS red{total} FROM ({parts}) GROUP BY holder) c
        WHERE c.issuances > 0{order}"""
