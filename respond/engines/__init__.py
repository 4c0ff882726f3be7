"""The engine seam, public: every name an engine author touches.

An engine turns a ChatTurn into Deltas (see `Engine.stream` for the rules their order
follows, checked by `DeltaOrder`); respond builds items, events and stored records from
them. `respond.testing` ships scripted fake engines to test with.
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
    LoadReport,
    ModelInfo,
    OverloadedError,
    ReasoningDelta,
    Routing,
    Sampling,
    SchemaFormat,
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
from respond.engines._order import DeltaOrder
from respond.engines._tools import visible_tools

__all__ = [
    "ChatMessage",
    "ChatTurn",
    "ConstraintError",
    "ContextOverflowError",
    "Delta",
    "DeltaOrder",
    "Engine",
    "EngineError",
    "Finish",
    "FunctionSpec",
    "LoadReport",
    "ModelInfo",
    "OverloadedError",
    "ReasoningDelta",
    "Routing",
    "Sampling",
    "SchemaFormat",
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
    "visible_tools",
]
