"""What respond makes of each template of the pinned set (tests/support/templates.py).

The format detection gives a template (`chosen`, as a server does at start-up), and the
group a template stands in for in tests/e2e/test_every_template_model.py's subset: the
stream parser its format reads output with ("fallback" where the format is unknown) and
the shape of its generation prompt, whether it opens a reasoning block (reasoning.effort
"high"). What the e2e file proves beyond the unit matrix (sampling under the grammar, the
slot's reuse of the whole first turn) belongs to the engine and to each parser, so one
template per parser and prompt shape proves it for the rest. `BUNDLED` is the bundled
model with the template its GGUF holds.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import NamedTuple

import gguf

from respond.engines.formats import Chosen, choose_format, effort_variables
from respond.engines.formats._stream import MarkupParser
from respond.engines.llamacpp._engine import bundled_model_path
from respond.engines.llamacpp._template import ChatTemplate
from tests.support.templates import template_dir

__all__ = [
    "BUNDLED",
    "Group",
    "chosen",
    "first_of_each_group",
    "group_of",
    "opens_reasoning",
    "template",
]

BUNDLED = "SmolLM2"  # the bundled model with its own template (tokenizer.chat_template)
QUESTION = [{"role": "user", "content": "Is 91 a prime number?"}]


@functools.cache
def source(stem: str) -> str:
    """The template's text: the file of the set, or the bundled GGUF's own."""
    if stem != BUNDLED:
        return (template_dir() / f"{stem}.jinja").read_text()
    field = gguf.GGUFReader(bundled_model_path()).fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode()


@functools.cache  # compiled and probed once: the native and e2e files share them
def template(stem: str) -> ChatTemplate:
    return ChatTemplate(source(stem), bos_token="<s>", eos_token="</s>")


@functools.cache
def chosen(stem: str) -> Chosen:
    """The format and reasoning markup detection gives the template."""
    chat = template(stem)
    return choose_format(
        chat.source, lambda m, t: chat.render(m, tools=t, add_generation_prompt=False)
    )


class Group(NamedTuple):
    """What a template shares with the others of its group in the e2e file."""

    parser: str  # the class of its format's stream parser, or "fallback"
    opens: bool  # its generation prompt opens a reasoning block (reasoning.effort "high")

    @property
    def label(self) -> str:
        return f"{self.parser},opens" if self.opens else self.parser


@functools.cache
def opens_reasoning(stem: str) -> bool:
    """The generation prompt, with reasoning.effort "high", ends inside a reasoning block:
    what the model writes first is reasoning (engines/llamacpp/_decoding.py's `inside`)."""
    think = chosen(stem).think
    if think is None:
        return False
    effort = effort_variables(source(stem), "high")
    prompt = template(stem).render(QUESTION, **effort)
    return prompt.rstrip().endswith(think.open.rstrip())


def group_of(stem: str) -> Group:
    choice = chosen(stem)
    fmt = choice.format
    parser = "fallback"
    if fmt is not None:
        reader = fmt.parser(
            tools={}, think=choice.think, in_reasoning=False, new_call_id=str, stop_at_call=False
        )
        parser = type(reader).__name__
        if isinstance(reader, MarkupParser):  # one machine: its call body readers tell them
            parser += f":{reader.body}"
    return Group(parser, opens_reasoning(stem))


def first_of_each_group(stems: Iterable[str]) -> dict[str, Group]:
    """The first template of each group, in `stems`' order, and the group it stands for."""
    firsts: dict[Group, str] = {}
    for stem in stems:
        firsts.setdefault(group_of(stem), stem)
    return {stem: group for group, stem in firsts.items()}
