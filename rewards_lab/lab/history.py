"""Pull a deployment's event history into a file the replay reads (`rewards-lab history pull`, `Lab.history`).

GET /events/export answers at most `limit` events at a time; each answer is kept as a part file beside the
target (`FILE.parts/`, with a `state.json` saying where the next answer starts), so an interrupted pull resumes
after its last complete part when run again with the same range. When every part is in, they are joined into a
temporary file renamed over FILE: FILE is either absent or complete, never half written. `until` is fixed at the
first answer (`X-Export-Until`): a resumed pull reads the same range even while events keep arriving.

The format follows FILE's suffix: .parquet, or .ndjson / .jsonl (NDJSON).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq

from rewards_lab.client import Download, RewardsClient

FORMATS = {".parquet": "parquet", ".ndjson": "ndjson", ".jsonl": "ndjson"}
Progress = Callable[[str], None] | None


@dataclass(frozen=True, slots=True)
class Pulled:
    path: Path
    events: int
    parts: int
    until: str  # the end of the range read (exclusive), RFC 3339


def format_of(out: Path) -> str:
    form = FORMATS.get(out.suffix.lower())
    if form is None:
        raise ValueError(f"{out}: the history file must end in {', '.join(FORMATS)}")
    return form


def default_out(
    base_url: str, organization_id: str, environment: str, since: datetime | str | None, until: datetime | str | None
) -> Path:
    """A Parquet file in the temporary directory named after the deployment and range (the same pull, the same
    file: an interrupted one resumes)."""
    key = json.dumps([base_url, organization_id, environment, _instant(since), _instant(until)])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"rewards-lab-history-{digest}.parquet"


def _instant(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.isoformat() if value.tzinfo is not None else value.isoformat() + "Z"


def pull_history(
    client: RewardsClient,
    out: str | Path,
    *,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    executions: bool = False,
    limit: int | None = None,
    progress: Progress = None,
) -> Pulled:
    """Write the events of [since, until) of the client's tenant and environment to `out` (see the module)."""
    target = Path(out)
    form = format_of(target)
    parts = target.with_name(target.name + ".parts")
    first = _instant(since)
    wanted: dict[str, Any] = {
        "since": first,
        "until": _instant(until),
        "format": form,
        "executions": executions,
        "tenant": [client.config.organization_id, client.config.environment],
        "base_url": client.config.base_url,
    }
    state = _resume(parts, wanted, progress)
    while not state["done"]:
        answer = client.export_events(
            since=first,
            until=state["until"],
            file_format=form,
            include="executions" if executions else None,
            after=state["after"],
            limit=str(limit) if limit is not None else None,
        )
        assert isinstance(answer, Download), answer
        number = len(state["parts"])
        part = parts / f"part-{number:06d}.{form}"
        _write_atomically(part, answer.content)
        rows = int(answer.headers.get("X-Export-Rows", "0"))
        state["until"] = state["until"] or answer.headers.get("X-Export-Until")
        following = answer.headers.get("X-Export-Next-After")
        state["after"] = None if following is None else unquote(following)
        state["done"] = state["after"] is None
        state["parts"].append({"file": part.name, "rows": rows})
        state["events"] += rows
        _write_atomically(parts / "state.json", json.dumps(state, indent=2).encode())
        if progress is not None:
            more = "" if state["done"] else f", more after {state['after']}"
            progress(f"part {number + 1}: {rows} events ({state['events']} in all){more}")
    _join(parts, [parts / p["file"] for p in state["parts"]], target, form)
    shutil.rmtree(parts)
    if progress is not None:
        progress(f"wrote {target}: {state['events']} events until {state['until']}")
    return Pulled(target, state["events"], len(state["parts"]), state["until"])


def _resume(parts: Path, wanted: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The state of an earlier pull of the same range into the same file, else a fresh one."""
    fresh: dict[str, Any] = {"wanted": wanted, "until": wanted["until"], "after": None, "done": False}
    fresh |= {"parts": [], "events": 0}
    saved = parts / "state.json"
    if saved.exists():
        state: dict[str, Any] = json.loads(saved.read_text(encoding="utf-8"))
        if state.get("wanted") == wanted:
            if progress is not None:
                progress(f"resuming after {len(state['parts'])} parts ({state['events']} events)")
            return state
    if parts.exists():
        shutil.rmtree(parts)  # another range, or parts without a state: start again
    parts.mkdir(parents=True)
    return fresh


def _write_atomically(path: Path, content: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as file:
        file.write(content)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _join(parts: Path, files: list[Path], target: Path, form: str) -> None:
    """The parts, in order, as one file: NDJSON concatenated, Parquet row groups copied into one writer."""
    temporary = parts / f"joined.{form}"
    if form == "ndjson":
        with temporary.open("wb") as joined:
            for file in files:
                with file.open("rb") as part:
                    shutil.copyfileobj(part, joined)
    else:
        schema = pq.read_schema(files[0])
        with pq.ParquetWriter(temporary, schema) as writer:
            for file in files:
                reader = pq.ParquetFile(file)
                for group in range(reader.num_row_groups):  # one row group at a time: memory stays bounded
                    writer.write_table(reader.read_row_group(group))
    os.replace(temporary, target)
