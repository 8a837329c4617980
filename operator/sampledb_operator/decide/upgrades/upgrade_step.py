"""One pass of the upgrade step as a plan: decide/upgrades/upgrade.py's verdict and the objects it starts.

Pure: no I/O, no clock (the facts carry `now`). The reconciler gathers `UpgradeFacts` from the
caches (the StatefulSet, the data volume, this database's upgrade, thaw and migrate Jobs, and the
attempt's pre-upgrade backup, upgrade Job and thaw Job, looked up by the names `attempt_of` gives),
reads the failed upgrade Job's result line live only when `result_read_needed` says so, and
`plan_upgrade_step` returns the pass. Its effects, in order:

- the attempt's pre-upgrade SampleDBBackup (BackupRequested), when a backup is required and missing,
  and neither a migration nor another attempt's upgrade or thaw Job runs;
- the major-upgrade Job (UpgradeJobCreated), when decide/upgrades/upgrade.py starts it: the pg_upgrade --link
  Job (method Link, once the instance's pod is gone) or the Dump Job (method Dump; after a refused
  pg_upgrade --check, the same Dump Job announced by the Warning UpgradeFallbackToDump);
- the thaw Job (ThawJobCreated), once, after the attempt's Dump Job failed;
- the analyze Job (AnalyzeJobCreated) when a link upgrade has just succeeded.

During a Link upgrade the outcome says `stop`: the instance's StatefulSet runs 0 replicas.

Its outcome is what the SampleDB reconciler reads: the version, image and data directory the
StatefulSet runs, the Upgrading condition, the problems and whether the phase is Upgrading; and the
duration of an upgrade that has just succeeded, for the metric. The step asks for no Result: the
watch events of its backup, Jobs and StatefulSet bring the next pass.

Invariants: every name derives from the attempt (from-version, to-version, retry annotation), so a
restart never makes a second backup or Job for it; one upgrade at a time (an unfinished upgrade or
thaw Job of another attempt holds a new one back, without a backup or a Job of its own).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sampledb_operator.decide import jobs
from sampledb_operator.decide.backup import backups as bk
from sampledb_operator.decide.children.desired_config import DATA_MOUNT
from sampledb_operator.decide.children.desired_inputs import Running
from sampledb_operator.decide.effects import Create, Effect, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATA_DIR_ANNOTATION, DATABASE_LABEL, VERSION_ANNOTATION
from sampledb_operator.decide.lifecycle import pre_work
from sampledb_operator.decide.status import job_state
from sampledb_operator.decide.upgrades import migrations as mig
from sampledb_operator.decide.upgrades import upgrade as up
from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import Problem, SampleDB, image_for

BACKUP_REASON = "pre-upgrade"
JOB_COMPONENTS = ("upgrade", "thaw")  # the component labels of the Jobs of which one runs at a time
SQL_EXIT_CODE = 6  # upgrade.sh: pg_upgrade (or a restore) failed
JOB_DETAIL_LIMIT = 600  # characters of the script's message kept in the condition


@dataclass(frozen=True)
class UpgradeOutcome:
    """What the SampleDB reconciler reads of the upgrade step."""

    running: Running  # what the StatefulSet runs now
    condition: Condition | None  # Upgrading, when an upgrade is (or was just) under way
    degraded: tuple[Problem, ...] = ()
    busy: bool = False  # an upgrade is in progress: phase Upgrading, migrations wait
    stop: bool = False  # the instance runs 0 replicas (a link upgrade needs the old server stopped)

    @property
    def result(self) -> Result | None:
        """None: the watch events of the step's backup, Jobs and StatefulSet bring the next pass."""
        return None


@dataclass(frozen=True, slots=True)
class UpgradeAttempt:
    """The names of what one upgrade attempt (from, to, retry annotation) makes."""

    token: str
    backup: str  # the pre-upgrade SampleDBBackup
    job: str  # the major-upgrade Job of the Dump method (also Link's fallback)
    thaw: str  # the Job that makes the old server writable again after a failed upgrade Job
    link: str  # the pg_upgrade --link Job
    analyze: str  # the vacuumdb --analyze-in-stages Job after a link upgrade


