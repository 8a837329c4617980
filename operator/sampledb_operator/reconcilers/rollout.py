"""Rolling restarts: the I/O around decide/rollout.py, inside the children step.

`view` reads what the decision needs from the caches (each instance's StatefulSet and pod) and the
replication step's outcome (the primary, the replicas each instance keeps, whether a failover or switchover
runs); `gate` holds back the StatefulSet updates that would restart an instance out of turn, asks for the
switchover that lets the primary restart last (the switchover annotation, which the replication step carries
out and removes), and says each step in an Event.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime

from sampledb_operator.decide import plan, rollout
from sampledb_operator.decide import replication as rep
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.replication import ReplicationOutcome, instance_statefulsets, pod_view

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class View:
    """The instances as this pass found them: what decide/rollout.py reads besides the planned writes."""

    primary: int
    members: dict[int, rollout.Member]
    switching: bool


def settled(sts: Obj) -> bool:
    """The StatefulSet's controller has rolled its pods to its current template, and they are ready."""
    meta, spec, status = sts.get("metadata") or {}, sts.get("spec") or {}, sts.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return False
    current, update = status.get("currentRevision"), status.get("updateRevision")
    if current and update and current != update:
        return False
    return int(status.get("readyReplicas") or 0) >= int(spec.get("replicas", 1))


def _unready_for(pod: Obj | None, now: datetime) -> float:
    if pod is None:
        return rollout.PATIENCE  # nothing to wait for
    seen = pod_view(pod)
    if seen.ready and not seen.terminating:
        return 0.0
    return max(0.0, (now - seen.since).total_seconds()) if seen.since else 0.0


def view(ctx: Context, db: SampleDB, replication: ReplicationOutcome) -> View | None:
    """The instances of `replication` (the replicas each keeps after this pass) with their pods; None with one
    instance (it restarts in place: nothing to read)."""
    if len(replication.instances) < 2:
        return None
    name, now = db.metadata.name, ctx.clock.now()
    sets = instance_statefulsets(ctx, db)
    pods = {str(p["metadata"]["name"]): p for p in ctx.caches.pods.list(
        db.metadata.namespace or "", {DATABASE_LABEL: name, COMPONENT_LABEL: "database"})}
    members = {}
    for inst in replication.instances:
        sts = sets.get(inst.index)
        pod = pods.get(names.instance_pod_name(name, inst.index))
        seen = pod_view(pod) if pod is not None else None
        members[inst.index] = rollout.Member(
            ready=bool(seen and seen.ready and not seen.terminating), settled=sts is None or settled(sts),
            unready_for=_unready_for(pod, now),
            running=inst.replicas > 0 and sts is not None and int((sts.get("spec") or {}).get("replicas", 1)) > 0)
    switching = replication.target is not None or rep.SWITCHOVER_ANNOTATION in db.metadata.annotations
    return View(rep.index_of(name, replication.primary) or 0, members, switching)


async def gate(ctx: Context, db: SampleDB, actions: list[plan.Action], observed: dict[plan.Key, Obj],
               seen: View | None) -> tuple[list[plan.Action], float | None]:
    """`actions` with the out-of-turn restarts held back, and when to look again while a roll waits."""
    name, ns = db.metadata.name, db.metadata.namespace or ""
    if seen is None:
        return actions, None
    pending = rollout.restarts(name, actions, observed)
    if not pending:
        return actions, None
    step = rollout.decide(rollout.RolloutInput(db=name, primary=seen.primary, members=seen.members,
                                               pending=pending, switching=seen.switching))
    for index in step.restart:
        role = "the primary" if index == seen.primary else "standby"
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "RollingRestart",
                        f"restarting {role} {names.instance_pod_name(name, index)} with the new pod template"
                        " (one instance at a time, standbys first, the primary last after a switchover)")
    if step.switchover_to is not None:
        log.info("rolling restart: switching over", namespace=ns, name=name, to=step.switchover_to)
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "RollingSwitchover",
                        f"every standby runs the new pod template: switching over to {step.switchover_to}, so"
                        " that the primary restarts as a standby")
        with contextlib.suppress(NotFound):
            await ctx.apis["SampleDB"].patch(
                name, {"metadata": {"annotations": {rep.SWITCHOVER_ANNOTATION: step.switchover_to}}}, namespace=ns)
    elif step.waiting and step.hold:
        log.info("rolling restart waits", namespace=ns, name=name, waiting=step.waiting,
                 held=[names.instance_pod_name(name, i) for i in sorted(step.hold)])
    return rollout.held(name, actions, observed, step.hold), step.recheck_after
