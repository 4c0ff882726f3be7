"""Which tools the model sees: one answer for every engine."""

from __future__ import annotations

from respond.engines._base import ChatTurn, FunctionSpec

__all__ = ["visible_tools"]


def visible_tools(turn: ChatTurn) -> list[FunctionSpec]:
    """The functions the model is shown: none under "none", else the allowed subset.

    Under tool_choice "none" a model that is shown tools may still write call markup,
    which would then reach the client as text; showing none keeps it from trying.
    """
    choice = turn.tool_choice
    if choice.mode == "none":
        return []
    if choice.allowed is None:
        return list(turn.tools)
    allowed = set(choice.allowed)
    return [tool for tool in turn.tools if tool.name in allowed]
