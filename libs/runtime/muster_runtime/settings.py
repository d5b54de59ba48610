"""Process configuration read from the environment, once, at startup.

Every service and the launcher read the same variables, so a value set for `make run`
means the same thing in each process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


@dataclass(frozen=True)
class Settings:
    database_url: str
    kafka_bootstrap_servers: str
    data_dir: Path
    model: str = "script"
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8765
    # Tansu answers a waiting fetch only when fetch_max_wait_ms elapses, so each consume
    # hop costs this much latency; keep it tiny locally, leave Kafka's default in deploy/.
    kafka_fetch_max_wait_ms: int = 5
    # After `kafka_idle_after_ms` without records a consumer waits this long per fetch
    # instead (never less than the busy value), so an idle cluster does not poll the broker
    # hundreds of times a second; the first record after idling may wait up to this long.
    kafka_idle_fetch_max_wait_ms: int = 200
    kafka_idle_after_ms: int = 2000
    kafka_session_timeout_ms: int = 2000
    kafka_heartbeat_interval_ms: int = 500
    # Recovery's consumer is a backstop (ADR 0011): a long wait costs a cascade or a late
    # settlement this much latency, and saves polling the broker on every turn.
    recovery_fetch_max_wait_ms: int = 250
    worker_concurrency: int = 8
    lease_ttl_s: float = 10.0
    reconcile_interval_s: float = 2.0
    execution_timeout_s: float = 3600.0
    cancel_grace_s: float = 30.0
    # A session's model context budget (an agent definition may set its own) and the share
    # of it past which the oldest turns are compacted before a model call.
    context_tokens: int = 128_000
    compaction_threshold: float = 0.8
    # Tracing is on only when an OTLP endpoint is configured (the standard OTEL_* variables;
    # the exporter reads the rest of them itself): off, no tracer exists at all (ADR 0017).
    otel_endpoint: str = ""
    instance_id: str = field(default_factory=lambda: f"{os.uname().nodename}-{os.getpid()}")

    @property
    def workspaces_dir(self) -> Path:
        return self.data_dir / "workspaces"

    @classmethod
    def from_env(cls) -> Settings:
        data_dir = Path(os.environ.get("MUSTER_DATA_DIR", ".muster")).resolve()
        return cls(
            database_url=os.environ.get("DATABASE_URL", ""),
            kafka_bootstrap_servers=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", ""),
            data_dir=data_dir,
            model=os.environ.get("MUSTER_MODEL", "script"),
            gateway_host=os.environ.get("MUSTER_GATEWAY_HOST", "127.0.0.1"),
            gateway_port=_int("MUSTER_GATEWAY_PORT", 8765),
            kafka_fetch_max_wait_ms=_int("MUSTER_KAFKA_FETCH_MAX_WAIT_MS", 5),
            kafka_idle_fetch_max_wait_ms=_int("MUSTER_KAFKA_IDLE_FETCH_MAX_WAIT_MS", 200),
            kafka_idle_after_ms=_int("MUSTER_KAFKA_IDLE_AFTER_MS", 2000),
            kafka_session_timeout_ms=_int("MUSTER_KAFKA_SESSION_TIMEOUT_MS", 2000),
            kafka_heartbeat_interval_ms=_int("MUSTER_KAFKA_HEARTBEAT_INTERVAL_MS", 500),
            recovery_fetch_max_wait_ms=_int("MUSTER_RECOVERY_FETCH_MAX_WAIT_MS", 250),
            worker_concurrency=_int("MUSTER_WORKER_CONCURRENCY", 8),
            lease_ttl_s=float(os.environ.get("MUSTER_LEASE_TTL_S", "10")),
            reconcile_interval_s=float(os.environ.get("MUSTER_RECONCILE_INTERVAL_S", "2")),
            execution_timeout_s=float(os.environ.get("MUSTER_EXECUTION_TIMEOUT_S", "3600")),
            cancel_grace_s=float(os.environ.get("MUSTER_CANCEL_GRACE_S", "30")),
            context_tokens=_int("MUSTER_CONTEXT_TOKENS", 128_000),
            compaction_threshold=_fraction("MUSTER_COMPACTION_THRESHOLD", 0.8),
            otel_endpoint=os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
            **(
                {"instance_id": os.environ["MUSTER_INSTANCE_ID"]}
                if os.environ.get("MUSTER_INSTANCE_ID")
                else {}
            ),
        )


def _fraction(name: str, default: float) -> float:
    value = float(os.environ.get(name, str(default)))
    if not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value}")
    return value
