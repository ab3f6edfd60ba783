"""Support conversations: stored per tenant and environment, each question and answer a turn.

How a conversation begins (see the note of issue 31): `POST /ai/conversations` gives one a service id (`cnv_...`);
a message naming a `cnv_` id the tenant does not hold is `conversation_not_found`. Any other id is the client's
own name for a conversation, and its first message creates it, so the requests clients sent before conversations
were stored keep their meaning (an answer), and now remember. Names are per tenant and environment: the same name
in another tenant is another conversation, and another tenant's `cnv_` id is not found.
"""

from __future__ import annotations

from rewards_lab import presenters
from rewards_lab.contract import jsonutil
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import PREFIXES, new_id, new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.service import support_answers
from rewards_lab.service.support_answers import Context
from rewards_lab.store.api import Store, reader, unit_of_work
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import ConversationRow, Repositories, TurnRow

SERVICE_PREFIX = f"{PREFIXES['conversation']}_"
MAX_ID_LENGTH = 128


def create_conversation(database: Store, scope: Scope) -> r.Conversation:
    with unit_of_work(database) as uow:
        row = uow.conversations.add(scope, new_id("conversation"))
    return _conversation(row, [])


def get_conversation(database: Store, scope: Scope, conversation_id: str) -> r.Conversation:
    uow = reader(database)
    row = uow.conversations.get(scope, conversation_id)
    if row is None:
        raise ServiceError("conversation_not_found", conversation_id=conversation_id)
    return _conversation(row, uow.conversations.turns(scope, conversation_id))


def conversation_message(
    database: Store, scope: Scope, conversation_id: str, body: rq.MessageCreate
) -> r.AssistantMessage:
    """Answer the question with the earlier turns as context; store the question and the answer as two turns."""
    _check_name(conversation_id)
    uow = reader(database)
    if uow.conversations.get(scope, conversation_id) is None and conversation_id.startswith(SERVICE_PREFIX):
        raise ServiceError("conversation_not_found", conversation_id=conversation_id)
    history = _history(uow, scope, conversation_id)
    found = support_answers.answer(database, scope, body.content, history)
    with unit_of_work(database) as writing:
        if writing.conversations.get(scope, conversation_id) is None:
            if conversation_id.startswith(SERVICE_PREFIX):  # not when read: it cannot have gone since
                raise ServiceError("conversation_not_found", conversation_id=conversation_id)
            writing.conversations.add(scope, conversation_id)
        position = len(writing.conversations.turns(scope, conversation_id))
        question_id, answer_id = new_ids("message", 2)
        now = utcnow()
        writing.conversations.add_turns(
            scope,
            conversation_id,
            [
                TurnRow(question_id, position, "user", body.content, "[]", _json(found.named.as_json()), now),
                TurnRow(answer_id, position + 1, "assistant", found.content, _sources(found), _context(found), now),
            ],
        )
    return r.AssistantMessage(
        conversation_id=conversation_id, role="assistant", content=found.content, sources=found.sources
    )


def single_message(database: Store, scope: Scope, body: rq.MessageCreate) -> r.AssistantMessage:
    """The deprecated `POST /ai/messages`: one answer, no conversation stored."""
    found = support_answers.answer(database, scope, body.content)
    return r.AssistantMessage(conversation_id=None, role="assistant", content=found.content, sources=found.sources)


def _check_name(conversation_id: str) -> None:
    if len(conversation_id) > MAX_ID_LENGTH:
        raise ServiceError(
            "field_invalid", f"conversation_id is at most {MAX_ID_LENGTH} characters", field="conversation_id"
        )


def _history(uow: Repositories, scope: Scope, conversation_id: str) -> list[Context]:
    """The resolved contexts of the conversation's answers, oldest first."""
    turns = uow.conversations.turns(scope, conversation_id)
    return [Context.from_json(turn.context_value()) for turn in turns if turn.role == "assistant"]


def _json(value: object) -> str:
    return jsonutil.dumps(value)


def _sources(found: support_answers.Answer) -> str:
    return _json([hit.model_dump(mode="json") for hit in found.sources])


def _context(found: support_answers.Answer) -> str:
    return _json(found.context.as_json())


def _conversation(row: ConversationRow, turns: list[TurnRow]) -> r.Conversation:
    return r.Conversation(
        id=row.id,
        created_at=presenters.utc(row.created_at),
        updated_at=presenters.utc(row.updated_at),
        turns=[
            r.ConversationTurn(
                id=turn.id,
                role="user" if turn.role == "user" else "assistant",
                content=turn.content,
                sources=[r.KnowledgeHit.model_validate(hit) for hit in turn.sources_value()],
                created_at=presenters.utc(turn.created_at),
            )
            for turn in turns
        ],
    )
