"""Secrets at rest: AES-256-GCM under a key the operator supplies.

Webhook signing secrets and TOTP secrets must be usable by the service (it signs and verifies with them), so
they cannot be hashed like API keys; they are sealed instead. The key comes from the operator:

- `REWARDS_LAB_SECRET_KEY`: 32 bytes, base64 (standard or url-safe), e.g. `openssl rand -base64 32`;
- otherwise a key file beside the database (`<db>.secret-key`, created 0600 when a NEW database is created, or
  an older one in which nothing is sealed yet). That keeps a copied database file unreadable without its key
  file; production operators set the variable and keep the key elsewhere.

The database stores a check value of its key (`store/secret_key_check.py`) and refuses to open under another.

A sealed value is `aesgcm1:<base64url(nonce | ciphertext | tag)>`; the associated data binds it to the row it
belongs to (for example `webhook:<endpoint id>`), so a sealed value copied to another row does not open.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

KEY_ENV = "REWARDS_LAB_SECRET_KEY"
KEY_FILE_SUFFIX = ".secret-key"
SEALED_PREFIX = "aesgcm1:"
_KEY_BYTES = 32
_NONCE_BYTES = 12


class SecretKeyError(ValueError):
    """The operator's key is missing, malformed, or does not open a stored secret."""


def parse_key(text: str) -> bytes:
    """32 bytes from base64 text (standard or url-safe alphabet, padding optional)."""
    cleaned = text.strip()
    padded = cleaned + "=" * (-len(cleaned) % 4)
    try:
        key = base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_"))
    except (binascii.Error, ValueError) as error:
        raise SecretKeyError(f"{KEY_ENV} is not base64") from error
    if len(key) != _KEY_BYTES:
        raise SecretKeyError(f"{KEY_ENV} must decode to {_KEY_BYTES} bytes, not {len(key)}")
    return key


def new_key_text() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(_KEY_BYTES)).decode("ascii")


def create_private_file(path: Path, text: str) -> None:
    """Write a new file readable by its owner only (0600 from the start, never world-readable for an instant)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(text)


def configured_key() -> bytes | None:
    """The operator's key from `REWARDS_LAB_SECRET_KEY`, or None when the variable is unset or empty."""
    configured = os.environ.get(KEY_ENV)
    return parse_key(configured) if configured else None


def key_file_path(path: str) -> Path:
    return Path(path + KEY_FILE_SUFFIX)


def key_source(path: str) -> str:
    """Where `key_for_database` takes the key of `path` from, for messages."""
    return KEY_ENV if os.environ.get(KEY_ENV) else f"the key file {key_file_path(path)}"


def key_for_database(path: str, *, may_create: bool = True) -> bytes:
    """The operator's key (environment), else the key file beside a database file, else (in memory) a fresh key.

    A missing key file is created only when `may_create` (the database is new, or nothing in it is sealed under
    any key yet): a database whose secrets were sealed under the variable, opened without it, must not get an
    invented key that seals new secrets beside old ones no key opens."""
    configured = configured_key()
    if configured is not None:
        return configured
    if path == ":memory:" or path.startswith(":memory:"):
        return secrets.token_bytes(_KEY_BYTES)
    key_path = key_file_path(path)
    if not key_path.exists():
        if not may_create:
            raise SecretKeyError(
                f"{path} holds secrets sealed under a key that is not here: {KEY_ENV} is not set and there is no "
                f"key file {key_path}; set {KEY_ENV} to the key this database was created with (or put its key "
                "file back)"
            )
        try:
            create_private_file(key_path, new_key_text())
        except FileExistsError:  # another opener won the race: read theirs
            pass
    return parse_key(key_path.read_text(encoding="ascii"))


class SecretBox:
    """Seals and opens short secrets with AES-256-GCM."""

    def __init__(self, key: bytes) -> None:
        if len(key) != _KEY_BYTES:
            raise SecretKeyError(f"the key must be {_KEY_BYTES} bytes")
        self._aead = AESGCM(key)
        self._key = key
        self._derived: dict[str, bytes] = {}

    def derive_key(self, label: str) -> bytes:
        """A 32-byte key for another purpose (e.g. signing pagination cursors), derived from the operator's key
        with HKDF-SHA256 and `label` as its info: independent of the sealing key and of every other label, and
        stable for as long as the operator's key is."""
        derived = self._derived.get(label)
        if derived is None:
            hkdf = HKDF(algorithm=SHA256(), length=_KEY_BYTES, salt=None, info=f"rewards_lab:{label}".encode())
            derived = self._derived[label] = hkdf.derive(self._key)
        return derived

    def seal(self, plaintext: str, *, context: str) -> str:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = nonce + self._aead.encrypt(nonce, plaintext.encode("utf-8"), context.encode("utf-8"))
        return SEALED_PREFIX + base64.urlsafe_b64encode(sealed).decode("ascii")

    def open(self, stored: str, *, context: str) -> str:
        """The plaintext of a sealed value. A value stored before sealing existed (no prefix) is returned as is,
        so that an upgraded database keeps working until `is_sealed` finds it and it is sealed."""
        if not is_sealed(stored):
            return stored
        try:
            raw = base64.urlsafe_b64decode(stored[len(SEALED_PREFIX) :])
            plain = self._aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], context.encode("utf-8"))
        except (InvalidTag, binascii.Error, ValueError) as error:
            raise SecretKeyError(
                "a stored secret does not open with this key (wrong REWARDS_LAB_SECRET_KEY?)"
            ) from error
        return plain.decode("utf-8")


def is_sealed(stored: str) -> bool:
    return stored.startswith(SEALED_PREFIX)
