"""A customer's `attributes` (issue 17) against a real server on 127.0.0.1: created and read back exactly, edited
with PATCH /customers/{id} (RFC 7396 merge), every limit refused by field, `customers.update` required, tenants
kept apart; and migration 14 on a database from before it (its customers read `{}`, its creators may edit)."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import duckdb
import httpx
import pytest

from rewards_lab.cli.main import main
from rewards_lab.client import NotFoundError, RewardsClient, ValidationError
from rewards_lab.contract import attributes, jsonutil
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import Database
from rewards_lab.store.uow import reader
from tests.conftest import World
from tests.http_helpers import live_client
from tests.live_server import LiveServer, bootstrap, cli, free_port, spawn, start_server, wait_until_serving


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    path = tmp_path_factory.mktemp("attributes") / "service.duckdb"
    other = bootstrap(path, "Other organization")  # a second tenant in the same file, before the server holds it
    live = start_server(path)
    live.boot["other"] = other
    yield live
    live.stop()


def _other_headers(live: LiveServer) -> dict[str, str]:
    other = live.boot["other"]
    assert isinstance(other, dict)
    return {
        "Authorization": f"Bearer {other['api_keys']['sandbox']}",
        "X-Organization-ID": str(other["organization_id"]),
        "X-Environment": "sandbox",
    }


def _data(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    """The envelope's data, numbers parsed exactly (Decimal), as a client that keeps digits reads them."""
    assert response.status_code == status, response.text
    data: dict[str, Any] = jsonutil.loads(response.content)["data"]
    return data


