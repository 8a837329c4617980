"""Where a database's instances run (spec.scheduling): Kubernetes' own scheduling fields, passed to every instance's
pod, and how the instances of one database spread over nodes.

Pure data, no I/O. The pass-through fields keep Kubernetes' schema and meaning (affinity and
topologySpreadConstraints are stored as given and checked by the API server when the StatefulSet is applied: a
refusal is the Degraded reason ChildRejected with its words). Pod labels and annotations never override the
operator's own (sampledb.io/ and app.kubernetes.io/ keys are refused). The spread of the instances is an
anti-affinity between the pods of one database on kubernetes.io/hostname, added to the user's affinity; it applies
only with more than one instance, so a database of one instance keeps its pod template as it was.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from sampledb_operator.model.schema import LABEL_MAX, NAME_MAX, SHORT_TEXT_MAX, Rule, SpecModel

RESERVED_KEY_RULE = Rule(
    "self.all(k, !k.startsWith('sampledb.io/') && !k.startsWith('app.kubernetes.io/')"
    " && !k.startsWith('statefulset.kubernetes.io/') && k != 'controller-revision-hash')",
    "keys under sampledb.io/, app.kubernetes.io/ and statefulset.kubernetes.io/ are the operator's and Kubernetes'",
)

PodKeyValues = Annotated[dict[str, Annotated[str, Field(max_length=SHORT_TEXT_MAX)]], Field(max_length=32),
                         RESERVED_KEY_RULE]


class Toleration(SpecModel):
    """A toleration of the instances' pods (Kubernetes' core/v1 Toleration)."""

    key: str | None = Field(default=None, max_length=NAME_MAX, description="The taint key it tolerates.")
    operator: Literal["Exists", "Equal"] | None = Field(default=None, description="Exists or Equal (default).")
    value: str | None = Field(default=None, max_length=LABEL_MAX, description="The taint value (with Equal).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="The taint effect it tolerates; all when omitted.")
    toleration_seconds: int | None = Field(
        default=None, description="With NoExecute: how long the pod stays bound after the taint appears.")


class SchedulingSpec(SpecModel):
    """Kubernetes' scheduling fields for every instance's pod, and the spread of the instances over nodes."""

    node_selector: dict[str, Annotated[str, Field(max_length=LABEL_MAX)]] | None = Field(
        default=None, max_length=32, description="Node labels the instances' nodes must have.")
    tolerations: list[Toleration] | None = Field(
        default=None, max_length=32, description="Taints the instances' pods tolerate.")
    affinity: dict[str, Any] | None = Field(
        default=None,
        description="A core/v1 Affinity for the instances' pods (node, pod and pod anti-affinity); the instances'"
        " spread (instanceSpread) is added to its podAntiAffinity.")
    topology_spread_constraints: list[dict[str, Any]] | None = Field(
        default=None, max_length=8,
        description="core/v1 TopologySpreadConstraints of the instances' pods (e.g. over zones).")
    priority_class_name: str | None = Field(
        default=None, max_length=NAME_MAX, description="The PriorityClass of the instances' pods.")
    pod_labels: PodKeyValues | None = Field(
        default=None, description="Labels added to the instances' pods (not the operator's own keys).")
    pod_annotations: PodKeyValues | None = Field(
        default=None, description="Annotations added to the instances' pods (not the operator's own keys).")
    instance_spread: Literal["Preferred", "Required", "None"] = Field(
        default="Preferred",
        description="With more than one instance, how the instances of this database spread over nodes: Preferred"
        " (default: on different nodes when the scheduler can), Required (never two on one node: an instance waits"
        " Unschedulable when no other node fits) or None.")

