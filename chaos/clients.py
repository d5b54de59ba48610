"""The run's clients of its cluster: per user a WebSocket connection, a REST client and a
LOCAL device, and one database pool for the checks. `clients` starts them all and closes
them all on the way out, whatever happened (chaos and soak alike)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg

from chaos.cluster import ChaosCluster
from chaos.device import Device
from chaos.rest import Rest
from chaos.workload import USERS
from chaos.wsconn import Conn


async def json_codecs(conn: asyncpg.Connection) -> None:
    """As the services' pools do (muster_runtime.process.db): json/jsonb as Python objects."""
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(type_name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


@dataclass(frozen=True)
class Clients:
    conns: dict[str, Conn]
    rests: dict[str, Rest]
    devices: dict[str, Device]
    pool: asyncpg.Pool


@contextlib.asynccontextmanager
async def clients(cluster: ChaosCluster, run: str, **pool_options: Any) -> AsyncIterator[Clients]:
    """The users' clients, started; `run` names the devices' client ids."""
    conns = {user: Conn(cluster.ws_url, cluster.tokens[user]) for user in USERS}
    rests = {user: Rest(cluster.gateway_url, cluster.tokens[user]) for user in USERS}
    pool = await asyncpg.create_pool(
        cluster.database_url, min_size=1, max_size=4, init=json_codecs, **pool_options
    )
    devices = {
        user: Device(
            cluster.ws_url, cluster.tokens[user], cluster.data_dir / "devices" / user, f"{user}-{run}"
        )
        for user in USERS
    }
    try:
        for conn in conns.values():
            await conn.start()
        for device in devices.values():
            device.start()
        yield Clients(conns, rests, devices, pool)
    finally:
        for device in devices.values():
            await device.close()
        for conn in conns.values():
            await conn.close()
        for rest in rests.values():
            await rest.close()
        await pool.close()
