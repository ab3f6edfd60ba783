"""Running a write: one unit of work, optionally bound to an Idempotency-Key.

The key, the hash of the request and the result are stored in the same database transaction as the write, so
a crash can never leave a write without its key or a key without its write. The same key and request return
the stored result (the write is not run again); the same key with another request is `idempotency_key_reused`.

Before reading the key, the unit of work holds it (`IdempotencyStore.hold`): on a store several processes serve,
a request whose key another process is still writing is answered `idempotency_request_in_progress` at once, as
`api.in_flight` answers it within one process. Held before the read, it also keeps two units of work from both
finding the key absent and both writing; the stored key, committed with the write, is what a retry replays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store, unit_of_work
from rewards_lab.store.interfaces import Repositories, WriteConflict

ResultT = TypeVar("ResultT", bound=BaseModel)
MAX_IDEMPOTENCY_KEY_LENGTH = 255


def request_hash(operation: str, request: Any) -> str:
    if isinstance(request, BaseModel):
        request = request.model_dump(mode="json")
    return jsonutil.canonical_hash({"operation": operation, "request": request})


def run_write(
    database: Store,
    scope: Scope,
    operation: str,
    request: Any,
    write: Callable[[Repositories], ResultT],
    result_type: type[ResultT],
    *,
    idempotency_key: str | None = None,
    status_code: int = 200,
) -> ResultT:
    """Run `write` in one unit of work; with a key, at most once per (scope, key). A unit of work the database
    cancelled because it waited in a cycle with another process's (`WriteConflict`, PostgreSQL) wrote nothing, and
    runs once more."""
    if idempotency_key is not None and not 0 < len(idempotency_key) <= MAX_IDEMPOTENCY_KEY_LENGTH:
        raise ServiceError("idempotency_key_invalid", field="Idempotency-Key")
    arguments = (database, scope, operation, request, write, result_type, idempotency_key, status_code)
    try:
        return _run_once(*arguments)
    except WriteConflict:
        return _run_once(*arguments)  # once more (plan 5.2); a second conflict reaches the caller


def _run_once(
    database: Store,
    scope: Scope,
    operation: str,
    request: Any,
    write: Callable[[Repositories], ResultT],
    result_type: type[ResultT],
    idempotency_key: str | None,
    status_code: int,
) -> ResultT:
    with unit_of_work(database) as uow:
        if idempotency_key is None:
            return write(uow)
        if not uow.idempotency.hold(scope, idempotency_key):
            raise ServiceError(
                "idempotency_request_in_progress",
                "a request with this Idempotency-Key is still in progress; retry it later",
                field="Idempotency-Key",
            )
        fingerprint = request_hash(operation, request)
        stored = uow.idempotency.get(scope, idempotency_key)
        if stored is not None:
            if stored.request_hash != fingerprint or stored.operation != operation:
                raise ServiceError(
                    "idempotency_key_reused",
                    "this Idempotency-Key was used with a different request",
                    field="Idempotency-Key",
                    original_operation=stored.operation,
                )
            return result_type.model_validate(stored.response_value())
        result = write(uow)
        # Written as the envelope writes it (`api.envelope`): exact numbers in free-form fields (a customer's
        # attributes) stay numbers, digit for digit, where pydantic's JSON would make them strings.
        response = jsonutil.dumps(result.model_dump(mode="python"))
        uow.idempotency.add(scope, idempotency_key, operation, fingerprint, response, status_code)
        return result
