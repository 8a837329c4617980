"""One pass of the deletion of a SampleDB as a plan: what decide/lifecycle/lifecycle.py's next step writes.

Pure: no I/O, no clock (the facts carry `now`). The reconciler gathers `DeletionFacts` (the caches,
and the namespace read live only when `namespace_read_needed` says the step depends on it), and
`plan_deletion` returns the whole pass, effects in the order they are applied:

- START_SNAPSHOT: create the attempt's SampleDBBackup (announced SnapshotStarted only when this pass
  made it), then the Deleting status.
- WAIT_SNAPSHOT: the Deleting status.
- RETRY_LATER: the DeletionBlocked status, its Warning Event on the transition only, and a Result
  that comes back when the backoff ends.
- DELETE_DATA / RETAIN_DATA / RELEASE: label the kept volumes and Secret (Retain), delete the other
  live children, announce it, and remove the finalizer LAST.

Invariants: nothing is deleted before the snapshot Succeeded (or the policy needs none); the
finalizer goes only in a pass whose deletes came first; the status is written only when it changes,
with the resourceVersion it was computed from (a newer object's pass decides again), and so is the
finalizer patch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sampledb_operator.decide.backup import backups as bk
from sampledb_operator.decide.effects import Create, Delete, Effect, Emit, Patch, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.lifecycle import lifecycle
from sampledb_operator.decide.lifecycle.lifecycle import Attempt, Decision, DeletionInput, Step
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.conditions import Condition, get_condition, set_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import dump

Child = tuple[str, str]  # (kind, name)
SAMPLEDB = "SampleDB"
PVC = "PersistentVolumeClaim"
DELETION_BLOCKED = "DeletionBlocked"
RETAINED_FROM_UID_ANNOTATION = "sampledb.io/retained-from-uid"
MESSAGE_LIMIT = 1000  # of the DeletionBlocked condition's message
RELEASING = frozenset({Step.DELETE_DATA, Step.RETAIN_DATA, Step.RELEASE})


@dataclass(frozen=True, slots=True)
class DeletionFacts:
    """Everything one pass of the deletion reads."""

    db: SampleDB  # being deleted (deletionTimestamp set), as read
    data_children: tuple[Child, ...]  # the first instance's StatefulSet and data volume
    instance_children: tuple[Child, ...]  # the other instances' StatefulSets and volumes, from the caches
    deletable_children: tuple[Child, ...]  # the long-lived children a deletion removes (not the backups volume)
    live: frozenset[Child]  # of all these, the ones in the caches and not being deleted
    attempts: tuple[Attempt, ...]  # this incarnation's pre-delete snapshot attempts, oldest first
    namespace_terminating: bool  # read live, and only when `namespace_read_needed`
    now: datetime


@dataclass(frozen=True, slots=True)
class DeletionPlan:
    """The pass: the lifecycle step it takes (for the log) and its plan."""

    decision: Decision
    plan: Plan

    @property
    def releases(self) -> bool:
        """The plan ends with the finalizer's removal."""
        return self.decision.step in RELEASING


def finalizing(db: SampleDB) -> bool:
    """The operator's finalizer still holds `db`: the deletion has steps left."""
    return lifecycle.FINALIZER in db.metadata.finalizers


def attempt_of(backup: Obj) -> Attempt:
    """One pre-delete snapshot attempt, as its SampleDBBackup says (attempt 1 when unlabelled)."""
    labels = backup.get("metadata", {}).get("labels") or {}
    status = backup.get("status") or {}
    return Attempt(number=int(labels.get(bk.ATTEMPT_LABEL, "1")), phase=status.get("phase"),
                   completed_at=timestamps.parse(status.get("completedAt")), message=status.get("message") or "")


def snapshot_selector(db: SampleDB) -> dict[str, str]:
    """The labels of this incarnation's (uid's) pre-delete snapshot backups."""
    return {bk.DATABASE_UID_LABEL: db.metadata.uid or "", bk.REASON_LABEL: "pre-delete"}


def _data_present(facts: DeletionFacts) -> bool:
    return any(child in facts.live for child in facts.data_children)


def namespace_read_needed(facts: DeletionFacts) -> bool:
    """The step depends on whether the namespace is terminating: a Snapshot policy with data left."""
    return str(facts.db.spec.deletion_policy) == "Snapshot" and _data_present(facts)


def deletion_input(facts: DeletionFacts) -> DeletionInput:
    """The lifecycle state machine's view of the facts."""
    db = facts.db
    return DeletionInput(
        policy=str(db.spec.deletion_policy),
        skip_requested=db.metadata.annotations.get(lifecycle.SKIP_SNAPSHOT_ANNOTATION) == "true",
        namespace_terminating=namespace_read_needed(facts) and facts.namespace_terminating,
        ever_ran=db.status.has_run,
        data_present=_data_present(facts),
        latest=facts.attempts[-1] if facts.attempts else None,
    )


