"""One pass of the schema-migration step as a plan: pending files -> pre-migration backup -> Job -> records.

Pure: no I/O, no clock (the facts carry `now`). The reconciler gathers `MigrationFacts`: the caches
(the database's migrate Jobs and snapshot ConfigMaps by label; the pending files' Job, backup and
snapshot by the names `work_of` gives), the user's ConfigMap read live only when
`source_read_needed`, and the finished Job's result line read live only when `result_read_needed`.
`plan_migration_step` returns the pass; each pass moves one step:

- waiting (not Ready, a missing ConfigMap, a problem of the files, another set's Job running): a
  condition, and a look again (a rate-limited one for a missing ConfigMap, recheck_period else);
- starting: the pre-migration SampleDBBackup (BackupRequested) when missing; once it Succeeded, the
  snapshot ConfigMap (an immutable, content-addressed copy of the files) when missing, and the Job
  (MigrationStarted);
- finished: the snapshot ConfigMaps no unfinished Job mounts are deleted; a completed Job's files go
  into status.appliedMigrations (MigrationsApplied); a failed Job's reason stays in the condition
  until the ConfigMap changes (its result line is read once: a condition that holds it is kept).

Invariants: every name derives from the database's uid and the digest of the pending files, so a
restart finds the same backup, snapshot and Job, and a failed Job is never run again (only new
files, a new digest, make a new attempt); one migrate Job runs at a time per database; the steady
state writes nothing. The plan's Result is the outcome's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sampledb_operator.decide import jobs
from sampledb_operator.decide.backup import backups as bk
from sampledb_operator.decide.effects import Create, Delete, Effect, Emit, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.lifecycle import pre_work
from sampledb_operator.decide.status import JobState, job_state
from sampledb_operator.decide.upgrades import migrations as mig
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.conditions import Condition, get_condition, is_true
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result, combine
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.sampledb_status import AppliedMigration

MIGRATED = "Migrated"
BACKUP_REASON = "pre-migration"
MESSAGE_LIMIT = 1000
DETAIL_LIMIT = 600  # of the script's message, so the advice after it always fits


@dataclass(frozen=True)
class MigrationOutcome:
    """What the migration step found or did, for the SampleDB's status."""

    conditions: tuple[Condition, ...] = ()  # e.g. Migrated (True/False with reason)
    applied: tuple[AppliedMigration, ...] | None = None  # new status.appliedMigrations, None = unchanged
    degraded: tuple[Problem, ...] = field(default_factory=tuple)
    busy: bool = False  # a migration (or its backup) is running: phase Migrating
    requeue: bool = False  # look again with backoff (e.g. the ConfigMap is missing)
    recheck_after: float | None = None  # look at the user's ConfigMap again after this many seconds

    @property
    def result(self) -> Result | None:
        """When the pass should come back for this step."""
        return combine(Result(requeue=self.requeue), Result(requeue_after=self.recheck_after))


@dataclass(frozen=True, slots=True)
class MigrationWork:
    """The files of the user's ConfigMap, the pending ones, and the names of what applying them makes."""

    files: mig.MigrationPlan
    job: str
    backup: str
    snapshot: str


@dataclass(frozen=True, slots=True)
class MigrationFacts:
    """Everything one pass of the migration step reads."""

    db: SampleDB
    db_ready: bool  # the database's StatefulSet is ready
    blocked: bool  # an upgrade is in progress
    jobs: tuple[Obj, ...]  # the database's migrate Jobs (cached, by label)
    snapshots: tuple[Obj, ...]  # its snapshot ConfigMaps (cached, by label)
    now: datetime
    recheck_period: float  # seconds between looks at the user's ConfigMap (nothing watches it)
    source: Obj | None = None  # the user's ConfigMap, read live when `source_read_needed` (None: not found)
    job: Obj | None = None  # the pending files' migrate Job (cached)
    backup: Obj | None = None  # their pre-migration SampleDBBackup (cached)
    snapshot: Obj | None = None  # their snapshot ConfigMap (cached)
    job_result: Mapping[str, Any] | None = None  # the finished Job's result line, read when `result_read_needed`


