"""Webhook signatures, for our sender and for receivers. Every delivery carries two headers:

- `X-Rewards-Signature-256: sha256=<hex>`: hex HMAC-SHA256 of the exact raw body, the form GitHub uses for
  `X-Hub-Signature-256`, so receivers can check it with libraries they already have. It has no timestamp: a
  captured delivery stays valid for it forever (receivers deduplicate on the delivery id).
- `X-Rewards-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]`: Stripe's form. Each `v1` is the hex
  HMAC-SHA256 of `f"{t}.".encode() + raw_body` under one signing secret (two during a secret rotation's grace
  period: the new secret's first). `verify_timestamped` refuses a timestamp further than `tolerance_s` from now,
  so a captured delivery cannot be replayed after that. Every attempt is signed afresh with its own time.

Compare in constant time, and over the raw bytes as received: re-encoding parsed JSON changes the bytes and breaks
the signature.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence

SIGNATURE_HEADER = "X-Rewards-Signature-256"
TIMESTAMPED_SIGNATURE_HEADER = "X-Rewards-Signature"
DEFAULT_TOLERANCE_S = 300
_SCHEME = "sha256="
_MAX_HEADER_LENGTH = 4096

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "SIGNATURE_HEADER",
    "TIMESTAMPED_SIGNATURE_HEADER",
    "sign",
    "sign_timestamped",
    "verify",
    "verify_timestamped",
]


def sign(raw_body: bytes, secret: str) -> str:
    """The `X-Rewards-Signature-256` value for this body: `sha256=<hex digest>`."""
    return _SCHEME + hmac.new(secret.encode(), raw_body, hashlib.sha256).hexdigest()


def verify(raw_body: bytes, signature_header: str | None, secret: str) -> bool:
    """True when `signature_header` is this body's signature under `secret` (constant-time comparison)."""
    if not signature_header or not signature_header.startswith(_SCHEME):
        return False
    return hmac.compare_digest(sign(raw_body, secret).encode(), signature_header.strip().encode())


def _timestamped_digest(raw_body: bytes, secret: str, timestamp: int) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + raw_body, hashlib.sha256).hexdigest()


def sign_timestamped(raw_body: bytes, secrets: Sequence[str], timestamp: int | None = None) -> str:
    """The `X-Rewards-Signature` value: `t=<timestamp>,v1=<hex>` with one `v1` per secret, in order."""
    if not secrets:
        raise ValueError("at least one secret signs")
    t = int(time.time()) if timestamp is None else timestamp
    return ",".join([f"t={t}", *(f"v1={_timestamped_digest(raw_body, secret, t)}" for secret in secrets)])


def verify_timestamped(
    raw_body: bytes,
    signature_header: str | None,
    secret: str,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """True when the header's timestamp is within `tolerance_s` of now and one of its `v1` signatures is this
    body's under `secret` (constant-time comparison). Unknown schemes in the header are ignored."""
    if not signature_header or len(signature_header) > _MAX_HEADER_LENGTH:
        return False
    timestamp: int | None = None
    candidates: list[str] = []
    for item in signature_header.split(","):
        key, _, value = item.strip().partition("=")
        if key == "t" and value.isdigit() and timestamp is None:
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    expected = _timestamped_digest(raw_body, secret, timestamp).encode()
    matched = False
    for candidate in candidates:  # every candidate is compared: no early exit on a match
        matched |= hmac.compare_digest(expected, candidate.encode())
    return matched
