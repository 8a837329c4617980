"""Finding or starting the Kubernetes control plane that integration and end-to-end tests use.

If $KUBECONFIG is set, the tests run against that cluster (kind, k3s, a real one) and never stop
it. Otherwise hack/cluster starts the project's local control plane (built from the Go module
proxy); it is stopped at the end of the session unless it was already running before, or
SAMPLEDB_KEEP_CLUSTER=1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "hack" / "cluster"
CRD_DIR = REPO / "manifests" / "crd"


@dataclass(frozen=True)
class Cluster:
    """A cluster the tests may use."""

    kubeconfig: str
    local: bool  # started by hack/cluster (True) or the user's $KUBECONFIG (False)
    kubectl: tuple[str, ...]  # argv prefix for kubectl of a matching version
    state_dir: Path | None  # hack/cluster's folder (logs, pki) when local


def _parse_env(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value
    return env


def local_state_dir() -> Path:
    return Path(os.environ.get("SAMPLEDB_CLUSTER_DIR", REPO / ".cluster"))


def local_cluster_running() -> bool:
    out = subprocess.run([str(CLUSTER_SCRIPT), "status"], capture_output=True, text=True, check=False)
    return "apiserver: ready" in out.stdout


def start_local_cluster() -> Cluster:
    """`hack/cluster up` (builds the binaries on first use; reuses a healthy cluster)."""
    out = subprocess.run([str(CLUSTER_SCRIPT), "up"], capture_output=True, text=True, check=False, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"hack/cluster up failed ({out.returncode}):\n{out.stderr[-4000:]}")
    env = _parse_env(out.stdout)
    bin_dir = env["SAMPLEDB_TESTCLUSTER_BIN"]
    return Cluster(
        kubeconfig=env["KUBECONFIG"],
        local=True,
        kubectl=(f"{bin_dir}/testcluster", "kubectl"),
        state_dir=local_state_dir(),
    )


def refresh_local_images() -> None:
    """`hack/cluster up` on a running local cluster: rebuilds and imports the images whose inputs
    changed (the operator's, after a code change), and nothing else."""
    out = subprocess.run([str(CLUSTER_SCRIPT), "up"], capture_output=True, text=True, check=False, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"hack/cluster up failed ({out.returncode}):\n{out.stderr[-4000:]}")


def stop_local_cluster() -> None:
    subprocess.run([str(CLUSTER_SCRIPT), "down"], capture_output=True, text=True, check=False, timeout=120)


def restart_local_component(component: str) -> None:
    """Stop and start one component of the local cluster with its original command line."""
    out = subprocess.run([str(CLUSTER_SCRIPT), "restart", component], capture_output=True, text=True,
                         check=False, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"hack/cluster restart {component} failed:\n{out.stderr[-4000:]}")


def install_crds() -> None:
    """Apply the project's CRDs (server-side) and wait until the API server serves them."""
    from tests.support import kube

    files = sorted(CRD_DIR.glob("*.yaml"))
    for f in files:
        kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(f))
    for f in files:
        kube.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(f))


def external_cluster() -> Cluster | None:
    """The cluster $KUBECONFIG names, if set: the user's own, or hack/cluster's when hack/test.sh
    started it for a parallel run (then it counts as local: tests may restart its components)."""
    path = os.environ.get("KUBECONFIG")
    if not path:
        return None
    local_kubeconfig = local_state_dir() / "kubeconfig"
    bin_dir = local_state_dir() / "bin-dir"
    if Path(path).resolve() == local_kubeconfig.resolve() and bin_dir.exists():
        return Cluster(kubeconfig=path, local=True,
                       kubectl=(f"{bin_dir.read_text().strip()}/testcluster", "kubectl"), state_dir=local_state_dir())
    kubectl = os.environ.get("SAMPLEDB_KUBECTL") or shutil.which("kubectl")
    if not kubectl:
        raise RuntimeError("KUBECONFIG is set but no kubectl is on PATH (or set SAMPLEDB_KUBECTL)")
    return Cluster(kubeconfig=path, local=False, kubectl=(kubectl,), state_dir=None)
