"""Password hashing with scrypt (standard library), in a self-describing string so parameters can be raised.

`scrypt$<log2 N>$<r>$<p>$<salt b64>$<hash b64>`. N = 2^14, r = 8, p = 5 is one of OWASP's equivalent scrypt
settings (16 MiB of memory per hash): slow for a guesser, bearable for a login.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from functools import cache

LOG2_N, R, P = 14, 8, 5
_SALT_BYTES, _HASH_BYTES = 16, 32
_MAX_MEMORY = 64 * 1024 * 1024


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _derive(password: str, salt: bytes, log2_n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=2**log2_n, r=r, p=p, maxmem=_MAX_MEMORY, dklen=_HASH_BYTES)


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(_SALT_BYTES)
    return f"scrypt${LOG2_N}${R}${P}${_b64(salt)}${_b64(_derive(password, salt, LOG2_N, R, P))}"


def verify_password(password: str, encoded: str) -> bool:
    """Constant-time comparison of the derived key; a malformed hash verifies nothing."""
    try:
        scheme, log2_n, r, p, salt, expected = encoded.split("$")
        if scheme != "scrypt":
            return False
        derived = _derive(password, _unb64(salt), int(log2_n), int(r), int(p))
    except ValueError:
        return False
    return hmac.compare_digest(derived, _unb64(expected))


@cache
def dummy_hash() -> str:
    """Checked when the email is unknown, so that an unknown email costs as much time as a wrong password."""
    return hash_password(secrets.token_urlsafe(16))
