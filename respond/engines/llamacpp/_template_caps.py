"""What a chat template can render, found once at load by rendering probe conversations.

Each probe renders a small conversation with marker strings and looks for them in the
text (or for an exception), as llama.cpp's template engine does (common/jinja/caps.cpp):
whether a system message shows, whether tools, calls, results and reasoning show, in which
shape arguments and call ids must come. `adapt_messages` then gives each template that
shape. Nothing is decided from the template's name or source text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from respond.engines.llamacpp._template_adapt import TemplateCaps, adapt_messages, short_call_id

__all__ = ["REASONING_KEYS", "Render", "probe_caps"]

# Renders messages and tools (None: no tools) with the generation prompt; raises what the
# template raises.
Render = Callable[[list[dict[str, Any]], Sequence[Mapping[str, Any]] | None], str]

# Where templates read an assistant message's reasoning from, most common first.
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")

# Marker strings: plain lowercase words, so no template's trim/upper/escaping hides them.
SYSTEM = "probesystemtext"
USER = "probeusertext"
TOOL = "probe_tool_one"
TOOL_2 = "probe_tool_two"
ARGUMENT = "probeargvalue"
ARGUMENT_2 = "probeargsecond"
RESULT = "probetoolresult"
REASONING = "probereasoning"
REASONING_OLD = "probeoldreasoning"
# Call ids in respond's shape (call_ and 48 hex digits).
LONG_ID = "call_0f3c9a7d5e1b2468ace0f3c9a7d5e1b2468ace0f3c9a7d"
LONG_ID_2 = "call_1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a697887"


def _tool(name: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {"arg": {"type": "string", "description": "The argument."}},
        "required": ["arg"],
    }
    return {
        "type": "function",
        "function": {"name": name, "description": "A probe tool.", "parameters": schema},
    }


TOOLS = [_tool(TOOL), _tool(TOOL_2)]


def _call(call_id: str, name: str, value: str) -> dict[str, Any]:
    function = {"name": name, "arguments": {"arg": value}}
    return {"id": call_id, "type": "function", "function": function}


def _result(call_id: str, name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def _user(text: str = USER) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _answer(text: str = "done") -> dict[str, Any]:
    return {"role": "assistant", "content": text}


class _Prober:
    def __init__(self, render: Render) -> None:
        self._render = render

    def text(
        self,
        messages: list[dict[str, Any]],
        caps: TemplateCaps,
        tools: list[dict[str, Any]] | None = None,
    ) -> str | None:
        """The rendering of `messages` adapted to `caps`; None if the template raised."""
        if tools is None and caps.tools_list:
            tools = []
        try:
            return self._render(adapt_messages(messages, caps), tools)
        except Exception:  # any failure of a probe is the probe's answer
            return None


def probe_caps(render: Render) -> TemplateCaps:
    """The template's caps; raises the template's own error if it cannot render even a
    plain user message."""
    probe = _Prober(render)
    caps = TemplateCaps()
    caps = _plain(render, caps)
    caps = _system_role(probe, caps)
    caps = _tools(probe, caps)
    caps = _calls(probe, caps)
    caps = _parallel(probe, caps)
    return _reasoning(probe, caps)


def _plain(render: Render, caps: TemplateCaps) -> TemplateCaps:
    try:
        render([_user()], None)
    except Exception as failure:
        try:
            render([_user()], [])  # Hermes 2 Pro's tool_use template loops over tools
        except Exception:
            raise failure from None
        return dataclasses.replace(caps, tools_list=True)
    return caps


def _system_role(probe: _Prober, caps: TemplateCaps) -> TemplateCaps:
    text = probe.text([{"role": "system", "content": SYSTEM}, _user()], caps)
    return dataclasses.replace(caps, system_role=text is not None and SYSTEM in text)


def _tools(probe: _Prober, caps: TemplateCaps) -> TemplateCaps:
    text = probe.text([_user()], caps, TOOLS[:1])
    return dataclasses.replace(caps, tools=text is not None and TOOL in text)


def _call_shapes(caps: TemplateCaps) -> Iterator[TemplateCaps]:
    for call_id in ("any", "alnum9"):
        for object_arguments in (True, False):
            yield dataclasses.replace(caps, call_id=call_id, object_arguments=object_arguments)


def _calls(probe: _Prober, caps: TemplateCaps) -> TemplateCaps:
    """The first id and argument shape in which the call's argument shows (unmangled)."""
    history = [
        _user(),
        {"role": "assistant", "content": "", "tool_calls": [_call(LONG_ID, TOOL, ARGUMENT)]},
        _result(LONG_ID, TOOL, RESULT),
        _answer(),
        _user(),
    ]
    first_rendered: tuple[TemplateCaps, str] | None = None
    for shape in _call_shapes(caps):
        text = probe.text(history, shape, TOOLS)
        if text is None:
            continue
        first_rendered = first_rendered or (shape, text)
        # An object written as Python's repr of a dict is a template that expects a
        # string: it prints the arguments as they come.
        if ARGUMENT in text and repr({"arg": ARGUMENT}) not in text:
            return _with_calls(shape, text)
    if first_rendered is None:
        return caps
    shape, text = first_rendered
    return dataclasses.replace(shape, tool_results=RESULT in text)


