"""Accounts (people) and their sessions. Passwords are stored as scrypt hashes, session tokens as SHA-256."""

from __future__ import annotations

import json
from datetime import datetime

import duckdb

from rewards_lab.store.database import utcnow
from rewards_lab.store.queries import Row, fetch_one


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
    ) -> Row:
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

    def get(self, account_id: str) -> Row | None:
        return fetch_one(self.con, "SELECT * FROM accounts WHERE id = ?", [account_id])

    def by_email(self, email: str) -> Row | None:
        """Emails are stored lower-cased; the caller lower-cases what it looks up."""
        return fetch_one(self.con, "SELECT * FROM accounts WHERE email = ?", [email])

    def use_totp_step(self, account_id: str, step: int) -> None:
        self.con.execute("UPDATE accounts SET totp_last_step = ? WHERE id = ?", [step, account_id])


class SessionRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(self, session_id: str, account_id: str, organization_id: str, token_hash: str, expires_at: datetime) -> Row:
        self.con.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, NULL)",
            [session_id, account_id, organization_id, token_hash, utcnow(), expires_at],
        )
        row = self.get(session_id)
        assert row is not None
        return row

    def get(self, session_id: str) -> Row | None:
        return fetch_one(self.con, "SELECT * FROM sessions WHERE id = ?", [session_id])

    def by_hash(self, token_hash: str) -> Row | None:
        return fetch_one(self.con, "SELECT * FROM sessions WHERE token_hash = ?", [token_hash])

    def revoke(self, session_id: str) -> None:
        self.con.execute("UPDATE sessions SET revoked_at = ? WHERE id = ?", [utcnow(), session_id])
