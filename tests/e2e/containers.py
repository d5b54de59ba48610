"""Optional: run the end-to-end suite on real Kafka and PostgreSQL containers.

When a Docker engine answers (and MUSTER_TEST_CONTAINERS is not "0"), the suite starts a
Kafka and a PostgreSQL container with testcontainers and points every launcher at them
through KAFKA_BOOTSTRAP_SERVERS / DATABASE_URL. Without an engine (these CI machines have
none) the launcher starts its own embedded PostgreSQL and Tansu broker instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager


def docker_available() -> bool:
    if os.environ.get("MUSTER_TEST_CONTAINERS") == "0" or shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    return probe.returncode == 0


@contextmanager
def external_infrastructure() -> Iterator[dict[str, str]]:
    """Environment for the launcher: empty (local infrastructure) or the containers'."""
    if os.environ.get("DATABASE_URL") or os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or not docker_available():
        yield {}
        return
    from testcontainers.community.kafka import KafkaContainer
    from testcontainers.community.postgres import PostgresContainer

    with PostgresContainer("postgres:16", driver=None) as postgres, KafkaContainer("confluentinc/cp-kafka:7.6.1") as kafka:
        yield {
            "DATABASE_URL": postgres.get_connection_url(),
            "KAFKA_BOOTSTRAP_SERVERS": kafka.get_bootstrap_server(),
            # Real Kafka answers waiting fetches when data arrives.
            "MUSTER_KAFKA_FETCH_MAX_WAIT_MS": "100",
        }
