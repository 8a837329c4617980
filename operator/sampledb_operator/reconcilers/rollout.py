"""Rolling restarts: the I/O around decide/replicas/rollout.py, inside the children step.

`view` takes what the decision needs from the replication step's outcome (each instance's StatefulSet and pod as
that step read them, the primary, the replicas each instance keeps, whether a failover or switchover runs);
`gate` holds back the StatefulSet updates that would restart an instance out of turn: an operator-made pod
template change (decide/replicas/operator_rollout.py) until its database holds one of the operator's rollout slots
(runtime/rollout_slots.py, --operator-rollouts), and with standbys every instance but the one whose turn it
is; it asks for the switchover that lets the primary restart last (the switchover annotation, which the
replication step carries out and removes), says each step in an Event, and gives the OperatorUpdate condition.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime

from sampledb_operator.decide import plan
from sampledb_operator.decide import status as st
from sampledb_operator.decide.replicas import operator_rollout, rollout
from sampledb_operator.decide.replicas import replication as rep
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition, ConditionType, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.replication import ReplicationOutcome

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class View:
    """The instances as this pass found them: what decide/replicas/rollout.py reads besides the planned writes."""

    primary: int
    members: dict[int, rollout.Member]
    switching: bool


def settled(sts: Obj) -> bool:
    """No pod is wanted, or the pods run the current template and are ready."""
    return int((sts.get("spec") or {}).get("replicas", 1)) == 0 or st.statefulset_ready(sts)


def _unready_for(pod: rep.PodView | None, now: datetime) -> float:
    if pod is None:
        return rollout.PATIENCE  # nothing to wait for
    if rep.serving(pod):
        return 0.0
    return max(0.0, (now - pod.since).total_seconds()) if pod.since else 0.0


def view(ctx: Context, db: SampleDB, replication: ReplicationOutcome) -> View | None:
    """The instances of `replication` (the replicas each keeps after this pass) with their pods, as the replication
    step read them; None with one instance (it restarts in place: nothing to read)."""
    if len(replication.instances) < 2:
        return None
    now = ctx.clock.now()
    members = {}
    for inst in replication.instances:
        sts = replication.statefulsets.get(inst.index)
        seen = replication.views.get(inst.index)
        pod = seen.pod if seen is not None else None
        members[inst.index] = rollout.Member(
            ready=rep.serving(pod), settled=sts is None or rollout.rolled_out(sts),
            unready_for=_unready_for(pod, now),
            running=inst.replicas > 0 and sts is not None and int((sts.get("spec") or {}).get("replicas", 1)) > 0)
    switching = replication.target is not None or rep.SWITCHOVER_ANNOTATION in db.metadata.annotations
    return View(rep.index_of(db.metadata.name, replication.primary) or 0, members, switching)


@dataclass(frozen=True, slots=True)
class Gated:
    """The writes of the children step after the gate, when to look again, and the OperatorUpdate condition."""

    actions: list[plan.Action]
    recheck_after: float | None = None
    condition: Condition | None = None


def _all_settled(db: SampleDB, observed: dict[plan.Key, Obj]) -> bool:
    return all(settled(sts) for (kind, sts_name), sts in observed.items()
               if kind == "StatefulSet" and rollout.instance_of(db.metadata.name, sts_name) is not None)


async def gate(ctx: Context, db: SampleDB, actions: list[plan.Action], observed: dict[plan.Key, Obj],
               seen: View | None) -> Gated:
    """`actions` with the restarts out of turn held back: an operator-made template change until its database's
    turn (ctx.rollout_slots), and with standbys every instance but the one whose turn it is
    (decide/replicas/rollout.py)."""
    name, ns = db.metadata.name, db.metadata.namespace or ""
    key = f"{ns}/{name}"
    pending = rollout.restarts(name, actions, observed)
    ours = operator_rollout.operator_made(name, db.metadata.generation, actions, observed, pending)
    hold: set[int] = set()
    if ours and not ctx.rollout_slots.admit(
            key, lambda k: ctx.cached("SampleDB", *k.split("/", 1)) is not None, ctx.clock.monotonic()):
        hold |= ours
    elif not ours and (not ctx.rollout_slots.rolling(key) or _all_settled(db, observed)):
        ctx.rollout_slots.release(key)  # (a database holding no slot only leaves the queue: no children read)
    rolling = ctx.rollout_slots.rolling(key)
    step = rollout.Rollout()
    if seen is not None and pending - hold:
        step = rollout.decide(rollout.RolloutInput(db=name, primary=seen.primary, members=seen.members,
                                                   pending=frozenset(pending - hold), switching=seen.switching))
    await _announce(ctx, db, seen, step)
    hold |= step.hold
    out = rollout.held(name, operator_rollout.stamped(name, db.spec.version, actions, observed, pending), observed,
                       frozenset(hold))
    condition = operator_rollout.condition(
        pending=bool(ours) or rolling, admitted=rolling, limit=ctx.rollout_slots.limit, db=name,
        others=[k for k in ctx.rollout_slots.holders() if k != key], generation=db.metadata.generation,
        previous=get_condition(db.status.conditions, ConditionType.OPERATOR_UPDATE.value))
    waits = bool(ours) and not rolling
    recheck = min((x for x in (step.recheck_after, rollout.RECHECK if waits or rolling else None) if x is not None),
                  default=None)
    return Gated(out, recheck, condition)


async def _announce(ctx: Context, db: SampleDB, seen: View | None, step: rollout.Rollout) -> None:
    """The step's Events, and the switchover annotation it asks for."""
    name, ns = db.metadata.name, db.metadata.namespace or ""
    for index in step.restart:
        role = "the primary" if seen is not None and index == seen.primary else "standby"
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
