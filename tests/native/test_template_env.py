"""The Jinja environment chat templates are rendered in, and the reshaping of conversations
for templates that need it (small templates written here, each for one feature)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from jinja2.exceptions import SecurityError, TemplateError

from respond.engines.llamacpp._template import (
    ChatTemplate,
    TemplateRefusedError,
    UnusableTemplateError,
)
from respond.engines.llamacpp._template_adapt import TemplateCaps, adapt_messages, short_call_id
from respond.engines.llamacpp._template_env import TemplateEnvironment, frozen


def render(source: str, **context: Any) -> str:
    return TemplateEnvironment().from_string(source).render(**frozen(context))


def test_loop_controls() -> None:
    source = "{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"  # noqa: E501
    assert render(source, xs=[1, 2, 3, 4, 5]) == "13"


def test_a_generation_block_is_its_body() -> None:
    assert render("a{% generation %}b{{ x }}{% endgeneration %}c", x=1) == "ab1c"


def test_a_template_may_mutate_what_it_built() -> None:
    source = (
        "{% set ns = namespace(ids=[]) %}{% set _ = ns.ids.append('a') %}"
        "{% set _ = ns.ids.append('b') %}{{ ns.ids.pop(0) }}{{ ns.ids | length }}"
        "{% set d = {} %}{% set _ = d.update({'k': 1}) %}{{ d.get('k') }}"
    )
    assert render(source) == "a11"


@pytest.mark.parametrize(
    "source",
    [
        "{{ messages.append(1) }}",
        "{{ messages[0].update({'role': 'x'}) }}",
        "{{ messages[0].pop('role') }}",
        "{{ messages.__class__.__subclasses__() }}",
        "{{ namespace.__init__.__globals__ }}",
        "{{ ''.__class__.__mro__ }}",
    ],
)
def test_what_it_was_given_and_python_internals_stay_out_of_reach(source: str) -> None:
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(SecurityError):
        render(source, messages=messages)
    assert messages == [{"role": "user", "content": "hi"}]


def test_tojson_takes_json_dumps_options_and_does_not_escape_html() -> None:
    value = {"b": "<é>", "a": [1, 2]}
    assert render("{{ v | tojson }}", v=value) == '{"b": "<é>", "a": [1, 2]}'
    assert render("{{ v | tojson(sort_keys=true) }}", v=value) == '{"a": [1, 2], "b": "<é>"}'
    assert render("{{ v | tojson(separators=(',', ':')) }}", v=value) == '{"b":"<é>","a":[1,2]}'
    assert (
        render("{{ v | tojson(ensure_ascii=true) }}", v=value) == '{"b": "<\\u00e9>", "a": [1, 2]}'
    )
    assert render("{{ v | tojson(indent=2) }}", v={"a": 1}) == '{\n  "a": 1\n}'


def test_tojson_of_a_generator_is_the_list_it_yields() -> None:
    tools = [{"function": {"name": "a"}}, {"function": {"name": "b"}}]
    source = "{{ tools | map(attribute='function') | tojson }}"
    assert render(source, tools=tools) == '[{"name": "a"}, {"name": "b"}]'


def test_from_json_and_string_methods() -> None:
    assert render("{{ ('{\"a\": 1}' | from_json).a }}") == "1"
    assert render("{{ ' a,b '.strip().split(',') | join('+') }}") == "a+b"
    assert render("{{ 'x_y'.replace('_', '-').startswith('x-') }}") == "True"


def test_a_string_joined_with_a_missing_value_is_the_string() -> None:
    # As llama.cpp's engine reads it (Command R+ prints every parameter's description).
    assert (
        render("{{ 'Args: ' + p.description }}|{{ none_value + '!' }}", p={}, none_value=None)
        == "Args: |!"
    )
    with pytest.raises(TypeError):
        render("{{ 1 + 'a' }}")


def test_raise_exception_and_strftime_now() -> None:
    with pytest.raises(TemplateError, match="no system role"):
        render("{{ raise_exception('no system role') }}")
    assert re.fullmatch(r"\d{4}", render("{{ strftime_now('%Y') }}"))


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("{% for m in messages %}{{ m.content }{% endfor %}", "TemplateSyntaxError (line 1)"),
        ("{% frobnicate %}", "Encountered unknown tag 'frobnicate'"),
        ("{{ raise_exception('This model cannot chat') }}", "This model cannot chat"),
    ],
)
def test_an_unusable_template_says_why(source: str, reason: str) -> None:
    with pytest.raises(UnusableTemplateError, match=re.escape(reason)) as caught:
        ChatTemplate(source)
    assert "(GGUF key tokenizer.chat_template) cannot be used" in str(caught.value)
    assert "respond serve --chat-template-file FILE" in str(caught.value)
    assert "gguf-new-metadata --chat-template-file" in str(caught.value)


def test_an_unusable_template_from_a_file_names_the_file() -> None:
    with pytest.raises(UnusableTemplateError) as caught:
        ChatTemplate("{% frobnicate %}", origin="/etc/respond/chat.jinja")
    assert "its chat template (/etc/respond/chat.jinja) cannot be used" in str(caught.value)


def test_a_conversation_the_template_refuses_is_a_400_naming_its_reason() -> None:
    source = (
        "{% if messages | length > 1 %}{{ raise_exception('one message only') }}{% endif %}"
        "{{ messages[0].content }}"
    )
    two = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(TemplateRefusedError, match="one message only") as caught:
        ChatTemplate(source).render(two)
    assert (caught.value.status, caught.value.param) == (400, "input")


# ------------------------------------------------------------- reshaping


def call(call_id: str, arguments: Any) -> dict[str, Any]:
    function = {"name": "f", "arguments": arguments}
    return {"id": call_id, "type": "function", "function": function}


def test_short_call_ids_are_stable_nine_alphanumerics() -> None:
    ids = {short_call_id(f"call_{n}") for n in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids)
    assert short_call_id("call_1") == short_call_id("call_1")
    assert short_call_id("a1B2c3D4e") == "a1B2c3D4e"  # already in shape: as the model wrote it


def test_call_ids_and_their_results_map_together() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": "", "tool_calls": [call("call_abc", {"a": 1})]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "r"},
    ]
    adapted = adapt_messages(messages, TemplateCaps(tool_calls=True, call_id="alnum9"))
    assert adapted[0]["tool_calls"][0]["id"] == adapted[1]["tool_call_id"]
    assert adapted[1]["tool_call_id"] == short_call_id("call_abc")
    assert messages[1]["tool_call_id"] == "call_abc"  # the caller's messages are untouched


def test_arguments_as_strings_or_objects() -> None:
    messages = [{"role": "assistant", "content": "", "tool_calls": [call("c", {"a": "é"})]}]
    strings = adapt_messages(messages, TemplateCaps(tool_calls=True, object_arguments=False))
    assert strings[0]["tool_calls"][0]["function"]["arguments"] == '{"a": "é"}'
    as_text = [{"role": "assistant", "content": "", "tool_calls": [call("c", '{"a": 1}')]}]
    objects = adapt_messages(as_text, TemplateCaps(tool_calls=True))
    assert objects[0]["tool_calls"][0]["function"]["arguments"] == {"a": 1}


def test_system_messages_join_the_next_user_message() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "system", "content": "Now in French."},
    ]
    adapted = adapt_messages(messages, TemplateCaps(system_role=False))
    assert adapted == [
        {"role": "user", "content": "Be brief.\n\nHi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Now in French."},
    ]


def test_parallel_calls_one_per_message_each_with_its_result() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": "Both.",
            "reasoning_content": "why",
            "tool_calls": [call("c1", {}), call("c2", {})],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
    ]
    adapted = adapt_messages(messages, TemplateCaps(tool_calls=True, parallel_calls=False))
    shape = [
        (m["role"], m.get("content"), [c["id"] for c in m.get("tool_calls", [])]) for m in adapted
    ]
    assert shape == [
        ("assistant", "Both.", ["c1"]),
        ("tool", "r1", []),
        ("assistant", "", ["c2"]),
        ("tool", "r2", []),
    ]
    assert adapted[0]["reasoning_content"] == "why" and "reasoning_content" not in adapted[2]


def test_reasoning_under_the_key_the_template_reads() -> None:
    messages = [{"role": "assistant", "content": "a", "reasoning_content": "r"}]
    adapted = adapt_messages(messages, TemplateCaps(reasoning_key="thinking"))
    assert adapted == [{"role": "assistant", "content": "a", "thinking": "r"}]
