"""A throwaway PostgreSQL cluster for the tests: started in a temporary directory, removed at the end.

`PgCluster.start()` runs Debian's `initdb` and `postgres` (PostgreSQL 15 from the distribution's packages; `make
setup` installs them where missing) in a fresh directory, listening on a free port of 127.0.0.1 (and on a unix
socket in that directory), with a random password: nothing is shared with a system cluster, and two pytest
workers (or two helpers on one machine) each get their own. The server refuses to run as root: as root, the
cluster's files belong to the `postgres` system user (Debian's package creates it; created here if missing) and
the server commands run through `setpriv`. The server is a child of the test process, not a daemon (`pg_ctl start`
would detach it), and dies with it however it dies (SIGKILL, a timeout): a run killed with -9 leaves no server
behind, and its directory is swept by the next start (`sweep_stale`).

The fixtures: `pg_cluster` (session: one cluster per pytest worker) and `pg_database` (a fresh database per test,
dropped after it: `CREATE DATABASE` from `template0` takes about 70 ms). Without the binaries the fixtures skip,
except under CI (`CI` set), where they fail: there `make test` installs the server, so a missing binary is a broken
set-up, and a silent skip would let every PostgreSQL test pass by not running.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

SERVER_USER = "postgres"  # who runs the server when the tests run as root
SUPERUSER = "rewards_test"  # the cluster's superuser role (initdb -U)
PORT_ATTEMPTS = 5  # a free port can be taken between the probe and the server's bind: try another
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
PREFIX = "rewards-lab-pg-"
OWNER_FILE = "owner.pid"  # the test process's pid: a directory whose owner is dead is swept (`sweep_stale`)


class ClusterUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_bindir() -> Path:
    """The directory of `initdb`/`postgres`: `$REWARDS_LAB_PG_BIN`, else Debian's newest
    /usr/lib/postgresql/<major>/bin, else `initdb` on PATH."""
    configured = os.environ.get("REWARDS_LAB_PG_BIN")
    candidates = [Path(configured)] if configured else []
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        majors = sorted((p for p in debian.iterdir() if p.name.isdigit()), key=lambda p: int(p.name), reverse=True)
        candidates += [p / "bin" for p in majors]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            return bindir
    raise ClusterUnavailable("no PostgreSQL server binaries (initdb, postgres): `make setup` installs postgresql")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _server_user() -> pwd.struct_passwd | None:
    """The account the server runs as: None when we are not root (the server then runs as us)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVER_USER],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(SERVER_USER)


