"""Replicas and the primary: the I/O around decide/replicas/replication.py, once per SampleDB pass.

Reads the instances (their StatefulSets and pods from the caches), asks each server over SQL where it
stands (only when the database has, or had, more than one instance), reads live whether a fenced
primary is really gone, asks decide/replicas/replication.py for the plan, and carries out its immediate steps:
events, deleting fenced pods, pg_promote(), role labels on pods (the Services select by them),
replication slots on the primary, removing scaled-down instances. The StatefulSets themselves
(replicas 0 for a fenced instance) are applied with the other children, from `instances`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.decide.replicas import pooler_pause, primary_lease, slots
from sampledb_operator.decide.replicas import replication as rep
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.instances import ServerState, format_lsn
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.quantity import parse_quantity
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import DeletionPolicy, Problem, SampleDB
from sampledb_operator.model.sampledb_status import InstanceStatus, PoolerPause
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability import metrics
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.pg import client as pg
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.pooler_pause import reconcile_pause
from sampledb_operator.reconcilers.superuser import credentials

log = get_logger(__name__)
FENCE_GRACE_SECONDS = 5  # a failed primary's pod is stopped this fast (a switchover stops it cleanly)
STOPPED_WITHIN = 10.0  # seconds a server told to stop over SQL has to stop listening (_stopped_without_kubelet)
STOPPED_ANNOTATION = "sampledb.io/server-stopped"  # on a fenced pod whose server the operator stopped over SQL
SELF_FENCED_ANNOTATION = "sampledb.io/server-stopped-itself"  # on a fenced pod whose server stopped itself (lease)


@dataclass(frozen=True, slots=True)
class ReplicationOutcome:
    instances: tuple[d.Instance, ...]  # for the children: each instance's StatefulSet replicas
    skip_volumes: frozenset[int]  # instances whose data volume must not be created (see _skip_volumes)
    primary: str
    target: str | None
    primary_statefulset: Obj | None
    statuses: tuple[InstanceStatus, ...]
    ready_instances: str
    problems: tuple[Problem, ...]
    requeue_after: float | None
    # what the pass read, by instance index: the StatefulSets, and their pods and servers (reconcilers/rollout.py)
    statefulsets: Mapping[int, Obj] = field(default_factory=dict)
    views: Mapping[int, rep.InstanceView] = field(default_factory=dict)
    pooler_pause: PoolerPause | None = None  # status.poolerPause to write (reconcilers/pooler_pause.py)

    @property
    def result(self) -> Result:
        """When to look again: replication positions with standbys, a failover's next step."""
        return Result(requeue_after=self.requeue_after)


def instance_index(sts: Obj, db: str) -> int | None:
    """An instance StatefulSet's index: its instance label, or 0 for the database's original StatefulSet."""
    meta = sts.get("metadata") or {}
    label = (meta.get("labels") or {}).get(names.INSTANCE_LABEL)
    if label is not None and label.isdigit():
        return int(label)
    return 0 if meta.get("name") == names.statefulset_name(db) else None


def instance_statefulsets(ctx: Context, db: SampleDB) -> dict[int, Obj]:
    """The database's instance StatefulSets in the cache, by index."""
    selector = {DATABASE_LABEL: db.metadata.name, COMPONENT_LABEL: "database"}
    out: dict[int, Obj] = {}
    for sts in ctx.caches.statefulsets.list(db.metadata.namespace, selector):
        index = instance_index(sts, db.metadata.name)
        if index is not None and sts["metadata"].get("name") == names.instance_statefulset_name(db.metadata.name,
                                                                                                   index):
            out[index] = sts
    return out


