"""The one-off fault of a `sampledb.io/chaos: <fault>` annotation as plans: what a pass does about it.

Pure. The reconciler (reconcilers/chaos.py) reads the request (chaos/faults.annotation_request of
the SampleDB's annotations, which says which faults may be asked for) and whether the operator was
started with the annotation enabled (`--chaos-annotation`, off by default) into `ChaosFacts`;
`plan_chaos` returns the plan before the fault: the annotation's removal, a merge patch conditional
on the SampleDB's resourceVersion, then for a request the operator does not act on its Warning
(ChaosDisabled when the setting is off, whatever the value; ChaosRefused for a fault that cannot be
asked for by annotation); and the fault to inject, when the setting is on and the removal went
through. The fault's own I/O (a delete, an exec into a pod) is the reconciler's; `plan_report` turns
what the injection reported into its Event (ChaosInjected, ChaosSkipped, or a Warning ChaosFailed).

Invariants: with the setting off nothing is ever injected, and each annotation is answered by one
ChaosDisabled Event (the removal is conditional, so a stale pass neither removes nor announces; a
later enabling of the setting never acts on an annotation set while it was off). The annotation is
removed before the fault is injected, and a fault is injected only when this pass removed it: a stale
pass's removal is refused (Conflict), so a fault runs at most once per annotation, even across operator
restarts; nothing waits for recovery.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide.effects import Emit, Patch, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.model.sampledb import SampleDB

ANNOTATION = "sampledb.io/chaos"  # chaos/faults.ANNOTATION (decide/ does not import chaos/)
SAMPLEDB = "SampleDB"
INJECTED, SKIPPED = "injected", "skipped"  # chaos/report.py's outcomes (any other is a failure)
SETTING_FLAG = "--chaos-annotation"  # config.OPTIONS_BY_NAME["chaos_annotation"].flag (decide/ does not import config)
SETTING_ENV = "SAMPLEDB_CHAOS_ANNOTATION"  # and its .env
# the opt-in grants (pods/exec get and create, jobs delete) with the setting on: the component, or its overlay
ENABLED_BY = "manifests/overlays/chaos (or the component manifests/components/chaos)"


@dataclass(frozen=True, slots=True)
class ChaosRequest:
    """What the annotation asks for, as chaos/faults.annotation_request read it."""

    value: str  # the annotation's value
    fault: str | None  # the fault to inject (its name); None: the request is refused
    refusal: str = ""  # why it is refused


@dataclass(frozen=True, slots=True)
class ChaosFacts:
    """Everything the pass reads before the fault."""

    db: SampleDB  # as read (its resourceVersion is the removal's precondition)
    request: ChaosRequest | None  # None: no chaos annotation
    enabled: bool = False  # the operator's --chaos-annotation setting; off: nothing is ever injected


@dataclass(frozen=True, slots=True)
class ChaosPlan:
    """The plan before the fault, and the fault to inject once the plan's removal went through."""

    plan: Plan
    inject: str | None = None


@dataclass(frozen=True, slots=True)
class Injection:
    """What injecting the fault reported (chaos/inject.Injection)."""

    fault: str
    outcome: str  # INJECTED, SKIPPED, or a failure
    target: str = ""
    detail: str = ""


def removal(db: SampleDB) -> Patch:
    """The annotation's removal, refused when the SampleDB changed since it was read."""
    return Patch(SAMPLEDB, db.metadata.name,
                 {"metadata": {"resourceVersion": db.metadata.resource_version, "annotations": {ANNOTATION: None}}})


def disabled_event(value: str) -> EventSpec:
    """The answer to an annotation while the setting is off: what was not done, and how to enable it."""
    return EventSpec("Warning", "ChaosDisabled",
                     f"annotation {ANNOTATION}={value}: not injected: the operator runs without {SETTING_FLAG} "
                     f"({SETTING_ENV}); it is enabled, with the grants it needs, by {ENABLED_BY}")


def plan_chaos(facts: ChaosFacts) -> ChaosPlan:
    """Remove the annotation; then, with the setting off, say so (an Event); else refuse the request
    (an Event), or inject its fault."""
    request = facts.request
    if request is None:
        return ChaosPlan(Plan())
    if not facts.enabled:
        return ChaosPlan(Plan((removal(facts.db), Emit(disabled_event(request.value)))))
    if request.fault is None:
        refused = EventSpec("Warning", "ChaosRefused", f"annotation {ANNOTATION}={request.value}: {request.refusal}")
        return ChaosPlan(Plan((removal(facts.db), Emit(refused))))
    return ChaosPlan(Plan((removal(facts.db),)), inject=request.fault)


def plan_report(injection: Injection) -> Plan:
    """The Event that says what the injection did."""
    what = f"{injection.fault}: {injection.outcome}" + (f" {injection.target}" if injection.target else "") + \
        (f" ({injection.detail})" if injection.detail else "")
    if injection.outcome == INJECTED:
        return Plan((Emit(EventSpec("Normal", "ChaosInjected", what)),))
    if injection.outcome == SKIPPED:
        return Plan((Emit(EventSpec("Normal", "ChaosSkipped", what)),))
    return Plan((Emit(EventSpec("Warning", "ChaosFailed", what)),))
