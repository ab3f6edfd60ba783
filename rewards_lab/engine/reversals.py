"""Reversals in the event worker: what a refund's reverse action takes back, reward by reward of its original
(`domain.reversals` holds the arithmetic; the clawback itself is decided by the posting policy, in order, with
the wallet's running balance).

A reverse action of programme P takes back from the rewards its original event received from P (any version,
any rule, any beneficiary): for each, a target (all that remains, or a fraction of the reward rounded down,
never more than remains), posted as a `reversal_<clawback>` request from the reward's wallet to the issuance
account. The target counts as reversed at once (a later refund takes only what remains); what the wallet gave, once
posted, is given back to the caps and budget the reward counted in (`give_back_taken`): a reward spent before its
refund keeps counting, and it stops counting (reward_count) only once all of it has been taken back.

Only a refund by the original event's customer takes back (the two events' customers compared as resolved: an id
or an external id naming the same customer is the same): one by another customer fails its action with
`original_customer_mismatch` and takes nothing, unless the action says `any_customer` (marketplaces). The
reversal's execution belongs to the original event's customer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.conditions import NO_FACTS
from rewards_lab.domain.limits import CounterKey
from rewards_lab.domain.posting_policy import REVERSAL_KIND_OF, PostingRequest
from rewards_lab.domain.records import ReversalRecord, RewardTaken
from rewards_lab.domain.reversals import (
    CUSTOMER_MISMATCH,
    ORIGINAL_NOT_FOUND,
    all_taken_back,
    fraction_of,
    refusal,
    reversal_target,
)
from rewards_lab.domain.rules import FRACTION_INVALID, ReversalCall, number_of, read
from rewards_lab.engine.limit_book import LimitBook
from rewards_lab.store.interfaces import Repositories, StoredEvent, StoredExecution


@dataclass(frozen=True, slots=True)
class ReversalItem:
    """One reward being taken back: the original execution, its target and the posting request."""

    original: StoredExecution
    target_minor: int
    request: PostingRequest
    given_back: bool = False  # its counters got the target back when planned (the wallet surely gives it all)


@dataclass(slots=True)
class ReversalPlan:
    """What one reverse action does: its original (None when unknown), the fraction it applies, its items, or the
    error that fails it."""

    reference: str
    original: StoredEvent | None
    clawback: str
    customer_id: str | None = None  # the original event's customer (resolved), whose reversal this is
    fraction: Decimal | None = None
    items: list[ReversalItem] = field(default_factory=list)
    error: ServiceError | None = None

    @property
    def target_minor(self) -> int:
        return sum(item.target_minor for item in self.items)


class Reverser:
    """The reversals of one segment of a batch: the originals' rewards read once, what this segment has already
    targeted remembered, the targets counted on the original executions when saved."""

    def __init__(self, uow: Repositories, scope: Scope, originals: dict[str, StoredEvent]) -> None:
        self.uow, self.scope, self.originals = uow, scope, originals
        ids = sorted(event.id for event in originals.values())
        rows = uow.executions.for_events(scope, ids) if ids else []
        self.rewards: dict[str, list[StoredExecution]] = defaultdict(list)
        for row in rows:  # the original's issued rewards, in the order they were made (ids are time-ordered)
            if row.status == "issued" and row.reversal is None and int(row.amount_minor) > 0:
                self.rewards[row.event_id].append(row)
        self.targeted: dict[str, int] = defaultdict(int)  # execution id -> targeted in this segment
        self.taken_back: dict[str, int] = defaultdict(int)  # execution id -> given back to its counters when planned
        self.waiting: set[str] = set()  # rewards with a reversal whose give-back waits for its posting
        self.held: dict[tuple[str, str], int] | None = None  # (wallet, asset) -> balance before the batch's postings
        self.claimed: dict[tuple[str, str], int] = defaultdict(int)  # (wallet, asset) -> targets planned from it
        named = sorted({event.customer_id for event in originals.values()})
        found = uow.customers.resolve_many(scope, named) if named else {}
        self.owners = {  # external id -> the original event's customer: its id, else the reference as given
            reference: found[event.customer_id].id if event.customer_id in found else event.customer_id
            for reference, event in originals.items()
        }

    def usage_keys(self, references: list[str]) -> Iterator[CounterKey]:
        """The cap and budget counters the rewards of these originals counted in (to give back to)."""
        for reference in references:
            original = self.originals.get(reference)
            for row in self.rewards.get(original.id, []) if original is not None else []:
                yield from row.usage_keys

    def plan(
        self,
        call: ReversalCall,
        program_id: str,
        clawback: str,
        execution_id: str,
        memo: str,
        transaction_ids: Iterator[str],
        customer_id: str | None,
        limits: LimitBook | None = None,
    ) -> ReversalPlan:
        """What a reverse action takes back (`customer_id`: the refund's customer, resolved; None: not known, as
        in a simulation without one, and not compared). With `limits`, a reward whose wallet surely gives the
        whole target (`_surely_whole`) gives it back to those counters at once; the others wait for the posting
        (`give_back_taken`)."""
        original = self.originals.get(call.original)
        plan = ReversalPlan(call.original, original, clawback, self.owners.get(call.original))
        same_customer = customer_id is None or call.any_customer or plan.customer_id == customer_id
        code = refusal(original is not None, same_customer)
        if code == ORIGINAL_NOT_FOUND:
            message = f"no event has the external_event_id '{call.original}' named as the original"
            plan.error = ServiceError(code, message)
            return plan
        if code == CUSTOMER_MISMATCH:
            message = (
                f"the refund's customer '{customer_id}' is not the customer of event '{call.original}': nothing is "
                "taken back (a rule takes back other customers' rewards only with any_customer)"
            )
            plan.error = ServiceError(code, message)
            return plan
        assert original is not None
        try:
            denominator = None if call.of is None else number_of(read(original.data_value(), call.of, NO_FACTS))
            plan.fraction = fraction_of(call, denominator)
        except ValueError as error:
            plan.error = ServiceError(FRACTION_INVALID, str(error))
            return plan
        for reward in self.rewards.get(original.id, []):
            if reward.program_id != program_id:
                continue
            issued = int(reward.amount_minor)
            done = int(reward.reversed_minor) + self.targeted[reward.id]
            target = reversal_target(issued, done, plan.fraction)
            if target <= 0 or reward.wallet_id is None:
                continue
            self.targeted[reward.id] += target
            claimed = self.claimed[(reward.wallet_id, reward.asset_id)]
            self.claimed[(reward.wallet_id, reward.asset_id)] = claimed + target
            given = (
                limits is not None and bool(reward.usage_keys) and self._surely_whole(reward, target, claimed, clawback)
            )
            if given and limits is not None:
                self.taken_back[reward.id] += target
                whole = all_taken_back(int(reward.taken_back_minor or 0) + self.taken_back[reward.id], issued)
                limits.give_back(reward.usage_keys, target, whole=whole)
            elif reward.usage_keys:
                self.waiting.add(reward.id)
            request = PostingRequest(
                next(transaction_ids),
                REVERSAL_KIND_OF[clawback],
                reward.asset_id,
                target,
                reward.wallet_id,
                memo=f"{memo}: reversal of {reward.transaction_id}",
                execution_id=execution_id,
            )
            plan.items.append(ReversalItem(reward, target, request, given))
        return plan

    def _surely_whole(self, reward: StoredExecution, target: int, claimed: int, clawback: str) -> bool:
        """Whether the wallet will give the whole target, whatever the ledger decides before it in this segment:
        the `negative` clawback always does; otherwise when what the wallet held before the segment's postings,
        less the targets already planned from it here (`claimed`), covers it (rewards posted to it here may be
        refused, so they are not counted; nothing else takes from a wallet in the worker's transaction). A
        reward with a reversal waiting for its posting waits too (it stops counting once all of it is back)."""
        if reward.id in self.waiting:
            return False
        if clawback == "negative":
            return True
        if self.held is None:
            wallets = sorted({str(row.wallet_id) for rows in self.rewards.values() for row in rows if row.wallet_id})
            self.held = self.uow.ledger.balances_of(self.scope, wallets)
        return self.held.get((str(reward.wallet_id), reward.asset_id), 0) - claimed >= target

    def save(self) -> None:
        self.uow.executions.add_reversed(self.scope, {k: v for k, v in self.targeted.items() if v})

    def given_keys(self, plan: ReversalPlan) -> Iterator[CounterKey]:
        """The counters a plan's rewards counted in that get their share only once posted (`give_back_taken`)."""
        for item in plan.items:
            if item.given_back:
                continue
            yield from item.original.usage_keys


def give_back_taken(
    uow: Repositories, scope: Scope, plans: list[ReversalPlan], taken: dict[str, int], limits: LimitBook | None = None
) -> None:
    """Give back to the caps and budget what the wallets gave (`taken`: transaction id -> minor units), in order:
    an amount counter gets back what was taken; a reward stops counting (its count given back) once all of it has
    been taken back, over all its reversals (items given back when planned are only recorded). Records what was
    taken back of each reward. `limits`: the counters to give to (a simulation's, kept in memory); None: loaded
    from the store and saved."""
    given: list[tuple[ReversalItem, int]] = [
        (item, taken.get(item.request.transaction_id, 0)) for plan in plans for item in plan.items
    ]
    given = [(item, amount) for item, amount in given if amount > 0]
    if not given:
        return
    book = limits
    if book is None:
        keys = [key for item, _ in given if not item.given_back for key in item.original.usage_keys]
        book = LimitBook(uow, scope, keys) if keys else None
    so_far: dict[str, int] = defaultdict(int)  # execution id -> taken back here
    for item, amount in given:
        reward = item.original
        so_far[reward.id] += amount
        whole = all_taken_back(int(reward.taken_back_minor or 0) + so_far[reward.id], int(reward.amount_minor))
        if book is not None and reward.usage_keys and not item.given_back:
            book.give_back(reward.usage_keys, amount, whole=whole)
    if limits is None:
        if book is not None:
            book.save()
        uow.executions.add_taken_back(scope, dict(so_far))


def reversal_record(plan: ReversalPlan, taken: dict[str, int]) -> ReversalRecord:
    """A reverse action's detail as its execution records it (minor units; `taken`: transaction id -> what the
    wallet gave)."""
    return ReversalRecord(
        plan.original.id if plan.original else None,
        plan.reference,
        plan.fraction,
        plan.clawback,
        tuple(
            RewardTaken(
                item.original.id,
                item.original.transaction_id,
                item.original.customer_id,
                item.original.wallet_id,
                item.target_minor,
                taken.get(item.request.transaction_id, 0),
                item.request.transaction_id if taken.get(item.request.transaction_id) else None,
            )
            for item in plan.items
        ),
    )
