"""respond: the OpenAI Responses API for local and self-hosted models."""

from respond._version import __version__
from respond.app import create_app
from respond.engines import (
    ChatMessage,
    ChatTurn,
    Delta,
    Engine,
    EngineError,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

__all__ = [
    "ChatMessage",
    "ChatTurn",
    "Delta",
    "Engine",
    "EngineError",
    "Finish",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "Usage",
    "__version__",
    "create_app",
]
