"""The seeded workload: which sessions run, as scripted-model trees (DESIGN §7).

Kinds: `delegate` (1-3 parallel children that write a file then answer, some slow, some
failing, sometimes a second delegation round or a local tool beside the delegations),
`followup` (a delegation, then a second turn with `delegate_followup` to that child),
`cancel` (slow children, the parent cancelled mid-run), `plain` (one agent, file tools),
`editor` (one child whose long round of edits a kill often cuts, see `chaos.editor`),
`side` (a plain turn, then a side task of it and a side task of that, each forked,
summarised or fresh, each writing into the tree's workspace), `approval` (an `ask`
session whose write and delegation, and its child's write, each wait for an approval the
driver gives), `local` (a LOCAL session and its child, whose file tools run on the user's
device, which drops its socket at random), `command` (`run_command` in a session and in its
child, a short command and a long one each, see `chaos.commands`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from muster_client import call, script

from chaos import commands, editor

USERS = ("alice", "bob")


@dataclass
class SessionPlan:
    index: int
    kind: str
    user: str
    title: str
    first: str  # content of the first turn
    expect: str  # the phase the session should end in
    start_after_kill: int  # launched once this many kill steps are done
    jitter_s: float
    followup_task: str | None = None  # the follow-up child's task (kind followup)
    cancel_after_s: float | None = None  # after the children appear (kind cancel), or the start
    children: int = 0
    notes: list[str] = field(default_factory=list)
    side_tasks: list[tuple[str, str]] = field(default_factory=list)  # (contextMode, content), a chain
    settings: dict[str, str] = field(default_factory=dict)  # permissionLevel / executionMode


def child_task(rng: random.Random, name: str, fail: bool) -> str:
    first: dict[str, Any] = {"tool_calls": [call("write_file", path=name, content=f"written by {name}\n")]}
    if rng.random() < 0.6:
        first["delay_ms"] = rng.randint(200, 2000)
    if fail:
        return script(first, {"fail": f"chaos: {name} failed on purpose"})
    last: dict[str, Any] = {"content": f"wrote {name}"}
    if rng.random() < 0.3:
        last["delay_ms"] = rng.randint(200, 2000)
    return script(first, last)


def _delegate(rng: random.Random, index: int, plan_notes: list[str]) -> tuple[str, int]:
    count = rng.randint(1, 3)
    calls = []
    for c in range(count):
        fail = rng.random() < 0.15
        if fail:
            plan_notes.append(f"child {c} fails")
        calls.append(call("delegate", agent_type="coder", task=child_task(rng, f"s{index}/c{c}.txt", fail)))
    if rng.random() < 0.3:
        calls.insert(0, call("write_file", path=f"s{index}/parent.txt", content="parent side\n"))
        plan_notes.append("local tool beside delegations")
    steps: list[dict[str, Any]] = [{"tool_calls": calls, "delay_ms": rng.choice([0, rng.randint(200, 1500)])}]
    if rng.random() < 0.3:
        steps.append(
            {
                "tool_calls": [
                    call("delegate", agent_type="coder", task=child_task(rng, f"s{index}/r2.txt", False))
                ]
            }
        )
        plan_notes.append("second delegation round")
        count += 1
    steps.append({"content": f"parent {index} done"})
    return script(*steps), count


def _plain(rng: random.Random, index: int) -> tuple[str, str]:
    path = f"p{index}/notes.txt"
    steps: list[dict[str, Any]] = [
        {
            "tool_calls": [call("write_file", path=path, content="alpha\nbeta\n")],
            "delay_ms": rng.randint(0, 1500),
        },
        {
            "tool_calls": [
                call("read_file", path=path),
                call("edit_file", path=path, old_string="beta", new_string="gamma"),
            ]
        },
        {
            "tool_calls": [
                call("write_file", path=f"p{index}/tmp.txt", content="x\n"),
                call("list_files", path=f"p{index}"),
            ],
            "delay_ms": rng.randint(0, 1500),
        },
        {"tool_calls": [call("delete_file", path=f"p{index}/tmp.txt")]},
    ]
    if rng.random() < 0.12:
        steps.append({"fail": f"chaos: plain session {index} fails on purpose"})
        return script(*steps), "FAILED"
    steps.append({"content": f"plain {index} done"})
    return script(*steps), "COMPLETED"


def _side(rng: random.Random, index: int) -> tuple[str, list[tuple[str, str]]]:
    """A main turn and a chain of two side tasks; the first is always a fork (the copy the
    rebuild check must reproduce), the second any mode."""
    main = script(
        {"tool_calls": [call("write_file", path=f"s{index}/main.txt", content="main\n")]},
        {"content": f"side {index} main done"},
    )
    chain = []
    for depth, mode in enumerate(("fork", rng.choice(("fork", "summary", "none"))), start=1):
        content = script(
            {
                "tool_calls": [
                    call("write_file", path=f"s{index}/side{depth}.txt", content=f"side {depth}\n")
                ],
                "delay_ms": rng.randint(0, 1500),
            },
            {"content": f"side {index}.{depth} done"},
        )
        chain.append((mode, content))
    return main, chain


def _waiting(rng: random.Random, index: int, kind: str) -> str:
    """An `approval` or `local` tree: the session's own file tools, then a child's."""
    child = script(
        {"tool_calls": [call("write_file", path=f"{kind[0]}{index}/child.txt", content="child\n")]},
        {"content": f"{kind} child {index} done"},
    )
    return script(
        {
            "tool_calls": [call("write_file", path=f"{kind[0]}{index}/own.txt", content="alpha\n")],
            "delay_ms": rng.randint(0, 1000),
        },
        {
            "tool_calls": [
                call("edit_file", path=f"{kind[0]}{index}/own.txt", old_string="alpha", new_string="beta")
            ]
        },
        {"tool_calls": [call("delegate", agent_type="coder", task=child)]},
        {"tool_calls": [call("read_file", path=f"{kind[0]}{index}/child.txt")]},
        {"content": f"{kind} {index} done"},
    )


def plan_workload(seed: int, sessions: int, kill_steps: int) -> list[SessionPlan]:
    rng = random.Random(f"workload-{seed}")
    cancels = 1 if sessions < 10 else rng.randint(1, 2)
    followups = max(1, round(sessions * rng.uniform(0.12, 0.2)))
    plains = max(1, round(sessions * rng.uniform(0.2, 0.3)))
    editors = max(1, round(sessions * rng.uniform(0.1, 0.15)))
    sides = max(1, round(sessions * rng.uniform(0.1, 0.15)))
    kinds = ["cancel"] * cancels + ["followup"] * followups + ["plain"] * plains + ["editor"] * editors
    kinds += ["side"] * sides
    # First, so a small run keeps them: each kind of wait is tried in every run.
    kinds = ["approval"] * max(1, round(sessions * 0.1)) + ["local"] * max(1, round(sessions * 0.1)) + kinds
    kinds = ["command"] * max(1, round(sessions * rng.uniform(0.15, 0.2))) + kinds
    kinds = kinds[:sessions]
    kinds += ["delegate"] * (sessions - len(kinds))
    rng.shuffle(kinds)
    plans = []
    for index, kind in enumerate(kinds):
        user = rng.choice(USERS)
        start = min(kill_steps - 1, index * kill_steps // max(sessions, 1)) if kill_steps else 0
        plan = SessionPlan(
            index,
            kind,
            user,
            f"chaos-{seed}-{index}",
            "",
            "COMPLETED",
            max(start, 0),
            round(rng.uniform(0, 2.0), 2),
        )
        if kind == "delegate":
            plan.first, plan.children = _delegate(rng, index, plan.notes)
        elif kind == "followup":
            plan.first = script(
                {
                    "tool_calls": [
                        call("delegate", agent_type="coder", task=child_task(rng, f"f{index}/a.txt", False))
                    ]
                },
                {"content": f"followup {index} first turn"},
            )
            plan.followup_task = script(
                {
                    "tool_calls": [
                        call("edit_file", path=f"f{index}/a.txt", old_string="written", new_string="edited")
                    ],
                    "delay_ms": rng.randint(0, 1500),
                },
                {"content": f"followup {index} edited"},
            )
            plan.children = 1
        elif kind == "cancel":
            slow = [
                call(
                    "delegate",
                    agent_type="coder",
                    task=script({"content": "slow", "delay_ms": rng.randint(8000, 20000)}),
                )
                for _ in range(2)
            ]
            plan.first = script({"tool_calls": slow}, {"content": "must never be said"})
            plan.expect, plan.children = "CANCELLED", 2
            plan.cancel_after_s = round(rng.uniform(0.3, 3.0), 2)
        elif kind == "command":
            plan.first, plan.children = commands.parent_script(rng, index), 1
            if rng.random() < 0.3:  # cancelled while its commands run
                plan.expect, plan.cancel_after_s = "CANCELLED", round(rng.uniform(0.2, 4.0), 2)
        elif kind == "editor":
            plan.first, plan.children = editor.parent_script(rng, index), 1
        elif kind == "side":
            plan.first, plan.side_tasks = _side(rng, index)
        elif kind in ("approval", "local"):
            plan.first, plan.children = _waiting(rng, index, kind), 1
            plan.settings = {"permissionLevel": "ask"} if kind == "approval" else {"executionMode": "LOCAL"}
        else:
            plan.first, plan.expect = _plain(rng, index)
        plans.append(plan)
    return plans


def followup_content(plan: SessionPlan, child_session_id: str) -> str:
    assert plan.followup_task is not None
    return script(
        {
            "tool_calls": [
                call("delegate_followup", child_session_id=child_session_id, task=plan.followup_task)
            ]
        },
        {"content": f"followup {plan.index} done"},
    )
