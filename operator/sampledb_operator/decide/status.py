"""Observed children -> the SampleDB's status: phase, conditions, version, endpoint.

Pure. The status is a function of what the caches hold (plus the spec problems and blockers the
reconciler found), so a restart recomputes the same status: nothing is remembered elsewhere.
Conditions follow metav1.Condition semantics through model.conditions.set_condition (the
transition time moves only when a condition's status changes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from sampledb_operator.decide.children.archive_config import destination
from sampledb_operator.decide.replicas.rollout import rolled_out
from sampledb_operator.model import names
from sampledb_operator.model.archive import ArchiveStatus
from sampledb_operator.model.conditions import Condition, ConditionType, get_condition, set_condition
from sampledb_operator.model.databases import DatabaseStatus
from sampledb_operator.model.objects import Obj, condition_true
from sampledb_operator.model.roles import RoleStatus
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.sampledb_status import (
    AppliedMigration,
    BackupRecord,
    InstanceStatus,
    Phase,
    PoolerPause,
    SampleDBStatus,
)
from sampledb_operator.model.schema import dump

CLEARABLE = ("targetPrimary", "poolerPause")  # status fields that go away (a merge patch removes them with null)


@dataclass(frozen=True, slots=True)
class ReplicationRecord:
    """The election's record and each instance's state (decide/replicas/replication.py, reconcilers/replication.py)."""

    primary: str
    target: str | None
    ready_instances: str
    instances: tuple[InstanceStatus, ...]
    pooler_pause: PoolerPause | None = None  # status.poolerPause (decide/replicas/pooler_pause.py)


@dataclass(frozen=True, slots=True)
class Observed:
    """What the reconciler saw of one SampleDB's world, from the caches and a few reads."""

    statefulset: Obj | None = None
    pod: Obj | None = None  # the primary's pod (database_ready reads it with the StatefulSet)
    pvc: Obj | None = None
    init_job: Obj | None = None
    secret_exists: bool = False
    problems: tuple[Problem, ...] = ()
    blockers: tuple[Problem, ...] = ()  # e.g. the init SQL's ConfigMap is missing
    degraded: tuple[Problem, ...] = ()  # e.g. the storage class cannot expand the volume
    init_changed: bool = False  # spec.init differs from what the init Job ran
    extra_conditions: tuple[Condition, ...] = field(default_factory=tuple)  # e.g. Upgrading, Migrated
    busy_phase: Phase | None = None  # Upgrading or Migrating while that work runs on a ready database
    applied_migrations: tuple[AppliedMigration, ...] | None = None  # replaces status.appliedMigrations
    applied_parameters: str | None = None  # replaces status.appliedParameters when set
    running_version: str | None = None  # the version the StatefulSet runs (default: spec.version)
    last_backup: BackupRecord | None = None  # replaces status.lastBackup when set
    last_snapshot: BackupRecord | None = None  # replaces status.lastSnapshot when set
    archive: ArchiveStatus | None = None  # replaces status.archive when set (decide/backup/archive.py)
    replication: ReplicationRecord | None = None  # replaces status.primary/targetPrimary/instances when set
    hibernated: Condition | None = None  # Hibernated=True: the instances are stopped (decide/replicas/hibernation.py)
    roles: tuple[RoleStatus, ...] | None = None  # replaces status.roles when set (reconcilers/roles.py)
    roles_applied: str | None = None  # replaces status.rolesApplied when set
    databases: tuple[DatabaseStatus, ...] | None = None  # replaces status.databases when set (reconcilers/databases.py)
    databases_applied: str | None = None  # replaces status.databasesApplied when set
    pooler_applied: str | None = None  # replaces status.poolerApplied when set (reconcilers/pooler.py)
    monitoring_applied: str | None = None  # replaces status.monitoringApplied (reconcilers/monitoring.py)
    app_role_applied: str | None = None  # replaces status.appRoleApplied (reconcilers/app_role.py)


# The records other steps keep: Observed's field of each name replaces the status's when set.
RECORDS = ("last_backup", "last_snapshot", "archive", "roles", "roles_applied", "databases", "databases_applied",
           "pooler_applied", "monitoring_applied", "app_role_applied", "applied_migrations", "applied_parameters")


@dataclass(frozen=True, slots=True)
class JobState:
    """A Job's outcome as the operator reads it."""

    finished: bool
    succeeded: bool
    reason: str
    message: str


def job_state(job: Obj | None) -> JobState | None:
    """Complete / Failed from the Job's conditions (the Job controller's verdict), else running."""
    if job is None:
        return None
    for cond in job.get("status", {}).get("conditions", []) or []:
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            return JobState(True, True, "Complete", cond.get("message", ""))
        if cond.get("type") == "Failed":
            return JobState(True, False, cond.get("reason") or "Failed", cond.get("message") or "the Job failed")
    return JobState(False, False, "Running", "")


