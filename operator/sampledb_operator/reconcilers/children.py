"""The children step of a SampleDB: its long-lived children read from the caches, the Secret, and the
writes decide/plan.py asks for.

The long-lived children (StatefulSets, volumes, Secret, ConfigMaps, Services) carry no ownerReference,
only the database label, so the garbage collector never deletes them: only the deletion steps do
(reconcilers/deletion.py). The scripts ConfigMap is the namespace's, shared by its databases
(decide/children/desired.scripts_configmap): every pass keeps it as desired, the deletion of the namespace's last
database removes it, and a database's own scripts ConfigMap of earlier versions is deleted once nothing
of it mounts it. The Secret is created once and never overwritten, and its value never
reaches a log, an event or the status. The PodDisruptionBudget of a database of more than one instance is
the one long-lived child owned by the SampleDB (the garbage collector removes it with the database) and the
one a pass deletes when it is no longer desired (decide/plan.removals: scaled down to one instance). Every
function returns the problems it found (for Degraded); none collects them into a list it was given.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

from sampledb_operator.decide import events as ev
from sampledb_operator.decide import plan
from sampledb_operator.decide.children import binding
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.children import volumes as vol
from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.labels import DATABASE_LABEL
from sampledb_operator.decide.lifecycle import autogrow, stuck
from sampledb_operator.decide.replicas import rollout
from sampledb_operator.kube.errors import ApiError, NamespaceTerminating, NotFound
from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers import rollout as rolling
from sampledb_operator.reconcilers import volumes
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.storage_classes import TTL_SECONDS, expansion_problem

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Applied:
    """The outcome of applying the children: the roles of the volumes that exist (and are not being
    deleted) afterwards, and the problems found on the way (for Degraded)."""

    live_volumes: frozenset[str]
    problems: tuple[Problem, ...] = ()
    # while a StatefulSet's creation waits for its claim's binding (decide/children/binding.py): when to look again
    # should no binding event come; None when nothing waits
    recheck_after: float | None = None
    condition: Condition | None = None  # OperatorUpdate (reconcilers/rollout.py)


def data_children(db: SampleDB) -> list[tuple[str, str]]:
    """The children (kind, name) that hold the data: the first instance's StatefulSet and data volume."""
    name = db.metadata.name
    return [("StatefulSet", names.statefulset_name(name)), ("PersistentVolumeClaim", names.data_pvc_name(name))]


def deletable_children(db: SampleDB) -> list[tuple[str, str]]:
    """The long-lived children a deletion removes: all but the backups volume (it holds the backups)."""
    backups = ("PersistentVolumeClaim", names.backup_pvc_name(db.metadata.name))
    return [child for child in unowned_children(db) if child != backups]


def unowned_children(db: SampleDB) -> list[tuple[str, str]]:
    """The database's long-lived children (kind, name): they carry no ownerReference, so only the
    deletion steps remove them."""
    name = db.metadata.name
    return [*data_children(db),
            ("Secret", names.secret_name(name)),
            ("Secret", names.superuser_secret_name(name)),
            ("Secret", names.ca_secret_name(name)),  # TLS (reconcilers/tls.py)
            ("Secret", names.tls_secret_name(name)),
            ("ConfigMap", names.configmap_name(name)),
            ("ConfigMap", d.legacy_scripts_configmap_name(db)),  # of earlier versions: see retire_legacy_scripts
            ("Service", names.headless_service_name(name)),
            ("Service", names.client_service_name(name)),
            ("Service", names.replica_service_name(name)),
            ("PersistentVolumeClaim", names.backup_pvc_name(name))]


def replica_service_made(db: SampleDB, observed: Mapping[plan.Key, Obj]) -> bool:
    """The database's `-ro` Service exists (observed_children): it is kept in shape from then on, whatever
    spec.replicas is (desired.replica_service)."""
    return ("Service", names.replica_service_name(db.metadata.name)) in observed


def instance_children(ctx: Context, db: SampleDB) -> list[tuple[str, str]]:
    """The StatefulSets and data volumes of every instance but the first (spec.replicas > 1), from the caches."""
    ns, name = db.metadata.namespace or "", db.metadata.name
    out = []
    for kind in ("StatefulSet", "PersistentVolumeClaim"):
        for child in ctx.caches.for_kind(kind).list(ns, {DATABASE_LABEL: name}):
            labels = child["metadata"].get("labels") or {}
            if labels.get(names.INSTANCE_LABEL, "0") != "0":
                out.append((kind, str(child["metadata"]["name"])))
    return out


