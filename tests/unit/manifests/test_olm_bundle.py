"""The OLM bundle (bundle/, bundle.Dockerfile) is what hack/gen-bundle.py makes of the manifests, and it
says what the kustomize install says: the same RBAC rules, the same Deployment (plus the watched
namespaces from OLM's OperatorGroup), the project's CRDs with descriptors, the samples as
alm-examples, the version of pyproject.toml.

No cluster and no Go: tests/integration/test_olm_bundle_validator.py runs the real validator on it, and
tests/e2e/test_olm_install.py compares what OLM would install with the kustomize install on the API
server.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "manifests"
CSV_FILE = "bundle/manifests/sampledb-operator.clusterserviceversion.yaml"
TARGET_NAMESPACES = "metadata.annotations['olm.targetNamespaces']"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_bundle", REPO / "hack" / "gen-bundle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_bundle"] = module
    spec.loader.exec_module(module)
    return module


gen = load_generator()


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    out: dict[str, str] = gen.generated_files()
    return out


@pytest.fixture(scope="module")
def csv(files: dict[str, str]) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(files[CSV_FILE])
    return doc


def rbac_objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / "rbac" / "rbac.yaml").read_text()) if d]


def triples(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) for every combination a list of rules grants."""
    return {(g, r, v) for rule in rules for g in rule.get("apiGroups", []) for r in rule.get("resources", [])
            for v in rule["verbs"]}


# -- committed == generated -----------------------------------------------------------------------


@pytest.mark.parametrize("rel", sorted(gen.generated_files()))
def test_committed_bundle_file_is_what_the_generator_writes(rel: str, files: dict[str, str]) -> None:
    path = REPO / rel
    assert path.exists(), f"{rel} is missing: run `make bundle`"
    assert path.read_text() == files[rel], f"{rel} is stale (the manifests changed): run `make bundle`"


def test_bundle_holds_no_file_the_generator_does_not_write(files: dict[str, str]) -> None:
    extra = [str(p.relative_to(REPO)) for p in sorted((REPO / "bundle").rglob("*"))
             if p.is_file() and str(p.relative_to(REPO)) not in files]
    assert extra == [], f"not generated: {extra}; run `make bundle` (it removes them)"


