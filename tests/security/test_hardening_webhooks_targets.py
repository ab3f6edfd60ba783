"""Webhook SSRF (issue 14, item 8): no tenant reaches the host's network.

Registration refuses non-public address literals in every notation, in both environments; the sender resolves
every name when it connects, refuses any non-public address BEFORE connecting (a spy on the socket opener proves
no connection was attempted), connects to exactly the checked address while keeping the URL's Host, follows no
redirect, and records coarse error classes only. Every receiver here listens on 127.0.0.1; nothing else is
contacted (names that "resolve to private addresses" are `localhost` or a patched resolver)."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.security.webhook_targets import normalise_url
from rewards_lab.service import webhooks as hooks
from rewards_lab.service.deliveries import ERROR_CLASSES, DeliverySettings
from rewards_lab.store.database import Database
from rewards_lab.worker import safe_transport
from rewards_lab.worker.deliveries import new_pool, send
from tests.live_server import LiveServer, bootstrap, cli, free_port, spawn, start_server, wait_until_serving
from tests.webhook_receiver import Receiver, ok, wait_until

LOOPBACK_SPELLINGS = [
    "https://2130706433/h",  # decimal
    "https://0x7f000001/h",  # hex
    "https://0x7f.1/h",
    "https://127.1/h",  # short form
    "https://017700000001/h",  # octal
    "https://0177.0.0.1/h",
    "https://0/h",  # 0.0.0.0 reaches the host itself
    "https://127.0.0.1./h",  # trailing dot
    "https://[::1]/h",
    "https://[::ffff:127.0.0.1]/h",  # IPv4-mapped IPv6
    "https://[::ffff:7f00:1]/h",
    "https://[2002:7f00:1::]/h",  # 6to4 of 127.0.0.1
    "https://[64:ff9b::7f00:1]/h",  # NAT64 of 127.0.0.1
    "https://localhost/h",
    "https://api.localhost/h",
    "https://LOCALHOST./h",
]
PRIVATE_AND_SPECIAL = [
    "https://10.0.0.1/h",
    "https://172.16.5.4/h",
    "https://192.168.1.1/h",
    "https://100.64.0.1/h",  # shared address space (carrier-grade NAT)
    "https://169.254.169.254/latest/meta-data",  # cloud metadata
    "https://[fe80::1]/h",
    "https://[fc00::1]/h",
    "https://224.0.0.1/h",  # multicast
    "https://255.255.255.255/h",
    "https://198.18.0.1/h",  # benchmarking
    "https://192.0.2.1/h",  # documentation
    "https://[2001:db8::1]/h",
    "https://[ff02::1]/h",
]
MALFORMED = [
    "ftp://example.com/h",
    "file:///etc/passwd",
    "gopher://example.com/h",
    "https://user:pw@example.com/h",  # credentials
    "https://user@example.com/h",
    "https://1.2.3.256/h",  # numeric but no address
    "https://1.2.3.4.5/h",
    "https://exa mple.com/h",
    "https://[::1/h",
    "https://example.com:99999/h",
]
PUBLIC = [
    ("HTTPS://Hooks.Example.COM:443/r?x=1#frag", "https://hooks.example.com/r?x=1"),
    ("https://134744072/r", "https://8.8.8.8/r"),  # a public address in decimal: stored dotted
    ("https://[2606:4700:0:0::1]:8443", "https://[2606:4700::1]:8443/"),
    ("https://bücher.example/h", "https://xn--bcher-kva.example/h"),
]


@pytest.mark.parametrize("url", LOOPBACK_SPELLINGS + PRIVATE_AND_SPECIAL + MALFORMED)
@pytest.mark.parametrize("environment", ["sandbox", "production"])
def test_registration_refuses_every_spelling_of_a_non_public_target(url: str, environment: str) -> None:
    with pytest.raises(ServiceError) as refused:
        normalise_url(url, environment, allow_private=False)
    assert refused.value.code == "webhook_url_invalid" and refused.value.details["field"] == "url"


@pytest.mark.parametrize(("url", "stored"), PUBLIC)
def test_registration_normalises_public_urls(url: str, stored: str) -> None:
    assert normalise_url(url, "production", allow_private=False) == stored


def test_the_operator_setting_allows_loopback_and_private_but_never_link_local() -> None:
    assert normalise_url("http://127.1:8080/h", "sandbox", allow_private=True) == "http://127.0.0.1:8080/h"
    assert normalise_url("https://[::1]/h", "production", allow_private=True) == "https://[::1]/h"
    assert normalise_url("http://localhost:9/h", "sandbox", allow_private=True) == "http://localhost:9/h"
    for url in ("https://169.254.169.254/x", "https://0/x", "https://224.0.0.1/x", "https://[fe80::1]/x"):
        with pytest.raises(ServiceError):
            normalise_url(url, "sandbox", allow_private=True)
    with pytest.raises(ServiceError):  # production still requires https
        normalise_url("http://127.0.0.1/h", "production", allow_private=True)


# -- a real server, setting off (the default) -------------------------------------------------------------
@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("ssrf") / "service.duckdb"
    with pytest.MonkeyPatch.context() as env:
        env.delenv("REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE", raising=False)
        env.setenv("REWARDS_LAB_WEBHOOK_RETRY_DELAYS", "0.1")
        live = start_server(db, "Acme", "--plan", "enterprise")
    yield live
    live.stop()


def test_the_server_refuses_internal_targets_in_both_environments(guarded: LiveServer) -> None:
    urls = [u for u in LOOPBACK_SPELLINGS + PRIVATE_AND_SPECIAL if u.startswith("https://")]
    for environment in ("sandbox", "production"):
        with httpx.Client(base_url=guarded.base_url, headers=guarded.headers(environment), timeout=10) as http:
            for url in [*urls, "http://127.0.0.1:9/h", "http://2130706433:9/h"]:
                answer = http.post("/webhooks", json={"url": url, "events": ["reward.issued"]})
                assert answer.status_code == 422, (environment, url, answer.text)
                error = answer.json()["error"]
                assert error["code"] == "webhook_url_invalid" and error["details"]["field"] == "url"
            assert ok(http.get("/webhooks")) == []
            created = ok(
                http.post("/webhooks", json={"url": "HTTPS://Hooks.Example.com:443/r", "events": ["asset.paused"]})
            )
            assert created["url"] == "https://hooks.example.com/r"


def test_an_endpoint_stored_before_the_guard_is_blocked_at_connect_time(tmp_path: Path) -> None:
    """A loopback endpoint registered before this fix (written straight to the file, setting on) is never reached
    by a server without the setting: its attempts say `blocked_address`, the receiver gets nothing."""
    db = tmp_path / "service.duckdb"
    boot = bootstrap(db, "Acme")
    receiver = Receiver()
    try:
        with Database(str(db)) as database:
            scope = Scope(str(boot["organization_id"]), "sandbox")
            body = validate(rq.WebhookCreate, {"url": receiver.url, "events": ["reward.issued"]})
            endpoint = hooks.create_webhook(database, scope, body, allow_private=True)
        keys = boot["api_keys"]
        assert isinstance(keys, dict)
        port = free_port()
        log = (tmp_path / "serve.log").open("wb")
        with pytest.MonkeyPatch.context() as env:
            env.delenv("REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE", raising=False)
            env.setenv("REWARDS_LAB_WEBHOOK_RETRY_DELAYS", "0.1,0.1")
            process = spawn(cli("serve", "--db", str(db), "--port", str(port)), log)
        live = LiveServer(db, f"http://127.0.0.1:{port}/v1", str(boot["organization_id"]), keys, process, log)
        wait_until_serving(live.base_url, process, log)
        try:
            with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
                ok(http.post(f"/webhooks/{endpoint.id}/test"), 202)

                def settled() -> dict[str, Any] | None:
                    (delivery,) = ok(http.get(f"/webhooks/{endpoint.id}/deliveries"))
                    return delivery if delivery["status"] == "failed" else None

                failed = wait_until(settled)
                assert [a["error"] for a in failed["attempts"]] == ["blocked_address"] * 3
                assert all(a["status_code"] is None for a in failed["attempts"])
            assert receiver.snapshot() == []
        finally:
            live.stop()
    finally:
        receiver.close()


# -- the sender in-process: resolve, check, pin -----------------------------------------------------------
@pytest.fixture
def connections_spied(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every socket the sender opens (address, port); the real opener is still used."""
    opened: list[tuple[str, int]] = []
    real = safe_transport.open_socket

    def spy(family: int, address: Any, port: int, timeout: float | None) -> socket.socket:
        opened.append((str(address), port))
        return real(family, address, port, timeout)

    monkeypatch.setattr(safe_transport, "open_socket", spy)
    return opened


