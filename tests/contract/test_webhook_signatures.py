"""The receiver helper accepts exactly our signatures, as an independent HMAC computation agrees."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from rewards_lab.contract.webhook_signatures import sign, verify

SECRET = "whsec_test_secret"


@given(body=st.binary(max_size=2048), secret=st.text(min_size=1, max_size=64))
def test_signature_is_hex_hmac_sha256_of_the_raw_body(body: bytes, secret: str) -> None:
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert sign(body, secret) == f"sha256={expected}"
    assert verify(body, f"sha256={expected}", secret)


def test_tampering_or_a_wrong_secret_fails() -> None:
    body = b'{"id":"dlv_1","kind":"reward.issued","data":{"amount":"2.12"}}'
    header = sign(body, SECRET)
    assert verify(body, header, SECRET)
    assert not verify(body.replace(b"2.12", b"9.12"), header, SECRET)
    assert not verify(body, header, "another_secret")
    assert not verify(body, header.removeprefix("sha256="), SECRET)  # the scheme is part of the header
    assert not verify(body, None, SECRET)
    assert not verify(body, "sha256=" + "0" * 64, SECRET)