@dataclass(frozen=True, slots=True)
class MigrationStep:
    """The pass: its plan, what the caller reads, and (for the log) the Job it starts with its files."""

    plan: Plan
    outcome: MigrationOutcome
    started_job: str = ""
    started_files: tuple[str, ...] = ()


# ---------------------------------------------------------------- what the pass reads


def source_read_needed(facts: MigrationFacts) -> bool:
    """The step looks at the user's ConfigMap: migrations configured, the database ready and Ready, no upgrade."""
    db = facts.db
    return (db.spec.migrations is not None and facts.db_ready and not facts.blocked
            and is_true(db.status.conditions, "Ready"))


def work_of(db: SampleDB, source: Obj) -> MigrationWork | None:
    """The pending files of `source` and their names; None when nothing may run or nothing is pending."""
    return _named(db, mig.plan_migrations(mig.source_files(source), db.status.applied_migrations))


def _named(db: SampleDB, files: mig.MigrationPlan) -> MigrationWork | None:
    if files.problem is not None or not files.pending:
        return None
    job = names.migration_job_name(db.metadata.name, mig.job_token(db.metadata.uid or "", files.digest))
    return MigrationWork(files, job, bk.pre_work_backup_name(db, BACKUP_REASON, files.digest),
                         mig.snapshot_name(db, files.files))


def _finished_job(facts: MigrationFacts) -> tuple[MigrationWork, Obj, JobState] | None:
    """The pending files' Job when it has finished (and the step would look at it)."""
    if not source_read_needed(facts) or facts.source is None or facts.job is None:
        return None
    work = work_of(facts.db, facts.source)
    state = job_state(facts.job)
    if work is None or state is None or not state.finished:
        return None
    return work, facts.job, state


def _failure_prefix(job_name: str) -> str:
    return f"migration Job {job_name} failed"


def _failure_recorded(db: SampleDB, job_name: str) -> Condition | None:
    """The Migrated condition when it holds this Job's failure already (read once, kept after)."""
    old = get_condition(db.status.conditions, MIGRATED)
    if old is not None and old.reason == "MigrationFailed" and old.message.startswith(_failure_prefix(job_name)):
        return old
    return None


def result_read_needed(facts: MigrationFacts) -> str | None:
    """The Job whose result line this pass reads (live): the finished Job of the pending files, unless it
    failed and the condition holds its failure already; None: no read."""
    found = _finished_job(facts)
    if found is None:
        return None
    work, _job, state = found
    if not state.succeeded and _failure_recorded(facts.db, work.job) is not None:
        return None
    return work.job


# ---------------------------------------------------------------- the pass


def plan_migration_step(facts: MigrationFacts) -> MigrationStep:
    """The plan and outcome of this pass of the migration step."""
    db = facts.db
    if db.spec.migrations is None:
        return _not_configured(facts)
    if not facts.db_ready or facts.blocked:
        return _step(MigrationOutcome())
    if not is_true(db.status.conditions, "Ready"):
        # The pre-migration backup needs a Ready database, and init SQL runs before any migration.
        return _step(MigrationOutcome(conditions=(_condition(
            db, False, "WaitingForDatabase", "migrations run once the database is ready and initialized"),)))
    if facts.source is None:
        missing = Problem("MigrationsSourceMissing",
                          f"ConfigMap {db.spec.migrations.config_map_name} with the migrations does not exist",
                          mig.FIELD)
        # a missing reference, like a missing init ConfigMap: look again with backoff
        return _step(MigrationOutcome(conditions=(_condition(db, False, missing.reason, missing.message),),
                                      requeue=True))
    files = mig.plan_migrations(mig.source_files(facts.source), db.status.applied_migrations)
    if files.problem is not None:
        return _step(_waiting_for_user(facts, files.problem))
    work = _named(db, files)
    if work is None:
        return _step(_up_to_date(facts), _stale_snapshots(facts))
    if facts.job is None:
        others = [n for n in mig.unfinished_jobs(facts.jobs, db) if n != work.job]
        if others:
            return _step(_busy(db, "Migrating", f"waiting for the migration Job {others[0]} to finish"))
        return _start(facts, work)
    state = job_state(facts.job)
    assert state is not None
    if not state.finished:
        return _step(_busy(db, "Migrating", _applying(work)))
    if state.succeeded:
        return _succeeded(facts, work, facts.job)
    return _step(_failed(facts, work, state), _stale_snapshots(facts))


