"""The operator's channel into a running server: a Unix socket beside its database, for an online backup.

`rewards-lab serve --db D` listens on `D.admin.sock`; `rewards-lab backup --online --db D --out DIR` connects to
it, and the serving process copies its own database (`store.backup.online_backup`) into `DIR` while it keeps
serving. Chosen over an HTTP endpoint because:

- it is reachable only on this host, through the filesystem: nothing of it faces the network, whatever `--host`
  the API listens on, and no tenant credential (API key, session) can ever reach it;
- it is authenticated by the kernel: the peer's uid comes from `SO_PEERCRED`, which the client cannot forge,
  and only the server's own user (or root) is permitted; the socket file itself is 0600 from its first instant
  (bound in a private 0700 directory, then renamed into place). There is no operator token to issue, store,
  rotate or leak;
- the backup is written by the server on its host, so an operator must be on that host to take it away anyway;
  an HTTP caller could make the server write wherever it may, from anywhere.

One request per connection, one JSON line each way: `{"command": "backup", "out": "/absolute/dir"}` answers
`{"ok": true, "manifest": {...}, "verify": {...}}` or `{"ok": false, "error": "..."}`. Requests are bounded
(size, time) and handled one at a time.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rewards_lab.store.backup import BackupError, online_backup
from rewards_lab.store.database import DuckDBStore
from rewards_lab.worker.thread_names import name_os_thread

log = logging.getLogger(__name__)
SOCKET_SUFFIX = ".admin.sock"
MAX_REQUEST_BYTES = 64 * 1024
REQUEST_TIMEOUT_S = 10.0
_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes; longer paths go through /proc/self/fd (Linux)


def socket_path(db_path: str | Path) -> Path:
    return Path(f"{db_path}{SOCKET_SUFFIX}")


def peer_allowed(peer_uid: int, own_uid: int) -> bool:
    """The permission check: the server's own user, or root."""
    return peer_uid in (own_uid, 0)


def _peer_uid(connection: socket.socket) -> int:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", credentials)
    return int(uid)


@contextmanager
def _address(path: Path) -> Iterator[str]:
    """An address for `path` that fits in sockaddr_un: itself, or `/proc/self/fd/<dir>/<name>` when too long."""
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        yield str(path)
        return
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)


def _read_line(connection: socket.socket) -> bytes:
    received = b""
    while b"\n" not in received:
        chunk = connection.recv(4096)
        if not chunk:
            break
        received += chunk
        if len(received) > MAX_REQUEST_BYTES:
            raise ValueError(f"a request is at most {MAX_REQUEST_BYTES} bytes")
    return received.split(b"\n", 1)[0]


class AdminSocket:
    """Listens beside the database while `serve` runs; `start` and `stop` from the app's lifespan."""

    def __init__(self, database: DuckDBStore) -> None:
        self.database = database
        self.path = socket_path(database.path)
        self._listener: socket.socket | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="admin-socket", daemon=True)

    def start(self) -> None:
        try:
            self._listener = self._bind()
        except OSError as error:  # no online backup, but the service serves
            log.warning("no admin socket at %s (%s): online backups are unavailable", self.path, error)
            return
        self._thread.start()

    def _bind(self) -> socket.socket:
        staging = Path(tempfile.mkdtemp(prefix=".admin.", dir=self.path.parent))  # 0700
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            staged = staging / "s"
            with _address(staged) as address:
                listener.bind(address)
            os.chmod(staged, 0o600)
            os.replace(staged, self.path)  # a socket a crashed server left is stale: the database lock was free
            listener.listen(4)
            listener.settimeout(0.5)  # `accept` wakes up to see `stop`
        except OSError:
            listener.close()
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return listener

    def stop(self) -> None:
        if self._listener is None:
            return
        self._stop.set()
        self._thread.join(timeout=120)  # a backup in progress finishes first
        self._listener.close()
        self.path.unlink(missing_ok=True)

    def _run(self) -> None:
        name_os_thread()
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                log.exception("the admin socket failed")
                return
            with connection:
                connection.settimeout(REQUEST_TIMEOUT_S)
                try:
                    answer = self._answer(connection)
                except Exception as error:  # noqa: BLE001 - one bad request never stops the channel
                    log.exception("admin request failed")
                    answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
                try:
                    connection.sendall(json.dumps(answer, default=str).encode() + b"\n")
                except OSError:
                    log.warning("the admin client went away before its answer")

    def _answer(self, connection: socket.socket) -> dict[str, Any]:
        try:
            line = _read_line(connection)  # read (bounded) even when refusing: unread data would reset the answer
        except (ValueError, OSError) as error:
            return {"ok": False, "error": f"not a request ({type(error).__name__}: {error})"}
        uid = _peer_uid(connection)
        if not peer_allowed(uid, os.geteuid()):
            log.warning("admin request refused: uid %d is not the server's user", uid)
            return {"ok": False, "error": f"permission denied: uid {uid} is not the server's user or root"}
        try:
            request = json.loads(line)
        except ValueError as error:
            return {"ok": False, "error": f"not a request ({type(error).__name__}: {error})"}
        out = request.get("out") if isinstance(request, dict) else None
        if not isinstance(out, str) or request.get("command") != "backup":
            return {"ok": False, "error": 'the only request is {"command": "backup", "out": "/absolute/dir"}'}
        try:
            manifest, report = online_backup(self.database, Path(out))
        except (BackupError, OSError) as error:
            return {"ok": False, "error": str(error)}
        log.info("online backup to %s", out)
        return {
            "ok": True,
            "backup": out,
            **manifest.to_json(),
            "verify": {"ok": report.ok, "problems": report.problems},
        }


def request_backup(db_path: str | Path, out_dir: str | Path, timeout_s: float = 3600.0) -> dict[str, Any]:
    """Ask the server that serves `db_path` for an online backup into `out_dir`; its answer. `ConnectionError`
    when no server listens there."""
    path = socket_path(db_path)
    request = {"command": "backup", "out": str(Path(out_dir).resolve())}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout_s)
        try:
            with _address(path) as address:
                client.connect(address)
        except (FileNotFoundError, ConnectionRefusedError) as error:
            raise ConnectionError(
                f"no server answers at {path}: is `rewards-lab serve --db {db_path}` running?"
            ) from error
        client.sendall(json.dumps(request).encode() + b"\n")
        client.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := client.recv(65536):
            received += chunk
    answer: dict[str, Any] = json.loads(received) if received else {"ok": False, "error": "no answer"}
    return answer
