"""An instance's StatefulSet: the PostgreSQL pod template, its container, probes, environment and volumes (and the
exporter beside it, decide/children/exporter.py), and the restricted security contexts every pod the operator builds
uses.

Pure: no I/O. One StatefulSet per instance (decide/replicas/replication.py chooses the instances), each with one pod
on its own data volume; the pod reads postgresql.conf and the scripts from the ConfigMaps and its credentials
from the Secrets of decide/children/desired_config.py: the superuser's (initdb's bootstrap superuser, the standbys'
replication) and the application's (its role, made at initdb by dataplane/app-role.sh).

Invariants:
- The selector (labels.instance_selector) is immutable once created: instance 0 keeps the database's
  original one, the others add their instance label.
- Any change to the pod template restarts the database, so spec.parameters reach it only as the hash of the
  postmaster-context ones (a reload applies the others), and a restart asked for (RESTART_ANNOTATION) only as
  its value; decide/plan.py keeps the bucket label out of the template of a StatefulSet made without it.
- Every pod meets the restricted Pod Security Standard (pod_security, container_security) and has no API
  token (automountServiceAccountToken: False).
- Not owned by the SampleDB (decide/children/desired.py's docstring says why).
"""

from __future__ import annotations

from sampledb_operator.decide.children import archive_config, exporter, pgconfig, scheduling, tls
from sampledb_operator.decide.children.desired_config import (
    DATA_MOUNT,
    DEFAULT_DATABASE,
    SCRIPTS_MOUNT,
    SECRET_PASSWORD_KEY,
    SECRET_USERNAME_KEY,
    scripts_configmap_name,
)
from sampledb_operator.decide.children.desired_inputs import Running
from sampledb_operator.decide.labels import (
    RESTART_ANNOTATION,
    RESTARTED_FOR_ANNOTATION,
    TEMPLATE_GENERATION_ANNOTATION,
    VERSION_ANNOTATION,
    db_name,
    instance_selector,
    meta,
    namespace_of,
    pod_labels,
)
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB, image_for
from sampledb_operator.model.spec_rules import ResourceRequirements

POSTGRES_UID = 999  # the postgres user of the docker library image
PODINFO_DIR = "/etc/sampledb-podinfo"
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"


def container_resources(res: ResourceRequirements | None) -> Obj:
    """A container's `resources` from the spec's requests and limits ({} for none)."""
    out: Obj = {}
    if res is not None and res.requests:
        out["requests"] = {k: str(v) for k, v in sorted(res.requests.items())}
    if res is not None and res.limits:
        out["limits"] = {k: str(v) for k, v in sorted(res.limits.items())}
    return out


def _pg_isready(timeout: int) -> list[str]:
    return ["pg_isready", "-h", "127.0.0.1", "-p", str(names.POSTGRES_PORT), "-t", str(timeout)]


def pod_security() -> Obj:
    """The restricted Pod Security Standard's pod fields: non-root (the image's postgres uid), RuntimeDefault
    seccomp. Every pod the operator builds also sets automountServiceAccountToken: False (no API access)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": POSTGRES_UID,
        "runAsGroup": POSTGRES_UID,
        "fsGroup": POSTGRES_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security(*, read_only_root: bool = True) -> Obj:
    """The restricted Pod Security Standard's container fields; a read-only root filesystem by default
    (every container writes only to its volumes: PGDATA, /var/run/postgresql, /tmp emptyDirs)."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": read_only_root}


INITDB_DIR = "/docker-entrypoint-initdb.d"  # the image's entrypoint runs the *.sh here once, after initdb
APP_ROLE_SCRIPT = "app-role.sh"  # dataplane/: the application's role, sourced by the entrypoint after initdb


