"""`muster-gateway`: configure logs, read settings and tokens, serve until SIGTERM/SIGINT.

uvicorn handles both signals: it stops accepting, closes WebSockets (1012, "service
restart"), waits up to `GRACE_S` for in-flight requests, then runs the lifespan shutdown.
"""

from __future__ import annotations

import logging

import uvicorn
from muster_runtime.process import collector, logs
from muster_runtime.process.settings import Settings
from muster_runtime.process.tokens import TokenError, load_tokens

from muster_gateway.bootstrap import build_app
from muster_gateway.protocol import TRANSPORT_MAX_BYTES

log = logging.getLogger("muster.gateway")
GRACE_S = 5  # well inside the launcher's 20 s stop budget


def run() -> None:
    settings = Settings.from_env()
    logs.configure("gateway", settings.log_level)
    if not settings.database_url:
        raise SystemExit("gateway: DATABASE_URL is not set")
    if not settings.kafka_bootstrap_servers:
        raise SystemExit("gateway: KAFKA_BOOTSTRAP_SERVERS is not set")
    try:
        tokens = load_tokens(settings)
    except TokenError as exc:
        raise SystemExit(f"gateway: {exc}") from None
    if not tokens:
        # Refuse to serve rather than serve a gateway nobody can use.
        raise SystemExit("gateway: no tokens (set MUSTER_TOKENS or MUSTER_TOKENS_FILE)")
    app = build_app(settings, tokens=tokens)
    config = uvicorn.Config(
        app,
        host=settings.gateway_host,
        port=settings.gateway_port,
        lifespan="on",
        loop="auto",  # uvloop: muster-runtime depends on it, as the other services' loop
        log_config=None,  # keep logs.configure's single-line format
        access_log=False,
        ws_max_size=TRANSPORT_MAX_BYTES,
        ws_per_message_deflate=settings.ws_compression,
        timeout_graceful_shutdown=GRACE_S,
    )
    log.info(
        "gateway_listen host=%s port=%d users=%d",
        settings.gateway_host,
        settings.gateway_port,
        len(set(tokens.values())),
    )
    collector.tune()
    uvicorn.Server(config).run()
