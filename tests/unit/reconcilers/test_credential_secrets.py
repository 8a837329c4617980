"""The Secret step (reconcilers/credential_secrets.py) on the in-memory fake cluster: a new database gets a superuser
Secret of its own and the application's credentials naming it; a database made before the split gets a copy; the
loss of either after the data exists is a problem, never a new password."""

from __future__ import annotations

import base64
from typing import Any

from tests.support.fake_cluster import FakeCluster, sampledb

from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.children.desired_config import APPLICATION_SUPERUSER_ANNOTATION
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.credential_secrets import SecretOutcome, ensure_secret

APP, SUPERUSER = names.secret_name("orders"), names.superuser_secret_name("orders")
DATA = ("PersistentVolumeClaim", names.data_pvc_name("orders"))


def stored(cluster: FakeCluster, **spec: Any) -> SampleDB:
    return SampleDB.model_validate(cluster.put("SampleDB", sampledb(**spec)))


def decoded(secret: Obj) -> dict[str, str]:
    if "stringData" in secret:
        return dict(secret["stringData"])
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def as_read(secret: Obj) -> Obj:
    """A Secret as the cache holds it: data, base64."""
    return {**{k: v for k, v in secret.items() if k != "stringData"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in decoded(secret).items()}}


async def test_a_new_database_gets_the_superuser_secret_first_then_the_credentials_naming_it() -> None:
    cluster = FakeCluster()
    db = stored(cluster)
    made = await ensure_secret(cluster.ctx, db, {})
    assert made == SecretOutcome(created=(f"Secret {SUPERUSER}", f"Secret {APP}"))
    assert cluster.written("create", "Secret") == [("create", "Secret", SUPERUSER), ("create", "Secret", APP)]
    superuser, app = decoded(cluster.get("Secret", SUPERUSER)), decoded(cluster.get("Secret", APP))
    assert superuser["username"] == "postgres" and app["username"] == "app"
    assert len(superuser["password"]) >= 24 and superuser["password"] != app["password"]
    assert d.separate_superuser(cluster.get("Secret", APP))
    assert "application-is-superuser" not in str(cluster.get("Secret", SUPERUSER)["metadata"])
    # a pass on a cache that has not seen them yet: AlreadyExists, nothing overwritten, nothing announced
    before = (cluster.get("Secret", SUPERUSER), cluster.get("Secret", APP))
    assert await ensure_secret(cluster.ctx, db, {}) == SecretOutcome()
    assert (cluster.get("Secret", SUPERUSER), cluster.get("Secret", APP)) == before


async def test_a_database_made_before_the_split_gets_a_copy_of_its_credentials_as_superuser() -> None:
    cluster = FakeCluster()
    db = stored(cluster)
    legacy = as_read(d.secret(db, "old-password"))
    del legacy["metadata"]["annotations"]  # earlier versions wrote no annotation
    made = await ensure_secret(cluster.ctx, db, {("Secret", APP): legacy, DATA: {}})
    assert made == SecretOutcome(created=(f"Secret {SUPERUSER}",))
    copy = cluster.get("Secret", SUPERUSER)
    assert decoded(copy) == {"username": "app", "password": "old-password"}
    assert copy["metadata"]["annotations"] == {APPLICATION_SUPERUSER_ANNOTATION: "true"}
    assert cluster.written("create", "Secret") == [("create", "Secret", SUPERUSER)]  # the credentials untouched


async def test_a_lost_secret_over_existing_data_is_a_problem_and_no_new_password() -> None:
    cluster = FakeCluster()
    db = stored(cluster)
    app = as_read(d.secret(db, "pw"))
    superuser = as_read(d.superuser_secret(db, "su"))
    [problem] = (await ensure_secret(cluster.ctx, db, {("Secret", APP): app, DATA: {}})).problems
    assert problem.reason == "SuperuserCredentialsMissing" and SUPERUSER in problem.message
    [problem] = (await ensure_secret(cluster.ctx, db, {("Secret", SUPERUSER): superuser, DATA: {}})).problems
    assert problem.reason == "CredentialsMissing" and APP in problem.message
    [problem] = (await ensure_secret(cluster.ctx, db, {DATA: {}})).problems
    assert problem.reason == "CredentialsMissing"
    assert cluster.written("create", "Secret") == []
    # without data, a lost credentials Secret is made again (the superuser's is kept)
    made = await ensure_secret(cluster.ctx, db, {("Secret", SUPERUSER): superuser})
    assert made == SecretOutcome(created=(f"Secret {APP}",))