def _error(response: httpx.Response, status: int, code: str, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    if field is not None:
        assert error["details"]["field"] == field, error
    return error


def _create(http: httpx.Client, external_id: str, **fields: Any) -> dict[str, Any]:
    body = jsonutil.dumps({"external_id": external_id, **fields})
    return _data(http.post("/customers", content=body), 201)


def test_attributes_are_created_and_read_back_exactly(http: httpx.Client) -> None:
    body = (
        '{"external_id": "attr-exact", "attributes": {"tier": "gold", "lifetime_spend": 12.50, "tiny": 1e-7, '
        '"orders": 12, "big": 999999999999999, "negative": -0.25, "vip": true, "opted_out": false, "_private": ""}}'
    )
    created = _data(http.post("/customers", content=body), 201)
    expected = {
        "tier": "gold",
        "lifetime_spend": Decimal("12.50"),
        "tiny": Decimal("1e-7"),
        "orders": 12,
        "big": 999999999999999,
        "negative": Decimal("-0.25"),
        "vip": True,
        "opted_out": False,
        "_private": "",
    }
    assert created["attributes"] == expected
    # digit for digit: 12.50 keeps its trailing zero (a float would make it 12.5)
    assert '"lifetime_spend":12.50' in http.get(f"/customers/{created['id']}").text
    for reference in (created["id"], "attr-exact"):
        read = _data(http.get(f"/customers/{reference}"))
        assert read["attributes"] == expected
        assert [type(read["attributes"][k]) for k in ("lifetime_spend", "vip", "tier")] == [Decimal, bool, str]
    listed = jsonutil.loads(http.get("/customers", params={"external_id": "attr-exact"}).content)["data"]
    assert [item["attributes"] for item in listed] == [expected]


def test_a_customer_without_attributes_has_an_empty_object(http: httpx.Client) -> None:
    created = _create(http, "attr-none", email="none@example.com")
    assert created["attributes"] == {}
    assert _data(http.get("/customers/attr-none"))["attributes"] == {}


def test_patch_merges_removes_and_replaces_keys(http: httpx.Client) -> None:
    created = _create(http, "attr-merge", attributes={"tier": "silver", "points_goal": 100, "newsletter": True})
    path = f"/customers/{created['id']}"
    merged = _data(http.patch(path, content='{"attributes": {"tier": "gold", "newsletter": null, "score": 7.25}}'))
    assert merged["attributes"] == {"tier": "gold", "points_goal": 100, "score": Decimal("7.25")}
    assert (merged["id"], merged["external_id"], merged["created_at"]) == (
        created["id"],
        created["external_id"],
        created["created_at"],
    )
    # removing a key that is not there is no error (RFC 7396); an empty patch changes nothing
    assert _data(http.patch(path, json={"attributes": {"absent": None}}))["attributes"] == merged["attributes"]
    assert _data(http.patch(path, json={}))["attributes"] == merged["attributes"]
    assert _data(http.patch(path, json={"attributes": {}}))["attributes"] == merged["attributes"]
    # named by its external id, as GET resolves it
    renamed = _data(http.patch("/customers/attr-merge", json={"attributes": {"tier": True}}))
    assert renamed["attributes"]["tier"] is True
    # null for the whole object removes every attribute
    assert _data(http.patch(path, json={"attributes": None}))["attributes"] == {}
    assert _data(http.get(path))["attributes"] == {}


def test_patch_sets_and_clears_email_and_country_and_keeps_what_is_not_sent(http: httpx.Client) -> None:
    created = _create(http, "attr-contact", email="a@example.com", country="GB", attributes={"tier": "gold"})
    path = f"/customers/{created['id']}"
    changed = _data(http.patch(path, json={"email": "b@example.com"}))
    assert (changed["email"], changed["country"], changed["attributes"]) == ("b@example.com", "GB", {"tier": "gold"})
    changed = _data(http.patch(path, json={"country": "FR", "email": None}))
    assert (changed["email"], changed["country"]) == (None, "FR")
    cleared = _data(http.patch(path, json={"country": None}))
    assert (cleared["email"], cleared["country"], cleared["attributes"]) == (None, None, {"tier": "gold"})
    assert _data(http.get(path)) == cleared


TOO_MANY = {f"k{i}": i for i in range(attributes.MAX_ATTRIBUTES + 1)}
TOO_LARGE = {f"k{i}": "x" * attributes.MAX_ATTRIBUTE_STRING_CHARS for i in range(17)}  # 17 x 500 > 8,192


@pytest.mark.parametrize(
    ("attributes_text", "field"),
    [
        (json.dumps(TOO_MANY), "attributes"),
        ('{"1st": 1}', "attributes"),
        ('{"has-dash": 1}', "attributes"),
        ('{"": 1}', "attributes"),
        (json.dumps({"k" * (attributes.MAX_ATTRIBUTE_KEY_CHARS + 1): 1}), "attributes"),
        (json.dumps({"bio": "x" * (attributes.MAX_ATTRIBUTE_STRING_CHARS + 1)}), "attributes.bio"),
        ('{"tier": {"name": "gold"}}', "attributes.tier"),
        ('{"tags": ["a", "b"]}', "attributes.tags"),
        ('{"tier": null}', "attributes.tier"),
        ('{"spend": 1e15}', "attributes.spend"),
        ('{"spend": -1000000000000000}', "attributes.spend"),
        ('{"spend": 1e999999999999}', "attributes.spend"),
        ('{"spend": 1.2345678901234567}', "attributes.spend"),
        ('{"spend": 0.00000000001}', "attributes.spend"),
        (json.dumps(TOO_LARGE), "attributes"),
        ('"gold"', "attributes"),
        ("[]", "attributes"),
        ("null", "attributes"),
    ],
)
def test_creation_refuses_each_limit_naming_the_field(http: httpx.Client, attributes_text: str, field: str) -> None:
    body = f'{{"external_id": "attr-refused", "attributes": {attributes_text}}}'
    _error(http.post("/customers", content=body), 422, "field_invalid", field)
    _error(http.get("/customers/attr-refused"), 404, "customer_not_found")


def test_the_limits_themselves_are_accepted(http: httpx.Client) -> None:
    at_limit: dict[str, Any] = {f"k{i}": i for i in range(attributes.MAX_ATTRIBUTES - 1)}
    at_limit["k" * attributes.MAX_ATTRIBUTE_KEY_CHARS] = Decimal("-999999999999999")  # the 50th key
    at_limit["k0"] = "x" * attributes.MAX_ATTRIBUTE_STRING_CHARS
    at_limit["k1"] = Decimal("0.0000000001")  # 10 places
    at_limit["k2"] = Decimal("12345.6789012345")  # 15 significant digits
    created = _create(http, "attr-at-limit", attributes=at_limit)
    assert created["attributes"] == at_limit
    assert len(attributes.to_json(at_limit)) <= attributes.MAX_ATTRIBUTES_JSON_CHARS


def test_patch_refuses_bad_input_and_leaves_the_customer_as_it_was(http: httpx.Client) -> None:
    created = _create(http, "attr-patch-refused", email="p@example.com", attributes={"k0": 0})
    path = f"/customers/{created['id']}"
    almost_full = {f"k{i}": i for i in range(attributes.MAX_ATTRIBUTES)}
    assert len(_data(http.patch(path, content=jsonutil.dumps({"attributes": almost_full})))["attributes"]) == 50
    before = _data(http.get(path))
    _error(http.patch(path, json={"attributes": {"one_more": 1}}), 422, "field_invalid", "attributes")
    _error(http.patch(path, json={"attributes": {"k1": {"a": 1}}}), 422, "field_invalid", "attributes.k1")
    _error(http.patch(path, json={"attributes": {"k1": [1]}}), 422, "field_invalid", "attributes.k1")
    _error(http.patch(path, json={"attributes": {"bad key": None}}), 422, "field_invalid", "attributes")
    _error(http.patch(path, content='{"attributes": {"k1": 1e15}}'), 422, "field_invalid", "attributes.k1")
    big = {f"k{i}": "x" * 500 for i in range(17)}
    _error(http.patch(path, json={"attributes": big}), 422, "field_invalid", "attributes")
    _error(http.patch(path, json={"attributes": "gold"}), 422, "field_invalid", "attributes")
    _error(http.patch(path, json={"email": "not-an-email"}), 422, "customer_email_invalid", "email")
    _error(http.patch(path, json={"country": "gb"}), 422, "field_invalid", "country")
    _error(http.patch(path, json={"external_id": "renamed"}), 422, "field_unknown", "external_id")
    _error(http.patch(path, content="{not json"), 422, "request_malformed")
    assert _data(http.get(path)) == before
    # one removal makes room for one more key: the limits apply to the merged result
    swapped = _data(http.patch(path, json={"attributes": {"k0": None, "one_more": 1}}))
    assert len(swapped["attributes"]) == 50 and "k0" not in swapped["attributes"]


def test_patch_of_an_unknown_customer_is_not_found(http: httpx.Client) -> None:
    _error(http.patch("/customers/cus_nobody", json={"attributes": {"a": 1}}), 404, "customer_not_found")
    _error(http.patch("/customers/no-such-external-id", json={}), 404, "customer_not_found")


def test_patch_is_idempotent_with_a_key(http: httpx.Client) -> None:
    created = _create(http, "attr-keyed")
    path = f"/customers/{created['id']}"
    body = '{"attributes": {"spend": 42.50}}'
    first = http.patch(path, content=body, headers={"Idempotency-Key": "attr-patch-1"})
    http.patch(path, json={"attributes": {"spend": 1}})
    again = http.patch(path, content=body, headers={"Idempotency-Key": "attr-patch-1"})
    assert _data(again) == _data(first) and '"spend":42.50' in again.text  # the stored answer, digit for digit
    assert _data(http.get(path))["attributes"] == {"spend": 1}  # replayed, not run again
    other = http.patch(path, json={"email": None}, headers={"Idempotency-Key": "attr-patch-1"})
    _error(other, 409, "idempotency_key_reused")
    created_again = http.post(
        "/customers",
        content='{"external_id": "attr-keyed-create", "attributes": {"n": 1.10}}',
        headers={"Idempotency-Key": "attr-create-1"},
    )
    replayed = http.post(
        "/customers",
        content='{"external_id": "attr-keyed-create", "attributes": {"n": 1.10}}',
        headers={"Idempotency-Key": "attr-create-1"},
    )
    assert replayed.status_code == 201 and _data(replayed, 201) == _data(created_again, 201)
    assert '"n":1.10' in replayed.text
    as_string = http.post(
        "/customers",
        content='{"external_id": "attr-keyed-create", "attributes": {"n": "1.10"}}',
        headers={"Idempotency-Key": "attr-create-1"},
    )
    _error(as_string, 409, "idempotency_key_reused")  # the string "1.10" is another request than the number


def test_patch_needs_customers_update(server: LiveServer, http: httpx.Client) -> None:
    created = _create(http, "attr-permission")
    narrow = _data(
        http.post(
            "/developer/api-keys",
            json={"name": "creator only", "permissions": ["customers.create", "customers.view"]},
        ),
        201,
    )
    headers = {**server.headers(), "Authorization": f"Bearer {narrow['secret']}"}
    denied = http.patch(f"/customers/{created['id']}", json={"attributes": {"a": 1}}, headers=headers)
    assert _error(denied, 403, "permission_denied")["details"]["permission"] == "customers.update"
    assert _data(http.get(f"/customers/{created['id']}"))["attributes"] == {}
    editor = _data(
        http.post("/developer/api-keys", json={"name": "editor", "permissions": ["customers.update"]}),
        201,
    )
    headers["Authorization"] = f"Bearer {editor['secret']}"
    assert _data(http.patch("/customers/attr-permission", json={"attributes": {"a": 1}}, headers=headers))[
        "attributes"
    ] == {"a": 1}


def test_another_tenant_can_neither_see_nor_patch_a_customer(server: LiveServer, http: httpx.Client) -> None:
    created = _create(http, "attr-tenant", attributes={"tier": "gold"})
    with httpx.Client(base_url=server.base_url, headers=_other_headers(server), timeout=10) as other:
        for reference in (created["id"], "attr-tenant"):
            _error(other.get(f"/customers/{reference}"), 404, "customer_not_found")
            _error(
                other.patch(f"/customers/{reference}", json={"attributes": {"tier": None}}), 404, "customer_not_found"
            )
        # the same external id in the other tenant is another customer
        mine = _data(
            other.post("/customers", json={"external_id": "attr-tenant", "attributes": {"tier": "bronze"}}), 201
        )
        _data(other.patch("/customers/attr-tenant", json={"attributes": {"tier": "silver"}}))
    with live_client(server, environment="production") as production:
        _error(production.patch(f"/customers/{created['id']}", json={}), 404, "customer_not_found")
    assert mine["id"] != created["id"]
    assert _data(http.get(f"/customers/{created['id']}"))["attributes"] == {"tier": "gold"}


def test_the_python_client_creates_and_updates_attributes(server: LiveServer) -> None:
    with RewardsClient(server.base_url, server.keys["sandbox"], server.organization_id, "sandbox") as client:
        created = client.create_customer("attr-client", email="c@example.com", attributes={"spend": Decimal("3.10")})
        assert created.attributes == {"spend": Decimal("3.10")}
        updated = client.update_customer("attr-client", attributes={"spend": None, "vip": True}, country="DE")
        assert (updated.attributes, updated.email, updated.country) == ({"vip": True}, "c@example.com", "DE")
        cleared = client.update_customer(created.id, email=None)
        assert (cleared.email, cleared.country, cleared.attributes) == (None, "DE", {"vip": True})
        with pytest.raises(ValidationError) as refused:
            client.update_customer(created.id, attributes={"vip": {"nested": True}})
        assert refused.value.details["field"] == "attributes.vip"
        with pytest.raises(NotFoundError):
            client.update_customer("attr-client-missing", attributes={})


def _cli(server: LiveServer, *args: str) -> tuple[int, str, str]:
    """`rewards-lab api ...` in-process (the same entry point as the command), key in the environment."""
    target = ["--base-url", server.base_url, "--org", server.organization_id, "--env", "sandbox"]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"REWARDS_API_KEY": server.keys["sandbox"]}), redirect_stdout(out):
        with redirect_stderr(err):
            status = main(["api", *args, *target])
    return status, out.getvalue(), err.getvalue()


