"""Spec -> the child objects a SampleDB should have, as plain Kubernetes dicts.

Pure: no I/O, no clock, no randomness (the generated password is an input). Every object carries
the SampleDB's controller ownerReference and the operator's labels, so the operator's watches can
select exactly its own objects on the server (MANAGED_SELECTOR). Only the fields the operator owns
are set: server-side apply leaves every other field to its manager.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB, image_for
from sampledb_operator.model.schema import API_VERSION

Obj = dict[str, Any]

MANAGED_BY = "sampledb-operator"
MANAGED_SELECTOR = f"app.kubernetes.io/managed-by={MANAGED_BY}"
DATABASE_LABEL = "sampledb.io/database"
COMPONENT_LABEL = "app.kubernetes.io/component"
INIT_SOURCE_ANNOTATION = "sampledb.io/init-source"
SCRIPTS_MOUNT = "/sampledb/scripts"
DATA_MOUNT = "/var/lib/postgresql/data"
PGDATA = f"{DATA_MOUNT}/pgdata"
POSTGRES_UID = 999  # the postgres user of the docker library image
DEFAULT_DATABASE = "app"
DEFAULT_USER = "app"
SECRET_USERNAME_KEY = "username"
SECRET_PASSWORD_KEY = "password"  # a key name, not a secret
INIT_SQL_DIR = "/sampledb/init"
INIT_SQL_FILE = f"{INIT_SQL_DIR}/init.sql"
JOB_BACKOFF_LIMIT = 2
JOB_DEADLINE_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class Inputs:
    """What desired-state functions read besides the SampleDB itself."""

    db: SampleDB
    scripts: dict[str, str]  # data-plane scripts by file name (the scripts ConfigMap's data)


def db_name(db: SampleDB) -> str:
    return db.metadata.name


def namespace_of(db: SampleDB) -> str:
    return db.metadata.namespace or "default"


def labels(db: SampleDB, component: str) -> dict[str, str]:
    """The labels every child carries; the selector labels are a stable subset of them."""
    return {
        "app.kubernetes.io/name": "postgresql",
        "app.kubernetes.io/instance": db_name(db),
        "app.kubernetes.io/managed-by": MANAGED_BY,
        COMPONENT_LABEL: component,
        DATABASE_LABEL: db_name(db),
    }


def selector_labels(db: SampleDB) -> dict[str, str]:
    """The StatefulSet's and Services' pod selector (immutable once created: never change it)."""
    return {"app.kubernetes.io/instance": db_name(db), DATABASE_LABEL: db_name(db),
            COMPONENT_LABEL: "database"}


def owner_reference(db: SampleDB) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "SampleDB",
        "name": db_name(db),
        "uid": db.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _meta(db: SampleDB, name: str, component: str, **extra: Any) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": namespace_of(db),
        "labels": labels(db, component),
        "ownerReferences": [owner_reference(db)],
    }
    meta.update(extra)
    return meta


TEST_ANNOTATION_PREFIX = "testing.sampledb.io/"


def test_annotations(db: SampleDB) -> dict[str, str]:
    """SampleDB annotations under testing.sampledb.io/, copied onto every Job's pods.

    They let a simulated cluster (kwok stages) select the pods of one database's Jobs, e.g. to make
    them fail; on a real cluster they are inert labels of intent.
    """
    return {k: v for k, v in sorted(db.metadata.annotations.items()) if k.startswith(TEST_ANNOTATION_PREFIX)}


def connection_env(db: SampleDB) -> list[Obj]:
    """libpq environment for Jobs: host/port/db/user from the ConfigMap, password from the Secret."""
    cm, secret = names.configmap_name(db_name(db)), names.secret_name(db_name(db))

    def from_cm(var: str, key: str) -> Obj:
        return {"name": var, "valueFrom": {"configMapKeyRef": {"name": cm, "key": key}}}

    return [
        from_cm("PGHOST", "host"),
        from_cm("PGPORT", "port"),
        from_cm("PGDATABASE", "database"),
        {"name": "PGUSER", "valueFrom": {"secretKeyRef": {"name": secret, "key": SECRET_USERNAME_KEY}}},
        {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": secret, "key": SECRET_PASSWORD_KEY}}},
        {"name": "PGCONNECT_TIMEOUT", "value": "10"},
    ]


def secret(db: SampleDB, password: str) -> Obj:
    """The credentials Secret. Created once with a generated password and never overwritten."""
    name, ns = db_name(db), namespace_of(db)
    host = names.service_host(name, ns)
    uri = f"postgresql://{DEFAULT_USER}:{password}@{host}:{names.POSTGRES_PORT}/{DEFAULT_DATABASE}"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(db, names.secret_name(name), "credentials"),
        "type": "Opaque",
        "stringData": {
            SECRET_USERNAME_KEY: DEFAULT_USER,
            SECRET_PASSWORD_KEY: password,
            "database": DEFAULT_DATABASE,
            "host": host,
            "port": str(names.POSTGRES_PORT),
            "uri": uri,
        },
    }


def configmap(db: SampleDB) -> Obj:
    """Connection details for applications and for the operator's Jobs (no secret material)."""
    name, ns = db_name(db), namespace_of(db)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(db, names.configmap_name(name), "connection"),
        "data": {
            "host": names.service_host(name, ns),
            "port": str(names.POSTGRES_PORT),
            "database": DEFAULT_DATABASE,
            "user": DEFAULT_USER,
            "secretName": names.secret_name(name),
            "endpoint": names.endpoint(name, ns),
        },
    }


