"""Tool-call and reasoning formats, one per model family, chosen from the chat template.

See _base.py for the seam, _families.py for the families, _detect.py for the choice.
"""

from respond.engines.formats._base import (
    THINK_TAGS,
    ChatFormat,
    GrammarKit,
    ParseOptions,
    ProbeCall,
    StreamParser,
    Think,
    ToolSchemas,
)
from respond.engines.formats._detect import (
    PROBE,
    Chosen,
    choose_format,
    effort_variables,
    format_named,
    probe_messages,
)
from respond.engines.formats._families import FORMATS
from respond.engines.formats._json import HERMES

__all__ = [
    "FORMATS",
    "HERMES",
    "PROBE",
    "THINK_TAGS",
    "ChatFormat",
    "Chosen",
    "GrammarKit",
    "ParseOptions",
    "ProbeCall",
    "StreamParser",
    "Think",
    "ToolSchemas",
    "choose_format",
    "effort_variables",
    "format_named",
    "probe_messages",
]
