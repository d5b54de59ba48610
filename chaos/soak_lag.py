"""Consumer lag as the broker sees it: for each durable consumer group, the end offsets of
the partitions it has committed on minus what it committed.

The groups are the services' durable ones (`GROUPS`); a gateway instance reads the live
events under a group of its own and commits nothing that matters for delivery. The local
broker answers OffsetFetch as a group's consumer asks it (`committed`), not as the admin
client does, and lists no groups, hence one idle consumer per group that never subscribes
(so it never joins the group). The broker keeps records and offsets in memory (ADR 0026):
after it is killed every group starts over, which reads as no committed offset, no lag.

A reading keeps the offsets as well as their differences: under steady load a group that
processes at once still reads a few records of lag in most samples, and recovery's backstop
consumer, which polls every 250 ms instead of being rung (ADRs 0011, 0024), seldom reads 0.
Whether a group caught up after a restart is told by its committed offsets passing the
log's end as it stood then (`soak_checks.lag`).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

GROUPS = ("harness", "subagent-worker", "recovery")


@dataclass(frozen=True)
class LagReading:
    lags: dict[str, int]  # group -> records not yet committed, over every partition
    ends: dict[str, int]  # "topic:partition" -> the log's end offset
    committed: dict[str, dict[str, int]]  # group -> "topic:partition" -> committed offset


class LagReader:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.plain: AIOKafkaConsumer | None = None
        self.groups: dict[str, AIOKafkaConsumer] = {}

    async def _open(self) -> AIOKafkaConsumer:
        if self.plain is None:
            opened: list[AIOKafkaConsumer] = []
            try:
                plain = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
                await plain.start()
                opened.append(plain)
                for group in GROUPS:
                    consumer = AIOKafkaConsumer(
                        bootstrap_servers=self.bootstrap,
                        group_id=group,
                        enable_auto_commit=False,
                        request_timeout_ms=5000,
                    )
                    await consumer.start()
                    opened.append(consumer)
                    self.groups[group] = consumer
            except Exception:
                self.groups = {}
                await _stop(opened)
                raise
            self.plain = plain
        return self.plain

    async def lag(self) -> LagReading:
        """Records not yet committed, per group, with the offsets they come from; raises when
        the broker does not answer (the reader reconnects on the next call)."""
        try:
            plain = await self._open()
            topics = await plain.topics()
            partitions = [
                TopicPartition(topic, p)
                for topic in sorted(topics)
                for p in plain.partitions_for_topic(topic) or ()
            ]
            ends: dict[TopicPartition, int] = await plain.end_offsets(partitions) if partitions else {}
            lags: dict[str, int] = {}
            offsets: dict[str, dict[str, int]] = {}
            for group, consumer in self.groups.items():
                total, offsets[group] = 0, {}
                for tp in partitions:
                    committed = await consumer.committed(tp)
                    if committed is not None and committed >= 0:
                        total += max(0, ends.get(tp, committed) - committed)
                        offsets[group][_key(tp)] = committed
                lags[group] = total
            return LagReading(lags, {_key(tp): end for tp, end in ends.items()}, offsets)
        except Exception:
            await self.close()
            raise

    async def close(self) -> None:
        consumers = [c for c in (self.plain, *self.groups.values()) if c is not None]
        self.plain, self.groups = None, {}
        await _stop(consumers)


async def _stop(consumers: list[AIOKafkaConsumer]) -> None:
    for consumer in consumers:
        try:
            await consumer.stop()
        except Exception:
            pass


def _key(tp: TopicPartition) -> str:
    return f"{tp.topic}:{tp.partition}"