def test_check_mode_names_a_stale_file_and_says_run_make_bundle(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`gen-bundle.py --check` on a tree whose CSV was edited by hand: exit 1, the file named."""
    tree = tmp_path / "repo"
    for part in ("manifests", "bundle"):
        shutil.copytree(REPO / part, tree / part)
    shutil.copy(REPO / "pyproject.toml", tree)
    shutil.copy(REPO / "bundle.Dockerfile", tree)
    monkeypatch.setattr(gen, "REPO", tree)
    monkeypatch.setattr(gen, "MANIFESTS", tree / "manifests")
    assert gen.main(["--check"]) == 0
    (tree / CSV_FILE).write_text((tree / CSV_FILE).read_text().replace("replicas: 2", "replicas: 3"))
    (tree / "bundle" / "manifests" / "leftover.yaml").write_text("kind: ConfigMap\n")
    assert gen.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert f"stale: {CSV_FILE} (run `make bundle`)" in out
    assert "stale: bundle/manifests/leftover.yaml" in out
    assert gen.main([]) == 0   # regenerating fixes both
    assert gen.main(["--check"]) == 0
    assert not (tree / "bundle" / "manifests" / "leftover.yaml").exists()


# -- what the CSV says ----------------------------------------------------------------------------


def test_version_and_name_come_from_pyproject(csv: dict[str, Any], files: dict[str, str]) -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert csv["spec"]["version"] == meta["version"]
    assert csv["metadata"]["name"] == f"{meta['name']}.v{meta['version']}"
    annotations = yaml.safe_load(files["bundle/metadata/annotations.yaml"])["annotations"]
    assert annotations["operators.operatorframework.io.bundle.package.v1"] == meta["name"]


def test_install_modes(csv: dict[str, Any]) -> None:
    modes = {m["type"]: m["supported"] for m in csv["spec"]["installModes"]}
    assert modes == {"AllNamespaces": True, "OwnNamespace": True, "MultiNamespace": True, "SingleNamespace": True}


def test_owned_crds_are_the_projects_crds_with_descriptors(csv: dict[str, Any], files: dict[str, str]) -> None:
    crds = {}
    for path in sorted((MANIFESTS / "crd").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        crds[crd["metadata"]["name"]] = crd
        assert files[f"bundle/manifests/{path.name}"] == path.read_text()   # byte copies
    owned = csv["spec"]["customresourcedefinitions"]["owned"]
    assert [o["name"] for o in owned] == ["sampledbs.sampledb.io", "sampledbbackups.sampledb.io"]
    assert set(crds) == {o["name"] for o in owned}
    for o in owned:
        crd = crds[o["name"]]
        assert o["kind"] == crd["spec"]["names"]["kind"]
        assert o["version"] == next(v["name"] for v in crd["spec"]["versions"] if v["storage"])
        assert o["description"]
        paths = {d["path"] for d in o["specDescriptors"]}
        status = {d["path"] for d in o["statusDescriptors"]}
        assert {"phase", "conditions"} <= status
        for d in o["specDescriptors"] + o["statusDescriptors"]:
            assert d["description"] and d["displayName"] and d["x-descriptors"], d
        if o["kind"] == "SampleDB":
            assert {"version", "storage.size", "backup.schedule", "deletionPolicy", "paused"} <= paths
            assert {"currentVersion", "endpoint", "lastBackup.completedAt"} <= status
            policy = next(d for d in o["specDescriptors"] if d["path"] == "deletionPolicy")
            assert [x.rsplit(":", 1)[1] for x in policy["x-descriptors"]] == ["Snapshot", "Retain", "Delete"]
        else:
            assert {"database"} <= paths


def test_descriptor_descriptions_are_the_crd_schemas(csv: dict[str, Any]) -> None:
    crd = yaml.safe_load((MANIFESTS / "crd" / "sampledb.io_sampledbs.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    owned = csv["spec"]["customresourcedefinitions"]["owned"][0]
    size = next(d for d in owned["specDescriptors"] if d["path"] == "storage.size")
    assert size["description"] == schema["spec"]["properties"]["storage"]["properties"]["size"]["description"]


def test_alm_examples_are_the_samples(csv: dict[str, Any]) -> None:
    examples = json.loads(csv["metadata"]["annotations"]["alm-examples"])
    samples = [d for p in sorted((MANIFESTS / "samples").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())
               if d and d["apiVersion"].startswith("sampledb.io/")]
    key = lambda d: json.dumps(d, sort_keys=True)  # noqa: E731
    assert sorted(map(key, examples)) == sorted(map(key, samples))
    assert examples[0]["metadata"]["name"] == "example-database"   # the smallest SampleDB is the console's template
    assert {e["kind"] for e in examples} == {"SampleDB", "SampleDBBackup"}


def test_rbac_is_rbac_yaml_split_by_scope(csv: dict[str, Any]) -> None:
    """Every rule of every role rbac.yaml binds, and nothing else; cluster-scoped reads in
    clusterPermissions, the rest (namespaced: granted per target namespace by OLM) in permissions."""
    strategy = csv["spec"]["install"]["spec"]
    account = strategy["deployments"][0]["spec"]["template"]["spec"]["serviceAccountName"]
    namespaced = [r for p in strategy.get("permissions", []) for r in p["rules"]]
    cluster = [r for p in strategy.get("clusterPermissions", []) for r in p["rules"]]
    assert {p["serviceAccountName"] for p in strategy["permissions"] + strategy["clusterPermissions"]} == {account}
    shipped = [r for o in rbac_objects() if o["kind"] in {"Role", "ClusterRole"} for r in o["rules"]]
    assert triples(namespaced) | triples(cluster) == triples(shipped)
    assert sorted(map(json.dumps, namespaced + cluster)) == sorted(map(json.dumps, shipped))
    cluster_resources = {r for _, r, _ in triples(cluster)}
    # leases: the nodes' heartbeats in kube-node-lease, a namespace OLM cannot place a Role in (list only)
    assert cluster_resources <= {"namespaces", "storageclasses", "nodes", "leases"}, cluster_resources
    assert [r["verbs"] for r in cluster if "leases" in r["resources"]] == [["list"]]
    assert not {r for _, r, _ in triples(namespaced)} & {"namespaces", "storageclasses", "nodes"}
    namespaced_resources = {(g, r) for g, r, _ in triples(namespaced)}
    assert {("sampledb.io", "sampledbs/status"), ("apps", "statefulsets"), ("coordination.k8s.io", "leases")} \
        <= namespaced_resources


def test_deployment_is_the_kustomize_one_plus_olms_target_namespaces(csv: dict[str, Any]) -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all((MANIFESTS / "operator" / "deployment.yaml").read_text()) if d}
    want = copy.deepcopy(docs["Deployment"]["spec"])
    [deployment] = csv["spec"]["install"]["spec"]["deployments"]
    got = copy.deepcopy(deployment["spec"])
    env = got["template"]["spec"]["containers"][0]["env"]
    added = [e for e in env if e["name"] == "SAMPLEDB_NAMESPACES"]
    assert added == [{"name": "SAMPLEDB_NAMESPACES", "valueFrom": {"fieldRef": {"fieldPath": TARGET_NAMESPACES}}}]
    env.remove(added[0])
    assert got == want
    assert deployment["name"] == docs["Deployment"]["metadata"]["name"]
    assert csv["metadata"]["annotations"]["containerImage"] == want["template"]["spec"]["containers"][0]["image"]
    service = yaml.safe_load((REPO / "bundle/manifests/sampledb-operator-metrics_v1_service.yaml").read_text())
    assert service["spec"] == docs["Service"]["spec"]
    assert "namespace" not in service["metadata"]


def test_the_target_namespaces_env_is_what_the_operator_reads() -> None:
    """OLM's annotation: "" for AllNamespaces (all), "a" or "a,b" otherwise."""
    sys.path.insert(0, str(REPO / "operator"))
    from sampledb_operator.config import load_settings

    assert load_settings({}, {"SAMPLEDB_NAMESPACES": ""}).watch_namespaces == [None]
    assert load_settings({}, {"SAMPLEDB_NAMESPACES": "shop"}).watch_namespaces == ["shop"]
    assert load_settings({}, {"SAMPLEDB_NAMESPACES": "shop,analytics"}).watch_namespaces == ["analytics", "shop"]


def test_dockerfile_labels_are_the_annotations(files: dict[str, str]) -> None:
    annotations = yaml.safe_load(files["bundle/metadata/annotations.yaml"])["annotations"]
    labels = dict(line.split(" ", 1)[1].split("=", 1) for line in files["bundle.Dockerfile"].splitlines()
                  if line.startswith("LABEL "))
    assert labels == annotations
    assert "COPY bundle/manifests /manifests/" in files["bundle.Dockerfile"]


# -- the generator refuses what it cannot place ---------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of manifests/ the generator reads instead of the real one."""
    shutil.copytree(MANIFESTS, tmp_path / "manifests")
    monkeypatch.setattr(gen, "MANIFESTS", tmp_path / "manifests")
    yield tmp_path / "manifests"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_a_descriptor_path_missing_from_the_crd_stops_the_generator(tree: Path) -> None:
    edit(tree / gen.CSV_BASE, "path: storage.storageClassName", "path: storage.className")
    with pytest.raises(gen.BundleError, match=r"no field \.spec\.storage\.className"):
        gen.generated_files()


def test_a_role_bound_to_no_one_stops_the_generator(tree: Path) -> None:
    rbac = tree / "rbac" / "rbac.yaml"
    rbac.write_text(rbac.read_text() + "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
                    "metadata: {name: stray}\nrules: []\n")
    with pytest.raises(gen.BundleError, match="binds them to no one"):
        gen.generated_files()


def edit_rbac(tree: Path, change: Any) -> dict[str, Any]:
    """Apply `change` to the first ClusterRole of the copied rbac.yaml that has rules; return it."""
    path = tree / "rbac" / "rbac.yaml"
    objs = rbac_objects()
    role = next(o for o in objs if o["kind"] == "ClusterRole" and o["rules"])
    change(role)
    path.write_text(yaml.safe_dump_all(objs))
    return role


def test_a_resource_of_unknown_scope_stops_the_generator(tree: Path) -> None:
    edit_rbac(tree, lambda role: role["rules"].append({"apiGroups": [""], "resources": ["widgets"],
                                                       "verbs": ["get"]}))
    with pytest.raises(gen.BundleError, match="'widgets'"):
        gen.generated_files()


def test_a_cluster_scoped_rule_moves_its_role_to_cluster_permissions(tree: Path) -> None:
    role = edit_rbac(tree, lambda role: role["rules"].append({"apiGroups": [""], "resources": ["nodes"],
                                                              "verbs": ["get"]}))
    out = yaml.safe_load(gen.generated_files()[CSV_FILE])["spec"]["install"]["spec"]
    cluster = triples([r for p in out["clusterPermissions"] for r in p["rules"]])
    assert ("", "nodes", "get") in cluster
    assert triples(role["rules"]) <= cluster   # the whole role moves: OLM cannot split one


def test_a_trimmed_rbac_yaml_gives_a_trimmed_csv(tree: Path) -> None:
    """The generator reads rbac.yaml each time: a rule taken out there is out of the CSV."""
    removed: list[dict[str, Any]] = []
    edit_rbac(tree, lambda role: removed.append(role["rules"].pop()))
    out = yaml.safe_load(gen.generated_files()[CSV_FILE])["spec"]["install"]["spec"]
    rules = [r for p in out["permissions"] + out.get("clusterPermissions", []) for r in p["rules"]]
    assert removed[0] not in rules
    assert len(rules) == sum(len(o["rules"]) for o in rbac_objects() if o["kind"] in {"Role", "ClusterRole"}) - 1


def test_namespaces_fixed_in_the_deployment_stop_the_generator(tree: Path) -> None:
    edit(tree / "operator" / "deployment.yaml", 'args: ["run"]', 'args: ["run", "--namespaces=shop"]')
    with pytest.raises(gen.BundleError, match="OperatorGroup"):
        gen.generated_files()