def scripts_configmap_name(db: SampleDB) -> str:
    return f"{db_name(db)}-scripts"


def scripts_configmap(inputs: Inputs) -> Obj:
    """The data-plane scripts the Jobs run, mounted at SCRIPTS_MOUNT."""
    db = inputs.db
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(db, scripts_configmap_name(db), "scripts"),
        "data": dict(sorted(inputs.scripts.items())),
    }


def data_pvc(db: SampleDB) -> Obj:
    """The data volume. The operator owns it (not a volumeClaimTemplate) so it can expand it."""
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": str(db.spec.storage.size)}},
    }
    if db.spec.storage.storage_class_name:
        spec["storageClassName"] = db.spec.storage.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(db, names.data_pvc_name(db_name(db)), "storage"),
        "spec": spec,
    }


def _parameters_args(db: SampleDB) -> list[str]:
    args: list[str] = []
    for key, value in sorted((db.spec.parameters or {}).items()):
        args += ["-c", f"{key}={value}"]
    return args


def _resources(db: SampleDB) -> Obj:
    res = db.spec.resources
    out: Obj = {}
    if res is not None and res.requests:
        out["requests"] = {k: str(v) for k, v in sorted(res.requests.items())}
    if res is not None and res.limits:
        out["limits"] = {k: str(v) for k, v in sorted(res.limits.items())}
    return out


def _pg_isready(timeout: int) -> list[str]:
    return ["pg_isready", "-h", "127.0.0.1", "-p", str(names.POSTGRES_PORT), "-t", str(timeout)]


def _pod_security() -> Obj:
    return {
        "runAsNonRoot": True,
        "runAsUser": POSTGRES_UID,
        "runAsGroup": POSTGRES_UID,
        "fsGroup": POSTGRES_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _container_security() -> Obj:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def statefulset(db: SampleDB, replicas: int = 1) -> Obj:
    """One PostgreSQL pod on the data PVC; parameters become `postgres -c key=value` arguments."""
    name = db_name(db)
    secret_name = names.secret_name(name)
    container: Obj = {
        "name": "postgres",
        "image": image_for(db.spec),
        "args": ["postgres", *_parameters_args(db)],
        "ports": [{"name": "postgres", "containerPort": names.POSTGRES_PORT, "protocol": "TCP"}],
        "env": [
            {"name": "POSTGRES_USER", "valueFrom": {"secretKeyRef": {"name": secret_name,
                                                                       "key": SECRET_USERNAME_KEY}}},
            {"name": "POSTGRES_PASSWORD", "valueFrom": {"secretKeyRef": {"name": secret_name,
                                                                           "key": SECRET_PASSWORD_KEY}}},
            {"name": "POSTGRES_DB", "value": DEFAULT_DATABASE},
            {"name": "PGDATA", "value": PGDATA},
        ],
        "volumeMounts": [{"name": names.DATA_VOLUME, "mountPath": DATA_MOUNT},
                         {"name": "run", "mountPath": "/var/run/postgresql"},
                         {"name": "shm", "mountPath": "/dev/shm"}],
        "readinessProbe": {"exec": {"command": _pg_isready(3)}, "periodSeconds": 5, "timeoutSeconds": 5,
                           "failureThreshold": 3},
        "livenessProbe": {"exec": {"command": _pg_isready(5)}, "initialDelaySeconds": 30, "periodSeconds": 10,
                          "timeoutSeconds": 6, "failureThreshold": 6},
        "startupProbe": {"exec": {"command": _pg_isready(3)}, "periodSeconds": 5, "timeoutSeconds": 5,
                         "failureThreshold": 120},
        "securityContext": _container_security(),
    }
    resources = _resources(db)
    if resources:
        container["resources"] = resources
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(db, names.statefulset_name(name), "database"),
        "spec": {
            "replicas": replicas,
            "serviceName": names.headless_service_name(name),
            "selector": {"matchLabels": selector_labels(db)},
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels(db, "database")},
                "spec": {
                    "securityContext": _pod_security(),
                    "terminationGracePeriodSeconds": 60,
                    "enableServiceLinks": False,
                    "containers": [container],
                    "volumes": [
                        {"name": names.DATA_VOLUME,
                         "persistentVolumeClaim": {"claimName": names.data_pvc_name(name)}},
                        {"name": "run", "emptyDir": {}},
                        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}},
                    ],
                },
            },
        },
    }


