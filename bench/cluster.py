"""Start `muster run` for a benchmark and find its processes (as an operator would)."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class BenchCluster:
    def __init__(self, token: str = "bench-token") -> None:
        self.token = token
        self.data_dir = Path(tempfile.mkdtemp(prefix="muster-bench-"))
        self.ready: dict[str, str] = {}
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> BenchCluster:
        env = dict(
            os.environ,
            MUSTER_DATA_DIR=str(self.data_dir),
            MUSTER_GATEWAY_PORT=str(free_port()),
            MUSTER_TOKENS=f"{self.token}=bench",
            MUSTER_LOG_LEVEL=os.environ.get("MUSTER_LOG_LEVEL", "WARNING"),
            PYTHONUNBUFFERED="1",
        )
        self.proc = subprocess.Popen(
            [str(ROOT / ".venv/bin/muster"), "run"],
            cwd=ROOT,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log = open(self.data_dir / "launcher.log", "w")
        ready = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                log.write(line)
                key, sep, value = line.rstrip("\n").partition(": ")
                if sep and key in ("gateway", "kafka", "token", "database"):
                    self.ready[key] = value
                    if len(self.ready) == 4:
                        ready.set()
            log.close()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(180):
            self.__exit__()
            raise RuntimeError(f"muster run not ready; see {self.data_dir / 'launcher.log'}")
        return self

    def __exit__(self, *_: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)

    @property
    def ws_url(self) -> str:
        return self.ready["gateway"].replace("http://", "ws://") + "/v1/ws"

    def processes(self) -> dict[str, list[psutil.Process]]:
        """Supervised children by role; postgres includes its backends."""
        assert self.proc is not None
        roles: dict[str, list[psutil.Process]] = {}
        for child in psutil.Process(self.proc.pid).children():
            names = " ".join(os.path.basename(a) for a in child.cmdline()[:2])
            for role in ("gateway", "harness", "subagent-worker", "recovery", "tansu", "postgres"):
                if role in names:
                    roles.setdefault(role, []).append(child)
        roles["launcher"] = [psutil.Process(self.proc.pid)]
        return roles

    def cpu_seconds(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for role, procs in self.processes().items():
            total = 0.0
            for proc in procs:
                family = [proc] + (proc.children(recursive=True) if role == "postgres" else [])
                for member in family:
                    try:
                        times = member.cpu_times()
                        total += times.user + times.system
                    except psutil.NoSuchProcess:
                        pass
            totals[role] = total
        return totals


def wait_until(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.05)
