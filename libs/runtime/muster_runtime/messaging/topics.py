"""Kafka topic names and their partition counts; the launcher creates them explicitly
because auto-created topics get a single partition on the local broker."""

from __future__ import annotations

COMMANDS = "muster.commands"
EVENTS = "muster.events"
DELEGATIONS = "muster.delegations"
DEAD_LETTERS = "muster.dlq"

ALL = (COMMANDS, EVENTS, DELEGATIONS, DEAD_LETTERS)


# Enough for two instances of each service to share the work (ADR 0026).
DEFAULT_PARTITIONS = 2


def partitions(count: int = DEFAULT_PARTITIONS) -> dict[str, int]:
    """Partition count per topic: `count` (MUSTER_PARTITIONS, `Settings.partitions`), DLQ always 1."""
    return {COMMANDS: count, EVENTS: count, DELEGATIONS: count, DEAD_LETTERS: 1}
