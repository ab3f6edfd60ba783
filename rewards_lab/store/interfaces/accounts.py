"""The accounts repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from rewards_lab.store.queries import Row


class AccountStore(Protocol):
    """What the services need of the account rows (DuckDB: store.accounts.AccountRepository)."""

    def add(
        self,
        account_id: str,
        organization_id: str,
        email: str,
        role: str,
        permissions: list[str],
        password_hash: str,
        totp_secret: str | None,
    ) -> Row: ...

    def get(self, account_id: str) -> Row | None: ...

    def by_email(self, email: str) -> Row | None: ...

    def unsealed_totp_secrets(self) -> list[tuple[str, str]]: ...

    def set_totp_secret(self, account_id: str, sealed: str) -> None: ...

    def use_totp_step(self, account_id: str, step: int) -> None: ...


class SessionStore(Protocol):
    """What the services need of the session rows (DuckDB: store.accounts.SessionRepository)."""

    def add(
        self, session_id: str, account_id: str, organization_id: str, token_hash: str, expires_at: datetime
    ) -> Row: ...

    def get(self, session_id: str) -> Row | None: ...

    def by_hash(self, token_hash: str) -> Row | None: ...

    def revoke(self, session_id: str) -> None: ...
