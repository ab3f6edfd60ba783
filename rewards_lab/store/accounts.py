"""Accounts (people) and their sessions. Passwords are stored as scrypt hashes, session tokens as SHA-256, TOTP
secrets sealed (`secret_box`, context `totp:<account id>`): the service reads them back to check codes."""

from __future__ import annotations

import json
from datetime import datetime

import duckdb

from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import AccountRow, SessionRow
from rewards_lab.store.queries import columns, fetch_one_as
from rewards_lab.store.secret_box import SEALED_PREFIX, SecretBox


def totp_context(account_id: str) -> str:
    """The associated data a TOTP secret is sealed under: a sealed value copied to another account never opens."""
    return f"totp:{account_id}"


def seal_plaintext_totp_secrets(con: duckdb.DuckDBPyConnection, box: SecretBox) -> int:
    """Seal every TOTP secret still stored in plain text (a database written before sealing); how many."""
    repository = AccountRepository(con)
    found = repository.unsealed_totp_secrets()
    for account_id, secret in found:
        repository.set_totp_secret(account_id, box.seal(secret, context=totp_context(account_id)))
    return len(found)


class AccountRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(
        self,
        account_id: str,
        organization_id: str,
        email: str,
        role: str,
        permissions: list[str],
        password_hash: str,
        totp_secret: str | None,
    ) -> AccountRow:
        """`totp_secret` is stored as given: the caller seals it (`totp_context`)."""
        self.con.execute(
            "INSERT INTO accounts VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?)",
            [
                account_id,
                organization_id,
                email,
                role,
                json.dumps(sorted(permissions)),
                password_hash,
                totp_secret,
                utcnow(),
            ],
        )
        row = self.get(account_id)
        assert row is not None
        return row

    def get(self, account_id: str) -> AccountRow | None:
        sql = f"SELECT {columns(AccountRow)} FROM accounts WHERE id = ?"
        return fetch_one_as(self.con, AccountRow, sql, [account_id])

    def by_email(self, email: str) -> AccountRow | None:
        """Emails are stored lower-cased; the caller lower-cases what it looks up."""
        sql = f"SELECT {columns(AccountRow)} FROM accounts WHERE email = ?"
        return fetch_one_as(self.con, AccountRow, sql, [email])

    def unsealed_totp_secrets(self) -> list[tuple[str, str]]:
        """(account id, stored value) of TOTP secrets written before sealing existed (no sealed prefix)."""
        rows = self.con.execute(
            "SELECT id, totp_secret FROM accounts WHERE totp_secret IS NOT NULL AND NOT starts_with(totp_secret, ?)",
            [SEALED_PREFIX],
        ).fetchall()
        return [(str(account_id), str(secret)) for account_id, secret in rows]

    def set_totp_secret(self, account_id: str, sealed: str) -> None:
        self.con.execute("UPDATE accounts SET totp_secret = ? WHERE id = ?", [sealed, account_id])

    def use_totp_step(self, account_id: str, step: int) -> None:
        self.con.execute("UPDATE accounts SET totp_last_step = ? WHERE id = ?", [step, account_id])


class SessionRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(
        self, session_id: str, account_id: str, organization_id: str, token_hash: str, expires_at: datetime
    ) -> SessionRow:
        self.con.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, NULL)",
            [session_id, account_id, organization_id, token_hash, utcnow(), expires_at],
        )
        row = self.get(session_id)
        assert row is not None
        return row

    def get(self, session_id: str) -> SessionRow | None:
        sql = f"SELECT {columns(SessionRow)} FROM sessions WHERE id = ?"
        return fetch_one_as(self.con, SessionRow, sql, [session_id])

    def by_hash(self, token_hash: str) -> SessionRow | None:
        sql = f"SELECT {columns(SessionRow)} FROM sessions WHERE token_hash = ?"
        return fetch_one_as(self.con, SessionRow, sql, [token_hash])

    def revoke(self, session_id: str) -> None:
        self.con.execute("UPDATE sessions SET revoked_at = ? WHERE id = ?", [utcnow(), session_id])
