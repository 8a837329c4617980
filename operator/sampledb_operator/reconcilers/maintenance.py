"""Node maintenance: the I/O around decide/replicas/maintenance.py, right after the replication step.

Reads what that step read (each instance's pod with its node, each server's WAL position, the primary, whether
a failover or switchover runs) and the cordoned nodes (the nodes' watch, cordoned ones only: Context.caches.nodes).
When the primary runs on a cordoned node, it asks for the switchover that moves it (the switchover annotation,
which the replication step carries out and removes, as a rolling restart's does), with the Event
NodeMaintenanceSwitchover; while no standby can take over, the Warning PrimaryOnCordonedNode says why a drain of
the node waits (the primary's PodDisruptionBudget refuses to evict it). Nothing is read when no node is cordoned.
"""

from __future__ import annotations

import contextlib
import dataclasses

from sampledb_operator.decide.replicas import maintenance
from sampledb_operator.decide.replicas import replication as rep
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.replication import ReplicationOutcome

log = get_logger(__name__)


def step(db: SampleDB, outcome: ReplicationOutcome, cordoned: frozenset[str]) -> maintenance.Maintenance:
    """The decision for this pass, from the replication step's outcome."""
    name = db.metadata.name
    primary_index = rep.index_of(name, outcome.primary)
    standbys = []
    primary_pod = None
    for index, view in sorted(outcome.views.items()):
        pod = view.pod
        if index == primary_index:
            primary_pod = pod
            continue
        if view.replicas == 0:
            continue  # fenced: no standby to switch to
        standbys.append(maintenance.Standby(
            name=names.instance_pod_name(name, index), ready=rep.serving(pod),
            node=pod.node if pod else None, position=view.server.position if view.server else None))
    return maintenance.decide(maintenance.MaintenanceInput(
        primary=outcome.primary, primary_ready=rep.serving(primary_pod),
        primary_node=primary_pod.node if primary_pod else None, cordoned=cordoned, standbys=standbys,
        busy=outcome.target is not None or rep.SWITCHOVER_ANNOTATION in db.metadata.annotations))


async def reconcile_maintenance(ctx: Context, db: SampleDB, outcome: ReplicationOutcome) -> ReplicationOutcome:
    """One pass: ask for the switchover that takes the primary off a cordoned node; `outcome` with its next look
    brought forward to this step's."""
    cordoned = ctx.caches.cordoned_nodes()
    if not cordoned or len(outcome.views) < 2:
        return outcome
    after = await _move(ctx, db, outcome, step(db, outcome, cordoned))
    if after is None or (outcome.requeue_after is not None and outcome.requeue_after <= after):
        return outcome
    return dataclasses.replace(outcome, requeue_after=after)


async def _move(ctx: Context, db: SampleDB, outcome: ReplicationOutcome,
                decided: maintenance.Maintenance) -> float | None:
    name, ns = db.metadata.name, db.metadata.namespace or ""
    if decided.switchover_to is not None:
        log.info("node maintenance: switching over", namespace=ns, name=name, primary=outcome.primary,
                 to=decided.switchover_to)
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "NodeMaintenanceSwitchover",
                        f"the primary {outcome.primary} runs on a cordoned node: switching over to"
                        f" {decided.switchover_to}, so that a drain of that node stops no primary")
        with contextlib.suppress(NotFound):
            await ctx.apis["SampleDB"].patch(
                name, {"metadata": {"annotations": {rep.SWITCHOVER_ANNOTATION: decided.switchover_to}}}, namespace=ns)
        return rep.HOLD_REQUEUE  # its own write does not wake it: the switchover starts at the next pass
    if decided.waiting is not None:
        log.info("node maintenance waits", namespace=ns, name=name, waiting=decided.waiting)
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Warning", "PrimaryOnCordonedNode", decided.waiting)
    return decided.recheck_after
