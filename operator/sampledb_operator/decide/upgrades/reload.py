"""spec.parameters edits without a restart: when to run the reload Job, and its spec.

Pure. The server reads its postgresql.conf from the database's ConfigMap (decide/children/pgconfig.py);
status.appliedParameters is the hash of the parameters it was last made to reload. When the hash
of spec.parameters differs, and the database is ready (its rollout finished) and no upgrade runs,
one reload Job per (database uid, hash) runs reload.sh: it waits until the server's copy of the file
is the Job's (the kubelet refreshes ConfigMap volumes within about a minute), then
pg_reload_conf(). Its success records the hash; postmaster-context changes are applied by the
rolling restart their pod-template annotation causes, the reload reports them as pending until then.

A new database needs no Job: when the StatefulSet does not exist yet, the pod it will make reads a
file at least as new as these parameters (the ConfigMap is applied first), so their hash is recorded
at once; edits made after that differ from it and are reloaded.

One pass of the step is a plan (`plan_reload`): the reconciler (reconcilers/reload.py) gathers
`ReloadFacts` (the Job from the cache; its result line, live, only when `result_read_needed`: it has
finished), and the plan creates the Job (announced ReloadingParameters only when this pass made it)
or announces ParametersReloaded; the outcome hands the hash to record (status.appliedParameters) and
the problem to report (Degraded, ParametersNotApplied) to the SampleDB reconciler, which writes the status.

Invariants: a Job is never re-created for the same hash while it exists, so a failed one (an
invalid value, reported in Degraded) is the record; a new edit (a new hash) or deleting the Job
retries. The server runs what the reload Job that succeeded last made it read: a succeeded Job of the
wanted parameters that another one completed after belongs to an earlier edit (work_mem 4MB -> 8MB ->
4MB within the Jobs' day-long TTL), so it is deleted and made again, never taken as this edit's reload;
and when an edit goes back to the recorded parameters after the Job of the edit in between reloaded its
own, that Job's parameters are recorded (then the wanted ones are reloaded again). Nothing here runs
while the database is not ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sampledb_operator.decide.children import pgconfig
from sampledb_operator.decide.children.archive_config import server_parameters
from sampledb_operator.decide.children.desired_config import hba_rules, synchronous
from sampledb_operator.decide.effects import Create, Delete, Emit, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.jobs import job
from sampledb_operator.decide.labels import db_name
from sampledb_operator.decide.status import JobState, job_state
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB

COMPONENT = "reload"
RELOAD_TIMEOUT_SECONDS = 300
# reload.sh's exit codes a retry cannot fix: config (2: an invalid value or a missing file).
RELOAD_FATAL_EXIT_CODES = (2,)
MESSAGE_LIMIT = 900  # of the failed Job's detail in the ParametersNotApplied problem


class Step(StrEnum):
    NOTHING = "nothing"  # the server has reloaded these parameters
    WAIT = "wait"  # not ready, an upgrade runs, or the Job runs
    CREATE_JOB = "create-job"
    REPLACE_JOB = "replace-job"  # the Job of these parameters ran for an earlier edit: delete it, then create it
    RECORD = "record"  # the Job succeeded: record the hash
    RECORD_NEW = "record-new"  # no pod has run yet: it will start with these parameters
    RECORD_LAST = "record-last"  # a Job of other parameters reloaded the server after the recorded ones did
    FAILED = "failed"  # the Job failed: say so until the parameters change or the Job is deleted


@dataclass(frozen=True, slots=True)
class ReloadInput:
    wanted: str  # parameters_hash(spec.parameters)
    applied: str | None  # status.appliedParameters
    db_ready: bool  # the pod is ready and runs the current template
    busy: bool  # an upgrade is in progress
    job: JobState | None  # the reload Job of `wanted`, if it exists
    statefulset_exists: bool = True  # False: this pass creates it (after the ConfigMap)
    last_reload: str | None = None  # the parameters of the last successful reload, when it came after `applied`'s
    overtaken: bool = False  # a Job of other parameters reloaded the server after the (finished) Job of `wanted`


@dataclass(frozen=True, slots=True)
class ReloadDecision:
    step: Step
    reason: str


def decide(inp: ReloadInput) -> ReloadDecision:
    """The next step for the parameters; see the module docstring."""
    if inp.applied == inp.wanted and inp.last_reload not in (None, inp.applied):
        # an edit went back to the recorded parameters after a Job of the edit in between had reloaded its own
        return ReloadDecision(Step.RECORD_LAST, "the server last reloaded other parameters")
    if inp.applied == inp.wanted:
        return ReloadDecision(Step.NOTHING, "the server has reloaded these parameters")
    if inp.applied is None and not inp.statefulset_exists and inp.job is None:
        return ReloadDecision(Step.RECORD_NEW, "the database pod will start with these parameters")
    if inp.job is not None and inp.job.finished:
        if inp.job.succeeded and inp.overtaken:  # an earlier edit's Job: reload these parameters again
            return ReloadDecision(Step.REPLACE_JOB, "another reload Job ran after the one of these parameters")
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
    """The Job running reload.sh with its own copy of the ConfigMap's postgresql.conf and pg_hba.conf (same keys
    and paths)."""
    name = db_name(db)
    body = job(
        db,
        name=names.reload_job_name(name, db.metadata.uid or "", parameters_hash),
        component=COMPONENT,
        script="reload.sh",
        env=[{"name": "CONFIG_FILE", "value": pgconfig.CONFIG_FILE},
             {"name": "HBA_FILE", "value": pgconfig.HBA_FILE},
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


@dataclass(frozen=True, slots=True)
class ReloadOutcome:
    """What the reload step hands the status: the hash to record, the problem to report."""

    applied: str | None = None  # the new status.appliedParameters, None = unchanged
    degraded: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True)
class ReloadFacts:
    """Everything one pass of the reload step reads."""

    db: SampleDB
    db_ready: bool  # the database pod is ready and runs the current template
    busy: bool  # an upgrade is in progress
    statefulset_existed: bool  # the StatefulSet was in the cache before this pass applied the children
    job: JobState | None  # the reload Job of the wanted hash (job_name), from the cache
    job_result: Mapping[str, Any] = field(default_factory=dict)  # the finished Job's result line, read
    # (live) only when result_read_needed; {} when it has none
    jobs: tuple[Obj, ...] = ()  # every reload Job of the database, from the cache (for last_reload)


@dataclass(frozen=True, slots=True)
class ReloadPlan:
    """The pass: the step decided (for tests and logs), its plan, and the outcome for the status."""

    decision: ReloadDecision
    plan: Plan
    outcome: ReloadOutcome


def wanted_hash(db: SampleDB) -> str:
    """The hash of spec.parameters as the server's file holds them (pgconfig.parameters_hash)."""
    return pgconfig.parameters_hash(server_parameters(db.spec), synchronous=synchronous(db), hba_rules=hba_rules(db))


