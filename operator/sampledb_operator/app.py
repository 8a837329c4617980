"""Wiring: client, caches, the SampleDB controller, leader election, health and metrics; run until stopped.

The only place that knows every part. Order on start: metrics pre-initialised, health server up
(so /healthz answers while caches fill), watchers started, caches synced, lease acquired (when
leader election is on), workers started. On SIGTERM/SIGINT: intake stops, in-flight reconciles
finish within the shutdown timeout, the lease is released, the process exits 0. Losing the lease
stops work at once and exits 1 so the Deployment restarts the process as a standby.

With --shards N > 1 there is no leader election: every replica runs a ShardOwner (runtime/shards.py)
beside the controllers and reconciles only the keys of the shards it owns (sharded.py: which shard a key
is in, admission). With N dividing decide.sharding.BUCKETS (and --shard-caches) a replica caches only
its shards' children, database pods, SampleDBs and SampleDBBackups (their watchers start with the selector
of no shard; sharded.py's ShardCaches moves it) and, through a second watch merged into the same cache, every
pod made from a template without the bucket label and every SampleDB and SampleDBBackup without a bucket;
otherwise every replica watches and caches every object. The per-database metrics and
sampledb_databases count only the owned shards' databases, so sums across replicas stay right.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any

from sampledb_operator.config import Settings
from sampledb_operator.decide import cache, urgency
from sampledb_operator.decide.children.desired_config import is_shared_scripts
from sampledb_operator.decide.labels import DATABASE_LABEL, PRIMARY_ROLE
from sampledb_operator.decide.sharding import unbucketed_selector
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.kube.resources import LEASE, NODE, Resource
from sampledb_operator.model.names import ROLE_LABEL
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability import database_metrics, metrics
from sampledb_operator.observability.health import HealthServer
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.backup import BackupReconciler, backups_of
from sampledb_operator.reconcilers.context import Caches, Context
from sampledb_operator.reconcilers.errors import report_reconcile_error
from sampledb_operator.reconcilers.node_heartbeats import NodeHeartbeats
from sampledb_operator.reconcilers.sampledb import SampleDBReconciler, watched_resources
from sampledb_operator.reconcilers.shard_labels import FILTERED_KINDS, children_selector, unlabelled_selector
from sampledb_operator.runtime import collector
from sampledb_operator.runtime.clock import Clock, RealClock
from sampledb_operator.runtime.controller import Controller, TerminalError
from sampledb_operator.runtime.leader import LeaderElector
from sampledb_operator.runtime.manager import Manager
from sampledb_operator.runtime.memory import MemoryTrimmer
from sampledb_operator.runtime.rollout_slots import RolloutSlots
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.runtime.storeunion import StoreUnion
from sampledb_operator.runtime.triggers import (
    enqueue_controller_owner,
    enqueue_mapped,
    enqueue_self,
    unless_handed_over,
    unless_own_write,
)
from sampledb_operator.runtime.watcher import EventHandler, Watcher
from sampledb_operator.sharded import (
    Sharding,
    Watched,
    bucket_menders_for,
    bucketed,
    filters_caches,
    has_bucket_label,
    shard_caches_for,
)

log = get_logger(__name__)
CONTROLLER = "sampledb"
BACKUP_CONTROLLER = "sampledbbackup"
EVENT_FLUSH_SECONDS = 5.0  # on shutdown, queued Events get this long to be posted
# The lock holders' own connections (leader election, or the shard owner's reads, renewals and heartbeat at
# once): their Lease requests never wait for a connection behind the reconcilers' writes (KubeClient.sibling).
LOCK_CONNECTIONS = 4
CHILD_EVENTS_COALESCE = 0.25  # seconds: a child's burst of events brings one pass of its database
CORDONED_SELECTOR = "spec.unschedulable=true"  # the nodes' watch: cordoned ones only (a drain's first step)


# The filtered kinds whose objects may lack a bucket: the selector of those (from the kind's own) and which of
# the union's two watches an object the operator writes is read back from (StoreUnion's routes_here).
STRAYS: dict[str, tuple[Callable[[str | None], str], Callable[[dict[str, Any]], bool]]] = {
    "SampleDB": (unbucketed_selector, bucketed),  # its first pass labels it
    "SampleDBBackup": (unbucketed_selector, bucketed),  # made by hand: its first pass labels it (backup_run)
    "Pod": (unlabelled_selector, has_bucket_label),  # made from a template older than the label
}


def build_caches(client: KubeClient, settings: Settings,
                 clock: Clock) -> tuple[dict[str, StoreSet], list[Watched]]:
    """One watcher and store per (resource, watched namespace); a StoreSet per resource (by kind); the
    watchers with the kind they watch. With filtered caches the children's, pods', SampleDBs' and
    SampleDBBackups' watchers start with the selector of no shard (the shared bucket only; ShardCaches moves it
    with the shards held); the pods without the bucket label (made from a template older than the label) and
    the SampleDBs and SampleDBBackups without a bucket (created since, or before the label existed: a first
    pass labels them) have a second watch, never moved, merged into the kind's one cache
    (runtime/storeunion.StoreUnion, STRAYS)."""
    sets: dict[str, StoreSet] = {}
    watchers: list[Watched] = []
    filtered = filters_caches(settings)

    def watch(resource: Resource, selector: str | None, base: str | None, moved: bool,
              strays: bool = False) -> dict[str | None, Store]:
        stores: dict[str | None, Store] = {}
        for ns in settings.watch_namespaces:
            # large unread fields dropped; the database label indexed (every pass lists its database's objects)
            store = Store(resource.plural, transform=cache.Compactor(), index_labels=(DATABASE_LABEL,))
            stores[ns] = store
            watchers.append(Watched(resource.kind, Watcher(ResourceApi(client, resource), store, clock=clock,
                                                           namespace=ns, label_selector=selector,
                                                           streaming=settings.streaming_lists), base, moved,
                                    strays))
        return stores

    for resource, base_selector in watched_resources():
        if filtered and resource.kind in FILTERED_KINDS:
            stores = watch(resource, children_selector((), settings.shards, base_selector), base_selector, True)
            if resource.kind in STRAYS:  # a second watch, never moved, merged into the kind's one cache
                selector, routes_here = STRAYS[resource.kind]
                strays = StoreSet(watch(resource, selector(base_selector), base_selector, False, strays=True))
                sets[resource.kind] = StoreUnion(stores, strays, routes_here=routes_here)
                continue
        else:
            stores = watch(resource, base_selector, base_selector, False)
        sets[resource.kind] = StoreSet(stores)
    # The cordoned nodes, cluster-wide, each as its name only (the primary leaves one: reconcilers/maintenance.py)
    nodes = Store(NODE.plural, transform=_node_name_only)
    watchers.append(Watched(NODE.kind, Watcher(ResourceApi(client, NODE), nodes, clock=clock, namespace=None,
                                               field_selector=CORDONED_SELECTOR,
                                               streaming=settings.streaming_lists), None))
    sets[NODE.kind] = StoreSet({None: nodes})
    return sets, watchers


def _node_name_only(obj: dict[str, Any]) -> dict[str, Any]:
    """A Node as the cordoned nodes' cache keeps it: its name and version (its status is tens of KiB)."""
    meta = obj.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": meta.get("name"), "resourceVersion": meta.get("resourceVersion")}}


