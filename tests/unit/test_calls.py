"""RepeatGuard: an exact repeat of a call in the same turn is held back, then dropped."""

from __future__ import annotations

from respond.engines._base import (
    Delta,
    Finish,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from respond.engines._calls import RepeatGuard


def call(name: str, *pieces: str, end: bool = True) -> list[Delta]:
    deltas: list[Delta] = [ToolCallStart(call_id=f"call_{name}", name=name)]
    deltas += [ToolCallArgumentsDelta(piece) for piece in pieces]
    return deltas + ([ToolCallEnd()] if end else [])


def test_first_call_streams_through_untouched() -> None:
    guard = RepeatGuard()
    first = call("get_weather", '{"city":', ' "Paris"}')
    assert [guard.feed([delta]) for delta in first] == [[delta] for delta in first]
    assert not guard.repeated


def test_an_exact_repeat_is_dropped_whatever_its_whitespace_and_chunking() -> None:
    guard = RepeatGuard()
    guard.feed(call("get_weather", '{"city": "Paris"}'))
    out = []
    for delta in call("get_weather", "{", '"city"', ':"Pa', 'ris"', "}"):
        out += guard.feed([delta])
    assert out == []
    assert guard.repeated and guard.repeats == 1


def test_a_call_that_differs_is_released_as_soon_as_it_differs() -> None:
    guard = RepeatGuard()
    guard.feed(call("get_weather", '{"city": "Paris"}'))
    start, same, other, rest, end = call("get_weather", '{"city": "P', "o", 'rto"}', "")[:5]
    assert guard.feed([start]) == []
    assert guard.feed([same]) == []  # still the start of the first call
    assert guard.feed([other]) == [start, same, other]
    assert guard.feed([rest, end]) == [rest, end]
    assert not guard.repeated


def test_whitespace_inside_strings_counts() -> None:
    guard = RepeatGuard()
    guard.feed(call("f", '{"q": "a b"}'))
    assert guard.feed(call("f", '{"q": "ab"}')) == call("f", '{"q": "ab"}')


def test_same_arguments_to_another_function_is_not_a_repeat() -> None:
    guard = RepeatGuard()
    guard.feed(call("f", "{}"))
    assert guard.feed(call("g", "{}")) == call("g", "{}")
    # ...and a longer call that only starts like an earlier one is released at its end.
    guard.feed(call("h", '{"a": 1}'))
    longer = call("h", '{"a": 1', ', "b": 2}')
    assert guard.feed(longer) == longer


def test_a_repeat_cut_by_the_token_limit_is_dropped_too() -> None:
    guard = RepeatGuard()
    guard.feed(call("f", '{"x": 1}'))
    assert guard.feed(call("f", '{"x"', end=False)) == []
    # The parser salvages the cut call at the end: its rest goes with it.
    assert guard.cut(
        [ToolCallArgumentsDelta(": 1"), ToolCallEnd(), Finish("length")], unnamed_call=False
    ) == [Finish("length")]
    assert guard.repeated


def test_a_cut_that_holds_nothing_passes_everything() -> None:
    guard = RepeatGuard()
    tail = [*call("f", '{"x": 1'), TextDelta("t")]
    assert guard.cut(tail, unnamed_call=False) == tail
    assert not guard.repeated


def test_text_between_ends_what_was_held() -> None:
    guard = RepeatGuard()
    guard.feed(call("f", '{"x": 1}'))
    held = call("f", '{"x"', end=False)
    assert guard.feed(held) == []
    assert guard.feed([TextDelta("t")]) == [*held, TextDelta("t")]


def test_a_further_call_cut_before_its_name_is_dropped_as_a_repeat() -> None:
    guard = RepeatGuard()
    assert guard.cut([Finish("length")], unnamed_call=True) == [Finish("length")]
    assert not guard.repeated  # no call made yet: nothing it could repeat
    guard.feed(call("f", "{}"))
    assert guard.cut([Finish("length")], unnamed_call=True) == [Finish("length")]
    assert guard.repeated
