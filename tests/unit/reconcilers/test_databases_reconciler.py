"""The databases step on the fake cluster, with pg/databases.py (and pg/roles.py) replaced by a scripted server:
nothing before the database is ready or while the applied hash is current; a refused statement fails its database
only (Degraded DatabaseFailed) and is tried again; and, through reconcilers/sql_objects.py, a role that owns a
database dropped in the same pass is dropped in that pass too."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from tests.support.fake_cluster import FakeCluster
from tests.unit.reconcilers.test_roles_reconciler import ready_db

from sampledb_operator.model.databases import DatabaseOp, ObservedDatabase
from sampledb_operator.model.roles import ObservedRole, Op
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.pg import client as pg
from sampledb_operator.pg import databases as pg_databases
from sampledb_operator.pg import roles as pg_roles
from sampledb_operator.reconcilers import databases, sql_objects

POD = {"status": {"podIP": "10.0.0.5"}}


class Server:
    """Roles and databases as a server keeps them: a role that owns a database cannot be dropped."""

    def __init__(self) -> None:
        self.databases: dict[str, ObservedDatabase] = {}
        self.roles: dict[str, ObservedRole] = {}
        self.ran: list[str] = []
        self.refuse: dict[str, str] = {}

    async def observe_databases(self, target: pg.Target, names: Sequence[str],
                                within: float = 5.0) -> dict[str, ObservedDatabase]:
        return {n: d for n, d in self.databases.items() if n in names}

    async def apply_databases(self, target: pg.Target, ops: Sequence[DatabaseOp],
                              within: float = 60.0) -> dict[str, str]:
        failed: dict[str, str] = {}
        for op in ops:
            self.ran.append(f"{op.kind} database {op.database}")
            if op.database in self.refuse:
                failed[op.database] = self.refuse[op.database]
            elif op.kind == "create":
                self.databases[op.database] = ObservedDatabase(op.owner, op.connection_limit)
            elif op.kind == "drop":
                self.databases.pop(op.database, None)
        return failed

    async def observe_roles(self, target: pg.Target, names: Sequence[str],
                            within: float = 5.0) -> dict[str, ObservedRole]:
        return {n: r for n, r in self.roles.items() if n in names}

    async def apply_roles(self, target: pg.Target, ops: Sequence[Op], within: float = 30.0) -> dict[str, str]:
        failed: dict[str, str] = {}
        for op in ops:
            self.ran.append(f"{op.kind} role {op.role}")
            if op.kind == "drop" and any(d.owner == op.role for d in self.databases.values()):
                failed[op.role] = f'role "{op.role}" cannot be dropped because some objects depend on it'
            elif op.kind == "create":
                self.roles[op.role] = ObservedRole(op.login, op.connection_limit)
            elif op.kind == "drop":
                self.roles.pop(op.role, None)
        return failed


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    fake = Server()
    monkeypatch.setattr(pg_databases, "observe", fake.observe_databases)
    monkeypatch.setattr(pg_databases, "apply", fake.apply_databases)
    monkeypatch.setattr(pg_roles, "observe", fake.observe_roles)
    monkeypatch.setattr(pg_roles, "apply", fake.apply_roles)
    return fake


def recorded(db: SampleDB, out: sql_objects.DeclaredOutcome) -> SampleDB:
    update: dict[str, object] = {}
    if out.roles.statuses is not None:
        update |= {"roles": list(out.roles.statuses), "roles_applied": out.roles.applied}
    if out.databases.statuses is not None:
        update |= {"databases": list(out.databases.statuses), "databases_applied": out.databases.applied}
    return db.model_copy(update={"status": db.status.model_copy(update=update)})


async def test_nothing_before_ready_then_the_owner_first_then_nothing_while_current(server: Server) -> None:
    cluster = FakeCluster()
    db = ready_db(cluster, roles=[{"name": "reporting"}], databases=[{"name": "reports", "owner": "reporting"}])
    idle = await sql_objects.reconcile_declared(cluster.ctx, db, db_ready=False, primary_pod=POD)
    assert server.ran == [] and idle.problems == () and idle.databases == databases.DatabasesOutcome()
    out = await sql_objects.reconcile_declared(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert server.ran == ["create role reporting", "create database reports"]
    assert out.databases.statuses is not None and [s.state for s in out.databases.statuses] == ["Ready"]
    assert out.databases.applied and out.problems == ()
    assert any(r == "DatabasesApplied" and "reports" in m for _t, r, m in cluster.recorder.events)
    server.ran.clear()
    again = await sql_objects.reconcile_declared(cluster.ctx, recorded(db, out), db_ready=True, primary_pod=POD)
    assert server.ran == [] and again.databases.statuses is None  # the hash is current: no SQL


async def test_a_refused_statement_fails_its_database_only_and_is_tried_again(server: Server) -> None:
    cluster = FakeCluster()
    server.refuse["b"] = 'role "nobody" does not exist'
    db = ready_db(cluster, databases=[{"name": "a"}, {"name": "b", "owner": "nobody"}])
    out = await databases.reconcile_databases(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert out.statuses is not None and {s.name: s.state for s in out.statuses} == {"a": "Ready", "b": "Failed"}
    assert [p.reason for p in out.problems] == ["DatabaseFailed"] and "nobody" in out.problems[0].message
    assert out.applied is None and out.recheck_after == databases.RETRY_SECONDS
    # the failure stays in the status (Degraded) until a pass applies the list
    kept = await databases.reconcile_databases(cluster.ctx, db.model_copy(update={"status": db.status.model_copy(
        update={"databases": list(out.statuses), "databases_applied": "old"})}), db_ready=False, primary_pod=POD)
    assert [p.reason for p in kept.problems] == ["DatabaseFailed"]


async def test_a_database_and_its_owner_written_absent_go_in_one_pass(server: Server) -> None:
    cluster = FakeCluster()
    server.roles["reporting"] = ObservedRole(True, -1)
    server.databases["reports"] = ObservedDatabase("reporting", -1)
    db = ready_db(cluster, roles=[{"name": "reporting", "ensure": "absent"}],
                  databases=[{"name": "reports", "ensure": "absent"}])
    out = await sql_objects.reconcile_declared(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert server.ran == ["drop role reporting", "drop database reports", "drop role reporting"]
    assert server.roles == {} and server.databases == {}
    assert out.problems == () and out.roles.applied and out.databases.applied
    assert out.roles.statuses is not None and [s.state for s in out.roles.statuses] == ["Dropped"]


async def test_a_database_left_out_is_retained_with_no_sql(server: Server) -> None:
    cluster = FakeCluster()
    server.databases["reports"] = ObservedDatabase("app", -1)
    db = ready_db(cluster, databases=[{"name": "reports"}])
    out = await databases.reconcile_databases(cluster.ctx, db, db_ready=True, primary_pod=POD)
    server.ran.clear()
    before = db.model_copy(update={"spec": db.spec.model_copy(update={"databases": []}), "status": db.status.model_copy(
        update={"databases": list(out.statuses or ()), "databases_applied": out.applied})})
    left = await databases.reconcile_databases(cluster.ctx, before, db_ready=True, primary_pod=POD)
    assert server.ran == [] and server.databases == {"reports": ObservedDatabase("app", -1)}
    assert left.statuses is not None and [(s.name, s.state) for s in left.statuses] == [("reports", "Retained")]