def _primaries_on(ctx: Context, name: str | None) -> list[ObjectRef]:
    """The databases whose primary's pod runs on node `name` (a node just cordoned, or gone silent: it moves off)."""
    return sorted({ObjectRef((p.get("metadata") or {}).get("namespace") or "", str(labels[DATABASE_LABEL]))
                   for p in ctx.caches.pods.list(None, {ROLE_LABEL: PRIMARY_ROLE})
                   if (p.get("spec") or {}).get("nodeName") == name
                   and DATABASE_LABEL in (labels := (p.get("metadata") or {}).get("labels") or {})})


def _node_heartbeats(ctx: Context, client: KubeClient, settings: Settings, dbs: Controller) -> NodeHeartbeats:
    """The nodes' heartbeats' reader; a node gone silent enqueues the databases whose primary runs there, so their
    failover starts now, not at the next resync."""
    def node_silent(node: str) -> None:
        for ref in _primaries_on(ctx, node):
            dbs.enqueue(ref)

    return NodeHeartbeats(ctx, ResourceApi(client, LEASE), silent_after=settings.node_silent_seconds,
                          on_silent=node_silent)


def _database_of(obj: dict[str, Any]) -> list[ObjectRef]:
    """A child (by its database label) or a SampleDBBackup (by spec.database) -> its SampleDB."""
    meta = obj.get("metadata") or {}
    name = (meta.get("labels") or {}).get(DATABASE_LABEL) or (obj.get("spec") or {}).get("database")
    return [ObjectRef(meta.get("namespace") or "", str(name))] if name else []


