"""What decisions read, typed: a session, an execution, a wait, a queued input, a message,
a compaction.

Frozen dataclasses built from a projection row (`of`), whichever unit of work read it: the
PostgreSQL one hands `asyncpg.Record`s, the in-memory one dicts with the same column
names. The literal types are the public contract's, so nothing here can drift from it; the
groups of phases and statuses they test are `uow/phases.py`'s.
"""

from muster_runtime.uow.aggregates.execution import Execution
from muster_runtime.uow.aggregates.messages import Compaction, Message
from muster_runtime.uow.aggregates.session import Session
from muster_runtime.uow.aggregates.waits import Input, InputState, Wait, WaitKind, WaitStatus

__all__ = [
    "Compaction",
    "Execution",
    "Input",
    "InputState",
    "Message",
    "Session",
    "Wait",
    "WaitKind",
    "WaitStatus",
]
