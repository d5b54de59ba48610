"""One pydantic model per tool: the schema a model is offered and the validation its call
goes through come from the same class."""

from __future__ import annotations

import json
from typing import Any

import pytest
from muster_agent.tools.arguments import (
    ALL_ARGUMENTS,
    AskUser,
    Delegate,
    DelegateFollowup,
    EditFile,
    ListFiles,
    ReadFile,
    parse,
)
from muster_agent.tools.schemas import ALL_TOOL_NAMES, USER_TOOL_NAMES, function_schema, tool_schemas

# The edit_file schema exactly as models have always been offered it, key order included.
EDIT_FILE = (
    '{"type": "function", "function": {"name": "edit_file", "description": "Replace old_string '
    "with new_string in a file. old_string must occur exactly once unless replace_all is true.\", "
    '"parameters": {"type": "object", "properties": {"path": {"type": "string", "description": '
    '"Path relative to the workspace root."}, "old_string": {"type": "string", "description": '
    '"Exact text to replace."}, "new_string": {"type": "string", "description": "Replacement '
    'text."}, "replace_all": {"type": "boolean", "description": "Replace every occurrence.", '
    '"default": false}}, "required": ["path", "old_string", "new_string"], '
    '"additionalProperties": false}}}'
)


def test_the_generated_schema_is_the_one_models_always_read() -> None:
    assert json.dumps(function_schema(EditFile)) == EDIT_FILE
    (listing,) = tool_schemas(["list_files"])
    assert listing["function"]["parameters"] == {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Directory to list; default the root."}},
        "required": [],
        "additionalProperties": False,
    }


def test_every_tool_has_one_model_and_names_are_unique() -> None:
    names = [model.tool for model in ALL_ARGUMENTS]
    assert len(names) == len(set(names))
    assert set(names) == ALL_TOOL_NAMES
    assert all(model.description() and "\n" not in model.description() for model in ALL_ARGUMENTS)


def test_ask_user_is_the_tool_the_user_answers() -> None:
    assert USER_TOOL_NAMES == {"ask_user"} and USER_TOOL_NAMES <= ALL_TOOL_NAMES
    (schema,) = tool_schemas(["ask_user"])
    assert schema["function"]["name"] == "ask_user"
    assert schema["function"]["parameters"] == {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question, complete and self-contained."},
            "options": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Answers to choose from; omit for a free answer.",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    }


def test_valid_arguments_parse_into_the_model() -> None:
    assert parse(ReadFile, {"path": "a.txt", "extra": 1}) == ReadFile(path="a.txt")
    assert parse(ListFiles, {}) == ListFiles()
    assert parse(ListFiles, {"path": None}) == ListFiles()
    assert parse(EditFile, {"path": "a", "old_string": "x", "new_string": "y"}) == EditFile(
        path="a", old_string="x", new_string="y", replace_all=False
    )
    assert parse(AskUser, {"question": "Which?", "options": ["a", "b"]}) == AskUser(
        question="Which?", options=["a", "b"]
    )
    assert parse(AskUser, {"question": "Why?"}) == AskUser(question="Why?")


@pytest.mark.parametrize(
    ("model", "arguments", "message"),
    [
        (ReadFile, {}, "missing required argument 'path'"),
        (ReadFile, {"path": 3}, "argument 'path' must be a string"),
        (ReadFile, '"a.txt"', "arguments must be a JSON object"),
        (ReadFile, ["a.txt"], "arguments must be a JSON object"),
        (ReadFile, "{", "arguments are not valid JSON; send a JSON object"),
        # A missing argument is reported before a mistyped one, in schema order.
        (Delegate, {"agent_type": 1}, "missing required argument 'task'"),
        (DelegateFollowup, {"task": "x"}, "missing required argument 'child_session_id'"),
        (EditFile, {"path": "a", "old_string": "x", "new_string": "y", "replace_all": 1},
         "argument 'replace_all' must be a boolean"),
        (AskUser, {"question": "q", "options": "a,b"}, "argument 'options' must be a list"),
        (AskUser, {"question": "q", "options": ["a", 2]}, "argument 'options' must be a list of strings"),
    ],
)
def test_invalid_arguments_get_a_message_the_model_can_act_on(
    model: Any, arguments: Any, message: str
) -> None:
    assert parse(model, arguments) == message
