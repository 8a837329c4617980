"""Wiring: client, caches, the SampleDB controller, leader election, health and metrics; run until stopped.

The only place that knows every part. Order on start: metrics pre-initialised, health server up
(so /healthz answers while caches fill), watchers started, caches synced, lease acquired (when
leader election is on), workers started. On SIGTERM/SIGINT: intake stops, in-flight reconciles
finish within the shutdown timeout, the lease is released, the process exits 0. Losing the lease
stops work at once and exits 1 so the Deployment restarts the process as a standby.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from sampledb_operator.config import Settings
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.kube.resources import LEASE, SAMPLEDB, Resource
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability import metrics
from sampledb_operator.observability.health import HealthServer
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.sampledb import Caches, SampleDBReconciler, watched_resources
from sampledb_operator.runtime.clock import Clock, RealClock
from sampledb_operator.runtime.controller import Controller, TerminalError
from sampledb_operator.runtime.leader import LeaderElector
from sampledb_operator.runtime.manager import Manager
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.runtime.triggers import enqueue_controller_owner, enqueue_self
from sampledb_operator.runtime.watcher import Watcher

log = get_logger(__name__)
CONTROLLER = "sampledb"


def build_caches(client: KubeClient, settings: Settings, clock: Clock) -> tuple[dict[str, StoreSet], list[Watcher]]:
    """One watcher and store per (resource, watched namespace); a StoreSet per resource."""
    sets: dict[str, StoreSet] = {}
    watchers: list[Watcher] = []
    for resource, selector in watched_resources():
        stores: dict[str | None, Store] = {}
        for ns in settings.watch_namespaces:
            store = Store(resource.plural)
            stores[ns] = store
            watchers.append(Watcher(ResourceApi(client, resource), store, clock=clock, namespace=ns,
                                    label_selector=selector))
        sets[resource.kind] = StoreSet(stores)
    return sets, watchers


def _handlers_for(resource: Resource, controller: Controller) -> Any:
    if resource.kind == SAMPLEDB.kind:
        return enqueue_self(controller.enqueue)
    return enqueue_controller_owner(controller.enqueue, owner_kind=SAMPLEDB.kind, owner_api_version=API_VERSION)


async def main(settings: Settings, stop: asyncio.Event | None = None) -> int:
    """Run the operator until `stop` is set (or a signal arrives); the process exit code."""
    clock = RealClock()
    metrics.init_operator()
    stop = stop or asyncio.Event()
    client = await KubeClient.connect(settings.kubeconfig, context=settings.context, in_cluster=settings.in_cluster)
    health: HealthServer | None = None
    try:
        sets, watchers = build_caches(client, settings, clock)
        caches = Caches(
            sampledbs=sets["SampleDB"], statefulsets=sets["StatefulSet"], pvcs=sets["PersistentVolumeClaim"],
            jobs=sets["Job"], services=sets["Service"], configmaps=sets["ConfigMap"], secrets=sets["Secret"],
        )
        recorder = EventRecorder(client)
        reconciler = SampleDBReconciler(client=client, caches=caches, recorder=recorder, clock=clock,
                                        field_manager=settings.field_manager)

        async def on_terminal(ref: ObjectRef, err: TerminalError) -> None:
            obj = caches.sampledbs.get(ref)
            if obj is not None:
                await recorder.event(obj, "Warning", "ReconcileFailed", str(err))

        controller = Controller(CONTROLLER, reconciler, clock=clock, workers=settings.workers,
                                on_terminal=on_terminal)
        leader = None
        if settings.leader_elect:
            leader = LeaderElector(
                ResourceApi(client, LEASE), name=settings.lease_name, namespace=settings.lease_namespace,
                identity=settings.identity, clock=clock, lease_duration=settings.lease_duration,
                renew_deadline=settings.renew_deadline, retry_period=settings.retry_period,
            )
        manager = Manager(clock=clock, leader=leader, shutdown_timeout=settings.shutdown_timeout,
                          resync_period=settings.resync_period or None)
        for watcher, (resource, _) in zip(watchers, _resources_per_watcher(settings), strict=True):
            watcher.add_handler(_handlers_for(resource, controller))
            manager.add_watcher(watcher)
        manager.add_controller(controller)

        health = HealthServer(clock=clock, ready=lambda: manager.ready, health_address=settings.health_address,
                              metrics_address=settings.metrics_address)
        await health.start()
        _install_signal_handlers(stop)
        log.info("operator starting", identity=settings.identity, namespaces=settings.namespaces or "all",
                 leader_election=settings.leader_elect, workers=settings.workers,
                 metrics_port=health.metrics_port, health_port=health.health_port)
        rc = await manager.run(stop)
        log.info("operator stopped", exit_code=rc)
        return rc
    finally:
        if health is not None:
            await health.stop()
        await client.close()


def _resources_per_watcher(settings: Settings) -> list[tuple[Resource, str | None]]:
    return [rs for rs in watched_resources() for _ in settings.watch_namespaces]


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


def run(settings: Settings) -> int:
    """Entry point of `sampledb-operator run` (logging is configured by the CLI)."""
    return asyncio.run(main(settings))
