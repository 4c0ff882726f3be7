"""The formats that write a call as one JSON object: Hermes, the first Mistral, Llama 3.

Their markup is read with the body "object" (_stream.py): a call written freely, in any key
order or spacing, is read too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from respond.engines.formats._base import (
    ChatFormat,
    GrammarKit,
    ParseOptions,
    ProbeCall,
    StreamParser,
)
from respond.engines.formats._spec import Markup
from respond.engines.formats._stream import MarkupParser

__all__ = ["HERMES", "LLAMA3", "MISTRAL_V1", "REKA"]

Dialect = Literal["hermes", "mistral", "llama3"]
# What marks the calls of each dialect, for the parser.
MARKUPS: dict[Dialect, Markup] = {
    "hermes": Markup("<tool_call>", "", "</tool_call>", body="object"),
    "mistral": Markup("[TOOL_CALLS]", "", "", call_sep=",", body="object"),
    "llama3": Markup("<|python_tag|>", "", "", body="object", bare_start=True),
}


class JsonCallFormat(ChatFormat):
    def __init__(
        self, dialect: Dialect, name: str, label: str, markers: tuple[str, ...], sep: str = "\n"
    ):
        self.dialect: Dialect = dialect
        self.sep = sep  # between two Hermes calls
        self.name = name
        self.label = label
        self.markers = markers
        self.single = dialect == "llama3"  # its templates refuse more than one call a turn
        self.markup = MARKUPS[dialect]

    def _object(self, call: ProbeCall) -> str:
        key = "parameters" if self.dialect == "llama3" else "arguments"
        return json.dumps({"name": call.name, key: call.arguments}, ensure_ascii=False)

    def render(self, calls: Sequence[ProbeCall]) -> str:
        if self.dialect == "hermes":
            return self.sep.join(f"<tool_call>\n{self._object(c)}\n</tool_call>" for c in calls)
        if self.dialect == "mistral":
            return "[TOOL_CALLS][" + ", ".join(self._object(c) for c in calls) + "]"
        return self._object(calls[0])

    def grammar(
        self,
        kit: GrammarKit,
        calls: Sequence[tuple[str, Mapping[str, Any] | None]],
        max_calls: int | None,
    ) -> str:
        key = "parameters" if self.dialect == "llama3" else "arguments"
        alternatives = []
        for index, (name, schema) in enumerate(calls):
            head = json.dumps({"name": name, key: 0}, ensure_ascii=False)[: -len("0}")]
            arguments = kit.json_value(schema, f"fn{index}")
            alternatives.append(f'{kit.lit(head)} {arguments} "}}"')
        call = kit.rule("call", " | ".join(alternatives))
        if self.dialect == "hermes":
            one = kit.rule(
                "one-call",
                f"{kit.lit('<tool_call>' + chr(10))} {call} {kit.lit(chr(10) + '</tool_call>')}",
            )
            return repeat(one, kit.lit(self.sep), max_calls)
        if self.dialect == "mistral":
            return f'{kit.lit("[TOOL_CALLS][")} {repeat(call, kit.lit(", "), max_calls)} "]"'
        return call  # Llama 3 writes one call per turn

    def reader(self, options: ParseOptions) -> StreamParser:
        return MarkupParser(self.markup, options)


def repeat(rule: str, separator: str, upto: int | None) -> str:
    """`rule`, then up to `upto` in all (any number when None), `separator` between."""
    if upto is None:
        return f"{rule} ({separator} {rule})*"
    return f"{rule}" + f" ({separator} {rule}" * (upto - 1) + ")?" * (upto - 1)


HERMES = JsonCallFormat("hermes", "hermes", "hermes json", ("<tool_call>", '"arguments"'))
# Reka Edge's template writes Hermes calls back to back, nothing between them.
REKA = JsonCallFormat("hermes", "reka", "hermes json, calls back to back", ("<tool_call>",), sep="")
MISTRAL_V1 = JsonCallFormat("mistral", "mistral", "mistral json list", ("[TOOL_CALLS]",))
LLAMA3 = JsonCallFormat("llama3", "llama3", "llama 3 json", ("<|start_header_id|>", '"parameters"'))