@dataclass(frozen=True, slots=True)
class UpgradeFacts:
    """Everything one pass of the upgrade step reads."""

    db: SampleDB
    statefulset: Obj | None  # the primary instance's StatefulSet (cached)
    statefulset_ready: bool
    data_volume: Obj | None  # the data PVC (cached): an adopted volume records its data directory
    major_blocked: str | None  # why a major upgrade cannot start now (None: it can)
    upgrade_jobs: tuple[Obj, ...]  # the database's upgrade and thaw Jobs (cached, by label)
    migrate_jobs: tuple[Obj, ...]  # its migrate Jobs (cached, by label)
    now: datetime
    backup: Obj | None = None  # the attempt's pre-upgrade SampleDBBackup (cached)
    job: Obj | None = None  # the attempt's upgrade Job (cached)
    thaw: Obj | None = None  # the attempt's thaw Job (cached)
    job_result: Mapping[str, Any] | None = None  # the failed upgrade Job's result line, read when needed
    link_job: Obj | None = None  # the attempt's pg_upgrade --link Job (cached)
    link_result: Mapping[str, Any] | None = None  # the failed link Job's result line, read when needed
    pod_exists: bool = True  # the primary instance's pod is in the cache


@dataclass(frozen=True, slots=True)
class UpgradeStep:
    """The pass: its plan, what the caller reads, and the seconds an upgrade that just succeeded took."""

    plan: Plan
    outcome: UpgradeOutcome
    kind: up.Kind
    duration: float | None = None


# ---------------------------------------------------------------- what the StatefulSet and volume say


def _container(sts: Obj | None) -> Obj:
    if sts is None:
        return {}
    containers = sts.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or [{}]
    return dict(containers[0])


def current_data_dir(sts: Obj | None) -> str:
    """The data directory the StatefulSet uses (from its PGDATA), the default when there is none."""
    for env in _container(sts).get("env") or []:
        if env.get("name") == "PGDATA" and str(env.get("value", "")).startswith(DATA_MOUNT + "/"):
            return str(env["value"])[len(DATA_MOUNT) + 1:]
    return up.DEFAULT_DATA_DIR


def adopted_data_dir(pvc: Obj | None) -> str:
    """Before the StatefulSet exists: the directory the data volume records (a retained volume adopted
    by a new SampleDB may hold its data in pgdata-<major>), else the default."""
    annotations = (pvc or {}).get("metadata", {}).get("annotations") or {}
    return str(annotations.get(DATA_DIR_ANNOTATION) or up.DEFAULT_DATA_DIR)


def sts_version(sts: Obj | None) -> str | None:
    """The version the StatefulSet's template runs (its annotation)."""
    if sts is None:
        return None
    return (sts.get("metadata", {}).get("annotations") or {}).get(VERSION_ANNOTATION)


def job_selectors(db: SampleDB) -> list[dict[str, str]]:
    """The label selectors of the database's upgrade and of its thaw Jobs."""
    return [{DATABASE_LABEL: db.metadata.name, COMPONENT_LABEL: c} for c in JOB_COMPONENTS]


def unfinished_jobs(upgrade_jobs: Iterable[Obj], db: SampleDB) -> list[str]:
    """The names of this database's upgrade and thaw Jobs (among `upgrade_jobs`) that have not finished, sorted."""
    out = []
    for job in upgrade_jobs:
        state = job_state(job)
        if mig.owned(job, db) and state is not None and not state.finished:
            out.append(str(job["metadata"]["name"]))
    return sorted(out)


def attempt_of(db: SampleDB) -> UpgradeAttempt | None:
    """The attempt spec.version asks for (None: no minor or major upgrade to make)."""
    current, wanted = db.status.current_version, db.spec.version
    if current is None or up.kind_of(current, wanted) not in {up.Kind.MINOR, up.Kind.MAJOR}:
        return None
    token = up.work_token(current, wanted, db.metadata.annotations.get(up.RETRY_ANNOTATION, ""))
    job = names.job_name(db.metadata.name, names.JobKind.UPGRADE, token)
    return UpgradeAttempt(token, bk.pre_work_backup_name(db, BACKUP_REASON, token), job, names.fit(job, "-thaw"),
                          names.fit(job, "-link"), names.fit(job, "-analyze"))


# ---------------------------------------------------------------- the pass


def _held_back(facts: UpgradeFacts) -> bool:
    """A major upgrade that cannot start now (`major_blocked`) and has no Job of any attempt running."""
    db = facts.db
    current = db.status.current_version
    return (up.kind_of(current, db.spec.version) is up.Kind.MAJOR and bool(facts.major_blocked)
            and current is not None and not unfinished_jobs(facts.upgrade_jobs, db))


