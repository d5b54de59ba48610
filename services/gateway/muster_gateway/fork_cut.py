"""Where a fork may cut a history: never inside a tool round whose results are not all
recorded (the copy must be a valid history for the model, and its open calls would never
be answered in the side task)."""

from __future__ import annotations

from collections.abc import Sequence

from muster_runtime.uow.aggregates import Message


def complete_prefix(turn: Sequence[Message], up_to: int) -> int:
    """The highest seq <= `up_to` that ends a valid history. `turn` holds the messages
    (ascending seq, not discarded) of the turn holding `up_to`; earlier turns are complete
    (a USER message only ever follows a complete round)."""
    cut = up_to
    while True:
        open_round: Message | None = None
        unanswered: set[str] = set()
        for message in turn:
            if message.seq > cut:
                break
            if message.role == "ASSISTANT":
                calls = message.tool_calls or []
                open_round = message if calls else None
                unanswered = {call["id"] for call in calls}
            elif message.role == "TOOL" and message.tool_call_id is not None:
                unanswered.discard(message.tool_call_id)
            elif message.role == "USER":
                open_round, unanswered = None, set()
        if open_round is None or not unanswered:
            return cut
        cut = open_round.seq - 1  # before the ASSISTANT message of that round
