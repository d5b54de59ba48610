"""The `command` workload kind: `run_command` in a root session (the harness runs it) and in
its `coder` child (a subagent worker runs it), so kills land in the middle of commands
(DESIGN §6 invariant 5, the crash rule of ADR 0037).

Each command's first act appends a line to its own `.starts` file in the workspace: the
number of lines is the number of times it started. A short command then writes its own
file and prints; a long one prints a tick every 100 ms for seconds first. See
`chaos.checks_commands` for what must hold afterwards.
"""

from __future__ import annotations

import random
import re
from typing import Any

from muster_client import call, script

TAG = "chaos-cmd"  # in every command's line, to tell them apart in `ps`
DONE = "done {name}"
NAME = re.compile(r"k(\d+)/(\w+)\.starts")
TICK = re.compile(r"tick (\d+)")


def directory(index: int) -> str:
    return f"k{index}"


def starts_path(index: int, name: str) -> str:
    return f"{directory(index)}/{name}.starts"


def made_path(index: int, name: str) -> str:
    return f"{directory(index)}/{name}.txt"


def command(index: int, name: str, ticks: int) -> str:
    """Started (one line), `ticks` ticks 100 ms apart, its file written, done."""
    d = directory(index)
    lines = [f": {TAG}", f"mkdir -p {d}", f"echo started >> {starts_path(index, name)}"]
    if ticks:
        lines.append(f"for t in $(seq 1 {ticks}); do echo tick $t; sleep 0.1; done")
    lines += [f"echo made by {name} > {made_path(index, name)}", f"echo {DONE.format(name=name)}"]
    return "; ".join(lines)


def _commands(rng: random.Random, index: int, prefix: str) -> list[dict[str, Any]]:
    """A short command, then a long one (6-12 s), each a step of its own."""
    short: dict[str, Any] = {"tool_calls": [call("run_command", command=command(index, f"{prefix}short", 0))]}
    ticks = rng.randint(60, 120)
    long_ = {"tool_calls": [call("run_command", command=command(index, f"{prefix}long", ticks))]}
    if rng.random() < 0.5:
        short["delay_ms"] = rng.randint(100, 1000)
    return [short, long_]


def parent_script(rng: random.Random, index: int) -> str:
    child = script(*_commands(rng, index, "child_"), {"content": f"command child {index} done"})
    return script(
        *_commands(rng, index, "main_"),
        {"tool_calls": [call("delegate", agent_type="coder", task=child)]},
        {"content": f"command {index} done"},
    )
