"""Every template of the pinned set (tests/support/templates.py), served on the bundled weights.

Each template is one model of a config file: the bundled GGUF with `chat_template_file` set
to the template (the file is mapped once, so a server holds a batch of them cheaply), and
the bundled model as it ships beside them (its own template, which shows no tools). What
each model gets is what detection gives it (respond/engines/formats/_detect.py), so a
format added to respond is tested here as soon as it is detected; a template whose format
is unknown gets the Hermes fallback prompt and is tested through it.

For every one: the format is named in /v1/models and the log; a forced call (`required`
or a named function) is a `function_call` whose arguments follow the schema; its round
trip (the output by previous_response_id) answers 200; and the second prompt reuses the
whole first turn from the prompt cache, the first prompt and every token of the call, which
holds only if the history renders the call as the model wrote it, character for character
(the slot's tokens are matched to the next prompt by their text: engines/llamacpp/
_respell.py). Where a template's history cannot hold the turn as written, the test names it
and says how far the reuse goes. Parallel calls come where the family writes them, one call
where it does not; reasoning comes back where the prompt opens it; reasoning.effort reaches
each kind of template variable.

`make test` serves a subset, one template per group, `make e2e-all` every template
(RESPOND_ALL_TEMPLATES=1). The rule (tests/support/template_formats.py): the templates are
grouped by the class of their format's stream parser ("fallback" where the format is
unknown) and whether their generation prompt opens a reasoning block, and the subset is
the first template of each group in STEMS' order (the bundled model first). Per template,
the unit matrix (tests/native/test_formats.py, test_call_lead.py) proves detection,
rendering, parse-back and the grammar; what this file adds (sampling under the grammar,
reuse of the whole first turn) belongs to the engine and each parser. So the exact Stops
below are held for every template by `make e2e-all`, run before a format change lands, and
in `make test` for the templates of the subset. Adding a template or a format adds a group
where it brings a new one; tests/native/test_template_subset.py holds the rule to it, and
`test_the_subset_is_one_template_per_group` names each template served here and its group.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from respond.engines.formats import FORMATS, HERMES, ChatFormat, ProbeCall
from tests.support.gguf_copies import with_template
from tests.support.server import Server, start_server
from tests.support.template_formats import BUNDLED, Group, first_of_each_group, group_of
from tests.support.templates import template_dir, template_paths

TIMEOUT = 900  # generous: on a loaded two-core machine a forced call can take minutes
BATCH = 16  # models per server: about 60 MB each (ctx_size 2048), the weights mapped once;
# sixteen hold the subset and the front doors (`make test` starts one server)
CTX = 2048
STEMS = [BUNDLED, *(path.stem for path in template_paths())]  # BUNDLED: its own template
ALL_TEMPLATES = os.environ.get("RESPOND_ALL_TEMPLATES") == "1"  # make e2e-all
FRONT_DOORS = ["Qwen3-Coder", "openai-gpt-oss-120b"]  # non-Hermes formats, streamed
FALLBACK_PROMPT = "hermes fallback prompt (format unknown)"

CITY = {"type": "string", "enum": ["Paris", "Rome", "Berlin"]}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": CITY, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": SCHEMA,
    "strict": True,
}
TIME = {
    "type": "function",
    "name": "get_time",
    "description": "The local time in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": CITY},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
TOOLS = [WEATHER, TIME]
INSTRUCTIONS = "You help travellers."  # a system message: Gemma 2 refuses the role
QUESTION = "What is the weather in Paris this week?"
TWO_CITIES = "What is the weather in Paris and in Rome this week?"
# The longest call markup of the set is about 120 of the bundled model's tokens (DSML,
# Kimi K3's typed tags, Hunyuan's): room for it after reasoning, which a forced call caps
# at half of max_output_tokens.
FORCED_MAX = 320
PARALLEL_MAX = 520

# ---------------------------------------------------------------- exceptions, exact


@dataclass(frozen=True)
class Stop:
    """Where a template's history of a turn parts from the turn as the model read and wrote
    it. `in_prompt`: the first prompt's text from the last `where` on is not in the history
    (what its generation prompt ends with); else the history holds the first prompt and
    then `where`, which the model did not write."""

    where: str
    in_prompt: bool
    why: str


# The templates whose round trip reuses less than the whole first turn, and why. Exact: a
# template that starts or stops holding the whole turn fails the test.
def _prompt(where: str, why: str) -> Stop:
    return Stop(where, True, why)


def _call(where: str, why: str) -> Stop:
    return Stop(where, False, why)


OPENED_THINK = "its generation prompt opens the reasoning block, which its history leaves out"
STOPS: dict[str, Stop] = {
    # The first prompt ends with what the history does not hold.
    "Apriel-1.6-15b-Thinker-fixed": _prompt("Here are my reasoning steps:\n", OPENED_THINK),
    "CohereForAI-c4ai-command-r-plus-tool_use": _prompt(
        "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Write 'Action:'",
        "its generation prompt adds a system turn asking for the action, which no history has",
    ),
    "NVIDIA-Nemotron-Nano-v2": _prompt("<think>\n", OPENED_THINK),
    "Qwen-QwQ-32B": _prompt("<think>\n", OPENED_THINK),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": _prompt("<think>\n", OPENED_THINK),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": _prompt("<think>\n", OPENED_THINK),
    "llama-cpp-deepseek-r1": _prompt("<think>\n", OPENED_THINK),
    "deepseek-ai-DeepSeek-V3.2": _prompt(
        "<think></think>", "its history writes the closed block as </think>\n\n alone"
    ),
    "google-gemma-4-31B-it": _prompt(
        "<|channel>thought\n<channel|>", "its generation prompt holds an empty thought channel"
    ),
    "google-gemma-4-31B-it-interleaved": _prompt(
        "<|channel>thought\n<channel|>", "its generation prompt holds an empty thought channel"
    ),
    "mistralai-Mistral-Nemo-Instruct-2407": _prompt(
        INSTRUCTIONS, "its template shows the system message only with a last user message"
    ),
}
# Two calls where one call alone is held as written.
ONE_ID = "the model wrote one id for both calls: the second got one of respond's"
PARALLEL_STOPS = {
    "upstage-Solar-Open-100B": _call("<|tool_call:begin|>call_", ONE_ID),
    "unsloth-Apriel-1.5": _call('}, "id": "call_', ONE_ID),
}
# Templates whose prompt opens a reasoning block when reasoning.effort asks for thinking:
# what the model writes first is reasoning, a reasoning item. Exact, as STOPS.
OPENS_REASONING = {
    "Apriel-1.6-15b-Thinker-fixed",
    "Bielik-11B-v3.0-Instruct",
    "Cohere2MoE",
    "GLM-4.7-Flash",
    "Kimi-K3",
    "MiniMax-M2",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "NVIDIA-Nemotron-Nano-v2",
    "Qwen-QwQ-32B",
    "Qwen3.5-4B",
    "Reka-Edge",
    "Spark2.5",
    "StepFun3.5-Flash",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    "deepseek-ai-DeepSeek-V3.1",
    "deepseek-ai-DeepSeek-V3.2",
    "deepseek-ai-DeepSeek-V4",
    "deepseek-ai-DeepSeek-V4-Flash-0731",
    "inclusionai-ling-3.0-flash",
    "llama-cpp-deepseek-r1",
    "llama-cpp-rwkv-world",
    "openbmb-MiniCPM5-1B",
    "poolside-Laguna-S-2.1",
    "poolside-Laguna-XS-2.1",
    "poolside-Laguna-XS.2",
    "tencent-Hy3",
}
# One template per kind of variable that carries reasoning.effort (formats/_detect.py's
# effort_variables): a low effort, what its prompt then ends with or says, and for "high".
EFFORT_KINDS = {
    # enable_thinking false: an empty think block closes the generation prompt.
    "Qwen-Qwen3-0.6B": ("none", r"<think>\n\n</think>\n\n\Z", r"assistant\n\Z"),
    # thinking: the block is opened, or opened and closed at once.
    "deepseek-ai-DeepSeek-V3.1": ("none", r"<think></think>\Z", r"<think>\Z"),
    # reasoning_effort: Harmony's system message.
    "openai-gpt-oss-120b": ("low", r"\nReasoning: low\n", r"\nReasoning: high\n"),
    # thinking_effort: Kimi K3's system message names it.
    "Kimi-K3": ("low", r"thinking_effort=low`", r"thinking_effort=high`"),
}


@functools.cache
def subset() -> dict[str, Group]:
    """The templates `make test` serves, and the group each stands for."""
    return first_of_each_group(STEMS)


SUBSET = {} if ALL_TEMPLATES else subset()
SERVED = STEMS if ALL_TEMPLATES else list(SUBSET)


# ---------------------------------------------------------------- the servers


class Pool:
    """The servers of the templates served, BATCH models each in SERVED's order (and the
    FRONT_DOORS the subset leaves out after them), one running at a time: pytest runs the
    tests of one template together (the module-scoped `served` fixture is parametrized by
    template), so each batch's server starts once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.batch: int | None = None
        self.server: Server | None = None

    def serving(self, stem: str) -> Server:
        pooled = SERVED + [door for door in FRONT_DOORS if door not in SERVED]
        batch = pooled.index(stem) // BATCH
        if batch != self.batch or self.server is None:
            self.stop()
            self.server = self._start(pooled[batch * BATCH : (batch + 1) * BATCH], batch)
            self.batch = batch
        return self.server

    def _start(self, stems: list[str], batch: int) -> Server:
        folder = self.folder / f"batch{batch}"
        folder.mkdir()  # once: a batch started again would be a test order gone wrong
        tables = []
        for stem in stems:
            table = f'[models."{stem}"]\ngguf = "bundled"\nctx_size = {CTX}\nparallel = 1\n'
            if stem != BUNDLED:
                table += f'chat_template_file = "{template_dir() / f"{stem}.jinja"}"\n'
            tables.append(table + "threads = 2\n")
        config = folder / "respond.toml"
        config.write_text("\n".join(tables))
        # Debug logs each prompt the model reads; JSON keeps each record one line.
        return start_server(
            folder, "--config", str(config), "--embedding-model", "none",
            "--log-level", "debug", "--log-format", "json",
        )  # fmt: skip

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    pool = Pool(tmp_path_factory.mktemp("templates"))
    yield pool
    pool.stop()


