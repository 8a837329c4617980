"""The SampleDBBackup reconciler: one Job per backup, its outcome mirrored into the backup's status.

Level-based: a finished backup (Succeeded or Failed) is never touched again. A pending one gets
its Job once the database is Ready (the Job's name is derived from the backup's, so a restart
never starts a second one); a running one reflects its Job. The Job's script writes a JSON
result line to the pod's termination message; size and checksum come from there. A backup whose name
the backup script would refuse (stored before the CRD refused it) fails at once, without a Job.
Every backup, finished or not, gets the label sampledb.io/database=<spec.database>.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sampledb_operator.decide import jobs
from sampledb_operator.decide.desired import DATABASE_LABEL
from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.status import job_state
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model import names
from sampledb_operator.model.backup import BackupPhase, SampleDBBackup
from sampledb_operator.model.conditions import is_true
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION, dump
from sampledb_operator.model.validation import validate_backup
from sampledb_operator.observability import metrics
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers import backup_files
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.job_result import job_result

log = get_logger(__name__)
FINAL = (BackupPhase.SUCCEEDED.value, BackupPhase.FAILED.value)


class BackupReconciler:
    """Drives one SampleDBBackup; `await reconciler(ref)` is one pass."""

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
        if backup.metadata.deletion_timestamp is not None:
            return await backup_files.finalize(self.ctx, backup)
        labelled = await self._ensure_database_label(backup)
        if labelled is None:
            return None  # changed since read: the newer object's event brings it back
        backup = labelled
        if backup.status.phase in FINAL:
            return None
        problems = validate_backup(backup)  # stored before the CRD refused it: the script would refuse it too
        if problems:
            await self._failed(backup, "; ".join(p.message for p in problems))
            return None
        ns = backup.metadata.namespace or ""
        db_obj = self.ctx.cached("SampleDB", ns, backup.spec.database)
        if db_obj is None:
            await self._status(backup, BackupPhase.PENDING, f"SampleDB {backup.spec.database} does not exist")
            return Result(requeue=True)
        db = SampleDB.model_validate(db_obj)
        claim = backup.spec.storage.claim_name if backup.spec.storage else names.backup_pvc_name(db.metadata.name)
        job_name = names.backup_job_name(db.metadata.name, backup.metadata.name)
        job = self.ctx.cached("Job", ns, job_name)
        if job is None:
            return await self._start(backup, db, claim)
        state = job_state(job)
        assert state is not None
        if not state.finished:
            await self._status(backup, BackupPhase.RUNNING, f"Job {job_name} is running", started=True)
            return None
        result = await self._result(ns, job_name)
        if state.succeeded:
            await self._succeeded(backup, db, claim, result)
        else:
            detail = result.get("message") or state.message
            await self._failed(backup, f"Job {job_name} failed: {state.reason}: {detail}")
        return None

    async def _ensure_database_label(self, backup: SampleDBBackup) -> SampleDBBackup | None:
        """Every backup carries sampledb.io/database=<spec.database> (a manual one may come without it), so
        `kubectl get sdbb -l sampledb.io/database=<db>` lists them all. The backup with the resourceVersion
        it has now; None when it changed since read (Conflict)."""
        if backup.metadata.labels.get(DATABASE_LABEL) == backup.spec.database:
            return backup
        labels = {**backup.metadata.labels, DATABASE_LABEL: backup.spec.database}
        patch = {"metadata": {"labels": {DATABASE_LABEL: backup.spec.database},
                              "resourceVersion": backup.metadata.resource_version}}
        try:
            answer = await self.ctx.apis["SampleDBBackup"].patch(backup.metadata.name, patch,
                                                                 namespace=backup.metadata.namespace)
        except (Conflict, NotFound):
            return None
        rv = (answer.get("metadata") or {}).get("resourceVersion") or backup.metadata.resource_version
        return backup.model_copy(update={"metadata": backup.metadata.model_copy(
            update={"labels": labels, "resource_version": rv})})

    async def _start(self, backup: SampleDBBackup, db: SampleDB, claim: str) -> Result | None:
        ns = backup.metadata.namespace or ""
        # A pre-delete snapshot does not wait for Ready (a database being deleted is not reconciled
        # back to Ready): its Job waits for the server itself and fails visibly if it never answers.
        if backup.spec.reason != "pre-delete" and not is_true(db.status.conditions, "Ready"):
            await self._status(backup, BackupPhase.PENDING, f"waiting for SampleDB {db.metadata.name} to be Ready")
            return None  # the SampleDB's next change brings this backup back (see app.py's mapping)
        if self.ctx.cached("PersistentVolumeClaim", ns, claim) is None:
            try:
                await self.ctx.apis["PersistentVolumeClaim"].get(claim, ns)
            except NotFound:
                await self._status(backup, BackupPhase.PENDING, f"backup volume {claim} does not exist")
                return Result(requeue=True)
        backup = await backup_files.ensure_finalizer(self.ctx, backup)  # before anything can write files
        body = jobs.backup_job(db, backup_name=backup.metadata.name, backup_uid=backup.metadata.uid or "",
                               claim_name=claim)
        try:
            await self.ctx.apis["Job"].create(body)
            await self._event(backup, "Normal", "BackupStarted", f"started Job {body['metadata']['name']}")
        except Conflict:
            pass
        await self._status(backup, BackupPhase.RUNNING, f"Job {body['metadata']['name']} started", started=True)
        return None

    async def _result(self, namespace: str, job_name: str) -> dict[str, Any]:
        """The JSON result line of the Job's last pod (its termination message), or {}."""
        return await job_result(self.ctx, namespace, job_name)

    async def _succeeded(self, backup: SampleDBBackup, db: SampleDB, claim: str, result: dict[str, Any]) -> None:
        reason = str(backup.spec.reason)
        extra: dict[str, Any] = {
            "location": {"pvcName": claim, "path": f"{jobs.BACKUP_MOUNT}/{backup.metadata.name}.dump"},
            "version": db.status.current_version or db.spec.version,
        }
        if isinstance(result.get("size_bytes"), int):
            extra["sizeBytes"] = result["size_bytes"]
        if isinstance(result.get("sha256"), str) and len(result["sha256"]) == 64:
            extra["checksum"] = result["sha256"]
        if not await self._status(backup, BackupPhase.SUCCEEDED, "backup completed", completed=True, extra=extra):
            return  # not this pass's to record (a stale cache): the pass that wrote it counted it
        metrics.backups_total.labels(reason=reason, result="succeeded").inc()
        if reason == "pre-delete" and backup.status.started_at is not None:
            seconds = (self.ctx.clock.now() - backup.status.started_at).total_seconds()
            metrics.snapshot_duration_seconds.observe(max(seconds, 0.0))
        await self._event(backup, "Normal", "BackupSucceeded", f"backup of {db.metadata.name} completed")

    async def _failed(self, backup: SampleDBBackup, message: str) -> None:
        if not await self._status(backup, BackupPhase.FAILED, message, completed=True):
            return
        metrics.backups_total.labels(reason=str(backup.spec.reason), result="failed").inc()
        await self._event(backup, "Warning", "BackupFailed", message)

    async def _status(self, backup: SampleDBBackup, phase: BackupPhase, message: str, *, started: bool = False,
                      completed: bool = False, extra: dict[str, Any] | None = None) -> bool:
        """Write the backup's whole status, on the condition that the object is the one this pass read
        (its resourceVersion); True when this call wrote it. A pass on a stale cache gets Conflict and
        writes nothing: it never rewrites startedAt or records a finished backup a second time."""
        now = self.ctx.clock.now()
        old = dump(backup.status)
        new: dict[str, Any] = {**old, "phase": phase.value, "message": message[:1000],
                               "observedGeneration": backup.metadata.generation}
        if started and "startedAt" not in new:
            new["startedAt"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        if completed:
            new["completedAt"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        new.update(extra or {})
        if new == old:
            return False
        body = {"metadata": {"resourceVersion": backup.metadata.resource_version}, "status": new}
        try:
            await self.ctx.apis["SampleDBBackup"].patch(backup.metadata.name, body,
                                                         namespace=backup.metadata.namespace, subresource="status")
        except (NotFound, Conflict):
            log.info("backup status not written: the object is gone or changed since it was read",
                     namespace=backup.metadata.namespace, name=backup.metadata.name)
            return False
        return True

    async def _event(self, backup: SampleDBBackup, type_: EventType, reason: str, message: str) -> None:
        await self.ctx.event(backup.metadata, API_VERSION, "SampleDBBackup", type_, reason, message)


def backups_of(ctx: Context, db_obj: Obj) -> list[ObjectRef]:
    """The unfinished SampleDBBackups of a SampleDB (to look at again when the database changes)."""
    meta = db_obj.get("metadata") or {}
    ns, name = meta.get("namespace") or "", meta.get("name")
    out = []
    for b in ctx.caches.backups.list(ns):
        if (b.get("spec") or {}).get("database") == name and (b.get("status") or {}).get("phase") not in FINAL:
            out.append(ObjectRef(ns, b["metadata"]["name"]))
    return out
