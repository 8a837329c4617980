"""Finding or starting the Kubernetes control plane that integration and end-to-end tests use.

If $KUBECONFIG is set, the tests run against that cluster (kind, k3s, a real one) and never stop
it. Otherwise hack/cluster starts the project's local control plane (built from the Go module
proxy); it is stopped at the end of the session unless it was already running before, or
SAMPLEDB_KEEP_CLUSTER=1.

Beside it, an S3-compatible object store (WAL archiving and backups): hack/cluster's component `s3`
(versitygw), whose endpoint, bucket, credentials and CA file `hack/cluster env` prints as the
SAMPLEDB_S3_* variables; against $KUBECONFIG's cluster, the store those variables name, if any.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "hack" / "cluster"
CRD_DIR = REPO / "manifests" / "crd"


@dataclass(frozen=True)
class ObjectStore:
    """An S3-compatible object store and the bucket the tests use in it."""

    endpoint: str  # https://ADDRESS:PORT (path-style addressing, region us-east-1)
    bucket: str
    access_key: str
    secret_key: str = field(repr=False)  # kept out of assertion messages and logs
    ca_file: str  # PEM file that verifies the endpoint's certificate (the cluster CA)


OBJECT_STORE_ENV = {
    "endpoint": "SAMPLEDB_S3_ENDPOINT",
    "bucket": "SAMPLEDB_S3_BUCKET",
    "access_key": "SAMPLEDB_S3_ACCESS_KEY",
    "secret_key": "SAMPLEDB_S3_SECRET_KEY",
    "ca_file": "SAMPLEDB_S3_CA_FILE",
}


def object_store_from_env(env: Mapping[str, str]) -> ObjectStore | None:
    """The store the SAMPLEDB_S3_* variables of `env` name, or None unless all of them are set."""
    values = {name: env.get(var, "") for name, var in OBJECT_STORE_ENV.items()}
    if not all(values.values()):
        return None
    return ObjectStore(**values)


@dataclass(frozen=True)
class Cluster:
    """A cluster the tests may use."""

    kubeconfig: str
    local: bool  # started by hack/cluster (True) or the user's $KUBECONFIG (False)
    kubectl: tuple[str, ...]  # argv prefix for kubectl of a matching version
    state_dir: Path | None  # hack/cluster's folder (logs, pki) when local
    object_store: ObjectStore | None = None  # the S3 store beside it, if there is one


def _parse_env(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value
    return env


def local_state_dir() -> Path:
    return Path(os.environ.get("SAMPLEDB_CLUSTER_DIR", REPO / ".cluster"))


def local_cluster_env() -> dict[str, str]:
    """The variables `hack/cluster env` prints for the local cluster (KUBECONFIG, SAMPLEDB_S3_*, ...)."""
    out = subprocess.run([str(CLUSTER_SCRIPT), "env"], capture_output=True, text=True, check=True, timeout=60)
    return _parse_env(out.stdout)


def current_object_store(cluster: Cluster) -> ObjectStore | None:
    """The object store beside `cluster` now: for the local cluster, as `hack/cluster env` prints it at this
    moment (a `down` and `up` between the session's start and this call, as the teardown test makes, moves
    the store to another port), else the one the cluster was found with."""
    if cluster.local:
        return object_store_from_env(local_cluster_env()) or cluster.object_store
    return cluster.object_store


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
        object_store=object_store_from_env(env),
    )


def refresh_local_images() -> None:
    """`hack/cluster up` on a running local cluster: rebuilds and imports the images whose inputs
    changed (the operator's, after a code change), and nothing else."""
    out = subprocess.run([str(CLUSTER_SCRIPT), "up"], capture_output=True, text=True, check=False, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"hack/cluster up failed ({out.returncode}):\n{out.stderr[-4000:]}")


def stop_local_cluster() -> None:
    subprocess.run([str(CLUSTER_SCRIPT), "down"], capture_output=True, text=True, check=False, timeout=120)


def _local_component(action: str, component: str) -> None:
    out = subprocess.run([str(CLUSTER_SCRIPT), action, component], capture_output=True, text=True,
                         check=False, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"hack/cluster {action} {component} failed:\n{out.stderr[-4000:]}")


def restart_local_component(component: str) -> None:
    """Stop and start one component of the local cluster with its original command line."""
    _local_component("restart", component)


def stop_local_component(component: str) -> None:
    """Stop one component of the local cluster (`s3` keeps its data); start_local_component brings it back."""
    _local_component("stop", component)


def start_local_component(component: str) -> None:
    """Start a stopped component of the local cluster with its original command line and port, and
    wait until it answers."""
    _local_component("start", component)


def install_crds() -> None:
    """Apply the project's CRDs (server-side) and wait until the API server serves them."""
    from tests.support import kube

    files = sorted(CRD_DIR.glob("*.yaml"))
    for f in files:
        kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(f))
    for f in files:
        kube.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(f))


