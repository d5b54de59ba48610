"""Restart delays for supervised children.

A child that crashes right after starting is restarted ever more slowly so a broken service
does not spin the CPU; one that ran for a while before dying is restarted quickly again,
because a single crash says nothing about the next start.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Backoff:
    initial: float = 0.5
    factor: float = 2.0
    maximum: float = 10.0
    # Uptime after which a crash counts as isolated and the delay starts over.
    stable_after: float = 30.0
    _next: float = 0.0

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.factor < 1 or self.maximum < self.initial:
            raise ValueError("backoff needs 0 < initial <= maximum and factor >= 1")
        self._next = self.initial

    def delay(self, uptime: float) -> float:
        """The delay before the next start, given how long the last run lasted."""
        if uptime >= self.stable_after:
            self._next = self.initial
        current = self._next
        self._next = min(self._next * self.factor, self.maximum)
        return current

    def reset(self) -> None:
        self._next = self.initial