def _instance_env(db: SampleDB, index: int, run: Running) -> list[Obj]:
    superuser, app = names.superuser_secret_name(db_name(db)), names.secret_name(db_name(db))

    def secret_env(var: str, secret: str, key: str) -> Obj:
        return {"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}

    return [
        secret_env("POSTGRES_USER", superuser, SECRET_USERNAME_KEY),
        secret_env("POSTGRES_PASSWORD", superuser, SECRET_PASSWORD_KEY),
        secret_env("SAMPLEDB_APP_USER", app, SECRET_USERNAME_KEY),
        secret_env("SAMPLEDB_APP_PASSWORD", app, SECRET_PASSWORD_KEY),
        {"name": "POSTGRES_DB", "value": DEFAULT_DATABASE},
        {"name": "PGDATA", "value": f"{DATA_MOUNT}/{run.data_dir}"},
        {"name": "SAMPLEDB_INSTANCE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "SAMPLEDB_SLOT", "value": names.replication_slot_name(index)},
        {"name": "SAMPLEDB_PRIMARY_HOST", "value": names.service_host(db_name(db), namespace_of(db))},
        {"name": "SAMPLEDB_PRIMARY_PORT", "value": str(names.POSTGRES_PORT)},
        {"name": "SAMPLEDB_PODINFO", "value": f"{PODINFO_DIR}/labels"},
        *archive_config.container_env(db.spec, namespace_of(db), db_name(db)),
    ]


def statefulset(db: SampleDB, replicas: int = 1, running: Running | None = None, index: int = 0) -> Obj:
    """Instance `index`: one PostgreSQL pod on its own data PVC, reading postgresql.conf from the
    database's ConfigMap. `replicas` is 0 while the instance is fenced.

    The container runs instance.sh (dataplane/), which reads the pod's role label (set by the operator,
    seen through a downward-API file), clones or rewinds a standby, and never promotes anything: only the
    operator does, with pg_promote(). spec.parameters reach the server through the config file (a reload
    applies most edits); the pod template carries only a hash of the postmaster-context parameters, so
    only their edits roll it.

    Not owned by the SampleDB: a foreground deletion must not stop the database before its final
    snapshot. The deletion steps delete it."""
    name = db_name(db)
    run = running or Running(db.spec.version, image_for(db.spec))
    container: Obj = {
        "name": "postgres",
        "image": run.image,
        "command": ["bash", f"{SCRIPTS_MOUNT}/instance.sh"],
        "args": ["postgres", "-c", f"config_file={pgconfig.CONFIG_FILE}"],
        "ports": [{"name": "postgres", "containerPort": names.POSTGRES_PORT, "protocol": "TCP"}],
        "env": _instance_env(db, index, run),
        "volumeMounts": [{"name": names.DATA_VOLUME, "mountPath": DATA_MOUNT},
                         {"name": "run", "mountPath": pgconfig.RUN_DIR},
                         {"name": "shm", "mountPath": "/dev/shm"},
                         {"name": "tmp", "mountPath": "/tmp"},
                         {"name": "config", "mountPath": pgconfig.CONFIG_DIR, "readOnly": True},
                         {"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
                         {"name": "initdb", "mountPath": INITDB_DIR, "readOnly": True},
                         {"name": "podinfo", "mountPath": PODINFO_DIR, "readOnly": True}],
        "readinessProbe": {"exec": {"command": _pg_isready(3)}, "periodSeconds": 5, "timeoutSeconds": 5,
                           "failureThreshold": 3},
        "livenessProbe": {"exec": {"command": _pg_isready(5)}, "initialDelaySeconds": 30, "periodSeconds": 10,
                          "timeoutSeconds": 6, "failureThreshold": 6},
        "startupProbe": {"exec": {"command": _pg_isready(3)}, "periodSeconds": 5, "timeoutSeconds": 5,
                         "failureThreshold": 120},
        "securityContext": container_security(),
    }
    resources = container_resources(db.spec.resources)
    if resources:
        container["resources"] = resources
    if db.spec.recovery is not None:
        # recover.sh restores and replays before the server listens: a recovery may take hours (the startup
        # probe's window is 12 h), and its error is the container's termination message.
        container["startupProbe"]["failureThreshold"] = archive_config.RECOVERY_STARTUP_PROBES
        container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    ca_volumes, ca_mounts = archive_config.ca_volumes(db.spec)
    if db.spec.tls.enabled:
        tls_volume, tls_mount = tls.volume(name, db.spec.tls.secret_name)
        ca_volumes, ca_mounts = [*ca_volumes, tls_volume], [*ca_mounts, tls_mount]
        container["env"].append({"name": "SAMPLEDB_TLS_DIR", "value": tls.TLS_DIR})
        if db.spec.tls.required:
            container["env"].append({"name": "SAMPLEDB_TLS_REQUIRED", "value": "1"})
    restart_hash = pgconfig.restart_hash(archive_config.server_parameters(db.spec),
                                         tls_required=db.spec.tls.enabled and db.spec.tls.required)
    container["volumeMounts"] += ca_mounts
    sts_meta = meta(db, names.instance_statefulset_name(name, index), "database", owned=False)
    sts_meta["labels"][names.INSTANCE_LABEL] = str(index)
    sts_meta["annotations"] = {VERSION_ANNOTATION: run.version, **(
        {TEMPLATE_GENERATION_ANNOTATION: str(db.metadata.generation)} if db.metadata.generation else {})}
    template_labels = scheduling.pod_labels(db, {**pod_labels(db), names.INSTANCE_LABEL: str(index)})
    restart = db.metadata.annotations.get(RESTART_ANNOTATION)  # a restart asked for: its value rolls the pods
    sidecar = exporter.container(db)  # with it, `kubectl exec/logs` without -c mean the database's container
    template_annotations = scheduling.pod_annotations(db, {pgconfig.RESTART_ANNOTATION: restart_hash,
                                                           **({RESTARTED_FOR_ANNOTATION: restart} if restart else {}),
                                                           **({DEFAULT_CONTAINER_ANNOTATION: "postgres"} if sidecar
                                                              else {})})
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": sts_meta,
        "spec": {
            "replicas": replicas,
            "serviceName": names.headless_service_name(name),
            "selector": {"matchLabels": instance_selector(db, index)},
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": template_labels, "annotations": template_annotations},
                "spec": {
                    **scheduling.pod_fields(db, index),
                    "securityContext": pod_security(),
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 60,
                    "enableServiceLinks": False,
                    "containers": [container, *([sidecar] if sidecar else [])],
                    "volumes": [
                        {"name": names.DATA_VOLUME,
                         "persistentVolumeClaim": {"claimName": names.instance_data_pvc_name(name, index)}},
                        {"name": "run", "emptyDir": {}},
                        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}},
                        {"name": "tmp", "emptyDir": {}},
                        {"name": "config", "configMap": {
                            "name": names.configmap_name(name),
                            "items": [{"key": pgconfig.CONFIG_KEY, "path": pgconfig.CONFIG_KEY},
                                      {"key": pgconfig.HBA_KEY, "path": pgconfig.HBA_KEY}]}},
                        {"name": "scripts", "configMap": {"name": scripts_configmap_name(db)}},
                        {"name": "initdb", "configMap": {  # optional: only a new data directory reads it
                            "name": scripts_configmap_name(db), "optional": True,
                            "items": [{"key": APP_ROLE_SCRIPT, "path": f"sampledb-{APP_ROLE_SCRIPT}"}]}},
                        {"name": "podinfo", "downwardAPI": {"items": [
                            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                        *ca_volumes,
                        *exporter.volumes(db),
                    ],
                },
            },
        },
    }
