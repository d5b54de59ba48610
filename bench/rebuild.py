"""`muster rebuild --check` against the bench cluster's database: how fast the projections
replay from the event store (events/s), and whether the replay equals the live tables."""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import Any

from bench.cluster import ROOT, BenchCluster

SUMMARY = re.compile(r"events: (\d+) replayed in ([\d.]+)s \((\d+) events/s\)")


def parse(output: str, returncode: int) -> dict[str, Any]:
    found = SUMMARY.search(output)
    if found is None:
        return {"ok": False, "returncode": returncode, "output": output[-2000:]}
    return {
        "ok": True,
        "events": int(found.group(1)),
        "seconds": float(found.group(2)),
        "events_per_s": int(found.group(3)),
        "equal": returncode == 0,  # 1: a projection table differs from its replay
        "returncode": returncode,
    }


async def rebuild_check(cluster: BenchCluster, timeout_s: float = 300.0) -> dict[str, Any]:
    env = dict(os.environ, DATABASE_URL=cluster.ready["database"], MUSTER_DATA_DIR=str(cluster.data_dir))
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        str(ROOT / ".venv/bin/muster"),
        "rebuild",
        "--check",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return {"ok": False, "returncode": None, "output": f"timed out after {timeout_s:.0f} s"}
    result = parse(out.decode(errors="replace"), proc.returncode or 0)
    result["wall_s"] = round(time.perf_counter() - started, 2)
    return result


def line(result: dict[str, Any]) -> str:
    if not result.get("ok"):
        return f"rebuild --check: could not run (exit {result.get('returncode')}): {result.get('output', '')[-300:]}"
    verdict = "projections equal" if result["equal"] else "A PROJECTION DIFFERS from its replay"
    return (
        f"rebuild --check: {result['events']} events replayed in {result['seconds']:.2f} s -> "
        f"{result['events_per_s']} events/s ({verdict})"
    )
