"""Check R: crashes delay work but never change its outcome. Every execution ends as its
script says (FAILED only when its task fails on purpose, with that error; COMPLETED with the
scripted answer), unless its parent was cancelled; every root session ends in the phase its
plan expects, a FAILED one with the scripted error."""

from __future__ import annotations

import json

from chaos.dbstate import Check, DbState
from chaos.outcome import Outcome

PURPOSE = "on purpose"


def _scripted_answer(task: str) -> str | None:
    """The content of the last step of a `#script` task, when it has one."""
    try:
        steps = json.loads(task.removeprefix("#script"))["steps"]
    except (ValueError, KeyError, TypeError):
        return None
    last = steps[-1] if steps else {}
    return str(last["content"]) if "content" in last and "fail" not in last else None


def check_r(db: DbState, outcomes: list[Outcome]) -> Check:
    check = Check("R", "outcomes unchanged by crashes (no spurious failure, scripted answers)")
    cancelled_parents = {
        e["stream_id"]
        for e in db.events
        if e["type"] == "SessionPhaseChanged" and e["payload"]["phase"] == "CANCELLED"
    }
    faithful = 0
    for x in db.executions:
        if x["parent_session_id"] in cancelled_parents:
            continue
        xid, status = x["execution_id"], x["status"]
        meant_to_fail = '"fail": "chaos:' in x["task"]
        if meant_to_fail:
            if status != "FAILED" or PURPOSE not in str(x["error"]):
                check.fail(f"execution {xid}: meant to fail, ended {status} ({x['error']})")
                continue
        elif status != "COMPLETED":
            check.fail(f"execution {xid} ({x['invocation_type']}): ended {status}: {x['error']}")
            continue
        else:
            answer = _scripted_answer(x["task"])
            if answer is not None and x["result"] != answer:
                check.fail(f"execution {xid}: result {x['result']!r}, script says {answer!r}")
                continue
        faithful += 1
    for out in outcomes:
        if out.phase != out.expect:
            check.fail(f"session {out.session_id} ({out.kind}): {out.phase}, expected {out.expect}")
        session = db.sessions.get(out.session_id or "", {})
        if out.expect == "FAILED" and PURPOSE not in str(session.get("last_error")):
            check.fail(f"session {out.session_id}: FAILED with {session.get('last_error')!r}")
    check.counts.update(executions_as_scripted=faithful, sessions=len(outcomes))
    return check
