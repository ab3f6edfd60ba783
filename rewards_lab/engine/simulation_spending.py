"""What caps, budgets and reversals would do to a simulated event, read from the store and written nowhere.

The simulation's rules say what each action calls for; this module says what the programme's spending settings
would make of it, with the worker's own code (`domain.limits.Allowance` through `LimitBook`, `Reverser`,
`domain.reversals.clawback_take`), in the worker's order (rules in the order they apply, actions in order), over
the counters and balances as they are now:

- caps and the budget are read only when the request names the customer (`customer_id`; a beneficiary action
  counts for its beneficiary): the counters are per customer, and a simulation without one explains the rules
  alone, as it always did;
- a reverse action whose original has been processed says what it would take back of each of the original's
  rewards from this programme, and what the wallets would give under the clawback policy; an original not known
  yet is `original_not_found` (a refund waits for it, then fails so).
Nothing is saved: the counters, the targets and the balances change in memory only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import count

from rewards_lab import presenters
from rewards_lab.contract import resources as r
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.limits import Cap, CapCheck, checks_for
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.processing_order import REFUND_WAIT
from rewards_lab.domain.reversals import ORIGINAL_NOT_FOUND, clawback_take
from rewards_lab.domain.rule_evaluation import ActionVerdict, RuleVerdict
from rewards_lab.domain.rules import RuleSpec
from rewards_lab.domain.schedule import epoch_us
from rewards_lab.engine.limit_book import LimitBook
from rewards_lab.engine.postings import asset_row
from rewards_lab.engine.reversals import Reverser, give_back_taken, reversal_record
from rewards_lab.store.interfaces import Repositories, StoredEvent, VersionRow

_WHOSE = {"rule": "the rule's", "programme": "the programme's", "budget": "the programme's"}


@dataclass(frozen=True, slots=True)
class SpendingChecks:
    """A version's spending settings as the worker checks them."""

    program_id: str
    timezone: str
    caps: tuple[Cap, ...]  # the programme's caps per customer, then its budget
    clawback: str
    rule_caps: dict[str, tuple[Cap, ...]]

    @property
    def any_caps(self) -> bool:
        return bool(self.caps) or any(self.rule_caps.values())


def spending_of(
    uow: Repositories, scope: Scope, version: VersionRow, asset_id: str, specs: Sequence[RuleSpec]
) -> SpendingChecks:
    """The version's programme-wide caps, budget and clawback (decoded by the store), and its rules' caps."""
    settings = version.spending
    caps: tuple[Cap, ...] = ()
    if settings.capped:
        caps = settings.caps(int(asset_row(uow, scope, asset_id).decimals))
    rule_caps = {spec.rule_id: spec.limits for spec in specs if spec.limits}
    return SpendingChecks(version.program_id, version.timezone, caps, settings.clawback, rule_caps)


@dataclass(frozen=True, slots=True)
class Effect:
    """What the spending settings make of one action: the amount it would issue, and why."""

    amount_minor: int
    requested_minor: int | None = None  # set when a cap or the budget cuts it
    cut: r.LimitCut | None = None
    limit_reason: str | None = None
    reversal: r.Reversal | None = None
    error_code: str | None = None
    reason_suffix: str = ""


Key = tuple[str, int]  # (rule id, action index)


