"""The switch of the local broker's adapter: on when the services' Kafka is the local broker
(`MUSTER_LOCAL_BROKER`, which `muster run` sets when it runs Tansu itself), off when
KAFKA_BOOTSTRAP_SERVERS points at a real Kafka.

On, consumers get the low fetch wait Tansu needs (`MUSTER_KAFKA_FETCH_MAX_WAIT_MS`; a
backstop consumer such as recovery's its own longer one) and are `AdaptiveConsumer`s (the
idle wait, or bells when a bells directory is given); publishers ring. Off, consumers use
aiokafka's own options (its default fetch wait: Kafka answers a waiting fetch as soon as
data arrives), no bells exist and no aiokafka internals are touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from muster_runtime.messaging.consumer import ServiceConsumer
from muster_runtime.messaging.local_broker.bells import Relevant, Ringer, ringer
from muster_runtime.messaging.local_broker.fetching import AdaptiveConsumer
from muster_runtime.process.settings import Settings


def fetch_options(settings: Settings, *, backstop_ms: int | None = None) -> dict[str, Any]:
    """A subscriber's fetch options: `backstop_ms` for one whose latency does not matter."""
    if not settings.local_broker:
        return {}
    return {"fetch_max_wait_ms": max(backstop_ms or 0, settings.kafka_fetch_max_wait_ms)}


def consumer(
    settings: Settings, *, bell_relevant: Relevant | None = None, catch_up: bool = False
) -> tuple[type[ServiceConsumer], dict[str, Any]]:
    """The consumer class the services' broker builds, and its extra options."""
    if not settings.local_broker:
        return ServiceConsumer, {}
    return AdaptiveConsumer, {
        "idle_fetch_max_wait_ms": settings.kafka_idle_fetch_max_wait_ms,
        "idle_after_s": settings.kafka_idle_after_ms / 1000,
        "bells_dir": bells_dir(settings),
        "bell_fallback_s": settings.bell_fallback_ms / 1000,
        "bell_idle_fallback_s": settings.bell_idle_fallback_ms / 1000,
        "bell_relevant": bell_relevant,
        "catch_up": catch_up,
    }


def bells_dir(settings: Settings) -> Path | None:
    return settings.bells_dir if settings.local_broker else None


def publishers_ringer(settings: Settings) -> Ringer | None:
    """What rings the consumers after a publication (None: nobody to ring)."""
    return ringer(bells_dir(settings))
