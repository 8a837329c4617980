"""The Helm chart (charts/sampledb-operator) installs what the kustomize layouts install.

`helm lint --strict` finds nothing to say, and `helm template` with the chart's default values gives
the objects of manifests/default (kinds, names, namespaces, RBAC rules, the admission policy, the
Deployment and Service field by field), apart from what tells a Helm release from a kustomize install
(tests/support/helm.py: `comparable`). Each value that stands for an overlay or a component gives that
layout's objects: watchNamespaces the namespaced overlay, monitoring.* the monitoring one, sharding the
sharding one, finalizerPolicy the admission one. The layouts are read from their files
(tests/support/layouts.py, checked against `kubectl kustomize` by tests/integration/
test_helm_chart_kustomize.py), so the chart and the manifests cannot drift apart unnoticed. helm is
built by hack/build-helm.sh on first use (Go is needed, as for the other tools).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from tests.support import layouts
from tests.support.helm import CHART, LAYOUTS, differences, helm, render, set_args

MANIFESTS = layouts.MANIFESTS
WATCHED = ["shop", "analytics"]  # the namespaces manifests/overlays/namespaced lists
EVERYTHING_ON = {
    "watchNamespaces": '["shop","analytics"]', "sharding.enabled": "true", "finalizerPolicy.enabled": "true",
    "monitoring.serviceMonitor.enabled": "true", "monitoring.prometheusRule.enabled": "true",
    "monitoring.podMonitor.enabled": "true", "monitoring.dashboard.enabled": "true",
    "monitoring.prometheusRule.labels": '{"release":"prometheus"}',
    "extraArgs": '["--workers=8"]', "extraEnv": '[{"name":"SAMPLEDB_LOG_LEVEL","value":"debug"}]',
    "imagePullSecrets": '[{"name":"registry"}]', "nodeSelector": '{"kubernetes.io/os":"linux"}',
    "chaosAnnotation.enabled": "true", "operatorRollouts": "0",
}


def lint(*args: str) -> str:
    out = helm("lint", "--strict", str(CHART), *args)
    return out.stdout + out.stderr


@pytest.mark.parametrize("values", [{}, EVERYTHING_ON], ids=["defaults", "everything-on"])
def test_helm_lint_is_clean(values: dict[str, str]) -> None:
    out = lint(*set_args(values))
    assert "1 chart(s) linted, 0 chart(s) failed" in out, out
    assert not [line for line in out.splitlines() if line.startswith("[")], out  # no INFO, WARNING or ERROR


def test_default_values_install_what_manifests_default_installs() -> None:
    chart = render(include_crds=True)
    kustomize = layouts.build(MANIFESTS / "default")
    assert differences(chart, kustomize) == []
    # the same kinds and names, spelled out (the namespace comes from `helm install --create-namespace`)
    assert {(o["kind"], o["metadata"]["name"]) for o in chart} == {
        (o["kind"], o["metadata"]["name"]) for o in kustomize if o["kind"] != "Namespace"}
    rules = {o["metadata"]["name"]: o["rules"] for o in chart if o["kind"] in {"ClusterRole", "Role"}}
    assert rules == {o["metadata"]["name"]: o["rules"] for o in kustomize if o["kind"] in {"ClusterRole", "Role"}}


@pytest.mark.parametrize("layout", sorted(set(LAYOUTS) - {"default"}))
def test_each_value_gives_its_layouts_objects(layout: str) -> None:
    assert differences(render(values=LAYOUTS[layout], include_crds=True), layouts.build(MANIFESTS / layout)) == []


def test_watched_namespaces_with_the_finalizer_policy_give_the_namespaced_overlay_with_admission(
        tmp_path: Path) -> None:
    """manifests/overlays/namespaced with its `- ../../admission` line uncommented, as its comment says."""
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy)
    path = copy / "overlays" / "namespaced" / "kustomization.yaml"
    text = path.read_text()
    assert "\n# - ../../admission " in text
    path.write_text(text.replace("\n# - ../../admission ", "\n- ../../admission   "))
    values = {**LAYOUTS["overlays/namespaced"], **LAYOUTS["overlays/admission"]}
    assert differences(render(values=values, include_crds=True), layouts.build(copy / "overlays" / "namespaced")) == []


def test_the_chart_crds_are_the_generated_ones() -> None:
    chart = sorted(p.name for p in (CHART / "crds").iterdir())
    assert chart == sorted(p.name for p in (MANIFESTS / "crd").glob("*.yaml"))
    for name in chart:
        assert (CHART / "crds" / name).read_text() == (MANIFESTS / "crd" / name).read_text(), \
            f"charts/sampledb-operator/crds/{name} is stale: run `make crd`"


@pytest.mark.parametrize("name", ["prometheusrule.yaml", "sampledb-operator.json", "sampledb-postgres.json"])
def test_the_chart_monitoring_files_are_the_components(name: str) -> None:
    shipped = next((MANIFESTS / "components" / "monitoring").rglob(name))
    assert (CHART / "files" / name).read_text() == shipped.read_text(), \
        f"charts/sampledb-operator/files/{name} differs from {shipped.relative_to(MANIFESTS.parent)}: copy it"


def test_another_release_name_prefixes_every_cluster_scoped_object_and_the_policy_names_its_identity() -> None:
    objs = render(release="team-a", namespace="databases", values={"watchNamespaces": '["shop"]'})
    cluster_scoped = [o for o in objs if o["kind"] in layouts.CLUSTER_SCOPED]
    assert cluster_scoped
    assert all(o["metadata"]["name"].startswith("team-a-sampledb-operator") for o in cluster_scoped)
    for o in objs:  # the release's namespace, but for the watched namespace's RoleBinding
        if o["kind"] not in layouts.CLUSTER_SCOPED:
            watched = (o["kind"], o["metadata"]["name"]) == ("RoleBinding", "team-a-sampledb-operator")
            assert o["metadata"]["namespace"] == ("shop" if watched else "databases"), o["metadata"]
    [policy] = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"]
    assert policy["spec"]["matchConditions"][0]["expression"] == \
        "request.userInfo.username == 'system:serviceaccount:databases:team-a-sampledb-operator'"
    [binding] = [o for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "shop"]
    assert binding["roleRef"]["name"] == "team-a-sampledb-operator"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "team-a-sampledb-operator",
                                    "namespace": "databases"}]


RESOURCES = '{"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}}'


def test_image_replicas_resources_log_format_and_extra_args() -> None:
    objs = render(values={"image.repository": '"registry.example.com/sampledb-operator"', "image.tag": '"1.2.3"',
                          "image.pullPolicy": '"Always"', "replicas": "1", "logFormat": '"console"',
                          "resources": RESOURCES, "extraArgs": '["--workers=8"]'})
    [deployment] = [o for o in objs if o["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 1
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/sampledb-operator:1.2.3"
    assert container["imagePullPolicy"] == "Always"
    assert container["args"] == ["run", "--workers=8"]
    assert {"name": "SAMPLEDB_LOG_FORMAT", "value": "console"} in container["env"]
    assert container["resources"] == json.loads(RESOURCES)
    assert not [e for e in container["env"] if e["name"] == "SAMPLEDB_OPERATOR_ROLLOUTS"]  # the default: 1


def test_operator_rollouts_reach_the_operator() -> None:
    [deployment] = [o for o in render(values={"operatorRollouts": "0"}) if o["kind"] == "Deployment"]
    assert {"name": "SAMPLEDB_OPERATOR_ROLLOUTS", "value": "0"} in deployment["spec"]["template"]["spec"][
        "containers"][0]["env"]


def test_the_default_image_is_the_chart_app_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    [deployment] = [o for o in render() if o["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"ghcr.io/sampledb/sampledb-operator:{chart['appVersion']}"


@pytest.mark.parametrize(("values", "message"), [
    ({"replica": "3"}, "additional properties 'replica' not allowed"),
    ({"logFormat": '"xml"'}, "value must be one of"),
    ({"watchNamespaces": '["Shop"]'}, "does not match pattern"),
    ({"operatorRollouts": "-1"}, "minimum"),
])
def test_values_schema_refuses_mistakes(values: dict[str, str], message: str) -> None:
    out = helm("template", "x", str(CHART), *set_args(values), check=False)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr
