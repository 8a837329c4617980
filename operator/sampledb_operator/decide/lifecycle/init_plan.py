"""One pass of the init step as a plan: the init Job of spec.init's SQL, or the restore Job of spec.restore.

Pure: no I/O. The reconciler (reconcilers/init.py) gathers `InitFacts`: from the caches the step's
Job (`job_name`) and, for a restore, the SampleDBBackup it names; live, the init SQL's ConfigMap or
Secret (`source_ref`), and only when `source_read_needed` says the plan depends on it (the database
is ready, no Job exists, the init has not run: the operator does not watch that object).
`plan_init` returns the pass:

| the database                                   | plan                           | outcome             |
|------------------------------------------------|--------------------------------|---------------------|
| neither spec.init nor spec.restore             | nothing                        | nothing             |
| spec.recovery (recover.sh restores the data)   | nothing: no init SQL           | nothing             |
| its Job exists                                 | nothing                        | the Job (1)         |
| Initialized says done (its Job was removed)    | nothing: never run again       | nothing             |
| restore: the backup missing or not Succeeded   | a rate-limited requeue         | the blocker         |
| restore from a store, ready                    | create the Job, announced (2)  | the created Job (3) |
| not ready                                      | nothing                        | nothing             |
| init: its SQL's source missing or not usable   | a rate-limited requeue         | the blocker         |
| ready, source usable                           | create the Job, announced (2)  | the created Job (3) |

(1) for the init Job, also whether spec.init changed since it ran; (2) CreatedRestoreJob; CreatedInitJob
only for init SQL added to a running database (status.currentVersion set and Initialized True/NoInitSQL):
a new database's init Job is its provisioning's routine, shown by Initialized (InitRunning) and named in
the DatabaseReady Event's message at its end (decide/events.py), not announced by an Event of its own;
(3) when this pass created it (`InitPlan.creates`): the status says it runs now.

Invariants: one Job per database (its name derives from the uid, and the restore's from the backup
too), created at most once: AlreadyExists is an earlier pass's Job, announced by that pass only; a
restored database never runs the init SQL. The plan's Result is the outcome's.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide import jobs
from sampledb_operator.decide import status as st
from sampledb_operator.decide.backup import restore
from sampledb_operator.decide.effects import Create, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.labels import INIT_SOURCE_ANNOTATION
from sampledb_operator.model.conditions import ConditionType, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import Problem, SampleDB


@dataclass(frozen=True, slots=True)
class InitOutcome:
    """What the init step found, for the status (see decide/status.Observed)."""

    job: Obj | None = None  # the init or restore Job, when it exists
    changed: bool = False  # spec.init differs from what the init Job ran
    blockers: tuple[Problem, ...] = ()  # why the Job cannot start (its source is missing or not ready)

    @property
    def result(self) -> Result | None:
        """A blocked Job waits for a user object the operator does not watch: look again with backoff."""
        return Result(requeue=True) if self.blockers else None


@dataclass(frozen=True, slots=True)
class InitFacts:
    """Everything one pass of the init step reads."""

    db: SampleDB
    db_ready: bool  # the database pod is ready and runs the current template
    job: Obj | None = None  # the step's Job (job_name), from the cache
    backup: Obj | None = None  # spec.restore's SampleDBBackup (restore only, while backup_read_needed)
    source: Obj | None = None  # spec.init's ConfigMap or Secret (source_ref), read live only when
    # source_read_needed; None: it does not exist


@dataclass(frozen=True, slots=True)
class InitPlan:
    """The pass: its plan, the outcome for the status, and the Job the plan creates (`creates`): when
    this pass created it, the outcome's job is that Job (the status says it runs now, not a pass later)."""

    plan: Plan
    outcome: InitOutcome
    creates: str | None = None


def job_name(db: SampleDB) -> str | None:
    """The name of the step's Job: the restore Job's for spec.restore, else the init Job's (None: no init SQL,
    or a database recovered from an object store: its data comes from the source, the init SQL is not run)."""
    if db.spec.restore is not None:
        return restore.restore_job_name(db)
    if db.spec.recovery is not None:
        return None
    return jobs.init_job_name(db)


