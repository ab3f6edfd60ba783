"""A draft's rules measured and presented before a write takes the lock (issue 27; docs/decisions.md, "Rate limits and
tenant fairness").

Adding or editing a rule checks the size of the draft's rules, and publishing presents them in its answer: work
that grows with the rules. It is done here on a snapshot, before the write lock is taken; inside the unit of
work, `read_again` reads only the rules' digests (the database hashes their rows, so the writer reads no
bodies), and a rule added or changed meanwhile is read and measured there. What decides the write is therefore
what the rows hold at the write. Measures and presented rules are remembered per digest in small bounded memos:
a new draft starts as a copy of the published version (same ids, same rows), so publishing again, or adding a
rule to a large draft, measures only what is new.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

from rewards_lab import presenters
from rewards_lab.contract import resources as r
from rewards_lab.contract.programme_limits import MAX_RULES_PER_VERSION, check_version_rules, rule_definition_bytes
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store, snapshot
from rewards_lab.store.interfaces import Repositories, RuleBody, RuleRow

Digest = tuple[str, str]  # (rule id, the database's digest of its row: `ProgrammeRepository.rule_digests`)
MemoKey = tuple[Scope, Digest]
MAX_MEASURES = 100_000  # remembered sizes (a few dozen bytes each)
MAX_PRESENTED_BYTES = 64 * 1_048_576  # remembered presented rules, by their definitions' size, times 4
ValueT = TypeVar("ValueT")


class _Memo(Generic[ValueT]):
    """A thread-safe LRU bounded by a total weight."""

    def __init__(self, max_weight: int) -> None:
        self.max_weight, self.weight = max_weight, 0
        self._items: OrderedDict[MemoKey, tuple[ValueT, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: MemoKey) -> ValueT | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: MemoKey, value: ValueT, weight: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            self.weight += weight - (0 if old is None else old[1])
            self._items[key] = (value, weight)
            while self.weight > self.max_weight and len(self._items) > 1:
                self.weight -= self._items.popitem(last=False)[1][1]


_MEASURED: _Memo[int] = _Memo(MAX_MEASURES)
_PRESENTED: _Memo[r.Rule] = _Memo(MAX_PRESENTED_BYTES)


def row_bytes(row: RuleRow) -> int:
    """A stored rule's size against the version's limit (`contract.programme_limits.rule_definition_bytes`)."""
    limits = [limit.as_json() for limit in row.limits]
    return rule_definition_bytes(row.event_type, row.condition_items(), row.action_items(), limits)


def stored_bytes(body: RuleBody) -> int:
    """The size of a rule as written, as `row_bytes` measures it once stored."""
    limits = [limit.as_json() for limit in body.limits]
    return rule_definition_bytes(body.event_type, body.conditions, body.actions, limits)


class PreparedDraft:
    """A draft's rules, measured (and presented, for publishing) on a snapshot before the write lock."""

    def __init__(self, scope: Scope, *, present: bool = False) -> None:
        self.scope, self.present = scope, present
        self.sizes: dict[Digest, int] = {}
        self.presented: dict[Digest, r.Rule] = {}
        self.count: int | None = None  # the draft's rules on the snapshot (None: no such programme)

    @classmethod
    def of(cls, database: Store, scope: Scope, program_id: str, *, present: bool = False) -> PreparedDraft:
        prepared = cls(scope, present=present)
        with snapshot(database) as uow:
            programme = uow.programmes.get(scope, program_id)
            if programme is None:  # refused inside the unit of work, by the same read
                return prepared
            digests = uow.programmes.rule_digests(scope, programme.draft_version_id)
            prepared.count = len(digests)
            if len(digests) >= MAX_RULES_PER_VERSION + (0 if present else 1):
                return prepared  # refused on the count inside, before any size is needed
            prepared._add(uow, programme.draft_version_id, digests)
        return prepared

    def _add(self, uow: Repositories, version_id: str, digests: list[Digest]) -> None:
        missing = []
        for digest in digests:
            size, rule = _MEASURED.get((self.scope, digest)), _PRESENTED.get((self.scope, digest))
            if size is not None:
                self.sizes[digest] = size
            if rule is not None:
                self.presented[digest] = rule
            if size is None or (self.present and rule is None):
                missing.append(digest)
        if not missing:
            return
        rows = {row.id: row for row in uow.programmes.rules_of(self.scope, [version_id])}
        for digest in missing:
            row = rows.get(digest[0])
            if row is None:
                continue  # gone since the digests were read: read_again finds the rows as they are
            size = self.sizes[digest] = row_bytes(row)
            _MEASURED.put((self.scope, digest), size, 1)
            if self.present:
                self.presented[digest] = presenters.rule(row)
                _PRESENTED.put((self.scope, digest), self.presented[digest], size * 4)

    def read_again(self, uow: Repositories, scope: Scope, version_id: str) -> list[Digest]:
        """The version's rules as they stand inside the unit of work (their digests)."""
        return uow.programmes.rule_digests(scope, version_id)

    def total(self, uow: Repositories, scope: Scope, version_id: str, digests: list[Digest]) -> int:
        """The size of these rules (read again inside the unit of work); rules not measured before are read and
        measured now."""
        if any(digest not in self.sizes or (self.present and digest not in self.presented) for digest in digests):
            self._add(uow, version_id, digests)
        return sum(self.sizes[digest] for digest in digests)

    def rule(self, digest: Digest, number: int) -> r.Rule:
        """The rule as published as version `number`."""
        return self.presented[digest].model_copy(update={"version": number})


def refuse_early(prepared: PreparedDraft, idempotency_key: str | None) -> None:
    """A draft already at the count limit on the snapshot refuses one more rule before the write lock is taken
    (the request is answered as of the snapshot). Not with an Idempotency-Key: a key stored when the draft had
    room must still return its original result, which only the unit of work reads."""
    if prepared.count is not None and idempotency_key is None:
        check_version_rules(prepared.count + 1, 0, "rules")


def check_draft(
    uow: Repositories, scope: Scope, draft_id: str, prepared: PreparedDraft, *, without: str = "", adding: int = 0
) -> None:
    """The draft's rules as they stand in this unit of work, with a rule of `adding` bytes in place of the rule
    `without` (or added), must stay within the version's limits (the count first: it needs no measure)."""
    digests = [digest for digest in prepared.read_again(uow, scope, draft_id) if digest[0] != without]
    check_version_rules(len(digests) + 1, 0, "rules")
    check_version_rules(len(digests) + 1, prepared.total(uow, scope, draft_id, digests) + adding, "rules")
