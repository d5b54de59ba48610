"""`make compose-test`: the compose stack on a real engine, end to end.

Brings deploy/docker-compose.yml up (on the stand-ins of deploy/images/standins.env unless
MUSTER_COMPOSE_ENV_FILE names another env file, or is empty for the official images), runs
a turn that delegates to a subagent through the gateway's port published on 127.0.0.1,
kills and restarts the subagent-worker container while the child runs, checks that the turn
completes with exactly one delivered result, and tears everything down, volumes included
(also when a step fails). Exit status 0 only if all of that held.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "muster-compose-test"
TOKEN = "tok-compose-test"
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


def compose_command() -> list[str]:
    """`docker compose` (v2 plugin) when present, else Debian's `docker-compose` (v1)."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode == 0:
        base = ["docker", "compose"]
    elif shutil.which("docker-compose"):
        base = ["docker-compose"]
    else:
        raise SystemExit("compose-test: no `docker compose` and no `docker-compose` (see deploy/engine.sh)")
    env_file = os.environ.get("MUSTER_COMPOSE_ENV_FILE", str(ROOT / "deploy/images/standins.env"))
    return [*base, "-p", PROJECT, "-f", str(ROOT / "deploy/docker-compose.yml"),
            *(["--env-file", env_file] if env_file else [])]


def run(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    # The subcommand, not the prefix compose_command() puts before it.
    shown = args[args.index("--env-file") + 2:] if "--env-file" in args else args[args.index("-f") + 2:]
    print("compose-test: compose", " ".join(a for a in shown if not a.startswith("/")), flush=True)
    return subprocess.run(list(args), env=env, text=True, check=check)


def wait_healthy(url: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"gateway at {url} not healthy in {timeout:g}s")
        time.sleep(0.5)


def script(*steps: dict[str, Any]) -> str:
    return "#script " + json.dumps({"steps": list(steps)})


def next_frame(ws: ClientConnection, timeout: float = 120) -> dict[str, Any]:
    return dict(json.loads(ws.recv(timeout=timeout)))


def drive_turn(ws_url: str, restart_worker: Callable[[], object]) -> dict[str, Any]:
    """Create a delegating session; once the child runs, restart the worker container; wait
    for the parent's terminal phase. Returns what was seen."""
    child = script({"content": "child survived the restart", "delay_ms": 4000})
    delegate = {"name": "delegate", "arguments": {"agent_type": "coder", "task": child}}
    parent = script({"tool_calls": [delegate]}, {"content": "parent done"})
    seen: dict[str, Any] = {"statuses": [], "phase": None, "restarted": False}
    with connect(f"{ws_url}?token={TOKEN}") as ws:
        ws.send(json.dumps({"type": "create_session", "id": "c1", "data": {"content": parent}}))
        ack = next_frame(ws)
        assert ack["type"] == "ack", ack
        seen["sessionId"] = session_id = ack["data"]["sessionId"]
        deadline = time.monotonic() + 240
        while seen["phase"] not in TERMINAL and time.monotonic() < deadline:
            frame = next_frame(ws)
            if frame.get("sessionId") != session_id:
                continue
            if frame["type"] == "execution_status":
                seen["statuses"].append(frame["data"]["status"])
                if frame["data"]["status"] == "RUNNING" and not seen["restarted"]:
                    restart_worker()  # mid-turn: the child is running
                    seen["restarted"] = True
            elif frame["type"] == "session_status":
                seen["phase"] = frame["data"]["phase"]
    return seen


def main() -> int:
    compose = compose_command()
    port = os.environ.get("MUSTER_COMPOSE_PORT", "18765")
    env = {**os.environ, "MUSTER_TOKENS": f"{TOKEN}=compose", "MUSTER_GATEWAY_PUBLISH": f"127.0.0.1:{port}",
           "DOCKER_BUILDKIT": "0", "COMPOSE_DOCKER_CLI_BUILD": "0"}
    url = f"http://127.0.0.1:{port}"
    ok = False
    try:
        run(*compose, "down", "-v", "--remove-orphans", env=env)  # leftovers of an interrupted run
        run(*compose, "build", env=env)
        run(*compose, "up", "-d", env=env)
        wait_healthy(url)
        seen = drive_turn(url.replace("http", "ws") + "/v1/ws",
                          lambda: run(*compose, "restart", "-t", "0", "subagent-worker", env=env))
        request = urllib.request.Request(f"{url}/v1/sessions/{seen['sessionId']}/messages?rounds=10",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=15) as response:
            history = json.load(response)["items"]
        roles = [m["role"] for m in history]
        results = [json.loads(m["content"]) for m in history if m["role"] == "TOOL"]
        print(f"compose-test: phase={seen['phase']} statuses={seen['statuses']} roles={roles}", flush=True)
        ok = (seen["restarted"] and seen["phase"] == "COMPLETED"
              and roles == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
              and [r["result"] for r in results] == ["child survived the restart"])
        if not ok:
            run(*compose, "logs", "--tail", "80", env=env, check=False)
    finally:
        run(*compose, "down", "-v", "--remove-orphans", env=env, check=False)
    left = leftovers()
    if left:
        print(f"compose-test: left behind after down -v: {left}", flush=True)
    ok = ok and not left
    print("compose-test: PASSED" if ok else "compose-test: FAILED", flush=True)
    return 0 if ok else 1


def leftovers() -> list[str]:
    """Containers, volumes and networks of the project still there (compose labels them)."""
    label = f"label=com.docker.compose.project={PROJECT}"
    found: list[str] = []
    for kind in (["ps", "-a"], ["volume", "ls"], ["network", "ls"]):
        listed = subprocess.run(["docker", *kind, "-q", "--filter", label], capture_output=True, text=True,
                                check=True)
        found += [f"{kind[0]} {name}" for name in listed.stdout.split()]
    return found


if __name__ == "__main__":
    sys.exit(main())
