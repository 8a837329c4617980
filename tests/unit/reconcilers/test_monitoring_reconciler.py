"""The monitoring step against the in-memory cluster: the exporters' role made on the ready primary once per
primary pod, not with monitoring off, and a refusal reported with the server's words."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.fake_cluster import FakeCluster, running_database

from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.pg import app_role as pg_app_role
from sampledb_operator.pg import monitoring as pg_monitoring
from sampledb_operator.reconcilers import monitoring, sql_objects

POD = {"metadata": {"uid": "pod-1"}, "status": {"podIP": "10.0.0.5"}}
NEW_POD = {"metadata": {"uid": "pod-2"}, "status": {"podIP": "10.0.0.6"}}


class FakeSql:
    """pg/monitoring.apply: the hosts it was sent to and the answer to give."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.answer: dict[str, str] | None = {}

    async def apply(self, target: Any, within: float = 10.0) -> dict[str, str] | None:
        self.calls.append(target.host)
        return self.answer


@pytest.fixture
def sql(monkeypatch: pytest.MonkeyPatch) -> FakeSql:
    fake = FakeSql()
    monkeypatch.setattr(pg_monitoring, "apply", fake.apply)
    return fake


def stored(cluster: FakeCluster) -> SampleDB:
    obj = cluster.get("SampleDB", "orders")
    assert obj is not None
    return SampleDB.model_validate(obj)


def with_applied(db: SampleDB, applied: str | None) -> SampleDB:
    return db.model_copy(update={"status": db.status.model_copy(update={"monitoring_applied": applied})})


async def test_the_role_is_made_once_per_primary_pod_on_the_ready_primary(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    db = stored(cluster)
    waiting = await monitoring.reconcile_monitoring(cluster.ctx, db, db_ready=False, primary_pod=POD)
    assert waiting == monitoring.MonitoringOutcome() and sql.calls == []
    out = await monitoring.reconcile_monitoring(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert sql.calls == ["10.0.0.5"] and out.applied == monitoring.applied_hash(POD) and out.problems == ()
    again = await monitoring.reconcile_monitoring(cluster.ctx, with_applied(db, out.applied), db_ready=True,
                                                  primary_pod=POD)
    assert again.applied is None and sql.calls == ["10.0.0.5"]  # recorded: no SQL
    moved = await monitoring.reconcile_monitoring(cluster.ctx, with_applied(db, out.applied), db_ready=True,
                                                  primary_pod=NEW_POD)
    assert sql.calls == ["10.0.0.5", "10.0.0.6"] and moved.applied == monitoring.applied_hash(NEW_POD)


async def test_monitoring_off_sends_nothing(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster, monitoring={"enabled": False})
    out = await monitoring.reconcile_monitoring(cluster.ctx, stored(cluster), db_ready=True, primary_pod=POD)
    assert out == monitoring.MonitoringOutcome() and sql.calls == []


async def test_a_refusal_is_a_problem_with_the_servers_words_and_no_answer_is_tried_again(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    db = stored(cluster)
    sql.answer = {"role": "permission denied to create role"}
    refused = await monitoring.reconcile_monitoring(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert refused.applied is None and refused.recheck_after == monitoring.RETRY_SECONDS
    assert [(p.reason, p.message) for p in refused.problems] == [
        ("MonitoringSetupFailed", "the exporters' role: role: permission denied to create role")]
    sql.answer = None  # no server answers (fake nodes): asked again after a growing delay, not on every pass
    silent = await monitoring.reconcile_monitoring(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert silent.problems == () and silent.recheck_after is not None and silent.recheck_after > 0
    calls = len(sql.calls)
    soon = await monitoring.reconcile_monitoring(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert soon == monitoring.MonitoringOutcome() and len(sql.calls) == calls  # not due yet: nothing sent
    cluster.clock.advance(silent.recheck_after + 1)
    sql.answer = {}
    answered = await monitoring.reconcile_monitoring(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert answered.applied == monitoring.applied_hash(POD) and len(sql.calls) == calls + 1


async def test_the_declared_objects_step_carries_the_outcome_to_the_pass(sql: FakeSql,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    async def app_role_set(*_args: Any, **_kwargs: Any) -> dict[str, str]:
        return {}
    monkeypatch.setattr(pg_app_role, "apply", app_role_set)
    cluster = FakeCluster()
    await running_database(cluster)
    sql.answer = {"role": "refused"}
    out = await sql_objects.reconcile_declared(cluster.ctx, stored(cluster), db_ready=True, primary_pod=POD)
    assert [p.reason for p in out.problems] == ["MonitoringSetupFailed"]
    assert out.recheck_after == monitoring.RETRY_SECONDS
    sql.answer = {}
    done = await sql_objects.reconcile_declared(cluster.ctx, stored(cluster), db_ready=True, primary_pod=POD)
    assert done.monitoring.applied == monitoring.applied_hash(POD) and done.problems == ()
