"""decide/children/desired.py and decide/plan.py: the children a SampleDB should have, and the writes to get there."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as hs

from sampledb_operator.decide import jobs, plan
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.labels import DATA_DIR_ANNOTATION, DATABASE_LABEL, INIT_SOURCE_ANNOTATION, REPLICA_ROLE
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB

SCRIPTS = {"lib.sh": "#!/bin/bash\n", "init.sh": "#!/bin/bash\n"}


def make_db(name: str = "orders", namespace: str = "shop", **spec: Any) -> SampleDB:
    body: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}}
    body.update(spec)
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": name, "namespace": namespace, "uid": "uid-1", "generation": 1},
        "spec": body,
    })


def server_view(obj: dict[str, Any]) -> dict[str, Any]:
    """What the API server would hold after applying obj: our fields plus defaults it adds."""
    out = copy.deepcopy(obj)
    out["metadata"]["uid"] = "child-uid"
    out["metadata"]["resourceVersion"] = "7"
    out["metadata"].setdefault("annotations", {})["deployment.kubernetes.io/revision"] = "1"
    if obj["kind"] == "StatefulSet":
        c = out["spec"]["template"]["spec"]["containers"][0]
        c["terminationMessagePath"] = "/dev/termination-log"
        c["imagePullPolicy"] = "IfNotPresent"
        out["spec"]["revisionHistoryLimit"] = 10
        out["status"] = {"replicas": 1}
    if obj["kind"] == "Service":
        out["spec"]["clusterIP"] = out["spec"].get("clusterIP", "10.96.0.17")
        out["spec"]["sessionAffinity"] = "None"
    if obj["kind"] == "PersistentVolumeClaim":
        out["spec"]["storageClassName"] = "standard"
        out["spec"]["volumeMode"] = "Filesystem"
        out["status"] = {"phase": "Bound"}
    return out


def observed_from(objs: list[dict[str, Any]]) -> dict[plan.Key, dict[str, Any]]:
    return {plan.key_of(o): server_view(o) for o in objs}


def test_no_long_lived_child_is_owned_and_all_are_labelled_for_the_selector() -> None:
    """The garbage collector must never remove what a final snapshot needs (not even on a
    foreground deletion): the deletion steps remove these children themselves."""
    db = make_db()
    for child in d.children(d.Inputs(db, SCRIPTS)):
        meta = child["metadata"]
        assert meta["namespace"] == "shop"
        assert "ownerReferences" not in meta, plan.key_of(child)
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "sampledb-operator"
        if d.is_shared_scripts(child):  # the namespace's, shared: no one database's label
            assert DATABASE_LABEL not in meta["labels"]
        else:
            assert meta["labels"][DATABASE_LABEL] == "orders"
    assert "ownerReferences" not in d.secret(db, "pw")["metadata"]


def test_the_read_only_service_is_desired_with_standbys_or_once_it_exists() -> None:
    def services(db: SampleDB, **inputs: Any) -> list[str]:
        made = d.children(d.Inputs(db, SCRIPTS, **inputs))
        return sorted(c["metadata"]["name"] for c in made if c["kind"] == "Service")

    ro = names.replica_service_name("orders")
    assert ro not in services(make_db())
    assert services(make_db(replicas=3)) == sorted([ro, names.client_service_name("orders"),
                                                    names.headless_service_name("orders")])
    assert ro in services(make_db(), replica_service=True)  # made earlier (standbys since removed): kept
    [service] = [c for c in d.children(d.Inputs(make_db(replicas=2), SCRIPTS)) if c["metadata"]["name"] == ro]
    assert service["spec"]["selector"][names.ROLE_LABEL] == REPLICA_ROLE and service["spec"]["type"] == "ClusterIP"


def test_every_database_of_a_namespace_mounts_one_shared_scripts_configmap() -> None:
    """The scripts (~80 KB) are kept once per namespace, not once per database: two databases' desired scripts
    ConfigMaps are the same object, and their pods and Jobs mount it."""
    one, two = make_db(), make_db(name="billing")
    scripts = [[c for c in d.children(d.Inputs(db, SCRIPTS)) if c["kind"] == "ConfigMap" and d.is_shared_scripts(c)]
               for db in (one, two)]
    assert scripts[0] == scripts[1] and len(scripts[0]) == 1
    assert scripts[0][0]["metadata"]["name"] == d.SCRIPTS_CONFIGMAP and scripts[0][0]["data"] == SCRIPTS
    for db in (one, two):
        sts = next(c for c in d.children(d.Inputs(db, SCRIPTS)) if c["kind"] == "StatefulSet")
        volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
        assert volumes["scripts"]["configMap"]["name"] == d.SCRIPTS_CONFIGMAP
        job = jobs.init_job(make_db(name=db.metadata.name, init={"configMapKeyRef": {"name": "i", "key": "k"}}))
        assert job is not None
        assert {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}["scripts"]["configMap"]["name"] \
            == d.SCRIPTS_CONFIGMAP


def test_jobs_are_owned_by_the_sampledb() -> None:
    job = jobs.init_job(make_db(init={"configMapKeyRef": {"name": "i", "key": "k"}}))
    assert job is not None
    assert job["metadata"]["ownerReferences"] == [{
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "name": "orders", "uid": "uid-1",
        "controller": True, "blockOwnerDeletion": True,
    }]


def test_data_volume_records_its_data_directory() -> None:
    db = make_db()
    running = d.Running("17.2", "postgres:17.2", "pgdata-17")
    pvc = next(c for c in d.children(d.Inputs(db, SCRIPTS, running)) if c["kind"] == "PersistentVolumeClaim"
               and c["metadata"]["name"] == "data-orders-0")
    assert pvc["metadata"]["annotations"] == {DATA_DIR_ANNOTATION: "pgdata-17"}


def test_statefulset_runs_the_versions_image_on_the_data_pvc_with_probes_and_non_root() -> None:
    db = make_db(parameters={"max_connections": "200", "shared_buffers": "256MB"},
                 resources={"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}})
    sts = d.statefulset(db)
    pod = sts["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["image"] == "postgres:16.4"
    assert c["command"] == ["bash", "/sampledb/scripts/instance.sh"]  # which reads the role, clones, rewinds
    assert c["args"] == ["postgres", "-c", "config_file=/etc/sampledb/postgresql.conf"]
    assert {"name": "config", "mountPath": "/etc/sampledb", "readOnly": True} in c["volumeMounts"]
    config = next(v for v in pod["volumes"] if v["name"] == "config")
    assert config["configMap"] == {"name": names.configmap_name("orders"),
                                   "items": [{"key": "postgresql.conf", "path": "postgresql.conf"},
                                             {"key": "pg_hba.conf", "path": "pg_hba.conf"}]}
    assert c["resources"] == {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}}
    assert {"readinessProbe", "livenessProbe", "startupProbe"} <= set(c)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    claim = next(v for v in pod["volumes"] if v["name"] == names.DATA_VOLUME)
    assert claim["persistentVolumeClaim"]["claimName"] == names.data_pvc_name("orders")
    assert sts["spec"]["serviceName"] == names.headless_service_name("orders")
    password_env = next(e for e in c["env"] if e["name"] == "POSTGRES_PASSWORD")
    assert "value" not in password_env  # from the Secret, never inline


def test_secret_holds_generated_password_and_configmap_holds_no_secret() -> None:
    db = make_db()
    secret = d.secret(db, "s3cr3t-value")
    assert secret["stringData"]["password"] == "s3cr3t-value"
    assert "s3cr3t-value" in secret["stringData"]["uri"]
    cm = d.configmap(db)
    assert "s3cr3t-value" not in repr(cm)
    assert cm["data"]["host"] == "orders.shop.svc"
    assert cm["data"]["secretName"] == names.secret_name("orders")


def test_init_job_mounts_the_sql_from_its_configmap_key_and_records_its_source() -> None:
    db = make_db(init={"configMapKeyRef": {"name": "orders-init", "key": "init.sql"}})
    job = jobs.init_job(db)
    assert job is not None
    assert job["metadata"]["name"] == names.init_job_name("orders", "uid-1")
    assert job["metadata"]["annotations"][INIT_SOURCE_ANNOTATION] == "configmap/orders-init/init.sql"
    vol = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "init-sql")
    assert vol["configMap"] == {"name": "orders-init", "items": [{"key": "init.sql", "path": "init.sql"}]}
    env = {e["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert {"PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "INIT_SQL_FILE"} <= env
    assert jobs.init_job(make_db()) is None


def test_testing_annotations_reach_job_pods_only() -> None:
    db = make_db(init={"configMapKeyRef": {"name": "i", "key": "k"}})
    db = db.model_copy(update={"metadata": db.metadata.model_copy(
        update={"annotations": {"testing.sampledb.io/fail": "true", "other": "x"}})})
    job = jobs.init_job(db)
    assert job is not None
    assert job["spec"]["template"]["metadata"]["annotations"] == {"testing.sampledb.io/fail": "true"}
    assert "testing.sampledb.io/fail" not in d.statefulset(db)["spec"]["template"]["metadata"]["annotations"]


def test_missing_children_are_planned_in_order_and_nothing_when_all_match() -> None:
    db = make_db()
    want = d.children(d.Inputs(db, SCRIPTS))
    actions = plan.plan(want, {})
    assert [a.key for a in actions] == [plan.key_of(o) for o in want]
    assert plan.plan(want, observed_from(want)) == []


def test_hand_edited_statefulset_is_drift_and_server_defaults_are_not() -> None:
    db = make_db()
    want = d.children(d.Inputs(db, SCRIPTS))
    observed = observed_from(want)
    sts_key = ("StatefulSet", "orders")
    observed[sts_key]["spec"]["template"]["spec"]["containers"][0]["image"] = "postgres:9.6"
    actions = plan.plan(want, observed)
    assert [a.key for a in actions] == [sts_key]
    assert "image" in actions[0].reason


def test_a_scheduling_field_or_a_resource_the_spec_no_longer_asks_for_is_drift() -> None:
    placed = make_db(scheduling={"nodeSelector": {"pool": "db"}, "priorityClassName": "databases"},
                     resources={"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}})
    observed = observed_from(d.children(d.Inputs(placed, SCRIPTS)))
    sts_key = ("StatefulSet", "orders")
    for edited, words in ((make_db(scheduling={"priorityClassName": "databases"},
                                   resources={"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}}),
                           "spec.template.spec.nodeSelector is no longer wanted"),
                          (make_db(scheduling={"nodeSelector": {"pool": "db"}, "priorityClassName": "databases"},
                                   resources={"requests": {"memory": "1Gi"}}),
                           "resources.limits.memory is no longer wanted")):
        actions = plan.plan(d.children(d.Inputs(edited, SCRIPTS)), observed)
        assert [a.key for a in actions] == [sts_key] and words in actions[0].reason, actions
    assert plan.plan(d.children(d.Inputs(placed, SCRIPTS)), observed) == []  # unchanged: nothing to do


def test_quantities_compare_by_value() -> None:
    db = make_db(resources={"limits": {"memory": "1024Mi"}})
    want = d.children(d.Inputs(db, SCRIPTS))
    observed = observed_from(want)
    observed[("StatefulSet", "orders")]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "memory"] = "1Gi"
    assert plan.plan(want, observed) == []


def test_pvc_grows_but_never_shrinks() -> None:
    small, big = make_db(storage={"size": "1Gi"}), make_db(storage={"size": "2Gi"})
    observed = observed_from([d.data_pvc(small)])
    grow = plan.plan([d.data_pvc(big)], observed)
    assert len(grow) == 1 and "expand storage from 1Gi to 2Gi" in grow[0].reason
    observed_big = observed_from([d.data_pvc(big)])
    assert plan.plan([d.data_pvc(small)], observed_big) == []


def test_a_hand_expanded_pvc_keeps_its_size_when_another_field_is_applied() -> None:
    """Issue #11, item 13b: the API server refuses a smaller request (422), and it is never what is meant."""
    db = make_db(storage={"size": "1Gi"})
    observed = observed_from([d.data_pvc(db)])
    pvc = observed[("PersistentVolumeClaim", names.data_pvc_name("orders"))]
    pvc["spec"]["resources"]["requests"]["storage"] = "5Gi"  # expanded by hand
    del pvc["metadata"]["annotations"][DATA_DIR_ANNOTATION]  # and a field of ours drifted
    [action] = plan.plan([d.data_pvc(db)], observed)
    assert action.obj["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert action.obj["metadata"]["annotations"] == {DATA_DIR_ANNOTATION: "pgdata"}
    assert d.data_pvc(db)["spec"]["resources"]["requests"]["storage"] == "1Gi"  # the desired object untouched


_param_names = hs.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True)
_param_values = hs.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(
    version=hs.sampled_from(["13.9", "14.12", "15.8", "16.4", "17.2"]),
    size=hs.sampled_from(["64Mi", "1Gi", "1536Mi", "10Gi"]),
    params=hs.dictionaries(_param_names.filter(lambda n: n not in ("port", "config_file")), _param_values,
                           max_size=4),
    cpu=hs.sampled_from([None, "100m", "1", "2500m"]),
    name=hs.from_regex(r"[a-z][a-z0-9]{0,20}", fullmatch=True),
)
def test_a_plan_applied_to_its_own_result_is_empty(version: str, size: str, params: dict[str, str],
                                                   cpu: str | None, name: str) -> None:
    spec: dict[str, Any] = {"version": version, "storage": {"size": size}, "parameters": params or None}
    if cpu:
        spec["resources"] = {"requests": {"cpu": cpu}}
    db = make_db(name=name, **spec)
    want = d.children(d.Inputs(db, SCRIPTS))
    first = plan.plan(want, {})
    result = observed_from([a.obj for a in first])
    assert plan.plan(want, result) == []


