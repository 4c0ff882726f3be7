"""The suite needs nothing beside the checkout: its data is in the repository."""

from __future__ import annotations

import hashlib

import pytest

from tests.support import outside
from tests.support.schema import SPEC_PATH

SPEC_SHA256 = "1f469fc044bc3c0ee9bb8210b76435ce2386ed792c16863f8dc9bd6070b87f6a"


def test_the_open_responses_document_is_the_pinned_one_inside_the_checkout() -> None:
    assert SPEC_PATH.is_relative_to(outside.CHECKOUT)
    assert hashlib.sha256(SPEC_PATH.read_bytes()).hexdigest() == SPEC_SHA256


def test_a_read_beside_the_checkout_is_caught() -> None:
    sibling = outside.CHECKOUT.parent / "shared" / "spec" / "probe.json"
    before = len(outside.reads)
    with pytest.raises(OSError):
        sibling.read_text()  # the audit hook sees the attempt, whether or not the file exists
    caught = outside.reads[before:]
    del outside.reads[before:]  # this read was the test's own; it must not fail the session
    assert caught == [str(sibling)]


def test_what_is_not_beside_the_checkout_is_allowed() -> None:
    parent = outside.CHECKOUT.parent
    assert not outside.beside_checkout(outside.CHECKOUT / "tests" / "conftest.py")
    assert not outside.beside_checkout(parent / ".cache" / "respond")
    assert not outside.beside_checkout("/proc/self/status")
    assert outside.beside_checkout(parent / "shared")