def source_ref(db: SampleDB) -> tuple[str, str] | None:
    """The kind and name of the object holding spec.init's SQL (ConfigMap or Secret), or None."""
    init = db.spec.init
    if init is None:
        return None
    if init.config_map_key_ref is not None:
        return "ConfigMap", init.config_map_key_ref.name
    if init.secret_key_ref is not None:
        return "Secret", init.secret_key_ref.name
    return None


def source_read_needed(facts: InitFacts) -> bool:
    """The init Job could start in this pass: whether its SQL's source is usable decides it."""
    db = facts.db
    return (db.spec.restore is None and job_name(db) is not None and facts.job is None
            and not st.init_done(db.status) and facts.db_ready and source_ref(db) is not None)


def backup_read_needed(facts: InitFacts) -> bool:
    """A restore whose Job is not made yet: spec.restore's backup decides whether (and how) it can start."""
    db = facts.db
    return (db.spec.restore is not None and not restore.from_store(db) and facts.job is None
            and not st.init_done(db.status))


def plan_init(facts: InitFacts) -> InitPlan:
    """The plan of this pass of the init step (see the module docstring)."""
    if facts.db.spec.restore is not None:
        return _restore(facts)
    db = facts.db
    body = jobs.init_job(db) if db.spec.recovery is None else None
    if body is None:
        return InitPlan(Plan(), InitOutcome())
    if facts.job is not None:
        ran = (facts.job.get("metadata", {}).get("annotations") or {}).get(INIT_SOURCE_ANNOTATION)
        return InitPlan(Plan(), InitOutcome(job=facts.job, changed=ran != jobs.init_source(db)))
    if st.init_done(db.status) or not facts.db_ready:
        return InitPlan(Plan(), InitOutcome())  # done: never run again; not ready: the source is not read yet
    problem = jobs.init_source_problem(db, facts.source)
    if problem is not None:
        return _blocked(problem)
    name = str(body["metadata"]["name"])
    announce = (EventSpec("Normal", "CreatedInitJob", f"created init Job {name}")
                if _added_to_a_running_database(db) else None)  # see (2) in the module docstring
    return InitPlan(Plan((Create(body, announce),)), InitOutcome(), creates=name)


def _added_to_a_running_database(db: SampleDB) -> bool:
    """The init SQL was added to a database provisioned without one: it has been ready (currentVersion) and
    Initialized said NoInitSQL. A new database whose pass was cut short between its first ready status and its
    init Job (an operator restart, the SQL's ConfigMap not cached yet) has Initialized False: not announced."""
    cond = get_condition(db.status.conditions, ConditionType.INITIALIZED)
    return db.status.has_run and cond is not None and cond.status == "True" and cond.reason == "NoInitSQL"


def _restore(facts: InitFacts) -> InitPlan:
    """The restore Job of spec.restore (created once the new database is ready and the backup is)."""
    db = facts.db
    if facts.job is not None or st.init_done(db.status):
        return InitPlan(Plan(), InitOutcome(job=facts.job))
    assert db.spec.restore is not None
    if restore.from_store(db):  # restore.sh finds the copy, or fails the Job saying why
        if not facts.db_ready:
            return InitPlan(Plan(), InitOutcome())
        body = restore.store_restore_job(db)
        name = str(body["metadata"]["name"])
        announce = EventSpec("Normal", "CreatedRestoreJob",
                             f"restoring backup {db.spec.restore.backup_name} from the object store with Job {name}")
        return InitPlan(Plan((Create(body, announce),)), InitOutcome(), creates=name)
    problem = restore.source_problem(db, facts.backup)
    if problem is not None:
        return _blocked(problem)
    if not facts.db_ready or facts.backup is None:
        return InitPlan(Plan(), InitOutcome())
    body = restore.restore_job(db, facts.backup)
    name = str(body["metadata"]["name"])
    announce = EventSpec("Normal", "CreatedRestoreJob",
                         f"restoring SampleDBBackup {db.spec.restore.backup_name} with Job {name}")
    return InitPlan(Plan((Create(body, announce),)), InitOutcome(), creates=name)


def _blocked(problem: Problem) -> InitPlan:
    outcome = InitOutcome(blockers=(problem,))
    return InitPlan(Plan(result=outcome.result), outcome)
