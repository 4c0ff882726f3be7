"""Which files of a hub repo `-hf OWNER/NAME[:QUANT]` fetches: llama-server's choice
(llama.cpp's common/download.cpp), on file lists shaped like real GGUF repos'."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from respond._hub import HubModel, choose_mmproj, choose_model, split_spec

# As unsloth and bartowski lay out their repos: quants at the top, big ones split in folders.
REPO = [
    ".gitattributes",
    "README.md",
    "Qwen3-8B-IQ4_XS.gguf",
    "Qwen3-8B-Q4_K_M.gguf",
    "Qwen3-8B-UD-Q4_K_XL.gguf",
    "Qwen3-8B-Q8_0.gguf",
    "BF16/Qwen3-8B-BF16-00002-of-00002.gguf",
    "BF16/Qwen3-8B-BF16-00001-of-00002.gguf",
    "mmproj-F16.gguf",
    "mmproj-Q8_0.gguf",
    "imatrix_unsloth.gguf",
]


@pytest.mark.parametrize(
    ("tag", "files"),
    [
        ("Q8_0", ["Qwen3-8B-Q8_0.gguf"]),
        ("q8_0", ["Qwen3-8B-Q8_0.gguf"]),  # the tag matches in any case
        ("UD-Q4_K_XL", ["Qwen3-8B-UD-Q4_K_XL.gguf"]),
        ("IQ4_XS", ["Qwen3-8B-IQ4_XS.gguf"]),
        ("", ["Qwen3-8B-Q4_K_M.gguf"]),  # no tag: Q4_K_M
        # A split model is taken whole, its parts in order, whatever order the hub lists them.
        (
            "BF16",
            ["BF16/Qwen3-8B-BF16-00001-of-00002.gguf", "BF16/Qwen3-8B-BF16-00002-of-00002.gguf"],
        ),
        ("Q2_K", []),  # a tag the repo does not have: nothing, not another quant
    ],
)
def test_the_model_is_chosen_by_its_tag(tag: str, files: list[str]) -> None:
    assert choose_model(REPO, tag) == files


def test_without_a_tag_q4_k_m_then_q8_0_then_the_first_model() -> None:
    without_q4 = [f for f in REPO if "Q4_K_M" not in f]
    assert choose_model(without_q4, "") == ["Qwen3-8B-Q8_0.gguf"]
    assert choose_model(["mmproj-F16.gguf", "tiny-F32.gguf", "z-F16.gguf"], "") == ["tiny-F32.gguf"]


def test_mmproj_and_imatrix_files_are_never_the_model() -> None:
    assert choose_model(["mmproj-Q8_0.gguf", "imatrix-Q8_0.gguf"], "Q8_0") == []
    assert choose_model(["mmproj-F16.gguf", "imatrix_unsloth.gguf"], "") == []


def test_the_tag_must_end_at_a_dot_or_a_dash() -> None:
    # "Q4_K" is not the file of "Q4_K_M": the tag is followed by `.` or `-` in the name.
    assert choose_model(["m-Q4_K_M.gguf", "m-Q4_K_S.gguf"], "Q4_K") == []
    assert choose_model(["m-Q4_K_M.gguf", "m-Q4_K.gguf"], "Q4_K") == ["m-Q4_K.gguf"]


def test_the_mmproj_is_the_one_closest_in_bits() -> None:
    assert choose_mmproj(REPO, "Qwen3-8B-Q8_0.gguf") == "mmproj-Q8_0.gguf"
    assert choose_mmproj(REPO, "BF16/Qwen3-8B-BF16-00001-of-00002.gguf") == "mmproj-F16.gguf"
    assert choose_mmproj(["a/m-Q8_0.gguf", "b/mmproj-Q8_0.gguf"], "a/m-Q8_0.gguf") is None
    assert choose_mmproj(["m-Q8_0.gguf"], "m-Q8_0.gguf") is None


def test_one_beside_the_model_beats_one_above_it() -> None:
    files = ["mmproj-Q8_0.gguf", "F16/m-F16.gguf", "F16/mmproj-Q4_0.gguf"]
    assert choose_mmproj(files, "F16/m-F16.gguf") == "F16/mmproj-Q4_0.gguf"


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("unsloth/Qwen3-8B-GGUF:Q4_K_M", ("unsloth/Qwen3-8B-GGUF", "Q4_K_M")),
        ("unsloth/Qwen3-8B-GGUF", ("unsloth/Qwen3-8B-GGUF", "")),
    ],
)
def test_the_repo_and_its_tag(spec: str, parsed: tuple[str, str]) -> None:
    assert split_spec(spec) == parsed


@pytest.mark.parametrize("spec", ["Qwen3-8B-GGUF", "a/b/c", "/b", "a/:Q8_0", "a/b:Q8_0:x"])
def test_a_malformed_repo_is_refused_saying_the_form(spec: str) -> None:
    with pytest.raises(ValueError, match=r"use OWNER/NAME\[:QUANT\]"):
        split_spec(spec)


@pytest.mark.parametrize(
    ("file", "name"),
    [
        ("Qwen3-8B-Q8_0.gguf", "Qwen3-8B-Q8_0"),
        ("Qwen3-8B-BF16-00001-of-00002.gguf", "Qwen3-8B-BF16"),
    ],
)
def test_the_model_is_named_by_its_file_without_a_part_number(file: str, name: str) -> None:
    assert HubModel(gguf=Path("/cache/snapshots/abc") / file, mmproj=None).name == name


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["-m", "model.gguf", "-hf", "owner/name"], "-m and -hf both name the model"),
        (["--hf-file", "a.gguf"], "give the repo with -hf"),
        (["-hf", "owner/name", "--upstream", "http://x/v1"], "does not combine with -m, -hf"),
        (["-hf", "owner/name", "--models-dir", "."], "does not combine with -m or -hf"),
    ],
)
def test_flags_that_do_not_combine_stop_the_start_saying_why(argv: list[str], said: str) -> None:
    from respond._registry import build_engines
    from respond.cli import parse_settings

    with pytest.raises(SystemExit, match=re.escape(said)):
        build_engines(parse_settings(["serve", *argv], {}))
