"""The user of an `approval` session: approves whatever its tree waits for (the session's
own calls and its children's), from REST's pending lists, whatever gets killed. An answer
whose reply was lost is sent again; `conflict` then means it had already counted."""

from __future__ import annotations

import asyncio

from chaos.outcome import Outcome
from chaos.rest import Rest
from chaos.wsconn import Conn, Lost


async def approve_all(conn: Conn, rest: Rest, session_id: str, out: Outcome) -> None:
    while True:
        tree = [session_id, *(e["childSessionId"] for e in await rest.executions(session_id))]
        for sid in tree:
            pending = await rest.json(f"/v1/sessions/{sid}/approvals", status="pending")
            for approval in pending["items"]:
                data = {"approvalId": approval["approvalId"], "decision": "approve"}
                try:
                    reply = await conn.request("answer_approval", sid, data)
                except (TimeoutError, Lost):
                    continue  # the next pass sees whether it counted
                if reply["type"] == "ack":
                    out.approvals += 1
                elif reply["data"]["code"] != "conflict":
                    raise RuntimeError(f"answer_approval refused: {reply}")
        await asyncio.sleep(0.5)
