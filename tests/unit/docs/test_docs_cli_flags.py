"""The documented command lines are the code's: `sampledb-operator run`'s flags, variables and defaults (config.py,
docs/operations.md's Configuration table) and the `kubectl sampledb` plugin's commands and their flags
(plugin/cli.py, docs/user-guide.md's plugin section)."""

from __future__ import annotations

import argparse
import re

import pytest
from tests.unit.docs.markdown import DOCS, Table, section, tables

from sampledb_operator import cli
from sampledb_operator.config import OPTIONS, Option, default_text
from sampledb_operator.plugin import cli as plugin_cli

OPERATIONS = DOCS / "operations.md"
USER_GUIDE = DOCS / "user-guide.md"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _flags_of(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"}


def _plain(cell: str) -> str:
    return cell.replace("`", "").strip()


# ------------------------------------------------------------------------------- sampledb-operator run


def _flag_table() -> Table:
    text, line = section(OPERATIONS, "Configuration")
    (table,) = [t for t in tables(OPERATIONS, text, line) if t.header[:3] == ("Flag", "Variable", "Default")]
    return table


def _row_of(option: Option) -> tuple[str, ...]:
    rows = [row for row in _flag_table().rows if option.flag in re.findall(r"--[a-z0-9-]+", row[0])]
    assert len(rows) == 1, f"{option.flag}: {len(rows)} rows of docs/operations.md's Configuration table name it"
    return rows[0]


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.flag)
def test_every_operator_option_is_documented_with_its_variable_and_default(option: Option) -> None:
    flag, variable, default = _row_of(option)[:3]
    assert _plain(variable) == option.env
    assert _plain(default) == default_text(option), (
        f"{option.flag}: docs/operations.md says the default is {_plain(default)!r}, config.py {default_text(option)!r}"
    )
    if option.kind == "bool":
        assert f"`--no-{option.flag[2:]}`" in flag, f"{option.flag} is a switch: document --no-{option.flag[2:]} too"


def test_every_documented_operator_flag_and_variable_is_the_codes() -> None:
    run = _subparsers(cli.build_parser())["run"]
    documented_flags = {f for row in _flag_table().rows for f in re.findall(r"--[a-z0-9-]+", row[0])}
    assert documented_flags == _flags_of(run), (
        "docs/operations.md's Configuration table and `sampledb-operator run`'s flags differ:"
        f" only in the docs {sorted(documented_flags - _flags_of(run))},"
        f" only in the code {sorted(_flags_of(run) - documented_flags)}"
    )
    documented_variables = {_plain(row[1]) for row in _flag_table().rows}
    assert documented_variables == {o.env for o in OPTIONS}


def test_the_flag_table_follows_the_order_of_config_py() -> None:
    order = [re.findall(r"--[a-z0-9-]+", row[0])[0] for row in _flag_table().rows]
    assert order == [o.flag for o in OPTIONS]


# ------------------------------------------------------------------------------- kubectl sampledb


def _plugin_table() -> Table:
    text, line = section(USER_GUIDE, "The kubectl sampledb plugin")
    (table,) = [t for t in tables(USER_GUIDE, text, line) if t.header[:2] == ("Command", "What it does")]
    return table


def _documented_commands() -> dict[str, set[str]]:
    """command -> the flags its row names."""
    out: dict[str, set[str]] = {}
    for row in _plugin_table().rows:
        spans = re.findall(r"`([^`]+)`", row[0])
        assert spans, f"a row of the plugin's command table names no command: {row[0]!r}"
        for span in spans:
            name = span.split()[0]
            assert name not in out, f"the plugin's command {name} has two rows"
            out[name] = set(re.findall(r"--[a-z0-9-]+", span))
    return out


def test_the_plugin_commands_documented_are_the_plugins() -> None:
    documented = set(_documented_commands())
    actual = set(_subparsers(plugin_cli.build_parser()))
    assert documented == actual, (
        "docs/user-guide.md's table of `kubectl sampledb` commands and plugin/cli.py's subcommands differ:"
        f" only in the docs {sorted(documented - actual)}, only in the code {sorted(actual - documented)}"
    )


@pytest.mark.parametrize("command", sorted(_subparsers(plugin_cli.build_parser())))
def test_the_flags_a_plugin_command_row_names_exist(command: str) -> None:
    flags = _documented_commands().get(command, set())
    known = _flags_of(_subparsers(plugin_cli.build_parser())[command])
    assert flags <= known, f"`kubectl sampledb {command}`: documented flags {sorted(flags - known)} do not exist"
