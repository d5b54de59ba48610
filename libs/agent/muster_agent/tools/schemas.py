"""OpenAI function-tool schemas for every tool a muster agent can be given, generated from
the argument models in `arguments.py` (the same models validate the calls)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from muster_runtime.process.db import decode_json, json_bytes
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from muster_agent.tools.arguments import ALL_ARGUMENTS, ToolArguments


class _ModelFacing(GenerateJsonSchema):
    """The plain JSON schema a model reads: no titles, and an optional argument is its
    type alone (a null is never needed: leaving the argument out says the same)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        if schema.get("default") is None:
            return self.generate_inner(schema["schema"])
        return super().default_schema(schema)


# The keys of an argument's schema in the order a model has always read them.
_KEY_ORDER = ("type", "items", "description", "default")


def _property(schema: dict[str, Any]) -> dict[str, Any]:
    ordered = {key: schema[key] for key in _KEY_ORDER if key in schema}
    return ordered | {key: value for key, value in schema.items() if key not in ordered}


def function_schema(model: type[ToolArguments]) -> dict[str, Any]:
    """`model` as an OpenAI function tool."""
    generated = model.model_json_schema(schema_generator=_ModelFacing)
    return {
        "type": "function",
        "function": {
            "name": model.tool,
            "description": model.description(),
            "parameters": {
                "type": "object",
                "properties": {name: _property(p) for name, p in generated["properties"].items()},
                "required": list(generated.get("required", [])),
                # Models are told to send only these; the validation drops any others.
                "additionalProperties": False,
            },
        },
    }


_SCHEMAS: dict[str, dict[str, Any]] = {model.tool: function_schema(model) for model in ALL_ARGUMENTS}

LOCAL_TOOL_NAMES: frozenset[str] = frozenset(
    {"read_file", "write_file", "edit_file", "delete_file", "list_files"}
)
DELEGATION_TOOL_NAMES: frozenset[str] = frozenset({"delegate", "delegate_followup"})
# Answered by the user, not run: only sessions with a user in the loop get it.
USER_TOOL_NAMES: frozenset[str] = frozenset({"ask_user"})
# Run in the workspace's sandbox (`tools/commands.py`), or by a LOCAL session's client.
COMMAND_TOOL_NAMES: frozenset[str] = frozenset({"run_command"})
ALL_TOOL_NAMES: frozenset[str] = (
    LOCAL_TOOL_NAMES | DELEGATION_TOOL_NAMES | USER_TOOL_NAMES | COMMAND_TOOL_NAMES
)


def tool_schemas(allowed: Iterable[str], agent_types: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The schemas of the `allowed` tools, in the fixed order of `ALL_ARGUMENTS`. An unknown
    name is a configuration mistake (a typo in an agent definition) and raises ValueError.
    `agent_types` (the registry's, `AgentDefinition.delegate_types`) become the `enum` of
    `delegate`'s `agent_type`. Copies: callers may mutate what they send, never the shared
    table. Each agent's set is encoded once and decoded per model call, several times
    cheaper than a deep copy."""
    copied: list[dict[str, Any]] = decode_json(_encoded(frozenset(allowed), tuple(agent_types)))
    return copied


@functools.cache
def _encoded(wanted: frozenset[str], agent_types: tuple[str, ...]) -> bytes:
    unknown = wanted - set(_SCHEMAS)
    if unknown:
        raise ValueError(f"unknown tool name(s): {', '.join(sorted(unknown))}")
    schemas = [schema for name, schema in _SCHEMAS.items() if name in wanted]
    if agent_types:
        schemas = [_enumerated(schema, agent_types) if schema["function"]["name"] == "delegate" else schema
                   for schema in schemas]
    return json_bytes(schemas)


def _enumerated(schema: dict[str, Any], agent_types: tuple[str, ...]) -> dict[str, Any]:
    """`delegate`'s schema with its `agent_type` limited to the registry's agent types."""
    parameters = schema["function"]["parameters"]
    agent_type = {**parameters["properties"]["agent_type"], "enum": list(agent_types)}
    properties = {**parameters["properties"], "agent_type": agent_type}
    function = {**schema["function"], "parameters": {**parameters, "properties": properties}}
    return {**schema, "function": function}
