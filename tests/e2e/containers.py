"""PostgreSQL and a Kafka-protocol broker in Docker containers (testcontainers), for the
launcher to use through DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS.

tests/containers/ always runs on them when an engine answers; the whole e2e suite does
when MUSTER_TEST_CONTAINERS=1 (otherwise it keeps its local PostgreSQL and Tansu, which
are faster). Images: MUSTER_POSTGRES_IMAGE / MUSTER_KAFKA_IMAGE, by default the stand-ins
that `make images` builds (deploy/images/standins.env), since no registry is reachable
here; an image whose name does not say `tansu` is run as Apache Kafka. Ryuk, the reaper
container, is off (its image cannot be pulled either): the context managers remove what
they started. Ports are published on 127.0.0.1 only; the two share a network of their own.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

STANDINS = Path(__file__).resolve().parents[2] / "deploy" / "images" / "standins.env"


def standin(name: str) -> str:
    for line in STANDINS.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    raise KeyError(name)


def images() -> tuple[str, str]:
    postgres = os.environ.get("MUSTER_POSTGRES_IMAGE") or standin("MUSTER_POSTGRES_IMAGE")
    kafka = os.environ.get("MUSTER_KAFKA_IMAGE") or standin("MUSTER_KAFKA_IMAGE")
    return postgres, kafka


def engine_problem() -> str | None:
    """Why containers cannot run here (one line), or None when they can."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH (.ci/run installs one: deploy/engine.sh)"
    probe = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                           text=True, timeout=30, check=False)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["docker info failed"])[-1]
        return f"no Docker engine answers ({reason[:160]}); start one with deploy/engine.sh"
    for image in images():
        found = subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=30, check=False)
        if found.returncode != 0:
            return f"image {image} is not built (run `make images`)"
    return None


def docker_available() -> bool:
    return engine_problem() is None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_exec(container: object, command: list[str], what: str, timeout: float = 60.0) -> None:
    """Until `command` succeeds inside the container (the engine's view, not the host's:
    docker-proxy accepts a published port before the process behind it listens)."""
    deadline = time.monotonic() + timeout
    while True:
        code, output = container.exec(command)  # type: ignore[attr-defined]
        if code == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready in {timeout:g}s: {output[-300:]!r}")
        time.sleep(0.2)


def _on_loopback(container: Any, port: int, host_port: int) -> Any:
    """Publish `port` on 127.0.0.1:`host_port` only (testcontainers' `with_bind_ports` takes
    no address and binds every interface; docker-py takes an (address, port) pair)."""
    container.ports = {key: value for key, value in container.ports.items() if str(key).split("/")[0] != str(port)}
    container.ports[str(port)] = ("127.0.0.1", host_port)
    return container


@contextmanager
def container_infrastructure() -> Iterator[dict[str, str]]:
    """Start both containers; yield the launcher's environment; remove them."""
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    from testcontainers.community.kafka import KafkaContainer
    from testcontainers.community.postgres import PostgresContainer
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

    postgres_image, kafka_image = images()
    pg_port, kafka_port = free_port(), free_port()
    with ExitStack() as stack:
        network = stack.enter_context(Network())
        postgres = (PostgresContainer(postgres_image, driver=None, username="muster", password="muster", dbname="muster")
                    .with_network(network).with_network_aliases("postgres"))
        stack.enter_context(_on_loopback(postgres, 5432, pg_port))
        env = {"DATABASE_URL": f"postgresql://muster:muster@127.0.0.1:{pg_port}/muster"}
        if "tansu" in kafka_image:
            # The listener inside, the published port outside: clients must be told the latter.
            broker = (DockerContainer(kafka_image).with_network(network).with_network_aliases("kafka")
                      .with_env("ADVERTISED_LISTENER_URL", f"tcp://127.0.0.1:{kafka_port}"))
            stack.enter_context(_on_loopback(broker, 9092, kafka_port))
            _wait_exec(broker, ["/usr/local/bin/broker-ready"], "broker")
            env["KAFKA_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{kafka_port}"
            env["MUSTER_LOCAL_BROKER"] = "1"  # Tansu: the local broker's tuning, without bells
        else:  # Apache Kafka (or Confluent's): testcontainers' own module configures it
            kafka = stack.enter_context(KafkaContainer(kafka_image).with_network(network))
            env["KAFKA_BOOTSTRAP_SERVERS"] = kafka.get_bootstrap_server()
        yield env


@contextmanager
def external_infrastructure() -> Iterator[dict[str, str]]:
    """The e2e suite's infrastructure: containers only when asked (MUSTER_TEST_CONTAINERS=1)
    and nothing external is configured; otherwise the launcher starts its own."""
    wanted = os.environ.get("MUSTER_TEST_CONTAINERS") == "1"
    if not wanted or os.environ.get("DATABASE_URL") or os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield {}
        return
    problem = engine_problem()
    if problem is not None:
        raise RuntimeError(f"MUSTER_TEST_CONTAINERS=1 but {problem}")
    with container_infrastructure() as env:
        yield env
