"""kubeconfig_namespace: the namespace a kubeconfig context sets, as kubectl picks it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sampledb_operator.kube.credentials import kubeconfig_namespace


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u", "namespace": "shop"}},
                     {"name": "b", "context": {"cluster": "c", "user": "u"}}],
    }))
    return str(path)


def test_the_current_or_named_contexts_namespace(kubeconfig: str) -> None:
    assert kubeconfig_namespace(kubeconfig) == "shop"
    assert kubeconfig_namespace(kubeconfig, "a") == "shop"
    assert kubeconfig_namespace(kubeconfig, "b") is None
    assert kubeconfig_namespace(kubeconfig, "no-such-context") is None


def test_kubeconfig_from_the_environment(kubeconfig: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{kubeconfig}")
    assert kubeconfig_namespace(None) == "shop"


def test_no_kubeconfig_no_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert kubeconfig_namespace(None) is None
    (tmp_path / "broken").write_text("{not yaml")
    assert kubeconfig_namespace(str(tmp_path / "broken")) is None
