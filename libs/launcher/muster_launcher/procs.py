"""Small process and port helpers shared by the launcher's modules."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterable
from typing import Any

import psutil

# Loaded once in the parent: resolving libc inside a freshly forked child is not safe.
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A preexec_fn that makes the child receive `sig` if the launcher dies without
    stopping it (e.g. SIGKILL), so a crashed launcher leaves no orphan behind."""
    if _libc is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        assert _libc is not None
        _libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers do: a port whose old connections linger in TIME_WAIT is free to listen on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
        return False


def kill_all(procs: Iterable[Any], sig: int, timeout: float) -> None:
    """Signal psutil processes, wait up to `timeout`, then SIGKILL the survivors."""
    alive = []
    for proc in procs:
        try:
            proc.send_signal(sig)
            alive.append(proc)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(alive, timeout=timeout)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=timeout)
