"""The roles step on the fake cluster, with pg/roles.py replaced by a scripted server: nothing is sent before the
database is ready or when the applied hash is current; the password Secret is read live and a new version is set;
a refused statement fails its role only (Degraded RoleFailed) and is tried again; no password in any Event."""

from __future__ import annotations

import base64
from collections.abc import Sequence

import pytest
from tests.support.fake_cluster import MANAGED_LABEL, FakeCluster, sampledb

from sampledb_operator.model.roles import ObservedRole, Op
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.pg import client as pg
from sampledb_operator.pg import roles as pg_roles
from sampledb_operator.reconcilers import roles

PASSWORD = "hunter2 pw"


class Server:
    def __init__(self) -> None:
        self.roles: dict[str, ObservedRole] = {}
        self.ran: list[Op] = []
        self.refuse: dict[str, str] = {}

    async def observe(self, target: pg.Target, names: Sequence[str], within: float = 5.0) -> dict[str, ObservedRole]:
        return {n: r for n, r in self.roles.items() if n in names}

    async def apply(self, target: pg.Target, ops: Sequence[Op], within: float = 30.0) -> dict[str, str]:
        failed: dict[str, str] = {}
        for op in ops:
            self.ran.append(op)
            if op.role in self.refuse:
                failed[op.role] = self.refuse[op.role]
            elif op.kind == "create":
                self.roles[op.role] = ObservedRole(op.login, op.connection_limit)
        return failed


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    fake = Server()
    monkeypatch.setattr(pg_roles, "observe", fake.observe)
    monkeypatch.setattr(pg_roles, "apply", fake.apply)
    return fake


def ready_db(cluster: FakeCluster, **spec: object) -> SampleDB:
    cluster.put("Secret", {"metadata": {"name": "orders-superuser", "labels": {MANAGED_LABEL: "sampledb-operator",
                                                                           "sampledb.io/database": "orders"}},
                           "data": {"username": base64.b64encode(b"postgres").decode(),
                                    "password": base64.b64encode(b"x").decode()}})
    cluster.put("Secret", {"metadata": {"name": "reporting-pw"},
                           "data": {"password": base64.b64encode(PASSWORD.encode()).decode()}})
    return SampleDB.model_validate(cluster.put("SampleDB", sampledb(**spec)))


POD = {"status": {"podIP": "10.0.0.5"}}
ROLES = [{"name": "reporting", "passwordSecret": {"name": "reporting-pw", "key": "password"}},
         {"name": "auditors", "login": False}]


async def test_nothing_before_ready_then_created_then_nothing_while_current(server: Server) -> None:
    cluster = FakeCluster()
    db = ready_db(cluster, roles=ROLES)
    assert await roles.reconcile_roles(cluster.ctx, db, db_ready=False, primary_pod=POD) == roles.RolesOutcome()
    out = await roles.reconcile_roles(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert [(o.kind, o.role) for o in server.ran] == [("create", "reporting"), ("create", "auditors")]
    assert server.ran[0].password is not None and server.ran[0].password.value == PASSWORD
    assert out.statuses is not None and [s.state for s in out.statuses] == ["Ready", "Ready"]
    assert out.applied and out.problems == () and out.recheck_after == roles.SECRET_RECHECK_SECONDS
    assert all(PASSWORD not in m for _t, _r, m in cluster.recorder.events)
    recorded = db.model_copy(update={"status": db.status.model_copy(update={
        "roles": list(out.statuses), "roles_applied": out.applied})})
    server.ran.clear()
    again = await roles.reconcile_roles(cluster.ctx, recorded, db_ready=True, primary_pod=POD)
    assert server.ran == [] and again.statuses is None  # the hash is current: no SQL
    # a rotated password: a new Secret version, set once
    cluster.patch("Secret", "reporting-pw", {"data": {"password": base64.b64encode(b"new").decode()}})
    rotated = await roles.reconcile_roles(cluster.ctx, recorded, db_ready=True, primary_pod=POD)
    assert [(o.kind, o.role) for o in server.ran] == [("password", "reporting")] and rotated.applied != out.applied


async def test_a_refused_statement_fails_its_role_only_and_is_tried_again(server: Server) -> None:
    cluster = FakeCluster()
    server.refuse["auditors"] = 'permission denied to create role "auditors"'
    out = await roles.reconcile_roles(cluster.ctx, ready_db(cluster, roles=ROLES), db_ready=True, primary_pod=POD)
    assert out.statuses is not None
    assert {s.name: s.state for s in out.statuses} == {"reporting": "Ready", "auditors": "Failed"}
    assert [p.reason for p in out.problems] == ["RoleFailed"] and "permission denied" in out.problems[0].message
    assert out.applied is None and out.recheck_after == roles.RETRY_SECONDS


async def test_a_missing_password_secret_fails_that_role(server: Server) -> None:
    cluster = FakeCluster()
    db = ready_db(cluster, roles=[{"name": "reporting", "passwordSecret": {"name": "nope", "key": "password"}}])
    out = await roles.reconcile_roles(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert out.statuses is not None and out.statuses[0].state == "Failed"
    assert "Secret nope" in (out.statuses[0].message or "") and server.ran == []


async def test_certificate_roles_are_applied_once_every_instance_runs_the_pg_hba_line(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    from sampledb_operator.model.roles import CERTIFICATE_GROUP

    loaded: list[bool | None] = [False]
    asked: list[str] = []

    async def hba_loaded(target: pg.Target, text: str, within: float = 5.0) -> bool | None:
        asked.append(text)
        return loaded[0]

    monkeypatch.setattr(pg_roles, "hba_loaded", hba_loaded)
    cluster = FakeCluster()
    db = ready_db(cluster, roles=[{"name": "reporting", "certificate": True}])
    labels = {"sampledb.io/database": "orders", MANAGED_LABEL: "sampledb-operator",
              "app.kubernetes.io/component": "database"}
    cluster.put("Pod", {"metadata": {"name": "orders-0", "labels": labels},
                        "status": {"podIP": "10.0.0.5", "conditions": [{"type": "Ready", "status": "True"}]}})
    out = await roles.reconcile_roles(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert [(o.kind, o.role, o.other) for o in server.ran] == [
        ("create", CERTIFICATE_GROUP, None), ("create", "reporting", None), ("grant", "reporting", CERTIFICATE_GROUP)]
    assert asked == [f"+{CERTIFICATE_GROUP}"]
    assert out.statuses is not None and out.applied is None and out.recheck_after == roles.HBA_RECHECK_SECONDS
    loaded[0] = True
    done = await roles.reconcile_roles(cluster.ctx, db.model_copy(update={"status": db.status.model_copy(
        update={"roles": list(out.statuses)})}), db_ready=True, primary_pod=POD)
    assert done.applied and done.problems == ()
