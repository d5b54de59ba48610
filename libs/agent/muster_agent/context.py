"""What a session's next model call sends: the system prompt (the agent's, plus a summary
side task's background) and the history in the OpenAI chat form. The loop and
`GET /v1/sessions/{id}/context` both call `model_messages`, so what users inspect is what
the model gets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from muster_agent.agents import AgentDefinition
from muster_agent.session_store import SessionState

BACKGROUND_HEADER = (
    "Background: this is a side task branched from another conversation. Its results are not "
    "reported back to that conversation. The last messages of that conversation were:"
)


def system_prompt(agent: AgentDefinition, background: Sequence[tuple[str, str]] | None) -> str:
    """The agent's prompt; a summary side task's (`background` not None, perhaps empty:
    the source had no messages yet) adds the source's last messages after it."""
    if background is None:
        return agent.system_prompt
    lines = [f"{role}: {content}" for role, content in background] or ["(none yet)"]
    return "\n\n".join(part for part in (agent.system_prompt, BACKGROUND_HEADER, "\n".join(lines)) if part)


def model_messages(agent: AgentDefinition, state: SessionState) -> list[dict[str, Any]]:
    """The `messages` of the next chat-completions request, system prompt first."""
    return [{"role": "system", "content": system_prompt(agent, state.background)}, *state.chat]