def _sharing(ctx: Context, obj: dict[str, Any]) -> list[ObjectRef]:
    """The SampleDBs of the namespace, when `obj` is its shared scripts ConfigMap; else none."""
    if not is_shared_scripts(obj):
        return []
    return sorted(ctx.caches.sampledbs.refs((obj.get("metadata") or {}).get("namespace") or ""))


def _set_metric_sources(caches: Caches, sharding: Sharding | None) -> None:
    """sampledb_databases and the per-database metrics count the cached SampleDBs (the owned shards' only,
    when sharded: each database is then exported by one replica)."""
    # walked one decoded object at a time: a scrape never holds every SampleDB decoded (at 5,000 databases
    # a list of them was ~29 MiB for the length of each scrape: bench/bench_metrics_scrape.py)
    databases: Callable[[], Iterator[dict[str, Any]]] = \
        caches.sampledbs.each if sharding is None else sharding.owned_databases
    database_metrics.set_database_source(databases)


def _coalesced(dbs: Controller) -> Callable[[ObjectRef], None]:
    """Enqueue a database for a change of one of its children, coalesced with the changes that follow within
    CHILD_EVENTS_COALESCE seconds: a child's status moves in a burst of events (a pod is scheduled, started,
    ready; its StatefulSet counts it), each of which would otherwise bring its own pass."""
    return lambda ref: dbs.enqueue_soon(ref, CHILD_EVENTS_COALESCE)


def _child_changed(dbs: Controller, kind: str) -> EventHandler:
    """A child's event wakes its database as _coalesced does, urgent when decide.urgency says the event shows
    a state a step acts on (the event type only decides the urgency: every event wakes the database)."""

    def handle(type_: str, obj: dict[str, Any]) -> None:
        refs = _database_of(obj)
        if not refs:
            return
        urgent = urgency.urgent(kind, type_, obj)
        for ref in refs:
            dbs.enqueue_soon(ref, CHILD_EVENTS_COALESCE, urgent=urgent)

    return handle


