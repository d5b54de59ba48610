"""Invariants 1-3: one execution per delegation call, one TOOL result per tool call, and no
model call before every result of the previous round exists."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

from chaos.dbstate import Check, DbState, call_ids

DELEGATION_TOOLS = ("delegate", "delegate_followup")


def check_1(db: DbState) -> Check:
    check = Check("1", "at most one execution per (parent_session_id, parent_tool_call_id)")
    rows = Counter((e["parent_session_id"], e["parent_tool_call_id"]) for e in db.executions)
    for key, count in rows.items():
        if count > 1:
            check.fail(f"executions rows {key}: {count}")
    started: dict[tuple[str, str], set[str]] = defaultdict(set)
    starts_per_stream: Counter[str] = Counter()
    created: Counter[tuple[str, str]] = Counter()
    for event in db.events:
        if event["type"] == "ExecutionStarted":
            p = event["payload"]
            started[(p["parent_session_id"], p["parent_tool_call_id"])].add(event["stream_id"])
            starts_per_stream[event["stream_id"]] += 1
        elif event["type"] == "SubagentSessionCreated":
            created[(event["stream_id"], event["payload"]["tool_call_id"])] += 1
    for key, streams in started.items():
        if len(streams) > 1:
            check.fail(f"ExecutionStarted streams for {key}: {sorted(streams)}")
    for stream, count in starts_per_stream.items():
        if count > 1:
            check.fail(f"execution {stream} started {count} times")
    for key, count in created.items():
        if count > 1:
            check.fail(f"SubagentSessionCreated {key}: {count}")
    discarded_rounds = 0
    for session_id, messages in db.messages.items():
        if db.sessions.get(session_id, {}).get("session_type") == "SUBAGENT":
            continue
        for m in messages:
            names = [c["name"] for c in m.get("tool_calls") or []]
            if m["discarded"] and any(n in DELEGATION_TOOLS for n in names):
                discarded_rounds += 1
                check.fail(f"session {session_id}: delegation round seq {m['seq']} discarded")
    check.counts.update(
        executions=len(db.executions),
        delegation_calls=len(started),
        discarded_delegation_rounds=discarded_rounds,
    )
    return check


def check_2(db: DbState) -> Check:
    check = Check("2", "every tool call has exactly one TOOL result; no orphan, no duplicate")
    calls = results = exempt = 0
    for session_id, messages in db.messages.items():
        session = db.sessions.get(session_id, {})
        live = [m for m in messages if not m["discarded"]]
        last_assistant = max((m["seq"] for m in live if m["role"] == "ASSISTANT"), default=-1)
        asked: dict[str, int] = {}
        answered: Counter[str] = Counter()
        for m in live:
            if m["role"] == "ASSISTANT":
                for call_id in call_ids(m):
                    asked[call_id] = m["seq"]
            elif m["role"] == "TOOL":
                results += 1
                answered[m["tool_call_id"]] += 1
                if m["tool_call_id"] not in asked:
                    check.fail(f"session {session_id}: orphan TOOL seq {m['seq']} ({m['tool_call_id']})")
        calls += len(asked)
        for call_id, seq in asked.items():
            if answered[call_id] > 1:
                check.fail(f"session {session_id}: {answered[call_id]} TOOL results for {call_id}")
            elif answered[call_id] == 0:
                # A cancelled turn's last round legitimately has no results (yet).
                if session.get("phase") == "CANCELLED" and seq == last_assistant:
                    exempt += 1
                else:
                    check.fail(
                        f"session {session_id} ({session.get('phase')}): no TOOL result for "
                        f"{call_id} (ASSISTANT seq {seq})"
                    )
    for e in db.executions:
        if e["delivery_status"] != "DELIVERED":
            continue
        tools = [
            m
            for m in db.messages.get(e["parent_session_id"], [])
            if m["role"] == "TOOL" and m["tool_call_id"] == e["parent_tool_call_id"] and not m["discarded"]
        ]
        if len(tools) != 1:
            check.fail(f"execution {e['execution_id']} DELIVERED with {len(tools)} TOOL results in parent")
            continue
        body = json.loads(tools[0]["content"])
        if str(body.get("child_session_id")) != e["child_session_id"]:
            named = body.get("child_session_id")
            check.fail(f"execution {e['execution_id']}: parent TOOL result names child {named}")
    check.counts.update(tool_calls=calls, tool_results=results, exempt_cancelled_unanswered=exempt)
    return check


def check_3(db: DbState) -> Check:
    check = Check("3", "a parent's next model call only after all results of its previous turn")
    rounds = 0
    for session_id, messages in db.messages.items():
        pending: set[str] = set()
        for m in (m for m in messages if not m["discarded"]):
            if m["role"] == "ASSISTANT":
                if pending:
                    check.fail(
                        f"session {session_id}: ASSISTANT seq {m['seq']} before results of {sorted(pending)}"
                    )
                pending = set(call_ids(m))
                rounds += bool(pending)
            elif m["role"] == "TOOL":
                pending.discard(m["tool_call_id"])
            elif m["role"] == "USER" and pending:
                check.fail(f"session {session_id}: USER seq {m['seq']} while {sorted(pending)} unanswered")
                pending = set()
    # Across streams: a delivered child finished before the parent's next model answer.
    finished = {
        e["stream_id"]: e["position"] for e in reversed(db.events) if e["type"] == "ExecutionFinished"
    }
    for e in db.executions:
        if e["delivery_status"] != "DELIVERED" or e["parent_message_id"] is None:
            continue
        parent = [m for m in db.messages.get(e["parent_session_id"], []) if not m["discarded"]]
        seq = next((m["seq"] for m in parent if m["message_id"] == e["parent_message_id"]), None)
        following = next(
            (m for m in parent if seq is not None and m["seq"] > seq and m["role"] == "ASSISTANT"), None
        )
        done_at = finished.get(e["execution_id"])
        if following is not None and (done_at is None or following["position"] < done_at):
            check.fail(
                f"execution {e['execution_id']}: parent ASSISTANT seq {following['seq']} at position "
                f"{following['position']} before ExecutionFinished at {done_at}"
            )
    check.counts.update(tool_rounds=rounds)
    return check
