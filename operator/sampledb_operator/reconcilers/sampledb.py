"""The SampleDB reconciler: cache -> decide -> apply -> status -> Result, for one database.

Level-based and restart-safe: every call reads the caches, decides with the pure functions of
decide/, makes only the writes the plan asks for, and writes the status only when it changed. It
keeps no state between calls beyond what the cluster holds, never sleeps, and never calls another
reconciler. Secrets are created once and never overwritten, and their values never reach a log,
an event or the status.
"""

from __future__ import annotations

import secrets as pysecrets
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sampledb_operator import dataplane
from sampledb_operator.decide import desired as d
from sampledb_operator.decide import jobs, lifecycle, plan, restore
from sampledb_operator.decide import status as st
from sampledb_operator.decide import volumes as vol
from sampledb_operator.kube.errors import ApiError, Conflict, NamespaceTerminating, NotFound
from sampledb_operator.kube.resources import (
    CONFIGMAP,
    JOB,
    POD,
    PVC,
    SAMPLEDB,
    SAMPLEDBBACKUP,
    SECRET,
    SERVICE,
    STATEFULSET,
    Resource,
)
from sampledb_operator.model import names
from sampledb_operator.model.conditions import get_condition
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.sampledb import Phase, Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION, dump
from sampledb_operator.model.validation import validate_spec
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers import (
    chaos,
    deletion,
    migrations,
    reload,
    replication,
    schedule,
    upgrade,
    verification,
    volumes,
)
from sampledb_operator.reconcilers.context import Context, EventType
from sampledb_operator.reconcilers.job_ttl import expire_finished_jobs
from sampledb_operator.runtime.controller import Result, combine

log = get_logger(__name__)

Obj = dict[str, Any]
PASSWORD_BYTES = 24
CREATE_ONLY = frozenset({"Secret", "Job"})


@dataclass(frozen=True, slots=True)
class StatusWrite:
    """The outcome of a status write: the SampleDB's resourceVersion afterwards (None: gone or stale),
    and whether the write was refused because the object had changed since the pass read it."""

    resource_version: str | None
    stale: bool = False