@pytest.fixture(scope="module", params=SERVED)
def served(request: pytest.FixtureRequest, pool: Pool) -> tuple[str, Server]:
    stem: str = request.param
    return stem, pool.serving(stem)


# ---------------------------------------------------------------- helpers


def post(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{server.base_url}/responses", json=body, timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def records(server: Server) -> list[dict[str, Any]]:
    """The server's JSON log records (the ready banner, printed as text, is left out)."""
    text = server.log()
    lines = text.splitlines()
    if not text.endswith("\n"):
        lines = lines[:-1]  # a record the server is still writing
    return [json.loads(line) for line in lines if line.startswith("{")]


def last_message(server: Server, prefix: str) -> str:
    found = [r["message"] for r in records(server) if r["message"].startswith(prefix)]
    assert found, f"no log record starts with {prefix!r}"
    message: str = found[-1]
    return message


def last_generation(server: Server) -> tuple[int, int]:
    """(prompt tokens read, of them reused from the slot) of the last generation: the
    tests send one request at a time, so it is the last request's."""
    found = re.search(r"prompt (\d+), cached (\d+)", last_message(server, "generation "))
    assert found
    return int(found[1]), int(found[2])


def last_prompt(server: Server) -> str:
    """The text of the last prompt a model read (--log-level debug)."""
    return last_message(server, "prompt, ").split(":\n", 1)[1]


def chat_format(server: Server, stem: str) -> str:
    models = httpx.get(f"{server.base_url}/models", timeout=30).json()["data"]
    described: str = next(m for m in models if m["id"] == stem)["meta"]["chat_format"]
    return described


def format_of(described: str) -> ChatFormat | None:
    """The format a server's description names (None: the fallback prompt)."""
    named = [f for f in FORMATS if described.startswith(f"tools: {f.label}, reasoning: ")]
    return max(named, key=lambda f: len(f.label), default=None)


def calls_text(server: Server, stem: str, response: dict[str, Any]) -> str:
    """The text of the response's calls as its model's format writes them."""
    fmt = format_of(chat_format(server, stem)) or HERMES
    calls = [
        ProbeCall(call["name"], json.loads(call["arguments"]), call["call_id"])
        for call in calls_of(response)
    ]
    return fmt.render(calls)


def calls_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == "function_call"]


