"""The engine seam, public: every name an engine author touches.

An engine turns a ChatTurn into Deltas (see `Engine.stream`); respond builds items, events
and stored records from them. `respond.testing` ships a scripted fake engine to test with.
"""

from respond.engines._base import (
    ChatMessage,
    ChatTurn,
    ConstraintError,
    ContextOverflowError,
    Delta,
    Engine,
    EngineError,
    Finish,
    FunctionSpec,
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
    Usage,
)

__all__ = [
    "ChatMessage",
    "ChatTurn",
    "ConstraintError",
    "ContextOverflowError",
    "Delta",
    "Engine",
    "EngineError",
    "Finish",
    "FunctionSpec",
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
    "Usage",
]
