"""Leases: who runs a session or execution right now. Held by renewal; an expired lease
may be taken over. Fencing is done by stream versions, not by the lease itself."""

from __future__ import annotations

from muster_runtime.process.db import Connection, Pool

# How an insert into `leases` meets a held lease: it takes it over only when it has expired
# or is the inserter's own (a renewal); the claims' single statements use it too.
TAKE_OVER = """ON CONFLICT (resource_id) DO UPDATE
        SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
        WHERE leases.expires_at < now() OR leases.owner = EXCLUDED.owner"""


async def try_acquire(conn: Connection | Pool, resource_id: str, owner: str, ttl_s: float) -> bool:
    owner_now = await conn.fetchval(
        f"""INSERT INTO leases (resource_id, owner, expires_at)
           VALUES ($1, $2, now() + make_interval(secs => $3))
           {TAKE_OVER}
           RETURNING owner""",
        resource_id,
        owner,
        ttl_s,
    )
    return bool(owner_now == owner)


async def renew(conn: Connection | Pool, resource_id: str, owner: str, ttl_s: float) -> bool:
    result = await conn.execute(
        """UPDATE leases SET expires_at = now() + make_interval(secs => $3)
           WHERE resource_id = $1 AND owner = $2""",
        resource_id,
        owner,
        ttl_s,
    )
    return str(result).endswith(" 1")


async def release(conn: Connection | Pool, resource_id: str, owner: str) -> None:
    await conn.execute("DELETE FROM leases WHERE resource_id = $1 AND owner = $2", resource_id, owner)
