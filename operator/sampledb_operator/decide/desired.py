"""Spec -> the child objects a SampleDB should have, as plain Kubernetes dicts.

Pure: no I/O, no clock, no randomness (the generated password is an input). Every object carries
the operator's labels (the database label names its SampleDB), so the operator's watches select
exactly its own objects on the server (MANAGED_SELECTOR). Only the fields the operator owns are
set: server-side apply leaves every other field to its manager.

The database's long-lived objects (StatefulSet, volumes, Secret, ConfigMaps, Services) carry NO
ownerReference: the garbage collector must never remove what the final snapshot needs, not even on
a foreground deletion, so the deletion steps (reconcilers/deletion.py) remove them explicitly,
after the policy's work. Only Jobs and other transient objects are owned by the SampleDB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sampledb_operator.decide import archive_config, pgconfig
from sampledb_operator.decide.sharding import BUCKET_LABEL, SHARED_BUCKET, bucket_of
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB, image_for
from sampledb_operator.model.schema import API_VERSION

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "sampledb-operator"
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
DATABASE_LABEL = "sampledb.io/database"
COMPONENT_LABEL = "app.kubernetes.io/component"
DATA_COMPONENT = "storage"  # the component label of the instances' data volumes
INIT_SOURCE_ANNOTATION = "sampledb.io/init-source"
SCRIPTS_MOUNT = "/sampledb/scripts"
DATA_MOUNT = "/var/lib/postgresql/data"
VERSION_ANNOTATION = "sampledb.io/version"
POSTGRES_UID = 999  # the postgres user of the docker library image
DEFAULT_DATABASE = "app"
DEFAULT_USER = "app"
SECRET_USERNAME_KEY = "username"
SECRET_PASSWORD_KEY = "password"  # a key name, not a secret


@dataclass(frozen=True, slots=True)
class Running:
    """What the StatefulSet should run now: during an upgrade, not yet what spec.version says."""

    version: str
    image: str
    data_dir: str = "pgdata"  # under DATA_MOUNT; a major upgrade moves to pgdata-<major>


@dataclass(frozen=True, slots=True)
class Instance:
    """One PostgreSQL instance the database should have: its index and its StatefulSet's replicas (0 while
    it is fenced, 1 otherwise). decide/replication.py chooses them."""

    index: int
    replicas: int = 1


@dataclass(frozen=True, slots=True)
class Inputs:
    """What desired-state functions read besides the SampleDB itself."""

    db: SampleDB
    scripts: dict[str, str]  # data-plane scripts by file name (the scripts ConfigMap's data)
    running: Running | None = None  # None: spec.version with its image, default data directory
    instances: tuple[Instance, ...] = (Instance(0),)
    skip_volumes: frozenset[int] = frozenset()  # instances whose data volume is not applied (never re-created)
    replica_service: bool = False  # the `-ro` Service exists already: kept in shape whatever spec.replicas is

    def run(self) -> Running:
        return self.running or Running(self.db.spec.version, image_for(self.db.spec))


def db_name(db: SampleDB) -> str:
    return db.metadata.name


def namespace_of(db: SampleDB) -> str:
    return db.metadata.namespace or "default"


def labels(db: SampleDB, component: str) -> dict[str, str]:
    """The labels every child carries; the selector labels are a stable subset of them. The bucket label
    (decide/sharding.py: what a sharded replica's caches select on) is on every child, and on the database
    pods of a StatefulSet made with it in its template (decide/plan.py keeps an older template as it is:
    adding it would restart the pods)."""
    return {
        "app.kubernetes.io/name": "postgresql",
        "app.kubernetes.io/instance": db_name(db),
        MANAGED_BY_LABEL: MANAGED_BY,
        COMPONENT_LABEL: component,
        DATABASE_LABEL: db_name(db),
        **bucket_label(namespace_of(db), db_name(db)),
    }


def bucket_label(namespace: str, database: str) -> dict[str, str]:
    """The bucket label of the children of the database namespace/database."""
    return {BUCKET_LABEL: str(bucket_of(namespace, database))}


def bucket_of_child(obj: Obj) -> str:
    """The bucket label value a child should carry: its database label's bucket, the shared bucket for an
    object of no single database (the namespace's scripts ConfigMap)."""
    meta = obj.get("metadata") or {}
    database = (meta.get("labels") or {}).get(DATABASE_LABEL)
    return str(bucket_of(meta.get("namespace") or "", str(database))) if database else SHARED_BUCKET


def pod_labels(db: SampleDB) -> dict[str, str]:
    """The labels of the database pods' template, the bucket label included (decide/plan.py leaves it out of
    the template of a StatefulSet made without it, whose pods it would restart)."""
    return labels(db, "database")


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


def meta(db: SampleDB, name: str, component: str, *, owned: bool = True) -> Obj:
    """Metadata of a child: labels, and the SampleDB as controller owner unless `owned` is False."""
    out: Obj = {"name": name, "namespace": namespace_of(db), "labels": labels(db, component)}
    if owned:
        out["ownerReferences"] = [owner_reference(db)]
    return out


def secret(db: SampleDB, password: str) -> Obj:
    """The credentials Secret. Created once with a generated password and never overwritten."""
    name, ns = db_name(db), namespace_of(db)
    host = names.service_host(name, ns)
    uri = f"postgresql://{DEFAULT_USER}:{password}@{host}:{names.POSTGRES_PORT}/{DEFAULT_DATABASE}"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(db, names.secret_name(name), "credentials", owned=False),
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


def configmap(db: SampleDB, data_dir: str = "pgdata") -> Obj:
    """Connection details for applications and for the operator's Jobs (no secret material), and the
    server's postgresql.conf (decide/pgconfig.py) for the data directory `data_dir`."""
    name, ns = db_name(db), namespace_of(db)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(db, names.configmap_name(name), "connection", owned=False),
        "data": {
            "host": names.service_host(name, ns),
            "port": str(names.POSTGRES_PORT),
            "database": DEFAULT_DATABASE,
            "user": DEFAULT_USER,
            "secretName": names.secret_name(name),
            "endpoint": names.endpoint(name, ns),
            pgconfig.CONFIG_KEY: pgconfig.render(archive_config.server_parameters(db.spec), f"{DATA_MOUNT}/{data_dir}",
                                                 synchronous=synchronous(db)),
            pgconfig.HBA_KEY: pgconfig.HBA,
        },
    }


def synchronous(db: SampleDB) -> bool:
    """Synchronous replication is on: asked for, and there are standbys to wait for."""
    return db.spec.replication.synchronous and db.spec.replicas > 1


SCRIPTS_CONFIGMAP = "sampledb-scripts"  # one per namespace, shared by its databases (scripts_configmap)


def scripts_configmap_name(db: SampleDB) -> str:
    """The scripts ConfigMap a database's pods and Jobs mount: its namespace's shared one."""
    return SCRIPTS_CONFIGMAP


def legacy_scripts_configmap_name(db: SampleDB) -> str:
    """The per-database scripts ConfigMap of operator versions before the shared one (removed with the
    database, or once nothing of it mounts it any more: reconcilers/children.py)."""
    return f"{db_name(db)}-scripts"


def scripts_configmap(inputs: Inputs) -> Obj:
    """The data-plane scripts the pods and Jobs run, mounted at SCRIPTS_MOUNT: ONE ConfigMap per namespace,
    shared by every database in it (the scripts, ~80 KB, are the same for all of them; a copy per database
    cost etcd, every apply, watch event and restart 80 KB per database). It carries no database label and
    no owner: every database's pass keeps it as desired (the same body: a write only on drift), and the
    deletion of the namespace's last database removes it."""
    db = inputs.db
    shared_labels = {**{k: v for k, v in labels(db, "scripts").items()
                        if k not in (DATABASE_LABEL, "app.kubernetes.io/instance")}, BUCKET_LABEL: SHARED_BUCKET}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SCRIPTS_CONFIGMAP, "namespace": namespace_of(db), "labels": shared_labels},
        "data": inputs.scripts,  # the same mapping every pass (its digest is computed once, decide/cache.py)
    }


