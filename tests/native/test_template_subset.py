"""The subset of templates `make test` serves in tests/e2e/test_every_template_model.py.

One template per group (tests/support/template_formats.py's rule): every group of the set
is served, each by exactly one template, the bundled model's among them; so a template or
a format that brings a new parser or generation-prompt shape is served by `make test` as
soon as it is added, and no group is served twice.
"""

from __future__ import annotations

from tests.e2e import test_every_template_model as every
from tests.support.template_formats import BUNDLED, group_of, opens_reasoning


def test_the_subset_serves_every_group_once() -> None:
    groups = {stem: group_of(stem) for stem in every.STEMS}
    subset = every.subset()
    assert set(subset.values()) == set(groups.values())  # none left out
    assert len(set(subset.values())) == len(subset)  # each once
    for stem, group in subset.items():
        assert groups[stem] == group
        assert next(s for s in every.STEMS if groups[s] == group) == stem  # the first of it
    assert BUNDLED in subset and list(subset) == [s for s in every.STEMS if s in subset]
    # A subset, not the set: the e2e file's time in `make test` stays a fraction of it.
    assert len(subset) <= len(every.STEMS) // 3, list(subset)


def test_the_rule_reads_the_opened_reasoning_the_e2e_file_expects() -> None:
    """The grouping's `opens` is the e2e file's OPENS_REASONING, which the server proves."""
    opened = {stem for stem in every.STEMS if opens_reasoning(stem)}
    assert opened == every.OPENS_REASONING
