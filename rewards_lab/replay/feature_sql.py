"""The DuckDB summaries of a replay with caps, budgets, reversals or redemptions, net of reversals
(docs/replay.md); the rows (issuances with their added columns, reversals, redemptions) are
rewards_lab.replay.plan.outputs', on both engines.

Every summary starts from the set-based summaries of rewards_lab.replay.store (which take every positive reward
as issued in full, or the ceiling's boundary when the pass did not run) and adds the pass's corrections
(`{name}_corr`: rewards cut, skipped or refused), what reversals took (`{name}_items`) and what redemptions spent,
so that no summary reads the issuance rows themselves.
"""

from __future__ import annotations

from collections.abc import Callable

from rewards_lab.replay.compiler import DUCKDB, string
from rewards_lab.replay.feature_store import FeatureTables
from rewards_lab.replay.plan.layout import Layout
from rewards_lab.replay.plan.outputs import issued_cells, per_customer_rows
from rewards_lab.replay.plan.reversals import holder_sql

Amount = Callable[[str], str]
_EPOCH = "DATE '1970-01-01'"  # the UTC days of the summaries count from the Unix epoch


def totals_sql(name: str, boundary: int | None) -> str:
    """SQL: one row of minor-unit totals and counts (see `totals`)."""
    cells = issued_cells(name, boundary)
    return f"""
        SELECT
            (SELECT coalesce(sum(issued), 0) FROM ({cells})) + (SELECT coalesce(sum(
                CASE WHEN status = 'issued' THEN g ELSE 0 END - requested), 0) FROM {name}_corr),
            (SELECT coalesce(sum(n), 0) FROM ({cells}))
                - coalesce((SELECT count_if(status <> 'issued') FROM {name}_corr), 0),
            (SELECT coalesce(sum(p), 0) FROM {name}_cand),
            (SELECT coalesce(sum(n), 0) FROM {name}_cand),
            (SELECT coalesce(sum(x), 0) FROM {name}_cand),
            (SELECT coalesce(sum(y), 0) FROM {name}_cand),
            (SELECT coalesce(sum(z), 0) FROM {name}_cand),
            coalesce((SELECT count_if(status = 'failed') FROM {name}_corr), 0),
            coalesce((SELECT count_if(status = 'limited') FROM {name}_corr), 0),
            (SELECT coalesce(sum(cut_minor), 0) FROM {name}_corr),
            (SELECT coalesce(sum(taken), 0) FROM {name}_items),
            (SELECT coalesce(sum(target), 0) FROM {name}_items),
            coalesce((SELECT count_if(code IS NULL) FROM {name}_rad), 0),
            coalesce((SELECT count_if(o.accepted) FROM {name}_red r JOIN {name}_redout o ON o.idx = r.idx), 0),
            (SELECT coalesce(sum(r.amount), 0) FROM {name}_red r JOIN {name}_redout o ON o.idx = r.idx
                WHERE o.accepted),
            coalesce((SELECT count(*) FROM {name}_red), 0)"""


def codes_sql(name: str) -> str:
    """SQL: (code, count) of the reverse actions that failed."""
    return f"SELECT code, count(*) FROM {name}_rad WHERE code IS NOT NULL GROUP BY code ORDER BY code"


def daily_sql(
    lay: Layout, name: str, boundary: int | None, asset: str, amount: Amount, expired: str | None = None
) -> str:
    """SQL: per UTC day and rule, what was issued (and its running total), requested, cut by caps and budgets,
    skipped (`limited`), taken back by reversals (on the day the refund is processed, from the rule that issued
    the reward) and the net issuance with its running total; with `expired` (SQL of (day, slot, x) cells,
    rewards_lab.replay.plan.expiry.expired_cells) also what expired."""
    symbol = DUCKDB.render(string(asset))
    named, zero = ("", "") if expired is None else (", 0 AS xp", ", 0")
    cells = f"""
        SELECT day, slot, issued, n, 0 AS req, 0 AS cut, 0 AS lim, 0 AS rev{named} FROM ({issued_cells(name, boundary)})
        UNION ALL SELECT day, slot, 0, 0, p, 0, 0, 0{zero} FROM {name}_cand WHERE n > 0
        UNION ALL SELECT day, slot, CASE WHEN status = 'issued' THEN g ELSE 0 END - requested,
                         -CAST(status <> 'issued' AS INTEGER), 0, coalesce(cut_minor, 0),
                         CAST(status = 'limited' AS INTEGER), 0{zero} FROM {name}_corr
        UNION ALL SELECT a.pday, CAST(t.reward % {lay.slots} AS INTEGER), 0, 0, 0, 0, 0, t.taken{zero}
                  FROM {name}_items t JOIN {name}_rad a ON a.seq = t.seq"""
    column, total, kept = "", "", ""
    if expired is not None:
        cells += f"\n        UNION ALL SELECT day, slot, 0, 0, 0, 0, 0, 0, x FROM ({expired})"
        column, total, kept = f", {amount('xp')} AS expired", ", sum(c.xp) AS xp", " OR xp > 0"
    window = "OVER (PARTITION BY rule_index ORDER BY day)"
    return f"""
        SELECT {_EPOCH} + day AS day, {symbol} AS asset, rule_index, {amount("issued")} AS issued,
               {amount(f"sum(issued) {window}")} AS cumulative, CAST(issuances AS BIGINT) AS issuances,
               {amount("req")} AS requested, {amount("cut")} AS cut, CAST(lim AS BIGINT) AS limited,
               {amount("rev")} AS reversed, {amount("issued - rev")} AS net,
               {amount(f"sum(issued - rev) {window}")} AS net_cumulative{column}
        FROM (
            SELECT c.day, s.rule_index, sum(c.issued) AS issued, sum(c.n) AS issuances, sum(c.req) AS req,
                   sum(c.cut) AS cut, sum(c.lim) AS lim, sum(c.rev) AS rev{total}
            FROM ({cells}) c JOIN (SELECT DISTINCT slot, rule_index FROM {name}_slots) s ON s.slot = c.slot
            GROUP BY ALL
        ) WHERE req > 0 OR rev > 0{kept} ORDER BY day, rule_index"""


def per_customer_sql_with(
    lay: Layout,
    name: str,
    boundary: int | None,
    tables: FeatureTables,
    amount: Amount,
    top: int | None,
    expired: str | None = None,
) -> str:
    """SQL: per customer (its holder), what was issued, taken back and redeemed, and the balance it leaves; with
    `expired` (SQL of (holder, x)) also what expired, which the balance is net of."""
    holder, join = holder_sql("c.customer_id", tables.lookup)
    named, zero = ("", "") if expired is None else (", 0 AS xp", ", 0")
    parts = f"""
        SELECT {holder} AS holder, c.issued, coalesce(c.issuances, 0) AS n, 0 AS rev, 0 AS red{named}
            FROM ({per_customer_rows(lay, name, boundary)}) c {join}
        UNION ALL SELECT holder, CASE WHEN status = 'issued' THEN g ELSE 0 END - requested,
                         -CAST(status <> 'issued' AS INTEGER), 0, 0{zero} FROM {name}_corr
        UNION ALL SELECT holder, 0, 0, taken, 0{zero} FROM {name}_items
        UNION ALL SELECT r.holder, 0, 0, 0, r.amount{zero} FROM {name}_red r JOIN {name}_redout o ON o.idx = r.idx
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
