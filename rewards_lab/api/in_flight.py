"""Idempotency-Keys in flight: a second request with a key the first is still using is refused at once.

A keyed write's durable record (`service.writes.run_write`) is committed with the write itself, so two requests
with one key can never both apply: the second waits for the single writer and then reads the first's answer. What
that does not give is an answer *while* the first is still running (its body still arriving, or waiting for the
writer): the second would wait with it, holding a connection, and could not tell a retry in progress from a
duplicate. Here the handler claims `(organization, environment, key)` as soon as the request is authorised, before
it reads the body, and a second request that finds the claim answers `idempotency_request_in_progress` (409):
retry later, and the retry gets the first request's result (or `idempotency_key_reused` for another body).

The claims live in this process's memory only, never in the database: one process serves a database file, a
claim is released when its request ends however it ends (answer, error, cancellation: `finally`), and a crashed
process leaves none behind. A key can therefore never stay "in progress": at worst (a handler cancelled while its
write still runs in a thread) the claim is dropped early, and the next request waits for the writer as before.

On a PostgreSQL database several processes serve, these claims still answer a duplicate within one process before
its body is read; a duplicate in another process is answered the same 409 by `service.writes.run_write`, whose
unit of work takes the key's transaction advisory lock before reading it (released by the commit or rollback, so
a killed process leaves no claim behind either).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store

Claim = tuple[str, str, str]  # organization, environment, key

_claims: weakref.WeakKeyDictionary[Store, set[Claim]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@contextmanager
def holding(database: Store, scope: Scope, key: str | None) -> Iterator[None]:
    """Hold `key` for the length of the block; `idempotency_request_in_progress` if another request holds it."""
    if key is None:
        yield
        return
    claim: Claim = (scope.organization_id, scope.environment, key)
    with _lock:
        held = _claims.setdefault(database, set())
        if claim in held:
            raise ServiceError(
                "idempotency_request_in_progress",
                "a request with this Idempotency-Key is still in progress; retry it later",
                field="Idempotency-Key",
            )
        held.add(claim)
    try:
        yield
    finally:
        with _lock:
            held.discard(claim)


def in_flight(database: Store) -> int:
    """How many keys are held now (tests and diagnostics)."""
    with _lock:
        return len(_claims.get(database, ()))
