"""spec.parameters edits without a restart: when to run the reload Job, and its spec.

Pure. The server reads its postgresql.conf from the database's ConfigMap (decide/pgconfig.py);
status.appliedParameters is the hash of the parameters it was last made to reload. When the hash
of spec.parameters differs, and the database is ready (its rollout finished) and no upgrade runs,
one reload Job per (database uid, hash) runs reload.sh: it waits until the server's copy of the file
is the Job's (the kubelet refreshes ConfigMap volumes within about a minute), then
pg_reload_conf(). Its success records the hash; postmaster-context changes are applied by the
rolling restart their pod-template annotation causes, the reload reports them as pending until then.

A new database needs no Job: when the StatefulSet does not exist yet, the pod it will make reads a
file at least as new as these parameters (the ConfigMap is applied first), so their hash is recorded
at once; edits made after that differ from it and are reloaded.

Invariants: a Job is never re-created for the same hash while it exists, so a failed one (an
invalid value, reported in Degraded) is the record; a new edit (a new hash) or deleting the Job
retries. Nothing here runs while the database is not ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sampledb_operator.decide import pgconfig
from sampledb_operator.decide.desired import db_name
from sampledb_operator.decide.jobs import job
from sampledb_operator.decide.status import JobState
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

COMPONENT = "reload"
RELOAD_TIMEOUT_SECONDS = 300
# reload.sh's exit codes a retry cannot fix: config (2: an invalid value or a missing file).
RELOAD_FATAL_EXIT_CODES = (2,)


class Step(StrEnum):
    NOTHING = "nothing"  # the server has reloaded these parameters
    WAIT = "wait"  # not ready, an upgrade runs, or the Job runs
    CREATE_JOB = "create-job"
    RECORD = "record"  # the Job succeeded: record the hash
    RECORD_NEW = "record-new"  # no pod has run yet: it will start with these parameters
    FAILED = "failed"  # the Job failed: say so until the parameters change or the Job is deleted


@dataclass(frozen=True, slots=True)
class ReloadInput:
    wanted: str  # parameters_hash(spec.parameters)
    applied: str | None  # status.appliedParameters
    db_ready: bool  # the pod is ready and runs the current template
    busy: bool  # an upgrade is in progress
    job: JobState | None  # the reload Job of `wanted`, if it exists
    statefulset_exists: bool = True  # False: this pass creates it (after the ConfigMap)


@dataclass(frozen=True, slots=True)
class ReloadDecision:
    step: Step
    reason: str


def decide(inp: ReloadInput) -> ReloadDecision:
    """The next step for the parameters; see the module docstring."""
    if inp.applied == inp.wanted:
        return ReloadDecision(Step.NOTHING, "the server has reloaded these parameters")
    if inp.applied is None and not inp.statefulset_exists and inp.job is None:
        return ReloadDecision(Step.RECORD_NEW, "the database pod will start with these parameters")
    if inp.job is not None and inp.job.finished:
        if inp.job.succeeded:
            return ReloadDecision(Step.RECORD, "the reload Job succeeded")
        return ReloadDecision(Step.FAILED, inp.job.message or inp.job.reason)
    if inp.job is not None:
        return ReloadDecision(Step.WAIT, "the reload Job is running")
    if inp.busy:
        return ReloadDecision(Step.WAIT, "an upgrade is in progress")
    if not inp.db_ready:
        return ReloadDecision(Step.WAIT, "the database is not ready")
    return ReloadDecision(Step.CREATE_JOB, "spec.parameters differ from what the server reloaded")


def reload_job(db: SampleDB, parameters_hash: str) -> Obj:
    """The Job running reload.sh with its own copy of the ConfigMap's postgresql.conf (same key and path)."""
    name = db_name(db)
    body = job(
        db,
        name=names.reload_job_name(name, db.metadata.uid or "", parameters_hash),
        component=COMPONENT,
        script="reload.sh",
        env=[{"name": "CONFIG_FILE", "value": pgconfig.CONFIG_FILE},
             {"name": "RELOAD_TIMEOUT", "value": str(RELOAD_TIMEOUT_SECONDS)},
             {"name": "WAIT_TIMEOUT", "value": "120"}],
        extra_volumes=[{"name": "config", "configMap": {
            "name": names.configmap_name(name),
            "items": [{"key": pgconfig.CONFIG_KEY, "path": pgconfig.CONFIG_KEY},
                      {"key": pgconfig.HBA_KEY, "path": pgconfig.HBA_KEY}]}}],
        extra_mounts=[{"name": "config", "mountPath": pgconfig.CONFIG_DIR, "readOnly": True}],
        annotations={pgconfig.PARAMETERS_HASH_ANNOTATION: parameters_hash},
    )
    body["spec"]["podFailurePolicy"] = {"rules": [
        {"action": "FailJob",
         "onExitCodes": {"containerName": COMPONENT, "operator": "In", "values": list(RELOAD_FATAL_EXIT_CODES)}},
    ]}
    return body