def job_name(db: SampleDB) -> str:
    """The name of the reload Job of the wanted parameters (keyed by the uid and the hash)."""
    return names.reload_job_name(db.metadata.name, db.metadata.uid or "", wanted_hash(db))


def last_reload(jobs: tuple[Obj, ...], applied: str | None) -> str | None:
    """The parameters hash of the reload Job among `jobs` that succeeded last, when it completed after the Job of
    `applied` did (or that Job is gone: recorded without one, or expired, and so older); else None."""
    done = sorted(((str((j.get("status") or {}).get("completionTime") or ""), _hash_of(j)) for j in jobs
                   if (state := job_state(j)) is not None and state.succeeded), key=lambda t: t[0])
    if not done or not done[-1][0]:
        return None
    applied_at = max((at for at, ran in done if ran == applied), default="")
    return done[-1][1] if done[-1][0] > applied_at else None


def _hash_of(job: Obj) -> str:
    return str(((job.get("metadata") or {}).get("annotations") or {}).get(pgconfig.PARAMETERS_HASH_ANNOTATION) or "")


def reload_input(facts: ReloadFacts) -> ReloadInput:
    """The decision's view of the facts."""
    wanted = wanted_hash(facts.db)
    return ReloadInput(wanted=wanted, applied=facts.db.status.applied_parameters,
                       db_ready=facts.db_ready, busy=facts.busy, job=facts.job,
                       statefulset_exists=facts.statefulset_existed,
                       last_reload=last_reload(facts.jobs, facts.db.status.applied_parameters),
                       overtaken=last_reload(facts.jobs, wanted) is not None)


def result_read_needed(facts: ReloadFacts) -> bool:
    """The pass records the finished Job's end: its result line names the settings pending a restart, or
    why it failed."""
    return decide(reload_input(facts)).step in (Step.RECORD, Step.FAILED)


def plan_reload(facts: ReloadFacts) -> ReloadPlan:
    """The plan of this pass of the reload step (see the module docstring)."""
    inp = reload_input(facts)
    decision = decide(inp)
    db, wanted, name = facts.db, inp.wanted, job_name(facts.db)
    if decision.step is Step.RECORD_NEW:
        return ReloadPlan(decision, Plan(), ReloadOutcome(applied=wanted))
    if decision.step is Step.CREATE_JOB:
        announce = EventSpec("Normal", "ReloadingParameters", f"reloading spec.parameters with Job {name}")
        return ReloadPlan(decision, Plan((Create(reload_job(db, wanted), announce),)), ReloadOutcome())
    if decision.step is Step.RECORD_LAST:
        return ReloadPlan(decision, Plan(), ReloadOutcome(applied=inp.last_reload))
    if decision.step is Step.REPLACE_JOB:
        return ReloadPlan(decision, Plan((Delete("Job", name),)), ReloadOutcome())
    if decision.step is Step.RECORD:
        pending = [str(p) for p in facts.job_result.get("pending_restart") or []]
        message = "spec.parameters reloaded"
        if pending:
            message += f"; {', '.join(pending)} take effect when the pod restarts"
        return ReloadPlan(decision, Plan((Emit(EventSpec("Normal", "ParametersReloaded", message)),)),
                          ReloadOutcome(applied=wanted))
    if decision.step is Step.FAILED:
        detail = str(facts.job_result.get("message") or decision.reason)[:MESSAGE_LIMIT]
        return ReloadPlan(decision, Plan(), ReloadOutcome(degraded=(Problem(
            "ParametersNotApplied",
            f"reload Job {name} failed: {detail}; fix spec.parameters (or delete the Job to retry)",
            "spec.parameters"),)))
    return ReloadPlan(decision, Plan(), ReloadOutcome())
