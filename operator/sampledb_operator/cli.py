"""Command line of sampledb-operator: `run`, `crd` (print the CRD manifests), `chaos` (chaos/command.py), `version`
(or `--version`).

Invariants: importing this module is cheap (the app, the CRD renderer and everything that pulls
in kubernetes_asyncio are imported inside the command that needs them); `main` never raises for a
usage or configuration error but returns exit code 2 with a one-line message on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys
from collections.abc import Sequence
from typing import Any

from sampledb_operator import __version__
from sampledb_operator.config import OPTIONS, ConfigError, Option, default_text, load_settings

PROG = "sampledb-operator"
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # argparse: --help (0) or a usage error (2)
        return _exit_code(exc)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.handler(args))
    except ConfigError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree; `run` has one flag per Settings field."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Runs PostgreSQL databases declared as SampleDB resources."
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    run = sub.add_parser(
        "run", help="run the operator",
        description="Run the operator. Every flag can also be set with the environment variable "
                    "shown; a flag wins over the variable, the variable over the default.",
    )
    for option in OPTIONS:
        _add_option(run, option)
    run.set_defaults(handler=_cmd_run)

    crd = sub.add_parser("crd", help="print the CustomResourceDefinition manifests (YAML)")
    crd.set_defaults(handler=_cmd_crd)

    from sampledb_operator.chaos.command import add_parser as add_chaos_parser

    add_chaos_parser(sub)

    version = sub.add_parser("version", help="print the version")
    version.set_defaults(handler=_cmd_version)
    return parser


def _add_option(parser: argparse.ArgumentParser, option: Option) -> None:
    help_text = f"{option.help} [env {option.env}; default: {default_text(option)}]".replace("%", "%%")
    dest = option.name
    if option.kind == "bool":
        parser.add_argument(option.flag, dest=dest, action=argparse.BooleanOptionalAction, default=None,
                            help=help_text)
    elif option.kind == "list":
        parser.add_argument(option.flag, dest=dest, action="append", default=None, metavar="NS[,NS...]",
                            help=help_text + " (repeatable)")
    else:
        parser.add_argument(option.flag, dest=dest, default=None, metavar=option.name.upper(), help=help_text)


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for option in OPTIONS:
        value = getattr(args, option.name, None)
        if option.kind == "list" and value is not None:
            value = [part.strip() for chunk in value for part in chunk.split(",") if part.strip()]
        flags[option.name] = value
    return flags


def _cmd_run(args: argparse.Namespace) -> int:
    settings = load_settings(_flags(args))
    from sampledb_operator.observability.logging import configure_logging

    configure_logging(settings.log_level, settings.effective_log_format())
    app = importlib.import_module("sampledb_operator.app")
    outcome: Any = app.run(settings)
    if inspect.isawaitable(outcome):
        outcome = asyncio.run(_await(outcome))
    return int(outcome or 0)


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _cmd_crd(args: argparse.Namespace) -> int:
    crd = importlib.import_module("sampledb_operator.model.crd")
    text: str = crd.render_crds()
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"{PROG} {__version__}")
    return 0


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    return code if isinstance(code, int) else EXIT_USAGE