def statefulset_ready(sts: Obj | None) -> bool:
    """The database pod is Ready and runs the current template (the rollout is finished)."""
    if sts is None:
        return False
    spec, status = sts.get("spec", {}), sts.get("status", {})
    want = spec.get("replicas", 1)
    return bool(want > 0 and rolled_out(sts) and status.get("readyReplicas", 0) >= want
                and status.get("updatedReplicas", 0) >= want)


REVISION_LABEL = "controller-revision-hash"  # the StatefulSet controller's label: the revision a pod was made from


def database_ready(sts: Obj | None, pod: Obj | None) -> bool:
    """The database pod is Ready and runs the current template: statefulset_ready, or, before the StatefulSet
    controller has counted it, the StatefulSet's one pod is Ready, not being deleted, owned by it and made from
    its update revision while no rollout is under way (the controller has seen the current generation and its
    current and update revisions are the same).

    The kubelet's report of the pod reaches the operator before the controller's count of it, so the steps
    that wait for a ready database (the init Job) start that much sooner, and the status goes from waiting to
    Initializing in one write (not readyInstances 1/1 first). During a rollout the revisions differ: then only
    the counters say it is done, as statefulset_ready always did."""
    if statefulset_ready(sts):
        return True
    if sts is None or pod is None:
        return False
    spec, status, meta = sts.get("spec") or {}, sts.get("status") or {}, sts.get("metadata") or {}
    pod_meta = pod.get("metadata") or {}
    revision = status.get("updateRevision")
    owned = any(ref.get("uid") == meta.get("uid") and ref.get("controller")
                for ref in pod_meta.get("ownerReferences") or [])
    return bool(
        spec.get("replicas", 1) == 1
        and revision and rolled_out(sts)
        and (pod_meta.get("labels") or {}).get(REVISION_LABEL) == revision
        and owned and pod_meta.get("deletionTimestamp") is None
        and condition_true(pod, "Ready")
    )


def _cond(type_: str, ok: bool, reason: str, message: str, generation: int | None) -> Condition:
    return Condition(type=type_, status="True" if ok else "False", reason=reason, message=message,
                     observed_generation=generation)


DONE_REASONS = ("InitSucceeded", "InitChangedNotRerun", "Restored", "Recovered")


def init_done(status: SampleDBStatus) -> bool:
    """Initialized says the init SQL ran (or the restore did): its Job is never run again."""
    cond = get_condition(status.conditions, ConditionType.INITIALIZED)
    return cond is not None and cond.status == "True" and cond.reason in DONE_REASONS


def _initialized(db: SampleDB, obs: Observed, db_ready: bool) -> tuple[bool, str, str]:
    """Initialized: the init SQL ran, or the database was restored from a backup (then no init SQL)."""
    restore = db.spec.restore
    if restore is None and db.spec.init is None and db.spec.recovery is None:
        return True, "NoInitSQL", "no init SQL to run"
    prev = get_condition(db.status.conditions, ConditionType.INITIALIZED)
    if prev is not None and init_done(db.status) and obs.init_job is None:
        return True, prev.reason, prev.message  # done once; the Job may have been removed since
    if db.spec.recovery is not None:
        return recovery_state(db, obs.pod, db_ready)
    for b in obs.blockers:
        return False, b.reason, b.message
    state = job_state(obs.init_job)
    what = f"the restore from SampleDBBackup {restore.backup_name}" if restore else "the init SQL"
    if state is None:
        if not db_ready:
            return False, "WaitingForDatabase", f"{what} runs once the database is ready"
        return False, "RestorePending" if restore else "InitPending", f"the Job for {what} is being created"
    if not state.finished:
        return False, "Restoring" if restore else "InitRunning", f"{what} is running"
    if state.succeeded:
        if restore:
            return True, "Restored", f"restored from SampleDBBackup {restore.backup_name}"
        if obs.init_changed:
            return True, "InitChangedNotRerun", (
                "spec.init changed after the init SQL ran; it is not run again against live data")
        return True, "InitSucceeded", "the init SQL ran successfully"
    failed = "RestoreFailed" if restore else "InitFailed"
    return False, failed, f"the {'restore' if restore else 'init'} Job failed: {state.reason}: {state.message}"


def recovery_target(db: SampleDB) -> str:
    """spec.recovery's source and target, in words."""
    rec = db.spec.recovery
    assert rec is not None
    where = f"{destination(rec.object_store, db.metadata.namespace or 'default', rec.database)}"
    if rec.target_time is not None:
        return f"{where} to {rec.target_time.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    if rec.target_name is not None:
        return f"{where} to restore point {rec.target_name}"
    if rec.target_lsn is not None:
        return f"{where} to LSN {rec.target_lsn}"
    return f"{where} to the end of its archive"


