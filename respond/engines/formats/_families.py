# ruff: noqa: RUF001 (the DeepSeek markers are full-width bars, as the models write them)
"""Every family respond knows, as data: the literal markup each one's template writes.

Each entry was read off its template by rendering a probe call (tests/native/test_formats.py
renders the real templates again and checks every entry against them). Order matters only
for detection by markers, when a template cannot be rendered: the more specific first.
"""

from __future__ import annotations

import dataclasses

from respond.engines.formats._base import ChatFormat, Think
from respond.engines.formats._command_r import COMMAND_R_PLUS
from respond.engines.formats._functionary import FUNCTIONARY_V32
from respond.engines.formats._gemma import GEMMA_4
from respond.engines.formats._json import HERMES, LLAMA3, MISTRAL_V1, REKA
from respond.engines.formats._lfm2 import LFM2
from respond.engines.formats._markup import MarkupFormat
from respond.engines.formats._minicpm5 import MINICPM5
from respond.engines.formats._minimax_m3 import MINIMAX_M3
from respond.engines.formats._spec import Markup, Params
from respond.engines.formats._xtml import XtmlFormat

__all__ = ["FORMATS", "THINKS"]

QWEN3_CODER = MarkupFormat(
    "qwen3-coder",
    "qwen3-coder xml",
    Markup(
        call_open="<tool_call>\n<function=",
        name_close=">\n",
        params=Params("<parameter=", ">\n", "\n</parameter>\n", scalars="python"),
        call_close="</function>\n</tool_call>",
        call_sep="\n",
        triggers=("<tool_call>",),
    ),
    markers=("<tool_call>", "<function=", "<parameter="),
)
STEPFUN = MarkupFormat(
    "stepfun",
    "qwen3-coder xml, calls back to back",
    dataclasses.replace(QWEN3_CODER.markup, call_sep=""),
    markers=QWEN3_CODER.markers,
)
SEED_OSS = MarkupFormat(
    "seed-oss",
    "seed-oss xml",
    Markup(
        call_open="<seed:tool_call>\n<function=",
        name_close=">\n",
        params=Params("<parameter=", ">", "</parameter>\n", scalars="python"),
        call_close="</function>\n</seed:tool_call>",
        call_sep="\n",
        triggers=("<seed:tool_call>",),
    ),
    markers=("<seed:tool_call>",),
    think=Think("<seed:think>", "</seed:think>", "seed think tags"),
)
GLM_45 = MarkupFormat(
    "glm-4.5",
    "glm xml (arg_key/arg_value, one per line)",
    Markup(
        call_open="<tool_call>",
        name_close="\n",
        params=Params("<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>\n"),
        call_close="</tool_call>",
        call_sep="\n",
    ),
    markers=("<tool_call>", "<arg_key>", "</arg_key>\n<arg_value>"),
)
GLM_47 = MarkupFormat(
    "glm-4.7",
    "glm xml (arg_key/arg_value)",
    Markup(
        call_open="<tool_call>",
        name_close="",
        params=Params("<arg_key>", "</arg_key><arg_value>", "</arg_value>"),
        call_close="</tool_call>",
    ),
    markers=("<tool_call>", "<arg_key>"),
)
MINIMAX_M2 = MarkupFormat(
    "minimax-m2",
    "minimax xml (invoke/parameter)",
    Markup(
        section_open="<minimax:tool_call>\n",
        call_open='<invoke name="',
        name_close='">\n',
        params=Params('<parameter name="', '">', "</parameter>\n"),
        call_close="</invoke>\n",
        section_close="</minimax:tool_call>",
        triggers=("<minimax:tool_call>",),
    ),
    markers=("<minimax:tool_call>",),
)
DEEPSEEK_V31 = MarkupFormat(
    "deepseek-v3.1",
    "deepseek tool-call tokens, json arguments",
    Markup(
        section_open="<｜tool▁calls▁begin｜>",
        call_open="<｜tool▁call▁begin｜>",
        name_close="<｜tool▁sep｜>",
        call_close="<｜tool▁call▁end｜>",
        section_close="<｜tool▁calls▁end｜>",
    ),
    markers=("<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>"),
)


