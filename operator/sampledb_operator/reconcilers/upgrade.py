"""Version upgrades of a SampleDB: the I/O around decide/upgrade.py.

Reads where the upgrade stands (the pre-upgrade SampleDBBackup, the upgrade Job, the
StatefulSet), asks decide/upgrade.py what runs now, creates the backup or the Job it asks for,
and tells the SampleDB reconciler which version, image and data directory the StatefulSet gets.
Every object it creates has a name derived from (from-version, to-version, retry annotation), so
a restart never starts a second backup or Job for the same upgrade.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide import backups as bk
from sampledb_operator.decide import desired as d
from sampledb_operator.decide import jobs
from sampledb_operator.decide import upgrade as up
from sampledb_operator.decide.status import job_state
from sampledb_operator.kube.errors import Conflict
from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB, image_for
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability import metrics
from sampledb_operator.reconcilers import migrations
from sampledb_operator.reconcilers.backup_request import ensure_backup
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.job_result import job_result


@dataclass(frozen=True)
class UpgradeOutcome:
    running: d.Running  # what the StatefulSet runs now
    condition: Condition | None  # Upgrading, when an upgrade is (or was just) under way
    degraded: tuple[Problem, ...] = ()
    busy: bool = False  # an upgrade is in progress: phase Upgrading, migrations wait


def _container(sts: Obj | None) -> Obj:
    if sts is None:
        return {}
    containers = sts.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or [{}]
    return dict(containers[0])


def current_data_dir(sts: Obj | None) -> str:
    """The data directory the StatefulSet uses (from its PGDATA), the default when there is none."""
    for env in _container(sts).get("env") or []:
        if env.get("name") == "PGDATA" and str(env.get("value", "")).startswith(d.DATA_MOUNT + "/"):
            return str(env["value"])[len(d.DATA_MOUNT) + 1:]
    return up.DEFAULT_DATA_DIR


def adopted_data_dir(ctx: Context, db: SampleDB) -> str:
    """Before the StatefulSet exists: the directory the data volume records (a retained volume
    adopted by a new SampleDB may hold its data in pgdata-<major>), else the default."""
    pvc = ctx.cached("PersistentVolumeClaim", db.metadata.namespace, names.data_pvc_name(db.metadata.name))
    annotations = (pvc or {}).get("metadata", {}).get("annotations") or {}
    return str(annotations.get(d.DATA_DIR_ANNOTATION) or up.DEFAULT_DATA_DIR)


def sts_version(sts: Obj | None) -> str | None:
    """The version the StatefulSet's template runs (its annotation)."""
    if sts is None:
        return None
    return (sts.get("metadata", {}).get("annotations") or {}).get(d.VERSION_ANNOTATION)


JOB_DETAIL_LIMIT = 600  # characters of the script's message kept in the condition


