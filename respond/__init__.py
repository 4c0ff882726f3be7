"""respond: the OpenAI Responses API for local and self-hosted models.

`build_server(Settings(...))` builds what `respond serve` serves (`.run()` serves it, `.app` is
the ASGI app); `create_app(assemble(engines))` is the bare app over engines of your own, and
`assemble(engines, settings, Services(store=...))` gives it settings and services of your own.
The engine seam (`respond.engines`) is re-exported here, so `from respond import Engine,
TextDelta, ...` works too.
"""

from respond import engines as _engines
from respond._config import Settings
from respond._parts import Services, assemble
from respond._server import Server, build_server
from respond._version import __version__
from respond.app import create_app
from respond.engines import *  # noqa: F403

# The engine seam's names come from respond.engines.__all__ (listed once, in engines/_base.py).
__all__ = [
    "Server",
    "Services",
    "Settings",
    "__version__",
    "assemble",
    "build_server",
    "create_app",
]
__all__ += _engines.__all__
