"""When a finished Job of a SampleDB is no longer needed, so it may expire (ttlSecondsAfterFinished).

Pure. Jobs are created without a TTL: a failed Job is the record of the failure (that work is not
run again while it exists) and deleting it is how a user asks for a retry, so it must not vanish by
itself. A Job may go once the SampleDB's status, as read, holds its outcome; the operator then sets
ttlSecondsAfterFinished and Kubernetes' TTL controller deletes it FINISHED_JOB_TTL_SECONDS after it
finished (at once when that was longer ago).

One pass is a plan (`plan_expiry`): one merge patch of spec.ttlSecondsAfterFinished per finished Job
that has none yet and whose outcome the status holds (so each Job is patched once: a Job with the
field is left alone). The status is the one the pass wrote (or read, when unchanged), so a status
not yet written keeps the Job.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide.children.archive_config import server_parameters
from sampledb_operator.decide.children.desired_config import hba_rules, synchronous
from sampledb_operator.decide.children.pgconfig import PARAMETERS_HASH_ANNOTATION, parameters_hash
from sampledb_operator.decide.effects import Patch, Plan
from sampledb_operator.decide.labels import COMPONENT_LABEL
from sampledb_operator.decide.status import job_state
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.sampledb_status import SampleDBStatus

FINISHED_JOB_TTL_SECONDS = 24 * 3600  # a day after it finished, for its logs
_DONE_INIT_REASONS = ("InitSucceeded", "InitChangedNotRerun", "Restored")
_DONE_MIGRATED_REASONS = ("UpToDate", "MigrationsApplied", "NotConfigured")


def _condition(status: SampleDBStatus, type_: str) -> tuple[str, str] | None:
    cond = next((c for c in status.conditions if c.type == type_), None)
    return (cond.status, cond.reason) if cond is not None else None


def outcome_recorded(db: SampleDB, job: Obj) -> bool:
    """The status (as read) already holds what this finished Job was for: the operator no longer needs it.

    init / restore: Initialized is True and done (a failed one stays: it is the record and, deleted,
    the retry). upgrade / thaw: no upgrade is under way or failed (currentVersion is spec.version and
    Upgrading, if any, says UpgradeSucceeded); a failed attempt's Job stays while that attempt is
    the one asked for. migrate: Migrated is True (status.appliedMigrations holds the run), so failed
    runs of files since replaced go too. reload: status.appliedParameters is its hash, or spec.parameters
    have changed since (a newer Job runs). basebackup / recoveryverify: status.archive records this Job's
    outcome or a newer one's. Any other component: kept.
    """
    component = str((job.get("metadata", {}).get("labels") or {}).get(COMPONENT_LABEL, ""))
    status = db.status
    if component in ("init", "restore"):
        return _condition(status, "Initialized") in {("True", r) for r in _DONE_INIT_REASONS}
    if component in ("upgrade", "thaw"):
        upgrading = _condition(status, "Upgrading")
        return status.current_version == db.spec.version and upgrading in (None, ("False", "UpgradeSucceeded"))
    if component == "migrate":
        return _condition(status, "Migrated") in {("True", r) for r in _DONE_MIGRATED_REASONS}
    if component == "basebackup":  # the newest base backup recorded is this one or newer than it
        archive = status.archive
        last = archive.last_base_backup if archive is not None else None
        created = str(job.get("metadata", {}).get("creationTimestamp") or "")
        return last is not None and (last.name == job.get("metadata", {}).get("name") or (
            last.completed_at is not None and bool(created)
            and created < last.completed_at.strftime("%Y-%m-%dT%H:%M:%SZ")))
    if component == "recoveryverify":  # the newest verification recorded is this one or newer than it
        archive = status.archive
        verification = archive.last_verification if archive is not None else None
        created = str(job.get("metadata", {}).get("creationTimestamp") or "")
        return verification is not None and (verification.job_name == job.get("metadata", {}).get("name") or (
            verification.finished_at is not None and bool(created)
            and created < verification.finished_at.strftime("%Y-%m-%dT%H:%M:%SZ")))
    if component == "reload":  # recorded, or superseded by a newer edit of spec.parameters
        ran = (job.get("metadata", {}).get("annotations") or {}).get(PARAMETERS_HASH_ANNOTATION)
        return ran == status.applied_parameters or ran != parameters_hash(
            server_parameters(db.spec), synchronous=synchronous(db), hba_rules=hba_rules(db))
    return False


@dataclass(frozen=True, slots=True)
class ExpiryFacts:
    """Everything one pass of the expiry reads."""

    db: SampleDB  # with the status the pass wrote (the proof that an outcome is recorded)
    jobs: tuple[Obj, ...]  # the database's Jobs (owned by it), from the cache


def expires(db: SampleDB, job: Obj) -> bool:
    """`job` is finished, has no TTL yet, and the status holds its outcome: it may go."""
    state = job_state(job)
    if state is None or not state.finished or "ttlSecondsAfterFinished" in (job.get("spec") or {}):
        return False
    return outcome_recorded(db, job)


def plan_expiry(facts: ExpiryFacts) -> Plan:
    """The TTL patches of this pass, one per expiring Job, in the order of `facts.jobs`."""
    ttl = {"spec": {"ttlSecondsAfterFinished": FINISHED_JOB_TTL_SECONDS}}
    return Plan(tuple(Patch("Job", str(job["metadata"]["name"]), ttl) for job in facts.jobs
                      if expires(facts.db, job)))
