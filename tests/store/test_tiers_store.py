"""The tier repository (issue 33, T2) on both stores at once (`Both`: every statement runs on DuckDB as written and
on PostgreSQL as rendered, and the answers must agree): state saved and replaced, contributions counted once per
source and customer, daily sums added up, window sums bounded by their days, the history newest first."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime

from rewards_lab.contract.scope import Scope
from rewards_lab.store.tiers import TierChangeRow, TierContribution, TierRepository, TierStateRow
from tests.store.test_sql_both_engines import A, B, Both, both  # noqa: F401 (the fixture)

T0 = datetime(2026, 3, 1, 12, 0, 0)


def _state(customer: str, tier: str, review: datetime | None = None) -> TierStateRow:
    return TierStateRow("prg_1", customer, tier, T0, date(2026, 3, 1), review, None, None, T0, "mk1", "prv_1")


def test_state_is_saved_replaced_and_loaded_per_tenant(both: Both) -> None:  # noqa: F811
    tiers = TierRepository(both)  # type: ignore[arg-type]
    tiers.save(A, [_state("cus_1", "silver", datetime(2027, 1, 1)), _state("cus_2", "member")])
    tiers.save(A, [_state("cus_1", "gold", datetime(2028, 1, 1))])  # replaced in place
    tiers.save(B, [_state("cus_1", "member")])
    loaded = tiers.load(A, "prg_1", ["cus_1", "cus_2", "cus_3"])
    assert loaded == {"cus_1": _state("cus_1", "gold", datetime(2028, 1, 1)), "cus_2": _state("cus_2", "member")}
    assert tiers.load(B, "prg_1", ["cus_1"])["cus_1"].tier == "member"
    assert tiers.load(A, "prg_2", ["cus_1"]) == {} and tiers.load(A, "prg_1", []) == {}


def test_contributions_count_once_and_sum_by_day(both: Both) -> None:  # noqa: F811
    tiers = TierRepository(both)  # type: ignore[arg-type]
    d1, d2, d3 = date(2026, 3, 1), date(2026, 3, 2), date(2026, 4, 1)
    first = [
        TierContribution("exe_1", "cus_1", d1, 2**64),  # past BIGINT: HUGEINT / NUMERIC(38, 0)
        TierContribution("exe_2", "cus_1", d1, 5),
        TierContribution("exe_2", "cus_2", d2, 7),  # one source, two customers
        TierContribution("exe_2", "cus_2", d2, 7),  # a duplicate in the list: counted once
    ]
    assert tiers.add_contributions(A, "prg_1", "mk1", first) == first[:3]
    again = [TierContribution("exe_1", "cus_1", d1, 100), TierContribution("exe_3", "cus_1", d3, -3)]
    assert tiers.add_contributions(A, "prg_1", "mk1", again) == again[1:]  # a retried source adds nothing
    tiers.add_contributions(A, "prg_1", "mk2", [TierContribution("evt_1", "cus_1", d1, 1)])  # another metric
    assert tiers.known_sources(A, "prg_1", "mk1", ["exe_1", "exe_2", "exe_9"]) == {
        ("exe_1", "cus_1"), ("exe_2", "cus_1"), ("exe_2", "cus_2")
    }  # fmt: skip
    assert tiers.window_sums(A, "prg_1", "mk1", ["cus_1", "cus_2"], d1, d3) == {"cus_1": 2**64 + 2, "cus_2": 7}
    assert tiers.window_sums(A, "prg_1", "mk1", ["cus_1", "cus_2"], d2, d2) == {"cus_2": 7}
    assert tiers.window_sums(A, "prg_1", "mk2", ["cus_1"], d1, d1) == {"cus_1": 1}
    assert tiers.window_sums(B, "prg_1", "mk1", ["cus_1"], d1, d3) == {}
    assert both.same("SELECT customer_id, day, amount_minor FROM tier_days WHERE metric_key = 'mk1' ORDER BY 1, 2") == [
        ("cus_1", d1, 2**64 + 5), ("cus_1", d3, -3), ("cus_2", d2, 7)
    ]  # fmt: skip


def test_the_history_reads_newest_first(both: Both) -> None:  # noqa: F811
    tiers = TierRepository(both)  # type: ignore[arg-type]
    changes = [
        TierChangeRow(
            f"tch_{n}", "prg_1", "cus_1", datetime(2026, 3, n + 1), kind, before, after, 2**65 if n else None,
            date(2026, 1, 1), date(2026, 3, n + 1), "evt_1" if n else None, "prv_1", None, None, None,
        )
        for n, (kind, before, after) in enumerate(
            [("enrolled", None, "member"), ("upgraded", "member", "silver"), ("upgraded", "silver", "gold")]
        )
    ]  # fmt: skip
    tiers.add_changes(A, changes)
    assert tiers.history(A, "prg_1", "cus_1", 2) == [changes[2], changes[1]]
    assert tiers.history(B, "prg_1", "cus_1", 10) == []
    # The instants a batch checks before writing (the table keeps one change per customer, instant and kind).
    assert tiers.changes_between(A, "prg_1", ["cus_1", "cus_9"], datetime(2026, 3, 2), datetime(2026, 3, 3)) == {
        ("cus_1", datetime(2026, 3, 2), "upgraded"), ("cus_1", datetime(2026, 3, 3), "upgraded")
    }  # fmt: skip
    assert tiers.changes_between(B, "prg_1", ["cus_1"], datetime(2026, 1, 1), datetime(2027, 1, 1)) == set()
    assert tiers.changes_between(A, "prg_1", [], datetime(2026, 1, 1), datetime(2027, 1, 1)) == set()


def test_the_days_of_customers_are_read_per_metric(both: Both) -> None:  # noqa: F811
    tiers = TierRepository(both)  # type: ignore[arg-type]
    d1, d2 = date(2026, 3, 1), date(2026, 3, 2)
    tiers.add_contributions(
        A,
        "prg_1",
        "mk1",
        [TierContribution("exe_1", "cus_1", d1, 2**64), TierContribution("exe_2", "cus_1", d2, -4),
         TierContribution("exe_3", "cus_2", d2, 9)],
    )  # fmt: skip
    tiers.add_contributions(A, "prg_1", "mk2", [TierContribution("exe_1", "cus_1", d1, 1)])
    read = tiers.days(A, "prg_1", "mk1", ["cus_1", "cus_2", "cus_3"])
    assert read == {"cus_1": {d1: 2**64, d2: -4}, "cus_2": {d2: 9}}
    assert tiers.days(A, "prg_1", "mk2", ["cus_1"]) == {"cus_1": {d1: 1}}
    assert tiers.days(B, "prg_1", "mk1", ["cus_1"]) == {} and tiers.days(A, "prg_1", "mk1", []) == {}


def _live(both: Both, scope: Scope, program_id: str, tiers: str | None, status: str = "active") -> None:  # noqa: F811
    """A programme whose live version (number 1) has these tiers (JSON text, or None)."""
    common = {"organization_id": scope.organization_id, "environment": scope.environment, "created_at": T0}
    programme = {"id": program_id, "name": "P", "asset_id": "ast_1", "current_version": 1, "draft_version_id": "prv_d"}
    both.insert("programmes", [{**common, **programme, "status": status}])
    version = {"id": f"prv_{program_id}", "program_id": program_id, "number": 1, "status": "published", "tiers": tiers}
    both.insert("programme_versions", [{**common, **version}])


def test_the_customers_due_are_found_across_tenants_and_read_again_per_tenant(both: Both) -> None:  # noqa: F811
    """`due`: a review or a grace end at or before the moment, soonest first, every tenant, in active programmes
    whose live version has tiers; the base (neither) never. `due_among`: of the customers named, those of the tenant
    still due."""
    tiers = TierRepository(both)  # type: ignore[arg-type]
    _live(both, A, "prg_1", "{}")
    _live(both, B, "prg_b", "{}")
    _live(both, A, "prg_3", None)  # its live version dropped its tiers
    _live(both, A, "prg_4", "{}", status="inactive")
    later = datetime(2026, 4, 1)
    in_grace = TierStateRow("prg_1", "cus_3", "gold", T0, date(2026, 3, 1), later, T0, "silver", T0, "mk1", "prv_1")
    tiers.save(A, [_state("cus_1", "silver", later), _state("cus_2", "member"), in_grace])
    tiers.save(B, [replace(_state("cus_1", "gold", datetime(2026, 3, 15)), program_id="prg_b")])
    tiers.save(A, [replace(_state("cus_1", "gold", T0), program_id=p) for p in ("prg_3", "prg_4")])
    moment = datetime(2026, 3, 20)
    assert tiers.due(moment, 10) == [
        (*A.params, "prg_1", "cus_3"),  # its grace ends at T0 (1 March), before B's review on the 15th
        (*B.params, "prg_b", "cus_1"),
    ]
    assert tiers.due(moment, 1) == [(*A.params, "prg_1", "cus_3")]
    assert len(tiers.due(later, 10)) == 3 and tiers.due(datetime(2026, 2, 1), 10) == []
    assert set(tiers.due_among(A, "prg_1", ["cus_1", "cus_2", "cus_3"], moment)) == {"cus_3"}
    assert tiers.due_among(A, "prg_1", ["cus_1", "cus_3"], later) == {
        "cus_1": _state("cus_1", "silver", later),
        "cus_3": in_grace,
    }
    assert tiers.due_among(A, "prg_2", ["cus_3"], later) == {} and tiers.due_among(A, "prg_1", [], later) == {}
