"""The pool's choice of member: least in flight, ties rotated, affinity while healthy."""

from __future__ import annotations

from respond.engines.upstream._pool import UpstreamPool


def pool() -> UpstreamPool:
    return UpstreamPool(["http://a/v1", "http://b/v1", "http://c/v1/"])


def test_least_in_flight_first_and_down_members_last() -> None:
    p = pool()
    a, b, c = p.members
    assert c.base_url == "http://c/v1"  # trailing slash trimmed
    a.in_flight, b.in_flight, c.in_flight = 3, 1, 2
    assert p._order([]) == [b, c, a]
    b.healthy = False  # tried only after every healthy member
    assert p._order([]) == [c, a, b]


def test_ties_rotate() -> None:
    p = pool()
    firsts = {p._order([])[0].base_url for _ in range(3)}
    assert firsts == {"http://a/v1", "http://b/v1", "http://c/v1"}


def test_affinity_prefers_the_remembered_member_while_healthy() -> None:
    p = pool()
    c = p.members[2]
    p.remember(["pck:k"], c)
    c.in_flight = 5  # busier, but it holds the prefix cache
    assert p._order(["pck:k"])[0] is c
    assert p._order(["pck:other"])[0] is not c
    c.healthy = False
    assert p._order(["pck:k"])[0] is not c


def test_affinity_memory_is_bounded() -> None:
    p = pool()
    member = p.members[0]
    for index in range(10_050):
        p.remember([f"resp:{index}"], member)
    assert len(p._affinity) == 10_000
    assert "resp:0" not in p._affinity and "resp:10049" in p._affinity