def result_read_needed(facts: UpgradeFacts) -> tuple[str, ...]:
    """The upgrade Jobs whose result lines this pass reads (live): the attempt's major-upgrade Jobs (link,
    dump) that finished and failed (the script's own reason goes into the condition; the link Job's says
    whether its check refused and whether the old directory is usable); (): no read."""
    attempt = attempt_of(facts.db)
    if attempt is None or _held_back(facts) or up.kind_of(facts.db.status.current_version,
                                                          facts.db.spec.version) is not up.Kind.MAJOR:
        return ()
    return tuple(name for name, job in ((attempt.link, facts.link_job), (attempt.job, facts.job))
                 if _failed(job))


def _failed(job: Obj | None) -> bool:
    state = job_state(job)
    return state is not None and state.finished and not state.succeeded


def plan_upgrade_step(facts: UpgradeFacts) -> UpgradeStep:
    """The plan and outcome of this pass of the upgrade step."""
    db, sts = facts.db, facts.statefulset
    wanted, current = db.spec.version, db.status.current_version
    data_dir = current_data_dir(sts) if sts is not None else adopted_data_dir(facts.data_volume)
    kind = up.kind_of(current, wanted)
    if _held_back(facts):
        assert current is not None
        running = Running(version=current, image=str(_container(sts).get("image") or f"postgres:{current}"),
                          data_dir=data_dir)
        blocked = str(facts.major_blocked)
        cond = Condition(type="Upgrading", status="False", reason="UpgradeBlocked", message=blocked,
                         observed_generation=db.metadata.generation)
        return UpgradeStep(Plan(), UpgradeOutcome(running, cond, (Problem("UpgradeBlocked", blocked, "spec.version"),)),
                           kind)
    attempt = attempt_of(db)
    effects: list[Effect] = []
    if attempt is None:
        inp = up.UpgradeInput(wanted=wanted, current=current, data_dir=data_dir, backup_required=False,
                              backup_phase=None, sts_ready=facts.statefulset_ready, sts_version=sts_version(sts))
    else:
        inp, backup_request = _input(facts, kind, data_dir, attempt)
        effects += [backup_request] if backup_request is not None else []
    dec = up.decide(inp)
    new_dir = up.data_dir_for(wanted)
    if dec.start_link_job and attempt is not None:
        old_image = str(_container(sts).get("image") or f"postgres:{current}")
        effects.append(Create(up.link_job(db, name=attempt.link, old_image=old_image, old_data_dir=data_dir,
                                          data_dir=new_dir), EventSpec(
            "Normal", "UpgradeJobCreated", f"created upgrade Job {attempt.link} (pg_upgrade --link into {new_dir},"
                                           f" the old binaries from {old_image})")))
    if dec.start_job and attempt is not None:
        created = f"created upgrade Job {attempt.job} (data into {new_dir})"
        event = (EventSpec("Warning", "UpgradeFallbackToDump", f"{dec.message} (Job {attempt.job})") if dec.fallback
                 else EventSpec("Normal", "UpgradeJobCreated", created))
        effects.append(Create(up.upgrade_job(db, name=attempt.job, data_dir=new_dir), event))
    if dec.analyze and attempt is not None:
        effects.append(Create(up.analyze_job(db, name=attempt.analyze), EventSpec(
            "Normal", "AnalyzeJobCreated", f"created Job {attempt.analyze}: vacuumdb --analyze-in-stages after"
                                           " pg_upgrade (optimizer statistics; the database is already Ready)")))
    if (dec.failed and kind is up.Kind.MAJOR and inp.job_finished and not inp.job_succeeded
            and attempt is not None and facts.thaw is None):
        # The Job's script undoes its freeze itself unless it was killed (SIGKILL, deadline): once per attempt.
        effects.append(Create(jobs.job(db, name=attempt.thaw, component="thaw", script="thaw.sh"), EventSpec(
            "Normal", "ThawJobCreated",
            f"created Job {attempt.thaw}: the old server accepts writes again after the failed upgrade")))
    image = image_for(db.spec) if dec.version == wanted else (_container(sts).get("image")
                                                              or f"postgres:{dec.version}")
    running = Running(version=dec.version, image=str(image), data_dir=dec.data_dir)
    plan = Plan(tuple(effects))
    if dec.status is None:
        return UpgradeStep(plan, UpgradeOutcome(running, None), kind)
    cond = Condition(type="Upgrading", status=dec.status, reason=dec.reason, message=dec.message,  # type: ignore[arg-type]
                     observed_generation=db.metadata.generation)
    degraded = (Problem(dec.reason, dec.message, "spec.version"),) if dec.failed else ()
    return UpgradeStep(plan, UpgradeOutcome(running, cond, degraded, busy=dec.status == "True", stop=dec.stop), kind,
                       duration=_duration(facts, cond))


