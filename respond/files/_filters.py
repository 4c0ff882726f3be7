"""Attribute filters of a vector store search: comparison and compound, as OpenAI has them.

A comparison of a key the file has no attribute for matches only `ne` and `nin`; one
whose types differ (a number against a string) does not match. Ordering comparisons
(`gt`, `gte`, `lt`, `lte`) take numbers, or strings (compared as strings).
"""

from __future__ import annotations

from typing import Any

from respond.protocol.errors import APIError
from respond.protocol.files import ComparisonFilter, CompoundFilter, Filter

__all__ = ["check_filter", "matches"]

_ORDER = {
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
}


def check_filter(node: Filter, param: str) -> None:
    """A 400 naming the field for a filter that cannot be evaluated."""
    if isinstance(node, CompoundFilter):
        for i, child in enumerate(node.filters):
            check_filter(child, f"{param}.filters[{i}]")
        return
    listed = isinstance(node.value, list)
    if node.type in ("in", "nin") and not listed:
        raise APIError(
            400, f"'{node.type}' compares with a list of values.", param=f"{param}.value"
        )
    if node.type not in ("in", "nin") and listed:
        raise APIError(
            400, f"'{node.type}' compares with one value, not a list.", param=f"{param}.value"
        )
    if node.type in _ORDER and isinstance(node.value, bool):
        raise APIError(400, f"'{node.type}' compares numbers or strings.", param=f"{param}.value")


def matches(node: Filter, attributes: dict[str, Any]) -> bool:
    if isinstance(node, CompoundFilter):
        results = (matches(child, attributes) for child in node.filters)
        return all(results) if node.type == "and" else any(results)
    return _compare(node, attributes)


def _compare(node: ComparisonFilter, attributes: dict[str, Any]) -> bool:
    if node.key not in attributes:
        return node.type in ("ne", "nin")
    have = attributes[node.key]
    if node.type in ("in", "nin"):
        assert isinstance(node.value, list)
        inside = any(_same(have, want) for want in node.value)
        return inside if node.type == "in" else not inside
    if node.type in ("eq", "ne"):
        return _same(have, node.value) == (node.type == "eq")
    if _kind(have) != _kind(node.value) or _kind(have) == "bool":
        return False
    return bool(_ORDER[node.type](have, node.value))


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, int | float) else "string"


def _same(have: Any, want: Any) -> bool:
    return _kind(have) == _kind(want) and have == want
