"""The application role step against the in-memory cluster: the password of the credentials Secret set once per
version of the Secret on the ready primary, announced when the Secret changed, never for a database whose app is its
superuser, and a refusal reported with the server's words."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from tests.support.fake_cluster import FakeCluster, running_database

from sampledb_operator.decide.children.desired_config import SUPERUSER_SECRET_ANNOTATION
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.pg import app_role as pg_app_role
from sampledb_operator.pg.roles import scram_verifier
from sampledb_operator.reconcilers import app_role

POD = {"metadata": {"uid": "pod-1"}, "status": {"podIP": "10.0.0.5"}}
SECRET = names.secret_name("orders")


class FakeSql:
    """pg/app_role.apply: what it was asked to set, and the answer to give."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.answer: dict[str, str] | None = {}

    async def apply(self, target: Any, role: str, password: str, within: float = 3.0) -> dict[str, str] | None:
        self.calls.append((target.host, role, password))
        return self.answer


@pytest.fixture
def sql(monkeypatch: pytest.MonkeyPatch) -> FakeSql:
    fake = FakeSql()
    monkeypatch.setattr(pg_app_role, "apply", fake.apply)
    return fake


def stored(cluster: FakeCluster) -> SampleDB:
    obj = cluster.get("SampleDB", "orders")
    assert obj is not None
    return SampleDB.model_validate(obj)


def with_applied(db: SampleDB, applied: str | None) -> SampleDB:
    return db.model_copy(update={"status": db.status.model_copy(update={"app_role_applied": applied})})


def set_password(cluster: FakeCluster, password: str) -> None:
    secret = cluster.get("Secret", SECRET)
    assert secret is not None
    secret["data"]["password"] = base64.b64encode(password.encode()).decode()
    cluster.put("Secret", secret)


def app_password(cluster: FakeCluster) -> str:
    secret = cluster.get("Secret", SECRET)
    assert secret is not None
    return base64.b64decode(secret["data"]["password"]).decode()


async def test_the_password_is_set_once_per_version_of_the_secret_and_a_change_is_announced(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    db = stored(cluster)
    assert await app_role.reconcile_app_role(cluster.ctx, db, db_ready=False, primary_pod=POD) == \
        app_role.AppRoleOutcome() and sql.calls == []
    first = await app_role.reconcile_app_role(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert sql.calls == [("10.0.0.5", "app", app_password(cluster))] and first.applied and first.problems == ()
    assert "ApplicationPasswordApplied" not in cluster.recorder.reasons()  # the first record: made at initdb
    db = with_applied(db, first.applied)
    assert await app_role.reconcile_app_role(cluster.ctx, db, db_ready=True, primary_pod=POD) == \
        app_role.AppRoleOutcome() and len(sql.calls) == 1  # recorded: no SQL

    set_password(cluster, "rotated by the user")
    rotated = await app_role.reconcile_app_role(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert sql.calls[-1] == ("10.0.0.5", "app", "rotated by the user") and rotated.applied not in (None, first.applied)
    [(kind, _reason, message)] = [e for e in cluster.recorder.events if e[1] == "ApplicationPasswordApplied"]
    assert kind == "Normal" and SECRET in message and "rotated" not in message


async def test_a_database_whose_app_is_its_superuser_is_left_alone(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    secret = cluster.get("Secret", SECRET)
    assert secret is not None and SUPERUSER_SECRET_ANNOTATION in secret["metadata"]["annotations"]
    del secret["metadata"]["annotations"][SUPERUSER_SECRET_ANNOTATION]
    cluster.put("Secret", secret)
    out = await app_role.reconcile_app_role(cluster.ctx, stored(cluster), db_ready=True, primary_pod=POD)
    assert out == app_role.AppRoleOutcome() and sql.calls == []


async def test_a_refusal_is_a_problem_with_the_servers_words_and_no_answer_is_tried_again(sql: FakeSql) -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    db = stored(cluster)
    sql.answer = {"role": "permission denied to alter role"}
    refused = await app_role.reconcile_app_role(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert refused.applied is None and refused.recheck_after == app_role.RETRY_SECONDS
    assert [(p.reason, p.message) for p in refused.problems] == [
        ("ApplicationRoleFailed", "the role app: role: permission denied to alter role")]
    sql.answer = None  # no answer: asked again after a growing delay, not on every pass
    unanswered = await app_role.reconcile_app_role(cluster.ctx, db, db_ready=True, primary_pod=POD)
    assert unanswered.problems == () and unanswered.recheck_after is not None
    calls = len(sql.calls)
    assert (await app_role.reconcile_app_role(cluster.ctx, db, db_ready=True, primary_pod=POD)).applied is None
    assert len(sql.calls) == calls  # not due yet


def test_the_password_goes_as_a_verifier_and_nothing_else_is_altered() -> None:
    from psycopg import sql
    composed = [compose(sql) for _key, compose in pg_app_role.statements("app", "pw'; DROP ROLE app; --")]
    text = " ".join(c.as_string(None) for c in composed)  # type: ignore[arg-type]
    assert "DROP ROLE app; --" not in text and "SCRAM-SHA-256$4096:" in text
    assert "ALTER ROLE \"app\" WITH LOGIN PASSWORD 'SCRAM-SHA-256$4096:" in text
    assert "SUPERUSER" not in text and "CREATEDB" not in text
    assert scram_verifier("x").startswith("SCRAM-SHA-256$")
