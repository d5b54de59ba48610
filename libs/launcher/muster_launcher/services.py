"""The four muster services as supervised children."""

from __future__ import annotations

import asyncio
import shlex
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
from muster_runtime.messaging import topics
from muster_runtime.messaging.local_broker import bells
from muster_runtime.process.settings import SERVICE_NAMES, Settings

from .supervisor import ChildSpec

SERVICES = SERVICE_NAMES


def service_command(name: str, settings: Settings) -> list[str]:
    """The console script `muster-<name>` from our venv, so each command line carries the
    service's name. MUSTER_SERVICE_COMMAND_<NAME> overrides it (development and tests)."""
    override = settings.service_command(name)
    if override:
        return shlex.split(override)
    script = Path(sys.executable).parent / f"muster-{name}"
    if script.exists():
        return [str(script)]
    found = shutil.which(f"muster-{name}")
    if found is None:
        raise RuntimeError(f"console script muster-{name} not found (run `uv sync`)")
    return [found]


def service_env(
    environ: Mapping[str, str],
    *,
    database_url: str,
    bootstrap: str,
    data_dir: Path,
    tokens_file: Path,
    gateway_port: int,
    local_broker: bool = False,
) -> dict[str, str]:
    env = dict(environ)
    env.update(
        DATABASE_URL=database_url,
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        MUSTER_DATA_DIR=str(data_dir),
        MUSTER_TOKENS_FILE=str(tokens_file),
        MUSTER_GATEWAY_PORT=str(gateway_port),
        # Without it a child's log lines sit in its buffer until exit (or are lost on kill).
        PYTHONUNBUFFERED="1",
    )
    env.setdefault("MUSTER_MODEL", "script")
    # The local broker holds a waiting fetch to its end, so its consumers poll it with a
    # short wait or are rung (`muster_runtime.messaging.local_broker`); real Kafka answers
    # as records arrive and gets plain consumers.
    if not local_broker:
        return env
    env.setdefault("MUSTER_LOCAL_BROKER", "1")
    bells_dir = (data_dir / "bells").resolve()
    if bells.fits(bells_dir, topics.ALL):
        env.setdefault("MUSTER_BELLS_DIR", str(bells_dir))
    return env


async def wait_healthz(url: str, within: float) -> None:
    deadline = time.monotonic() + within
    last = "no answer"
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline:
            try:
                response = await client.get(url)
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} not healthy after {within:g}s ({last})")


def service_spec(
    name: str,
    settings: Settings,
    env: dict[str, str],
    *,
    gateway_port: int,
    wait_gateway: bool = True,
    healthz_timeout: float = 90.0,
    instance: int = 1,
) -> ChildSpec:
    ready = None
    if name == "gateway" and wait_gateway:
        url = f"http://127.0.0.1:{gateway_port}/healthz"

        async def ready() -> None:
            await wait_healthz(url, healthz_timeout)

    label = name if instance == 1 else f"{name}-{instance}"
    if instance > 1 and env.get("MUSTER_INSTANCE_ID"):
        env = {**env, "MUSTER_INSTANCE_ID": f"{env['MUSTER_INSTANCE_ID']}-{instance}"}
    return ChildSpec(name=label, argv=service_command(name, settings), env=env, ready=ready)
