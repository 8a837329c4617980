"""The SampleDB reconciler: cache -> decide -> apply -> status -> Result, for one database.

Level-based and restart-safe: every call reads the caches, decides with the pure functions of
decide/, makes only the writes the plan asks for, and writes the status only when it changed. It
keeps no state between calls beyond what the cluster holds, never sleeps, and never calls another
reconciler. Secrets are created once and never overwritten, and their values never reach a log,
an event or the status.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from sampledb_operator import dataplane
from sampledb_operator.decide import events
from sampledb_operator.decide import status as st
from sampledb_operator.decide.cache import DigestedData
from sampledb_operator.decide.children import archive_config
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.children import volumes as vol
from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.labels import COMPONENT_LABEL, MANAGED_SELECTOR
from sampledb_operator.decide.lifecycle import lifecycle
from sampledb_operator.decide.replicas import hibernation as hib
from sampledb_operator.decide.replicas import replication as rep
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.kube.resources import (
    CONFIGMAP,
    DEPLOYMENT,
    JOB,
    PDB,
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
from sampledb_operator.model.conditions import ConditionType, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.result import Result, combine
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.sampledb_status import Phase, SampleDBStatus
from sampledb_operator.model.schema import API_VERSION, dump
from sampledb_operator.model.validation import validate_spec
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers import (
    archive,
    autogrow,
    chaos,
    children,
    credential_secrets,
    deletion,
    hibernation,
    init,
    maintenance,
    migrations,
    reload,
    replication,
    schedule,
    sql_objects,
    stuck,
    tls,
    upgrade,
    verification,
    volumes,
)
from sampledb_operator.reconcilers import rollout as rolling
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import one_pass, write_refused
from sampledb_operator.reconcilers.job_ttl import expire_finished_jobs

log = get_logger(__name__)
STATUS_RECHECK_SECONDS = 0.05  # a pass that changed the status looks again this soon


@dataclass(frozen=True, slots=True)
class StatusWrite:
    """The outcome of a status write: the SampleDB's resourceVersion afterwards (None: gone or stale),
    and whether the write was refused because the object had changed since the pass read it."""

    resource_version: str | None
    stale: bool = False
    status: SampleDBStatus | None = None  # the status the object has now (None: gone or stale)
    changed: bool = False  # this pass wrote a new status


class SampleDBReconciler:
    """Drives one SampleDB to its declared state; `await reconciler(ref)` is one pass."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.caches = ctx.caches
        self.clock = ctx.clock
        self.apis = ctx.apis
        self.field_manager = ctx.field_manager
        self._scripts = DigestedData(dataplane.all_scripts())  # digested once (plan.drift)

    async def __call__(self, ref: ObjectRef) -> Result | None:
        obj = self.caches.sampledbs.get(ref)
        if obj is None:
            return None  # gone: the finalizer's steps and the garbage collector have done their work
        return await one_pass(self._reconcile(obj))

    # ------------------------------------------------------------------ one pass

    async def _reconcile(self, obj: Obj) -> Result | None:
        try:
            db = self.ctx.for_jobs(SampleDB.model_validate(obj))  # testing.sampledb.io/: with --test-hooks only
        except ValidationError as exc:
            await self._invalid_object(obj, exc)
            return None
        if db.metadata.deletion_timestamp is not None:
            return await deletion.finalize(self.ctx, db)
        own = lifecycle.own_metadata(db.metadata.namespace or "", db.metadata.name, db.metadata.finalizers,
                                     db.metadata.labels, paused=db.spec.paused, bucket=self.ctx.label_buckets)
        if own:
            with_own = await self._add_own_metadata(db, own)
            if with_own is None:
                return None  # refused (changed since read, or gone): one_pass looks again
            db = with_own
        problems = tuple(validate_spec(db.spec))
        credentials = () if problems or db.spec.paused else await self._credentials_problems(db)
        if problems or credentials or db.spec.paused:
            written = await self._write_status(db, obj, st.Observed(problems=problems or credentials))
            # the stores' Secrets are not watched: look again with backoff until they are usable
            return Result(requeue=True) if written.stale or credentials else None
        asked, hibernate_wait = hibernation.asked(self.ctx, db)
        if asked is True and hibernate_wait is None:
            return await self._hibernate(db, obj)
        await chaos.reconcile_chaos(self.ctx, db)  # a one-off fault the sampledb.io/chaos annotation asks for

        observed_children = children.observed_children(self.ctx, db)
        instances = await maintenance.reconcile_maintenance(  # and the primary off a cordoned node
            self.ctx, db, await replication.reconcile_replication(self.ctx, db, starting=hib.waking(db.status)))
        sts = instances.primary_statefulset
        primary_index, primary_pod = self._primary(db, instances.primary)
        ready = st.database_ready(sts, primary_pod)
        upgrading = await upgrade.reconcile_upgrade(self.ctx, db, sts, ready,
                                                    major_blocked=_major_blocked(db.metadata.name, instances))
        secret = await credential_secrets.ensure_secret(self.ctx, db, observed_children)
        served = await tls.reconcile_tls(self.ctx, db, db_ready=ready, primary_pod=primary_pod)  # before the pods
        await tls.sync_connection_uri(self.ctx, db, served.condition or get_condition(
            db.status.conditions, ConditionType.ENCRYPTED.value))
        applied = await children.apply_children(self.ctx, db, observed_children, d.Inputs(
            db=db, scripts=self._scripts, running=upgrading.running,
            instances=upgrade.stopped(instances.instances) if upgrading.stop else instances.instances,
            skip_volumes=instances.skip_volumes,
            replica_service=children.replica_service_made(db, observed_children), ca_cert=served.ca_cert,
            served_certificate=served.served),
            created_before=secret.created,
            instances=None if upgrading.stop else rolling.view(self.ctx, db, instances))
        # An accepted empty data volume is a new, empty database: its migrations are applied again.
        emptied = vol.DATA in vol.accepted(db.metadata.annotations) & applied.live_volumes
        await children.disown(self.ctx, db, observed_children)
        await children.retire_legacy_scripts(self.ctx, db, observed_children)

        initialized = await init.reconcile_init(self.ctx, db, db_ready=ready)
        declared = await sql_objects.reconcile_declared(self.ctx, db, db_ready=ready, primary_pod=primary_pod)
        migration = await migrations.reconcile_migrations(self.ctx, db, db_ready=ready, blocked=upgrading.busy)
        reloaded = await reload.reconcile_reload(self.ctx, db, db_ready=ready, busy=upgrading.busy,
                                                 statefulset_existed=sts is not None)
        stuck_now = await stuck.stuck_problems(self.ctx, db)
        grown = await autogrow.reconcile_autogrow(self.ctx, db, db_ready=ready, primary_pod=primary_pod,
                                                  full_pods=stuck_now.full_pods)
        hibernated = hib.condition(db.status, asked=asked is True, wait_for=hibernate_wait, primary_ready=ready,
                                   stopping=0, generation=db.metadata.generation)
        degraded = (*((asked,) if isinstance(asked, Problem) else ()),
                    *upgrading.degraded, *instances.problems, *secret.problems, *applied.problems,
                    *migration.degraded, *reloaded.degraded, *stuck_now.problems, *grown.problems,
                    *served.problems, *declared.problems)
        busy = Phase.UPGRADING if upgrading.busy else (Phase.MIGRATING if migration.busy else None)
        verified = await verification.reconcile_verification(self.ctx, db)
        backups = await schedule.reconcile_schedule(self.ctx, db, db_ready=ready, busy=busy is not None,
                                                    verification=verified.condition)
        archived = await archive.reconcile_archive(self.ctx, db, db_ready=ready, primary_index=primary_index,
                                                   primary_pod=primary_pod)
        observed = st.Observed(
            extra_conditions=(*((upgrading.condition,) if upgrading.condition else ()), *migration.conditions,
                              *((hibernated,) if hibernated else ()),
                              *((served.condition,) if served.condition else ()),
                              *((backups.condition,) if backups.condition else ()), *archived.conditions,
                              *((applied.condition,) if applied.condition else ()),
                              *((declared.pooler.condition,) if declared.pooler.condition else ())),
            archive=archived.status,
            roles=declared.roles.statuses,
            roles_applied=declared.roles.applied,
            databases=declared.databases.statuses,
            databases_applied=declared.databases.applied,
            pooler_applied=declared.pooler.applied,
            monitoring_applied=declared.monitoring.applied,
            app_role_applied=declared.app_role.applied,
            last_backup=backups.last_backup,
            last_snapshot=backups.last_snapshot,
            applied_migrations=() if emptied else migration.applied,
            applied_parameters=reloaded.applied,
            busy_phase=busy,
            running_version=upgrade.sts_version(sts) if ready else None,
            statefulset=sts if sts is not None else self._made_statefulset(db, primary_index),
            pod=primary_pod,
            pvc=self.ctx.cached("PersistentVolumeClaim", db.metadata.namespace, names.data_pvc_name(db.metadata.name)),
            init_job=initialized.job,
            secret_exists=(("Secret", names.secret_name(db.metadata.name)) in observed_children),
            blockers=initialized.blockers,
            degraded=degraded,
            init_changed=initialized.changed,
            replication=st.ReplicationRecord(instances.primary, instances.target, instances.ready_instances,
                                             instances.statuses, instances.pooler_pause),
        )
        written = await self._write_status(db, obj, observed)
        if written.stale:
            return Result(requeue=True)  # a newer object exists: its pass decides again
        if written.status is not None:  # the Jobs whose outcome the status holds now, in this very pass
            await expire_finished_jobs(self.ctx, db.model_copy(update={"status": written.status}))
        await volumes.release_acceptance(self.ctx, db, applied.live_volumes, resource_version=written.resource_version)
        # The steps read the status (Initialized, Ready, currentVersion, appliedParameters, the primary...): a pass
        # that changed what they read looks once more, so a step waiting for what this pass recorded goes on; a
        # pass that only reported progress (the phase, Ready's reason) does not. (Its own status event does not
        # wake the controller: see runtime/triggers.unless_own_write.)
        recheck = (Result(requeue_after=STATUS_RECHECK_SECONDS)
                   if written.changed and written.status is not None
                   and st.steps_may_read_the_change(db.status, written.status) else None)
        # a claim's binding, a podless instance, a volume to measure, a certificate to look at
        again = (Result(requeue_after=after) for after in (applied.recheck_after, stuck_now.recheck_after,
                                                           grown.recheck_after, served.recheck_after,
                                                           declared.recheck_after)
                 if after is not None)
        return combine(recheck, *again, initialized.result, migration.result,
                       verified.result, backups.result, instances.result, archived.plan.result)

    def _primary(self, db: SampleDB, primary: str | None) -> tuple[int, Obj | None]:
        """The primary's instance index and its pod from the cache."""
        index = rep.index_of(db.metadata.name, primary) or 0
        return index, self.ctx.cached("Pod", db.metadata.namespace, names.instance_pod_name(db.metadata.name, index))

    async def _hibernate(self, db: SampleDB, obj: Obj) -> Result | None:
        """A hibernation pass: the instances stopped (reconcilers/hibernation.py), the status Hibernated, and
        nothing else (no failover, backup, archive or apply of the other children while nothing runs)."""
        stopping = await hibernation.stop(self.ctx, db)
        cond = hib.condition(db.status, asked=True, wait_for=None, primary_ready=False, stopping=stopping,
                             generation=db.metadata.generation)
        written = await self._write_status(db, obj, st.Observed(hibernated=cond))
        return Result(requeue=True) if written.stale else None

    async def _credentials_problems(self, db: SampleDB) -> tuple[Problem, ...]:
        """Why the object stores' access keys cannot be used (decide/children/archive_config.credentials_problems), from
        their Secrets read live; () without spec.backup.objectStore, spec.recovery and (until the restore is done)
        spec.restore.objectStore."""
        restoring = not st.init_done(db.status)
        secrets: dict[str, Obj | None] = {}
        for name in archive_config.credential_secrets(db.spec, restoring=restoring):
            try:
                secrets[name] = await self.apis["Secret"].get(name, db.metadata.namespace)
            except NotFound:
                secrets[name] = None
        return tuple(archive_config.credentials_problems(db.spec, secrets, restoring=restoring)) if secrets else ()

    def _made_statefulset(self, db: SampleDB, index: int) -> Obj | None:
        """Instance `index`'s (the primary's) StatefulSet when this pass has just created it (its answer is in
        the read-your-writes cache), else None: the status describes the children as the pass leaves them, so
        Ready's reason says the pod is awaited (DatabaseNotReady), not that the StatefulSet is still to be made
        (Provisioning). Its readiness is read from the same object (a StatefulSet just created has no ready
        replica)."""
        return self.ctx.cached("StatefulSet", db.metadata.namespace,
                               names.instance_statefulset_name(db.metadata.name, index))

    # ------------------------------------------------------------------ deletion

    async def _add_own_metadata(self, db: SampleDB, own: dict[str, object]) -> SampleDB | None:
        """Add the finalizer and the bucket label (`own`: lifecycle.own_metadata); the SampleDB with them and
        the resourceVersion it has now, so the pass's later writes carry the right precondition. None when
        the write was refused (Conflict on a stale object: recorded on the pass, which looks again) or the
        object is gone: the pass ends there."""
        patch = {"metadata": {**own, "resourceVersion": db.metadata.resource_version}}
        try:
            answer = await self.apis["SampleDB"].patch(db.metadata.name, patch, namespace=db.metadata.namespace)
        except NotFound:
            return None
        except Conflict:
            log.info("finalizer or bucket label not added: the SampleDB changed since it was read; looking again",
                     namespace=db.metadata.namespace, name=db.metadata.name)
            write_refused()
            return None
        meta = answer.get("metadata") or {}
        update = {"finalizers": list(meta.get("finalizers") or []), "labels": dict(meta.get("labels") or {}),
                  "resource_version": meta.get("resourceVersion") or db.metadata.resource_version}
        return db.model_copy(update={"metadata": db.metadata.model_copy(update=update)})

    # ------------------------------------------------------------------ status and events

    async def _write_status(self, db: SampleDB, obj: Obj, observed: st.Observed) -> StatusWrite:
        """Write the whole status when it changed, on the condition that the object is the one this pass
        read (its resourceVersion): a pass on a stale cache gets Conflict and writes nothing, so it can
        never put back older fields (appliedMigrations, currentVersion) over a newer pass's. Transition
        events follow a successful write only."""
        new = st.compute(db, observed, self.clock.now())
        if not st.status_changed(db.status, new):
            return StatusWrite(db.metadata.resource_version, status=db.status)
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
            write_refused()
            return StatusWrite(None, stale=True)
        for event in events.transition_events(db.status, new):
            await self._event(db, event.type, event.reason, event.message)
        return StatusWrite(str((answer.get("metadata") or {}).get("resourceVersion") or "") or None, status=new,
                           changed=True)

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
        except NotFound:
            return
        except Conflict:
            write_refused()  # changed since read: the next pass looks at the newer object


