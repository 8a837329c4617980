"""spec.scheduling -> the scheduling fields of an instance's pod template, and of the database's Jobs' pods.

Pure. The user's fields pass through as given (Kubernetes checks them when the StatefulSet is applied). The
spread of a database's instances over nodes is a pod anti-affinity term on kubernetes.io/hostname against the
database's instance pods, preferred (weight 100) or required as instanceSpread says, appended to the user's
podAntiAffinity. It is carried by the instances of index 1 and up only: the scheduler honours a term both ways
(a new pod avoids the pods its own terms name, and the pods whose required terms name it; preferred terms score
both ways too), so every pair of instances is kept apart while instance 0's template stays what it was; a
database of one instance, and instance 0 when standbys are added, are never restarted by this.

Invariants: without spec.scheduling, instance 0's pod template is byte for byte the one built before these fields
existed; the operator's own labels and annotations always win over the user's (the CRD refuses their keys too).
"""

from __future__ import annotations

from typing import Any

from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL, db_name
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.scheduling import SchedulingSpec

HOSTNAME_KEY = "kubernetes.io/hostname"
SPREAD_WEIGHT = 100


def spread_term(db: SampleDB) -> Obj:
    """The anti-affinity term that keeps two instances of the database off one node."""
    return {"labelSelector": {"matchLabels": {DATABASE_LABEL: db_name(db), COMPONENT_LABEL: "database"}},
            "topologyKey": HOSTNAME_KEY}


def affinity(db: SampleDB, index: int) -> Obj | None:
    """The pod's affinity: the user's, plus the instances' spread for instance `index` >= 1 (None: no field)."""
    spec = db.spec.scheduling or SchedulingSpec()
    out: dict[str, Any] = {k: v for k, v in (spec.affinity or {}).items()}
    if index >= 1 and spec.instance_spread != "None":
        anti = dict(out.get("podAntiAffinity") or {})
        if spec.instance_spread == "Required":
            key = "requiredDuringSchedulingIgnoredDuringExecution"
            anti[key] = [*(anti.get(key) or []), spread_term(db)]
        else:
            key = "preferredDuringSchedulingIgnoredDuringExecution"
            anti[key] = [*(anti.get(key) or []), {"weight": SPREAD_WEIGHT, "podAffinityTerm": spread_term(db)}]
        out["podAntiAffinity"] = anti
    return out or None


def pod_fields(db: SampleDB, index: int) -> Obj:
    """The pod spec fields spec.scheduling adds to instance `index` ({} when none)."""
    spec = db.spec.scheduling or SchedulingSpec()
    fields = _placement(spec)
    chosen = affinity(db, index)
    if chosen is not None:
        fields["affinity"] = chosen
    if spec.topology_spread_constraints:
        fields["topologySpreadConstraints"] = [dict(c) for c in spec.topology_spread_constraints]
    if spec.priority_class_name:
        fields["priorityClassName"] = spec.priority_class_name
    return fields


def run_beside(job: Obj, labels: dict[str, str]) -> Obj:
    """`job` (changed in place and returned) with its pod required on the node of the pods with `labels` (a Job
    that mounts a database pod's volume or reads its data directory), added to the affinity it has."""
    pod_spec = job["spec"]["template"]["spec"]
    beside = {"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME_KEY}
    pod_spec["affinity"] = {**(pod_spec.get("affinity") or {}),
                            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [beside]}}
    return job


def job_fields(db: SampleDB) -> Obj:
    """The pod spec fields spec.scheduling gives the database's Jobs ({} when none): where they may run (the
    nodeSelector, the tolerations, the affinity's nodeAffinity), so that a database on dedicated or tainted nodes
    gets Jobs that schedule there too. Not the pod (anti-)affinity, topology spread or priority, which are about
    the instances."""
    spec = db.spec.scheduling or SchedulingSpec()
    fields = _placement(spec)
    node_affinity = (spec.affinity or {}).get("nodeAffinity")
    if node_affinity:
        fields["affinity"] = {"nodeAffinity": node_affinity}
    return fields


def _placement(spec: SchedulingSpec) -> Obj:
    """The nodeSelector and tolerations of spec.scheduling, as pod spec fields (none when unset)."""
    fields: Obj = {}
    if spec.node_selector:
        fields["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        fields["tolerations"] = [t.model_dump(by_alias=True, exclude_none=True) for t in spec.tolerations]
    return fields


def pod_labels(db: SampleDB, own: dict[str, str]) -> dict[str, str]:
    """The pod's labels: the user's spec.scheduling.podLabels, then the operator's `own` over them."""
    return {**((db.spec.scheduling.pod_labels if db.spec.scheduling else None) or {}), **own}


def pod_annotations(db: SampleDB, own: dict[str, str]) -> dict[str, str]:
    """The pod's annotations: the user's spec.scheduling.podAnnotations, then the operator's `own` over them."""
    return {**((db.spec.scheduling.pod_annotations if db.spec.scheduling else None) or {}), **own}