def headless_service(db: SampleDB) -> Obj:
    """The StatefulSet's governing Service: stable DNS for the pod, ready or not."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(db, names.headless_service_name(db_name(db)), "database"),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(db),
            "ports": [{"name": "postgres", "port": names.POSTGRES_PORT, "targetPort": "postgres",
                       "protocol": "TCP"}],
        },
    }


def client_service(db: SampleDB) -> Obj:
    """The published endpoint applications connect to (status.endpoint)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(db, names.client_service_name(db_name(db)), "database"),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(db),
            "ports": [{"name": "postgres", "port": names.POSTGRES_PORT, "targetPort": "postgres",
                       "protocol": "TCP"}],
        },
    }


def init_source(db: SampleDB) -> str | None:
    """A stable description of where the init SQL comes from ("configmap/name/key"), or None."""
    init = db.spec.init
    if init is None:
        return None
    if init.config_map_key_ref is not None:
        return f"configmap/{init.config_map_key_ref.name}/{init.config_map_key_ref.key}"
    if init.secret_key_ref is not None:
        return f"secret/{init.secret_key_ref.name}/{init.secret_key_ref.key}"
    return None


def job(db: SampleDB, *, name: str, component: str, script: str, env: list[Obj] | None = None,
        extra_volumes: list[Obj] | None = None, extra_mounts: list[Obj] | None = None,
        annotations: dict[str, str] | None = None, pod_annotations: dict[str, str] | None = None,
        image: str | None = None) -> Obj:
    """A Job that runs one data-plane script against the database with the postgres image.

    The script's JSON result line goes to the pod's termination message, which the Job's pod
    status shows and the operator reads. Jobs are never updated: a new piece of work is a new name.
    """
    meta = _meta(db, name, component)
    if annotations:
        meta["annotations"] = dict(annotations)
    pod_annotations = {**test_annotations(db), **(pod_annotations or {})}
    container: Obj = {
        "name": component,
        "image": image or image_for(db.spec),
        "command": ["bash", f"{SCRIPTS_MOUNT}/{script}"],
        "env": [*connection_env(db), {"name": "RESULT_FILE", "value": "/dev/termination-log"},
                *(env or [])],
        "volumeMounts": [{"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
                         *(extra_mounts or [])],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": _container_security(),
    }
    pod_meta: Obj = {"labels": labels(db, component)}
    if pod_annotations:
        pod_meta["annotations"] = pod_annotations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "backoffLimit": JOB_BACKOFF_LIMIT,
            "activeDeadlineSeconds": JOB_DEADLINE_SECONDS,
            "template": {
                "metadata": pod_meta,
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": _pod_security(),
                    "enableServiceLinks": False,
                    "containers": [container],
                    "volumes": [
                        {"name": "scripts", "configMap": {"name": scripts_configmap_name(db),
                                                          "defaultMode": 0o555}},
                        *(extra_volumes or []),
                    ],
                },
            },
        },
    }


def init_job(db: SampleDB) -> Obj | None:
    """The one-time init Job running spec.init's SQL, or None when there is no init SQL."""
    init = db.spec.init
    source = init_source(db)
    if init is None or source is None:
        return None
    if init.config_map_key_ref is not None:
        ref = init.config_map_key_ref
        volume: Obj = {"name": "init-sql", "configMap": {"name": ref.name,
                                                         "items": [{"key": ref.key, "path": "init.sql"}]}}
    else:
        assert init.secret_key_ref is not None
        ref = init.secret_key_ref
        volume = {"name": "init-sql", "secret": {"secretName": ref.name,
                                                 "items": [{"key": ref.key, "path": "init.sql"}]}}
    return job(
        db,
        name=names.init_job_name(db_name(db), db.metadata.uid or ""),
        component="init",
        script="init.sh",
        env=[{"name": "INIT_SQL_FILE", "value": INIT_SQL_FILE}, {"name": "WAIT_TIMEOUT", "value": "300"}],
        extra_volumes=[volume],
        extra_mounts=[{"name": "init-sql", "mountPath": INIT_SQL_DIR, "readOnly": True}],
        annotations={INIT_SOURCE_ANNOTATION: source},
    )


def children(inputs: Inputs) -> list[Obj]:
    """Every long-lived child the operator keeps in shape (the Secret and Jobs are handled apart)."""
    db = inputs.db
    return [
        configmap(db),
        scripts_configmap(inputs),
        data_pvc(db),
        headless_service(db),
        client_service(db),
        statefulset(db),
    ]
