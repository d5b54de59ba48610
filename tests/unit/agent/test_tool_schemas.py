"""The OpenAI tool schemas offered to models."""

from __future__ import annotations

import pytest
from muster_agent.tools import (
    ALL_TOOL_NAMES,
    DELEGATION_TOOL_NAMES,
    LOCAL_TOOL_NAMES,
    is_local_tool,
    tool_schemas,
)

ORDER = ["read_file", "write_file", "edit_file", "delete_file", "list_files", "delegate",
         "delegate_followup", "ask_user", "run_command"]


def test_name_sets() -> None:
    assert LOCAL_TOOL_NAMES == {"read_file", "write_file", "edit_file", "delete_file",
                                "list_files"}
    assert DELEGATION_TOOL_NAMES == {"delegate", "delegate_followup"}
    assert not LOCAL_TOOL_NAMES & DELEGATION_TOOL_NAMES
    assert all(is_local_tool(name) for name in LOCAL_TOOL_NAMES)


def test_every_schema_is_a_well_formed_function_tool() -> None:
    schemas = tool_schemas(ALL_TOOL_NAMES)
    assert [s["function"]["name"] for s in schemas] == ORDER
    for schema in schemas:
        assert schema["type"] == "function"
        function = schema["function"]
        assert function["description"]
        params = function["parameters"]
        assert params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"])
        assert all(p["type"] in ("string", "boolean", "array", "number") for p in params["properties"].values())


@pytest.mark.parametrize(
    ("name", "required"),
    [
        ("read_file", ["path"]),
        ("write_file", ["path", "content"]),
        ("edit_file", ["path", "old_string", "new_string"]),
        ("delete_file", ["path"]),
        ("list_files", []),
        ("delegate", ["agent_type", "task"]),
        ("delegate_followup", ["child_session_id", "task"]),
        ("run_command", ["command"]),
    ],
)
def test_required_arguments(name: str, required: list[str]) -> None:
    (schema,) = tool_schemas([name])
    assert schema["function"]["parameters"]["required"] == required


def test_order_is_fixed_whatever_the_allow_list_order() -> None:
    names = [s["function"]["name"] for s in tool_schemas(["delegate", "list_files", "read_file"])]
    assert names == ["read_file", "list_files", "delegate"]
    assert tool_schemas([]) == []


def test_unknown_names_raise() -> None:
    with pytest.raises(ValueError, match="unknown tool name\\(s\\): bash, shell"):
        tool_schemas(["read_file", "shell", "bash"])


def test_returned_schemas_are_independent_copies() -> None:
    first = tool_schemas(["read_file"])
    first[0]["function"]["parameters"]["required"].append("mutated")
    assert tool_schemas(["read_file"])[0]["function"]["parameters"]["required"] == ["path"]


def test_delegate_enumerates_the_agent_types_it_is_given() -> None:
    (delegate,) = tool_schemas(["delegate"], ("coder", "reviewer"))
    assert delegate["function"]["parameters"]["properties"]["agent_type"]["enum"] == ["coder", "reviewer"]
    (plain,) = tool_schemas(["delegate"])
    assert "enum" not in plain["function"]["parameters"]["properties"]["agent_type"]
    (followup,) = tool_schemas(["delegate_followup"], ("coder",))
    assert "enum" not in str(followup)