def _with_calls(shape: TemplateCaps, text: str) -> TemplateCaps:
    shown_id = LONG_ID if shape.call_id == "any" else short_call_id(LONG_ID)
    return dataclasses.replace(
        shape, tool_calls=True, tool_results=RESULT in text, call_ids_shown=shown_id in text
    )


def _parallel(probe: _Prober, caps: TemplateCaps) -> TemplateCaps:
    if not caps.tool_calls:
        return caps
    calls = [_call(LONG_ID, TOOL, ARGUMENT), _call(LONG_ID_2, TOOL_2, ARGUMENT_2)]
    history = [
        _user(),
        {"role": "assistant", "content": "", "tool_calls": calls},
        _result(LONG_ID, TOOL, RESULT),
        _result(LONG_ID_2, TOOL_2, RESULT),
        _answer(),
        _user(),
    ]
    # Rendered as given (parallel_calls=True adapts nothing): both calls must show.
    text = probe.text(history, dataclasses.replace(caps, parallel_calls=True), TOOLS)
    shown = text is not None and ARGUMENT in text and ARGUMENT_2 in text
    return dataclasses.replace(caps, parallel_calls=shown)


def _reasoning(probe: _Prober, caps: TemplateCaps) -> TemplateCaps:
    """The field reasoning is read from, and where in the conversation it shows: in the
    current turn (the call loop after the last user message; for a template without
    calls, its last answer) and before the last user message."""
    for key in REASONING_KEYS:
        keyed = dataclasses.replace(caps, reasoning_key=key)
        in_turn = _reasoning_in_turn(probe, keyed)
        in_history = _reasoning_in_history(probe, keyed)
        # Some show it only on the conversation's last message (Apriel): still its field.
        if in_turn or in_history or _reasoning_last(probe, keyed):
            return dataclasses.replace(
                keyed, reasoning_in_turn=in_turn, reasoning_in_history=in_history
            )
    return caps


def _reasoning_in_turn(probe: _Prober, caps: TemplateCaps) -> bool:
    if not caps.tool_calls:
        return _reasoning_last(probe, caps)
    # The call loop: the assistant thought, called, and the result is in.
    thought = {
        "role": "assistant",
        "content": "",
        "reasoning_content": REASONING,
        "tool_calls": [_call(LONG_ID, TOOL, ARGUMENT)],
    }
    text = probe.text([_user(), thought, _result(LONG_ID, TOOL, RESULT)], caps, TOOLS)
    return text is not None and REASONING in text


def _reasoning_last(probe: _Prober, caps: TemplateCaps) -> bool:
    thought = {"role": "assistant", "content": "done", "reasoning_content": REASONING}
    text = probe.text([_user(), thought], caps)
    return text is not None and REASONING in text


def _reasoning_in_history(probe: _Prober, caps: TemplateCaps) -> bool:
    old = {"role": "assistant", "content": "done", "reasoning_content": REASONING_OLD}
    text = probe.text([_user(), old, _user(), _answer(), _user()], caps)
    return text is not None and REASONING_OLD in text
