"""`GET /v1/sessions/{id}/events` (issue 36, an extension): a session's stored events as
the WebSocket replays them, for reads that need history rather than a live stream — the
console's turn timeline (every event's recorded `time`) and where compactions happened."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from muster_gateway.errors import GatewayError
from muster_gateway.frames import event_frame
from muster_gateway.rest import _ERRORS, GW, User

router = APIRouter()


@router.get("/v1/sessions/{session_id}/events", responses=_ERRORS)
async def session_events(
    gw: GW,
    user: User,
    session_id: str,
    after_position: Annotated[int, Query(alias="afterPosition", ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    types: Annotated[str | None, Query(max_length=2000)] = None,
) -> dict[str, Any]:
    """Frames `{type, sessionId, position, time, data}` with a position past
    `afterPosition`, in order, exactly as a `subscribe` replay gives them; `types`
    (comma-separated frame types) keeps only those. `nextAfterPosition` continues the read
    (null at the end)."""
    wanted = {t.strip() for t in types.split(",") if t.strip()} if types else None
    if wanted is not None and not wanted:
        raise GatewayError("bad_request", "types: must name at least one frame type")
    # The read a `subscribe` with `afterPosition` makes (ownership, then the stream version
    # at that position), then the hub's own fetch: the frames are the replay's.
    sid, cursor = await gw.reads.subscription_cursor(user, session_id, after_position)
    rows = await gw.reads.events_after(sid, cursor.version, limit)
    items = []
    for row in rows:
        frame = event_frame(sid, row.position, row.recorded_at, row.type, row.schema_version, row.payload)
        if frame is not None and (wanted is None or frame["type"] in wanted):
            items.append(frame)
    return {"items": items, "nextAfterPosition": rows[-1].position if len(rows) == limit else None}
