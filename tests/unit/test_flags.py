"""respond/_flags.py is the one source of every setting: the flag, the environment variable and
the config file's [serve] key each reach the same Settings field, in that order of precedence,
and the README's table is the spec's."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from respond._config import Settings
from respond._flags import FLAGS, Flag, readme_table
from respond.cli import parse_settings
from tools.flag_table import BEGIN, END

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_table_is_the_spec() -> None:
    text = README.read_text()
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert table == readme_table(), "run: python tools/flag_table.py"


def test_every_settings_field_has_one_flag() -> None:
    fields = {field.name for field in dataclasses.fields(Settings)}
    by_flag = [flag.field for flag in FLAGS]
    assert len(by_flag) == len(set(by_flag))
    # The two without a flag: more keys for a program embedding respond, the file as read.
    assert fields - set(by_flag) == {"api_keys", "config_file"}
    assert set(by_flag) <= fields
    names = [name for flag in FLAGS for name in flag.flags]
    assert len(names) == len(set(names))


def sample(flag: Flag) -> str:
    """A valid value of `flag`, as text."""
    if flag.choices:
        return flag.choices[-1]
    if flag.kind == "switch":
        return "1"
    if flag.metavar and flag.metavar.startswith("HOST:PORT"):
        return "127.0.0.1:64"
    if flag.metavar and flag.metavar.startswith("OWNER/NAME"):
        return "owner/name:Q8_0"
    return "64"


def toml_value(flag: Flag) -> str:
    if flag.kind == "switch":
        return "true"
    if flag.kind == "list":
        return '["64"]'
    if flag.parse in (str, Path) or flag.choices or ":" in sample(flag):
        return f'"{sample(flag)}"'
    return sample(flag)


def expected(flag: Flag) -> Any:
    return True if flag.kind == "switch" else flag.value(sample(flag))


def argv(flag: Flag) -> list[str]:
    return [flag.long] if flag.kind == "switch" else [flag.long, sample(flag)]


@pytest.mark.parametrize("flag", FLAGS, ids=lambda flag: flag.long)
def test_each_setting_comes_from_its_flag_its_variable_and_its_key(
    flag: Flag, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    if flag.field == "config_path":
        (tmp_path / sample(flag)).write_text("[serve]\n")  # a file to read
    default = getattr(parse_settings(["serve"], {}), flag.field)
    assert default == flag.default
    assert getattr(parse_settings(["serve", *argv(flag)], {}), flag.field) == expected(flag)
    env = {flag.env: sample(flag)}
    assert getattr(parse_settings(["serve"], env), flag.field) == expected(flag)
    if flag.in_file:
        config = tmp_path / "respond.toml"
        config.write_text(f"[serve]\n{flag.key} = {toml_value(flag)}\n")
        from_file = parse_settings(["serve", "--config", str(config)], {})
        assert getattr(from_file, flag.field) == expected(flag)


def test_a_flag_beats_its_variable_which_beats_the_file(tmp_path: Path) -> None:
    config = tmp_path / "respond.toml"
    config.write_text('[serve]\nctx_size = 1024\nport = 9001\nalias = "from-file"\n')
    env = {"RESPOND_CONFIG": str(config), "RESPOND_PORT": "9002", "RESPOND_ALIAS": "from-env"}
    settings = parse_settings(["serve", "-a", "from-flag"], env)
    assert (settings.n_ctx, settings.port, settings.alias) == (1024, 9002, "from-flag")
    assert settings.config_path == config and settings.config_file is not None


def test_a_repeated_flag_adds_to_its_comma_list_variable() -> None:
    env = {"RESPOND_UPSTREAM": "http://a/v1,http://b/v1"}
    settings = parse_settings(["serve", "--upstream", "http://c/v1"], env)
    assert settings.upstreams == ["http://a/v1", "http://b/v1", "http://c/v1"]


def test_the_composite_settings() -> None:
    settings = parse_settings(["serve", "--max-tools", "3", "--store-ttl", "90m", "-n", "0"], {})
    assert settings.limits.tools == 3 and settings.limits.input_items == 10_000
    assert settings.store_ttl_seconds == 5400 and settings.n_predict is None


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--parallel", "0"], {}, "--parallel"),
        ([], {"RESPOND_PARALLEL": "0"}, "RESPOND_PARALLEL"),
        ([], {"RESPOND_STORE_TTL": "soon"}, "RESPOND_STORE_TTL"),
        ([], {"RESPOND_LOG_FORMAT": "xml"}, "RESPOND_LOG_FORMAT"),
        ([], {"RESPOND_PORT": "http"}, "RESPOND_PORT"),
        (["--upstream-api", "soap"], {}, "--upstream-api"),
        (["-hf", "tiny:Q8_0"], {}, "OWNER/NAME[:QUANT]"),
        ([], {"RESPOND_HF_REPO": "a/b/c"}, "RESPOND_HF_REPO"),
    ],
)
def test_a_wrong_value_is_refused_naming_where_it_came_from(
    args: list[str], env: dict[str, str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_settings(["serve", *args], env)
    assert exited.value.code == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ("ctx_size = 'big'", "serve.ctx_size"),
        ("metrics_auth = 'yes'", "serve.metrics_auth"),
        ("upstream = 'http://a/v1'", "serve.upstream"),
        ("color = 'blue'", "serve.color"),
        ("config = 'other.toml'", "serve.config"),
    ],
)
def test_a_wrong_serve_key_is_refused_naming_it(
    table: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "respond.toml"
    config.write_text(f"[serve]\n{table}\n")
    with pytest.raises(SystemExit):
        parse_settings(["serve", "--config", str(config)], {})
    assert f"{config}: {named}" in capsys.readouterr().err


def test_serve_help_lists_the_chat_format_names(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from respond.engines.formats import FORMATS

    monkeypatch.setenv("COLUMNS", "100000")  # one line per flag: no name split at a hyphen
    with pytest.raises(SystemExit):
        parse_settings(["serve", "--help"])
    shown = capsys.readouterr().out
    listed = shown.split("one of: ", 1)[1].split(" (env RESPOND_CHAT_FORMAT", 1)[0]
    assert listed.split(", ") == [fmt.name for fmt in FORMATS]
