"""The services' collector settings (`muster_runtime.process.collector`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from muster_runtime.process import collector, eventloop


@pytest.fixture(autouse=True)
def restore_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tune_freezes_startup_objects_and_raises_the_young_threshold() -> None:
    startup_object = {"kept": ["by", "startup"]}
    collector.tune()
    assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, *collector.OLDER_THRESHOLDS)
    assert gc.get_freeze_count() > 0
    # Frozen objects are no longer tracked in any generation the collector walks.
    assert not any(startup_object is o for o in gc.get_objects())


def test_tune_frees_unreachable_startup_garbage_instead_of_freezing_it() -> None:
    class Node:
        other: object = None

    freed: list[str] = []

    class Tracked(Node):
        def __del__(self) -> None:
            freed.append("cycle")

    a, b = Tracked(), Tracked()
    a.other, b.other = b, a  # a cycle only the collector can free
    del a, b
    collector.tune()
    assert freed == ["cycle", "cycle"]


def test_every_service_loop_runs_tuned() -> None:
    async def main() -> tuple[int, int, int]:
        return gc.get_threshold()

    assert eventloop.run(main())[0] == collector.YOUNG_THRESHOLD