def _pod_view(pod: Obj, silent_nodes: Mapping[str, datetime]) -> rep.PodView:
    """The pod as the election sees it; on a node that sends no heartbeat (`silent_nodes`: node -> since when) it is
    unready from then, before the node controller says so."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    ready_cond = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    ready = bool(ready_cond and ready_cond.get("status") == "True")
    since = timestamps.parse((ready_cond or {}).get("lastTransitionTime") or meta.get("creationTimestamp"))
    deleted = timestamps.parse(meta.get("deletionTimestamp"))
    if deleted is not None:  # asked to stop at deletionTimestamp - grace period
        since = deleted - timedelta(seconds=int(meta.get("deletionGracePeriodSeconds") or 0))
    silent_since = silent_nodes.get(node) if node else None
    if silent_since is not None and ready and deleted is None:
        ready, since = False, silent_since
    return rep.PodView(ready=ready, since=since, role=(meta.get("labels") or {}).get(names.ROLE_LABEL),
                       terminating=deleted is not None, node=node, node_silent=silent_since is not None,
                       self_fenced=primary_lease.self_fenced(status.get("containerStatuses") or []))


async def _servers(ctx: Context, db: SampleDB, pods: dict[str, Obj]) -> dict[str, ServerState]:
    creds = credentials(ctx, db)
    if creds is None:
        return {}
    targets = {name: pg.Target(str(pod["status"]["podIP"]), names.POSTGRES_PORT, *creds)
               for name, pod in pods.items()
               if (pod.get("status") or {}).get("podIP") and not pod["metadata"].get("deletionTimestamp")}
    answers = await asyncio.gather(*(pg.server_state(t) for t in targets.values()))
    return {name: state for name, state in zip(targets, answers, strict=True) if state is not None}


async def _fence_confirmed(ctx: Context, db: SampleDB, index: int) -> bool:
    """Live, not from the caches: instance `index`'s StatefulSet is at 0 replicas and it has no pod, or its pod
    is still there past its deletion's deadline (its kubelet does not act: decide/replicas/replication.kubelet_silent)
    and its server is stopped (_stopped_without_kubelet)."""
    ns, name = db.metadata.namespace, db.metadata.name
    try:
        sts = await ctx.apis["StatefulSet"].get(names.instance_statefulset_name(name, index), ns)
        if (sts.get("spec") or {}).get("replicas", 1) != 0:
            return False
    except NotFound:
        pass
    pods = await ctx.apis["Pod"].list(ns, label_selector=f"{DATABASE_LABEL}={name},{COMPONENT_LABEL}=database")
    pod = next((p for p in pods.items if p["metadata"].get("name") == names.instance_pod_name(name, index)), None)
    if pod is None:
        return True
    deadline = timestamps.parse(pod["metadata"].get("deletionTimestamp"))
    node = (pod.get("spec") or {}).get("nodeName")
    if not rep.kubelet_silent(deadline, ctx.clock.now(), node_silent=bool(node) and node in ctx.silent_nodes):
        return False
    return await _stopped_without_kubelet(ctx, db, pod) or await _stopped_itself(ctx, db, pod)


async def _stopped_without_kubelet(ctx: Context, db: SampleDB, pod: Obj) -> bool:
    """The fenced primary's server, whose kubelet does not stop it, stopped by the operator: a shutdown the server
    itself takes over SQL (pg/client.stop_server: fast, then immediate), then its address refusing connections within
    STOPPED_WITHIN seconds (nothing listens, and nothing restarts a container of a pod being deleted); the pod is
    then annotated STOPPED_ANNOTATION, so that the passes after (of this operator or another) read its address's
    refusal as the stop it is. A refusal alone is no proof (a firewall may refuse in a server's name): a server
    not reached (its node cut off, frozen, powered off; or stopped before the operator asked) confirms nothing,
    and the failover waits."""
    creds = credentials(ctx, db)
    ip = (pod.get("status") or {}).get("podIP")
    if creds is None or not ip:
        return False
    target = pg.Target(str(ip), names.POSTGRES_PORT, *creds)
    meta = pod["metadata"]
    if STOPPED_ANNOTATION in (meta.get("annotations") or {}) and await pg.refused_within(target, 0.0):
        return True
    if not await pg.stop_server(target) or not await pg.refused_within(target, STOPPED_WITHIN):
        return False  # the next pass tries again
    pod_name = meta["name"]
    await _record_fence(ctx, db, pod_name, STOPPED_ANNOTATION, reason="FencedWithoutKubelet",
                        message=f"the old primary {pod_name} is still terminating past its deletion's deadline"
                        " (its node's kubelet does not act): its server was stopped over SQL and its address refuses"
                        " connections")
    return True


async def _record_fence(ctx: Context, db: SampleDB, pod_name: str, annotation: str, *, reason: str,
                        message: str) -> None:
    """A fence confirmed without the kubelet: the pod annotated `annotation` (the proof later passes, of this operator
    or another, read), a log line and the Warning `reason`; a pod gone meanwhile is fenced all the same."""
    stamp = ctx.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        await ctx.apis["Pod"].patch(pod_name, {"metadata": {"annotations": {annotation: stamp}}},
                                    namespace=db.metadata.namespace)
    except NotFound:
        return
    log.info("fenced", namespace=db.metadata.namespace, name=db.metadata.name, pod=pod_name, reason=reason)
    await ctx.event(db.metadata, API_VERSION, "SampleDB", "Warning", reason, message)


async def _stopped_itself(ctx: Context, db: SampleDB, pod: Obj) -> bool:
    """The fenced primary, beyond reach, has stopped itself (decide/replicas/primary_lease.stopped_by: its lease ended
    and no standby has received its WAL for its wal_sender_timeout); the pod is then annotated SELF_FENCED_ANNOTATION,
    which later passes (of this operator or another) read as that proof: a server that stopped itself never starts
    again as a primary in its pod, and this pod is being deleted."""
    meta = pod["metadata"]
    if SELF_FENCED_ANNOTATION in (meta.get("annotations") or {}):
        return True
    facts = primary_lease.parse_facts((meta.get("annotations") or {}).get(primary_lease.FACTS_ANNOTATION))
    lease = ctx.leases.recall(str(meta.get("uid")), ctx.clock.monotonic(), facts)
    by = primary_lease.stopped_by(lease, ctx.leases.clear_since.get(db.metadata.uid or ""))
    if by is None or ctx.clock.monotonic() < by:
        return False
    await _record_fence(ctx, db, meta["name"], SELF_FENCED_ANNOTATION, reason="FencedBySelfFence",
                        message=f"the old primary {meta['name']} cannot be reached; its lease from the operator has"
                        " ended and no standby has received its WAL for longer than its wal_sender_timeout, so it has"
                        " stopped itself")
    return True


def _observe_clear(ctx: Context, db: SampleDB, views: Mapping[int, rep.InstanceView], old: int) -> None:
    """During a failover, once the old primary's pod has been deleted ENDPOINTS_SECONDS ago (no standby reconnects to
    it through the Service): whether every other instance with a pod answered as a standby receiving no WAL."""
    view = views.get(old)
    pod = view.pod if view is not None else None
    settled = pod is None or (pod.terminating and pod.since is not None and (
        ctx.clock.now() - pod.since).total_seconds() >= primary_lease.ENDPOINTS_SECONDS)
    others = [v.server for i, v in views.items() if i != old and v.pod is not None]
    ctx.leases.seen_clear(db.metadata.uid or "", ctx.clock.monotonic(), settled and primary_lease.others_clear(others))


def _skip_volumes(ctx: Context, db: SampleDB, keep: set[int]) -> frozenset[int]:
    """The primary (or the instance being promoted), when it is not instance 0, never gets a new empty
    volume: if its volume is gone, so is its data (instance 0's volume has its own guard,
    decide/children/volumes.py)."""
    out = set()
    for index in keep - {0}:
        pvc = names.instance_data_pvc_name(db.metadata.name, index)
        if ctx.cached("PersistentVolumeClaim", db.metadata.namespace, pvc) is None:
            out.add(index)
    return frozenset(out)


async def reconcile_replication(ctx: Context, db: SampleDB, *, starting: bool = False) -> ReplicationOutcome:
    """One pass: decide the instances and the primary, and do the steps that cannot wait for the children.
    `starting`: every instance starts at once (a wake from hibernation): an unready primary is no failure yet."""
    ns, name = db.metadata.namespace or "", db.metadata.name
    sets = instance_statefulsets(ctx, db)
    selector = {DATABASE_LABEL: name, COMPONENT_LABEL: "database"}
    pods = {str(p["metadata"]["name"]): p for p in ctx.caches.pods.list(ns, selector)}
    # more than one instance now, or before (a removed standby's pod may still stream and hold its slot)
    probing = db.spec.replicas > 1 or len(sets) > 1 or len(db.status.instances) > 1 or len(pods) > 1
    servers = await _servers(ctx, db, pods) if probing else {}
    views = {}
    for index, sts in sets.items():
        pod_name = names.instance_pod_name(name, index)
        pod = pods.get(pod_name)
        views[index] = rep.InstanceView(index=index, replicas=int((sts.get("spec") or {}).get("replicas", 1)),
                                        pod=_pod_view(pod, ctx.silent_nodes) if pod else None,
                                        server=servers.get(pod_name))
    old_primary = rep.index_of(name, db.status.primary)
    in_failover = bool(db.status.target_primary and db.status.target_primary != db.status.primary)
    if in_failover and old_primary is not None:
        _observe_clear(ctx, db, views, old_primary)
    else:
        ctx.leases.clear_since.pop(db.metadata.uid or "", None)
    fenced = in_failover and old_primary is not None and await _fence_confirmed(ctx, db, old_primary)
    switchover = db.metadata.annotations.get(rep.SWITCHOVER_ANNOTATION)
    paused = db.status.pooler_pause
    plan = rep.decide(rep.ReplicationInput(
        db=name, replicas=db.spec.replicas, synchronous=db.spec.replication.synchronous,
        failover_delay=float(db.spec.replication.failover_delay_seconds), primary=db.status.primary,
        target=db.status.target_primary, switchover_to=switchover, instances=views, now=ctx.clock.now(),
        fence_confirmed=fenced, has_run=db.status.has_run and not starting,
        hold_fence=pooler_pause.hold_fence(pooler=db.spec.pooler is not None, switchover_to=switchover,
                                           primary=db.status.primary, record=paused)))
    if _decisive(db, plan) and not await _fresh(ctx, db):
        # The cache is behind the API server: a fence or a promotion decided on an old record could stop
        # the new primary. Decide again on the newer object (its watch event brings the next pass).
        unchanged = tuple(d.Instance(i, v.replicas) for i, v in sorted(views.items())) or (d.Instance(0),)
        plan = rep.ReplicationPlan(instances=unchanged, primary=db.status.primary or plan.primary,
                                   target=db.status.target_primary, requeue_after=rep.FAILOVER_POLL)
    else:  # the pooler's pools paused (or resumed) before the children step stops the old primary
        paused = await reconcile_pause(ctx, db, switchover_to=plan.target if plan.target == switchover else None)
        await _carry_out(ctx, db, plan, pods, servers)
    primary_index = rep.index_of(name, plan.primary) or 0
    statuses = _statuses(name, plan, views)
    ready = sum(1 for s in statuses if s.ready)
    return ReplicationOutcome(
        instances=plan.instances,
        skip_volumes=_skip_volumes(ctx, db, {primary_index} | ({rep.index_of(name, plan.target) or 0}
                                                                if plan.target else set())),
        primary=plan.primary, target=plan.target, primary_statefulset=sets.get(primary_index),
        statuses=statuses, ready_instances=f"{ready}/{db.spec.replicas}",
        problems=(*plan.problems, *slots.slot_problems(statuses, int(parse_quantity(db.spec.storage.size)))),
        requeue_after=plan.requeue_after, statefulsets=sets, views=views, pooler_pause=paused)


def _decisive(db: SampleDB, plan: rep.ReplicationPlan) -> bool:
    """The plan stops or promotes an instance, or changes the election's record."""
    return bool(plan.fence_pods or plan.promote or plan.primary != (db.status.primary or plan.primary)
                or plan.target != db.status.target_primary)


