"""asyncpg connection pools, created in a service's lifespan, never at import time."""

from __future__ import annotations

import json
from typing import TypeAlias

import asyncpg

Pool: TypeAlias = asyncpg.Pool
Connection: TypeAlias = asyncpg.Connection
UniqueViolation = asyncpg.UniqueViolationError


async def _init_connection(conn: asyncpg.Connection) -> None:
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(type_name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _keep_session_state(conn: asyncpg.Connection) -> None:
    """Pooled connections hold no session state (LISTEN and session locks live on their own
    connections), so skip asyncpg's default reset: it costs a round trip per release."""


async def create_pool(database_url: str, *, min_size: int = 2, max_size: int = 10) -> Pool:
    pool: Pool = await asyncpg.create_pool(
        database_url,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_keep_session_state,
    )
    return pool
