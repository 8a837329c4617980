"""The pooler in the SampleDB reconciler, against the in-memory cluster: its Secret made once, its children applied
and pruned with spec.pooler; the step's role SQL sent once per Secret version, and a refusal reported."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from tests.support.fake_cluster import FakeCluster, running_database

from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.pg import pooler as pg_pooler
from sampledb_operator.reconcilers import pooler

POOLER = names.pooler_name("orders")
POD = {"status": {"podIP": "10.0.0.5"}}


class FakeSql:
    """pg/pooler.apply: the calls (host, password) and the answer to give."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.answer: dict[str, str] | None = {}

    async def apply(self, target: Any, password: str, within: float = 30.0) -> dict[str, str] | None:
        self.calls.append((target.host, password))
        return self.answer


@pytest.fixture
def sql(monkeypatch: pytest.MonkeyPatch) -> FakeSql:
    fake = FakeSql()
    monkeypatch.setattr(pg_pooler, "apply", fake.apply)
    return fake


def pooler_children(cluster: FakeCluster) -> set[str]:
    return {kind for kind in ("Deployment", "Service", "ConfigMap") if cluster.get(kind, POOLER) is not None}


def stored(cluster: FakeCluster) -> SampleDB:
    obj = cluster.get("SampleDB", "orders")
    assert obj is not None
    return SampleDB.model_validate(obj)


async def test_the_pooler_comes_with_its_secret_and_goes_with_spec_pooler(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster, pooler={"instances": 2})
    assert pooler_children(cluster) == {"Deployment", "Service", "ConfigMap"}
    secret = cluster.get("Secret", POOLER)
    assert secret is not None
    password = base64.b64decode(secret["data"]["password"]).decode()
    assert len(password) >= 24
    assert base64.b64decode(secret["data"]["userlist.txt"]).decode() == f'"sampledb_pooler" "{password}"\n'
    await cluster.reconcile("orders")
    assert cluster.get("Secret", POOLER) == secret  # never rewritten
    assert all(password not in message for _type, _reason, message in cluster.recorder.events)

    cluster.patch("SampleDB", "orders", {"spec": {"pooler": None}})
    await cluster.reconcile("orders")
    assert pooler_children(cluster) == set()
    assert cluster.get("Secret", POOLER) is not None  # owned: it goes with the SampleDB


async def test_the_role_is_made_once_per_secret_version_on_the_ready_primary(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster, pooler={})
    db = stored(cluster)
    waiting = await pooler.reconcile_pooler(cluster.ctx, db, db_ready=False, primary_pod=POD)
    assert waiting.applied is None and waiting.problems == () and sql.calls == []
    assert waiting.condition is not None and waiting.condition.reason == "PoolerSetupPending"
    out = await pooler.reconcile_pooler(cluster.ctx, db, db_ready=True, primary_pod=POD)
    secret = cluster.get("Secret", POOLER)
    assert secret is not None
    assert sql.calls == [("10.0.0.5", base64.b64decode(secret["data"]["password"]).decode())]
    assert out.applied == pooler.applied_hash(secret) and out.problems == ()
    recorded = db.model_copy(update={"status": db.status.model_copy(update={"pooler_applied": out.applied})})
    again = await pooler.reconcile_pooler(cluster.ctx, recorded, db_ready=True, primary_pod=POD)
    assert (again.applied, again.problems, len(sql.calls)) == (None, (), 1)
    assert again.condition is not None and again.condition.reason == "PoolerNotReady"  # no pod ready yet
    without = db.model_copy(update={"spec": db.spec.model_copy(update={"pooler": None})})
    gone = await pooler.reconcile_pooler(cluster.ctx, without, db_ready=True, primary_pod=POD)
    assert (gone.applied, gone.problems, len(sql.calls)) == (None, (), 1)
    assert gone.condition is not None and gone.condition.reason == "NotRequested"  # it had a pooler


async def test_a_refusal_is_degraded_with_the_servers_words_and_no_answer_is_tried_again(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster, pooler={})
    db = stored(cluster)
    sql.answer = {"role": "permission denied to create role"}
    out = await pooler.reconcile_pooler(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert out.applied is None and out.recheck_after == pooler.RETRY_SECONDS
    assert [p.reason for p in out.problems] == ["PoolerSetupFailed"]
    assert "permission denied to create role" in out.problems[0].message
    sql.answer = None
    out = await pooler.reconcile_pooler(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert (out.applied, out.problems, out.recheck_after) == (None, (), pooler.RETRY_SECONDS)


async def test_the_read_only_pooler_comes_with_standbys_and_goes_with_read_only_instances(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster, replicas=2, pooler={"readOnlyInstances": 2})
    ro = names.read_only_pooler_name("orders")
    assert {kind for kind in ("Deployment", "Service", "ConfigMap", "PodDisruptionBudget")
            if cluster.get(kind, ro) is not None} == {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget"}
    deployment = cluster.get("Deployment", ro)
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["auth"]["secret"]["secretName"] == POOLER  # the one pooler Secret
    config = cluster.get("ConfigMap", ro)
    assert config is not None and f"host={names.replica_service_name('orders')}.shop.svc" in \
        config["data"]["pgbouncer.ini"]
    cluster.patch("SampleDB", "orders", {"spec": {"pooler": {"readOnlyInstances": 0}}})
    await cluster.reconcile("orders")
    assert all(cluster.get(kind, ro) is None for kind in ("Deployment", "Service", "ConfigMap", "PodDisruptionBudget"))
    assert pooler_children(cluster) == {"Deployment", "Service", "ConfigMap"}  # the read-write pooler stays
