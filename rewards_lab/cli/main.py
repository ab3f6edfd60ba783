"""The `rewards-lab` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewards_lab.store.api import UnsupportedStore, duckdb_path, is_postgres, open_store
from rewards_lab.store.secret_box import SecretKeyError

LOCAL_PROXIES = "127.0.0.1,::1"


def _demo(args: argparse.Namespace) -> int:
    from rewards_lab.cli.demo import main as demo

    demo(args.db)
    return 0


def _verify(args: argparse.Namespace) -> int:
    with open_store(args.db) as store:
        report = store.verify_ledger()
    print(
        json.dumps(
            {
                "ok": report.ok,
                "transactions": report.transactions,
                "entries": report.entries,
                "balances": report.balances,
                "problems": report.problems,
            },
            indent=2,
        )
    )
    return 0 if report.ok else 1


def _batch_size(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError("must be between 1 and 10000")
    return value


def _per_minute(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError("must be between 1 and 1000000")
    return value


def _megabytes(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError("must be a number of seconds") from error
    if not value > 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return value


def _workers(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


ONE_DUCKDB_PROCESS = "a DuckDB file is opened by one process: --workers needs a PostgreSQL --db"


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from rewards_lab.api import body_limit as limits
    from rewards_lab.api.http_protocol import BoundedHttpToolsProtocol
    from rewards_lab.api.serving import FACTORY, OPTIONS_ENV, WORKER_HEALTHCHECK_S, ServeOptions, build_app
    from rewards_lab.security.webhook_targets import ALLOW_PRIVATE_ENV
    from rewards_lab.service.deliveries import DeliverySettings
    from rewards_lab.service.retention import RetentionSettings

    postgres = is_postgres(args.db)
    db = args.db if postgres else duckdb_path(args.db)
    if args.workers > 1 and not postgres:
        print(f"rewards-lab serve: {ONE_DUCKDB_PROCESS}", file=sys.stderr)
        return 2
    if not postgres:
        Path(db).parent.mkdir(parents=True, exist_ok=True)
    if args.allow_private_webhook_targets:
        # one setting for registration (read from the environment) and the sender (DeliverySettings); the
        # environment is inherited by --workers' children
        os.environ[ALLOW_PRIVATE_ENV] = "1"
    try:
        # REWARDS_LAB_WEBHOOK_RETRY_DELAYS, _TIMEOUT_S, _LEASE_MARGIN_S, REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE and
        # REWARDS_LAB_RETENTION_* (service/retention.py): checked here, read again by each process's app
        DeliverySettings.from_env()
        RetentionSettings.from_env()
    except ValueError as error:
        print(f"rewards-lab serve: {error}", file=sys.stderr)
        return 2
    options = ServeOptions(
        db=db,
        worker_batch_size=args.worker_batch_size,
        session_lifetime_s=args.session_lifetime_s,
        unauthenticated_limit_per_minute=args.unauthenticated_limit_per_minute,
        min_free_disk_bytes=args.min_free_disk_mb * 1_048_576,
        expiry_interval_s=args.expiry_interval_s,
        tier_interval_s=args.tier_interval_s,
        shared=postgres,  # other processes may serve it: api/serving.background_workers
    )
    # No uvicorn access log: the service's own request log records every /v1 request (and costs less).
    # Proxy trust is explicit: by default X-Forwarded-For is ignored and every limit counts the socket peer
    # (uvicorn's own default trusts 127.0.0.1, or $FORWARDED_ALLOW_IPS; neither is consulted here).
    trusted = args.forwarded_allow_ips or (LOCAL_PROXIES if args.proxy_headers else "")
    # uvicorn's own connection, keep-alive and request-head limits (api/body_limit.py, api/http_protocol.py);
    # the body limit is the application's own. uvicorn handles SIGINT and SIGTERM: it stops accepting, finishes
    # in-flight requests, then the app's lifespan stops the event worker after its current batch.
    server: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        "access_log": False,
        "proxy_headers": args.proxy_headers or bool(trusted),
        "forwarded_allow_ips": trusted,
        "http": BoundedHttpToolsProtocol,  # httptools with a bounded request head (size and deadline)
        "limit_concurrency": limits.MAX_CONCURRENCY,
        "timeout_keep_alive": limits.KEEP_ALIVE_TIMEOUT_S,
    }
    if args.workers > 1:
        # uvicorn's supervisor: one socket, N spawned children each building its app (api/serving.py), a dead
        # child restarted, SIGTERM forwarded
        os.environ[OPTIONS_ENV] = options.to_json()
        open_store(db).close()  # refuse an unreachable or unfit database (and migrate it) before spawning
        uvicorn.run(
            FACTORY, factory=True, workers=args.workers, timeout_worker_healthcheck=WORKER_HEALTHCHECK_S, **server
        )
        return 0
    with open_store(db) as database:
        uvicorn.run(build_app(database, options), **server)
    return 0


def _bootstrap(args: argparse.Namespace) -> int:
    from rewards_lab.contract.errors import ServiceError
    from rewards_lab.contract.permissions import ALL_PERMISSIONS
    from rewards_lab.contract.scope import ENVIRONMENTS, Scope
    from rewards_lab.security.access import create_api_key
    from rewards_lab.security.sessions import check_new_account, create_owner_account
    from rewards_lab.service.organizations import create_organization

    if args.email is not None and not args.password:
        raise SystemExit("bootstrap: --email needs --password")
    if args.totp and args.email is None:
        raise SystemExit("bootstrap: --totp needs --email and --password")
    if not is_postgres(args.db):
        Path(duckdb_path(args.db)).parent.mkdir(parents=True, exist_ok=True)
    with open_store(args.db) as database:
        try:
            if args.email is not None:
                check_new_account(database, args.email, args.password)  # refuse before creating anything
            org = create_organization(database, args.org, args.plan, args.rate_limit)
            keys = {
                environment: create_api_key(
                    database, Scope(org.id, environment), "bootstrap", sorted(ALL_PERMISSIONS)
                ).secret
                for environment in ENVIRONMENTS
            }
            totp_secret = None
            if args.email is not None:
                _, totp_secret = create_owner_account(database, org.id, args.email, args.password, totp=args.totp)
        except ServiceError as error:
            raise SystemExit(f"bootstrap: {error.message}") from None
    print(json.dumps({"organization_id": org.id, "api_keys": keys, "totp_secret": totp_secret}))
    return 0


def _contract_export(args: argparse.Namespace) -> int:
    from rewards_lab.artefacts.export import export

    for path in export(Path(args.out)):
        print(path)
    return 0


FEATURE_TOTALS = (
    "requested",
    "cut",
    "limited",
    "reversed",
    "shortfall",
    "net",
    "redeemed",
    "redemptions_refused",
    "expired",
    "expired_lots",
)


def _printable(value: object) -> object:
    return value if isinstance(value, int) else str(value)


def _replay(args: argparse.Namespace) -> int:
    """Replay an event history through a programme file; write the issuances and print a short summary (or the
    error envelope: a failure is never a traceback). Warnings about the inputs (replay.input_checks) are in the
    summary and on stderr."""
    import warnings

    from rewards_lab.contract.errors import ServiceError
    from rewards_lab.replay.input_checks import ReplayInputWarning

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReplayInputWarning)  # printed once below, not also by Python
            definition, events, totals, seconds, warned = _run_replay(args)
    except ServiceError as error:
        print(json.dumps({"error": error.to_dict()}, default=str))
        return 2
    except Exception as error:  # noqa: BLE001 - the CLI's envelope, never a traceback (issue 27)
        print(json.dumps({"error": _failure(error)}, default=str))
        return 1
    for warning in warned:
        print(f"rewards-lab replay: warning: {warning}", file=sys.stderr)
    summary = {
        "events": events,
        "issuances": totals["issuances"],
        "issued": str(totals["issued"]),
        "asset": definition.asset.symbol,
        "failed": totals["failed"],
        "failed_by_code": totals["failed_by_code"],
        **{key: _printable(totals[key]) for key in FEATURE_TOTALS if key in totals},
        "seconds": round(seconds, 3),
        "engine": args.engine,
        "out": str(args.out),
        **({"warnings": list(warned)} if warned else {}),
    }
    print(json.dumps(summary, indent=2))
    return 0


def _run_replay(args: argparse.Namespace) -> tuple[Any, int, dict[str, Any], float, tuple[str, ...]]:
    """(definition, events read, totals, seconds, warnings) of the replay the arguments ask for."""
    from rewards_lab.replay.entry import run_replay
    from rewards_lab.replay.to_file import replay_to_file

    if args.engine == "duckdb":  # streamed straight to the file when it can be (replay/to_file.py)
        written = replay_to_file(
            args.events,
            args.programme,
            args.out,
            opening_supply=args.opening_supply,
            customers=args.customers,
            redemptions=args.redemptions,
            as_of=args.as_of,
        )
        return written.definition, written.events_processed, written.totals, written.seconds, written.warnings
    result = run_replay(
        args.events,
        args.programme,
        engine=args.engine,
        opening_supply=args.opening_supply,
        customers=args.customers,
        redemptions=args.redemptions,
        as_of=args.as_of,
    )
    result.write(args.out)
    warned = tuple(getattr(result, "warnings", ()))
    return result.definition, result.events_processed, result.totals(), result.seconds, warned


def _failure(error: Exception) -> dict[str, Any]:
    """The envelope of a replay that failed for a reason other than its inputs: out of memory (with what to do),
    out of disk, or anything else, named by its type."""
    import duckdb

    from rewards_lab.contract.errors import ServiceError

    if isinstance(error, duckdb.OutOfMemoryException | MemoryError):
        message = (
            "the replay ran out of memory (DuckDB holds at most 1 GB and spills the rest beside --out): free "
            f"memory or disk space beside the output and retry ({_first_line(error)})"
        )
    elif isinstance(error, OSError):
        message = f"the replay could not read or write a file: {_first_line(error)}"
    else:
        message = f"the replay failed: {type(error).__name__}: {_first_line(error)}"
    envelope = ServiceError("internal_error", message, cause=type(error).__name__).to_dict()
    return envelope


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rewards-lab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the standard integration loop in-process over a DuckDB file")
    demo.add_argument("--db", default="data/demo.duckdb", help="DuckDB file (created if absent)")
    demo.set_defaults(run=_demo)
    verify = commands.add_parser("verify", help="recompute every balance from the ledger entries and check it")
    verify.add_argument("--db", required=True)
    verify.set_defaults(run=_verify)
    serve = commands.add_parser("serve", help="run the /v1 service (and its event worker) in the foreground")
    serve.add_argument("--db", required=True, help="DuckDB file (created if absent)")
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        help="API processes (default 1; above 1 needs a PostgreSQL --db: a DuckDB file is opened by one process)",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="warning")
    serve.add_argument(
        "--worker-batch-size",
        type=_batch_size,
        default=1000,
        help="most events the worker processes in one transaction (1-10000; default 1000)",
    )
    serve.add_argument("--session-lifetime-s", type=int, default=12 * 3600, help="login session lifetime")
    serve.add_argument(
        "--allow-private-webhook-targets",
        action="store_true",
        help="let webhooks reach loopback and private addresses (local development only; "
        "same as REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE=1)",
    )
    serve.add_argument(
        "--unauthenticated-limit-per-minute",
        type=_per_minute,
        default=100,
        help="requests per minute one client address may make without valid credentials before every request "
        "from it is refused until the minute ends (1-1000000; default 100)",
    )
    serve.add_argument(
        "--min-free-disk-mb",
        type=_megabytes,
        default=256,
        help="GET /v1/health/ready answers 503 when the database's filesystem has less free space (default 256)",
    )
    serve.add_argument(
        "--expiry-interval-s",
        type=_positive_seconds,
        default=5.0,
        help="how often the expiry worker looks for lots whose time has come (default 5)",
    )
    serve.add_argument(
        "--tier-interval-s",
        type=_positive_seconds,
        default=30.0,
        help="how often the tier worker applies the tier reviews and grace ends that have come (default 30)",
    )
    serve.add_argument(
        "--forwarded-allow-ips",
        default=None,
        help="comma-separated addresses or networks of the reverse proxies whose X-Forwarded-For/-Proto are "
        "trusted (implies --proxy-headers; default: none, the socket peer is the client)",
    )
    serve.add_argument(
        "--proxy-headers",
        action="store_true",
        help=f"read X-Forwarded-For/-Proto from the --forwarded-allow-ips proxies, or when none is given from a "
        f"proxy on this host ({LOCAL_PROXIES}) (default: off)",
    )
    serve.set_defaults(run=_serve)
    bootstrap = commands.add_parser("bootstrap", help="create an organization and one API key per environment")
    bootstrap.add_argument("--db", required=True)
    bootstrap.add_argument("--org", required=True, help="organization name")
    bootstrap.add_argument("--plan", choices=["public", "business", "enterprise"], default="business")
    bootstrap.add_argument("--rate-limit", type=int, default=None, help="requests per minute (enterprise)")
    bootstrap.add_argument("--email", help="create an owner account with this email")
    bootstrap.add_argument("--password", help="the owner account's password (at least 12 characters)")
    bootstrap.add_argument("--totp", action="store_true", help="require a TOTP second factor (secret printed once)")
    bootstrap.set_defaults(run=_bootstrap)
    contract = commands.add_parser("contract", help="machine-readable artefacts of the /v1 contract")
    contract_commands = contract.add_subparsers(dest="contract_command", required=True)
    contract_export = contract_commands.add_parser(
        "export", help="write openapi.json, a Postman collection and TypeScript types generated from it"
    )
    contract_export.add_argument("--out", default="clients", help="folder to write into (default: clients)")
    contract_export.set_defaults(run=_contract_export)
    replay = commands.add_parser("replay", help="replay an event history through a programme file (vectorised)")
    replay.add_argument(
        "events", help="events: .parquet, .csv or .jsonl (duckdb); a Parquet file, directory or glob (spark)"
    )
    replay.add_argument("--programme", required=True, help="programme file (JSON, see data/programmes/)")
    replay.add_argument("--out", required=True, help="issuances to write: .parquet or .csv")
    replay.add_argument("--opening-supply", default="0", help="outstanding supply before the first event")
    replay.add_argument(
        "--customers",
        help="customers table (.parquet, .csv or .jsonl: id, external_id, country, segments, attributes) that "
        "rules read customer.* from and beneficiaries resolve in",
    )
    replay.add_argument(
        "--redemptions",
        help="what customers spent (.parquet, .csv or .jsonl: customer_id, amount, occurred_at), so that "
        "reversals claw back from the balances they had; without it nothing was spent",
    )
    replay.add_argument(
        "--as-of",
        help="with expiry: until when lots expire (an ISO date-time, default the history's last event or "
        "redemption; docs/replay.md)",
    )
    replay.add_argument(
        "--engine",
        choices=["duckdb", "spark"],
        default="duckdb",
        help="duckdb (this machine) or spark (local, or the cluster spark-submit gives; OUT is then a directory "
        "of part files)",
    )
    replay.set_defaults(run=_replay)
    _client_commands(commands)
    _operator_commands(commands)
    return parser


def _client_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands that act on a live /v1 deployment through rewards_lab.client (key from $REWARDS_API_KEY)."""
    from rewards_lab.cli import api as cli_api
    from rewards_lab.cli import history as cli_history
    from rewards_lab.cli import push as cli_push

    cli_push.configure(commands.add_parser("push", help="push a programme file to a live /v1 deployment"))
    cli_api.configure(commands.add_parser("api", help="call the /v1 API: one subcommand per operation"))
    cli_history.configure(commands.add_parser("history", help="pull a deployment's event history into a file"))


def _operator_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`retention`, `backup` and `restore`: over a database file no service has open."""
    from rewards_lab.cli import ops as cli_ops

    cli_ops.configure(commands)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status: int = args.run(args)
    except (SecretKeyError, UnsupportedStore) as error:  # a bad key or a --db it cannot open: a message, no trace
        print(f"rewards-lab {args.command}: {error}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
