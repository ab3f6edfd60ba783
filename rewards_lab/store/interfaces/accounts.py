"""The accounts repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class AccountRow:
    """One row of `accounts` (`permissions`: a JSON list; `totp_secret`: sealed, or None without a second factor)."""

    id: str
    organization_id: str
    email: str
    role: str
    permissions: str
    password_hash: str
    totp_secret: str | None
    totp_last_step: int | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One row of `sessions`: only the hash of the session token is stored."""

    id: str
    account_id: str
    organization_id: str
    token_hash: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None


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
    ) -> AccountRow: ...

    def get(self, account_id: str) -> AccountRow | None: ...

    def by_email(self, email: str) -> AccountRow | None: ...

    def unsealed_totp_secrets(self) -> list[tuple[str, str]]: ...

    def set_totp_secret(self, account_id: str, sealed: str) -> None: ...

    def use_totp_step(self, account_id: str, step: int) -> None: ...


class SessionStore(Protocol):
    """What the services need of the session rows (DuckDB: store.accounts.SessionRepository)."""

    def add(
        self, session_id: str, account_id: str, organization_id: str, token_hash: str, expires_at: datetime
    ) -> SessionRow: ...

    def get(self, session_id: str) -> SessionRow | None: ...

    def by_hash(self, token_hash: str) -> SessionRow | None: ...

    def revoke(self, session_id: str) -> None: ...
