"""Shared by the hostile-input fuzzers (test_fuzz_rest.py, test_fuzz_ws.py).

The budget: `make test` runs a bounded one; `make fuzz` sets MUSTER_FUZZ=full for at least
10,000 requests and 10,000 frames. Each fuzzer counts what it sent and collects violations
instead of stopping at the first, so a run reports every kind of failure it met.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

# DESIGN §7: the only codes a rejection may carry.
ERROR_CODES = frozenset({"bad_request", "unknown_type", "too_large", "unauthorized", "not_found", "conflict", "internal"})
HTTP_STATUS = {"bad_request": 400, "unknown_type": 400, "too_large": 413, "unauthorized": 401,
               "not_found": 404, "conflict": 409, "internal": 500}
SERVICES = ("gateway", "harness", "subagent-worker", "recovery", "broker", "postgres")
FULL = os.environ.get("MUSTER_FUZZ") == "full"


def budget(bounded: int, full: int) -> int:
    """Examples to try: `full` under `make fuzz`, else `bounded` (or MUSTER_FUZZ_EXAMPLES)."""
    if FULL:
        return full
    return int(os.environ.get("MUSTER_FUZZ_EXAMPLES", bounded))


SUMMARIES: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in SUMMARIES:
        terminalreporter.write_line(line)


@dataclass
class Tally:
    """What one fuzzer tried and every violation it saw (first few kept per kind)."""

    name: str
    unit: str
    tried: int = 0
    violations: dict[str, list[str]] = field(default_factory=dict)

    def violation(self, kind: str, detail: str) -> None:
        kept = self.violations.setdefault(kind, [])
        if len(kept) < 5:
            kept.append(detail[:500])
        else:
            kept.append("")

    @property
    def violation_count(self) -> int:
        return sum(len(v) for v in self.violations.values())

    def record(self) -> None:
        """Keep this run's summary for the session's closing lines (`make test` shows no
        test output, but these counts belong in its report)."""
        SUMMARIES.append(self.summary())

    def summary(self) -> str:
        return f"fuzz: {self.name}: {self.tried} {self.unit} tried, {self.violation_count} violations"

    def report(self) -> str:
        lines = [self.summary()]
        for kind, details in self.violations.items():
            lines.append(f"  {kind}: {len(details)}")
            lines.extend(f"    {d}" for d in details if d)
        return "\n".join(lines)


def check_error_body(body: Any, where: str, tally: Tally) -> str | None:
    """The §7 error shape `{"code", "message"}`; returns the code (None if malformed)."""
    if not isinstance(body, dict) or not isinstance(body.get("code"), str) or not isinstance(body.get("message"), str):
        tally.violation("malformed error", f"{where}: {body!r}")
        return None
    code: str = body["code"]
    if code not in ERROR_CODES:
        tally.violation("error code outside §7", f"{where}: {code}")
    if code == "internal":
        tally.violation("internal error", f"{where}: {body['message']}")
    return code


@pytest.fixture
def stable_services(cluster) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Asserts that no supervised process exited while the test ran (a crash, an OOM, a
    restart by the supervisor): same PIDs afterwards, no `exited with` line logged."""
    before = _pids(cluster)
    mark = cluster.mark()
    yield
    after = _pids(cluster)
    exits = [line for line in cluster.lines[mark:] if re.match(r"^supervisor: \S+ exited with", line)]
    assert before == after and not exits, f"services restarted: {before} -> {after}; {exits}"


def _pids(cluster) -> dict[str, int | None]:  # type: ignore[no-untyped-def]
    pids: dict[str, int | None] = {}
    for name in SERVICES:
        try:
            pids[name] = cluster.service_pid(name)
        except LookupError:
            pids[name] = None  # external PostgreSQL / Kafka (DATABASE_URL, containers)
    return pids
