"""The plugin installed alone (hack/build-plugin.sh, the distribution `kubectl-sampledb`): no kubernetes_asyncio
(one line says how to add it), and its own distribution's version.

tests/integration/test_plugin_package.py builds and installs that distribution; these are the pieces of it
that need no build.
"""

from __future__ import annotations

import pytest

from sampledb_operator.kube.errors import KubeError
from sampledb_operator.plugin import cli, commands, version
from sampledb_operator.plugin.session import Target


def test_the_version_is_the_plugin_distributions_when_the_operator_is_not_installed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def installed(name: str) -> str:
        asked.append(name)
        return "1.2.3"

    monkeypatch.setattr(version, "version", installed)
    monkeypatch.setattr(version, "_package_version", "0+unknown")
    assert version.installed_version() == "1.2.3" and asked == ["kubectl-sampledb"]
    monkeypatch.setattr(version, "_package_version", "0.9.0")
    assert version.installed_version() == "0.9.0" and asked == ["kubectl-sampledb"]


def test_a_missing_kubernetes_asyncio_is_one_line_with_its_remedy(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Only a kubeconfig user with a legacy auth-provider loads kubernetes_asyncio (kube/credentials.py)."""
    async def failing(target: Target, *args: object, **kwargs: object) -> int:
        try:
            raise ModuleNotFoundError("No module named 'kubernetes_asyncio'", name="kubernetes_asyncio")
        except ModuleNotFoundError as exc:
            raise KubeError(f"cannot load Kubernetes client configuration: {exc}") from exc

    monkeypatch.setattr(commands, "status", failing)
    monkeypatch.setattr(cli, "_quiet_logging", lambda verbose: None)
    assert cli.main(["status", "orders"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("Error: cannot load Kubernetes client configuration: No module named 'kubernetes_asyncio'")
    assert "pipx inject kubectl-sampledb kubernetes_asyncio" in err
