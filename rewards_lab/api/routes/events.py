"""Events (submitted, listed, replayed) and the reward executions they cause."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from rewards_lab import presenters
from rewards_lab.api.context import database_of, json_body, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.api.routes._binding import Endpoint, authorised, serve
from rewards_lab.contract import requests as rq
from rewards_lab.contract.operations import operation
from rewards_lab.contract.permissions import Permission
from rewards_lab.engine import event_processing
from rewards_lab.service import event_export, event_intake, event_queries

assert operation("list_events").sorts == event_queries.EVENT_SORTS
assert operation("list_executions").sorts == event_queries.EXECUTION_SORTS


async def submit_event(request: Request) -> Response:
    # No docstring: FastAPI would publish it as the operation's description. api/hot_path.py answers this
    # operation in front of FastAPI with the same steps and functions; this route answers when the hot path is
    # off, and tests/api/test_hot_path.py holds the two equal.
    principal = authorised(request, Permission.EVENTS_WRITE)
    body = await json_body(request, rq.EventCreate)
    prepared = event_intake.prepare_event(body)
    stored = await request.app.state.intake.submit(principal.scope, prepared)  # after the commit
    return success(presenters.event_fields(stored), request_id_of(request), 202)


async def export_events(request: Request) -> Response:
    # A file, not the envelope (failures still are): the snapshot is opened off the event loop, and Starlette
    # iterates the synchronous chunks in its thread pool, so the stream never holds the loop or the write lock.
    principal = authorised(request, Permission.EVENTS_VIEW)
    wanted = event_export.parse_request(request.query_params)
    export = await run_in_threadpool(event_export.open_export, database_of(request), principal.scope, wanted)
    return StreamingResponse(
        export.chunks(),
        media_type=wanted.media_type,
        headers=export.headers,
        background=BackgroundTask(export.close),  # a client that leaves early: the snapshot is released
    )


BINDINGS: dict[str, Endpoint] = dict(
    [
        serve("list_events", event_queries.list_events),
        ("export_events", export_events),
        ("submit_event", submit_event),
        serve("get_event", event_queries.get_event),
        serve("replay_event", event_processing.replay_event),
        serve("list_executions", event_queries.list_executions),
    ]
)
