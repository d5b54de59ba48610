"""`run_command`: a shell command in the tree's workspace, inside a sandbox (ADR 0037).

The sandbox is bubblewrap (`bwrap`): the workspace is bound read-write at `/workspace`, the
system (`/usr`, `/lib*`, `/bin`, what is needed of `/etc`) and the interpreter running muster (so `python`
finds its packages) read-only, a fresh `/tmp`, its own PID namespace (and network namespace
unless the agent type allows the network), a new session, and it dies with its parent.
Inside, `prlimit` caps CPU time, memory, file size and processes before `bash -c` runs.

The command runs as an asyncio subprocess (never blocking other sessions) in a process group
of its own: a timeout, a cancel or a deadline kills the group at once, and the PID
namespace takes every descendant with it. Its output (stdout and stderr interleaved) streams
to a log file outside the workspace while it runs, so a crash leaves what it printed so far
(`interrupted_result`); the result keeps the head and the tail of it.

Where no sandbox can be had, the tool refuses; `MUSTER_UNSAFE_COMMANDS=1` lets it run
unsandboxed (limits and timeout still apply), and its result says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muster_agent.tools.files import Result, error

DEFAULT_TIMEOUT_S = 120.0
MAX_OUTPUT_BYTES = 32 * 1024  # what the result keeps: the head and the tail, half each
MAX_LOG_BYTES = 8 * 1024 * 1024  # what the log file keeps of a longer output
# Limits inside the sandbox (prlimit): CPU seconds, address space, file size, processes.
CPU_SECONDS = 600
MEMORY_BYTES = 4 * 1024 * 1024 * 1024
FILE_BYTES = 1024 * 1024 * 1024
PROCESSES = 512
SANDBOX_ROOT = "/workspace"
# What of /etc a command sees: what programs need to start, resolve names and users, and
# check certificates; never the host's secrets (shadow, ssh keys, the services' config).
SYSTEM_ETC = tuple(
    f"/etc/{name}"
    for name in (
        "alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version",
        "environment", "gai.conf", "gitconfig", "group", "host.conf", "hostname", "hosts", "inputrc",
        "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "locale.alias", "localtime", "magic", "magic.mime",
        "mime.types", "networks", "nsswitch.conf", "os-release", "passwd", "profile", "protocols",
        "python3", "python3.11", "resolv.conf", "services", "ssl", "timezone", "xdg",
    )
)  # fmt: skip

NO_SANDBOX = (
    "refused: run_command needs a sandbox and none is available here ({reason}); install "
    "bubblewrap (Debian: apt-get install bubblewrap) or, at your own risk, set "
    "MUSTER_UNSAFE_COMMANDS=1"
)
INTERRUPTED = (
    "interrupted: this command was cut off by a crash and was not run again; "
    "`output` holds what it printed until then"
)
STOPPED = (
    "interrupted: the turn ended (cancelled, or past its deadline) while this command ran; "
    "the command and its processes were killed, and `output` holds what it printed until then"
)


@dataclass(frozen=True)
class CommandPolicy:
    """How commands run in this process (from `Settings`)."""

    max_timeout_s: float = 600.0
    unsafe: bool = False  # MUSTER_UNSAFE_COMMANDS: run without a sandbox where none exists
    logs_dir: Path | None = None  # None: `commands/` beside the workspaces directory
    readonly_paths: tuple[str, ...] = field(default_factory=lambda: _interpreter_paths())

    def log_path(self, workspaces: Path, session_id: object, tool_call_id: str) -> Path:
        base = self.logs_dir if self.logs_dir is not None else workspaces.parent / "commands"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in tool_call_id)[:200]
        return base / str(session_id) / f"{safe or 'call'}.log"


def _interpreter_paths() -> tuple[str, ...]:
    """The running interpreter and its environment: what `python` inside needs."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    system = ("/usr", "/bin", "/lib", "/lib64", "/etc", "/sbin")
    return tuple(sorted(p for p in paths if not any(p == s or p.startswith(s + "/") for s in system)))


_PROBE: dict[tuple[str, ...], str | None] = {}


