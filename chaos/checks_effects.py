"""Invariants 4-6 and 8: accepted commands take effect, no tool runs twice (in the events,
and in the files of the `editor` sessions), a cancelled parent stays cancelled, every
workload session ends."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path

from chaos.checks_commands import check_command_files
from chaos.checks_edits import check_edit_files
from chaos.dbstate import TERMINAL, Check, DbState, is_interrupted
from chaos.outcome import Outcome


def check_4(db: DbState, outcomes: list[Outcome], cancel_times: dict[str, datetime]) -> Check:
    check = Check("4", "no accepted command lost (session_inputs CONSUMED/DROPPED, acks took effect)")
    states = Counter(i["state"] for i in db.inputs)
    for row in db.inputs:
        if row["state"] not in ("CONSUMED", "DROPPED"):
            check.fail(f"input {row['message_id']} of session {row['session_id']}: {row['state']}")
    inputs = {i["message_id"]: i for i in db.inputs}
    users = {m["message_id"] for ms in db.messages.values() for m in ms if m["role"] == "USER"}
    acked = 0
    for out in outcomes:
        for message_id in out.acked:
            acked += 1
            found = inputs.get(message_id)
            if found is None:
                check.fail(f"acked message {message_id} (session {out.session_id}) has no session_inputs row")
            elif found["state"] == "DROPPED" and out.session_id not in cancel_times:
                check.fail(f"acked message {message_id} DROPPED without a cancel")
            elif found["state"] == "CONSUMED" and message_id not in users:
                check.fail(f"acked message {message_id} CONSUMED but no USER message")
    for session_id, acked_at in cancel_times.items():
        stream = db.stream(session_id)
        if any(e["type"] == "SessionPhaseChanged" and e["payload"]["phase"] == "CANCELLED" for e in stream):
            continue
        ended = [
            e for e in stream if e["type"] == "SessionPhaseChanged" and e["payload"]["phase"] in TERMINAL
        ]
        if not ended or ended[-1]["recorded_at"] > acked_at:
            check.fail(f"cancel of {session_id} acked at {acked_at.isoformat()} but never took effect")
    check.counts.update(
        inputs=len(db.inputs),
        acked_messages=acked,
        acked_cancels=len(cancel_times),
        **{f"state_{k}": v for k, v in states.items()},
    )
    return check


def check_5(db: DbState, outcomes: list[Outcome] | None = None, workspaces: Path | None = None) -> Check:
    """The editor files are checked when the workload's outcomes and the cluster's
    workspaces directory are given."""
    check = Check(
        "5", "no interrupted side-effecting tool run twice (ToolCallStarted per call = 1, edit markers "
        "once, commands started once)"
    )
    started = Counter(
        (e["stream_id"], e["payload"]["tool_call_id"]) for e in db.events if e["type"] == "ToolCallStarted"
    )
    # A command may change many files, each once.
    changed = Counter(
        (e["stream_id"], e["payload"]["tool_call_id"], e["payload"]["path"])
        for e in db.events
        if e["type"] == "FileChanged"
    )
    for key, count in started.items():
        if count > 1:
            check.fail(f"ToolCallStarted x{count} for session {key[0]} call {key[1]}")
    for (stream, call, path), count in changed.items():
        if count > 1:
            check.fail(f"FileChanged x{count} for session {stream} call {call} path {path}")
    interrupted = sum(
        is_interrupted(m["content"]) for ms in db.messages.values() for m in ms if m["role"] == "TOOL"
    )
    check.counts.update(tool_calls_started=len(started), interrupted_results=interrupted)
    check_edit_files(check, db, outcomes or [], workspaces)
    check_command_files(check, db, outcomes or [], workspaces)
    return check


def check_6(db: DbState) -> Check:
    check = Check("6", "cancelled parent: children cancelled/suppressed, parent not resumed")
    cancels = 0
    starts = {e["stream_id"]: e["position"] for e in db.events if e["type"] == "ExecutionStarted"}
    delivered = {e["stream_id"]: e["position"] for e in db.events if e["type"] == "ExecutionDelivered"}
    for session_id, session in db.sessions.items():
        if session["session_type"] == "SUBAGENT":
            continue
        stream = db.stream(session_id)
        for i, event in enumerate(stream):
            if event["type"] != "SessionPhaseChanged" or event["payload"]["phase"] != "CANCELLED":
                continue
            cancels += 1
            at = event["position"]
            users = [e["position"] for e in stream[:i] if _is(e, "USER")]
            turn_start = users[-1] if users else 0
            after = stream[i + 1 :]
            nxt = next((e["position"] for e in after if _is(e, "USER")), None)
            until = nxt if nxt is not None else float("inf")
            for e in after:
                if e["position"] >= until:
                    break
                if _is(e, "ASSISTANT"):
                    check.fail(f"session {session_id}: ASSISTANT at {e['position']} after CANCELLED at {at}")
                elif _is(e, "TOOL") and not is_interrupted(e["payload"]["content"]):
                    check.fail(
                        f"session {session_id}: TOOL result at {e['position']} after CANCELLED at {at}"
                    )
                elif e["type"] == "SessionPhaseChanged" and e["payload"]["phase"] in ("RUNNING", "RESUMING"):
                    check.fail(
                        f"session {session_id}: resumed ({e['payload']['phase']}) after CANCELLED at {at}"
                    )
            for x in db.executions:
                if (
                    x["parent_session_id"] != session_id
                    or not turn_start < starts.get(x["execution_id"], 0) < until
                ):
                    continue
                xid, status, delivery = x["execution_id"], x["status"], x["delivery_status"]
                if starts[xid] > at:
                    check.fail(f"execution {xid} started after the cancel of {session_id}")
                elif status not in TERMINAL:
                    check.fail(f"execution {xid} of cancelled {session_id}: still {status}")
                elif delivery == "DELIVERED" and delivered.get(xid, at + 1) > at:
                    check.fail(f"execution {xid} of cancelled {session_id}: DELIVERED after the cancel")
                elif delivery == "PENDING":
                    check.fail(f"execution {xid} of cancelled {session_id}: {status} but delivery PENDING")
                child = db.sessions.get(x["child_session_id"], {})
                if child.get("phase") not in TERMINAL:
                    check.fail(
                        f"child {x['child_session_id']} of cancelled {session_id}: phase {child.get('phase')}"
                    )
    check.counts.update(cancelled_turns=cancels)
    return check


def _is(event: dict[str, object], role: str) -> bool:
    payload = event["payload"]
    return event["type"] == "MessageRecorded" and isinstance(payload, dict) and payload.get("role") == role


def check_8(db: DbState, outcomes: list[Outcome]) -> Check:
    check = Check("8", "every session the workload started reaches a terminal phase")
    roots = {o.session_id for o in outcomes if o.session_id}
    titled = {sid for sid, s in db.sessions.items() if str(s.get("title") or "").startswith("chaos-")}
    for sid in sorted(titled - roots):
        check.fail(f"session {sid} ({db.sessions[sid]['title']}) created but not tracked by the driver")
    for o in outcomes:
        if o.session_id is None:
            check.fail(f"plan {o.index} ({o.kind}) never got a session: {o.error}")
    tree = [s for s in db.sessions.values() if s["root_session_id"] in roots | titled]
    phases = Counter(str(s["phase"]) for s in tree)
    for s in tree:
        if s["phase"] not in TERMINAL:
            check.fail(f"{s['session_type']} session {s['session_id']}: phase {s['phase']}")
    check.counts.update(sessions=len(tree), roots=len(roots), **{f"phase_{k}": v for k, v in phases.items()})
    return check