def test_the_command_line_creates_and_updates_attributes(server: LiveServer) -> None:
    status, out, err = _cli(
        server, "customers", "create", "--external-id", "attr-cli", "--email", "cli@example.com",
        "--attributes", '{"tier": "gold", "spend": 12.50}',
    )  # fmt: skip
    assert status == 0, err
    assert '"spend":12.50' in out and jsonutil.loads(out)["attributes"]["tier"] == "gold"
    status, out, err = _cli(
        server, "customers", "update", "attr-cli", "--attributes", '{"tier": null, "vip": true}', "--clear-email",
        "--country", "GB",
    )  # fmt: skip
    assert status == 0, err
    updated = jsonutil.loads(out)
    assert (updated["attributes"], updated["email"], updated["country"]) == (
        {"spend": Decimal("12.50"), "vip": True},
        None,
        "GB",
    )
    status, out, err = _cli(server, "customers", "update", "attr-cli", "--email", "x@example.com", "--clear-email")
    assert status == 2 and "contradict" in err
    status, out, err = _cli(server, "customers", "update", "attr-cli", "--attributes", '{"bad key": 1}')
    assert status == 1 and "field_invalid" in err


def test_resolve_many_returns_the_attributes_with_the_row(world: World) -> None:
    """The rule engine reads attributes from the rows `resolve_many` gives it, in the same query."""
    with_attributes = world.customer("with", attributes={"tier": "gold", "spend": Decimal("12.50")})
    without = world.customer("without")
    rows = reader(world.db).customers.resolve_many(world.scope, [with_attributes.id, "without", "nobody"])
    assert set(rows) == {with_attributes.id, "without"}
    assert attributes.from_json(rows[with_attributes.id].attributes) == {"tier": "gold", "spend": Decimal("12.50")}
    assert rows[with_attributes.id].attributes == '{"tier":"gold","spend":12.50}'
    assert rows["without"].attributes == "{}" and rows["without"].id == without.id