def check_arguments(call: dict[str, Any]) -> None:
    """The call's arguments follow its tool's schema (the grammar wrote them)."""
    arguments = json.loads(call["arguments"])
    assert arguments["city"] in CITY["enum"], call
    if call["name"] == "get_weather":
        assert set(arguments) == {"city", "days"} and 1 <= arguments["days"] <= 7, call
    else:
        assert call["name"] == "get_time" and set(arguments) == {"city"}, call


def forced_choice(stem: str) -> Any:
    """`required` for every other template, get_weather by name for the rest."""
    return "required" if STEMS.index(stem) % 2 else {"type": "function", "name": "get_weather"}


# ---------------------------------------------------------------- every template


@pytest.mark.parametrize(
    ("stem", "group"), [pytest.param(s, g, id=f"{s}={g.label}") for s, g in SUBSET.items()]
)
def test_the_subset_is_one_template_per_group(stem: str, group: Group) -> None:
    """Each template served (none with RESPOND_ALL_TEMPLATES=1: all are) is the first of
    its group in STEMS' order; the id names the group."""
    assert group_of(stem) == group
    before = STEMS[: STEMS.index(stem)]
    assert all(group_of(other) != group for other in before)


def test_the_format_is_named_in_models_meta_and_the_log(served: tuple[str, Server]) -> None:
    stem, server = served
    described = chat_format(server, stem)
    assert described.startswith("tools: ") and ", reasoning: " in described
    logged = last_message(server, f"chat format of '{stem}': ")
    assert logged.startswith(f"chat format of '{stem}': {described}")
    known = FALLBACK_PROMPT not in described
    assert logged.endswith(" (rendered probe)" if known else " (fallback)"), logged


