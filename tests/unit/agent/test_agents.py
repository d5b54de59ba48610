from __future__ import annotations

from pathlib import Path

import pytest
from muster_agent.agents import AgentRegistry, UnknownAgentType
from muster_agent.context import system_prompt


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


AGENTS = """
[lead]
description = "Leads the work and delegates."
system_prompt = "You lead."
tools = ["read_file", "delegate", "delegate_followup"]

[checker]
description = "Re-checks a subagent's work."
system_prompt = "You check."
tools = ["read_file", "delegate_followup"]

[plain]
system_prompt = "You write files.\\nSecond line."
tools = ["write_file"]
"""


def test_delegating_agents_are_told_the_registrys_agent_types_and_the_follow_up_rules(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(AGENTS)
    registry = AgentRegistry.load(path)
    lead, checker, plain = (registry.get(name) for name in ("lead", "checker", "plain"))
    # Every agent type with what it is for (its prompt's first line without a description).
    for line in ("- checker: Re-checks a subagent's work.", "- lead: Leads the work and delegates.",
                 "- plain: You write files."):
        assert line in lead.delegation_hints
    assert lead.delegate_types == ("checker", "lead", "plain")
    # Where the child's id is, when to follow up and when not, and to check only what changed.
    for hints in (lead.delegation_hints, checker.delegation_hints):
        assert "`child_session_id`" in hints and "`delegate_followup`" in hints
        assert "check only what changed" in hints and "Do not follow up" in hints
    assert "- lead:" not in checker.delegation_hints and checker.delegate_types == ()  # no `delegate`
    assert plain.delegation_hints == "" and plain.delegate_types == ()


def test_the_hints_are_in_the_system_prompt_of_sessions_that_can_delegate_only() -> None:

    general = AgentRegistry.load().get("general")
    normal = system_prompt(general, None, "NORMAL")
    assert normal.startswith(general.system_prompt) and normal.endswith(general.delegation_hints)
    for agent_type in ("coder", "reviewer", "researcher", "general"):
        assert f"- {agent_type}: " in normal
    assert system_prompt(general, None, "SUBAGENT") == general.system_prompt
    coder = AgentRegistry.load().get("coder")
    assert system_prompt(coder, None, "NORMAL") == coder.system_prompt
