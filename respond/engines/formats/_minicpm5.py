"""MiniCPM 5: `<function name="NAME"><param name="K">V</param>...</function>`, one a line.

A string holding `<`, `&` or a line break is wrapped in CDATA (`<![CDATA[...]]>`), any other
string is written as it is; every other value as Python prints it (`True`, `None`, `['a']`:
the template's `{{ value }}`), which the grammar writes (_python.py) and the parser reads back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from respond.engines._base import Delta
from respond.engines.formats._base import GrammarKit
from respond.engines.formats._markup import MarkupFormat
from respond.engines.formats._python import python_value, read_python
from respond.engines.formats._spec import Markup, Params, is_string_schema
from respond.engines.formats._stream import MarkupParser

__all__ = ["MINICPM5"]

CDATA_OPEN, CDATA_CLOSE = "<![CDATA[", "]]>"
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

    def _parser_type(self) -> type[MarkupParser]:
        return MiniCpm5Parser


class MiniCpm5Parser(MarkupParser):
    _wrapped: bool | None = None  # the current value is in CDATA (None: not read yet)

    def _on_param_name(self, final: bool) -> list[Delta]:
        self._wrapped = None
        return super()._on_param_name(final)

    def _value_close(self, final: bool) -> str | None:
        close = super()._value_close(final)
        assert close is not None
        if self._wrapped is None:
            if self._buffer.startswith(CDATA_OPEN):
                self._buffer = self._buffer[len(CDATA_OPEN) :]
                self._wrapped = True
            elif CDATA_OPEN.startswith(self._buffer) and not final:
                return None  # maybe CDATA, still arriving
            else:
                self._wrapped = False
        return CDATA_CLOSE + close if self._wrapped else close

    def _value_json(self, raw: str) -> str:
        try:
            return json.dumps(read_python(raw), ensure_ascii=False)
        except ValueError:
            return json.dumps(raw, ensure_ascii=False)  # not a literal: the text itself


MINICPM5 = MiniCpm5Format(
    "minicpm5",
    "minicpm5 xml (function/param, cdata strings)",
    Markup(
        call_open='<function name="',
        name_close='">',
        params=Params('<param name="', '">', "</param>"),
        call_close="</function>",
        call_sep="\n",
    ),
    markers=('<function name="', '<param name="', "CDATA"),
)
