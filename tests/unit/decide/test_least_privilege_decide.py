"""Who each child connects as (pure decide/): the instances and every Job as the superuser of the superuser Secret,
the application's role made at initdb from the credentials Secret, the user's SQL and restores run as the
application's role; the credentials Secret names the superuser Secret."""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import sampledb

from sampledb_operator import dataplane
from sampledb_operator.decide import jobs
from sampledb_operator.decide.backup import restore
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.children.desired_config import SUPERUSER_SECRET_ANNOTATION
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

APP, SUPERUSER = names.secret_name("orders"), names.superuser_secret_name("orders")


def db(**spec: Any) -> SampleDB:
    return SampleDB.model_validate({**sampledb(**spec), "metadata": {"name": "orders", "namespace": "shop",
                                                                     "uid": "u-1"}})


def env_of(container: Obj) -> dict[str, Obj]:
    return {e["name"]: e for e in container["env"]}


def secret_of(var: Obj) -> tuple[str, str]:
    ref = var["valueFrom"]["secretKeyRef"]
    return ref["name"], ref["key"]


def test_the_instance_initdbs_and_replicates_as_the_superuser_and_makes_the_application_role() -> None:
    sts = d.statefulset(db())
    pod = sts["spec"]["template"]["spec"]
    [postgres] = [c for c in pod["containers"] if c["name"] == "postgres"]
    env = env_of(postgres)
    assert secret_of(env["POSTGRES_USER"]) == (SUPERUSER, "username")
    assert secret_of(env["POSTGRES_PASSWORD"]) == (SUPERUSER, "password")
    assert secret_of(env["SAMPLEDB_APP_USER"]) == (APP, "username")
    assert secret_of(env["SAMPLEDB_APP_PASSWORD"]) == (APP, "password")
    assert env["POSTGRES_DB"]["value"] == "app"
    [mount] = [m for m in postgres["volumeMounts"] if m["name"] == "initdb"]
    assert mount == {"name": "initdb", "mountPath": "/docker-entrypoint-initdb.d", "readOnly": True}
    [volume] = [v for v in pod["volumes"] if v["name"] == "initdb"]
    assert volume["configMap"]["items"] == [{"key": "app-role.sh", "path": "sampledb-app-role.sh"}]
    assert volume["configMap"]["optional"] is True  # an earlier scripts ConfigMap without the key blocks no pod
    assert "app-role.sh" in dataplane.all_scripts()  # the shared scripts ConfigMap carries it


def test_every_job_connects_as_the_superuser_and_the_users_sql_runs_as_the_application() -> None:
    database = db(init={"configMapKeyRef": {"name": "init", "key": "init.sql"}})
    init = jobs.init_job(database)
    assert init is not None
    made = {
        "init": init,
        "migrate": jobs.migration_job(database, name="orders-migrate", snapshot_configmap="m", digest="x"),
        "backup": jobs.backup_job(database, backup_name="b", backup_uid="u", claim_name="orders-backups"),
        "restore": restore.restore_job(db(restore={"backupName": "b"}), {"metadata": {"name": "b"}, "status": {
            "location": {"pvcName": "orders-backups", "path": "/sampledb/backups/b.dump"}}}),
    }
    for component, job in made.items():
        env = env_of(job["spec"]["template"]["spec"]["containers"][0])
        assert secret_of(env["PGUSER"]) == (SUPERUSER, "username"), component
        assert secret_of(env["PGPASSWORD"]) == (SUPERUSER, "password"), component
        owner = env.get(jobs.OWNER_ROLE_ENV)
        if component == "backup":
            assert owner is None  # pg_dump reads everything: the superuser's
        else:
            assert owner is not None and secret_of(owner) == (APP, "username"), component


def test_the_credentials_name_the_superuser_secret_and_the_superuser_secret_holds_postgres() -> None:
    app = d.secret(db(), "app-pw")
    assert app["metadata"]["annotations"] == {SUPERUSER_SECRET_ANNOTATION: SUPERUSER}
    assert d.separate_superuser(app)
    assert app["stringData"]["username"] == "app" and "app-pw" in app["stringData"]["uri"]
    superuser = d.superuser_secret(db(), "su-pw")
    assert superuser["metadata"]["name"] == SUPERUSER and "ownerReferences" not in superuser["metadata"]
    assert superuser["stringData"] == {"username": "postgres", "password": "su-pw"}
    assert not d.separate_superuser({"metadata": {"name": APP}})  # an earlier version's credentials
