"""End-to-end fixtures: the whole system started with `muster run`, as a user would.

`cluster` (session scope) is one running launcher shared by all e2e tests; `launch` starts
private ones for tests that restart infrastructure or stop the launcher.
DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS from the environment are passed through, so the
suite can also run against an external PostgreSQL or Kafka.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

# Per-test clients (alice, bob, alice_rest, bob_rest) live in clients.py; importing them
# here registers them as fixtures for every e2e test module.
from .clients import alice, alice_rest, bob, bob_rest  # noqa: F401
from .fuzz_support import pytest_terminal_summary, stable_services  # noqa: F401
from .recovery_support import rclient, rcluster, rrest  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
MUSTER = ROOT / ".venv" / "bin" / "muster"
READY_KEYS = ("gateway", "kafka", "token", "database")
TOKENS = {"alice": "tok-alice", "bob": "tok-bob"}
STOP_WITHIN_S = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _argv_names(proc: psutil.Process) -> set[str]:
    try:
        return {os.path.basename(arg) for arg in proc.cmdline()[:2]}
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return set()


class Launcher:
    """A `muster run` subprocess, its output, and handles on its children."""

    def __init__(self, data_dir: Path, log_path: Path, env: dict[str, str]) -> None:
        self.data_dir, self.log_path = data_dir, log_path
        self.env = env
        self.lines: list[str] = []
        self.ready: dict[str, str] = {}
        self._cond = threading.Condition()
        self.proc: subprocess.Popen[str] | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> Launcher:
        self.lines.clear()
        self.ready.clear()
        # A session of its own, so a failed teardown can still kill the whole group;
        # stderr is merged so the log shows supervisor and service lines in order.
        self.proc = subprocess.Popen(
            [str(MUSTER), "run"],
            cwd=ROOT,
            env=self.env,
            text=True,
            bufsize=1,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        deadline = time.monotonic() + timeout
        with self._cond:
            while not all(key in self.ready for key in READY_KEYS):
                if self.proc.poll() is not None:
                    raise RuntimeError(f"muster run exited with {self.proc.returncode}" + self.tail())
                if time.monotonic() > deadline:
                    raise TimeoutError(f"muster run not ready in {timeout:g}s" + self.tail())
                self._cond.wait(0.2)
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with open(self.log_path, "a") as log:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                line = line.rstrip("\n")
                with self._cond:
                    self.lines.append(line)
                    key, sep, value = line.partition(": ")
                    if sep and key in READY_KEYS and not line.startswith("["):
                        self.ready[key] = value
                    self._cond.notify_all()

    def tail(self, count: int = 60) -> str:
        with self._cond:
            return f"\n--- last lines ({self.log_path}) ---\n" + "\n".join(self.lines[-count:])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def descendants(self) -> list[psutil.Process]:
        try:
            return list(psutil.Process(self.pid).children(recursive=True))
        except psutil.NoSuchProcess:
            return []

    def stop(self, sig: int = signal.SIGTERM, within: float = STOP_WITHIN_S) -> float:
        """Signal the launcher, assert it exits in time leaving nothing behind; returns
        how long it took."""
        assert self.proc is not None
        before = self.descendants()
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(within)
        except subprocess.TimeoutExpired:
            self.kill_everything()
            raise AssertionError(f"muster run still alive {within:g}s after {sig}" + self.tail()) from None
        took = time.monotonic() - started
        leftovers = self.leftovers(before, grace=within - took)
        assert not leftovers, f"left behind: {leftovers}" + self.tail()
        return took

    def leftovers(self, procs: list[psutil.Process], grace: float = 0.0) -> list[str]:
        """Processes of `procs` or of the launcher's group still alive after `grace`."""
        deadline = time.monotonic() + max(grace, 0.0)
        while True:
            alive = [p for p in procs if _alive(p)] + self._group_members()
            if not alive or time.monotonic() >= deadline:
                return [f"{p.pid} {' '.join(_safe_cmdline(p))[:120]}" for p in alive]
            time.sleep(0.1)

    def _group_members(self) -> list[psutil.Process]:
        members = []
        for proc in psutil.process_iter():
            try:
                if os.getpgid(proc.pid) == self.pid and _alive(proc):
                    members.append(proc)
            except (ProcessLookupError, psutil.NoSuchProcess):
                continue
        return members

    def kill_everything(self) -> None:
        procs = self.descendants()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait(10)
        for proc in procs:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass

    # -- what tests use --------------------------------------------------------------
    @property
    def gateway_url(self) -> str:
        return self.ready["gateway"]

    @property
    def ws_url(self) -> str:
        return self.gateway_url.replace("http://", "ws://", 1) + "/v1/ws"

    @property
    def kafka_bootstrap(self) -> str:
        return self.ready["kafka"]

    @property
    def database_url(self) -> str:
        return self.ready["database"]

    @property
    def token(self) -> str:
        return self.ready["token"]

    @property
    def tokens(self) -> dict[str, str]:
        return dict(TOKENS)

    def service_pid(self, name: str) -> int:
        """PID of a supervised child: a service (`harness`, …), `broker` or `postgres`."""
        wanted = {"broker": "tansu", "postgres": "postgres"}.get(name, f"muster-{name}")
        for proc in psutil.Process(self.pid).children():
            if wanted in _argv_names(proc) and _alive(proc):
                return int(proc.pid)
        raise LookupError(f"no running {name} under launcher {self.pid}" + self.tail(20))

    def service_pids(self, name: str) -> list[int]:
        """PIDs of every running instance of a service."""
        wanted = f"muster-{name}"
        return [int(p.pid) for p in psutil.Process(self.pid).children() if wanted in _argv_names(p) and _alive(p)]

    def signal_all(self, name: str, sig: int) -> list[int]:
        pids = self.service_pids(name)
        for pid in pids:
            os.kill(pid, sig)
        return pids

    def mark(self) -> int:
        """A position in the log; `wait_line` looks only after it."""
        with self._cond:
            return len(self.lines)

    def wait_line(self, pattern: str, after: int, count: int = 1, timeout: float = 60.0) -> list[str]:
        """Wait until `count` log lines after `after` match `pattern` (a regex)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [line for line in self.lines[after:] if regex.search(line)]
                if len(found) >= count:
                    return found
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"{count} x /{pattern}/ not logged in {timeout:g}s" + self.tail())
                self._cond.wait(0.2)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        pid = self.service_pid(name)
        os.kill(pid, sig)
        return pid

    def wait_restarted(self, name: str, old_pid: int, timeout: float = 60.0) -> int:
        """Wait for the supervisor's `<name> restarted (pid N)`, logged once the new process
        is ready (PostgreSQL accepts connections, topics exist, the gateway is healthy)."""
        pattern = re.compile(rf"^supervisor: {re.escape(name)} restarted \(pid (\d+)\)$")
        deadline = time.monotonic() + timeout
        with self._cond:
            while time.monotonic() < deadline:
                for line in self.lines:
                    match = pattern.match(line)
                    if match and int(match.group(1)) != old_pid:
                        new_pid = int(match.group(1))
                        if psutil.pid_exists(new_pid):
                            return new_pid
                self._cond.wait(0.2)
        raise TimeoutError(f"{name} (pid {old_pid}) not restarted in {timeout:g}s" + self.tail())


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _safe_cmdline(proc: psutil.Process) -> list[str]:
    try:
        return list(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ["?"]


NO_USER_LIMITS = {
    "MUSTER_USER_MAX_RUNNING": "0",
    "MUSTER_USER_MAX_SOCKETS": "0",
    "MUSTER_USER_MESSAGES_PER_MINUTE": "0",
    # Chaos kills the harness on purpose: turns waiting for its takeover must not be shed.
    "MUSTER_OVERLOAD_BACKLOG": "0",
    "MUSTER_OVERLOAD_BACKLOG_AGE_MS": "0",
    "MUSTER_OVERLOAD_POOL_WAIT_MS": "0",
    "MUSTER_OVERLOAD_RUNNING": "0",
}


def launcher_env(data_dir: Path, **overrides: str) -> dict[str, str]:
    env = dict(os.environ)
    # Ports of a developer's own `make run` must not leak into the test instances.
    for name in ("MUSTER_PG_PORT", "MUSTER_KAFKA_PORT", "MUSTER_TOKENS_FILE", "MUSTER_TOKEN"):
        env.pop(name, None)
    env.update(
        MUSTER_DATA_DIR=str(data_dir),
        MUSTER_GATEWAY_PORT=str(free_port()),
        MUSTER_TOKENS=",".join(f"{token}={user}" for user, token in TOKENS.items()),
        PYTHONUNBUFFERED="1",
        # The suites start turns far faster than a person: the per-user limits and the
        # shedding are off here and set by the tests of the limits themselves (test_limits.py).
        **NO_USER_LIMITS,
    )
    env.update(overrides)
    return env


Launch = Callable[..., Launcher]


@pytest.fixture(scope="session")
def infrastructure() -> Iterator[dict[str, str]]:
    """Kafka/PostgreSQL containers when a Docker engine is present, else nothing."""
    from .containers import external_infrastructure

    with external_infrastructure() as env:
        yield env


@pytest.fixture(scope="session")
def launch(tmp_path_factory: pytest.TempPathFactory, infrastructure: dict[str, str]) -> Iterator[Launch]:
    """Factory for launchers: `launch(data_dir=None, **env)`; all are killed at the end.

    Data dirs live outside pytest's tmp tree: as root, PostgreSQL runs as another user that
    must traverse every parent dir, and any pytest session starting meanwhile resets
    /tmp/pytest-of-<user> to 0700. Logs stay in the pytest tmp tree for inspection.
    """
    started: list[Launcher] = []
    data_root = Path(tempfile.mkdtemp(prefix="muster-e2e-"))

    def start(data_dir: Path | None = None, **env: str) -> Launcher:
        base = tmp_path_factory.mktemp("muster")
        data_dir = data_dir or Path(tempfile.mkdtemp(dir=data_root)) / "data"
        launcher = Launcher(data_dir, base / "launcher.log", launcher_env(data_dir, **{**infrastructure, **env}))
        started.append(launcher)
        return launcher.start()

    yield start
    for launcher in started:
        launcher.kill_everything()
    shutil.rmtree(data_root, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(launch: Launch) -> Iterator[Launcher]:
    """The shared running system; teardown asserts a clean SIGTERM shutdown."""
    launcher = launch()
    yield launcher
    if launcher.proc is not None and launcher.proc.poll() is None:
        launcher.stop()