def test_a_forced_call_and_its_round_trip_reuse_the_first_turn(
    served: tuple[str, Server],
) -> None:
    stem, server = served
    choice = forced_choice(stem)
    first = post(server, {
        "model": stem, "instructions": INSTRUCTIONS, "input": QUESTION, "tools": TOOLS,
        "tool_choice": choice, "parallel_tool_calls": False, "temperature": 0,
        "max_output_tokens": FORCED_MAX,
    })  # fmt: skip
    assert first["status"] == "completed", first
    calls = calls_of(first)
    assert len(calls) == 1, first["output"]
    check_arguments(calls[0])
    if choice != "required":
        assert calls[0]["name"] == "get_weather"
    output = {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "sunny"}
    # The same prompt again: instructions do not carry over to the next response, and a
    # named function is the only tool the model was shown.
    shown = TOOLS if choice == "required" else [WEATHER]
    turn = {
        "model": stem, "instructions": INSTRUCTIONS, "previous_response_id": first["id"],
        "input": [output], "tools": shown,
    }  # fmt: skip
    check_the_round_trip(server, stem, first, turn)


def check_the_round_trip(
    server: Server,
    stem: str,
    first: dict[str, Any],
    turn: dict[str, Any],
    stops: dict[str, Stop] = STOPS,
) -> None:
    """`turn` (the outputs of `first`'s calls) answers 200, and its prompt reuses the whole
    first turn, or as much of it as STOPS says the template's history holds."""
    wrote = last_message(server, "output, ").split(":\n", 1)[1]  # first's text, markup and all
    before = last_prompt(server)
    second = post(server, {**turn, "temperature": 0, "max_output_tokens": 1})
    assert second["status"] in ("completed", "incomplete"), second
    history = last_prompt(server)
    read, reused = last_generation(server)
    usage = second["usage"]
    counted = httpx.post(f"{server.base_url}/responses/input_tokens", json=turn, timeout=TIMEOUT)
    assert usage["input_tokens"] == counted.json()["input_tokens"]
    # Usage counts the prompt as tokenized; the slot may read it in its own tokens (more of
    # them): what it spared is what it did not read.
    assert usage["input_tokens_details"]["cached_tokens"] == usage["input_tokens"] - (read - reused)
    prompt = first["usage"]["input_tokens"]
    # The slot holds the first prompt and every token the model wrote, less the end of its
    # turn where it wrote one (sampled, never read back).
    written = first["usage"]["output_tokens"]
    seen = (first["usage"], usage, read, reused, before[-80:], wrote, history[len(before) - 80 :])
    # Where the history parts from the first prompt and the text the model wrote.
    parts = next(
        (i for i, (a, b) in enumerate(zip(before + wrote, history, strict=False)) if a != b),
        min(len(before + wrote), len(history)),
    )
    stop = stops.get(stem)
    if stop is None:  # nowhere: it renders the whole turn as it was read and written
        assert parts == len(before + wrote), seen
        assert prompt + written - 1 <= reused <= prompt + written, seen
    elif stop.in_prompt:  # in the first prompt, from its last `stop.where` on
        assert before.rindex(stop.where) <= parts < len(before) and reused < prompt, seen
        # The calls themselves are in the history as the model wrote them.
        written = calls_text(server, stem, first)
        assert written in wrote and written in history[before.rindex(stop.where) :], seen
    else:  # in the text the model wrote, inside the `stop.where` the history writes there
        start = history.rfind(stop.where, 0, parts + len(stop.where))
        assert len(before) <= parts < len(before + wrote), seen
        assert start != -1 and start <= parts < start + len(stop.where), seen
        assert prompt <= reused < prompt + written - 1, seen


