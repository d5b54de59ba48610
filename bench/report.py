"""The printed tables of `make bench` (the JSON report carries the same figures)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bench import peers, rebuild, step_cost
from bench.cluster import ROLES


def grid(header: list[str], rows: list[list[str]]) -> list[str]:
    """Right-aligned columns, the first left-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]


def headline(report: dict[str, Any]) -> list[str]:
    wl, floors = report["workload"], report["floors"]
    passes = report["repeat"]
    how = f"median of {passes} passes" if passes > 1 else "one pass"
    inst = ", ".join(f"{role} {n}" for role, n in report["instances"]["running"].items())
    return [
        f"muster fan-out: N={wl['n']} K={wl['k']}, {how}; processes: {inst}",
        f"floors: Kafka round trip p50 {floors['kafka_rtt_ms_p50']:.2f} ms, "
        f"PostgreSQL insert+commit p50 {floors['pg_commit_ms_p50']:.2f} ms",
    ]


def runs_table(runs: list[dict[str, Any]]) -> list[str]:
    header = [
        "C",
        "turns/s",
        "children/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "p50/Kafka",
        "p50/PG",
        "cluster cores",
        "other cores",
    ]
    rows = [
        [
            str(r["c"]),
            f"{r['turns_per_s']:.1f}",
            f"{r['children_per_s']:.1f}",
            f"{r['latency_ms']['p50']:.0f}",
            f"{r['latency_ms']['p95']:.0f}",
            f"{r['latency_ms']['p99']:.0f}",
            f"{r['p50_over_kafka_rtt']:.0f}",
            f"{r['p50_over_pg_commit']:.0f}",
            f"{r['cluster_cores']:.2f}",
            f"{r['other_busy_cores']:.2f}",
        ]
        for r in runs
    ]
    return grid(header, rows)


def cpu_table(runs: list[dict[str, Any]]) -> list[str]:
    roles = [r for r in ROLES if any(r in run["cpu_ms_per_turn"] for run in runs)]
    idle = all("cpu_ms_per_turn_above_idle" in run for run in runs)
    header = ["CPU ms per turn", *roles, "total", *(["above idle"] if idle else []), "(bench client)"]
    rows = [
        [
            f"C={run['c']}",
            *(f"{run['cpu_ms_per_turn'].get(role, 0.0):.1f}" for role in roles),
            f"{run['cpu_ms_per_turn_total']:.1f}",
            *([f"{run['cpu_ms_per_turn_above_idle']:.1f}"] if idle else []),
            f"{run['driver_cpu_ms_per_turn']:.1f}",
        ]
        for run in runs
    ]
    return grid(header, rows)


def idle_table(idle: dict[str, Any]) -> list[str]:
    roles = list(idle["cpu_pct"])
    header = [f"idle {idle['seconds']:.0f} s: % of a core", *roles, "total", "(other cores)"]
    row = [
        "no traffic",
        *(f"{idle['cpu_pct'][r]:.1f}" for r in roles),
        f"{idle['cpu_pct_total']:.1f}",
        f"{idle['other_busy_cores']:.2f}",
    ]
    return grid(header, [row])


def table(report: dict[str, Any]) -> str:
    lines = [*headline(report), "", *runs_table(report["runs"]), "", *cpu_table(report["runs"])]
    if report.get("idle"):
        lines += ["", *idle_table(report["idle"])]
    lines.append("")
    if report.get("step_cost"):
        lines.append(step_cost.line(report["step_cost"]))
    if report.get("rebuild"):
        lines.append(rebuild.line(report["rebuild"]))
    if report.get("peers"):
        lines += ["", peers.table(report["peers"])]
    lines += [
        "",
        "cluster cores: CPU of muster's processes / wall; other cores: the rest of the machine's busy CPU",
        "(other load on the box: a noise indicator); above idle: total minus the idle rate over the wall.",
        "See docs/performance.md for what each figure means.",
    ]
    return "\n".join(lines)


def write_json(result: dict[str, Any], out: Path, prefix: str) -> Path:
    """`result` as `<out>/<prefix>-<UTC time>.json`; the path written."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.json"
    path.write_text(json.dumps(result, indent=2))
    return path
