"""`GET /v1/sessions/{id}/events` (issue 36, an extension): a session's stored events as
the WebSocket replays them, for reads that need history rather than a live stream — the
console's turn timeline (every event's recorded `time`) and where compactions happened."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from muster_gateway.errors import GatewayError
from muster_gateway.frames import event_frame
from muster_gateway.queries import owned
from muster_gateway.rest import _ERRORS, GW, User

router = APIRouter()

EVENTS = """
SELECT position, stream_version, recorded_at, type, schema_version, payload
FROM events WHERE stream_id = $1 AND position > $2 ORDER BY stream_version LIMIT $3
"""


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
    row = await owned(gw.pool, user, session_id, "session_id")
    sid = str(row["session_id"])
    rows = await gw.pool.fetch(EVENTS, sid, after_position, limit)
    items = []
    for r in rows:
        frame = event_frame(sid, r[0], r[2], r[3], r[4], r[5])
        if frame is not None and (wanted is None or frame["type"] in wanted):
            items.append(frame)
    return {"items": items, "nextAfterPosition": rows[-1][0] if len(rows) == limit else None}