def test_parallel_calls_where_the_family_writes_them(served: tuple[str, Server]) -> None:
    """Asked for two cities with parallel calls allowed (two at most: max_tool_calls), the
    model writes one call or two (the bundled model may stop after one: the grammar lets
    it); each is valid and none repeats another (a repeated call ends the turn). A family
    that writes one call a turn writes one whatever parallel_tool_calls says. The outputs
    of all of them round-trip, and the calls are in the history as the model wrote them."""
    stem, server = served
    first = post(server, {
        "model": stem, "instructions": INSTRUCTIONS, "input": TWO_CITIES, "tools": [WEATHER],
        "tool_choice": "required",
        "parallel_tool_calls": True, "max_tool_calls": 2, "temperature": 0,
        "max_output_tokens": PARALLEL_MAX,
    })  # fmt: skip
    assert first["status"] == "completed", first
    calls = calls_of(first)
    assert calls, first["output"]
    for call in calls:
        check_arguments(call)
    assert len({call["arguments"] for call in calls}) == len(calls), calls
    assert len({call["call_id"] for call in calls}) == len(calls), calls
    family = format_of(chat_format(server, stem))
    single = family is not None and family.single
    if single:
        assert len(calls) == 1, calls
    outputs = [
        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
        for call in calls
    ]
    turn = {
        "model": stem,
        "instructions": INSTRUCTIONS,
        "previous_response_id": first["id"],
        "input": outputs,
        "tools": [WEATHER],
    }
    if len(calls) == 2 or single:
        check_the_round_trip(server, stem, first, turn, {**STOPS, **PARALLEL_STOPS})
    else:  # the model began the same call again: its start was written, and is in no history
        second = post(server, {**turn, "temperature": 0, "max_output_tokens": 1})
        assert second["status"] in ("completed", "incomplete"), second


def test_reasoning_comes_back_where_the_prompt_opens_it(served: tuple[str, Server]) -> None:
    """With reasoning.effort "high", a template whose prompt then opens its reasoning block
    gives a reasoning item (what the model writes first is reasoning); the others answer
    with a message (the bundled model never learnt to open these blocks itself). For one
    template of each kind of effort variable, a lower effort changes the prompt as the
    template says it should."""
    stem, server = served
    body = {"model": stem, "input": "Is 91 a prime number?", "temperature": 0}
    answer = post(server, {**body, "reasoning": {"effort": "high"}, "max_output_tokens": 4})
    kinds = [item["type"] for item in answer["output"]]
    details = answer["usage"]["output_tokens_details"]
    if stem in OPENS_REASONING:
        assert kinds[0] == "reasoning", answer["output"]
        text = "".join(part["text"] for part in answer["output"][0]["content"])
        assert text.strip() and details["reasoning_tokens"] > 0, answer
    else:
        assert "reasoning" not in kinds and details["reasoning_tokens"] == 0, answer["output"]
    if stem in EFFORT_KINDS:
        low, low_prompt, high_prompt = EFFORT_KINDS[stem]
        high = last_prompt(server)
        post(server, {**body, "reasoning": {"effort": low}, "max_output_tokens": 1})
        lower = last_prompt(server)
        assert re.search(low_prompt, lower) and not re.search(high_prompt, lower), lower
        assert re.search(high_prompt, high) and not re.search(low_prompt, high), high


# ---------------------------------------------------------------- the other front doors


