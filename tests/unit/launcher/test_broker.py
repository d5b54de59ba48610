"""The local broker's process spec (`muster_launcher.broker`)."""

from __future__ import annotations

from muster_launcher.broker import BROKER_THREADS, broker_spec
from muster_runtime.process.settings import Settings


def test_the_broker_runs_one_runtime_thread_by_default() -> None:
    spec = broker_spec(9092, {"PATH": "/usr/bin"}, Settings())
    assert spec.env is not None
    assert spec.env["TOKIO_WORKER_THREADS"] == str(BROKER_THREADS) == "1"
    assert spec.env["PATH"] == "/usr/bin"


def test_an_operator_may_give_the_broker_more_threads() -> None:
    spec = broker_spec(9092, {"TOKIO_WORKER_THREADS": "4"}, Settings())
    assert spec.env is not None
    assert spec.env["TOKIO_WORKER_THREADS"] == "4"


def test_tansu_settings_inherited_from_the_environment_are_dropped() -> None:
    spec = broker_spec(9092, {"STORAGE_ENGINE": "postgres://elsewhere", "CLUSTER_ID": "x"}, Settings())
    assert spec.env is not None
    assert "STORAGE_ENGINE" not in spec.env and "CLUSTER_ID" not in spec.env
    assert "memory://tansu/" in spec.argv
