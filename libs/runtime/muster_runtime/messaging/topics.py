"""Kafka topic names and their partition counts; the launcher creates them explicitly
because auto-created topics get a single partition on the local broker."""

from __future__ import annotations

COMMANDS = "muster.commands"
EVENTS = "muster.events"
DELEGATIONS = "muster.delegations"
DEAD_LETTERS = "muster.dlq"
# Ephemeral answer previews (ADR 0039): never in the store, kept briefly.
DELTAS = "muster.deltas"

ALL = (COMMANDS, EVENTS, DELEGATIONS, DEAD_LETTERS, DELTAS)


# Enough for two instances of each service to share the work (ADR 0026).
DEFAULT_PARTITIONS = 2


def partitions(count: int = DEFAULT_PARTITIONS) -> dict[str, int]:
    """Partition count per topic: `count` (MUSTER_PARTITIONS, `Settings.partitions`), DLQ always 1."""
    return {COMMANDS: count, EVENTS: count, DELEGATIONS: count, DEAD_LETTERS: 1, DELTAS: count}


# Topic configuration beyond the partition count: deltas are a preview, kept one minute.
CONFIGS: dict[str, dict[str, str]] = {DELTAS: {"retention.ms": "60000", "cleanup.policy": "delete"}}