def _back_to_before_migration_14(path: Path, scope: Scope) -> None:
    """The file as the previous release left it: no attributes column, a customer written then, and keys and an
    account whose permissions were granted before `customers.update` existed."""
    with duckdb.connect(str(path)) as con:
        con.execute("ALTER TABLE customers DROP COLUMN attributes")
        con.execute(
            "INSERT INTO customers VALUES ('cus_0123456789abcdef0123456789abcdef', ?, ?, 'old-customer', "
            "'old@example.com', 'GB', now()::TIMESTAMP)",
            list(scope.params),
        )
        for table in ("api_keys", "accounts"):
            for row_id, text in con.execute(f"SELECT id, permissions FROM {table}").fetchall():
                old = [p for p in json.loads(text) if p != "customers.update"]
                con.execute(f"UPDATE {table} SET permissions = ? WHERE id = ?", [json.dumps(sorted(old)), row_id])
        con.execute(
            "INSERT INTO api_keys VALUES ('key_reader', ?, ?, 'reader', 'rlk_sand_reader', 'not-a-hash', ?, NULL, "
            "now()::TIMESTAMP, NULL)",
            [*scope.params, json.dumps(["customers.view"])],
        )
        con.execute("DELETE FROM schema_migrations WHERE version = 14")


def test_migration_14_gives_old_customers_empty_attributes_and_creators_customers_update(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    boot = bootstrap(path, "Before", "--email", "owner@example.com", "--password", "correct horse battery staple")
    keys = boot["api_keys"]
    assert isinstance(keys, dict)
    scope = Scope(str(boot["organization_id"]), "sandbox")
    _back_to_before_migration_14(path, scope)

    with Database(path) as database:  # opening it migrates
        con = database.reader()
        assert con.execute("SELECT count(*) FROM customers WHERE attributes IS NULL").fetchone() == (0,)
        old = reader(database).customers.get_by_external_id(scope, "old-customer")
        assert old is not None and old.attributes == "{}"
        permissions = dict(con.execute("SELECT name, permissions FROM api_keys").fetchall())
        assert "customers.update" in json.loads(permissions["bootstrap"])
        assert permissions["bootstrap"] == json.dumps(sorted(json.loads(permissions["bootstrap"])))  # as written
        assert json.loads(permissions["reader"]) == ["customers.view"]  # could not create customers: unchanged
        (owner,) = con.execute("SELECT permissions FROM accounts").fetchone() or ("",)
        assert "customers.update" in json.loads(owner)

    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    process = spawn(cli("serve", "--db", str(path), "--port", str(port)), log)
    live = LiveServer(path, f"http://127.0.0.1:{port}/v1", scope.organization_id, keys, process, log)
    wait_until_serving(live.base_url, process, log)
    try:
        with live_client(live) as http:
            read = _data(http.get("/customers/old-customer"))
            assert (read["email"], read["country"], read["attributes"]) == ("old@example.com", "GB", {})
            patched = _data(http.patch("/customers/old-customer", json={"attributes": {"migrated": True}}))
            assert (patched["email"], patched["attributes"]) == ("old@example.com", {"migrated": True})
    finally:
        live.stop()
