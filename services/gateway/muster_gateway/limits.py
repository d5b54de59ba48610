"""Per-user admission (DESIGN §7, ADR 0041): what one user may start, so that one user's
excess never slows another.

- `admit_turn`: a decision's check before it starts a turn: the cluster is not shedding
  new turns (`overload.py`: `overloaded`) and the user has fewer than
  `MUSTER_USER_MAX_RUNNING` trees with a turn under way (`quota_exceeded`), read through
  the decision's own unit of work, so it is unit-tested in memory.
- `RateLimiter`: `MUSTER_USER_MESSAGES_PER_MINUTE`, a token bucket per user in this gateway
  instance, for the frames and requests that start work.
- `SocketCounter`: `MUSTER_USER_MAX_SOCKETS`, the user's open WebSockets on this instance.

Cancel, answers to approvals and questions and LOCAL tool results pass none of these: they
end or unblock work already admitted. A refusal is a `GatewayError` carrying
`retry_after_ms`; nothing the client already started is touched.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from muster_runtime.process.settings import Settings
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

from muster_gateway.errors import GatewayError
from muster_gateway.overload import Shedder

# How long a client over its running quota is told to wait: a turn rarely ends sooner,
# and the client learns of the end from `session_status` anyway.
QUOTA_RETRY_AFTER_MS = 2_000
# A refused WebSocket handshake's `Retry-After`: sockets close within a second or two of
# their client going away.
SOCKETS_RETRY_AFTER_S = 2
# Buckets kept before full ones (indistinguishable from a new bucket) are forgotten.
PRUNE_AT = 10_000

Clock = Callable[[], float]


@dataclass(frozen=True)
class UserLimits:
    """The per-user limits; 0 turns one off."""

    max_running: int = 0
    max_sockets: int = 0
    messages_per_minute: int = 0

    @classmethod
    def of(cls, settings: Settings) -> UserLimits:
        return cls(settings.user_max_running, settings.user_max_sockets, settings.user_messages_per_minute)


@dataclass(frozen=True)
class TurnAdmission:
    """What a decision that starts a turn is told: the user's quota of running trees (0:
    none) and, while the cluster sheds new turns, `overloaded`'s retry hint."""

    max_running: int = 0
    shed_retry_after_ms: int | None = None


NO_LIMITS = TurnAdmission()


async def admit_turn(uow: AbstractUnitOfWork, user_id: str, admission: TurnAdmission) -> None:
    """Refuse a new turn while the cluster sheds new turns (`overloaded`), or while the user
    already has `max_running` trees with a turn under way (`quota_exceeded`); nothing else
    the decision would have written is written."""
    if admission.shed_retry_after_ms is not None:
        raise GatewayError(
            "overloaded",
            "the cluster is saturated and sheds new turns; retry later",
            retry_after_ms=admission.shed_retry_after_ms,
        )
    await running_quota(uow, user_id, admission.max_running)


async def running_quota(uow: AbstractUnitOfWork, user_id: str, max_running: int) -> None:
    """Refuse (`quota_exceeded`) a new turn while the user already has `max_running` trees
    with a turn under way; 0 admits any number."""
    if max_running <= 0:
        return
    running = await uow.running_trees(user_id)
    if running >= max_running:
        raise GatewayError(
            "quota_exceeded",
            f"{running} session trees are running, the most a user may run at once is "
            f"{max_running}; retry when one ends or cancel one",
            retry_after_ms=QUOTA_RETRY_AFTER_MS,
        )


@dataclass
class TokenBucket:
    """`capacity` tokens, refilled at `per_second`; `take` spends one or says how long
    until one is there."""

    capacity: float
    per_second: float
    tokens: float
    updated: float

    def refill(self, now: float) -> None:
        elapsed = max(0.0, now - self.updated)
        self.tokens = min(self.capacity, self.tokens + elapsed * self.per_second)
        self.updated = now

    def take(self, now: float) -> int | None:
        """None when a token was spent; else the milliseconds until one is available."""
        self.refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return max(1, math.ceil((1.0 - self.tokens) / self.per_second * 1000))

    def full(self, now: float) -> bool:
        self.refill(now)
        return self.tokens >= self.capacity


@dataclass
class RateLimiter:
    """`per_minute` messages a minute per user, in bursts of up to `per_minute` (0: no
    limit). One bucket per user: one user's flood empties only their own."""

    per_minute: int
    clock: Clock = time.monotonic
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)

    def admit(self, user_id: str) -> None:
        """Spend one of the user's tokens, or refuse with `rate_limited`."""
        if self.per_minute <= 0:
            return
        now = self.clock()
        bucket = self._buckets.get(user_id)
        if bucket is None:
            if len(self._buckets) >= PRUNE_AT:
                self._prune(now)
            bucket = TokenBucket(self.per_minute, self.per_minute / 60.0, self.per_minute, now)
            self._buckets[user_id] = bucket
        wait_ms = bucket.take(now)
        if wait_ms is not None:
            raise GatewayError(
                "rate_limited",
                f"more than {self.per_minute} messages a minute; retry in {wait_ms} ms",
                retry_after_ms=wait_ms,
            )

    def _prune(self, now: float) -> None:
        for user_id in [u for u, b in self._buckets.items() if b.full(now)]:
            del self._buckets[user_id]

    def __len__(self) -> int:
        return len(self._buckets)


@dataclass
class SocketCounter:
    """The users' open WebSockets on this instance (0: no limit)."""

    max_sockets: int
    _open: dict[str, int] = field(default_factory=dict)

    def open(self, user_id: str) -> bool:
        """Count one more socket of the user; False (nothing counted) when over the limit."""
        count = self._open.get(user_id, 0)
        if self.max_sockets > 0 and count >= self.max_sockets:
            return False
        self._open[user_id] = count + 1
        return True

    def close(self, user_id: str) -> None:
        count = self._open.get(user_id, 0) - 1
        if count > 0:
            self._open[user_id] = count
        else:
            self._open.pop(user_id, None)

    def count(self, user_id: str) -> int:
        return self._open.get(user_id, 0)


@dataclass
class Admission:
    """What one gateway instance holds for admission: the limits, the buckets, the sockets,
    and the view of the cluster's load (None: never shed)."""

    limits: UserLimits = field(default_factory=UserLimits)
    shedder: Shedder | None = None
    clock: Clock = time.monotonic
    rates: RateLimiter = field(init=False)
    sockets: SocketCounter = field(init=False)

    def __post_init__(self) -> None:
        self.rates = RateLimiter(self.limits.messages_per_minute, self.clock)
        self.sockets = SocketCounter(self.limits.max_sockets)

    @property
    def max_running(self) -> int:
        return self.limits.max_running

    async def turns(self) -> TurnAdmission:
        """What the decisions that start turns are told now."""
        shed = await self.shedder.retry_after_ms() if self.shedder is not None else None
        return TurnAdmission(self.limits.max_running, shed)

    def turn_started(self, session_id: str) -> None:
        """A decision told by `turns` started a turn of `session_id` (its latency is what a
        latency target measures, `turn_latency`)."""
        if self.shedder is not None:
            self.shedder.turn_started(session_id)
