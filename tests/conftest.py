"""Session-wide test fixtures: the cluster, the project's CRDs, a namespace per test.

Fixtures are lazy: unit tests never start a cluster. The first test that asks for `cluster`,
`kubeconfig` or `namespace` starts (or finds) one; see tests/support/cluster.py.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support import kube
from tests.support.cluster import (
    CRD_DIR,
    Cluster,
    external_cluster,
    local_cluster_running,
    start_local_cluster,
    stop_local_cluster,
)


def _install_crds() -> None:
    files = sorted(Path(CRD_DIR).glob("*.yaml"))
    if not files:
        return
    for f in files:
        kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(f))
    for f in files:
        kube.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(f))


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A real cluster: $KUBECONFIG's, or the local control plane (started if needed)."""
    ext = external_cluster()
    if ext is not None:
        c = ext
        started_here = False
    else:
        was_running = local_cluster_running()
        c = start_local_cluster()
        started_here = not was_running and os.environ.get("SAMPLEDB_KEEP_CLUSTER") != "1"
    kube.configure(c.kubeconfig, c.kubectl)
    _install_crds()
    try:
        yield c
    finally:
        if started_here:
            stop_local_cluster()


@pytest.fixture(scope="session")
def kubeconfig(cluster: Cluster) -> str:
    """Path of the kubeconfig of the session's cluster."""
    return cluster.kubeconfig


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{base}-{secrets.token_hex(3)}"
    kube.kubectl("create", "namespace", name)
    kube.kubectl("label", "namespace", name, "sampledb.io/test=true")
    try:
        yield name
    finally:
        kube.release_finalizers(name)
        kube.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)

