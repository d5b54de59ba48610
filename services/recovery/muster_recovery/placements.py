"""Where sessions sit in their trees, remembered only where it can never change: a NORMAL
session is a root for good, and a subagent whose parent is its root stays so (a root is
never moved; a promotion makes a side task a root, which only ever makes a subagent's parent
its root). Every other session is read each time, through the scan port."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from muster_recovery.scan_port import Placement, RecoveryScans


class Placements:
    def __init__(self, size: int = 65_536) -> None:
        self._size = size
        self._known: OrderedDict[UUID, Placement] = OrderedDict()

    def learn(self, created: Mapping[str, Any]) -> None:
        """A `SessionCreated` payload, peeked at before its session's later events: where
        that session sits, remembered when it can never change, so they need no read."""
        try:
            session_id = UUID(str(created["session_id"]))
            root = UUID(str(created["root_session_id"]))
            parent = created.get("parent_session_id")
            placed = Placement(
                session_type=str(created.get("session_type") or "NORMAL"),
                parent_session_id=UUID(str(parent)) if parent else None,
                root_session_id=root,
            )
        except (KeyError, ValueError):
            return  # read when needed, as any other
        self._remember(session_id, placed)

    async def of(self, scans: RecoveryScans, session_id: UUID) -> Placement | None:
        placed = self._known.get(session_id)
        if placed is not None:
            self._known.move_to_end(session_id)
            return placed
        placed = await scans.placement(session_id)
        if placed is not None:
            self._remember(session_id, placed)
        return placed

    def _remember(self, session_id: UUID, placed: Placement) -> None:
        fixed = (placed.session_type == "NORMAL" and placed.root_session_id == session_id) or (
            placed.session_type == "SUBAGENT" and placed.parent_session_id == placed.root_session_id
        )
        if fixed:
            self._known[session_id] = placed
            if len(self._known) > self._size:
                self._known.popitem(last=False)
