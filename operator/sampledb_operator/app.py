"""Wiring: client, caches, the SampleDB controller, leader election, health and metrics; run until stopped.

The only place that knows every part. Order on start: metrics pre-initialised, health server up
(so /healthz answers while caches fill), watchers started, caches synced, lease acquired (when
leader election is on), workers started. On SIGTERM/SIGINT: intake stops, in-flight reconciles
finish within the shutdown timeout, the lease is released, the process exits 0. Losing the lease
stops work at once and exits 1 so the Deployment restarts the process as a standby.

With --shards N > 1 there is no leader election: every replica runs a ShardOwner (runtime/shards.py)
beside the controllers and reconciles only the keys of the shards it owns (decide.sharding.shard_of
of the SampleDB's namespace/name; a SampleDBBackup goes with its spec.database, and one not in the
cache is admitted). With N dividing decide.sharding.BUCKETS (and --shard-caches) a replica caches only
its shards' children (ShardCaches moves their watchers' selectors; a shard is admitted once they have
listed it), otherwise every replica watches and caches every object; the SampleDBs, SampleDBBackups and
database pods are always cached whole. The per-database metrics and sampledb_databases count only the
owned shards' databases, so sums across replicas stay right.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any

from sampledb_operator.config import Settings
from sampledb_operator.decide import cache, urgency
from sampledb_operator.decide.desired import DATABASE_LABEL, is_shared_scripts
from sampledb_operator.decide.sharding import filterable, plan_shards, shard_of
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.kube.resources import LEASE
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability import database_metrics, metrics
from sampledb_operator.observability.health import HealthServer
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.backup import BackupReconciler, backups_of
from sampledb_operator.reconcilers.context import Caches, Context
from sampledb_operator.reconcilers.errors import report_reconcile_error
from sampledb_operator.reconcilers.sampledb import SampleDBReconciler, watched_resources
from sampledb_operator.reconcilers.shard_labels import (
    FILTERED_KINDS,
    children_selector,
    label_children,
    shard_buckets,
)
from sampledb_operator.runtime.clock import Clock, RealClock
from sampledb_operator.runtime.controller import Controller, TerminalError
from sampledb_operator.runtime.leader import LeaderElector
from sampledb_operator.runtime.manager import Manager
from sampledb_operator.runtime.memory import MemoryTrimmer
from sampledb_operator.runtime.shard_caches import ShardCaches
from sampledb_operator.runtime.shards import ShardOwner
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.runtime.triggers import (
    enqueue_controller_owner,
    enqueue_mapped,
    enqueue_self,
    unless_own_write,
)
from sampledb_operator.runtime.watcher import EventHandler, Watcher

log = get_logger(__name__)
CONTROLLER = "sampledb"
BACKUP_CONTROLLER = "sampledbbackup"
EVENT_FLUSH_SECONDS = 5.0  # on shutdown, queued Events get this long to be posted
# The lock holders' own connections (leader election, or the shard owner's reads, renewals and heartbeat at
# once): their Lease requests never wait for a connection behind the reconcilers' writes (KubeClient.sibling).
LOCK_CONNECTIONS = 4
CHILD_EVENTS_COALESCE = 0.25  # seconds: a child's burst of events brings one pass of its database


def filters_caches(settings: Settings) -> bool:
    """Whether this replica caches only its shards' children (--shard-caches, shards dividing the buckets)."""
    return settings.shards > 1 and settings.shard_caches and filterable(settings.shards)


def build_caches(client: KubeClient, settings: Settings,
                 clock: Clock) -> tuple[dict[str, StoreSet], list[tuple[str, Watcher]]]:
    """One watcher and store per (resource, watched namespace); a StoreSet per resource (by kind);
    the watchers with the kind they watch. With filtered caches the children's watchers start with the
    selector of no shard (the shared bucket only); ShardCaches moves it with the shards held."""
    sets: dict[str, StoreSet] = {}
    watchers: list[tuple[str, Watcher]] = []
    filtered = filters_caches(settings)
    for resource, base_selector in watched_resources():
        filtered_kind = filtered and resource.kind in FILTERED_KINDS
        selector = children_selector((), settings.shards) if filtered_kind else base_selector
        stores: dict[str | None, Store] = {}
        for ns in settings.watch_namespaces:
            # large unread fields dropped; the database label indexed (every pass lists its database's objects)
            store = Store(resource.plural, transform=cache.compact, index_labels=(DATABASE_LABEL,))
            stores[ns] = store
            watchers.append((resource.kind, Watcher(ResourceApi(client, resource), store, clock=clock,
                                                    namespace=ns, label_selector=selector,
                                                    streaming=settings.streaming_lists)))
        sets[resource.kind] = StoreSet(stores)
    return sets, watchers


