"""The response resource a run starts from: the request's settings echoed back.

A response shows what it ran with: the request's fields as sent, and the server's defaults
where the request left one unset (temperature, max_output_tokens, truncation, ...), so a
client reading it back knows what the engine was asked for.
"""

from __future__ import annotations

from typing import Any

from respond.protocol.requests import CreateResponseBody, TextFormat, TextFormatJsonSchema
from respond.protocol.resource import ReasoningConfig, ResponseResource, TextConfig
from respond.responses.kinds import echo

__all__ = ["echo_format", "echo_tool_choice", "resource"]


def resource(
    body: CreateResponseBody,
    model: str,
    *,
    response_id: str,
    created_at: int,
    temperature: float,
    max_output_tokens: int | None,
) -> ResponseResource:
    """The response `body` starts, before any output: queued when it runs in the background.

    `temperature` and `max_output_tokens` are what the run uses (the request's, else the
    server's defaults)."""
    reasoning = body.reasoning
    return ResponseResource(
        id=response_id,
        created_at=created_at,
        status="queued" if body.background else "in_progress",
        model=model,
        previous_response_id=body.previous_response_id,
        instructions=body.instructions,
        tools=[echoed for tool in body.tools if (echoed := echo(tool)) is not None],
        tool_choice=echo_tool_choice(body.tool_choice),
        truncation=body.truncation or "disabled",
        parallel_tool_calls=body.parallel_tool_calls,
        text=TextConfig(
            format=echo_format(body.text.format),
            verbosity=body.text.verbosity or "medium",
        ),
        top_p=1.0 if body.top_p is None else body.top_p,
        presence_penalty=body.presence_penalty or 0.0,
        frequency_penalty=body.frequency_penalty or 0.0,
        top_logprobs=body.top_logprobs or 0,
        temperature=temperature,
        reasoning=ReasoningConfig(
            effort=reasoning.effort if reasoning else None,
            summary=reasoning.summary if reasoning else None,
        ),
        max_output_tokens=max_output_tokens,
        max_tool_calls=body.max_tool_calls,
        store=True if body.store is None else body.store,
        background=bool(body.background),
        service_tier=body.service_tier or "default",
        metadata=body.metadata or {},
        safety_identifier=body.safety_identifier,
        prompt_cache_key=body.prompt_cache_key,
        user=body.user,
    )


def echo_format(fmt: TextFormat) -> dict[str, Any]:
    """`text.format` as the response shows it."""
    echoed: dict[str, Any] = fmt.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(fmt, TextFormatJsonSchema):
        # The response echoes every json_schema field; strict defaults to false as in OpenAI's API.
        echoed.update(description=fmt.description, strict=bool(fmt.strict))
    return echoed


def echo_tool_choice(choice: Any) -> str | dict[str, Any]:
    """`tool_choice` as the response shows it: a mode as sent, an object without its nulls."""
    if isinstance(choice, str | dict):
        return choice
    dumped: dict[str, Any] = choice.model_dump(mode="json", exclude_none=True)
    return dumped
