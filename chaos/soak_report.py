"""The soak's report: the chaos report of its sessions and kills (`chaos.report.build`), with
the samples, the resource checks, the latencies and the charts; printed, and written as
report.json beside the charts and the launcher log."""

from __future__ import annotations

import json
import shutil
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any

from chaos import report
from chaos.dbstate import Check
from chaos.soak_load import Finished
from chaos.soak_sampler import Sample


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "n": len(values),
        "p50": round(statistics.median(values), 2),
        "p95": round(at(0.95), 2),
        "p99": round(at(0.99), 2),
    }


def latencies(finished: list[Finished], warmup_s: float, end_s: float) -> dict[str, Any]:
    """Session durations of sessions that completed, by kind, and over the first and last
    third after the warm-up (the same run's ratio says whether latency crept up)."""
    done = [f for f in finished if f.phase == "COMPLETED"]
    by_kind = {
        kind: percentiles([f.seconds for f in done if f.kind == kind])
        for kind in sorted({f.kind for f in done})
    }
    span = (end_s - warmup_s) / 3
    first = [f.seconds for f in done if warmup_s <= f.at_s < warmup_s + span]
    last = [f.seconds for f in done if end_s - span <= f.at_s <= end_s]
    thirds: dict[str, Any] = {"first_third": percentiles(first), "last_third": percentiles(last)}
    if first and last:
        thirds["p50_ratio_last_over_first"] = round(statistics.median(last) / statistics.median(first), 2)
    return {"by_kind": by_kind, **thirds}


def build(
    chaos_result: dict[str, Any],
    config: dict[str, Any],
    samples: list[Sample],
    finished: list[Finished],
    resources: list[Check],
    extra: dict[str, Any],
) -> dict[str, Any]:
    checks_ok = all(c["status"] != "FAIL" for c in chaos_result["invariants"])
    resources_ok = all(c.status != "FAIL" for c in resources)
    return {
        "passed": bool(chaos_result["passed"] and checks_ok and resources_ok),
        "config": config,
        "latency_s": latencies(finished, config["warmup_s"], extra["load_end_s"]),
        "resource_checks": [asdict(c) for c in resources],
        **extra,
        "chaos": chaos_result,
        "samples": [s.as_dict() for s in samples],
    }


def show(result: dict[str, Any]) -> None:
    report.show(result["chaos"])
    print("\n================ soak ================")
    config = result["config"]
    print(
        f"{config['minutes']:g} min, a kill every {config['kill_every_s']:g} s, "
        f"warm-up {config['warmup_s']:g} s, "
        f"{config['rate']:g} sessions/s offered; {result['sessions_started']} started, "
        f"{result['compactions']} compactions; cluster {result['cluster_cores']} cores, machine busy "
        f"{result['machine_busy_cores']} of {result['machine_cores']}"
    )
    lat = result["latency_s"]
    print(f"session latency (s): first third {lat['first_third']}, last third {lat['last_third']}")
    for kind, figures in lat["by_kind"].items():
        print(f"  {kind:<9} {figures}")
    if result["sampler_errors"]:
        print(f"sampler errors: {result['sampler_errors']}")
    print("resource checks:")
    for c in result["resource_checks"]:
        counts = ", ".join(f"{k}={v}" for k, v in c["counts"].items())
        print(f"  [{c['status']}] {c['number']}. {c['name']}  ({counts})")
        for what in c["offending"]:
            print(f"        - {what}")
    print(f"SOAK: {'PASS' if result['passed'] else 'FAIL'}  (report {result.get('report_path')})")


def write(result: dict[str, Any], out: Path, log_path: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    if log_path.exists():
        shutil.copyfile(log_path, out / "launcher.log")
    path = out / "report.json"
    result["report_path"] = str(path)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path