def _dsml(name: str, section: str) -> MarkupFormat:
    return MarkupFormat(
        name,
        f"deepseek dsml ({section})",
        Markup(
            section_open=f"<｜DSML｜{section}>\n",
            call_open='<｜DSML｜invoke name="',
            name_close='">\n',
            params=Params(
                '<｜DSML｜parameter name="',
                '" string="true">',
                "</｜DSML｜parameter>\n",
                json_name_close='" string="false">',
            ),
            call_close="</｜DSML｜invoke>\n",
            section_close=f"</｜DSML｜{section}>",
            triggers=(f"<｜DSML｜{section}>",),
        ),
        markers=(f"｜DSML｜{section}",),
    )


DEEPSEEK_V32 = _dsml("deepseek-v3.2", "function_calls")
DEEPSEEK_V4 = _dsml("deepseek-v4", "tool_calls")
DEEPSEEK_R1 = MarkupFormat(
    "deepseek-r1",
    "deepseek r1 tool-call tokens, json in a code block",
    Markup(
        section_open="<｜tool▁calls▁begin｜>",
        call_open="<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
        name_close="\n```json\n",
        call_close="\n```<｜tool▁call▁end｜>",
        call_sep="\n",
        section_close="<｜tool▁calls▁end｜>",
    ),
    markers=("<｜tool▁calls▁begin｜>", "```json"),
)
KIMI_K2 = MarkupFormat(
    "kimi-k2",
    "kimi tool-call tokens, json arguments",
    Markup(
        section_open="<|tool_calls_section_begin|>",
        call_open="<|tool_call_begin|>functions.",
        name_close=":{i}<|tool_call_argument_begin|>",
        call_close="<|tool_call_end|>",
        section_close="<|tool_calls_section_end|>",
    ),
    markers=("<|tool_calls_section_begin|>",),
)
MISTRAL_V11 = MarkupFormat(
    "mistral-v11",
    "mistral [TOOL_CALLS]name[ARGS]",
    Markup(call_open="[TOOL_CALLS]", name_close="[ARGS]", call_close=""),
    markers=("[TOOL_CALLS]", "[ARGS]"),
)
MISTRAL_V13 = MarkupFormat(
    "mistral-v13",
    "mistral [TOOL_CALLS]name[CALL_ID]id[ARGS]",
    Markup(call_open="[TOOL_CALLS]", name_close="[CALL_ID]{id}[ARGS]", call_close=""),
    markers=("[TOOL_CALLS]", "[CALL_ID]", "[ARGS]"),
)
FUNCTIONARY_V31 = MarkupFormat(
    "functionary-v3.1",
    "functionary <function=name>json</function>",
    Markup(call_open="<function=", name_close=">", call_close="</function>"),
    markers=("<function=", "</function>"),
)
APERTUS = MarkupFormat(
    "apertus",
    "apertus json list",
    Markup(
        section_open="<|tools_prefix|>[",
        call_open='{"',
        name_close='": ',
        call_close="}",
        call_sep=", ",
        section_close="]<|tools_suffix|>",
        triggers=("<|tools_prefix|>",),
    ),
    markers=("<|tools_prefix|>",),
)
NEMOTRON_V2 = MarkupFormat(
    "nemotron-v2",
    "nemotron <TOOLCALL> json list",
    Markup(
        section_open="<TOOLCALL>[",
        call_open='{"name": "',
        name_close='", "arguments": ',
        call_close="}",
        call_sep=", ",
        section_close="]</TOOLCALL>",
        triggers=("<TOOLCALL>",),
    ),
    markers=("<TOOLCALL>",),
)
GIGACHAT_31 = MarkupFormat(
    "gigachat-3.1",
    "gigachat <|function_call|> json",
    Markup(
        call_open='<|function_call|>{"name": "',
        name_close='", "arguments": ',
        call_close="}",
        triggers=("<|function_call|>",),
    ),
    markers=("<|function_call|>",),
    single=True,
)
HY3 = MarkupFormat(
    "hunyuan-3",
    "hunyuan xml (arg_key/arg_value)",
    Markup(
        section_open="<tool_calls:opensource>\n",
        call_open="<tool_call:opensource>",
        name_close="<tool_sep:opensource>\n",
        params=Params(
            "<arg_key:opensource>",
            "</arg_key:opensource>\n<arg_value:opensource>",
            "</arg_value:opensource>\n",
        ),
        call_close="</tool_call:opensource>\n",
        section_close="</tool_calls:opensource>",
        triggers=("<tool_calls:opensource>",),
    ),
    markers=("<tool_calls{}>", "opensource"),
    think=Think("<think:opensource>", "</think:opensource>", "hunyuan think tags"),
)
# The generation prompt opens the answer (`<|open|>response<|sep|>`), or the thinking, whose
# close the answer follows: a turn of calls closes an empty answer first.
KIMI_K3 = XtmlFormat(
    "kimi-k3",
    "kimi k3 xtml tags, typed arguments",
    Markup(
        section_open="<|close|>response<|sep|><|open|>tools<|sep|>",
        call_open='<|open|>call tool="',
        name_close='" index="{n}"<|sep|>',
        params=Params(
            '<|open|>argument key="', '" type="{type}"<|sep|>', "<|close|>argument<|sep|>"
        ),
        call_close="<|close|>call<|sep|>",
        section_close="<|close|>tools<|sep|>",
        drops=("<|open|>response<|sep|>", "<|close|>response<|sep|>"),
    ),
    markers=("<|open|>", "<|sep|>", "xtml_type"),
    think=Think(
        "<|open|>think<|sep|>",
        "<|close|>think<|sep|>",
        "kimi k3 think channel",
        gap='"<|open|>response<|sep|>"',
    ),
)
COMMAND_R7B = MarkupFormat(
    "command-r7b",
    "cohere <|START_ACTION|> json list",
    Markup(
        section_open="<|START_ACTION|>[\n    ",
        call_open='{"tool_call_id": "{i}", "tool_name": "',
        name_close='", "parameters": ',
        call_close="}",
        call_sep=",\n    ",
        section_close="\n]<|END_ACTION|>",
        triggers=("<|START_ACTION|>",),
        drops=("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"),
    ),
    markers=("<|START_ACTION|>", '"tool_call_id"'),
    think=Think("<|START_THINKING|>", "<|END_THINKING|>", "cohere thinking"),
)