@pytest.mark.parametrize("served", FRONT_DOORS, indirect=True)
def test_a_streamed_forced_call_through_chat_completions(served: tuple[str, Server]) -> None:
    stem, server = served
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0) as client:
        stream = client.chat.completions.create(
            model=stem,
            messages=[{"role": "user", "content": QUESTION}],
            tools=[{"type": "function", "function": {"name": "get_weather",
                    "description": "Weather in a city", "parameters": SCHEMA, "strict": True}}],
            tool_choice="required",
            parallel_tool_calls=False,
            temperature=0,
            max_tokens=300,
            stream=True,
            timeout=TIMEOUT,
        )  # fmt: skip
        chunks = list(stream)
        deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
        calls = [call for delta in deltas for call in delta.tool_calls or []]
        assert (
            calls and calls[0].id and calls[0].function and calls[0].function.name == "get_weather"
        )
        assert {call.index for call in calls} == {0}
        arguments = "".join(call.function.arguments or "" for call in calls if call.function)
        check_arguments({"name": "get_weather", "arguments": arguments})
        assert not "".join(delta.content or "" for delta in deltas)  # no markup as text
        finished = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices]
        assert finished[-1] == "tool_calls"


@pytest.mark.parametrize("served", FRONT_DOORS, indirect=True)
def test_a_streamed_forced_call_through_messages(served: tuple[str, Server]) -> None:
    stem, server = served
    with anthropic.Anthropic(
        base_url=server.url, api_key="unused", max_retries=0
    ) as client, client.messages.stream(
        model=stem,
        max_tokens=300,
        tools=[{"name": "get_weather", "description": "Weather in a city",
                "input_schema": SCHEMA}],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"temperature": 0},  # not a parameter of this SDK's stream()
        timeout=TIMEOUT,
    ) as stream:  # fmt: skip
        events = list(stream)
        message = stream.get_final_message()
    uses = [block for block in message.content if block.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather", message.content
    assert uses[0].id.startswith("toolu_")
    check_arguments({"name": "get_weather", "arguments": json.dumps(uses[0].input)})
    assert not [block for block in message.content if block.type == "text"]
    # The call's input comes as JSON deltas (gpt-oss may reason in a thinking block first).
    index = message.content.index(uses[0])
    partial = [e for e in events if e.type == "content_block_delta" and e.index == index]
    assert partial and all(e.delta.type == "input_json_delta" for e in partial)
    assert message.stop_reason == "tool_use"


# ---------------------------------------------------------------- served alone


def test_chat_format_overrides_the_template(tmp_path: Path) -> None:
    """--chat-template-file gives the bundled model Qwen3-Coder's template, whose format
    --chat-format then overrides."""
    template = template_dir() / "Qwen3-Coder.jinja"
    server = start_server(
        tmp_path, "--chat-template-file", str(template), "--alias", "m", "--threads", "1",
        "--embedding-model", "none", env={"RESPOND_CHAT_FORMAT": "hermes"},
    )  # fmt: skip
    try:
        models = httpx.get(f"{server.base_url}/models", timeout=30).json()
        assert models["data"][0]["meta"]["chat_format"] == "tools: hermes json, reasoning: none"
        log = server.log()
        assert f"chat template of 'm': {template}, instead of the GGUF's" in log
        assert "chat template of 'm': tools, parallel calls" in log  # Qwen3-Coder's caps
        assert "(--chat-format)" in log
    finally:
        server.stop()


def test_an_unknown_chat_format_is_refused_with_the_known_ones() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "respond", "serve", "--chat-format", "nope"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "invalid choice" in refused.stderr and "'nope'" in refused.stderr
    assert "qwen3-coder" in refused.stderr


def test_a_model_whose_template_cannot_be_used_stops_the_start(tmp_path: Path) -> None:
    """As llama-server: a server whose model cannot be used exits non-zero, saying why."""
    copy = with_template("{% for m in messages %}{{ m.content }{% endfor %}", tmp_path, "broken")
    stopped = _serve_until_it_exits(tmp_path, "-m", str(copy))
    assert stopped.returncode == 1
    assert "a model could not load, stopping" in stopped.stderr
    assert "chat template (GGUF key tokenizer.chat_template)" in stopped.stderr
    assert "line 1" in stopped.stderr and "--chat-template-file" in stopped.stderr
    assert "respond is ready" not in stopped.stderr


def test_a_file_that_is_no_gguf_stops_the_start(tmp_path: Path) -> None:
    readme = Path(__file__).parents[2] / "README.md"
    stopped = _serve_until_it_exits(tmp_path, "-m", str(readme))
    assert stopped.returncode == 1
    assert f"could not load model {readme}" in stopped.stderr


def _serve_until_it_exits(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "respond", "serve", *args, "--port", "0",
         "--embedding-model", "none", "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
