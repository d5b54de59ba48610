"""Compaction: before a model call whose request would pass the session's threshold, the
oldest complete turns are summarised by the session's model and `CompactionRecorded`
moves the boundary; the model then sees the summary and the turns after it.

A boundary is always the message before a USER message: it never splits a tool round
(an ASSISTANT message and its TOOL results) nor a round still waiting for its children,
and the current turn always stays whole. The compaction is one conditional record, so a
crash leaves either none or a whole one. The request size starts from what the provider
reported for the previous call (`usage.prompt_tokens`) plus an estimate of what came
after it; a call made before the latest compaction reports a stale size and is ignored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from muster_contracts import events as ev
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory

from muster_agent import session_store as store
from muster_agent.agents import AgentDefinition
from muster_agent.context import model_messages, summary_message, system_prompt
from muster_agent.history import StoredMessage, to_chat
from muster_agent.models.base import ModelError, ModelProvider, ModelRequest
from muster_agent.session_state import SessionState, after_boundary
from muster_agent.tokens import chat_tokens

log = logging.getLogger("muster.compaction")

SUMMARY_PROMPT = (
    "You summarise a conversation between a user and an AI agent so that the agent can go "
    "on without it. Keep every fact, decision, file path, open question and result the "
    "agent still needs; drop pleasantries. Write plain prose."
)
SUMMARY_REQUEST = "Summarise the conversation above (and any earlier summary) for the agent."


@dataclass(frozen=True)
class Budget:
    """A session's context budget (`MUSTER_CONTEXT_TOKENS`, or its agent's `context_tokens`)
    and the share of it that triggers compaction (`MUSTER_COMPACTION_THRESHOLD`)."""

    context_tokens: int = 128_000
    threshold: float = 0.8

    def limit(self, agent: AgentDefinition) -> int:
        return int((agent.context_tokens or self.context_tokens) * self.threshold)


def request_tokens(state: SessionState, messages: list[dict[str, Any]]) -> int:
    """The size of the request `messages`: the previous call's reported prompt and answer
    plus an estimate of the messages after it, or an estimate of all of it."""
    fresh_after = state.compaction.at_seq if state.compaction is not None else 0
    for index in range(len(state.messages) - 1, -1, -1):
        message = state.messages[index]
        if message.seq <= fresh_after:
            break
        if message.role == "ASSISTANT" and message.usage:
            usage = message.usage
            reported = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
            return reported + chat_tokens(to_chat(state.messages[index + 1 :]))
    return chat_tokens(messages)


def choose_cut(messages: list[StoredMessage], keep_tokens: int | None) -> int:
    """How many of `messages` (the visible ones) to fold into the summary: up to a USER
    message, keeping the fewest turns whose text fits `keep_tokens` and always the current
    one (None: keep only the current turn). 0 when there is no earlier turn."""
    starts = [i for i, m in enumerate(messages) if m.role == "USER" and i > 0]
    if not starts:
        return 0
    if keep_tokens is not None:
        for start in starts:
            if chat_tokens(to_chat(messages[start:])) <= keep_tokens:
                return start
    return starts[-1]


async def compact(
    model: ModelProvider,
    uows: UnitOfWorkFactory,
    state: SessionState,
    agent: AgentDefinition,
    *,
    keep_tokens: int | None,
    idle: bool = False,
) -> tuple[bool, SessionState | None]:
    """Summarise the oldest turns and record the new boundary: as part of a running turn,
    or of an `idle` session (on request). Returns (recorded, state): (False, state) when
    there was nothing to fold or the model failed (the call goes on uncompacted), (True,
    None) when the session moved meanwhile (look again)."""
    messages = after_boundary(state.messages, state.compaction)
    cut = choose_cut(messages, keep_tokens)
    if cut == 0:
        return False, state
    folded, kept = messages[:cut], messages[cut:]
    before = request_tokens(state, model_messages(agent, state))
    earlier = [summary_message(state.compaction.summary)] if state.compaction is not None else []
    request = ModelRequest(
        session_id=str(state.session_id),
        model=state.model_id or agent.model,
        messages=[
            {"role": "system", "content": SUMMARY_PROMPT},
            *earlier,
            *to_chat(folded),
            {"role": "user", "content": SUMMARY_REQUEST},
        ],
        tools=[],
        purpose="summary",
    )
    log.info("compaction_started session=%s messages=%d", state.session_id, len(folded))
    try:
        reply = await model.complete(request)
    except ModelError as exc:
        log.warning("compaction_failed session=%s reason=%s", state.session_id, exc)
        return False, state
    system = [
        {"role": "system", "content": system_prompt(agent, state.background, state.session_type)},
        summary_message(reply.content),
    ]
    after = chat_tokens([*system, *to_chat(kept)])
    event = ev.CompactionRecorded(
        boundary_message_id=folded[-1].message_id,
        boundary_seq=folded[-1].seq,
        summary=reply.content,
        messages_compacted=len(folded),
        tokens_before=before,
        tokens_after=after,
        at_seq=state.message_count,
    )
    recorded = (
        await store.record_if_idle(uows, state, [event])
        if idle
        else await store.record_if_current(uows, state, lambda seq: [event])
    )
    if recorded is not None:
        log.info(
            "compaction_recorded session=%s messages=%d tokens_before=%d tokens_after=%d",
            state.session_id,
            len(folded),
            before,
            after,
        )
    return True, recorded
