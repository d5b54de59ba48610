from __future__ import annotations

import logging
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError
from muster_runtime.kafka import start_producer
from muster_runtime.settings import Settings


async def test_producer_start_retries_then_gives_up(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(database_url="", kafka_bootstrap_servers="127.0.0.1:1", data_dir=Path("."))
    with caplog.at_level(logging.WARNING, logger="muster.kafka"), pytest.raises(KafkaConnectionError):
        await start_producer(settings, within_s=0.5)
    retries = [r for r in caplog.records if r.getMessage().startswith("kafka_unreachable")]
    assert len(retries) >= 2
