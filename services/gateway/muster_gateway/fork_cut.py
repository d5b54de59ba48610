"""Where a fork may cut a history: never inside a tool round whose results are not all
recorded (the copy must be a valid history for the model, and its open calls would never
be answered in the side task)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def complete_prefix(rows: Sequence[Mapping[str, Any]], up_to: int) -> int:
    """The highest seq <= `up_to` that ends a valid history. `rows` are the messages
    (ascending seq, not discarded) of the turn holding `up_to`; earlier turns are complete
    (a USER message only ever follows a complete round)."""
    cut = up_to
    while True:
        open_round: Mapping[str, Any] | None = None
        unanswered: set[str] = set()
        for row in rows:
            if row["seq"] > cut:
                break
            if row["role"] == "ASSISTANT":
                calls = row["tool_calls"] or []
                open_round = row if calls else None
                unanswered = {call["id"] for call in calls}
            elif row["role"] == "TOOL":
                unanswered.discard(row["tool_call_id"])
            else:
                open_round, unanswered = None, set()
        if open_round is None or not unanswered:
            return cut
        cut = int(open_round["seq"]) - 1  # before the ASSISTANT message of that round
