"""The launcher reads its environment through `Settings` and still hands it to children."""

from __future__ import annotations

from pathlib import Path

import pytest
from muster_launcher import cli
from muster_launcher.services import service_command, service_env, service_spec
from muster_runtime.process.settings import Settings


def test_an_invalid_variable_is_reported_by_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MUSTER_GATEWAY_PORT", "not-a-port")
    assert cli.main(["chat", "hello"]) == 2
    assert "MUSTER_GATEWAY_PORT" in capsys.readouterr().err


def test_service_commands_and_instances_come_from_the_settings(tmp_path: Path) -> None:
    environ = {
        "MUSTER_SERVICE_COMMAND_SUBAGENT_WORKER": "python -m my_worker --fast",
        "MUSTER_INSTANCE_ID": "box",
        "UNRELATED": "kept",
    }
    settings = Settings.from_environ(environ)
    assert service_command("subagent-worker", settings) == ["python", "-m", "my_worker", "--fast"]
    env = _env(environ, tmp_path, local_broker=False)
    # The children inherit the launcher's environment, with what it adds.
    assert env["UNRELATED"] == "kept"
    assert Settings.from_environ(env).database_url == "postgresql://db"
    second = service_spec("subagent-worker", settings, env, gateway_port=9000, instance=2)
    assert second.name == "subagent-worker-2"
    assert second.env["MUSTER_INSTANCE_ID"] == "box-2"
    assert second.argv == ["python", "-m", "my_worker", "--fast"]


def _env(environ: dict[str, str], data_dir: Path, *, local_broker: bool) -> dict[str, str]:
    return service_env(
        environ,
        database_url="postgresql://db",
        bootstrap="k:1",
        data_dir=data_dir,
        tokens_file=data_dir / "tokens",
        gateway_port=9000,
        local_broker=local_broker,
    )


def test_the_services_of_a_local_broker_ring_bells_in_the_data_dir() -> None:
    data_dir = Path("/tmp/muster-data")
    settings = Settings.from_environ(_env({}, data_dir, local_broker=True))
    assert settings.bells_dir == data_dir / "bells"
    assert settings.local_broker
    # Real Kafka answers a waiting fetch when records arrive: no tuning, no bells.
    kafka = Settings.from_environ(_env({}, data_dir, local_broker=False))
    assert kafka.bells_dir is None and not kafka.local_broker
    # Turned off by setting the variable empty; too long a path for a socket: none either.
    assert (
        Settings.from_environ(_env({"MUSTER_BELLS_DIR": ""}, data_dir, local_broker=True)).bells_dir is None
    )
    deep = Path("/tmp/" + "d" * 90)
    assert "MUSTER_BELLS_DIR" not in _env({}, deep, local_broker=True)
