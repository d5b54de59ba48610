"""Consumer lag as the broker sees it: for each durable consumer group, the end offsets of
the partitions it has committed on minus what it committed.

The groups are the services' durable ones (`GROUPS`); a gateway instance reads the live
events under a group of its own and commits nothing that matters for delivery. The local
broker answers OffsetFetch as a group's consumer asks it (`committed`), not as the admin
client does, and lists no groups, hence one idle consumer per group that never subscribes
(so it never joins the group). The broker keeps records and offsets in memory (ADR 0026):
after it is killed every group starts over, which reads as no committed offset, no lag.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition

GROUPS = ("harness", "subagent-worker", "recovery")


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

    async def lag(self) -> dict[str, int]:
        """Records not yet committed, per group; raises when the broker does not answer (the
        reader reconnects on the next call)."""
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
            for group, consumer in self.groups.items():
                total = 0
                for tp in partitions:
                    committed = await consumer.committed(tp)
                    if committed is not None and committed >= 0:
                        total += max(0, ends.get(tp, committed) - committed)
                lags[group] = total
            return lags
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
