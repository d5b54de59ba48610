"""Which rings wake the gateway's live consumer (`live_events.acts_on`)."""

from __future__ import annotations

from typing import Any, cast

from muster_gateway.fanout import Cursor, Hub
from muster_gateway.live_events import acts_on
from muster_gateway.local_tools import LocalTools

from tests.unit.gateway.test_fanout import Sink, Store


class Clients:
    """`LocalTools` as the predicate sees it: how many LOCAL clients are attached."""

    def __init__(self, attached: int) -> None:
        self.attached = attached

    def connected(self) -> int:
        return self.attached


async def test_only_watched_streams_wake_it_while_no_local_client_is_attached() -> None:
    hub = Hub(Store().fetch)
    local = Clients(0)
    relevant = acts_on(hub, cast(LocalTools, local))
    assert not relevant(b"s1")
    sink: Any = Sink()
    hub.subscribe(sink, "s1", Cursor(0, 0))
    assert relevant(b"s1") and not relevant(b"s2")
    local.attached = 1  # its tool requests may be on any session's stream
    assert relevant(b"s2")
    hub.unsubscribe(sink, "s1")
    local.attached = 0
    assert not relevant(b"s1")


async def test_without_local_tools_only_watched_streams_count() -> None:
    hub = Hub(Store().fetch)
    relevant = acts_on(hub, None)
    hub.subscribe(Sink(), "s1", Cursor(0, 0))
    assert relevant(b"s1") and not relevant(b"s2")
