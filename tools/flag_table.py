"""Write the README's `respond serve` flag table from respond/_flags.py (the one source).

    python tools/flag_table.py     # rewrites the table between the README's flags markers

tests/unit/test_flags.py fails when the README and the spec differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respond._flags import readme_table  # noqa: E402

BEGIN = "<!-- flags: made by tools/flag_table.py from respond/_flags.py -->\n"
END = "<!-- /flags -->\n"


def rewrite(text: str) -> str:
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + readme_table() + END + tail


if __name__ == "__main__":
    readme = ROOT / "README.md"
    readme.write_text(rewrite(readme.read_text()))
