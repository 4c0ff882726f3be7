"""The seam of an output-item kind: how one item streams, and how items replay.

`Item` is one output item while it streams. The EventBuilder opens it (`added`), feeds it
the deltas it `takes`, and closes it; the item returns the events of each step, without
sequence numbers (the builder numbers and folds them). An item of a hosted call stays
`pending` after its close, until the run has executed it (`executed`).

`Replay` is the chat an engine sees, rebuilt from input items in order: each kind's
replay function appends what its items were to the model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar

from respond import _model_json as model_json
from respond.engines import _base as d
from respond.engines._base import ChatMessage, FunctionSpec, ToolCall
from respond.protocol import events as ev
from respond.protocol.items import OutputItem
from respond.responses.hosted_call import CallResult, HostedTool

__all__ = [
    "Shown",
    "LateCall",
    "QuietCall",
    "EchoTool",
    "HostedCall",
    "Item",
    "Kind",
    "Replay",
    "ReplayItem",
    "Shared",
    "Status",
]

Status = Literal["completed", "incomplete", "failed"]
ItemT = TypeVar("ItemT", bound=OutputItem)

# (server_label, tool name) -> the function name the model was shown for that server's hosted
# tool (an MCP server's tool: `Hosted.visible`), in replayed items as in the request.
HostedNames = Callable[[str, str], str]


@dataclass
class Shared:
    """What the items of one response share."""

    # Set when the client asked for reasoning.encrypted_content: each reasoning item is
    # done with its text sealed into encrypted_content.
    seal_reasoning: Callable[[str], str] | None = None
    # OpenAI's reasoning_text.* event names, or the Open Responses reasoning.* ones.
    openai_reasoning: bool = True
    # The files the response's searches found (file id -> name), which its answer cites.
    cited: dict[str, str] = field(default_factory=dict)
    # The files the response's code wrote into containers: file id -> (container id,
    # path), cited by its answer as container_file_citation.
    written: dict[str, tuple[str, str]] = field(default_factory=dict)
    # The pages the response's web searches found or opened (URL -> title), cited as
    # url_citation where its answer names them.
    linked: dict[str, str] = field(default_factory=dict)


class Item(ABC, Generic[ItemT]):
    """One output item being streamed; what it shares with the others, its id and its
    index are bound when it opens."""

    prefix: ClassVar[str]  # of its item id
    pending = False  # closed, waiting for the run to execute it
    # Added only once its call is complete (its item is made from the whole call); a call
    # cut short before then has no item at all.
    late: ClassVar[bool] = False

    shared: Shared
    item_id: str
    index: int

    def bind(self, shared: Shared, item_id: str, index: int) -> None:
        """Set when the item opens (or, resumed, continues)."""
        self.shared, self.item_id, self.index = shared, item_id, index

    @abstractmethod
    def added(self) -> tuple[ItemT, list[ev.Event]]:
        """The item output_item.added carries, and the events that follow it."""

    def takes(self, delta: d.Delta) -> bool:
        """Whether `delta` continues this item (else the item closes, and another opens)."""
        return False

    def push(self, delta: d.Delta) -> list[ev.Event]:
        """The events of a delta this item takes (or of the delta that opened it)."""
        return []

    def end(self) -> list[ev.Event]:
        """The events of the engine's end of this call (ToolCallEnd), before it closes."""
        return []

    @abstractmethod
    def close(self, item: ItemT, status: Status) -> list[ev.Event]:
        """The done events; `item` is the item so far (a copy, to finish and send)."""

    def executed(self, item: ItemT, result: CallResult) -> list[ev.Event]:
        """A pending call the run executed: its done events."""
        raise AssertionError(f"{type(self).__name__} is never executed")

    def follows(self, result: CallResult) -> Item[Any] | None:
        """The item the run adds after this executed call (a search's tool_search_output)."""
        return None

    def unfinished(self, item: ItemT, status: Status) -> list[ev.Event]:
        """A pending call the response ended before it ran: done without output."""
        return self.done(item, status)

    def done(self, item: ItemT, status: Status | None) -> list[ev.Event]:
        """output_item.done with the final item (with `status`, when the kind has one)."""
        if status is not None:
            item.status = status  # type: ignore[union-attr]
        return [ev.OutputItemDone(output_index=self.index, item=item)]

    def ids(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "output_index": self.index}


class QuietCall(Item[ItemT]):
    """A call whose arguments stream without events of their own: the kind reads them
    once the call ends."""

    arguments = ""

    def takes(self, delta: d.Delta) -> bool:
        return isinstance(delta, d.ToolCallArgumentsDelta)

    def push(self, delta: d.Delta) -> list[ev.Event]:
        if isinstance(delta, d.ToolCallArgumentsDelta):
            self.arguments += delta.arguments
        return []