def owned_children(db: SampleDB) -> list[tuple[str, str]]:
    """The database's long-lived children (kind, name) owned by the SampleDB: its PodDisruptionBudgets (no
    deletion step needs them, so the garbage collector removes them with the database; disown leaves them)."""
    # decide/children/pooler
    poolers = (names.pooler_name(db.metadata.name), names.read_only_pooler_name(db.metadata.name))
    return [("PodDisruptionBudget", names.disruption_budget_name(db.metadata.name)),
            ("PodDisruptionBudget", names.primary_disruption_budget_name(db.metadata.name)),
            *((kind, pooler) for pooler in poolers
              for kind in ("Deployment", "Service", "ConfigMap", "PodDisruptionBudget"))]


def observed_children(ctx: Context, db: SampleDB) -> dict[plan.Key, Obj]:
    """This database's children in the caches: the long-lived ones by name and the database label (the
    PodDisruptionBudgets are owned, the others carry no ownerReference), its Jobs by owner."""
    out: dict[plan.Key, Obj] = {}
    for kind, name in [*unowned_children(db), *owned_children(db)]:
        found = ctx.cached(kind, db.metadata.namespace, name)
        if found is not None and (found["metadata"].get("labels") or {}).get(DATABASE_LABEL) == db.metadata.name:
            out[(kind, name)] = found
    shared = ctx.cached("ConfigMap", db.metadata.namespace, d.SCRIPTS_CONFIGMAP)  # the namespace's, no database label
    if shared is not None and d.is_shared_scripts(shared):
        out[("ConfigMap", d.SCRIPTS_CONFIGMAP)] = shared
    for kind in ("StatefulSet", "PersistentVolumeClaim"):  # every instance's
        for child in ctx.caches.for_kind(kind).list(db.metadata.namespace, {DATABASE_LABEL: db.metadata.name}):
            out[plan.key_of(child)] = child
    for child in ctx.caches.jobs.by_owner(db.metadata.uid or ""):
        out[plan.key_of(child)] = child
    return out


