"""The init step of a SampleDB: the init Job that runs spec.init's SQL, or the restore Job of spec.restore.

One Job per database, created once the database is ready and its source exists (the init SQL's
ConfigMap or Secret, the restore's SampleDBBackup); never run again once Initialized says it is done.
The step returns what it found (the Job, whether spec.init changed since it ran, why it waits) for
the status; it writes nothing but the Job and its Event.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide import desired as d
from sampledb_operator.decide import jobs, restore
from sampledb_operator.decide import status as st
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.reconcilers.context import Context


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


async def reconcile_init(ctx: Context, db: SampleDB, *, db_ready: bool) -> InitOutcome:
    """The init Job (created once the database is ready and the SQL's source exists); for a database
    created from a backup, the restore Job instead (the init SQL is not run then)."""
    if db.spec.restore is not None:
        return await _restore(ctx, db, db_ready=db_ready)
    body = jobs.init_job(db)
    if body is None:
        return InitOutcome()
    name = body["metadata"]["name"]
    job = ctx.cached("Job", db.metadata.namespace, name)
    if job is not None:
        ran = (job.get("metadata", {}).get("annotations") or {}).get(d.INIT_SOURCE_ANNOTATION)
        return InitOutcome(job=job, changed=ran != jobs.init_source(db))
    if st.init_done(db.status):
        return InitOutcome()  # the Job was removed after it succeeded; it is never run again
    if not db_ready:
        return InitOutcome()  # the SQL's source is read (a live GET) only when the Job could start
    problem = await _init_source_problem(ctx, db)
    if problem is not None:
        return InitOutcome(blockers=(problem,))
    try:
        created = await ctx.apis["Job"].create(body)
    except Conflict:
        return InitOutcome()  # made by an earlier pass whose watch event has not arrived
    await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "CreatedInitJob", f"created init Job {name}")
    return InitOutcome(job=created)  # the status says it runs now, not a pass later


async def _restore(ctx: Context, db: SampleDB, *, db_ready: bool) -> InitOutcome:
    """The restore Job of spec.restore (created once the new database is ready and the backup is)."""
    ns = db.metadata.namespace
    job = ctx.cached("Job", ns, restore.restore_job_name(db))
    if job is not None or st.init_done(db.status):
        return InitOutcome(job=job)
    assert db.spec.restore is not None
    backup = ctx.cached("SampleDBBackup", ns, db.spec.restore.backup_name)
    problem = restore.source_problem(db, backup)
    if problem is not None:
        return InitOutcome(blockers=(problem,))
    if not db_ready:
        return InitOutcome()
    assert backup is not None
    body = restore.restore_job(db, backup)
    try:
        created = await ctx.apis["Job"].create(body)
    except Conflict:
        return InitOutcome()
    await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "CreatedRestoreJob",
                    f"restoring SampleDBBackup {db.spec.restore.backup_name} with Job {body['metadata']['name']}")
    return InitOutcome(job=created)


async def _init_source_problem(ctx: Context, db: SampleDB) -> Problem | None:
    """Why spec.init's SQL cannot run (its ConfigMap or Secret, read live: the operator does not watch it)."""
    init = db.spec.init
    if init is None:
        return None
    ref = init.config_map_key_ref or init.secret_key_ref
    assert ref is not None
    kind = "ConfigMap" if init.config_map_key_ref is not None else "Secret"
    try:
        source: Obj | None = await ctx.apis[kind].get(ref.name, db.metadata.namespace)
    except NotFound:
        source = None
    return jobs.init_source_problem(db, source)
