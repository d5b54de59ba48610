"""Hostile WebSocket frames against the running system (hypothesis).

alice's socket receives generated frames: known and random types, ids of every JSON type,
nested values, wrong field types, unicode (lone surrogates and NUL included), sizes up to
4 MiB, binary and non-JSON frames, and session ids that are hers, bob's or nobody's.
Required, frame by frame: exactly one reply (`ack`, `pong` or `error`) echoing the frame's
id; every error a §7 code and never `internal`; the socket never closed by the server; no
ack for anything naming bob's session. Afterwards: bob's session and stream are untouched,
and no service exited (`stable_services`).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from .fuzz_strategies import raw_frames
from .fuzz_support import Tally, budget, check_error_body
from .wsclient import TERMINAL, script

pytestmark = [pytest.mark.e2e, pytest.mark.fuzz, pytest.mark.serial,
              # Frames of up to 4 MiB: hypothesis warns that their repr is large; expected here.
              pytest.mark.filterwarnings("ignore:Generating overly large repr"),
              # The client's keepalive thread draws its ping payloads from `random` while
              # hypothesis generates, which it reports; our strategies use no `random`.
              pytest.mark.filterwarnings("ignore:Do not use the `random` module inside strategies")]
REPLY_TYPES = ("ack", "error", "pong")
TARGETED = ("send_message", "cancel", "subscribe", "unsubscribe", "create_side_session",
            "answer_approval", "answer_question", "tool_result")


def _reply(ws: ClientConnection, timeout: float = 30) -> dict[str, Any]:
    """The next ack/pong/error; events of alice's own sessions (she creates many) are skipped."""
    deadline = time.monotonic() + timeout
    while True:
        frame = json.loads(ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
        if frame.get("type") in REPLY_TYPES and "position" not in frame:
            return dict(frame)


def _echoed(sent: Any, reply: dict[str, Any]) -> bool:
    """An object frame's `id` comes back as sent (compared as JSON: NaN is not == NaN)."""
    if not isinstance(sent, dict) or sent.get("id") is None:
        return "id" not in reply
    return json.dumps(sent["id"], sort_keys=True) == json.dumps(reply.get("id"), sort_keys=True)


def _bobs_view(cluster, session_id: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """What bob sees of his session over REST."""
    headers = {"Authorization": f"Bearer {cluster.tokens['bob']}"}
    base = f"{cluster.gateway_url}/v1/sessions/{session_id}"
    session = httpx.get(base, headers=headers, timeout=15)
    messages = httpx.get(base + "/messages", params={"rounds": 1000}, headers=headers, timeout=15)
    assert session.status_code == messages.status_code == 200, (session.text, messages.text)
    return {"session": session.json(), "messages": messages.json()}


def _finished_session(cluster, user: str) -> str:  # type: ignore[no-untyped-def]
    """A session of `user` whose turn has ended, created on a socket of its own."""
    with connect(f"{cluster.ws_url}?token={cluster.tokens[user]}") as ws:
        ws.send(json.dumps({"type": "create_session", "id": "b", "data": {"content": script({"content": user})}}))
        session_id = str(_reply(ws)["data"]["sessionId"])
        while True:  # the creating socket is subscribed: wait for the turn's end event
            event = json.loads(ws.recv(timeout=60))
            if event.get("type") == "session_status" and event["data"]["phase"] in TERMINAL:
                return session_id


@pytest.mark.usefixtures("stable_services")
def test_websocket_survives_hostile_frames(cluster) -> None:  # type: ignore[no-untyped-def]
    tally = Tally("websocket (hypothesis)", "frames")
    bob_session = _finished_session(cluster, "bob")
    bob_before = _bobs_view(cluster, bob_session)
    url = f"{cluster.ws_url}?token={cluster.tokens['alice']}"
    with connect(url, max_size=16 * 1024 * 1024) as ws:
        ws.send(json.dumps({"type": "create_session", "id": "own", "data": {}}))
        own_session = str(_reply(ws)["data"]["sessionId"])
        # Hers (this socket is subscribed to it), hers (not subscribed), bob's, nobody's.
        ids = st.sampled_from([own_session, _finished_session(cluster, "alice"), bob_session, str(uuid.uuid4())])
        examples = budget(bounded=1500, full=10_500)

        # No shrinking: a violation may leave the socket closed, so shrinking would only
        # replay that; the first failing frame is reported as it was generated.
        @settings(max_examples=examples, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
                  suppress_health_check=list(HealthCheck))
        @given(frame=raw_frames(ids))
        def run(frame: tuple[Any, str | bytes]) -> None:
            parsed, raw = frame
            where = repr(raw[:200])
            try:
                ws.send(raw)
                reply = _reply(ws)
            except ConnectionClosed as exc:
                tally.violation("socket closed by the server", f"{where}: {exc}")
                raise
            except TimeoutError:
                tally.violation("no reply", where)
                raise
            tally.tried += 1
            if reply["type"] == "error":
                check_error_body(reply.get("data"), where, tally)
            if not _echoed(parsed, reply):
                tally.violation("id not echoed", f"{where} -> {reply.get('id')!r}")
            if (reply["type"] == "ack" and isinstance(parsed, dict) and parsed.get("sessionId") == bob_session
                    and parsed.get("type") in TARGETED):
                tally.violation("cross-user ack", f"{where} -> {reply}")

        started = time.perf_counter()
        run()
        took = time.perf_counter() - started
        ws.send(json.dumps({"type": "ping", "id": "last"}))
        assert _reply(ws) == {"type": "pong", "id": "last"}  # still open, still answering
    if _bobs_view(cluster, bob_session) != bob_before:
        tally.violation("cross-user effect", "bob's session or messages changed")
    tally.record()
    print(f"\n{tally.report()} ({took:.0f}s)")
    assert tally.tried >= examples, tally.summary()
    assert not tally.violations, tally.report()


def test_regression_subscribe_after_a_position_past_bigint_is_bad_request(cluster) -> None:  # type: ignore[no-untyped-def]
    """Found by the fuzzer: an afterPosition past PostgreSQL's bigint reached the store query
    and came back as `internal`."""
    session_id = _finished_session(cluster, "alice")
    with connect(f"{cluster.ws_url}?token={cluster.tokens['alice']}") as ws:
        for position in (2**63, 2**70):
            ws.send(json.dumps({"type": "subscribe", "id": "s", "sessionId": session_id,
                                "data": {"afterPosition": position}}))
            reply = _reply(ws)
            assert (reply["type"], reply["data"]["code"]) == ("error", "bad_request"), reply
            assert "afterPosition" in reply["data"]["message"]
        ws.send(json.dumps({"type": "subscribe", "id": "ok", "sessionId": session_id,
                            "data": {"afterPosition": 2**63 - 1}}))
        assert _reply(ws) == {"type": "ack", "id": "ok", "data": {"position": 2**63 - 1}}


@pytest.mark.usefixtures("stable_services")
def test_websocket_refuses_every_wrong_token(cluster) -> None:  # type: ignore[no-untyped-def]
    """Any token but a real one (query or header): `unauthorized`, then close 4401."""
    tally = Tally("websocket tokens (hypothesis)", "handshakes")
    valid = set(cluster.tokens.values())

    @settings(max_examples=budget(bounded=100, full=1000), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(token=st.text(max_size=60).filter(lambda t: t not in valid), in_header=st.booleans())
    def run(token: str, in_header: bool) -> None:
        if in_header:  # only what a header may carry: visible latin-1, no surrounding space
            token = "".join(c for c in token if " " < c <= "\xff" and c != "\x7f")
            if token in valid:
                return
            ws = connect(cluster.ws_url, additional_headers={"Authorization": f"Bearer {token}"})
        else:
            ws = connect(f"{cluster.ws_url}?{urlencode({'token': token})}")
        code: int | None = None  # stays None if the server sends more instead of closing
        with ws:
            reply = json.loads(ws.recv(timeout=15))
            try:
                ws.recv(timeout=15)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else None
        tally.tried += 1
        if reply.get("type") != "error" or check_error_body(reply.get("data"), repr(token), tally) != "unauthorized":
            tally.violation("not unauthorized", f"{token!r}: {reply}")
        if code != 4401:
            tally.violation("not closed with 4401", f"{token!r}: {code}")

    run()
    tally.record()
    print(f"\n{tally.report()}")
    assert tally.tried > 0 and not tally.violations, tally.report()
