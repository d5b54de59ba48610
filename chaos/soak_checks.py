"""The soak's resource checks over its samples (docs/soak.md has the reasoning).

Samples from the warm-up's end to the load's end count; their last third is the end. Each
figure is a maximum over a span of samples, so that a service restarted by a kill (fresh,
smaller, fewer fds) does not pass for a fall or hide a leak:

- S1 RSS: each service's end maximum is at most `RSS_GROWTH` (10 %) above its maximum over
  the first third after the warm-up. The broker's is shown, not checked: its storage is in
  memory and holds every record.
- S2 open fds, "flat": no new high in the end. Each process role's end maximum is at most
  max(8, 10 %) above its high-water mark before the end (warm-up included). Pools grow to
  what the busiest moment needed (a reconnect storm after a gateway restart, a harness's
  takeover of many sessions) and keep their connections: a high-water mark, not a leak. A
  leak keeps setting new highs.
- S3 database connections: the same, with max(4, 10 %).
- S4 consumer lag: after each kill's restart, each durable group catches up within
  `lag_bound_s`: it reads 0 lag in some sample, or its committed offsets pass, on every
  partition, the log's end as the first sample after the restart read it (each group on
  its own: under load there is always a record in flight somewhere, so all groups at 0 in
  one instant measures chance, not a backlog; and recovery's backstop consumer, which polls
  every 250 ms, seldom reads 0 while records arrive). The final sample
  (after quiescence) reads 0 for all.
- S5 database growth: bytes per event written over the second half of the samples is at most
  `DB_TOLERANCE` (50 %) above the first half's (the outbox's deleted rows and page allocation
  make it lumpy; a leak of rows or bloat grows it well past that).
"""

from __future__ import annotations

from collections.abc import Callable

from chaos.dbstate import Check
from chaos.schedule import KillStep
from chaos.soak_sampler import Sample

RSS_GROWTH = 0.10
DB_TOLERANCE = 0.5
CHECKED_RSS = ("gateway", "harness", "subagent-worker", "recovery")


def slack(minimum: int) -> Callable[[int], int]:
    return lambda base: max(minimum, round(base * 0.1))


FDS_SLACK = slack(8)
CONNECTIONS_SLACK = slack(4)