def is_shared_scripts(obj: Obj) -> bool:
    """A namespace's shared scripts ConfigMap (the operator's: its name, component and manager labels)."""
    meta_ = obj.get("metadata") or {}
    got = meta_.get("labels") or {}
    return (obj.get("kind", "ConfigMap") == "ConfigMap" and meta_.get("name") == SCRIPTS_CONFIGMAP
            and got.get(COMPONENT_LABEL) == "scripts" and got.get(MANAGED_BY_LABEL) == MANAGED_BY)


DATA_DIR_ANNOTATION = "sampledb.io/data-dir"


def _pvc(db: SampleDB, name: str, component: str, *, size: int | str, storage_class: str | None,
         annotations: dict[str, str] | None = None) -> Obj:
    """A ReadWriteOnce volume of the database; never owned (see the module docstring)."""
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": str(size)}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    metadata = meta(db, name, component, owned=False)
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def data_pvc(db: SampleDB, data_dir: str = "pgdata", index: int = 0) -> Obj:
    """Instance `index`'s data volume: not a volumeClaimTemplate, so the operator can expand it. Its
    annotation names the directory the data lives in, so a new SampleDB adopting a retained volume finds it."""
    store = db.spec.storage
    pvc = _pvc(db, names.instance_data_pvc_name(db_name(db), index), DATA_COMPONENT, size=store.size,
               storage_class=store.storage_class_name, annotations={DATA_DIR_ANNOTATION: data_dir})
    pvc["metadata"]["labels"][names.INSTANCE_LABEL] = str(index)
    return pvc


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


PODINFO_DIR = "/etc/sampledb-podinfo"


def instance_selector(db: SampleDB, index: int) -> dict[str, str]:
    """Instance `index`'s StatefulSet selector (immutable once created). Instance 0 keeps the selector the
    database's StatefulSet has always had; the pods of the others carry their instance label, and a
    StatefulSet claims only pods it owns, so the instances never take each other's pods."""
    base = selector_labels(db)
    return base if index == 0 else {**base, names.INSTANCE_LABEL: str(index)}


