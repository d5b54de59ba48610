"""`python -m bench.commands`: what a `run_command` costs (ADR 0037), no cluster needed.

The tool's own function, as the loop calls it: a sandboxed `true` (bubblewrap start, the
limits, `bash -c`, the output pipe and its log file) repeated, its p50 and p99; the same
unsandboxed (`MUSTER_UNSAFE_COMMANDS` path) for the sandbox's share; and a command printing
1 MiB (the output read, logged and cut to its head and tail).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from muster_agent.tools import commands
from muster_agent.tools.commands import CommandPolicy, run_command


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _times(workspace: Path, command: str, runs: int, policy: CommandPolicy) -> list[float]:
    took: list[float] = []
    for i in range(runs):
        started = time.perf_counter()
        result = await run_command(
            workspace, command, 60, policy=policy, log_path=workspace.parent / f"{i}.log"
        )
        took.append((time.perf_counter() - started) * 1000)
        assert result["exit_code"] == 0, result
    return took


async def _plain(runs: int) -> list[float]:
    """The floor: `bash -c true` as a bare asyncio subprocess, no sandbox, limits or log."""
    took: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec("bash", "-c", "true", stdout=asyncio.subprocess.PIPE)
        await proc.communicate()
        took.append((time.perf_counter() - started) * 1000)
    return took


def _summary(took: list[float]) -> dict[str, Any]:
    return {
        "runs": len(took),
        "p50_ms": round(statistics.median(took), 2),
        "p99_ms": round(_percentile(took, 0.99), 2),
    }


async def main(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="muster-bench-commands-") as tmp:
        workspace = Path(tmp, "workspace")
        await asyncio.to_thread(workspace.mkdir)
        sandboxed = CommandPolicy()
        problem = await commands.sandbox_problem(sandboxed.readonly_paths)
        if problem is not None:
            raise SystemExit(f"no sandbox here: {problem}")
        await _times(workspace, "true", 3, sandboxed)  # warm-up (the sandbox probe, caches)
        report = {
            "sandboxed_true": _summary(await _times(workspace, "true", runs, sandboxed)),
            "plain_bash_true": _summary(await _plain(runs)),
            "sandboxed_1mib_output": _summary(
                await _times(workspace, "yes | head -c 1048576", max(10, runs // 10), sandboxed)
            ),
        }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.runs)), indent=2))
