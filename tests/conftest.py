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
    OPT_IN,
    Cluster,
    external_cluster,
    install_crds,
    local_cluster_running,
    local_state_dir,
    start_local_cluster,
    stop_local_cluster,
)
from tests.support.operator import LOG_DIR_ENV


@pytest.fixture(scope="session", autouse=True)
def operator_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The operator processes' logs in this run's base temporary directory (pytest keeps the last three
    runs' and removes older ones), not one file per process left in /tmp."""
    path = tmp_path_factory.mktemp("operator-logs", numbered=False)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(LOG_DIR_ENV, str(path))
        yield path


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
        os.environ["KUBECONFIG"] = c.kubeconfig  # a $KUBECONFIG not opted in is never what a tool reads
        started_here = not was_running and os.environ.get("SAMPLEDB_KEEP_CLUSTER") != "1"
    kube.configure(c.kubeconfig, c.kubectl)
    install_crds()
    try:
        yield c
    finally:
        if started_here:
            stop_local_cluster()


@pytest.fixture(scope="session")
def kubeconfig(cluster: Cluster) -> str:
    """Path of the kubeconfig of the session's cluster."""
    return cluster.kubeconfig


def _test_namespace(request: pytest.FixtureRequest, *, kwok: bool) -> Iterator[str]:
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{base}-{secrets.token_hex(3)}"
    # pods that run for real must meet the restricted Pod Security Standard (the operator's own do)
    restricted = {"pod-security.kubernetes.io/enforce": "restricted"}
    kube.create_namespace(name, kwok=kwok, labels=None if kwok else restricted)
    try:
        yield name
    finally:
        kube.release_finalizers(name)
        kube.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test whose pods go to kwok's fake nodes (nothing runs), deleted
    (without waiting) afterwards."""
    yield from _test_namespace(request, kwok=True)


@pytest.fixture
def real_namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace whose pods run for real (the local cluster's real node, or the nodes of
    $KUBECONFIG's cluster), deleted (without waiting) afterwards."""
    yield from _test_namespace(request, kwok=False)



def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `local_only` check the local cluster's own host (hack/cluster, hack/real-node);
    against $KUBECONFIG's cluster they do not apply and are deselected (reported, never skipped)."""
    ext = os.environ.get("KUBECONFIG")
    if not ext or Path(ext).resolve() == (local_state_dir() / "kubeconfig").resolve() \
            or os.environ.get(OPT_IN) != "1":  # a $KUBECONFIG not opted in is ignored: the local cluster
        return
    keep = [i for i in items if i.get_closest_marker("local_only") is None]
    dropped = [i for i in items if i.get_closest_marker("local_only") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