def plan_deletion(facts: DeletionFacts) -> DeletionPlan:
    """The plan of this pass of the deletion of `facts.db` (empty when the finalizer is gone)."""
    inp = deletion_input(facts)
    decision = lifecycle.deletion_step(inp, facts.now)
    if not finalizing(facts.db):
        return DeletionPlan(decision, Plan())
    step = decision.step
    if step is Step.START_SNAPSHOT:
        effects: tuple[Effect, ...] = (_snapshot(facts.db, decision.attempt), *_status(facts, blocked=None))
        return DeletionPlan(decision, Plan(effects))
    if step is Step.WAIT_SNAPSHOT:
        return DeletionPlan(decision, Plan(_status(facts, blocked=None)))
    if step is Step.RETRY_LATER:
        return DeletionPlan(decision, Plan(_status(facts, blocked=decision.reason),
                                           Result(requeue_after=decision.wait_seconds)))
    if step is Step.DELETE_DATA:
        skipped = (_warning("SnapshotSkipped", decision.reason),) if inp.skip_requested else ()
        effects = (*skipped, *_deletes(facts, keep=frozenset()), Emit(_normal("DataDeleted", decision.reason)))
    elif step is Step.RETAIN_DATA:
        effects = _retain(facts)
    else:  # RELEASE: the data is gone; remove what is left of the rest
        effects = _deletes(facts, keep=frozenset())
    return DeletionPlan(decision, Plan((*effects, _remove_finalizer(facts.db))))


def _snapshot(db: SampleDB, attempt: int) -> Create:
    """The SampleDBBackup of snapshot attempt `attempt` (its name is the attempt's: never a second one)."""
    name = lifecycle.snapshot_backup_name(db.metadata.name, db.metadata.uid or "", attempt)
    return Create(bk.backup_request(db, name, "pre-delete", attempt=attempt),
                  _normal("SnapshotStarted", f"taking the final snapshot (attempt {attempt}): {name}"))


def _deletes(facts: DeletionFacts, keep: frozenset[str]) -> tuple[Delete, ...]:
    """Delete the live children not named in `keep`: the other instances' first, then the database's own
    (the backups volume is never among them: it holds the backups)."""
    return tuple(Delete(kind, name) for kind, name in (*facts.instance_children, *facts.deletable_children)
                 if name not in keep and (kind, name) in facts.live)


def _retain(facts: DeletionFacts) -> tuple[Effect, ...]:
    """Label every instance's data volume and the Secret as retained, delete the rest, and say so."""
    db = facts.db
    data, secret = names.data_pvc_name(db.metadata.name), names.secret_name(db.metadata.name)
    superuser = names.superuser_secret_name(db.metadata.name)
    standbys = {name for kind, name in facts.instance_children if kind == PVC}
    label = {"metadata": {"labels": {lifecycle.RETAINED_FROM_LABEL: db.metadata.name},
                          "annotations": {RETAINED_FROM_UID_ANNOTATION: db.metadata.uid or ""}}}
    labelled = [Patch(PVC, volume, label) for volume in sorted({data} | standbys)]
    secrets = [Patch("Secret", name, label) for name in (secret, superuser)]
    message = (f"PVC {data} and Secrets {secret}, {superuser} are kept, labelled {lifecycle.RETAINED_FROM_LABEL}="
               f"{db.metadata.name}; a new SampleDB of this name adopts them")
    return (*labelled, *secrets,
            *_deletes(facts, keep=frozenset({data, secret, superuser} | standbys)),
            Emit(_normal("DataRetained", message)))


def _remove_finalizer(db: SampleDB) -> Patch:
    remaining = [f for f in db.metadata.finalizers if f != lifecycle.FINALIZER]
    return Patch(SAMPLEDB, db.metadata.name,
                 {"metadata": {"finalizers": remaining, "resourceVersion": db.metadata.resource_version}})


def _status(facts: DeletionFacts, blocked: str | None) -> tuple[Effect, ...]:
    """Phase Deleting, and DeletionBlocked with the failed snapshot's reason: written only when it changes
    (with the resourceVersion it was computed from); a Warning Event when DeletionBlocked turns True."""
    db = facts.db
    gen = db.metadata.generation
    if blocked is None:
        cond = Condition(type=DELETION_BLOCKED, status="False", reason="Snapshotting",
                         message="the final snapshot is in progress", observed_generation=gen)
    else:
        cond = Condition(type=DELETION_BLOCKED, status="True", reason="SnapshotFailed",
                         message=blocked[:MESSAGE_LIMIT], observed_generation=gen)
    old = get_condition(db.status.conditions, DELETION_BLOCKED)
    new = db.status.model_copy(update={"phase": "Deleting",
                                       "conditions": set_condition(db.status.conditions, cond, facts.now)})
    if dump(new) == dump(db.status):
        return ()
    body = {"metadata": {"resourceVersion": db.metadata.resource_version}, "status": dump(new)}
    write = Patch(SAMPLEDB, db.metadata.name, body, subresource="status")
    if blocked is not None and (old is None or old.status != "True"):
        return write, _warning("DeletionBlocked", blocked)
    return (write,)


def _normal(reason: str, message: str) -> EventSpec:
    return EventSpec("Normal", reason, message)


def _warning(reason: str, message: str) -> Emit:
    return Emit(EventSpec("Warning", reason, message))
