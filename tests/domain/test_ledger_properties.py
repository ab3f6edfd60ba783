"""A stateful property test of the ledger, driven through the service layer over a real DuckDB file.

Hypothesis runs random sequences of operations (wallets with each transfer policy, assets with 0..4 decimals and
small supply ceilings, activate/pause/resume, issue, redeem, transfer, freeze/unfreeze, programmes with per-rate
or fixed rules and new versions of them, events submitted, resubmitted, processed and replayed) in three tenant
scopes of one database. A plain Python model predicts each outcome: success, with the balances it leaves, or
the ServiceError code that refuses it. After every step the invariants are checked: `verify_ledger` is ok, no
wallet is negative, outstanding supply equals the model and stays under the ceiling, and no scope moved because
of an operation in another one.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import hypothesis
import pytest
from hypothesis import HealthCheck, currently_in_test_context, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import EnvironmentName, Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.money import MAX_AMOUNT_MINOR, format_amount
from rewards_lab.engine import event_processing
from rewards_lab.service import assets, customers, event_intake, event_queries, ledger, organizations, programmes
from rewards_lab.store.database import Database
from rewards_lab.store.verification import verify_ledger
from tests.conftest import World

T = TypeVar("T")

# Two organizations; the first has both environments. Customers get the same external ids in every scope.
SCOPE_NAMES: list[tuple[str, EnvironmentName]] = [("A", "sandbox"), ("A", "production"), ("B", "sandbox")]
POLICIES = ["open", "receive_only", "closed"]
SYMBOLS = ["STAR", "GEM"]
NO_PROGRAMME_TYPE = "order.none"
MAX_WALLETS = 10
MAX_CUSTOMERS = 10
MAX_ASSETS = 6
MAX_PROGRAMMES = 4
MAX_EVENTS = 16
AMOUNT_RE = re.compile(r"-?[0-9]+(\.[0-9]+)?")
MISSING = "<missing>"

picks = st.integers(0, 1000)
rarely = st.sampled_from([False] * 9 + [True])
scope_indexes = st.integers(0, len(SCOPE_NAMES) - 1)
# How an amount is written: relative to what just fits (the balance, or the headroom under the ceiling) divided
# by 1, 2 or 3, plus a few minor units, sometimes with one trailing zero too many; absolute (digits that may
# carry more places than the asset has); or a string that is not an amount at all.
AMOUNT_KINDS = {
    "rel": st.tuples(st.just("rel"), st.sampled_from([1, 2, 3]), st.sampled_from([0, -1, 0, 1, -2, 2]), rarely),
    "abs": st.tuples(st.just("abs"), st.integers(0, 40), st.text("0123456789", max_size=5), rarely),
    "raw": st.tuples(
        st.just("raw"),
        st.sampled_from(["1e2", "+5", ".5", "5.", " 5", "abc", "", "1000000000000000000", "-0"]),
    ),
}
# Mostly relative amounts (one_of would weigh the kinds equally, whatever the repetitions).
amount_specs = st.sampled_from(["rel"] * 6 + ["abs", "raw"]).flatmap(AMOUNT_KINDS.__getitem__)
event_values = st.one_of(
    st.integers(-5, 150),
    st.decimals(min_value=-5, max_value=150, places=3, allow_nan=False, allow_infinity=False),
    st.floats(min_value=-5, max_value=150, allow_nan=False, allow_infinity=False).map(lambda f: round(f, 2)),
    st.sampled_from(["12", True, None, MISSING]),
)
rate_values = st.decimals(min_value=Decimal("0.0001"), max_value=Decimal("20"), places=4)
thresholds = st.one_of(st.none(), st.integers(0, 60))


# the model --------------------------------------------------------------------------------------------------
@dataclass
class MAsset:
    id: str
    scope: int
    symbol: str
    decimals: int
    ceiling: int | None
    status: str = "configured"
    issued: int = 0
    redeemed: int = 0

    @property
    def outstanding(self) -> int:
        return self.issued - self.redeemed


@dataclass
class MCustomer:
    id: str
    scope: int
    external_id: str
    wallets: list[str] = field(default_factory=list)


@dataclass
class MWallet:
    id: str
    scope: int
    customer: str
    policy: str
    frozen: bool = False


@dataclass(frozen=True)
class MVersion:
    """The one rule of a published programme version."""

    rate: Decimal | None  # per-rate {per: "amount", rate}, else fixed
    fixed_minor: int | None
    threshold: int | None  # condition amount gte threshold, or none
    bonus_minor: int | None = None  # a second action issuing a fixed amount, after the first


@dataclass
class MProgramme:
    id: str
    rule_id: str
    scope: int
    asset: str
    event_type: str
    versions: list[MVersion]


@dataclass
class MEvent:
    id: str
    scope: int
    external_id: str
    body: dict[str, Any]
    status: str = "received"
    error: str | None = None
    attempts: int = 0
    version: tuple[str, int] | None = None  # (programme, version index) evaluated at first processing
    evaluated: bool = False
    issued: set[int] = field(default_factory=set)  # indexes of the actions already issued


def tally(label: str) -> None:
    """Count an outcome for --hypothesis-show-statistics (outside Hypothesis, as in the fixed scenario, no-op)."""
    if currently_in_test_context():
        hypothesis.event(label)


def predict_amount(text: str, decimals: int) -> tuple[str | None, int]:
    """The model's parser, written independently from domain.money: (error code or None, minor units)."""
    if not AMOUNT_RE.fullmatch(text):
        return "amount_invalid", 0
    if len(text.partition(".")[2]) > decimals:
        return "amount_too_many_decimals", 0
    minor = Fraction(text) * 10**decimals
    if minor <= 0:
        return "amount_not_positive", 0
    if minor > MAX_AMOUNT_MINOR:
        return "amount_too_large", 0
    return None, int(minor)


