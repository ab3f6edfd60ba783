"""AI: knowledge search and answers without a model (service.knowledge), and their deprecated predecessors
(their Deprecation, Sunset and Link headers go on every answer of their paths: api.app.ResponseHeaders,
api.deprecations). None of these handlers has a docstring: FastAPI would publish it as a description."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from rewards_lab.api.context import json_body, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.api.routes._binding import Endpoint, authorised
from rewards_lab.contract import requests as rq
from rewards_lab.contract.permissions import Permission
from rewards_lab.service import knowledge


async def knowledge_search(request: Request) -> Response:
    authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.KnowledgeSearch)
    return success(knowledge.search(body.query, body.limit), request_id_of(request), next_cursor=None, has_more=False)


async def conversation_message(request: Request, conversation_id: str) -> Response:
    authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.MessageCreate)
    return success(knowledge.answer(conversation_id, body.content), request_id_of(request), 201)


async def deprecated_search(request: Request) -> Response:
    authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.KnowledgeSearch)
    return success(knowledge.search(body.query, body.limit), request_id_of(request), next_cursor=None, has_more=False)


async def deprecated_message(request: Request) -> Response:
    authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.MessageCreate)
    return success(knowledge.answer(None, body.content), request_id_of(request), 201)


BINDINGS: dict[str, Endpoint] = {
    "knowledge_search": knowledge_search,
    "conversation_message": conversation_message,
    "deprecated_search": deprecated_search,
    "deprecated_message": deprecated_message,
}
