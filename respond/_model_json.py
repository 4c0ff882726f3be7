"""JSON the model wrote (a tool call's arguments), read into text that can be sent and kept.

A JSON escape can name a lone UTF-16 surrogate (`\\ud83d`, half of an emoji's pair) or NUL.
Python keeps either in a str. A surrogate fails later: pydantic-core cannot write it into an
answer, nor UTF-8 into the store. NUL is taken by no tool (a command's argument, Python
source). A client's request holding either is refused (protocol/limits.py); the items made
from the model's arguments keep the same rule, the characters replaced with U+FFFD as the
bytes of its text that do not decode are.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["loads", "valid_text"]

_UNSENDABLE = re.compile("[\x00\ud800-\udfff]")


def loads(text: str) -> Any:
    """json.loads, every string in the value (keys too) made valid text."""
    value = json.loads(text)
    return _valid(value) if "\\u" in text else value  # only an escape can name one


def valid_text(text: str) -> str:
    return _UNSENDABLE.sub("\ufffd", text)


def _valid(value: Any) -> Any:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [_valid(item) for item in value]
    if isinstance(value, dict):
        return {valid_text(key): _valid(item) for key, item in value.items()}
    return value