OPT_IN = "SAMPLEDB_TEST_USE_KUBECONFIG"  # =1: the tests may use the cluster $KUBECONFIG names (the user's own)


def external_cluster() -> Cluster | None:
    """The cluster $KUBECONFIG names, if set: hack/cluster's when hack/test.sh started it for a parallel run
    (then it counts as local: tests may restart its components), or the user's own, only when they opted in
    with SAMPLEDB_TEST_USE_KUBECONFIG=1: the tests create namespaces and apply CRDs, so a $KUBECONFIG left
    pointing at a cluster the user cares about is never touched by surprise (None: the local cluster)."""
    path = os.environ.get("KUBECONFIG")
    if not path:
        return None
    local_kubeconfig = local_state_dir() / "kubeconfig"
    bin_dir = local_state_dir() / "bin-dir"
    is_local = Path(path).resolve() == local_kubeconfig.resolve()
    if not is_local and os.environ.get(OPT_IN) != "1":
        return None
    if is_local and bin_dir.exists():
        # The store's variables from the environment (`eval "$(hack/cluster env)"`), else asked for.
        store = object_store_from_env(os.environ) or object_store_from_env(local_cluster_env())
        return Cluster(kubeconfig=path, local=True,
                       kubectl=(f"{bin_dir.read_text().strip()}/testcluster", "kubectl"), state_dir=local_state_dir(),
                       object_store=store)
    kubectl = os.environ.get("SAMPLEDB_KUBECTL") or shutil.which("kubectl")
    if not kubectl:
        raise RuntimeError("KUBECONFIG is set but no kubectl is on PATH (or set SAMPLEDB_KUBECTL)")
    return Cluster(kubeconfig=path, local=False, kubectl=(kubectl,), state_dir=None,
                   object_store=object_store_from_env(os.environ))


def tag_node_image(source: str, target: str) -> None:
    """The local real node's image `source` also named `target` (hack/real-node tag-image; containerd knows images
    by their full names: `postgres:18` is docker.io/library/postgres:18)."""
    def full(ref: str) -> str:
        first, _, rest = ref.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            return ref
        return f"docker.io/{ref}" if rest else f"docker.io/library/{ref}"
    out = subprocess.run([str(REPO / "hack" / "real-node"), "tag-image", full(source), full(target)],
                         capture_output=True,
                         text=True, check=False, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"hack/real-node tag-image failed ({out.returncode}):\n{out.stderr[-2000:]}")


def real_node_fault(node: str, kind: str) -> None:
    """hack/real-node fault NODE KIND on the local cluster: cut, stop, crash, freeze one real node, or heal it."""
    out = subprocess.run([str(REPO / "hack" / "real-node"), "fault", node, kind], capture_output=True, text=True,
                         check=False, timeout=120)
    if out.returncode != 0:
        raise AssertionError(f"hack/real-node fault {node} {kind} failed:\n{out.stderr[-2000:]}")


def host_refuses(ip: str, port: int) -> bool:
    """Whether `ip` refuses a TCP connection to `port` from this host (something answers for the address, and
    nothing listens there); False when it accepts or does not answer within 3 s."""
    try:
        with socket.create_connection((ip, port), timeout=3):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
