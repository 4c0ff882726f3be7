"""`reasoning.effort` reaches the real templates through the embedded engine's render path
(_prompt.py): the prompt the model reads changes with it, each template in its own way."""

from __future__ import annotations

import pytest

from respond.engines._base import ChatMessage, ChatTurn
from respond.engines.formats import HERMES, Chosen
from respond.engines.llamacpp._prompt import render_prompt
from respond.engines.llamacpp._template import ChatTemplate
from tests.support.templates import template_dir

GPT_OSS = "openai-gpt-oss-120b"
QWEN3 = "Qwen-Qwen3-0.6B"
DEEPSEEK = "deepseek-ai-DeepSeek-V3.1"
ASSISTANT = "<\uff5cAssistant\uff5c>"  # DeepSeek's, in full-width bars


def prompt(stem: str, effort: str | None) -> str:
    template = ChatTemplate((template_dir() / f"{stem}.jinja").read_text())
    turn = ChatTurn(
        model="m", messages=[ChatMessage("user", "Is 91 prime?")], reasoning_effort=effort
    )
    return render_prompt(template, turn, chosen=Chosen(HERMES, None, "rendered probe"))


@pytest.mark.parametrize(
    ("effort", "told"),
    [("minimal", "low"), ("low", "low"), ("medium", "medium"), ("high", "high"),
     ("xhigh", "high"), (None, "medium")],
)  # fmt: skip
def test_gpt_oss_is_told_the_effort_in_its_system_message(effort: str | None, told: str) -> None:
    """Harmony's system message says "Reasoning: low|medium|high" (medium: the template's
    own default, when the request says nothing)."""
    rendered = prompt(GPT_OSS, effort)
    assert f"Reasoning: {told}\n" in rendered
    assert rendered.count("Reasoning: ") == 1


def test_qwen3_thinks_unless_the_effort_is_none() -> None:
    """enable_thinking false: the generation prompt holds an empty think block (the model
    answers without reasoning); any other effort, or none given, lets it think."""
    thinking = prompt(QWEN3, "high")
    assert thinking.endswith("<|im_start|>assistant\n")
    assert prompt(QWEN3, "low") == thinking == prompt(QWEN3, None)
    assert prompt(QWEN3, "none") == thinking + "<think>\n\n</think>\n\n"


def test_deepseek_v3_1_opens_a_think_block_when_the_effort_asks_for_thinking() -> None:
    """thinking true opens the block in the prompt; "none" closes it at once. Without an
    effort the template's own default holds (no thinking)."""
    for effort in ("low", "medium", "high"):
        assert prompt(DEEPSEEK, effort).endswith(ASSISTANT + "<think>")
    assert prompt(DEEPSEEK, "none").endswith(ASSISTANT + "<think></think>")
    assert prompt(DEEPSEEK, None) == prompt(DEEPSEEK, "none")