def watched_resources() -> list[tuple[Resource, str | None]]:
    """Every kind the operator caches, with the server-side label selector it uses."""
    return [
        (SAMPLEDB, None),
        (SAMPLEDBBACKUP, None),
        (STATEFULSET, MANAGED_SELECTOR),
        (PVC, MANAGED_SELECTOR),
        (JOB, MANAGED_SELECTOR),
        (SERVICE, MANAGED_SELECTOR),
        (CONFIGMAP, MANAGED_SELECTOR),
        (SECRET, MANAGED_SELECTOR),
        (PDB, MANAGED_SELECTOR),
        (DEPLOYMENT, MANAGED_SELECTOR),
        (POD, f"{MANAGED_SELECTOR},{COMPONENT_LABEL}=database"),  # the database pods, not the Jobs'
    ]


def _major_blocked(db: str, instances: replication.ReplicationOutcome) -> str | None:
    """Why a major upgrade cannot start now: it rewrites instance 0's volume, so the primary must be instance 0
    and no failover or switchover under way. Standbys are stopped with it and, once the new major runs, clone it
    again into the new major's directory on their volumes (dataplane/instance.sh)."""
    if instances.target is not None:
        return (f"a failover or switchover to {instances.target} is under way: the major-version upgrade starts"
                " once it is done")
    if rep.index_of(db, instances.primary) not in (None, 0):
        return (f"a major-version upgrade rewrites the first instance's volume, but {instances.primary} is the"
                " primary: switch over to the first instance (annotation sampledb.io/switchover) first")
    return None