def json_number(value: Any) -> Fraction | None:
    """What a rule reads from event data: a JSON number (exact), else nothing."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(value)


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory(prefix="ledger-props-")
        self.db = Database(Path(self.tmp.name) / "ledger.duckdb")
        orgs = {name: organizations.create_organization(self.db, f"org {name}").id for name in ("A", "B")}
        self.scopes = [Scope(orgs[org], env) for org, env in SCOPE_NAMES]
        self.assets: list[MAsset] = []
        self.customers: list[MCustomer] = []
        self.wallets: dict[str, MWallet] = {}
        self.programmes: list[MProgramme] = []
        self.events: list[MEvent] = []
        self.balances: dict[tuple[str, str], int] = {}
        self.counter = 0
        self.touched: set[int] = set()
        self.snapshots: list[dict[tuple[str, str], int]] = [{} for _ in self.scopes]

    def teardown(self) -> None:
        self.db.close()
        self.tmp.cleanup()

    # helpers ------------------------------------------------------------------------------------------------
    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def _expect(self, label: str, code: str | None, call: Callable[[], T], field: str | None = None) -> T | None:
        """Run `call`: it must succeed when the model predicts no error, else raise exactly `code`."""
        tally(f"{label}: {code or 'ok'}")  # shown by --hypothesis-show-statistics
        if code is None:
            return call()
        try:
            result = call()
        except ServiceError as error:
            assert error.code == code, f"expected {code}, got {error.code}: {error.message} {error.details}"
            if field is not None:
                assert error.details.get("field") == field, (field, error.details)
            return None
        raise AssertionError(f"expected {code}, but the operation succeeded: {result!r}")

    def _asset(self, pick: int) -> MAsset:
        return self.assets[pick % len(self.assets)]

    def _wallet_in(self, scope: int, pick: int, cross: bool, besides: MWallet | None = None) -> MWallet:
        """A wallet of `scope` (or, when `cross`, of another scope when there is one), other than `besides`
        when there is another one."""
        own = [w for w in self.wallets.values() if w.scope == scope and w is not besides]
        other = [w for w in self.wallets.values() if w.scope != scope and w is not besides]
        pool = (other or own) if cross else (own or other)
        return pool[pick % len(pool)] if pool else besides or next(iter(self.wallets.values()))

    def _holding(self, asset_pick: int, wallet_pick: int, cross: bool) -> tuple[MAsset, MWallet]:
        """An (asset, wallet) pair: mostly one where the wallet holds some of the asset, if there is one."""
        held = [key for key, minor in self.balances.items() if minor > 0]
        if held and asset_pick % 4:
            wallet_id, asset_id = held[wallet_pick % len(held)]
            asset = next(a for a in self.assets if a.id == asset_id)
            return asset, (self._wallet_in(asset.scope, wallet_pick, cross) if cross else self.wallets[wallet_id])
        asset = self._asset(asset_pick)
        return asset, self._wallet_in(asset.scope, wallet_pick, cross)

    def _customer_by_ref(self, scope: int, ref: str) -> MCustomer | None:
        for customer in self.customers:
            if customer.scope == scope and (customer.id == ref or customer.external_id == ref):
                return customer
        return None

    def _amount_text(self, spec: tuple[Any, ...], decimals: int, base_minor: int) -> str:
        if spec[0] == "rel":
            _, divisor, delta, extra_zero = spec
            text = format_amount(base_minor // divisor + delta, decimals)
            if extra_zero:
                text += "0" if "." in text else ".0"
            return text
        if spec[0] == "abs":
            _, integer, fraction, negative = spec
            return ("-" if negative else "") + str(integer) + ("." + fraction if fraction else "")
        return str(spec[1])

    def _asset_gate(self, asset: MAsset) -> str | None:
        if asset.status == "paused":
            return "asset_paused"
        if asset.status != "active":
            return "asset_not_active"
        return None

    def _usable(self, wallet: MWallet, scope: int) -> str | None:
        if wallet.scope != scope:
            return "wallet_not_found"
        if wallet.frozen:
            return "wallet_frozen"
        return None

    def _issue_refusal(self, asset: MAsset, wallet: MWallet, minor: int) -> str | None:
        refusal = self._asset_gate(asset) or self._usable(wallet, asset.scope)
        if refusal is None and asset.ceiling is not None and asset.outstanding + minor > asset.ceiling:
            refusal = "asset_supply_exhausted"
        return refusal

    def _move(self, wallet: str, asset: MAsset, minor: int) -> None:
        key = (wallet, asset.id)
        self.balances[key] = self.balances.get(key, 0) + minor
        assert self.balances[key] >= 0

    def _check_wallet_balances(self, *wallet_ids: str) -> None:
        """The service's balance read agrees with the model (zero balances may or may not be listed)."""
        for wallet_id in wallet_ids:
            wallet = self.wallets[wallet_id]
            read = ledger.wallet_balances(self.db, self.scopes[wallet.scope], wallet_id)
            got = {b.asset_id: b.balance for b in read.balances if Decimal(b.balance) != 0}
            want = {
                asset.id: format_amount(self.balances[(wallet_id, asset.id)], asset.decimals)
                for asset in self.assets
                if self.balances.get((wallet_id, asset.id), 0) != 0
            }
            assert got == want
            assert read.status == ("frozen" if wallet.frozen else "active")

    # customers and wallets ----------------------------------------------------------------------------------
    def _add_customer(self, scope: int, external_id: str | None = None) -> MCustomer:
        external_id = external_id or f"cust-{sum(1 for c in self.customers if c.scope == scope) + 1}"
        body = validate(rq.CustomerCreate, {"external_id": external_id})
        created = customers.create_customer(self.db, self.scopes[scope], body)
        customer = MCustomer(created.id, scope, external_id)
        self.customers.append(customer)
        return customer

    @initialize(
        setups=st.lists(
            st.tuples(
                st.integers(0, 4),
                st.sampled_from(SYMBOLS),
                st.one_of(st.none(), st.integers(1, 400)),
                st.sampled_from(POLICIES),
            ),
            min_size=len(SCOPE_NAMES),
            max_size=len(SCOPE_NAMES),
        ),
        first_ceiling=st.integers(1, 400),
        per_rate=st.booleans(),
        threshold=thresholds,
        bonus=st.integers(1, 300),
    )
    def start(
        self,
        setups: list[tuple[int, str, int | None, str]],
        first_ceiling: int,
        per_rate: bool,
        threshold: int | None,
        bonus: int,
    ) -> None:
        """Per scope an active asset, an open wallet holding some of it and a second wallet; one programme with
        two actions on the first scope's asset, whose ceiling is small, so that events exhaust it partway."""
        for scope, (decimals, symbol, ceiling, policy) in enumerate(setups):
            ceiling = first_ceiling if scope == 0 else ceiling
            self._create_asset(scope, decimals, symbol, ceiling, activate=True)
            self._create_wallet(scope, "open", existing=None)
            self._create_wallet(scope, policy, existing=None)
            self.issue(scope, 0, ("rel", 2, 0, False), cross_wallet=False, cross_asset=False)
        self.create_programme(0, per_rate, Decimal("1.25"), 7, threshold, bonus, new_version=False)

    @rule(
        scope=scope_indexes,
        policy=st.sampled_from(POLICIES),
        existing=st.one_of(st.none(), picks),
        customer_only=rarely,
    )
    def create_wallet(self, scope: int, policy: str, existing: int | None, customer_only: bool) -> None:
        """A wallet for a new or an existing customer; or (rarely) a customer without a wallet."""
        if customer_only:
            if len(self.customers) < MAX_CUSTOMERS:
                self.touched.add(scope)
                self._add_customer(scope)
            return
        self._create_wallet(scope, policy, existing)

    def _create_wallet(self, scope: int, policy: str, existing: int | None, owner: MCustomer | None = None) -> None:
        if len(self.wallets) >= MAX_WALLETS:
            return
        self.touched.add(scope)
        own = [c for c in self.customers if c.scope == scope]
        if owner is not None:
            customer = owner
        elif existing is not None and own:
            customer = own[existing % len(own)]
        elif len(self.customers) < MAX_CUSTOMERS:
            customer = self._add_customer(scope)
        else:
            return
        ref = customer.external_id if existing is not None and existing % 2 else customer.id
        body = validate(rq.WalletCreate, {"customer_id": ref, "type": "customer", "transfer_policy": policy})
        wallet = customers.create_wallet(self.db, self.scopes[scope], body)
        assert wallet.customer_id == customer.id
        assert wallet.status == "active" and wallet.transfer_policy.value == policy
        self.wallets[wallet.id] = MWallet(wallet.id, scope, customer.id, policy)
        customer.wallets.append(wallet.id)

    @rule(pick=picks, freeze=st.booleans(), cross=rarely)
    def freeze_or_unfreeze(self, pick: int, freeze: bool, cross: bool) -> None:
        self._set_frozen(list(self.wallets.values())[pick % len(self.wallets)], freeze, cross)

    def _set_frozen(self, wallet: MWallet, freeze: bool, cross: bool) -> None:
        scope = (wallet.scope + 1) % len(self.scopes) if cross else wallet.scope
        self.touched.add(scope)
        if cross:
            code: str | None = "wallet_not_found"
        elif wallet.frozen == freeze:
            code = "invalid_state_transition"
        else:
            code = None
        call = customers.freeze_wallet if freeze else customers.unfreeze_wallet
        result = self._expect(
            "freeze" if freeze else "unfreeze", code, lambda: call(self.db, self.scopes[scope], wallet.id)
        )
        if result is not None:
            wallet.frozen = freeze
            assert result.status == ("frozen" if freeze else "active")

    # assets -------------------------------------------------------------------------------------------------
    @rule(
        scope=scope_indexes,
        decimals=st.integers(0, 4),
        symbol=st.sampled_from(SYMBOLS),
        ceiling=st.one_of(st.none(), st.integers(1, 400)),
        activate=st.booleans(),
    )
    def create_asset(self, scope: int, decimals: int, symbol: str, ceiling: int | None, activate: bool) -> None:
        if len(self.assets) < MAX_ASSETS:
            self._create_asset(scope, decimals, symbol, ceiling, activate)

    def _create_asset(self, scope: int, decimals: int, symbol: str, ceiling: int | None, activate: bool) -> None:
        self.touched.add(scope)
        body = validate(
            rq.AssetCreate,
            {
                "name": f"{symbol} {decimals}",
                "symbol": symbol,
                "type": "points",
                "decimals": decimals,
                "supply_ceiling": None if ceiling is None else format_amount(ceiling, decimals),
            },
        )
        created = assets.create_asset(self.db, self.scopes[scope], body)
        assert created.status == "configured" and created.decimals == decimals
        assert created.outstanding_supply == format_amount(0, decimals)
        assert created.supply_ceiling == (None if ceiling is None else format_amount(ceiling, decimals))
        asset = MAsset(created.id, scope, symbol, decimals, ceiling)
        self.assets.append(asset)
        if activate:
            self._transition(asset, "activate", cross=False)

    def _transition(self, asset: MAsset, action: str, cross: bool) -> None:
        scope = (asset.scope + 1) % len(self.scopes) if cross else asset.scope
        self.touched.add(scope)
        allowed = {"activate": ("configured", "active"), "pause": ("active", "paused"), "resume": ("paused", "active")}
        source, target = allowed[action]
        code: str | None = None
        if cross:
            code = "asset_not_found"
        elif asset.status != source:
            code = "invalid_state_transition"
        elif action == "activate" and any(
            a.scope == asset.scope and a.symbol == asset.symbol and a.status in ("active", "paused") and a is not asset
            for a in self.assets
        ):
            code = "asset_symbol_taken"
        call = {"activate": assets.activate_asset, "pause": assets.pause_asset, "resume": assets.resume_asset}[action]
        result = self._expect(action, code, lambda: call(self.db, self.scopes[scope], asset.id))
        if result is not None:
            asset.status = target
            assert result.status == target

    @rule(pick=picks, action=st.sampled_from(["activate", "pause", "resume"]), cross=rarely)
    def transition_asset(self, pick: int, action: str, cross: bool) -> None:
        self._transition(self._asset(pick), action, cross)

    # direct ledger operations -------------------------------------------------------------------------------
    def _amount_checks(self, asset: MAsset, text: str, cross_asset: bool) -> tuple[str | None, str | None, int]:
        """(code, field, minor) for the checks every ledger write makes before it looks at wallets."""
        code, minor = predict_amount(text, asset.decimals)
        if code == "amount_invalid":  # refused by request validation, before the service runs
            return code, "amount", 0
        if cross_asset:
            return "asset_not_found", None, 0
        if code is not None:
            return code, "amount", 0
        return self._asset_gate(asset), None, minor

    @rule(asset_pick=picks, wallet_pick=picks, amount=amount_specs, cross_wallet=rarely, cross_asset=rarely)
    def issue(
        self, asset_pick: int, wallet_pick: int, amount: tuple[Any, ...], cross_wallet: bool, cross_asset: bool
    ) -> None:
        asset = self._asset(asset_pick)
        scope = (asset.scope + 1) % len(self.scopes) if cross_asset else asset.scope
        self.touched.add(scope)
        wallet = self._wallet_in(asset.scope, wallet_pick, cross_wallet)
        headroom = (asset.ceiling - asset.outstanding) if asset.ceiling is not None else 20 * 10**asset.decimals
        text = self._amount_text(amount, asset.decimals, headroom)
        code, field_name, minor = self._amount_checks(asset, text, cross_asset)
        if code is None:
            code = self._issue_refusal(asset, wallet, minor)

        def call() -> Any:
            body = validate(rq.IssueRequest, {"wallet_id": wallet.id, "amount": text, "reason": "grant"})
            return ledger.issue(self.db, self.scopes[scope], asset.id, body)

        result = self._expect("issue", code, call, field_name)
        if result is not None:
            assert result.kind == "issue" and result.wallet_id == wallet.id
            assert result.amount == format_amount(minor, asset.decimals)
            asset.issued += minor
            self._move(wallet.id, asset, minor)
            self._check_wallet_balances(wallet.id)

    @rule(asset_pick=picks, wallet_pick=picks, amount=amount_specs, cross_wallet=rarely, cross_asset=rarely)
    def redeem(
        self, asset_pick: int, wallet_pick: int, amount: tuple[Any, ...], cross_wallet: bool, cross_asset: bool
    ) -> None:
        asset, wallet = self._holding(asset_pick, wallet_pick, cross_wallet)
        self._redeem(asset, wallet, amount, cross_asset)

    def _redeem(self, asset: MAsset, wallet: MWallet, amount: tuple[Any, ...], cross_asset: bool) -> None:
        scope = (asset.scope + 1) % len(self.scopes) if cross_asset else asset.scope
        self.touched.add(scope)
        held = self.balances.get((wallet.id, asset.id), 0)
        text = self._amount_text(amount, asset.decimals, held)
        code, field_name, minor = self._amount_checks(asset, text, cross_asset)
        if code is None:
            code = self._usable(wallet, asset.scope)
        if code is None and held < minor:
            code = "insufficient_balance"

        def call() -> Any:
            body = validate(rq.RedemptionRequest, {"wallet_id": wallet.id, "amount": text, "reference": "order-1"})
            return ledger.redeem(self.db, self.scopes[scope], asset.id, body)

        result = self._expect("redeem", code, call, field_name)
        if result is not None:
            assert result.kind == "redemption" and result.wallet_id == wallet.id
            assert result.amount == format_amount(minor, asset.decimals)
            asset.redeemed += minor
            self._move(wallet.id, asset, -minor)
            self._check_wallet_balances(wallet.id)

    @rule(
        asset_pick=picks,
        from_pick=picks,
        to_pick=picks,
        amount=amount_specs,
        cross_from=rarely,
        cross_to=rarely,
        cross_asset=rarely,
        same=rarely,
    )
    def transfer(
        self,
        asset_pick: int,
        from_pick: int,
        to_pick: int,
        amount: tuple[Any, ...],
        cross_from: bool,
        cross_to: bool,
        cross_asset: bool,
        same: bool,
    ) -> None:
        asset, sender = self._holding(asset_pick, from_pick, cross_from)
        scope = (asset.scope + 1) % len(self.scopes) if cross_asset else asset.scope
        self.touched.add(scope)
        receiver = sender if same else self._wallet_in(asset.scope, to_pick, cross_to, besides=sender)
        held = self.balances.get((sender.id, asset.id), 0)
        text = self._amount_text(amount, asset.decimals, held)
        code, field_name, minor = self._amount_checks(asset, text, cross_asset)
        if code is None and sender.id == receiver.id:
            code, field_name = "transfer_same_wallet", "to_wallet_id"
        if code is None:
            for wallet, name in ((sender, "from_wallet_id"), (receiver, "to_wallet_id")):
                code = self._usable(wallet, asset.scope)
                if code is not None:
                    field_name = name if code == "wallet_not_found" else None
                    break
        if code is None and (sender.policy != "open" or receiver.policy == "closed"):
            code = "wallet_policy_violation"
        if code is None and held < minor:
            code = "insufficient_balance"

        def call() -> Any:
            body = validate(
                rq.TransferRequest,
                {"from_wallet_id": sender.id, "to_wallet_id": receiver.id, "amount": text, "reference": "gift"},
            )
            return ledger.transfer(self.db, self.scopes[scope], asset.id, body)

        result = self._expect("transfer", code, call, field_name)
        if result is not None:
            assert result.kind == "transfer"
            assert (result.from_wallet_id, result.to_wallet_id) == (sender.id, receiver.id)
            assert result.amount == format_amount(minor, asset.decimals)
            self._move(sender.id, asset, -minor)
            self._move(receiver.id, asset, minor)
            self._check_wallet_balances(sender.id, receiver.id)

    # programmes and events ----------------------------------------------------------------------------------
    def _rule_body(self, version: MVersion, decimals: int) -> dict[str, Any]:
        if version.rate is not None:
            amount: dict[str, Any] = {"per": "amount", "rate": version.rate}
        else:
            assert version.fixed_minor is not None
            amount = {"fixed": format_amount(version.fixed_minor, decimals)}
        actions = [{"type": "issue", "amount": amount}]
        if version.bonus_minor is not None:
            actions.append({"type": "issue", "amount": {"fixed": format_amount(version.bonus_minor, decimals)}})
        conditions = (
            [] if version.threshold is None else [{"field": "amount", "operator": "gte", "value": version.threshold}]
        )
        return {"conditions": conditions, "actions": actions}

    @rule(
        asset_pick=picks,
        per_rate=st.booleans(),
        rate=rate_values,
        fixed=st.integers(1, 300),
        threshold=thresholds,
        bonus=st.one_of(st.none(), st.integers(1, 300)),
        new_version=st.booleans(),
    )
    def create_programme(
        self,
        asset_pick: int,
        per_rate: bool,
        rate: Decimal,
        fixed: int,
        threshold: int | None,
        bonus: int | None,
        new_version: bool,
    ) -> None:
        """A programme with one published rule on an asset; or a new published version of an existing one."""
        if new_version and self.programmes:
            self._publish_new_version(asset_pick, per_rate, rate, fixed, threshold, bonus)
            return
        if len(self.programmes) >= MAX_PROGRAMMES:
            return
        asset = self._asset(asset_pick)
        scope = self.scopes[asset.scope]
        self.touched.add(asset.scope)
        version = MVersion(rate if per_rate else None, None if per_rate else fixed, threshold, bonus)
        event_type = f"order.p{self._next()}"
        programme = programmes.create_programme(
            self.db, scope, validate(rq.ProgrammeCreate, {"name": event_type, "asset_id": asset.id})
        )
        body = {"program_id": programme.id, "event_type": event_type, **self._rule_body(version, asset.decimals)}
        created = programmes.create_rule(self.db, scope, validate(rq.RuleCreate, body))
        published = programmes.publish(self.db, scope, programme.id)
        assert published.version.number == 1
        self.programmes.append(MProgramme(programme.id, created.id, asset.scope, asset.id, event_type, [version]))

    def _publish_new_version(
        self, pick: int, per_rate: bool, rate: Decimal, fixed: int, threshold: int | None, bonus: int | None
    ) -> None:
        programme = self.programmes[pick % len(self.programmes)]
        asset = next(a for a in self.assets if a.id == programme.asset)
        scope = self.scopes[programme.scope]
        self.touched.add(programme.scope)
        version = MVersion(rate if per_rate else None, None if per_rate else fixed, threshold, bonus)
        programmes.update_rule(
            self.db, scope, programme.rule_id, validate(rq.RuleUpdate, self._rule_body(version, asset.decimals))
        )
        published = programmes.publish(self.db, scope, programme.id)
        programme.versions.append(version)
        assert published.version.number == len(programme.versions)

    @rule(
        type_pick=picks,
        cross=rarely,
        customer_kind=st.sampled_from(["id", "id", "id", "external", "unknown", "other_scope"]),
        customer_pick=picks,
        value=event_values,
        then_process=st.booleans(),
        resubmit=st.one_of(st.none(), st.none(), st.sampled_from(["same", "renumbered", "different"])),
    )
    def submit_event(
        self,
        type_pick: int,
        cross: bool,
        customer_kind: str,
        customer_pick: int,
        value: Any,
        then_process: bool,
        resubmit: str | None,
    ) -> None:
        """An event of a programme's type, in the programme's scope (or, rarely, in another one, where no
        programme has that type), or of a type no programme has; or an event submitted again, as it was, with
        its numbers written differently, or with a different payload."""
        if resubmit is not None and self.events:
            self._resubmit_event(type_pick, resubmit)
            return
        if len(self.events) >= MAX_EVENTS:
            return
        if type_pick % 6 == 0 or not self.programmes:
            event_type, scope = NO_PROGRAMME_TYPE, type_pick % len(self.scopes)
        else:
            programme = self.programmes[type_pick % len(self.programmes)]
            event_type, scope = programme.event_type, programme.scope
            scope = (scope + 1) % len(self.scopes) if cross else scope
        self.touched.add(scope)
        own = [c for c in self.customers if c.scope == scope]
        other = [c for c in self.customers if c.scope != scope]
        if customer_kind == "id" and own:
            ref = own[customer_pick % len(own)].id
        elif customer_kind == "external" and own:
            ref = own[customer_pick % len(own)].external_id
        elif customer_kind == "other_scope" and other:
            ref = other[customer_pick % len(other)].id
        else:
            ref = "nobody"
        external_id = f"ext-{sum(1 for e in self.events if e.scope == scope) + 1}"  # the same ids in every scope
        data = {} if value is MISSING else {"amount": value}
        body = {"type": event_type, "external_event_id": external_id, "customer_id": ref, "data": data}
        event = event_intake.submit_event(self.db, self.scopes[scope], validate(rq.EventCreate, body))
        assert event.status == "received" and event.attempts == 0
        self.events.append(MEvent(event.id, scope, external_id, body))
        if then_process:
            self.process_pending()

    def _resubmit_event(self, pick: int, variant: str) -> None:
        event = self.events[pick % len(self.events)]
        self.touched.add(event.scope)
        body = {**event.body, "data": dict(event.body["data"])}
        value = body["data"].get("amount")
        if variant == "renumbered" and isinstance(value, int | Decimal) and not isinstance(value, bool):
            body["data"]["amount"] = Decimal(f"{Decimal(value):f}" + ("0" if "." in f"{Decimal(value):f}" else ".0"))
        elif variant == "different":
            body["data"]["note"] = "changed"
        code = "event_duplicate_mismatch" if variant == "different" else None
        call = lambda: event_intake.submit_event(self.db, self.scopes[event.scope], validate(rq.EventCreate, body))  # noqa: E731
        result = self._expect(f"resubmit {variant}", code, call, "external_event_id" if code else None)
        if result is not None:
            assert result.id == event.id
            assert (result.status, result.error.code if result.error else None) == (event.status, event.error)

    def _evaluate(self, event: MEvent) -> tuple[str, int, int]:
        """Process one event in the model: (outcome, issuances made, issuances the ledger refused).

        The actions of the matched rule issue in order, each attempted on its own; the first refusal names the
        event's failure; a replay attempts only the actions not issued yet, of the version first evaluated.
        """
        if not event.evaluated:
            event.evaluated = True
            for programme in self.programmes:
                if programme.scope == event.scope and programme.event_type == event.body["type"]:
                    event.version = (programme.id, len(programme.versions) - 1)
        event.attempts += 1
        event.status, event.error = "processed", None
        if event.version is None:
            return "nothing", 0, 0
        programme = next(p for p in self.programmes if p.id == event.version[0])
        version = programme.versions[event.version[1]]
        asset = next(a for a in self.assets if a.id == programme.asset)
        number = json_number(event.body["data"].get("amount"))
        if version.threshold is not None and (number is None or number < version.threshold):
            return "nothing", 0, 0
        if version.fixed_minor is not None:
            first = version.fixed_minor
        else:
            assert version.rate is not None
            first = 0 if number is None else int(number * Fraction(version.rate) * 10**asset.decimals)
        amounts = [first] + ([version.bonus_minor] if version.bonus_minor is not None else [])
        planned = [(index, minor) for index, minor in enumerate(amounts) if minor > 0 and index not in event.issued]
        if not planned:
            return "nothing", 0, 0
        customer = self._customer_by_ref(event.scope, event.body["customer_id"])
        if customer is None or not customer.wallets:
            event.status = "failed"
            event.error = "customer_not_found" if customer is None else "wallet_not_found"
            return "unresolved", 0, 0
        wallet = self.wallets[customer.wallets[0]]  # the first-created wallet receives rewards
        issued = refused = 0
        for index, minor in planned:
            if minor > MAX_AMOUNT_MINOR:
                refusal: str | None = "amount_too_large"
            else:
                refusal = self._issue_refusal(asset, wallet, minor)
            if refusal is not None:  # every issuance is attempted; the first refusal names the failure
                if event.error is None:
                    event.status, event.error = "failed", refusal
                refused += 1
                continue
            asset.issued += minor
            self._move(wallet.id, asset, minor)
            event.issued.add(index)
            issued += 1
        if not refused:
            return "issued", issued, 0
        return ("refused" if issued == 0 else "partly issued"), issued, refused

    def _check_event(self, event: MEvent, got: Any) -> None:
        assert got.id == event.id
        assert got.status == event.status, (got.status, got.error, event)
        assert (got.error.code if got.error else None) == event.error, (got.error, event)
        assert got.attempts == event.attempts

    @rule(then_replay=st.booleans(), pick=picks)
    def process_pending(self, then_replay: bool = False, pick: int = 0) -> None:
        """Process every received event (all scopes); then, maybe, fix the cause of a failure and replay it."""
        self.touched.update(range(len(self.scopes)))
        pending = [e for e in self.events if e.status == "received"]
        outcomes = [self._evaluate(e) for e in pending]
        for pending_event, (outcome, _, _) in zip(pending, outcomes, strict=True):
            tally(f"process: {outcome} {pending_event.error or ''}")
        report = event_processing.process_pending(self.db)
        assert report.processed == sum(e.status == "processed" for e in pending)
        assert report.failed == sum(e.status == "failed" for e in pending)
        assert report.issued == sum(issued for _, issued, _ in outcomes)
        assert report.refused == sum(refused for _, _, refused in outcomes)
        for event in pending:
            self._check_event(event, event_queries.get_event(self.db, self.scopes[event.scope], event.id))
        if then_replay:
            self.replay_event(pick, cross=False, any_event=False, fix_first=True)

    def _fix_cause(self, event: MEvent) -> None:
        """Remove what made `event` fail, through the service (each step predicted by the model as usual)."""
        assert event.version is not None  # an event fails only when its rule issues something
        programme = next(p for p in self.programmes if p.id == event.version[0])
        asset = next(a for a in self.assets if a.id == programme.asset)
        ref = event.body["customer_id"]
        customer = self._customer_by_ref(event.scope, ref)
        if event.error == "asset_paused":
            self._transition(asset, "resume", cross=False)
        elif event.error == "asset_not_active":
            self._transition(asset, "activate", cross=False)
        elif event.error == "wallet_frozen" and customer is not None:
            self._set_frozen(self.wallets[customer.wallets[0]], False, cross=False)
        elif event.error == "asset_supply_exhausted":
            holders = sorted((m, w) for (w, a), m in self.balances.items() if a == asset.id and m > 0)
            if holders:
                self._redeem(asset, self.wallets[holders[-1][1]], ("rel", 1, 0, False), cross_asset=False)
        elif event.error == "wallet_not_found" and customer is not None:
            self._create_wallet(event.scope, "open", None, owner=customer)
        elif (
            event.error == "customer_not_found"
            and customer is None  # another event's fix may have created it since this event failed
            and not ref.startswith("cus_")
            and len(self.customers) < MAX_CUSTOMERS
        ):
            self.touched.add(event.scope)
            self._add_customer(event.scope, external_id=ref)

    @rule(pick=picks, cross=rarely, any_event=rarely, fix_first=st.sampled_from([True, True, True, False]))
    def replay_event(self, pick: int, cross: bool, any_event: bool, fix_first: bool) -> None:
        """Replay a failed event (or, rarely, any event), often after removing the cause of its failure."""
        failed = [e for e in self.events if e.status == "failed"]
        if fix_first:  # an unknown customer can rarely be fixed: prefer the other failures
            failed = [e for e in failed if e.error != "customer_not_found"] or failed
        candidates = self.events if any_event else failed
        if not candidates:
            return
        event = candidates[pick % len(candidates)]
        if fix_first and event.status == "failed":
            self._fix_cause(event)
        scope = (event.scope + 1) % len(self.scopes) if cross else event.scope
        self.touched.add(scope)
        if cross:
            code: str | None = "event_not_found"
        elif event.status != "failed":
            code = "event_not_replayable"
        else:
            code = None
        result = self._expect(
            "replay", code, lambda: event_processing.replay_event(self.db, self.scopes[scope], event.id)
        )
        if result is not None:
            tally(f"replayed: {self._evaluate(event)[0]} {event.error or ''}")
            self._check_event(event, result)

    # invariants ---------------------------------------------------------------------------------------------
    @invariant()
    def the_ledger_holds(self) -> None:
        """One invariant, so that its checks run in this order (the last one resets the scopes touched).

        A step that called no service (a rule with nothing to act on) changed nothing, so it needs no check."""
        if not self.touched:
            return
        report = verify_ledger(self.db.reader())
        assert report.ok, report.problems
        self._rows_stay_in_their_scope()
        self._supply_matches_the_model_and_its_ceiling()
        self._balances_match_the_model_and_scopes_are_isolated()

    def _balances_match_the_model_and_scopes_are_isolated(self) -> None:
        rows = (
            self.db.reader()
            .execute("SELECT organization_id, environment, account_id, asset_id, balance_minor FROM balances")
            .fetchall()
        )
        by_scope: list[dict[tuple[str, str], int]] = [{} for _ in self.scopes]
        wallets: dict[tuple[str, str], int] = {}
        for org, env, account, asset, balance in rows:
            index = self.scopes.index(Scope(org, env))
            by_scope[index][(account, asset)] = int(balance)
            if account.startswith("wal_"):
                assert balance >= 0, (account, asset, balance)
                assert self.wallets[account].scope == index
                wallets[(account, asset)] = int(balance)
        assert {k: v for k, v in wallets.items() if v} == {k: v for k, v in self.balances.items() if v}
        for index, snapshot in enumerate(by_scope):
            if index not in self.touched:
                assert snapshot == self.snapshots[index], f"scope {index} moved by an operation elsewhere"
        self.snapshots = by_scope
        self.touched = set()

    def _rows_stay_in_their_scope(self) -> None:
        stray = (
            self.db.reader()
            .execute(
                """
            SELECT count(*) FROM entries e
            JOIN assets a ON a.id = e.asset_id
            LEFT JOIN wallets w ON w.id = e.account_id
            LEFT JOIN system_accounts s ON s.id = e.account_id
            WHERE a.organization_id <> e.organization_id OR a.environment <> e.environment
               OR coalesce(w.organization_id, s.organization_id) IS DISTINCT FROM e.organization_id
               OR coalesce(w.environment, s.environment) IS DISTINCT FROM e.environment
               OR (s.id IS NOT NULL AND s.asset_id <> e.asset_id)
            """
            )
            .fetchone()
        )
        assert stray == (0,)

    def _supply_matches_the_model_and_its_ceiling(self) -> None:
        """Through the service, for the assets of the scopes this step acted in; the others cannot have moved,
        as their scope's balances (system accounts included) are checked unchanged."""
        for asset in self.assets:
            if asset.scope not in self.touched:
                continue
            got = assets.get_asset(self.db, self.scopes[asset.scope], asset.id)
            assert got.status == asset.status
            assert got.issued == format_amount(asset.issued, asset.decimals)
            assert got.redeemed == format_amount(asset.redeemed, asset.decimals)
            assert got.outstanding_supply == format_amount(asset.outstanding, asset.decimals)
            if asset.ceiling is not None:
                assert asset.outstanding <= asset.ceiling
                assert got.supply_ceiling is not None
                assert Decimal(got.outstanding_supply) <= Decimal(got.supply_ceiling)


LedgerMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
TestLedgerProperties = LedgerMachine.TestCase


def test_replay_after_a_partial_issuance_issues_only_what_is_missing() -> None:
    """A fixed run of the machine through a path the random search reaches only now and then: the rule's first
    action issues and its second exhausts the ceiling (the event fails); once a redemption makes room, the replay
    issues the second action only."""
    machine = LedgerMachine()
    try:
        machine.start(
            setups=[(0, "STAR", None, "open")] * 3, first_ceiling=20, per_rate=False, threshold=None, bonus=15
        )
        machine.the_ledger_holds()  # the open wallet holds 10 of the ceiling of 20
        machine.submit_event(
            type_pick=1, cross=False, customer_kind="id", customer_pick=0, value=5, then_process=True, resubmit=None
        )
        machine.the_ledger_holds()
        event = machine.events[0]
        assert (event.status, event.error, event.issued) == ("failed", "asset_supply_exhausted", {0})
        machine.replay_event(0, cross=False, any_event=False, fix_first=True)  # redeems the 17 held, then replays
        machine.the_ledger_holds()
        assert (event.status, event.issued, machine.assets[0].outstanding) == ("processed", {0, 1}, 15)
    finally:
        machine.teardown()


# Per-rate rewards at the edges of what an event can carry ----------------------------------------------------
def _rate_one_programme(world: World) -> tuple[str, str]:
    """An active asset without decimals or ceiling, a programme issuing `amount x 1`, and a wallet: (asset, wallet)."""
    asset = world.asset(decimals=0)
    programme = world.programme(asset)
    world.rule(programme, amount={"per": "amount", "rate": Decimal(1)})
    programmes.publish(world.db, world.scope, programme.id)
    wallet = world.wallet(world.customer("edge"))
    return asset.id, wallet.id


