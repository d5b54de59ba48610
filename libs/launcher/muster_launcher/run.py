"""`muster run`: the whole system on one machine, in the foreground, until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path

from muster_runtime.process.settings import Settings

from .procs import free_port, port_in_use
from .services import SERVICES, service_env, service_spec
from .supervisor import Supervisor, log
from .tokens import effective_tokens


@dataclass
class RunOptions:
    wait_gateway: bool = True


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """One launcher per data dir: a second one would kill the first one's PostgreSQL as a
    leftover. flock is released by the kernel even when the launcher is SIGKILLed."""
    with open(data_dir / "launcher.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"muster: another `muster run` is using {data_dir}") from None
        yield


async def migrate(database_url: str) -> None:
    # Imported here: Alembic and SQLAlchemy are heavy and `muster chat` never needs them.
    from muster_runtime.store.migrate import upgrade

    # Alembic's env runs its own event loop, which cannot nest in ours: use a thread.
    await asyncio.to_thread(upgrade, database_url)


async def _start_all(
    sup: Supervisor,
    environ: dict[str, str],
    settings: Settings,
    tokens_file: Path,
    options: RunOptions,
) -> tuple[str, str]:
    """`environ` is the environment the children inherit; `settings` is what it says."""
    data_dir, gateway_port = settings.data_dir, settings.gateway_port
    database_url = settings.database_url.strip()
    bootstrap = settings.kafka_bootstrap_servers.strip()
    services_database_url = database_url
    infra: list[Awaitable[object]] = []
    if not database_url:
        from .postgres import postgres_spec, postgres_url, services_url

        # A port chosen now is kept for the server's restarts.
        pg_port = settings.pg_port or free_port()
        database_url = postgres_url(pg_port)
        services_database_url = services_url(data_dir, pg_port)
        infra.append(sup.start(postgres_spec(data_dir, pg_port)))
    if not bootstrap:
        from .broker import broker_spec

        kafka_port = settings.kafka_port or free_port()
        bootstrap = f"127.0.0.1:{kafka_port}"
        infra.append(sup.start(broker_spec(kafka_port, environ, settings)))
    else:
        from .topics import ensure_topics

        infra.append(ensure_topics(bootstrap, settings))
    await _all(infra)
    started = time.monotonic()
    await migrate(database_url)
    log(f"database migrated in {time.monotonic() - started:.1f}s")
    env = service_env(
        environ,
        database_url=services_database_url,
        bootstrap=bootstrap,
        data_dir=data_dir,
        tokens_file=tokens_file,
        gateway_port=gateway_port,
        local_broker=not settings.kafka_bootstrap_servers.strip(),
    )
    specs = [
        service_spec(
            name, settings, env, gateway_port=gateway_port, wait_gateway=options.wait_gateway, instance=i
        )
        for name in SERVICES
        for i in range(1, settings.instances(name) + 1)
    ]
    await _all([sup.start(spec) for spec in specs])
    return database_url, bootstrap


async def _all(aws: list[Awaitable[object]]) -> None:
    """Await all; on the first failure cancel the rest, so no start is left in flight to
    spawn a process after the supervisor has stopped everything."""
    try:
        async with asyncio.TaskGroup() as group:
            for aw in aws:
                group.create_task(_awaited(aw))
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None


async def _awaited(aw: Awaitable[object]) -> None:
    await aw


def run(options: RunOptions) -> int:
    # aiokafka logs every refused connection while the broker starts; our own retries and
    # errors say what matters.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    # The children inherit the launcher's environment (with what `service_env` adds).
    environ = dict(os.environ)
    settings = Settings.from_environ(environ)
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    gateway_port = settings.gateway_port
    if port_in_use(gateway_port):
        # Otherwise the health check could be answered by whatever holds the port.
        log(f"port {gateway_port} is in use; set MUSTER_GATEWAY_PORT")
        return 1
    with data_dir_lock(data_dir):
        tokens, tokens_file = effective_tokens(data_dir, settings)
        return asyncio.run(_supervise(environ, settings, tokens, tokens_file, options))


async def _supervise(
    environ: dict[str, str],
    settings: Settings,
    tokens: dict[str, str],
    tokens_file: Path,
    options: RunOptions,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    sup = Supervisor()
    startup = asyncio.create_task(_start_all(sup, environ, settings, tokens_file, options))
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({startup, stopped}, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if not startup.done():
        startup.cancel()
        await asyncio.gather(startup, return_exceptions=True)
    elif startup.exception() is not None:
        log(f"startup failed: {startup.exception()}")
        code = 1
    else:
        database_url, bootstrap = startup.result()
        lines = [
            f"gateway: http://127.0.0.1:{settings.gateway_port}",
            f"kafka: {bootstrap}",
            f"token: {next(iter(tokens))}",
            f"database: {database_url}",
        ]
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
        await stopped
    stopped.cancel()
    log("stopping")
    await sup.stop()
    log("stopped")
    return code