APPLY_CONCURRENCY = 8  # children applied at once within a pass
# A StatefulSet waiting for its claim is woken by the claim's binding (decide/urgency.py); the look again without
# it (decide/children/binding.recheck_after: as long as the claim has waited, within these bounds) is for a class's
# remembered mode gone out of date, so never sooner than that memory's TTL.
BINDING_RECHECK_SECONDS = TTL_SECONDS
BINDING_RECHECK_MAX_SECONDS = 3600.0
REFUSED_RECHECK_SECONDS = 15.0  # a child the API server refused is applied again this soon


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What applying one planned child did: created it, updated it, or a problem instead."""

    key: plan.Key
    created: bool = False
    written: bool = False
    problem: Problem | None = None
    refused: bool = False  # the API server refused the write (the problem says why)


async def apply_children(ctx: Context, db: SampleDB, observed: Mapping[plan.Key, Obj], inputs: d.Inputs,
                         *, created_before: tuple[str, ...] = (), instances: rolling.View | None = None) -> Applied:
    """Apply what the plan asks for (the desired children of `inputs`): the configuration, volumes,
    Services first, concurrently (at most APPLY_CONCURRENCY at once), then the StatefulSets that use
    them, a new one only once its claim is bound when its class binds immediately (decide/children/binding.py). One
    Event names every child created in the pass (`created_before`: those the pass made before, the Secret) and
    the StatefulSets waiting for their claims, except a provisioning pass that made only those
    (events.created_children_event); an update has an Event of its own (its reason). Then the children the plan
    no longer desires are deleted (plan.removals: the PodDisruptionBudget of a database scaled down to one
    instance), each with an Event. With `instances`, a pod template change rolls one instance at a time
    (reconcilers/rollout.py)."""
    volume_states = volumes.states(ctx, db, observed)
    accept = vol.accepted(db.metadata.annotations)
    verdicts = {key: vol.verdict(state, accept, db.metadata.name) for key, state in volume_states.items()}
    problems = [v.problem for v in verdicts.values() if v.problem is not None]
    live = {volume_states[key].role for key, v in verdicts.items()
            if v.write and volume_states[key].present and not volume_states[key].terminating}
    desired = d.children(inputs)
    if db.spec.storage.auto_grow is not None:
        desired = autogrow.new_claims_sized(desired, observed, [
            names.instance_data_pvc_name(db.metadata.name, i) for i in range(db.spec.replicas)])
    actions = [a for a in plan.plan(desired, observed, keep_size=vol.sizes_kept(db))
               if (verdicts.get(a.key) is None or verdicts[a.key].write)]  # a lost volume is never written
    gated = await rolling.gate(ctx, db, actions, dict(observed), instances)
    actions, recheck = gated.actions, gated.recheck_after
    limit = asyncio.Semaphore(APPLY_CONCURRENCY)

    async def one(action: plan.Action) -> _Outcome:
        async with limit:
            return await _apply_one(ctx, db, action, observed.get(action.key))

    outcomes: list[_Outcome] = []
    waiting: dict[str, str] = {}
    for statefulsets in (False, True):
        wave = [a for a in actions if (a.key[0] == "StatefulSet") == statefulsets]
        if statefulsets:  # after the volumes' writes: a new StatefulSet waits for its claim to bind
            waiting, binding = await _waiting_for_binding(ctx, db, [a.obj for a in wave if a.key not in observed])
            wave = [a for a in wave if a.key[1] not in waiting]
            recheck = min((x for x in (recheck, binding) if x is not None), default=None)
        results = await asyncio.gather(*(one(a) for a in wave), return_exceptions=True)  # every write finishes
        failed = next((r for r in results if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed  # the pass is retried; what was written stays written
        outcomes += [r for r in results if isinstance(r, _Outcome)]
    created = list(created_before)
    for outcome in outcomes:
        if outcome.problem is not None:
            problems.append(outcome.problem)
        if not outcome.written:
            continue
        if outcome.created:
            created.append(f"{outcome.key[0]} {outcome.key[1]}")
        verdict = verdicts.get(outcome.key)
        if verdict is not None:
            live.add(volume_states[outcome.key].role)
            if verdict.creates_empty:
                await _event(ctx, db, "Warning", "EmptyVolumeCreated",
                             f"created an empty {volume_states[outcome.key].role} volume {outcome.key[1]} in place"
                             f" of the lost one, as the {vol.ACCEPT_EMPTY_ANNOTATION} annotation accepts")
    for removal in plan.removals(desired, observed):  # a PodDisruptionBudget at one instance
        removed = await _remove(ctx, db, removal)
        outcomes.append(removed)
        if removed.problem is not None:
            problems.append(removed.problem)
    announce = ev.created_children_event(created, waiting, provisioning=not db.status.has_run)
    if announce is not None:
        await _event(ctx, db, announce.type, announce.reason, announce.message)
    if any(o.refused for o in outcomes):  # a quota, policy or role nothing here watches: try again soon
        recheck = min(recheck or REFUSED_RECHECK_SECONDS, REFUSED_RECHECK_SECONDS)
    return Applied(frozenset(live), tuple(problems), recheck_after=recheck, condition=gated.condition)


async def _waiting_for_binding(ctx: Context, db: SampleDB, creates: list[Obj]) -> tuple[dict[str, str], float | None]:
    """The StatefulSets of `creates` (about to be created) that wait for their claim to be bound, by name, with the
    claim (decide/children/binding.py), and when to look again if any waits; the claims as the caches show them after
    the pass's own writes."""
    if not creates:
        return {}, None
    ns = db.metadata.namespace
    claims = {name: ctx.cached("PersistentVolumeClaim", ns, name)
              for name in (binding.claim_of(sts) for sts in creates) if name is not None}
    classes = binding.classes_to_read(creates, claims)
    modes = await ctx.binding_modes.modes(classes) if classes else {}
    waiting = binding.held(creates, claims, modes)
    for sts, claim in waiting.items():
        log.info("StatefulSet waits for its claim to be bound before it is created", namespace=ns, child=sts,
                 claim=claim)
    if not waiting:
        return waiting, None
    return waiting, binding.recheck_after((claims.get(claim) for claim in waiting.values()), ctx.clock.now(),
                                          least=BINDING_RECHECK_SECONDS, most=BINDING_RECHECK_MAX_SECONDS)


async def _apply_one(ctx: Context, db: SampleDB, action: plan.Action, have: Obj | None) -> _Outcome:
    kind, name = action.key
    if kind == "PersistentVolumeClaim" and have is not None and plan.pvc_needs_expansion(action.obj, have):
        problem = await expansion_problem(ctx.apis["StorageClass"], db, have)
        if problem is not None:
            return _Outcome(action.key, problem=problem)
    try:
        await ctx.apis[kind].apply(action.obj, field_manager=ctx.field_manager)
    except ApiError as exc:
        if isinstance(exc, NamespaceTerminating) or exc.status not in (403, 422):
            raise  # for the controller: not the child's problem
        if kind == "PersistentVolumeClaim" and have is not None:
            volume, field = vol.what(db, name)
            return _Outcome(action.key, problem=Problem("StorageExpansionFailed", f"{volume}: {exc.message}", field))
        # the API server refuses what this spec asks for (invalid), or a quota, an admission webhook or policy, or
        # the operator's own RBAC refuses the write: say which in the status (the recheck period tries again)
        reason = stuck.refusal_reason(exc.message)
        return _Outcome(action.key, problem=Problem("ChildRejected" if reason == "CreateRefused" else reason,
                                                    f"{kind} {name} refused: {exc.message}", "spec"), refused=True)
    log.info("applied child", kind=kind, child=name, reason=action.reason)
    if have is not None and not action.quiet:
        await _event(ctx, db, "Normal", f"Updated{kind}", action.reason)
    return _Outcome(action.key, created=have is None, written=True)


