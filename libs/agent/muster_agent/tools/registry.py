"""Argument validation and dispatch for the local (workspace) tools.

Models send arguments of any shape; they are checked here against a small table so the
model gets a precise error it can correct, instead of a Python TypeError.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from muster_agent.tools import files
from muster_agent.tools.files import Result, error
from muster_agent.tools.schemas import DELEGATION_TOOL_NAMES
from muster_agent.tools.workspace import Workspace

_TYPE_NAMES: dict[type, str] = {str: "a string", bool: "a boolean"}


@dataclass(frozen=True)
class _Spec:
    fn: Callable[..., Result]
    required: dict[str, type]
    optional: dict[str, type] = field(default_factory=dict)


_TOOLS: dict[str, _Spec] = {
    "read_file": _Spec(files.read_file, {"path": str}),
    "write_file": _Spec(files.write_file, {"path": str, "content": str}),
    "edit_file": _Spec(
        files.edit_file,
        {"path": str, "old_string": str, "new_string": str},
        {"replace_all": bool},
    ),
    "delete_file": _Spec(files.delete_file, {"path": str}),
    "list_files": _Spec(files.list_files, {}, {"path": str}),
}


def validate_arguments(name: str, arguments: Any) -> dict[str, Any] | str:
    """The keyword arguments for tool `name`, or the error message for the model.
    Unknown extra arguments are dropped: models add them often and they are harmless."""
    spec = _TOOLS.get(name)
    if spec is None:
        if name in DELEGATION_TOOL_NAMES:
            return f"{name!r} is a delegation tool, not a local tool"
        return f"unknown tool {name!r}"
    if not isinstance(arguments, dict):
        return "arguments must be a JSON object"
    if "_raw" in arguments:  # the provider could not parse the model's JSON
        return "arguments are not valid JSON; send a JSON object"
    kwargs: dict[str, Any] = {}
    for arg in spec.required:
        if arguments.get(arg) is None:
            return f"missing required argument {arg!r}"
        kwargs[arg] = arguments[arg]
    for arg in spec.optional:
        if arguments.get(arg) is not None:
            kwargs[arg] = arguments[arg]
    for arg, value in kwargs.items():
        kind = spec.required.get(arg) or spec.optional[arg]
        if not isinstance(value, kind):
            return f"argument {arg!r} must be {_TYPE_NAMES[kind]}"
    return kwargs


async def run_local_tool(workspace: Workspace, name: str, arguments: dict[str, Any]) -> Result:
    """Run one local tool; always returns a result dict, never raises for bad input.
    The file work runs in a thread so a large read or write never stalls the event loop."""
    kwargs = validate_arguments(name, arguments)
    if isinstance(kwargs, str):
        return error(kwargs)
    return await asyncio.to_thread(_TOOLS[name].fn, workspace, **kwargs)


def is_local_tool(name: str) -> bool:
    return name in _TOOLS
