"""Session events as a client receives them, kept per session with their positions.

A client that reconnects and re-subscribes with `afterPosition` may see an event twice if
the server or the client got it wrong; the log notices: every position seen, duplicates
and positions that went backwards are recorded. `keep_duplicates` decides whether a
repeated event is also kept in `events` (tests that check the server's no-duplicate
promise want to see it) or dropped there (a client that wants each event once).
"""

from __future__ import annotations

from collections import defaultdict

from muster_client.frames import Frame


class EventLog:
    def __init__(self, keep_duplicates: bool = True) -> None:
        self.keep_duplicates = keep_duplicates
        self.events: dict[str, list[Frame]] = defaultdict(list)
        self.last_pos: dict[str, int] = {}
        self.seen: dict[str, set[int]] = defaultdict(set)
        self.duplicates: list[tuple[str, int]] = []
        self.reordered: list[tuple[str, int]] = []
        # `assistant_delta` frames (no position: never stored, never replayed) per session,
        # and every frame of a session, events and deltas, in the order they arrived.
        self.deltas: dict[str, list[Frame]] = defaultdict(list)
        self.timeline: dict[str, list[Frame]] = defaultdict(list)

    def add_delta(self, frame: Frame) -> None:
        session_id = str(frame["sessionId"])
        self.deltas[session_id].append(frame)
        self.timeline[session_id].append(frame)

    def add(self, frame: Frame) -> bool:
        """Record one event; False when its position was seen before."""
        session_id, position = str(frame["sessionId"]), int(frame["position"])
        if position in self.seen[session_id]:
            self.duplicates.append((session_id, position))
            if self.keep_duplicates:
                self.events[session_id].append(frame)
                self.timeline[session_id].append(frame)
            return False
        if position < self.last_pos.get(session_id, 0):
            self.reordered.append((session_id, position))
        self.seen[session_id].add(position)
        self.events[session_id].append(frame)
        self.timeline[session_id].append(frame)
        self.last_pos[session_id] = max(position, self.last_pos.get(session_id, 0))
        return True

    def of_type(self, session_id: str, type_: str) -> list[Frame]:
        return [e for e in self.events[session_id] if e.get("type") == type_]

    def phases(self, session_id: str) -> list[str]:
        return [str(e["data"]["phase"]) for e in self.of_type(session_id, "session_status")]
