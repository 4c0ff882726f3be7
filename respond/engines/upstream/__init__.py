"""Engines in front of other servers: Chat Completions or Responses upstreams, in pools."""

from respond.engines.upstream._chat import ChatCompletionsEngine, ChatOptions
from respond.engines.upstream._pool import UpstreamPool
from respond.engines.upstream._responses import ResponsesEngine

__all__ = ["ChatCompletionsEngine", "ChatOptions", "ResponsesEngine", "UpstreamPool"]
