"""What the run actually exercised: recovery paths seen in the services' structured logs and
notable events in the store (so a green run can be told apart from a run the kills missed)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from chaos.dbstate import DbState, is_interrupted

LOG_KEYS = (
    "execution_run_start",
    "session_loop_start",
    "parent_recovery_start",
    "parent_recovery_wait",
    "subagent_recovery_start",
    "subagent_result_delivered",
    "session_recovery_scan",
    "subagent_recovery_scan",
    "step_retry",
    "lease_lost",
    "lease_renew_failed",
    "execution_interrupted",
    "session_loop_interrupted",
    "run_cancelled",
)
NOTABLE_EVENTS = ("MessagesDiscarded", "QueuedMessagesDropped", "ToolCallStarted", "ExecutionFinished")


def summarise(db: DbState, log_lines: list[str]) -> dict[str, Any]:
    logs: Counter[str] = Counter()
    key = re.compile(r"\b(" + "|".join(LOG_KEYS) + r")\b")
    for line in log_lines:
        match = key.search(line)
        if match:
            logs[match.group(1)] += 1
    types = Counter(e["type"] for e in db.events)
    statuses = Counter(e["payload"]["status"] for e in db.events if e["type"] == "ExecutionStatusChanged")
    runs_per_execution = Counter(
        m.group(1) for line in log_lines if (m := re.search(r"execution_run_start execution=(\S+)", line))
    )
    return {
        "log_counts": dict(sorted(logs.items())),
        "event_counts": {t: types.get(t, 0) for t in NOTABLE_EVENTS},
        "execution_status_notices": dict(sorted(statuses.items())),
        "executions_run_more_than_once": sum(1 for n in runs_per_execution.values() if n > 1),
        "interrupted_tool_results": sum(
            is_interrupted(m["content"]) for ms in db.messages.values() for m in ms if m["role"] == "TOOL"
        ),
        "discarded_messages": sum(m["discarded"] for ms in db.messages.values() for m in ms),
    }
