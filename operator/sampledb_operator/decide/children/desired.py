"""Spec -> the child objects a SampleDB should have, as plain Kubernetes dicts.

Pure: no I/O, no clock, no randomness (the generated password is an input). Every object carries
the operator's labels (decide/labels.py; the database label names its SampleDB), so the operator's watches
select exactly its own objects on the server (MANAGED_SELECTOR). Only the fields the operator owns are
set: server-side apply leaves every other field to its manager.

The database's long-lived objects (StatefulSet, volumes, Secret, ConfigMaps, Services) carry NO
ownerReference: the garbage collector must never remove what the final snapshot needs, not even on
a foreground deletion, so the deletion steps (reconcilers/deletion.py) remove them explicitly,
after the policy's work. Only Jobs, other transient objects and the PodDisruptionBudgets (which no
deletion step needs: the garbage collector may remove them first) are owned by the SampleDB.

This module assembles the children (children()) and builds the volumes, Services and the PodDisruptionBudgets
itself; the bigger kinds have a module each: decide/children/desired_config.py the Secret and ConfigMaps,
decide/children/desired_statefulset.py the instances' StatefulSets; decide/children/desired_inputs.py holds what they
read besides the SampleDB. The builders and their inputs are re-exported here (__all__), so callers name every builder
desired.X; the labels are not: they come from decide/labels.py.
"""

from __future__ import annotations

from typing import Any

from sampledb_operator.decide.children import pooler
from sampledb_operator.decide.children.desired_config import (
    DATA_MOUNT,
    DEFAULT_DATABASE,
    DEFAULT_USER,
    SCRIPTS_CONFIGMAP,
    SCRIPTS_MOUNT,
    SECRET_PASSWORD_KEY,
    SECRET_USERNAME_KEY,
    configmap,
    is_shared_scripts,
    legacy_scripts_configmap_name,
    scripts_configmap,
    scripts_configmap_name,
    secret,
    separate_superuser,
    superuser_secret,
    synchronous,
)
from sampledb_operator.decide.children.desired_inputs import Inputs, Instance, Running
from sampledb_operator.decide.children.desired_statefulset import (
    PODINFO_DIR,
    POSTGRES_UID,
    container_security,
    pod_security,
    statefulset,
)
from sampledb_operator.decide.labels import (
    DATA_COMPONENT,
    DATA_DIR_ANNOTATION,
    PRIMARY_ROLE,
    REPLICA_ROLE,
    db_name,
    meta,
    selector_labels,
)
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

__all__ = ["DATA_MOUNT", "DEFAULT_DATABASE", "DEFAULT_USER", "PODINFO_DIR", "POSTGRES_UID", "SCRIPTS_CONFIGMAP",
           "SCRIPTS_MOUNT", "SECRET_PASSWORD_KEY", "SECRET_USERNAME_KEY", "Inputs", "Instance", "Running",
           "backup_pvc", "children", "client_service", "configmap", "container_security", "data_pvc",
           "disruption_budget", "headless_service", "is_shared_scripts", "legacy_scripts_configmap_name",
           "pod_security", "primary_disruption_budget",
           "replica_service", "scripts_configmap", "scripts_configmap_name", "secret",
           "separate_superuser", "statefulset", "superuser_secret", "synchronous"]


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


def backup_pvc(db: SampleDB) -> Obj:
    """The volume backups and snapshots are written to; it outlives the SampleDB."""
    store = db.spec.backup.storage
    return _pvc(db, names.backup_pvc_name(db_name(db)), "backups", size=store.size or db.spec.storage.size,
                storage_class=store.storage_class_name)


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


def client_service(db: SampleDB) -> Obj:
    """The published endpoint applications connect to (status.endpoint): the primary, read-write."""
    return _service(db, names.client_service_name(db_name(db)), PRIMARY_ROLE, type="ClusterIP")


