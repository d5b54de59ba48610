"""What the driver learned of one planned session: its ids, how it ended, what the gateway
acknowledged and what the driver answered (read by the invariant checks and the report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Outcome:
    index: int
    kind: str
    user: str
    title: str
    expect: str
    session_id: str | None = None
    phase: str | None = None
    error: str | None = None
    acked: list[str] = field(default_factory=list)  # messageIds the gateway acknowledged
    cancel_acked_at: datetime | None = None
    children: list[str] = field(default_factory=list)
    side_tasks: list[str] = field(default_factory=list)
    approvals: int = 0  # approvals this driver answered (kind approval)
    ws_trailing: int = 0  # times REST showed a turn's end before WS did
    shed: int = 0  # new turns the gateway refused as `overloaded`, asked again after its hint
    seconds: float = 0.0
