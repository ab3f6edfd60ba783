"""Access rows on both stores: API keys (by hash across tenants, revoked, paged both ways), console accounts and
their TOTP step, sessions (expiry to the microsecond, revoked)."""

from __future__ import annotations

from datetime import datetime

from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store


def test_api_keys_are_found_by_hash_revoked_and_paged(store: Store, scope: Scope) -> None:
    other = Scope(scope.organization_id, "production")
    with store.unit_of_work() as uow:
        keys = [
            uow.api_keys.add(scope, new_id("api_key"), f"key {n}", f"rl_{n}", f"hash-{n}", ["events:write"], None)
            for n in range(5)
        ]
        uow.api_keys.add(other, new_id("api_key"), "live", "rl_live", "hash-live", [], "acc_1")
        uow.api_keys.revoke(scope, keys[1].id)
    reader = store.reader_repositories()
    found = reader.api_keys.by_hash("hash-live")
    assert found is not None and (found.environment, found.created_by) == ("production", "acc_1")
    assert reader.api_keys.by_hash("HASH-LIVE") is None
    revoked = reader.api_keys.get(scope, keys[1].id)
    assert revoked is not None and revoked.revoked_at is not None and revoked.revoked_at.tzinfo is None
    assert reader.api_keys.get(other, keys[0].id) is None
    listed = {
        status: [k.id for k in reader.api_keys.page(scope, PageRequest(limit=100), "created_at", status).rows]
        for status in (None, "active", "revoked")
    }
    assert sorted(listed[None]) == sorted(k.id for k in keys) and listed["revoked"] == [keys[1].id]
    assert sorted(listed["active"]) == sorted(k.id for k in keys if k.id != keys[1].id)
    for direction in ("asc", "desc"):
        seen, cursor = [], None
        while True:
            request = PageRequest(limit=2, cursor=cursor, direction=direction)  # type: ignore[arg-type]
            page = reader.api_keys.page(scope, request, "created_at", None)
            seen += [k.id for k in page.rows]
            if not page.has_more:
                break
            cursor = page.next_cursor
        assert seen == (listed[None] if direction == "asc" else listed[None][::-1])


def test_accounts_and_sessions(store: Store, scope: Scope) -> None:
    account_id, session_id = new_id("user"), new_id("session")
    expires = datetime(2030, 6, 30, 23, 59, 59, 123_456)
    with store.unit_of_work() as uow:
        account = uow.accounts.add(account_id, scope.organization_id, "Ops@Example.com", "admin", ["*"], "ph", None)
        uow.sessions.add(session_id, account_id, scope.organization_id, "token-hash", expires)
        uow.accounts.use_totp_step(account_id, 2**40)
    reader = store.reader_repositories()
    assert reader.accounts.by_email("Ops@Example.com") == reader.accounts.get(account_id)
    stored = reader.accounts.get(account_id)
    assert stored is not None and stored.totp_last_step == 2**40 and stored.created_at == account.created_at
    session = reader.sessions.by_hash("token-hash")
    assert session is not None and (session.id, session.expires_at, session.revoked_at) == (session_id, expires, None)
    with store.unit_of_work() as uow:
        uow.sessions.revoke(session_id)
    revoked = store.reader_repositories().sessions.get(session_id)
    assert revoked is not None and revoked.revoked_at is not None
    assert store.reader_repositories().sessions.by_hash("other") is None
