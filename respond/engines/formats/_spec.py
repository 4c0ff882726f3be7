"""The markup of the formats that write calls between markers: a name, then the arguments.

Most families fit one of two shapes, told apart by `Markup.params`:

- JSON arguments (DeepSeek V3.1, Kimi K2, Mistral v11, gpt-oss...)::

      section_open call_open NAME name_close {"k": "v"} call_close [call_sep ...] section_close

- parameters, one per argument (Qwen3-Coder, GLM, MiniMax, Seed-OSS...)::

      section_open call_open NAME name_close
        params.open KEY params.name_close VALUE params.close ...
      call_close [call_sep ...] section_close

  A string VALUE is written raw; any other value as JSON (or, `scalars="python"`, as
  Jinja's `| string` writes a scalar: True, None).

`call_open`, `name_close` and `call_close` may each hold one placeholder: `{i}`, the call's
index in the turn (Kimi K2, Cohere), `{n}` the same from 1 (Kimi K3); `{name}` (in
`name_close`), the function's name written a second time (muse-glimmer names it in the message
header and again in the call); `{id}`, its id, written
by the model (nine letters and digits, the shape Mistral's templates want) and taken as the
call's id, so that the history renders the call as it was written. An id written after the
arguments (Mistral Nemo, Apriel) holds the call back until it is read: its arguments come in
one piece.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from respond.engines.formats._base import ToolSchemas

__all__ = [
    "CALL_ID_CHARS",
    "CDATA_CLOSE",
    "CDATA_OPEN",
    "PLACEHOLDERS",
    "Markup",
    "Params",
    "WholeBody",
    "fill",
    "is_string_schema",
    "property_schema",
    "split_slot",
]


@dataclass(frozen=True)
class Params:
    open: str
    name_close: str  # after the key of a string value (of every value, without json_name_close)
    close: str
    json_name_close: str | None = None  # after the key of a non-string value (DeepSeek DSML)
    # A non-string value as JSON; "python", a scalar as Jinja's `| string` writes it (True,
    # None); "repr", any value so (['a'], {'k': 2}: MiniCPM 5).
    scalars: Literal["json", "python", "repr"] = "json"
    cdata: bool = False  # a string may be wrapped in <![CDATA[...]]> (MiniCPM 5)
    # `name_close` may hold `{type}`: the value's JSON type, written after its key (Kimi K3).

    @property
    def typed(self) -> bool:
        return "{type}" in self.name_close


@dataclass(frozen=True)
class WholeBody:
    """A call's arguments in a syntax of the format's own, read once all of them are there."""

    label: str  # for people and test ids: "python-calls"
    end: Callable[[str], int]  # where the arguments end in the text (-1: not yet)
    # The arguments as JSON values, from their text and the function's schema (ValueError or
    # IndexError: not arguments at all).
    read: Callable[[str, Mapping[str, Any] | None], Mapping[str, Any]]


@dataclass(frozen=True)
class Markup:
    call_open: str
    name_close: str
    call_close: str
    call_sep: str = ""
    section_open: str = ""
    section_close: str = ""
    params: Params | None = None
    # What starts a call when the model writes freely (default: the section's opening marker,
    # or the call's).
    triggers: tuple[str, ...] = ()
    # Markup that is neither text nor a call (a channel header): dropped from the text.
    drops: tuple[str, ...] = ()
    # How a call is read: "named", its name, `name_close`, then its arguments (JSON, or
    # `params`); "object", one JSON object {"name": ..., "arguments" or "parameters": ...}
    # in any key order (Hermes, the first Mistral, Llama 3), after `call_open`, with
    # `call_close` (optional) after it, or a list of them when `call_sep` is ",".
    body: Literal["named", "object"] = "named"
    indented: bool = False  # "named": JSON arguments written indented (Command R+)
    whole: WholeBody | None = None  # "named": arguments of its own syntax (not JSON)
    bare_start: bool = False  # the turn may be one call object, from its start (Llama 3)
    # The generation prompt ends with `call_open` (Functionary v3.2's `>>>`): the turn is
    # read as if from it, and a call's grammar (and stop_at_call's offset) starts after it.
    opened: bool = False

    @property
    def reader(self) -> str:
        """How a call's body is read, for people and test ids: "named", "object", ..."""
        if self.whole is not None:
            return self.whole.label
        params = self.params
        variants = [
            ("typed", params is not None and params.typed),
            ("cdata", params is not None and params.cdata),
            ("indented", self.indented),
            ("opened", self.opened),
        ]
        return "-".join([self.body, *(name for name, on in variants if on)])

    @property
    def start(self) -> str:
        return self.section_open + self.call_open

    def trigger_markers(self) -> tuple[str, ...]:
        return self.triggers or (split_slot(self.section_open or self.call_open)[0].strip(),)

    def slot(self) -> tuple[str, str, str]:
        """`name_close` around its placeholder: (before, placeholder, after)."""
        return split_slot(self.name_close)

    @property
    def indexed(self) -> bool:
        parts = (self.call_open, self.name_close, self.call_close)
        return any(p in part for part in parts for p in ("{i}", "{n}"))


def fill(text: str, index: int, call_id: str | None = None, name: str = "") -> str:
    """`text` with its placeholder written for the call at `index` (of function `name`)."""
    call_id = call_id or f"call{index:05d}"
    text = text.replace("{i}", str(index)).replace("{n}", str(index + 1))
    return text.replace("{id}", call_id).replace("{name}", name)


def split_slot(text: str) -> tuple[str, str, str]:
    """`text` around its placeholder: (before, placeholder, after)."""
    for placeholder in PLACEHOLDERS:
        before, found, after = text.partition(placeholder)
        if found:
            return before, found, after
    return text, "", ""


# What the model may write in each placeholder ({name}: the name it wrote before, again).
PLACEHOLDERS = {"{i}": r"\d*", "{n}": r"\d*", "{id}": r"[A-Za-z0-9]*", "{name}": ""}


CDATA_OPEN, CDATA_CLOSE = "<![CDATA[", "]]>"  # around a string (Params.cdata)

CALL_ID_CHARS = 9  # Mistral's templates refuse any other call id


def is_string_schema(schema: Mapping[str, Any] | None) -> bool | None:
    """Whether values under `schema` are strings (None: cannot tell)."""
    if not isinstance(schema, Mapping):
        return None
    if schema.get("type") == "string":
        return True
    choices = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(choices, list) and choices:
        return all(isinstance(choice, str) for choice in choices)
    if "type" in schema:
        return False
    return None


def property_schema(tools: ToolSchemas, name: str, key: str) -> Mapping[str, Any] | None:
    schema = tools.get(name) if tools else None
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    sub = properties.get(key) if isinstance(properties, Mapping) else None
    return sub if isinstance(sub, Mapping) else None