def effects_of(
    uow: Repositories,
    scope: Scope,
    spending: SpendingChecks,
    verdicts: Sequence[RuleVerdict],
    customer: str | None,
    at: datetime,
) -> dict[Key, Effect]:
    """Per action of the matched rules, in the worker's order, what caps, budget and reversals make of it
    (`customer`: the customer_id the request names, an id or external id; None: caps are not read)."""
    actions = [(verdict.rule_id, action) for verdict in verdicts if verdict.matched for action in verdict.actions]
    if not actions or not (spending.any_caps or any(a.reversal is not None for _, a in actions)):
        return {}
    checks, unchecked = _checks(uow, scope, spending, actions, customer, epoch_us(at))
    names = sorted({a.reversal.original for _, a in actions if a.reversal is not None and a.error_code is None})
    originals = uow.events.get_by_external_ids(scope, names) if names else {}
    processed = {name: event for name, event in originals.items() if event.status != "received"}
    reverser = Reverser(uow, scope, processed) if processed else None
    keys: list[Sequence[str]] = [check.key for found in checks.values() for check in found]
    if reverser is not None:
        keys += list(reverser.usage_keys(sorted(processed)))
    book = LimitBook(uow, scope, keys) if keys else None
    refunder = None
    if customer is not None and reverser is not None:  # compared with the originals' customers, as resolved
        resolved = uow.customers.resolve_many(scope, [customer]).get(customer)
        refunder = resolved.id if resolved is not None else customer
    reversing = _Reversing(uow, scope, spending, originals, reverser, book, refunder)
    found: dict[Key, Effect] = {}
    for rule_id, action in actions:
        key = (rule_id, action.action_index)
        if action.reversal is not None and action.error_code is None:
            found[key] = reversing.effect(action)
        elif key in checks and book is not None:
            found[key] = _granted(book, action, checks[key])
        elif key in unchecked:
            found[key] = Effect(action.amount_minor, limit_reason=unchecked[key])
    return found


def _checks(
    uow: Repositories,
    scope: Scope,
    spending: SpendingChecks,
    actions: list[tuple[str, ActionVerdict]],
    customer: str | None,
    at_us: int,
) -> tuple[dict[Key, list[CapCheck]], dict[Key, str]]:
    """The caps each issuing action is checked against, or why they cannot be read."""
    capped = [
        (rule_id, a)
        for rule_id, a in actions
        if a.issues and a.error_code is None and (spending.caps or spending.rule_caps.get(rule_id))
    ]
    references = sorted({ref for _, a in capped if (ref := a.beneficiary or customer) is not None})
    known = uow.customers.resolve_many(scope, references) if references else {}
    checks: dict[Key, list[CapCheck]] = {}
    unchecked: dict[Key, str] = {}
    for rule_id, action in capped:
        key = (rule_id, action.action_index)
        reference = action.beneficiary or customer
        row = known.get(reference) if reference is not None else None
        if reference is None:
            unchecked[key] = "caps and budget not read: give customer_id to read the customer's counters"
        elif row is None:
            unchecked[key] = f"caps and budget not read: no customer '{reference}'"
        else:
            rule_caps = spending.rule_caps.get(rule_id, ())
            checks[key] = checks_for(
                spending.program_id, rule_id, row.id, at_us, spending.timezone, rule_caps, spending.caps
            )
    return checks, unchecked


def _granted(book: LimitBook, action: ActionVerdict, checks: list[CapCheck]) -> Effect:
    standing = "; ".join(_standing(check, book.allowance.used(check.key), action.decimals) for check in checks)
    grant = book.grant(action.amount_minor, checks)
    if grant.cut is None:
        return Effect(grant.amount_minor, limit_reason=f"within its caps: {standing}")
    cut = presenters.limit_cut(grant.cut, action.decimals)
    whose = f"{_WHOSE[cut.scope]} {cut.period} {'budget' if cut.scope == 'budget' else 'cap'}"
    if cut.max_count is not None and grant.amount_minor == 0:
        head = f"skipped: {whose} of {cut.max_count} rewards is reached"
    elif grant.amount_minor == 0:
        head = f"cut to nothing by {whose} of {cut.max_amount}"
    else:
        requested = format_amount(action.amount_minor, action.decimals)
        head = f"cut from {requested} to {format_amount(grant.amount_minor, action.decimals)} by {whose}"
    return Effect(grant.amount_minor, action.amount_minor, cut, f"{head}: {standing}")


