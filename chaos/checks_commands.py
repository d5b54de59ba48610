"""Invariant 5 for commands, in the `command` sessions (see `chaos.commands`): a command
interrupted by a crash is never started again (its `.starts` file holds at most one line)
and its call gets an "interrupted" result with the output it printed until then (so does a
command a cancel kills, unless the cancel dropped its result on the way); a
completed command's result is recorded once, and the files it made are attributed to its
call exactly once; no command's process outlives the run.

Where the commands' logs are kept (beside the workspaces) is counted too: each goes once its
result is recorded, so only a crash between the two may leave one behind."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import psutil

from chaos import commands
from chaos.dbstate import Check, DbState
from chaos.outcome import Outcome


def check_command_files(check: Check, db: DbState, outcomes: list[Outcome], workspaces: Path | None) -> None:
    roots = [out.session_id for out in outcomes if out.kind == "command" and out.session_id is not None]
    if not roots or workspaces is None:
        return
    counts: Counter[str] = Counter()
    for root in roots:
        for sid, session in db.sessions.items():
            if session["root_session_id"] == root:
                _check_session(check, db, sid, workspaces / root, counts)
        # The sandbox is given the workspace by path: a process naming it is the tree's.
        for pid in _alive(str(workspaces / root)):
            check.fail(f"process {pid} of session {root}'s commands outlived it")
    left = [p for p in (workspaces.parent / "commands").rglob("*") if p.is_file()]
    counts["command_logs_left"] = len(left)
    check.counts.update(counts)


def _check_session(check: Check, db: DbState, sid: str, workspace: Path, counts: Counter[str]) -> None:
    live = [m for m in db.messages.get(sid, []) if not m["discarded"]]
    answers: dict[str, list[str]] = defaultdict(list)
    for m in live:
        if m["role"] == "TOOL":
            answers[str(m["tool_call_id"])].append(m["content"])
    made: dict[tuple[str, str], list[str]] = defaultdict(list)
    for e in db.stream(sid):
        if e["type"] == "FileChanged":
            made[(e["payload"]["tool_call_id"], e["payload"]["path"])].append(e["payload"]["change_type"])
    for m in live:
        for c in m.get("tool_calls") or []:
            if c["name"] != "run_command":
                continue
            args = c.get("arguments") or {}
            args = json.loads(args) if isinstance(args, str) else args
            found = commands.NAME.search(str(args.get("command")))
            if found is None:
                continue
            index, name = int(found.group(1)), found.group(2)
            where = f"session {sid} command {name} (call {c['id']})"
            counts["command_calls"] += 1
            results = answers.get(str(c["id"]), [])
            cancelled = db.sessions[sid]["phase"] == "CANCELLED"
            # A cancel that meets a result on its way drops it: the call stays open.
            if len(results) > 1 or not (results or cancelled):
                check.fail(f"{where}: {len(results)} TOOL results, expected 1")
                continue
            changes = {
                path: made.get((str(c["id"]), path), [])
                for path in (commands.starts_path(index, name), commands.made_path(index, name))
            }
            body = json.loads(results[0]) if results else {"interrupted": True, "unanswered": True}
            counts["commands_unanswered_after_cancel"] += not results
            _check_call(check, where, body, workspace, changes, name, counts)


def _check_call(
    check: Check,
    where: str,
    body: dict[str, Any],
    workspace: Path,
    changes: dict[str, list[str]],
    name: str,
    counts: Counter[str],
) -> None:
    starts_file, made_file = list(changes)
    starts = _lines(workspace / starts_file)
    done = commands.DONE.format(name=name)
    if starts > 1:
        check.fail(f"{where}: started {starts} times")
    if body.get("success") is True:
        counts["commands_completed"] += 1
        if body.get("exit_code") != 0 or done not in str(body.get("output")) or starts != 1:
            check.fail(f"{where}: completed with {body} but started {starts} times")
        if changes != {starts_file: ["CREATED"], made_file: ["CREATED"]}:
            check.fail(f"{where}: completed, its files attributed as {changes}")
        return
    if body.get("interrupted") is not True:
        check.fail(f"{where}: neither completed nor interrupted: {body}")
        return
    counts["commands_interrupted"] += 1
    cause = "cancel" if "turn ended" in str(body.get("error")) or body.get("unanswered") else "crash"
    counts[f"commands_interrupted_by_{cause}"] += 1
    counts["commands_interrupted_after_start"] += starts
    output = str(body.get("output") or "")
    counts["commands_interrupted_with_output"] += bool(output)
    if not _prefix(output, done):
        check.fail(f"{where}: interrupted with an output no run prints: {output[-200:]!r}")
    if starts == 0 and output:
        check.fail(f"{where}: never started, yet its output is {output[:80]!r}")
    expected = {starts_file: ["CREATED"] if starts else [], made_file: []}
    if (workspace / made_file).exists():
        expected[made_file] = ["CREATED"]
    if changes != expected:
        check.fail(f"{where}: interrupted, its files attributed as {changes}, expected {expected}")


def _prefix(output: str, done: str) -> bool:
    """What a run prints, cut anywhere: ticks 1, 2, ... then the done line."""
    lines = output.split("\n")
    if lines[-1] == "":
        lines.pop()
    for k, line in enumerate(lines, start=1):
        last = k == len(lines)
        tick = commands.TICK.fullmatch(line)
        if tick is not None and int(tick.group(1)) == k:
            continue
        if last and (line == done or done.startswith(line) or f"tick {k}".startswith(line)):
            continue
        return False
    return True


def _lines(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


def _alive(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        try:
            if proc.info["cwd"] == marker or any(marker in part for part in proc.info["cmdline"] or ()):
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
