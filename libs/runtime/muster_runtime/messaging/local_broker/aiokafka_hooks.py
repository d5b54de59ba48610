"""Every private attribute of aiokafka the local broker's adapter touches, and nothing else.

aiokafka offers no public way to do what the local broker needs (ADR 0035 gives the code
paths): its `Fetcher` builds each FetchRequest from `self._fetch_max_wait_ms`, which no
public method sets, and sends the next fetch to a broker as soon as the previous one
returns, which no public hook can hold back (`pause()`/`resume()` gate by partition, but
nothing public tells the consumer that a fetch came back empty). So the adapter reads the
consumer's fetcher and writes two of its attributes, here, by name; `tests/unit/runtime/
test_aiokafka_hooks.py` fails if aiokafka renames or reshapes any of them. The adapter is
off with a real Kafka (`local_broker.tuning`): none of this runs there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

# `Fetcher._proc_fetch_request(assignment, node_id, request)`: one fetch, True when it
# stored records.
Fetch = Callable[[Any, Any, Any], Awaitable[bool]]


def fetcher_of(consumer: Any) -> Any | None:
    """The consumer's fetcher (None before `start()`)."""
    return consumer._fetcher


def set_fetch_wait(fetcher: Any, wait_ms: int) -> None:
    """The `fetch_max_wait_ms` of the fetcher's next FetchRequest (read when it is built)."""
    fetcher._fetch_max_wait_ms = wait_ms


def wrap_fetch(fetcher: Any, wrap: Callable[[Fetch], Fetch]) -> None:
    """Replace, on this fetcher only, the task that sends one fetch and stores its answer:
    the fetcher sends no other fetch to that broker while it runs."""
    fetcher._proc_fetch_request = wrap(fetcher._proc_fetch_request)


def consumed_signal(fetcher: Any) -> Any:
    """The future the fetcher sets when the consumer has taken buffered records (a fresh
    one each round of its fetch loop)."""
    return fetcher._wait_consume_future
