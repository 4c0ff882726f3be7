"""The engine seam, public: every name an engine author touches.

An engine turns a ChatTurn into Deltas (see `Engine.stream` for the rules their order
follows, checked by `DeltaOrder`); respond builds items, events and stored records from
them. `respond.testing` ships scripted fake engines to test with.
"""

# The seam's names are listed once, in _base.__all__; this package adds its two helpers.
from respond.engines import _base
from respond.engines._base import *  # noqa: F403
from respond.engines._order import DeltaOrder
from respond.engines._tools import visible_tools

__all__ = ["DeltaOrder", "visible_tools"]
__all__ += _base.__all__
