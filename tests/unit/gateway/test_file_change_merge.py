"""A turn's file changes merged by path (pure)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from muster_gateway.file_change_merge import Change, combined_type, merge

PARENT, CHILD = UUID(int=1), UUID(int=2)


def change(position: int, path: str, kind: str = "MODIFIED", *, session: UUID = PARENT, added: int = 1,
           deleted: int = 0, before: str | None = "b", after: str | None = "a", diff: str | None = None,
           **extra: Any) -> Change:
    return Change(
        change_id=UUID(int=100 + position), session_id=session, message_id=UUID(int=200 + position),
        tool_call_id=f"call_{position}", path=path, change_type=kind, lines_added=added,
        lines_deleted=deleted, diff=diff if diff is not None else f"<patch {position}>",
        before_sha256=before, after_sha256=after,
        source_type="SUBAGENT" if session == CHILD else "MAIN",
        agent_type="coder" if session == CHILD else "general", position=position, **extra,
    )


def test_parent_and_child_changes_merge_by_path_with_summed_counts_and_both_sources() -> None:
    # parent edits A, the child creates B and C, the parent edits B again
    items = merge([
        change(1, "A", "CREATED", before=None, after="a1"),
        change(2, "B", "CREATED", session=CHILD, added=2, before=None, after="b1"),
        change(3, "C", "CREATED", session=CHILD, before=None, after="c1"),
        change(4, "B", added=2, deleted=1, before="b1", after="b2"),
    ])
    assert [i.path for i in items] == ["A", "B", "C"]
    b = items[1]
    assert (b.change_type, b.lines_added, b.lines_deleted) == ("CREATED", 4, 1)
    assert (b.before_sha256, b.after_sha256, b.patch) == (None, "b2", "<patch 2><patch 4>")
    assert b.sources == [{"sessionId": str(CHILD), "type": "SUBAGENT", "agentType": "coder"},
                         {"sessionId": str(PARENT), "type": "MAIN", "agentType": None}]


def test_two_snapshots_give_the_earliest_before_and_the_latest_after_in_recording_order() -> None:
    # listed out of order (a child listed after the parent's own changes): position decides
    [item] = merge([change(7, "P", before="v1", after="v2"), change(3, "P", before="v0", after="v1")])
    assert (item.before_sha256, item.after_sha256, item.patch) == ("v0", "v2", "<patch 3><patch 7>")
    # A main session's own changes carry no agent type (DESIGN §4).
    assert item.sources == [{"sessionId": str(PARENT), "type": "MAIN", "agentType": None}]
    assert item.api(before="zero", after="two")["before"] == "zero"


def test_a_path_created_at_any_point_of_the_turn_is_created() -> None:
    assert combined_type(True, "MODIFIED") == "CREATED"
    assert combined_type(True, "DELETED") == "CREATED"
    assert combined_type(False, "DELETED") == "DELETED"
    assert combined_type(False, "MODIFIED") == "MODIFIED"
    [item] = merge([change(1, "X", "DELETED", after=None), change(2, "X", "CREATED", before=None)])
    assert (item.change_type, item.before_sha256, item.after_sha256) == ("CREATED", "b", "a")
    [later] = merge([change(1, "Y"), change(2, "Y", "DELETED", after=None), change(3, "Y", "CREATED", before=None)])
    assert later.change_type == "CREATED"
    [gone] = merge([change(1, "Z"), change(2, "Z", "DELETED", after=None)])
    assert gone.change_type == "DELETED"


def test_changes_without_a_diff_keep_the_others_patches() -> None:
    [item] = merge([change(1, "Q", diff=""), change(2, "Q")])
    assert item.patch == "<patch 2>"
    [alone] = merge([change(1, "R", diff="")])
    assert alone.patch is None and alone.api(before=None, after=None)["patch"] is None
    assert merge([]) == []


def test_api_entry_shape() -> None:
    entry = change(5, "src/x.py", session=CHILD, parent_tool_call_id="call_d", execution_id=UUID(int=9)).api()
    assert entry == {
        "changeId": str(UUID(int=105)), "path": "src/x.py", "changeType": "MODIFIED", "linesAdded": 1,
        "linesDeleted": 0, "diff": "<patch 5>", "sourceSessionId": str(CHILD), "sourceType": "SUBAGENT",
        "sourceAgentType": "coder", "toolCallId": "call_5", "messageId": str(UUID(int=205)),
        "parentToolCallId": "call_d", "executionId": str(UUID(int=9)), "note": None,
    }
