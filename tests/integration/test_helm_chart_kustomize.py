"""The Helm chart against `kubectl kustomize` itself, and the API server's word on its objects.

tests/unit/manifests/test_helm_chart.py compares the chart with the layouts as tests/support/layouts.py
reads them; here that reading is checked against kustomize (the local cluster's kubectl), and the
chart's rendering is compared with kustomize's directly, for every layout a value stands for. Then the
API server accepts every object the chart renders with the default values (server-side dry run).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support import layouts
from tests.support.helm import LAYOUTS, differences, render
from tests.support.kube import kubectl
from tests.support.rbac import render as kustomize

pytestmark = pytest.mark.cluster
READING = ("reading of tests/support/layouts.py", "kubectl kustomize")  # names in a failure's diff


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_chart_renders_what_kustomize_renders(layout: str, cluster: object) -> None:
    built = kustomize(layouts.MANIFESTS / layout)
    assert differences(layouts.build(layouts.MANIFESTS / layout), built, READING) == []
    assert differences(render(values=LAYOUTS[layout], include_crds=True), built) == []


def test_the_namespaced_overlay_with_admission(tmp_path: Path, cluster: object) -> None:
    copy = tmp_path / "manifests"
    shutil.copytree(layouts.MANIFESTS, copy)
    path = copy / "overlays" / "namespaced" / "kustomization.yaml"
    path.write_text(path.read_text().replace("\n# - ../../admission ", "\n- ../../admission   "))
    built = kustomize(copy / "overlays" / "namespaced")
    assert differences(layouts.build(copy / "overlays" / "namespaced"), built, READING) == []
    values = {**LAYOUTS["overlays/namespaced"], **LAYOUTS["overlays/admission"]}
    assert differences(render(values=values, include_crds=True), built) == []


def test_the_api_server_accepts_the_default_rendering(cluster: object) -> None:
    """A server-side dry run in a namespace that exists (a dry run creates none); cluster-scoped names
    carry the release's prefix, so nothing meets an installed copy."""
    objs: list[dict[str, Any]] = render(release="dry-run", namespace="default", include_crds=True)
    out = kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(objs)).stdout
    assert len(out.splitlines()) == len(objs), out
    assert "deployment.apps/dry-run-sampledb-operator" in out
