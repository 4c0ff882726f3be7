"""The engine seam, public: every name an engine author touches.

An engine turns a ChatTurn into Deltas (see `Engine.stream`); respond builds items, events
and stored records from them. `respond.testing` ships a scripted fake engine to test with.
"""

from respond.engines._base import (
    ChatMessage,
    ChatTurn,
    ContextOverflowError,
    Delta,
    Engine,
    EngineError,
    Finish,
    FunctionSpec,
    LoadReport,
    ModelInfo,
    ReasoningDelta,
    Sampling,
    TextDelta,
    TokenLogprob,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
    UnsupportedSchemaError,
    UpstreamLoad,
    Usage,
)

__all__ = [
    "ChatMessage",
    "ChatTurn",
    "ContextOverflowError",
    "Delta",
    "Engine",
    "EngineError",
    "Finish",
    "FunctionSpec",
    "LoadReport",
    "ModelInfo",
    "ReasoningDelta",
    "Sampling",
    "TextDelta",
    "TokenLogprob",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolChoice",
    "UnsupportedSchemaError",
    "UpstreamLoad",
    "Usage",
]