class SampleDBReconciler:
    """Drives one SampleDB to its declared state; `await reconciler(ref)` is one pass."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.caches = ctx.caches
        self.clock = ctx.clock
        self.apis = ctx.apis
        self.field_manager = ctx.field_manager
        self._scripts = dataplane.all_scripts()

    async def __call__(self, ref: ObjectRef) -> Result | None:
        obj = self.caches.sampledbs.get(ref)
        if obj is None:
            return None  # gone: the finalizer's steps and the garbage collector have done their work
        return await self._reconcile(obj)

    # ------------------------------------------------------------------ one pass

    async def _reconcile(self, obj: Obj) -> Result | None:
        try:
            db = SampleDB.model_validate(obj)
        except ValidationError as exc:
            await self._invalid_object(obj, exc)
            return None
        if db.metadata.deletion_timestamp is not None:
            return await deletion.finalize(self.ctx, db)
        if lifecycle.FINALIZER not in db.metadata.finalizers and not db.spec.paused:
            db = await self._add_finalizer(db)
        problems = tuple(validate_spec(db.spec))
        if problems or db.spec.paused:
            written = await self._write_status(db, obj, st.Observed(problems=problems))
            return Result(requeue=True) if written.stale else None
        await chaos.reconcile_chaos(self.ctx, db)  # a one-off fault the sampledb.io/chaos annotation asks for

        observed_children = self._observed_children(db)
        instances = await replication.reconcile_replication(self.ctx, db)
        sts = instances.primary_statefulset
        ready = st.statefulset_ready(sts)
        upgrading = await upgrade.reconcile_upgrade(self.ctx, db, sts, ready, major_blocked=_major_blocked(instances))
        degraded: list[Problem] = [*upgrading.degraded, *instances.problems]
        await self._ensure_secret(db, observed_children, degraded)
        live_volumes = await self._apply_children(db, observed_children, degraded, upgrading.running, instances)
        # An accepted empty data volume is a new, empty database: its migrations are applied again.
        emptied = vol.DATA in vol.accepted(db.metadata.annotations) & live_volumes
        await self._disown(db, observed_children)

        blockers: list[Problem] = []
        init_job, init_changed = await self._ensure_init_job(db, ready, blockers)
        migration = await migrations.reconcile_migrations(self.ctx, db, db_ready=ready, blocked=upgrading.busy)
        degraded += migration.degraded
        reloaded = await reload.reconcile_reload(self.ctx, db, db_ready=ready, busy=upgrading.busy,
                                                 statefulset_existed=sts is not None)
        degraded += reloaded.degraded
        busy = Phase.UPGRADING if upgrading.busy else (Phase.MIGRATING if migration.busy else None)
        verified = await verification.reconcile_verification(self.ctx, db)
        backups = await schedule.reconcile_schedule(self.ctx, db, db_ready=ready, busy=busy is not None,
                                                    verification=verified.condition)
        observed = st.Observed(
            extra_conditions=(*((upgrading.condition,) if upgrading.condition else ()), *migration.conditions,
                              *((backups.condition,) if backups.condition else ())),
            last_backup=backups.last_backup,
            last_snapshot=backups.last_snapshot,
            applied_migrations=() if emptied else migration.applied,
            applied_parameters=reloaded.applied,
            busy_phase=busy,
            running_version=upgrade.sts_version(sts) if ready else None,
            statefulset=sts,
            pvc=self.ctx.cached("PersistentVolumeClaim", db.metadata.namespace, names.data_pvc_name(db.metadata.name)),
            init_job=init_job,
            secret_exists=(("Secret", names.secret_name(db.metadata.name)) in observed_children),
            blockers=tuple(blockers),
            degraded=tuple(degraded),
            init_changed=init_changed,
            replication=st.ReplicationRecord(instances.primary, instances.target, instances.ready_instances,
                                             instances.statuses),
        )
        written = await self._write_status(db, obj, observed)
        if written.stale:
            return Result(requeue=True)  # a newer object exists: its pass decides again
        await expire_finished_jobs(self.ctx, db)  # the Jobs whose outcome the status read holds
        await volumes.release_acceptance(self.ctx, db, live_volumes, resource_version=written.resource_version)
        return combine(
            Result(requeue=bool(blockers or migration.requeue or verified.requeue)),  # look again with backoff
            Result(requeue_after=backups.requeue_after),  # the next scheduled backup
            Result(requeue_after=migration.recheck_after),  # a look at the migrations ConfigMap
            Result(requeue_after=instances.requeue_after),  # replication positions, a failover's next step
        )

    # ------------------------------------------------------------------ children

    def _observed_children(self, db: SampleDB) -> dict[plan.Key, Obj]:
        """This database's children in the caches: the long-lived ones by name (they carry no
        ownerReference, only the database label), its Jobs by owner."""
        out: dict[plan.Key, Obj] = {}
        for kind, name in deletion.unowned_children(db):
            found = self.ctx.cached(kind, db.metadata.namespace, name)
            if found is not None and (found["metadata"].get("labels") or {}).get(d.DATABASE_LABEL) == db.metadata.name:
                out[(kind, name)] = found
        for kind in ("StatefulSet", "PersistentVolumeClaim"):  # every instance's
            for child in self.caches.for_kind(kind).list(db.metadata.namespace, {d.DATABASE_LABEL: db.metadata.name}):
                out[plan.key_of(child)] = child
        for child in self.caches.jobs.by_owner(db.metadata.uid or ""):
            out[plan.key_of(child)] = child
        return out

    async def _ensure_secret(self, db: SampleDB, observed: dict[plan.Key, Obj], degraded: list[Problem]) -> None:
        key = ("Secret", names.secret_name(db.metadata.name))
        if key in observed:
            return
        if ("PersistentVolumeClaim", names.data_pvc_name(db.metadata.name)) in observed:
            # The data was initialised with the old password; a new one would lock clients out.
            degraded.append(Problem(
                "CredentialsMissing",
                f"Secret {key[1]} was deleted after the database was created; restore it (the data"
                " volume holds the old password), or delete the SampleDB",
                "status.secretName",
            ))
            return
        body = d.secret(db, pysecrets.token_urlsafe(PASSWORD_BYTES))
        try:
            await self.apis["Secret"].create(body)
            await self._event(db, "Normal", "CreatedSecret", f"created credentials Secret {key[1]}")
        except Conflict:
            pass  # created by an earlier pass whose watch event has not arrived yet

    async def _apply_children(self, db: SampleDB, observed: dict[plan.Key, Obj], degraded: list[Problem],
                              running: d.Running,
                              instances: replication.ReplicationOutcome | None = None) -> frozenset[str]:
        """Apply what the plan asks for; the roles of the volumes that exist (and are not being deleted) after it.
        `instances`: the instances decide/replication.py chose (None: the first one only)."""
        inputs = d.Inputs(db=db, scripts=self._scripts, running=running)
        if instances is not None:
            inputs = d.Inputs(db=db, scripts=self._scripts, running=running, instances=instances.instances,
                              skip_volumes=instances.skip_volumes)
        volume_states = volumes.states(self.ctx, db, observed)
        accept = vol.accepted(db.metadata.annotations)
        verdicts = {key: vol.verdict(state, accept, db.metadata.name) for key, state in volume_states.items()}
        degraded += [v.problem for v in verdicts.values() if v.problem is not None]
        live = {volume_states[key].role for key, v in verdicts.items()
                if v.write and volume_states[key].present and not volume_states[key].terminating}
        for action in plan.plan(d.children(inputs), observed, create_only=CREATE_ONLY,
                                keep_size=vol.sizes_kept(db)):
            kind, name = action.key
            have = observed.get(action.key)
            verdict = verdicts.get(action.key)
            if verdict is not None and not verdict.write:
                continue  # a volume being deleted or lost: never written (see decide/volumes.py)
            if kind == "PersistentVolumeClaim" and have is not None and plan.pvc_needs_expansion(action.obj, have):
                problem = await self._expansion_problem(db, have)
                if problem is not None:
                    degraded.append(problem)
                    continue
            try:
                await self.apis[kind].apply(action.obj, field_manager=self.field_manager)
            except ApiError as exc:
                terminating = isinstance(exc, NamespaceTerminating)  # for the controller: not a volume problem
                if kind == "PersistentVolumeClaim" and exc.status in (403, 422) and not terminating:
                    volume, field = vol.what(db, name)
                    degraded.append(Problem("StorageExpansionFailed", f"{volume}: {exc.message}", field))
                    continue
                if exc.status == 422:  # the API server refuses what this spec asks for: say so in the status
                    degraded.append(Problem("ChildRejected", f"{kind} {name} refused: {exc.message}", "spec"))
                    continue
                raise
            created = have is None
            log.info("applied child", kind=kind, child=name, reason=action.reason)
            await self._event(db, "Normal", f"{'Created' if created else 'Updated'}{kind}",
                              action.reason if not created else f"created {kind} {name}")
            if verdict is not None:
                live.add(volume_states[action.key].role)
                if verdict.creates_empty:
                    await self._event(db, "Warning", "EmptyVolumeCreated",
                                      f"created an empty {volume_states[action.key].role} volume {name} in place of"
                                      f" the lost one, as the {vol.ACCEPT_EMPTY_ANNOTATION} annotation accepts")
        return frozenset(live)

    async def _disown(self, db: SampleDB, observed: dict[plan.Key, Obj]) -> None:
        """Remove a SampleDB ownerReference from a long-lived child (objects made by an earlier version
        of the operator carried one): the garbage collector must never delete them."""
        for kind, name in deletion.unowned_children(db):
            child = observed.get((kind, name))
            refs = (child or {}).get("metadata", {}).get("ownerReferences") or []
            if not any(r.get("kind") == "SampleDB" for r in refs):
                continue
            keep = [r for r in refs if r.get("kind") != "SampleDB"]
            await self.apis[kind].patch(name, {"metadata": {"ownerReferences": keep or None}},
                                        namespace=db.metadata.namespace)
            log.info("removed the SampleDB ownerReference", kind=kind, child=name)

    async def _expansion_problem(self, db: SampleDB, pvc: Obj) -> Problem | None:
        """Why the PVC's StorageClass cannot expand it, or None when it can; the message names the volume."""
        volume, field = vol.what(db, str(pvc.get("metadata", {}).get("name", "")))
        cls_name = pvc.get("spec", {}).get("storageClassName")
        if not cls_name:
            return Problem("StorageExpansionUnsupported", f"{volume} has no StorageClass; it cannot be expanded",
                           field)
        try:
            sc = await self.apis["StorageClass"].get(cls_name)
        except NotFound:
            return Problem("StorageExpansionUnsupported", f"{volume}: StorageClass {cls_name} does not exist",
                           field)
        if not sc.get("allowVolumeExpansion"):
            return Problem("StorageExpansionUnsupported",
                           f"{volume}: StorageClass {cls_name} does not allow volume expansion"
                           " (allowVolumeExpansion is not true); the volume keeps its size", field)
        return None

    # ------------------------------------------------------------------ init

    async def _ensure_restore_job(self, db: SampleDB, db_ready: bool, blockers: list[Problem]) -> Obj | None:
        """The restore Job of spec.restore (created once the new database is ready and the backup is)."""
        ns = db.metadata.namespace
        job = self.ctx.cached("Job", ns, restore.restore_job_name(db))
        if job is not None or self._init_done(db):
            return job
        assert db.spec.restore is not None
        backup = self.ctx.cached("SampleDBBackup", ns, db.spec.restore.backup_name)
        problem = restore.source_problem(db, backup)
        if problem is not None:
            blockers.append(problem)
            return None
        if not db_ready:
            return None
        assert backup is not None
        body = restore.restore_job(db, backup)
        try:
            await self.apis["Job"].create(body)
            job_name = body["metadata"]["name"]
            await self._event(db, "Normal", "CreatedRestoreJob",
                              f"restoring SampleDBBackup {db.spec.restore.backup_name} with Job {job_name}")
        except Conflict:
            pass
        return None

    async def _ensure_init_job(self, db: SampleDB, db_ready: bool, blockers: list[Problem]) -> tuple[Obj | None, bool]:
        """The init Job (created once the database is ready and the SQL's source exists); for a database
        created from a backup, the restore Job instead (the init SQL is not run then)."""
        if db.spec.restore is not None:
            return await self._ensure_restore_job(db, db_ready, blockers), False
        body = jobs.init_job(db)
        if body is None:
            return None, False
        name = body["metadata"]["name"]
        job = self.ctx.cached("Job", db.metadata.namespace, name)
        if job is not None:
            ran = (job.get("metadata", {}).get("annotations") or {}).get(d.INIT_SOURCE_ANNOTATION)
            return job, ran != jobs.init_source(db)
        if st.job_state(job) is None and self._init_done(db):
            return None, False  # the Job was removed after it succeeded; it is never run again
        problem = await self._init_source_problem(db)
        if problem is not None:
            blockers.append(problem)
            return None, False
        if not db_ready:
            return None, False
        try:
            await self.apis["Job"].create(body)
            await self._event(db, "Normal", "CreatedInitJob", f"created init Job {name}")
        except Conflict:
            pass
        return None, False

    def _init_done(self, db: SampleDB) -> bool:
        cond = get_condition(db.status.conditions, "Initialized")
        return cond is not None and cond.status == "True" and cond.reason in st.DONE_REASONS

    async def _init_source_problem(self, db: SampleDB) -> Problem | None:
        init = db.spec.init
        if init is None:
            return None
        ref = init.config_map_key_ref or init.secret_key_ref
        assert ref is not None
        kind = "ConfigMap" if init.config_map_key_ref is not None else "Secret"
        try:
            source: Obj | None = await self.apis[kind].get(ref.name, db.metadata.namespace)
        except NotFound:
            source = None
        return jobs.init_source_problem(db, source)

    # ------------------------------------------------------------------ deletion

    async def _add_finalizer(self, db: SampleDB) -> SampleDB:
        """Add the finalizer (Conflict on a stale object: the pass is retried); the SampleDB with the
        resourceVersion it has now, so the pass's later writes carry the right precondition."""
        patch = {"metadata": {"finalizers": [*db.metadata.finalizers, lifecycle.FINALIZER],
                              "resourceVersion": db.metadata.resource_version}}
        answer = await self.apis["SampleDB"].patch(db.metadata.name, patch, namespace=db.metadata.namespace)
        rv = (answer.get("metadata") or {}).get("resourceVersion")
        meta = db.metadata.model_copy(update={"finalizers": [*db.metadata.finalizers, lifecycle.FINALIZER],
                                              "resource_version": rv or db.metadata.resource_version})
        return db.model_copy(update={"metadata": meta})

    # ------------------------------------------------------------------ status and events

    async def _write_status(self, db: SampleDB, obj: Obj, observed: st.Observed) -> StatusWrite:
        """Write the whole status when it changed, on the condition that the object is the one this pass
        read (its resourceVersion): a pass on a stale cache gets Conflict and writes nothing, so it can
        never put back older fields (appliedMigrations, currentVersion) over a newer pass's. Transition
        events follow a successful write only."""
        new = st.compute(db, observed, self.clock.now())
        if not st.status_changed(db.status, new):
            return StatusWrite(db.metadata.resource_version)
        status = dump(new)
        status.update({k: None for k in st.CLEARABLE if k in dump(db.status) and k not in status})  # merge patch
        body = {"metadata": {"resourceVersion": db.metadata.resource_version}, "status": status}
        try:
            answer = await self.apis["SampleDB"].patch(db.metadata.name, body, namespace=db.metadata.namespace,
                                                       subresource="status")
        except NotFound:
            return StatusWrite(None)
        except Conflict:
            log.info("status not written: the SampleDB changed since it was read; looking again",
                     namespace=db.metadata.namespace, name=db.metadata.name)
            return StatusWrite(None, stale=True)
        await self._transition_events(db, new)
        return StatusWrite(str((answer.get("metadata") or {}).get("resourceVersion") or "") or None)

    async def _transition_events(self, db: SampleDB, new: Any) -> None:
        for cond in new.conditions:
            old = get_condition(db.status.conditions, cond.type)
            if old is not None and old.status == cond.status and old.reason == cond.reason:
                continue
            if cond.type == "Ready" and cond.status == "True":
                await self._event(db, "Normal", "DatabaseReady", cond.message)
            elif (cond.type, cond.status) in (("Degraded", "True"), ("SpecValid", "False")):
                await self._event(db, "Warning", cond.reason, cond.message)
            elif cond.type == "Initialized" and (
                    old is None or old.status != cond.status
                    or cond.reason in ("InitSourceMissing", "InitSecretNotOptedIn", "InitChangedNotRerun")):
                if cond.status == "True":
                    await self._event(db, "Normal", cond.reason, cond.message)
                elif cond.reason in ("InitSourceMissing", "InitSecretNotOptedIn", "InitFailed", "RestoreFailed",
                                     "RestoreSourceMissing", "RestoreSourceNotReady"):
                    await self._event(db, "Warning", cond.reason, cond.message)
            elif cond.type == "Upgrading":
                failed = cond.reason in ("UpgradeFailed", "DowngradeRefused")
                await self._event(db, "Warning" if failed else "Normal", cond.reason, cond.message)
            elif cond.type == "Progressing" and cond.reason == "Paused":
                await self._event(db, "Normal", "Paused", cond.message)

    async def _event(self, db: SampleDB, type_: EventType, reason: str, message: str) -> None:
        await self.ctx.event(db.metadata, API_VERSION, "SampleDB", type_, reason, message)

    async def _invalid_object(self, obj: Obj, exc: ValidationError) -> None:
        """An object the models cannot read (admission should have stopped it): say so in status."""
        meta = obj.get("metadata", {})
        errors = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        log.warning("unreadable SampleDB", namespace=meta.get("namespace"), name=meta.get("name"), errors=errors)
        current = obj.get("status") or {}
        if current.get("phase") == "Failed" and any(
                c.get("reason") == "UnreadableSpec" for c in current.get("conditions") or []):
            return
        now = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        cond = {"type": "SpecValid", "status": "False", "reason": "UnreadableSpec", "message": errors[:1000],
                "lastTransitionTime": now, "observedGeneration": meta.get("generation")}
        ready = {**cond, "type": "Ready", "reason": "InvalidSpec"}
        try:
            await self.apis["SampleDB"].patch(
                meta["name"], {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                               "status": {"phase": "Failed", "conditions": [cond, ready]}},
                namespace=meta.get("namespace"), subresource="status")
        except (NotFound, Conflict):
            return  # gone, or changed since read: the next pass looks at the newer object


