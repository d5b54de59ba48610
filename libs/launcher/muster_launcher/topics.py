"""Create muster's Kafka topics explicitly and idempotently.

Explicitly, because a topic auto-created by a first produce gets one partition on the local
broker; idempotently, because this runs on every start and after every broker restart.
"""

from __future__ import annotations

import contextlib
import sys

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code
from muster_runtime.messaging.topics import CONFIGS, partitions
from muster_runtime.process import retrying
from muster_runtime.process.settings import Settings


async def _admin(bootstrap: str, within: float) -> AIOKafkaAdminClient:
    """An admin client, retrying until the broker answers (it may still be starting)."""

    async def connect() -> AIOKafkaAdminClient:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        try:
            await admin.start()
        except (KafkaError, OSError):
            with contextlib.suppress(Exception):
                await admin.close()
            raise
        return admin

    errors = (KafkaError, OSError)
    try:
        return await retrying.call(retrying.until_ready(errors, within_s=within), connect)
    except errors as exc:
        raise RuntimeError(f"Kafka not reachable at {bootstrap}: {exc}") from exc


async def ensure_topics(bootstrap: str, settings: Settings, within: float = 30.0) -> list[str]:
    """Create every topic of `muster_runtime.messaging.topics.partitions()`; return those created."""
    wanted = partitions(settings.partitions)
    # A real cluster may require more replicas; the local broker has exactly one.
    replication = settings.kafka_replication_factor
    admin = await _admin(bootstrap, within)
    try:
        existing = set(await admin.list_topics())
        new = [
            NewTopic(
                name=name,
                num_partitions=count,
                replication_factor=replication,
                topic_configs=CONFIGS.get(name, {}),
            )
            for name, count in wanted.items()
            if name not in existing
        ]
        created = []
        if new:
            response = await admin.create_topics(new)
            # Errors come back per topic instead of being raised; "already exists" means a
            # concurrent creator (or a service's auto-create) won the race, which is fine.
            for entry in response.to_object()["topic_errors"]:
                error = for_code(entry["error_code"])
                if entry["error_code"] == 0:
                    created.append(entry["topic"])
                elif error is not TopicAlreadyExistsError:
                    raise error(f"creating topic {entry['topic']}: {entry['error_message']}")
        await _check_partitions(admin, wanted)
        return created
    finally:
        await admin.close()


async def _check_partitions(admin: AIOKafkaAdminClient, wanted: dict[str, int]) -> None:
    """Warn about a topic auto-created with too few partitions: Tansu cannot add any
    (no CreatePartitions), and fewer partitions limit parallelism, not correctness."""
    for topic in await admin.describe_topics(list(wanted)):
        have = len(topic["partitions"])
        if have < wanted[topic["topic"]]:
            print(
                f"muster: topic {topic['topic']} has {have} partition(s), expected {wanted[topic['topic']]}",
                file=sys.stderr,
                flush=True,
            )
