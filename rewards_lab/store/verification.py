"""`verify_ledger`: recompute every balance from the entries and check every invariant of the ledger."""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

_CHECKS: dict[str, str] = {
    "unbalanced_transaction": """
        SELECT transaction_id FROM entries GROUP BY transaction_id, asset_id
        HAVING sum(amount_minor) <> 0 OR count(*) < 2""",
    # Transaction ids carry no index (see migration 6): they are unique by construction, and checked here.
    "duplicate_transaction_id": """
        SELECT id FROM transactions GROUP BY id HAVING count(*) > 1""",
    "transaction_without_entries": """
        SELECT t.id FROM transactions t ANTI JOIN entries e ON e.transaction_id = t.id""",
    "entry_without_transaction": """
        SELECT DISTINCT e.transaction_id FROM entries e ANTI JOIN transactions t ON e.transaction_id = t.id""",
    "snapshot_mismatch": """
        SELECT coalesce(b.account_id, r.account_id) || '/' || coalesce(b.asset_id, r.asset_id)
        FROM balances b FULL OUTER JOIN (
            SELECT account_id, asset_id, sum(amount_minor) AS balance_minor FROM entries GROUP BY ALL
        ) r ON b.account_id = r.account_id AND b.asset_id = r.asset_id
        WHERE coalesce(b.balance_minor, 0) <> coalesce(r.balance_minor, 0)""",
    "ledger_not_zero": """
        SELECT asset_id FROM entries GROUP BY asset_id HAVING sum(amount_minor) <> 0""",
    # Only a "negative" clawback (a reversal) takes a wallet below zero, and its floor then follows the balance.
    "negative_wallet_balance": """
        SELECT b.account_id || '/' || b.asset_id FROM balances b
        WHERE starts_with(b.account_id, 'wal_') AND b.balance_minor < 0 AND (
            b.floor_minor IS DISTINCT FROM b.balance_minor OR NOT EXISTS (
                SELECT 1 FROM transactions t WHERE t.kind = 'reversal' AND t.source_account_id = b.account_id
                    AND t.asset_id = b.asset_id))""",
    # Outstanding supply is what the issuance account gave minus what was redeemed and what expired.
    "supply_over_ceiling": """
        SELECT a.id FROM assets a
        LEFT JOIN balances bi ON bi.account_id = a.issuance_account_id AND bi.asset_id = a.id
        LEFT JOIN balances br ON br.account_id = a.redemption_account_id AND br.asset_id = a.id
        LEFT JOIN balances bb ON bb.account_id = a.breakage_account_id AND bb.asset_id = a.id
        WHERE a.supply_ceiling_minor IS NOT NULL AND -coalesce(bi.balance_minor, 0) - coalesce(br.balance_minor, 0)
            - coalesce(bb.balance_minor, 0) > a.supply_ceiling_minor""",
    "outstanding_mismatch": """
        SELECT a.id FROM assets a
        LEFT JOIN balances bi ON bi.account_id = a.issuance_account_id AND bi.asset_id = a.id
        LEFT JOIN balances br ON br.account_id = a.redemption_account_id AND br.asset_id = a.id
        LEFT JOIN balances bb ON bb.account_id = a.breakage_account_id AND bb.asset_id = a.id
        LEFT JOIN (SELECT asset_id, sum(balance_minor) AS held FROM balances
                   WHERE starts_with(account_id, 'wal_') GROUP BY asset_id) w ON w.asset_id = a.id
        WHERE -coalesce(bi.balance_minor, 0) - coalesce(br.balance_minor, 0) - coalesce(bb.balance_minor, 0)
            <> coalesce(w.held, 0)""",
    "wrong_floor": """
        SELECT b.account_id FROM balances b
        LEFT JOIN assets a ON a.issuance_account_id = b.account_id AND a.id = b.asset_id
        LEFT JOIN balances br ON br.account_id = a.redemption_account_id AND br.asset_id = a.id
        LEFT JOIN balances bb ON bb.account_id = a.breakage_account_id AND bb.asset_id = a.id
        WHERE CASE
            WHEN starts_with(b.account_id, 'wal_') THEN b.floor_minor IS DISTINCT FROM LEAST(0, b.balance_minor)
            WHEN a.id IS NOT NULL THEN b.floor_minor IS DISTINCT FROM
                -(a.supply_ceiling_minor + coalesce(br.balance_minor, 0) + coalesce(bb.balance_minor, 0))
            ELSE b.floor_minor IS NOT NULL END""",
    # An asset that tracks lots: the open lots of each wallet hold max(balance, 0) between them (domain.lots), and
    # what expired from lots is what the breakage account received.
    "lots_mismatch": """
        SELECT b.account_id || '/' || b.asset_id FROM balances b
        JOIN assets a ON a.id = b.asset_id AND a.breakage_account_id IS NOT NULL
        LEFT JOIN (SELECT wallet_id, asset_id, sum(remaining_minor) AS held FROM lots GROUP BY ALL) l
            ON l.wallet_id = b.account_id AND l.asset_id = b.asset_id
        WHERE starts_with(b.account_id, 'wal_') AND coalesce(l.held, 0) <> GREATEST(b.balance_minor, 0)""",
    "breakage_mismatch": """
        SELECT a.id FROM assets a
        LEFT JOIN balances bb ON bb.account_id = a.breakage_account_id AND bb.asset_id = a.id
        LEFT JOIN (SELECT asset_id, sum(expired_minor) AS expired FROM lots GROUP BY ALL) l ON l.asset_id = a.id
        WHERE a.breakage_account_id IS NOT NULL AND coalesce(bb.balance_minor, 0) <> coalesce(l.expired, 0)""",
}
_SAMPLE = 5


@dataclass(frozen=True, slots=True)
class LedgerReport:
    transactions: int
    entries: int
    balances: int
    problems: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_ledger(con: duckdb.DuckDBPyConnection) -> LedgerReport:
    """Check the whole ledger (every tenant). Each problem lists up to five offending subjects."""
    problems: dict[str, list[str]] = {}
    for name, sql in _CHECKS.items():
        rows = con.execute(f"SELECT * FROM ({sql}) LIMIT {_SAMPLE}").fetchall()
        if rows:
            problems[name] = [str(row[0]) for row in rows]
    counts = con.execute(
        "SELECT (SELECT count(*) FROM transactions), (SELECT count(*) FROM entries), (SELECT count(*) FROM balances)"
    ).fetchone()
    assert counts is not None
    return LedgerReport(int(counts[0]), int(counts[1]), int(counts[2]), problems)