async def _remove(ctx: Context, db: SampleDB, removal: plan.Removal) -> _Outcome:
    """Delete a child the plan no longer desires (gone already: done), with an Event giving the reason. A delete
    the API server refuses (the operator's RBAC, an admission policy) is a problem of the status, looked at again
    soon, as a refused apply is: the rest of the pass goes on."""
    kind, name = removal.key
    try:
        await ctx.apis[kind].delete(name, namespace=db.metadata.namespace)
    except NotFound:
        return _Outcome(removal.key)
    except ApiError as exc:
        if isinstance(exc, NamespaceTerminating) or exc.status not in (403, 422):
            raise  # for the controller: not the child's problem
        reason = stuck.refusal_reason(exc.message)
        return _Outcome(removal.key, problem=Problem("ChildRejected" if reason == "CreateRefused" else reason,
                                                     f"{kind} {name} not deleted: {exc.message}", "spec"),
                        refused=True)
    log.info("deleted child", kind=kind, child=name, reason=removal.reason)
    await _event(ctx, db, "Normal", f"Deleted{kind}", removal.reason)
    return _Outcome(removal.key)


async def disown(ctx: Context, db: SampleDB, observed: Mapping[plan.Key, Obj]) -> None:
    """Remove a SampleDB ownerReference from a long-lived child (objects made by an earlier version
    of the operator carried one): the garbage collector must never delete them."""
    for kind, name in unowned_children(db):
        child = observed.get((kind, name))
        refs = (child or {}).get("metadata", {}).get("ownerReferences") or []
        if not any(r.get("kind") == "SampleDB" for r in refs):
            continue
        keep = [r for r in refs if r.get("kind") != "SampleDB"]
        await ctx.apis[kind].patch(name, {"metadata": {"ownerReferences": keep or None}},
                                   namespace=db.metadata.namespace)
        log.info("removed the SampleDB ownerReference", kind=kind, child=name)


def shared_children(ctx: Context, db: SampleDB) -> list[tuple[str, str]]:
    """The namespace's shared children a deletion of `db` removes too: the shared scripts ConfigMap, when
    the caches hold no other SampleDB in the namespace (one being deleted still counts: its snapshot Job
    mounts the scripts). Two last databases deleted at once may each still see the other: the ConfigMap
    then stays (labelled as the operator's; the next database there uses it)."""
    ns = db.metadata.namespace or ""
    others = ctx.caches.sampledbs.refs(ns) - {ObjectRef(ns, db.metadata.name)}  # refs: no SampleDB decoded
    return [] if others else [("ConfigMap", d.SCRIPTS_CONFIGMAP)]


def legacy_scripts_unused(db: SampleDB, observed: Mapping[plan.Key, Obj]) -> bool:
    """The database's own scripts ConfigMap of earlier versions (observed) is mounted by nothing of it any more:
    every StatefulSet's template names the shared one and has rolled out (its pods run that template), and no
    Job mounts it."""
    legacy = d.legacy_scripts_configmap_name(db)
    if ("ConfigMap", legacy) not in observed:
        return False
    for (kind, _name), child in observed.items():
        if kind == "StatefulSet":
            if _mounts(child["spec"]["template"], legacy) or not rollout.rolled_out(child):
                return False
        elif kind == "Job" and _mounts(child["spec"]["template"], legacy) and not _finished(child):
            return False
    return True


def _finished(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def _mounts(template: Obj, configmap: str) -> bool:
    volumes = (template.get("spec") or {}).get("volumes") or []
    return any((v.get("configMap") or {}).get("name") == configmap for v in volumes)


async def retire_legacy_scripts(ctx: Context, db: SampleDB, observed: Mapping[plan.Key, Obj]) -> None:
    """Delete the per-database scripts ConfigMap an earlier version made, once nothing of the database mounts it
    (legacy_scripts_unused); the shared one replaces it."""
    if not legacy_scripts_unused(db, observed):
        return
    name = d.legacy_scripts_configmap_name(db)
    with contextlib.suppress(NotFound):
        await ctx.apis["ConfigMap"].delete(name, namespace=db.metadata.namespace)
    log.info("deleted the per-database scripts ConfigMap (the namespace's shared one replaces it)", child=name)


async def _event(ctx: Context, db: SampleDB, type_: EventType, reason: str, message: str) -> None:
    await ctx.event(db.metadata, API_VERSION, "SampleDB", type_, reason, message)
