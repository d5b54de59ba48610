"""What the file tools change, recorded with the tool's result.

Before `write_file`, `edit_file` or `delete_file` runs, the file's content is captured; after
a successful run, its new content. The change (CREATED, MODIFIED or DELETED, lines added and
deleted, a unified diff) becomes a small `FileChanged` event on the session's stream; the
contents and the diff go to `blobs`, stored once by sha256, in the same transaction as the
tool's TOOL result. A file that is not a regular UTF-8 text file of at most 4 MiB is recorded
without content or diff, and the event's `note` says why. A write that changes nothing is
not a change.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts.tool_arguments import parsed_arguments
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory

from muster_agent.file_snapshots import Snapshot, sha256, take_snapshot, unified_diff
from muster_agent.session_store import SessionState
from muster_agent.tools.files import Result
from muster_agent.tools.workspace import Workspace, WorkspaceError

FILE_TOOLS = frozenset({"write_file", "edit_file", "delete_file"})
# Calls that run on the event loop when their file and arguments are this small or less.
INLINE_TOOLS = frozenset({*FILE_TOOLS, "read_file"})
INLINE_BYTES = 16 * 1024


@dataclass(frozen=True)
class Pending:
    """A file tool call about to run: where it writes and what was there before."""

    target: Path
    before: Snapshot


@dataclass
class ChangeRecorder:
    """The file changes of one round's tool calls, waiting to be recorded with their results."""

    workspace: Workspace
    state: SessionState
    message_id: UUID
    message_seq: int
    blobs: dict[str, str] = field(default_factory=dict)
    spent: list[Path] = field(default_factory=list)  # commands' logs, removed once recorded

    async def run(
        self, call: Mapping[str, Any], tool: Callable[[], Result]
    ) -> tuple[Result, ev.FileChanged | None]:
        """Run `tool` (the blocking function of `call`) and return its result with the
        change it made (None when it changed nothing), its blobs kept for `store`. The
        snapshot before, the tool and the snapshot after run together: on the event loop
        for a small file (a hop to a worker thread and back costs more than its work),
        else in one worker thread, so a large file never stalls the loop."""
        if self._small(call):
            return self._run(call, tool)
        return await asyncio.to_thread(self._run, call, tool)

    def _small(self, call: Mapping[str, Any]) -> bool:
        arguments = parsed_arguments(call["arguments"])
        if call["name"] not in INLINE_TOOLS or arguments is None:
            return False
        given = sum(len(v) for k, v in arguments.items() if k != "path" and isinstance(v, str))
        if given > INLINE_BYTES or not isinstance(arguments.get("path"), str):
            return False
        try:
            return os.stat(self.workspace.root / arguments["path"]).st_size <= INLINE_BYTES
        except FileNotFoundError:
            return True
        except (OSError, ValueError):
            return False  # the tool reports it, off the loop

    def _run(
        self, call: Mapping[str, Any], tool: Callable[[], Result]
    ) -> tuple[Result, ev.FileChanged | None]:
        pending = self.before(call)
        outcome = tool()
        return outcome, self.after(call, outcome, pending)

    def before(self, call: Mapping[str, Any]) -> Pending | None:
        """What the file is before `call` runs; None when `call` cannot change a file."""
        path = (parsed_arguments(call["arguments"]) or {}).get("path")
        if call["name"] not in FILE_TOOLS or not isinstance(path, str):
            return None
        try:
            target = self.workspace.resolve(path)
        except WorkspaceError:
            return None  # the tool refuses the path too
        return Pending(target, take_snapshot(target))

    def after(
        self, call: Mapping[str, Any], outcome: Mapping[str, Any], pending: Pending | None
    ) -> ev.FileChanged | None:
        """The change `call` made, its blobs kept for `store`; None when it changed nothing."""
        if pending is None or not outcome.get("success") or not isinstance(outcome.get("path"), str):
            return None
        return self._describe(call, outcome["path"], pending)

    def _describe(self, call: Mapping[str, Any], path: str, pending: Pending) -> ev.FileChanged | None:
        after = Snapshot(exists=False) if call["name"] == "delete_file" else take_snapshot(pending.target)
        return self.describe(call["id"], path, pending.before, after)

    def describe(
        self, tool_call_id: str, path: str, before: Snapshot, after: Snapshot
    ) -> ev.FileChanged | None:
        """The change from `before` to `after` of `path` by `tool_call_id`, its blobs kept
        for `store`; None when nothing changed (a command's changes come this way)."""
        known = (not before.exists or before.content is not None) and (
            not after.exists or after.content is not None
        )
        if known and before.exists == after.exists and before.content == after.content:
            return None
        diff_sha = None
        added = deleted = 0
        if known:
            diff, added, deleted = unified_diff(path, before.content, after.content)
            diff_sha = self._keep(diff)
        change_type: ev.ChangeType = (
            "CREATED" if not before.exists else "DELETED" if not after.exists else "MODIFIED"
        )
        return ev.FileChanged(
            change_id=uuid4(),
            message_id=self.message_id,
            message_seq=self.message_seq,
            tool_call_id=tool_call_id,
            path=path,
            change_type=change_type,
            lines_added=added,
            lines_deleted=deleted,
            diff_sha256=diff_sha,
            before_sha256=self._keep(before.content),
            after_sha256=self._keep(after.content),
            before_size=before.size,
            after_size=after.size,
            session_type=self.state.session_type,
            agent_type=self.state.agent_type,
            note=before.note or after.note,
        )

    def _keep(self, content: str | None) -> str | None:
        if content is None:
            return None
        digest = sha256(content)
        self.blobs[digest] = content
        return digest


async def record_unanswered(
    uows: UnitOfWorkFactory, session_id: UUID, changes: Sequence[ev.FileChanged], blobs: Mapping[str, str]
) -> None:
    """The session stopped running here before a tool's result could be recorded (cancelled,
    lease lost): the files changed all the same, so the changes are recorded on their own."""
    if not changes:
        return
    async with uows() as uow:
        row = await uow.lock_session(session_id)
        if row is None:
            return
        session = Session.of(row)
        await uow.store_blobs(blobs)
        await uow.append(str(session_id), list(changes), expected_version=session.version)