def _step(outcome: MigrationOutcome, effects: Sequence[Effect] = ()) -> MigrationStep:
    return MigrationStep(Plan(tuple(effects), outcome.result), outcome)


def _condition(db: SampleDB, ok: bool, reason: str, message: str) -> Condition:
    return Condition(type=MIGRATED, status="True" if ok else "False", reason=reason,
                     message=message[:MESSAGE_LIMIT], observed_generation=db.metadata.generation)


def _waiting_for_user(facts: MigrationFacts, problem: Problem) -> MigrationOutcome:
    """A stop only an edit of the ConfigMap can lift; nothing watches it, so look again after recheck_period."""
    return MigrationOutcome(conditions=(_condition(facts.db, False, problem.reason, problem.message),),
                            degraded=(problem,), recheck_after=facts.recheck_period)


def _busy(db: SampleDB, reason: str, message: str) -> MigrationOutcome:
    return MigrationOutcome(conditions=(_condition(db, False, reason, message),), busy=True)


def _names(files: Sequence[mig.MigrationFile]) -> str:
    return mig.quote_names([f.name for f in files])


def _applying(work: MigrationWork) -> str:
    pending = work.files.pending
    return f"Job {work.job} is applying {len(pending)} migration(s): {_names(pending)}"


def _stale_snapshots(facts: MigrationFacts) -> tuple[Delete, ...]:
    """Delete the snapshot ConfigMaps that no unfinished migrate Job mounts."""
    owned = [str(c["metadata"]["name"]) for c in facts.snapshots if mig.owned(c, facts.db)]
    if not owned:
        return ()
    in_use = mig.mounted_snapshots(facts.jobs, facts.db)
    return tuple(Delete("ConfigMap", name) for name in mig.stale_snapshots(owned, in_use))


def _not_configured(facts: MigrationFacts) -> MigrationStep:
    """spec.migrations was removed: say so if a Migrated condition is left from before, else stay silent."""
    db = facts.db
    if get_condition(db.status.conditions, MIGRATED) is None:
        return _step(MigrationOutcome())
    return _step(MigrationOutcome(conditions=(_condition(
        db, True, "NotConfigured",
        f"spec.migrations is not set; {len(db.status.applied_migrations)} migrations applied earlier"),)),
        _stale_snapshots(facts))


def _up_to_date(facts: MigrationFacts) -> MigrationOutcome:
    """Nothing pending. The condition of the run that applied the last files is kept as it is."""
    db = facts.db
    old = get_condition(db.status.conditions, MIGRATED)
    if old is not None and old.status == "True" and old.reason == "MigrationsApplied":
        cond = old.model_copy(update={"observed_generation": db.metadata.generation})
    else:
        cond = _condition(db, True, "UpToDate", f"{len(db.status.applied_migrations)} migrations applied")
    return MigrationOutcome(conditions=(cond,), recheck_after=facts.recheck_period)  # to notice new files


