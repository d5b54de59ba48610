"""The run's report: printed, and written as JSON (with the launcher log) under chaos-results/."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from chaos.dbstate import Check
from chaos.outcome import Outcome
from chaos.schedule import KillStep

RESULTS = Path(__file__).resolve().parents[1] / "chaos-results"


def build(
    seed: int,
    args: dict[str, Any],
    steps: list[KillStep],
    outcomes: list[Outcome],
    checks: list[Check],
    extra: dict[str, Any],
    seconds: float,
    unexpected_exits: list[str],
) -> dict[str, Any]:
    by_outcome = Counter(f"{o.kind}:{o.phase or 'none'}" for o in outcomes)
    unexpected = [
        f"{o.index} {o.kind} {o.session_id}: {o.phase} (expected {o.expect}) {o.error or ''}".rstrip()
        for o in outcomes
        if o.phase != o.expect
    ]
    return {
        "seed": seed,
        "args": args,
        "duration_s": round(seconds, 1),
        "kills": [s.as_dict() for s in steps],
        "kill_count": sum(len(s.targets) for s in steps),
        "sessions_by_outcome": dict(sorted(by_outcome.items())),
        # New turns refused as `overloaded` and asked again after the hint (ADR 0041).
        "shed_refusals": sum(o.shed for o in outcomes),
        "unexpected_outcomes": unexpected,
        "quiescence": extra["quiescence"],
        "exercised": extra["exercised"],
        "unexpected_exits": unexpected_exits,
        "invariants": [asdict(c) for c in checks],
        "passed": all(c.status != "FAIL" for c in checks if c.number.isdigit()),
        "sessions": [asdict(o) for o in outcomes],
    }


def show(report: dict[str, Any]) -> None:
    print("\n================ chaos report ================")
    print(f"seed {report['seed']}  args {report['args']}  duration {report['duration_s']}s")
    print(f"kills ({report['kill_count']} processes in {len(report['kills'])} steps):")
    for k in report["kills"]:
        err = f"  ERROR {k['error'].splitlines()[0]}" if k["error"] else ""
        print(
            f"  #{k['index']:<2} t={k['at_s']}s  {'+'.join(k['targets']):<28} "
            f"in flight {k['inflight']}, pids {k['old_pids']} -> {k['new_pids']} ({k['restart_s']}s){err}"
        )
    print("sessions by outcome:", ", ".join(f"{k}={v}" for k, v in report["sessions_by_outcome"].items()))
    if report["shed_refusals"]:
        print(f"new turns refused as overloaded, then asked again: {report['shed_refusals']}")
    for line in report["unexpected_outcomes"]:
        print("  unexpected:", line)
    for line in report["unexpected_exits"]:
        print("  not killed by us:", line)
    q = report["quiescence"]
    print(
        f"quiescence: {'reached' if q.get('reached') else 'NOT reached'} after {q.get('waited_s')}s; "
        f"left: {q.get('left')}"
    )
    for what in q.get("details", []):
        print(f"  still open: {what}")
    ex = report["exercised"]
    print(f"exercised: logs {ex['log_counts']}")
    print(
        f"           events {ex['event_counts']}, execution notices {ex['execution_status_notices']}, "
        f"executions run more than once {ex['executions_run_more_than_once']}, "
        f"interrupted tool results {ex['interrupted_tool_results']}, discarded {ex['discarded_messages']}"
    )
    print("invariants:")
    for c in report["invariants"]:
        counts = ", ".join(f"{k}={v}" for k, v in c["counts"].items())
        note = f"  - {c['note']}" if c["note"] else ""
        print(f"  [{c['status']}] {c['number']}. {c['name']}  ({counts}){note}")
        for what in c["offending"]:
            print(f"        - {what}")
    extras = [
        c["number"] for c in report["invariants"] if not c["number"].isdigit() and c["status"] == "FAIL"
    ]
    verdict = "PASS" if report["passed"] else "FAIL"
    print(f"RESULT: invariants {verdict}" + (f"; extra checks FAILED: {', '.join(extras)}" if extras else ""))


def write(report: dict[str, Any], log_path: Path) -> Path:
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"chaos-seed{report['seed']}-{stamp}.json"
    if log_path.exists():
        log_copy = path.with_suffix(".log")
        shutil.copyfile(log_path, log_copy)
        report["launcher_log"] = str(log_copy)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return path