def _handlers_for(kind: str, dbs: Controller, backups: Controller, ctx: Context) -> list[EventHandler]:
    """Which controllers an event of this kind wakes up. The SampleDB controller is not woken by the events
    that only deliver its own writes to a SampleDB or a child (it read them back already); SampleDBBackups
    are written by both controllers, so their events always wake both. A child's events wake its database
    coalesced (_child_changed), and urgent when the event shows a state a step acts on (decide/urgency.py:
    its StatefulSet became ready, its Job finished, a pod runs or goes, a child was deleted): that database is
    under way, so its pass goes before the keys waiting for other reasons, such as the first passes of
    databases just created. Without that, when many databases were created at once, each step of each
    database waited for a full round of the queue and they all moved in lockstep (none Ready before the last
    one's first pass); now a database that is moving finishes first (the queue bounds how long the others
    wait: runtime/workqueue.URGENT_STREAK). The namespace's shared scripts wake its databases coalesced, not
    urgent. The SampleDB's own events wake it at once."""
    own = ctx.caches.for_kind(kind).is_own_write
    if kind == "SampleDB":
        return [unless_own_write(enqueue_self(dbs.enqueue), own),
                enqueue_mapped(backups.enqueue, lambda o: backups_of(ctx, o))]
    if kind == "SampleDBBackup":
        return [enqueue_self(backups.enqueue), enqueue_mapped(dbs.enqueue, _database_of)]
    if kind == "Node":  # a cordoned node: the databases whose primary runs there switch over
        return [enqueue_mapped(dbs.enqueue, lambda o: _primaries_on(ctx, (o.get("metadata") or {}).get("name")))]
    handlers = [unless_own_write(_child_changed(dbs, kind), own)]
    if kind == "ConfigMap":  # the namespace's shared scripts (no database label): every database there uses it
        handlers.append(unless_own_write(enqueue_mapped(_coalesced(dbs), lambda o: _sharing(ctx, o)), own))
    if kind == "Job":
        handlers.append(enqueue_controller_owner(backups.enqueue, owner_kind="SampleDBBackup",
                                                 owner_api_version=API_VERSION))
    return handlers


def _watch_handlers(watched: Watched, dbs: Controller, backups: Controller, ctx: Context) -> list[EventHandler]:
    """_handlers_for the watcher's kind; on a strays watch (the second of a StoreUnion) without the DELETED that
    a pass's own write sends when it moves the object to the shards' watch (a SampleDB's first pass labels
    it): the union still holds it and the pass read its write back, so it would wake its database once more
    for nothing on its owner, and be refused on every other replica."""
    handlers = _handlers_for(watched.kind, dbs, backups, ctx)
    cache = ctx.caches.for_kind(watched.kind)
    if not (watched.strays and isinstance(cache, StoreUnion)):
        return handlers
    return [unless_handed_over(handler, cache.moved_in) for handler in handlers]


def _lock_holders(settings: Settings, client: KubeClient, clock: Clock, sharding: Sharding | None, *,
                  databases: Controller, backups: Controller) -> LeaderElector | None:
    """The shard owner (attached to `sharding`) or the leader elector (None without leader election), on a
    sibling client of LOCK_CONNECTIONS, made only when one of them runs: their Lease requests have
    connections of their own."""
    if sharding is None and not settings.leader_elect:
        return None
    locks = client.sibling(connections=LOCK_CONNECTIONS)
    if sharding is not None:  # with shards, the shard Leases are the locks
        sharding.attach(settings, locks, clock, databases, backups)
        return None
    return LeaderElector(
        ResourceApi(locks, LEASE), name=settings.lease_name, namespace=settings.lease_namespace,
        identity=settings.identity, clock=clock, lease_duration=settings.lease_duration,
        renew_deadline=settings.renew_deadline, retry_period=settings.retry_period,
    )