async def _fresh(ctx: Context, db: SampleDB) -> bool:
    """The SampleDB this pass read is the API server's current one (a live read)."""
    try:
        live = await ctx.apis["SampleDB"].get(db.metadata.name, db.metadata.namespace)
    except NotFound:
        return False
    return (live.get("metadata") or {}).get("resourceVersion") == db.metadata.resource_version


def _statuses(db: str, plan: rep.ReplicationPlan, views: dict[int, rep.InstanceView]) -> tuple[InstanceStatus, ...]:
    primary = views.get(rep.index_of(db, plan.primary) or 0)
    head = primary.server.current_lsn if primary and primary.server and not primary.server.in_recovery else None
    out = []
    for inst in plan.instances:
        view = views.get(inst.index)
        server = view.server if view else None
        lag = None
        if head is not None and server is not None and server.in_recovery and server.replay_lsn is not None:
            lag = max(0, head - server.replay_lsn)
        out.append(InstanceStatus(
            name=names.instance_pod_name(db, inst.index), role=plan.role_of(inst.index, db),
            ready=rep.serving(view.pod if view else None),
            lsn=format_lsn(server.position) if server else None, lag_bytes=lag,
            inactive_slot=server.idle_slot if server and not server.in_recovery else None,
            inactive_slot_retained_bytes=server.idle_slot_retained if server and not server.in_recovery else None))
    return tuple(out)


