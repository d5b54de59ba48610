"""Invariant 5 at the file level, for the `editor` sessions (see `chaos.editor`): the edited
file holds each marker at most once (an edit run twice would add its marker twice), in
ascending order, and agrees with the child's live history (an edit that reported success
left its marker; a marker is there only when its edit succeeded or was interrupted)."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

from chaos import editor
from chaos.dbstate import Check, DbState, is_interrupted
from chaos.outcome import Outcome


def check_edit_files(check: Check, db: DbState, outcomes: list[Outcome], workspaces: Path | None) -> None:
    editors = [out for out in outcomes if out.kind == "editor" and out.session_id is not None]
    if not editors:
        return
    counts: Counter[str] = Counter(editor_sessions=len(editors), editor_rounds_discarded=0)
    for out in editors:
        assert out.session_id is not None
        children = [
            sid
            for sid, s in db.sessions.items()
            if s["root_session_id"] == out.session_id and s["session_type"] == "SUBAGENT"
        ]
        for child in children:
            messages = db.messages.get(child, [])
            gone = [m for m in messages if m["discarded"]]
            counts["editor_rounds_discarded"] += sum(m["role"] == "ASSISTANT" for m in gone)
            counts["editor_messages_discarded"] += len(gone)
            counts["editor_interrupted_results"] += sum(
                m["role"] == "TOOL" and is_interrupted(m["content"]) for m in messages
            )
        if workspaces is None:
            continue
        where = f"editor session {out.session_id} (plan {out.index})"
        if len(children) != 1:
            check.fail(f"{where}: {len(children)} child sessions, expected 1")
            continue
        path = workspaces / out.session_id / editor.edits_path(out.index)
        counts["editor_files_checked"] += 1
        calls = _live_results(db.messages.get(children[0], []))
        counts["editor_markers"] += _check_file(check, where, path, calls)
    check.counts.update(counts)
    if workspaces is None:
        check.note = "editor files not checked (no workspace directory given)"


def _live_results(messages: list[dict[str, Any]]) -> dict[str, tuple[int | None, dict[str, Any]]]:
    """The child's live (not discarded) calls on the edits file: call id -> (edit number or
    None for the write, parsed TOOL result or {} when unanswered)."""
    live = [m for m in messages if not m["discarded"]]
    answers = {m["tool_call_id"]: m["content"] for m in live if m["role"] == "TOOL"}
    calls: dict[str, tuple[int | None, dict[str, Any]]] = {}
    for c in (c for m in live if m["role"] == "ASSISTANT" for c in m.get("tool_calls") or []):
        args = c.get("arguments") or {}
        if isinstance(args, str):
            args = json.loads(args)
        number = None
        if c["name"] == "edit_file":
            found = editor.MARKER.match(str(args.get("new_string", "")))
            number = int(found.group(1)) if found else None
        elif c["name"] != "write_file":
            continue
        try:
            body = json.loads(answers.get(c["id"], "{}"))
        except ValueError:
            body = {"unparsable": answers.get(c["id"])}
        calls[str(c["id"])] = (number, body if isinstance(body, dict) else {})
    return calls


def _check_file(
    check: Check, where: str, path: Path, calls: dict[str, tuple[int | None, dict[str, Any]]]
) -> int:
    writes = [body for number, body in calls.values() if number is None]
    edits = {number: body for number, body in calls.values() if number is not None}
    if not path.exists():
        # Only a write cut off by a crash before it wrote may leave no file.
        if not any(_interrupted(b) for b in writes):
            check.fail(f"{where}: {path.name} missing, its write_file result {writes}")
        return 0
    text = path.read_text(errors="replace")
    if not editor.CONTENT.fullmatch(text):
        check.fail(f"{where}: {path.name} malformed: {text[:120]!r}")
        return 0
    markers = [int(k) for k in editor.MARKER.findall(text)]
    for k, n in Counter(markers).items():
        if n > 1:
            check.fail(f"{where}: marker <{k}> appears {n} times (edit {k} ran twice)")
    backwards = [(a, b) for a, b in itertools.pairwise(markers) if b <= a]
    if backwards:
        shown = ", ".join(f"<{a}> then <{b}>" for a, b in backwards[:5])
        check.fail(f"{where}: markers out of order ({len(backwards)}x): {shown}")
    present = set(markers)
    for k in sorted(present - set(range(editor.EDITS))):
        check.fail(f"{where}: marker <{k}> is no edit of the script")
    for k, body in sorted(edits.items()):
        if body.get("success") is True and k not in present:
            check.fail(f"{where}: edit {k} reported success but <{k}> is missing")
        elif k in present and body.get("success") is not True and not _interrupted(body):
            check.fail(f"{where}: <{k}> present but edit {k} answered {body}")
    if len(edits) != editor.EDITS:
        check.fail(f"{where}: live history holds {len(edits)} edits, the script {editor.EDITS}")
    return len(markers)


def _interrupted(body: dict[str, Any]) -> bool:
    return str(body.get("error", "")).startswith("interrupted")
