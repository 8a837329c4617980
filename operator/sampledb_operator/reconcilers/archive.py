"""The archive step of a SampleDB: read the facts, plan the pass (decide/backup/archive.py), apply the plan.

Reads: the primary's archiver with one SQL call (only while the database is ready: pg/client.archiver_state),
this database's base backup and recovery verification Jobs from the cache, and the result lines of the finished
ones the status does not hold yet (their pods' termination messages, live). Writes: the Job the plan creates
(a base backup, a verification), and its Event. The status and conditions go back to the SampleDB's pass, which
writes the whole status.
"""

from __future__ import annotations

from sampledb_operator.decide.backup import archive as arc
from sampledb_operator.decide.backup import archive_verify as verify
from sampledb_operator.decide.labels import COMPONENT_LABEL
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.pg import client as pg
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of
from sampledb_operator.reconcilers.job_result import job_result
from sampledb_operator.reconcilers.superuser import credentials


async def read_facts(ctx: Context, db: SampleDB, *, db_ready: bool, primary_index: int,
                     primary_pod: Obj | None) -> arc.ArchiveFacts:
    """What one pass of the archive step reads (see the module docstring)."""
    owned = ctx.caches.jobs.by_owner(db.metadata.uid or "")
    jobs = tuple(j for j in owned if _component(j) == arc.BASE_BACKUP_COMPONENT)
    verify_jobs = tuple(j for j in owned if _component(j) == verify.VERIFY_COMPONENT)
    server = None
    ip = ((primary_pod or {}).get("status") or {}).get("podIP")
    creds = credentials(ctx, db)
    if db_ready and ip and creds is not None:
        server = await pg.archiver_state(pg.Target(str(ip), names.POSTGRES_PORT, *creds))
    ns = db.metadata.namespace or ""
    results = {name: await job_result(ctx, ns, name) for name in arc.results_needed(db, jobs)}
    verify_results = {name: await job_result(ctx, ns, name) for name in verify.results_needed(db, verify_jobs)}
    return arc.ArchiveFacts(db=db, now=ctx.clock.now(), db_ready=db_ready,
                            primary_claim=names.instance_data_pvc_name(db.metadata.name, primary_index),
                            server=server, jobs=jobs, results=results, verify_jobs=verify_jobs,
                            verify_results=verify_results)


async def reconcile_archive(ctx: Context, db: SampleDB, *, db_ready: bool, primary_index: int,
                            primary_pod: Obj | None) -> arc.ArchivePass:
    """Archiving's status and conditions, and the base backup Job that is due (none without
    spec.backup.objectStore)."""
    if db.spec.backup.object_store is None:
        return arc.ArchivePass()
    planned = arc.plan_archive(await read_facts(ctx, db, db_ready=db_ready, primary_index=primary_index,
                                                primary_pod=primary_pod))
    await apply_plan(ctx, subject_of(db), planned.plan)
    return planned


def _component(job: Obj) -> str:
    return str((job["metadata"].get("labels") or {}).get(COMPONENT_LABEL) or "")