async def reconcile_upgrade(ctx: Context, db: SampleDB, sts: Obj | None, sts_ready: bool,
                            major_blocked: str | None = None) -> UpgradeOutcome:
    """One pass of the upgrade step; `major_blocked` (why a major upgrade cannot run now) holds one back."""
    wanted, current = db.spec.version, db.status.current_version
    data_dir = current_data_dir(sts) if sts is not None else adopted_data_dir(ctx, db)
    kind = up.kind_of(current, wanted)
    if kind is up.Kind.MAJOR and major_blocked and current is not None and not unfinished_jobs(ctx, db):
        running = d.Running(version=current, image=str(_container(sts).get("image") or f"postgres:{current}"),
                            data_dir=data_dir)
        cond = Condition(type="Upgrading", status="False", reason="UpgradeBlocked", message=major_blocked,
                         observed_generation=db.metadata.generation)
        return UpgradeOutcome(running, cond, (Problem("UpgradeBlocked", major_blocked, "spec.version"),))
    inp = up.UpgradeInput(wanted=wanted, current=current, data_dir=data_dir, backup_required=False,
                          backup_phase=None, sts_ready=sts_ready, sts_version=sts_version(sts))
    job_name = ""
    if kind in (up.Kind.MINOR, up.Kind.MAJOR):
        assert current is not None
        retry = db.metadata.annotations.get(up.RETRY_ANNOTATION, "")
        token = up.work_token(current, wanted, retry)
        required = kind is up.Kind.MAJOR or db.spec.upgrade.backup_before_minor
        migrating = migrations.in_progress(ctx, db)
        job_name = names.job_name(db.metadata.name, names.JobKind.UPGRADE, token)
        others = [n for n in unfinished_jobs(ctx, db) if n not in (job_name, names.fit(job_name, "-thaw"))]
        phase, message = None, ""
        if required:
            backup_name = bk.pre_work_backup_name(db, "pre-upgrade", token)
            if not migrating and not others:  # no backup while a migration or another upgrade runs
                backup_name, phase = await ensure_backup(ctx, db, reason="pre-upgrade", token=token)
            cached = ctx.cached("SampleDBBackup", db.metadata.namespace, backup_name) or {}
            phase = phase or (cached.get("status") or {}).get("phase")
            message = (cached.get("status") or {}).get("message") or ""
        job = ctx.cached("Job", db.metadata.namespace, job_name) if kind is up.Kind.MAJOR else None
        state = job_state(job)
        job_message = f"{state.reason}: {state.message}" if state else ""
        if state and state.finished and not state.succeeded:
            # The script's own reason (its result line), e.g. the server's error on restore.
            result = await job_result(ctx, db.metadata.namespace or "", job_name)
            if isinstance(result.get("message"), str) and result["message"]:
                job_message = f"{result['message'][:JOB_DETAIL_LIMIT]} ({state.reason})"
        inp = up.UpgradeInput(
            wanted=wanted, current=current, data_dir=data_dir, backup_required=required, backup_phase=phase,
            backup_message=message, job_exists=job is not None, job_finished=bool(state and state.finished),
            job_succeeded=bool(state and state.succeeded),
            job_message=job_message,
            sts_ready=sts_ready, sts_version=sts_version(sts), migration_running=migrating,
            other_job_running=others[0] if others else "",
        )
    dec = up.decide(inp)
    if dec.start_job:
        await _start_job(ctx, db, job_name, up.data_dir_for(wanted))
    if dec.failed and kind is up.Kind.MAJOR and inp.job_finished and not inp.job_succeeded:
        await _thaw(ctx, db, job_name)
    image = image_for(db.spec) if dec.version == wanted else (_container(sts).get("image")
                                                              or f"postgres:{dec.version}")
    running = d.Running(version=dec.version, image=str(image), data_dir=dec.data_dir)
    if dec.status is None:
        return UpgradeOutcome(running, None)
    cond = Condition(type="Upgrading", status=dec.status, reason=dec.reason, message=dec.message,  # type: ignore[arg-type]
                     observed_generation=db.metadata.generation)
    _observe_duration(ctx, db, cond, kind)
    degraded = (Problem(dec.reason, dec.message, "spec.version"),) if dec.failed else ()
    return UpgradeOutcome(running, cond, degraded, busy=dec.status == "True")


def unfinished_jobs(ctx: Context, db: SampleDB) -> list[str]:
    """The names of this database's upgrade and thaw Jobs that have not finished, sorted."""
    out = []
    for component in ("upgrade", "thaw"):
        selector = {d.DATABASE_LABEL: db.metadata.name, d.COMPONENT_LABEL: component}
        for job in ctx.caches.jobs.list(db.metadata.namespace, selector):
            owners = job.get("metadata", {}).get("ownerReferences") or []
            state = job_state(job)
            if any(o.get("uid") == db.metadata.uid for o in owners) and state is not None and not state.finished:
                out.append(str(job["metadata"]["name"]))
    return sorted(out)


async def _start_job(ctx: Context, db: SampleDB, name: str, data_dir: str) -> None:
    try:
        await ctx.apis["Job"].create(up.upgrade_job(db, name=name, data_dir=data_dir))
    except Conflict:
        return
    await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "UpgradeJobCreated",
                    f"created upgrade Job {name} (data into {data_dir})")


async def _thaw(ctx: Context, db: SampleDB, upgrade_job: str) -> None:
    """After a failed upgrade Job, make the old server writable again (once per attempt): the Job's
    script undoes its freeze itself unless it was killed (SIGKILL, deadline)."""
    name = names.fit(upgrade_job, "-thaw")
    if ctx.cached("Job", db.metadata.namespace, name) is not None:
        return
    try:
        await ctx.apis["Job"].create(jobs.job(db, name=name, component="thaw", script="thaw.sh"))
    except Conflict:
        return
    await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "ThawJobCreated",
                    f"created Job {name}: the old server accepts writes again after the failed upgrade")


def _observe_duration(ctx: Context, db: SampleDB, cond: Condition, kind: up.Kind) -> None:
    """Record the upgrade's duration once, when Upgrading turns from True to UpgradeSucceeded."""
    old = get_condition(db.status.conditions, "Upgrading")
    if cond.reason != "UpgradeSucceeded" or old is None or old.status != "True" or old.last_transition_time is None:
        return
    seconds = (ctx.clock.now() - old.last_transition_time).total_seconds()
    metrics.upgrade_duration_seconds.labels(kind=kind.value).observe(max(seconds, 0.0))
