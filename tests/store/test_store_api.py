"""Issue 32, increment 1: the `Store` Protocol and `open_store`.

`open_store` takes a DuckDB path in every form a `--db` is given (a path, a `Path`, a `duckdb:///` URL) and refuses
a PostgreSQL URL by name until that store exists; `DuckDBStore` has every member of `Store` with the Protocol's
parameters, and a write through the Protocol alone is read back, from a reopened file, through the Protocol."""

from __future__ import annotations

import inspect
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from rewards_lab.contract.ids import new_id
from rewards_lab.store import api
from rewards_lab.store.api import Store, UnsupportedStore, duckdb_path, open_store
from rewards_lab.store.database import Database, DuckDBStore, utcnow
from rewards_lab.store.interfaces import AuditRow
from rewards_lab.store.secret_box import KEY_ENV, new_key_text


def _members(protocol: type) -> list[str]:
    """The members a Protocol declares: its methods and properties (the context manager's dunders included, the
    hooks `typing` adds to every Protocol not)."""
    return sorted(
        name
        for name, value in vars(protocol).items()
        if (inspect.isfunction(value) or isinstance(value, property)) and name not in {"__init__", "__subclasshook__"}
    )


# -- open_store: the forms of a DuckDB --db ----------------------------------------------------------------------
def test_a_plain_path_and_a_pathlib_path_open_that_duckdb_file(tmp_path: Path) -> None:
    for given in (str(tmp_path / "plain.duckdb"), tmp_path / "pathlib.duckdb"):
        with open_store(given) as store:
            assert isinstance(store, DuckDBStore)
            assert store.path == str(given)
        assert Path(given).is_file()


def test_a_duckdb_url_names_a_file_as_sqlalchemy_writes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = tmp_path / "absolute.duckdb"
    with open_store(f"duckdb:///{absolute}") as store:  # duckdb:////tmp/...: no host, then the absolute path
        assert store.path == str(absolute)
    assert absolute.is_file()
    monkeypatch.chdir(tmp_path)
    with open_store("duckdb:///relative.duckdb") as store:
        assert store.path == "relative.duckdb"
    assert (tmp_path / "relative.duckdb").is_file()
    assert not (tmp_path / "duckdb:").exists()  # not taken for a directory named after the scheme
    assert duckdb_path("DuckDB:///x.duckdb") == "x.duckdb"  # schemes are case-insensitive
    assert duckdb_path("duckdb:///:memory:") == ":memory:"
    assert duckdb_path(":memory:") == ":memory:"


@pytest.mark.parametrize(
    "url",
    ["postgresql://rewards:hunter2@127.0.0.1:1/rewards", "postgres://rewards:hunter2@127.0.0.1:1/rewards",
     "PostgreSQL://rewards:hunter2@127.0.0.1:1/rewards"],
)  # fmt: skip
def test_a_postgresql_url_opens_a_postgres_store_and_an_unreachable_one_is_refused_without_its_password(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, new_key_text())
    assert api.is_postgres(url) and not api.is_postgres(tmp_path / "postgresql.duckdb")
    with pytest.raises(UnsupportedStore) as refused:
        open_store(url)  # nothing listens on port 1
    message = str(refused.value)
    assert message.startswith("postgresql://rewards@127.0.0.1:1/rewards: cannot connect: ")
    assert "hunter2" not in message  # a URL may carry a password: never echoed
    assert list(tmp_path.iterdir()) == []
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(UnsupportedStore, match=f"takes its secret key from {KEY_ENV}"):
        open_store(url)  # refused before connecting: no key file beside a server's database
    with pytest.raises(UnsupportedStore, match="this command works on a DuckDB file") as file_only:
        duckdb_path(url)  # retention, backup, restore: file operations
    assert "hunter2" not in str(file_only.value) and "127.0.0.1" not in str(file_only.value)


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        ("mysql://localhost/rewards", "unknown store scheme 'mysql'"),
        ("duckdb://", "a duckdb: URL has no host"),
        ("duckdb:///", "a duckdb: URL has no host"),
        ("duckdb://files.internal/rewards.duckdb", "a duckdb: URL has no host"),
    ],
)
def test_an_unknown_scheme_and_a_duckdb_url_naming_no_file_are_refused(
    given: str, refusal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedStore, match=refusal):
        open_store(given)
    assert list(tmp_path.iterdir()) == []


