"""A private `muster run` for the chaos driver, reusing the e2e suite's `Launcher`.

Restarts are awaited on supervisor lines logged *after* the kill, so a service killed twice
in a row never matches the restart line of its previous death.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

import psutil

from tests.e2e.conftest import TOKENS, Launcher, launcher_env

TARGETS = ("harness", "subagent-worker", "recovery", "gateway", "broker")
CHAOS_ENV = {"MUSTER_LEASE_TTL_S": "3", "MUSTER_RECONCILE_INTERVAL_S": "0.5"}


class ChaosCluster:
    def __init__(self, keep: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="muster-chaos-"))
        os.chmod(self.root, 0o755)  # PostgreSQL runs as another user when we are root
        self.data_dir = self.root / "data"
        self.log_path = self.root / "launcher.log"
        self.keep = keep
        env = launcher_env(
            self.data_dir, **CHAOS_ENV, MUSTER_LOG_LEVEL=os.environ.get("MUSTER_LOG_LEVEL", "INFO")
        )
        self.launcher = Launcher(self.data_dir, self.log_path, env)

    def start(self, timeout: float = 180.0) -> ChaosCluster:
        self.launcher.start(timeout)
        return self

    def close(self) -> None:
        launcher = self.launcher
        if launcher.proc is not None and launcher.proc.poll() is None:
            launcher.proc.send_signal(signal.SIGTERM)
            try:
                launcher.proc.wait(25)
            except Exception:
                launcher.kill_everything()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- what the driver uses --------------------------------------------------------
    @property
    def ws_url(self) -> str:
        return self.launcher.ws_url

    @property
    def gateway_url(self) -> str:
        return self.launcher.gateway_url

    @property
    def database_url(self) -> str:
        return self.launcher.database_url

    @property
    def tokens(self) -> dict[str, str]:
        return dict(TOKENS)

    def line_count(self) -> int:
        with self.launcher._cond:
            return len(self.launcher.lines)

    def kill(self, targets: list[str], wait_up_s: float = 60.0) -> dict[str, int]:
        """SIGKILL each target (at once); returns their old pids. A target the supervisor is
        restarting right now (it crashed on its own) is waited for first."""
        pids = {name: self._running_pid(name, wait_up_s) for name in targets}
        for pid in pids.values():
            os.kill(pid, signal.SIGKILL)
        return pids

    def _running_pid(self, name: str, wait_up_s: float) -> int:
        deadline = time.monotonic() + wait_up_s
        while True:
            try:
                return self.launcher.service_pid(name)
            except LookupError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def unexpected_exits(self) -> list[str]:
        """Supervisor lines of children that exited other than by our SIGKILL."""
        exited = re.compile(r"^supervisor: (\S+) (exited with (?!-9,)|failed to start)")
        return [line for line in self.supervisor_lines() if exited.match(line)]

    def wait_restarted(self, name: str, old_pid: int, after_line: int, timeout: float = 90.0) -> int:
        """The pid of `name`'s `restarted` line logged after line `after_line`. A second
        instance of a service is supervised as `name-2` (and so on), and `kill` may have
        picked any instance."""
        pattern = re.compile(rf"^supervisor: {re.escape(name)}(?:-\d+)? restarted \(pid (\d+)\)$")
        launcher = self.launcher
        deadline = time.monotonic() + timeout
        with launcher._cond:
            while time.monotonic() < deadline:
                for line in launcher.lines[after_line:]:
                    match = pattern.match(line)
                    if match and int(match.group(1)) != old_pid and psutil.pid_exists(int(match.group(1))):
                        return int(match.group(1))
                if launcher.proc is not None and launcher.proc.poll() is not None:
                    raise RuntimeError("muster run exited" + launcher.tail())
                launcher._cond.wait(0.2)
        raise TimeoutError(f"{name} (pid {old_pid}) not restarted in {timeout:g}s" + launcher.tail())

    def supervisor_lines(self) -> list[str]:
        with self.launcher._cond:
            return [line for line in self.launcher.lines if line.startswith("supervisor:")]

    def log_lines(self) -> list[str]:
        with self.launcher._cond:
            return list(self.launcher.lines)
