"""The scripted model of DESIGN §7: step selection, delays, failures, ids."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from typing import Any

import pytest
from muster_agent.models import ModelError, ModelRequest, ScriptedModel, build_model
from muster_agent.models.scripted import tool_call_id


def script(*steps: dict[str, Any]) -> str:
    return "#script " + json.dumps({"steps": list(steps)})


def request(*messages: dict[str, Any], session_id: str = "s1") -> ModelRequest:
    return ModelRequest(session_id=session_id, model="script", messages=list(messages), tools=[])


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: str = "", n_calls: int = 0) -> dict[str, Any]:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "x", "arguments": "{}"}}
        for i in range(n_calls)
    ]
    return {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}


def tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": '{"success": true}'}


SYSTEM = {"role": "system", "content": "You are a test agent."}
STEPS = (
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "A"}}]},
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}},
                    {"name": "list_files", "arguments": {}}], "content": "reading"},
    {"content": "all finished"},
)


async def test_step_k_is_chosen_by_assistant_messages_after_the_user_message() -> None:
    model = ScriptedModel()
    first = user(script(*STEPS))
    reply0 = await model.complete(request(SYSTEM, first))
    assert [(c.name, c.arguments) for c in reply0.tool_calls] == [
        ("write_file", '{"path": "a.txt", "content": "A"}')
    ]
    assert reply0.content == ""

    history = [SYSTEM, first, assistant(n_calls=1), tool("c0")]
    reply1 = await model.complete(request(*history))
    assert [c.name for c in reply1.tool_calls] == ["read_file", "list_files"]
    assert reply1.content == "reading"

    history += [assistant(n_calls=2), tool("c0"), tool("c1")]
    reply2 = await model.complete(request(*history))
    assert reply2.tool_calls == ()
    assert reply2.content == "all finished"


async def test_past_the_last_step_answers_done() -> None:
    history = [user(script(*STEPS))] + [assistant()] * 3
    reply = await ScriptedModel().complete(request(*history))
    assert (reply.content, reply.tool_calls) == ("done", ())
    reply = await ScriptedModel().complete(request(user(script())))  # no steps at all
    assert reply.content == "done"


async def test_a_step_without_tool_calls_or_content_ends_with_empty_content() -> None:
    reply = await ScriptedModel().complete(request(user(script({}))))
    assert (reply.content, reply.tool_calls) == ("", ())


async def test_only_the_latest_user_message_counts() -> None:
    history = [user(script(*STEPS)), assistant(), user("thanks")]
    reply = await ScriptedModel().complete(request(*history))
    assert reply.content == "You said: thanks"
    # A new scripted turn starts again at step 0 whatever came before.
    history += [assistant("You said: thanks"), user(script({"content": "second turn"}))]
    reply = await ScriptedModel().complete(request(*history))
    assert reply.content == "second turn"


async def test_non_script_message_gets_a_short_deterministic_reply() -> None:
    model = ScriptedModel()
    assert (await model.complete(request(user("hello")))).content == "You said: hello"
    long = "x" * 500
    assert (await model.complete(request(user(long)))).content == "You said: " + "x" * 200
    prose = "#scripting is fun"
    assert (await model.complete(request(user(prose)))).content == f"You said: {prose}"
    parts = [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]
    assert (await model.complete(request(user(parts)))).content == "You said: hi there"


async def test_content_parts_can_carry_a_script() -> None:
    parts = [{"type": "text", "text": script({"content": "from parts"})}]
    assert (await ScriptedModel().complete(request(user(parts)))).content == "from parts"


async def test_delay_makes_the_call_take_that_long() -> None:
    start = time.monotonic()
    reply = await ScriptedModel().complete(request(user(script({"delay_ms": 60, "content": "ok"}))))
    assert reply.content == "ok"
    assert time.monotonic() - start >= 0.055


async def test_delay_is_cancellable() -> None:
    call = asyncio.create_task(
        ScriptedModel().complete(request(user(script({"delay_ms": 60_000}))))
    )
    await asyncio.sleep(0.02)
    start = time.monotonic()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert time.monotonic() - start < 1


async def test_fail_raises_model_error_with_the_message_after_the_delay() -> None:
    with pytest.raises(ModelError, match=r"^upstream exploded$"):
        await ScriptedModel().complete(request(user(script({"fail": "upstream exploded"}))))
    start = time.monotonic()
    with pytest.raises(ModelError, match="late"):
        await ScriptedModel().complete(request(user(script({"delay_ms": 40, "fail": "late"}))))
    assert time.monotonic() - start >= 0.035


async def test_fail_applies_only_to_its_step() -> None:
    history = [user(script({"content": "fine"}, {"fail": "boom"})), assistant()]
    with pytest.raises(ModelError, match="boom"):
        await ScriptedModel().complete(request(*history))
    assert (await ScriptedModel().complete(request(history[0]))).content == "fine"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("#script {not json", "not valid JSON"),
        ("#script", "not valid JSON"),
        ('#script {"stops": []}', "expected a JSON object"),
        ("#script [1, 2]", "expected a JSON object"),
        ('#script {"steps": [1]}', "step 0 must be a JSON object"),
        ('#script {"steps": [{}, {"tool_calls": {}}]}', "step 1: tool_calls must be a list"),
        ('#script {"steps": [{"tool_calls": [{"arguments": {}}]}]}', r"tool_calls\[0\].name"),
        ('#script {"steps": [{"tool_calls": [{"name": "x", "arguments": 3}]}]}', "arguments"),
        ('#script {"steps": [{"delay_ms": -1}]}', "delay_ms"),
        ('#script {"steps": [{"content": 3}]}', "content must be a string"),
    ],
)
async def test_invalid_scripts_raise_a_clear_model_error(text: str, message: str) -> None:
    with pytest.raises(ModelError, match="invalid #script") as info:
        await ScriptedModel().complete(request(user(text)))
    assert re.search(message, str(info.value))


async def test_no_user_message_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="no user message"):
        await ScriptedModel().complete(request(SYSTEM))


async def test_tool_call_ids_are_deterministic_and_unique() -> None:
    model = ScriptedModel()
    two_calls = script(STEPS[1])
    a = await model.complete(request(user(two_calls)))
    again = await model.complete(request(user(two_calls)))
    other_session = await model.complete(request(user(two_calls), session_id="s2"))
    ids = [c.id for c in a.tool_calls]
    assert ids == [c.id for c in again.tool_calls]  # a retried step gets the same ids
    assert len(set(ids)) == 2
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids)
    assert not set(ids) & {c.id for c in other_session.tool_calls}

    # Later rounds and later turns of the same session never reuse an id.
    seen = set(ids)
    history = [user(two_calls), assistant(n_calls=2), tool("c0"), tool("c1"), user(two_calls)]
    later = await model.complete(request(*history))
    assert not seen & {c.id for c in later.tool_calls}
    one_then_two = [user(script(STEPS[0], STEPS[1])), assistant(n_calls=1), tool("c0")]
    r0 = await model.complete(request(one_then_two[0]))
    r1 = await model.complete(request(*one_then_two))
    assert len({c.id for c in r0.tool_calls + r1.tool_calls}) == 3


async def test_usage_is_a_deterministic_estimate() -> None:
    req = request(SYSTEM, user(script(*STEPS)))
    a, b = await ScriptedModel().complete(req), await ScriptedModel().complete(req)
    assert a.usage == b.usage
    assert a.usage.prompt_tokens > 0 and a.usage.completion_tokens > 0
    assert a.usage.total_tokens == a.usage.prompt_tokens + a.usage.completion_tokens


async def test_reply_converts_to_an_openai_assistant_message() -> None:
    reply = await ScriptedModel().complete(request(user(script(STEPS[0]))))
    message = reply.to_message()
    assert message["role"] == "assistant"
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["id"] == reply.tool_calls[0].id
    assert call["function"]["arguments"] == '{"path": "a.txt", "content": "A"}'
    plain = await ScriptedModel().complete(request(user("hi")))
    assert "tool_calls" not in plain.to_message()


def test_build_model_selects_the_provider() -> None:
    assert isinstance(build_model("script"), ScriptedModel)
    assert isinstance(build_model(" Script "), ScriptedModel)
    with pytest.raises(ValueError, match="unknown model provider 'gpt'"):
        build_model("gpt")


def test_tool_call_ids_depend_on_the_summary_before_the_user_message_only_when_there_is_one() -> None:
    plain = tool_call_id("s", 1, 0, 0)
    assert tool_call_id("s", 1, 0, 0, "") == plain
    assert tool_call_id("s", 1, 0, 0, "summary of 4 messages (aaaa)") != plain
    assert tool_call_id("s", 1, 0, 0, "summary of 4 messages (aaaa)") != tool_call_id(
        "s", 1, 0, 0, "summary of 4 messages (bbbb)"
    )


async def test_arguments_are_sent_as_written_object_in_order_string_verbatim() -> None:
    # An object keeps the key order written (json.dumps of it); a string goes out as is.
    text = '{ "b":1 ,"a" : "\u00e9 ✓"}'
    step = {"tool_calls": [{"name": "x", "arguments": {"z": 1, "a": "é"}}, {"name": "y", "arguments": text}]}
    reply = await ScriptedModel().complete(request(user(script(step))))
    assert [c.arguments for c in reply.tool_calls] == ['{"z": 1, "a": "\\u00e9"}', text]


async def test_a_streamed_step_tells_its_content_in_pieces_apart() -> None:
    pieces: list[tuple[str, float]] = []
    streamed = script({"content": "abcdefghij", "stream": {"chunk": 4, "delay_ms": 30}})
    req = ModelRequest(
        session_id="s1", model="script", messages=[user(streamed)], tools=[],
        on_text=lambda text: pieces.append((text, time.monotonic())),
    )
    reply = await ScriptedModel().complete(req)
    assert reply.content == "abcdefghij"
    assert [text for text, _ in pieces] == ["abcd", "efgh", "ij"]
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(pieces)]
    assert all(gap >= 0.025 for gap in gaps), gaps
    # Without a callback, or without "stream", the same answer.
    assert (await ScriptedModel().complete(request(user(streamed)))).content == "abcdefghij"


async def test_cancelling_a_streamed_step_stops_its_pieces() -> None:
    pieces: list[str] = []
    third = asyncio.Event()

    def told(text: str) -> None:
        pieces.append(text)
        if len(pieces) == 3:
            third.set()

    streamed = script({"content": "x" * 100, "stream": {"chunk": 1, "delay_ms": 20}})
    req = ModelRequest(session_id="s1", model="script", messages=[user(streamed)], tools=[], on_text=told)
    task = asyncio.create_task(ScriptedModel().complete(req))
    await asyncio.wait_for(third.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stopped_at = len(pieces)
    await asyncio.sleep(0.1)  # five more pieces' time: none may come
    assert len(pieces) == stopped_at < 10


@pytest.mark.parametrize(
    ("stream", "error"),
    [("fast", "stream must be a JSON object"), ({"chunk": 0}, "stream.chunk"), ({"delay_ms": -1}, "stream.delay_ms")],
)
async def test_an_invalid_stream_option_fails_the_step(stream: Any, error: str) -> None:
    with pytest.raises(ModelError, match=error):
        await ScriptedModel().complete(request(user(script({"content": "x", "stream": stream}))))


async def test_usage_counts_the_text_of_every_message_parts_included() -> None:
    text = script({"content": "ok"})
    parts = [{"type": "text", "text": "abcd" * 3}, {"type": "image_url", "image_url": {}}]
    base = request(SYSTEM, user(text))
    more = request(SYSTEM, {"role": "user", "content": parts}, assistant("", 1), tool("c0"), user(text))
    chars = len(SYSTEM["content"]) + len(text)
    extra = 12 + 0 + len('{"success": true}')  # the parts' text, an empty answer, the tool's
    assert (await ScriptedModel().complete(base)).usage.prompt_tokens == (chars + 3) // 4
    assert (await ScriptedModel().complete(more)).usage.prompt_tokens == (chars + extra + 3) // 4


async def test_a_script_too_long_to_keep_is_still_followed() -> None:
    # Scripts up to 16 KiB are parsed once a turn and kept; a longer one is parsed each step.
    long_answer = "x" * 20_000
    req = request(SYSTEM, user(script({"content": long_answer})))
    assert (await ScriptedModel().complete(req)).content == long_answer
    assert (await ScriptedModel().complete(req)).content == long_answer
