"""Dispatch of the local (workspace) tools, after validating their arguments against the
tool's argument model (`arguments.py`), so the model gets a precise error it can correct
instead of a Python TypeError.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from muster_agent.tools import arguments as args
from muster_agent.tools import files
from muster_agent.tools.files import Result, error
from muster_agent.tools.schemas import DELEGATION_TOOL_NAMES
from muster_agent.tools.workspace import Workspace


@dataclass(frozen=True)
class _Spec:
    fn: Callable[..., Result]
    arguments: type[args.ToolArguments]


_TOOLS: dict[str, _Spec] = {
    spec.arguments.tool: spec
    for spec in (
        _Spec(files.read_file, args.ReadFile),
        _Spec(files.write_file, args.WriteFile),
        _Spec(files.edit_file, args.EditFile),
        _Spec(files.delete_file, args.DeleteFile),
        _Spec(files.list_files, args.ListFiles),
    )
}


def validate_arguments(name: str, arguments: Any) -> dict[str, Any] | str:
    """The keyword arguments for tool `name`, or the error message for the model."""
    spec = _TOOLS.get(name)
    if spec is None:
        if name in DELEGATION_TOOL_NAMES:
            return f"{name!r} is a delegation tool, not a local tool"
        return f"unknown tool {name!r}"
    parsed = args.parse(spec.arguments, arguments)
    return parsed if isinstance(parsed, str) else parsed.model_dump()


def local_tool_call(workspace: Workspace, name: str, arguments: Any) -> Callable[[], Result]:
    """One local tool call, validated, as a blocking function to run in a worker thread;
    it always returns a result dict and never raises for bad input."""
    kwargs = validate_arguments(name, arguments)
    if isinstance(kwargs, str):
        return functools.partial(error, kwargs)
    return functools.partial(_TOOLS[name].fn, workspace, **kwargs)


async def run_local_tool(workspace: Workspace, name: str, arguments: dict[str, Any]) -> Result:
    """Run one local tool; always returns a result dict, never raises for bad input.
    The file work runs in a thread so a large read or write never stalls the event loop."""
    return await asyncio.to_thread(local_tool_call(workspace, name, arguments))


def is_local_tool(name: str) -> bool:
    return name in _TOOLS
