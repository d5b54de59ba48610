"""The private attributes of aiokafka that the local broker's adapter touches still exist
and mean what `aiokafka_hooks` says: the fetch wait is read when a request is built, the
fetch task is looked up on the instance, the consume signal is a future."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.consumer.fetcher import Fetcher
from muster_runtime.messaging.local_broker import aiokafka_hooks


def test_the_fetcher_builds_each_request_from_its_wait_and_runs_the_fetch_task_by_instance_lookup() -> None:
    routine = inspect.getsource(Fetcher._fetch_requests_routine)
    assert "self._proc_fetch_request(assignment, node_id, request)" in routine
    assert "self._wait_consume_future = create_future()" in routine
    assert "self._fetch_max_wait_ms," in inspect.getsource(Fetcher._get_actions_per_node)
    assert list(inspect.signature(Fetcher._proc_fetch_request).parameters) == [
        "self",
        "assignment",
        "node_id",
        "request",
    ]


async def test_the_hooks_read_and_write_a_started_consumers_fetcher() -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", fetch_max_wait_ms=5)
    assert aiokafka_hooks.fetcher_of(consumer) is None  # not started
    # What `start()` builds, without a broker: the same Fetcher the consumer would own.
    fetcher = Fetcher(consumer._client, consumer._subscription, fetch_max_wait_ms=5)
    try:
        consumer._fetcher = fetcher
        assert aiokafka_hooks.fetcher_of(consumer) is fetcher
        aiokafka_hooks.set_fetch_wait(fetcher, 1)
        assert fetcher._fetch_max_wait_ms == 1
        assert isinstance(aiokafka_hooks.consumed_signal(fetcher), asyncio.Future | type(None))

        original = fetcher._proc_fetch_request
        seen: list[Any] = []

        def wrap(fetch: aiokafka_hooks.Fetch) -> aiokafka_hooks.Fetch:
            seen.append(fetch)

            async def wrapped(assignment: Any, node_id: Any, request: Any) -> bool:
                return False

            return wrapped

        aiokafka_hooks.wrap_fetch(fetcher, wrap)
        assert seen == [original]
        assert await fetcher._proc_fetch_request(None, 0, None) is False
        assert Fetcher._proc_fetch_request is not fetcher._proc_fetch_request  # this instance only
    finally:
        await fetcher.close()
