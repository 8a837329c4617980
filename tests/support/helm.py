"""The helm CLI for tests of the chart (charts/sampledb-operator).

hack/build-helm.sh builds it from the Go module proxy on first use and caches it in
~/.cache/sampledb-operator (a warm call only prints the folder). `helm()` runs it with a timeout and a
private configuration and cache folder, so the tests never read or write the user's helm settings;
against a cluster it is given the session's kubeconfig (tests/support/kube.py). `render()` is
`helm template`, parsed.
"""

from __future__ import annotations

import atexit
import difflib
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml
from tests.support.layouts import CLUSTER_SCOPED

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "sampledb-operator"
BUILD_SCRIPT = REPO / "hack" / "build-helm.sh"
# A cold build is about 4 minutes on 2 cores with an empty module cache; allow for a busy machine.
BUILD_TIMEOUT = 1800


@functools.cache
def helm_binary() -> str:
    """Path of the helm binary (built once by hack/build-helm.sh)."""
    done = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
    assert done.returncode == 0, f"hack/build-helm.sh failed ({done.returncode}):\n{done.stderr[-4000:]}"
    path = Path(done.stdout.strip().splitlines()[-1]) / "helm"
    assert path.is_file(), f"hack/build-helm.sh printed {done.stdout!r}, which holds no helm binary"
    return str(path)


@functools.cache
def _home() -> Path:
    """helm's configuration, cache and data folders for this test process (removed when it exits)."""
    path = tempfile.mkdtemp(prefix="sampledb-helm-")
    atexit.register(shutil.rmtree, path, True)
    return Path(path)


def helm(*args: str, kubeconfig: str | None = None, check: bool = True,
         timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run helm; raise with its output on failure when check."""
    home = _home()
    env = {**os.environ, "HELM_CONFIG_HOME": str(home / "config"), "HELM_CACHE_HOME": str(home / "cache"),
           "HELM_DATA_HOME": str(home / "data")}
    env.pop("KUBECONFIG", None)
    if kubeconfig is not None:
        env["KUBECONFIG"] = kubeconfig
    proc = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def set_args(values: dict[str, str] | None) -> list[str]:
    """`--set-json` arguments, one a value (`key.path` -> its JSON)."""
    out: list[str] = []
    for key, value in (values or {}).items():
        out += ["--set-json", f"{key}={value}"]
    return out


def render(*, release: str = "sampledb-operator", namespace: str = "sampledb-system",
           values: dict[str, str] | None = None, include_crds: bool = False) -> list[dict[str, Any]]:
    """`helm template` of the chart, parsed (`values`: key path -> JSON value)."""
    args = ["template", release, str(CHART), "--namespace", namespace, *set_args(values)]
    if include_crds:
        args.append("--include-crds")
    return [d for d in yaml.safe_load_all(helm(*args).stdout) if d]


# -- comparing the chart with the kustomize install ------------------------------------------------

# The chart's values that stand for each kustomize layout under manifests/ (`--set-json` key -> JSON).
LAYOUTS: dict[str, dict[str, str]] = {
    "default": {},
    "overlays/namespaced": {"watchNamespaces": '["shop","analytics"]'},
    "overlays/monitoring": {"monitoring.serviceMonitor.enabled": "true", "monitoring.prometheusRule.enabled": "true",
                            "monitoring.podMonitor.enabled": "true", "monitoring.dashboard.enabled": "true"},
    "overlays/sharding": {"sharding.enabled": "true"},
    "overlays/admission": {"finalizerPolicy.enabled": "true"},
    "overlays/chaos": {"chaosAnnotation.enabled": "true"},
}
# Helm's release labels, which the kustomize install does not have; everything else must be equal.
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version")
Key = tuple[str, str, str]  # (kind, namespace or "", name)


def _drop_helm_labels(labels: dict[str, str] | None) -> None:
    if not labels:
        return
    for key in HELM_LABELS:
        labels.pop(key, None)
    if labels.get("app.kubernetes.io/managed-by") == "Helm":
        del labels["app.kubernetes.io/managed-by"]


# Their CEL expressions are folded YAML scalars with more-indented lines, which kustomize (Go's YAML)
# reads with an extra line break: the same expression to CEL.
POLICY_KINDS = {"ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"}


def _collapse_whitespace(node: Any) -> Any:
    if isinstance(node, str):
        return " ".join(node.split())
    if isinstance(node, list):
        return [_collapse_whitespace(v) for v in node]
    if isinstance(node, dict):
        return {k: _collapse_whitespace(v) for k, v in node.items()}
    return node


def comparable(objs: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Objects by (kind, namespace, name), with what only tells a Helm release from a kustomize install
    taken out: Helm's release labels (on objects, selectors and pod templates), an imagePullPolicy of
    IfNotPresent (the API server's default for a tagged image), the kustomize label on CRDs (Helm
    installs the chart's crds/ as they are) and the namespace kustomize gives cluster-scoped kinds its
    schema does not know (the admission policies), and runs of whitespace in the admission policies' specs
    (CEL). The Namespace is left out: Helm installs into the release's
    namespace (`--create-namespace`)."""
    out: dict[Key, dict[str, Any]] = {}
    for original in objs:
        o = yaml.safe_load(yaml.safe_dump(original))  # a deep copy
        if o["kind"] == "Namespace":
            continue
        meta = o["metadata"]
        if o["kind"] in CLUSTER_SCOPED:  # kustomize sets a namespace on kinds it does not know; nothing reads it
            meta.pop("namespace", None)
        _drop_helm_labels(meta.get("labels"))
        if o["kind"] == "CustomResourceDefinition":
            meta.get("labels", {}).pop("app.kubernetes.io/part-of", None)
        if not meta.get("labels", True):
            del meta["labels"]
        if o["kind"] in POLICY_KINDS:
            o["spec"] = _collapse_whitespace(o["spec"])
        spec = o.get("spec") or {}
        if o["kind"] in {"Deployment", "ServiceMonitor"}:
            _drop_helm_labels(spec["selector"].get("matchLabels"))
        if o["kind"] == "Service":
            _drop_helm_labels(spec.get("selector"))
        if o["kind"] == "Deployment":
            _drop_helm_labels(spec["template"]["metadata"].get("labels"))
            for c in spec["template"]["spec"]["containers"]:
                if c.get("imagePullPolicy") == "IfNotPresent":
                    del c["imagePullPolicy"]
        out[(o["kind"], meta.get("namespace", ""), meta["name"])] = o
    return out


def differences(chart: list[dict[str, Any]], kustomize: list[dict[str, Any]],
                names: tuple[str, str] = ("chart", "kustomize")) -> list[str]:
    """What differs between the chart's objects and the kustomize install's (a unified diff of each
    object that differs), one entry a difference."""
    a, b = comparable(chart), comparable(kustomize)
    lines = [f"only in the {names[0]}: {k}" for k in sorted(a.keys() - b.keys())]
    lines += [f"only in the {names[1]}: {k}" for k in sorted(b.keys() - a.keys())]
    for key in sorted(a.keys() & b.keys()):
        if a[key] != b[key]:
            diff = difflib.unified_diff(yaml.safe_dump(b[key], width=200).splitlines(),
                                        yaml.safe_dump(a[key], width=200).splitlines(),
                                        names[1], names[0], lineterm="", n=2)
            lines.append(f"{key} differs:\n" + "\n".join(diff))
    return lines