class LateCall(QuietCall[ItemT]):
    """A call of a tool the client runs whose item is made from its arguments (a shell
    call's commands, a patch's operation): added and done once the call is complete."""

    late = True

    def __init__(self, call_id: str, name: str) -> None:
        self.call_id, self.name = call_id, name

    @classmethod
    def start(cls, delta: d.ToolCallStart) -> LateCall[ItemT]:
        return cls(delta.call_id, delta.name)

    def added(self) -> tuple[ItemT, list[ev.Event]]:
        try:
            arguments = model_json.loads(self.arguments)
        except ValueError:
            arguments = None
        return self.item(arguments if isinstance(arguments, dict) else {}), []

    @abstractmethod
    def item(self, arguments: dict[str, Any]) -> ItemT:
        """The item of a call with these arguments (valid by the tool's strict schema)."""

    def close(self, item: ItemT, status: Status) -> list[ev.Event]:
        return self.done(item, status)


class Replay:
    """The chat being rebuilt from items: what each kind's replay appends to."""

    def __init__(
        self,
        *,
        vision: bool,
        hosted_names: HostedNames,
        namespaced: Callable[[str, str], str] | None = None,
    ) -> None:
        self.vision = vision
        self.hosted_names = hosted_names
        # (namespace, member) -> the function name the model sees for a namespace's tool.
        self.namespaced = namespaced or (lambda _namespace, name: name)
        self.messages: list[ChatMessage] = []
        # A reasoning item's text, carried on the assistant turn that follows it.
        self.reasoning: str | None = None
        # Calls still unanswered when the conversation moves on: call id -> the result
        # the model reads for them (an MCP approval request that was never answered).
        self.unanswered: dict[str, str] = {}
        # Per-kind state across items, by kind.
        self.state: dict[str, Any] = {}

    def call(self, call: ToolCall) -> None:
        """An assistant tool call: joins the assistant turn before it (one turn, several
        calls), unless a reasoning item comes between them."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "assistant" and self.reasoning is None:
            self.messages[-1] = ChatMessage(
                role="assistant",
                content=last.content,
                tool_calls=(*last.tool_calls, call),
                reasoning=last.reasoning,
            )
        else:
            self.messages.append(
                ChatMessage(role="assistant", tool_calls=(call,), reasoning=self.reasoning)
            )
        self.reasoning = None

    def result(self, call_id: str, text: str) -> None:
        self.messages.append(ChatMessage(role="tool", content=text, tool_call_id=call_id))

    def moved_on(self) -> None:
        """A message comes: calls left unanswered are answered as never run."""
        for call_id, text in self.unanswered.items():
            self.result(call_id, text)
        self.unanswered.clear()


@dataclass(frozen=True)
class Shown:
    """A request tool the client runs, as the model sees it (a function), and the item
    its calls open."""

    spec: FunctionSpec
    opens: Callable[[d.ToolCallStart], Item[Any]]
    choice: str | None = None  # the tool_choice type that forces it ({"type": "shell"})


# How a kind replays one input item: into `replay`, `where` naming it for errors.
ReplayItem = Callable[[Any, Replay, str], None]
# How a kind echoes its request tool in `response.tools` (None: not echoed).
EchoTool = Callable[[Any], "dict[str, Any] | None"]
# The item a call of a hosted tool opens; the second argument is the approval request the
# call answers (None: not approved, or a family that asks for no approval).
HostedCall = Callable[[HostedTool, "str | None"], Item[Any]]


@dataclass(frozen=True)
class Kind:
    """An item kind as the registry knows it (kinds/__init__.py)."""

    item_type: str | None  # the output item it streams (None: a tool type with no item)
    # The item a stored stream left open, continued by a resumed builder (None: it never
    # stays open, such as a listing added and done at once).
    resume: Callable[[Any], Item[Any] | None] | None = None
    replays: dict[type, ReplayItem] = field(default_factory=dict)  # input item class -> how
    echoes: dict[type, EchoTool] = field(default_factory=dict)  # request tool class -> how
    # Request tool class -> how the model sees it (for tools shown by their kind; None:
    # this one is not, such as a tool_search respond runs, which is a hosted tool).
    shows: dict[type, Callable[[Any], Shown | None]] = field(default_factory=dict)
    # Hosted family (HostedTool.family) -> the item its calls open, for the kind of the
    # items a family respond runs produces.
    runs: dict[str, HostedCall] = field(default_factory=dict)
