"""What recovery's decisions read through the unit of work, typed: a tree's signals as
recorded on its root and as its sessions add up to now (`AbstractUnitOfWork.tree_status`)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID


@dataclass(frozen=True)
class TreeSignals:
    """What a root's descendants add up to (`SessionTreeStatusChanged`'s four fields)."""

    running: bool = False
    unread: bool = False
    approvals: int = 0
    questions: int = 0


@dataclass(frozen=True)
class TreeStatus:
    """A live root's signals: the last ones recorded on its stream (at `version`) and what
    its tree holds now; they differ when an event is due."""

    root_session_id: UUID
    version: int
    recorded: TreeSignals
    current: TreeSignals

    @property
    def changed(self) -> bool:
        return self.recorded != self.current
