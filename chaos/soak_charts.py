"""The soak's charts, as PNG files a person can look at: session latency, each service's
RSS, consumer lag, and fds / database connections / size, over time, kills marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from chaos.schedule import KillStep
from chaos.soak_load import Finished
from chaos.soak_sampler import Sample, cluster_cores


def mark(ax: Axes, kills: list[KillStep], warmup_s: float) -> None:
    for step in kills:
        if step.at_s is not None:
            ax.axvline(step.at_s, color="red", alpha=0.35, linewidth=1)
            ax.annotate(
                step.targets[0],
                (step.at_s, 1.0),
                xycoords=("data", "axes fraction"),
                rotation=90,
                fontsize=6,
                color="red",
                va="top",
                ha="right",
            )
    ax.axvspan(0, warmup_s, color="grey", alpha=0.12, label="warm-up")
    ax.set_xlabel("seconds since start (red: kills)")
    ax.grid(alpha=0.3)


def series(samples: list[Sample], pick: Any) -> tuple[list[float], list[float]]:
    points = [(s.t, pick(s)) for s in samples if pick(s) is not None]
    return [p[0] for p in points], [float(p[1]) for p in points]


def latency(path: Path, finished: list[Finished], kills: list[KillStep], warmup_s: float) -> None:
    fig, ax = plt.subplots(figsize=(11, 4.5))
    for kind in sorted({f.kind for f in finished}):
        points = [(f.at_s, f.seconds) for f in finished if f.kind == kind]
        ax.scatter([p[0] for p in points], [p[1] for p in points], s=8, label=kind)
    ax.set_ylabel("session duration, s (all its turns)")
    ax.set_title("Session latency by kind, at the session's end")
    mark(ax, kills, warmup_s)
    ax.legend(fontsize=7, ncol=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def per_role(path: Path, samples: list[Sample], kills: list[KillStep], warmup_s: float, what: str) -> None:
    fig, ax = plt.subplots(figsize=(11, 4.5))
    roles = sorted({r for s in samples for r in getattr(s, what)})
    for role in roles:
        xs, ys = series(samples, lambda s, role=role: getattr(s, what).get(role))
        ax.plot(xs, ys, label=role, linewidth=1.2)
    ax.set_ylabel({"rss_mb": "RSS, MB (all instances)", "fds": "open fds (all instances)"}[what])
    ax.set_title({"rss_mb": "Resident memory per service", "fds": "Open file descriptors per service"}[what])
    mark(ax, kills, warmup_s)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lag(path: Path, samples: list[Sample], kills: list[KillStep], warmup_s: float) -> None:
    fig, ax = plt.subplots(figsize=(11, 4.5))
    groups = sorted({g for s in samples for g in s.lag or {}})
    for group in groups:
        xs, ys = series(samples, lambda s, group=group: None if s.lag is None else s.lag.get(group, 0))
        ax.plot(xs, ys, label=group, linewidth=1.2, marker=".", markersize=3)
    unread = [s.t for s in samples if s.lag is None]
    ax.scatter(unread, [0] * len(unread), marker="x", color="black", s=14, label="broker unreachable")
    ax.set_ylabel("records not committed")
    ax.set_title("Consumer lag per durable group")
    mark(ax, kills, warmup_s)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def database(path: Path, samples: list[Sample], kills: list[KillStep], warmup_s: float) -> None:
    fig, (cpu, left, right) = plt.subplots(1, 3, figsize=(16, 4.5))
    cores = cluster_cores(samples)
    cpu.plot([c[0] for c in cores], [c[1] for c in cores], linewidth=1.0)
    cpu.set_ylabel("cores")
    cpu.set_title("CPU of the cluster's processes")
    mark(cpu, kills, warmup_s)
    xs, ys = series(samples, lambda s: s.db_connections)
    left.plot(xs, ys, linewidth=1.2)
    left.set_ylabel("client connections")
    left.set_title("Database connections")
    mark(left, kills, warmup_s)
    points = [(s.events, s.db_size_bytes / 2**20) for s in samples if s.events and s.db_size_bytes]
    right.plot([p[0] for p in points], [p[1] for p in points], linewidth=1.2)
    right.set_xlabel("events written")
    right.set_ylabel("database size, MB")
    right.set_title("Database size against events")
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw(
    out: Path, samples: list[Sample], finished: list[Finished], kills: list[KillStep], warmup_s: float
) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    latency(out / "latency.png", finished, kills, warmup_s)
    per_role(out / "rss.png", samples, kills, warmup_s, "rss_mb")
    per_role(out / "fds.png", samples, kills, warmup_s, "fds")
    lag(out / "lag.png", samples, kills, warmup_s)
    database(out / "database.png", samples, kills, warmup_s)
    return ["latency.png", "rss.png", "fds.png", "lag.png", "database.png"]
