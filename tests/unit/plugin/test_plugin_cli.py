"""`kubectl sampledb` arguments: connection flags before or after the command, `--` for psql only,
exit codes (0 done, 1 failed, 2 usage), one-line errors, and the console script's entry point."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path
from typing import Any

import pytest

from sampledb_operator.kube.errors import Invalid, NotFound
from sampledb_operator.plugin import cli, commands
from sampledb_operator.plugin.actions import ActionError
from sampledb_operator.plugin.session import Target

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Target, tuple[Any, ...], dict[str, Any]]]:
    """Stand-ins for the commands: they record their arguments and succeed."""
    seen: list[tuple[str, Target, tuple[Any, ...], dict[str, Any]]] = []

    def recorder(name: str) -> Any:
        async def command(target: Target, *args: Any, **kwargs: Any) -> int:
            seen.append((name, target, args, kwargs))
            return 0
        return command

    for name in ("status", "backup", "restore", "upgrade", "set_paused", "verify_recovery"):
        monkeypatch.setattr(commands, name, recorder(name))
    monkeypatch.setattr(cli, "_quiet_logging", lambda verbose: None)
    return seen


def test_connection_flags_work_before_and_after_the_command(calls: list[Any]) -> None:
    assert cli.main(["-n", "shop", "--context", "prod", "status", "orders"]) == 0
    assert cli.main(["status", "orders", "-n", "shop", "--kubeconfig", "/k"]) == 0
    assert cli.main(["--context", "prod", "status", "orders", "--namespace", "shop"]) == 0
    assert [c[1] for c in calls] == [Target(None, "prod", "shop"), Target("/k", None, "shop"),
                                     Target(None, "prod", "shop")]
    assert calls[0][2] == ("orders",)


def test_each_command_gets_its_arguments(calls: list[Any]) -> None:
    assert cli.main(["backup", "orders", "--name", "b1", "--wait", "--timeout", "30"]) == 0
    assert cli.main(["restore", "b1", "--to", "copy", "--version", "17.2", "--storage-size", "9Gi", "--dry-run"]) == 0
    assert cli.main(["upgrade", "orders", "17.2", "--image", "r/pg:17.2"]) == 0
    assert cli.main(["pause", "orders"]) == 0
    assert cli.main(["resume", "orders"]) == 0
    assert cli.main(["verify-recovery", "orders", "--wait"]) == 0
    by_name = {c[0] + (str(c[2][-1]) if c[0] == "set_paused" else ""): c for c in calls}
    assert by_name["backup"][2:] == (("orders",), {"name": "b1", "dry_run": False, "wait": True,
                                                   "wait_seconds": 30.0})
    assert by_name["restore"][2:] == (("b1", "copy"), {"version": "17.2", "storage_size": "9Gi", "dry_run": True,
                                                       "wait": False, "wait_seconds": 1800.0})
    assert by_name["upgrade"][2:] == (("orders", "17.2"), {"image": "r/pg:17.2", "default_image": False,
                                                           "dry_run": False})
    assert by_name["set_pausedTrue"][2] == ("orders", True)
    assert by_name["set_pausedFalse"][2] == ("orders", False)
    assert by_name["verify_recovery"][2:] == (("orders",), {"dry_run": False, "wait": True, "wait_seconds": 3600.0})


def test_usage_errors_exit_2(calls: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert cli.main(["restore", "b1"]) == 2                      # --to is required
    assert cli.main(["frobnicate"]) == 2
    assert cli.main(["status", "orders", "--", "-c", "x"]) == 2  # only psql and pgbench take arguments after --
    assert "only psql and pgbench take arguments after --" in capsys.readouterr().err
    assert cli.main(["--help"]) == 0
    assert not calls


@pytest.mark.parametrize(("error", "line"), [
    (NotFound(404, "NotFound", 'sampledbs.sampledb.io "nope" not found'),
     'Error: sampledbs.sampledb.io "nope" not found (namespace shop)'),
    (Invalid(422, "Invalid", "spec.version: downgrade refused"), "Error from server (Invalid): spec.version:"
                                                                  " downgrade refused"),
    (ActionError("give --version"), "Error: give --version"),
])
def test_failures_exit_1_with_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                       error: Exception, line: str) -> None:
    async def failing(target: Target, *args: Any, **kwargs: Any) -> int:
        raise error

    monkeypatch.setattr(commands, "status", failing)
    monkeypatch.setattr(cli, "_quiet_logging", lambda verbose: None)
    assert cli.main(["status", "nope", "-n", "shop"]) == 1
    assert capsys.readouterr().err == line + "\n"


def test_psql_takes_arguments_after_the_separator(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, Any] = {}

    async def psql_plan(target: Target, db: str, **kwargs: Any) -> Any:
        seen.update(kwargs, db=db)
        from sampledb_operator.plugin.psql import Credentials, plan
        return plan(kwargs["kubectl"], target, "shop", db, Credentials("app", "app", "pw")), "orders-credentials"

    monkeypatch.setattr(commands, "psql_plan", psql_plan)
    monkeypatch.setattr(cli, "_quiet_logging", lambda verbose: None)
    monkeypatch.setenv(cli.KUBECTL_ENV, "testcluster kubectl")
    assert cli.main(["psql", "orders", "--dry-run", "--", "-c", "select 1"]) == 0
    assert seen["extra"] == ["-c", "select 1"] and seen["kubectl"] == ["testcluster", "kubectl"]
    out = capsys.readouterr().out
    assert out.startswith("testcluster kubectl port-forward") and "pw" not in out.replace("password", "")


def test_the_console_script_is_kubectl_sampledb() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = scripts["kubectl-sampledb"].partition(":")
    assert getattr(importlib.import_module(module), func) is cli.main
