"""The groups of session phases and execution statuses that decisions test, defined once.

The names themselves are the public contract's (`muster_contracts.events.Phase`,
`ExecutionStatus`); this module only says which of them count as "running", "waiting"…
Tuples, so a group can also be passed to SQL as an array parameter.
"""

from __future__ import annotations

from typing import Final

from muster_contracts.events import ExecutionStatus, Phase

# An execution's run is open (a worker or a takeover still owes its result).
OPEN_STATUSES: Final[tuple[ExecutionStatus, ...]] = ("RUNNING", "RECOVERING")
# An execution's run has ended: its result waits for the barrier (delivered or suppressed).
TERMINAL_STATUSES: Final[tuple[ExecutionStatus, ...]] = ("COMPLETED", "FAILED", "CANCELLED")
# A session's turn runs (recovery's RESUMING included: clients see it as RUNNING).
RUNNING_PHASES: Final[tuple[Phase, ...]] = ("RUNNING", "RESUMING")
# A session's turn waits for a person (approval, answer) or for its LOCAL client: no
# process holds it; the answer, recorded by the gateway, makes it RUNNING again.
WAITING_PHASES: Final[tuple[Phase, ...]] = ("WAITING_APPROVAL", "WAITING_INPUT", "WAITING_CLIENT")
# A cancel ends these: the turn runs or waits.
CANCELLABLE_PHASES: Final[tuple[Phase, ...]] = (*RUNNING_PHASES, *WAITING_PHASES)
# A turn is under way in some form: new messages queue behind it, compaction must wait.
ACTIVE_PHASES: Final[tuple[Phase, ...]] = (*CANCELLABLE_PHASES, "CANCELLING")
# A side task in these cannot be promoted: its turn runs, waits (for a person or for the
# LOCAL client running its tool) or is being cancelled.
BUSY_PHASES: Final[tuple[Phase, ...]] = ACTIVE_PHASES
# A subagent child the worker's claim leaves as it is (not revived to RUNNING): its turn is
# under way, or it was cancelled (a cancelled child stays so).
NOT_REVIVED_PHASES: Final[tuple[Phase, ...]] = (*ACTIVE_PHASES, "CANCELLED")
# The phase each kind of wait holds its session in.
WAIT_PHASE: Final[dict[str, Phase]] = {
    "approval": "WAITING_APPROVAL",
    "question": "WAITING_INPUT",
    "tool": "WAITING_CLIENT",
}
