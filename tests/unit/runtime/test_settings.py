"""Settings: every variable muster reads, with the names and defaults it always had."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from muster_runtime.process.settings import Settings, variable_names
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parents[3]

DEFAULTS = {
    "database_url": "",
    "kafka_bootstrap_servers": "",
    "model": "script",
    "gateway_host": "127.0.0.1",
    "gateway_port": 8765,
    "local_broker": False,
    "kafka_fetch_max_wait_ms": 5,
    "kafka_idle_fetch_max_wait_ms": 200,
    "kafka_idle_after_ms": 2000,
    "kafka_session_timeout_ms": 2000,
    "kafka_heartbeat_interval_ms": 500,
    "recovery_fetch_max_wait_ms": 250,
    "bells_dir": None,
    "bell_fallback_ms": 100,
    "bell_idle_fallback_ms": 1000,
    "worker_concurrency": 8,
    "lease_ttl_s": 10.0,
    "reconcile_interval_s": 2.0,
    "execution_timeout_s": 3600.0,
    "cancel_grace_s": 30.0,
    "context_tokens": 128_000,
    "compaction_threshold": 0.8,
    "script_summary_delay_ms": 0.0,
    "partitions": 2,
    "kafka_replication_factor": 1,
    "log_level": "INFO",
    "agents_file": None,
    "openai_model": None,
    "openai_base_url": None,
    "openai_api_key": None,
    "tokens": "",
    "tokens_file": "",
    "client_token": None,
    "pg_port": None,
    "kafka_port": None,
}

# Variable → (field, value given, value read).
READS = {
    "DATABASE_URL": ("database_url", "postgresql://db/x", "postgresql://db/x"),
    "KAFKA_BOOTSTRAP_SERVERS": ("kafka_bootstrap_servers", "k:9092", "k:9092"),
    "MUSTER_MODEL": ("model", "openai", "openai"),
    "MUSTER_GATEWAY_HOST": ("gateway_host", "0.0.0.0", "0.0.0.0"),
    "MUSTER_GATEWAY_PORT": ("gateway_port", "9999", 9999),
    "MUSTER_INSTANCE_ID": ("instance_id", "box-1", "box-1"),
    "MUSTER_LOG_LEVEL": ("log_level", "DEBUG", "DEBUG"),
    "MUSTER_TOKENS": ("tokens", "t=u", "t=u"),
    "MUSTER_TOKENS_FILE": ("tokens_file", "/x/tokens", "/x/tokens"),
    "MUSTER_TOKEN": ("client_token", "tok", "tok"),
    "MUSTER_AGENTS_FILE": ("agents_file", "/x/agents.toml", Path("/x/agents.toml")),
    "MUSTER_OPENAI_MODEL": ("openai_model", "gpt-x", "gpt-x"),
    "MUSTER_OPENAI_BASE_URL": ("openai_base_url", "http://llm/v1", "http://llm/v1"),
    "MUSTER_SCRIPT_SUMMARY_DELAY_MS": ("script_summary_delay_ms", "3000", 3000.0),
    "MUSTER_CONTEXT_TOKENS": ("context_tokens", "4000", 4000),
    "MUSTER_COMPACTION_THRESHOLD": ("compaction_threshold", "0.5", 0.5),
    "MUSTER_PARTITIONS": ("partitions", "8", 8),
    "MUSTER_KAFKA_REPLICATION_FACTOR": ("kafka_replication_factor", "3", 3),
    "MUSTER_LOCAL_BROKER": ("local_broker", "1", True),
    "MUSTER_KAFKA_FETCH_MAX_WAIT_MS": ("kafka_fetch_max_wait_ms", "500", 500),
    "MUSTER_KAFKA_IDLE_FETCH_MAX_WAIT_MS": ("kafka_idle_fetch_max_wait_ms", "0", 0),
    "MUSTER_KAFKA_IDLE_AFTER_MS": ("kafka_idle_after_ms", "100", 100),
    "MUSTER_KAFKA_SESSION_TIMEOUT_MS": ("kafka_session_timeout_ms", "10000", 10000),
    "MUSTER_KAFKA_HEARTBEAT_INTERVAL_MS": ("kafka_heartbeat_interval_ms", "3000", 3000),
    "MUSTER_RECOVERY_FETCH_MAX_WAIT_MS": ("recovery_fetch_max_wait_ms", "20", 20),
    "MUSTER_BELLS_DIR": ("bells_dir", "/x/bells", Path("/x/bells")),
    "MUSTER_BELL_FALLBACK_MS": ("bell_fallback_ms", "50", 50),
    "MUSTER_BELL_IDLE_FALLBACK_MS": ("bell_idle_fallback_ms", "5000", 5000),
    "MUSTER_WORKER_CONCURRENCY": ("worker_concurrency", "2", 2),
    "MUSTER_LEASE_TTL_S": ("lease_ttl_s", "3", 3.0),
    "MUSTER_RECONCILE_INTERVAL_S": ("reconcile_interval_s", "0.5", 0.5),
    "MUSTER_EXECUTION_TIMEOUT_S": ("execution_timeout_s", "60", 60.0),
    "MUSTER_CANCEL_GRACE_S": ("cancel_grace_s", "1", 1.0),
    "MUSTER_PG_PORT": ("pg_port", "5433", 5433),
    "MUSTER_KAFKA_PORT": ("kafka_port", "9093", 9093),
    "MUSTER_HARNESS_INSTANCES": ("harness_instances", "2", 2),
    "MUSTER_SUBAGENT_WORKER_INSTANCES": ("subagent_worker_instances", "3", 3),
    "MUSTER_RECOVERY_INSTANCES": ("recovery_instances", "2", 2),
    "MUSTER_SERVICE_COMMAND_GATEWAY": ("service_command_gateway", "gw --x", "gw --x"),
    "MUSTER_SERVICE_COMMAND_HARNESS": ("service_command_harness", "h", "h"),
    "MUSTER_SERVICE_COMMAND_SUBAGENT_WORKER": ("service_command_subagent_worker", "w", "w"),
    "MUSTER_SERVICE_COMMAND_RECOVERY": ("service_command_recovery", "r", "r"),
}


def test_the_defaults_are_the_documented_ones() -> None:
    settings = Settings.from_environ({})
    assert {name: getattr(settings, name) for name in DEFAULTS} == DEFAULTS
    assert settings.data_dir == Path(".muster").resolve()
    assert settings.workspaces_dir == settings.data_dir / "workspaces"
    assert settings.instance_id  # <hostname>-<pid>


@pytest.mark.parametrize("variable", sorted(READS))
def test_each_variable_sets_its_field(variable: str) -> None:
    field, given, read = READS[variable]
    assert getattr(Settings.from_environ({variable: given}), field) == read


def test_the_process_environment_is_read_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSTER_GATEWAY_PORT", "9100")
    monkeypatch.setenv("MUSTER_DATA_DIR", "some/dir")
    settings = Settings.from_env()
    assert settings.gateway_port == 9100
    assert settings.data_dir == Path("some/dir").resolve()
    # A given mapping is the whole environment: the process's own is not consulted.
    assert Settings.from_environ({}).gateway_port == 8765
    # Arguments win over the environment (tests build settings this way).
    assert Settings(gateway_port=1234).gateway_port == 1234


def test_a_blank_variable_counts_as_unset() -> None:
    settings = Settings.from_environ(
        {"MUSTER_GATEWAY_PORT": "", "MUSTER_LEASE_TTL_S": "  ", "DATABASE_URL": ""}
    )
    assert (settings.gateway_port, settings.lease_ttl_s, settings.database_url) == (8765, 10.0, "")


def test_openai_variables_fall_back_to_the_sdk_names_and_muster_wins() -> None:
    fallback = Settings.from_environ({"OPENAI_API_KEY": "sk-sdk", "OPENAI_BASE_URL": "http://sdk/v1"})
    assert fallback.openai_api_key is not None
    assert fallback.openai_api_key.get_secret_value() == "sk-sdk"
    assert fallback.openai_base_url == "http://sdk/v1"
    both = Settings.from_environ({"OPENAI_API_KEY": "sk-sdk", "MUSTER_OPENAI_API_KEY": "sk-muster"})
    assert both.openai_api_key is not None
    assert both.openai_api_key.get_secret_value() == "sk-muster"
    assert "sk-muster" not in repr(both)  # keys never reach a log line through the settings


@pytest.mark.parametrize(
    "environ",
    [
        {"MUSTER_COMPACTION_THRESHOLD": "0"},
        {"MUSTER_COMPACTION_THRESHOLD": "1.5"},
        {"MUSTER_RECOVERY_INSTANCES": "17"},
        {"MUSTER_HARNESS_INSTANCES": "0"},
        {"MUSTER_WORKER_CONCURRENCY": "many"},
    ],
)
def test_invalid_values_are_refused_naming_the_variable(environ: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match=next(iter(environ))):
        Settings.from_environ(environ)


def test_instances_and_service_commands_per_service() -> None:
    settings = Settings.from_environ(
        {"MUSTER_SUBAGENT_WORKER_INSTANCES": "3", "MUSTER_SERVICE_COMMAND_RECOVERY": "my-recovery --x"}
    )
    assert [settings.instances(name) for name in ("gateway", "harness", "subagent-worker", "recovery")] == [
        1,
        1,
        3,
        1,
    ]
    assert settings.service_command("recovery") == "my-recovery --x"
    assert settings.service_command("harness") is None
    with pytest.raises(ValueError, match="unknown service"):
        settings.instances("nope")


def test_every_configuration_variable_of_the_docs_is_a_setting() -> None:
    """The configuration table of docs/operations.md names exactly what `Settings` reads
    (the tests' and the compose stack's own variables aside)."""
    doc = (ROOT / "docs" / "operations.md").read_text()
    table = doc[doc.index("## Configuration") : doc.index("## Docker")]
    documented = set(re.findall(r"`((?:MUSTER|OPENAI|DATABASE|KAFKA)_[A-Z_]+)`", table))
    not_settings = {
        "MUSTER_TEST_CONTAINERS",
        "MUSTER_POSTGRES_IMAGE",
        "MUSTER_KAFKA_IMAGE",
        "MUSTER_PYTHON_IMAGE",
        "MUSTER_FUZZ",
        "MUSTER_FUZZ_EXAMPLES",
        "MUSTER_SERVICE_COMMAND_",  # the `<NAME>` family, spelled out in READS
    }
    assert documented - not_settings <= variable_names(Settings)
    assert set(READS) <= variable_names(Settings)


def test_only_the_named_variables_are_read() -> None:
    """A field's own name (`model`, `tokens`) is for arguments, never an environment variable."""
    settings = Settings.from_environ({"model": "openai", "tokens": "a=b", "database_url": "x"})
    assert (settings.model, settings.tokens, settings.database_url) == ("script", "", "")