def _input(facts: UpgradeFacts, kind: up.Kind, data_dir: str,
           attempt: UpgradeAttempt) -> tuple[up.UpgradeInput, Create | None]:
    """decide/upgrades/upgrade.py's view of a minor or major upgrade, and the pre-upgrade backup to request."""
    db = facts.db
    required = kind is up.Kind.MAJOR or db.spec.upgrade.backup_before_minor
    migrating = mig.in_progress(facts.migrate_jobs, db)
    others = [n for n in unfinished_jobs(facts.upgrade_jobs, db)
              if n not in {attempt.job, attempt.thaw, attempt.link, attempt.analyze}]
    backup = pre_work.PreWorkBackup(attempt.backup, None)
    if required:  # no backup while a migration or another upgrade runs
        backup = pre_work.pre_work_backup(db, BACKUP_REASON, attempt.backup, facts.backup,
                                          may_request=not migrating and not others)
    job = facts.job if kind is up.Kind.MAJOR else None
    link = facts.link_job if kind is up.Kind.MAJOR else None
    state, link_state = job_state(job), job_state(link)
    link_result = facts.link_result or {}
    inp = up.UpgradeInput(
        wanted=db.spec.version, current=db.status.current_version, data_dir=data_dir, backup_required=required,
        backup_phase=backup.phase, backup_message=backup.message, job_exists=job is not None,
        job_finished=bool(state and state.finished), job_succeeded=bool(state and state.succeeded),
        job_message=_job_message(job, facts.job_result), sts_ready=facts.statefulset_ready,
        sts_version=sts_version(facts.statefulset), migration_running=migrating,
        other_job_running=others[0] if others else "",
        method=db.spec.upgrade.method, old_stopped=_stopped(facts), link_job_exists=link is not None,
        link_job_finished=bool(link_state and link_state.finished),
        link_job_succeeded=bool(link_state and link_state.succeeded),
        link_job_message=_job_message(link, facts.link_result),
        # refused by pg_upgrade before the point of no return (its check, or its schema restore): Dump is safe
        link_check_failed=link_result.get("check_failed") is True or (
            link_result.get("code") == SQL_EXIT_CODE and link_result.get("old_usable") is True),
        link_old_usable=link_result.get("old_usable") is not False,
    )
    return inp, backup.request


def _job_message(job: Obj | None, result: Mapping[str, Any] | None) -> str:
    """A finished Job's reason: the script's own message (its result line) when it failed, else the Job's."""
    state = job_state(job)
    if state is None:
        return ""
    message = (result or {}).get("message")
    if state.finished and not state.succeeded and isinstance(message, str) and message:
        return f"{message[:JOB_DETAIL_LIMIT]} ({state.reason})"
    return f"{state.reason}: {state.message}"


def _stopped(facts: UpgradeFacts) -> bool:
    """The old server is down: the StatefulSet asks for 0 replicas, has seen that, has no pod, and the pod is
    gone from the cache (a pod leaves the API only once its containers have stopped)."""
    sts = facts.statefulset or {}
    spec, status = sts.get("spec") or {}, sts.get("status") or {}
    generation = (sts.get("metadata") or {}).get("generation", 0)
    return (bool(sts) and spec.get("replicas") == 0 and int(status.get("replicas") or 0) == 0
            and int(status.get("observedGeneration") or 0) >= int(generation or 0) and not facts.pod_exists)


def _duration(facts: UpgradeFacts, cond: Condition) -> float | None:
    """The seconds the upgrade took, once: when Upgrading turns from True to UpgradeSucceeded."""
    old = get_condition(facts.db.status.conditions, "Upgrading")
    if cond.reason != "UpgradeSucceeded" or old is None or old.status != "True" or old.last_transition_time is None:
        return None
    return max((facts.now - old.last_transition_time).total_seconds(), 0.0)
