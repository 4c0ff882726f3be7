"""Hosted tools: tools respond runs itself, inside the response (the server-side tool loop).

Each family is one module implementing `Family` (_toolset.py): remote MCP servers
(mcp.py), file_search (file_search.py), code_interpreter (code_interpreter.py), the
hosted shell (shell.py), web_search (web_search.py) and tool_search (tool_search.py). A
family reads a request and offers the run its tools, each a function the model sees with
the executor that runs its calls; its calls become the items of the kind that `runs` it
(kinds/). `families` below is where a family is registered; `Toolsets` combines them for
the run, which names none.

`run_turns` (_loop.py) is the loop that `Responses.events` runs: engine turn -> hosted
calls executed -> next engine turn, all through the run's one EventBuilder.
"""

from respond._config import McpSettings
from respond.containers import ContainerService
from respond.files import FileService
from respond.responses.hosted._base import Approved, Hosted
from respond.responses.hosted._toolset import Deferred, Family, Request, Toolsets
from respond.responses.hosted.code_interpreter import CodeInterpreterTools
from respond.responses.hosted.file_search import FileSearchTools
from respond.responses.hosted.mcp import McpTools
from respond.responses.hosted.shell import HostedShell
from respond.responses.hosted.tool_search import ToolSearch
from respond.responses.hosted.web_search import WebSearch, WebSearchTools
from respond.responses.hosted_call import CallResult, Executor, HostedTool

# The loop (hosted/_loop.py: run_turns) is imported from its module: it needs the
# EventBuilder, which needs these types.
__all__ = [
    "Approved",
    "CallResult",
    "Deferred",
    "Executor",
    "Family",
    "Hosted",
    "HostedTool",
    "Request",
    "Toolsets",
    "WebSearch",
    "families",
]


def families(
    mcp: McpSettings | None = None,
    files: FileService | None = None,
    containers: ContainerService | None = None,
    search: WebSearch | None = None,
) -> Toolsets:
    """The server's hosted families, each given what it runs with (None: without files,
    file_search is refused; without containers, code_interpreter and the hosted shell are
    not run; without a search provider, web_search is not run). tool_search comes last:
    it searches the deferred tools of the families before it."""
    return Toolsets(
        [
            McpTools(mcp),
            FileSearchTools(files),
            CodeInterpreterTools(containers),
            HostedShell(containers),
            WebSearchTools(search),
            ToolSearch(),
        ]
    )
