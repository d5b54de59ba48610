"""The WebSocket client of muster's public contract (DESIGN §7), shared by `muster chat`,
the LOCAL client, the end-to-end tests and the chaos driver."""

from muster_client.connection import Connection
from muster_client.events import EventLog
from muster_client.frames import TERMINAL, Frame, Lost, ServerError, call, request_frame, script, ws_url

__all__ = [
    "TERMINAL",
    "Connection",
    "EventLog",
    "Frame",
    "Lost",
    "ServerError",
    "call",
    "request_frame",
    "script",
    "ws_url",
]
