"""Functionary v3.2: each message of the turn is `>>>RECIPIENT\\n` and its text.

    >>>all\\nLet me look.>>>get_weather\\n{"city": "Paris"}>>>get_weather\\n{"city": "Rome"}

`all` is the user: its text is the answer; any other recipient is a function, the message
its JSON arguments. The generation prompt ends with the first `>>>`, so the model's text
begins with a recipient: `render` and the grammar start there (the grammar at a function's
name), and the parser reads the turn as if from the `>>>` (`Markup.opened`). The family has
no reasoning markup.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from respond.engines.formats._base import (
    ChatFormat,
    GrammarKit,
    ParseOptions,
    ProbeCall,
    StreamParser,
)
from respond.engines.formats._spec import Markup
from respond.engines.formats._stream import MarkupParser

__all__ = ["FUNCTIONARY_V32"]

SEP = ">>>"
# A message to `all` is the answer; any other recipient is a function. The prompt's `>>>`
# opens the turn.
MARKUP = Markup(call_open=SEP, name_close="\n", call_close="", drops=(SEP + "all\n",), opened=True)


class FunctionaryFormat(ChatFormat):
    name = "functionary-v3.2"
    label = "functionary >>>recipient messages"
    markers = (">>>all", ">>>${recipient}")

    def render(self, calls: Sequence[ProbeCall]) -> str:
        """The turn's text after the prompt's `>>>`."""
        return SEP.join(f"{c.name}\n{json.dumps(c.arguments, ensure_ascii=False)}" for c in calls)

    def grammar(
        self,
        kit: GrammarKit,
        calls: Sequence[tuple[str, Mapping[str, Any] | None]],
        max_calls: int | None,
    ) -> str:
        alternatives = [
            f"{kit.lit(name + chr(10))} {kit.json_value(schema, f'fn{n}')}"
            for n, (name, schema) in enumerate(calls)
        ]
        call = kit.rule("call", " | ".join(alternatives))
        sep = kit.lit(SEP)
        if max_calls is None:
            return f"{call} ( {sep} {call} )*"
        return f"{call}" + f" ( {sep} {call}" * (max_calls - 1) + " )?" * (max_calls - 1)

    def reader(self, options: ParseOptions) -> StreamParser:
        return MarkupParser(MARKUP, options)


FUNCTIONARY_V32 = FunctionaryFormat()