async def main(settings: Settings, stop: asyncio.Event | None = None) -> int:
    """Run the operator until `stop` is set (or a signal arrives); the process exit code."""
    clock = RealClock()
    metrics.init_operator()
    stop = stop or asyncio.Event()
    client = await KubeClient.connect(settings.kubeconfig, context=settings.context, in_cluster=settings.in_cluster,
                                      exec_plugin_timeout=settings.exec_plugin_timeout,
                                      connections=settings.api_connections)
    health: HealthServer | None = None
    recorder: EventRecorder | None = None
    try:
        sets, watchers = build_caches(client, settings, clock)
        caches = Caches(
            sampledbs=sets["SampleDB"], backups=sets["SampleDBBackup"], statefulsets=sets["StatefulSet"],
            pvcs=sets["PersistentVolumeClaim"], jobs=sets["Job"], services=sets["Service"],
            configmaps=sets["ConfigMap"], secrets=sets["Secret"], pods=sets["Pod"],
            pdbs=sets["PodDisruptionBudget"], deployments=sets["Deployment"], nodes=sets["Node"],
        )
        sharding = Sharding(settings.shards, caches) if settings.shards > 1 else None
        _set_metric_sources(caches, sharding)
        recorder = EventRecorder(client, background=True)  # a pass never waits for an Event round trip
        ctx = Context(client=client, caches=caches, recorder=recorder, clock=clock,
                      field_manager=settings.field_manager, recheck_period=settings.recheck_period,
                      label_buckets=sharding is not None, chaos_annotation=settings.chaos_annotation,
                      test_hooks=settings.test_hooks, rollout_slots=RolloutSlots(settings.operator_rollouts))

        async def on_terminal(ref: ObjectRef, err: TerminalError) -> None:
            obj = caches.sampledbs.get(ref)
            if obj is not None:
                await recorder.event(obj, "Warning", "ReconcileFailed", str(err))

        async def on_error(ref: ObjectRef, err: Exception, failures: int) -> None:
            await report_reconcile_error(ctx, ref, err, failures)

        controller = Controller(CONTROLLER, SampleDBReconciler(ctx), clock=clock, workers=settings.workers,
                                on_terminal=on_terminal, on_error=on_error,
                                admit=sharding.admit_database if sharding is not None else None,
                                intake=sharding.holds_database if sharding is not None else None)
        backup_controller = Controller(BACKUP_CONTROLLER, BackupReconciler(ctx), clock=clock,
                                       workers=max(1, settings.workers // 2),
                                       admit=sharding.admit_backup if sharding is not None else None,
                                       intake=sharding.holds_backup if sharding is not None else None)
        leader = _lock_holders(settings, client, clock, sharding, databases=controller,
                               backups=backup_controller)
        manager = Manager(clock=clock, leader=leader, shutdown_timeout=settings.shutdown_timeout,
                          resync_period=settings.resync_period or None)
        for watched in watchers:
            for handler in _watch_handlers(watched, controller, backup_controller, ctx):
                watched.watcher.add_handler(handler)
            manager.add_watcher(watched.watcher)
        manager.add_controller(controller)
        manager.add_controller(backup_controller)
        if sharding is not None and sharding.owner is not None:
            # early: its Lease requests (a restarted replica takes back the shards its Leases name) overlap the
            # listing instead of following it; a shard's keys wait in the queue until the caches are synced
            manager.add_runnable("shards", sharding.owner, early=True)
            if filters_caches(settings):
                # early: a restarted replica lists its shards' children while the other caches fill
                manager.add_runnable("shard-caches", shard_caches_for(settings, client, clock, sharding, watchers),
                                     early=True)
                for name, mender in bucket_menders_for(settings, client, clock, caches, watchers):
                    manager.add_runnable(name, mender)
        manager.add_runnable("memory", MemoryTrimmer(clock))
        manager.add_runnable("node-heartbeats", _node_heartbeats(ctx, client, settings, controller))

        health = HealthServer(clock=clock, ready=lambda: manager.ready, health_address=settings.health_address,
                              metrics_address=settings.metrics_address, take=database_metrics.taken)
        await health.start()
        _install_signal_handlers(stop)
        log.info("operator starting", identity=settings.identity, namespaces=settings.namespaces or "all",
                 leader_election=settings.leader_elect and sharding is None, shards=settings.shards,
                 workers=settings.workers, chaos_annotation=settings.chaos_annotation,
                 metrics_port=health.metrics_port, health_port=health.health_port)
        rc = await manager.run(stop)
        log.info("operator stopped", exit_code=rc)
        return rc
    finally:
        if recorder is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(recorder.flush(), EVENT_FLUSH_SECONDS)  # the last events are posted
            await recorder.close()
        if health is not None:
            await health.stop()
        await client.close()


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        log.info("signal received; shutting down", signal=sig.name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)


def run(settings: Settings) -> int:
    """Entry point of `sampledb-operator run` (logging is configured by the CLI); the imports are done, so
    the garbage collector freezes them (runtime/collector.py) before the event loop starts."""
    collector.tune()
    return asyncio.run(main(settings))
