"""respond: the OpenAI Responses API for local and self-hosted models.

`create_app(engines)` is the server as an ASGI app; the engine seam (`respond.engines`)
is re-exported here, so `from respond import Engine, TextDelta, ...` works too.
"""

from respond._version import __version__
from respond.app import create_app
from respond.engines import (
    ChatMessage,
    ChatTurn,
    ConstraintError,
    ContextOverflowError,
    Delta,
    DeltaOrder,
    Engine,
    EngineError,
    Finish,
    FunctionSpec,
    LoadReport,
    ModelInfo,
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
    visible_tools,
)

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
    "__version__",
    "create_app",
    "visible_tools",
]
