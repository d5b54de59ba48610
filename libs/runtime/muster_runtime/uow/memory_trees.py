"""Session trees in memory: where each session sits and what its tree's signals are, folded
from the streams in position order as PostgreSQL's projector keeps the `sessions` columns
(migrations 0010, 0012, 0016: archive, delete, read, turn end, promotion, recorded signals)
and as `muster_tree_status` adds them up. The contract suite checks both on the same
events (`tests/unit/runtime/test_tree_status_contract.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from muster_contracts import events as ev
from muster_contracts import session_events as se

from muster_runtime.store.eventstore import StoredEvent
from muster_runtime.uow.recovery_views import TreeSignals, TreeStatus

# A session counts as running in its tree's signal (a LOCAL client's wait holds the tree).
TREE_RUNNING = ("RUNNING", "RESUMING", "CANCELLING", "WAITING_CLIENT")
ENDED = ("COMPLETED", "FAILED")
MAX_DEPTH = 10  # every tree walk's defensive cap, as in SQL


@dataclass
class Node:
    session_type: str
    parent_session_id: UUID | None
    root_session_id: UUID
    phase: str | None = None
    version: int = 0
    archived: bool = False
    deleted: bool = False
    read_position: int = 0
    turn_ended_position: int | None = None
    recorded: TreeSignals = field(default_factory=TreeSignals)


def nodes(streams: Mapping[str, list[StoredEvent]]) -> dict[UUID, Node]:
    """Every session's place and tree columns after all the events of `streams`."""
    found: dict[UUID, Node] = {}
    ordered = sorted((e for stream in streams.values() for e in stream), key=lambda e: e.position)
    for stored in ordered:
        _apply(found, stored)
    return found


def _apply(found: dict[UUID, Node], stored: StoredEvent) -> None:
    event = stored.event
    if isinstance(event, ev.SessionCreated):
        found[event.session_id] = Node(event.session_type, event.parent_session_id, event.root_session_id)
    try:
        node = found.get(UUID(stored.stream_id))
    except ValueError:
        return
    if node is None:
        return
    node.version = stored.stream_version
    if isinstance(event, ev.SessionPhaseChanged):
        node.phase = event.phase
        if event.phase in ENDED:
            node.turn_ended_position = stored.position
    elif isinstance(event, se.SessionArchived | se.SessionUnarchived):
        node.archived = isinstance(event, se.SessionArchived)
    elif isinstance(event, se.SessionDeleted):
        node.deleted = True
    elif isinstance(event, se.SessionRead):
        node.read_position = stored.position
    elif isinstance(event, se.SessionTreeStatusChanged):
        node.recorded = TreeSignals(
            event.tree_running, event.tree_unread, event.pending_approvals, event.pending_questions
        )
    elif isinstance(event, se.SessionPromoted):
        promoted = UUID(stored.stream_id)
        node.session_type, node.parent_session_id, node.root_session_id = "NORMAL", None, promoted
        for below in _below(found, promoted):
            found[below].root_session_id = promoted  # its descendants follow it


def _below(found: Mapping[UUID, Node], top: UUID) -> list[UUID]:
    """The descendants of `top`, levels 1 to 10."""
    level, seen = [top], []
    for _ in range(MAX_DEPTH):
        level = [sid for sid, node in found.items() if node.parent_session_id in level]
        seen += level
    return seen


def _tree(found: Mapping[UUID, Node], root: UUID) -> list[Node]:
    """The root's side tasks at any depth and their subagents (levels 1 to 10); an archived
    or deleted session hides itself and everything below it. The root's own subagents are
    its turn, not its tree."""
    level = [
        sid
        for sid, node in found.items()
        if node.parent_session_id == root and node.session_type == "SIDE_TASK" and _shown(node)
    ]
    tree = list(level)
    for _ in range(MAX_DEPTH - 1):
        level = [sid for sid, node in found.items() if node.parent_session_id in level and _shown(node)]
        tree += level
    return [found[sid] for sid in tree]


def _shown(node: Node) -> bool:
    return not node.archived and not node.deleted


def status(found: Mapping[UUID, Node], waits: Iterable[Mapping[str, Any]], root: UUID) -> TreeStatus | None:
    """The root's recorded and current signals (None: not a live root)."""
    top = found.get(root)
    if top is None or top.root_session_id != root or top.deleted:
        return None
    tree = _tree(found, root)
    running = any(n.phase in TREE_RUNNING for n in tree)
    unread = any(
        n.session_type != "SUBAGENT"
        and n.turn_ended_position is not None
        and n.turn_ended_position > n.read_position
        for n in tree
    )
    # Pending waits count anywhere under the root, its own and its subagents' included.
    members = {sid for sid, n in found.items() if n.root_session_id == root and not n.deleted}
    pending = [w for w in waits if w["status"] == "pending" and w["session_id"] in members]
    approvals = sum(w["kind"] == "approval" for w in pending)
    questions = sum(w["kind"] == "question" for w in pending)
    return TreeStatus(root, top.version, top.recorded, TreeSignals(running, unread, approvals, questions))


def drifted(found: Mapping[UUID, Node], waits: Iterable[Mapping[str, Any]], limit: int) -> list[UUID]:
    """Live NORMAL roots whose recorded signals differ from their tree now."""
    pending = list(waits)
    roots = [sid for sid, n in found.items() if n.session_type == "NORMAL" and not n.deleted]
    statuses = (status(found, pending, root) for root in sorted(roots))
    return [s.root_session_id for s in statuses if s is not None and s.changed][:limit]
