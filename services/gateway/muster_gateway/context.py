"""What the edges (ws.py, rest.py) need at request time, built by the lifespan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from muster_agent.mcp_tools.pool import McpTools
from muster_runtime.process.settings import Settings
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory
from starlette.applications import Starlette

from muster_gateway.auth import Authenticator
from muster_gateway.errors import GatewayError
from muster_gateway.fanout import Hub
from muster_gateway.limits import Admission
from muster_gateway.local_tools import LocalTools
from muster_gateway.metrics import Metrics
from muster_gateway.read_port import ClientReads


@dataclass(frozen=True)
class Gateway:
    settings: Settings
    auth: Authenticator
    metrics: Metrics
    reads: ClientReads  # what the handlers read for clients (`read_port.py`)
    hub: Hub
    local: LocalTools
    uows: UnitOfWorkFactory  # what the decisions run on (one unit of work per decision)
    mcp: McpTools | None = None  # the agents' MCP servers, for `/context` (ADR 0038)
    admission: Admission = field(default_factory=Admission)  # per-user limits (`limits.py`)


def gateway_of(app: Starlette) -> Gateway:
    found = getattr(app.state, "gateway", None)
    if found is None:  # only between process start and the end of the lifespan's startup
        raise GatewayError("internal", "gateway is starting")
    return cast(Gateway, found)
