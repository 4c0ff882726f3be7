"""The Chat Completions and Responses translations, both ways, as pure functions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from respond.engines import (
    ChatMessage,
    ChatTurn,
    EngineError,
    Finish,
    FunctionSpec,
    InputGrammar,
    ReasoningDelta,
    Routing,
    Sampling,
    SchemaFormat,
    TextDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
    Usage,
    visible_tools,
)
from respond.engines.upstream._chat import ChatOptions, ChatTranslator, chat_request
from respond.engines.upstream._common import affinity_keys
from respond.engines.upstream._pool import refusal
from respond.engines.upstream._responses import ResponsesTranslator, responses_request
from tests.support.gbnf import accepts, bundled_vocab

WEATHER = FunctionSpec("get_weather", "Weather by city", {"type": "object"}, strict=True)
TIME = FunctionSpec("get_time", None, {"type": "object"}, strict=False)


def turn(**kwargs: Any) -> ChatTurn:
    base: dict[str, Any] = {"model": "m", "messages": [ChatMessage(role="user", content="hi")]}
    return ChatTurn(**{**base, **kwargs})


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def call(index: int, call_id: str = "", name: str = "", args: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if call_id:
        entry["id"] = call_id
    if name:
        entry["function"]["name"] = name
    return entry


def run(translator: ChatTranslator, chunks: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for item in chunks:
        out += translator.feed(item)
    return out + translator.end()


# ---------------------------------------------------------------- chat request


def test_chat_request_maps_every_field() -> None:
    messages = [
        ChatMessage(role="developer", content="be brief"),
        ChatMessage(role="user", content="look", images=("data:image/png;base64,AAAA",)),
        ChatMessage(
            role="assistant",
            reasoning="thought",
            tool_calls=(ToolCall("call_1", "get_weather", '{"city":"Oslo"}'),),
        ),
        ChatMessage(role="tool", content="sunny", tool_call_id="call_1"),
    ]
    body = chat_request(
        turn(
            messages=messages,
            tools=[WEATHER, TIME],
            parallel_tool_calls=False,
            json_schema={"type": "object"},
            sampling=Sampling(temperature=0.2, top_p=0.9, logprobs=True, top_logprobs=3, seed=7),
            max_output_tokens=64,
            reasoning_effort="low",
            schema_format=SchemaFormat(name="answer", strict=True),
        ),
        model="up-model",
        options=ChatOptions(max_tokens_param="max_completion_tokens"),
    )
    assert body["model"] == "up-model"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
            "reasoning_content": "thought",
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    ]
    assert [t["function"]["strict"] for t in body["tools"]] == [True, False]
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather by city",
            "parameters": {"type": "object"},
            "strict": True,
        },
    }
    assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is False
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
    }
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body
    assert body["reasoning_effort"] == "low"
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.2, 0.9, 7)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 3)


def test_chat_request_allowed_tools_are_filtered_and_named_choice_forced() -> None:
    only = chat_request(
        turn(tools=[WEATHER, TIME], tool_choice=ToolChoice("auto", ("get_time",))), model="m"
    )
    assert [t["function"]["name"] for t in only["tools"]] == ["get_time"]
    assert only["tool_choice"] == "auto"
    forced = chat_request(
        turn(tools=[WEATHER, TIME], tool_choice=ToolChoice("required", ("get_weather",))),
        model="m",
        options=ChatOptions(forced_calls="native"),
    )
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    plain = chat_request(turn(max_output_tokens=5, json_object=True), model="m")
    assert "tools" not in plain and plain["max_tokens"] == 5
    assert plain["response_format"] == {"type": "json_object"}
    picky = chat_request(
        turn(json_schema={"type": "object"}), model="m", schema_style="json_object_schema"
    )
    assert picky["response_format"] == {"type": "json_object", "schema": {"type": "object"}}


# ---------------------------------------------------------------- chat response


def test_interleaved_parallel_calls_become_well_formed_items() -> None:
    deltas = run(
        ChatTranslator(turn(tools=[WEATHER, TIME])),
        [
            chunk({"role": "assistant"}),
            chunk({"tool_calls": [call(0, "call_a", "get_weather")]}),
            chunk({"tool_calls": [call(1, "call_b", "get_time")]}),
            chunk({"tool_calls": [call(0, args='{"city": ')]}),
            chunk({"tool_calls": [call(1, args='{"tz": ')]}),
            chunk({"tool_calls": [call(0, args='"Paris"}')]}),
            chunk({"tool_calls": [call(1, args='"UTC"}')]}),
            chunk({}, "tool_calls"),
            {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}},
        ],
    )
    assert deltas == [
        ToolCallStart("call_a", "get_weather"),
        ToolCallArgumentsDelta('{"city": '),
        ToolCallArgumentsDelta('"Paris"}'),
        ToolCallEnd(),
        ToolCallStart("call_b", "get_time"),
        ToolCallArgumentsDelta('{"tz": '),
        ToolCallArgumentsDelta('"UTC"}'),
        ToolCallEnd(),
        Usage(9, 4),
        Finish("stop"),
    ]


def test_local_tool_choice_enforcement_drops_calls() -> None:
    chunks = [
        chunk({"tool_calls": [call(0, "c0", "get_weather", "{}")]}),
        chunk({"tool_calls": [call(1, "c1", "get_time", "{}")]}),
        chunk({"tool_calls": [call(2, "c2", "not_offered", "{}")]}),
        chunk({}, "tool_calls"),
    ]
    names = [
        d.name
        for d in run(ChatTranslator(turn(tools=[WEATHER, TIME], parallel_tool_calls=False)), chunks)
        if isinstance(d, ToolCallStart)
    ]
    assert names == ["get_weather"]
    none = run(ChatTranslator(turn(tools=[WEATHER], tool_choice=ToolChoice("none"))), chunks)
    assert none == [Finish("stop")]
    capped = run(ChatTranslator(turn(tools=[WEATHER, TIME], max_tool_calls=2)), chunks)
    assert [d.name for d in capped if isinstance(d, ToolCallStart)] == ["get_weather", "get_time"]


def test_reasoning_fields_and_think_tags_become_reasoning() -> None:
    deltas = run(
        ChatTranslator(turn()),
        [
            chunk({"reasoning_content": "a"}),
            chunk({"reasoning": "b"}),
            chunk({"content": "<thi"}),
            chunk({"content": "nk>c</th"}),
            chunk({"content": "ink>answer <b"}),
            chunk({"content": "old>"}, "length"),
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 3,
                    "completion_tokens": 2,
                    "prompt_tokens_details": {"cached_tokens": 1},
                    "completion_tokens_details": {"reasoning_tokens": 2},
                },
            },
        ],
    )
    reasoning = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert (reasoning, text) == ("abc", "answer <bold>")
    assert deltas[-2:] == [Usage(3, 2, cached_tokens=1, reasoning_tokens=2), Finish("length")]


def test_logprobs_come_back_on_text() -> None:
    lp = {
        "content": [
            {
                "token": "Hi",
                "logprob": -0.5,
                "bytes": [72, 105],
                "top_logprobs": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105]}],
            }
        ]
    }
    translator = ChatTranslator(turn())
    (delta,) = translator.feed(
        {"choices": [{"index": 0, "delta": {"content": "Hi"}, "logprobs": lp}]}
    )
    assert isinstance(delta, TextDelta)
    assert delta.logprobs[0].token == "Hi" and delta.logprobs[0].bytes == (72, 105)
    assert delta.logprobs[0].top == (("Hi", -0.5, (72, 105)),)


# ---------------------------------------------------------------- responses upstream


def test_responses_request_expands_messages_and_keeps_no_state() -> None:
    messages = [
        ChatMessage(role="system", content="sys"),
        ChatMessage(role="user", content="q", images=("http://x/i.png",)),
        ChatMessage(
            role="assistant", reasoning="r", tool_calls=(ToolCall("c1", "get_weather", "{}"),)
        ),
        ChatMessage(role="tool", content="out", tool_call_id="c1"),
    ]
    body = responses_request(
        turn(messages=messages, tools=[WEATHER], max_output_tokens=9, reasoning_effort="high"),
        model="up",
    )
    assert body["store"] is False and body["stream"] is True
    assert body["input"] == [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "sys"}]},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "q"},
                {"type": "input_image", "image_url": "http://x/i.png"},
            ],
        },
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "out"},
    ]
    assert body["tools"][0]["strict"] is True and body["max_output_tokens"] == 9
    assert body["reasoning"] == {"effort": "high"}


def test_responses_events_map_to_deltas() -> None:
    translator = ResponsesTranslator(turn(tools=[WEATHER]))
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {}},
        {"type": "response.reasoning.delta", "item_id": "rs", "delta": "hm"},
        {
            "type": "response.output_item.added",
            "item": {"type": "function_call", "id": "fc", "call_id": "c9", "name": "get_weather"},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc", "delta": "{}"},
        {"type": "response.output_item.done", "item": {"type": "function_call", "id": "fc"}},
        {
            "type": "response.output_item.done",
            "item": {"type": "message", "id": "m", "content": [{"text": "whole"}]},
        },
        {
            "type": "response.incomplete",
            "response": {
                "incomplete_details": {"reason": "max_output_tokens"},
                "usage": {"input_tokens": 4, "output_tokens": 2},
            },
        },
    ]
    out: list[Any] = []
    for event in events:
        out += translator.feed(event)
    assert out == [
        ReasoningDelta("hm"),
        ToolCallStart("c9", "get_weather"),
        ToolCallArgumentsDelta("{}"),
        ToolCallEnd(),
        TextDelta("whole"),
        Usage(4, 2),
        Finish("length"),
    ]


def test_a_whole_chat_completion_translates_too() -> None:
    translator = ChatTranslator(turn(tools=[WEATHER]))
    message = {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        ],
    }
    deltas = run(
        translator,
        [
            {
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3},
            }
        ],
    )
    assert deltas == [
        TextDelta("Checking."),
        ToolCallStart("c1", "get_weather"),
        ToolCallArgumentsDelta("{}"),
        ToolCallEnd(),
        Usage(5, 3),
        Finish("stop"),
    ]


def test_a_whole_responses_object_translates_too() -> None:
    translator = ResponsesTranslator(turn())
    deltas = translator.feed(
        {
            "object": "response",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [
                {"type": "reasoning", "id": "r", "summary": [{"text": "hm"}]},
                {"type": "message", "id": "m", "content": [{"type": "output_text", "text": "x"}]},
            ],
            "usage": {"input_tokens": 2, "output_tokens": 1},
        }
    )
    assert deltas == [
        ReasoningDelta("hm", summary=True),
        TextDelta("x"),
        Usage(2, 1),
        Finish("length"),
    ]


def test_reasoning_summaries_stay_summaries() -> None:
    translator = ResponsesTranslator(turn())
    deltas = translator.feed(
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs", "delta": "short"}
    )
    deltas += translator.feed(
        {"type": "response.reasoning_text.delta", "item_id": "rs", "delta": "long"}
    )
    assert deltas == [ReasoningDelta("short", summary=True), ReasoningDelta("long")]


# ---------------------------------------------------------------- shared between both


def test_tool_choice_none_shows_no_tools_to_either_upstream() -> None:
    hidden = turn(tools=[WEATHER, TIME], tool_choice=ToolChoice("none"))
    assert visible_tools(hidden) == []
    assert "tools" not in chat_request(hidden, model="m")
    assert "tools" not in responses_request(hidden, model="m")


def test_responses_upstream_calls_pass_the_same_admission_policy() -> None:
    def names(translator: ResponsesTranslator) -> list[str]:
        out: list[Any] = []
        for call_id, name in (("c0", "get_weather"), ("c1", "get_time"), ("c2", "not_offered")):
            item = {"type": "function_call", "id": call_id, "call_id": call_id, "name": name}
            out += translator.feed({"type": "response.output_item.added", "item": item})
            arguments = {"item_id": call_id, "delta": "{}"}
            out += translator.feed({"type": "response.function_call_arguments.delta", **arguments})
            out += translator.feed({"type": "response.output_item.done", "item": item})
        assert sum(isinstance(d, ToolCallEnd) for d in out) == len(
            [d for d in out if isinstance(d, ToolCallStart)]
        )
        return [d.name for d in out if isinstance(d, ToolCallStart)]

    both = [WEATHER, TIME]
    assert names(ResponsesTranslator(turn(tools=both))) == ["get_weather", "get_time"]
    assert names(ResponsesTranslator(turn(tools=both, parallel_tool_calls=False))) == [
        "get_weather"
    ]
    assert names(ResponsesTranslator(turn(tools=both, tool_choice=ToolChoice("none")))) == []
    assert names(ResponsesTranslator(turn(tools=[TIME]))) == ["get_time"]


def test_routing_and_schema_format_reach_the_responses_body_and_the_pool() -> None:
    routed = turn(
        json_schema={"type": "object"},
        schema_format=SchemaFormat(name="answer", description="the answer", strict=False),
        routing=Routing(
            response_id="resp_2",
            previous_response_id="resp_1",
            conversation="conv_1",
            prompt_cache_key="k",
        ),
        sampling=Sampling(temperature=0.3, logprobs=True, top_logprobs=2, seed=9),
    )
    body = responses_request(routed, model="m")
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "answer",
            "schema": {"type": "object"},
            "description": "the answer",
            "strict": False,
        }
    }
    assert body["prompt_cache_key"] == "k"
    assert body["include"] == ["message.output_text.logprobs"] and body["top_logprobs"] == 2
    assert "seed" not in body and "logprobs" not in body
    assert affinity_keys(routed) == ["pck:k", "conv:conv_1", "resp:resp_1", "resp:resp_2"]
    assert affinity_keys(turn()) == []
    unnamed = chat_request(turn(json_schema={"type": "object"}), model="m")
    assert unnamed["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": {"type": "object"}},
    }


# ---------------------------------------------------------------- forced calls, strict arguments

CITY = FunctionSpec(
    "get_weather",
    "Weather by city",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    strict=True,
)


def test_a_forced_call_is_asked_for_as_structured_output() -> None:
    body = chat_request(
        turn(
            messages=[ChatMessage("system", "Be brief."), ChatMessage("user", "Oslo?")],
            tools=[CITY, TIME],
            tool_choice=ToolChoice("required"),
        ),
        model="m",
    )
    assert "tools" not in body and "tool_choice" not in body
    schema = body["response_format"]["json_schema"]["schema"]
    assert [option["properties"]["name"] for option in schema["anyOf"]] == [
        {"const": "get_weather"},
        {"const": "get_time"},
    ]
    assert schema["anyOf"][0]["properties"]["arguments"] == CITY.parameters
    system, user = body["messages"]
    assert system["role"] == "system" and system["content"].startswith("Be brief.")
    assert '"name": "get_weather"' in system["content"] and "must call" in system["content"]
    assert user == {"role": "user", "content": "Oslo?"}
    named = chat_request(turn(tools=[CITY], tool_choice=ToolChoice("required")), model="m")
    assert named["response_format"]["json_schema"]["schema"]["properties"]["name"] == {
        "const": "get_weather"
    }
    assert named["messages"][0]["role"] == "system"  # added in front of the user's
    picky = chat_request(
        turn(tools=[CITY], tool_choice=ToolChoice("required")),
        model="m",
        schema_style="json_object_schema",
    )
    assert picky["response_format"]["type"] == "json_object"


DATE = FunctionSpec(
    "set_date",
    "A day",
    {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]},
    grammar=InputGrammar("regex", r"^\d{4}-\d{2}-\d{2}$"),
)


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    yield from bundled_vocab()


def test_a_forced_custom_call_is_sent_as_a_llama_cpp_grammar_where_the_upstream_takes_one(
    vocab: Any,
) -> None:
    forced = turn(tools=[DATE, CITY], tool_choice=ToolChoice("required"))
    body = chat_request(forced, model="m", options=ChatOptions(grammars="gbnf"))
    assert "response_format" not in body and "tools" not in body
    grammar = body["grammar"]
    assert accepts(vocab, grammar, '{"name": "set_date", "arguments": {"input": "2026-12-02"}}')
    assert accepts(vocab, grammar, '{"name": "get_weather", "arguments": {"city": "Oslo"}}')
    assert not accepts(vocab, grammar, '{"name": "set_date", "arguments": {"input": "soon"}}')
    # Only checked afterwards where the upstream takes no grammar, or no tool has one.
    checked = chat_request(forced, model="m", options=ChatOptions(grammars="check"))
    assert "grammar" not in checked and "response_format" in checked
    plain = turn(tools=[CITY], tool_choice=ToolChoice("required"))
    assert "grammar" not in chat_request(plain, model="m", options=ChatOptions(grammars="gbnf"))


def test_the_forced_json_becomes_one_call() -> None:
    forced_turn = turn(tools=[CITY, TIME], tool_choice=ToolChoice("required"))
    deltas = run(
        ChatTranslator(forced_turn, [CITY, TIME]),
        [
            chunk({"content": '{"name": "get_weather", '}),
            chunk({"content": '"arguments": {"city": "Oslo"}}'}, "stop"),
        ],
    )
    start, arguments, end, finish = deltas
    assert isinstance(start, ToolCallStart) and start.name == "get_weather"
    assert arguments == ToolCallArgumentsDelta('{"city": "Oslo"}')
    assert (end, finish) == (ToolCallEnd(), Finish("stop"))
    cut = run(ChatTranslator(forced_turn, [CITY]), [chunk({"content": '{"name": "get_'}, "length")])
    assert cut == [Finish("length")]  # out of tokens before the call was whole: no call


def test_a_forced_answer_that_is_not_a_call_fails_with_the_reason() -> None:
    forced_turn = turn(tools=[CITY], tool_choice=ToolChoice("required"))
    for text, reason in (("hello", "did not answer"), ('{"name": "rm"}', "names none")):
        try:
            run(ChatTranslator(forced_turn, [CITY]), [chunk({"content": text}, "stop")])
        except EngineError as exc:
            assert reason in exc.message and exc.status == 502
        else:
            raise AssertionError(f"{text!r} was accepted as a call")


def test_strict_arguments_are_checked_against_the_schema() -> None:
    good = run(
        ChatTranslator(turn(tools=[CITY])),
        [chunk({"tool_calls": [call(0, "c1", "get_weather", '{"city": "Oslo"}')]}, "stop")],
    )
    assert [type(d) for d in good] == [ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd, Finish]
    for args in ('{"town": "Oslo"}', '{"city": 3}', '{"city": "Os'):
        try:
            run(
                ChatTranslator(turn(tools=[CITY])),
                [chunk({"tool_calls": [call(0, "c1", "get_weather", args)]}, "stop")],
            )
        except EngineError as exc:
            assert exc.code == "invalid_tool_arguments" and "get_weather" in exc.message
        else:
            raise AssertionError(f"{args!r} passed as strict arguments")
    loose = FunctionSpec("get_weather", None, CITY.parameters, strict=False)
    anything = run(
        ChatTranslator(turn(tools=[loose])),
        [chunk({"tool_calls": [call(0, "c1", "get_weather", "not json")]}, "stop")],
    )
    assert ToolCallArgumentsDelta("not json") in anything  # not strict: passed on as is


def test_upstream_refusals_keep_their_4xx() -> None:
    assert refusal(
        400, "the request exceeds the available context size", "exceed_context_size_error"
    ) == {
        "status": 400,
        "code": "context_length_exceeded",
        "param": "input",
    }
    image = refusal(500, "image input is not supported - hint: ... provide the mmproj")
    assert image == {"status": 400, "code": "unsupported_content", "param": "input"}
    assert refusal(422, "messages.1.content: field required")["status"] == 400
    assert refusal(429, "slow down")["status"] == 429
    for status in (401, 404, 500, 503):
        assert refusal(status, "something else") == {}  # respond's side or the upstream's: 502


def test_a_call_the_upstream_cut_at_its_token_limit_ends_with_generation() -> None:
    """finish_reason "length" inside a call's arguments: the call's end says so, and the
    response makes it incomplete instead of handing over `{"tz":` as whole."""
    deltas = run(
        ChatTranslator(turn(tools=[TIME])),  # not strict: respond does not check the JSON
        [
            chunk({"tool_calls": [call(0, "call_a", "get_time", '{"tz":')]}),
            chunk({}, "length"),
        ],
    )
    assert deltas[-2:] == [ToolCallEnd(at_end=True), Finish("length")]
