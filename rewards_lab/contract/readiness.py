"""The answer of GET /v1/health/ready: whether this process can serve, check by check (no tenant data)."""

from __future__ import annotations

from typing import Literal

from rewards_lab.contract.resources import Resource, WorkerHealth


class ReadinessCheck(Resource):
    ok: bool
    reason: str | None  # a fixed phrase when not ok (never raw error text)


class DiskCheck(ReadinessCheck):
    free_bytes: int | None  # free space of the database's filesystem (None for an in-memory database)
    min_free_bytes: int  # the operator's threshold (`rewards-lab serve --min-free-disk-mb`)


class WorkersCheck(ReadinessCheck):
    workers: dict[str, WorkerHealth]


class Readiness(Resource):
    status: Literal["ready", "not_ready"]
    failing: list[str]  # names of the checks that are not ok, in the order below
    database_write: ReadinessCheck
    disk: DiskCheck
    workers: WorkersCheck
