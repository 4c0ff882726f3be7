"""An engine in front of another Responses server (`--upstream-api responses`).

respond keeps the state: the turn it forwards is already fully expanded (stored history,
conversation, new input), sent with `store: false`, so chaining works even when the
upstream is stateless. The upstream's events are mapped back to Deltas and re-sequenced
by our own EventBuilder; its ids and sequence numbers are not reused.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from respond.engines._base import (
    ChatMessage,
    ChatTurn,
    Delta,
    Engine,
    Finish,
    LoadReport,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from respond.engines._calls import RepeatGuard
from respond.engines._tools import visible_tools
from respond.engines.upstream._common import (
    CallAdmission,
    StrictArguments,
    affinity_keys,
    json_schema_format,
    sampling_body,
    token_logprobs,
)
from respond.engines.upstream._pool import UpstreamPool, upstream_error

__all__ = ["ResponsesEngine", "ResponsesTranslator", "responses_request"]


# ---------------------------------------------------------------- request


def responses_request(turn: ChatTurn, *, model: str) -> dict[str, Any]:
    """The upstream /responses body: full input, no state kept upstream, streamed."""
    body: dict[str, Any] = {
        "model": model,
        "input": [item for message in turn.messages for item in _items(message)],
        "store": False,
        "stream": True,
        **sampling_body(turn.sampling, "responses"),
    }
    if turn.max_output_tokens is not None:
        body["max_output_tokens"] = turn.max_output_tokens
    if turn.reasoning_effort is not None:
        body["reasoning"] = {"effort": turn.reasoning_effort}
    if turn.routing.prompt_cache_key:
        body["prompt_cache_key"] = turn.routing.prompt_cache_key
    offered = visible_tools(turn)
    if offered:
        body["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
                "strict": tool.strict,
            }
            for tool in offered
        ]
        choice = turn.tool_choice
        body["tool_choice"] = (
            {"type": "function", "name": offered[0].name}
            if choice.mode == "required" and len(offered) == 1
            else choice.mode
        )
        body["parallel_tool_calls"] = turn.parallel_tool_calls
    spec = json_schema_format(turn)
    if spec is not None:
        body["text"] = {"format": {"type": "json_schema", **spec}}
    elif turn.json_object:
        body["text"] = {"format": {"type": "json_object"}}
    return body


def _items(message: ChatMessage) -> list[dict[str, Any]]:
    """One chat message as Responses input items.

    Earlier reasoning is not sent: a stateless upstream (store false) accepts only the
    reasoning items it produced itself, in its own encrypted form.
    """
    if message.role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id or "",
                "output": message.content,
            }
        ]
    items: list[dict[str, Any]] = []
    if message.content or message.images or not message.tool_calls:
        if message.role == "assistant":
            content: list[dict[str, Any]] = [{"type": "output_text", "text": message.content}]
        else:
            content = [{"type": "input_text", "text": message.content}]
            content += [{"type": "input_image", "image_url": url} for url in message.images]
        items.append({"type": "message", "role": message.role, "content": content})
    items += [
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        }
        for call in message.tool_calls
    ]
    return items


# ---------------------------------------------------------------- events back


class ResponsesTranslator:
    """Upstream Responses events -> Deltas. Items arrive one at a time, so no buffering."""

    def __init__(self, turn: ChatTurn) -> None:
        self._admission = CallAdmission(turn)
        self._inputs = StrictArguments(turn)  # custom tools' inputs, checked when done
        self._dropped: set[str] = set()
        self._streamed: set[str] = set()  # item ids whose content came as deltas
        self.finish: Finish | None = None
        self.usage: Usage | None = None

    def feed(self, event: Mapping[str, Any]) -> list[Delta]:
        if event.get("object") == "response":  # a whole response, not streamed
            return self._whole(event)
        kind = str(event.get("type", ""))
        item_id = str(event.get("item_id", ""))
        if kind == "response.output_text.delta":
            self._streamed.add(item_id)
            logprobs = token_logprobs({"content": event.get("logprobs")})
            return [TextDelta(str(event.get("delta", "")), logprobs)]
        if kind in ("response.reasoning.delta", "response.reasoning_text.delta"):
            self._streamed.add(item_id)
            return [ReasoningDelta(str(event.get("delta", "")))]
        if kind == "response.reasoning_summary_text.delta":
            self._streamed.add(item_id)
            return [ReasoningDelta(str(event.get("delta", "")), summary=True)]
        if kind == "response.function_call_arguments.delta":
            if item_id in self._dropped:
                return []
            self._streamed.add(item_id)
            return [ToolCallArgumentsDelta(str(event.get("delta", "")))]
        if kind == "response.output_item.added":
            return self._added(event.get("item") or {})
        if kind == "response.output_item.done":
            return self._done(event.get("item") or {})
        if kind in ("response.completed", "response.incomplete"):
            return self._terminal(kind, event.get("response") or {})
        if kind == "response.failed":
            error = (event.get("response") or {}).get("error") or {}
            raise upstream_error(f"The upstream response failed: {error.get('message', error)}")
        if kind == "error":
            raise upstream_error(f"The upstream reported an error: {_error_message(event)}")
        return []

    def _whole(self, response: Mapping[str, Any]) -> list[Delta]:
        out: list[Delta] = []
        for item in response.get("output") or ():
            out += self._added(item) + self._done(item)
        if response.get("status") == "failed":
            error = response.get("error") or {}
            raise upstream_error(f"The upstream response failed: {error.get('message', error)}")
        kind = "response.incomplete" if response.get("status") == "incomplete" else ""
        return out + self._terminal(kind, response)

    def _added(self, item: Mapping[str, Any]) -> list[Delta]:
        if item.get("type") != "function_call":
            return []
        name = str(item.get("name", ""))
        if not self._admission.admit(name):
            self._dropped.add(str(item.get("id", "")))
            return []
        return [ToolCallStart(call_id=str(item.get("call_id") or item.get("id")), name=name)]

    def _done(self, item: Mapping[str, Any]) -> list[Delta]:
        item_id = str(item.get("id", ""))
        kind = item.get("type")
        streamed = item_id in self._streamed
        if kind == "function_call":
            if item_id in self._dropped:
                return []
            arguments = str(item.get("arguments", ""))
            self._inputs.check_input(str(item.get("name", "")), arguments)
            head = [ToolCallArgumentsDelta(arguments)] if arguments and not streamed else []
            return [*head, ToolCallEnd()]
        if streamed:
            return []
        # An item that came whole, without deltas: emit its content as one delta.
        if kind == "message":
            text = "".join(str(p.get("text", "")) for p in item.get("content") or ())
            return [TextDelta(text)] if text else []
        if kind == "reasoning":
            out: list[Delta] = []
            text = "".join(str(p.get("text", "")) for p in item.get("content") or ())
            if text:
                out.append(ReasoningDelta(text))
            summary = "".join(str(p.get("text", "")) for p in item.get("summary") or ())
            if summary:
                out.append(ReasoningDelta(summary, summary=True))
            return out
        return []

    def _terminal(self, kind: str, response: Mapping[str, Any]) -> list[Delta]:
        usage = response.get("usage")
        if isinstance(usage, dict):
            inputs = usage.get("input_tokens_details") or {}
            outputs = usage.get("output_tokens_details") or {}
            self.usage = Usage(
                input_tokens=int(usage.get("input_tokens") or 0),
                output_tokens=int(usage.get("output_tokens") or 0),
                cached_tokens=int(inputs.get("cached_tokens") or 0),
                reasoning_tokens=int(outputs.get("reasoning_tokens") or 0),
            )
        reason = (response.get("incomplete_details") or {}).get("reason")
        cut = kind == "response.incomplete" and reason in (None, "max_output_tokens")
        self.finish = Finish("length" if cut else "stop")
        return [*([self.usage] if self.usage else []), self.finish]


def _error_message(event: Mapping[str, Any]) -> str:
    error = event.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or json.dumps(error))
    return str(event.get("message") or error)


# ---------------------------------------------------------------- the engine


class ResponsesEngine(Engine):
    def __init__(
        self,
        pool: UpstreamPool,
        *,
        alias: str,
        upstream_model: str,
        vision: bool = True,
    ) -> None:
        self.pool = pool
        self.upstream_model = upstream_model
        self.info = pool.model_info(alias, backend="responses", vision=vision)

    async def health(self) -> list[dict[str, Any]]:
        return await self.pool.health()

    def load_report(self) -> LoadReport:
        return self.pool.load_report()

    async def aclose(self) -> None:
        await self.pool.aclose()

    async def count_tokens(self, turn: ChatTurn) -> int:
        """Counted by the upstream: POST /responses/input_tokens with the full input."""
        body = responses_request(turn, model=self.upstream_model)
        for key in ("stream", "store", "include", "top_logprobs"):
            body.pop(key, None)
        async with self.pool.stream(
            "/responses/input_tokens", body, affinity=affinity_keys(turn), cancel=turn.cancel
        ) as upstream:
            data = await upstream.read_json()
        if not isinstance(data.get("input_tokens"), int):
            raise upstream_error(f"The upstream did not count the input tokens: {data}"[:500])
        return int(data["input_tokens"])

    async def stream(self, turn: ChatTurn) -> AsyncGenerator[Delta, None]:
        translator = ResponsesTranslator(turn)
        body = responses_request(turn, model=self.upstream_model)
        guard = RepeatGuard()  # an exact repeat of a call in this turn is dropped
        async with self.pool.stream(
            "/responses", body, affinity=affinity_keys(turn), cancel=turn.cancel
        ) as upstream:
            async for event in upstream.json():
                for delta in guard.feed(translator.feed(event)):
                    yield delta
                if translator.finish is not None:
                    return
            if turn.cancel.is_set():
                return
        raise upstream_error(
            f"The upstream {upstream.member.base_url} closed the stream before its response ended."
        )
