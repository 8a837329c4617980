"""A Secret named by spec.init.secretKeyRef runs only when its owner opted it in (issue #12).

On the fake cluster: without the label sampledb.io/init-sql="true" the SampleDB reports
Initialized=False/InitSecretNotOptedIn naming the label (with a Warning event) and no Job starts;
once the label is set, the init Job starts. A ConfigMap needs no label.
"""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import FakeCluster, condition, sampledb

from sampledb_operator.decide.jobs import INIT_SQL_OPT_IN_LABEL
from sampledb_operator.model import names

SECRET_INIT = {"secretKeyRef": {"name": "orders-sql", "key": "init.sql"}}


async def ready_database(cluster: FakeCluster, init: dict[str, Any]) -> None:
    """The SampleDB `orders` with `init`, its volumes bound and its pod ready."""
    cluster.put("SampleDB", sampledb(init=init))
    for _ in range(2):
        await cluster.reconcile("orders")
    for pvc in (names.data_pvc_name("orders"), names.backup_pvc_name("orders")):
        cluster.bind(pvc)
    cluster.statefulset_ready("orders")


def init_jobs(cluster: FakeCluster) -> list[dict[str, object]]:
    return [j for j in cluster.of_kind("Job") if j["metadata"]["labels"]["app.kubernetes.io/component"] == "init"]


async def test_a_secret_without_the_opt_in_label_is_not_run() -> None:
    cluster = FakeCluster()
    cluster.put("Secret", {"metadata": {"name": "orders-sql"}, "data": {"init.sql": "U0VMRUNUIDE7"}})
    await ready_database(cluster, SECRET_INIT)
    await cluster.reconcile("orders")

    cond = condition(cluster.get("SampleDB", "orders"), "Initialized")
    assert (cond["status"], cond["reason"]) == ("False", "InitSecretNotOptedIn")
    assert f'{INIT_SQL_OPT_IN_LABEL}="true"' in cond["message"] and "orders-sql" in cond["message"]
    assert init_jobs(cluster) == []
    assert ("Warning", "InitSecretNotOptedIn") in [(t, r) for t, r, _m in cluster.recorder.events]

    cluster.patch("Secret", "orders-sql", {"metadata": {"labels": {INIT_SQL_OPT_IN_LABEL: "false"}}})
    await cluster.reconcile("orders")
    assert init_jobs(cluster) == []

    cluster.patch("Secret", "orders-sql", {"metadata": {"labels": {INIT_SQL_OPT_IN_LABEL: "true"}}})
    await cluster.reconcile("orders")
    assert len(init_jobs(cluster)) == 1
    await cluster.reconcile("orders")
    assert condition(cluster.get("SampleDB", "orders"), "Initialized")["reason"] == "InitRunning"


async def test_a_configmap_needs_no_label() -> None:
    cluster = FakeCluster()
    cluster.put("ConfigMap", {"metadata": {"name": "orders-sql"}, "data": {"init.sql": "SELECT 1;"}})
    await ready_database(cluster, {"configMapKeyRef": {"name": "orders-sql", "key": "init.sql"}})
    await cluster.reconcile("orders")
    assert len(init_jobs(cluster)) == 1