def _resolver(monkeypatch: pytest.MonkeyPatch, table: dict[str, list[str] | None]) -> None:
    """Names answered from `table` (None: the name does not exist), without asking any DNS server."""
    real = safe_transport.resolve

    def fake(host: str, port: int) -> list[tuple[int, Any]]:
        if host in table:
            if table[host] is None:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return [
                (socket.AF_INET6 if ":" in a else socket.AF_INET, ipaddress.ip_address(a)) for a in table[host] or []
            ]
        return real(host, port)

    monkeypatch.setattr(safe_transport, "resolve", fake)


def _send(url: str, *, allow_private: bool, timeout_s: float = 3.0) -> tuple[int | None, str | None]:
    delivery = SimpleNamespace(id="dlv_x", organization_id="", kind="webhook.test", body='{"id":"dlv_x"}', url=url)
    with new_pool(DeliverySettings(allow_private_targets=allow_private)) as pool:
        outcome = send(pool, delivery, ["whsec_a"], timeout_s)
    assert outcome.error is None or outcome.error in ERROR_CLASSES
    return outcome.status_code, outcome.error


@pytest.mark.parametrize(
    "host",
    ["localhost", "127.0.0.1", "2130706433", "0x7f000001", "127.1", "017700000001", "0", "[::1]", "[::ffff:127.0.0.1]"],
)
def test_the_sender_blocks_loopback_before_connecting(host: str, connections_spied: list[tuple[str, int]]) -> None:
    receiver = Receiver()
    try:
        assert _send(f"http://{host}:{receiver.port}/hooks", allow_private=False) == (None, "blocked_address")
        assert connections_spied == [] and receiver.snapshot() == []
    finally:
        receiver.close()