def _shard_caches(settings: Settings, client: KubeClient, clock: Clock, sharding: Sharding,
                  watchers: list[tuple[str, Watcher]]) -> ShardCaches:
    """The runnable that moves the children's watchers with the shards held, attached to `sharding`."""
    shards = settings.shards
    apis = [ResourceApi(client, resource) for resource, _ in watched_resources() if resource.kind in FILTERED_KINDS]

    async def relabel(held: frozenset[int]) -> int:
        return await label_children(apis, settings.watch_namespaces, field_manager=settings.field_manager,
                                    buckets=shard_buckets(held, shards))

    caches = ShardCaches([w for kind, w in watchers if kind in FILTERED_KINDS],
                         selector_of=lambda held: children_selector(held, shards), clock=clock, relabel=relabel,
                         on_ready=sharding.on_cache_ready, retry_period=settings.retry_period)
    sharding.shard_caches = caches
    return caches


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


def _backup_database(obj: dict[str, Any]) -> ObjectRef | None:
    """The SampleDB a SampleDBBackup is of (spec.database, same namespace); None when it names none."""
    name = (obj.get("spec") or {}).get("database")
    return ObjectRef((obj.get("metadata") or {}).get("namespace") or "", str(name)) if name else None


class Sharding:
    """Which shard a key belongs to, for the ShardOwner and the controllers' admission.

    A SampleDB's shard is shard_of(namespace, name); a SampleDBBackup's is its database's (so a
    database and its backups are reconciled by one replica); a backup not in the cache, or naming no
    database, is admitted everywhere (its reconcile finds it gone, or reports the missing field).
    """

    def __init__(self, shards: int, caches: Caches) -> None:
        self.shards = shards
        self.caches = caches
        self.owner: ShardOwner | None = None
        self.shard_caches: ShardCaches | None = None  # set when this replica caches only its shards' children
        self.databases: Controller | None = None
        self.backups: Controller | None = None

    def attach(self, settings: Settings, client: KubeClient, clock: Clock, databases: Controller,
               backups: Controller) -> ShardOwner:
        """Create the ShardOwner (the same Lease namespace and timings as leader election) for the two
        controllers."""
        self.databases, self.backups = databases, backups
        self.owner = ShardOwner(
            ResourceApi(client, LEASE), lease_name=settings.lease_name, namespace=settings.lease_namespace,
            identity=settings.identity, shards=self.shards, clock=clock, planner=plan_shards,
            lease_duration=settings.lease_duration, renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period, on_acquired=self.on_acquired, busy=self.busy,
            on_held=self.on_held,
        )
        return self.owner

    def of_database(self, ref: ObjectRef) -> int:
        return shard_of(ref.namespace, ref.name, self.shards)

    def of_backup(self, ref: ObjectRef) -> int | None:
        obj = self.caches.backups.get(ref)
        database = _backup_database(obj) if obj is not None else None
        return self.of_database(database) if database is not None else None

    def _cached(self, shard: int) -> bool:
        """The caches hold `shard`'s children (always, unless they are filtered)."""
        return self.shard_caches is None or self.shard_caches.ready(shard)

    def _admits(self, shard: int) -> bool:
        return self.owner is not None and self._cached(shard) and self.owner.admits(shard)

    def admit_database(self, ref: ObjectRef) -> bool:
        return self._admits(self.of_database(ref))

    def admit_backup(self, ref: ObjectRef) -> bool:
        shard = self.of_backup(ref)
        return shard is None or self._admits(shard)

    def owned_databases(self) -> Iterator[dict[str, Any]]:
        """The cached SampleDBs of the owned shards, decoded one at a time (StoreSet.each)."""
        owner = self.owner
        if owner is None:
            return iter(())
        return self.caches.sampledbs.each(lambda ref: owner.owns(self.of_database(ref)))

    def busy(self, shard: int) -> bool:
        """A key of `shard` is being reconciled."""
        dbs = self.databases.in_flight if self.databases is not None else frozenset()
        backups = self.backups.in_flight if self.backups is not None else frozenset()
        return any(self.of_database(ref) == shard for ref in dbs) or any(
            self.of_backup(ref) == shard for ref in backups)

    def on_held(self, held: frozenset[int]) -> None:
        """The ShardOwner's shards held, every period: what the filtered caches must hold."""
        if self.shard_caches is not None:
            self.shard_caches.want(held)

    def on_cache_ready(self, shard: int) -> None:
        """The filtered caches now hold `shard`'s children: its keys, refused until now, are enqueued (a shard
        held but late in its renewal is marked by admits(), and enqueued when it is renewed)."""
        if self.owner is not None and self.owner.admits(shard):
            self._enqueue_shard(shard)

    def on_acquired(self, shard: int) -> None:
        """Enqueue the shard's keys, or, while the filtered caches do not hold its children yet, leave them
        to on_cache_ready."""
        if self._cached(shard):
            self._enqueue_shard(shard)

    def _enqueue_shard(self, shard: int) -> None:
        """Enqueue every cached SampleDB of `shard` and every backup of those databases."""
        databases = [ref for o in self.caches.sampledbs.list()
                     if self.of_database(ref := ObjectRef.of(o)) == shard]
        backups = [ObjectRef.of(o) for o in self.caches.backups.list()
                   if (db := _backup_database(o)) is not None and self.of_database(db) == shard]
        if self.databases is not None:
            for ref in databases:
                self.databases.enqueue(ref)
        if self.backups is not None:
            for ref in backups:
                self.backups.enqueue(ref)
        log.info("shard's objects enqueued", shard=shard, databases=len(databases), backups=len(backups))


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
    handlers = [unless_own_write(_child_changed(dbs, kind), own)]
    if kind == "ConfigMap":  # the namespace's shared scripts (no database label): every database there uses it
        handlers.append(unless_own_write(enqueue_mapped(_coalesced(dbs), lambda o: _sharing(ctx, o)), own))
    if kind == "Job":
        handlers.append(enqueue_controller_owner(backups.enqueue, owner_kind="SampleDBBackup",
                                                 owner_api_version=API_VERSION))
    return handlers


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
        )
        sharding = Sharding(settings.shards, caches) if settings.shards > 1 else None
        _set_metric_sources(caches, sharding)
        recorder = EventRecorder(client, background=True)  # a pass never waits for an Event round trip
        ctx = Context(client=client, caches=caches, recorder=recorder, clock=clock,
                      field_manager=settings.field_manager, recheck_period=settings.recheck_period)

        async def on_terminal(ref: ObjectRef, err: TerminalError) -> None:
            obj = caches.sampledbs.get(ref)
            if obj is not None:
                await recorder.event(obj, "Warning", "ReconcileFailed", str(err))

        async def on_error(ref: ObjectRef, err: Exception, failures: int) -> None:
            await report_reconcile_error(ctx, ref, err, failures)

        controller = Controller(CONTROLLER, SampleDBReconciler(ctx), clock=clock, workers=settings.workers,
                                on_terminal=on_terminal, on_error=on_error,
                                admit=sharding.admit_database if sharding is not None else None)
        backup_controller = Controller(BACKUP_CONTROLLER, BackupReconciler(ctx), clock=clock,
                                       workers=max(1, settings.workers // 2),
                                       admit=sharding.admit_backup if sharding is not None else None)
        leader = _lock_holders(settings, client, clock, sharding, databases=controller,
                               backups=backup_controller)
        manager = Manager(clock=clock, leader=leader, shutdown_timeout=settings.shutdown_timeout,
                          resync_period=settings.resync_period or None)
        for kind, watcher in watchers:
            for handler in _handlers_for(kind, controller, backup_controller, ctx):
                watcher.add_handler(handler)
            manager.add_watcher(watcher)
        manager.add_controller(controller)
        manager.add_controller(backup_controller)
        if sharding is not None and sharding.owner is not None:
            manager.add_runnable("shards", sharding.owner)
            if filters_caches(settings):
                manager.add_runnable("shard-caches", _shard_caches(settings, client, clock, sharding, watchers))
        manager.add_runnable("memory", MemoryTrimmer(clock))

        health = HealthServer(clock=clock, ready=lambda: manager.ready, health_address=settings.health_address,
                              metrics_address=settings.metrics_address, take=database_metrics.taken)
        await health.start()
        _install_signal_handlers(stop)
        log.info("operator starting", identity=settings.identity, namespaces=settings.namespaces or "all",
                 leader_election=settings.leader_elect and sharding is None, shards=settings.shards,
                 workers=settings.workers,
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
    """Entry point of `sampledb-operator run` (logging is configured by the CLI)."""
    return asyncio.run(main(settings))
