"""Drives each planned session over WebSocket, whatever gets killed meanwhile, and reads
its final state over REST. Every acknowledged command is recorded for invariant 4."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg

from chaos.approver import approve_all
from chaos.outcome import Outcome
from chaos.rest import Rest, tool_results
from chaos.schedule import KillRunner
from chaos.workload import SessionPlan, followup_content
from chaos.wsconn import Conn, Lost

WS_GRACE_S = 10.0  # how long WS may trail REST before the frames count as missing
MAX_SHED_WAIT_S = 10.0  # the longest wait after an `overloaded` refusal, whatever its hint


async def after_shedding(reply: dict[str, Any], out: Outcome, what: str) -> bool:
    """True, after waiting as the refusal asks, when `reply` refused a new turn as
    `overloaded` (ADR 0041): a kill can leave the gateway's live consumer behind long
    enough to shed, and a client is told to come back, not to give up."""
    data = reply.get("data") or {}
    if reply.get("type") != "error" or data.get("code") != "overloaded":
        return False
    wait_s = min(MAX_SHED_WAIT_S, max(0.1, float(data.get("retryAfterMs", 1000)) / 1000))
    out.shed += 1
    print(f"[chaos] {what} shed (overloaded) for {out.title}: asking again in {wait_s:.1f} s", flush=True)
    await asyncio.sleep(wait_s)
    return True


class Unfinished(Exception):
    pass


class Driver:
    def __init__(
        self, conns: dict[str, Conn], rests: dict[str, Rest], db: asyncpg.Pool, kills: KillRunner
    ) -> None:
        self.conns, self.rests, self.db, self.kills = conns, rests, db, kills
        self.deadline = math.inf  # set once the last kill is done
        self.outcomes: dict[int, Outcome] = {}
        self.active = 0
        self.starting = 0  # released by the kill schedule, still in their start jitter
        kills.inflight = lambda: self.active
        kills.none_starting = lambda: self.starting == 0

    async def run(self, plan: SessionPlan) -> Outcome:
        out = Outcome(plan.index, plan.kind, plan.user, plan.title, plan.expect)
        self.outcomes[plan.index] = out
        await self.kills.wait_steps(plan.start_after_kill)
        self.starting += 1
        await asyncio.sleep(plan.jitter_s)
        started = time.monotonic()
        self.starting -= 1
        self.active += 1
        try:
            await self._drive(plan, out)
        except Unfinished as exc:
            out.error = f"unfinished: {exc}"
        except Exception as exc:
            out.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.active -= 1
        out.seconds = round(time.monotonic() - started, 2)
        print(
            f"[chaos] session {plan.index:2d} {plan.kind:<8} {out.phase or '-':<9} "
            f"(expected {out.expect}) {out.error or ''}",
            flush=True,
        )
        return out

    async def _drive(self, plan: SessionPlan, out: Outcome) -> None:
        conn, rest = self.conns[plan.user], self.rests[plan.user]
        session_id, message_id = await self._create(conn, plan, out)
        out.session_id = session_id
        out.acked.append(message_id)
        if plan.kind == "approval":
            approving = asyncio.create_task(approve_all(conn, rest, session_id, out))
            try:
                out.phase = await self._turn(conn, rest, session_id, message_id, out)
            finally:
                approving.cancel()
            out.phase = str((await rest.session(session_id))["phase"])
            return
        if plan.kind == "cancel":
            await self._until(
                conn,
                lambda: bool(conn.of_type(session_id, "subagent_session_created")),
                60,
                "children never appeared",
                must=False,
            )
        elif plan.kind == "command" and plan.cancel_after_s is not None:
            # Cancelled once a command runs: a cancel before the first turn starts only drops
            # the queued input, and the session never gets a phase. Never started in time:
            # not cancelled, it completes.
            if not await conn.wait_for(lambda: bool(conn.of_type(session_id, "tool_call_started")), 120):
                plan.cancel_after_s, out.expect = None, "COMPLETED"
        if plan.cancel_after_s is not None:
            # kind cancel: after the children appeared; kind command: while its commands run.
            await asyncio.sleep(plan.cancel_after_s)
            ended = (await rest.session(session_id))["phase"]
            if ended in ("COMPLETED", "FAILED"):
                # A gateway down for longer than the turn lasted: too late to cancel it.
                out.expect = str(ended)
            else:
                reply = await conn.request("cancel", session_id)
                if reply["type"] == "ack":
                    out.cancel_acked_at = datetime.now(UTC)
        out.phase = await self._turn(conn, rest, session_id, message_id, out)
        if plan.kind == "followup" and out.phase == "COMPLETED":
            child = next(
                (
                    r["child_session_id"]
                    for r in tool_results(await rest.messages(session_id))
                    if r.get("child_session_id")
                ),
                None,
            )
            if child is None:
                raise RuntimeError("first turn has no TOOL result with child_session_id")
            followup = {"content": followup_content(plan, str(child)), "clientMessageId": f"{plan.title}-2"}
            reply = await conn.request("send_message", session_id, followup)
            while await after_shedding(reply, out, "send_message"):
                reply = await conn.request("send_message", session_id, followup)
            if reply["type"] != "ack":
                raise RuntimeError(f"send_message refused: {reply}")
            second = str(reply["data"]["messageId"])
            out.acked.append(second)
            out.phase = await self._turn(conn, rest, session_id, second, out)
        out.children = [
            e["data"]["childSessionId"] for e in conn.of_type(session_id, "subagent_session_created")
        ]
        out.phase = str((await rest.session(session_id))["phase"])
        if plan.kind == "side" and out.phase == "COMPLETED":
            await self._side_tasks(conn, rest, plan, session_id, out)

    async def _side_tasks(self, conn: Conn, rest: Rest, plan: SessionPlan, source: str, out: Outcome) -> None:
        """The plan's chain of side tasks, each branched off the previous one; a side task
        that does not complete makes the outcome its phase."""
        for depth, (mode, content) in enumerate(plan.side_tasks, start=1):
            client_id = f"{plan.title}-side-{depth}"
            data = {"content": content, "contextMode": mode, "clientMessageId": client_id}
            source, message_id = await self._create_side(conn, source, data, client_id, out)
            out.side_tasks.append(source)
            out.acked.append(message_id)
            phase = await self._turn(conn, rest, source, message_id, out)
            if phase != "COMPLETED":
                out.phase = phase
                return

    async def _create_side(
        self, conn: Conn, source: str, data: dict[str, Any], client_id: str, out: Outcome
    ) -> tuple[str, str]:
        """create_side_session is not idempotent either: after a lost reply, look it up."""
        while True:
            try:
                reply = await conn.request("create_side_session", source, data, retry=False)
                if await after_shedding(reply, out, "create_side_session"):
                    continue
            except (TimeoutError, Lost):
                await conn.request("ping")
                row = None
                for pause in (1.0, 2.0):
                    await asyncio.sleep(pause)
                    row = row or await self.db.fetchrow(
                        "SELECT session_id, message_id FROM session_inputs WHERE client_message_id = $1",
                        client_id,
                    )
                if row is None:
                    continue
                side_id, message_id = str(row["session_id"]), str(row["message_id"])
            else:
                if reply["type"] != "ack":
                    raise RuntimeError(f"create_side_session refused: {reply}")
                side_id, message_id = str(reply["data"]["sessionId"]), str(reply["data"]["messageId"])
            await conn.subscribe(side_id)
            return side_id, message_id

    async def _create(self, conn: Conn, plan: SessionPlan, out: Outcome) -> tuple[str, str]:
        """create_session is not idempotent: after a lost reply, look the title up."""
        client_id = f"{plan.title}-1"
        data = {"title": plan.title, "content": plan.first, "clientMessageId": client_id, **plan.settings}
        while True:
            try:
                reply = await conn.request("create_session", data=data, retry=False)
                if await after_shedding(reply, out, "create_session"):
                    continue
            except (TimeoutError, Lost):
                # Once a gateway answers again, the old one's transaction has ended (it is
                # dead, or it was only slow): look twice before creating again.
                await conn.request("ping")
                row = None
                for pause in (1.0, 2.0):
                    await asyncio.sleep(pause)
                    row = row or await self._lookup(plan.title, client_id)
                if row is None:
                    continue
                session_id, message_id = row
            else:
                if reply["type"] != "ack":
                    raise RuntimeError(f"create_session refused: {reply}")
                session_id, message_id = str(reply["data"]["sessionId"]), str(reply["data"]["messageId"])
            # The creating socket is subscribed already; again in case it reconnected since.
            await conn.subscribe(session_id)
            return session_id, message_id

    async def _lookup(self, title: str, client_id: str) -> tuple[str, str] | None:
        row = await self.db.fetchrow(
            """SELECT s.session_id, i.message_id FROM sessions s
               JOIN session_inputs i ON i.session_id = s.session_id AND i.client_message_id = $2
               WHERE s.title = $1""",
            title,
            client_id,
        )
        return None if row is None else (str(row["session_id"]), str(row["message_id"]))

    async def _turn(self, conn: Conn, rest: Rest, session_id: str, message_id: str, out: Outcome) -> str:
        """Wait for the turn started by USER message `message_id` to end; WS first, REST
        as the safety net (and the witness that WS trailed)."""
        while True:
            if await conn.wait_for(lambda: conn.turn_done(session_id, message_id) is not None, 5.0):
                return str(conn.turn_done(session_id, message_id))
            if time.monotonic() > self.deadline:
                raise Unfinished(f"turn of {message_id} not ended by the quiescence deadline")
            phase = (await rest.session(session_id))["phase"]
            if phase in ("COMPLETED", "FAILED", "CANCELLED") and any(
                m["messageId"] == message_id for m in await rest.messages(session_id)
            ):
                out.ws_trailing += 1
                if await conn.wait_for(
                    lambda: conn.turn_done(session_id, message_id) is not None, WS_GRACE_S
                ):
                    return str(conn.turn_done(session_id, message_id))
                return str(phase)

    async def _until(self, conn: Conn, predicate: Any, within: float, what: str, must: bool = True) -> None:
        if not await conn.wait_for(predicate, within) and must:
            raise Unfinished(what)
