"""Process configuration: every environment variable muster reads, typed, in one place.

Every service and the launcher read the same variables, so a value set for `make run`
means the same thing in each process. Each field names its variable (`validation_alias`);
an empty variable counts as unset. Settings are built once at startup (a service's
entrypoint, the launcher's `main`), never at import time, and passed on from there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from muster_runtime.messaging import topics

# The services `muster run` starts; `<NAME>` in the per-service variables below.
SERVICE_NAMES = ("gateway", "harness", "subagent-worker", "recovery")


def _var(*names: str) -> Any:
    return AliasChoices(*names) if len(names) > 1 else names[0]


# The environment `Settings.from_environ` reads instead of the process's own.
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("muster_settings_environ", default=None)


class _Environ(EnvSettingsSource):
    """Variables from a mapping (the process's environment unless one is given); a blank
    value counts as unset, as the hand-written reads treated it."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # Only the variables the fields name: pydantic-settings would also read a field's
        # own name (`model`, `tokens`…) because arguments may use it (populate_by_name).
        known = variable_names(self.settings_cls)
        return {name: value for name, value in self._environ.items() if name in known and value.strip()}


def variable_names(settings_cls: type[BaseSettings]) -> frozenset[str]:
    """Every environment variable the fields of `settings_cls` read."""
    names: set[str] = set()
    for field in settings_cls.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif isinstance(alias, AliasChoices):
            names.update(choice for choice in alias.choices if isinstance(choice, str))
    return frozenset(names)


def _default_instance_id() -> str:
    return f"{os.uname().nodename}-{os.getpid()}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        frozen=True,
        case_sensitive=True,
        extra="ignore",
        populate_by_name=True,
    )

    # --- where things are
    database_url: str = Field("", validation_alias=_var("DATABASE_URL"))
    kafka_bootstrap_servers: str = Field("", validation_alias=_var("KAFKA_BOOTSTRAP_SERVERS"))
    data_dir: Path = Field(Path(".muster"), validation_alias=_var("MUSTER_DATA_DIR"))
    gateway_host: str = Field("127.0.0.1", validation_alias=_var("MUSTER_GATEWAY_HOST"))
    gateway_port: int = Field(8765, validation_alias=_var("MUSTER_GATEWAY_PORT"))
    # Origins besides the gateway's own whose pages may open the WebSocket (comma-separated,
    # `*` for any): the console served elsewhere, say (muster_gateway.origin).
    allowed_origins: str = Field("", validation_alias=_var("MUSTER_ALLOWED_ORIGINS"))
    # Off: frames are small JSON, and deflate cost the gateway a tenth of its CPU per turn.
    ws_compression: bool = Field(False, validation_alias=_var("MUSTER_WS_COMPRESSION"))
    instance_id: str = Field(
        default_factory=_default_instance_id, validation_alias=_var("MUSTER_INSTANCE_ID")
    )
    log_level: str = Field("INFO", validation_alias=_var("MUSTER_LOG_LEVEL"))

    # --- who may connect: MUSTER_TOKENS wins over MUSTER_TOKENS_FILE (runtime.tokens)
    tokens: str = Field("", validation_alias=_var("MUSTER_TOKENS"))
    tokens_file: str = Field("", validation_alias=_var("MUSTER_TOKENS_FILE"))
    # The token `muster chat` uses without --token.
    client_token: str | None = Field(None, validation_alias=_var("MUSTER_TOKEN"))

    # --- models and agents
    model: str = Field("script", validation_alias=_var("MUSTER_MODEL"))
    agents_file: Path | None = Field(None, validation_alias=_var("MUSTER_AGENTS_FILE"))
    openai_model: str | None = Field(None, validation_alias=_var("MUSTER_OPENAI_MODEL"))
    openai_base_url: str | None = Field(
        None, validation_alias=_var("MUSTER_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    # Stream answers from the OpenAI-compatible endpoint (ADR 0039); 0 for one that cannot.
    openai_stream: bool = Field(True, validation_alias=_var("MUSTER_OPENAI_STREAM"))
    openai_api_key: SecretStr | None = Field(
        None, validation_alias=_var("MUSTER_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    # The scripted model's time to summarise (tests stop a process mid-compaction).
    script_summary_delay_ms: float = Field(0.0, validation_alias=_var("MUSTER_SCRIPT_SUMMARY_DELAY_MS"))
    # A session's model context budget (an agent definition may set its own) and the share
    # of it past which the oldest turns are compacted before a model call.
    context_tokens: int = Field(128_000, validation_alias=_var("MUSTER_CONTEXT_TOKENS"))
    compaction_threshold: float = Field(0.8, gt=0, le=1, validation_alias=_var("MUSTER_COMPACTION_THRESHOLD"))
    # MCP servers (agents.toml `mcp_servers`, ADR 0038): the time one tool call may take (a
    # server may set its own `timeout_s`), and the time a server has to start and list its tools.
    mcp_call_timeout_s: float = Field(60.0, gt=0, validation_alias=_var("MUSTER_MCP_CALL_TIMEOUT_S"))
    mcp_start_timeout_s: float = Field(20.0, gt=0, validation_alias=_var("MUSTER_MCP_START_TIMEOUT_S"))
    # How many times a model call answered 429 or 5xx (or timed out, or could not connect)
    # is retried, each after the server's Retry-After (else an exponential backoff), before
    # the turn fails naming the endpoint.
    model_max_retries: int = Field(3, ge=0, le=20, validation_alias=_var("MUSTER_MODEL_MAX_RETRIES"))
    # The tokens (prompt + completion, as reported) a session's model calls may spend in
    # all; a turn that finds them spent ends FAILED. 0: no budget (the default).
    session_token_budget: int = Field(0, ge=0, validation_alias=_var("MUSTER_SESSION_TOKEN_BUDGET"))

    # --- Kafka
    # Every fetch from the local broker costs it work per partition asked for (ADR 0026);
    # with Kafka in deploy/ set it to the instances planned.
    partitions: int = Field(topics.DEFAULT_PARTITIONS, ge=1, validation_alias=_var("MUSTER_PARTITIONS"))
    kafka_replication_factor: int = Field(1, ge=1, validation_alias=_var("MUSTER_KAFKA_REPLICATION_FACTOR"))
    # The local broker's tuning (`messaging.local_broker`) is on only when the broker is
    # Tansu: `muster run` sets this when it runs the broker itself. Off, consumers use
    # aiokafka's own fetch options and no bells.
    local_broker: bool = Field(False, validation_alias=_var("MUSTER_LOCAL_BROKER"))
    # Tansu may answer a waiting fetch only when fetch_max_wait_ms elapses, so each consume
    # hop costs this much latency on the local broker; real Kafka keeps aiokafka's default.
    kafka_fetch_max_wait_ms: int = Field(5, validation_alias=_var("MUSTER_KAFKA_FETCH_MAX_WAIT_MS"))
    # After `kafka_idle_after_ms` without records a consumer waits this long per fetch
    # instead (never less than the busy value), so an idle cluster does not poll the broker
    # hundreds of times a second; the first record after idling may wait up to this long.
    kafka_idle_fetch_max_wait_ms: int = Field(
        200, validation_alias=_var("MUSTER_KAFKA_IDLE_FETCH_MAX_WAIT_MS")
    )
    kafka_idle_after_ms: int = Field(2000, validation_alias=_var("MUSTER_KAFKA_IDLE_AFTER_MS"))
    # Fetch bells (see `bells`): set by `muster run` when it runs the broker itself (set it
    # empty to poll instead). A consumer rung by nobody fetches again after the fallback.
    bells_dir: Path | None = Field(None, validation_alias=_var("MUSTER_BELLS_DIR"))
    bell_fallback_ms: int = Field(100, gt=0, validation_alias=_var("MUSTER_BELL_FALLBACK_MS"))
    # The fallback once a consumer has had no ring and no records for `kafka_idle_after_ms`:
    # an idle cluster's consumers then fetch once a second, not ten times.
    bell_idle_fallback_ms: int = Field(1000, gt=0, validation_alias=_var("MUSTER_BELL_IDLE_FALLBACK_MS"))
    kafka_session_timeout_ms: int = Field(2000, validation_alias=_var("MUSTER_KAFKA_SESSION_TIMEOUT_MS"))
    kafka_heartbeat_interval_ms: int = Field(500, validation_alias=_var("MUSTER_KAFKA_HEARTBEAT_INTERVAL_MS"))
    # Recovery's consumer is a backstop (ADR 0011): a long wait costs a cascade or a late
    # settlement this much latency, and saves polling the broker on every turn.
    recovery_fetch_max_wait_ms: int = Field(250, validation_alias=_var("MUSTER_RECOVERY_FETCH_MAX_WAIT_MS"))

    # --- runs, leases and deadlines
    worker_concurrency: int = Field(8, validation_alias=_var("MUSTER_WORKER_CONCURRENCY"))
    lease_ttl_s: float = Field(10.0, validation_alias=_var("MUSTER_LEASE_TTL_S"))
    reconcile_interval_s: float = Field(2.0, validation_alias=_var("MUSTER_RECONCILE_INTERVAL_S"))
    execution_timeout_s: float = Field(3600.0, validation_alias=_var("MUSTER_EXECUTION_TIMEOUT_S"))
    cancel_grace_s: float = Field(30.0, validation_alias=_var("MUSTER_CANCEL_GRACE_S"))
    # run_command (ADR 0037): the cap on a command's `timeout_s`, and whether a machine
    # without a sandbox (no bwrap) may run commands unsandboxed.
    command_max_timeout_s: float = Field(600.0, gt=0, validation_alias=_var("MUSTER_COMMAND_MAX_TIMEOUT_S"))
    unsafe_commands: bool = Field(False, validation_alias=_var("MUSTER_UNSAFE_COMMANDS"))

    # --- per-user limits (DESIGN §7, ADR 0041); 0 turns a limit off. Each gateway instance
    # enforces them for the clients it serves. Trees with a turn under way (queued input
    # not yet started included): ten is more than a person follows at once, and bounds
    # what one user's script can put on the cluster.
    user_max_running: int = Field(10, ge=0, validation_alias=_var("MUSTER_USER_MAX_RUNNING"))
    # Open WebSockets: a console tab, the CLI and a LOCAL client each hold one; 32 leaves
    # room for many tabs and reconnects still closing, and stops a leak or a loop early.
    user_max_sockets: int = Field(32, ge=0, validation_alias=_var("MUSTER_USER_MAX_SOCKETS"))
    # Frames and requests that start work (create_session, send_message,
    # create_side_session, a compaction), a token bucket refilled at this rate a minute
    # holding as many: a person types far less; a burst of a minute's worth still passes.
    user_messages_per_minute: int = Field(120, ge=0, validation_alias=_var("MUSTER_USER_MESSAGES_PER_MINUTE"))

    # --- overload shedding (ADR 0041): new turns are refused with `overloaded` past any
    # of these; 0 turns one off. Turns accepted and not yet started, and delegations whose
    # child has not started, cluster-wide: about 15 s of work at the local cluster's saturation.
    overload_backlog: int = Field(500, ge=0, validation_alias=_var("MUSTER_OVERLOAD_BACKLOG"))
    # The oldest of them has waited this long: a turn normally starts within tens of ms,
    # and a harness restart's takeover within the lease (10 s) and a reconcile (2 s).
    overload_backlog_age_ms: int = Field(
        20_000, ge=0, validation_alias=_var("MUSTER_OVERLOAD_BACKLOG_AGE_MS")
    )
    # The gateway waited this long for a database connection to read the backlog.
    overload_pool_wait_ms: int = Field(1_000, ge=0, validation_alias=_var("MUSTER_OVERLOAD_POOL_WAIT_MS"))
    # Turns under way cluster-wide (running or waiting for their children, side tasks
    # included) plus those accepted and not yet started: a bound on work in flight, hence on
    # an admitted turn's latency (Little's law). Off by default: what a cluster holds at
    # saturation depends on its models (a real model's turn mostly waits on the model), so
    # a deployment that wants the bound sets it near its own saturation's concurrency.
    overload_running: int = Field(0, ge=0, validation_alias=_var("MUSTER_OVERLOAD_RUNNING"))
    # The gateway's live-event consumer reads records this long after they were produced:
    # its clients see their turns' events that late, whatever the turns themselves take.
    # Well above a healthy consumer's few ms, and above the clock skew between hosts.
    overload_events_lag_ms: int = Field(
        5_000, ge=0, validation_alias=_var("MUSTER_OVERLOAD_EVENTS_LAG_MS")
    )
    # The latency the turns a gateway admitted should keep, admission to end (the 90th
    # percentile of each second's): past it that gateway lowers its bound on turns in flight,
    # below it raises it again (`turn_latency`, ADR 0041). Off by default, as the bound is:
    # it depends on the deployment's models; under the bound when both are set.
    overload_turn_latency_ms: int = Field(0, ge=0, validation_alias=_var("MUSTER_OVERLOAD_TURN_LATENCY_MS"))

    # --- tracing: on only when an OTLP endpoint is configured (the standard OTEL_*
    # variables; the exporter reads the rest of them itself): off, no tracer exists (ADR 0017).
    otel_endpoint: str = Field(
        "", validation_alias=_var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    )

    # --- the launcher (`muster run`)
    pg_port: int | None = Field(None, validation_alias=_var("MUSTER_PG_PORT"))
    kafka_port: int | None = Field(None, validation_alias=_var("MUSTER_KAFKA_PORT"))
    harness_instances: int = Field(1, ge=1, le=16, validation_alias=_var("MUSTER_HARNESS_INSTANCES"))
    subagent_worker_instances: int = Field(
        1, ge=1, le=16, validation_alias=_var("MUSTER_SUBAGENT_WORKER_INSTANCES")
    )
    recovery_instances: int = Field(1, ge=1, le=16, validation_alias=_var("MUSTER_RECOVERY_INSTANCES"))
    service_command_gateway: str | None = Field(None, validation_alias=_var("MUSTER_SERVICE_COMMAND_GATEWAY"))
    service_command_harness: str | None = Field(None, validation_alias=_var("MUSTER_SERVICE_COMMAND_HARNESS"))
    service_command_subagent_worker: str | None = Field(
        None, validation_alias=_var("MUSTER_SERVICE_COMMAND_SUBAGENT_WORKER")
    )
    service_command_recovery: str | None = Field(
        None, validation_alias=_var("MUSTER_SERVICE_COMMAND_RECOVERY")
    )

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        # Services run in other working directories than the launcher that set it.
        return value.resolve()

    @property
    def workspaces_dir(self) -> Path:
        return self.data_dir / "workspaces"

    @property
    def commands_dir(self) -> Path:
        """Where a running command's output is kept (outside every workspace)."""
        return self.data_dir / "commands"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Arguments first, then the environment; no dotenv or secrets files.
        given = _ENVIRON.get()
        return init_settings, _Environ(settings_cls, os.environ if given is None else given)

    @classmethod
    def from_env(cls) -> Settings:
        """The settings of this process's environment."""
        return cls()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """The settings an environment would give, e.g. one the launcher composes for a
        child; unlike `from_env`, the process's own environment is not consulted."""
        token = _ENVIRON.set(environ)
        try:
            return cls()
        finally:
            _ENVIRON.reset(token)

    @classmethod
    def of(cls, source: Settings | Mapping[str, str]) -> Settings:
        """`source` itself, or the settings of an environment given as a mapping."""
        return source if isinstance(source, Settings) else cls.from_environ(source)

    def instances(self, service: str) -> int:
        """How many instances of a service `muster run` starts; the gateway owns the port."""
        if service == "gateway":
            return 1
        return int(getattr(self, f"{_field(service)}_instances"))

    def service_command(self, service: str) -> str | None:
        """The command line that replaces `.venv/bin/muster-<service>`, if one is set."""
        value = getattr(self, f"service_command_{_field(service)}")
        return str(value) if value else None


def _field(service: str) -> str:
    if service not in SERVICE_NAMES:
        raise ValueError(f"unknown service {service!r}")
    return service.replace("-", "_")
