"""The labels, annotations and metadata of the operator's objects, and the selectors built from them.

Pure: no I/O. Every child carries labels(db, component): the manager label (so the operator's watches select
exactly its own objects on the server: MANAGED_SELECTOR), the component label, the database label naming its
SampleDB, and the bucket label of its database (what a sharded replica's caches select on). The namespace's
shared scripts ConfigMap drops the labels naming one database (decide/children/desired_config.py). BUCKET_LABEL and
SHARED_BUCKET belong to decide/sharding.py, which defines the buckets; they are re-exported here beside the
other label names.

Invariants:
- The selector labels (selector_labels, instance_selector) are a stable subset of the pod labels: a
  StatefulSet's selector is immutable once created, so they never change.
- meta() makes the SampleDB the controller owner unless told not to (owned=False): the database's
  long-lived objects are never owned (decide/children/desired.py's docstring says why).
- The label keys and values here are the contract with the objects already on the server: renaming one would
  orphan what carries the old one.
"""

from __future__ import annotations

from sampledb_operator.decide.sharding import BUCKET_LABEL, SHARED_BUCKET, bucket_of
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION

__all__ = ["BUCKET_LABEL", "COMPONENT_LABEL", "DATABASE_LABEL", "DATA_COMPONENT", "DATA_DIR_ANNOTATION",
           "INIT_SOURCE_ANNOTATION", "MANAGED_BY", "MANAGED_BY_LABEL", "MANAGED_SELECTOR", "POOLER_COMPONENT",
           "PRIMARY_ROLE", "REPLICA_ROLE", "SHARED_BUCKET", "TEMPLATE_GENERATION_ANNOTATION", "VERSION_ANNOTATION",
           "bucket_label", "bucket_of_child", "db_name",
           "instance_selector", "labels", "meta", "namespace_of", "owner_reference", "pod_labels",
           "selector_labels"]

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "sampledb-operator"
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
DATABASE_LABEL = "sampledb.io/database"
COMPONENT_LABEL = "app.kubernetes.io/component"
DATA_COMPONENT = "storage"  # the component label of the instances' data volumes
POOLER_COMPONENT = "pooler"  # the component label of the pooler's children (decide/children/pooler.py)
INIT_SOURCE_ANNOTATION = "sampledb.io/init-source"
VERSION_ANNOTATION = "sampledb.io/version"
DATA_DIR_ANNOTATION = "sampledb.io/data-dir"
# On the SampleDB: any new value restarts every instance (kubectl sampledb restart). It is copied onto the instances'
# pod template as RESTARTED_FOR_ANNOTATION (decide/children/desired_statefulset.py), so the StatefulSets roll their pods
# as for a restart setting; without it the template has no such key.
RESTART_ANNOTATION = "sampledb.io/restart"
RESTARTED_FOR_ANNOTATION = "sampledb.io/restarted-for"
# On each instance's StatefulSet: the SampleDB generation its pod template was last written for. A template
# change at that generation, no restart asked, is the operator's own (a new version's):
# decide/replicas/operator_rollout.py
TEMPLATE_GENERATION_ANNOTATION = "sampledb.io/template-generation"
# the values of names.ROLE_LABEL on the database pods, which the client and replica Services select on
PRIMARY_ROLE = "primary"
REPLICA_ROLE = "replica"


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


def instance_selector(db: SampleDB, index: int) -> dict[str, str]:
    """Instance `index`'s StatefulSet selector (immutable once created). Instance 0 keeps the selector the
    database's StatefulSet has always had; the pods of the others carry their instance label, and a
    StatefulSet claims only pods it owns, so the instances never take each other's pods."""
    base = selector_labels(db)
    return base if index == 0 else {**base, names.INSTANCE_LABEL: str(index)}


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
