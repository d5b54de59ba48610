"""The arguments of every tool, one pydantic model each: the single source of both the
JSON schema a model is offered (`schemas.py`) and the validation its call goes through.

Each model's docstring is the tool's description and each field's description is the
argument's. Validation is strict (a number is not a path, "yes" is not a boolean), a
null argument counts as absent, and arguments the schema does not name are dropped:
models add them often and they are harmless.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails


class ToolArguments(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    # The tool's name as the model calls it.
    tool: ClassVar[str]

    @classmethod
    def description(cls) -> str:
        """The docstring on one line, as the model reads it."""
        return " ".join((cls.__doc__ or "").split())


A = TypeVar("A", bound=ToolArguments)

_PATH = "Path relative to the workspace root."


class ReadFile(ToolArguments):
    """Read a UTF-8 text file (at most 4 MiB) from the workspace."""

    tool: ClassVar[str] = "read_file"
    path: str = Field(description=_PATH)


class WriteFile(ToolArguments):
    """Create or overwrite a file with the given content; parent directories are created."""

    tool: ClassVar[str] = "write_file"
    path: str = Field(description=_PATH)
    content: str = Field(description="The full new content.")


class EditFile(ToolArguments):
    """Replace old_string with new_string in a file. old_string must occur exactly once
    unless replace_all is true."""

    tool: ClassVar[str] = "edit_file"
    path: str = Field(description=_PATH)
    old_string: str = Field(description="Exact text to replace.")
    new_string: str = Field(description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence.")


class DeleteFile(ToolArguments):
    """Delete a file (not a directory) from the workspace."""

    tool: ClassVar[str] = "delete_file"
    path: str = Field(description=_PATH)


class ListFiles(ToolArguments):
    """List files and directories (ending in '/') recursively, relative to the workspace
    root; at most 1000 entries."""

    tool: ClassVar[str] = "list_files"
    path: str | None = Field(None, description="Directory to list; default the root.")


class Delegate(ToolArguments):
    """Start a subagent of the given type on a task. Its final answer arrives as this
    tool's result once it finishes; delegate several tasks at once to run them in
    parallel."""

    tool: ClassVar[str] = "delegate"
    agent_type: str = Field(description="The kind of subagent to run.")
    task: str = Field(description="Complete, self-contained instructions.")


class DelegateFollowup(ToolArguments):
    """Send a further task to a subagent started earlier with delegate; it keeps its
    previous conversation."""

    tool: ClassVar[str] = "delegate_followup"
    child_session_id: str = Field(description="child_session_id from a delegate result.")
    task: str = Field(description="The follow-up instructions.")


class AskUser(ToolArguments):
    """Ask the user a question and wait for the answer; offer options when the answer is
    one of a few choices."""

    tool: ClassVar[str] = "ask_user"
    question: str = Field(description="The question, complete and self-contained.")
    options: list[str] | None = Field(None, description="Answers to choose from; omit for a free answer.")


class RunCommand(ToolArguments):
    """Run a shell command (bash -c) in the workspace, in a sandbox: only the workspace is
    writable, the network is off unless this agent has it, and processes, memory, CPU time
    and output are limited. The result has exit_code, output (stdout and stderr
    interleaved; head and tail kept when long), truncated, timed_out and duration_ms. A
    command cut off by a crash is not run again."""

    tool: ClassVar[str] = "run_command"
    command: str = Field(description="The command line, run with bash -c in the workspace root.")
    timeout_s: float | None = Field(
        None, gt=0, description="Wall-clock limit in seconds; default 120, capped by the operator."
    )


# The order tools are offered to a model: fixed, whatever order an agent definition lists
# them in, so the prompt (and any provider-side cache) is stable.
ALL_ARGUMENTS: tuple[type[ToolArguments], ...] = (
    ReadFile,
    WriteFile,
    EditFile,
    DeleteFile,
    ListFiles,
    Delegate,
    DelegateFollowup,
    AskUser,
    RunCommand,
)

_KINDS = {
    "string_type": "a string",
    "bool_type": "a boolean",
    "list_type": "a list",
    "float_type": "a number",
    "greater_than": "positive",
}


def parse(model: type[A], arguments: Any) -> A | str:
    """The validated arguments — from the model's text (`tool_arguments.py`) or an object
    already parsed — or the error message the model gets to correct its call."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return "arguments are not valid JSON; send a JSON object"
    if not isinstance(arguments, dict):
        return "arguments must be a JSON object"
    try:
        return model.model_validate({k: v for k, v in arguments.items() if v is not None})
    except ValidationError as exc:
        return _message(exc.errors())


def _message(errors: list[ErrorDetails]) -> str:
    # A missing argument is named first, in the order the schema lists them.
    missing = [e for e in errors if e["type"] == "missing"]
    if missing:
        return f"missing required argument {missing[0]['loc'][0]!r}"
    first = errors[0]
    name = first["loc"][0]
    if len(first["loc"]) > 1:  # an element of a list argument
        return f"argument {name!r} must be a list of strings"
    kind = _KINDS.get(first["type"])
    return f"argument {name!r} must be {kind}" if kind else f"argument {name!r}: {first['msg']}"
