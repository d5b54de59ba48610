"""OpenAI function-tool schemas for every tool a muster agent can be given."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_PATH = {"type": "string", "description": "Path relative to the workspace root."}

# Insertion order is the order tools are offered to a model: fixed, whatever order an
# agent definition lists them in, so the prompt (and any provider-side cache) is stable.
_SCHEMAS: dict[str, dict[str, Any]] = {
    "read_file": _function(
        "read_file",
        "Read a UTF-8 text file (at most 4 MiB) from the workspace.",
        {"path": _PATH},
        ["path"],
    ),
    "write_file": _function(
        "write_file",
        "Create or overwrite a file with the given content; parent directories are created.",
        {"path": _PATH, "content": {"type": "string", "description": "The full new content."}},
        ["path", "content"],
    ),
    "edit_file": _function(
        "edit_file",
        "Replace old_string with new_string in a file. old_string must occur exactly once "
        "unless replace_all is true.",
        {
            "path": _PATH,
            "old_string": {"type": "string", "description": "Exact text to replace."},
            "new_string": {"type": "string", "description": "Replacement text."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence.",
                "default": False,
            },
        },
        ["path", "old_string", "new_string"],
    ),
    "delete_file": _function(
        "delete_file",
        "Delete a file (not a directory) from the workspace.",
        {"path": _PATH},
        ["path"],
    ),
    "list_files": _function(
        "list_files",
        "List files and directories (ending in '/') recursively, relative to the workspace "
        "root; at most 1000 entries.",
        {"path": {"type": "string", "description": "Directory to list; default the root."}},
        [],
    ),
    "delegate": _function(
        "delegate",
        "Start a subagent of the given type on a task. Its final answer arrives as this "
        "tool's result once it finishes; delegate several tasks at once to run them in "
        "parallel.",
        {
            "agent_type": {"type": "string", "description": "The kind of subagent to run."},
            "task": {"type": "string", "description": "Complete, self-contained instructions."},
        },
        ["agent_type", "task"],
    ),
    "delegate_followup": _function(
        "delegate_followup",
        "Send a further task to a subagent started earlier with delegate; it keeps its "
        "previous conversation.",
        {
            "child_session_id": {
                "type": "string",
                "description": "child_session_id from a delegate result.",
            },
            "task": {"type": "string", "description": "The follow-up instructions."},
        },
        ["child_session_id", "task"],
    ),
    "ask_user": _function(
        "ask_user",
        "Ask the user a question and wait for the answer, which becomes this tool's result. "
        "Offer options when the answer is a choice.",
        {
            "question": {"type": "string", "description": "The question, self-contained."},
            "options": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Possible answers to choose from, if any.",
            },
        },
        ["question"],
    ),
}

LOCAL_TOOL_NAMES: frozenset[str] = frozenset(
    {"read_file", "write_file", "edit_file", "delete_file", "list_files"}
)
DELEGATION_TOOL_NAMES: frozenset[str] = frozenset({"delegate", "delegate_followup"})
# Answered by the user, not run: only sessions with a user in the loop get it.
USER_TOOL_NAMES: frozenset[str] = frozenset({"ask_user"})
ALL_TOOL_NAMES: frozenset[str] = LOCAL_TOOL_NAMES | DELEGATION_TOOL_NAMES | USER_TOOL_NAMES


def tool_schemas(allowed: Iterable[str]) -> list[dict[str, Any]]:
    """The schemas of the `allowed` tools, in the fixed order above. An unknown name is a
    configuration mistake (a typo in an agent definition) and raises ValueError."""
    wanted = set(allowed)
    unknown = wanted - ALL_TOOL_NAMES
    if unknown:
        raise ValueError(f"unknown tool name(s): {', '.join(sorted(unknown))}")
    # Deep-ish copies: callers may mutate what they send, never the shared table.
    return [_copy(schema) for name, schema in _SCHEMAS.items() if name in wanted]


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