async def _carry_out(ctx: Context, db: SampleDB, plan: rep.ReplicationPlan, pods: dict[str, Obj],
                     servers: dict[str, ServerState]) -> None:
    ns, name = db.metadata.namespace or "", db.metadata.name
    for event in plan.events:
        log.info("replication", namespace=ns, name=name, reason=event.reason, message=event.message)
        metrics.elections_total.labels(reason=event.reason).inc()
        await ctx.event(db.metadata, API_VERSION, "SampleDB", event.type, event.reason, event.message)  # type: ignore[arg-type]
    for pod in plan.fence_pods:
        with contextlib.suppress(NotFound):
            await ctx.apis["Pod"].delete(pod, ns, grace_period_seconds=FENCE_GRACE_SECONDS)
    creds = credentials(ctx, db)
    if plan.promote and creds is not None and pods.get(plan.promote):
        ip = (pods[plan.promote].get("status") or {}).get("podIP")
        if ip:
            target = pg.Target(str(ip), names.POSTGRES_PORT, *creds)
            # a lease left from an earlier term in its pod must not stop it once promoted
            await _renew_lease(ctx, target, pods[plan.promote])
            if await pg.promote(target):
                log.info("promoted", namespace=ns, name=name, instance=plan.promote)
    for pod, role in sorted(plan.labels.items()):
        with contextlib.suppress(NotFound):
            await ctx.apis["Pod"].patch(pod, {"metadata": {"labels": {names.ROLE_LABEL: role}}}, namespace=ns)
    if plan.slots is not None and creds is not None and plan.primary in servers:
        ip = (pods.get(plan.primary, {}).get("status") or {}).get("podIP")
        if ip:
            await pg.sync_slots(pg.Target(str(ip), names.POSTGRES_PORT, *creds), plan.slots)
    if creds is not None:  # standbys re-read an edited postgresql.conf (the primary's reload Job checks it first)
        for pod, server in sorted(servers.items()):
            ip = (pods.get(pod, {}).get("status") or {}).get("podIP")
            if server.in_recovery and server.config_changed and ip and pod != plan.primary \
                    and await pg.reload_config(pg.Target(str(ip), names.POSTGRES_PORT, *creds)):
                log.info("standby reloaded its configuration", namespace=ns, name=name, instance=pod)
    primary_server = servers.get(plan.primary)
    in_recovery = primary_server.in_recovery if primary_server else None
    ip = (pods[plan.primary].get("status") or {}).get("podIP") if plan.primary in pods else None
    if creds is not None and ip:
        if primary_lease.renew(replicas=db.spec.replicas, instances=len(plan.instances), primary=plan.primary,
                               target=plan.target, in_recovery=in_recovery):
            await _renew_lease(ctx, pg.Target(str(ip), names.POSTGRES_PORT, *creds), pods[plan.primary])
        elif primary_lease.disarm(replicas=db.spec.replicas, instances=len(plan.instances), target=plan.target,
                                  in_recovery=in_recovery):
            await pg.disarm_lease(pg.Target(str(ip), names.POSTGRES_PORT, *creds))
    for pod in plan.release:
        with contextlib.suppress(NotFound):
            await ctx.apis["Pod"].delete(pod, ns)
    for index in plan.remove:
        await _remove_instance(ctx, db, index)
    if plan.clear_switchover:
        with contextlib.suppress(NotFound):
            await ctx.apis["SampleDB"].patch(name, {"metadata": {"annotations": {rep.SWITCHOVER_ANNOTATION: None}}},
                                             namespace=ns)


