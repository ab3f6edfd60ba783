"""`decide_batch` (whichever strategy it takes) and `decide_whole` (numpy) decide exactly as `decide` one by one."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from rewards_lab.domain.ledger import Posting
from rewards_lab.domain.posting_decision import _nothing_refused, decide_batch
from rewards_lab.domain.posting_policy import AssetState, LedgerState, PostingRequest, WalletState
from rewards_lab.domain.posting_whole import MIN_WHOLE, decide_whole

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
def test_decide_batch_matches_deciding_one_by_one(state: LedgerState, batch: list[PostingRequest]) -> None:
    one_by_one = copy.deepcopy(state)
    expected_accepted, expected_refused = [], []
    for request in batch:
        try:
            expected_accepted.append(one_by_one.decide(request))
        except Exception as error:  # noqa: BLE001 - ServiceError, compared by code below
            expected_refused.append((request, getattr(error, "code", type(error).__name__)))
    accepted, refused = _decided(state, batch)
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
    assert _nothing_refused(state, clean)
    overdraft = [PostingRequest("t3", "transfer", "ast", 101, "wal_a", "wal_b")]
    assert not _nothing_refused(state, overdraft)
    over_ceiling = [PostingRequest("t4", "issue", "ast", 1_001, "wal_b")]
    assert not _nothing_refused(state, over_ceiling)
    accepted, refused = _decided(state, overdraft + over_ceiling)
    assert accepted == [] and [error.code for _, error in refused] == ["insufficient_balance", "asset_supply_exhausted"]


def _rarely(draw: st.DrawFn, one_in: int) -> bool:
    """True about once in `one_in` draws (Hypothesis favours the bounds of a range, so not at a bound)."""
    return draw(st.integers(0, one_in)) == one_in // 2


MORE_UNUSUAL = {**UNUSUAL, "receive_only": WalletState("active", "receive_only")}


@st.composite
def whole_states(draw: st.DrawFn) -> LedgerState:
    """Small ceilings and balances, so that supply runs out and balances run dry in the middle of a batch."""
    assets = {}
    for asset_id in ASSETS:
        ceiling = draw(st.one_of(st.none(), st.integers(0, 12_000)))
        outstanding = draw(st.integers(0, ceiling if ceiling is not None else 2_000))
        status = "paused" if _rarely(draw, 10) else "active"
        assets[asset_id] = AssetState(status, 2, ceiling, f"iss_{asset_id}", f"red_{asset_id}", outstanding)
    kinds = ["frozen", "closed", "receive_only"]
    unusual = {w: MORE_UNUSUAL[draw(st.sampled_from(kinds))] for w in WALLETS if _rarely(draw, 8)}
    balances = {(w, a): draw(st.integers(0, 3_000)) for w in WALLETS for a in ASSETS}
    return LedgerState(assets, set(WALLETS), unusual, balances)


@st.composite
def homogeneous_batches(draw: st.DrawFn) -> list[PostingRequest]:
    """Mostly batches `decide_whole` takes (one kind family, one asset), with a stray request now and then."""
    size = draw(st.integers(MIN_WHOLE - 1, 30))
    family = draw(st.sampled_from([("issue", "reward"), ("issue",), ("transfer",)]))
    asset = draw(st.sampled_from(ASSETS))
    wallets = [*WALLETS, "wal_unknown"] if _rarely(draw, 10) else WALLETS
    batch = []
    for index in range(size):
        kind = draw(st.sampled_from(family))
        wallet = draw(st.sampled_from(wallets))
        to_wallet = None
        if kind == "transfer":  # to itself (refused) now and then only
            others = wallets if _rarely(draw, 40) else [w for w in wallets if w != wallet]
            to_wallet = draw(st.sampled_from(others))
        amount = draw(st.integers(-1, 0)) if _rarely(draw, 80) else draw(st.integers(1, 400))
        batch.append(PostingRequest(f"txn_{index:04d}", kind, asset, amount, wallet, to_wallet))
    if batch and _rarely(draw, 10):  # a stray request of another kind or asset
        stray = draw(requests(size))
        batch.insert(draw(st.integers(0, len(batch))), stray)
    return batch


def _homogeneous(batch: list[PostingRequest]) -> bool:
    kinds = {request.kind for request in batch}
    return (
        len(batch) >= MIN_WHOLE
        and len({request.asset_id for request in batch}) == 1
        and (kinds <= {"issue", "reward"} or kinds == {"transfer"})
    )


@settings(max_examples=600, deadline=None)
@given(state=whole_states(), batch=homogeneous_batches())
def test_decide_whole_accepts_exactly_the_batches_decided_one_by_one_without_a_refusal(
    state: LedgerState, batch: list[PostingRequest]
) -> None:
    one_by_one = copy.deepcopy(state)
    before = copy.deepcopy(state)
    expected, refusals = [], 0
    for request in batch:
        try:
            expected.append(one_by_one.decide(request))
        except Exception:  # noqa: BLE001 - any refusal sends the batch to decide_batch
            refusals += 1
    whole = decide_whole(state, batch)
    event("accepted whole" if whole else "refused one by one" if refusals else "declined: not homogeneous")
    if whole is None:
        assert refusals or not _homogeneous(batch)  # exact: no batch that one by one accepts whole is declined
        assert state.balances == before.balances and state.outstanding == before.outstanding  # nothing applied
        return
    assert refusals == 0
    assert whole.postings() == expected
    assert {k: v for k, v in state.balances.items() if v} == {k: v for k, v in one_by_one.balances.items() if v}
    assert state.outstanding == one_by_one.outstanding
    for account, balance in zip(whole.accounts, whole.balances, strict=True):
        assert one_by_one.balances.get((account, whole.asset_id), 0) == balance
    net = dict(zip(whole.accounts, whole.deltas.tolist(), strict=True))
    for key in set(state.balances) | set(before.balances):
        moved = net.get(key[0], 0) if key[1] == whole.asset_id else 0
        assert state.balances.get(key, 0) - before.balances.get(key, 0) == moved


def test_a_transfer_batch_that_spends_what_it_received_earlier_is_accepted_whole_and_the_reverse_is_not() -> None:
    asset = AssetState("active", 2, None, "iss", "red", 0)
    state = LedgerState({"ast": asset}, {"wal_a", "wal_b", "wal_c"}, {}, {("wal_a", "ast"): 100})
    receive_then_spend = [PostingRequest("t0", "transfer", "ast", 100, "wal_a", "wal_b")] + [
        PostingRequest(f"t{i}", "transfer", "ast", 10, "wal_b", "wal_c") for i in range(1, 11)
    ]
    assert decide_whole(copy.deepcopy(state), receive_then_spend) is not None
    spend_then_receive = receive_then_spend[1:] + receive_then_spend[:1]
    assert decide_whole(state, spend_then_receive) is None
    accepted, refused = _decided(state, spend_then_receive)
    assert len(refused) == 10 and len(accepted) == 1


def _decided(state: LedgerState, batch: list[PostingRequest]) -> tuple[list[Posting], list[tuple[PostingRequest, Any]]]:
    """`decide_batch`'s accepted postings and refusals."""
    decision = decide_batch(state, batch)
    return decision.accepted, decision.rejected