def _instance_env(db: SampleDB, index: int, run: Running) -> list[Obj]:
    secret_name = names.secret_name(db_name(db))
    return [
        {"name": "POSTGRES_USER", "valueFrom": {"secretKeyRef": {"name": secret_name, "key": SECRET_USERNAME_KEY}}},
        {"name": "POSTGRES_PASSWORD", "valueFrom": {"secretKeyRef": {"name": secret_name,
                                                                       "key": SECRET_PASSWORD_KEY}}},
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
                         {"name": "podinfo", "mountPath": PODINFO_DIR, "readOnly": True}],
        "readinessProbe": {"exec": {"command": _pg_isready(3)}, "periodSeconds": 5, "timeoutSeconds": 5,
                           "failureThreshold": 3},
        "livenessProbe": {"exec": {"command": _pg_isready(5)}, "initialDelaySeconds": 30, "periodSeconds": 10,
                          "timeoutSeconds": 6, "failureThreshold": 6},
        "startupProbe": {"exec": {"command": _pg_isready(3)}, "periodSeconds": 5, "timeoutSeconds": 5,
                         "failureThreshold": 120},
        "securityContext": container_security(),
    }
    resources = _resources(db)
    if resources:
        container["resources"] = resources
    if db.spec.recovery is not None:
        # recover.sh restores and replays before the server listens: a recovery may take hours (the startup
        # probe's window is 12 h), and its error is the container's termination message.
        container["startupProbe"]["failureThreshold"] = archive_config.RECOVERY_STARTUP_PROBES
        container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    ca_volumes, ca_mounts = archive_config.ca_volumes(db.spec)
    restart_hash = pgconfig.restart_hash(archive_config.server_parameters(db.spec))
    container["volumeMounts"] += ca_mounts
    sts_meta = meta(db, names.instance_statefulset_name(name, index), "database", owned=False)
    sts_meta["labels"][names.INSTANCE_LABEL] = str(index)
    sts_meta["annotations"] = {VERSION_ANNOTATION: run.version}
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
                "metadata": {"labels": {**pod_labels(db), names.INSTANCE_LABEL: str(index)},
                             "annotations": {pgconfig.RESTART_ANNOTATION: restart_hash}},
                "spec": {
                    "securityContext": pod_security(),
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 60,
                    "enableServiceLinks": False,
                    "containers": [container],
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
                        {"name": "podinfo", "downwardAPI": {"items": [
                            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                        *ca_volumes,
                    ],
                },
            },
        },
    }


def _service(db: SampleDB, name: str, role: str | None = None, **spec: Any) -> Obj:
    """A Service selecting the database's pods (those of one role, when given) on the postgres port; never owned."""
    selector = selector_labels(db) if role is None else {**selector_labels(db), names.ROLE_LABEL: role}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(db, name, "database", owned=False),
        "spec": {**spec, "selector": selector,
                 "ports": [{"name": "postgres", "port": names.POSTGRES_PORT, "targetPort": "postgres",
                            "protocol": "TCP"}]},
    }


def headless_service(db: SampleDB) -> Obj:
    """The StatefulSet's governing Service: stable DNS for the pod, ready or not."""
    return _service(db, names.headless_service_name(db_name(db)), clusterIP="None", publishNotReadyAddresses=True)


PRIMARY_ROLE = "primary"
REPLICA_ROLE = "replica"


def client_service(db: SampleDB) -> Obj:
    """The published endpoint applications connect to (status.endpoint): the primary, read-write."""
    return _service(db, names.client_service_name(db_name(db)), PRIMARY_ROLE, type="ClusterIP")


def replica_service(db: SampleDB) -> Obj:
    """The hot standbys, read-only: made once the database has standbys (spec.replicas > 1), kept from then on
    (without endpoints after a scale-down to one instance). A single instance gets none: a Service that selects
    nothing would still take a ClusterIP, which the API server allocates one at a time, cluster-wide (the
    allocator's lock is held across an internal write: docs/benchmarks.md, "Decisions")."""
    return _service(db, names.replica_service_name(db_name(db)), REPLICA_ROLE, type="ClusterIP")


def backup_pvc(db: SampleDB) -> Obj:
    """The volume backups and snapshots are written to; it outlives the SampleDB."""
    store = db.spec.backup.storage
    return _pvc(db, names.backup_pvc_name(db_name(db)), "backups", size=store.size or db.spec.storage.size,
                storage_class=store.storage_class_name)


def children(inputs: Inputs) -> list[Obj]:
    """Every long-lived child the operator keeps in shape (the Secret and Jobs are handled apart): per
    instance a data volume and a StatefulSet (decide/replication.py chooses the instances)."""
    db = inputs.db
    run = inputs.run()
    out = [
        configmap(db, run.data_dir),
        scripts_configmap(inputs),
        backup_pvc(db),
        headless_service(db),
        client_service(db),
    ]
    if db.spec.replicas > 1 or inputs.replica_service:
        out.append(replica_service(db))
    for inst in inputs.instances:
        if inst.index not in inputs.skip_volumes:
            out.append(data_pvc(db, run.data_dir, inst.index))
        out.append(statefulset(db, inst.replicas, run, inst.index))
    return out