@dataclass
class PgCluster:
    """One running cluster: `dsn` reaches its `postgres` database over TCP as the superuser."""

    bindir: Path
    root: Path  # the temporary directory: data/, the socket, the log, the owner's pid
    port: int
    password: str
    user: pwd.struct_passwd | None
    durable: bool
    server: subprocess.Popen[bytes] | None = None
    extra: dict[str, str] = field(default_factory=dict)  # more server settings (`-c name=value`), last word

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}:{quote(self.password)}@127.0.0.1:{self.port}/{dbname}"

    def socket_dsn(self, dbname: str = "postgres") -> str:
        """The same database over the unix socket in `root` (no TCP, no password: the directory is private)."""
        return f"postgresql://{SUPERUSER}@/{dbname}?host={quote(str(self.root))}&port={self.port}"

    @classmethod
    def start(cls, *, durable: bool = False, settings: Mapping[str, str] | None = None) -> PgCluster:
        """initdb, then the server as a child of this process. `durable=False` (tests) turns fsync off: a test
        kills application processes, never the server, so what the server acknowledged stays in its memory;
        benchmarks pass True. `settings`: more server settings, e.g. `archive_mode` and `archive_command`."""
        return cls._launch(durable=durable, settings=settings, prepare=lambda cluster: cluster._initdb())

    @classmethod
    def restore(
        cls, base_backup: Path, *, password: str, settings: Mapping[str, str], durable: bool = False
    ) -> PgCluster:
        """A second cluster from a plain-format `pg_basebackup` directory, recovering with `settings`
        (`restore_command`, `recovery_target_time`, `recovery_target_action=promote`; `recovery.signal` is written
        here). It counts as started once it is promoted and takes writes; a recovery that fails (its target never
        reached) raises with the server's log. `password` is the backed-up cluster's: its roles came along."""

        def copy_backup(cluster: PgCluster) -> None:
            subprocess.run(
                cluster._as_server(["cp", "-a", str(base_backup), str(cluster.data)]), check=True, capture_output=True
            )
            cluster.server_file(cluster.data / "recovery.signal", "")

        return cls._launch(durable=durable, settings=settings, prepare=copy_backup, password=password)

    @classmethod
    def _launch(
        cls,
        *,
        durable: bool,
        settings: Mapping[str, str] | None,
        prepare: Callable[[PgCluster], None],
        password: str | None = None,
    ) -> PgCluster:
        bindir = find_bindir()
        user = _server_user()
        sweep_stale()
        root = Path(tempfile.mkdtemp(prefix=PREFIX))
        try:
            (root / OWNER_FILE).write_text(str(os.getpid()))
            if user is not None:
                os.chown(root, user.pw_uid, user.pw_gid)
            password = password or secrets.token_urlsafe(18)
            cluster = cls(bindir, root, 0, password, user, durable, extra=dict(settings or {}))
            prepare(cluster)
            for _ in range(PORT_ATTEMPTS):
                cluster.port = free_port()
                if cluster._serve():
                    return cluster
            raise RuntimeError(f"PostgreSQL did not start: {cluster._log_tail()}")
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    def server_file(self, path: Path, text: str) -> None:
        """Write `path` as a file the server's user owns."""
        path.write_text(text)
        if self.user is not None:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def run_tool(self, name: str, *args: str, connect: bool = True) -> subprocess.CompletedProcess[str]:
        """One of the cluster's programs (`pg_basebackup`, `pg_verifybackup`, ...) as the server's user; with
        `connect`, given the socket in `root` (trusted: the directory is private). Raises with its output if it
        fails."""
        where = ["-h", str(self.root), "-p", str(self.port), "-U", SUPERUSER] if connect else []
        argv = [str(self.bindir / name), *where, *args]
        done = subprocess.run(self._as_server(argv), capture_output=True, text=True, cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done

    def _settings(self) -> list[str]:
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "max_connections": "100",
            "shared_buffers": "32MB",
        }
        if not self.durable:
            settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        settings |= self.extra
        return [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]

    def _as_server(self, argv: Sequence[str], *, die_with_us: bool = False) -> list[str]:
        """`argv` as the server's user. `die_with_us`: SIGKILL when this process dies, however it dies (setpriv
        sets it after changing the user: the kernel clears it on a change of credentials)."""
        if self.user is None:
            return list(argv)
        death = ["--pdeathsig", "KILL"] if die_with_us else []
        name = self.user.pw_name
        return ["setpriv", "--reuid", name, "--regid", name, "--clear-groups", *death, "--", *argv]

    def _serve(self) -> bool:
        """Start `postgres` in the foreground as our child (not `pg_ctl start`, which detaches it: a test run
        killed with -9 would leave it running). True once it accepts connections; False if it exited (its port
        was taken between the probe and its bind)."""
        argv = self._as_server(
            [str(self.bindir / "postgres"), "-D", str(self.data), *self._settings()], die_with_us=True
        )
        with self.log.open("ab") as log:
            self.server = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.root,
                preexec_fn=_die_with_parent if self.user is None else None,  # noqa: PLW1509 - the fork's only job
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                return False
            if b"ready to accept connections" in self.log.read_bytes():
                return True
            time.sleep(0.02)
        self.server.kill()
        raise RuntimeError(f"PostgreSQL not ready after {START_TIMEOUT_S} s: {self._log_tail()}")

    def _initdb(self) -> None:
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        if self.user is not None:
            os.chown(pwfile, self.user.pw_uid, self.user.pw_gid)
        try:
            argv = [
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                f"--pwfile={pwfile}",
                "--auth-host=scram-sha-256",
                "--auth-local=trust",  # the socket lives in our private directory
                "--encoding=UTF8",
                "--locale=C",  # byte order for text, as DuckDB sorts it (pagination cursors depend on it)
                "--no-sync",
            ]
            subprocess.run(self._as_server(argv), check=True, capture_output=True, cwd=self.root)
        finally:
            pwfile.unlink()

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no server log)"

    def stop(self) -> None:
        """A fast shutdown (SIGINT: open sessions are ended), then the directory removed."""
        try:
            if self.server is not None and self.server.poll() is None:
                self.server.send_signal(signal.SIGINT)
                try:
                    self.server.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.server.kill()
                    self.server.wait()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def server_tempdir() -> Path:
    """A fresh temporary directory the server's user owns, beside the clusters' (a WAL archive, base backups):
    the caller removes it; a run killed before that leaves it to `sweep_stale`, like a cluster's."""
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix=PREFIX))
    (root / OWNER_FILE).write_text(str(os.getpid()))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    return root


def _die_with_parent() -> None:
    """In the child, before exec (not root: no change of user): SIGKILL when the test process dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> None:
    """Remove the directories of clusters whose test process died without stopping them (their server died with
    it). Another run's live cluster (its owner alive) is never touched."""
    for root in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            owner = int((root / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # being created right now, or not ours
        if not _alive(owner):
            shutil.rmtree(root, ignore_errors=True)


def start_or_skip(settings: Mapping[str, str] | None = None) -> PgCluster:
    """A cluster (with more server `settings` if given); without the binaries a skip, or under CI a failure (see
    the module's docstring)."""
    try:
        return PgCluster.start(settings=settings)
    except ClusterUnavailable as missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} (CI installs it: a skip would hide every PostgreSQL test)")
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    cluster = start_or_skip()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_database(pg_cluster: PgCluster) -> Iterator[str]:
    """A fresh empty database for one test: its DSN. Dropped after the test (its sessions ended first)."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    try:
        yield pg_cluster.dsn(name)
    finally:
        with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


PG_SECRET_KEY = bytes(range(32))  # the template database's key check value is sealed under it: every clone's key
TEMPLATE = "rewards_template"


@pytest.fixture(scope="session")
def pg_template(pg_cluster: PgCluster) -> str:
    """A database migrated by `PostgresStore` once per session (and per pytest worker): the template of
    `pg_store`'s databases. Its name."""
    import psycopg

    from rewards_lab.store.postgres.store import PostgresStore

    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{TEMPLATE}" TEMPLATE template0')
    PostgresStore(pg_cluster.dsn(TEMPLATE), secret_key=PG_SECRET_KEY).close()  # no session may stay on a template
    return TEMPLATE


@pytest.fixture
def pg_store_url(pg_cluster: PgCluster, pg_template: str) -> Iterator[str]:
    """A migrated database for one test, cloned from the template (`CREATE DATABASE ... TEMPLATE`), dropped after:
    its URL. Open it with `secret_key=PG_SECRET_KEY`."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    try:
        yield pg_cluster.dsn(name)
    finally:
        with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def pg_store(pg_store_url: str) -> Iterator[object]:
    """A `PostgresStore` on a fresh migrated database (`pg_store_url`), closed after the test."""
    from rewards_lab.store.postgres.store import PostgresStore

    store = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
    try:
        yield store
    finally:
        store.close()
