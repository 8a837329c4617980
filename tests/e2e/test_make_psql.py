"""The README's `make psql` reaches a real database of the local cluster (hack/psql.sh).

It runs the command the README shows, against a database the operator (a local process here)
brings up on the real node, and reads back what psql printed.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator

import pytest
import yaml
from tests.support.cluster import REPO
from tests.support.kube import kubectl
from tests.support.operator import OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.local_only]


@pytest.fixture
def operator_on_real_node(kubeconfig: str, real_namespace: str) -> Iterator[OperatorProcess]:
    with OperatorProcess(kubeconfig, "--namespaces", real_namespace, "--no-leader-elect") as op:
        yield op


def test_make_psql_connects_to_a_database_of_the_local_cluster(real_namespace: str,
                                                                operator_on_real_node: OperatorProcess) -> None:
    db = {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
          "metadata": {"name": "example-database", "namespace": real_namespace},
          "spec": {"version": "15.20", "storage": {"size": "256Mi"}, "deletionPolicy": "Delete"}}
    kubectl("apply", "-f", "-", input=yaml.safe_dump(db))
    kubectl("wait", "-n", real_namespace, "sampledb/example-database", "--for=condition=Ready", "--timeout=240s",
            timeout=250)
    env = {**os.environ, "NS": real_namespace}
    env.pop("PGPASSWORD", None)
    out = subprocess.run(["make", "-s", "psql", "ARGS=-- -At -c 'SELECT current_user, version()'"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    user, _, version = out.stdout.strip().splitlines()[-1].partition("|")
    assert user == "app"
    assert version.startswith("PostgreSQL 15.20")
    encoded = kubectl("get", "secret", "example-database-credentials", "-n", real_namespace, "-o",
                      "jsonpath={.data.password}").stdout
    password = base64.b64decode(encoded).decode()
    assert password and password not in out.stdout + out.stderr