def _standing(check: CapCheck, used: tuple[int, int], decimals: int) -> str:
    """One counter as it stands before the action: `the rule's day cap of 3 rewards: 1 given since 2026-03-10`."""
    cap = check.cap
    kind = "budget" if cap.scope == "budget" else "cap"
    since = "in all" if cap.period == "lifetime" else f"since {check.start.isoformat()}"
    if cap.max_count is not None:
        return f"{_WHOSE[cap.scope]} {cap.period} {kind} of {cap.max_count} rewards: {used[1]} given {since}"
    assert cap.max_amount_minor is not None
    maximum = format_amount(cap.max_amount_minor, decimals)
    left = format_amount(max(0, cap.max_amount_minor - used[0]), decimals)
    return f"{_WHOSE[cap.scope]} {cap.period} {kind} of {maximum}: {left} left {since}"


class _Reversing:
    """Reverse actions against the originals' rewards and the wallets' running balances, in memory."""

    def __init__(
        self,
        uow: Repositories,
        scope: Scope,
        spending: SpendingChecks,
        originals: dict[str, StoredEvent],
        reverser: Reverser | None,
        book: LimitBook | None,
        customer_id: str | None = None,
    ) -> None:
        self.uow, self.scope, self.spending = uow, scope, spending
        self.originals, self.reverser, self.book = originals, reverser, book
        self.customer_id = customer_id  # the refund's customer, resolved (None: not named, not compared)
        self.balances: dict[tuple[str, str], int] = {}
        self.loaded: set[str] = set()
        self.ids: Iterator[str] = (f"simulated_{n}" for n in count())

    def effect(self, action: ActionVerdict) -> Effect:
        call = action.reversal
        assert call is not None
        original = self.originals.get(call.original)
        if original is None:
            days = REFUND_WAIT.days
            message = (
                f"; no event has the external_event_id '{call.original}': a refund waits up to {days} days for its "
                f"original, then fails with {ORIGINAL_NOT_FOUND}"
            )
            return Effect(0, error_code=ORIGINAL_NOT_FOUND, reason_suffix=message)
        if original.status == "received" or self.reverser is None:
            message = f"; event '{call.original}' has not been processed yet: the refund would follow it"
            return Effect(0, reason_suffix=message)
        sp = self.spending
        plan = self.reverser.plan(
            call, sp.program_id, sp.clawback, "simulated", "simulated", self.ids, self.customer_id
        )
        if plan.error is not None:
            return Effect(0, error_code=plan.error.code, reason_suffix=f"; {plan.error.message}")
        taken = {}
        for item in plan.items:
            wallet = str(item.original.wallet_id)
            balance = self._balance(wallet, item.original.asset_id)
            give = clawback_take(item.target_minor, balance, sp.clawback)
            self.balances[(wallet, item.original.asset_id)] = balance - give
            taken[item.request.transaction_id] = give
        give_back_taken(self.uow, self.scope, [plan], taken, self.book)  # in memory: what the wallets would give
        record = reversal_record(plan, taken)
        untaken = tuple(replace(reward, transaction_id=None) for reward in record.rewards)  # nothing is posted
        reversal = presenters.reversal(replace(record, rewards=untaken), action.decimals)
        if not plan.items:
            suffix = f"; nothing of what event '{call.original}' received from this programme remains to take back"
        else:
            suffix = f"; it would take back {reversal.target} from {len(plan.items)} reward(s) of '{call.original}'"
            if plan.target_minor != sum(taken.values()):
                suffix += f", {reversal.shortfall} short (clawback {sp.clawback}: the wallets hold less)"
        return Effect(0, reversal=reversal, reason_suffix=suffix)

    def _balance(self, wallet_id: str, asset_id: str) -> int:
        if wallet_id not in self.loaded:
            self.loaded.add(wallet_id)
            for row in self.uow.ledger.wallet_balances(self.scope, wallet_id):
                self.balances.setdefault((wallet_id, row.asset_id), int(row.balance_minor))
        return self.balances.get((wallet_id, asset_id), 0)
