"""Rolling restarts of a database with standbys: which instances take a new pod template in this pass.

A change of the pod template (a minor version's image, a parameter that needs a restart, the restart
annotation, a new operator's template) restarts each instance it reaches. Applied to every instance at once,
it stops the primary together with the standbys that could have taken over. Instead:
- the standbys first, one at a time: a standby takes the new template only while no instance is still rolling
  its pod to a template it was given (a standby that is not ready takes it at once: it serves nothing; an
  instance that is down without rolling, e.g. a pod no node takes, holds nothing back);
- then the primary, by a switchover to a ready standby already on the new template (the switchover
  annotation, carried out by decide/replicas/replication.py: the primary stops cleanly, the standby is promoted, the
  old primary returns as a standby; it is at 0 replicas meanwhile, and an instance without a pod is never
  held back, so it returns with the new template);
- with one instance, or when no standby can take over, the primary restarts in place.
An instance unready for PATIENCE seconds holds nothing back (a standby that cannot start must not stop the
roll forever). A change of PostgreSQL major is never held: decide/upgrades/upgrade.py moves the data, and the standbys
re-clone from the upgraded primary. While a failover or switchover runs, nothing restarts but the instance
without a pod.

A held instance keeps the template it runs; every other field of its StatefulSet is applied as usual (the
replicas that fence it above all). Planning again against the result of a pass converges: each pass
releases at most one running instance, and a released one is no longer pending.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sampledb_operator.decide import plan
from sampledb_operator.decide.labels import TEMPLATE_GENERATION_ANNOTATION, VERSION_ANNOTATION
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj

PATIENCE = 300.0  # seconds an unready instance holds a roll back
RECHECK = 10.0  # seconds between looks while a roll waits
# the StatefulSet's annotations that describe its pod template: a held template keeps them as they are
DESCRIBE_TEMPLATE = frozenset((VERSION_ANNOTATION, TEMPLATE_GENERATION_ANNOTATION))


@dataclass(frozen=True, slots=True)
class Member:
    """One instance as the caches show it."""

    ready: bool  # its pod runs and is Ready, not terminating
    settled: bool = True  # its StatefulSet has rolled its pod to its current template (a new pod ready on it)
    unready_for: float = 0.0  # seconds its pod has been unready (or missing)
    running: bool = True  # it has replicas now and keeps them after this pass


@dataclass(frozen=True, slots=True)
class RolloutInput:
    db: str
    primary: int
    members: Mapping[int, Member]
    pending: frozenset[int]  # instances whose template changes (a restart), changes of major left out
    switching: bool = False  # a failover or switchover runs


@dataclass(frozen=True, slots=True)
class Rollout:
    """The instances whose new template waits, the ones that take it now, and the switchover to ask for."""

    hold: frozenset[int] = frozenset()
    restart: tuple[int, ...] = ()  # running instances released in this pass (a rolling step each)
    switchover_to: str | None = None  # pod name: every standby is done, the primary goes last
    waiting: str | None = None  # what the held ones wait for
    recheck_after: float | None = None


def decide(inp: RolloutInput) -> Rollout:
    """The rolling step of this pass."""
    m = inp.members
    live = {i for i, member in m.items() if member.running}
    pending = inp.pending & live  # an instance without a pod takes its template at once
    if not pending or len(live) < 2:
        return Rollout()
    if inp.switching:
        return Rollout(hold=frozenset(pending), waiting="a failover or switchover runs", recheck_after=RECHECK)

    def busy(i: int) -> bool:  # rolling its pod to the template it was given
        return not m[i].settled and m[i].unready_for < PATIENCE

    standbys = sorted(live - {inp.primary})
    down = tuple(i for i in standbys if i in pending and not m[i].ready)
    if down:  # no standby serves anything while it is down: restarting it costs nothing
        return Rollout(hold=frozenset(pending - set(down)), restart=down, recheck_after=RECHECK)
    restarting = [i for i in sorted(live) if busy(i)]
    if restarting:
        return Rollout(hold=frozenset(pending), recheck_after=RECHECK,
                       waiting=f"{names.instance_pod_name(inp.db, restarting[0])} is not ready yet"
                       " (one instance restarts at a time)")
    first = next((i for i in standbys if i in pending), None)
    if first is not None:
        return Rollout(hold=frozenset(pending - {first}), restart=(first,), recheck_after=RECHECK)
    takers = [i for i in standbys if m[i].ready and m[i].settled]
    if takers:
        return Rollout(hold=frozenset(pending), switchover_to=names.instance_pod_name(inp.db, takers[0]),
                       recheck_after=RECHECK, waiting="a switchover, so that the primary restarts as a standby")
    return Rollout()  # no standby can take over: the primary restarts in place


def instance_of(db: str, statefulset: str) -> int | None:
    """The instance index of StatefulSet name `statefulset` of database `db`, or None."""
    return next((i for i in range(names.MAX_INSTANCES) if names.instance_statefulset_name(db, i) == statefulset),
                None)


def rolled_out(sts: Mapping[str, Any]) -> bool:
    """The StatefulSet's controller has seen its current generation and rolled its pods to that template (it moves
    its current revision to the update revision once the new pods are ready)."""
    status = sts.get("status") or {}
    return (int(status.get("observedGeneration") or 0) >= int((sts.get("metadata") or {}).get("generation") or 0)
            and status.get("currentRevision") == status.get("updateRevision"))


def keep_annotations(obj: Obj, have: Mapping[str, Any], keys: frozenset[str]) -> Obj:
    """`obj` (a new dict) with `have`'s metadata annotations of `keys`, and none of `keys` that `have` lacks."""
    meta = obj["metadata"]
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in keys}
    annotations.update({k: v for k, v in ((have.get("metadata") or {}).get("annotations") or {}).items() if k in keys})
    return {**obj, "metadata": {**meta, "annotations": annotations}}


