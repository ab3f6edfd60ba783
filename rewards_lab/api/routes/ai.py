"""AI: knowledge search (service.knowledge), support conversations answered from the tenant's records and the
documentation without a model (service.conversations, service.support_answers), and their deprecated predecessors
(their Deprecation, Sunset and Link headers go on every answer of their paths: api.app.ResponseHeaders,
api.deprecations). None of these handlers has a docstring: FastAPI would publish it as a description."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from rewards_lab.api.context import json_body, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.api.routes._binding import Endpoint, authorised, serve
from rewards_lab.contract import requests as rq
from rewards_lab.contract.permissions import Permission
from rewards_lab.service import conversations, knowledge


async def knowledge_search(request: Request) -> Response:
    authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.KnowledgeSearch)
    return success(knowledge.search(body.query, body.limit), request_id_of(request), next_cursor=None, has_more=False)


async def deprecated_search(request: Request) -> Response:
    authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.KnowledgeSearch)
    return success(knowledge.search(body.query, body.limit), request_id_of(request), next_cursor=None, has_more=False)


BINDINGS: dict[str, Endpoint] = dict(
    [
        ("knowledge_search", knowledge_search),
        serve("create_conversation", conversations.create_conversation),
        serve("conversation_message", conversations.conversation_message),
        serve("get_conversation", conversations.get_conversation),
        ("deprecated_search", deprecated_search),
        serve("deprecated_message", conversations.single_message),
    ]
)