def _json_list(
    name: str, label: str, section: tuple[str, str], call_close: str = "}", call_sep: str = ", "
) -> MarkupFormat:
    """Calls as {"name": ..., "arguments": ...} objects between two markers; an `{id}` in
    `call_close` is the id written after the arguments."""
    opened, closed = section
    return MarkupFormat(
        name,
        label,
        Markup(
            section_open=opened,
            call_open='{"name": "',
            name_close='", "arguments": ',
            call_close=call_close,
            call_sep=call_sep,
            section_close=closed,
            triggers=(opened.rstrip(),),  # a prefix of the call: Firefunction's leading space kept
        ),
        markers=(opened.strip(),),
    )


MISTRAL_NEMO = _json_list(
    "mistral-nemo",
    "mistral [TOOL_CALLS] json list with ids",
    ("[TOOL_CALLS][", "]"),
    call_close=', "id": "{id}"}',
)
APRIEL = _json_list(
    "apriel",
    "apriel <tool_calls> json list with ids",
    ("<tool_calls>[", "]</tool_calls>"),
    call_close=', "id": "{id}"}',
)
FIREFUNCTION_V2 = _json_list("firefunction-v2", "firefunction functools[...]", (" functools[", "]"))
MINIMAX_M1 = _json_list(
    "minimax-m1",
    "minimax <tool_calls> json lines",
    ("<tool_calls>\n", "\n</tool_calls>"),
    call_sep="\n",
)
SOLAR_OPEN = MarkupFormat(
    "solar-open",
    "solar tool-call tokens, json arguments",
    Markup(
        section_open="<|tool_calls|>",
        call_open="<|tool_call:begin|>{id}<|tool_call:name|>",
        name_close="<|tool_call:args|>",
        call_close="<|tool_call:end|>",
        section_close="<|calls|>",
        drops=("<|content|>",),
    ),
    markers=("<|tool_call:begin|>",),
    think=Think("<|think|>", "<|end|><|begin|>assistant", "solar think block"),
)
LING_3 = MarkupFormat(
    "ling-3",
    "ling xml (arg_key/arg_value)",
    Markup(
        call_open="<tool_call>",
        name_close="\n",
        params=Params("<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>"),
        call_close="\n</tool_call>",
        call_sep="\n",
    ),
    markers=("<tool_call>", "<arg_key>", "</arg_key>\n<arg_value>"),
)
GIGACHAT_3 = MarkupFormat(
    "gigachat-3",
    "gigachat function call message",
    Markup(
        call_open='<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "',
        name_close='", "arguments": ',
        call_close="}",
    ),
    markers=("function call<|role_sep|>",),
    single=True,
)
# Harmony-like messages (` to=RECIPIENT<|message|>...<|eom|>`), the generation prompt being
# `<|start|>assistant`: reasoning goes to `self`, the answer to `user`, each call to the
# function, which the call's own markup names again.
MUSE_GLIMMER = MarkupFormat(
    "muse-glimmer",
    "muse glimmer atem xml, one message per call",
    Markup(
        call_open=" to=",
        name_close='<|message|><atem:function_calls>\n<atem:invoke name="{name}">\n',
        params=Params('<atem:parameter name="', '">', "</atem:parameter>\n"),
        call_close="</atem:invoke>\n</atem:function_calls>",
        call_sep="<|eom|><|start|>assistant",
        triggers=(" to=",),
        drops=(" to=user<|message|>", "<|eom|>", "<|start|>assistant", "<|eot|>"),
    ),
    markers=("<atem:function_calls>", "<|eom|>"),
    think=Think(" to=self<|message|>", "<|eom|><|start|>assistant", "muse glimmer self channel"),
)
HARMONY_THINK = Think(
    "<|channel|>analysis<|message|>", "<|end|><|start|>assistant", "harmony analysis channel"
)


