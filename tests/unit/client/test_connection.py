"""`muster_client.Connection` against an in-process WebSocket server."""

from __future__ import annotations

import asyncio

import pytest
from muster_client import Connection, Lost, ServerError, ws_url

from .fake_gateway import running


def test_ws_url() -> None:
    assert ws_url("http://127.0.0.1:8765", "a b/c") == "ws://127.0.0.1:8765/v1/ws?token=a%20b%2Fc"
    assert ws_url("ws://h:1/v1/ws", "t") == "ws://h:1/v1/ws?token=t"
    assert ws_url("wss://h/v1/ws?token=old&x=1", "t") == "wss://h/v1/ws?x=1&token=t"


async def test_requests_are_matched_by_id_and_errors_raise() -> None:
    async with running() as gw:
        conn = Connection(gw.url, "tok en")
        await conn.start()
        try:
            assert gw.paths == ["/v1/ws?token=tok%20en"]
            assert await conn.ping()
            replies = await asyncio.gather(*(conn.request("ping") for _ in range(5)))
            assert sorted(r["id"] for r in replies) == sorted({r["id"] for r in replies})
            assert await conn.ack("create_session", data={"content": "hi"}) == {"sessionId": "s-new", "messageId": "m1"}
            with pytest.raises(ServerError) as caught:
                await conn.ack("nonsense")
            assert caught.value.code == "unknown_type"
        finally:
            await conn.close()


async def test_events_per_session_and_subscribe_after_position() -> None:
    async with running() as gw:
        for n in range(3):
            await gw.event("s1", "message", {"n": n}, send=False)
        conn = Connection(gw.url, "t")
        await conn.start()
        try:
            await conn.subscribe("s1", after_position=1)
            await conn.wait_for(lambda: len(conn.events["s1"]) == 2, 5)
            assert [e["position"] for e in conn.events["s1"]] == [2, 3]
            await gw.event("s2", "session_status", {"phase": "COMPLETED"})
            await conn.wait_for(lambda: conn.log.phases("s2") == ["COMPLETED"], 5)
            assert conn.log.last_pos == {"s1": 3, "s2": 4}
            await gw.broadcast({"type": "error", "data": {"code": "bad_request", "message": "x"}})
            await conn.wait_for(lambda: bool(conn.unmatched), 5)
        finally:
            await conn.close()


async def test_duplicates_are_counted_and_kept_or_dropped() -> None:
    async with running() as gw:
        keep, drop = Connection(gw.url, "t"), Connection(gw.url, "t", keep_duplicates=False)
        await keep.start()
        await drop.start()
        try:
            event = await gw.event("s1", "message", {})
            await gw.broadcast(event)
            await keep.wait_for(lambda: len(keep.log.duplicates) == 1, 5)
            await drop.wait_for(lambda: len(drop.log.duplicates) == 1, 5)
            assert len(keep.events["s1"]) == 2 and len(drop.events["s1"]) == 1
        finally:
            await keep.close()
            await drop.close()


async def test_reconnect_runs_on_connect_and_resubscribes_after_the_last_position() -> None:
    async with running() as gw:
        connected: list[int] = []

        async def on_connect(conn: Connection) -> None:
            connected.append(conn.connects)

        conn = Connection(gw.url, "t", reconnect=True, keep_duplicates=False, on_connect=on_connect, max_delay=0.2)
        await conn.start()
        try:
            await conn.subscribe("s1")
            await gw.event("s1", "message", {"n": 1})
            await conn.wait_for(lambda: conn.log.last_pos.get("s1") == 1, 5)
            await gw.drop()
            await gw.event("s1", "message", {"n": 2}, send=False)  # while the socket is down
            await conn.wait_for(lambda: conn.connects == 2 and conn.log.last_pos.get("s1") == 2, 10)
            assert connected == [1, 2]
            resubscribe = gw.of_type("subscribe")[-1]
            assert resubscribe["data"] == {"afterPosition": 1}
            assert [e["position"] for e in conn.events["s1"]] == [1, 2] and not conn.log.duplicates
            assert await conn.ping()
        finally:
            await conn.close()


async def test_without_reconnect_a_drop_fails_requests_and_ends_the_stream() -> None:
    async with running() as gw:
        conn = Connection(gw.url, "t")
        await conn.start()
        await gw.event("s1", "message", {})
        seen = []

        async def consume() -> None:
            async for event in conn.stream("s1"):
                seen.append(event["position"])

        reader = asyncio.create_task(consume())
        await conn.wait_for(lambda: seen == [1], 5)
        await gw.drop()
        await asyncio.wait_for(reader, 5)
        assert conn.finished
        with pytest.raises(Lost):
            await conn.request("ping")
        await conn.close()


async def test_start_fails_when_nothing_listens() -> None:
    with pytest.raises(OSError):
        await Connection("ws://127.0.0.1:9/v1/ws", "t").start()
