"""Webhook signatures, for our sender and for receivers: hex HMAC-SHA256 of the exact raw body.

The header carries `sha256=<hex>`, the form GitHub uses for `X-Hub-Signature-256`, so receivers can also check
it with libraries they already have. Compare in constant time, and over the raw bytes as received: re-encoding
parsed JSON changes the bytes and breaks the signature.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Rewards-Signature-256"
_SCHEME = "sha256="

__all__ = ["SIGNATURE_HEADER", "sign", "verify"]


def sign(raw_body: bytes, secret: str) -> str:
    """The header value for this body: `sha256=<hex digest>`."""
    return _SCHEME + hmac.new(secret.encode(), raw_body, hashlib.sha256).hexdigest()


def verify(raw_body: bytes, signature_header: str | None, secret: str) -> bool:
    """True when `signature_header` is this body's signature under `secret` (constant-time comparison)."""
    if not signature_header or not signature_header.startswith(_SCHEME):
        return False
    return hmac.compare_digest(sign(raw_body, secret).encode(), signature_header.strip().encode())