@pytest.mark.parametrize(
    "addresses",
    [["10.1.2.3"], ["169.254.169.254"], ["100.64.0.9"], ["93.184.216.34", "192.168.0.10"], ["fd00::1"], ["::"]],
)
def test_names_resolving_to_any_internal_address_are_blocked_before_connecting(
    addresses: list[str], monkeypatch: pytest.MonkeyPatch, connections_spied: list[tuple[str, int]]
) -> None:
    _resolver(monkeypatch, {"hooks.customer.example": addresses})
    assert _send("https://hooks.customer.example/h", allow_private=False) == (None, "blocked_address")
    assert connections_spied == []


def test_the_connection_is_pinned_to_the_checked_address_and_keeps_the_host(
    monkeypatch: pytest.MonkeyPatch, connections_spied: list[tuple[str, int]]
) -> None:
    receiver = Receiver()
    _resolver(monkeypatch, {"hooks.customer.example": ["127.0.0.1"]})
    try:
        assert _send(f"http://hooks.customer.example:{receiver.port}/h", allow_private=True) == (200, None)
        assert connections_spied == [("127.0.0.1", receiver.port)]  # the checked address, resolved once
        (got,) = receiver.snapshot()
        assert got.headers["Host"] == f"hooks.customer.example:{receiver.port}"
    finally:
        receiver.close()


def test_no_redirect_is_followed_and_errors_are_coarse_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = Receiver()
    receiver.answer([302, 404, 503])
    try:
        url = f"http://127.0.0.1:{receiver.port}/hooks"
        assert [_send(url, allow_private=True) for _ in range(3)] == [
            (302, "http_3xx"),
            (404, "http_4xx"),
            (503, "http_5xx"),
        ]
        assert len(receiver.snapshot()) == 3  # the redirect was not followed
    finally:
        receiver.close()
    assert _send(f"http://127.0.0.1:{free_port()}/h", allow_private=True) == (None, "refused")
    _resolver(monkeypatch, {"gone.customer.example": None})
    assert _send("http://gone.customer.example/h", allow_private=False) == (None, "dns")
    with socket.socket() as plain:  # a TLS client meeting a plain-text server: the handshake fails
        plain.bind(("127.0.0.1", 0))
        plain.listen(1)
        answer = threading.Thread(target=_answer_in_plain_text, args=(plain,), daemon=True)
        answer.start()
        status, error = _send(f"https://127.0.0.1:{plain.getsockname()[1]}/h", allow_private=True)
        answer.join(5)
    assert (status, error) == (None, "tls")


def _answer_in_plain_text(listener: socket.socket) -> None:
    listener.settimeout(5)
    connection, _ = listener.accept()
    with connection:
        connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def test_the_setting_is_off_unless_the_operator_turns_it_on() -> None:
    from rewards_lab.security.webhook_targets import private_targets_allowed

    assert not private_targets_allowed({}) and not DeliverySettings.from_env({}).allow_private_targets
    for off in ("", "0", "false", "no", "2"):
        assert not private_targets_allowed({"REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE": off})
    for on in ("1", "true", "YES", " on "):
        assert private_targets_allowed({"REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE": on})
    assert DeliverySettings.from_env({"REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE": "1"}).allow_private_targets
    assert not DeliverySettings().allow_private_targets
