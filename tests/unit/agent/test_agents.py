from __future__ import annotations

from pathlib import Path

import pytest
from muster_agent.agents import AgentRegistry, UnknownAgentType


def test_builtin_registry_has_the_standard_agents() -> None:
    registry = AgentRegistry.load()
    assert {"general", "coder", "reviewer", "researcher"} <= set(registry.names())


def test_subagents_never_receive_delegation_tools() -> None:
    general = AgentRegistry.load().get("general")
    assert "delegate" in general.tools_for("NORMAL")
    assert not {"delegate", "delegate_followup"} & set(general.tools_for("SUBAGENT"))


def test_deny_list_and_file_loading(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text('[solo]\nsystem_prompt = "x"\ntools = ["read_file", "write_file"]\ndeny = ["write_file"]\n')
    solo = AgentRegistry.load(path).get("solo")
    assert solo.tools == ("read_file",)
    assert solo.max_rounds == 50
    with pytest.raises(UnknownAgentType):
        AgentRegistry.load(path).get("general")