async def sandbox_problem(readonly: tuple[str, ...] = ()) -> str | None:
    """Why no sandbox can be had here, or None. A working sandbox is remembered."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed"
    key = readonly
    if _PROBE.get(key, "unknown") is None:
        return None
    probe = Path(os.environ.get("TMPDIR", "/tmp"))
    argv = _bwrap_argv(probe, "true", network=False, readonly=readonly)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=30)
    except (OSError, TimeoutError) as exc:
        return f"bwrap failed to start: {type(exc).__name__}"
    if proc.returncode != 0:
        detail = out.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return f"bwrap failed to start: {detail[0][:200]}"
    _PROBE[key] = None
    return None


def _limits() -> list[str]:
    return [
        "prlimit",
        f"--cpu={CPU_SECONDS}",
        f"--as={MEMORY_BYTES}",
        f"--fsize={FILE_BYTES}",
        f"--nproc={PROCESSES}",
        "--",
    ]


def _bwrap_argv(workspace: Path, command: str, *, network: bool, readonly: tuple[str, ...]) -> list[str]:
    argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/usr", "/usr"]
    for path in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", *SYSTEM_ETC):
        argv += ["--ro-bind-try", path, path]
    for path in readonly:
        argv += ["--ro-bind-try", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    argv += ["--bind", str(workspace), SANDBOX_ROOT, "--chdir", SANDBOX_ROOT]
    argv += ["--clearenv"]
    for name, value in _environment(readonly, home="/tmp").items():
        argv += ["--setenv", name, value]
    return [*argv, *_limits(), "bash", "-c", command]


def _environment(readonly: tuple[str, ...], home: str) -> dict[str, str]:
    bins = [f"{p}/bin" for p in readonly]
    return {
        "PATH": ":".join([*bins, "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TERM": "dumb",
    }


@dataclass
class _Output:
    """The head and the tail of an output, and its log file."""

    limit: int = MAX_OUTPUT_BYTES
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.limit // 2:
                del self.tail[: len(self.tail) - self.limit // 2]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.truncated:
            return (self.head + self.tail).decode("utf-8", "replace")
        skipped = self.total - len(self.head) - len(self.tail)
        return f"{head}\n[... {skipped} bytes of output left out ...]\n{self.tail.decode('utf-8', 'replace')}"


async def run_command(
    workspace: Path,
    command: str,
    timeout_s: float | None,
    *,
    policy: CommandPolicy,
    log_path: Path,
    network: bool = False,
) -> Result:
    """Run `command` in `workspace` (an existing, resolved directory); always a result
    dict. Raises only CancelledError, after killing the command."""
    if not command.strip():
        return error("command must not be empty")
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
    if timeout <= 0:
        return error("timeout_s must be positive")
    timeout = min(timeout, policy.max_timeout_s)
    sandboxed = True
    problem = await sandbox_problem(policy.readonly_paths)
    if problem is not None:
        if not policy.unsafe:
            return error(NO_SANDBOX.format(reason=problem))
        sandboxed = False
    if sandboxed:
        argv = _bwrap_argv(workspace, command, network=network, readonly=policy.readonly_paths)
        env = None
    else:
        argv = ["setpriv", "--pdeathsig", "KILL", "--", *_limits(), "bash", "-c", command]
        env = {**_environment(policy.readonly_paths, home=str(workspace)), "PWD": str(workspace)}
    started = time.monotonic()
    output = _Output()
    with await asyncio.to_thread(_open_log, log_path) as log:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=str(workspace),
            env=env,
            start_new_session=True,
        )
        timed_out = False
        try:
            await asyncio.wait_for(_drain(proc, output, log), timeout=timeout)
        except TimeoutError:
            timed_out = True
        finally:
            # A timeout, a cancel (the session's, a deadline's) or the end of the output:
            # whatever is left of the command's group goes at once.
            _kill_group(proc)
            if proc.returncode is None:
                with contextlib.suppress(BaseException):
                    await asyncio.shield(asyncio.wait_for(proc.wait(), timeout=10))
    exit_code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    result: dict[str, Any] = {
        "success": exit_code == 0 and not timed_out,
        "exit_code": exit_code,
        "output": output.text(),
        "truncated": output.truncated,
        "timed_out": timed_out,
        "duration_ms": round((time.monotonic() - started) * 1000),
    }
    if timed_out:
        result["error"] = f"timed out after {timeout:g} s: the command and its processes were killed"
    if not sandboxed:
        result["sandboxed"] = False
        result["note"] = f"not sandboxed: {problem}; the limits and the timeout still applied"
    return result


def _open_log(path: Path) -> Any:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("wb", buffering=0)


async def _drain(proc: asyncio.subprocess.Process, output: _Output, log: Any) -> None:
    assert proc.stdout is not None
    logged = 0
    while chunk := await proc.stdout.read(64 * 1024):
        output.add(chunk)
        if logged < MAX_LOG_BYTES:
            part = chunk[: MAX_LOG_BYTES - logged]
            log.write(part)
            logged += len(part)
    await proc.wait()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def interrupted_result(log_path: Path, reason: str = INTERRUPTED) -> Result:
    """The result of a command a crash (or, with `reason` STOPPED, the end of its turn)
    cut off: never run again, its output so far."""
    output = _Output()
    with contextlib.suppress(OSError):
        with log_path.open("rb") as f:
            while chunk := f.read(64 * 1024):
                output.add(chunk)
    return {
        "success": False,
        "error": reason,
        "interrupted": True,
        "exit_code": None,
        "output": output.text(),
        "truncated": output.truncated,
        "timed_out": False,
        "duration_ms": None,
    }