def test_the_connection_uri_is_percent_encoded_and_asks_for_tls_when_served() -> None:
    from sampledb_operator.decide.children import desired_config as dc

    uri = dc.connection_uri("app", "p@ss/w:rd", "orders.shop.svc", "5432", "app", encrypted=True)
    assert uri == "postgresql://app:p%40ss%2Fw%3Ard@orders.shop.svc:5432/app?sslmode=require"
    assert "sslmode" not in dc.connection_uri("app", "pw", "h", "5432", "app", encrypted=False)
    data = {"username": "app", "password": "pw", "host": "h", "port": "5432", "database": "app",
            "uri": "postgresql://app:pw@h:5432/app"}
    assert dc.uri_update(data, None) is None  # not known yet: as it is
    assert dc.uri_update(data, False) is None  # already so
    assert dc.uri_update(data, True) == "postgresql://app:pw@h:5432/app?sslmode=require"
    assert dc.uri_update({k: v for k, v in data.items() if k != "host"}, True) is None  # nothing guessed
    tls_on = d.secret(make_db(), "pw")["stringData"]["uri"]
    tls_off = d.secret(make_db(tls={"enabled": False}), "pw")["stringData"]["uri"]
    assert tls_on.endswith("?sslmode=require") and "sslmode" not in tls_off
