"""Remote MCP servers as a hosted tool family: `tools: [{"type": "mcp", ...}]`.

`McpTools.prepare` turns a request's mcp tools into the tools it offers the run, before
anything is streamed: each server is resolved (its URL, or a server the operator
configured), checked against the egress allow-list, and listed, unless an earlier
response of the chain already listed it (its stored `mcp_list_tools` item is reused).
A server that cannot be listed is a 424 naming it. A server with `defer_loading` is
listed too, its tools shown only once a tool search loads them (_mcp_deferred.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from respond._config import McpSettings
from respond._ids import new_id
from respond.protocol.errors import APIError
from respond.protocol.items import McpListToolsItem, McpToolInfo
from respond.protocol.requests import (
    CreateResponseBody,
    InputItem,
    McpApprovalRequestInput,
    McpApprovalResponseInput,
    McpCallInput,
    McpListToolsInput,
)
from respond.protocol.tools import CustomTool, FunctionTool, McpTool, ToolSearchTool
from respond.responses.hosted._base import Approved, Hosted, visible_names
from respond.responses.hosted._mcp_deferred import loaded_by, searchable_wire
from respond.responses.hosted._toolset import Request
from respond.responses.hosted.egress import Egress
from respond.responses.hosted_call import HostedTool
from respond.responses.kinds.mcp_call import McpListing
from respond.responses.kinds.namespace import Names

if TYPE_CHECKING:
    from respond.responses.hosted._mcp_client import McpClient

__all__ = ["McpServer", "McpTools"]

_LABEL = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True)
class McpServer:
    """One server a request uses, resolved and allowed."""

    label: str
    url: str
    headers: Mapping[str, str]
    approval: Any  # "always" | "never" | {"always": {...}, "never": {...}}
    allowed: Any  # None | [names] | {"tool_names": [...], "read_only": bool}
    where: str  # "tools[i]", for errors
    tool: McpTool = field(compare=False)  # as the request gave it

    def needs_approval(self, tool: McpToolInfo) -> bool:
        rule = self.approval
        if rule in ("always", None):
            return True
        if rule == "never":
            return False
        if tool.name in (_names(rule.get("always")) or []):
            return True
        # Only the tools a "never" filter names skip approval: the default is "always".
        return tool.name not in (_names(rule.get("never")) or [])

    def admits(self, tool: McpToolInfo) -> bool:
        allowed = self.allowed
        if allowed is None:
            return True
        if isinstance(allowed, list):
            return tool.name in allowed
        names = allowed.get("tool_names")
        if names is not None and tool.name not in names:
            return False
        if allowed.get("read_only"):
            return bool((tool.annotations or {}).get("readOnlyHint"))
        return True


def _names(rule: Any) -> list[str] | None:
    if isinstance(rule, dict) and isinstance(rule.get("tool_names"), list):
        return [str(name) for name in rule["tool_names"]]
    return None


class McpTools:
    """The MCP family: resolves, allows, lists; its clients run the calls."""

    def __init__(self, settings: McpSettings | None = None) -> None:
        self.settings = settings or McpSettings()
        configured = [server.url for server in self.settings.servers.values()]
        self.egress = Egress(
            self.settings.allow, configured, allow_loopback=self.settings.allow_loopback
        )

    def echoed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return tools

    async def prepare(self, request: Request, offered: Hosted) -> Hosted:
        """The servers' tools, an `mcp_list_tools` item first for each server listed now,
        the calls this input approves, and the tools a tool_choice {"type": "mcp"} forces."""
        body, history, new = request.body, request.history, request.new
        servers = self._servers(body)
        if not servers:
            _no_approvals_without_tools(new)
            _forced(body, Hosted())  # a tool_choice naming an MCP server is an error here
            return Hosted()
        # A client that resends the whole conversation sends its listings back too.
        listed = _stored_listings([*history, *new])
        hosted = Hosted()
        tools: list[tuple[McpServer, McpToolInfo]] = []
        for server in servers:
            found = listed.get(server.label)
            if found is None:
                # The listing shows what the model may call: allowed_tools applied.
                found = [tool for tool in await self._list(server) if server.admits(tool)]
                item = McpListToolsItem(id=new_id("mcpl"), server_label=server.label, tools=found)
                hosted.first.append(McpListing(item))
            tools += [(server, tool) for tool in found if server.admits(tool)]
        taken = [t.name for t in body.tools if isinstance(t, FunctionTool | CustomTool)]
        taken += [member.visible for member in Names(body.tools).members]
        names = visible_names([(s.label, t.name) for s, t in tools], taken)
        listing = {s.label: [t for owner, t in tools if owner is s] for s in servers}
        loaded = loaded_by([*history, *new])
        for server, tool in tools:
            visible = names[(server.label, tool.name)]
            hidden = server.tool.defer_loading and not loaded.has(server.label, tool.name)
            hosted.tools[visible] = HostedTool(
                visible=visible,
                server_label=server.label,
                name=tool.name,
                description=tool.description,
                parameters=_object_schema(tool.input_schema),
                needs_approval=server.needs_approval(tool),
                executor=_client(
                    server.url,
                    server.headers,
                    timeout=self.settings.timeout,
                    known=listing[server.label],  # its calls need not list them again
                ),
                deferred=searchable_wire(server.tool, tool.name) if hidden else None,
            )
        hosted.approved = _approved(hosted, history, new)
        hosted.forced = _forced(body, hosted)
        return hosted

    # ------------------------------------------------------------ servers

    def _servers(self, body: CreateResponseBody) -> list[McpServer]:
        servers: list[McpServer] = []
        searching = any(isinstance(tool, ToolSearchTool) for tool in body.tools)
        for index, tool in enumerate(body.tools):
            if not isinstance(tool, McpTool):
                continue
            if tool.defer_loading and not searching:
                raise APIError(
                    400,
                    "An mcp tool with defer_loading is shown to the model only once a tool "
                    "search loads its tools: add a {'type': 'tool_search'} tool, or drop "
                    "defer_loading.",
                    param=f"tools[{index}].defer_loading",
                    code="invalid_value",
                )
            server = self._server(tool, f"tools[{index}]")
            if any(other.label == server.label for other in servers):
                raise APIError(
                    400,
                    f"Duplicate MCP server_label '{server.label}'.",
                    param=f"tools[{index}].server_label",
                    code="invalid_value",
                )
            servers.append(server)
        return servers

    def _server(self, tool: McpTool, where: str) -> McpServer:
        label = tool.server_label
        if not isinstance(label, str) or not _LABEL.fullmatch(label):
            raise APIError(
                400,
                f"Invalid value for '{where}.server_label': 1-64 characters of a-z, A-Z, 0-9, "
                "_ and -.",
                param=f"{where}.server_label",
                code="invalid_value",
            )
        configured = self.settings.servers
        connector = tool.connector_id
        url = tool.server_url
        if connector is not None:
            if connector not in configured:
                known = ", ".join(sorted(configured)) or "none"
                raise APIError(
                    400,
                    f"Unknown connector_id '{connector}': this server configures the MCP "
                    f"servers {known} ([mcp.servers.NAME] in its config file).",
                    param=f"{where}.connector_id",
                    code="invalid_value",
                )
            base = configured[connector]
        elif url is None and label in configured:
            base = configured[label]
        elif isinstance(url, str):
            self.egress.check(url, f"{where}.server_url")
            base = None
        else:
            raise APIError(
                400,
                f"The mcp tool '{label}' needs a server_url, or a connector_id naming a server "
                "this server configures.",
                param=f"{where}.server_url",
                code="missing_required_parameter",
            )
        headers = {**(base.headers if base else {}), **_headers(tool, where)}
        approval = tool.require_approval
        _check_approval(approval, where)
        if approval is None and base is not None:
            approval = base.require_approval
        _check_allowed(tool.allowed_tools, where)
        return McpServer(
            label=label,
            url=base.url if base else str(url),
            headers=headers,
            approval=approval,
            allowed=tool.allowed_tools,
            where=where,
            tool=tool,
        )

    async def _list(self, server: McpServer) -> list[McpToolInfo]:
        from respond.responses.hosted._mcp_client import McpUnavailable  # see _client

        client = _client(server.url, server.headers, timeout=self.settings.timeout)
        try:
            return await client.list_tools()
        except McpUnavailable as exc:
            raise APIError(
                424,
                f"Error retrieving tool list from MCP server: '{server.label}': {exc}.",
                param=server.where,
                code="mcp_list_tools_failed",
            ) from None


def _headers(tool: McpTool, where: str) -> dict[str, str]:
    headers = tool.headers or {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise APIError(400, "headers must be an object of strings.", param=f"{where}.headers")
    out = dict(headers)
    token = tool.authorization
    if token is not None:
        if not isinstance(token, str):
            raise APIError(400, "authorization must be a string.", param=f"{where}.authorization")
        out["Authorization"] = f"Bearer {token}"
    return out


def _check_approval(rule: Any, where: str) -> None:
    if rule is None or rule in ("always", "never"):
        return
    filters = isinstance(rule, dict) and set(rule) <= {"always", "never"}
    if filters and all(_names(rule[key]) is not None for key in rule):
        return
    raise APIError(
        400,
        "require_approval must be 'always', 'never', or "
        '{"always": {"tool_names": [...]}, "never": {"tool_names": [...]}}.',
        param=f"{where}.require_approval",
        code="invalid_value",
    )


def _check_allowed(allowed: Any, where: str) -> None:
    if allowed is None or (isinstance(allowed, list) and all(isinstance(n, str) for n in allowed)):
        return
    if isinstance(allowed, dict) and set(allowed) <= {"tool_names", "read_only"}:
        names = allowed.get("tool_names")
        if names is None or (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            return
    raise APIError(
        400,
        'allowed_tools must be a list of tool names, or {"tool_names": [...], "read_only": bool}.',
        param=f"{where}.allowed_tools",
        code="invalid_value",
    )


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(schema)
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    return out


def _stored_listings(history: Sequence[InputItem]) -> dict[str, list[McpToolInfo]]:
    """The latest successful listing of each server in the context, by server_label."""
    found: dict[str, list[McpToolInfo]] = {}
    for item in history:
        if isinstance(item, McpListToolsInput) and item.error is None:
            found[item.server_label] = [McpToolInfo.model_validate(t) for t in item.tools]
    return found


def _approved(
    hosted: Hosted, history: Sequence[InputItem], new: Sequence[InputItem]
) -> list[Approved]:
    """The approved calls of this input, each matched to its request in the context."""
    requests = {i.id: i for i in [*history, *new] if isinstance(i, McpApprovalRequestInput)}
    done = {i.approval_request_id for i in history if isinstance(i, McpCallInput)}
    approved: list[Approved] = []
    for index, item in enumerate(new):
        if not isinstance(item, McpApprovalResponseInput):
            continue
        request = requests.get(item.approval_request_id)
        if request is None:
            raise APIError(
                400,
                f"No mcp_approval_request found with id '{item.approval_request_id}'.",
                param=f"input[{index}].approval_request_id",
                code="invalid_value",
            )
        if not item.approve or item.approval_request_id in done:
            continue
        tool = hosted.tools.get(hosted.visible(request.server_label, request.name))
        if tool is None or tool.server_label != request.server_label:
            raise APIError(
                400,
                f"The approved call to '{request.name}' needs its MCP server "
                f"'{request.server_label}' in 'tools'.",
                param=f"input[{index}]",
                code="invalid_value",
            )
        approved.append(Approved(request.id, tool, request.arguments))
    return approved


def _no_approvals_without_tools(new: Sequence[InputItem]) -> None:
    for index, item in enumerate(new):
        if isinstance(item, McpApprovalResponseInput) and item.approve:
            raise APIError(
                400,
                "An approved mcp_approval_response needs the mcp tool of its server in 'tools'.",
                param=f"input[{index}]",
                code="invalid_value",
            )


def _forced(body: CreateResponseBody, hosted: Hosted) -> tuple[str, ...] | None:
    choice = body.tool_choice
    if not isinstance(choice, dict) or choice.get("type") != "mcp":
        return None
    label, name = choice.get("server_label"), choice.get("name")
    named = [
        tool
        for tool in hosted.tools.values()
        if tool.server_label == label and (name is None or tool.name == name)
    ]
    if named and all(tool.deferred is not None for tool in named):
        raise APIError(
            400,
            f"tool_choice names tools of the deferred MCP server '{label}' that no tool "
            "search has loaded yet: let the model search first (tool_choice 'required' or "
            "'auto'), then name them.",
            param="tool_choice",
            code="invalid_value",
        )
    names = tuple(tool.visible for tool in named if tool.deferred is None)
    if not names:
        what = f"tool '{name}' of the MCP server '{label}'" if name else f"MCP server '{label}'"
        raise APIError(
            400,
            f"tool_choice names the {what}, which is not among this request's MCP tools.",
            param="tool_choice",
            code="invalid_value",
        )
    return names


def _client(
    url: str, headers: Mapping[str, str], *, timeout: float, known: Sequence[McpToolInfo] = ()
) -> McpClient:
    # Imported at the first MCP tool: the mcp package is a quarter of respond's import time
    # (0.33 of 1.3 s), which every `respond` command and every server start pays.
    from respond.responses.hosted._mcp_client import McpClient

    return McpClient(url, headers, timeout=timeout, known=known)