def recovery_state(db: SampleDB, pod: Obj | None, db_ready: bool) -> tuple[bool, str, str]:
    """Initialized of a database recovered from an object store: the primary's container restores the base
    backup and replays WAL before it accepts connections (dataplane/recover.sh), so its first readiness is the
    recovery's end; a container that ended with an error says why in its termination message."""
    what = recovery_target(db)
    if db_ready:
        return True, "Recovered", f"recovered from {what}"
    failure = last_failure(pod)
    if failure:
        return False, "RecoveryFailed", f"the recovery from {what} failed: {failure}"
    return False, "Recovering", f"recovering from {what}"


def last_failure(pod: Obj | None) -> str | None:
    """The database container's last error exit, with its termination message (the last log lines when the
    script wrote none), or None."""
    for cs in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != "postgres":
            continue
        for state in ((cs.get("state") or {}).get("terminated"), (cs.get("lastState") or {}).get("terminated")):
            if state and state.get("exitCode"):
                text = str(state.get("message") or state.get("reason") or "").strip()
                return f"exit code {state.get('exitCode')}: {_last_lines(text)}"
    return None


def _last_lines(text: str, limit: int = 600) -> str:
    """The end of a termination message: its last JSON result's message, else its last lines."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if line.startswith("{") and '"message"' in line:
            try:
                message = json.loads(line).get("message")
            except ValueError:
                break
            if message:
                return str(message)[:limit]
    return " | ".join(lines[-3:])[-limit:]


def compute(db: SampleDB, obs: Observed, now: datetime) -> SampleDBStatus:
    """The status the SampleDB should show; conditions keep their transition times when unchanged."""
    gen = db.metadata.generation
    old = db.status
    conds = list(old.conditions)
    name, ns = db.metadata.name, db.metadata.namespace or "default"

    def put(c: Condition) -> None:
        nonlocal conds
        conds = set_condition(conds, c, now)

    if obs.problems:
        p = obs.problems[0]
        msg = "; ".join(f"{q.field}: {q.message}" for q in obs.problems)
        put(_cond(ConditionType.SPEC_VALID, False, p.reason, msg, gen))
        put(_cond(ConditionType.READY, False, "InvalidSpec", msg, gen))
        put(_cond(ConditionType.PROGRESSING, False, "InvalidSpec", "fix the spec to continue", gen))
        return _status(old, conds, Phase.FAILED, gen, name=name, ns=ns)
    put(_cond(ConditionType.SPEC_VALID, True, "Valid", "the spec is valid", gen))

    if db.spec.paused:
        put(_cond(ConditionType.PROGRESSING, False, "Paused",
                  "spec.paused is true: the operator changes nothing", gen))
        return _status(old, conds, Phase.PAUSED, gen, name=name, ns=ns)

    if obs.hibernated is not None:
        put(obs.hibernated)
        put(_cond(ConditionType.READY, False, "Hibernated", obs.hibernated.message, gen))
        put(_cond(ConditionType.PROGRESSING, False, "Hibernated", obs.hibernated.message, gen))
        # no instance runs: none is listed (nor reported unready by the metrics and their alert)
        return _status(old, conds, Phase.HIBERNATED, gen, name=name, ns=ns).model_copy(update={
            "instances": [], "ready_instances": f"0/{db.spec.replicas}"})

    db_ready = database_ready(obs.statefulset, obs.pod)
    for extra in obs.extra_conditions:
        put(extra)
    init_ok, init_reason, init_msg = _initialized(db, obs, db_ready)
    put(_cond(ConditionType.INITIALIZED, init_ok, init_reason, init_msg, gen))

    degraded = list(obs.degraded)
    if init_reason in ("InitFailed", "RestoreFailed", "RecoveryFailed"):
        degraded.append(Problem(init_reason, init_msg, "spec.restore" if db.spec.restore else (
            "spec.recovery" if db.spec.recovery else "spec.init")))
    if degraded:
        put(_cond(ConditionType.DEGRADED, True, degraded[0].reason,
                  "; ".join(d.message for d in degraded), gen))
    else:
        put(_cond(ConditionType.DEGRADED, False, "AsExpected", "no problems found", gen))

    ready = db_ready and init_ok
    if ready:
        put(_cond(ConditionType.READY, True, "DatabaseReady", "the database accepts connections", gen))
        put(_cond(ConditionType.PROGRESSING, False, "Reconciled", "the database matches its spec", gen))
        phase = Phase.DEGRADED if degraded else (obs.busy_phase or Phase.RUNNING)
    else:
        if not db_ready and init_reason == "Recovering" and obs.statefulset is not None:
            reason, msg = init_reason, init_msg
            phase = Phase.RESTORING
        elif not db_ready:
            reason, msg = _not_ready_reason(obs)
            phase = Phase.DEGRADED if degraded else Phase.PROVISIONING
        else:
            reason, msg = init_reason, init_msg
            phase = Phase.DEGRADED if degraded else (Phase.RESTORING if db.spec.restore else Phase.INITIALIZING)
        put(_cond(ConditionType.READY, False, reason, msg, gen))
        put(_cond(ConditionType.PROGRESSING, not degraded, reason if not degraded else degraded[0].reason,
                  msg, gen))
    return _with_records(_status(old, conds, phase, gen, name=name, ns=ns), db, obs, db_ready)


def _with_records(status: SampleDBStatus, db: SampleDB, obs: Observed, db_ready: bool) -> SampleDBStatus:
    """The version that runs, and the records other steps keep (backups, migrations), when they changed."""
    update: dict[str, object] = {}
    if db_ready:
        update["current_version"] = obs.running_version or db.spec.version
    for record in RECORDS:  # each replaces its status field when the step that keeps it set it
        value = getattr(obs, record)
        if value is not None:
            update[record] = list(value) if isinstance(value, tuple) else value
    if obs.replication is not None:
        update.update(primary=obs.replication.primary, target_primary=obs.replication.target,
                      ready_instances=obs.replication.ready_instances, instances=list(obs.replication.instances),
                      pooler_pause=obs.replication.pooler_pause)
    return status.model_copy(update=update) if update else status


def _not_ready_reason(obs: Observed) -> tuple[str, str]:
    """Why the database pod is not ready yet, as precisely as the children tell."""
    pvc = obs.pvc
    if pvc is not None and (pvc.get("status") or {}).get("phase") != "Bound":
        name = pvc.get("metadata", {}).get("name", "")
        cls = pvc.get("spec", {}).get("storageClassName") or "the default StorageClass"
        return "VolumeNotBound", f"waiting for PVC {name} to be bound (storage class {cls})"
    if obs.statefulset is None:
        return "Provisioning", "creating the database's StatefulSet"
    return "DatabaseNotReady", "waiting for the database pod to be ready"


def _status(old: SampleDBStatus, conds: list[Condition], phase: Phase, gen: int | None, *, name: str,
            ns: str) -> SampleDBStatus:
    return old.model_copy(update={
        "phase": phase.value,
        "conditions": conds,
        "observed_generation": gen,
        "endpoint": names.endpoint(name, ns),
        "secret_name": names.secret_name(name),
    })


def with_reconcile_error(db: SampleDB, message: str, now: datetime, reason: str = "ReconcileError") -> SampleDBStatus:
    """The status after passes that keep failing before they could compute it: the last status with Degraded=True and
    Progressing=False, reason `reason` (ReconcileError, or the API server's refusal named:
    decide/lifecycle/stuck.refusal_reason), and phase Degraded. The next pass that gets through computes the whole
    status again, which clears them."""
    gen = db.metadata.generation
    conds = set_condition(db.status.conditions, _cond(ConditionType.DEGRADED, True, reason, message, gen), now)
    conds = set_condition(conds, _cond(ConditionType.PROGRESSING, False, reason, message, gen), now)
    return db.status.model_copy(update={"phase": Phase.DEGRADED.value, "conditions": conds})


def status_changed(old: SampleDBStatus, new: SampleDBStatus) -> bool:
    """True when writing `new` would change what the API server holds."""
    return dump(old) != dump(new)


# Progress reports no step reads: the phase, and why Ready/Progressing are what they are (the steps read
# whether Ready is True, never its reason or message).
_PROGRESS_CONDITIONS = ("Ready", "Progressing")
_PROGRESS_FIELDS = ("reason", "message", "lastTransitionTime")


def steps_may_read_the_change(old: SampleDBStatus, new: SampleDBStatus) -> bool:
    """Whether a step of the next pass may decide differently because the status went from `old` to `new`:
    anything changed besides the phase and the reason, message or time of the Ready and Progressing
    conditions (whose status did not change). A pass that wrote such a change looks again at once
    (STATUS_RECHECK_SECONDS); one that only reported progress does not."""
    return _what_steps_read(old) != _what_steps_read(new)


def _what_steps_read(status: SampleDBStatus) -> Obj:
    out = {k: v for k, v in dump(status).items() if k != "phase"}
    out["conditions"] = [
        {k: v for k, v in c.items() if k not in _PROGRESS_FIELDS} if c.get("type") in _PROGRESS_CONDITIONS else c
        for c in out.get("conditions") or []
    ]
    return out
