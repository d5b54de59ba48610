"""Kafka topic names and their partition counts; the launcher creates them explicitly
because auto-created topics get a single partition on the local broker."""

from __future__ import annotations

import os

COMMANDS = "muster.commands"
EVENTS = "muster.events"
DELEGATIONS = "muster.delegations"
DEAD_LETTERS = "muster.dlq"

ALL = (COMMANDS, EVENTS, DELEGATIONS, DEAD_LETTERS)


def partitions() -> dict[str, int]:
    """Partition count per topic: MUSTER_PARTITIONS (default 4), DLQ always 1."""
    count = int(os.environ.get("MUSTER_PARTITIONS", "4"))
    return {COMMANDS: count, EVENTS: count, DELEGATIONS: count, DEAD_LETTERS: 1}