def watched_resources() -> list[tuple[Resource, str | None]]:
    """Every kind the operator caches, with the server-side label selector it uses."""
    return [
        (SAMPLEDB, None),
        (SAMPLEDBBACKUP, None),
        (STATEFULSET, d.MANAGED_SELECTOR),
        (PVC, d.MANAGED_SELECTOR),
        (JOB, d.MANAGED_SELECTOR),
        (SERVICE, d.MANAGED_SELECTOR),
        (CONFIGMAP, d.MANAGED_SELECTOR),
        (SECRET, d.MANAGED_SELECTOR),
        (POD, f"{d.MANAGED_SELECTOR},{d.COMPONENT_LABEL}=database"),  # the database pods, not the Jobs'
    ]


def _major_blocked(instances: replication.ReplicationOutcome) -> str | None:
    """Why a major upgrade cannot start now: it rewrites instance 0's volume, so it needs one instance, the
    primary on instance 0 (standbys would need a new clone of the new major)."""
    if len(instances.instances) > 1 or instances.target is not None:
        return ("a major-version upgrade runs with one instance: set spec.replicas to 1 (the standbys are removed),"
                " then raise spec.version, then scale up again")
    if instances.instances and instances.instances[0].index != 0:
        return (f"a major-version upgrade rewrites the first instance's volume, but {instances.primary} is the"
                " primary: switch over to the first instance (annotation sampledb.io/switchover) first")
    return None