def _harmony(name: str, label: str, header: str) -> MarkupFormat:
    return MarkupFormat(
        name,
        label,
        Markup(
            call_open=" to=functions.",
            name_close=header,
            call_close="<|call|>",
            triggers=(" to=functions.", "<|channel|>commentary to="),
            drops=("<|channel|>final<|message|>", "<|start|>assistant", "<|return|>", "<|end|>"),
        ),
        markers=("<|channel|>", "to=functions."),
        think=HARMONY_THINK,
        single=True,
    )


GPT_OSS = _harmony("gpt-oss", "harmony (gpt-oss)", "<|channel|>commentary json<|message|>")
LLM_JP = _harmony(
    "harmony-constrain",
    "harmony with <|constrain|>",
    "<|channel|>commentary <|constrain|> json<|message|>",
)

FORMATS: tuple[ChatFormat, ...] = (
    GPT_OSS,
    LLM_JP,
    QWEN3_CODER,
    STEPFUN,
    SEED_OSS,
    MINIMAX_M2,
    MINIMAX_M3,
    HY3,
    GLM_45,  # before 4.7: its markers are 4.7's and more
    GLM_47,
    DEEPSEEK_V32,
    DEEPSEEK_V4,
    DEEPSEEK_R1,
    DEEPSEEK_V31,
    KIMI_K2,
    KIMI_K3,
    COMMAND_R7B,
    COMMAND_R_PLUS,
    SOLAR_OPEN,
    LING_3,
    MISTRAL_NEMO,
    APRIEL,
    FIREFUNCTION_V2,
    MINIMAX_M1,
    GIGACHAT_3,
    MISTRAL_V13,  # before v11: its markers are v11's and more
    MISTRAL_V11,
    APERTUS,
    NEMOTRON_V2,
    GIGACHAT_31,
    FUNCTIONARY_V31,
    MINICPM5,
    MUSE_GLIMMER,
    LFM2,
    FUNCTIONARY_V32,
    GEMMA_4,
    HERMES,
    REKA,
    MISTRAL_V1,
    LLAMA3,
)

# Reasoning markup, for templates whose tool format does not bring its own.
THINKS: tuple[Think, ...] = (
    Think("<seed:think>", "</seed:think>", "seed think tags"),
    Think("<think:opensource>", "</think:opensource>", "hunyuan think tags"),
    Think("<mm:think>", "</mm:think>", "minimax think tags"),
    Think("<|channel>thought\n", "<channel|>", "gemma thought channel"),
    Think("Here are my reasoning steps:\n", "\n[BEGIN FINAL RESPONSE]\n", "apriel reasoning steps"),
)