# -- DuckDBStore is a Store ----------------------------------------------------------------------------------------
def test_duckdb_store_has_every_member_of_the_protocol_with_its_parameters() -> None:
    members = _members(Store)
    assert {"unit_of_work", "reader_repositories", "snapshot_repositories", "verify_ledger", "close"} <= set(members)
    for name in members:
        declared = getattr(Store, name)
        assert hasattr(DuckDBStore, name) or name in {"path", "secret_box"}, name  # those two are set per instance
        if isinstance(declared, property) or not callable(declared):
            continue
        implemented = getattr(DuckDBStore, name)
        assert callable(implemented), name
        wanted = list(inspect.signature(declared).parameters)
        got = list(inspect.signature(implemented).parameters)
        assert got == wanted, f"{name}: {got} != {wanted}"


def test_the_old_name_is_the_same_class() -> None:
    assert Database is DuckDBStore
    assert api.DuckDBStore is DuckDBStore


def test_an_opened_store_has_the_protocols_attributes(tmp_path: Path) -> None:
    with open_store(tmp_path / "attributes.duckdb") as store:
        for name in _members(Store):
            assert hasattr(store, name), name
        sealed = store.secret_box.seal("s3cret", context="test")
        assert sealed != "s3cret" and store.secret_box.open(sealed, context="test") == "s3cret"


# -- a real write and read through the Protocol ----------------------------------------------------------------------
def _audit_row(created_at: datetime, kind: str) -> AuditRow:
    return AuditRow(
        id=new_id("auth_audit"),
        organization_id=None,
        environment=None,
        kind=kind,
        outcome="denied",
        reason=None,
        status=401,
        actor_id=None,
        subject_id=None,
        request_id=None,
        method="GET",
        path="/v1/whoami",
        address="127.0.0.1",
        sdk_version=None,
        created_at=created_at,
    )


def _write_through_the_protocol(store: Store, organization_id: str) -> None:
    with store.unit_of_work() as uow:
        uow.organizations.add(organization_id, "Protocol Ltd", "business", None)
    with pytest.raises(RuntimeError), store.unit_of_work() as uow:
        uow.organizations.add(new_id("organization"), "Rolled back", "business", None)
        raise RuntimeError("the unit of work must not commit")
    old = utcnow() - timedelta(days=400)
    with store.side_unit_of_work() as uow:
        uow.auth_audit.add_many([_audit_row(old, "access_denied"), _audit_row(old, "access_denied")])
    assert store.delete_expired("auth_audit", utcnow() - timedelta(days=1), 1) == 1  # one per call, as asked
    assert store.probe_write(5.0) is True


def _read_through_the_protocol(store: Store, organization_id: str) -> None:
    row = store.reader_repositories().organizations.get(organization_id)
    assert row is not None and row.name == "Protocol Ltd"
    with store.snapshot_repositories() as uow:
        assert uow.organizations.get(organization_id) == row
    report = store.verify_ledger()
    assert report.ok and report.problems == {}


def test_a_write_through_the_protocol_is_read_back_from_the_reopened_file(tmp_path: Path) -> None:
    path = tmp_path / "protocol.duckdb"
    organization_id = new_id("organization")
    store: Store = open_store(path)
    try:
        _write_through_the_protocol(store, organization_id)
        store.checkpoint()
    finally:
        store.close()
    with open_store(f"duckdb:///{path}") as reopened:
        _read_through_the_protocol(reopened, organization_id)
        assert isinstance(reopened, DuckDBStore)
        con = reopened.reader()
        assert con.execute("SELECT name FROM organizations").fetchall() == [("Protocol Ltd",)]  # no rolled-back one
        assert con.execute("SELECT count(*) FROM auth_audit").fetchall() == [(1,)]  # two written, one deleted