async def _renew_lease(ctx: Context, target: pg.Target, pod: Obj) -> None:
    """The server's lease renewed (decide/replicas/primary_lease.py), recorded in the LeaseBook, counted by result."""
    uid = str(pod["metadata"].get("uid"))
    renewal = await pg.renew_lease(target, primary_lease.LEASE_SECONDS, primary_lease.TRANSIT_SECONDS,
                                   lambda: ctx.leases.sending(uid, ctx.clock.monotonic()))
    if renewal is not None:
        ctx.leases.answered(uid, watched=renewal.watched, sender_timeout=renewal.sender_timeout)
        facts = primary_lease.facts_value(renewal.watched, renewal.sender_timeout)
        if (pod["metadata"].get("annotations") or {}).get(primary_lease.FACTS_ANNOTATION) != facts:
            with contextlib.suppress(NotFound):  # recorded for another process (a new leader) to count on
                await ctx.apis["Pod"].patch(pod["metadata"]["name"], {"metadata": {"annotations": {
                    primary_lease.FACTS_ANNOTATION: facts}}}, namespace=pod["metadata"].get("namespace"))
    result = "failed" if renewal is None else "renewed" if renewal.watched else "unwatched"
    metrics.primary_lease_renewals_total.labels(result=result).inc()


async def _remove_instance(ctx: Context, db: SampleDB, index: int) -> None:
    """A scaled-down instance: its StatefulSet goes, and its volume unless the deletion policy is Retain."""
    ns, name = db.metadata.namespace or "", db.metadata.name
    with contextlib.suppress(NotFound):
        await ctx.apis["StatefulSet"].delete(names.instance_statefulset_name(name, index), ns)
    kept = db.spec.deletion_policy == DeletionPolicy.RETAIN
    if not kept:
        with contextlib.suppress(NotFound):
            await ctx.apis["PersistentVolumeClaim"].delete(names.instance_data_pvc_name(name, index), ns)
    await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "InstanceRemoved",
                    f"scaled down: removed {names.instance_pod_name(name, index)}"
                    + (" (its volume is kept: deletionPolicy Retain)" if kept else " and its volume"))