def _start(facts: MigrationFacts, work: MigrationWork) -> MigrationStep:
    """The pre-migration backup first; once it Succeeded, the snapshot ConfigMap and the Job."""
    db, pending = facts.db, work.files.pending
    backup = pre_work.pre_work_backup(db, BACKUP_REASON, work.backup, facts.backup, may_request=True)
    requested = (backup.request,) if backup.request is not None else ()
    if backup.phase == "Failed":
        return _step(_waiting_for_user(facts, Problem(
            "PreMigrationBackupFailed",
            f"the pre-migration backup {work.backup} failed ({backup.message or 'failed'}); no migration runs"
            " without it. Changing the migrations ConfigMap makes a new attempt", mig.FIELD)), requested)
    if backup.phase != "Succeeded":
        return _step(_busy(db, "BackingUp", f"taking the pre-migration backup {work.backup} before applying"
                                            f" {_names(pending)}"), requested)
    assert facts.source is not None
    snapshot = () if facts.snapshot is not None else (
        Create(mig.snapshot_configmap(db, work.files.files, facts.source)),)  # its content is its name
    job = Create(jobs.migration_job(db, name=work.job, snapshot_configmap=work.snapshot, digest=work.files.digest),
                 EventSpec("Normal", "MigrationStarted",
                           f"Job {work.job} applies {len(pending)} migration(s): {_names(pending)}"))
    outcome = _busy(db, "Migrating", _applying(work))
    return MigrationStep(Plan((*requested, *snapshot, job), outcome.result), outcome, started_job=work.job,
                         started_files=tuple(f.name for f in pending))


def _succeeded(facts: MigrationFacts, work: MigrationWork, job: Obj) -> MigrationStep:
    """The records of a completed run. The database's own table is the truth of what ran: the files
    migrate.sh found already recorded there ("already": a database adopted from a retained volume, whose
    new SampleDB has no records) are recorded as applied earlier, not by this Job."""
    db, pending = facts.db, work.files.pending
    at = timestamps.parse((job.get("status") or {}).get("completionTime")) or facts.now
    result = facts.job_result or {}
    before = frozenset(v for v in result.get("already") or [] if isinstance(v, int))
    ran = [f for f in pending if f.version not in before]
    earlier = [f for f in pending if f.version in before]
    applied = mig.with_applied(db.status.applied_migrations, pending, at, recorded_before=before)
    message = f"applied {len(ran)} migration(s): {_names(ran)}" if ran else "no migration needed to run"
    if earlier:
        message += (f"; {len(earlier)} already recorded in the database (sampledb_meta.schema_migrations),"
                    f" not run again: {_names(earlier)}")
    message += f"; {len(applied)} migrations applied"
    outcome = MigrationOutcome(conditions=(_condition(db, True, "MigrationsApplied", message),), applied=applied,
                               recheck_after=facts.recheck_period)
    return _step(outcome, (*_stale_snapshots(facts), Emit(EventSpec("Normal", "MigrationsApplied", message))))


def _failed(facts: MigrationFacts, work: MigrationWork, state: JobState) -> MigrationOutcome:
    """The failed Job's reason (the script's own message when it ran), kept until the ConfigMap changes."""
    db, pending = facts.db, work.files.pending
    old = _failure_recorded(db, work.job)
    if old is not None:
        message = old.message  # already read: no second look at the pods
    else:
        prefix = _failure_prefix(work.job)
        result = facts.job_result or {}
        if isinstance(result.get("message"), str) and result["message"]:
            message = f"{prefix}: {result['message'][:DETAIL_LIMIT]}"
            versions = {v for v in result.get("applied") or [] if isinstance(v, int)}
            done = [f for f in pending if f.version in versions]
            if done:
                # Each file commits on its own: the database records them (sampledb_meta), and the
                # next run, after the ConfigMap is fixed, finds them there ("already").
                message += f" (applied before the failure: {', '.join(f.name for f in done)})"
        else:
            message = f"{prefix}: {state.reason}: {state.message} (applying {_names(pending)})"
        message += (f". Fix the migrations ConfigMap to try again, or delete Job {work.job} to retry the same"
                    " files")
    return _waiting_for_user(facts, Problem("MigrationFailed", message[:MESSAGE_LIMIT], mig.FIELD))
