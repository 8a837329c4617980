"""The SampleDBBackup reconciler: one Job per backup, its outcome mirrored into the backup's status.

Level-based: a finished backup (Succeeded or Failed) is never touched again. A pending one gets
its Job once the database is Ready (the Job's name is derived from the backup's, so a restart
never starts a second one); a running one reflects its Job. The Job's script writes a JSON
result line to the pod's termination message; size and checksum come from there. A backup whose name
the backup script would refuse (stored before the CRD refused it) fails at once, without a Job.
Every backup, finished or not, gets the label sampledb.io/database=<spec.database>.

This module only reads (the caches; live, the backup volume when it is not cached and the finished
Job's result line, each only when the plan depends on it) and applies: every decision is in
decide/backup/backup_run.py. A plan that patches the backup's metadata is followed, in the same pass, by a
plan made from the patched backup (its later writes need the resourceVersion that patch answers).
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import ValidationError

from sampledb_operator.decide.backup import backup_run as bp
from sampledb_operator.decide.status import job_state
from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability import metrics
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers import backup_files
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import Applied, apply_plan, one_pass
from sampledb_operator.reconcilers.job_result import job_result

log = get_logger(__name__)
FINAL = bp.FINAL


class BackupReconciler:
    """Drives one SampleDBBackup; `await reconciler(ref)` is one pass: read the facts, plan
    (decide/backup/backup_run.py), apply. Nothing is decided here."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def __call__(self, ref: ObjectRef) -> Result | None:
        obj = self.ctx.caches.backups.get(ref)
        if obj is None:
            return None
        try:
            backup = SampleDBBackup.model_validate(obj)
        except ValidationError as exc:
            log.warning("unreadable SampleDBBackup", namespace=ref.namespace, name=ref.name, error=str(exc)[:500])
            return None
        return await one_pass(self._reconcile(backup))

    async def _reconcile(self, backup: SampleDBBackup) -> Result | None:
        if backup.metadata.deletion_timestamp is not None:
            return await backup_files.finalize(self.ctx, backup)
        facts = await self.read_facts(backup)
        for _ in range(bp.MAX_PLANS):
            planned = bp.plan_backup(facts)
            applied = await apply_plan(self.ctx, backup_files.subject(facts.backup), planned.plan, kind=bp.KIND)
            self._observe(planned, applied, facts.backup)
            if planned.patched is None:
                return planned.plan.result
            answer = applied.patched.get((bp.KIND, facts.backup.metadata.name))
            if answer is None:
                return None  # gone, or changed since read (one_pass brings it back)
            facts = replace(facts, backup=bp.with_resource_version(planned.patched, answer))
        return None  # not reached: each metadata plan puts in place what the next one looks for

    async def read_facts(self, backup: SampleDBBackup) -> bp.BackupFacts:
        """What one pass of `backup` reads: the caches, and live the backup volume (when not cached) and
        the finished Job's result line, each only when the plan depends on it."""
        ns = backup.metadata.namespace or ""
        db_obj = self.ctx.cached("SampleDB", ns, backup.spec.database) if bp.database_read_needed(backup) else None
        facts = bp.BackupFacts(
            backup=backup, db=self.ctx.for_jobs(SampleDB.model_validate(db_obj)) if db_obj is not None else None,
            job=job_state(self.ctx.cached("Job", ns, bp.job_name(backup))), now=self.ctx.clock.now())
        if bp.volume_read_needed(facts):
            facts = replace(facts, volume_exists=await backup_files.volume_exists(self.ctx, ns, bp.claim_name(backup)))
        if bp.result_read_needed(facts):
            facts = replace(facts, job_result=await job_result(self.ctx, ns, bp.job_name(backup)))
        return facts

    def _observe(self, planned: bp.BackupPass, applied: Applied, backup: SampleDBBackup) -> None:
        """Count a backup's end once: when this pass's status write recorded it."""
        if planned.counted is None or (bp.KIND, backup.metadata.name) not in applied.patched:
            return
        reason, result = planned.counted
        metrics.backups_total.labels(reason=reason, result=result).inc()
        if planned.snapshot_seconds is not None:
            metrics.snapshot_duration_seconds.observe(planned.snapshot_seconds)


def backups_of(ctx: Context, db_obj: Obj) -> list[ObjectRef]:
    """The unfinished SampleDBBackups of a SampleDB (to look at again when the database changes)."""
    meta = db_obj.get("metadata") or {}
    ns, name = meta.get("namespace") or "", meta.get("name")
    out = []
    for b in ctx.caches.backups.list(ns):
        if (b.get("spec") or {}).get("database") == name and (b.get("status") or {}).get("phase") not in FINAL:
            out.append(ObjectRef(ns, b["metadata"]["name"]))
    return out