def _submit(world: World, external_id: str, amount: Decimal) -> str:
    body = {
        "type": "order.completed",
        "external_event_id": external_id,
        "customer_id": "edge",
        "data": {"amount": amount},
    }
    return event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, body)).id


def _balance(world: World, wallet_id: str, asset_id: str) -> str | None:
    held = ledger.wallet_balances(world.db, world.scope, wallet_id).balances
    return next((b.balance for b in held if b.asset_id == asset_id), None)


@pytest.mark.parametrize("huge", [Decimal(10**18), Decimal(10**19)])
def test_a_reward_larger_than_the_ledger_can_hold_is_refused_as_amount_too_large(world: World, huge: Decimal) -> None:
    """A per-rate reward above MAX_AMOUNT_MINOR must be refused like a direct issue of it (`amount_too_large`),
    without disturbing the other events of its batch."""
    asset_id, wallet_id = _rate_one_programme(world)
    huge_id = _submit(world, "huge", huge)
    small_id = _submit(world, "small", Decimal(5))
    event_processing.process_pending(world.db)
    small = event_queries.get_event(world.db, world.scope, small_id)
    assert small.status == "processed"
    huge_event = event_queries.get_event(world.db, world.scope, huge_id)
    assert (huge_event.status, huge_event.error.code if huge_event.error else None) == ("failed", "amount_too_large")
    assert _balance(world, wallet_id, asset_id) == "5"


def test_a_per_rate_reward_of_a_long_json_number_is_exact(world: World) -> None:
    """0.999...9 (100 nines) x 1 rounds down to 0 at 0 decimals: nothing is issued (or the event is refused)."""
    asset_id, wallet_id = _rate_one_programme(world)
    try:
        event_id = _submit(world, "long", Decimal("0." + "9" * 100))
    except ServiceError as error:  # refusing such a number at the door would be a fix as good as exactness
        assert error.type.value == "validation_error"
        return
    event_processing.process_pending(world.db)
    assert event_queries.get_event(world.db, world.scope, event_id).status == "processed"
    assert _balance(world, wallet_id, asset_id) in (None, "0")
