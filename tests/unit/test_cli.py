"""The command line: subcommands, --help documenting env vars, exit code 2 on bad configuration."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from sampledb_operator import __version__, cli
from sampledb_operator.config import OPTIONS, Settings

CRD_DIR = Path(__file__).resolve().parents[2] / "manifests" / "crd"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("SAMPLEDB_") or key == "POD_NAMESPACE":
            monkeypatch.delenv(key)


@pytest.fixture
def fake_app(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    """Stand-in for sampledb_operator.app (written elsewhere): records the Settings it gets."""
    seen: list[Settings] = []
    module = types.ModuleType("sampledb_operator.app")

    def run(settings: Settings) -> int:
        seen.append(settings)
        return 0

    module.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sampledb_operator.app", module)
    monkeypatch.setattr("sampledb_operator.observability.logging.configure_logging", lambda *a, **k: None)
    return seen


def test_version_prints_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"sampledb-operator {__version__}"


def test_no_command_prints_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "run" in capsys.readouterr().err


def test_unknown_flag_exits_2() -> None:
    assert cli.main(["run", "--no-such-flag"]) == 2


def test_run_help_documents_every_flag_with_env_and_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())   # argparse wraps lines
    for option in OPTIONS:
        assert option.flag in out
        assert f"env {option.env}" in out
    assert "default: 16" in out                      # workers
    assert "default: 36000" in out                  # resync period
    assert "default: $POD_NAMESPACE or sampledb-system" in out


def test_run_passes_flags_and_env_to_app(fake_app: list[Settings], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMPLEDB_WORKERS", "7")
    monkeypatch.setenv("SAMPLEDB_LOG_LEVEL", "debug")
    code = cli.main(["run", "--log-level", "warning", "--no-leader-elect", "--namespaces", "a,b",
                     "--namespaces", "c"])
    assert code == 0
    [settings] = fake_app
    assert settings.workers == 7
    assert settings.log_level == "warning"
    assert settings.leader_elect is False
    assert settings.namespaces == ["a", "b", "c"]


def test_run_returns_the_apps_exit_code_also_from_a_coroutine(
    fake_app: list[Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def run(settings: Settings) -> int:
        return 1

    monkeypatch.setattr(sys.modules["sampledb_operator.app"], "run", run)
    assert cli.main(["run"]) == 1


def test_invalid_setting_exits_2_with_one_line_naming_flag(
    fake_app: list[Settings], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli.main(["run", "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--workers" in err and "SAMPLEDB_WORKERS" in err and "1 to 64" in err
    monkeypatch.setenv("SAMPLEDB_LOG_FORMAT", "xml")
    assert cli.main(["run"]) == 2
    assert "SAMPLEDB_LOG_FORMAT" in capsys.readouterr().err
    assert fake_app == []


def test_crd_prints_the_committed_crd_manifests(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["crd"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    committed = [yaml.safe_load(p.read_text()) for p in sorted(CRD_DIR.glob("*.yaml"))]
    assert sorted(d["metadata"]["name"] for d in printed) == ["sampledbbackups.sampledb.io", "sampledbs.sampledb.io"]
    assert sorted(printed, key=lambda d: d["metadata"]["name"]) == \
        sorted(committed, key=lambda d: d["metadata"]["name"])


def test_importing_cli_does_not_import_kubernetes_or_aiohttp() -> None:
    code = ("import sys, sampledb_operator.cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes_asyncio', 'aiohttp')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
