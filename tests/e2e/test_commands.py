"""`run_command` against the real processes (issue 40): a coder child runs the tests it
wrote, the sandbox holds (no write outside the workspace, no network, no other tree), a
timeout and a cancel leave no process, the files a command changes are attributed, the
permission levels gate it and a LOCAL session's command runs in the client's directory."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from .conftest import MUSTER, Launcher
from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e


def workspace(cluster: Launcher, session_id: str) -> Path:
    return Path(cluster.data_dir) / "workspaces" / session_id


async def results(rest: Rest, session_id: str) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in await rest.messages(session_id) if m["role"] == "TOOL"]


def processes_with(marker: str) -> list[int]:
    """The processes on this machine whose command line holds `marker` (read from /proc)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or ()):
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


async def wait_until(predicate: Any, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


TEST_MODULE = "from mod import answer\n\n\ndef test_answer():\n    assert answer() == 41\n"


async def test_coder_child_runs_its_tests_and_its_command_changes_are_attributed(
    alice: Client, alice_rest: Rest, cluster: Launcher
) -> None:
    child = script(
        {
            "tool_calls": [
                call("write_file", path="mod.py", content="def answer():\n    return 41\n"),
                call("write_file", path="test_mod.py", content=TEST_MODULE),
            ]
        },
        {"tool_calls": [call("run_command", command="python -m pytest -q -p no:cacheprovider")]},
        {
            "tool_calls": [
                call(
                    "run_command",
                    command="sed -i 's/41/42/' mod.py && printf 'gen\\n' > gen.txt && rm test_mod.py",
                )
            ]
        },
        {"content": "wrote mod.py, its test passes"},
    )
    sid = await alice.run_turn(
        script(
            {"tool_calls": [call("delegate", agent_type="coder", task=child)]}, {"content": "parent done"}
        ),
        timeout=120,
    )
    assert alice.phases(sid)[-1] == "COMPLETED"
    (delegated,) = await results(alice_rest, sid)
    assert delegated["success"] is True and delegated["result"] == "wrote mod.py, its test passes"
    child_id = delegated["child_session_id"]
    _, _, pytest_run, edit = await results(alice_rest, child_id)
    assert (pytest_run["success"], pytest_run["exit_code"], pytest_run["timed_out"]) == (True, 0, False)
    assert "1 passed" in pytest_run["output"] and pytest_run["truncated"] is False
    assert isinstance(pytest_run["duration_ms"], int)
    assert edit["success"] is True and edit["exit_code"] == 0
    # The command's changes: on the child's message, and in the parent round's summary.
    child_messages = [m for m in await alice_rest.messages(child_id) if m["role"] == "ASSISTANT"]
    assert [(c["path"], c["changeType"], c["sourceType"]) for c in child_messages[2]["fileChanges"]] == [
        ("gen.txt", "CREATED", "SUBAGENT"),
        ("mod.py", "MODIFIED", "SUBAGENT"),
        ("test_mod.py", "DELETED", "SUBAGENT"),
    ]
    modified = child_messages[2]["fileChanges"][1]
    assert (modified["linesAdded"], modified["linesDeleted"]) == (1, 1) and "+    return 42" in modified[
        "diff"
    ]
    assert (
        child_messages[1]["fileChanges"] == []
    )  # pytest changed nothing (its caches are not files of the task)
    round_id = next(m for m in await alice_rest.messages(sid) if m["role"] == "ASSISTANT")["messageId"]
    items = (await alice_rest.json(f"/v1/sessions/{sid}/rounds/{round_id}/file-changes"))["items"]
    by_path = {i["path"]: i for i in items}
    assert set(by_path) == {"gen.txt", "mod.py", "test_mod.py"}
    assert by_path["gen.txt"]["sources"] == [
        {"sessionId": child_id, "type": "SUBAGENT", "agentType": "coder"}
    ]
    assert by_path["mod.py"]["after"] == "def answer():\n    return 42\n"
    assert (workspace(cluster, sid) / "gen.txt").read_text() == "gen\n"


async def test_the_sandbox_keeps_the_command_in_its_workspace(
    alice: Client, alice_rest: Rest, cluster: Launcher
) -> None:
    other = await alice.run_turn(
        script({"tool_calls": [call("write_file", path="secret.txt", content="other")]}, {"content": "ok"})
    )
    other_file = workspace(cluster, other) / "secret.txt"
    assert other_file.read_text() == "other"
    outside = Path(cluster.data_dir) / f"escape-{uuid.uuid4().hex}.txt"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    connect = f"python -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')\""
    try:
        sid = await alice.run_turn(
            script(
                {
                    "tool_calls": [
                        call("run_command", command=f"echo x > {outside}"),
                        call(
                            "run_command",
                            command="echo x > ../escape.txt; echo y > /escape.txt; echo in > inside.txt",
                        ),
                        call("run_command", command=connect),
                        call(
                            "run_command", command=f"cat {other_file}; ls ../; ls {other_file.parent.parent}"
                        ),
                    ]
                },
                {"content": "tried"},
            ),
            timeout=90,
        )
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever reached the listener
    finally:
        listener.close()
    write_out, relative_out, net, peek = await results(alice_rest, sid)
    assert write_out["success"] is False and write_out["exit_code"] != 0
    assert not outside.exists()
    assert relative_out["success"] is True  # the sandbox's own root: gone with it
    assert not (workspace(cluster, sid).parent / "escape.txt").exists() and not Path("/escape.txt").exists()
    assert (workspace(cluster, sid) / "inside.txt").read_text() == "in\n"
    assert net["success"] is False and "connected" not in net["output"]
    # Neither the other tree's file nor the workspaces directory is there to see.
    shown = peek["output"].splitlines()
    assert peek["success"] is False and "other" not in shown and other not in shown
    assert shown[0].endswith("secret.txt: No such file or directory") and "No such file" in shown[-1]


async def test_timeout_kills_the_command_and_leaves_no_process(alice: Client, alice_rest: Rest) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.5"
    sid = await alice.run_turn(
        script(
            {"tool_calls": [call("run_command", command=f"sleep {marker} & sleep {marker}", timeout_s=1)]},
            {"content": "timed out"},
        )
    )
    (result,) = await results(alice_rest, sid)
    assert (result["success"], result["timed_out"]) == (False, True)
    assert 900 <= result["duration_ms"] < 10_000
    assert processes_with(marker) == []


def logged(cluster: Launcher, session_id: str) -> str:
    """What the session's running commands have printed so far (their logs)."""
    text = ""
    for path in (Path(cluster.data_dir) / "commands" / session_id).glob("*.log"):
        try:
            text += path.read_text(errors="replace")
        except FileNotFoundError:  # recorded and removed meanwhile
            continue
    return text


def leftovers(cluster: Launcher) -> list[str]:
    """What is left in the directory of the commands' logs and scans."""
    root = Path(cluster.data_dir) / "commands"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


async def test_a_recorded_commands_log_is_removed(alice: Client, alice_rest: Rest, cluster: Launcher) -> None:
    sid = await alice.run_turn(
        script(
            {"tool_calls": [call("run_command", command="echo one > one.txt; echo printed")]},
            {"tool_calls": [call("run_command", command="echo two; exit 3"), call("list_files", path=".")]},
            {"content": "both ran"},
        )
    )
    first, second, _listing = await results(alice_rest, sid)
    assert (first["exit_code"], first["output"], second["exit_code"]) == (0, "printed\n", 3)
    # Each log served its result: nothing of the session's commands is left behind.
    assert [p for p in leftovers(cluster) if p.startswith(sid)] == []


async def test_cancel_in_the_middle_of_a_command_leaves_no_process(
    alice: Client, alice_rest: Rest, cluster: Launcher
) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.25"
    created = await alice.ack(
        "create_session",
        data={
            "content": script(
                {
                    "tool_calls": [
                        call(
                            "run_command",
                            command=f"echo x > cut.txt; echo begun; sleep {marker} & sleep {marker}; echo never",
                        )
                    ]
                },
                {"content": "never"},
            )
        },
    )
    sid = created["sessionId"]
    # Cancel once the runner has the command's first line in its log: the file is written
    # and what it printed is kept. (The marker is in bwrap's and bash's command lines too,
    # so counting processes says nothing about how far the shell got.)
    await wait_until(lambda: "begun" in logged(cluster, sid))
    await alice.ack("cancel", sid)
    assert await alice.wait_phase(sid, timeout=30) == "CANCELLED"
    await wait_until(lambda: processes_with(marker) == [], timeout=10)
    history = await alice_rest.messages(sid)
    assert "never" not in [m["content"] for m in history if m["role"] == "ASSISTANT"]
    # The file it wrote before the cancel is attributed to its call all the same.
    await alice.wait_for(lambda: any(e["type"] == "file_change" for e in alice.events[sid]), 15)
    (change,) = [e["data"] for e in alice.events[sid] if e["type"] == "file_change"]
    assert (change["path"], change["changeType"]) == ("cut.txt", "CREATED")
    assert change["toolCallId"] == history[1]["toolCalls"][0]["id"]
    # The call is answered at once: interrupted, with what the command printed before it.
    await alice.wait_for(
        lambda: any(e["type"] == "message" and e["data"]["role"] == "TOOL" for e in alice.events[sid]), 15
    )
    (result,) = await results(alice_rest, sid)
    assert (result["success"], result["interrupted"], result["output"]) == (False, True, "begun\n")
    assert result["error"].startswith("interrupted: the turn ended")
    assert [p for p in leftovers(cluster) if p.startswith(sid)] == []


async def test_ask_waits_for_an_approval_showing_the_command(alice: Client, alice_rest: Rest) -> None:
    created = await alice.ack(
        "create_session",
        data={
            "permissionLevel": "ask",
            "content": script(
                {"tool_calls": [call("run_command", command="echo approved > ok.txt; echo ran")]},
                {"content": "after"},
            ),
        },
    )
    sid = created["sessionId"]
    await alice.wait_for(lambda: any(e["type"] == "approval_requested" for e in alice.events[sid]))
    (requested,) = [e["data"] for e in alice.events[sid] if e["type"] == "approval_requested"]
    assert requested["tool"] == "run_command"
    assert requested["arguments"] == {"command": "echo approved > ok.txt; echo ran"}
    # The phase's frame may come in the socket's next message, after the request's.
    await alice.wait_for(lambda: alice.phases(sid)[-1:] == ["WAITING_APPROVAL"])
    await alice.ack("answer_approval", sid, {"approvalId": requested["approvalId"], "decision": "approve"})
    assert await alice.wait_phase(sid, timeout=60) == "COMPLETED"
    (result,) = await results(alice_rest, sid)
    assert result["success"] is True and result["output"] == "ran\n"


async def test_read_only_refuses_a_command(alice: Client, alice_rest: Rest, cluster: Launcher) -> None:
    created = await alice.ack(
        "create_session",
        data={
            "permissionLevel": "read_only",
            "content": script(
                {"tool_calls": [call("run_command", command="echo no > no.txt")]},
                {"content": "refused"},
            ),
        },
    )
    sid = created["sessionId"]
    assert await alice.wait_phase(sid, timeout=60) == "COMPLETED"
    (result,) = await results(alice_rest, sid)
    assert result["success"] is False and "read_only" in result["error"]
    assert not (workspace(cluster, sid) / "no.txt").exists()


async def test_context_offers_run_command(alice: Client, alice_rest: Rest) -> None:
    sid = await alice.run_turn("hello")
    context = await alice_rest.json(f"/v1/sessions/{sid}/context")
    names = [t["function"]["name"] for t in context.get("tools", [])]
    assert "run_command" in names, context.keys()


async def test_local_session_runs_the_command_in_the_clients_directory(
    cluster: Launcher, tmp_path: Path
) -> None:
    message = script(
        {"tool_calls": [call("run_command", command="pwd; echo local > made.txt")]},
        {"content": "local command done"},
    )
    (tmp_path / "dir").mkdir()
    proc = await asyncio.create_subprocess_exec(
        str(MUSTER),
        "chat",
        "--url",
        cluster.gateway_url,
        "--token",
        cluster.tokens["alice"],
        "--local",
        str(tmp_path / "dir"),
        "--state-dir",
        str(tmp_path / "state"),
        message,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(proc.communicate(), 90)
    text = output.decode()
    assert proc.returncode == 0, text
    assert "local command done" in text and "tool_request_served" in text and "tool=run_command" in text, text
    session_id = next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("session: "))
    assert (tmp_path / "dir" / "made.txt").read_text() == "local\n"
    assert not (workspace(cluster, session_id) / "made.txt").exists()
