"""Secrets at rest: sealed with AES-GCM, bound to their row, under the operator's key or a 0600 key file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewards_lab.store import secret_box
from rewards_lab.store.database import Database
from rewards_lab.store.secret_box import SecretBox, SecretKeyError

BOX = SecretBox(bytes(range(32)))


@given(st.text(max_size=200), st.text(max_size=40))
def test_sealed_secrets_open_to_their_plaintext(plaintext: str, context: str) -> None:
    sealed = BOX.seal(plaintext, context=context)
    assert secret_box.is_sealed(sealed)
    assert BOX.open(sealed, context=context) == plaintext


def test_a_sealed_secret_opens_only_for_its_row_and_key() -> None:
    sealed = BOX.seal("whsec_abc", context="webhook:whe_1")
    with pytest.raises(SecretKeyError):
        BOX.open(sealed, context="webhook:whe_2")
    with pytest.raises(SecretKeyError):
        SecretBox(bytes(32)).open(sealed, context="webhook:whe_1")
    assert BOX.seal("same", context="c") != BOX.seal("same", context="c")  # a fresh nonce each time


def test_a_value_stored_before_sealing_is_read_as_is() -> None:
    assert BOX.open("whsec_legacy", context="webhook:whe_1") == "whsec_legacy"


def test_database_key_file_is_private_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(secret_box.KEY_ENV, raising=False)
    path = tmp_path / "rewards.duckdb"
    with Database(path) as first:
        sealed = first.secret_box.seal("s3cret", context="x")
    key_file = Path(str(path) + secret_box.KEY_FILE_SUFFIX)
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    with Database(path) as second:
        assert second.secret_box.open(sealed, context="x") == "s3cret"


def test_operator_key_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(secret_box.KEY_ENV, secret_box.new_key_text())
    with Database(tmp_path / "a.duckdb") as database:
        assert database.secret_box.open(database.secret_box.seal("k", context="c"), context="c") == "k"
    assert not Path(str(tmp_path / "a.duckdb") + secret_box.KEY_FILE_SUFFIX).exists()
    monkeypatch.setenv(secret_box.KEY_ENV, "not base64 at all!")
    with pytest.raises(SecretKeyError):
        Database(tmp_path / "b.duckdb")
    monkeypatch.setenv(secret_box.KEY_ENV, "c2hvcnQ=")
    with pytest.raises(SecretKeyError, match="32 bytes"):
        Database(tmp_path / "c.duckdb")
