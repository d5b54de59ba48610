"""S4 of the soak: after each restart every durable group must catch up within the bound
(read 0 lag, or commit past the log's end as it stood at the restart), each group on its
own; a group that stays behind fails the check."""

from __future__ import annotations

from chaos.schedule import KillStep
from chaos.soak_checks import lag
from chaos.soak_sampler import Sample


def sample(t: float, **groups: int) -> Sample:
    return Sample(t=t, lag=dict(groups))


def kill_at(at_s: float) -> KillStep:
    return KillStep(index=1, delay_s=at_s, targets=["harness"], at_s=at_s, restart_s=2.0)


def test_groups_that_catch_up_at_different_samples_pass() -> None:
    samples = [
        sample(12, harness=30, recovery=0),
        sample(17, harness=0, recovery=120),  # never all at 0 together
        sample(22, harness=4, recovery=0),
    ]
    check = lag(samples, [kill_at(10)], 45, sample(60, harness=0, recovery=0))
    assert check.status == "PASS", check.offending
    assert check.counts["max_s_to_caught_up"] == 5  # harness: restarted at 12, 0 at 17


def test_a_group_that_never_reads_zero_fails_and_is_named() -> None:
    samples = [sample(12, harness=0, recovery=50), sample(17, harness=0, recovery=80)]
    check = lag(samples, [kill_at(10)], 45, sample(60, harness=0, recovery=0))
    assert check.status == "FAIL"
    assert check.offending == ["kill 1 (harness at 10 s): lag recovery [50, 80]"]


def test_samples_after_the_bound_do_not_count() -> None:
    samples = [sample(12, harness=9), sample(70, harness=0)]
    check = lag(samples, [kill_at(10)], 45, sample(80, harness=0))
    assert check.status == "FAIL"


def test_an_unread_window_and_a_lag_left_at_the_end_fail() -> None:
    check = lag([Sample(t=12, lag=None)], [kill_at(10)], 45, sample(60, harness=3))
    assert check.status == "FAIL"
    assert check.offending == ["kill 1 (harness at 10 s): lag unread", "lag after quiescence: {'harness': 3}"]


def offsets(t: float, ends: dict[str, int], recovery: dict[str, int]) -> Sample:
    lag = sum(max(0, ends[tp] - done) for tp, done in recovery.items())
    return Sample(t=t, lag={"recovery": lag}, ends=ends, committed={"recovery": recovery})


def test_a_trailing_group_passes_once_its_commits_pass_the_end_at_the_restart() -> None:
    # New records keep arriving, so the backstop never reads 0; but by t=22 it has consumed
    # every record that stood in the log at t=12 on both partitions.
    samples = [
        offsets(12, {"e:0": 100, "e:1": 50}, {"e:0": 90, "e:1": 40}),
        offsets(17, {"e:0": 130, "e:1": 70}, {"e:0": 101, "e:1": 45}),  # e:1 still short
        offsets(22, {"e:0": 160, "e:1": 90}, {"e:0": 150, "e:1": 80}),
    ]
    check = lag(samples, [kill_at(10)], 45, sample(60, recovery=0))
    assert check.status == "PASS", check.offending
    assert check.counts["max_s_to_caught_up"] == 10


def test_a_trailing_group_that_never_passes_the_end_fails() -> None:
    samples = [
        offsets(12, {"e:0": 100}, {"e:0": 90}),
        offsets(17, {"e:0": 140}, {"e:0": 95}),
        offsets(22, {"e:0": 180}, {"e:0": 99}),
    ]
    check = lag(samples, [kill_at(10)], 45, sample(60, recovery=0))
    assert check.status == "FAIL"
    assert check.offending == ["kill 1 (harness at 10 s): lag recovery [10, 45, 81]"]
