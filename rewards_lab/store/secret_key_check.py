"""The key check value: a database remembers which key seals its secrets and refuses any other.

Without it, a database whose secrets were sealed under `REWARDS_LAB_SECRET_KEY`, opened without the variable,
would get a fresh key file; new secrets would be sealed under that key beside old ones it cannot open (TOTP logins
fail, every webhook attempt fails, a backup copies the wrong key and calls it "included"). The check value is
HMAC-SHA256 of a constant under a key derived from the secret key (`SecretBox.derive_key`): it reveals nothing
about the key, and a wrong key is refused when the database opens, with a message naming the variable.
"""

from __future__ import annotations

import hashlib
import hmac

import duckdb

from rewards_lab.store.accounts import totp_context
from rewards_lab.store.database import utcnow
from rewards_lab.store.secret_box import KEY_ENV, SEALED_PREFIX, SecretBox, SecretKeyError
from rewards_lab.store.webhooks import webhook_secret_context

CHECK_LABEL = "secret-key-check"
_CHECK_MESSAGE = b"rewards_lab: the key that seals this database's secrets"


def check_value(box: SecretBox) -> str:
    return hmac.new(box.derive_key(CHECK_LABEL), _CHECK_MESSAGE, hashlib.sha256).hexdigest()


def stored_check_value(con: duckdb.DuckDBPyConnection) -> str | None:
    row = con.execute("SELECT check_value FROM secret_key_check WHERE id = 1").fetchone()
    return None if row is None else str(row[0])


def sealed_sample(con: duckdb.DuckDBPyConnection) -> tuple[str, str] | None:
    """One sealed secret and the context it was sealed under (a database from before the check value)."""
    totp = con.execute(
        "SELECT id, totp_secret FROM accounts WHERE starts_with(totp_secret, ?) ORDER BY id LIMIT 1", [SEALED_PREFIX]
    ).fetchone()
    if totp is not None:
        return str(totp[1]), totp_context(str(totp[0]))
    hook = con.execute(
        "SELECT id, signing_secret FROM webhook_endpoints WHERE starts_with(signing_secret, ?) ORDER BY id LIMIT 1",
        [SEALED_PREFIX],
    ).fetchone()
    if hook is not None:
        return str(hook[1]), webhook_secret_context(str(hook[0]))
    return None


def key_is_fixed(con: duckdb.DuckDBPyConnection) -> bool:
    """True when some key already seals this database (a check value, or a sealed secret)."""
    return stored_check_value(con) is not None or sealed_sample(con) is not None


def check_key(con: duckdb.DuckDBPyConnection, box: SecretBox, *, path: str, source: str) -> None:
    """Refuse `box` unless its key is the database's (SecretKeyError naming REWARDS_LAB_SECRET_KEY). A database
    without a check value gets one, after its key opened a sealed secret if it holds any."""
    expected = check_value(box)
    stored = stored_check_value(con)
    if stored is not None:
        if not hmac.compare_digest(stored, expected):
            raise _wrong_key(path, source)
        return
    sample = sealed_sample(con)
    if sample is not None:
        try:
            box.open(sample[0], context=sample[1])
        except SecretKeyError:
            raise _wrong_key(path, source) from None
    con.execute("INSERT INTO secret_key_check VALUES (1, ?, ?)", [expected, utcnow()])


def _wrong_key(path: str, source: str) -> SecretKeyError:
    return SecretKeyError(
        f"the secret key from {source} is not the key {path}'s secrets were sealed under; set {KEY_ENV} to the "
        "key this database was created with (or, if it was created with a key file, unset it and put that file "
        "back)"
    )
