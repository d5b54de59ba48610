"""Composition root: wires settings, tokens, the pool, Kafka and the edges into an app.

Nothing connects at import or in `build_app`; the lifespan opens every resource when the
server starts and closes them, newest first, when it stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from muster_agent.mcp_tools.pool import McpTools
from muster_runtime.messaging import dispatch
from muster_runtime.messaging.dispatch import Dispatcher
from muster_runtime.messaging.kafka import publisher, start_producer
from muster_runtime.messaging.local_broker import tuning
from muster_runtime.messaging.outbox import OutboxRelay
from muster_runtime.process import retrying, tracing
from muster_runtime.process.db import Pool, create_pool
from muster_runtime.process.settings import Settings
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from muster_gateway import console, rest, rest_events, rest_sessions, rest_waits, ws
from muster_gateway.asyncapi import asyncapi_schema
from muster_gateway.auth import Authenticator
from muster_gateway.context import Gateway
from muster_gateway.fanout import Hub
from muster_gateway.limits import Admission, UserLimits
from muster_gateway.live_events import build_broker
from muster_gateway.live_lag import LiveLag
from muster_gateway.local_tools import LocalTools
from muster_gateway.metrics import Metrics
from muster_gateway.overload import Shedder
from muster_gateway.overload_rule import Thresholds
from muster_gateway.postgres_reads import PostgresReads

log = logging.getLogger("muster.gateway")


async def _supervise(name: str, run: Callable[[], Awaitable[Any]]) -> None:
    """Keep a background loop alive across transient failures (database restarts…); a run
    that returns is started again at once, with the backoff starting over."""

    def before_sleep(state: retrying.RetryCallState) -> None:
        log.warning(
            "background_task_failed task=%s error=%s retry_in_s=%.1f",
            name,
            retrying.error_name(state),
            state.upcoming_sleep,
        )

    while True:
        await retrying.call(retrying.forever(Exception, before_sleep=before_sleep), run)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _close_pool(pool: Pool) -> None:
    try:
        await asyncio.wait_for(pool.close(), timeout=5.0)
    except TimeoutError:
        pool.terminate()


def build_app(settings: Settings, *, tokens: Mapping[str, str], kafka: bool = True) -> FastAPI:
    """`kafka=False` (tests) runs without producer, relay and consumer: live delivery then
    relies on the hub's poller and subscribe-time catch-up, and the outbox is not drained."""
    auth = Authenticator(tokens)
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(tracing.running("gateway", settings))
            pool = await create_pool(settings.database_url)
            stack.push_async_callback(_close_pool, pool)
            reads = PostgresReads(pool)
            hub = Hub(
                reads.events_after,
                on_pushed=metrics.events_pushed.inc,
                poll_interval_s=5.0 if kafka else 0.2,
                versions=reads.stream_versions,
            )
            stack.push_async_callback(hub.close)
            local = LocalTools(reads, poll_interval_s=5.0 if kafka else 0.2)
            stack.push_async_callback(local.close)
            metrics.subscriptions.set_function(hub.subscription_count)

            def background(name: str, run: Callable[[], Awaitable[Any]]) -> None:
                task = asyncio.create_task(_supervise(name, run), name=name)
                stack.push_async_callback(_cancel, task)

            live_lag = LiveLag() if kafka else None
            shedder = Shedder(
                reads.turn_backlog,
                Thresholds.of(settings),
                events_lag=live_lag.lag_ms if live_lag is not None else None,
            )
            if kafka:
                producer = await start_producer(settings)
                stack.push_async_callback(producer.stop)
                ringer = tuning.publishers_ringer(settings)
                if ringer is not None:
                    stack.callback(ringer.close)
                dispatcher = Dispatcher(producer, pool, ringer=ringer)
                dispatch.install(dispatcher)
                stack.callback(dispatch.install, None)
                stack.push_async_callback(dispatcher.close)
                background("outbox-dispatch", dispatcher.run)
                relay = OutboxRelay(pool, settings.database_url, publisher(producer, ringer))
                background("outbox-relay", relay.run)
                broker = build_broker(settings, hub, local, live_lag, shedder.latency)
                await broker.start()
                stack.push_async_callback(broker.stop)
            background("fanout-poller", hub.run_poller)
            background("local-tools-poller", local.run_poller)
            uows = partial(PostgresUnitOfWork, pool)
            mcp = McpTools.from_settings(settings)
            stack.push_async_callback(mcp.close)
            admission = Admission(UserLimits.of(settings), shedder)
            app.state.gateway = Gateway(
                settings, auth, metrics, reads, hub, local, uows, mcp, admission=admission
            )
            log.info("gateway_started instance_id=%s kafka=%s", settings.instance_id, kafka)
            try:
                yield
            finally:
                app.state.gateway = None
                log.info("gateway_stopping instance_id=%s", settings.instance_id)

    app = FastAPI(title="muster gateway", version="0.1.0", lifespan=lifespan)
    app.state.metrics = metrics
    app.state.gateway = None
    app.include_router(rest.router)
    app.include_router(rest_sessions.router)
    app.include_router(rest_waits.router)
    app.include_router(rest_events.router)
    app.include_router(ws.router)
    rest.install_error_handlers(app)
    console.install(app, settings)

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        gateway: Gateway | None = app.state.gateway
        body = await metrics.scrape(gateway.reads if gateway is not None else None)
        return Response(body, media_type=metrics.content_type)

    @app.get("/asyncapi.json", include_in_schema=False)
    async def asyncapi(request: Request) -> JSONResponse:
        return JSONResponse(asyncapi_schema())

    return app