def thirds(
    samples: list[Sample], start_s: float, end_s: float
) -> tuple[list[Sample], list[Sample], list[Sample]]:
    """The first and last thirds after the warm-up, and everything before the last third."""
    counted = [s for s in samples if start_s <= s.t <= end_s]
    third = max(1, len(counted) // 3)
    last = counted[-third:]
    return counted[:third], last, [s for s in samples if s.t < last[0].t] if last else []


def rss(first: list[Sample], last: list[Sample]) -> Check:
    check = Check("S1", f"each service's RSS grows <= {RSS_GROWTH:.0%} after the warm-up")
    for role in sorted({r for s in first + last for r in s.rss_mb}):
        base = max((s.rss_mb.get(role, 0.0) for s in first), default=0.0)
        end = max((s.rss_mb.get(role, 0.0) for s in last), default=0.0)
        growth = end / base - 1 if base else 0.0
        check.counts[f"{role}_pct"] = round(100 * growth)
        if role in CHECKED_RSS and growth > RSS_GROWTH:
            check.fail(f"{role}: {base:.1f} MB -> {end:.1f} MB (+{100 * growth:.0f} %)")
    check.note = "maximum over the first third after the warm-up vs the last third; tansu shown, not checked"
    return check


def flat(number: str, name: str, first: list[int], last: list[int], allowance: Callable[[int], int]) -> Check:
    check = Check(number, name)
    base, end = max(first, default=0), max(last, default=0)
    check.counts.update(baseline=base, end=end, allowed=base + allowance(base))
    if end > base + allowance(base):
        check.fail(f"{base} -> {end}")
    return check


def fds(first: list[Sample], last: list[Sample]) -> Check:
    check = Check("S2", "open file descriptors flat: no new high above max(8, 10 %) per role")
    for role in sorted({r for s in first + last for r in s.fds}):
        one = flat(
            "S2", role, [s.fds.get(role, 0) for s in first], [s.fds.get(role, 0) for s in last], FDS_SLACK
        )
        check.counts[role] = one.counts["end"] - one.counts["baseline"]
        for what in one.offending:
            check.fail(f"{role}: {what}")
    return check


def connections(first: list[Sample], last: list[Sample]) -> Check:
    return flat(
        "S3",
        "database connections flat: no new high above max(4, 10 %)",
        [s.db_connections for s in first if s.db_connections is not None],
        [s.db_connections for s in last if s.db_connections is not None],
        CONNECTIONS_SLACK,
    )


def lag(samples: list[Sample], kills: list[KillStep], bound_s: float, final: Sample | None) -> Check:
    check = Check(
        "S4",
        f"each group caught up within {bound_s:g} s of each restart (0 lag, or its commits past "
        "the log's end at the restart), and 0 lag at the end",
    )
    recovered = []
    for step in kills:
        if step.at_s is None:
            continue
        restarted = step.at_s + (step.restart_s or 0.0)
        window = [s for s in samples if restarted <= s.t <= restarted + bound_s and s.lag is not None]
        behind = []
        for group in sorted({group for s in window for group in s.lag or {}}):
            caught_at = caught_up(window, group)
            if caught_at is None:
                behind.append(f"{group} {[(s.lag or {}).get(group) for s in window]}")
            else:
                recovered.append(caught_at - restarted)
        if not window or behind:
            seen = "; ".join(behind) or "unread"
            check.fail(f"kill {step.index} ({step.targets[0]} at {step.at_s:.0f} s): lag {seen}")
    check.counts["kills"] = len(kills)
    check.counts["max_s_to_caught_up"] = round(max(recovered, default=0.0))
    check.counts["max_lag"] = max((s.lag_total or 0 for s in samples), default=0)
    if final is None or final.lag_total != 0:
        check.fail(f"lag after quiescence: {None if final is None else final.lag}")
    return check


def caught_up(window: list[Sample], group: str) -> float | None:
    """When `group` first read 0 lag, or had committed, on every partition it had an offset
    on, at least the end offset the window's first sample read there: every record that
    stood in the log after the restart consumed, though new ones keep arriving. None: it
    did neither within the window."""
    first = next((s for s in window if s.ends is not None and s.committed is not None), None)
    for s in window:
        if (s.lag or {}).get(group) == 0:
            return s.t
        if first is None or s.committed is None or s is first:
            continue
        start, now = (first.committed or {}).get(group, {}), s.committed.get(group, {})
        ends = first.ends or {}
        if now and all(now.get(tp, -1) >= ends.get(tp, offset) for tp, offset in start.items()):
            return s.t
    return None


def db_growth(samples: list[Sample], start_s: float, end_s: float) -> Check:
    check = Check(
        "S5", f"database grows linearly in events (bytes/event of the 2nd half <= 1st + {DB_TOLERANCE:.0%})"
    )
    counted = [s for s in samples if start_s <= s.t <= end_s and s.events is not None and s.db_size_bytes]
    if len(counted) < 4:
        check.status, check.note = "SKIP", "too few samples"
        return check
    a, m, z = counted[0], counted[len(counted) // 2], counted[-1]
    halves = [
        (m.db_size_bytes or 0) - (a.db_size_bytes or 0),
        (z.db_size_bytes or 0) - (m.db_size_bytes or 0),
    ]
    events = [(m.events or 0) - (a.events or 0), (z.events or 0) - (m.events or 0)]
    check.counts.update(events_first=events[0], events_second=events[1])
    if min(events) < 200:
        check.status, check.note = "SKIP", "fewer than 200 events in a half"
        return check
    first, second = halves[0] / events[0], halves[1] / events[1]
    check.counts.update(bytes_per_event_first=round(first), bytes_per_event_second=round(second))
    if second > first * (1 + DB_TOLERANCE) + 64:
        check.fail(f"{first:.0f} -> {second:.0f} bytes/event")
    return check


def resource_checks(
    samples: list[Sample],
    kills: list[KillStep],
    warmup_s: float,
    load_end_s: float,
    lag_bound_s: float,
    final: Sample | None,
) -> list[Check]:
    first, last, before = thirds(samples, warmup_s, load_end_s)
    return [
        rss(first, last),
        fds(before, last),
        connections(before, last),
        lag(samples, kills, lag_bound_s, final),
        db_growth(samples, warmup_s, load_end_s),
    ]
