"""`decide_all` (with its whole-batch shortcut) decides exactly as `decide` one request at a time."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.domain.posting_policy import AssetState, LedgerState, PostingRequest, WalletState

WALLETS = ["wal_a", "wal_b", "wal_c", "wal_d"]
ASSETS = ["ast_1", "ast_2"]
UNUSUAL = {"frozen": WalletState("frozen", "open"), "closed": WalletState("active", "closed")}


@st.composite
def states(draw: st.DrawFn) -> LedgerState:
    assets = {}
    for asset_id in ASSETS:
        ceiling = draw(st.one_of(st.none(), st.integers(0, 2_000)))
        outstanding = draw(st.integers(0, ceiling if ceiling is not None else 2_000))
        status = draw(st.sampled_from(["active", "active", "active", "paused"]))
        assets[asset_id] = AssetState(status, 2, ceiling, f"iss_{asset_id}", f"red_{asset_id}", outstanding)
    unusual = {w: UNUSUAL[k] for w in WALLETS if (k := draw(st.sampled_from(["", "", "", "frozen", "closed"])))}
    balances = {(w, a): draw(st.integers(0, 1_000)) for w in WALLETS for a in ASSETS}
    return LedgerState(assets, set(WALLETS), unusual, balances)


@st.composite
def requests(draw: st.DrawFn, index: int) -> PostingRequest:
    kind = draw(st.sampled_from(["issue", "reward", "redemption", "transfer"]))
    wallets = [*WALLETS, "wal_unknown"]
    wallet = draw(st.sampled_from(wallets))
    to_wallet = draw(st.sampled_from(wallets)) if kind == "transfer" else None
    amount = draw(st.one_of(st.integers(1, 600), st.integers(-2, 0)))
    return PostingRequest(f"txn_{index:04d}", kind, draw(st.sampled_from(ASSETS)), amount, wallet, to_wallet)


@st.composite
def batches(draw: st.DrawFn) -> list[PostingRequest]:
    size = draw(st.integers(0, 12))
    return [draw(requests(index)) for index in range(size)]


@settings(max_examples=400, deadline=None)
@given(state=states(), batch=batches())
def test_decide_all_matches_deciding_one_by_one(state: LedgerState, batch: list[PostingRequest]) -> None:
    one_by_one = copy.deepcopy(state)
    expected_accepted, expected_refused = [], []
    for request in batch:
        try:
            expected_accepted.append(one_by_one.decide(request))
        except Exception as error:  # noqa: BLE001 - ServiceError, compared by code below
            expected_refused.append((request, getattr(error, "code", type(error).__name__)))
    accepted, refused = state.decide_all(batch)
    assert accepted == expected_accepted
    assert [(request, error.code) for request, error in refused] == expected_refused
    assert {k: v for k, v in state.balances.items() if v} == {k: v for k, v in one_by_one.balances.items() if v}
    assert state.outstanding == one_by_one.outstanding


def test_a_clean_batch_takes_the_shortcut_and_an_overdraft_does_not() -> None:
    asset = AssetState("active", 2, 1_000, "iss", "red", 0)
    state = LedgerState({"ast": asset}, {"wal_a", "wal_b"}, {}, {("wal_a", "ast"): 100})
    clean = [
        PostingRequest("t1", "issue", "ast", 500, "wal_b"),
        PostingRequest("t2", "transfer", "ast", 100, "wal_a", "wal_b"),
    ]
    assert state._nothing_refused(clean)
    overdraft = [PostingRequest("t3", "transfer", "ast", 101, "wal_a", "wal_b")]
    assert not state._nothing_refused(overdraft)
    over_ceiling = [PostingRequest("t4", "issue", "ast", 1_001, "wal_b")]
    assert not state._nothing_refused(over_ceiling)
    accepted, refused = state.decide_all(overdraft + over_ceiling)
    assert accepted == [] and [error.code for _, error in refused] == ["insufficient_balance", "asset_supply_exhausted"]
