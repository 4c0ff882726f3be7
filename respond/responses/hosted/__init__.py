"""Hosted tools: tools respond runs itself, inside the response (the server-side tool loop).

A hosted tool family (remote MCP servers, mcp.py; file_search, file_search.py) gives the run:
- the tools the model sees as functions (`HostedTool`), each saying whether a call needs
  the client's approval first;
- the items to emit before generation (an `mcp_list_tools` per newly listed server);
- the execution of a call (`Executor.call`), bounded by a timeout and stopped by the run's
  cancellation.

`Hosted` is what `Responses.prepare` assembles for one run; `run_turns` (_loop.py) is the
loop that `Responses.events` runs: engine turn -> hosted calls executed -> next engine turn,
all through the run's one EventBuilder.
"""

from respond.responses.hosted._base import (
    Approved,
    CallResult,
    Executor,
    Hosted,
    HostedTool,
)

# The loop (hosted/_loop.py: run_turns) is imported from its module: it needs the
# EventBuilder, which needs these types.
__all__ = ["Approved", "CallResult", "Executor", "Hosted", "HostedTool"]
