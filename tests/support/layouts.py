"""The kustomize layouts under manifests/, built without kustomize.

`build(path)` reads a kustomization and what it refers to as kustomize would for the features these
layouts use: resources (files and folders), components, configMapGenerator (files, namespace, labels,
no name suffix), patches (a file with `$patch: delete`, or inline JSON 6902 operations `add` and
`replace` on targets by kind and name), namespace and labels (metadata only). Anything else is refused,
so a layout that starts using another feature fails here instead of being misread.
tests/integration/test_helm_chart_kustomize.py checks these readings against `kubectl kustomize`;
unit tests compare the Helm chart with them without a cluster or a kubectl binary.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
CLUSTER_SCOPED = {
    "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
}
KNOWN_FIELDS = {"apiVersion", "kind", "namespace", "labels", "resources", "components", "patches",
                "configMapGenerator"}
Obj = dict[str, Any]


def documents(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kustomization(folder: Path) -> Obj:
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        if (folder / name).is_file():
            doc: Obj = yaml.safe_load((folder / name).read_text())
            unknown = set(doc) - KNOWN_FIELDS
            assert not unknown, f"{folder}: kustomize fields this reading does not know: {sorted(unknown)}"
            return doc
    raise AssertionError(f"{folder} has no kustomization")


def build(folder: Path) -> list[Obj]:
    """The objects `kubectl kustomize folder` prints (in no particular order)."""
    k = kustomization(folder)
    objs: list[Obj] = []
    for ref in k.get("resources", []):
        path = folder / ref
        objs += build(path) if path.is_dir() else documents(path)
    for ref in k.get("components", []):
        objs = _component(folder / ref, objs)
    return _transform(folder, k, objs)


def _component(folder: Path, objs: list[Obj]) -> list[Obj]:
    k = kustomization(folder)
    assert k["kind"] == "Component", folder
    for ref in k.get("resources", []):
        objs = objs + documents(folder / ref)
    return _transform(folder, k, objs)


def _transform(folder: Path, k: Obj, objs: list[Obj]) -> list[Obj]:
    objs = objs + [_configmap(folder, gen) for gen in k.get("configMapGenerator", [])]
    for patch in k.get("patches", []):
        objs = _patch(folder, patch, objs)
    if namespace := k.get("namespace"):
        for o in objs:
            if o["kind"] not in CLUSTER_SCOPED:
                o["metadata"]["namespace"] = namespace
    for entry in k.get("labels", []):
        assert not entry.get("includeSelectors") and not entry.get("includeTemplates"), entry
        for o in objs:
            o["metadata"].setdefault("labels", {}).update(entry["pairs"])
    return objs


def _configmap(folder: Path, gen: Obj) -> Obj:
    options = gen.get("options", {})
    assert options.get("disableNameSuffixHash") is True, gen
    assert set(gen) <= {"name", "namespace", "files", "options"}, gen
    data = {Path(f).name: (folder / f).read_text() for f in gen["files"]}
    meta: Obj = {"name": gen["name"], **({"namespace": gen["namespace"]} if "namespace" in gen else {})}
    if labels := options.get("labels"):
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _matches(o: Obj, target: Obj) -> bool:
    if o["kind"] != target.get("kind") or o["metadata"]["name"] != target.get("name"):
        return False
    group = o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else ""
    return bool(target.get("group", group) == group)


def _patch(folder: Path, patch: Obj, objs: list[Obj]) -> list[Obj]:
    if "path" in patch and "target" not in patch:  # a strategic-merge patch: only `$patch: delete` is used
        doc = yaml.safe_load((folder / patch["path"]).read_text())
        assert doc.get("$patch") == "delete", f"{folder / patch['path']}: only $patch: delete is read"
        target = {"kind": doc["kind"], "name": doc["metadata"]["name"]}
        return [o for o in objs if not _matches(o, target)]
    ops = yaml.safe_load((folder / patch["path"]).read_text() if "path" in patch else patch["patch"])
    out = []
    for o in objs:
        patched = copy.deepcopy(o) if _matches(o, patch["target"]) else o
        if patched is not o:
            for op in ops:
                json_patch(patched, op)
        out.append(patched)
    return out


def json_patch(doc: Obj, op: Obj) -> None:
    """One JSON 6902 operation, `add` or `replace`, applied in place."""
    assert op["op"] in {"add", "replace"}, op
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
    node: Any = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    value = copy.deepcopy(op["value"])
    if isinstance(node, list):
        if last == "-":
            node.append(value)
        elif op["op"] == "add":
            node.insert(int(last), value)
        else:
            node[int(last)] = value
    else:
        assert op["op"] == "add" or last in node, op
        node[last] = value
