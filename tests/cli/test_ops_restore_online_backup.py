"""Issue 27 item 7: `restore` never replaces a database a running server holds, it verifies the staged copy before
anything is replaced, and a running server backs itself up (`backup --online`) while it keeps answering writes:
the copy restores into a new file whose ledger verifies and which holds everything acknowledged before the backup
began. Against real `rewards-lab serve` processes on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx

from rewards_lab.store.backup import DATABASE_NAME, KEY_NAME, MANIFEST_NAME
from rewards_lab.store.database import Database
from rewards_lab.store.verification import verify_ledger
from rewards_lab.worker.admin_socket import peer_allowed, socket_path
from tests.live_server import LiveServer, bootstrap, cli, start_server, stop_and_verify

CLI_TIMEOUT_S = 180
EVENT = "order.completed"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), capture_output=True, text=True, timeout=CLI_TIMEOUT_S)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ok(response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


def _customer_ids(db: Path) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {row[0] for row in con.execute("SELECT external_id FROM customers").fetchall()}


def _event_ids(db: Path) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {row[0] for row in con.execute("SELECT external_event_id FROM events").fetchall()}


def _offline_backup(tmp_path: Path, name: str) -> Path:
    """A backup of a fresh database of another organization (what an operator restores by mistake)."""
    other = tmp_path / f"{name}.duckdb"
    bootstrap(other, "Other")
    out = tmp_path / f"{name}-backup"
    made = _run("backup", "--db", str(other), "--out", str(out))
    assert made.returncode == 0, made.stderr
    return out


# -- restore ---------------------------------------------------------------------------------------------------
def test_restore_over_a_running_servers_database_is_refused_and_its_data_stays(tmp_path: Path) -> None:
    backup = _offline_backup(tmp_path, "other")
    live = start_server(tmp_path / "live.duckdb", "Live")
    try:
        with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
            before = [_ok(http.post("/customers", json={"external_id": f"before-{n}"}), 201) for n in range(5)]
            refused = _run("restore", "--from", str(backup), "--db", str(live.db), "--force")
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert f"in use by process {live.process.pid}" in refused.stderr, refused.stderr
            assert not Path(f"{live.db}.restoring").exists()
            after = _ok(http.post("/customers", json={"external_id": "after"}), 201)
            listed = _ok(http.get("/customers", params={"limit": 100}), 200)
            assert {c["id"] for c in listed} == {c["id"] for c in [*before, after]}
    finally:
        stop_and_verify(live)
    assert _customer_ids(live.db) == {*(f"before-{n}" for n in range(5)), "after"}


def test_a_backup_whose_ledger_does_not_verify_replaces_nothing(tmp_path: Path) -> None:
    backup = _offline_backup(tmp_path, "damaged")
    copy = backup / DATABASE_NAME
    with duckdb.connect(str(copy)) as con:  # a ledger out of balance, with a manifest that matches the file
        con.execute(
            "INSERT INTO balances SELECT id, 'sandbox', 'acc_x', 'ast_x', 5, NULL, now()::TIMESTAMP "
            "FROM organizations LIMIT 1"
        )  # a balance no entry explains: snapshot_mismatch
    manifest = json.loads((backup / MANIFEST_NAME).read_text())
    manifest.update(sha256=_sha256(copy), size_bytes=copy.stat().st_size)
    (backup / MANIFEST_NAME).write_text(json.dumps(manifest))
    target = tmp_path / "kept.duckdb"
    bootstrap(target, "Kept")
    kept = (_sha256(target), Path(f"{target}.secret-key").read_bytes())
    refused = _run("restore", "--from", str(backup), "--db", str(target), "--force")
    assert refused.returncode == 2 and "does not verify" in refused.stderr, refused.stdout + refused.stderr
    assert (_sha256(target), Path(f"{target}.secret-key").read_bytes()) == kept
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("kept")) == [
        "kept.duckdb",
        "kept.duckdb.secret-key",
    ]


# -- online backup ---------------------------------------------------------------------------------------------
class Writers:
    """Clients that keep writing to a live server: customers (201) and reward events (202), each remembered once
    the server has acknowledged it."""

    def __init__(self, live: LiveServer, shoppers: list[str]) -> None:
        self.live = live
        self.shoppers = shoppers
        self.customers: list[str] = []
        self.events: list[str] = []
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self._customers), threading.Thread(target=self._events)]

    def __enter__(self) -> Writers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)

    def _customers(self) -> None:
        with httpx.Client(base_url=self.live.base_url, headers=self.live.headers(), timeout=30) as http:
            for n in range(1_000_000):
                if self.stop.is_set():
                    return
                answer = http.post("/customers", json={"external_id": f"w-{n}"})
                if answer.status_code != 201:
                    self.failures.append(answer.text)
                    return
                self.customers.append(f"w-{n}")

    def _events(self) -> None:
        with httpx.Client(base_url=self.live.base_url, headers=self.live.headers(), timeout=30) as http:
            for n in range(1_000_000):
                if self.stop.is_set():
                    return
                shopper = self.shoppers[n % len(self.shoppers)]
                body = {"type": EVENT, "external_event_id": f"e-{n}", "customer_id": shopper, "data": {}}
                answer = http.post("/events", json=body)
                if answer.status_code != 202:
                    self.failures.append(answer.text)
                    return
                self.events.append(f"e-{n}")

    def acknowledged(self) -> tuple[set[str], set[str]]:
        return set(self.customers), set(self.events)


def _rewarding_programme(http: httpx.Client) -> list[str]:
    asset = _ok(http.post("/assets", json={"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0}), 201)
    _ok(http.post(f"/assets/{asset['id']}/activate"), 200)
    programme = _ok(http.post("/reward-programs", json={"name": "Stars", "asset_id": asset["id"]}), 201)
    rule = {
        "program_id": programme["id"],
        "event_type": EVENT,
        "actions": [{"type": "issue", "amount": {"fixed": "10"}}],
    }
    _ok(http.post("/reward-rules", json=rule), 201)
    _ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    shoppers = [f"shopper-{n}" for n in range(4)]
    for shopper in shoppers:
        customer = _ok(http.post("/customers", json={"external_id": shopper}), 201)
        _ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    return shoppers


def test_an_online_backup_under_writes_restores_into_a_new_file_that_verifies(tmp_path: Path) -> None:
    live = start_server(tmp_path / "online.duckdb", "Online")
    out = tmp_path / "online-backup"
    try:
        with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
            shoppers = _rewarding_programme(http)
        with Writers(live, shoppers) as writers:
            time.sleep(1.0)
            customers_before, events_before = writers.acknowledged()  # acknowledged before the backup began
            made = _run("backup", "--online", "--db", str(live.db), "--out", str(out))
            customers_after, events_after = writers.acknowledged()
            time.sleep(0.5)
        assert not writers.failures, writers.failures[:3]
        assert made.returncode == 0, made.stdout + made.stderr
        answer = json.loads(made.stdout)
        assert answer["verify"] == {"ok": True, "problems": {}} and answer["secret_key"] == "included"
        # the server kept answering writes while it copied itself
        assert len(customers_after) > len(customers_before) and len(events_after) > len(events_before)
        with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
            assert http.get("/health/ready").status_code == 200
    finally:
        stop_and_verify(live)
    assert _mode(out) == 0o700
    assert {p.name: _mode(p) for p in out.iterdir()} == {DATABASE_NAME: 0o600, KEY_NAME: 0o600, MANIFEST_NAME: 0o600}
    assert json.loads((out / MANIFEST_NAME).read_text())["sha256"] == _sha256(out / DATABASE_NAME) == answer["sha256"]

    restored = tmp_path / "restored" / "copy.duckdb"
    back = _run("restore", "--from", str(out), "--db", str(restored))
    assert back.returncode == 0, back.stdout + back.stderr
    assert json.loads(back.stdout)["verify"]["ok"] is True
    with Database(restored) as database:  # opens with the restored key file; the ledger checked once more
        report = verify_ledger(database.reader())
        assert report.ok and report.transactions > 0, report
    kept_customers = _customer_ids(restored) - {f"shopper-{n}" for n in range(4)}
    kept_events = _event_ids(restored)
    # everything acknowledged before the backup began is in it, and nothing that was never acknowledged
    assert customers_before <= kept_customers <= set(writers.customers)
    assert events_before <= kept_events <= set(writers.events)
    # the live file kept everything, before, during and after
    assert _customer_ids(live.db) >= set(writers.customers) and _event_ids(live.db) >= set(writers.events)


SYSTEM_PYTHON = "/usr/bin/python3"  # readable by another user (the test's interpreter may live under /root)
NOBODY = 65534


def _as_nobody(path: Path) -> Any:
    """Ask for a backup as uid 65534. The socket is made writable for all and reached through a directory
    descriptor passed to the child, so only the server's own check (the peer's uid) stands in the way."""
    path.chmod(0o666)
    path.parent.chmod(0o711)  # searchable; its ancestors (pytest's, 0700) are skipped by the descriptor
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        script = (
            "import socket, sys; c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); "
            "c.sendall(sys.argv[2].encode() + b'\\n'); c.shutdown(socket.SHUT_WR); "
            "sys.stdout.write(c.makefile('rb').read().decode())"
        )
        request = json.dumps({"command": "backup", "out": str(path.parent / "by-nobody")})
        child = subprocess.run(
            [SYSTEM_PYTHON, "-c", script, f"/proc/self/fd/{directory}/{path.name}", request],
            capture_output=True, text=True, timeout=60, user=NOBODY, group=NOBODY, pass_fds=(directory,),
        )  # fmt: skip
    finally:
        os.close(directory)
        path.chmod(0o600)
        path.parent.chmod(0o700)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout)


def test_the_online_backup_channel_is_private_and_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    db = tmp_path / "channel.duckdb"
    nobody = _run("backup", "--online", "--db", str(db), "--out", str(tmp_path / "none"))
    assert nobody.returncode == 2 and "no server answers" in nobody.stderr
    live = start_server(db, "Channel")
    try:
        path = socket_path(db)
        assert stat.S_ISSOCK(path.stat().st_mode) and _mode(path) == 0o600
        assert peer_allowed(os.geteuid(), os.geteuid()) and peer_allowed(0, 1000)
        assert not peer_allowed(1001, 1000)
        for request in (b"not json\n", b'{"command": "restore", "out": "/tmp/x"}\n', b"[1]\n"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(str(path))
                client.sendall(request)
                client.shutdown(socket.SHUT_WR)
                answer = json.loads(client.makefile("rb").read())
            assert answer["ok"] is False and answer["error"], request
        if os.geteuid() == 0 and Path(SYSTEM_PYTHON).exists():  # another user, past the file's mode: SO_PEERCRED
            assert _as_nobody(path) == {
                "ok": False,
                "error": "permission denied: uid 65534 is not the server's user or root",
            }
            assert not (tmp_path / "by-nobody").exists()
        relative = _run("backup", "--online", "--db", str(db), "--out", str(tmp_path / "taken"))
        assert relative.returncode == 0, relative.stderr
        again = _run("backup", "--online", "--db", str(db), "--out", str(tmp_path / "taken"))
        assert again.returncode == 2 and "not an empty directory" in again.stderr
    finally:
        stop_and_verify(live)
    assert not socket_path(db).exists()  # removed when the server stops
