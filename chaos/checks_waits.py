"""Check L: the waits (issue 11). No approval, question or tool request stays pending once
its session stopped waiting; every LOCAL request ran exactly once on its user's device
(however often it was sent: the device drops its socket, gateways die) and its result is
the one recorded; a LOCAL session's files are on the device and never in the server's
workspace; an `approval` session's files were written once each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos.dbstate import Check, DbState
from chaos.device import Device
from chaos.outcome import Outcome

WAITING = ("WAITING_APPROVAL", "WAITING_INPUT", "WAITING_CLIENT")


def check_waits(
    db: DbState,
    waits: list[dict[str, Any]],
    outcomes: list[Outcome],
    devices: dict[str, Device],
    workspaces: Path | None,
) -> Check:
    check = Check(
        "L", "waits: none left pending, each LOCAL request ran once on its device, files where they belong"
    )
    for wait in waits:
        phase = db.sessions.get(str(wait["session_id"]), {}).get("phase")
        if wait["status"] == "pending" and phase not in WAITING:
            check.fail(f"{wait['kind']} {wait['wait_id']} pending in a session {phase}")
    requests = [w for w in waits if w["kind"] == "tool"]
    ran = {rid: n for device in devices.values() for rid, n in device.runs.items()}
    for request in requests:
        rid = str(request["wait_id"])
        if request["status"] == "answered" and ran.get(rid) != 1:
            check.fail(f"tool request {rid} answered but ran {ran.get(rid, 0)} times on the device")
    for rid, times in ran.items():
        if times != 1:
            check.fail(f"tool request {rid} ran {times} times on the device")
    results = {str(w["wait_id"]): w for w in requests}
    for device in devices.values():
        for rid, outcome in device.results.items():
            recorded = _recorded(db, results.get(rid))
            if recorded is not None and json.loads(recorded) != outcome:
                check.fail(f"tool request {rid}: recorded result differs from the device's")
    for out in outcomes:
        if out.kind == "local" and out.session_id and workspaces is not None:
            leaked = list((workspaces / out.session_id).rglob("*.txt"))
            if leaked:
                check.fail(f"LOCAL session {out.session_id} wrote {leaked[0].name} in the server workspace")
    check.counts.update(
        waits=len(waits),
        approvals=sum(w["kind"] == "approval" for w in waits),
        tool_requests=len(requests),
        requests_resent=sum(max(0, n - 1) for d in devices.values() for n in d.received.values()),
        device_connections=sum(d.connections for d in devices.values()),
        device_drops=sum(d.drops for d in devices.values()),
        approvals_answered=sum(o.approvals for o in outcomes),
    )
    return check


def _recorded(db: DbState, request: dict[str, Any] | None) -> str | None:
    if request is None or request["status"] != "answered":
        return None
    answers = [
        m["content"]
        for m in db.messages.get(str(request["session_id"]), [])
        if m["role"] == "TOOL" and m["tool_call_id"] == request["tool_call_id"] and not m["discarded"]
    ]
    return answers[-1] if answers else None
