"""The Jinja environment chat templates are written for.

Templates are written against Hugging Face transformers' renderer (a sandboxed Jinja
environment with the loop-controls extension, a `{% generation %}` block, its own `tojson`,
`raise_exception` and `strftime_now`) and, for the ones llama.cpp ships, against llama.cpp's
own template engine, which is more lenient still: `from_json`, `tojson` over any iterable,
a string concatenated with a missing value. This environment gives them all of that and
still refuses anything dangerous: the sandbox lets a template mutate only the plain lists
and dicts it built itself (`namespace(ids=[])` then `ids.append(...)`), never what it was
given (`frozen` wraps those).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, NoReturn

from jinja2 import Undefined, nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

__all__ = ["FrozenDict", "FrozenList", "TemplateEnvironment", "frozen"]

# The mutating methods a template may call on a list or dict it built (Kimi K2 queues call
# ids with `ids.append(x)` and `ids.pop(0)`); none of them runs template code.
_MUTATORS: dict[type, frozenset[str]] = {
    list: frozenset({"append", "extend", "insert", "pop", "remove", "clear"}),
    dict: frozenset({"update", "pop", "setdefault", "clear"}),
}


class FrozenList(list[Any]):
    """A list given to the template: readable as a list, never mutated by it."""


class FrozenDict(dict[str, Any]):
    """A dict given to the template: readable as a dict, never mutated by it."""


def frozen(value: Any) -> Any:
    """`value` (JSON-like) with every list and dict in it frozen, so nothing the template
    does can change the caller's data (tool schemas, messages)."""
    if isinstance(value, Mapping):
        return FrozenDict({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList(frozen(item) for item in value)
    return value


class _Generation(Extension):
    """`{% generation %}...{% endgeneration %}`: transformers marks the assistant's tokens
    with it (for training masks); rendering a prompt, it is just its body."""

    tags = {"generation"}  # noqa: RUF012 - typed as a plain set by Jinja itself

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def _raise_exception(message: str) -> NoReturn:
    raise TemplateError(message)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


def _iterables_as_lists(value: Any) -> Any:
    # json.dumps' fallback: a generator or map object (`tools | map(...) | tojson`) is
    # written as the list it yields, as llama.cpp's engine does.
    if isinstance(value, Undefined):
        return None
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # transformers' tojson: no HTML escaping (Jinja's own escapes <, > and &), and
    # json.dumps' options, which templates use to match their training data.
    return json.dumps(
        value,
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
        default=_iterables_as_lists,
    )


def _from_json(text: str) -> Any:
    return frozen(json.loads(text))


class TemplateEnvironment(ImmutableSandboxedEnvironment):
    """transformers' environment for chat templates, with llama.cpp's leniencies."""

    intercepted_binops = frozenset({"+"})

    def __init__(self) -> None:
        super().__init__(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _Generation]
        )
        self.filters["tojson"] = _tojson
        self.filters["from_json"] = _from_json
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = _strftime_now

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if attr in _MUTATORS.get(type(obj), ()):
            # A plain list or dict the template made itself: mutable (the given ones
            # are Frozen*, a subclass, and stay immutable).
            return SandboxedEnvironment.is_safe_attribute(self, obj, attr, value)
        return super().is_safe_attribute(obj, attr, value)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        # `'Args: ' + param.description` with no description: llama.cpp's engine reads the
        # missing (or null) side as an empty string; Python's would raise.
        if isinstance(left, str) and _missing(right):
            return left
        if isinstance(right, str) and _missing(left):
            return right
        return super().call_binop(context, operator, left, right)


def _missing(value: Any) -> bool:
    return value is None or isinstance(value, Undefined)