def _template(sts: Mapping[str, Any]) -> Any:
    return (sts.get("spec") or {}).get("template")


def _major(sts: Mapping[str, Any]) -> str:
    version = str(((sts.get("metadata") or {}).get("annotations") or {}).get(VERSION_ANNOTATION) or "")
    return version.split(".", 1)[0]


def restarts(db: str, actions: list[plan.Action], observed: Mapping[plan.Key, Obj]) -> frozenset[int]:
    """The instances whose StatefulSet update in `actions` changes the pod template of an existing StatefulSet
    (a restart of its pod), a change of PostgreSQL major excepted."""
    out = set()
    for action in actions:
        have = observed.get(action.key)
        index = instance_of(db, action.key[1]) if action.key[0] == "StatefulSet" else None
        if have is None or index is None or _major(action.obj) != _major(have):
            continue
        if plan.first_difference(_template(action.obj), _template(have)) is not None \
                or plan.removed_from_template(action.obj, have) is not None:
            out.add(index)
    return frozenset(out)


def held(db: str, actions: list[plan.Action], observed: Mapping[plan.Key, Obj], hold: frozenset[int]) \
        -> list[plan.Action]:
    """`actions`, the StatefulSets of `hold` keeping the pod template they have and the annotations that describe
    it (DESCRIBE_TEMPLATE: status.currentVersion is read from one): an update left with nothing else to change
    is dropped."""
    out = []
    for action in actions:
        have = observed.get(action.key)
        index = instance_of(db, action.key[1]) if action.key[0] == "StatefulSet" else None
        if have is None or index not in hold:
            out.append(action)
            continue
        kept = keep_annotations({**action.obj, "spec": {**action.obj["spec"], "template": _template(have)}}, have,
                                DESCRIBE_TEMPLATE)
        reason = plan.drift(kept, have)
        if reason is not None:
            out.append(plan.Action(kept, f"{action.key[0]} {action.key[1]}: {reason}"))
    return out
