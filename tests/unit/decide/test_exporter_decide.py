"""spec.monitoring -> the exporter container of each instance's pod: what it connects as, what it can reach, and
that a database with monitoring off keeps the pod template it had."""

from __future__ import annotations

from typing import Any

from sampledb_operator.decide.children import exporter, pgconfig
from sampledb_operator.decide.children.desired_statefulset import DEFAULT_CONTAINER_ANNOTATION, statefulset
from sampledb_operator.model.monitoring import DEFAULT_EXPORTER_IMAGE, EXPORTER_PORT, MONITOR_ROLE
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB


def make_db(**spec: Any) -> SampleDB:
    body: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}, **spec}
    return SampleDB.model_validate({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                                    "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1"},
                                    "spec": body})


def pod(db: SampleDB, index: int = 0) -> Obj:
    return dict(statefulset(db, index=index)["spec"]["template"])


def containers(db: SampleDB) -> dict[str, Obj]:
    return {c["name"]: c for c in pod(db)["spec"]["containers"]}


def test_every_instance_has_the_exporter_by_default_on_the_metrics_port() -> None:
    db = make_db(replicas=3)
    for index in range(3):
        template = pod(db, index)
        names = [c["name"] for c in template["spec"]["containers"]]
        assert names == ["postgres", exporter.CONTAINER]  # the database's first: kubectl's default too
        assert template["metadata"]["annotations"][DEFAULT_CONTAINER_ANNOTATION] == "postgres"
    c = containers(db)[exporter.CONTAINER]
    assert c["image"] == DEFAULT_EXPORTER_IMAGE
    assert c["ports"] == [{"name": "metrics", "containerPort": EXPORTER_PORT, "protocol": "TCP"}]
    assert "command" not in c  # the image's entrypoint is the exporter (upstream's and the local build's)


def test_the_exporter_connects_over_the_socket_as_the_monitoring_role_without_a_password() -> None:
    c = containers(make_db())[exporter.CONTAINER]
    env = {e["name"]: e for e in c["env"]}
    assert set(env) == {"DATA_SOURCE_NAME"}  # no password, no secretKeyRef: nothing of the database's Secret
    dsn = dict(part.split("=", 1) for part in env["DATA_SOURCE_NAME"]["value"].split())
    assert dsn["host"] == pgconfig.RUN_DIR and dsn["user"] == MONITOR_ROLE and "password" not in dsn
    assert c["volumeMounts"] == [{"name": "run", "mountPath": pgconfig.RUN_DIR, "readOnly": True}]
    assert c["securityContext"]["runAsUser"] == exporter.NOBODY
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert "readinessProbe" not in c and "limits" not in c["resources"]  # never takes the instance out


def test_monitoring_off_keeps_the_pod_template_of_one_container() -> None:
    off = pod(make_db(monitoring={"enabled": False}))
    assert [c["name"] for c in off["spec"]["containers"]] == ["postgres"]
    assert DEFAULT_CONTAINER_ANNOTATION not in off["metadata"]["annotations"]
    assert not [v for v in off["spec"]["volumes"] if v["name"] == exporter.QUERIES_VOLUME]


def test_custom_queries_come_from_an_optional_configmap_key() -> None:
    db = make_db(monitoring={"image": "example.org/exporter:v1",
                             "customQueries": {"name": "orders-metrics", "key": "extra.yaml"}})
    c = containers(db)[exporter.CONTAINER]
    assert c["image"] == "example.org/exporter:v1"
    assert f"--extend.query-path={exporter.QUERIES_DIR}/{exporter.QUERIES_FILE}" in c["args"]
    volumes = {v["name"]: v for v in pod(db)["spec"]["volumes"]}
    assert volumes[exporter.QUERIES_VOLUME]["configMap"] == {
        "name": "orders-metrics", "optional": True, "items": [{"key": "extra.yaml", "path": exporter.QUERIES_FILE}]}
    assert {"name": exporter.QUERIES_VOLUME, "mountPath": exporter.QUERIES_DIR, "readOnly": True} in c["volumeMounts"]