def replica_service(db: SampleDB) -> Obj:
    """The hot standbys, read-only: made once the database has standbys (spec.replicas > 1), kept from then on
    (without endpoints after a scale-down to one instance). A single instance gets none: a Service that selects
    nothing would still take a ClusterIP, which the API server allocates one at a time, cluster-wide (the
    allocator's lock is held across an internal write: docs/benchmarks.md, "Decisions")."""
    return _service(db, names.replica_service_name(db_name(db)), REPLICA_ROLE, type="ClusterIP")


UNAVAILABLE_STANDBYS = 1  # the standbys a voluntary disruption may take at once (the standbys' budget)


def _budget(db: SampleDB, name: str, role: str, min_available: int) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(db, name, "database"),
        "spec": {"minAvailable": min_available,
                 "selector": {"matchLabels": {**selector_labels(db), names.ROLE_LABEL: role}},
                 # a pod that is not ready serves nothing a budget protects: a drain never waits on it
                 "unhealthyPodEvictionPolicy": "AlwaysAllow"},
    }


def disruption_budget(db: SampleDB) -> Obj:
    """The standbys' PodDisruptionBudget (a database of more than one instance): over the pods whose role label is
    replica, it lets a voluntary disruption through the eviction API (a node drain) take at most one standby at a
    time (`minAvailable: spec.replicas - 2`, the standbys but one). With primary_disruption_budget, which never
    lets the primary go, a drain never takes the primary and its last ready standby together: the primary leaves a
    cordoned node by a switchover first (decide/replicas/maintenance.py), and then counts as a standby.

    Counts, not `maxUnavailable: 1`: the disruption controller measures maxUnavailable (and percentages) against
    the scale of the controllers it finds through the pods that exist, and each instance is a StatefulSet of its
    own, so an instance without a pod (fenced during a failover: 0 replicas; evicted and not made again yet)
    would drop out of the count and let another instance go. A count of healthy pods holds whatever the pods'
    owners. The role label moves with the election (decide/replicas/replication.py), and so does the budget
    that counts a pod; a pod is selected by one budget only (the eviction API refuses a pod that two select).
    Owned by the SampleDB: the garbage collector removes both budgets with the database. A single instance gets
    none (children()): a budget that kept it up would block every drain of its node for good. Only the eviction
    API heeds them: the operator's own pod deletions (a fence, a rollout) go through."""
    return _budget(db, names.disruption_budget_name(db_name(db)), REPLICA_ROLE,
                   db.spec.replicas - 1 - UNAVAILABLE_STANDBYS)


def primary_disruption_budget(db: SampleDB) -> Obj:
    """The primary's PodDisruptionBudget (a database of more than one instance): `minAvailable: 1` over the pod
    whose role label is primary, so the eviction API never stops a ready primary; a drain of its node waits
    until the switchover of decide/replicas/maintenance.py has made it a standby. A primary that is not ready
    can be evicted (unhealthyPodEvictionPolicy AlwaysAllow): it serves nothing, and a failover replaces it."""
    return _budget(db, names.primary_disruption_budget_name(db_name(db)), PRIMARY_ROLE, 1)


def children(inputs: Inputs) -> list[Obj]:
    """Every long-lived child the operator keeps in shape (the Secret and Jobs are handled apart): per
    instance a data volume and a StatefulSet (decide/replicas/replication.py chooses the instances), and with more than
    one instance the two PodDisruptionBudgets (gone again once spec.replicas is 1: decide/plan.removals)."""
    db = inputs.db
    run = inputs.run()
    out = [
        configmap(db, run.data_dir, inputs.ca_cert),
        scripts_configmap(inputs),
        backup_pvc(db),
        headless_service(db),
        client_service(db),
    ]
    if db.spec.replicas > 1 or inputs.replica_service:
        out.append(replica_service(db))
    if db.spec.replicas > 1:
        out += [disruption_budget(db), primary_disruption_budget(db)]
    for inst in inputs.instances:
        if inst.index not in inputs.skip_volumes:
            out.append(data_pvc(db, run.data_dir, inst.index))
        out.append(statefulset(db, inst.replicas, run, inst.index))
    out += pooler.children(db, ca=db.spec.tls.enabled and bool(inputs.ca_cert),  # none without spec.pooler
                           certificate=inputs.served_certificate)
    return out
