"""Hibernation: every instance of a database stopped, its volumes, Services, Secrets and status kept; and its wake.

Pure: no I/O, no clock. The SampleDB's annotation HIBERNATION_ANNOTATION asks for it ("on"; "off" or no annotation:
awake). The condition Hibernated records where a database is:
- True/Hibernated: asked, and the instances are stopped (their StatefulSets at 0) or stopping;
- False/HibernationPending: asked, but work that needs the server runs (an upgrade, a migration, an initialization,
  a failover, a Job): the database hibernates once it ends (`must_wait` says what it waits for);
- False/Waking: no longer asked; the instances start. Until the primary is ready again no failover is started (the
  replication step reads `waking`): every pod starts at once after a wake, and a standby that is ready first must
  not be promoted over the primary that is still starting;
- False/Awake: the primary is ready again after a wake.
A database that was never hibernated has no such condition. A value other than on/off is refused with a Problem
(the database stays as it is).

Invariants: hibernating never deletes a volume, a claim, a Secret or a Service, and never changes status.primary
(the same primary starts on wake); the instances stop through their StatefulSets (the kubelet stops PostgreSQL with
the pod's grace period: a clean shutdown).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sampledb_operator.model.conditions import Condition, ConditionType, get_condition
from sampledb_operator.model.sampledb import Problem
from sampledb_operator.model.sampledb_status import Phase, SampleDBStatus

HIBERNATION_ANNOTATION = "sampledb.io/hibernation"
ON, OFF = "on", "off"
HIBERNATED, PENDING, WAKING, AWAKE = "Hibernated", "HibernationPending", "Waking", "Awake"
BUSY_PHASES = (Phase.UPGRADING, Phase.MIGRATING, Phase.INITIALIZING, Phase.RESTORING)


def requested(annotations: Mapping[str, str] | None) -> bool | Problem:
    """Whether the annotation asks for hibernation, or a Problem when its value is neither on nor off."""
    value = (annotations or {}).get(HIBERNATION_ANNOTATION)
    if value is None or value.strip().lower() == OFF:
        return False
    if value.strip().lower() == ON:
        return True
    return Problem("InvalidHibernation", f"{HIBERNATION_ANNOTATION}={value!r}: use \"on\" to stop every instance"
                   " (volumes kept) or \"off\" (or no annotation) to run them", "metadata.annotations")


def must_wait(status: SampleDBStatus, active_jobs: Iterable[str]) -> str | None:
    """What a requested hibernation waits for (None: it can stop the instances now). A database that hibernates
    already never waits (its instances are stopped: nothing of it can run)."""
    if hibernating(status):
        return None
    if status.target_primary:
        return f"a failover to {status.target_primary} runs"
    if status.phase in BUSY_PHASES:
        return f"the database is {status.phase}"
    if not status.has_run:
        return "the database has not been ready yet (its first start or initialization)"
    jobs = sorted(active_jobs)
    if jobs:
        return f"Job{'s' if len(jobs) > 1 else ''} {', '.join(jobs)} still run{'' if len(jobs) > 1 else 's'}"
    return None


def _condition(status: SampleDBStatus) -> Condition | None:
    return get_condition(status.conditions, ConditionType.HIBERNATED.value)


def hibernating(status: SampleDBStatus) -> bool:
    """The status records a hibernation (its instances stopped or stopping)."""
    cond = _condition(status)
    return cond is not None and cond.status == "True"


def waking(status: SampleDBStatus) -> bool:
    """The database was hibernated and its primary has not been ready since (no failover then)."""
    cond = _condition(status)
    return cond is not None and (cond.status == "True" or cond.reason == WAKING)


def condition(status: SampleDBStatus, *, asked: bool, wait_for: str | None, primary_ready: bool,
              stopping: int, generation: int | None) -> Condition | None:
    """The Hibernated condition for this pass (None: none to set). `stopping`: pods of the database not gone yet."""
    def cond(ok: bool, reason: str, message: str) -> Condition:
        return Condition(type=ConditionType.HIBERNATED.value, status="True" if ok else "False", reason=reason,
                         message=message, observed_generation=generation)
    if asked and wait_for is None:
        left = f"; {stopping} pod{'s' if stopping != 1 else ''} still stopping" if stopping else ""
        return cond(True, HIBERNATED, (
            f"{HIBERNATION_ANNOTATION}={ON}: every instance is stopped, its volumes kept{left}; remove the"
            f" annotation (kubectl sampledb wake) to start them"))
    if asked:
        return cond(False, PENDING, f"{HIBERNATION_ANNOTATION}={ON}: waiting to stop the instances: {wait_for}")
    if _condition(status) is None:
        return None
    if waking(status):
        if primary_ready:
            return cond(False, AWAKE, "the primary is ready again after hibernation")
        return cond(False, WAKING, "no longer hibernated: the instances are starting (no failover until the primary"
                    " is ready)")
    previous = _condition(status)
    if previous is not None and previous.reason == PENDING:
        return cond(False, AWAKE, "hibernation is no longer asked for")
    return None
