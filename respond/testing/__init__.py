"""FAKE engines for tests: scripted stand-ins for a model, named as fakes on purpose.

Serve the real HTTP stack over one of them to test a client, a front door or a store
without a model (the way httpx's MockTransport stands in for a network):

    engine = ScriptedEngine([[TextDelta("hi"), Usage(1, 1), Finish("stop")]])
    app = respond.create_app(respond.assemble({engine.info.id: engine}))

- `ScriptedEngine` replays deltas (and exceptions) given in Python, one script per request.
- `FakeEngine` plays a JSON script of raw model text through the real output parser, so
  a server subprocess can load it and call markup is parsed as a model's would be.

They prove the machinery around an engine, never a model.
"""

from respond.testing._fake import FakeEngine, ScriptStep
from respond.testing._scripted import ScriptedEngine

__all__ = ["FakeEngine", "ScriptStep", "ScriptedEngine"]
