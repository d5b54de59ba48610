"""The short soak inside `make test` (`make soak` is the long one, docs/soak.md): the chaos
workload released at a steady rate for three minutes on a private cluster, a service or the
broker SIGKILLed every 45 s (three kills), the resources sampled every 3 s; then the chaos
invariants over every session and the resource checks (RSS, fds, database connections,
consumer lag back to 0 after each kill, database growth). The driver runs as
`python -m chaos.soak`, as `make soak` runs it; its report and charts go to a temporary
directory, kept (and named in the failure) when a check fails.

Re-run another seed with SOAK_TEST_SEED=N.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT
from .test_chaos import stop

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(480)]

SEED = int(os.environ.get("SOAK_TEST_SEED", "1"))
MINUTES = 3.0  # the short soak; kills at 45, 90 and 135 s
KILL_EVERY_S = 45
RUN_TIMEOUT_S = 450.0  # cluster start + load + quiescence + checks; a run takes ~3.8 min
TAIL_LINES = 60


def test_short_soak_passes_every_check(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    argv = [
        sys.executable, "-m", "chaos.soak", "--minutes", str(MINUTES), "--kill-every", str(KILL_EVERY_S),
        "--sample-every", "3", "--rate", "0.5", "--seed", str(SEED), "--out", str(out), "--quiesce-timeout", "60",
    ]
    started = time.monotonic()
    log = tmp_path / "soak.out"
    with log.open("wb") as output:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
        )
        try:
            code: int | None = proc.wait(RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            stop(proc)
            code = None
    lines = log.read_text(errors="replace").splitlines()
    context = (
        f"soak seed {SEED}, exit code {code}, {time.monotonic() - started:.0f}s; report and charts in {out}\n"
        f"re-run: {' '.join(argv)}\n--- last {TAIL_LINES} lines ---\n" + "\n".join(lines[-TAIL_LINES:])
    )
    assert code is not None, f"the soak did not finish within {RUN_TIMEOUT_S:g}s\n{context}"
    assert code != 2, f"the soak's cluster did not start\n{context}"
    report = json.loads((out / "report.json").read_text())
    kills = [k for k in report["chaos"]["kills"] if k["error"] is None]
    assert len(kills) >= 3, context
    failed = [
        f"{c['number']}. {c['name']}: {c['offending']}"
        for c in report["chaos"]["invariants"] + report["resource_checks"]
        if c["status"] == "FAIL"
    ]
    assert not failed, "\n".join(failed) + "\n" + context
    assert report["passed"] and code == 0, context
    for chart in report["charts"]:
        assert (out / chart).stat().st_size > 0
    assert report["sessions_started"] >= 40 and report["compactions"]["recorded"] >= 1, context
