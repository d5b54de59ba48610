"""muster next to its peers (LangGraph, Celery) from a `../shared/peers/run.sh` output dir.

The peers write one JSON file per benchmark (`common.write_result`): `turns_per_s`,
`latency.p50_ms`, `turns` and `cpu.cpu_s` (CPU seconds of every process of the peer, its
client included, over the measured window). The dir is `--peers DIR`, else
$MUSTER_PEERS_OUT, else $ANCHORS_OUT_DIR (set by run.sh when it runs `make bench` after the
peers); `--peers latest` takes the newest /tmp/peers-out/* that holds peer results.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

PEERS_ROOT = Path("/tmp/peers-out")
PEERS = {
    "LangGraph": ("langgraph_subgraph_sync", "langgraph_subgraph_sync_c1"),
    "Celery": ("celery_threads8_task", "celery_threads8_task_c1"),
}
RESULT_FILES = [name for pair in PEERS.values() for name in pair]


def has_results(d: Path) -> bool:
    return d.is_dir() and any((d / f"{name}.json").exists() for name in RESULT_FILES)


def resolve(arg: str | None) -> Path | None:
    """The peers' results dir to compare with, or None; exits early on an explicit bad one."""
    if arg == "latest":
        dirs = [d for d in PEERS_ROOT.glob("*") if has_results(d)]
        if not dirs:
            raise SystemExit(f"--peers latest: no dir under {PEERS_ROOT} holds peer results")
        return max(dirs, key=lambda d: d.stat().st_mtime)
    explicit = arg or os.environ.get("MUSTER_PEERS_OUT")
    if explicit:
        if not has_results(Path(explicit)):
            raise SystemExit(f"--peers {explicit}: none of {', '.join(RESULT_FILES)} (.json) there")
        return Path(explicit)
    ambient = os.environ.get("ANCHORS_OUT_DIR")  # run.sh: the peers of this very run
    return Path(ambient) if ambient and has_results(Path(ambient)) else None


def load(d: Path, name: str) -> dict[str, Any] | None:
    path = d / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def peer_row(d: Path, many: str, one: str) -> dict[str, Any] | None:
    a, b = load(d, many), load(d, one)
    if a is None:
        return None
    cpu_s = sum(((a.get("cpu") or {}).get("cpu_s") or {}).values())
    return {
        "c": a.get("concurrency"),
        "turns_per_s": a["turns_per_s"],
        "p50_ms": a["latency"]["p50_ms"],
        "p50_ms_c1": b["latency"]["p50_ms"] if b else None,
        "cpu_ms_per_turn": round(1000 * cpu_s / a.get("turns", 200), 2) if cpu_s else None,
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def compare(d: Path, runs: list[dict[str, Any]], floors: dict[str, float]) -> dict[str, Any]:
    by_c = {r["c"]: r for r in runs}
    theirs = {name: peer_row(d, *files) for name, files in PEERS.items()}
    c_many = next((r["c"] for r in theirs.values() if r and r["c"]), 16)
    many, one = by_c.get(c_many), by_c.get(1)
    me: dict[str, Any] = {
        "c": c_many,
        "turns_per_s": many["turns_per_s"] if many else None,
        "p50_ms": many["latency_ms"]["p50"] if many else None,
        "p50_ms_c1": one["latency_ms"]["p50"] if one else None,
        "cpu_ms_per_turn": many["cpu_ms_per_turn_total"] if many else None,
    }
    rows: dict[str, dict[str, Any] | None] = {"muster": me, **theirs}
    lg, cel = theirs["LangGraph"] or {}, theirs["Celery"] or {}
    kafka, pg = load(d, "kafka_pingpong_fw2"), load(d, "pg_commit")
    cases: list[dict[str, Any]] = (pg or {}).get("cases", [])
    pg_one: dict[str, Any] = next((c["latency"] for c in cases if c.get("connections") == 1), {})
    return {
        "dir": str(d),
        "rows": rows,
        "ratios": {  # issue 9: > 1 beats Celery on throughput; < 1 beats LangGraph on latency
            "turns_per_s_over_celery": ratio(me["turns_per_s"], cel.get("turns_per_s")),
            "p50_c1_over_langgraph": ratio(me["p50_ms_c1"], lg.get("p50_ms_c1")),
            "turns_per_s_over_langgraph": ratio(me["turns_per_s"], lg.get("turns_per_s")),
            "p50_c1_over_celery": ratio(me["p50_ms_c1"], cel.get("p50_ms_c1")),
        },
        "peer_floors": {
            "kafka_rtt_ms_p50": (kafka or {}).get("rtt", {}).get("p50_ms"),
            "pg_commit_ms_p50": pg_one.get("p50_ms"),
        },
        "own_floors": floors,
    }


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def table(cmp: dict[str, Any]) -> str:
    c = cmp["rows"]["muster"]["c"]
    lines = [
        f"vs peers ({cmp['dir']}):",
        f"{'system':<11}{f'turns/s C={c}':>14}{f'p50 ms C={c}':>13}{'p50 ms C=1':>12}{'CPU ms/turn':>13}",
    ]
    for name, row in cmp["rows"].items():
        if row is None:
            lines.append(f"{name:<11}{'(no results)':>14}")
            continue
        lines.append(
            f"{name:<11}{fmt(row['turns_per_s'], '.1f'):>14}{fmt(row['p50_ms'], '.0f'):>13}"
            f"{fmt(row['p50_ms_c1'], '.1f'):>12}{fmt(row['cpu_ms_per_turn'], '.1f'):>13}"
        )
    r, pf, of = cmp["ratios"], cmp["peer_floors"], cmp["own_floors"]
    lines += [
        f"muster turns/s / Celery turns/s (C={c}): {fmt(r['turns_per_s_over_celery'], '.2f')}  (> 1 beats Celery)",
        f"muster p50 / LangGraph p50 (C=1): {fmt(r['p50_c1_over_langgraph'], '.2f')}  (< 1 beats LangGraph)",
        f"floors in the peers' run: Kafka RTT p50 {fmt(pf['kafka_rtt_ms_p50'], '.2f')} ms, PG commit p50 "
        f"{fmt(pf['pg_commit_ms_p50'], '.2f')} ms (this run: {of['kafka_rtt_ms_p50']:.2f}, {of['pg_commit_ms_p50']:.2f})",
    ]
    return "\n".join(lines)
