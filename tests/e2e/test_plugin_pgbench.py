"""`kubectl sampledb pgbench` on the real node: pgbench in the primary's container, its tables made at the scale
asked and its transactions all processed, judged by the database's rows."""

from __future__ import annotations

import shlex

import pytest
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.e2e.test_plugin import plugin
from tests.support.kube import kubectl, kubectl_argv
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def test_pgbench_initializes_at_a_scale_and_runs_every_transaction(
        real_namespace: str, kubeconfig: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply(sampledb("bench", ns, version="15.20", storage={"size": "512Mi"}))
    wait_ready("bench", ns, timeout=240)
    kubectl_cmd = shlex.join(kubectl_argv())  # the kubectl the suite uses
    done = plugin(kubeconfig, "pgbench", "bench", "-n", ns, "--initialize", "2", "--", "--client", "2",
                  "--transactions", "50", env={"SAMPLEDB_KUBECTL": kubectl_cmd}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "number of transactions actually processed: 100/100" in done.stdout, done.stdout
    rows = kubectl("exec", "-n", ns, "bench-0", "-c", "postgres", "--", "psql", "-X", "-U", "app", "-d", "app",
                   "-qAt", "-c", "SELECT count(*) FROM pgbench_accounts").stdout
    assert int(str(rows).strip()) == 200000
    dry = plugin(kubeconfig, "pgbench", "bench", "-n", ns, "--dry-run", env={"SAMPLEDB_KUBECTL": kubectl_cmd})
    assert dry.returncode == 0 and "exec --namespace" in dry.stdout and "bench-0 --container postgres" in dry.stdout
