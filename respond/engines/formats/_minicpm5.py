"""MiniCPM 5: `<function name="NAME"><param name="K">V</param>...</function>`, one a line.

A string holding `<`, `&` or a line break is wrapped in CDATA (`<![CDATA[...]]>`), any other
string is written as it is; every other value as Python prints it (`True`, `None`, `['a']`:
the template's `{{ value }}`), which the grammar writes (_python.py) and the parser reads back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from respond.engines.formats._base import GrammarKit
from respond.engines.formats._markup import MarkupFormat
from respond.engines.formats._python import python_value
from respond.engines.formats._spec import (
    CDATA_CLOSE,
    CDATA_OPEN,
    Markup,
    Params,
    is_string_schema,
)

__all__ = ["MINICPM5"]

_WRAPPED = ("<", "&", "\n")  # what makes the template wrap a string


def _text(value: Any) -> str:
    if isinstance(value, str):
        return CDATA_OPEN + value + CDATA_CLOSE if any(c in value for c in _WRAPPED) else value
    return str(value)  # Python's text of it, as Jinja prints it


class MiniCpm5Format(MarkupFormat):
    @staticmethod
    def _param(params: Params, key: str, value: Any) -> str:
        return params.open + key + params.name_close + _text(value) + params.close

    def _param_rule(
        self, kit: GrammarKit, params: Params, key: str, sub: Mapping[str, Any], name: str
    ) -> str:
        head = kit.lit(params.open + key + params.name_close)
        string = is_string_schema(sub)
        kinds = sub.get("type")
        if string is None or (isinstance(kinds, list) and "string" in kinds):
            # A string as the template writes one, or another value.
            others = [k for k in kinds if k != "string"] if isinstance(kinds, list) else None
            rest = python_value(kit, {**sub, "type": others} if others else sub, name)
            value = f"( {self._string(kit)} | {rest} )" if others != [] else self._string(kit)
            return f"{head} {value} {kit.lit(params.close)}"
        if not string:
            return f"{head} {python_value(kit, sub, name)} {kit.lit(params.close)}"
        choices = sub.get("enum", [sub["const"]] if "const" in sub else None)
        if isinstance(choices, list):
            value = "( " + " | ".join(kit.lit(_text(c)) for c in choices) + " )"
        else:
            value = kit.raw_string(sub, name) or self._string(kit)
        return f"{head} {value} {kit.lit(params.close)}"

    @staticmethod
    def _string(kit: GrammarKit) -> str:
        """A string as the template writes it: as it is when it holds none of < & and a
        line break, else in CDATA (which it cannot close)."""
        inside = kit.text_until(CDATA_CLOSE, "cdata")
        wrapped = f"{kit.lit(CDATA_OPEN)} {inside} [<&\\n] {inside} {kit.lit(CDATA_CLOSE)}"
        return kit.rule("minicpm-string", f"[^<&\\n]* | {wrapped}")


MINICPM5 = MiniCpm5Format(
    "minicpm5",
    "minicpm5 xml (function/param, cdata strings)",
    Markup(
        call_open='<function name="',
        name_close='">',
        params=Params('<param name="', '">', "</param>", scalars="repr", cdata=True),
        call_close="</function>",
        call_sep="\n",
    ),
    markers=('<function name="', '<param name="', "CDATA"),
)
